#include "engine/kernels/shared.h"

#include <algorithm>
#include <vector>

#include "devices/cpu/tril_gemm.h"
#include "ir/ops/matmul_dims.h"

namespace disc::engine {

jit::KernelRun device_gemm(const ir::Node& n, const ir::KernelArgs& args, KernelContext& ctx) {
  devices::Device& dev = *ctx.dev;
  const ir::TensorRef &a = args.in[0], &bm = args.in[1], &out = args.out[0];
  devices::GemmArgs g;
  g.dtype = a.dtype;
  g.transpose_a = n.attrs().get_bool("transpose_a");
  g.transpose_b = n.attrs().get_bool("transpose_b");
  const ir::MatmulDims d = ir::matmul_dims(a, out, n.attrs());
  g.batch = d.batch, g.m = d.m, g.n = d.n, g.k = d.k;
  const bool tril_a = n.attrs().get_bool("tril_a");  // each A is its own square: no stacking
  if (bm.rank() == 2 && !g.transpose_a && !tril_a)
    g.m *= g.batch, g.batch = std::min<int64_t>(g.batch, 1);
  g.a = a.data;
  g.b = bm.data;
  g.c = out.data;
  g.batch_stride_a = g.m * g.k;
  g.batch_stride_b = bm.rank() == 2 ? 0 : g.k * g.n;
  g.batch_stride_c = g.m * g.n;
  if (g.batch == 0) return {};
  if (g.k == 0) {
    const std::vector<std::byte> zeros(static_cast<size_t>(out.bytes()));
    dev.copy(out.data, zeros.data(), zeros.size(), devices::CopyKind::kHostToDevice);
    return {};
  }
  // The triangular blocks copy A's diagonal blocks on the host: a GPU multiplies all of A (zero
  // above its diagonal where the tril pass marks it).
  if (tril_a && dev.is_host()) {
    devices::gemm_tril_a(dev, g);
  } else {
    dev.gemm(g);
  }
  return {};
}

bool has_fused_kernel(const ir::Node& n, const KernelContext& ctx) {
  return ctx.fused && ctx.fused->handles(n);
}

jit::KernelRun run_fused(const ir::Node& n, const ir::KernelArgs& a, KernelContext& ctx) {
  return ctx.fused->run(n, a);
}

jit::KernelRun prepare_fused(const ir::Node& n, const ir::Bindings& b, KernelContext& ctx) {
  return ctx.fused->prepare(n, b);
}

}  // namespace disc::engine
