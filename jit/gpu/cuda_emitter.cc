// The CUDA C emitter; see cuda_emitter.h.
#include "jit/gpu/cuda_emitter.h"

#include <bit>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "base/error.h"
#include "jit/gpu/half_source.h"

namespace disc::jit {
namespace {

// Device helpers every kernel reads: NaN-skipping max (the interpreter's std::max(acc, x)) and
// the running logsumexp (the LLVM emitter's: one exp per element, the sum rescaled when the max
// grows; the max starts at the lowest finite float so that an element of -inf adds exp(-inf) = 0).
constexpr const char* kMath =
    R"(// disc: kernels generated from the kernel IR (jit/gpu/cuda_emitter.cc)
__device__ __forceinline__ float disc_max(float a, float x) { return a < x ? x : a; }
__device__ __forceinline__ float disc_sigmoidf(float x) {
  const float e = expf(-fabsf(x));
  return (x >= 0.0f ? 1.0f : e) / (1.0f + e);
}
__device__ __forceinline__ double disc_sigmoid(double x) {
  const double e = exp(-fabs(x));
  return (x >= 0.0 ? 1.0 : e) / (1.0 + e);
}
struct disc_lse { float m, s; };
__device__ __forceinline__ disc_lse disc_lse_merge(disc_lse a, disc_lse b) {
  const float m = a.m < b.m ? b.m : a.m;
  disc_lse r = {m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
  return r;
}
__device__ __forceinline__ disc_lse disc_lse_add(disc_lse a, float x) {
  const bool up = x > a.m;
  const float t = expf(-fabsf(x - a.m));
  disc_lse r = {up ? x : a.m, up ? a.s * t + 1.0f : a.s + t};
  return r;
}
)";

// round_bf16 and round_f16, after gpu_half_source()'s conversions (bf16 and f16 buffers are their
// bits, unsigned short): base/half.h's rounding in plain C, so that the host build of the same
// source (tests/jit/cuda_host_runner.h) runs it too and every NaN, subnormal and tie has the
// interpreter's bits.
constexpr const char* kRounding = R"(__device__ __forceinline__ float disc_round_bf16(float x) {
  return disc_bf16_to_f32(disc_f32_to_bf16(x));
}
__device__ __forceinline__ float disc_round_f16(float x) {
  return disc_f16_to_f32(disc_f32_to_f16(x));
}
)";

// Warp reductions: a butterfly, after which every lane holds the same bits (each step adds the
// same two values in either order). Block reductions: the warp's, lane 0's result per warp into
// shared memory, then every thread combines the warps in order (one order, so every thread gets
// the same bits). DISC_WARP: the warp's threads (the host build's one thread is a warp of 1). The
// first __syncthreads lets the previous reduction's readers of `red` finish.
constexpr const char* kReductions = R"(
#define DISC_WARP 32
__device__ __forceinline__ float disc_warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float disc_warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = disc_max(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ disc_lse disc_warp_lse_merge(disc_lse v) {
  for (int o = 16; o > 0; o >>= 1) {
    disc_lse other = {__shfl_xor_sync(0xffffffffu, v.m, o), __shfl_xor_sync(0xffffffffu, v.s, o)};
    v = disc_lse_merge(v, other);
  }
  return v;
}
__device__ __forceinline__ float disc_warp_lse(disc_lse v) {
  v = disc_warp_lse_merge(v);
  return v.m + logf(v.s);
}
__device__ float disc_block_sum(float v, float* red) {
  v = disc_warp_sum(v);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  float t = red[0];
  for (unsigned w = 1; w < (blockDim.x >> 5); ++w) t += red[w];
  return t;
}
__device__ float disc_block_max(float v, float* red) {
  v = disc_warp_max(v);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  float t = red[0];
  for (unsigned w = 1; w < (blockDim.x >> 5); ++w) t = disc_max(t, red[w]);
  return t;
}
__device__ float disc_block_lse(disc_lse v, float* red) {
  v = disc_warp_lse_merge(v);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) red[2 * (threadIdx.x >> 5)] = v.m, red[2 * (threadIdx.x >> 5) + 1] = v.s;
  __syncthreads();
  disc_lse t = {red[0], red[1]};
  for (unsigned w = 1; w < (blockDim.x >> 5); ++w) {
    disc_lse other = {red[2 * w], red[2 * w + 1]};
    t = disc_lse_merge(t, other);
  }
  return t.m + logf(t.s);
}
// Sums of doubles over the block, thread by thread in order (the row totals: few, once per call).
__device__ double disc_block_sum_f64(double v, double* part) {
  __syncthreads();
  part[threadIdx.x] = v;
  __syncthreads();
  double t = 0;
  for (unsigned w = 0; w < blockDim.x; ++w) t += part[w];
  return t;
}
)";

