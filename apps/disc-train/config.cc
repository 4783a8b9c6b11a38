#include "config.h"

#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/error.h"
#include "base/excerpt.h"
#include "config_schema.h"
#include "ir/suggest.h"

namespace disc::apps {
namespace {

const ConfigKey* find_key(const std::string& path) {
  for (const auto& k : config_schema()) {
    if (k.path == path) return &k;
  }
  return nullptr;
}

bool is_section(const std::string& prefix) {
  for (const auto& k : config_schema()) {
    if (k.path.rfind(prefix + ".", 0) == 0) return true;
  }
  return false;
}

std::vector<std::string> all_paths() {
  std::vector<std::string> out;
  for (const auto& k : config_schema()) out.push_back(k.path);
  return out;
}

std::string at(const std::string& file, const YAML::Mark& m) {
  return (file.empty() ? "<config>" : file) + ":" + std::to_string(m.line + 1) + ":" +
         std::to_string(m.column + 1);
}

// Checks `v` against `k`; returns a problem ("must be ...") or "".
std::string check_value(const ConfigKey& k, const YAML::Node& v) {
  auto scalar = v.IsScalar() ? excerpt(v.Scalar()) : std::string();
  auto range = [&](double x) -> std::string {
    if (x < k.min || x > k.max) {
      return "must be in [" + YAML::Dump(YAML::Node(k.min)) + ", " + YAML::Dump(YAML::Node(k.max)) +
             "], not " + scalar;
    }
    return "";
  };
  try {
    switch (k.kind) {
      case KeyKind::kInt: {
        if (!v.IsScalar()) return "must be an integer";
        int64_t x = v.as<int64_t>();
        return range(static_cast<double>(x));
      }
      case KeyKind::kFloat: {
        if (!v.IsScalar()) return "must be a number";
        double x = v.as<double>();
        return std::isfinite(x) ? range(x) : "must be a finite number";
      }
      case KeyKind::kBool:
        if (!v.IsScalar()) return "must be true or false";
        v.as<bool>();
        return "";
      case KeyKind::kString:
        return v.IsScalar() || v.IsNull() ? "" : "must be a string";
      case KeyKind::kChoice: {
        for (const auto& c : k.choices) {
          if (v.IsScalar() && v.Scalar() == c) return "";
        }
        std::string list;
        for (const auto& c : k.choices) list += (list.empty() ? "" : ", ") + c;
        return "must be one of " + list + ", not `" + scalar + "`" +
               did_you_mean(scalar, k.choices);
      }
      case KeyKind::kBytes: {
        int64_t b = v.IsScalar() ? parse_bytes(v.Scalar()) : -1;
        return b < 0 ? "must be a byte size such as 2GiB or 512MiB, not `" + scalar + "`"
                     : range(static_cast<double>(b));
      }
      case KeyKind::kStrings:
        if (!v.IsSequence()) return "must be a list of strings, e.g. [a, b]";
        for (const auto& e : v) {
          if (!e.IsScalar()) return "must be a list of strings";
        }
        return "";
      case KeyKind::kInts:
        if (!v.IsSequence()) return "must be a list of integers, e.g. [1, 2]";
        for (const auto& e : v) e.as<int64_t>();
        return "";
    }
  } catch (const YAML::Exception&) {
    static const char* names[] = {"an integer",        "a number",          "true or false",
                                  "a string",          "a choice",          "a byte size",
                                  "a list of strings", "a list of integers"};
    return std::string("must be ") + names[static_cast<int>(k.kind)] + ", not `" +
           (v.IsScalar() ? scalar : excerpt(YAML::Dump(v))) + "`";
  }
  return "";
}

}  // namespace

int64_t parse_bytes(const std::string& text) {
  static const std::vector<std::pair<std::string, double>> units = {
      {"KiB", 1024.0},
      {"MiB", 1024.0 * 1024},
      {"GiB", 1024.0 * 1024 * 1024},
      {"TiB", 1024.0 * 1024 * 1024 * 1024},
      {"KB", 1e3},
      {"MB", 1e6},
      {"GB", 1e9},
      {"TB", 1e12},
      {"B", 1}};
  size_t used = 0;
  double number = 0;
  try {
    number = std::stod(text, &used);
  } catch (const std::exception&) {
    return -1;
  }
  std::string unit = text.substr(used);
  while (!unit.empty() && unit.front() == ' ') unit.erase(0, 1);
  double scale = unit.empty() ? 1 : 0;
  for (const auto& [u, s] : units) {
    if (unit == u) scale = s;
  }
  if (scale == 0 || number < 0 || !std::isfinite(number) || number * scale > 9e18) return -1;
  return static_cast<int64_t>(std::llround(number * scale));
}

void Config::set(const std::string& key, const YAML::Node& v, const std::string& where) {
  const ConfigKey* k = find_key(key);
  if (!k) {
    throw InvalidArgument(where + ": unknown key `" + excerpt(key) + "`" +
                          did_you_mean(excerpt(key), all_paths()) +
                          "; `disc-train print-config` lists every key");
  }
  if (std::string problem = check_value(*k, v); !problem.empty()) {
    throw InvalidArgument(where + ": " + key + " " + problem);
  }
  values_[key] = YAML::Clone(v);
}

void Config::visit(const YAML::Node& node, const std::string& prefix, Seen& seen) {
  for (const auto& item : node) {
    std::string where = at(file_, item.first.Mark());
    if (!item.first.IsScalar() || item.first.Scalar().empty()) {
      std::string in = prefix.empty() ? "at the top level" : "in section `" + prefix + "`";
      throw InvalidArgument(where + ": a key " + in +
                            " is null, empty or a collection, not a name; write `name: value`");
    }
    std::string name = item.first.Scalar();
    std::string path = prefix.empty() ? name : prefix + "." + name;
    // YAML keeps both of two equal keys and yaml-cpp hands both over: one would silently win, or
    // two sections would silently merge.
    if (auto [first, fresh] = seen.emplace(path, where); !fresh) {
      throw InvalidArgument(where + ": `" + excerpt(path) + "` is given twice (first at " +
                            first->second + "): keep one");
    }
    if (is_section(path) && !find_key(path)) {
      if (!item.second.IsMap())
        throw InvalidArgument(where + ": `" + path + "` is a section and must hold keys");
      visit(item.second, path, seen);
      continue;
    }
    set(path, item.second, where);
  }
}

Config Config::load(const std::string& file, const std::vector<std::string>& overrides) {
  Config c;
  c.file_ = file;
  for (const auto& k : config_schema()) c.values_[k.path] = YAML::Load(k.default_value);
  if (!file.empty()) {
    std::error_code ec;
    if (std::filesystem::is_directory(file, ec)) {
      throw IoError("config file " + file + " is a directory: pass a YAML file, e.g. --config " +
                    (std::filesystem::path(file) / "run.yaml").string());
    }
    std::ifstream in(file);
    if (!in) throw IoError("cannot open config file " + file + ": check the path");
    YAML::Node root;
    try {
      root = YAML::Load(in);
    } catch (const YAML::ParserException& e) {
      throw InvalidArgument(at(file, e.mark) + ": malformed YAML: " + e.msg);
    } catch (const YAML::Exception& e) {
      throw IoError("cannot read config file " + file + ": " + e.msg);
    }
    if (in.bad()) throw IoError("cannot read config file " + file + ": the read failed part way");
    // An empty file is more often a mistake (a wrong path, a file not yet written) than a wish
    // for every default, which leaving out --config asks for plainly.
    if (root.IsNull()) {
      throw InvalidArgument(
          file +
          ": the config file holds no keys; write the sections to set (model:, "
          "data:, train:, ...), or leave out --config to train with the defaults");
    }
    if (!root.IsMap())
      throw InvalidArgument(file +
                            ": the config must be a map of sections (model:, data:, train:, ...)");
    Seen seen;
    c.visit(root, "", seen);
  }
  for (const auto& o : overrides) {
    size_t eq = o.find('=');
    std::string where = "override `" + excerpt(o) + "`";
    if (eq == std::string::npos || eq == 0)
      throw InvalidArgument(where + ": write overrides as key=value, e.g. train.steps=100");
    YAML::Node v;
    try {
      v = YAML::Load(o.substr(eq + 1));
    } catch (const YAML::ParserException& e) {
      throw InvalidArgument(where + ": the value is not valid YAML: " + e.msg);
    }
    c.set(o.substr(0, eq), v, where);
  }
  return c;
}

const YAML::Node& Config::value(const std::string& key) const {
  auto it = values_.find(key);
  if (it == values_.end()) throw InvalidArgument("internal: no config key " + key);
  return it->second;
}

int64_t Config::get_int(const std::string& key) const {
  return value(key).as<int64_t>();
}
double Config::get_float(const std::string& key) const {
  return value(key).as<double>();
}
bool Config::get_bool(const std::string& key) const {
  return value(key).as<bool>();
}
std::string Config::get_string(const std::string& key) const {
  return value(key).IsNull() ? "" : value(key).as<std::string>();
}
std::vector<std::string> Config::get_strings(const std::string& key) const {
  return value(key).as<std::vector<std::string>>();
}
std::vector<int64_t> Config::get_ints(const std::string& key) const {
  return value(key).as<std::vector<int64_t>>();
}
int64_t Config::get_bytes(const std::string& key) const {
  return parse_bytes(value(key).as<std::string>());
}

std::string Config::to_yaml() const {
  std::string out, section;
  for (const auto& k : config_schema()) {
    size_t dot = k.path.rfind('.');
    std::string sec = k.path.substr(0, dot), name = k.path.substr(dot + 1);
    if (sec != section) {
      // Print each section level that changed ("data:" then "  synthetic:").
      size_t depth = 0, pos = 0;
      while ((pos = sec.find('.', pos)) != std::string::npos) ++depth, ++pos;
      std::string parent = depth ? sec.substr(0, sec.rfind('.')) : "";
      if (depth == 0 || section.rfind(parent, 0) != 0) out += sec.substr(0, sec.find('.')) + ":\n";
      if (depth == 1) out += "  " + sec.substr(sec.find('.') + 1) + ":\n";
      section = sec;
    }
    std::string indent(2 * (1 + std::count(sec.begin(), sec.end(), '.')), ' ');
    YAML::Emitter e;
    e << YAML::Flow << value(k.path);
    out += indent + name + ": " + e.c_str() + "  # " + k.help + "\n";
  }
  return out;
}

bool Config::at_default(const std::string& key) const {
  static const Config defaults = load("", {});
  return canonical(key) == defaults.canonical(key);
}

std::string Config::canonical(const std::string& key) const {
  const ConfigKey* found = find_key(key);
  if (found == nullptr) throw InvalidArgument("internal: no config key " + key);
  const ConfigKey& k = *found;
  const Config& c = *this;
  std::ostringstream out;
  switch (k.kind) {
    case KeyKind::kInt:
      out << c.get_int(k.path);
      break;
    case KeyKind::kFloat: {  // the shortest text that reads back as the same double
      char buf[32];
      auto [end, err] = std::to_chars(buf, buf + sizeof buf, c.get_float(k.path));
      out << std::string(buf, end);
      break;
    }
    case KeyKind::kBool:
      out << (c.get_bool(k.path) ? "true" : "false");
      break;
    case KeyKind::kBytes:
      out << c.get_bytes(k.path);
      break;
    case KeyKind::kStrings:
      for (const std::string& s : c.get_strings(k.path)) out << s << ",";
      break;
    case KeyKind::kInts:
      for (int64_t v : c.get_ints(k.path)) out << v << ",";
      break;
    default:
      out << c.get_string(k.path);
  }
  return out.str();
}

}  // namespace disc::apps
