// bench_matmul: how close the CPU device's GEMM (oneDNN) gets to the machine's measured peak.
// Measures peak f32 FMA throughput on one thread and on all of them, then times Device::gemm on
// square sizes and a transformer-like projection, and prints GFLOP/s and % of peak (all
// threads). Runs in well under 30 s on two cores.
//
// usage: bench_matmul [threads] [--json FILE]   (default: every hardware thread)
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <oneapi/dnnl/dnnl.hpp>
#include <random>
#include <string>
#include <vector>

#include "devices/cpu/cpu_device.h"
#include "devices/cpu/tril_gemm.h"
#include "json_file.h"
#include "peak_flops.h"
#include "timing.h"

namespace disc::bench {
namespace {

constexpr double kPeakSeconds = 0.5;  // per peak measurement
constexpr double kGemmSeconds = 0.4;  // timed repetitions per shape, after one warm-up
constexpr int kMinReps = 3;

struct Shape {
  std::string label;
  int64_t m, n, k;
  bool transpose_b = false;
  bool transpose_a = false;
  int64_t batch = 1;    // products with their own A, B and C, densely packed
  bool tril_a = false;  // devices::gemm_tril_a; GFLOP/s count the whole product's work
};

// A, B and C in device memory, A and B filled with random values.
class Operands {
 public:
  Operands(devices::Device& dev, const Shape& s)
      : dev_(dev), sizes_{s.batch * s.m * s.k, s.batch * s.k * s.n, s.batch * s.m * s.n} {
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> dist(-1, 1);
    for (int i = 0; i < 3; ++i) {
      ptr_[i] = static_cast<float*>(dev.allocate(bytes(i)));
      std::vector<float> host(sizes_[i]);
      for (float& v : host) v = dist(rng);
      // A triangular A holds probabilities after a causal mask: zero above its diagonal.
      if (i == 0 && s.tril_a) {
        for (size_t j = 0; j < host.size(); ++j) {
          if (j % s.m > j / s.m % s.m) host[j] = 0;
        }
      }
      dev.copy(ptr_[i], host.data(), bytes(i), devices::CopyKind::kHostToDevice);
    }
  }
  ~Operands() {
    for (int i = 0; i < 3; ++i) dev_.deallocate(ptr_[i], bytes(i));
  }
  devices::GemmArgs args(const Shape& s) const {
    return {.dtype = DType::kF32,
            .batch = s.batch,
            .m = s.m,
            .n = s.n,
            .k = s.k,
            .transpose_a = s.transpose_a,
            .transpose_b = s.transpose_b,
            .a = ptr_[0],
            .b = ptr_[1],
            .c = ptr_[2],
            .batch_stride_a = s.m * s.k,
            .batch_stride_b = s.k * s.n,
            .batch_stride_c = s.m * s.n};
  }

