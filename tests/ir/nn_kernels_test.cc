// Reference kernels of the nn ops, their gradients and the optimizer updates: hand-checked
// examples, invariants on random inputs of awkward sizes, and central finite differences in f64
// of every gradient kernel against its forward kernel.
#include <gtest/gtest.h>
#include <tbb/global_control.h>

#include <cmath>

#include "base/error.h"
#include "ir/op_registry.h"
#include "ir/ops/kernels.h"
#include "kernel_test_util.h"

// In the namespace of kernel_test_util.h, whose Tensor, run and expect_gradient every test uses.
namespace disc::ir::testing {
namespace {

// The values of row r of `t` along `axis`.
std::vector<double> row_along(const Tensor& t, int64_t axis, int64_t r) {
  AxisRows rows = axis_rows(t.ref(), axis);
  std::vector<double> v;
  for (int64_t k = 0; k < rows.extent; ++k) v.push_back(t.get(rows.start(r) + k * rows.stride));
  return v;
}

// --- Forward kernels ---

TEST(NnKernels, SoftmaxOfOneTwoThree) {
  double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  for (DType t : {DType::kF64, DType::kF32}) {
    double tol = t == DType::kF64 ? 1e-15 : 1e-7;
    Tensor x({3}, {1, 2, 3}, t);
    Tensor y = run("softmax", {}, {&x})[0], ly = run("log_softmax", {}, {&x})[0];
    for (int k = 0; k < 3; ++k) {
      EXPECT_NEAR(y.get(k), std::exp(k + 1.0) / z, tol);
      EXPECT_NEAR(ly.get(k), k + 1.0 - std::log(z), 4 * tol);
    }
  }
}

TEST(NnKernels, SoftmaxRowsSumToOneOnAwkwardShapes) {
  struct Case {
    std::vector<int64_t> shape;
    int64_t axis;
  };
  for (auto [shape, axis] : {Case{{1}, -1}, Case{{7}, 0}, Case{{13, 7}, -1}, Case{{7, 13}, 0},
                             Case{{3, 13, 5}, 1}, Case{{2, 1, 7}, -2}, Case{{4, 1000}, -1}}) {
    for (DType t : {DType::kF64, DType::kF32}) {
      double tol = t == DType::kF64 ? 1e-12 : 2e-5;
      Tensor x = random_tensor(shape, 7, t, -8, 8);
      Attributes attrs{{"axis", axis}};
      Tensor y = run("softmax", attrs, {&x})[0], ly = run("log_softmax", attrs, {&x})[0];
      for (int64_t r = 0, n = axis_rows(x.ref(), axis).count; r < n; ++r) {
        double sum = 0;
        for (double v : row_along(y, axis, r)) sum += v;
        EXPECT_NEAR(sum, 1.0, tol);
      }
      for (int64_t i = 0; i < x.numel(); ++i) EXPECT_NEAR(ly.get(i), std::log(y.get(i)), tol * 10);
    }
  }
}

TEST(NnKernels, SoftmaxIsStableForLargeLogits) {
  Tensor x({3}, {1000, 1001, 1002}, DType::kF32), small({3}, {0, 1, 2}, DType::kF32);
  Tensor y = run("softmax", {}, {&x})[0], expected = run("softmax", {}, {&small})[0];
  for (int k = 0; k < 3; ++k) EXPECT_FLOAT_EQ(y.get(k), expected.get(k));
}

TEST(NnKernels, RmsNormExample) {
  // mean(x^2) = (9 + 16) / 2 = 12.5.
  Tensor x({1, 2}, {3, 4}), w({2}, {1, 2});
  Tensor y = run("rms_norm", {{"eps", 1e-6}}, {&x, &w})[0];
  EXPECT_NEAR(y.get(0), 3 / std::sqrt(12.5 + 1e-6), 1e-15);
  EXPECT_NEAR(y.get(1), 4 / std::sqrt(12.5 + 1e-6) * 2, 1e-15);
}

TEST(NnKernels, LayerNormExample) {
  // mean 2, biased variance 2/3.
  Tensor x({3}, {1, 2, 3}), w({3}, {1, 2, 3}), b({3}, {0.5, 0, -1});
  Tensor y = run("layer_norm", {}, {&x, &w, &b})[0];
  double s = 1 / std::sqrt(2.0 / 3 + 1e-5);
  EXPECT_NEAR(y.get(0), -s + 0.5, 1e-15);
  EXPECT_NEAR(y.get(1), 0.0, 1e-15);
  EXPECT_NEAR(y.get(2), 3 * s - 1, 1e-15);
}

TEST(NnKernels, NormsNormalizeEveryRow) {
  for (int64_t rows : {1, 7, 13}) {
    for (int64_t d : {1, 7, 13, 256}) {
      Tensor x = random_tensor({rows, d}, 3, DType::kF64, -3, 5), one({d}), zero({d});
      for (int64_t j = 0; j < d; ++j) one.set(j, 1);
      Attributes eps{{"eps", 1e-12}};
      Tensor ln = run("layer_norm", eps, {&x, &one, &zero})[0],
             rms = run("rms_norm", eps, {&x, &one})[0];
      for (int64_t r = 0; r < rows; ++r) {
        double mean = 0, var = 0, ms = 0;
        for (int64_t j = 0; j < d; ++j) mean += ln.get(r * d + j) / d;
        for (int64_t j = 0; j < d; ++j) var += std::pow(ln.get(r * d + j) - mean, 2) / d;
        for (int64_t j = 0; j < d; ++j) ms += std::pow(rms.get(r * d + j), 2) / d;
        EXPECT_NEAR(mean, 0, 1e-12);
        EXPECT_NEAR(var, d == 1 ? 0 : 1, 1e-9);  // one element: x - mean = 0
        EXPECT_NEAR(ms, 1, 1e-9);
      }
      // The affine part applies after normalization.
      Tensor w = random_tensor({d}, 4), b = random_tensor({d}, 5);
      Tensor affine = run("layer_norm", eps, {&x, &w, &b})[0];
      for (int64_t i = 0; i < x.numel(); ++i) {
        EXPECT_NEAR(affine.get(i), ln.get(i) * w.get(i % d) + b.get(i % d), 1e-12);
      }
    }
  }
}

TEST(NnKernels, CrossEntropyExample) {
  // Row 0 counts: logsumexp(1, 2, 3) - 3. Row 1 is ignored.
  Tensor logits({2, 3}, {1, 2, 3, 1, 1, 1}), labels({2}, {2, -100}, DType::kI64);
  Tensor loss = run("cross_entropy", {}, {&logits, &labels})[0];
  EXPECT_TRUE(loss.shape.empty());
  EXPECT_NEAR(loss.get(0), std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)) - 3, 1e-15);
}

