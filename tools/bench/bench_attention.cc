// Attention alone on a GPU: disc's attention op (GpuOps: on the tensor cores for bf16 and f16
// heads that fit, jit/gpu/attention_mma_source.h) against PyTorch's scaled_dot_product_attention
// (its flash kernel, tools/bench/torch_sdpa.py) on the same shapes in the same run: causal, q, k
// and v [batch, heads, seq, dim], forward and forward + backward, the median milliseconds per
// call and the ratio (PyTorch's time over disc's: above 1, disc is faster). TFLOP/s count the
// causal half of the products: forward 2 * seq^2 * dim per head, backward 2.5 times that.
//
//   bench_attention --device cuda:0 --batch 16 --heads 8 --dim 64 --seq 512,1024 [--dtype bf16]
//                   [--iters 20] [--python PATH | --no-torch]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/half.h"
#include "base/hash.h"
#include "command.h"
#include "devices/gpu/gpu_device.h"
#include "engine/trainer.h"
#include "jit/gpu/gpu_kernels.h"
#include "jit/gpu/gpu_ops.h"
#include "timing.h"

namespace disc::bench {
namespace {

struct Options {
  std::string device = "cuda:0";
  int64_t batch = 16, heads = 8, dim = 64;
  std::vector<int64_t> seqs = {512, 1024};
  std::string dtype = "bf16";
  int iters = 20;
  std::string python = "/usr/bin/python3";
  bool torch = true;
};

struct Times {
  double fwd_ms = 0, fwd_bwd_ms = 0;
};

// A device tensor of `shape` with values uniform in [-1, 1], or zeros.
ir::TensorRef device_tensor(devices::GpuDevice& dev, DType t, std::vector<int64_t> shape,
                            std::mt19937* rng) {
  ir::TensorRef r{.dtype = t, .shape = std::move(shape)};
  r.data = dev.allocate(static_cast<size_t>(r.bytes()));
  std::vector<float> v(static_cast<size_t>(r.numel()));
  if (rng) {
    std::uniform_real_distribution<float> u(-1, 1);
    for (float& x : v) x = u(*rng);
  }
  std::vector<uint16_t> bits(v.size());
  f32_to_half(t, v.data(), bits.data(), static_cast<int64_t>(v.size()));
  dev.copy(r.data, bits.data(), bits.size() * 2, devices::CopyKind::kHostToDevice);
  return r;
}

// The median seconds of `iters` calls of f after two warm-up calls, each waited for.
template <typename F>
double median_seconds(devices::GpuDevice& dev, int iters, F f) {
  std::vector<double> s;
  for (int i = -2; i < iters; ++i) {
    dev.synchronize();
    const double t0 = now_seconds();
    f();
    dev.synchronize();
    if (i >= 0) s.push_back(now_seconds() - t0);
  }
  return percentile(s, 0.5);
}

Times time_disc(devices::GpuDevice& dev, jit::GpuOps& ops, const Options& o, int64_t seq) {
  std::mt19937 rng(1);
  const DType t = o.dtype == "bf16" ? DType::kBF16 : DType::kF16;
  const std::vector<int64_t> shape = {o.batch, o.heads, seq, o.dim};
  std::vector<ir::TensorRef> in, out;
  for (int i = 0; i < 4; ++i) in.push_back(device_tensor(dev, t, shape, &rng));  // q k v dout
  for (int i = 0; i < 4; ++i) out.push_back(device_tensor(dev, t, shape, nullptr));
  const ir::Attributes attrs{{"causal", true}, {"scale", 1.0 / std::sqrt(double(o.dim))}};
  const ir::KernelArgs fwd{
      .op = "attention", .in = {in[0], in[1], in[2]}, .out = {out[0]}, .attrs = &attrs};
  const ir::KernelArgs bwd{
      .op = "attention_grad", .in = in, .out = {out[1], out[2], out[3]}, .attrs = &attrs};
  Times r;
  r.fwd_ms = 1e3 * median_seconds(dev, o.iters, [&] { ops.attention(fwd, false); });
  r.fwd_bwd_ms = 1e3 * median_seconds(dev, o.iters, [&] {
                   ops.attention(fwd, false);
                   ops.attention(bwd, true);
                 });
  for (ir::TensorRef& x : in) dev.deallocate(x.data, static_cast<size_t>(x.bytes()));
  for (ir::TensorRef& x : out) dev.deallocate(x.data, static_cast<size_t>(x.bytes()));
  return r;
}

// torch_sdpa.py's times per sequence length, in --seq order.
std::vector<Times> time_torch(const Options& o) {
  std::string seqs;
  for (int64_t s : o.seqs) seqs += (seqs.empty() ? "" : ",") + std::to_string(s);
  const std::string cmd = o.python + " " + DISC_SOURCE_DIR + "/tools/bench/torch_sdpa.py --batch " +
                          std::to_string(o.batch) + " --heads " + std::to_string(o.heads) +
                          " --dim " + std::to_string(o.dim) + " --seq " + seqs + " --dtype " +
                          o.dtype + " --iters " + std::to_string(o.iters);
  int status = 0;
  const std::string text = read_command(cmd, status);
  if (status != 0)
    throw Error("bench_attention: '" + cmd + "' failed (exit " + std::to_string(exit_code(status)) +
                "; run it by hand to see why, or pass --no-torch)");
  const nlohmann::json j = nlohmann::json::parse(text);
  std::printf("PyTorch %s, scaled_dot_product_attention (%s backend)\n",
              j.at("torch").get<std::string>().c_str(), j.at("backend").get<std::string>().c_str());
  std::vector<Times> t;
  for (const auto& row : j.at("rows"))
    t.push_back({row.at("fwd_ms").get<double>(), row.at("fwd_bwd_ms").get<double>()});
  return t;
}

int run(const Options& o) {
  if (o.dtype != "bf16" && o.dtype != "f16")
    throw InvalidArgument("--dtype is bf16 or f16, not '" + o.dtype + "'");
  std::unique_ptr<devices::Device> device = engine::make_device(o.device, 0);
  auto* dev = dynamic_cast<devices::GpuDevice*>(device.get());
  if (!dev) throw InvalidArgument("needs a GPU (--device cuda:N or hip:N), not '" + o.device + "'");
  jit::GpuKernelCompiler compiler(
      dev->arch().rfind("sm_", 0) == 0 ? jit::GpuVendor::kNvidia : jit::GpuVendor::kAmd,
      dev->arch(), "");
  jit::GpuOps ops(*dev, [&](const std::string& source, jit::KernelRun&) {
    return compiler.compile_source(std::to_string(fnv1a(source)), source, "ops.cu").binary;
  });
  const bool mma =
      jit::GpuOps::tensor_cores(dev->arch(), {static_cast<int>(o.dim), static_cast<int>(o.dim),
                                              o.dtype == "bf16" ? DType::kBF16 : DType::kF16});
  std::printf("bench_attention: %s (%s), causal, batch %lld x %lld heads, dim %lld, %s; disc %s\n",
              o.device.c_str(), dev->arch().c_str(), static_cast<long long>(o.batch),
              static_cast<long long>(o.heads), static_cast<long long>(o.dim), o.dtype.c_str(),
              mma ? "on the tensor cores" : "on the tiled CUDA-core kernels");
  std::printf("%s\n", machine_load().c_str());
  const std::vector<Times> torch = o.torch ? time_torch(o) : std::vector<Times>{};
  std::printf("%6s %10s %10s %6s %10s %10s %6s %10s\n", "seq", "disc fwd", "torch fwd", "ratio",
              "disc f+b", "torch f+b", "ratio", "disc TF/s");
  for (size_t i = 0; i < o.seqs.size(); ++i) {
    const int64_t s = o.seqs[i];
    const Times d = time_disc(*dev, ops, o, s);
    const double flops =
        3.5 * 2.0 * double(s) * double(s) * double(o.dim) * double(o.batch * o.heads);
    const Times t = o.torch ? torch[i] : Times{std::nan(""), std::nan("")};
    std::printf("%6lld %7.3f ms %7.3f ms %5.2fx %7.3f ms %7.3f ms %5.2fx %10.1f\n",
                static_cast<long long>(s), d.fwd_ms, t.fwd_ms, t.fwd_ms / d.fwd_ms, d.fwd_bwd_ms,
                t.fwd_bwd_ms, t.fwd_bwd_ms / d.fwd_bwd_ms, flops / (d.fwd_bwd_ms * 1e-3) / 1e12);
  }
  return 0;
}

}  // namespace
}  // namespace disc::bench

int main(int argc, char** argv) {
  disc::bench::Options o;
  CLI::App app{"Causal attention on a GPU: disc's kernels against PyTorch's SDPA (flash)"};
  app.add_option("--device", o.device, "cuda:N or hip:N")->capture_default_str();
  app.add_option("--batch", o.batch, "Batch rows")->capture_default_str();
  app.add_option("--heads", o.heads, "Heads")->capture_default_str();
  app.add_option("--dim", o.dim, "Head size (q, k and v)")->capture_default_str();
  app.add_option("--seq", o.seqs, "Sequence lengths")->delimiter(',')->capture_default_str();
  app.add_option("--dtype", o.dtype, "bf16 or f16")->capture_default_str();
  app.add_option("--iters", o.iters, "Timed calls per measurement (the median counts)")
      ->capture_default_str();
  app.add_option("--python", o.python, "A Python with PyTorch built for CUDA")
      ->capture_default_str();
  app.add_flag("!--no-torch", o.torch, "Time disc alone");
  CLI11_PARSE(app, argc, argv);
  try {
    return disc::bench::run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_attention: %s\n", e.what());
    return 1;
  }
}