 private:
  size_t bytes(int i) const { return static_cast<size_t>(sizes_[i]) * sizeof(float); }
  devices::Device& dev_;
  int64_t sizes_[3];
  float* ptr_[3] = {};
};

// Median seconds per GEMM over repetitions filling about kGemmSeconds, after one warm-up call
// that also creates and caches the primitive.
void gemm(devices::Device& dev, const devices::GemmArgs& g, bool tril_a) {
  if (tril_a) {
    devices::gemm_tril_a(dev, g);
  } else {
    dev.gemm(g);
  }
}

double time_gemm(devices::Device& dev, const devices::GemmArgs& g, bool tril_a) {
  gemm(dev, g, tril_a);
  std::vector<double> times;
  const double start = now_seconds();
  while (static_cast<int>(times.size()) < kMinReps || now_seconds() - start < kGemmSeconds) {
    const double t0 = now_seconds();
    gemm(dev, g, tril_a);
    dev.synchronize();
    times.push_back(now_seconds() - t0);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

void print_header(const devices::cpu::CpuDevice& dev, const PeakFlops& peak) {
  const dnnl_version_t* v = dnnl::version();
  std::printf("device: %s, %d threads; oneDNN %d.%d.%d\n", dev.name().c_str(), dev.threads(),
              v->major, v->minor, v->patch);
  std::printf("%s\n", machine_load().c_str());
  std::printf("peak f32 FMA kernel: %s\n", peak.isa.c_str());
  std::printf("  1 thread:   %8.1f GFLOP/s\n", peak.one_thread * 1e-9);
  std::printf("  %d threads: %8.1f GFLOP/s\n\n", peak.threads, peak.all_threads * 1e-9);
  std::printf("%-34s %9s %10s %10s  %s\n", "gemm f32 (m x n x k)", "ms", "GFLOP/s", "% peak",
              "oneDNN impl");
}

nlohmann::json bench_shape(devices::cpu::CpuDevice& dev, const Shape& s, double peak) {
  Operands ops(dev, s);
  const devices::GemmArgs g = ops.args(s);
  const double seconds = time_gemm(dev, g, s.tril_a);
  const double gflops = 2.0 * s.batch * s.m * s.n * s.k / seconds * 1e-9;
  std::printf("%-34s %9.3f %10.1f %9.1f%%  %s\n", s.label.c_str(), seconds * 1e3, gflops,
              peak > 0 ? 100 * gflops * 1e9 / peak : 0.0,
              s.tril_a ? "row blocks below the diagonal" : dev.onednn().impl_name(g).c_str());
  return {{"gemm", s.label},
          {"ms", seconds * 1e3},
          {"gflops", gflops},
          {"share_of_peak", peak > 0 ? gflops * 1e9 / peak : 0.0}};
}

std::vector<Shape> shapes() {
  std::vector<Shape> all;
  for (int64_t n : {128, 256, 512, 1024, 2048}) {
    const std::string d = std::to_string(n);
    all.push_back({d + " x " + d + " x " + d, n, n, n});
  }
  // A transformer MLP projection: 4096 tokens, model width 512, hidden 1376; the second row has
  // B stored as [n, k], as framework weights usually are.
  all.push_back({"4096 x 1376 x 512", 4096, 1376, 512});
  all.push_back({"4096 x 1376 x 512 (B transposed)", 4096, 1376, 512, true});
  // bench_step's llama (hidden 256, 4 heads of 64, SwiGLU 688) at B=8, S=288: T = 2304 tokens.
  const int64_t t = 2304, s = 288, bh = 32;
  all.push_back({"step: x W_up       T x 688 x 256", t, 688, 256});
  all.push_back({"step: dy W_up^T    T x 256 x 688", t, 256, 688, true});
  all.push_back({"step: x^T dy       256 x 688 x T", 256, 688, t, false, true});
  all.push_back({"step: x W_q        T x 256 x 256", t, 256, 256});
  all.push_back({"step: x^T dy       256 x 256 x T", 256, 256, t, false, true});
  all.push_back({"step: q k^T     32 x S x S x 64", s, s, 64, true, false, bh});
  all.push_back({"step: p v       32 x S x 64 x S", s, 64, s, false, false, bh});
  all.push_back({"step: p^T do    32 x S x 64 x S", s, 64, s, false, true, bh});
  // Products with causal probabilities at a long S (the longest of 8 lengths in 32..512, on
  // average), whole and with the blocks above the diagonal skipped.
  const int64_t l = 459;
  all.push_back({"p v       32 x 459 x 64 x 459", l, 64, l, false, false, bh});
  all.push_back({"  tril(p) v", l, 64, l, false, false, bh, true});
  all.push_back({"p^T do    32 x 459 x 64 x 459", l, 64, l, false, true, bh});
  all.push_back({"  tril(p)^T do", l, 64, l, false, true, bh, true});
  return all;
}

}  // namespace
}  // namespace disc::bench

int main(int argc, char** argv) {
  using namespace disc;
  try {
    int threads = 0;
    std::string json_path;
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--json" && i + 1 < argc) {
        json_path = argv[++i];
      } else if (!a.empty() && std::isdigit(static_cast<unsigned char>(a[0]))) {
        threads = std::atoi(a.c_str());
      } else {
        std::fprintf(stderr, "usage: bench_matmul [threads] [--json FILE]\n");
        return 2;
      }
    }
    devices::cpu::CpuDevice dev(threads);
    const bench::PeakFlops peak = bench::measure_peak_flops(dev.threads(), bench::kPeakSeconds);
    bench::print_header(dev, peak);
    nlohmann::json rows = nlohmann::json::array();
    for (const bench::Shape& s : bench::shapes())
      rows.push_back(bench::bench_shape(dev, s, peak.all_threads));
    if (!json_path.empty()) {
      bench::write_json(json_path, {{"threads", dev.threads()},
                                    {"peak_gflops_one_thread", peak.one_thread * 1e-9},
                                    {"peak_gflops", peak.all_threads * 1e-9},
                                    {"gemms", rows}});
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_matmul: %s\n", e.what());
    return 1;
  }
  return 0;
}
