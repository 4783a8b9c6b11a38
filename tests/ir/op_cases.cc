#include "op_cases.h"

#include <algorithm>

namespace disc::ir::testing {

std::string case_graph(const std::string& node, const std::string& type) {
  int results = static_cast<int>(std::count(type.begin(), type.end(), ']'));
  std::string names = "%r", outputs = "  output r = %r\n";
  for (int i = 1; i < results; ++i) {
    names += ", %r" + std::to_string(i);
    outputs += "  output r" + std::to_string(i) + " = %r" + std::to_string(i) + "\n";
  }
  return std::string("graph @case {") + kCasePreamble + "  " + names + " = " + node + " : " + type +
         "\n" + outputs + "}\n";
}

std::vector<ValidCase> valid_cases() {
  std::vector<ValidCase> cases;
  for (const char* op : {"neg", "abs", "relu", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid",
                         "silu", "sin", "cos", "gelu", "erf"}) {
    cases.push_back({op, std::string(op) + "(%x)", "f32[B, S, 8]"});
  }
  cases.push_back({"neg", "neg(%xi)", "i32[B, S, 8]"});
  cases.push_back({"gelu", "gelu(%x) {approximate = \"tanh\"}", "f32[B, S, 8]"});
  for (const char* op : {"add", "sub", "mul", "div", "pow", "max", "min"}) {
    cases.push_back({op, std::string(op) + "(%x, %y)", "f32[B, S, 8]"});
  }
  for (const char* op : {"eq", "ne", "lt", "le", "gt", "ge"}) {
    cases.push_back({op, std::string(op) + "(%x, %y)", "bool[B, S, 8]"});
  }
  std::vector<ValidCase> more = {
      {"select", "select(%c, %x, %y)", "f32[B, S, 8]"},
      {"cast", "cast(%x) {dtype = bf16}", "bf16[B, S, 8]"},
      {"cast", "cast(%x) {dtype = f64}", "f64[B, S, 8]"},
      {"constant", "constant() {value = 2.5}", "f32[]"},
      {"constant", "constant() {dtype = i32, value = 3.0}", "i32[]"},
      {"full", "full() {shape = [B, 4], value = 1.0}", "f32[B, 4]"},
      {"iota", "iota() {axis = 1, shape = [S, 4]}", "i64[S, 4]"},
      {"broadcast", "broadcast(%v8) {dims = [2], shape = [B, S, 8]}", "f32[B, S, 8]"},
      {"broadcast", "broadcast(%m) {dims = [0, 2], shape = [B, S, 8]}", "f32[B, S, 8]"},
      {"reshape", "reshape(%x) {shape = [B*S, 8]}", "f32[B*S, 8]"},
      {"reshape", "reshape(%x) {shape = [B, S, 2, 4]}", "f32[B, S, 2, 4]"},
      {"transpose", "transpose(%x) {perm = [2, 0, 1]}", "f32[8, B, S]"},
      {"slice", "slice(%x) {axis = 1, limit = S, start = 1}", "f32[B, S - 1, 8]"},
      {"slice", "slice(%x) {axis = -1, limit = 6, start = 2}", "f32[B, S, 4]"},
      {"concat", "concat(%x, %y) {axis = 2}", "f32[B, S, 16]"},
      {"concat", "concat(%x, %y, %x) {axis = 1}", "f32[B, 3*S, 8]"},
      {"pad", "pad(%x) {high = [0, 0, 2], low = [0, 1, 0]}", "f32[B, S + 1, 10]"},
      {"reduce_sum", "reduce_sum(%x) {axes = [1]}", "f32[B, 8]"},
      {"reduce_max", "reduce_max(%x) {axes = [2], keepdims = true}", "f32[B, S, 1]"},
      {"reduce_mean", "reduce_mean(%x) {axes = [0, -2]}", "f32[8]"},
      {"matmul", "matmul(%x, %w)", "f32[B, S, 16]"},
      {"matmul", "matmul(%x, %y) {transpose_b = true}", "f32[B, S, S]"},
      {"matmul", "matmul(%x, %y) {transpose_a = true}", "f32[B, 8, 8]"},
      {"matmul", "matmul(%x, %y) {sum_batch = true, transpose_a = true}", "f32[8, 8]"},
      {"matmul", "matmul(%sq, %x) {tril_a = true}", "f32[B, S, 8]"},
      {"matmul", "matmul(%sq, %y) {transpose_a = true, tril_a = true}", "f32[B, S, 8]"},
      {"gather", "gather(%tab, %i)", "f32[B, S, 8]"},
      {"scatter_add", "scatter_add(%tab, %i, %x)", "f32[100, 8]"},
      {"softmax", "softmax(%x)", "f32[B, S, 8]"},
      {"log_softmax", "log_softmax(%x) {axis = 1}", "f32[B, S, 8]"},
      {"rms_norm", "rms_norm(%x, %v8)", "f32[B, S, 8]"},
      {"layer_norm", "layer_norm(%x, %v8, %v8) {eps = 0.001}", "f32[B, S, 8]"},
      {"cross_entropy", "cross_entropy(%x, %i)", "f32[]"},
      {"cross_entropy", "cross_entropy(%x, %i) {ignore_index = 0}", "f32[]"},
      {"linear_cross_entropy", "linear_cross_entropy(%x, %w, %i)",
       "f32[], f32[B, S, 8], f32[8, 16]"},
      {"linear_cross_entropy",
       "linear_cross_entropy(%x, %wide, %i) {ignore_index = 0, transpose_w = true}",
       "f32[], f32[B, S, 8], f32[9, 8]"},
      {"rope", "rope(%h)", "f32[B, S, 2, 8]"},
      {"rope", "rope(%x) {seq_axis = 1, theta = 500000.0}", "f32[B, S, 8]"},
      {"attention", "attention(%x, %y, %x)", "f32[B, S, 8]"},
      {"attention", "attention(%h, %h, %h) {causal = false, scale = 0.5}", "f32[B, S, 2, 8]"},
      {"attention_grad", "attention_grad(%x, %y, %x, %y) {scale = 0.5}",
       "f32[B, S, 8], f32[B, S, 8], f32[B, S, 8]"},
      // Packed sequences: B stands for the heads, S for the stream's tokens, %off for the offsets.
      {"attention", "attention(%x, %y, %x, %off)", "f32[B, S, 8]"},
      {"attention_grad", "attention_grad(%x, %y, %x, %y, %off) {scale = 0.5}",
       "f32[B, S, 8], f32[B, S, 8], f32[B, S, 8]"},
      {"rope", "rope(%x, %pos) {seq_axis = 1}", "f32[B, S, 8]"},
      {"causal_mask", "causal_mask(%sq)", "f32[B, S, S]"},
      {"causal_mask", "causal_mask(%sq) {value = -10000.0}", "f32[B, S, S]"},
      {"dropout", "dropout(%x, %seed) {rate = 0.1, stream = 3}", "f32[B, S, 8]"},
      {"conv2d", "conv2d(%img, %kern) {padding = [1, 1]}", "f32[B, 16, 32, 32]"},
      {"conv2d", "conv2d(%img, %kern) {stride = [2, 2]}", "f32[B, 16, 15, 15]"},
      {"conv2d", "conv2d(%simg, %kern)", "f32[B, 16, S - 2, S - 2]"},
      {"max_pool2d", "max_pool2d(%img) {kernel = [2, 2], stride = [2, 2]}", "f32[B, 3, 16, 16]"},
      {"avg_pool2d", "avg_pool2d(%img) {kernel = [3, 3], padding = [1, 1], stride = [1, 1]}",
       "f32[B, 3, 32, 32]"},
      {"pad", "pad(%x) {high = [0, 0, 0], low = [0, S, 0]}", "f32[B, 2*S, 8]"},
      {"dim_value", "dim_value() {dim = B*S + 1}", "f32[]"},
      {"rope", "rope(%h) {inverse = true}", "f32[B, S, 2, 8]"},
      {"gelu_grad", "gelu_grad(%x, %y)", "f32[B, S, 8]"},
      {"softmax_grad", "softmax_grad(%x, %y)", "f32[B, S, 8]"},
      {"log_softmax_grad", "log_softmax_grad(%x, %y) {axis = 1}", "f32[B, S, 8]"},
      {"rms_norm_grad", "rms_norm_grad(%x, %v8, %y)", "f32[B, S, 8], f32[8]"},
      {"layer_norm_grad", "layer_norm_grad(%x, %v8, %y)", "f32[B, S, 8], f32[8], f32[8]"},
      {"cross_entropy_grad", "cross_entropy_grad(%x, %i, %s)", "f32[B, S, 8]"},
      {"conv2d_grad_input", "conv2d_grad_input(%img, %kern, %dy) {padding = [1, 1]}",
       "f32[B, 3, 32, 32]"},
      {"conv2d_grad_weight", "conv2d_grad_weight(%img, %kern, %dy) {padding = [1, 1]}",
       "f32[16, 3, 3, 3]"},
      {"max_pool2d_grad", "max_pool2d_grad(%img, %pdy) {kernel = [2, 2], stride = [2, 2]}",
       "f32[B, 3, 32, 32]"},
      {"avg_pool2d_grad", "avg_pool2d_grad(%img, %pdy) {kernel = [2, 2], stride = [2, 2]}",
       "f32[B, 3, 32, 32]"},
      {"sgd_update", "sgd_update(%x, %y, %x, %s)", "f32[B, S, 8], f32[B, S, 8]"},
      {"adamw_update", "adamw_update(%x, %y, %x, %y, %s, %seed) {weight_decay = 0.1}",
       "f32[B, S, 8], f32[B, S, 8], f32[B, S, 8]"},
      {"sgd_update_compact", "sgd_update_compact(%w, %w, %wb, %s, %seed)",
       "f32[8, 16], bf16[8, 16]"},
      {"adamw_update_compact",
       "adamw_update_compact(%w, %w, %wq, %wsc, %wq, %wsc, %s, %seed) {state = \"int8\"}",
       "f32[8, 16], u8[8, 16], f32[1], u8[8, 16], f32[1]"},
      {"all_reduce", "all_reduce(%x, %w, %s)", "f32[B, S, 8], f32[8, 16], f32[]"},
      {"rank_shard", "rank_shard(%w, %seed) {ranks = 3}", "f32[43]"},
      {"all_gather", "all_gather(%v8) {ranks = 1, shape = [2, 4]}", "f32[2, 4]"},
      {"reduce_scatter", "reduce_scatter(%w, %s) {ranks = 1}", "f32[128], f32[1]"},
  };
  cases.insert(cases.end(), more.begin(), more.end());
  return cases;
}

std::vector<InvalidCase> invalid_cases() {
  std::vector<InvalidCase> cases;
  for (const char* op :
       {"exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "silu", "sin", "cos", "gelu", "erf"}) {
    cases.push_back({op, std::string(op) + "(%xi)", "expected a float dtype"});
  }
  for (const char* op : {"neg", "abs", "relu"}) {
    cases.push_back({op, std::string(op) + "(%c)", "expected a float or integer dtype"});
  }
  for (const char* op :
       {"add", "sub", "mul", "div", "pow", "max", "min", "eq", "ne", "lt", "le", "gt", "ge"}) {
    cases.push_back({op, std::string(op) + "(%x, %m)", "ranks differ"});
  }
  std::vector<InvalidCase> more = {
      {"add", "add(%x, %xi)", "insert a cast"},
      {"add", "add(%x, %y) {alpha = 1}", "unknown attribute `alpha`"},
      {"gelu", "gelu(%x) {approximate = \"fast\"}", "valid values: \"none\", \"tanh\""},
      {"select", "select(%x, %x, %y)", "must be bool"},
      {"cast", "cast(%x)", "missing attribute `dtype`"},
      {"cast", "cast(%x) {dtype = \"f16\"}", "must be a dtype, not string"},
      {"constant", "constant(%x) {value = 1.0}", "takes 0 operands, got 1"},
      {"full", "full() {shape = [B - 65], value = 0.0}", "negative dim"},
      {"iota", "iota() {axis = 1, shape = [4]}", "outside [-1, 1)"},
      {"broadcast", "broadcast(%v8) {dims = [2], shape = [B, S, 9]}", "must be 1 or equal"},
      {"broadcast", "broadcast(%m) {dims = [2, 0], shape = [B, S, 8]}", "strictly increasing"},
      {"reshape", "reshape(%x) {shape = [B, S, 9]}", "must keep the element count"},
      {"reshape", "reshape(%x) {shape = [B, 7]}", "can never equal"},
      {"transpose", "transpose(%x) {perm = [0, 0, 1]}", "permutation"},
      {"slice", "slice(%x) {axis = 1, limit = 1, start = 2}", "below `start`"},
      {"slice", "slice(%x) {axis = 2, limit = 9, start = 0}", "exceeds dim 2"},
      {"concat", "concat(%x, %m) {axis = 0}", "has rank 2, operand 0 has rank 3"},
      {"pad", "pad(%x) {high = [0, 0, 0], low = [0, 0]}", "one entry per dim"},
      {"pad", "pad(%x) {high = [0, 0, 0], low = [0, -1, 0]}", "must not be negative"},
      {"reduce_sum", "reduce_sum(%x) {axes = [3]}", "outside [-3, 3)"},
      {"reduce_max", "reduce_max(%x) {axes = [1, -2]}", "names axis 1 twice"},
      {"reduce_mean", "reduce_mean(%xi) {axes = [0]}", "expected a float dtype"},
      {"matmul", "matmul(%x, %tab)", "contraction dims must be equal"},
      {"matmul", "matmul(%v8, %v8)", "rank >= 2"},
      {"matmul", "matmul(%x, %y) {sum_batch = true}", "sum_batch needs transpose_a = true"},
      {"matmul", "matmul(%x, %w) {tril_a = true}", "tril_a needs a square operand 0"},
      {"gather", "gather(%tab, %x)", "expected i32 or i64"},
      {"scatter_add", "scatter_add(%tab, %i, %m)", "operand 2 (updates)"},
      {"softmax", "softmax(%x) {axis = 3}", "outside"},
      {"log_softmax", "log_softmax(%i)", "expected a float dtype"},
      {"rms_norm", "rms_norm(%x, %tab)", "must have rank 1"},
      {"rms_norm", "rms_norm(%x, %v8) {eps = 0.0}", "`eps` must be positive"},
      {"layer_norm", "layer_norm(%x, %v8)", "takes 3 operands, got 2"},
      {"cross_entropy", "cross_entropy(%x, %xi)", "without its last (class) dim"},
      {"linear_cross_entropy", "linear_cross_entropy(%x, %wide, %i)",
       "w's first dim must equal h's last (D)"},
      {"linear_cross_entropy", "linear_cross_entropy(%x, %w, %xi)", "must have the shape of h"},
      {"linear_cross_entropy", "linear_cross_entropy(%xi, %w, %i)", "expected a float dtype"},
      {"rope", "rope(%odd)", "must be even"},
      {"rope", "rope(%x) {seq_axis = 2}", "cannot be the last"},
      {"rope", "rope(%x, %i) {seq_axis = 1}", "positions (operand 1) need rank 1"},
      {"rope", "rope(%x, %y) {seq_axis = 1}", "expected i32 or i64"},
      {"attention", "attention(%x, %x, %x, %i)", "offsets (the last operand) need rank 1"},
      {"causal_mask", "causal_mask(%wide)", "exceeds key length"},
      {"attention", "attention(%x, %m, %x)", "must have the same rank"},
      {"attention", "attention(%x, %odd, %odd)", "k's last dim (head size) must equal q's"},
      {"attention", "attention(%xi, %xi, %xi)", "expected a float dtype"},
      {"attention_grad", "attention_grad(%x, %y, %x, %odd)", "dy dim 2 must equal"},
      {"dropout", "dropout(%x, %seed) {rate = 1.0}", "[0, 1)"},
      {"dropout", "dropout(%x, %i) {rate = 0.5}", "the seed"},
      {"conv2d", "conv2d(%img, %kern4)", "input channels"},
      {"conv2d", "conv2d(%simg, %kern) {stride = [2, 2]}", "stride 2 does not divide"},
      {"conv2d", "conv2d(%x, %kern)", "expected 4 (N, C, H, W)"},
      {"max_pool2d", "max_pool2d(%img) {kernel = [2, 2]}", "missing attribute `stride`"},
      {"avg_pool2d", "avg_pool2d(%img) {kernel = [2], stride = [2, 2]}", "needs 2 entries"},
      {"gelu_grad", "gelu_grad(%x, %m)", "ranks differ"},
      {"dim_value", "dim_value(%x) {dim = B}", "takes 0 operands, got 1"},
      {"softmax_grad", "softmax_grad(%x, %xi)", "insert a cast"},
      {"log_softmax_grad", "log_softmax_grad(%xi, %xi)", "expected a float dtype"},
      {"rms_norm_grad", "rms_norm_grad(%x, %v8, %m)", "ranks differ"},
      {"layer_norm_grad", "layer_norm_grad(%x, %v8)", "takes 3 operands, got 2"},
      {"cross_entropy_grad", "cross_entropy_grad(%x, %i, %v8)", "dloss) must be a scalar"},
      {"conv2d_grad_input", "conv2d_grad_input(%img, %kern, %img)", "dy dim 1 must equal"},
      {"conv2d_grad_weight", "conv2d_grad_weight(%img, %kern4, %dy)", "input channels"},
      {"max_pool2d_grad", "max_pool2d_grad(%img, %img) {kernel = [2, 2], stride = [2, 2]}",
       "dy dim 2 must equal"},
      {"avg_pool2d_grad", "avg_pool2d_grad(%img, %pdy) {kernel = [2, 2]}",
       "missing attribute `stride`"},
      {"sgd_update", "sgd_update(%x, %y, %x, %v8)", "(lr) must be a scalar"},
      {"adamw_update", "adamw_update(%x, %y, %x, %y, %s, %s)", "(step) must be an i64 scalar"},
      {"sgd_update_compact", "sgd_update_compact(%x, %x, %wb, %s, %seed)",
       "operand 2 is bf16[8, 16]; state bf16 holds it as bf16[B, S, 8]"},
      {"adamw_update_compact",
       "adamw_update_compact(%w, %w, %wb, %wb, %s, %seed) {state = \"int8\"}",
       "with state int8 it takes 8 operands"},
      {"all_reduce", "all_reduce(%x, %xi)", "all_reduce sums f32 or f64"},
      {"rank_shard", "rank_shard(%w, %s) {ranks = 2}", "operand 1 (rank) must be an i64 scalar"},
      {"rank_shard", "rank_shard(%x, %seed) {ranks = 2}", "must have a static shape"},
      {"all_gather", "all_gather(%v8) {ranks = 3, shape = [4, 4]}", "not one of 3 parts"},
      {"reduce_scatter", "reduce_scatter(%w, %xi) {ranks = 2}", "one dtype a bucket"},
      {"reduce_scatter", "reduce_scatter(%x) {ranks = 2}", "must have a static shape"},
  };
  cases.insert(cases.end(), more.begin(), more.end());
  return cases;
}

}  // namespace disc::ir::testing
