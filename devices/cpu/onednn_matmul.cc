// f32 and bf16 GEMM through oneDNN's matmul primitive, with a bounded cache of created primitives.
#include "devices/cpu/onednn_matmul.h"

#include <string>

namespace disc::devices::cpu {
namespace {

using dnnl::memory;

// A [rows, cols] operand stored row-major with stored rows `lead` elements apart, or
// column-major when `transposed` (that is how a row-major [cols, rows] matrix looks when read as
// its transpose). With `batched`, a leading batch dim of `batch` entries `batch_stride` elements
// apart.
memory::desc matrix_desc(DType dtype, bool batched, int64_t batch, int64_t batch_stride,
                         int64_t rows, int64_t cols, bool transposed, int64_t lead) {
  const int64_t row_stride = transposed ? 1 : lead;
  const int64_t col_stride = transposed ? lead : 1;
  const auto type = dtype == DType::kBF16 ? memory::data_type::bf16 : memory::data_type::f32;
  if (!batched) return memory::desc({rows, cols}, type, {row_stride, col_stride});
  return memory::desc({batch, rows, cols}, type, {batch_stride, row_stride, col_stride});
}

std::string describe(DType dtype, int64_t batch, int64_t m, int64_t n, int64_t k, bool ta,
                     bool tb) {
  return std::string(dtype_name(dtype)) + " batch=" + std::to_string(batch) +
         " m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k) +
         (ta ? " transpose_a" : "") + (tb ? " transpose_b" : "");
}

}  // namespace

OnednnMatmul::OnednnMatmul(size_t cache_capacity)
    : engine_(dnnl::engine::kind::cpu, 0), stream_(engine_), capacity_(cache_capacity) {
  if (capacity_ == 0) capacity_ = 1;
}

// Folds what does not change the primitive out of the key, so that equivalent calls share one:
// - a shared B applied to a densely packed, untransposed A and a dense C is a single GEMM with
//   batch*m rows (one big GEMM also blocks and threads better than many small ones);
// - a single product has no batch strides.
OnednnMatmul::Key OnednnMatmul::make_key(const GemmArgs& g) {
  Key key{.dtype = g.dtype,
          .batch = g.batch,
          .m = g.m,
          .n = g.n,
          .k = g.k,
          .transpose_a = g.transpose_a,
          .transpose_b = g.transpose_b,
          .accumulate = g.accumulate,
          .c_f32 = g.c_f32,
          .stride_a = g.batch_stride_a,
          .stride_b = g.batch_stride_b,
          .stride_c = g.batch_stride_c,
          .lead_a = lead_a(g),
          .lead_b = lead_b(g),
          .lead_c = lead_c(g)};
  const bool dense_a = !g.transpose_a && key.lead_a == g.k && g.batch_stride_a == g.m * g.k;
  const bool dense_c = key.lead_c == g.n && g.batch_stride_c == g.m * g.n;
  if (key.batch > 1 && g.batch_stride_b == 0 && dense_a && dense_c) {
    key.m *= key.batch;
    key.batch = 1;
  }
  if (key.batch == 1) key.stride_a = key.stride_b = key.stride_c = 0;
  return key;
}

OnednnMatmul::Entry OnednnMatmul::create(const Key& key) const {
  const bool batched = key.batch > 1;
  const bool shared_b = batched && key.stride_b == 0;
  Entry e;
  const DType t = key.dtype;
  e.a = matrix_desc(t, batched, key.batch, key.stride_a, key.m, key.k, key.transpose_a, key.lead_a);
  // A shared B is a batch dim of 1, which oneDNN broadcasts over A's batch.
  e.b = matrix_desc(t, batched, shared_b ? 1 : key.batch, shared_b ? key.k * key.n : key.stride_b,
                    key.k, key.n, key.transpose_b, key.lead_b);
  e.c = matrix_desc(key.c_f32 ? DType::kF32 : t, batched, key.batch, key.stride_c, key.m, key.n,
                    false, key.lead_c);
  dnnl::primitive_attr attr;
  if (key.accumulate) {  // C += A B: oneDNN's sum post-op adds the product to what C holds
    dnnl::post_ops sum;
    sum.append_sum(1.0f);
    attr.set_post_ops(sum);
  }
  try {
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(e.a, e.b, e.c), attr, engine_);
    e.impl = pd.impl_info_str();
    e.primitive = dnnl::matmul(pd);
  } catch (const dnnl::error& err) {
    throw Error(
        "gemm: oneDNN cannot create a matmul for " +
        describe(key.dtype, key.batch, key.m, key.n, key.k, key.transpose_a, key.transpose_b) +
        " (" + err.what() + "): pass dense batch strides, or report the shape");
  }
  return e;
}

const OnednnMatmul::Entry& OnednnMatmul::lookup(const Key& key) {
  auto it = cache_.find(key);
  if (it == cache_.end()) {
    if (cache_.size() >= capacity_) evict_oldest();
    it = cache_.emplace(key, create(key)).first;
  }
  it->second.last_use = ++clock_;
  return it->second;
}

// A linear scan: it runs only when the cache is full and a primitive is about to be created,
// which costs far more than walking a few hundred entries.
void OnednnMatmul::evict_oldest() {
  auto oldest = cache_.begin();
  for (auto it = cache_.begin(); it != cache_.end(); ++it) {
    if (it->second.last_use < oldest->second.last_use) oldest = it;
  }
  if (oldest != cache_.end()) cache_.erase(oldest);
}

void OnednnMatmul::run(const GemmArgs& g) {
  if (g.dtype != DType::kF32 && g.dtype != DType::kBF16) {
    throw InvalidArgument("gemm: oneDNN matmul takes f32 and bf16, got " +
                          std::string(dtype_name(g.dtype)) +
                          ": use Device::gemm, which "
                          "routes other dtypes to the loop fallback");
  }
  std::lock_guard<std::mutex> lock(mu_);
  const Entry& e = lookup(make_key(g));
  // oneDNN only reads A and B; its memory objects take non-const handles.
  memory a(e.a, engine_, const_cast<void*>(g.a));
  memory b(e.b, engine_, const_cast<void*>(g.b));
  memory c(e.c, engine_, g.c);
  e.primitive.execute(stream_, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}});
  stream_.wait();
}

std::string OnednnMatmul::impl_name(const GemmArgs& g) {
  std::lock_guard<std::mutex> lock(mu_);
  return lookup(make_key(g)).impl;
}

bool OnednnMatmul::has_bf16() {
  std::call_once(bf16_once_, [&] {
    try {
      create(make_key({.dtype = DType::kBF16, .m = 1, .n = 1, .k = 1}));
      has_bf16_ = true;
    } catch (const Error&) {
      has_bf16_ = false;
    }
  });
  return has_bf16_;
}

bool OnednnMatmul::has_bf16_dot() {
  // The ISA values are masks: AMX's holds every bit of avx512_core_bf16's.
  const auto bf16 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
  return (static_cast<unsigned>(dnnl::get_effective_cpu_isa()) & bf16) == bf16;
}

size_t OnednnMatmul::cached_primitives() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cache_.size();
}

}  // namespace disc::devices::cpu