std::string literal(double v) {
  if (!std::isfinite(v)) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "__longlong_as_double(0x%016llxULL)",
                  static_cast<unsigned long long>(std::bit_cast<uint64_t>(v)));
    return buf;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

const char* c_type(DType t, int buffer) {
  switch (t) {
    case DType::kF32:
      return "float";
    case DType::kF64:
      return "double";
    case DType::kI32:
      return "int";
    case DType::kI64:
      return "long long";
    case DType::kBool:
      return "unsigned char";
    case DType::kBF16:
    case DType::kF16:
      return "unsigned short";  // the bits; loads and stores convert them
    default:
      throw CompileError("cuda emitter: buffer " + std::to_string(buffer) + " is " +
                         std::string(dtype_name(t)) +
                         ", which kernels cannot load (f32, f64, bf16, f16, i32, i64, bool)");
  }
}

// Value v (a float) as buffer type t stores it: f32 as it is, bf16 and f16 rounded (KernelIR::check
// allows no other output type).
std::string stored(DType t, const std::string& v) {
  if (t == DType::kBF16) return "disc_f32_to_bf16(" + v + ")";
  if (t == DType::kF16) return "disc_f32_to_f16(" + v + ")";
  return v;
}

// Columns a thread may hold column sums for in registers through a group of rows (cols up to
// this many times the block): each row then adds into registers instead of reading and writing
// the group's sums in global memory.
constexpr int kRegisterCols = 8;

class Emitter {
 public:
  Emitter(const KernelIR& k, const Bucket& b, CudaKernelSource& out)
      : k_(k), levels_(k.levels()), bucket_(b), out_(out) {}

  void emit() {
    for (int i = 0; i < k_.buffers(); ++i) c_type(k_.types[i], i);  // refuse bad types first
    plan_sums();
    // Summed scalars only (a gradient norm's squares): a warp per row, the group's rows at once,
    // their values added in row order after. A block per row would run a group's rows one after
    // another, and a [512, 512] tensor has only eight groups to spread over the GPU.
    warp_rows_ = !out_.summed.empty() && out_.col_sums == 0;
    lane_ = warp_rows_ ? "lane" : "threadIdx.x";
    lanes_ = warp_rows_ ? "DISC_WARP" : "blockDim.x";
    register_sums_ = out_.col_sums > 0 && !warp_rows_;
    plan_main();
    if (out_.has_totals) emit_totals_kernel();
    emit_main_kernel();
    if (!out_.summed.empty()) emit_sums_kernel();
    out_.body = s_.str();
  }

 private:
  // Each summed buffer's offset in a group's sums: col stores take cols floats, scalar ones 1.
  void plan_sums() {
    int cols = 0, ones = 0;
    for (int b : out_.summed) {
      offset_[b] = {cols, ones};
      (sum_access(b) == Access::kCol ? cols : ones) += 1;
    }
    per_group_ = {cols, ones};
    out_.col_sums = cols, out_.scalar_sums = ones;
  }
  Access sum_access(int buffer) const {
    for (const Instr& in : k_.code)
      if (in.op == KOp::kStore && in.buffer == buffer) return in.access;
    return Access::kScalar;
  }
  static std::string cols_times(std::pair<int, int> o) {
    return "(" + std::to_string(o.first) + "LL * cols + " + std::to_string(o.second) + "LL)";
  }

