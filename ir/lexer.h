// Tokens of the graph text format. `//` starts a comment that runs to the end of the line.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace disc::ir {

enum class Tok {
  kEnd,
  kIdent,
  kValueName,
  kGraphName,
  kInt,
  kFloat,
  kString,
  kLParen,
  kRParen,
  kLBracket,
  kRBracket,
  kLBrace,
  kRBrace,
  kComma,
  kColon,
  kEqual,
  kStar,
  kPlus,
  kMinus,
  kCaret,
  kSlash,
  kLessEqual,
};

struct Token {
  Tok kind = Tok::kEnd;
  std::string text;  // identifier or name without its sigil; string contents unescaped
  int64_t int_value = 0;
  double float_value = 0;
  int line = 1, col = 1;
};

std::string token_description(const Token& t);  // "`foo`", "end of input", "integer 12"

class Lexer {
 public:
  Lexer(std::string_view text, std::string source) : text_(text), source_(std::move(source)) {}
  // The next token; throws ParseError at a character that starts no token.
  Token next();
  const std::string& source() const { return source_; }

 private:
  [[noreturn]] void fail(int line, int col, const std::string& what) const;
  void skip_space_and_comments();
  char peek(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }
  char advance();
  Token number(Token t);
  Token string_literal(Token t);

  std::string_view text_;
  std::string source_;
  size_t pos_ = 0;
  int line_ = 1, col_ = 1;
};

}  // namespace disc::ir