TEST(NnKernels, CrossEntropyOfUniformLogitsIsLogV) {
  for (int64_t v : {1, 7, 13}) {
    Tensor logits({7, v}), labels = random_tensor({7}, 9, DType::kI32, 0, v);
    for (int64_t i = 0; i < logits.numel(); ++i) logits.set(i, 0.25);
    EXPECT_NEAR(run("cross_entropy", {}, {&logits, &labels})[0].get(0), std::log(v), 1e-14);
  }
}

TEST(NnKernels, CrossEntropyWithNoCountedLabelIsZero) {
  Tensor logits = random_tensor({3, 5}, 1), labels({3}, {7, 7, 7}, DType::kI32);
  EXPECT_EQ(run("cross_entropy", {{"ignore_index", int64_t{7}}}, {&logits, &labels})[0].get(0),
            0.0);
}

TEST(NnKernels, CrossEntropyRejectsALabelOutsideTheClasses) {
  Tensor logits = random_tensor({2, 3}, 1), labels({2}, {0, 5}, DType::kI64);
  try {
    run("cross_entropy", {}, {&logits, &labels});
    ADD_FAILURE() << "accepted label 5 of 3 classes";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("label 5 at position 1 is outside [0, 3)"),
              std::string::npos)
        << e.what();
  }
}

