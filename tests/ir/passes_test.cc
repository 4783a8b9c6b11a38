// The pass framework and the passes (canonicalize, cse, dce, tril, layers, attention,
// linear_cross_entropy, backward_recompute).
#include <gtest/gtest.h>

#include "base/error.h"
#include "ir/pass.h"
#include "ir/text_format.h"

namespace disc::ir {
namespace {

std::string run(const std::string& passes, const std::string& text) {
  auto g = parse_graph(text);
  PassManager pm;
  pm.add_list(passes);
  pm.run(*g);
  return print_graph(*g);
}

const char* kRedundant = R"(graph @g {
  sym B in [1, 8]
  input %x : f32[B, 4]
  %a = exp(%x) : f32[B, 4]
  %b = exp(%x) : f32[B, 4]
  %s = add(%a, %b) : f32[B, 4]
  %t = add(%b, %a) : f32[B, 4]
  %u = mul(%s, %t) : f32[B, 4]
  %dead = log(%u) : f32[B, 4]
  output u = %u
}
)";

TEST(Passes, CseMergesCommutedDuplicatesAndDceRemovesTheDead) {
  EXPECT_EQ(run("cse,dce", kRedundant), R"(graph @g {
  sym B in [1, 8]
  input %x : f32[B, 4]
  %a = exp(%x) : f32[B, 4]
  %s = add(%a, %a) : f32[B, 4]
  %u = mul(%s, %s) : f32[B, 4]
  output u = %u
}
)");
}

TEST(Passes, CseKeepsDifferentAttributesApart) {
  std::string text = R"(graph @g {
  sym B in [1, 8]
  input %x : f32[B, 4]
  %a = softmax(%x) : f32[B, 4]
  %b = softmax(%x) {axis = 0} : f32[B, 4]
  %c = sub(%a, %b) : f32[B, 4]
  %d = sub(%b, %a) : f32[B, 4]
  output c = %c
  output d = %d
}
)";
  EXPECT_EQ(run("cse", text), text);  // sub is not commutative either
}

TEST(Passes, CanonicalizeBypassesNoOpsAndFoldsChains) {
  EXPECT_EQ(run("canonicalize,dce", R"(graph @g {
  sym B in [1, 8]
  input %x : f32[B, 4]
  %r = reshape(%x) {shape = [B, 4]} : f32[B, 4]
  %t = transpose(%r) {perm = [1, 0]} : f32[4, B]
  %t2 = transpose(%t) {perm = [1, 0]} : f32[B, 4]
  %c = cast(%t2) {dtype = f32} : f32[B, 4]
  %n = neg(%c) : f32[B, 4]
  %n2 = neg(%n) : f32[B, 4]
  %r1 = reshape(%n2) {shape = [4*B]} : f32[4*B]
  %r2 = reshape(%r1) {shape = [2, 2*B]} : f32[2, 2*B]
  %s = slice(%r2) {axis = 0, limit = 2, start = 0} : f32[2, 2*B]
  %p = pad(%s) {high = [0, 0], low = [0, 0]} : f32[2, 2*B]
  output y = %p
}
)"),
            R"(graph @g {
  sym B in [1, 8]
  input %x : f32[B, 4]
  %r2 = reshape(%x) {shape = [2, 2*B]} : f32[2, 2*B]
  output y = %r2
}
)");
}

TEST(Passes, CanonicalizeReachesAFixpoint) {
  std::string once = run("canonicalize,dce", R"(graph @g {
  sym B in [1, 8]
  input %x : f32[B, 4]
  %t = transpose(%x) {perm = [1, 0]} : f32[4, B]
  %t2 = transpose(%t) {perm = [1, 0]} : f32[B, 4]
  %e = exp(%t2) : f32[B, 4]
  output y = %e
}
)");
  EXPECT_EQ(once, R"(graph @g {
  sym B in [1, 8]
  input %x : f32[B, 4]
  %e = exp(%x) : f32[B, 4]
  output y = %e
}
)");
}

