// What a run will write, checked before it writes anything: every output can be written, is no
// input and no other output, and lies outside checkpoint.dir where it must.
#pragma once

#include <string>

#include "config.h"

namespace disc::apps {

// Refuses outputs (logging.metrics, logging.trace, checkpoint.dir, jit.cache_dir, export.dir)
// that cannot be written (a path under a regular file, a read-only folder: tried, not guessed
// from permission bits) and any output that is an input (config, data, graph) or another output.
// Leaves nothing behind.
void check_outputs(const Config& c);
// Refuses `path` (the value of `key`) inside checkpoint.dir, which the run's saves own.
void check_outside_checkpoints(const Config& c, const std::string& key, const std::string& path);

}  // namespace disc::apps
