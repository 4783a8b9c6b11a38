// Loading json, jsonl and plain-text datasets into token examples, and instruction templates
// (see text_dataset.h).
#include "apps/data/text_dataset.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <sstream>
#include <string_view>

#include "apps/data/byte_tokenizer.h"
#include "base/bytes.h"
#include "base/error.h"
#include "base/excerpt.h"

namespace disc::data {
namespace {

using nlohmann::json;

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? sep : "") + parts[i];
  return out;
}

// A template parsed once: literal text and field names, in order.
struct Piece {
  std::string text;  // the literal text, or the field's name
  bool field = false;
};
using Pieces = std::vector<Piece>;

bool is_name(std::string_view name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

// `which` is "prompt" or "response"; a bad template is an InvalidArgument that quotes it.
Pieces parse_template(const std::string& t, const std::string& which, const std::string& path) {
  auto fail = [&](size_t at, const std::string& what, const std::string& why) {
    throw InvalidArgument(path + ": the " + which + " template \"" + excerpt(t) + "\" has " + what +
                          " at byte " + std::to_string(at) + why +
                          ": write {field} for a field (letters, digits, _), {{ or }} for a brace");
  };
  Pieces out;
  auto literal = [&](std::string_view text) {
    if (out.empty() || out.back().field) out.push_back({});
    out.back().text += text;
  };
  for (size_t i = 0; i < t.size(); ++i) {
    if ((t[i] == '{' || t[i] == '}') && i + 1 < t.size() && t[i + 1] == t[i]) {
      literal(t.substr(i++, 1));
    } else if (t[i] == '}') {
      fail(i, "`}`", " that closes no `{`");
    } else if (t[i] == '{') {
      size_t close = t.find_first_of("{}", i + 1);
      if (close == std::string::npos || t[close] == '{') fail(i, "`{`", " that no `}` closes");
      std::string name = t.substr(i + 1, close - i - 1);
      if (!is_name(name)) fail(i, "`{" + excerpt(name) + "}`", ", which is not a field name");
      out.push_back({name, true});
      i = close;
    } else {
      literal(std::string_view(t).substr(i, 1));
    }
  }
  return out;
}

// How a record becomes an example: the fields it reads, in order, and the template's two parts
// (none: the fields joined with "\n").
struct Layout {
  std::vector<std::string> fields;
  std::optional<std::pair<Pieces, Pieces>> parts;  // prompt, response
};

Layout layout_of(const TextFileSpec& s) {
  Layout l;
  if (!s.prompt_template) {
    l.fields = s.fields;
    return l;
  }
  l.parts = {parse_template(s.prompt_template->prompt, "prompt", s.path),
             parse_template(s.prompt_template->response, "response", s.path)};
  for (const Pieces* part : {&l.parts->first, &l.parts->second}) {
    for (const Piece& p : *part) {
      if (p.field && std::find(l.fields.begin(), l.fields.end(), p.text) == l.fields.end())
        l.fields.push_back(p.text);
    }
  }
  if (l.fields.empty()) {
    throw InvalidArgument(s.path + ": the prompt template names no field: write {field} where a " +
                          "record's field goes, e.g. {instruction} in the prompt, {output} in " +
                          "the response");
  }
  return l;
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
  if (s.format != "text" && !s.prompt_template && s.fields.empty()) {
    throw InvalidArgument(s.path +
                          ": fields is empty: name the JSON fields that make an example, e.g. "
                          "instruction, input, output");
  }
  if (s.format == "text" && s.prompt_template) {
    throw InvalidArgument(s.path + ": a prompt template fills in fields of json or jsonl " +
                          "records, and format text has none: drop the template or use jsonl");
  }
  if (s.train_on != "all" && s.train_on != "response") {
    throw InvalidArgument(s.path + ": train_on is `" + excerpt(s.train_on) +
                          "`; it must be all (every token) or response (the template's response)");
  }
  if (s.train_on == "response" && !s.prompt_template) {
    throw InvalidArgument(s.path + ": train_on is response, but without a prompt template " +
                          "nothing says where the response starts: set a template or train_on all");
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

std::string expected_object(const std::vector<std::string>& fields) {
  std::vector<std::string> quoted;
  for (const std::string& f : fields) quoted.push_back(excerpt(f));
  return "expected a JSON object with string fields " + join(quoted, ", ");
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

// What loading carries from record to record.
struct Loader {
  const TextFileSpec& s;
  Layout layout;
  const Tokenizer& tok;
  LoadNotes& notes;
  Dataset out;
};

// The start of `text` that holds its first max_len tokens and some to spare, cut at a character:
// max_len cuts the example anyway, and sentencepiece took 1.4 GB and 9 s to encode a 10 MB record
// whole (50 MB: bad_alloc). The spare 64 tokens keep a piece that spans the cut far past max_len.
std::string_view head(std::string_view text, const Loader& l) {
  const auto bytes = static_cast<size_t>((l.s.max_len + 64) * l.tok.max_bytes_per_token());
  if (text.size() <= bytes) return text;
  size_t end = bytes;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return text.substr(0, end);
}

// The record's string fields that the layout reads, by name. Refuses what is not an object, a
// field that is not a string and a record with none of the fields; counts one that lacks some.
std::map<std::string, std::string> read_fields(const json& obj, Loader& l,
                                               const std::string& where) {
  auto fail = [&](const std::string& found) {
    throw InvalidArgument(where + ": " + expected_object(l.layout.fields) + "; " + found);
  };
  if (!obj.is_object()) fail("found " + a_type(obj));
  std::map<std::string, std::string> values;
  std::vector<std::string> lacking;
  for (const std::string& f : l.layout.fields) {
    auto it = obj.find(f);
    if (it == obj.end()) {
      lacking.push_back("`" + excerpt(f) + "`");
      continue;
    }
    if (!it->is_string()) fail("field `" + excerpt(f) + "` is " + a_type(*it));
    values[f] = it->get<std::string>();
  }
  if (values.empty()) fail("found an object with none of these fields (" + keys_of(obj) + ")");
  if (!lacking.empty() && l.notes.lacking_fields++ == 0)
    l.notes.first_lacking = where + " lacks " + join(lacking, ", ");
  return values;
}

// A template part with the record's values in place; a field the record lacks gives "".
std::string fill(const Pieces& part, const std::map<std::string, std::string>& values) {
  std::string out;
  for (const Piece& p : part) {
    if (!p.field) {
      out += p.text;
    } else if (auto it = values.find(p.text); it != values.end()) {
      out += it->second;
    }
  }
  return out;
}

// Keeps the example's first max_len tokens, or drops it when it is shorter than min_len.
void keep(Loader& l, std::vector<int32_t> tokens, int64_t prompt_len = 0) {
  if (static_cast<int64_t>(tokens.size()) > l.s.max_len) tokens.resize(l.s.max_len);
  if (static_cast<int64_t>(tokens.size()) < l.s.min_len) return;
  l.out.examples.push_back(std::move(tokens));
  if (l.s.train_on == "response") l.out.loss_start.push_back(static_cast<int32_t>(prompt_len));
}

// One record's example. Without a template: its non-empty fields joined with "\n", with BOS and
// EOS. With one: the prompt and the response encoded together, with BOS and EOS, as the model
// sees them when it answers; the loss starts after as many tokens as the prompt alone encodes to
// (the Alpaca recipe's way). Encoded on its own, the response would get the leading space piece
// that sentencepiece puts before a text, which the joined text does not have there, and the model
// would learn to answer with a space.
void add_record(const json& obj, Loader& l, const std::string& where) {
  std::map<std::string, std::string> values = read_fields(obj, l, where);
  if (!l.layout.parts) {
    std::vector<std::string> parts;
    for (const std::string& f : l.layout.fields) {
      auto it = values.find(f);
      if (it != values.end() && !it->second.empty()) parts.push_back(it->second);
    }
    if (parts.empty()) {  // BOS and EOS alone: nothing to learn, and a step's worth of nothing
      if (l.notes.empty_records++ == 0) l.notes.first_empty = where;
      return;
    }
    std::string text = join(parts, "\n");
    check_size(text.size(), l.s, where);
    keep(l, l.tok.encode(head(text, l), true, true));
    return;
  }
  std::string prompt = fill(l.layout.parts->first, values);
  std::string response = fill(l.layout.parts->second, values);
  check_size(prompt.size() + response.size(), l.s, where);
  auto prompt_len = static_cast<int64_t>(l.tok.encode(head(prompt, l), true, false).size());
  if (prompt_len >= l.s.max_len) {  // nothing of the response would be left to learn
    if (l.notes.cut_responses++ == 0) {
      l.notes.first_cut = where + ": its prompt is " + std::to_string(prompt_len) +
                          " tokens, and max_len " + std::to_string(l.s.max_len) +
                          " cuts off its whole response";
    }
    return;
  }
  std::vector<int32_t> tokens = l.tok.encode(head(prompt + response, l), true, true);
  // A merge across the boundary can make the joined text shorter than the prompt alone: the EOS
  // at least is always learnt.
  prompt_len = std::min(prompt_len, static_cast<int64_t>(tokens.size()) - 1);
  keep(l, std::move(tokens), prompt_len);
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

void load_json(Loader& l, const std::string& bytes) {
  const std::string& path = l.s.path;
  if (first_non_space(bytes) == '\0')
    throw InvalidArgument(path + ": expected a JSON list of objects; found an empty file");
  json doc;
  try {
    doc = json::parse(bytes);
  } catch (const json::parse_error& e) {
    std::string hint =
        first_non_space(bytes) == '{' ? " (one object per line? use format jsonl)" : "";
    throw InvalidArgument(position(path, bytes, e.byte, 1) +
                          ": expected a JSON list of objects; found text that is not JSON" + hint);
  }
  if (!doc.is_array())
    throw InvalidArgument(path + ": expected a JSON list of objects; found " + a_type(doc));
  for (size_t i = 0; i < doc.size(); ++i)
    add_record(doc[i], l, path + ": example [" + std::to_string(i) + "]");
}

void load_jsonl(Loader& l, const std::string& bytes) {
  std::istringstream in(bytes);
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();  // files written on Windows
    if (first_non_space(line) == '\0') continue;
    std::string where = l.s.path + ":" + std::to_string(n);
    check_size(line.size(), l.s, where);
    json obj;
    try {
      obj = json::parse(line);
    } catch (const json::parse_error& e) {
      std::string hint =
          n == 1 && first_non_space(line) == '[' ? " (a JSON list? use format json)" : "";
      throw InvalidArgument(position(l.s.path, line, e.byte, n) + ": " +
                            expected_object(l.layout.fields) + "; found text that is not JSON" +
                            hint);
    }
    add_record(obj, l, where);
  }
}

// Consecutive windows of max_len tokens: BOS, then the file's next max_len - 1 tokens. The file
// is encoded whole, so that no window boundary splits a character or a piece.
void load_text(Loader& l, const std::string& bytes) {
  std::vector<int32_t> ids = l.tok.encode(bytes, false, false);
  std::vector<int32_t> bos = l.tok.encode("", true, false);  // throws for a tokenizer without one
  size_t step = static_cast<size_t>(l.s.max_len - 1);
  for (size_t pos = 0; pos < ids.size(); pos += step) {
    std::vector<int32_t> window = bos;
    window.insert(window.end(), ids.begin() + static_cast<ptrdiff_t>(pos),
                  ids.begin() + static_cast<ptrdiff_t>(std::min(pos + step, ids.size())));
    keep(l, std::move(window));
  }
}

double quantile(const std::vector<int64_t>& sorted, double q) {
  double pos = q * static_cast<double>(sorted.size() - 1);
  size_t lo = static_cast<size_t>(pos);
  if (lo + 1 >= sorted.size()) return static_cast<double>(sorted.back());
  double frac = pos - static_cast<double>(lo);
  return static_cast<double>(sorted[lo]) + frac * static_cast<double>(sorted[lo + 1] - sorted[lo]);
}

}  // namespace

Dataset load_text_dataset(const TextFileSpec& spec, const Tokenizer& tokenizer, LoadNotes* notes) {
  validate(spec);
  Layout layout = spec.format == "text" ? Layout{} : layout_of(spec);  // before reading the file
  std::string bytes = read_file(spec.path);
  LoadNotes ignored;
  Loader l{spec, std::move(layout), tokenizer, notes ? *notes : ignored, {}};
  if (spec.format == "json") {
    load_json(l, bytes);
  } else if (spec.format == "jsonl") {
    load_jsonl(l, bytes);
  } else {
    load_text(l, bytes);
  }
  return std::move(l.out);
}

std::vector<std::vector<int32_t>> load_text_dataset(const TextFileSpec& spec, LoadNotes* notes) {
  if (spec.train_on == "response") {
    throw InvalidArgument(spec.path + ": train_on is response, but this load_text_dataset " +
                          "returns no loss starts: call the one that takes a tokenizer");
  }
  return load_text_dataset(spec, ByteTokenizer(), notes).examples;
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
