// bench_step's comparison of disc with its PyTorch peers (Debian's 1.13, and PyTorch 2 eager and
// torch.compile): the check that both sides train one model, the table with a row per system, the
// ratios with the goals' verdicts, and the same as --json.
//
//   Peers p;                                   // run_torch's rounds, merged
//   check_peer(*p.torch, tokens, unfused, fused);  // throws when they read or train differently
//   print_table(unfused, fused, &bf16, p);
//   print_ratios(unfused, fused, &bf16, p);    // "disc bf16 / torch.compile bf16: 1.31x (goal ..."
//   add_peers(j, unfused, fused, &bf16, p);    // j["torch"], j["torch2"], j["ratios"][...]
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "llama_report.h"
#include "torch_eager.h"

namespace disc::bench {

// What the table shows of a disc system.
struct Summary {
  double tokens_per_s = 0, slowest_tokens_per_s = 0;  // fastest and slowest timed pass
  StepSpread step_ms;                                 // over every timed step
  int64_t warm_compiles = 0, timed_compiles = 0, timed_cache_loads = 0;
  double first_loss = 0;
  int64_t tracked_peak_bytes = 0, peak_rss_bytes = 0;  // System's, over its memory pass
};

// The PyTorch peers' results over every round; nullptr where one did not run.
struct Peers {
  std::unique_ptr<TorchResult> torch, torch2;
  std::string torch2_skipped;  // why there is no torch2
};

// |a - b| / |b|.
double relative(double a, double b);

// Throws when a peer counted other real tokens per pass than disc's `tokens` (it read other
// batches), or when one of its f32 first-step losses (eager, checkpointed, torch.compile) is not
// disc's within 1e-4 relative (it trains another model). Prints the losses it compared.
void check_peer(const TorchResult& t, int64_t tokens, const Summary& unfused, const Summary& fused);

// A row per system (bf16 and the peers' where they ran), and what the columns mean.
void print_table(const Summary& unfused, const Summary& fused, const Summary* bf16, const Peers& p);

// disc's tokens/s over each system's, with each goal's verdict; a goal against PyTorch 2 that could
// not be measured says why.
void print_ratios(const Summary& unfused, const Summary& fused, const Summary* bf16,
                  const Peers& p);

nlohmann::json to_json(const Summary& s);

// The peers' results as j["torch"] and j["torch2"] (or j["torch2_skipped"]: why not), and disc's
// ratios to them in j["ratios"].
void add_peers(nlohmann::json& j, const Summary& unfused, const Summary& fused, const Summary* bf16,
               const Peers& p);

}  // namespace disc::bench
