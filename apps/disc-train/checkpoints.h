// Checkpoint folders under checkpoint.dir: step-00000100/ holds state.safetensors and
// trainer.json. Trainer::save writes a folder under a temporary sibling name and renames it into
// place, so a folder under its final name is complete unless the disk corrupted it; resume still
// checks each one (see run.cc) and falls back to an older one when the newest cannot be read.
//
// Only names this app writes are touched: `step-` and the step zero-padded to 8 digits (more
// digits only past 99,999,999), and Trainer::save's staging folders `.step-XXXXXXXX.partial`.
// Anything else in the folder is the user's and stays.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace disc::apps {

std::string checkpoint_path(const std::string& dir, int64_t step);
// The step of a folder named exactly as checkpoint_path names it, else nullopt.
std::optional<int64_t> checkpoint_step(const std::string& folder_name);
// Every checkpoint folder (complete or not), oldest first. Throws IoError when `dir` cannot be
// listed.
std::vector<std::string> checkpoint_folders(const std::string& dir);
// Checkpoint folders that hold both files, oldest first.
std::vector<std::string> complete_checkpoints(const std::string& dir);
// Deletes all but the newest `keep` complete checkpoints, incomplete ones older than those, and
// leftover staging folders of interrupted saves.
void prune_checkpoints(const std::string& dir, int64_t keep);

}  // namespace disc::apps
