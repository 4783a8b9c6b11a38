#include "ir/lexer.h"

#include <cctype>
#include <charconv>

#include "base/error.h"
#include "base/excerpt.h"

namespace disc::ir {
namespace {

// Names and strings longer than this are refused: no graph needs them, and every message that
// names a value, symbol or attribute would otherwise echo them whole.
constexpr size_t kMaxTokenBytes = 1024;

bool is_name_start(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_';
}
bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
}

std::string too_long(const std::string& what, const std::string& text) {
  return "a " + what + " of " + std::to_string(text.size()) + " bytes is longer than the " +
         std::to_string(kMaxTokenBytes) + " allowed: `" + excerpt(text) + "`";
}

}  // namespace

std::string token_description(const Token& t) {
  switch (t.kind) {
    case Tok::kEnd:
      return "end of input";
    case Tok::kIdent:
      return "`" + excerpt(t.text) + "`";
    case Tok::kValueName:
      return "value `%" + excerpt(t.text) + "`";
    case Tok::kGraphName:
      return "`@" + excerpt(t.text) + "`";
    case Tok::kInt:
      return "integer " + excerpt(t.text);
    case Tok::kFloat:
      return "number " + excerpt(t.text);
    case Tok::kString:
      return "string \"" + excerpt(t.text) + "\"";
    default:
      return "`" + t.text + "`";
  }
}

void Lexer::fail(int line, int col, const std::string& what) const {
  throw ParseError(source_ + ":" + std::to_string(line) + ":" + std::to_string(col) + ": " + what);
}

char Lexer::advance() {
  char c = text_[pos_++];
  if (c == '\n') {
    ++line_;
    col_ = 1;
  } else {
    ++col_;
  }
  return c;
}

void Lexer::skip_space_and_comments() {
  while (pos_ < text_.size()) {
    char c = peek();
    if (std::isspace(static_cast<unsigned char>(c))) {
      advance();
    } else if (c == '/' && peek(1) == '/') {
      while (pos_ < text_.size() && peek() != '\n') advance();
    } else {
      break;
    }
  }
}

Token Lexer::number(Token t) {
  size_t start = pos_;
  bool is_float = false;
  while (std::isdigit(static_cast<unsigned char>(peek()))) advance();
  if (peek() == '.' && std::isdigit(static_cast<unsigned char>(peek(1)))) {
    is_float = true;
    advance();
    while (std::isdigit(static_cast<unsigned char>(peek()))) advance();
  }
  if ((peek() == 'e' || peek() == 'E') &&
      (std::isdigit(static_cast<unsigned char>(peek(1))) ||
       ((peek(1) == '-' || peek(1) == '+') && std::isdigit(static_cast<unsigned char>(peek(2)))))) {
    is_float = true;
    advance();
    if (peek() == '-' || peek() == '+') advance();
    while (std::isdigit(static_cast<unsigned char>(peek()))) advance();
  }
  t.text = std::string(text_.substr(start, pos_ - start));
  const char* b = t.text.data();
  const char* e = b + t.text.size();
  if (is_float) {
    t.kind = Tok::kFloat;
    auto [p, ec] = std::from_chars(b, e, t.float_value);
    if (ec != std::errc() || p != e) {
      fail(t.line, t.col, "number " + excerpt(t.text) + " is out of range");
    }
  } else {
    t.kind = Tok::kInt;
    auto [p, ec] = std::from_chars(b, e, t.int_value);
    if (ec != std::errc() || p != e) {
      fail(t.line, t.col, "integer " + excerpt(t.text) + " does not fit in 64 bits");
    }
  }
  if (is_name_start(peek())) {
    fail(line_, col_, "unexpected character after number " + excerpt(t.text));
  }
  return t;
}

Token Lexer::string_literal(Token t) {
  advance();  // opening quote
  t.kind = Tok::kString;
  while (true) {
    if (pos_ >= text_.size() || peek() == '\n') fail(t.line, t.col, "string is not closed with \"");
    char c = advance();
    if (c == '"') break;
    if (c == '\\') {
      if (pos_ >= text_.size()) fail(t.line, t.col, "string is not closed with \"");
      c = advance();
      if (c != '"' && c != '\\') fail(line_, col_ - 2, "unknown escape \\" + std::string(1, c));
    }
    t.text += c;
  }
  if (t.text.size() > kMaxTokenBytes) fail(t.line, t.col, too_long("string", t.text));
  return t;
}

Token Lexer::next() {
  skip_space_and_comments();
  Token t;
  t.line = line_;
  t.col = col_;
  if (pos_ >= text_.size()) return t;
  char c = peek();
  if (std::isdigit(static_cast<unsigned char>(c))) return number(t);
  if (c == '"') return string_literal(t);
  if (c == '%' || c == '@' || is_name_start(c)) {
    if (c == '%' || c == '@') advance();
    size_t start = pos_;
    while (is_name_char(peek())) advance();
    t.text = std::string(text_.substr(start, pos_ - start));
    t.kind = c == '%' ? Tok::kValueName : c == '@' ? Tok::kGraphName : Tok::kIdent;
    if (t.text.empty()) fail(t.line, t.col, std::string("expected a name after ") + c);
    if (t.text.size() > kMaxTokenBytes) fail(t.line, t.col, too_long("name", t.text));
    return t;
  }
  if (c == '<' && peek(1) == '=') {  // the only two-character token: `limit B*S <= 16384`
    advance(), advance();
    t.kind = Tok::kLessEqual;
    t.text = "<=";
    return t;
  }
  static constexpr std::pair<char, Tok> punct[] = {
      {'(', Tok::kLParen}, {')', Tok::kRParen}, {'[', Tok::kLBracket}, {']', Tok::kRBracket},
      {'{', Tok::kLBrace}, {'}', Tok::kRBrace}, {',', Tok::kComma},    {':', Tok::kColon},
      {'=', Tok::kEqual},  {'*', Tok::kStar},   {'+', Tok::kPlus},     {'-', Tok::kMinus},
      {'^', Tok::kCaret},  {'/', Tok::kSlash}};
  for (auto [ch, kind] : punct) {
    if (c == ch) {
      advance();
      t.kind = kind;
      t.text = std::string(1, c);
      return t;
    }
  }
  if (!std::isprint(static_cast<unsigned char>(c))) {
    fail(t.line, t.col,
         "unexpected byte " + hex_byte(static_cast<uint8_t>(c)) +
             " (graph text is ASCII outside comments and strings)");
  }
  fail(t.line, t.col, "unexpected character `" + std::string(1, c) + "`");
}

}  // namespace disc::ir
