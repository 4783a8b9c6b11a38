// A disc-train run's configuration: YAML file, then `key=value` overrides, validated against the
// schema (config_schema.h). Every problem is one line that says where and how to fix it:
//   run.yaml:7:3: unknown key `train.step` (did you mean `train.steps`?)
//   override `memory.cap=lots`: memory.cap must be a byte size such as 2GiB or 512MiB, not `lots`
#pragma once

#include <yaml-cpp/yaml.h>

#include <map>
#include <string>
#include <vector>

namespace disc::apps {

class Config {
 public:
  // `file` may be empty (defaults only). Throws InvalidArgument (bad keys or values, a key or
  // section given twice, malformed YAML, a file with no keys) or IoError (unreadable file).
  static Config load(const std::string& file, const std::vector<std::string>& overrides);

  int64_t get_int(const std::string& key) const;
  double get_float(const std::string& key) const;
  bool get_bool(const std::string& key) const;
  std::string get_string(const std::string& key) const;
  std::vector<std::string> get_strings(const std::string& key) const;
  std::vector<int64_t> get_ints(const std::string& key) const;
  int64_t get_bytes(const std::string& key) const;
  // The value read as its schema's kind, in one spelling (3e-3 and 0.003 are the same learning
  // rate, a byte size is its count): what checks that compare configs compare.
  std::string canonical(const std::string& key) const;
  // Whether the key holds its schema's default (in canonical form: 16 and 16.0 are one value).
  bool at_default(const std::string& key) const;

  // Every key with its resolved value, as YAML that load() accepts.
  std::string to_yaml() const;
  // The file the config came from ("" for defaults only), for resolving relative paths.
  const std::string& file() const { return file_; }

 private:
  void set(const std::string& key, const YAML::Node& value, const std::string& where);
  using Seen = std::map<std::string, std::string>;  // key or section path -> where it was given
  void visit(const YAML::Node& node, const std::string& prefix, Seen& seen);
  const YAML::Node& value(const std::string& key) const;

  std::string file_;
  std::map<std::string, YAML::Node> values_;
};

// "2GiB" -> 2147483648; plain integers are bytes. Returns -1 when `text` is no byte size.
int64_t parse_bytes(const std::string& text);

}  // namespace disc::apps
