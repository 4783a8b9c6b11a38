// What a checkpoint records of the run that wrote it, so that --resume continues that run and not
// a different one: the config keys that change the numbers a step computes (model, data,
// optimizer, schedule, seed, kernels) and a fingerprint of the examples. A resume that changes
// one of them is no longer bit-exact and is refused with the key's old and new values; keys that
// only change how long the run goes or where it runs (train.steps, device.*, jit.buckets) get a
// warning; logging, checkpoint and memory keys may change freely (caps never change the numbers).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "config.h"

namespace disc::apps {

// The identity as checkpoint extra entries: "run.<key>" -> value, "run.examples" -> fingerprint.
std::map<std::string, std::string> run_identity(const Config& c,
                                                const std::vector<std::vector<int32_t>>& examples);

// Compares the identity in a checkpoint's extra with the current one. Throws InvalidArgument
// naming every key that must not change and did (unless `allow_changes`, then warns); warns for
// the harmless ones and for a checkpoint that recorded no identity.
void check_same_run(const std::map<std::string, std::string>& recorded,
                    const std::map<std::string, std::string>& now, const std::string& checkpoint,
                    bool allow_changes);

}  // namespace disc::apps