  std::string params(const std::string& tail) const {
    std::string p = "long long rows, long long cols_arg";
    for (int i = 0; i < k_.buffers(); ++i)
      p += std::string(", ") + (i < k_.inputs ? "const " : "") + c_type(k_.types[i], i) + "* b" +
           std::to_string(i);
    return p + tail;
  }
  void begin_kernel(const std::string& name, const std::string& params) {
    s_ << "\nextern \"C\" __global__ void __launch_bounds__(" << out_.block << ") " << name << "("
       << params << ") {\n";
    // A static bucket's extent is a constant the compiler folds into the loops.
    s_ << "  const long long cols = "
       << (bucket_.is_static() ? std::to_string(bucket_.lo) + "LL" : "cols_arg")
       << ";\n  (void)cols_arg;\n";
  }

  // Instruction a as an operand at level `at`: scalars are double at their own level and float
  // above it; compares are bool everywhere.
  std::string ref(int a, Level at) const {
    const std::string n = std::to_string(a);
    switch (levels_[a]) {
      case Level::kScalar:
        return (at == Level::kScalar || is_compare(k_.code[a].op) ? "s" : "sf") + n;
      case Level::kRow:
        return "r" + n;
      default:
        return "e" + n;
    }
  }
  std::string load(const Instr& in, const std::string& index, bool dbl) const {
    const std::string v = "b" + std::to_string(in.buffer) + "[" + index + "]";
    const char* real = dbl ? "double" : "float";
    const DType t = k_.types[in.buffer];
    if (t == DType::kBool) return "(" + v + " ? (" + real + ")1 : (" + real + ")0)";
    if (t == DType::kBF16 || t == DType::kF16)
      return "(" + std::string(real) + ")disc_" + (t == DType::kBF16 ? "bf16" : "f16") +
             "_to_f32(" + v + ")";
    return "(" + std::string(real) + ")" + v;
  }
  // The value of a non-reduction, non-store instruction from its operands' names.
  std::string apply(const Instr& in, const std::vector<std::string>& a, bool dbl) const {
    const std::string f = dbl ? "" : "f";
    const std::string one = dbl ? "1.0" : "1.0f", zero = dbl ? "0.0" : "0.0f";
    switch (in.op) {
      case KOp::kNeg:
        return "(-" + a[0] + ")";
      case KOp::kAbs:
        return "fabs" + f + "(" + a[0] + ")";
      case KOp::kExp:
        return "exp" + f + "(" + a[0] + ")";
      case KOp::kLog:
        return "log" + f + "(" + a[0] + ")";
      case KOp::kSqrt:
        return "sqrt" + f + "(" + a[0] + ")";
      case KOp::kRsqrt:
        return "(" + one + " / sqrt" + f + "(" + a[0] + "))";
      case KOp::kTanh:
        return "tanh" + f + "(" + a[0] + ")";
      // With e = exp(-|x|), which never overflows: 1 / (1 + e) for x >= 0, e / (1 + e) below, so
      // that a result near 0 is computed, not 1 / inf (as the LLVM emitter's).
      case KOp::kSigmoid:
        return "disc_sigmoid" + f + "(" + a[0] + ")";
      case KOp::kSilu:
        return "(" + a[0] + " * disc_sigmoid" + f + "(" + a[0] + "))";
      case KOp::kRelu:
        return "(" + a[0] + " > " + zero + " ? " + a[0] + " : " + zero + ")";
      // From f32: a scalar-level (double) value is narrowed first, as the interpreter does.
      case KOp::kRoundBf16:
      case KOp::kRoundF16: {
        const std::string r = in.op == KOp::kRoundBf16 ? "disc_round_bf16(" : "disc_round_f16(";
        return dbl ? "(double)" + r + "(float)" + a[0] + ")" : r + a[0] + ")";
      }
      case KOp::kAdd:
        return "(" + a[0] + " + " + a[1] + ")";
      case KOp::kSub:
        return "(" + a[0] + " - " + a[1] + ")";
      case KOp::kMul:
        return "(" + a[0] + " * " + a[1] + ")";
      case KOp::kDiv:
        return "(" + a[0] + " / " + a[1] + ")";
      case KOp::kMax:
        return "(" + a[0] + " > " + a[1] + " ? " + a[0] + " : " + a[1] + ")";
      case KOp::kMin:
        return "(" + a[0] + " < " + a[1] + " ? " + a[0] + " : " + a[1] + ")";
      case KOp::kPow: {
        const Instr& e = k_.code[in.args[1]];
        if (!dbl && e.op == KOp::kConst && e.value == 2) return "(" + a[0] + " * " + a[0] + ")";
        return "pow" + f + "(" + a[0] + ", " + a[1] + ")";
      }
      case KOp::kEq:
        return "(" + a[0] + " == " + a[1] + ")";
      case KOp::kNe:
        return "(" + a[0] + " != " + a[1] + ")";
      case KOp::kLt:
        return "(" + a[0] + " < " + a[1] + ")";
      case KOp::kLe:
        return "(" + a[0] + " <= " + a[1] + ")";
      case KOp::kGt:
        return "(" + a[0] + " > " + a[1] + ")";
      case KOp::kGe:
        return "(" + a[0] + " >= " + a[1] + ")";
      case KOp::kSelect:
        return "(" + a[0] + " ? " + a[1] + " : " + a[2] + ")";
      default:
        throw CompileError("cuda emitter: no code for " + std::string(kop_name(in.op)));
    }
  }
  // `const T name = value;` for instruction i at its level (double scalars and, for the totals
  // kernel, double rows).
  void define(int i, const std::string& indent, bool dbl_rows = false) {
    const Instr& in = k_.code[i];
    const Level l = levels_[i];
    const bool dbl = l == Level::kScalar || (l == Level::kRow && dbl_rows);
    std::string v;
    switch (in.op) {
      case KOp::kConst:
        v = literal(in.value);
        break;
      case KOp::kSumRows:
        v = "totals[" + std::to_string(i) + "]";
        break;
      case KOp::kColIndex:
        v = "(float)c";
        break;
      case KOp::kRowModCols:
        v = std::string(dbl ? "(double)" : "(float)") + "(row % (cols > 1 ? cols : 1LL))";
        break;
      case KOp::kLoad:
        v = load(in,
                 in.access == Access::kFull  ? "base + c"
                 : in.access == Access::kRow ? "row"
                 : in.access == Access::kCol ? "c"
                                             : "0",
                 dbl);
        break;
      case KOp::kLoadAt: {  // the column clamped to [0, cols - 1], then truncated
        const std::string t = dbl ? "double" : "float";
        const std::string at = "(long long)fmax" + std::string(dbl ? "" : "f") + "(fmin" +
                               (dbl ? "" : "f") + "(" + ref(in.args[0], l) + ", (" + t +
                               ")(cols - 1)), (" + t + ")0)";
        v = "(cols == 0 ? (" + t + ")0 : " + load(in, "base + " + at, dbl) + ")";
        break;
      }
      default: {
        std::vector<std::string> a;
        for (int x : in.args) a.push_back(ref(x, dbl && l == Level::kRow ? Level::kScalar : l));
        v = apply(in, a, dbl);
      }
    }
    const char* type = is_compare(in.op) ? "bool" : dbl ? "double" : "float";
    s_ << indent << "const " << type << " " << ref(i, l) << " = " << v << ";\n";
    if (l == Level::kScalar && !is_compare(in.op) && as_float_[i] && !dbl_rows)
      s_ << indent << "const float sf" << i << " = (float)s" << i << ";\n";
  }

