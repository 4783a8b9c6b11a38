// What bench_memory and bench_step report alike about the Llama they train: the model in their
// setup line and in their --json workload, the spread of their timed steps, and their goals'
// verdicts. One home, so that the two benchmarks' lines and JSON keys cannot drift apart
// (tools/bench/bench_report.py reads both).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ir/models/model.h"

namespace disc::bench {

// "met" or "NOT MET": how a goal's line ends.
const char* verdict(bool met);

// "llama, 4 layers, hidden 512, 8 heads (8 kv), SwiGLU 1376, vocab 32000": the model as a setup
// line names it.
std::string llama_line(const ir::models::LlamaConfig& m);

// The model as a --json workload holds it: model ("llama"), layers, hidden, heads, kv_heads, ffn
// and vocab; each benchmark adds its own keys beside them.
nlohmann::json llama_json(const ir::models::LlamaConfig& m);

// Step times in ms over every timed step: the median, and the 10th and 90th percentiles, since
// steps differ in S and the machine is shared.
struct StepSpread {
  double median = 0, p10 = 0, p90 = 0;
};

StepSpread step_spread(const std::vector<double>& step_ms);

// The spread as a --json result holds it: step_ms_median, step_ms_p10, step_ms_p90.
nlohmann::json spread_json(const StepSpread& s);

}  // namespace disc::bench
