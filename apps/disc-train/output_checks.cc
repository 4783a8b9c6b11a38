#include "output_checks.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>
#include <vector>

#include "base/error.h"
#include "setup.h"

namespace disc::apps {
namespace {

// Tries what a run will do: open an existing file for writing (without changing it), or create a
// file in `folder` and remove it again. Permission bits alone do not say (root passes every access
// check; a read-only mount refuses everything). Returns errno, 0 when the write would work.
int probe_write(const std::string& file, const std::string& folder) {
  int fd = -1;
  std::string created;
  if (!file.empty()) {
    fd = ::open(file.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  } else {
    created = folder + "/.disc-write-probe-XXXXXX";
    fd = ::mkstemp(created.data());
  }
  if (fd < 0) return errno;
  ::close(fd);
  if (!created.empty()) ::unlink(created.c_str());
  return 0;
}

// Refuses an output path that cannot be written, leaving nothing behind: the path itself when it
// exists, else its nearest existing ancestor, which must be a folder a file can be created in.
void check_output(const std::string& key, const std::string& path, bool folder) {
  if (path.empty()) return;
  auto refuse = [&](const std::string& why) {
    throw InvalidArgument(key + " is " + path + ", which cannot be written: " + why +
                          "; choose another path");
  };
  namespace fs = std::filesystem;
  struct stat st{};
  if (::stat(path.c_str(), &st) == 0) {
    if (folder && !S_ISDIR(st.st_mode)) refuse("it exists and is not a folder");
    if (!folder && S_ISDIR(st.st_mode)) refuse("it is a folder; name a file");
    // Outputs are replaced by renaming a new file over them: never over a device or a pipe.
    if (!folder && !S_ISREG(st.st_mode)) refuse("it is not a regular file");
    int err = folder ? probe_write("", path) : probe_write(path, "");
    if (err == 0 && !folder)
      err = probe_write(
          "", fs::path(path).parent_path().empty() ? "." : fs::path(path).parent_path().string());
    if (err != 0) refuse(std::strerror(err));
    return;
  }
  fs::path ancestor = fs::path(path).lexically_normal();
  if (!ancestor.has_filename()) ancestor = ancestor.parent_path();
  do {
    ancestor = ancestor.parent_path();
    if (ancestor.empty()) ancestor = ".";
  } while (::stat(ancestor.c_str(), &st) != 0 && ancestor != "." &&
           ancestor != ancestor.root_path());
  if (::stat(ancestor.c_str(), &st) != 0)
    refuse(ancestor.string() + " cannot be read (" + std::strerror(errno) + ")");
  if (!S_ISDIR(st.st_mode)) refuse(ancestor.string() + " is a file, not a folder");
  if (int err = probe_write("", ancestor.string()); err != 0)
    refuse("nothing can be created in " + ancestor.string() + " (" + std::strerror(err) + ")");
}

// Refuses an output that is an input or another output: writing it would destroy the other.
void check_distinct(const Config& c) {
  namespace fs = std::filesystem;
  std::vector<std::pair<std::string, std::string>> paths = {
      {"the config file", c.file()},
      {"data.path", resolve_path(c, c.get_string("data.path"))},
      {"model.graph", resolve_path(c, c.get_string("model.graph"))},
      {"model.hf", resolve_path(c, c.get_string("model.hf"))},
      {"model.onnx", resolve_path(c, c.get_string("model.onnx"))},
      {"logging.metrics", c.get_string("logging.metrics")},
      {"logging.trace", c.get_string("logging.trace")},
      {"checkpoint.dir", c.get_string("checkpoint.dir")},
      {"jit.cache_dir", kernel_cache_dir(c)},
      {"export.dir", c.get_string("export.dir")}};
  if (const std::string m = c.get_string("logging.metrics"); !m.empty())
    paths.emplace_back("the memory report beside logging.metrics",
                       (fs::path(m).parent_path() / "memory.svg").string());
  const size_t inputs = 5;
  for (size_t i = inputs; i < paths.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      const auto& [out_key, out] = paths[i];
      const auto& [other_key, other] = paths[j];
      if (out.empty() || other.empty()) continue;
      std::error_code ec1, ec2;
      fs::path a = fs::weakly_canonical(out, ec1), b = fs::weakly_canonical(other, ec2);
      if (!ec1 && !ec2 && a == b) {
        throw InvalidArgument(out_key + " is " + out + ", which is also " + other_key +
                              ": writing it would destroy that; choose another path");
      }
    }
  }
}

}  // namespace

void check_outside_checkpoints(const Config& c, const std::string& key, const std::string& path) {
  namespace fs = std::filesystem;
  const std::string ckdir = c.get_string("checkpoint.dir");
  if (ckdir.empty() || path.empty()) return;
  auto full = [](const std::string& p) {  // absolute, links resolved, no trailing separator
    std::error_code ec;
    fs::path r = fs::weakly_canonical(fs::absolute(p), ec).lexically_normal();
    return r.has_filename() ? r : r.parent_path();
  };
  const fs::path inner = full(path), outer = full(ckdir);
  const auto [end, at] = std::mismatch(outer.begin(), outer.end(), inner.begin(), inner.end());
  if (end == outer.end())
    throw InvalidArgument(key + " is " + path + ", inside checkpoint.dir " + ckdir +
                          ", whose saves and prunes would meet a folder they do not own (a " +
                          "resume failed at its save and lost its steps): write it elsewhere");
}

void check_outputs(const Config& c) {
  if (const std::string dir = c.get_string("export.dir"); !dir.empty()) {
    check_outside_checkpoints(c, "export.dir", dir);
    if (!c.get_string("model.graph").empty() || c.get_string("model.family") != "llama")
      throw InvalidArgument("export.dir writes a Hugging Face llama: model.family must be llama");
    std::error_code ec;
    if (std::filesystem::exists(dir, ec) &&
        (!std::filesystem::is_directory(dir, ec) || !std::filesystem::is_empty(dir, ec)))
      throw InvalidArgument("export.dir is " + dir +
                            ", which exists and is not an empty folder: name a new folder");
    check_output("export.dir", dir, true);
  }
  check_output("logging.metrics", c.get_string("logging.metrics"), false);
  check_output("logging.trace", c.get_string("logging.trace"), false);
  check_output("checkpoint.dir", c.get_string("checkpoint.dir"), true);
  // `auto` is a cache, not an output the user asked for: where it cannot be written, runs compile.
  if (c.get_string("jit.cache_dir") != "auto")
    check_output("jit.cache_dir", kernel_cache_dir(c), true);
  check_distinct(c);
}

}  // namespace disc::apps