TEST(NnKernels, RopeRotatesPairsByPositionTimesFrequency) {
  // D = 4, theta = 100: pair 0 (x0, x2) turns by p * 1, pair 1 (x1, x3) by p * 100^(-1/2).
  Tensor x({1, 2, 4}, {1, 2, 3, 4, 1, 2, 3, 4});
  Tensor y = run("rope", {{"theta", 100.0}}, {&x})[0];
  for (int i = 0; i < 4; ++i) EXPECT_EQ(y.get(i), x.get(i));  // position 0
  double a0 = 1.0, a1 = 0.1;
  EXPECT_NEAR(y.get(4), 1 * std::cos(a0) - 3 * std::sin(a0), 1e-15);
  EXPECT_NEAR(y.get(6), 3 * std::cos(a0) + 1 * std::sin(a0), 1e-15);
  EXPECT_NEAR(y.get(5), 2 * std::cos(a1) - 4 * std::sin(a1), 1e-15);
  EXPECT_NEAR(y.get(7), 4 * std::cos(a1) + 2 * std::sin(a1), 1e-15);
}

TEST(NnKernels, RopePositionIsTheIndexAlongSeqAxis) {
  // x [S=3, H=2, D=4], every row (1, 2, 3, 4), seq_axis 0: row (p, h) turns by p * 100^(-i/2).
  Tensor x({3, 2, 4});
  for (int64_t i = 0; i < x.numel(); ++i) x.set(i, i % 4 + 1);
  Tensor y = run("rope", {{"seq_axis", int64_t{0}}, {"theta", 100.0}}, {&x})[0];
  for (int64_t p = 0; p < 3; ++p) {
    for (int64_t h = 0; h < 2; ++h) {
      int64_t row = (p * 2 + h) * 4;
      for (int i = 0; i < 2; ++i) {
        double angle = p * std::pow(100.0, -i / 2.0), x0 = i + 1, x1 = i + 3;
        EXPECT_NEAR(y.get(row + i), x0 * std::cos(angle) - x1 * std::sin(angle), 1e-15);
        EXPECT_NEAR(y.get(row + i + 2), x1 * std::cos(angle) + x0 * std::sin(angle), 1e-15);
      }
    }
  }
}

TEST(NnKernels, RopeInverseUndoesRope) {
  struct Case {
    std::vector<int64_t> shape;
    int64_t seq_axis;
  };
  for (auto [shape, axis] : {Case{{1, 1, 2}, 1}, Case{{2, 7, 3, 6}, 1}, Case{{13, 4, 10}, 0},
                             Case{{2, 13, 3, 8}, -3}, Case{{3, 64, 2, 16}, 1}}) {
    Tensor x = random_tensor(shape, 11);
    Tensor y = run("rope", {{"seq_axis", axis}}, {&x})[0];
    Tensor back = run("rope", {{"seq_axis", axis}, {"inverse", true}}, {&y})[0];
    for (int64_t i = 0; i < x.numel(); ++i) EXPECT_NEAR(back.get(i), x.get(i), 1e-14);
  }
}

