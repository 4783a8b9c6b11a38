// Parsing half of the text format (see text_format.h). A recursive-descent parser over the
// lexer's tokens; every error names file:line:col and what was expected there.
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include "base/error.h"
#include "base/excerpt.h"
#include "ir/lexer.h"
#include "ir/suggest.h"
#include "ir/text_format.h"

namespace disc::ir {
namespace {

constexpr int kMaxNesting = 64;  // parentheses and unary minus in dim expressions

class Parser {
 public:
  Parser(std::string_view text, std::string source) : lex_(text, std::move(source)) {
    tok_ = lex_.next();
  }

  std::unique_ptr<Graph> graph();
  DimExpr standalone_dim_expr();

 private:
  [[noreturn]] void fail(const Token& at, const std::string& what) const {
    throw ParseError(lex_.source() + ":" + std::to_string(at.line) + ":" + std::to_string(at.col) +
                     ": " + what);
  }
  [[noreturn]] void expected(const std::string& what) const {
    fail(tok_, "expected " + what + ", found " + token_description(tok_));
  }
  Token take() {
    Token t = std::move(tok_);
    tok_ = lex_.next();
    last_ = {t.line, t.col};
    return t;
  }
  bool accept(Tok k) {
    if (tok_.kind != k) return false;
    take();
    return true;
  }
  Token expect(Tok k, const std::string& what) {
    if (tok_.kind != k) expected(what);
    return take();
  }
  bool at_keyword(std::string_view kw) const { return tok_.kind == Tok::kIdent && tok_.text == kw; }
  void expect_keyword(std::string_view kw) {
    if (!at_keyword(kw)) expected("`" + std::string(kw) + "`");
    take();
  }
  int64_t integer(const std::string& what);

  void statement();
  void symbol_decl();
  void limit_decl();
  void argument_decl(Role role);
  void node_decl();
  void output_decl();
  void update_decl();
  TensorType type();
  Attributes attributes();
  AttrValue attr_value();
  Value* value_ref();

  DimExpr dim_expr(int depth = 0);
  DimExpr dim_term(int depth);
  DimExpr dim_factor(int depth);
  DimExpr dim_atom(int depth);

  // Runs a graph call for the statement at `at`, giving its errors that location.
  template <typename F>
  auto at_location(const Token& at, F&& f) {
    try {
      return f();
    } catch (const ParseError&) {
      throw;
    } catch (const Error& e) {
      std::string msg = e.what();
      if (msg.rfind(lex_.source() + ":", 0) == 0) throw;  // already located
      fail(at, msg);
    }
  }

  // Dim arithmetic that hits a limit (int64 overflow, degree, terms) throws ShapeError with no
  // location; this turns it into a ParseError at the last token read, the operand that broke it.
  template <typename F>
  auto located_arithmetic(F&& f) {
    try {
      return f();
    } catch (const ShapeError& e) {
      Token at;
      at.line = last_.first, at.col = last_.second;
      fail(at, e.what());
    }
  }

