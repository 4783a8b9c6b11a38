#include "ir/suggest.h"

#include <algorithm>
#include <numeric>

namespace disc {

int edit_distance(std::string_view a, std::string_view b) {
  std::vector<int> row(b.size() + 1);
  std::iota(row.begin(), row.end(), 0);
  for (size_t i = 1; i <= a.size(); ++i) {
    int diag = row[0];
    row[0] = static_cast<int>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      int next = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1] ? 1 : 0)});
      diag = row[j];
      row[j] = next;
    }
  }
  return row[b.size()];
}

std::string nearest(std::string_view name, const std::vector<std::string>& candidates) {
  std::string best;
  int best_d = 0;
  for (const auto& c : candidates) {
    int d = edit_distance(name, c);
    if (best.empty() || d < best_d) best = c, best_d = d;
  }
  // A plausible typo changes at most about a third of the name.
  int limit = std::max<int>(2, static_cast<int>(name.size()) / 3);
  return best_d <= limit ? best : "";
}

std::string did_you_mean(std::string_view name, const std::vector<std::string>& candidates) {
  std::string n = nearest(name, candidates);
  return n.empty() ? "" : " (did you mean `" + n + "`?)";
}

}  // namespace disc