  void emit_scalars(const std::vector<bool>& which) {
    for (size_t i = 0; i < k_.code.size(); ++i) {
      const KOp op = k_.code[i].op;
      if (which[i] && levels_[i] == Level::kScalar && op != KOp::kStore && op != KOp::kCheckLabels)
        define(static_cast<int>(i), "  ");
    }
  }

  // What the main kernel computes: the instructions its stores read (a sum_rows total comes from
  // the totals kernel, not from its argument), and the scalars it reads in float.
  void plan_main() {
    const int n = static_cast<int>(k_.code.size());
    live_.assign(n, false);
    as_float_.assign(n, false);
    for (int i = n - 1; i >= 0; --i) {
      const Instr& in = k_.code[i];
      if (in.op == KOp::kStore) live_[i] = true;
      if (!live_[i] || in.op == KOp::kSumRows) continue;
      for (int a : in.args) {
        live_[a] = true;
        if (levels_[a] == Level::kScalar && (levels_[i] != Level::kScalar || in.op == KOp::kStore))
          as_float_[a] = true;
      }
    }
  }

  // The element-level instructions the values `targets` read, in SSA order, into the pass body.
  void emit_elements(const std::vector<int>& targets, const std::string& indent) {
    std::vector<bool> need(k_.code.size(), false);
    for (int t : targets) need[t] = levels_[t] == Level::kElement;
    for (int i = static_cast<int>(k_.code.size()) - 1; i >= 0; --i)
      if (need[i])
        for (int a : k_.code[i].args) need[a] = need[a] || levels_[a] == Level::kElement;
    for (size_t i = 0; i < k_.code.size(); ++i)
      if (need[i]) define(static_cast<int>(i), indent);
  }