TEST(Passes, CanonicalizeWritesDimsOverIndependentSymbols) {
  EXPECT_EQ(run("canonicalize", R"(graph @g {
  sym S0 in [1, 12288]
  sym S1 in [1, 4096]
  input %x : f32[S0, 1024]
  %y = reshape(%x) {shape = [S1, 12288]} : f32[S1, 12288]
  %z = full() {shape = [S0], value = 0.0} : f32[S0]
  output y = %y
  output z = %z
}
)"),
            R"(graph @g {
  sym S0 in [1, 12288]
  sym S1 in [1, 4096]
  input %x : f32[12*S1, 1024]
  %y = reshape(%x) {shape = [S1, 12288]} : f32[S1, 12288]
  %z = full() {shape = [12*S1], value = 0.0} : f32[12*S1]
  output y = %y
  output z = %z
}
)");
}

TEST(Passes, ManagerDisablesDumpsAndReports) {
  auto g = parse_graph(kRedundant);
  PassManager pm;
  pm.add_list("verify,cse,dce");
  pm.disable("dce");
  std::vector<std::string> dumped;
  pm.dump_after({"cse"}, [&](const std::string& p, const Graph& graph) {
    dumped.push_back(p + ":" + std::to_string(graph.num_nodes()));
  });
  auto runs = pm.run(*g);
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_FALSE(runs[0].changed);
  EXPECT_TRUE(runs[1].changed);
  EXPECT_TRUE(runs[2].skipped);
  EXPECT_EQ(dumped, (std::vector<std::string>{"cse:4"}));
  EXPECT_EQ(g->num_nodes(), 4u);  // dce was off: %dead survives
}

TEST(Passes, UnknownPassNamesSuggest) {
  try {
    make_pass("canonicalise");
    ADD_FAILURE();
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(),
                 "unknown pass `canonicalise` (did you mean `canonicalize`?); passes: "
                 "verify, canonicalize, cse, dce, layers, attention, linear_cross_entropy, "
                 "precision, backward_recompute, tril");
  }
  PassManager pm;
  EXPECT_THROW(pm.dump_after({"csee"}, nullptr), InvalidArgument);
}

TEST(Passes, EveryPassStatesItsContract) {
  for (const auto& name : pass_names()) {
    auto p = make_pass(name);
    EXPECT_EQ(p->name(), name);
    EXPECT_FALSE(p->summary().empty());
    EXPECT_FALSE(p->needs().empty());
    EXPECT_FALSE(p->keeps().empty());
  }
}

TEST(Passes, ModelGraphsAreStableUnderThePipeline) {
  for (const char* file : {"mlp.disc", "llama.disc"}) {
    auto g = parse_graph_file(std::string(DISC_TEST_DATA_DIR) + "/graphs/" + file);
    std::string before = print_graph(*g);
    PassManager pm;
    pm.add_list("verify,canonicalize,cse,dce");
    pm.run(*g);
    EXPECT_EQ(print_graph(*g), before) << file;
  }
}

