// Loading json, jsonl and plain-text datasets into byte-token examples (see text_dataset.h).
#include "apps/data/text_dataset.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>
#include <string_view>

#include "apps/data/byte_tokenizer.h"
#include "base/bytes.h"
#include "base/error.h"
#include "base/excerpt.h"

namespace disc::data {
namespace {

using Examples = std::vector<std::vector<int32_t>>;
using nlohmann::json;

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? sep : "") + parts[i];
  return out;
}

void validate(const TextFileSpec& s) {
  if (s.format != "json" && s.format != "jsonl" && s.format != "text") {
    throw InvalidArgument(s.path + ": format `" + s.format + "` is not one of json, jsonl, text");
  }
  if (s.max_len < 2) {
    throw InvalidArgument(s.path + ": max_len is " + std::to_string(s.max_len) +
                          "; it must be at least 2 (a token and the token it predicts)");
  }
  if (s.min_len < 2 || s.min_len > s.max_len) {
    throw InvalidArgument(s.path + ": min_len is " + std::to_string(s.min_len) +
                          "; it must be between 2 and max_len (" + std::to_string(s.max_len) + ")");
  }
  if (s.format != "text" && s.fields.empty()) {
    throw InvalidArgument(s.path +
                          ": fields is empty: name the JSON fields that make an example, e.g. "
                          "instruction, input, output");
  }
}

std::string read_file(const std::string& path) {
  std::error_code ec;
  auto status = std::filesystem::status(path, ec);  // a missing file fails to open below
  if (std::filesystem::is_directory(status))
    throw IoError("cannot read " + path + ": it is a directory, not a dataset file");
  // A device or a pipe (/dev/zero, /dev/stdin) may never end: read only what has a size.
  if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) {
    throw IoError("cannot read " + path +
                  ": it is not a regular file (a device, pipe or socket); name a dataset file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError("cannot open " + path + ": check the path");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw IoError("cannot read " + path + ": the read failed part way");
  return bytes;
}

// "a number", "an object", "null": what a message says it found.
std::string a_type(const json& j) {
  std::string t = j.type_name();
  if (t == "null") return t;
  return (t == "object" || t == "array" ? "an " : "a ") + t;
}

std::string expected_object(const TextFileSpec& s) {
  std::vector<std::string> fields;
  for (const std::string& f : s.fields) fields.push_back(excerpt(f));
  return "expected a JSON object with string fields " + join(fields, ", ");
}

std::string keys_of(const json& obj) {
  if (obj.empty()) return "it is empty";
  std::vector<std::string> keys;
  for (const auto& [k, v] : obj.items()) keys.push_back(excerpt(k));
  if (keys.size() > 6) keys.resize(6), keys.push_back("...");
  return "its keys: " + join(keys, ", ");
}

// Refuses a record larger than one example may be (see TextFileSpec::max_example_bytes).
void check_size(size_t bytes, const TextFileSpec& s, const std::string& where) {
  if (static_cast<int64_t>(bytes) <= s.max_example_bytes) return;
  throw InvalidArgument(where + " holds " + human_bytes(static_cast<int64_t>(bytes)) +
                        ", more than the " + human_bytes(s.max_example_bytes) +
                        " one example may hold: check that this is the dataset meant");
}

// The example's text: its non-empty string fields joined with "\n". `where` starts the message;
// a record that lacks some of the fields is counted in `notes`.
std::string example_text(const json& obj, const TextFileSpec& s, const std::string& where,
                         LoadNotes& notes) {
  auto fail = [&](const std::string& found) {
    throw InvalidArgument(where + ": " + expected_object(s) + "; " + found);
  };
  if (!obj.is_object()) fail("found " + a_type(obj));
  std::vector<std::string> parts, lacking;
  bool any = false;
  for (const std::string& f : s.fields) {
    auto it = obj.find(f);
    if (it == obj.end()) {
      lacking.push_back("`" + excerpt(f) + "`");
      continue;
    }
    any = true;
    if (!it->is_string()) fail("field `" + excerpt(f) + "` is " + a_type(*it));
    if (!it->get_ref<const std::string&>().empty()) parts.push_back(it->get<std::string>());
  }
  if (!any) fail("found an object with none of these fields (" + keys_of(obj) + ")");
  if (!lacking.empty() && notes.lacking_fields++ == 0)
    notes.first_lacking = where + " lacks " + join(lacking, ", ");
  std::string text = join(parts, "\n");
  check_size(text.size(), s, where);
  return text;
}

// Keeps the example's first max_len tokens, or drops it when it is shorter than min_len.
void keep(Examples& out, std::vector<int32_t> tokens, const TextFileSpec& s) {
  if (static_cast<int64_t>(tokens.size()) > s.max_len) tokens.resize(s.max_len);
  if (static_cast<int64_t>(tokens.size()) >= s.min_len) out.push_back(std::move(tokens));
}

char first_non_space(const std::string& text) {
  auto it = std::find_if(text.begin(), text.end(),
                         [](char c) { return !std::isspace(static_cast<unsigned char>(c)); });
  return it == text.end() ? '\0' : *it;
}

// "path:line:col" of the byte where nlohmann stopped (its `byte` counts from 1): the offending
// character, or the end of a token that cannot stand there. `text` starts on line `first_line`.
std::string position(const std::string& path, std::string_view text, size_t byte,
                     int64_t first_line) {
  std::string_view before = text.substr(0, byte > 0 ? byte - 1 : 0);
  int64_t line = first_line + std::count(before.begin(), before.end(), '\n');
  size_t nl = before.rfind('\n');
  size_t col = before.size() - (nl == std::string_view::npos ? 0 : nl + 1) + 1;
  return path + ":" + std::to_string(line) + ":" + std::to_string(col);
}

Examples load_json(const TextFileSpec& s, const std::string& bytes, LoadNotes& notes) {
  if (first_non_space(bytes) == '\0')
    throw InvalidArgument(s.path + ": expected a JSON list of objects; found an empty file");
  json doc;
  try {
    doc = json::parse(bytes);
  } catch (const json::parse_error& e) {
    std::string hint =
        first_non_space(bytes) == '{' ? " (one object per line? use format jsonl)" : "";
    throw InvalidArgument(position(s.path, bytes, e.byte, 1) +
                          ": expected a JSON list of objects; found text that is not JSON" + hint);
  }
  if (!doc.is_array())
    throw InvalidArgument(s.path + ": expected a JSON list of objects; found " + a_type(doc));
  Examples out;
  for (size_t i = 0; i < doc.size(); ++i) {
    std::string where = s.path + ": example [" + std::to_string(i) + "]";
    std::string text = example_text(doc[i], s, where, notes);
    keep(out, ByteTokenizer().encode(text, true, true), s);
  }
  return out;
}

Examples load_jsonl(const TextFileSpec& s, const std::string& bytes, LoadNotes& notes) {
  Examples out;
  std::istringstream in(bytes);
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();  // files written on Windows
    if (first_non_space(line) == '\0') continue;
    std::string where = s.path + ":" + std::to_string(n);
    check_size(line.size(), s, where);
    json obj;
    try {
      obj = json::parse(line);
    } catch (const json::parse_error& e) {
      std::string hint =
          n == 1 && first_non_space(line) == '[' ? " (a JSON list? use format json)" : "";
      throw InvalidArgument(position(s.path, line, e.byte, n) + ": " + expected_object(s) +
                            "; found text that is not JSON" + hint);
    }
    keep(out, ByteTokenizer().encode(example_text(obj, s, where, notes), true, true), s);
  }
  return out;
}