  void emit_reduction(int i) {
    const Instr& in = k_.code[i];
    const int a = in.args[0];
    s_ << "      float r" << i << ";\n      {\n";
    if (in.op == KOp::kReduceLogSumExp)
      s_ << "        disc_lse acc = {-3.40282347e+38f, 0.0f};\n";
    else
      s_ << "        float acc = "
         << (in.op == KOp::kReduceSum ? "0.0f" : "-__int_as_float(0x7f800000)") << ";\n";
    s_ << "        for (long long c = " << lane_ << "; c < cols; c += " << lanes_ << ") {\n";
    emit_elements({a}, "          ");
    const std::string x = ref(a, Level::kElement);
    s_ << "          acc = "
       << (in.op == KOp::kReduceSum   ? "acc + " + x
           : in.op == KOp::kReduceMax ? "disc_max(acc, " + x + ")"
                                      : "disc_lse_add(acc, " + x + ")")
       << ";\n        }\n";
    const char* fn = in.op == KOp::kReduceSum ? "sum" : in.op == KOp::kReduceMax ? "max" : "lse";
    s_ << "        r" << i << " = "
       << (warp_rows_ ? "disc_warp_" + std::string(fn) + "(acc)"
                      : "disc_block_" + std::string(fn) + "(acc, disc_red)")
       << ";\n      }\n";
  }