// Causal attention and its gradient: the products reading the probabilities (%p) and the
// gradient through the mask (%ds) get tril_a. The scores' mask (-inf above the diagonal) is not
// zero there; an unmasked softmax, a mask under a softmax over another axis and a non-square
// mask are not triangular.
TEST(Passes, TrilMarksProductsReadingCausalProbabilities) {
  const std::string head = R"(graph @g {
  sym S in [1, 512]
  sym T in [1, 512]
  input %q : f32[4, S, 16]
  input %k : f32[4, S, 16]
  input %dp : f32[4, S, S]
  input %st : f32[4, S, T]
  input %v : f32[4, T, 16]
  %s = matmul(%q, %k) {transpose_b = true} : f32[4, S, S]
  %m = causal_mask(%s) : f32[4, S, S]
  %p = softmax(%m) : f32[4, S, S]
  %ds = causal_mask(%dp) {value = 0.0} : f32[4, S, S]
  %u = softmax(%s) : f32[4, S, S]
  %a = softmax(%m) {axis = 1} : f32[4, S, S]
  %r = causal_mask(%st) {value = 0.0} : f32[4, S, T]
)";
  const std::string tail = R"(  %o6 = matmul(%m, %q) : f32[4, S, 16]
  %o7 = matmul(%u, %q) : f32[4, S, 16]
  %o8 = matmul(%a, %q) : f32[4, S, 16]
  %o9 = matmul(%r, %v) : f32[4, S, 16]
  %o10 = matmul(%p, %p) {sum_batch = true, transpose_a = true} : f32[S, S]
  output o = %o1
}
)";
  const std::string before = head + R"(  %o1 = matmul(%p, %q) : f32[4, S, 16]
  %o2 = matmul(%p, %q) {transpose_a = true} : f32[4, S, 16]
  %o3 = matmul(%ds, %k) : f32[4, S, 16]
  %o4 = matmul(%ds, %q) {transpose_a = true} : f32[4, S, 16]
  %o5 = matmul(%q, %p) {transpose_a = true} : f32[4, 16, S]
)" + tail;
  const std::string after = head + R"(  %o1 = matmul(%p, %q) {tril_a = true} : f32[4, S, 16]
  %o2 = matmul(%p, %q) {transpose_a = true, tril_a = true} : f32[4, S, 16]
  %o3 = matmul(%ds, %k) {tril_a = true} : f32[4, S, 16]
  %o4 = matmul(%ds, %q) {transpose_a = true, tril_a = true} : f32[4, S, 16]
  %o5 = matmul(%q, %p) {transpose_a = true} : f32[4, 16, S]
)" + tail;
  EXPECT_EQ(run("tril", before), after);
  EXPECT_EQ(run("tril", after), after);  // marked once
}

// Attention written as primitives becomes one attention op: with the causal mask and the scale
// folded from q (%a1), without either (%a2). Probabilities read elsewhere (%p3 is an output)
// stay, as does a mask over non-square scores (%s4), and a constant another node still reads.
TEST(Passes, AttentionRewritesTheSoftmaxChain) {
  const std::string before = R"(graph @g {
  sym S in [1, 512]
  sym T in [1, 512]
  input %x : f32[2, S, 16]
  input %k : f32[2, S, 16]
  input %v : f32[2, S, 8]
  input %kt : f32[2, T, 16]
  input %vt : f32[2, T, 8]
  %c = constant() {value = 0.25} : f32[]
  %cb = broadcast(%c) {dims = [], shape = [2, S, 16]} : f32[2, S, 16]
  %q = mul(%x, %cb) : f32[2, S, 16]
  %s1 = matmul(%q, %k) {transpose_b = true} : f32[2, S, S]
  %m1 = causal_mask(%s1) : f32[2, S, S]
  %p1 = softmax(%m1) : f32[2, S, S]
  %a1 = matmul(%p1, %v) : f32[2, S, 8]
  %s2 = matmul(%x, %k) {transpose_b = true} : f32[2, S, S]
  %p2 = softmax(%s2) : f32[2, S, S]
  %a2 = matmul(%p2, %v) : f32[2, S, 8]
  %s3 = matmul(%x, %k) {transpose_b = true} : f32[2, S, S]
  %p3 = softmax(%s3) : f32[2, S, S]
  %a3 = matmul(%p3, %v) : f32[2, S, 8]
  %s4 = matmul(%x, %kt) {transpose_b = true} : f32[2, S, T]
  %m4 = causal_mask(%s4) : f32[2, S, T]
  %p4 = softmax(%m4) : f32[2, S, T]
  %a4 = matmul(%p4, %vt) : f32[2, S, 8]
  %d = mul(%c, %c) : f32[]
  output a1 = %a1
  output a2 = %a2
  output a3 = %a3
  output p3 = %p3
  output a4 = %a4
  output d = %d
}
)";
  const std::string after = R"(graph @g {
  sym S in [1, 512]
  sym T in [1, 512]
  input %x : f32[2, S, 16]
  input %k : f32[2, S, 16]
  input %v : f32[2, S, 8]
  input %kt : f32[2, T, 16]
  input %vt : f32[2, T, 8]
  %c = constant() {value = 0.25} : f32[]
  %0 = attention(%x, %k, %v) {scale = 0.25} : f32[2, S, 8]
  %1 = attention(%x, %k, %v) {causal = false} : f32[2, S, 8]
  %s3 = matmul(%x, %k) {transpose_b = true} : f32[2, S, S]
  %p3 = softmax(%s3) : f32[2, S, S]
  %a3 = matmul(%p3, %v) : f32[2, S, 8]
  %s4 = matmul(%x, %kt) {transpose_b = true} : f32[2, S, T]
  %m4 = causal_mask(%s4) : f32[2, S, T]
  %p4 = softmax(%m4) : f32[2, S, T]
  %a4 = matmul(%p4, %vt) : f32[2, S, 8]
  %d = mul(%c, %c) : f32[]
  output a1 = %0
  output a2 = %1
  output a3 = %a3
  output p3 = %p3
  output a4 = %a4
  output d = %d
}
)";
  EXPECT_EQ(run("attention", before), after);
  EXPECT_EQ(run("attention", after), after);  // nothing left to rewrite
}

