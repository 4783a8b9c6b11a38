#include "devices/gpu/gpu_blas.h"

#include <string>

#include "base/error.h"
#include "devices/gpu/blas_gemm.h"
#include "devices/shared_library.h"

namespace disc::devices {
namespace {

using Handle = void*;
using Status = int;
constexpr Status kStatusSuccess = 0;

template <typename T>
using GemmFn = Status (*)(Handle, int transa, int transb, int m, int n, int k, const T* alpha,
                          const T* a, int lda, long long stride_a, const T* b, int ldb,
                          long long stride_b, const T* beta, T* c, int ldc, long long stride_c,
                          int batch);

// The names and codes of each library.
struct Library {
  const char* title;
  const char* files[3];
  const char *create, *destroy, *set_stream, *status_string, *sgemm, *dgemm;
  int op_n, op_t;
  const char* missing;
};

const Library kCublas{"cuBLAS",
                      {"libcublas.so.13", "libcublas.so.12", "libcublas.so"},
                      "cublasCreate_v2",
                      "cublasDestroy_v2",
                      "cublasSetStream_v2",
                      "cublasGetStatusString",
                      "cublasSgemmStridedBatched",
                      "cublasDgemmStridedBatched",
                      0,
                      1,
                      "install the CUDA toolkit's libcublas, or add its folder to LD_LIBRARY_PATH"};
const Library kRocblas{
    "rocBLAS",
    {"librocblas.so.4", "librocblas.so.0", "librocblas.so"},
    "rocblas_create_handle",
    "rocblas_destroy_handle",
    "rocblas_set_stream",
    "rocblas_status_to_string",
    "rocblas_sgemm_strided_batched",
    "rocblas_dgemm_strided_batched",
    111,
    112,
    "Debian 12 packages neither rocBLAS nor hipBLAS: install ROCm's rocBLAS (librocblas.so), "
    "or add its folder to LD_LIBRARY_PATH"};

int narrow(int64_t v, const char* what) {
  if (v < 0 || v > INT32_MAX)
    throw InvalidArgument("gpu gemm: " + std::string(what) + " = " + std::to_string(v) +
                          " does not fit BLAS's 32-bit int: split the product");
  return static_cast<int>(v);
}

}  // namespace

struct GpuBlas::Api {
  const Library* lib = nullptr;
  SharedLibrary so;
  Status (*create)(Handle*) = nullptr;
  Status (*destroy)(Handle) = nullptr;
  Status (*set_stream)(Handle, void*) = nullptr;
  const char* (*status_string)(Status) = nullptr;  // optional (cuBLAS before 11.4 lacks it)
  GemmFn<float> sgemm = nullptr;
  GemmFn<double> dgemm = nullptr;

  void check(Status s, const char* what) const {
    if (s == kStatusSuccess) return;
    const std::string why = status_string ? status_string(s) : "status " + std::to_string(s);
    throw DeviceError(std::string(lib->title) + " " + what + " failed: " + why);
  }
};

GpuBlas::GpuBlas(BlasLibrary library, GpuRuntime::Stream stream) : api_(std::make_unique<Api>()) {
  Api& a = *api_;
  a.lib = library == BlasLibrary::kCublas ? &kCublas : &kRocblas;
  a.so = SharedLibrary::open({a.lib->files[0], a.lib->files[1], a.lib->files[2]});
  if (!a.so)
    throw DeviceError(std::string(a.lib->title) + " not found (" + a.so.error() +
                      "): " + a.lib->missing);
  a.create = a.so.symbol<Status (*)(Handle*)>(a.lib->create);
  a.destroy = a.so.symbol<Status (*)(Handle)>(a.lib->destroy);
  a.set_stream = a.so.symbol<Status (*)(Handle, void*)>(a.lib->set_stream);
  a.status_string = a.so.symbol<const char* (*)(Status)>(a.lib->status_string);
  a.sgemm = a.so.symbol<GemmFn<float>>(a.lib->sgemm);
  a.dgemm = a.so.symbol<GemmFn<double>>(a.lib->dgemm);
  if (!a.create || !a.destroy || !a.set_stream || !a.sgemm || !a.dgemm)
    throw DeviceError(a.so.name() + " lacks the strided-batched GEMMs disc calls: it is too old");
  a.check(a.create(&handle_), "create");
  a.check(a.set_stream(handle_, stream), "set stream");
}

GpuBlas::~GpuBlas() {
  if (handle_) api_->destroy(handle_);
}

void GpuBlas::gemm(const GemmArgs& g) {
  check_gemm_args(g);
  if (g.dtype != DType::kF32 && g.dtype != DType::kF64)
    throw InvalidArgument("gpu gemm: " + std::string(dtype_name(g.dtype)) +
                          " is not supported on GPUs yet: use f32");
  if (g.m == 0 || g.n == 0 || g.batch == 0) return;
  const BlasGemm b = column_major(g);
  const int ta = b.transa ? api_->lib->op_t : api_->lib->op_n,
            tb = b.transb ? api_->lib->op_t : api_->lib->op_n;
  const int m = narrow(b.m, "n"), n = narrow(b.n, "m"), k = narrow(b.k, "k");
  const int lda = narrow(b.lda, "the leading dim of B"),
            ldb = narrow(b.ldb, "the leading dim of A");
  const int ldc = narrow(b.ldc, "the leading dim of C"), batch = narrow(b.batch, "batch");
  if (g.dtype == DType::kF32) {
    const float alpha = 1, beta = static_cast<float>(b.beta);
    api_->check(api_->sgemm(handle_, ta, tb, m, n, k, &alpha, static_cast<const float*>(b.a), lda,
                            b.stride_a, static_cast<const float*>(b.b), ldb, b.stride_b, &beta,
                            static_cast<float*>(b.c), ldc, b.stride_c, batch),
                "sgemm");
  } else {
    const double alpha = 1, beta = b.beta;
    api_->check(api_->dgemm(handle_, ta, tb, m, n, k, &alpha, static_cast<const double*>(b.a), lda,
                            b.stride_a, static_cast<const double*>(b.b), ldb, b.stride_b, &beta,
                            static_cast<double*>(b.c), ldc, b.stride_c, batch),
                "dgemm");
  }
}

}  // namespace disc::devices