  void emit_main_kernel() {
    begin_kernel(out_.name, params(", const double* totals, float* sums"));
    bool reduces = false;
    for (size_t i = 0; i < k_.code.size(); ++i)
      reduces = reduces || (live_[i] && is_reduction(k_.code[i].op));
    if (reduces && !warp_rows_) s_ << "  __shared__ float disc_red[16];\n";
    if (warp_rows_)
      s_ << "  __shared__ float disc_rowv[" << out_.scalar_sums << "][" << out_.rows_per_group
         << "];\n  const unsigned lane = threadIdx.x % DISC_WARP, warp = threadIdx.x / "
            "DISC_WARP;\n";
    s_ << "  (void)totals;\n  (void)sums;\n";
    emit_scalars(live_);
    const bool summed = !out_.summed.empty();
    for (int b : out_.summed)
      s_ << "  const long long off" << b << " = " << cols_times(offset_[b]) << ";\n";
    s_ << "  const long long groups = (rows + " << out_.rows_per_group - 1 << ") / "
       << out_.rows_per_group << ";\n"
       << "  for (long long g = blockIdx.x; g < groups; g += gridDim.x) {\n";
    if (summed) {
      s_ << "    float* sums_g = sums + g * " << cols_times(per_group_) << ";\n"
         << "    for (long long e = threadIdx.x; e < " << cols_times(per_group_)
         << "; e += blockDim.x) sums_g[e] = 0.0f;\n"
         << "    __syncthreads();\n";
    }
    if (register_sums_) {
      s_ << "    const bool in_regs = cols <= " << kRegisterCols << "LL * blockDim.x;\n";
      for (int b : out_.summed)
        if (sum_access(b) == Access::kCol)
          s_ << "    float cs" << b << "[" << kRegisterCols << "] = {};\n";
    }
    s_ << "    const long long row_end = (g + 1) * " << out_.rows_per_group
       << " < rows ? (g + 1) * " << out_.rows_per_group << " : rows;\n"
       << "    const long long row0 = g * " << out_.rows_per_group << ";\n"
       << (warp_rows_ ? "    for (long long row = row0 + warp; row < row_end; row += blockDim.x / "
                        "DISC_WARP) {\n"
                      : "    for (long long row = row0; row < row_end; ++row) {\n")
       << "      const long long base = row * cols;\n      (void)base;\n";
    emit_row();
    s_ << "    }\n";
    if (warp_rows_) emit_ordered_sums();
    if (register_sums_) emit_register_sums_out();
    s_ << "  }\n";
    for (size_t i = 0; i < k_.code.size(); ++i) {
      const Instr& in = k_.code[i];
      if (in.op == KOp::kStore && in.access == Access::kScalar &&
          levels_[in.args[0]] == Level::kScalar)
        s_ << "  if (blockIdx.x == 0 && threadIdx.x == 0 && rows > 0) b" << in.buffer
           << "[0] = " << stored(k_.types[in.buffer], ref(in.args[0], Level::kRow)) << ";\n";
    }
    s_ << "}\n";
  }

  // One row: row-level instructions, reductions and row stores in instruction order, then the
  // final pass over the columns with every element-level store, loads before stores.
  void emit_row() {
    std::vector<int> stores;
    for (size_t i = 0; i < k_.code.size(); ++i) {
      const Instr& in = k_.code[i];
      const int n = static_cast<int>(i);
      if (in.op == KOp::kStore) {
        const std::string v = ref(in.args[0], Level::kRow);
        if (in.access == Access::kRow)
          s_ << "      if (" << lane_ << " == 0) b" << in.buffer
             << "[row] = " << stored(k_.types[in.buffer], v) << ";\n";
        else if (in.access == Access::kScalar && levels_[in.args[0]] == Level::kRow && warp_rows_)
          s_ << "      if (lane == 0) disc_rowv[" << offset_[in.buffer].second
             << "][row - row0] = " << v << ";\n";
        else if (in.access == Access::kScalar && levels_[in.args[0]] == Level::kRow)
          s_ << "      if (threadIdx.x == 0) sums_g[off" << in.buffer << "] += " << v << ";\n";
        else if (in.access != Access::kScalar)
          stores.push_back(n);
      } else if (levels_[i] == Level::kRow && live_[i]) {
        if (is_reduction(in.op))
          emit_reduction(n);
        else
          define(n, "      ");
      }
    }
    if (stores.empty()) return;
    if (!register_sums_) return emit_final_pass(stores, false);
    s_ << "      if (in_regs) {\n";
    emit_final_pass(stores, true);
    s_ << "      } else {\n";
    emit_final_pass(stores, false);
    s_ << "      }\n";
  }