// Consecutive windows of max_len tokens: BOS, then the next max_len - 1 bytes of the file.
Examples load_text(const TextFileSpec& s, const std::string& bytes) {
  Examples out;
  size_t step = static_cast<size_t>(s.max_len - 1);
  for (size_t pos = 0; pos < bytes.size(); pos += step) {
    keep(out, ByteTokenizer().encode(std::string_view(bytes).substr(pos, step), true, false), s);
  }
  return out;
}

double quantile(const std::vector<int64_t>& sorted, double q) {
  double pos = q * static_cast<double>(sorted.size() - 1);
  size_t lo = static_cast<size_t>(pos);
  if (lo + 1 >= sorted.size()) return static_cast<double>(sorted.back());
  double frac = pos - static_cast<double>(lo);
  return static_cast<double>(sorted[lo]) + frac * static_cast<double>(sorted[lo + 1] - sorted[lo]);
}

}  // namespace

std::vector<std::vector<int32_t>> load_text_dataset(const TextFileSpec& spec, LoadNotes* notes) {
  validate(spec);
  std::string bytes = read_file(spec.path);
  LoadNotes ignored;
  LoadNotes& n = notes ? *notes : ignored;
  if (spec.format == "json") return load_json(spec, bytes, n);
  if (spec.format == "jsonl") return load_jsonl(spec, bytes, n);
  return load_text(spec, bytes);
}

LengthSummary summarize(const std::vector<std::vector<int32_t>>& examples) {
  LengthSummary s;
  if (examples.empty()) return s;
  std::vector<int64_t> lengths;
  for (const auto& e : examples) lengths.push_back(static_cast<int64_t>(e.size()));
  std::sort(lengths.begin(), lengths.end());
  s.count = static_cast<int64_t>(lengths.size());
  s.min = lengths.front();
  s.max = lengths.back();
  s.mean = static_cast<double>(std::accumulate(lengths.begin(), lengths.end(), int64_t{0})) /
           static_cast<double>(s.count);
  s.median = quantile(lengths, 0.5);
  s.p90 = quantile(lengths, 0.9);
  return s;
}

}  // namespace disc::data
