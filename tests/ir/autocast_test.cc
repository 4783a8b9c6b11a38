// The precision policy (ir/passes/autocast.cc): which dtype each op reads, the casts it adds, and
// what the reference kernels make of bf16 and f16 tensors (ir/ops/half_widening.h).
#include <gtest/gtest.h>

#include <cstring>

#include "base/half.h"
#include "ir/models/model.h"
#include "ir/op_registry.h"
#include "ir/pass.h"
#include "ir/passes/passes.h"
#include "ir/text_format.h"

namespace disc::ir {
namespace {

std::string autocast(const std::string& text, DType low = DType::kBF16) {
  auto g = parse_graph(text);
  PassManager pm({.precision = low});
  pm.add_list("verify,precision");
  pm.run(*g);
  return print_graph(*g);
}

// A norm, a linear layer, an activation scaled by a constant, a residual add and a loss.
const char* kBlock = R"(graph @g {
  sym B in [1, 8]
  input %x : f32[B, 4]
  input %y : i32[B]
  param %norm : f32[4]
  param %w : f32[4, 4]
  %h = rms_norm(%x, %norm) {eps = 1e-05} : f32[B, 4]
  %l = matmul(%h, %w) : f32[B, 4]
  %a = silu(%l) : f32[B, 4]
  %c = constant() {value = 0.5} : f32[]
  %cb = broadcast(%c) {dims = [], shape = [B, 4]} : f32[B, 4]
  %s = mul(%a, %cb) : f32[B, 4]
  %r = add(%x, %s) : f32[B, 4]
  %loss = cross_entropy(%r, %y) : f32[]
  output loss = %loss
}
)";

TEST(Autocast, MatmulsReadBf16NormsAndLossesF32ConstantsFollowTheirTensor) {
  EXPECT_EQ(autocast(kBlock), R"(graph @g {
  sym B in [1, 8]
  input %x : f32[B, 4]
  input %y : i32[B]
  param %norm : f32[4]
  param %w : f32[4, 4]
  %h = rms_norm(%x, %norm) {eps = 1e-05} : f32[B, 4]
  %h.bf16 = cast(%h) {dtype = bf16} : bf16[B, 4]
  %w.bf16 = cast(%w) {dtype = bf16} : bf16[4, 4]
  %l.0 = matmul(%h.bf16, %w.bf16) : bf16[B, 4]
  %a.1 = silu(%l.0) : bf16[B, 4]
  %c = constant() {value = 0.5} : f32[]
  %cb = broadcast(%c) {dims = [], shape = [B, 4]} : f32[B, 4]
  %cb.bf16 = cast(%cb) {dtype = bf16} : bf16[B, 4]
  %s.2 = mul(%a.1, %cb.bf16) : bf16[B, 4]
  %s.2.f32 = cast(%s.2) {dtype = f32} : f32[B, 4]
  %r.3 = add(%x, %s.2.f32) : f32[B, 4]
  %loss = cross_entropy(%r.3, %y) : f32[]
  output loss = %loss
}
)");
}

TEST(Autocast, F16IsTheSamePolicyAndF64IsLeftAlone) {
  std::string f16 = autocast(kBlock, DType::kF16);
  EXPECT_NE(f16.find("%l.0 = matmul(%h.f16, %w.f16) : f16[B, 4]"), std::string::npos) << f16;
  const std::string f64 = R"(graph @g {
  sym B in [1, 8]
  input %x : f64[B, 4]
  param %w : f64[4, 4]
  %l = matmul(%x, %w) : f64[B, 4]
  %s = softmax(%l) : f64[B, 4]
  output s = %s
}
)";
  EXPECT_EQ(autocast(f64), f64);
}