TEST(NnKernels, CausalMaskHidesFutureKeys) {
  // S = 2 queries over T = 3 keys: query 0 sees keys 0..1, query 1 sees all.
  Tensor x({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor y = run("causal_mask", {}, {&x})[0];
  std::vector<double> expected = {1, 2, -INFINITY, 4, 5, 6};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(y.get(i), expected[i]);
  // Square [S, S] scores: S(S-1)/2 masked entries per matrix.
  Tensor sq = random_tensor({2, 7, 13, 13}, 2);
  Tensor m = run("causal_mask", {{"value", -1e4}}, {&sq})[0];
  int64_t masked = 0;
  for (int64_t i = 0; i < m.numel(); ++i) masked += m.get(i) == -1e4;
  EXPECT_EQ(masked, 2 * 7 * 13 * 12 / 2);
}

TEST(NnKernels, DropoutRngIsSplitMix64) {
  // Seed 0, stream 0: key 0, so element 0 gets SplitMix64's first output for seed 0.
  EXPECT_EQ(dropout_uniform(0, 0, 0), static_cast<double>(0xe220a8397b1dcdafULL >> 11) * 0x1.0p-53);
}

TEST(NnKernels, DropoutKeepsAboutOneMinusRateReproducibly) {
  Tensor x = random_tensor({100, 1009}, 5, DType::kF32, 0.5, 1.5), seed({}, {42}, DType::kI64);
  Attributes attrs{{"rate", 0.3}, {"stream", int64_t{1}}};
  Tensor y = run("dropout", attrs, {&x, &seed})[0], again = run("dropout", attrs, {&x, &seed})[0];
  Tensor other = run("dropout", {{"rate", 0.3}, {"stream", int64_t{2}}}, {&x, &seed})[0];
  int64_t kept = 0, differs = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    bool keep = y.get(i) != 0;
    kept += keep;
    differs += keep != (other.get(i) != 0);
    EXPECT_EQ(y.get(i), again.get(i));
    if (keep) {
      EXPECT_EQ(y.get(i), static_cast<float>(x.get(i) * static_cast<float>(1 / 0.7)));
    }
  }
  // 100909 draws: the kept fraction's standard deviation is 0.0014.
  EXPECT_NEAR(static_cast<double>(kept) / x.numel(), 0.7, 0.01);
  // Two independent masks disagree on 2 * 0.7 * 0.3 = 42% of the elements.
  EXPECT_NEAR(static_cast<double>(differs) / x.numel(), 0.42, 0.01);
}

TEST(NnKernels, DropoutAtRateZeroIsTheIdentity) {
  Tensor x = random_tensor({7, 13}, 6), seed({}, {3}, DType::kI64);
  Tensor y = run("dropout", {{"rate", 0.0}}, {&x, &seed})[0];
  for (int64_t i = 0; i < x.numel(); ++i) EXPECT_EQ(y.get(i), x.get(i));
}

// --- Gradient kernels against finite differences of their forward kernels ---

TEST(NnGradients, GeluBothForms) {
  Tensor zero({1}, {0}), two({1}, {2});
  Tensor x = random_tensor({7, 13}, 12, DType::kF64, -4, 4), dy = random_tensor({7, 13}, 13);
  for (std::string form : {"none", "tanh"}) {
    Attributes attrs{{"approximate", form}};
    EXPECT_NEAR(run("gelu_grad", attrs, {&zero, &two})[0].get(0), 1.0, 1e-15);  // gelu'(0) = 1/2
    expect_gradient("gelu", attrs, {x}, 0, dy, run("gelu_grad", attrs, {&x, &dy})[0]);
  }
}

TEST(NnGradients, SoftmaxAndLogSoftmaxAlongEveryAxis) {
  Tensor x = random_tensor({3, 7, 4}, 14), dy = random_tensor({3, 7, 4}, 15);
  for (const char* op : {"softmax", "log_softmax"}) {
    for (int64_t axis : {0, 1, -1}) {
      Attributes attrs{{"axis", axis}};
      Tensor y = run(op, attrs, {&x})[0];
      Tensor dx = run(std::string(op) + "_grad", attrs, {&y, &dy})[0];
      expect_gradient(op, attrs, {x}, 0, dy, dx);
    }
  }
}

TEST(NnGradients, RmsNorm) {
  for (const auto& shape : std::vector<std::vector<int64_t>>{{1, 1}, {7, 13}, {2, 3, 5}}) {
    Tensor x = random_tensor(shape, 16), w = random_tensor({shape.back()}, 17);
    Tensor dy = random_tensor(shape, 18);
    auto g = run("rms_norm_grad", {}, {&x, &w, &dy});
    expect_gradient("rms_norm", {}, {x, w}, 0, dy, g[0]);
    expect_gradient("rms_norm", {}, {x, w}, 1, dy, g[1]);
  }
}

TEST(NnGradients, LayerNorm) {
  for (const auto& shape : std::vector<std::vector<int64_t>>{{1, 2}, {7, 13}, {2, 3, 5}}) {
    Tensor x = random_tensor(shape, 19), w = random_tensor({shape.back()}, 20);
    Tensor b = random_tensor({shape.back()}, 21), dy = random_tensor(shape, 22);
    auto g = run("layer_norm_grad", {}, {&x, &w, &dy});
    for (int i = 0; i < 3; ++i) expect_gradient("layer_norm", {}, {x, w, b}, i, dy, g[i]);
  }
}

TEST(NnGradients, CrossEntropyWithIgnoredLabels) {
  Tensor logits = random_tensor({13, 7}, 23), dloss({}, {0.7});
  for (DType t : {DType::kI32, DType::kI64}) {
    Tensor labels({13}, t);
    for (int64_t r = 0; r < 13; ++r) labels.set(r, r % 4 == 1 ? -100 : (r * 5) % 7);
    Tensor g = run("cross_entropy_grad", {}, {&logits, &labels, &dloss})[0];
    expect_gradient("cross_entropy", {}, {logits, labels}, 0, dloss, g);
    for (int64_t j = 0; j < 7; ++j) EXPECT_EQ(g.get(1 * 7 + j), 0.0);  // row 1 is ignored
  }
  Tensor none({13}, std::vector<double>(13, -100), DType::kI64);
  Tensor g = run("cross_entropy_grad", {}, {&logits, &none, &dloss})[0];
  for (int64_t i = 0; i < g.numel(); ++i) EXPECT_EQ(g.get(i), 0.0);
}

TEST(NnGradients, RopeGradientIsInverseRope) {
  Tensor x = random_tensor({2, 7, 3, 6}, 24), dy = random_tensor({2, 7, 3, 6}, 25);
  Attributes attrs{{"theta", 50.0}};
  Tensor dx = run("rope", {{"theta", 50.0}, {"inverse", true}}, {&dy})[0];
  expect_gradient("rope", attrs, {x}, 0, dy, dx);
}

TEST(NnGradients, ResultsDoNotDependOnTheThreadCount) {
  Tensor x = random_tensor({512, 61}, 26, DType::kF32), w = random_tensor({61}, 27, DType::kF32);
  Tensor dy = random_tensor({512, 61}, 28, DType::kF32);
  auto many = run("layer_norm_grad", {}, {&x, &w, &dy});
  std::vector<Tensor> one;
  {
    tbb::global_control serial(tbb::global_control::max_allowed_parallelism, 1);
    one = run("layer_norm_grad", {}, {&x, &w, &dy});
  }
  for (int i = 0; i < 3; ++i) EXPECT_EQ(one[i].storage, many[i].storage) << "result " << i;
}

// --- Optimizer updates ---

TEST(OptimizerKernels, SgdOneStepByFormula) {
  Tensor p({2}, {1, -2}), g({2}, {0.5, 0.25}), buf({2}, {0.1, -0.3}), lr({}, {0.1});
  for (bool nesterov : {false, true}) {
    auto out =
        run("sgd_update", {{"momentum", 0.9}, {"weight_decay", 0.01}, {"nesterov", nesterov}},
            {&p, &g, &buf, &lr});
    for (int i = 0; i < 2; ++i) {
      double gi = g.get(i) + 0.01 * p.get(i), b = 0.9 * buf.get(i) + gi;
      EXPECT_NEAR(out[1].get(i), b, 1e-15);
      EXPECT_NEAR(out[0].get(i), p.get(i) - 0.1 * (nesterov ? gi + 0.9 * b : b), 1e-15);
    }
  }
}

// AdamW step t on one element, written out as in PyTorch's documentation.
struct Adam {
  double p, m = 0, v = 0;
  void step(double g, int t, double lr = 1e-3, double b1 = 0.9, double b2 = 0.999,
            double eps = 1e-8, double wd = 0.01) {
    p *= 1 - lr * wd;
    m = b1 * m + (1 - b1) * g;
    v = b2 * v + (1 - b2) * g * g;
    double m_hat = m / (1 - std::pow(b1, t)), v_hat = v / (1 - std::pow(b2, t));
    p -= lr * m_hat / (std::sqrt(v_hat) + eps);
  }
};

TEST(OptimizerKernels, AdamWTwoStepsByFormula) {
  Tensor p({3}, {1, -0.5, 2}), m({3}), v({3}), lr({}, {1e-3});
  std::vector<Adam> expected = {{1}, {-0.5}, {2}};
  for (int t = 1; t <= 2; ++t) {
    Tensor g = random_tensor({3}, 29 + t), step({}, {static_cast<double>(t)}, DType::kI64);
    auto out = run("adamw_update", {}, {&p, &g, &m, &v, &lr, &step});
    for (int i = 0; i < 3; ++i) {
      expected[i].step(g.get(i), t);
      EXPECT_NEAR(out[0].get(i), expected[i].p, 1e-14);
      EXPECT_NEAR(out[1].get(i), expected[i].m, 1e-15);
      EXPECT_NEAR(out[2].get(i), expected[i].v, 1e-15);
    }
    p = out[0], m = out[1], v = out[2];
  }
}

TEST(OptimizerKernels, AdamWRejectsStepZero) {
  Tensor p({1}, {1}), g({1}, {1}), m({1}), v({1}), lr({}, {1e-3}), step({}, {0}, DType::kI64);
  EXPECT_THROW(run("adamw_update", {}, {&p, &g, &m, &v, &lr, &step}), InvalidArgument);
}

TEST(OptimizerKernels, UpdatesInPlaceEqualUpdatesIntoNewBuffers) {
  Tensor p = random_tensor({13}, 32, DType::kF32), g = random_tensor({13}, 33, DType::kF32);
  Tensor m = random_tensor({13}, 34, DType::kF32), v = random_tensor({13}, 35, DType::kF32, 0, 1);
  Tensor lr({}, {0.01}, DType::kF32), step({}, {3}, DType::kI64);
  for (const char* op : {"sgd_update", "adamw_update"}) {
    Attributes attrs;
    const OpDef& def = OpRegistry::instance().get(op);
    ASSERT_EQ(apply_attr_schema(attrs, def.attrs), "");
    bool adam = std::string(op) == "adamw_update";
    std::vector<const Tensor*> in = adam ? std::vector<const Tensor*>{&p, &g, &m, &v, &lr, &step}
                                         : std::vector<const Tensor*>{&p, &g, &m, &lr};
    auto fresh = run(op, attrs, in);
    Tensor p2 = p, m2 = m, v2 = v;  // updated in place
    Bindings bindings;
    KernelArgs args{.op = op, .attrs = &attrs, .bindings = &bindings};
    for (const Tensor* t : in) args.in.push_back(t->ref());
    args.in[0] = p2.ref(), args.in[2] = m2.ref();
    if (adam) args.in[3] = v2.ref();
    args.out = {p2.ref(), m2.ref()};
    if (adam) args.out.push_back(v2.ref());
    def.reference(args);
    EXPECT_EQ(p2.storage, fresh[0].storage) << op;
    EXPECT_EQ(m2.storage, fresh[1].storage) << op;
    if (adam) {
      EXPECT_EQ(v2.storage, fresh[2].storage) << op;
    }
  }
}

}  // namespace
}  // namespace disc::ir::testing