// RMSNorm, SiLU and the key transpose as exported graphs write them become disc's ops, and
// attention then takes scores scaled after the product; a norm whose inner value something else
// reads stays as written.
TEST(Passes, LayersRewritesPrimitivesAsExportedGraphsWriteThem) {
  const std::string before = R"(graph @g {
  sym S in [1, 64]
  input %x : f32[S, 8]
  input %y : f32[S, 8]
  param %w : f32[8]
  input %q : f32[2, S, 4]
  input %k : f32[S, 2, 4]
  input %v : f32[2, S, 4]
  %two = constant() {value = 2.0} : f32[]
  %2b = broadcast(%two) {dims = [], shape = [S, 8]} : f32[S, 8]
  %sq = pow(%x, %2b) : f32[S, 8]
  %ms = reduce_mean(%sq) {axes = [1], keepdims = true} : f32[S, 1]
  %eps = constant() {value = 1e-05} : f32[]
  %eb = broadcast(%eps) {dims = [], shape = [S, 1]} : f32[S, 1]
  %se = add(%ms, %eb) : f32[S, 1]
  %rt = sqrt(%se) : f32[S, 1]
  %one = constant() {value = 1.0} : f32[]
  %ob = broadcast(%one) {dims = [], shape = [S, 1]} : f32[S, 1]
  %r = div(%ob, %rt) : f32[S, 1]
  %rb = broadcast(%r) {dims = [0, 1], shape = [S, 8]} : f32[S, 8]
  %n = mul(%x, %rb) : f32[S, 8]
  %wb = broadcast(%w) {dims = [1], shape = [S, 8]} : f32[S, 8]
  %h = mul(%n, %wb) : f32[S, 8]
  %g = sigmoid(%y) : f32[S, 8]
  %silu = mul(%y, %g) : f32[S, 8]
  %kt = transpose(%k) {perm = [1, 2, 0]} : f32[2, 4, S]
  %s = matmul(%q, %kt) : f32[2, S, S]
  %c = constant() {value = 0.5} : f32[]
  %cb = broadcast(%c) {dims = [], shape = [2, S, S]} : f32[2, S, S]
  %ss = mul(%s, %cb) : f32[2, S, S]
  %m = causal_mask(%ss) : f32[2, S, S]
  %p = softmax(%m) : f32[2, S, S]
  %a = matmul(%p, %v) : f32[2, S, 4]
  output h = %h
  output silu = %silu
  output a = %a
}
)";
  const std::string after = run("layers,attention", before);
  EXPECT_NE(after.find("rms_norm(%x, %w) {eps = 1e-05}"), std::string::npos) << after;
  EXPECT_NE(after.find("silu(%y)"), std::string::npos) << after;
  EXPECT_NE(after.find("transpose(%k) {perm = [1, 0, 2]}"), std::string::npos) << after;
  EXPECT_NE(after.find("{scale = 0.5}"), std::string::npos) << after;  // causal, scaled after
  for (const char* gone : {"pow", "sqrt", "sigmoid", "softmax", "causal_mask"})
    EXPECT_EQ(after.find(std::string(gone) + "("), std::string::npos) << gone << "\n" << after;
  EXPECT_EQ(run("layers,attention", after), after);  // nothing left to rewrite

  // %n read by another output: the norm is not rewritten (its primitives must stay).
  std::string shared = before;
  shared.replace(shared.find("  output a = %a\n"), 0, "  output n = %n\n");
  EXPECT_EQ(run("layers", shared).find("rms_norm("), std::string::npos);
}

