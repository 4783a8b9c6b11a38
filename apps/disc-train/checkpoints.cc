#include "checkpoints.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

namespace disc::apps {

namespace fs = std::filesystem;

std::string checkpoint_path(const std::string& dir, int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%08lld", static_cast<long long>(step));
  return (fs::path(dir) / name).string();
}

static std::vector<fs::path> step_folders(const std::string& dir) {
  std::vector<fs::path> out;
  if (!fs::is_directory(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_directory() && e.path().filename().string().rfind("step-", 0) == 0) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());  // zero-padded step numbers sort in step order
  return out;
}

std::vector<std::string> complete_checkpoints(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& p : step_folders(dir)) {
    if (fs::exists(p / "trainer.json") && fs::exists(p / "state.safetensors")) out.push_back(p.string());
  }
  return out;
}

std::optional<std::string> latest_checkpoint(const std::string& dir) {
  auto all = complete_checkpoints(dir);
  if (all.empty()) return std::nullopt;
  return all.back();
}

void prune_checkpoints(const std::string& dir, int64_t keep) {
  auto complete = complete_checkpoints(dir);
  if (complete.empty()) return;
  std::string oldest_kept = complete.size() > static_cast<size_t>(keep) ? complete[complete.size() - keep] : complete.front();
  for (const auto& p : step_folders(dir)) {
    if (p.string() < oldest_kept) fs::remove_all(p);
  }
}

}  // namespace disc::apps
