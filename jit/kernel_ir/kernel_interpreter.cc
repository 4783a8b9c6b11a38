#include "jit/kernel_ir/kernel_interpreter.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/half.h"
#include "ir/ops/kernels.h"

namespace disc::jit {
namespace {

double load(const ir::TensorRef& b, int64_t i) {
  switch (b.dtype) {
    case DType::kF32:
      return b.as<float>()[i];
    case DType::kF64:
      return b.as<double>()[i];
    case DType::kI32:
      return b.as<int32_t>()[i];
    case DType::kI64:
      return static_cast<double>(b.as<int64_t>()[i]);
    case DType::kBool:
      return b.as<bool>()[i] ? 1.0 : 0.0;
    case DType::kBF16:
      return bf16_to_f32(b.as<uint16_t>()[i]);
    case DType::kF16:
      return f16_to_f32(b.as<uint16_t>()[i]);
    default:
      throw InvalidArgument("kernel: cannot load " + std::string(dtype_name(b.dtype)));
  }
}

// An output element: f32, or rounded from f32 to bf16 or f16 (KernelIR::check allows no other).
void store(const ir::TensorRef& b, int64_t i, double v) {
  const auto f = static_cast<float>(v);
  if (b.dtype == DType::kF32)
    b.as<float>()[i] = f;
  else
    b.as<uint16_t>()[i] = b.dtype == DType::kBF16 ? f32_to_bf16(f) : f32_to_f16(f);
}

double unary(KOp op, double x) {
  switch (op) {
    case KOp::kNeg:
      return -x;
    case KOp::kAbs:
      return std::fabs(x);
    case KOp::kExp:
      return std::exp(x);
    case KOp::kLog:
      return std::log(x);
    case KOp::kSqrt:
      return std::sqrt(x);
    case KOp::kRsqrt:
      return 1 / std::sqrt(x);
    case KOp::kTanh:
      return std::tanh(x);
    case KOp::kSigmoid:
      return 1 / (1 + std::exp(-x));
    case KOp::kSilu:
      return x / (1 + std::exp(-x));
    case KOp::kRelu:
      return x > 0 ? x : 0;
    case KOp::kRoundBf16:  // from f32, as a scalar-level (double) value is rounded too
      return bf16_to_f32(f32_to_bf16(static_cast<float>(x)));
    case KOp::kRoundF16:
      return f16_to_f32(f32_to_f16(static_cast<float>(x)));
    default:
      return 0;
  }
}

double binary(KOp op, double a, double b) {
  switch (op) {
    case KOp::kAdd:
      return a + b;
    case KOp::kSub:
      return a - b;
    case KOp::kMul:
      return a * b;
    case KOp::kDiv:
      return a / b;
    case KOp::kMax:
      return a > b ? a : b;
    case KOp::kMin:
      return a < b ? a : b;
    case KOp::kPow:
      return std::pow(a, b);
    case KOp::kEq:
      return a == b;
    case KOp::kNe:
      return a != b;
    case KOp::kLt:
      return a < b;
    case KOp::kLe:
      return a <= b;
    case KOp::kGt:
      return a > b;
    case KOp::kGe:
      return a >= b;
    default:
      return 0;
  }
}

// One row's values: per instruction, one number (scalar and row level) or one per column.
struct RowState {
  std::vector<std::vector<double>> v;
  std::vector<double*> sums;  // per buffer: its row block's sums, for summed stores
  const std::vector<double>* totals = nullptr;  // per instruction: the sum_rows totals
  double at(int i, int64_t col) const { return v[i].size() == 1 ? v[i][0] : v[i][col]; }
};

// The value at (row, col) of an instruction that is no reduction and no store; arg(j) gives its
// j-th argument there, total its sum_rows total.
template <typename Arg>
double value_of(const Instr& in, int64_t row, int64_t col, int64_t cols,
                const std::vector<ir::TensorRef>& bufs, double total, Arg arg) {
  switch (in.op) {
    case KOp::kConst:
      return in.value;
    case KOp::kColIndex:
      return static_cast<double>(col);
    case KOp::kRowModCols:
      return static_cast<double>(row % std::max<int64_t>(cols, 1));
    case KOp::kLoad: {
      const int64_t idx = in.access == Access::kFull  ? row * cols + col
                          : in.access == Access::kRow ? row
                          : in.access == Access::kCol ? col
                                                      : 0;
      return load(bufs[in.buffer], idx);
    }
    case KOp::kSumRows:
      return total;
    case KOp::kLoadAt: {
      const double at =
          std::clamp(arg(0), 0.0, static_cast<double>(std::max<int64_t>(cols, 1) - 1));
      return cols == 0 ? 0.0 : load(bufs[in.buffer], row * cols + static_cast<int64_t>(at));
    }
    case KOp::kStore:
    case KOp::kCheckLabels:
      return 0;
    case KOp::kSelect:
      return arg(0) != 0 ? arg(1) : arg(2);
    default:
      return kop_arity(in.op) == 1 ? unary(in.op, arg(0)) : binary(in.op, arg(0), arg(1));
  }
}

// Computes instruction i for the whole row (its arguments are done).
void step(const KernelIR& k, const std::vector<ir::TensorRef>& bufs,
          const std::vector<Level>& levels, int i, int64_t row, int64_t cols, RowState& s) {
  const Instr& in = k.code[i];
  const int64_t n = levels[i] == Level::kElement ? cols : 1;
  std::vector<double>& out = s.v[i];
  out.assign(n, 0.0);
  if (in.op == KOp::kReduceLogSumExp) {  // max + log(sum(exp(x - max))); -inf for a row of -inf
    double m = -std::numeric_limits<double>::infinity(), sum = 0;
    for (int64_t c = 0; c < cols; ++c) m = std::max(m, s.at(in.args[0], c));
    for (int64_t c = 0; c < cols && m != -std::numeric_limits<double>::infinity(); ++c)
      sum += std::exp(s.at(in.args[0], c) - m);
    out[0] = m + std::log(sum);
    return;
  }
  if (in.op == KOp::kReduceSum || in.op == KOp::kReduceMax) {
    const bool sum = in.op == KOp::kReduceSum;
    double acc = sum ? 0.0 : -std::numeric_limits<double>::infinity();
    for (int64_t c = 0; c < cols; ++c)
      acc = sum ? acc + s.at(in.args[0], c) : std::max(acc, s.at(in.args[0], c));
    out[0] = acc;
    return;
  }
  const double total = in.op == KOp::kSumRows ? (*s.totals)[i] : 0.0;
  for (int64_t c = 0; c < n; ++c)
    out[c] = value_of(in, row, c, cols, bufs, total, [&](int j) { return s.at(in.args[j], c); });
  if (in.op == KOp::kStore) {
    const ir::TensorRef& dst = bufs[in.buffer];
    if (in.access == Access::kFull) {
      for (int64_t c = 0; c < cols; ++c) store(dst, row * cols + c, s.at(in.args[0], c));
    } else if (in.access == Access::kCol) {
      for (int64_t c = 0; c < cols; ++c) s.sums[in.buffer][c] += s.at(in.args[0], c);
    } else if (in.access == Access::kScalar && levels[in.args[0]] == Level::kRow) {
      s.sums[in.buffer][0] += s.at(in.args[0], 0);
    } else {
      store(dst, in.access == Access::kRow ? row : 0, s.at(in.args[0], 0));
    }
  }
}

}  // namespace

std::vector<double> row_totals(const KernelIR& k, const std::vector<ir::TensorRef>& buffers,
                               int64_t rows, int64_t cols) {
  const std::vector<Level> levels = k.levels();
  const int n = static_cast<int>(k.code.size());
  std::vector<double> totals(n, 0.0);
  if (!k.has_row_totals()) return totals;
  // The instructions the totals read (scalar and row level, no reductions: KernelIR::check).
  std::vector<bool> needed(n, false);
  for (int i = n - 1; i >= 0; --i) {
    if (k.code[i].op == KOp::kSumRows || k.code[i].op == KOp::kCheckLabels) needed[i] = true;
    if (needed[i])
      for (int a : k.code[i].args) needed[a] = true;
  }
  // Scalar values that come after a total (they read one) are computed after the rows.
  std::vector<bool> after(n, false);
  for (int i = 0; i < n; ++i) {
    after[i] = k.code[i].op == KOp::kSumRows;
    for (int a : k.code[i].args) after[i] = after[i] || after[a];
  }
  RowState s;
  s.totals = &totals;
  s.v.assign(n, {});
  for (int i = 0; i < n; ++i)
    if (needed[i] && levels[i] == Level::kScalar && !after[i])
      step(k, buffers, levels, i, 0, cols, s);
  // Row values an instruction at a time over every row (a few instructions over thousands of
  // rows: no per-row dispatch), then each total with its rows in order.
  std::vector<std::vector<double>> per_row(n);
  auto at = [&](int a, int64_t r) { return levels[a] == Level::kRow ? per_row[a][r] : s.v[a][0]; };
  for (int i = 0; i < n; ++i) {
    if (!needed[i] || levels[i] != Level::kRow) continue;
    const Instr& in = k.code[i];
    std::vector<double>& v = per_row[i];
    v.resize(rows);
    for (int64_t r = 0; r < rows; ++r)
      v[r] = value_of(in, r, 0, cols, buffers, 0.0, [&](int j) { return at(in.args[j], r); });
  }
  for (int i = 0; i < n; ++i)
    if (k.code[i].op == KOp::kSumRows)
      for (int64_t r = 0; r < rows; ++r) totals[i] += at(k.code[i].args[0], r);
  for (int i = 0; i < n; ++i) {  // the checks and the scalar values they read, totals included
    if (!needed[i] || levels[i] != Level::kScalar || !after[i]) continue;
    step(k, buffers, levels, i, 0, cols, s);
    if (k.code[i].op == KOp::kCheckLabels && s.v[k.code[i].args[0]][0] != 0)
      throw_bad_labels(static_cast<int64_t>(s.v[k.code[i].args[0]][0]), cols);
  }
  return totals;
}

void interpret(const KernelIR& k, const std::vector<ir::TensorRef>& buffers) {
  const Space sp = space_of(k, buffers);
  const std::vector<Level> levels = k.levels();
  const int n = static_cast<int>(k.code.size());
  const std::vector<int> sums = k.summed_stores();
  if (sp.rows == 0) {
    // Nothing per row; scalar outputs still get their value (a sum over no rows is 0).
    for (const Instr& in : k.code)
      if (in.op == KOp::kStore && in.access == Access::kScalar &&
          levels[in.args[0]] == Level::kScalar)
        throw InvalidArgument("kernel: a scalar store over an empty space");
  }
  const std::vector<double> totals = row_totals(k, buffers, sp.rows, sp.cols);
  // Summed stores: per block of rows, in double, rows in order; then the blocks in order.
  const int64_t blocks = (sp.rows + kSumBlockRows - 1) / kSumBlockRows;
  std::vector<std::vector<double>> partial(k.buffers());
  for (int b : sums) partial[b].assign(blocks * buffers[b].numel(), 0.0);
  ir::parallel_rows(blocks, [&](int64_t block) {
    RowState s;
    s.totals = &totals;
    s.sums.assign(k.buffers(), nullptr);
    for (int b : sums) s.sums[b] = partial[b].data() + block * buffers[b].numel();
    for (int64_t row = block * kSumBlockRows; row < std::min(sp.rows, (block + 1) * kSumBlockRows);
         ++row) {
      s.v.assign(n, {});
      for (int i = 0; i < n; ++i) {
        // Scalar stores of scalar values happen once, from the first row.
        const Instr& in = k.code[i];
        if (in.op == KOp::kStore && in.access == Access::kScalar &&
            levels[in.args[0]] == Level::kScalar && row != 0)
          continue;
        step(k, buffers, levels, i, row, sp.cols, s);
      }
    }
  });
  for (int b : sums) {
    float* dst = buffers[b].as<float>();
    const int64_t len = buffers[b].numel();
    for (int64_t c = 0; c < len; ++c) {
      double acc = 0;
      for (int64_t block = 0; block < blocks; ++block) acc += partial[b][block * len + c];
      dst[c] = static_cast<float>(acc);
    }
  }
}

}  // namespace disc::jit
