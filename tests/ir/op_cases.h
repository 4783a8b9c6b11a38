// One valid and one invalid use of every op, written in the text format over a shared set of
// inputs. Used by the op tests (shape inference, verification) and the round-trip tests.
#pragma once

#include <string>
#include <vector>

namespace disc::ir::testing {

// Inputs every case may use.
inline constexpr const char* kCasePreamble = R"(
  sym B in [1, 64]
  sym S in [1, 1024]
  input %x : f32[B, S, 8]
  input %y : f32[B, S, 8]
  input %xi : i32[B, S, 8]
  input %c : bool[B, S, 8]
  input %m : f32[B, 8]
  input %v8 : f32[8]
  input %w : f32[8, 16]
  input %i : i32[B, S]
  input %sq : f32[B, S, S]
  input %wide : f32[9, 8]
  input %h : f32[B, S, 2, 8]
  input %odd : f32[B, S, 7]
  input %seed : i64[]
  input %img : f32[B, 3, 32, 32]
  input %simg : f32[B, 3, S, S]
  input %kern : f32[16, 3, 3, 3]
  input %kern4 : f32[16, 4, 3, 3]
  input %tab : f32[100, 8]
  input %s : f32[]
  input %wb : bf16[8, 16]
  input %wq : u8[8, 16]
  input %wsc : f32[1]
  input %dy : f32[B, 16, 32, 32]
  input %pdy : f32[B, 3, 16, 16]
  input %off : i32[4]
  input %pos : i32[S]
)";

struct ValidCase {
  std::string op;
  std::string node;  // the right-hand side, e.g. "add(%x, %y)"
  std::string type;  // the result types the op must infer, e.g. "f32[B, 8], f32[8]"
};

struct InvalidCase {
  std::string op;
  std::string node;
  std::string error;  // a substring the error message must contain
};

std::vector<ValidCase> valid_cases();
std::vector<InvalidCase> invalid_cases();

// A whole graph holding `node` with results `%r`, `%r1`, ... declared with the types `type`.
std::string case_graph(const std::string& node, const std::string& type);

}  // namespace disc::ir::testing