// GELU as exporters write it, in its erf form and its tanh form, becomes disc's gelu.
TEST(Passes, LayersRewritesExportedGelu) {
  const std::string before = R"(graph @g {
  sym S in [1, 64]
  input %x : f32[S, 8]
  input %y : f32[S, 8]
  %r2 = constant() {value = 1.4142135623730951} : f32[]
  %r2b = broadcast(%r2) {dims = [], shape = [S, 8]} : f32[S, 8]
  %xd = div(%x, %r2b) : f32[S, 8]
  %e = erf(%xd) : f32[S, 8]
  %one = constant() {value = 1.0} : f32[]
  %oneb = broadcast(%one) {dims = [], shape = [S, 8]} : f32[S, 8]
  %e1 = add(%e, %oneb) : f32[S, 8]
  %xe = mul(%x, %e1) : f32[S, 8]
  %half = constant() {value = 0.5} : f32[]
  %halfb = broadcast(%half) {dims = [], shape = [S, 8]} : f32[S, 8]
  %gx = mul(%xe, %halfb) : f32[S, 8]
  %yy = mul(%y, %y) : f32[S, 8]
  %y3 = mul(%y, %yy) : f32[S, 8]
  %c2 = constant() {value = 0.044715} : f32[]
  %c2b = broadcast(%c2) {dims = [], shape = [S, 8]} : f32[S, 8]
  %cy3 = mul(%c2b, %y3) : f32[S, 8]
  %in = add(%y, %cy3) : f32[S, 8]
  %c1 = constant() {value = 0.7978845608028654} : f32[]
  %c1b = broadcast(%c1) {dims = [], shape = [S, 8]} : f32[S, 8]
  %arg = mul(%c1b, %in) : f32[S, 8]
  %t = tanh(%arg) : f32[S, 8]
  %t1 = add(%oneb, %t) : f32[S, 8]
  %yt = mul(%y, %t1) : f32[S, 8]
  %gy = mul(%halfb, %yt) : f32[S, 8]
  output gx = %gx
  output gy = %gy
}
)";
  const std::string after = run("layers,dce", before);
  EXPECT_NE(after.find("gelu(%x) : f32[S, 8]"), std::string::npos) << after;
  EXPECT_NE(after.find("gelu(%y) {approximate = \"tanh\"}"), std::string::npos) << after;
  for (const char* gone : {"erf(", "tanh(", "div("})
    EXPECT_EQ(after.find(gone), std::string::npos) << gone << "\n" << after;
}

// The head (h w, or h e^T with tied embeddings) and its cross-entropy become one op; logits that
// something else reads, a batched w and a transposed h stay as they are.
TEST(Passes, LinearCrossEntropyRewritesTheHead) {
  const std::string before = R"(graph @g {
  sym B in [1, 8]
  sym S in [1, 64]
  input %h : f32[B, S, 16]
  input %w : f32[16, 40]
  input %e : f32[40, 16]
  input %y : i32[B, S]
  input %wb : f32[B, 16, 40]
  %l1 = matmul(%h, %w) : f32[B, S, 40]
  %c1 = cross_entropy(%l1, %y) : f32[]
  %l2 = matmul(%h, %e) {transpose_b = true} : f32[B, S, 40]
  %c2 = cross_entropy(%l2, %y) {ignore_index = 0} : f32[]
  %l3 = matmul(%h, %w) : f32[B, S, 40]
  %c3 = cross_entropy(%l3, %y) : f32[]
  %l4 = matmul(%h, %wb) : f32[B, S, 40]
  %c4 = cross_entropy(%l4, %y) : f32[]
  output c1 = %c1
  output c2 = %c2
  output c3 = %c3
  output l3 = %l3
  output c4 = %c4
}
)";
  const std::string after = R"(graph @g {
  sym B in [1, 8]
  sym S in [1, 64]
  input %h : f32[B, S, 16]
  input %w : f32[16, 40]
  input %e : f32[40, 16]
  input %y : i32[B, S]
  input %wb : f32[B, 16, 40]
  %0, %1, %2 = linear_cross_entropy(%h, %w, %y) : f32[], f32[B, S, 16], f32[16, 40]
  %3, %4, %5 = linear_cross_entropy(%h, %e, %y) {ignore_index = 0, transpose_w = true} : f32[], f32[B, S, 16], f32[40, 16]
  %l3 = matmul(%h, %w) : f32[B, S, 40]
  %c3 = cross_entropy(%l3, %y) : f32[]
  %l4 = matmul(%h, %wb) : f32[B, S, 40]
  %c4 = cross_entropy(%l4, %y) : f32[]
  output c1 = %0
  output c2 = %3
  output c3 = %c3
  output l3 = %l3
  output c4 = %c4
}
)";
  EXPECT_EQ(run("linear_cross_entropy", before), after);
  EXPECT_EQ(run("linear_cross_entropy", after), after);  // nothing left to rewrite
}