  // The pass over a row's columns that stores its elements; in_regs: over the register columns,
  // adding into the column sums' registers.
  void emit_final_pass(const std::vector<int>& stores, bool in_regs) {
    std::vector<int> values;
    for (int st : stores) values.push_back(k_.code[st].args[0]);
    if (in_regs)
      emit_register_loop();
    else
      s_ << "      for (long long c = " << lane_ << "; c < cols; c += " << lanes_ << ") {\n";
    emit_elements(values, "        ");
    for (int st : stores) {
      const Instr& in = k_.code[st];
      const std::string v = ref(in.args[0], Level::kElement);
      if (in.access == Access::kFull)
        s_ << "        b" << in.buffer << "[base + c] = " << stored(k_.types[in.buffer], v)
           << ";\n";
      else if (in_regs)  // a column sum: f32 (KernelIR::check)
        s_ << "        cs" << in.buffer << "[it] += " << v << ";\n";
      else
        s_ << "        sums_g[off" << in.buffer << " + c] += " << v << ";\n";
    }
    s_ << "      }\n";
  }

  // The loop over a thread's register columns: pass `it` takes column threadIdx.x + it *
  // blockDim.x.
  void emit_register_loop() {
    s_ << "      #pragma unroll\n      for (int it = 0; it < " << kRegisterCols << "; ++it) {\n"
       << "        const long long c = threadIdx.x + it * (long long)blockDim.x;\n"
       << "        if (c >= cols) break;\n";
  }

  // After a group whose column sums were in registers: each thread's columns into its sums, the
  // same adds in the same order as summing them there row by row (the zeroing before the group
  // is overwritten).
  void emit_register_sums_out() {
    s_ << "    if (in_regs) {\n";
    emit_register_loop();
    for (int b : out_.summed)
      if (sum_access(b) == Access::kCol)
        s_ << "        sums_g[off" << b << " + c] = cs" << b << "[it];\n";
    s_ << "      }\n    }\n";
  }

  // After a warp-per-row group: its row values added into its sums in row order, the block per
  // row's order, so the group's sums are the same whichever way its rows ran.
  void emit_ordered_sums() {
    s_ << "    __syncthreads();\n    if (threadIdx.x == 0)\n"
       << "      for (long long r = 0; r < row_end - row0; ++r) {\n";
    for (int b : out_.summed)
      s_ << "        sums_g[off" << b << "] += disc_rowv[" << offset_[b].second << "][r];\n";
    s_ << "      }\n    __syncthreads();  // the next group's rows overwrite disc_rowv\n";
  }

  // Totals of row values over every row (sum_rows) and the label checks that read them, in
  // double, by one block: the interpreter's row_totals.
  void emit_totals_kernel() {
    const int n = static_cast<int>(k_.code.size());
    std::vector<bool> needed(n, false), after(n, false);
    for (int i = n - 1; i >= 0; --i) {
      const KOp op = k_.code[i].op;
      if (op == KOp::kSumRows || op == KOp::kCheckLabels) needed[i] = true;
      if (needed[i])
        for (int a : k_.code[i].args) needed[a] = true;
    }
    for (int i = 0; i < n; ++i) {
      after[i] = k_.code[i].op == KOp::kSumRows;
      for (int a : k_.code[i].args) after[i] = after[i] || after[a];
    }
    begin_kernel(out_.name + "_totals", params(", double* totals"));
    s_ << "  __shared__ double disc_part[" << out_.block << "];\n";
    for (int i = 0; i < n; ++i)
      if (needed[i] && !after[i] && levels_[i] == Level::kScalar &&
          k_.code[i].op != KOp::kCheckLabels)
        define(i, "  ", /*dbl_rows=*/true);
    std::vector<int> sums;
    for (int i = 0; i < n; ++i)
      if (k_.code[i].op == KOp::kSumRows) sums.push_back(i), s_ << "  double t" << i << " = 0;\n";
    s_ << "  for (long long row = threadIdx.x; row < rows; row += blockDim.x) {\n"
       << "    const long long base = row * cols;\n    (void)base;\n";
    for (int i = 0; i < n; ++i)
      if (needed[i] && levels_[i] == Level::kRow) define(i, "    ", /*dbl_rows=*/true);
    for (int t : sums)
      s_ << "    t" << t << " += " << ref(k_.code[t].args[0], Level::kRow) << ";\n";
    s_ << "  }\n";
    for (int t : sums)
      s_ << "  const double s" << t << " = disc_block_sum_f64(t" << t << ", disc_part);\n";
    s_ << "  if (threadIdx.x != 0) return;\n";
    for (int t : sums) s_ << "  totals[" << t << "] = s" << t << ";\n";
    for (int i = 0; i < n; ++i) {
      if (!needed[i] || levels_[i] != Level::kScalar || !after[i] || k_.code[i].op == KOp::kSumRows)
        continue;
      if (k_.code[i].op == KOp::kCheckLabels)
        s_ << "  totals[" << i << "] = s" << k_.code[i].args[0] << ";\n";
      else
        define(i, "  ", /*dbl_rows=*/true);
    }
    s_ << "}\n";
  }