// After the attention pass, as the Trainer runs them: a parameter read by several matmuls is cast
// once per step (the tied embedding: once, for the head); the llama's parameters and its loss stay
// f32; every matmul, attention and the head read bf16, every norm f32.
TEST(Autocast, LlamaCastsEachParameterOnceAndKeepsTheLossF32) {
  models::Model m = models::build_llama({.vocab = 32,
                                         .hidden = 16,
                                         .layers = 2,
                                         .heads = 2,
                                         .kv_heads = 1,
                                         .ffn = 24,
                                         .tied_embeddings = true});
  Graph& g = *m.graph;
  g.keep_outputs([](const std::string&) { return false; });  // the logits too, as the Trainer
  g.add_output("loss", m.loss);
  ASSERT_TRUE(make_pass("attention")->run(g));
  ASSERT_TRUE(make_pass("linear_cross_entropy")->run(g));
  ASSERT_TRUE(make_autocast_pass(DType::kBF16)->run(g));
  make_pass("verify")->run(g);
  std::map<const Value*, int> casts;
  std::map<std::string, int> ops;
  for (const Node* n : g.nodes()) {
    const std::string& op = n->op().name;
    ++ops[op];
    if (op == "cast") ++casts[n->operand(0)];
    for (const Value* o : n->operands()) {
      const bool low = op == "matmul" || op == "attention" || op == "linear_cross_entropy";
      if (low && is_float(o->dtype())) {
        EXPECT_EQ(o->dtype(), DType::kBF16) << op;
      }
      if (op == "rms_norm") {
        EXPECT_EQ(o->dtype(), DType::kF32) << op;
      }
    }
  }
  EXPECT_EQ(ops["attention"], 2);
  EXPECT_EQ(ops["linear_cross_entropy"], 1);
  for (const auto& [v, count] : casts) EXPECT_EQ(count, 1) << v->name();
  for (const Value* p : m.params) EXPECT_EQ(p->dtype(), DType::kF32);
  EXPECT_EQ(g.find_value(g.outputs().back().second->name())->dtype(), DType::kF32);
  EXPECT_EQ(g.outputs().back().first, "loss");
}

// The head: linear_cross_entropy reads bf16 h and w and gives an f32 loss; under f16 it stays f32,
// since its gradients are made before the loss scale applies.
TEST(Autocast, TheHeadReadsBf16AndStaysF32InF16) {
  const char* head = R"(graph @g {
  sym B in [1, 8]
  input %x : f32[B, 4]
  input %y : i32[B]
  param %w : f32[4, 5]
  %loss, %dh, %dw = linear_cross_entropy(%x, %w, %y) : f32[], f32[B, 4], f32[4, 5]
  output loss = %loss
}
)";
  const std::string bf16 = autocast(head);
  EXPECT_NE(bf16.find("linear_cross_entropy(%x.bf16, %w.bf16, %y) : f32[], bf16[B, 4], bf16[4, 5]"),
            std::string::npos)
      << bf16;
  EXPECT_EQ(autocast(head, DType::kF16), print_graph(*parse_graph(head)));
}

TEST(Autocast, RefusesADtypeThatIsNotSixteenBits) {
  EXPECT_THROW(make_autocast_pass(DType::kF32), InvalidArgument);
}

// A reference kernel reads bf16 and f16 widened to f32 and rounds its results once: add of two
// bf16 values is the f32 sum rounded to bf16 (to nearest, ties to even), as a kernel computing in
// f32 registers gives.
TEST(HalfWidening, ReferenceKernelsComputeInF32AndRoundOnce) {
  for (DType t : {DType::kBF16, DType::kF16}) {
    auto to = [t](float v) { return t == DType::kBF16 ? f32_to_bf16(v) : f32_to_f16(v); };
    auto from = [t](uint16_t b) { return t == DType::kBF16 ? bf16_to_f32(b) : f16_to_f32(b); };
    std::vector<uint16_t> a = {to(1.0f), to(3.0f), to(-2.5f), to(1e-3f)},
                          b = {to(1.0f / 256), to(0.1f), to(2.5f), to(7.0f)}, out(4);
    const Attributes none;
    OpRegistry::instance().get("add").reference({.op = "add",
                                                 .in = {{t, {4}, a.data()}, {t, {4}, b.data()}},
                                                 .out = {{t, {4}, out.data()}},
                                                 .attrs = &none});
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(out[i], to(from(a[i]) + from(b[i]))) << dtype_name(t) << " [" << i << "]";
    // Layout kernels move the bits as they are.
    std::vector<uint16_t> moved(4);
    const Attributes perm = {{"perm", std::vector<int64_t>{1, 0}}};
    OpRegistry::instance()
        .get("transpose")
        .reference({.op = "transpose",
                    .in = {{t, {2, 2}, a.data()}},
                    .out = {{t, {2, 2}, moved.data()}},
                    .attrs = &perm});
    EXPECT_EQ(moved, (std::vector<uint16_t>{a[0], a[2], a[1], a[3]}));
  }
}

}  // namespace
}  // namespace disc::ir