  Lexer lex_;
  Token tok_;
  std::pair<int, int> last_{1, 1};  // line and column of the token take() returned last
  std::unique_ptr<Graph> graph_;
};

int64_t Parser::integer(const std::string& what) {
  bool negative = accept(Tok::kMinus);
  Token t = expect(Tok::kInt, what);
  return negative ? -t.int_value : t.int_value;
}

std::unique_ptr<Graph> Parser::graph() {
  expect_keyword("graph");
  Token name = expect(Tok::kGraphName, "a graph name such as `@model`");
  graph_ = std::make_unique<Graph>(name.text);
  graph_->set_source(lex_.source());
  expect(Tok::kLBrace, "`{` after the graph name");
  while (!accept(Tok::kRBrace)) {
    if (tok_.kind == Tok::kEnd) expected("`}` to close the graph");
    located_arithmetic([&] { statement(); });
  }
  if (tok_.kind != Tok::kEnd) expected("end of input after the graph's `}`");
  return std::move(graph_);
}

void Parser::statement() {
  if (tok_.kind == Tok::kValueName) return node_decl();
  if (at_keyword("sym")) return symbol_decl();
  if (at_keyword("limit")) return limit_decl();
  if (at_keyword("input")) return argument_decl(Role::kInput);
  if (at_keyword("param")) return argument_decl(Role::kParameter);
  if (at_keyword("state")) return argument_decl(Role::kState);
  if (at_keyword("output")) return output_decl();
  if (at_keyword("update")) return update_decl();
  expected(
      "a statement (`sym`, `limit`, `input`, `param`, `state`, `%name = op(...)`, `output` or "
      "`update`)");
}

void Parser::symbol_decl() {
  Token at = take();
  Symbol s;
  s.name = expect(Tok::kIdent, "a symbol name").text;
  if (parse_dtype(s.name) || s.name == "inf" || s.name == "nan" || s.name == "true" ||
      s.name == "false") {
    fail(at, "`" + s.name + "` is reserved and cannot name a symbol");
  }
  expect_keyword("in");
  expect(Tok::kLBracket, "`[` starting the symbol's range");
  s.lo = integer("the lower bound");
  expect(Tok::kComma, "`,` between the bounds");
  s.hi = integer("the upper bound");
  expect(Tok::kRBracket, "`]` closing the range");
  if (at_keyword("multiple_of")) take(), s.multiple_of = integer("an integer after multiple_of");
  if (at_keyword("hint")) take(), s.hint = integer("an integer after hint");
  at_location(at, [&] { graph_->shapes().add_symbol(s); });
}

void Parser::limit_decl() {
  Token at = take();
  DimExpr e = dim_expr();
  expect(Tok::kLessEqual, "`<=` after the limited expression, as in `limit B*S <= 16384`");
  const int64_t bound = integer("the limit's bound");
  at_location(at, [&] { graph_->shapes().add_limit(e, bound); });
}

void Parser::argument_decl(Role role) {
  Token at = take();
  Token name = expect(Tok::kValueName, "a value name such as `%x`");
  expect(Tok::kColon, "`:` before the type");
  TensorType t = type();
  at_location(name, [&] { graph_->add_argument(name.text, std::move(t), role); });
}

void Parser::node_decl() {
  Token first = tok_;
  std::vector<std::string> names;
  do {
    names.push_back(expect(Tok::kValueName, "a result name such as `%y`").text);
  } while (accept(Tok::kComma));
  expect(Tok::kEqual, "`=` after the result names");
  Token op = expect(Tok::kIdent, "an op name");
  expect(Tok::kLParen, "`(` after the op name");
  std::vector<Value*> operands;
  if (!accept(Tok::kRParen)) {
    do {
      operands.push_back(value_ref());
    } while (accept(Tok::kComma));
    expect(Tok::kRParen, "`,` or `)` in the operand list");
  }
  Attributes attrs = tok_.kind == Tok::kLBrace ? attributes() : Attributes{};
  expect(Tok::kColon, "`:` before the result types");
  std::vector<TensorType> types;
  do {
    types.push_back(type());
  } while (accept(Tok::kComma));
  at_location(op, [&] {
    return graph_->add_node(op.text, operands, std::move(attrs), names, types,
                            SourceLoc{first.line, first.col});
  });
}

void Parser::output_decl() {
  take();
  std::string name;
  if (tok_.kind == Tok::kIdent) {
    name = take().text;
    expect(Tok::kEqual, "`=` after the output name");
  }
  Token at = tok_;
  Value* v = value_ref();
  at_location(at, [&] { graph_->add_output(name.empty() ? v->name() : name, v); });
}

void Parser::update_decl() {
  take();
  Token at = tok_;
  Value* argument = value_ref();
  expect(Tok::kEqual, "`=` after the updated argument");
  Value* v = value_ref();
  at_location(at, [&] { graph_->add_update(argument, v); });
}

Value* Parser::value_ref() {
  Token t = expect(Tok::kValueName, "a value such as `%x`");
  if (Value* v = graph_->find_value(t.text)) return v;
  std::vector<std::string> known;
  for (const Value* a : graph_->arguments()) known.push_back(a->name());
  for (const Node* n : graph_->nodes()) {
    for (const Value* r : n->results()) known.push_back(r->name());
  }
  fail(t, "value %" + t.text + " is not defined before this use" + did_you_mean(t.text, known));
}

TensorType Parser::type() {
  Token t = expect(Tok::kIdent, "a type such as `f32[B, 512]`");
  auto dtype = parse_dtype(t.text);
  if (!dtype) {
    fail(t, "unknown dtype `" + excerpt(t.text) + "` (f32, f64, bf16, f16, i32, i64, bool)");
  }
  TensorType out{*dtype, {}};
  expect(Tok::kLBracket, "`[` starting the shape");
  if (!accept(Tok::kRBracket)) {
    do {
      out.shape.push_back(dim_expr());
    } while (accept(Tok::kComma));
    expect(Tok::kRBracket, "`,` or `]` in the shape");
  }
  return out;
}

Attributes Parser::attributes() {
  expect(Tok::kLBrace, "`{`");
  Attributes attrs;
  if (accept(Tok::kRBrace)) return attrs;
  do {
    Token name = expect(Tok::kIdent, "an attribute name");
    if (attrs.has(name.text)) fail(name, "attribute `" + name.text + "` is given twice");
    expect(Tok::kEqual, "`=` after the attribute name");
    attrs.set(name.text, attr_value());
  } while (accept(Tok::kComma));
  expect(Tok::kRBrace, "`,` or `}` in the attributes");
  return attrs;
}

AttrValue Parser::attr_value() {
  if (tok_.kind == Tok::kString) return take().text;
  if (tok_.kind == Tok::kFloat) return take().float_value;
  if (tok_.kind == Tok::kIdent) {
    const std::string& w = tok_.text;
    if (w == "true" || w == "false") return take().text == "true";
    if (w == "inf") return take(), std::numeric_limits<double>::infinity();
    if (w == "nan") return take(), std::numeric_limits<double>::quiet_NaN();
    if (auto t = parse_dtype(w)) return take(), *t;
  }
  if (tok_.kind == Tok::kMinus) {
    Token minus = take();
    if (tok_.kind == Tok::kFloat) return -take().float_value;
    if (at_keyword("inf")) return take(), -std::numeric_limits<double>::infinity();
    DimExpr e = -dim_factor(1);
    // Continue a sum that started with a minus, e.g. `-1 + S`.
    while (tok_.kind == Tok::kPlus || tok_.kind == Tok::kMinus) {
      bool plus = take().kind == Tok::kPlus;
      e = plus ? e + dim_term(1) : e - dim_term(1);
    }
    if (auto c = e.constant()) return *c;
    return e;
  }
  if (accept(Tok::kLBracket)) {
    std::vector<DimExpr> dims;
    if (!accept(Tok::kRBracket)) {
      do {
        dims.push_back(dim_expr());
      } while (accept(Tok::kComma));
      expect(Tok::kRBracket, "`,` or `]` in the list");
    }
    if (auto ints = coerce_attr(dims, AttrKind::kInts)) return *ints;
    return dims;
  }
  if (tok_.kind != Tok::kInt && tok_.kind != Tok::kIdent && tok_.kind != Tok::kLParen) {
    expected("an attribute value (number, string, bool, dtype, list or dim expression)");
  }
  DimExpr e = dim_expr();
  if (auto c = e.constant()) return *c;
  return e;
}

DimExpr Parser::dim_expr(int depth) {
  DimExpr e = dim_term(depth);
  while (tok_.kind == Tok::kPlus || tok_.kind == Tok::kMinus) {
    bool plus = take().kind == Tok::kPlus;
    e = plus ? e + dim_term(depth) : e - dim_term(depth);
  }
  return e;
}

DimExpr Parser::dim_term(int depth) {
  DimExpr e = dim_factor(depth);
  while (tok_.kind == Tok::kStar || tok_.kind == Tok::kSlash) {
    Token op = take();
    DimExpr rhs = dim_factor(depth);
    if (op.kind == Tok::kStar) {
      e = e * rhs;
      continue;
    }
    auto q = e.divide_exact(rhs);
    if (!q) fail(op, e.str() + " is not exactly divisible by " + rhs.str());
    e = *q;
  }
  return e;
}

DimExpr Parser::dim_factor(int depth) {
  if (depth > kMaxNesting) fail(tok_, "dim expression nests too deeply");
  if (accept(Tok::kMinus)) return -dim_factor(depth + 1);
  DimExpr base = dim_atom(depth);
  if (!accept(Tok::kCaret)) return base;
  Token p = expect(Tok::kInt, "an integer exponent after `^`");
  if (p.int_value > DimExpr::kMaxDegree) {
    fail(p, "exponent " + p.text + " exceeds " + std::to_string(DimExpr::kMaxDegree));
  }
  DimExpr r = 1;
  for (int64_t i = 0; i < p.int_value; ++i) r *= base;
  return r;
}

DimExpr Parser::dim_atom(int depth) {
  if (tok_.kind == Tok::kInt) return take().int_value;
  if (accept(Tok::kLParen)) {
    DimExpr e = dim_expr(depth + 1);
    expect(Tok::kRParen, "`)` closing the dim expression");
    return e;
  }
  Token t = expect(Tok::kIdent, "a dim (integer, symbol or parenthesised expression)");
  if (graph_ && !graph_->shapes().find(t.text)) {
    std::vector<std::string> names;
    for (const Symbol* s : graph_->shapes().symbols()) names.push_back(s->name);
    fail(t, "symbol " + t.text + " is not declared" + did_you_mean(t.text, names) +
                "; declare it with `sym " + t.text + " in [lo, hi]`");
  }
  return DimExpr::symbol(t.text);
}

DimExpr Parser::standalone_dim_expr() {
  DimExpr e = located_arithmetic([&] { return dim_expr(); });
  if (tok_.kind != Tok::kEnd) expected("end of the dim expression");
  return e;
}

}  // namespace

std::unique_ptr<Graph> parse_graph(std::string_view text, const std::string& source) {
  return Parser(text, source).graph();
}

std::unique_ptr<Graph> parse_graph_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InvalidArgument("cannot open graph file " + path + ": check the path");
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw InvalidArgument("cannot read graph file " + path);
  return parse_graph(ss.str(), path);
}

DimExpr parse_dim_expr(std::string_view text) {
  return Parser(text, "<dim>").standalone_dim_expr();
}

}  // namespace disc::ir