  // Adds each summed element over the groups, in order, in double, into its output.
  void emit_sums_kernel() {
    std::string p = "long long groups, long long cols_arg, const float* sums";
    for (int b : out_.summed) p += ", float* b" + std::to_string(b);
    begin_kernel(out_.name + "_sums", p);
    s_ << "  const long long per_group = " << cols_times(per_group_) << ";\n"
       << "  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < per_group;\n"
       << "       e += (long long)gridDim.x * blockDim.x) {\n"
       << "    double acc = 0;\n    long long g = 0;\n"
       // Eight groups' loads in flight at a time, added in order: a few threads go over every
       // group, so their loads must overlap.
       << "    for (; g + 8 <= groups; g += 8) {\n      float v[8];\n"
       << "      for (int u = 0; u < 8; ++u) v[u] = sums[(g + u) * per_group + e];\n"
       << "      for (int u = 0; u < 8; ++u) acc += v[u];\n    }\n"
       << "    for (; g < groups; ++g) acc += sums[g * per_group + e];\n";
    for (size_t j = 0; j < out_.summed.size(); ++j) {
      const int b = out_.summed[j];
      const std::string end =
          j + 1 < out_.summed.size() ? cols_times(offset_[out_.summed[j + 1]]) : "per_group";
      s_ << "    " << (j ? "else " : "") << "if (e < " << end << ") b" << b << "[e - "
         << cols_times(offset_[b]) << "] = (float)acc;\n";
    }
    s_ << "  }\n}\n";
  }

  const KernelIR& k_;
  const std::vector<Level> levels_;
  const Bucket bucket_;
  CudaKernelSource& out_;
  std::ostringstream s_;
  std::vector<bool> live_, as_float_;          // plan_main
  bool warp_rows_ = false;                     // emit: a warp per row, not a block
  bool register_sums_ = false;                 // emit: column sums in registers where they fit
  std::string lane_, lanes_;                   // a row's first column for this thread, stride
  std::map<int, std::pair<int, int>> offset_;  // summed buffer -> (cols, ones) before it
  std::pair<int, int> per_group_;
};

}  // namespace

int64_t CudaKernelSource::sums_per_group(int64_t cols) const {
  return col_sums * cols + scalar_sums;
}

CudaKernelSource emit_cuda_kernel(const KernelIR& k, const Bucket& b, const std::string& name) {
  k.check();
  if (b.lo > b.hi || b.lo < 0)
    throw CompileError("cuda emitter: bucket " + b.str() + " holds no extent");
  CudaKernelSource out;
  out.math = std::string(kMath) + gpu_half_source() + kRounding;
  out.reductions = kReductions;
  out.name = name;
  out.block = b.hi <= 32 ? 32 : b.hi <= 64 ? 64 : b.hi <= 128 ? 128 : 256;
  out.summed = k.summed_stores();
  out.rows_per_group = out.summed.empty() ? 1 : static_cast<int>(kSumBlockRows);
  out.has_totals = k.has_row_totals();
  Emitter(k, b, out).emit();
  return out;
}

}  // namespace disc::jit
