// Checkpoint folders under checkpoint.dir: step-00000100/ holds state.safetensors and
// trainer.json (written last, so a folder without it is incomplete and ignored).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace disc::apps {

std::string checkpoint_path(const std::string& dir, int64_t step);
// Complete checkpoints, oldest first.
std::vector<std::string> complete_checkpoints(const std::string& dir);
std::optional<std::string> latest_checkpoint(const std::string& dir);
// Deletes all but the newest `keep` complete checkpoints, and incomplete ones older than those.
void prune_checkpoints(const std::string& dir, int64_t keep);

}  // namespace disc::apps
