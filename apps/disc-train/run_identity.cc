#include "run_identity.h"

#include <spdlog/spdlog.h>

#include "base/error.h"
#include "base/hash.h"
#include "config_schema.h"

namespace disc::apps {
namespace {

const std::string kPrefix = "run.";

enum class Change { kFree, kWarn, kRefuse };

// model.hf gives only the first step's weights and sizes: a resumed run takes the weights from
// its checkpoint, which refuses other sizes. Where the folder lives may change, as data.path may.
// How the ranks of a data-parallel run share their work (buckets, optimizer sharding) changes no
// number, nor do its timeout and traces, nor what the held-out loss is measured on (eval.*), nor
// clipping in one pass or two (the same steps bit for bit; memory.cap may choose it).
Change change_of(const std::string& key) {
  for (const char* free :
       {"logging.", "checkpoint.", "memory.", "jit.cache_dir", "data.path", "export.", "model.hf",
        "distributed.", "eval.", "optimizer.clip_passes"}) {
    if (key.rfind(free, 0) == 0) return Change::kFree;
  }
  for (const char* warn : {"train.steps", "device.", "jit.buckets", "model.max_batch"}) {
    if (key.rfind(warn, 0) == 0) return Change::kWarn;
  }
  return Change::kRefuse;
}

// A hash of every example's tokens, in order: the same data in another file is the same run.
std::string fingerprint(const std::vector<std::vector<int32_t>>& examples) {
  uint64_t h = 0;
  for (const auto& e : examples) {
    const std::string_view tokens(reinterpret_cast<const char*>(e.data()), e.size() * sizeof e[0]);
    h = (h ^ fnv1a(tokens)) * 0x100000001b3ull + e.size();
  }
  return std::to_string(examples.size()) + " examples, hash " + std::to_string(h);
}

}  // namespace

std::map<std::string, std::string> run_identity(const Config& c,
                                                const std::vector<std::vector<int32_t>>& examples) {
  std::map<std::string, std::string> out;
  for (const ConfigKey& k : config_schema()) {
    if (change_of(k.path) != Change::kFree) out[kPrefix + k.path] = c.canonical(k.path);
  }
  out[kPrefix + "examples"] = fingerprint(examples);
  return out;
}

void check_same_run(const std::map<std::string, std::string>& recorded,
                    const std::map<std::string, std::string>& now, const std::string& checkpoint,
                    bool allow_changes) {
  if (!recorded.contains(kPrefix + "examples")) {
    spdlog::warn(
        "checkpoint {} does not record its run's config (written by an older disc): "
        "cannot check that this run continues it",
        checkpoint);
    return;
  }
  std::string refused;
  for (const auto& [entry, value] : now) {
    auto it = recorded.find(entry);
    if (it == recorded.end() || it->second == value) continue;
    const std::string key = entry.substr(kPrefix.size());
    const std::string what = key == "examples"
                                 ? "the examples were " + it->second + ", are " + value
                                 : key + " was " + it->second + ", is " + value;
    if (key != "examples" && change_of(key) == Change::kWarn) {
      spdlog::warn("resuming {} with a change: {}", checkpoint, what);
    } else {
      refused += (refused.empty() ? "" : "; ") + what;
    }
  }
  if (refused.empty()) return;
  if (allow_changes) {
    spdlog::warn("resuming {} with changes (--allow-changes; not bit-exact): {}", checkpoint,
                 refused);
    return;
  }
  throw InvalidArgument("--resume would not continue the run in " + checkpoint + ": " + refused +
                        ". Set them back, or pass --allow-changes to continue anyway (the steps "
                        "will differ from an uninterrupted run), or start a fresh run");
}

}  // namespace disc::apps
