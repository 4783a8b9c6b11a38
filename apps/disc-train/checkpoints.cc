#include "checkpoints.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "base/error.h"

namespace disc::apps {
namespace {

namespace fs = std::filesystem;

std::string folder_name(int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%08lld", static_cast<long long>(step));
  return name;
}

// Folders under `dir` whose names checkpoint_step accepts after dropping `prefix` and `suffix`,
// with their steps, in step order (a string sort would put step-100000000 before step-99999999).
std::vector<std::pair<int64_t, fs::path>> folders(const std::string& dir, const std::string& prefix,
                                                  const std::string& suffix) {
  std::vector<std::pair<int64_t, fs::path>> out;
  std::error_code ec;
  if (dir.empty() || !fs::is_directory(dir, ec)) return out;
  try {
    for (const auto& e : fs::directory_iterator(dir)) {
      std::string name = e.path().filename().string();
      if (name.size() <= prefix.size() + suffix.size() || name.rfind(prefix, 0) != 0 ||
          !name.ends_with(suffix) || !e.is_directory()) {
        continue;
      }
      if (auto step = checkpoint_step(
              name.substr(prefix.size(), name.size() - prefix.size() - suffix.size()))) {
        out.emplace_back(*step, e.path());
      }
    }
  } catch (const fs::filesystem_error& e) {
    throw IoError("cannot list checkpoint folder " + dir + ": " + e.code().message());
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool complete(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p / "trainer.json", ec) &&
         fs::is_regular_file(p / "state.safetensors", ec);
}

// Renamed out of the way, then deleted: a kill -9 mid-delete leaves a hidden folder the next
// prune removes, never a step-N/ with its trainer.json and no state.safetensors.
void remove_folder(const fs::path& p) {
  std::error_code ec;
  fs::path doomed = p;
  if (!p.filename().string().starts_with(".")) {  // a step-N/; hidden leftovers go as they are
    doomed = p.parent_path() / ("." + p.filename().string() + ".deleting");
    fs::rename(p, doomed, ec);
  }
  if (!ec) fs::remove_all(doomed, ec);
  if (ec) throw IoError("cannot delete old checkpoint " + p.string() + ": " + ec.message());
}

}  // namespace

std::string checkpoint_path(const std::string& dir, int64_t step) {
  return (fs::path(dir) / folder_name(step)).string();
}

std::optional<int64_t> checkpoint_step(const std::string& name) {
  if (name.rfind("step-", 0) != 0) return std::nullopt;
  int64_t step = -1;
  const char* first = name.data() + 5;
  const char* last = name.data() + name.size();
  auto [end, err] = std::from_chars(first, last, step);
  if (err != std::errc() || end != last || step < 0 || folder_name(step) != name)
    return std::nullopt;
  return step;
}

std::vector<std::string> checkpoint_folders(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& [step, p] : folders(dir, "", "")) out.push_back(p.string());
  return out;
}

std::vector<std::string> complete_checkpoints(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& [step, p] : folders(dir, "", "")) {
    if (complete(p)) out.push_back(p.string());
  }
  return out;
}

void prune_checkpoints(const std::string& dir, int64_t keep, const std::string& protect) {
  auto all = folders(dir, "", "");
  std::vector<int64_t> complete_steps;
  for (const auto& [step, p] : all) {
    if (complete(p)) complete_steps.push_back(step);
  }
  if (complete_steps.empty()) return;
  size_t n = complete_steps.size();
  int64_t oldest_kept =
      complete_steps[n > static_cast<size_t>(keep) ? n - static_cast<size_t>(keep) : 0];
  for (const auto& [step, p] : all) {
    std::error_code ec;
    if (step < oldest_kept && !(!protect.empty() && fs::equivalent(p, protect, ec)))
      remove_folder(p);
  }
  // A staging folder outlives its save only when the process died mid-save, a deleted one only
  // when it died mid-delete.
  for (const char* left : {".partial", ".deleting"})
    for (const auto& [step, p] : folders(dir, ".", left)) remove_folder(p);
}

CheckpointLock::CheckpointLock(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw IoError("cannot create checkpoint.dir " + dir + ": " + ec.message());
  const std::string path = (fs::path(dir) / ".lock").string();
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw IoError("cannot create " + path + ": " + std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    char pid[32] = {};
    ssize_t n = ::pread(fd_, pid, sizeof pid - 1, 0);
    ::close(fd_);
    if (err != EWOULDBLOCK) throw IoError("cannot lock " + path + ": " + std::strerror(err));
    std::string who = n > 0 ? std::string(pid, static_cast<size_t>(n)) : "";
    while (!who.empty() && (who.back() == '\n' || who.back() == ' ')) who.pop_back();
    throw InvalidArgument("checkpoint.dir " + dir + " is in use by another run (pid " +
                          (who.empty() ? "unknown" : who) +
                          "): wait for it to end, or choose another checkpoint.dir");
  }
  std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) < 0) {
    int err = errno;
    ::close(fd_);
    throw IoError("cannot write " + path + ": " + std::strerror(err));
  }
}

CheckpointLock::~CheckpointLock() {
  ::close(fd_);  // releases the lock; the file stays, a later run locks it again
}

}  // namespace disc::apps
