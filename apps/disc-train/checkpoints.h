// Checkpoint folders under checkpoint.dir: step-00000100/ holds state.safetensors and
// trainer.json. Trainer::save writes a folder under a temporary sibling name and renames it into
// place, so a folder under its final name is complete unless the disk corrupted it; resume still
// checks each one (see run.cc) and falls back to an older one when the newest cannot be read.
//
// Only names this app writes are touched: `step-` and the step zero-padded to 8 digits (more
// digits only past 99,999,999), and Trainer::save's staging folders `.step-XXXXXXXX.partial`.
// Anything else in the folder is the user's and stays, and `.lock` (CheckpointLock).
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
// leftover staging folders of interrupted saves; never `protect` (the newest checkpoint known to
// be good: the one this run wrote last or resumed from), even when newer ones that may be damaged
// outnumber `keep`.
void prune_checkpoints(const std::string& dir, int64_t keep, const std::string& protect = "");

// An exclusive lock on a checkpoint folder for one run: DIR/.lock, flock'ed and holding the pid.
// Creates DIR. A second run on the same folder is refused (InvalidArgument) with the first one's
// pid; the lock goes with the process, however it ends.
class CheckpointLock {
 public:
  explicit CheckpointLock(const std::string& dir);
  ~CheckpointLock();
  CheckpointLock(const CheckpointLock&) = delete;
  CheckpointLock& operator=(const CheckpointLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace disc::apps
