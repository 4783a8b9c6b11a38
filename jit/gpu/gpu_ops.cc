#include "jit/gpu/gpu_ops.h"

#include <algorithm>
#include <cstdlib>

#include "base/error.h"
#include "devices/cpu/linear_cross_entropy.h"
#include "ir/ops/attention_dims.h"
#include "ir/ops/index_math.h"
#include "ir/ops/kernels.h"
#include "jit/gpu/attention_mma_source.h"
#include "jit/gpu/gpu_op_source.h"

namespace disc::jit {
namespace {

constexpr unsigned kBlock = 128;
constexpr unsigned kRowBlock = 256;  // DISC_ROW_BLOCK in gpu_ops.cu
// linear_cross_entropy's panel of f32 logits: chunks of rows large enough that its GEMMs fill a
// GPU (524 rows at a vocabulary of 32000).
constexpr int64_t kHeadPanel = int64_t{64} << 20;

// The op source's element type for a float dtype, and the suffix of its kernels' names; null for
// a type the float kernels do not take.
const char* element_type(DType t) {
  return t == DType::kF32    ? "float"
         : t == DType::kBF16 ? "disc_bf16"
         : t == DType::kF16  ? "disc_f16"
                             : nullptr;
}
std::string suffix(DType t) {
  return "_" + std::string(dtype_name(t));
}

// Threads for attention's kernels, which run a block per tile of kBlock rows of one head.
int64_t tiled(int64_t heads, int64_t rows) {
  return heads * ((rows + kBlock - 1) / kBlock) * kBlock;
}

// disc_perm in gpu_ops.cu, field for field.
struct Perm {
  long long out_dims[8];
  long long in_strides[8];
  int rank;
};

}  // namespace

bool GpuOps::tensor_cores(const std::string& arch, const Module& m) {
  auto fits = [](int n) { return n > 0 && n % 16 == 0 && n <= 128; };
  const bool sm80 = arch.rfind("sm_", 0) == 0 && std::atoi(arch.c_str() + 3) >= 80;
  return is_half_float(m.type) && fits(m.d) && fits(m.dv) && (sm80 || arch == "host");
}

// The function `name` of the op kernels' module, compiled and loaded on first use; attention's
// kernels come in a module per head size (d, dv) and element type.
devices::GpuDevice::Kernel GpuOps::kernel(const std::string& name, const Module& m) {
  std::lock_guard lock(mu_);
  const std::string key = name + suffix(m.type);
  if (auto it = kernels_.find(key); it != kernels_.end()) return it->second;
  KernelRun unused;
  return kernels_[key] = dev_.load_kernel(image(m, unused), name);
}

KernelRun GpuOps::prepare(const Module& m) {
  std::lock_guard lock(mu_);
  KernelRun run;
  image(m, run);
  return run;
}

// The module image of `m`, compiled on first use; the caller holds mu_.
const std::string& GpuOps::image(const Module& m, KernelRun& run) {
  auto [it, added] = images_.try_emplace({m.d, m.dv, m.type});
  if (!added) return it->second;
  std::string source = gpu_op_source();
  const std::string sizes =
      "(" + std::to_string(m.d) + ", " + std::to_string(m.dv) + ", " + element_type(m.type) + ")\n";
  if (m.d > 0) source += "DISC_ATTENTION" + sizes;
  if (tensor_cores(dev_.arch(), m))
    source += attention_mma_source() + ("DISC_ATTENTION_MMA" + sizes);
  try {
    it->second = compile_(source, run);
  } catch (...) {
    images_.erase(it);
    throw;
  }
  return it->second;
}

void GpuOps::launch(const std::string& name, int64_t items, void** params, const Module& m) {
  const int64_t blocks = std::clamp<int64_t>((items + kBlock - 1) / kBlock, 1, int64_t{1} << 30);
  launch(name, {static_cast<unsigned>(blocks), kBlock, 0}, params, m);
}

void GpuOps::launch(const std::string& name, const devices::LaunchShape& shape, void** params,
                    const Module& m) {
  dev_.launch(kernel(name, m), shape, params);
}

void GpuOps::transpose(const ir::KernelArgs& a) {
  const std::vector<int64_t>& perm = a.a().get_ints("perm");
  const ir::TensorRef &in = a.in[0], &out = a.out[0];
  Perm p{};
  p.rank = in.rank();
  const std::vector<int64_t> in_strides = ir::row_major_strides(in.shape);
  for (int d = 0; d < p.rank; ++d)
    p.out_dims[d] = out.shape[d], p.in_strides[d] = in_strides[perm[d]];
  long long n = out.numel();
  void* src = in.data;
  void* dst = out.data;
  void* params[] = {&src, &dst, &n, &p};
  launch("disc_transpose_" + std::to_string(dtype_size(in.dtype)), n, params);
}

void GpuOps::rope(const ir::KernelArgs& a) {
  const ir::TensorRef& in = a.in[0];
  int64_t axis = a.a().get_int("seq_axis");
  if (axis < 0) axis += in.rank();
  const ir::AxisSplit split = ir::split_at(in.shape, static_cast<int>(axis));
  long long d = in.shape.back(), rows = in.numel() / std::max<int64_t>(d, 1), seq = split.extent,
            inner = split.inner;
  double theta = a.a().get_float("theta"), sign = a.a().get_bool("inverse") ? -1.0 : 1.0;
  void* tab = rope_table(d, seq, theta);
  void* x = in.data;
  void* y = a.out[0].data;
  // Packed sequences' positions (i32, checked to lie in the table), or null.
  void* pos = a.in.size() > 1 ? a.in[1].data : nullptr;
  unsigned long long tag = pos ? checks_.add_index_check(a.op, seq) : 0;
  void* bad = pos ? checks_.record() : nullptr;
  void* params[] = {&x, &y, &rows, &d, &inner, &seq, &tab, &sign, &pos, &bad, &tag};
  launch("disc_rope" + suffix(in.dtype), rows * (d / 2), params);
}

// Rope's cosines and sines for head size d and `theta`, at positions [0, seq) at least: refilled
// only when the head size or theta change or the sequences grow past the positions it holds.
void* GpuOps::rope_table(long long d, long long seq, double theta) {
  RopeTable& t = rope_table_;
  if (d == t.d && theta == t.theta && seq <= t.positions) return t.values.get(0);
  long long positions =
      std::max<long long>({seq, t.d == d && t.theta == theta ? t.positions : 0, 1});
  void* tab = t.values.get(static_cast<size_t>(positions * std::max<long long>(d / 2, 1)) * 2 *
                           sizeof(double));
  void* params[] = {&tab, &positions, &d, &theta};
  launch("disc_rope_table", positions * (d / 2), params);
  t.d = d, t.theta = theta, t.positions = positions;
  return tab;
}

// gather(table, indices) and scatter_add(base, indices, updates) over rows of the table's
// trailing elements; a bad index is left in checks() for its raise(), which reports it as the
// reference kernels do.
void GpuOps::indexed(const ir::KernelArgs& a, bool scatter) {
  const ir::TensorRef &table = a.in[0], &idx = a.in[1];
  long long rows = table.shape.empty() ? 1 : table.shape[0];
  long long cols = table.numel() / std::max<long long>(rows, 1), n = idx.numel();
  unsigned long long tag = checks_.add_index_check(a.op, rows);
  void* bad = checks_.record();
  const std::string suffix = idx.dtype == DType::kI32 ? "_i32" : "_i64";
  void* out = a.out[0].data;
  void* indices = idx.data;
  if (scatter) {
    if (out != table.data)
      dev_.copy(out, table.data, static_cast<size_t>(table.bytes()),
                devices::CopyKind::kDeviceToDevice);
    // The positions in (row, position) order, then a thread per column and run of one row.
    void* updates = a.in[2].data;
    void* order = order_.get(static_cast<size_t>(std::max<long long>(n, 1)) * sizeof(int));
    void* ranks[] = {&indices, &n, &rows, &order, &bad, &tag};
    launch("disc_scatter_order" + suffix, n, ranks);
    void* runs[] = {&out, &indices, &updates, &order, &n, &rows, &cols};
    launch("disc_scatter_runs" + suffix, n * cols, runs);
  } else {
    void* src = table.data;
    void* params[] = {&src, &indices, &out, &n, &rows, &cols, &bad, &tag};
    launch("disc_gather" + suffix, n * cols, params);
  }
}

// attention(q, k, v) -> out; attention_grad(q, k, v, dout) -> dq, dk, dv: q [..., sq, d],
// k [..., sk, d], v [..., sk, dv], the leading dims flattened into heads. Packed sequences (the
// offsets operand, i32 on the device) take each row (key) over its own sequence's keys (queries),
// on the tensor cores as on the row kernels.
void GpuOps::attention(const ir::KernelArgs& a, bool grad) {
  const size_t offsets_at = grad ? 4 : 3;
  const ir::AttentionDims s = ir::attention_dims(a.in[0], a.in[2], a.a());
  long long heads = s.heads, sq = s.sq, sk = s.sk;
  void* offsets = a.in.size() > offsets_at ? a.in[offsets_at].data : nullptr;
  long long sequences = offsets ? a.in[offsets_at].numel() - 1 : 0;
  const int d = static_cast<int>(s.d), dv = static_cast<int>(s.dv);
  int causal = s.causal;
  float scale = static_cast<float>(s.scale);
  const std::string sizes = "_" + std::to_string(d) + "_" + std::to_string(dv);
  const Module m{d, dv, a.in[0].dtype};
  void *pq = a.in[0].data, *pk = a.in[1].data, *pv = a.in[2].data;
  // On the tensor cores: blocks of kBlock threads, 16 rows a warp.
  const bool mma = tensor_cores(dev_.arch(), m);
  auto mma_tiles = [&](long long rows) {
    const long long per_block = kBlock / 32 * 16;
    return devices::LaunchShape{
        static_cast<unsigned>(std::max<long long>(heads * ((rows + per_block - 1) / per_block), 1)),
        kBlock, 0};
  };
  if (!grad) {
    void* o = a.out[0].data;
    void* params[] = {&pq, &pk, &pv, &o, &heads, &sq, &sk, &causal, &scale, &offsets, &sequences};
    if (mma) return launch("disc_attention_mma_fwd" + sizes, mma_tiles(sq), params, m);
    return launch("disc_attention_fwd" + sizes, tiled(heads, sq), params, m);
  }
  void *dout = a.in[3].data, *dq = a.out[0].data, *dk = a.out[1].data, *ddv = a.out[2].data;
  void* stats =
      stats_.get(static_cast<size_t>(std::max<long long>(heads * sq, 1)) * 2 * sizeof(float));
  void* rows[] = {&pq, &pk, &pv,     &dout,  &dq,      &stats,    &heads,
                  &sq, &sk, &causal, &scale, &offsets, &sequences};
  if (mma) {
    launch("disc_attention_mma_bwd_q" + sizes, mma_tiles(sq), rows, m);
    void* keys[] = {&pq,    &pk, &pv, &dout,   &stats, &dk,      &ddv,
                    &heads, &sq, &sk, &causal, &scale, &offsets, &sequences};
    return launch("disc_attention_mma_bwd_kv" + sizes, mma_tiles(sk), keys, m);
  }
  launch("disc_attention_bwd_q" + sizes, tiled(heads, sq), rows, m);
  void* values[] = {&pq, &pk, &dout,   &stats, &ddv,     &heads,
                    &sq, &sk, &causal, &scale, &offsets, &sequences};
  launch("disc_attention_bwd_v" + sizes, tiled(heads, sk), values, m);
  void* keys[] = {&pq, &pk, &pv,     &dout,  &stats,   &dk,       &heads,
                  &sq, &sk, &causal, &scale, &offsets, &sequences};
  launch("disc_attention_bwd_k" + sizes, tiled(heads, sk), keys, m);
}

// linear_cross_entropy(h, w, labels) -> loss, dh, dw as devices/cpu/linear_cross_entropy.cc runs it
// on the CPU: chunks of rows through the device's GEMM into a panel of f32 logits, the panel's rows
// by disc_lce_rows into their gradient G, two more GEMMs for dh's rows and dw's share. The labels
// are counted and checked on the device (a bad one reported through checks()). A 16-bit head
// multiplies its own operands on the tensor cores: logits summed in f32 into the f32 panel
// (GemmArgs::c_f32), G rounded once to the head's type for dh = G w and dw = G^T h, as PyTorch's
// autocast does, and dw summed over the chunks in f32 and rounded once at the end. The CPU's
// widened head keeps G in f32; the two differ by G's rounding (8 bits for bf16, 11 for f16).
void GpuOps::linear_cross_entropy(const ir::KernelArgs& a) {
  const ir::TensorRef &h = a.in[0], &w = a.in[1], &labels = a.in[2];
  const DType type = h.dtype;
  const bool half = is_half_float(type);
  const bool tw = a.a().get_bool("transpose_w");
  long long rows = labels.numel(), classes = w.shape[tw ? 0 : 1],
            ignore = a.a().get_int("ignore_index");
  const int64_t d = h.shape.back();
  void* count = count_labels(a, classes, ignore);
  const int64_t chunk = std::clamp<int64_t>(kHeadPanel / std::max<int64_t>(classes * 4, 1), 1,
                                            std::max<long long>(rows, 1));
  const size_t cells = static_cast<size_t>(chunk * classes);
  void* panel = panel_.get(cells * sizeof(float));
  void* g = half ? gradient_.get(cells * dtype_size(type)) : panel;
  auto* terms = static_cast<double*>(
      terms_.get(static_cast<size_t>(std::max<long long>(rows, 1)) * sizeof(double)));
  auto gemm = [&](int64_t m, int64_t n, int64_t k, const void* x, bool tx, const void* y, bool ty,
                  void* out, bool accumulate, bool c_f32) {
    dev_.gemm({.dtype = type,
               .m = m,
               .n = n,
               .k = k,
               .transpose_a = tx,
               .transpose_b = ty,
               .accumulate = accumulate,
               .a = x,
               .b = y,
               .c = out,
               .c_f32 = c_f32});
  };
  const size_t elem = dtype_size(type);
  void* dw =
      half ? dw_sum_.get(static_cast<size_t>(a.out[2].numel()) * sizeof(float)) : a.out[2].data;
  dev_.zero(dw, static_cast<size_t>(a.out[2].numel()) * sizeof(float));
  const std::string rows_kernel =
      std::string(labels.dtype == DType::kI32 ? "disc_lce_rows_i32" : "disc_lce_rows_i64") +
      suffix(type);
  for (long long r0 = 0; r0 < rows; r0 += chunk) {
    long long n = std::min<long long>(chunk, rows - r0);
    const void* hc = static_cast<const char*>(h.data) + r0 * d * elem;
    gemm(n, classes, d, hc, false, w.data, tw, panel, false, half);
    void* lc = static_cast<char*>(labels.data) + r0 * dtype_size(labels.dtype);
    void* tc = terms + r0;
    void* params[] = {&panel, &g, &lc, &n, &classes, &ignore, &count, &tc};
    launch(rows_kernel, {static_cast<unsigned>(n), kRowBlock, 0}, params);
    gemm(n, d, classes, g, false, w.data, !tw, static_cast<char*>(a.out[1].data) + r0 * d * elem,
         false, false);
    if (tw)
      gemm(classes, d, n, g, true, hc, false, dw, true, half);
    else
      gemm(d, classes, n, hc, true, g, false, dw, true, half);
  }
  if (half) convert("disc_narrow" + suffix(type), dw, a.out[2].data, a.out[2].numel());
  void* t = terms;
  void* loss = a.out[0].data;
  void* params[] = {&t, &rows, &count, &loss};
  launch("disc_lce_loss", {1, kRowBlock, 0}, params);
}

// The labels of linear_cross_entropy other than ignore_index, counted on the device into the
// count the rows and the loss read there; a bad label is left in checks().
void* GpuOps::count_labels(const ir::KernelArgs& a, long long classes, long long ignore) {
  const ir::TensorRef& labels = a.in[2];
  void* count = count_.get(sizeof(long long));
  unsigned long long tag = checks_.add_label_check(a.op, classes, ignore);
  void* bad = checks_.record();
  void* ids = labels.data;
  long long n = labels.numel();
  void* params[] = {&ids, &n, &classes, &ignore, &bad, &tag, &count};
  launch(labels.dtype == DType::kI32 ? "disc_lce_count_i32" : "disc_lce_count_i64",
         {1, kRowBlock, 0}, params);
  return count;
}

void GpuOps::report_nonzero(const void* total, unsigned long long tag) {
  void* t = const_cast<void*>(total);
  void* bad = checks_.record();
  void* params[] = {&t, &bad, &tag};
  launch("disc_report_nonzero", {1, 1, 0}, params);
}

void GpuOps::convert(const std::string& kernel, const void* from, void* to, long long n) {
  void* in = const_cast<void*>(from);
  void* params[] = {&in, &to, &n};
  launch(kernel, n, params);
}

}  // namespace disc::jit