// A training step's shape (the backward follows %loss): the backward makes silu(%g) again from %g,
// which it reads later anyway, and the broadcast constant %h with its constant. %p stays (a GEMM
// reads it in the forward), and so does %t: its operand %z is last read (by %dtz) before %t is
// first read (by %dz), so making %t again would hold %z longer.
TEST(Passes, BackwardRecomputeMakesMemoryBoundValuesAgainFromWhatTheBackwardReads) {
  const std::string forward = R"(graph @g {
  sym N in [1, 64]
  input %x : f32[N, 8]
  param %wg : f32[8, 16]
  param %wu : f32[8, 16]
  param %wd : f32[16, 8]
  %g = matmul(%x, %wg) : f32[N, 16]
  %u = matmul(%x, %wu) : f32[N, 16]
  %s = silu(%g) : f32[N, 16]
  %p = mul(%s, %u) : f32[N, 16]
  %c = constant() {value = 0.5} : f32[]
  %h = broadcast(%c) {dims = [], shape = [N, 8]} : f32[N, 8]
  %y = matmul(%p, %wd) : f32[N, 8]
  %z = mul(%y, %h) : f32[N, 8]
  %t = tanh(%z) : f32[N, 8]
  %loss = reduce_sum(%t) {axes = [0, 1]} : f32[]
  %dt = full() {shape = [N, 8], value = 1.0} : f32[N, 8]
  %dtz = mul(%dt, %z) : f32[N, 8]
  %dz = mul(%dtz, %t) : f32[N, 8]
)";
  const std::string backward_before = R"(  %dy = mul(%dz, %h) : f32[N, 8]
  %dp = matmul(%dy, %wd) {transpose_b = true} : f32[N, 16]
  %dwd = matmul(%p, %dy) {transpose_a = true} : f32[16, 8]
  %du = mul(%dp, %s) : f32[N, 16]
)";
  const std::string backward_after = R"(  %c.re = constant() {value = 0.5} : f32[]
  %h.re = broadcast(%c.re) {dims = [], shape = [N, 8]} : f32[N, 8]
  %dy = mul(%dz, %h.re) : f32[N, 8]
  %dp = matmul(%dy, %wd) {transpose_b = true} : f32[N, 16]
  %dwd = matmul(%p, %dy) {transpose_a = true} : f32[16, 8]
  %s.re = silu(%g) : f32[N, 16]
  %du = mul(%dp, %s.re) : f32[N, 16]
)";
  const std::string rest = R"(  %ds = mul(%dp, %u) : f32[N, 16]
  %sg = sigmoid(%g) : f32[N, 16]
  %dg = mul(%ds, %sg) : f32[N, 16]
  output loss = %loss
  output dwd = %dwd
  output du = %du
  output dg = %dg
}
)";
  EXPECT_EQ(run("backward_recompute", forward + backward_before + rest),
            forward + backward_after + rest);
  // Without an output `loss` there is no backward to tell apart.
  std::string no_loss = forward + backward_before + rest;
  no_loss.replace(no_loss.find("output loss"), 11, "output l0ss");
  EXPECT_EQ(run("backward_recompute", no_loss), print_graph(*parse_graph(no_loss)));
}

}  // namespace
}  // namespace disc::ir
