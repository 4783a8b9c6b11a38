// The text format: exact round trips, and clear errors for malformed input.
#include "ir/text_format.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "base/error.h"
#include "ir/pass.h"
#include "op_cases.h"

namespace disc::ir {
namespace {

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The file without its comment lines: what the printer must reproduce exactly.
std::string without_comments(const std::string& text) {
  std::stringstream in(text);
  std::string line, out;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(' ') != std::string::npos &&
        line.substr(line.find_first_not_of(' '), 2) == "//") {
      continue;
    }
    out += line + "\n";
  }
  return out;
}

TEST(TextFormat, EveryOpRoundTrips) {
  for (const auto& c : testing::valid_cases()) {
    SCOPED_TRACE(c.node);
    std::string once = print_graph(*parse_graph(testing::case_graph(c.node, c.type)));
    EXPECT_EQ(print_graph(*parse_graph(once)), once);
    EXPECT_NE(once.find(" = " + c.op + "("), std::string::npos) << once;
  }
}

class GraphFiles : public ::testing::TestWithParam<std::string> {};

TEST_P(GraphFiles, PrintExactlyAsWritten) {
  std::string path = std::string(DISC_TEST_DATA_DIR) + "/graphs/" + GetParam();
  std::string text = read(path);
  ASSERT_FALSE(text.empty()) << path;
  auto g = parse_graph_file(path);
  EXPECT_EQ(print_graph(*g), without_comments(text));
}

INSTANTIATE_TEST_SUITE_P(Models, GraphFiles, ::testing::Values("mlp.disc", "llama.disc"));

TEST(TextFormat, AttributeValuesRoundTrip) {
  const char* text = R"(graph @g {
  sym S in [2, 100] multiple_of 2 hint 10
  input %x : f32[S, 4]
  %a = causal_mask(%x) {value = -1e-07} : f32[S, 4]
  %b = causal_mask(%a) {value = inf} : f32[S, 4]
  %c = causal_mask(%b) {value = nan} : f32[S, 4]
  %d = causal_mask(%c) {value = 0.1} : f32[S, 4]
  %e = slice(%d) {axis = 0, limit = S - 1, start = (S^2 + S)/S - S} : f32[S - 2, 4]
  %f = full() {shape = [S^2 + 3*S, 2], value = 123456789.0} : f32[S^2 + 3*S, 2]
  output out = %e
  output f = %f
}
)";
  std::string once = print_graph(*parse_graph(text));
  EXPECT_NE(once.find("{value = -1e-07}"), std::string::npos) << once;
  EXPECT_NE(once.find("{value = inf}"), std::string::npos) << once;
  EXPECT_NE(once.find("{value = nan}"), std::string::npos) << once;
  EXPECT_NE(once.find("{value = 0.1}"), std::string::npos) << once;
  EXPECT_NE(once.find("sym S in [2, 100] multiple_of 2 hint 10"), std::string::npos);
  EXPECT_NE(once.find("value = 123456789.0"), std::string::npos) << once;
  EXPECT_EQ(print_graph(*parse_graph(once)), once);
}

TEST(TextFormat, MissingFileIsAnInvalidArgument) {
  EXPECT_THROW(parse_graph_file("/nonexistent/model.disc"), InvalidArgument);
}

struct Malformed {
  const char* text;
  const char* error;  // the whole message
};

class MalformedInput : public ::testing::TestWithParam<Malformed> {};

