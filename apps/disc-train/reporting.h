// What a run tells the world: one metrics JSON object per step (stable keys), a progress bar on
// a terminal or log lines otherwise, a Chrome trace (Perfetto-readable) of chosen steps, and an
// end-of-run summary.
#pragma once

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "engine/trainer.h"

namespace disc::apps {

struct StepReport {
  engine::StepResult result;
  int64_t tokens = 0;  // real (unpadded) target tokens
  int64_t batch = 0, seq = 0;
  double lr = 0;
  int64_t live_bytes = 0;  // held after the step: parameters, optimizer state
};

// Appends one JSON object per step to a .jsonl file. A write that fails (a full disk) throws
// IoError with the path and the reason at once, and leaves no torn line behind.
class MetricsFile {
 public:
  // `keep_through_step` >= 0 (a resumed run) drops lines of later steps first, replacing the file
  // atomically (a temporary beside it, then rename); -1 truncates.
  MetricsFile(const std::string& path, int64_t keep_through_step);
  ~MetricsFile();
  MetricsFile(const MetricsFile&) = delete;
  MetricsFile& operator=(const MetricsFile&) = delete;
  void write(const StepReport& r);

 private:
  std::string path_;
  int fd_ = -1;
};

// A progress bar on a terminal, log lines every `every` steps otherwise.
class Progress {
 public:
  Progress(const std::string& mode, int64_t total, int64_t every);
  void update(const StepReport& r);
  void finish(const std::string& summary);

 private:
  bool bar_ = false, quiet_ = false;
  int64_t total_, every_;
  int64_t compiles_ = 0;  // JIT kernels compiled so far
  double start_ms_;
  int64_t first_step_ = -1;
};

// Collects node spans, Evict/Regenerate spans (a second track) and live-byte counters against the
// cap of traced steps, and writes a Chrome trace.
class Trace {
 public:
  Trace(std::string path, std::vector<int64_t> steps, int64_t cap_bytes);
  bool wants(int64_t step) const;
  // Observer for the trainer while step `step` runs; `offset_us` places the step on the timeline.
  engine::StepObserver observer(int64_t step);
  void end_step(double step_us);
  // Replaces the file with every step traced so far (atomically); a no-op without a path.
  void write() const;

 private:
  std::string path_;
  std::vector<int64_t> steps_;
  int64_t cap_;
  double offset_us_ = 0;
  std::string events_;
};

}  // namespace disc::apps
