#include "devices/cuda/cublas.h"

#include <string>

#include "devices/blas_gemm.h"
#include "devices/shared_library.h"
#include "ir/error.h"

namespace disc::devices::cuda {
namespace {

using Handle = void*;
using Status = int;
constexpr Status kStatusSuccess = 0;
constexpr int kOpN = 0, kOpT = 1;

template <typename T>
using GemmFn = Status (*)(Handle, int transa, int transb, int m, int n, int k, const T* alpha,
                          const T* a, int lda, long long stride_a, const T* b, int ldb,
                          long long stride_b, const T* beta, T* c, int ldc, long long stride_c,
                          int batch);

int narrow(int64_t v, const char* what) {
  if (v < 0 || v > INT32_MAX)
    throw InvalidArgument("cuda gemm: " + std::string(what) + " = " + std::to_string(v) +
                          " does not fit cuBLAS's 32-bit int: split the product");
  return static_cast<int>(v);
}

}  // namespace

struct Cublas::Api {
  SharedLibrary lib;
  Status (*create)(Handle*) = nullptr;
  Status (*destroy)(Handle) = nullptr;
  Status (*set_stream)(Handle, CUstream) = nullptr;
  const char* (*status_string)(Status) = nullptr;  // cuBLAS 11.4 on; optional
  GemmFn<float> sgemm = nullptr;
  GemmFn<double> dgemm = nullptr;

  void check(Status s, const char* what) const {
    if (s == kStatusSuccess) return;
    const std::string why = status_string ? status_string(s) : "status " + std::to_string(s);
    throw DeviceError(std::string("cuda: cuBLAS ") + what + " failed: " + why);
  }
};

Cublas::Cublas(CUstream stream) : api_(std::make_unique<Api>()) {
  Api& a = *api_;
  a.lib = SharedLibrary::open({"libcublas.so.13", "libcublas.so.12", "libcublas.so"});
  if (!a.lib)
    throw DeviceError("cuda: cuBLAS not found (" + a.lib.error() +
                      "): install the CUDA toolkit's libcublas, or add its folder to LD_LIBRARY_PATH");
  a.create = a.lib.symbol<Status (*)(Handle*)>("cublasCreate_v2");
  a.destroy = a.lib.symbol<Status (*)(Handle)>("cublasDestroy_v2");
  a.set_stream = a.lib.symbol<Status (*)(Handle, CUstream)>("cublasSetStream_v2");
  a.status_string = a.lib.symbol<const char* (*)(Status)>("cublasGetStatusString");
  a.sgemm = a.lib.symbol<GemmFn<float>>("cublasSgemmStridedBatched");
  a.dgemm = a.lib.symbol<GemmFn<double>>("cublasDgemmStridedBatched");
  if (!a.create || !a.destroy || !a.set_stream || !a.sgemm || !a.dgemm)
    throw DeviceError("cuda: " + a.lib.name() + " lacks the functions disc calls: it is older than CUDA 11");
  a.check(a.create(&handle_), "cublasCreate");
  a.check(a.set_stream(handle_, stream), "cublasSetStream");
}

Cublas::~Cublas() {
  if (handle_) api_->destroy(handle_);
}

void Cublas::gemm(const GemmArgs& g) {
  check_gemm_args(g);
  if (g.m == 0 || g.n == 0 || g.batch == 0) return;
  const BlasGemm b = column_major(g);
  const int ta = b.transa ? kOpT : kOpN, tb = b.transb ? kOpT : kOpN;
  const int m = narrow(b.m, "n"), n = narrow(b.n, "m"), k = narrow(b.k, "k");
  const int lda = narrow(b.lda, "the leading dim of B"), ldb = narrow(b.ldb, "the leading dim of A");
  const int ldc = narrow(b.ldc, "the leading dim of C"), batch = narrow(b.batch, "batch");
  if (g.dtype == ir::DType::kF32) {
    const float alpha = 1, beta = static_cast<float>(b.beta);
    api_->check(api_->sgemm(handle_, ta, tb, m, n, k, &alpha, static_cast<const float*>(b.a), lda, b.stride_a,
                            static_cast<const float*>(b.b), ldb, b.stride_b, &beta, static_cast<float*>(b.c), ldc,
                            b.stride_c, batch),
                "cublasSgemmStridedBatched");
  } else {
    const double alpha = 1, beta = b.beta;
    api_->check(api_->dgemm(handle_, ta, tb, m, n, k, &alpha, static_cast<const double*>(b.a), lda, b.stride_a,
                            static_cast<const double*>(b.b), ldb, b.stride_b, &beta, static_cast<double*>(b.c), ldc,
                            b.stride_c, batch),
                "cublasDgemmStridedBatched");
  }
}

}  // namespace disc::devices::cuda
