// Every key disc-train accepts, in one table: its section.name, kind, default and a one-line
// help. Adding a key means one line here. Keys scripts rely on: train.steps, train.seed,
// memory.cap, logging.metrics, checkpoint.dir, data.batch_size.
#pragma once

#include <string>
#include <vector>

namespace disc::apps {

enum class KeyKind { kInt, kFloat, kBool, kString, kChoice, kBytes, kStrings, kInts };

struct ConfigKey {
  std::string path;  // "train.steps"
  KeyKind kind;
  std::string default_value;  // as YAML text
  std::string help;
  std::vector<std::string> choices = {};  // for kChoice
  double min = -1e300, max = 1e300;       // for kInt, kFloat, kBytes
};

const std::vector<ConfigKey>& config_schema();

}  // namespace disc::apps
