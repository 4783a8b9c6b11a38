#include "reporting.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/bytes.h"
#include "base/error.h"
#include "base/write_fully.h"
#include "engine/step_names.h"
#include "ir/graph.h"

namespace disc::apps {
namespace {

double now_ms() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string shape_of(const ir::Bindings& b) {
  std::string s;
  for (const auto& [name, v] : b) s += (s.empty() ? "" : ",") + name + "=" + std::to_string(v);
  return s;
}

void ensure_parent(const std::string& path) {
  auto parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (ec)
    throw IoError("cannot create folder " + parent.string() + " for " + path + ": " + ec.message());
}

// Replaces `path` with `text` so that a reader or a crash sees the old file or the new one, never
// a truncated one: a temporary beside it, fsync, rename.
void replace_file(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw IoError("cannot create " + tmp + ": " + std::strerror(errno));
  int err = write_fully(fd, text.data(), text.size());
  if (err == 0 && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err == 0 && std::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    throw IoError("cannot rewrite " + path + ": " + std::strerror(err));
  }
}

}  // namespace

MetricsFile::MetricsFile(const std::string& path, int64_t keep_through_step,
                         std::vector<int64_t> jit_buckets)
    : path_(path), buckets_(std::move(jit_buckets)) {
  ensure_parent(path);
  std::error_code ec;
  int flags = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC;
  if (keep_through_step >= 0 && std::filesystem::exists(path, ec)) {
    std::ifstream in(path);
    if (!in) throw IoError("cannot read metrics file " + path + " to continue it");
    std::string kept;
    for (std::string line; std::getline(in, line);) {
      auto j = nlohmann::json::parse(line, nullptr, false);
      const bool start = j.is_object() && j.value("event", "") == "start";
      if (start || (j.is_object() && j.contains("step") && j["step"].is_number_integer() &&
                    j["step"].get<int64_t>() <= keep_through_step)) {
        kept += line + "\n";
      }
    }
    if (in.bad()) throw IoError("cannot read metrics file " + path + ": the read failed part way");
    replace_file(path, kept);
  } else {
    flags |= O_TRUNC;
  }
  fd_ = ::open(path.c_str(), flags, 0644);
  if (fd_ < 0) throw IoError("cannot write metrics file " + path + ": " + std::strerror(errno));
}

MetricsFile::~MetricsFile() {
  if (fd_ >= 0) ::close(fd_);
}

void MetricsFile::write(const StepReport& r) {
  const auto& s = r.result.stats;
  nlohmann::json j = {{"step", r.result.step},
                      {"loss", r.result.loss},
                      {"tokens", r.tokens},
                      {"positions", r.computed},
                      {"step_ms", s.ms},
                      {"tokens_per_s", s.ms > 0 ? r.tokens / (s.ms / 1e3) : 0.0},
                      {"live_peak_bytes", s.live_peak_bytes},
                      {"reserved_peak_bytes", s.reserved_peak_bytes},
                      {"planned_peak_bytes", s.planned_peak_bytes},
                      {"evictions", s.evictions},
                      {"recomputes", s.recomputes},
                      {"recompute_flops", s.recompute_flops},
                      {"reloads", s.reloads},
                      {"reload_bytes", s.reload_bytes},
                      {"compiles", s.kernel_compiles},
                      {"kernel_cache_loads", s.kernel_cache_loads},
                      {"compile_ms", s.compile_ms},
                      {"fused_kernels", s.fused_kernels},
                      {"interpreted_kernels", s.interpreted_kernels},
                      {"host_staged_nodes", s.host_staged_nodes},
                      {"staged_bytes", s.staged_bytes},
                      {"collective_ms", s.collective_ms},
                      {"collective_wait_ms", s.collective_wait_ms},
                      {"shape", shape_of(s.bindings)},
                      {"bucket", engine::bucket_of(s.bindings, buckets_)},
                      {"time", unix_seconds()},
                      {"lr", r.lr},
                      {"grad_norm", r.result.grad_norm},
                      {"loss_scale", r.result.loss_scale},
                      {"skipped", r.result.skipped},
                      {"batch", r.batch},
                      {"seq", r.seq}};
  if (r.eval_loss) j["eval_loss"] = *r.eval_loss;
  append(j.dump() + "\n");
}

void MetricsFile::write_start(const nlohmann::json& run) {
  nlohmann::json j = run;
  j["event"] = "start";
  j["time"] = unix_seconds();
  append(j.dump() + "\n");
}

// One write per line; a failed one takes back what it wrote, so no torn line stays behind.
void MetricsFile::append(const std::string& line) {
  const off_t before = ::lseek(fd_, 0, SEEK_END);
  size_t done = 0;
  if (int err = write_fully(fd_, line.data(), line.size(), -1, &done); err != 0) {
    // Best effort: the torn line goes; the error below is what the user must see.
    if (before >= 0 && done > 0) (void)!::ftruncate(fd_, before);
    throw IoError("cannot write metrics file " + path_ + ": " + std::strerror(err));
  }
}

Progress::Progress(const std::string& mode, int64_t total, int64_t every)
    : total_(total), every_(every), start_ms_(now_ms()) {
  bool tty = ::isatty(STDERR_FILENO);
  bar_ = mode == "bar" || (mode == "auto" && tty);
  quiet_ = mode == "none";
}

// " eval_loss 1.2345" when the step measured the held-out loss, else "".
static std::string eval_part(const StepReport& r) {
  return r.eval_loss ? fmt::format(" eval_loss {:.4f}", *r.eval_loss) : "";
}

void Progress::update(const StepReport& r) {
  if (first_step_ < 0) first_step_ = r.result.step, start_ms_ = now_ms() - r.result.stats.ms;
  const auto& s = r.result.stats;
  compiles_ += s.kernel_compiles;
  if (quiet_) return;
  double tps = s.ms > 0 ? r.tokens / (s.ms / 1e3) : 0;
  double elapsed = (now_ms() - start_ms_) / 1e3;
  double done = static_cast<double>(r.result.step - first_step_ + 1);
  double eta = elapsed / done * static_cast<double>(total_ - r.result.step);
  if (bar_) {
    int width = 24, filled = static_cast<int>(width * r.result.step / std::max<int64_t>(total_, 1));
    std::fprintf(
        stderr, "\r[%s%s] %lld/%lld loss %.4f %.0f tok/s live %s peak %s compiles %lld ETA %.0fs  ",
        std::string(filled, '#').c_str(), std::string(width - filled, '.').c_str(),
        static_cast<long long>(r.result.step), static_cast<long long>(total_), r.result.loss, tps,
        human_bytes(r.live_bytes).c_str(), human_bytes(s.live_peak_bytes).c_str(),
        static_cast<long long>(compiles_), eta);
    std::fflush(stderr);
  } else if (r.result.step % every_ == 0 || r.result.step == total_ || r.eval_loss) {
    // Packed steps: N examples in T positions; padded: B rows of S.
    const std::string shape = r.packed ? fmt::format("N={} T={}", r.batch, r.computed)
                                       : fmt::format("B={} S={}", r.batch, r.seq);
    spdlog::info("step {}/{} loss {:.4f}{} lr {:.2e} tokens/s {:.0f} peak {} {} ETA {:.0f}s",
                 r.result.step, total_, r.result.loss, eval_part(r), r.lr, tps,
                 human_bytes(s.live_peak_bytes), shape, eta);
    return;
  }
  // The bar redraws itself; a held-out loss gets a line of its own under it.
  if (r.eval_loss && bar_) {
    std::fprintf(stderr, "\n");
    spdlog::info("step {}/{}{}", r.result.step, total_, eval_part(r));
  }
}

void Progress::finish(const std::string& summary) {
  if (bar_) std::fprintf(stderr, "\n");
  spdlog::info("{}", summary);
}

Trace::Trace(std::string path, std::vector<int64_t> steps)
    : path_(std::move(path)), steps_(std::move(steps)) {}

bool Trace::wants(int64_t step) const {
  return !path_.empty() && std::find(steps_.begin(), steps_.end(), step) != steps_.end();
}

engine::StepObserver Trace::observer(int64_t step, int64_t cap_bytes) {
  return [this, step, cap_bytes](const engine::StepEvent& e) {
    using Kind = engine::StepEvent::Kind;
    nlohmann::json args = {{"step", step}};
    std::string name;
    collectives_ |= e.kind == Kind::kCollective;
    if (e.kind == Kind::kRun || e.kind == Kind::kCollective) {
      std::string results;
      for (const ir::Value* r : e.node->results())
        results += (results.empty() ? "%" : ", %") + r->name();
      auto [it, fresh] = names_.try_emplace(e.node);
      if (fresh) it->second = engine::span_name(*e.node);
      name = it->second, args["results"] = results;
    } else {
      name = e.kind == Kind::kEvict       ? "Evict"
             : e.kind == Kind::kRecompute ? "Regenerate (recompute)"
                                          : "Regenerate (reload)";
      args["value"] = "%" + e.value->name();
    }
    nlohmann::json span = {{"name", name},
                           {"ph", "X"},
                           {"ts", offset_us_ + e.begin_us},
                           {"dur", e.end_us - e.begin_us},
                           {"pid", 1},
                           {"tid", e.kind == Kind::kRun          ? 1
                                   : e.kind == Kind::kCollective ? 4
                                                                 : 2},
                           {"args", args}};
    nlohmann::json counter = {{"name", "memory"},
                              {"ph", "C"},
                              {"ts", offset_us_ + e.end_us},
                              {"pid", 1},
                              {"args", {{"live_bytes", e.live_bytes}}}};
    if (cap_bytes > 0) counter["args"]["cap_bytes"] = cap_bytes;
    events_ += (events_.empty() ? "" : ",\n") + span.dump() + ",\n" + counter.dump();
  };
}

void Trace::end_step(int64_t step, double step_us, double compile_ms, int64_t compiles) {
  nlohmann::json span = {{"name", "step " + std::to_string(step)},
                         {"ph", "X"},
                         {"ts", offset_us_},
                         {"dur", step_us},
                         {"pid", 1},
                         {"tid", 3}};
  events_ += (events_.empty() ? "" : ",\n") + span.dump();
  if (compiles > 0) {  // a step compiles its new kernels before its first node
    span["name"] = "compile " + std::to_string(compiles) + " kernels";
    span["dur"] = compile_ms * 1e3;
    events_ += ",\n" + span.dump();
  }
  offset_us_ += step_us + 1000;  // a gap between steps
}

void Trace::write() const {
  if (path_.empty()) return;
  ensure_parent(path_);
  std::string tracks;
  const char* names[] = {"nodes", "memory governor: evict, regenerate", "steps, compiles",
                         "collectives (on the communicator's thread)"};
  const int last = collectives_ ? 4 : 3;  // a data-parallel run's
  for (int tid = 1; tid <= last; ++tid) {
    tracks += nlohmann::json{{"name", "thread_name"},
                             {"ph", "M"},
                             {"pid", 1},
                             {"tid", tid},
                             {"args", {{"name", names[tid - 1]}}}}
                  .dump() +
              (tid < last ? ",\n" : "");
  }
  replace_file(path_, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n" + tracks +
                          (events_.empty() ? "" : ",\n" + events_) + "\n]}\n");
}

}  // namespace disc::apps
