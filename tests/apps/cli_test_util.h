// Running disc-train as a user would, from tests: a scratch folder, a config file, the command,
// its exit code and what it printed.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

namespace disc::apps::testing {

struct Result {
  int code = -1;
  std::string out;  // stdout and stderr together
};

inline Result run_command(const std::string& cmd) {
  Result r;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  std::array<char, 4096> buf;
  for (size_t n; (n = std::fread(buf.data(), 1, buf.size(), p)) > 0;) r.out.append(buf.data(), n);
  int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

class Scratch {
 public:
  Scratch() {
    dir_ = std::filesystem::temp_directory_path() /
           ("disc-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  ~Scratch() { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path(name)) << text;
    return path(name);
  }
  // Entries in the folder besides the files the test wrote itself.
  size_t entries() const {
    return static_cast<size_t>(std::distance(std::filesystem::directory_iterator(dir_),
                                             std::filesystem::directory_iterator()));
  }

 private:
  static int& counter() {
    static int c = 0;
    return c;
  }
  std::filesystem::path dir_;
};

// A metrics file's `key` (loss, grad_norm, ...) by step, exactly as written (the last line of a
// step wins).
inline std::map<int64_t, std::string> by_step(const std::string& metrics, const std::string& key) {
  std::map<int64_t, std::string> out;
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);
    if (!j.contains("step")) continue;  // a run's start record
    out[j["step"].get<int64_t>()] = j[key].dump();
  }
  return out;
}
inline std::map<int64_t, std::string> losses(const std::string& metrics) {
  return by_step(metrics, "loss");
}

// A one-layer llama on synthetic data that trains a step in milliseconds, checkpointing every 2
// steps (when a test names checkpoint.dir).
inline const char* kTinyCheckpointed = R"(model:
  hidden: 16
  layers: 1
  heads: 2
  kv_heads: 1
  ffn: 32
data:
  batch_size: 4
  synthetic:
    vocab: 16
    examples: 32
    min_len: 8
    max_len: 16
schedule:
  warmup_steps: 2
train:
  seed: 5
logging:
  progress: none
checkpoint:
  every: 2
  keep: 3
)";

// `disc-train run` with the config the test wrote as run.yaml in `s`, then `args`.
inline std::string run_with_config(const Scratch& s, const std::string& args) {
  return std::string(DISC_TRAIN) + " run --config " + s.path("run.yaml") + " " + args;
}

// Instruction records as JSON: "count from N" and the numbers after it, for n values of N from
// `from` (held-out ones from elsewhere).
inline std::string count_records(int n, int from) {
  nlohmann::json rows = nlohmann::json::array();
  for (int i = from; i < from + n; ++i) {
    std::string out;
    for (int k = 0; k < 3 + i % 9; ++k) out += (k ? " " : "") + std::to_string(i + k);
    rows.push_back(
        {{"instruction", "count from " + std::to_string(i)}, {"input", ""}, {"output", out}});
  }
  return rows.dump();
}

}  // namespace disc::apps::testing
