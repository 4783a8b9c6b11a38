#include "llama_report.h"

#include <cstdio>

#include "timing.h"

namespace disc::bench {

const char* verdict(bool met) {
  return met ? "met" : "NOT MET";
}

std::string llama_line(const ir::models::LlamaConfig& m) {
  char buf[192];  // six 64-bit numbers and the words around them, never cut
  std::snprintf(buf, sizeof buf,
                "llama, %lld layers, hidden %lld, %lld heads (%lld kv), SwiGLU %lld, vocab %lld",
                static_cast<long long>(m.layers), static_cast<long long>(m.hidden),
                static_cast<long long>(m.heads), static_cast<long long>(m.kv_heads),
                static_cast<long long>(m.ffn), static_cast<long long>(m.vocab));
  return buf;
}

nlohmann::json llama_json(const ir::models::LlamaConfig& m) {
  return {{"model", "llama"},       {"layers", m.layers}, {"hidden", m.hidden}, {"heads", m.heads},
          {"kv_heads", m.kv_heads}, {"ffn", m.ffn},       {"vocab", m.vocab}};
}

StepSpread step_spread(const std::vector<double>& step_ms) {
  return {.median = percentile(step_ms, 0.5),
          .p10 = percentile(step_ms, 0.1),
          .p90 = percentile(step_ms, 0.9)};
}

nlohmann::json spread_json(const StepSpread& s) {
  return {{"step_ms_median", s.median}, {"step_ms_p10", s.p10}, {"step_ms_p90", s.p90}};
}

}  // namespace disc::bench
