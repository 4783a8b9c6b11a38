#include "engine/memory_report.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "base/bytes.h"
#include "base/error.h"
#include "ir/binding.h"

namespace disc::engine {
namespace {

constexpr double kWidth = 960, kHeight = 420, kLeft = 80, kRight = 20, kTop = 50, kBottom = 40;

struct Frame {
  size_t steps;
  double top_bytes;
  double x(size_t i) const {
    return kLeft +
           (kWidth - kLeft - kRight) * static_cast<double>(i) / std::max<size_t>(steps - 1, 1);
  }
  double y(double bytes) const {
    return kHeight - kBottom - (kHeight - kTop - kBottom) * bytes / top_bytes;
  }
};

std::string polyline(const Frame& f, const std::vector<int64_t>& curve, const std::string& color) {
  std::ostringstream os;
  os << "<polyline fill='none' stroke='" << color << "' stroke-width='1.5' points='";
  for (size_t i = 0; i < curve.size(); ++i)
    os << f.x(i) << "," << f.y(static_cast<double>(curve[i])) << " ";
  os << "'/>\n";
  return os.str();
}

std::string level(const Frame& f, int64_t bytes, const std::string& color,
                  const std::string& label) {
  std::ostringstream os;
  os << "<line x1='" << kLeft << "' x2='" << kWidth - kRight << "' y1='"
     << f.y(static_cast<double>(bytes)) << "' y2='" << f.y(static_cast<double>(bytes))
     << "' stroke='" << color << "' stroke-dasharray='6,4'/>\n"
     << "<text x='" << kWidth - kRight << "' y='" << f.y(static_cast<double>(bytes)) - 4
     << "' text-anchor='end' fill='" << color << "'>" << label << " " << human_bytes(bytes)
     << "</text>\n";
  return os.str();
}

}  // namespace

void write_memory_report(const std::string& path, const ir::Graph& g, memory::Governor& gov,
                         const ir::Bindings& b, int64_t held_before_step) {
  const memory::MemoryPlan& plan = gov.plan(b, held_before_step);
  std::vector<int64_t> unplanned = memory::live_curve(gov.liveness(), b);
  for (int64_t& v : unplanned) v += held_before_step;
  if (unplanned.empty()) return;
  const int64_t cap = gov.options().cap;
  Frame f{unplanned.size(),
          1.1 * static_cast<double>(std::max({plan.unplanned_peak, cap, plan.peak}))};
  std::ostringstream os;
  os << "<svg xmlns='http://www.w3.org/2000/svg' width='" << kWidth << "' height='" << kHeight
     << "' font-family='sans-serif' font-size='12'>\n<rect width='100%' height='100%' "
        "fill='white'/>\n"
     << "<text x='" << kLeft << "' y='20' font-size='15'>Bytes held during one step of " << g.name()
     << " (" << ir::describe_bindings(g, b) << "): " << plan.evictions.size() << " evictions, peak "
     << human_bytes(plan.unplanned_peak) << " &#8594; " << human_bytes(plan.peak) << "</text>\n"
     << "<text x='" << kLeft
     << "' y='38' fill='#888'>grey: without evictions; blue: as planned (regeneration "
     << "temporaries not drawn); x: the " << unplanned.size()
     << " nodes in execution order</text>\n"
     << "<line x1='" << kLeft << "' x2='" << kLeft << "' y1='" << kTop << "' y2='"
     << kHeight - kBottom << "' stroke='black'/>\n"
     << "<line x1='" << kLeft << "' x2='" << kWidth - kRight << "' y1='" << kHeight - kBottom
     << "' y2='" << kHeight - kBottom << "' stroke='black'/>\n"
     << "<text x='" << kLeft - 6 << "' y='" << f.y(0) << "' text-anchor='end'>0</text>\n"
     << "<text x='" << kLeft - 6 << "' y='" << f.y(static_cast<double>(plan.unplanned_peak))
     << "' text-anchor='end'>" << human_bytes(plan.unplanned_peak) << "</text>\n"
     << polyline(f, unplanned, "#aaa") << polyline(f, plan.curve, "#1f5fbf")
     << level(f, gov.lower_bound(b, held_before_step), "#d08000", "lower bound")
     << level(f, held_before_step, "#666", "held before the step");
  if (cap > 0) os << level(f, cap, "#c00000", "cap");
  os << "</svg>\n";
  std::ofstream out(path, std::ios::trunc);
  out << os.str();
  if (!out) throw IoError("cannot write the memory report " + path);
}

}  // namespace disc::engine