TEST_P(MalformedInput, GivesLocatedMessage) {
  try {
    parse_graph(GetParam().text, "m.disc");
    ADD_FAILURE() << "parsed: " << GetParam().text;
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), GetParam().error);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Errors, MalformedInput,
    ::testing::Values(
        Malformed{"", "m.disc:1:1: expected `graph`, found end of input"},
        Malformed{"graph g {}", "m.disc:1:7: expected a graph name such as `@model`, found `g`"},
        Malformed{"graph @g {\n  input %x : f32[4]\n",
                  "m.disc:3:1: expected `}` to close the graph, found end of input"},
        Malformed{"graph @g {\n  input %x : f33[4]\n}",
                  "m.disc:2:14: unknown dtype `f33` (f32, f64, bf16, f16, i32, i64, bool)"},
        Malformed{"graph @g {\n  input %x : f32[4 4]\n}",
                  "m.disc:2:20: expected `,` or `]` in the shape, found integer 4"},
        Malformed{"graph @g {\n  sym B in [1 8]\n}",
                  "m.disc:2:15: expected `,` between the bounds, found integer 8"},
        Malformed{"graph @g {\n  sym B in [8, 1]\n}",
                  "m.disc:2:3: symbol B: range [8, 1] is empty or negative"},
        Malformed{"graph @g {\n  sym B in [1, 8]\n  sym B in [1, 8]\n}",
                  "m.disc:3:3: symbol B: declared twice; give each symbol one declaration"},
        Malformed{"graph @g {\n  input %x : f32[Q]\n}",
                  "m.disc:2:18: symbol Q is not declared; declare it with `sym Q in [lo, hi]`"},
        Malformed{"graph @g {\n  input %x : f32[4]\n  input %x : f32[4]\n}",
                  "m.disc:3:9: value %x is defined twice"},
        Malformed{"graph @g {\n  input %x : f32[4]\n  %y = exp(%xx) : f32[4]\n}",
                  "m.disc:3:12: value %xx is not defined before this use (did you mean `x`?)"},
        Malformed{"graph @g {\n  input %x : f32[4]\n  %y = expp(%x) : f32[4]\n}",
                  "m.disc:3:8: unknown op `expp` (did you mean `exp`?)"},
        Malformed{"graph @g {\n  input %x : f32[4]\n  %y = exp(%x) : f32[5]\n}",
                  "m.disc:3:3: node %y = exp: result 0 is declared f32[5] but the op gives f32[4]"},
        Malformed{"graph @g {\n  input %x : f32[4]\n  %y = exp(%x) {k = 1, k = 2} : f32[4]\n}",
                  "m.disc:3:24: attribute `k` is given twice"},
        Malformed{"graph @g {\n  input %x : f32[4]\n  %y = exp(%x) f32[4]\n}",
                  "m.disc:3:16: expected `:` before the result types, found `f32`"},
        Malformed{"graph @g {\n  input %x : f32[99999999999999999999]\n}",
                  "m.disc:2:18: integer 99999999999999999999 does not fit in 64 bits"},
        Malformed{"graph @g {\n  input %x : f32[4] $\n}", "m.disc:2:21: unexpected character `$`"},
        Malformed{"graph @g {\n  %y = constant() {value = \"1} : f32[]\n}",
                  "m.disc:2:28: string is not closed with \""},
        Malformed{"graph @g {\n  output y = %y\n}",
                  "m.disc:2:14: value %y is not defined before this use"},
        Malformed{"graph @g {\n  sym B in [1, 8]\n  input %x : f32[B/3]\n}",
                  "m.disc:3:19: B is not exactly divisible by 3"},
        Malformed{"graph @g {\n  sym f32 in [1, 8]\n}",
                  "m.disc:2:3: `f32` is reserved and cannot name a symbol"},
        Malformed{"graph @g {\n}\ngraph @h {\n}",
                  "m.disc:3:1: expected end of input after the graph's `}`, found `graph`"},
        Malformed{"graph @g {\n  input %x : f32[-4, 10]\n}",
                  "m.disc:2:9: argument %x: dimension -4 of f32[-4, 10] is negative; a dimension "
                  "counts elements, 0 or more"},
        // S - 9 is below 0 for every S in [1, 8].
        Malformed{"graph @g {\n  sym S in [1, 8]\n  input %x : f32[S - 9]\n}",
                  "m.disc:3:9: argument %x: dimension S - 9 of f32[S - 9] is negative; a "
                  "dimension counts elements, 0 or more"},
        // Arithmetic limits point at the operand that hit them.
        Malformed{"graph @g {\n  input %x : f32[9223372036854775807 * 2]\n}",
                  "m.disc:2:40: dimension arithmetic overflows int64"},
        Malformed{"graph @g {\n  sym S in [1, 2]\n  input %x : f32[S^20 * S^20]\n}",
                  "m.disc:3:27: dimension expression degree exceeds 32"},
        Malformed{"graph @g {\n  input %x : f32[4] \xff\n}",
                  "m.disc:2:21: unexpected byte 0xff (graph text is ASCII outside comments and "
                  "strings)"},
        Malformed{"graph @g {\n  input %x : f32[4]\n  oops\n}",
                  "m.disc:3:3: expected a statement (`sym`, `limit`, `input`, `param`, `state`, "
                  "`%name = op(...)`, `output` or `update`), found `oops`"},
        Malformed{"graph @g {\n  sym B in [1, 8]\n  limit B*B 16\n}",
                  "m.disc:3:13: expected `<=` after the limited expression, as in `limit B*S <= "
                  "16384`, found integer 16"},
        Malformed{"graph @g {\n  sym B in [2, 8]\n  sym S in [3, 8]\n  limit B*S <= 5\n}",
                  "m.disc:4:3: limit B*S <= 5: even every symbol at its lower bound gives 6: raise "
                  "the bound or lower the symbols' lower bounds"}));

