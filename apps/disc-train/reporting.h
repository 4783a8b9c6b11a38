// What a run tells the world: one metrics JSON object per step (stable keys), a progress bar on
// a terminal or log lines otherwise, a Chrome trace (Perfetto-readable) of chosen steps, and an
// end-of-run summary.
#pragma once

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "apps/data/batcher.h"
#include "engine/trainer.h"

namespace disc::apps {

struct StepReport {
  engine::StepResult result;
  int64_t tokens = 0;          // real (unpadded) target tokens
  int64_t computed = 0;        // the positions the step computed: B * S padded, T packed
  int64_t batch = 0, seq = 0;  // sequences, and the longest
  bool packed = false;         // computed = the sequences' tokens, one stream
  double lr = 0;
  int64_t live_bytes = 0;           // held after the step: parameters, optimizer state
  std::optional<double> eval_loss;  // the held-out loss after the step, when one was measured

  // Counts a global batch the step trained on (each of its micro-batches, accumulating).
  void add_batch(const data::HostBatch& hb) {
    tokens += hb.real_tokens, computed += hb.computed(), batch += hb.batch;
    seq = std::max(seq, hb.seq), packed = hb.packed();
  }
};

// Appends one JSON object per step to a .jsonl file. A write that fails (a full disk) throws
// IoError with the path and the reason at once, and leaves no torn line behind.
class MetricsFile {
 public:
  // `keep_through_step` >= 0 (a resumed run) drops lines of later steps first, replacing the file
  // atomically (a temporary beside it, then rename); -1 truncates. `jit_buckets`: the config's
  // jit.buckets, for each step's "bucket" (its "shape" is exact).
  MetricsFile(const std::string& path, int64_t keep_through_step,
              std::vector<int64_t> jit_buckets = {});
  ~MetricsFile();
  MetricsFile(const MetricsFile&) = delete;
  MetricsFile& operator=(const MetricsFile&) = delete;
  // The record that starts a run (or a resumed part of one): {"event": "start", "time", ...`run`}.
  // Step records follow, each with its "time" (seconds since the Unix epoch).
  void write_start(const nlohmann::json& run);
  void write(const StepReport& r);

 private:
  void append(const std::string& line);
  std::string path_;
  std::vector<int64_t> buckets_;
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

// Collects node spans (a fused kernel named after the ops it runs), Evict/Regenerate spans (a
// second track), step and compile spans (a third) and live-byte counters against the cap of
// traced steps, and writes a Chrome trace with its tracks named.
class Trace {
 public:
  Trace(std::string path, std::vector<int64_t> steps);
  bool wants(int64_t step) const;
  // Observer for the trainer while step `step` runs; `offset_us` places the step on the timeline.
  // The live-bytes track shows `cap_bytes` beside them (0: no cap).
  engine::StepObserver observer(int64_t step, int64_t cap_bytes);
  // `step_us` the step's time, `compile_ms` the part of it spent compiling (before its first node).
  void end_step(int64_t step, double step_us, double compile_ms, int64_t compiles);
  // Replaces the file with every step traced so far (atomically); a no-op without a path.
  void write() const;

 private:
  std::string path_;
  std::vector<int64_t> steps_;
  double offset_us_ = 0;
  std::string events_;
  std::map<const ir::Node*, std::string> names_;  // span names of the nodes seen
  bool collectives_ = false;  // a data-parallel run's collectives were seen: their track
};

}  // namespace disc::apps
