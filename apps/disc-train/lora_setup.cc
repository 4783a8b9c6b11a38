#include "lora_setup.h"

#include <algorithm>

#include "base/error.h"
#include "formats/lora_adapter.h"
#include "setup.h"

namespace disc::apps {
namespace {

// Set while model.lora.rank is 0, a LoRA key would do nothing: refused rather than ignored.
void refuse_keys_without_rank(const Config& c) {
  for (const char* key : {"alpha", "dropout", "targets"}) {
    if (c.at_default(std::string("model.lora.") + key)) continue;
    throw InvalidArgument("model.lora." + std::string(key) + " is set but model.lora.rank is 0 " +
                          "(no LoRA): give a rank of 1 or more (8 or 16 are usual), or drop " +
                          "model.lora." + key);
  }
}

// model.lora.from's r, lora_alpha and target_modules, unless the config gives its own rank, which
// must then agree with them.
ir::models::LoraConfig from_adapter(const Config& c, const std::string& dir) {
  ir::models::LoraConfig l = formats::read_peft_config(dir);
  const int64_t rank = c.get_int("model.lora.rank");
  if (rank == 0) return l;
  auto sorted = [](std::vector<std::string> v) {
    std::sort(v.begin(), v.end());
    return v;
  };
  const std::vector<std::string> targets = c.get_strings("model.lora.targets");
  std::string key, mine, theirs;
  if (rank != l.rank) {
    key = "rank", mine = std::to_string(rank), theirs = "r " + std::to_string(l.rank);
  } else if (c.get_float("model.lora.alpha") != l.alpha) {
    key = "alpha", mine = c.canonical("model.lora.alpha"),
    theirs = "lora_alpha " + std::to_string(l.alpha);
  } else if (!targets.empty() && sorted(targets) != sorted(l.targets)) {
    key = "targets", mine = c.canonical("model.lora.targets"), theirs = "other target_modules";
  }
  if (!key.empty())
    throw InvalidArgument("model.lora." + key + " is " + mine + ", but the adapter in " + dir +
                          " has " + theirs + " (adapter_config.json): drop model.lora.rank, " +
                          "alpha and targets to take the adapter's");
  return l;
}

}  // namespace

bool lora_requested(const Config& c) {
  return c.get_int("model.lora.rank") > 0 || !c.get_string("model.lora.from").empty();
}

ir::models::LoraConfig lora_config(const Config& c, DType source) {
  if (!lora_requested(c)) {
    refuse_keys_without_rank(c);
    return {};
  }
  const std::string from = c.get_string("model.lora.from");
  ir::models::LoraConfig l;
  if (from.empty()) {
    l.rank = c.get_int("model.lora.rank");
    l.alpha = c.get_float("model.lora.alpha");
    l.targets = c.get_strings("model.lora.targets");
    try {
      ir::models::lora_targets(l);  // refuses a name that is no projection
    } catch (const InvalidArgument& e) {
      throw InvalidArgument("model.lora.targets: " + std::string(e.what()));
    }
  } else {
    l = from_adapter(c, resolve_path(c, from));
  }
  l.dropout = c.get_float("model.lora.dropout");
  const DType precision = parse_dtype(c.get_string("train.precision")).value_or(DType::kF32);
  l.base = is_half_float(source) ? source : is_half_float(precision) ? precision : DType::kBF16;
  return l;
}

}  // namespace disc::apps