TEST(TextFormat, LimitsRoundTrip) {
  const char* text = R"(graph @g {
  sym B in [1, 256]
  sym S in [1, 1024]
  limit B*S <= 16384
  input %x : f32[B, S]
  output y = %x
}
)";
  auto g = parse_graph(text);
  EXPECT_EQ(print_graph(*g), text);
  EXPECT_EQ(g->shapes().limits().front().bound, 16384);
}

// A huge token is quoted by its first bytes and its size, not echoed whole.
TEST(TextFormat, LongTokensAreShortenedInMessages) {
  auto message = [](const std::string& text) {
    try {
      parse_graph(text, "m.disc");
    } catch (const ParseError& e) {
      return std::string(e.what());
    }
    return std::string("<parsed>");
  };
  std::string a60(60, 'a');
  EXPECT_EQ(message("graph @g {\n  " + std::string(1000, 'a') + "\n}"),
            "m.disc:2:3: expected a statement (`sym`, `limit`, `input`, `param`, `state`, `%name = "
            "op(...)`, `output` or `update`), found `" +
                a60 + "... (1000 bytes)`");
  EXPECT_EQ(message("graph @g {\n  input %" + std::string(1 << 20, 'a') + " : f32[4]\n}"),
            "m.disc:2:9: a name of 1048576 bytes is longer than the 1024 allowed: `" + a60 +
                "... (1048576 bytes)`");
}

TEST(TextFormat, DeepNestingIsAnErrorNotACrash) {
  std::string deep = "graph @g {\n  input %x : f32[" + std::string(10000, '(') + "1" +
                     std::string(10000, ')') + "]\n}";
  EXPECT_THROW(parse_graph(deep), ParseError);
}

TEST(TextFormat, HugeExpressionsAreErrorsNotHangs) {
  std::string big =
      "graph @g {\n  sym A in [1, 2]\n  sym B in [1, 2]\n  sym C in [1, 2]\n"
      "  input %x : f32[(A + B + C + 1)^30]\n}";
  EXPECT_THROW(parse_graph(big), ParseError);
  EXPECT_THROW(parse_graph("graph @g {\n  input %x : f32[9223372036854775807 * 2]\n}"), ParseError);
}

}  // namespace
}  // namespace disc::ir

namespace disc::ir {
namespace {

// Found by the fuzzer: 1025*S0 = 12288*S1 makes the solver derive a symbol; printing must not
// declare it until a type mentions it, or every reparse derives one more.
TEST(TextFormat, DerivedSymbolsRoundTrip) {
  const char* text = R"(graph @g {
  sym S0 in [1, 100000]
  sym S1 in [1, 100000]
  input %x : f32[S0, 1025]
  %y = reshape(%x) {shape = [S1, 12288]} : f32[S1, 12288]
  output y = %y
}
)";
  auto g = parse_graph(text);
  EXPECT_EQ(print_graph(*g), text);
  auto pm = std::make_unique<PassManager>();
  pm->add_list("canonicalize");
  pm->run(*g);
  std::string canonical = print_graph(*g);
  EXPECT_NE(canonical.find("sym S0_S1_0 in [1, 8]"), std::string::npos) << canonical;
  EXPECT_NE(canonical.find("input %x : f32[12288*S0_S1_0, 1025]"), std::string::npos) << canonical;
  EXPECT_EQ(print_graph(*parse_graph(canonical)), canonical);
}

}  // namespace
}  // namespace disc::ir
