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
// cuBLAS's cudaDataType, cublasComputeType_t and cublasGemmAlgo_t values; rocBLAS's
// rocblas_datatype and rocblas_gemm_algo.
constexpr int kCudaR16Bf = 14, kCudaR16F = 2, kCudaR32F = 0;
constexpr int kCublasCompute32F = 68, kCublasComputeTf32 = 77, kCublasGemmDefault = -1;
constexpr int kRocblasBf16 = 168, kRocblasF16 = 150, kRocblasF32 = 151;
constexpr int kRocblasAlgoStandard = 0;

template <typename T>
using GemmFn = Status (*)(Handle, int transa, int transb, int m, int n, int k, const T* alpha,
                          const T* a, int lda, long long stride_a, const T* b, int ldb,
                          long long stride_b, const T* beta, T* c, int ldc, long long stride_c,
                          int batch);
// cublasGemmStridedBatchedEx: operands of any type the library pairs, a compute type, an algorithm.
using CublasGemmExFn = Status (*)(Handle, int transa, int transb, int m, int n, int k,
                                  const void* alpha, const void* a, int a_type, int lda,
                                  long long stride_a, const void* b, int b_type, int ldb,
                                  long long stride_b, const void* beta, void* c, int c_type,
                                  int ldc, long long stride_c, int batch, int compute, int algo);
// rocblas_gemm_strided_batched_ex: the same, with D = alpha A B + beta C written apart from C (disc
// passes C twice) and a solution index and flags.
using RocblasGemmExFn = Status (*)(Handle, int transa, int transb, int m, int n, int k,
                                   const void* alpha, const void* a, int a_type, int lda,
                                   int64_t stride_a, const void* b, int b_type, int ldb,
                                   int64_t stride_b, const void* beta, const void* c, int c_type,
                                   int ldc, int64_t stride_c, void* d, int d_type, int ldd,
                                   int64_t stride_d, int batch, int compute, int algo,
                                   int32_t solution, uint32_t flags);

}  // namespace

// The names and codes of each library. Outside the anonymous namespace because GpuBlas::Api holds
// one (a class with external linkage may not hold a member whose type has internal linkage).
struct Library {
  const char* title;
  const char* files[3];
  const char *create, *destroy, *set_stream, *status_string, *sgemm, *dgemm, *gemm_ex;
  int op_n, op_t;
  int bf16, f16, f32;  // the ex call's type codes (rocBLAS's compute type is f32's)
  const char* missing;
};

namespace {

const Library kCublas{"cuBLAS",
                      {"libcublas.so.13", "libcublas.so.12", "libcublas.so"},
                      "cublasCreate_v2",
                      "cublasDestroy_v2",
                      "cublasSetStream_v2",
                      "cublasGetStatusString",
                      "cublasSgemmStridedBatched",
                      "cublasDgemmStridedBatched",
                      "cublasGemmStridedBatchedEx",
                      0,
                      1,
                      kCudaR16Bf,
                      kCudaR16F,
                      kCudaR32F,
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
    "rocblas_gemm_strided_batched_ex",
    111,
    112,
    kRocblasBf16,
    kRocblasF16,
    kRocblasF32,
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
  void* gemm_ex = nullptr;  // CublasGemmExFn or RocblasGemmExFn, by lib

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
  a.gemm_ex = a.so.symbol<void*>(a.lib->gemm_ex);
  if (!a.create || !a.destroy || !a.set_stream || !a.sgemm || !a.dgemm || !a.gemm_ex)
    throw DeviceError(a.so.name() + " lacks the strided-batched GEMMs disc calls: it is too old");
  a.check(a.create(&handle_), "create");
  a.check(a.set_stream(handle_, stream), "set stream");
}

GpuBlas::~GpuBlas() {
  if (handle_) api_->destroy(handle_);
}

namespace {

// A column-major call's sizes, checked to fit the libraries' 32-bit ints.
struct Sizes {
  int ta, tb, m, n, k, lda, ldb, ldc, batch;
};
Sizes sizes(const BlasGemm& b, const Library& lib) {
  return {b.transa ? lib.op_t : lib.op_n,
          b.transb ? lib.op_t : lib.op_n,
          narrow(b.m, "n"),
          narrow(b.n, "m"),
          narrow(b.k, "k"),
          narrow(b.lda, "the leading dim of B"),
          narrow(b.ldb, "the leading dim of A"),
          narrow(b.ldc, "the leading dim of C"),
          narrow(b.batch, "batch")};
}

// 16-bit operands (and f32 ones in TF32) on the tensor cores: sums in f32, C rounded once, as the
// CPU's widened GEMM does it.
// c_f32: 16-bit A and B with an f32 C, a pairing both libraries have.
void gemm_ex(const GpuBlas::Api& api, void* handle, const BlasGemm& b, const Sizes& z, DType type,
             bool c_f32) {
  const Library& lib = *api.lib;
  const int t = type == DType::kBF16 ? lib.bf16 : type == DType::kF16 ? lib.f16 : lib.f32;
  const int ct = c_f32 ? lib.f32 : t;
  const float alpha = 1, beta = static_cast<float>(b.beta);
  if (&lib == &kCublas) {
    const int compute = type == DType::kF32 ? kCublasComputeTf32 : kCublasCompute32F;
    auto f = reinterpret_cast<CublasGemmExFn>(api.gemm_ex);
    api.check(
        f(handle, z.ta, z.tb, z.m, z.n, z.k, &alpha, b.a, t, z.lda, b.stride_a, b.b, t, z.ldb,
          b.stride_b, &beta, b.c, ct, z.ldc, b.stride_c, z.batch, compute, kCublasGemmDefault),
        "GemmStridedBatchedEx");
    return;
  }
  auto f = reinterpret_cast<RocblasGemmExFn>(api.gemm_ex);
  api.check(f(handle, z.ta, z.tb, z.m, z.n, z.k, &alpha, b.a, t, z.lda, b.stride_a, b.b, t, z.ldb,
              b.stride_b, &beta, b.c, ct, z.ldc, b.stride_c, b.c, ct, z.ldc, b.stride_c, z.batch,
              lib.f32, kRocblasAlgoStandard, 0, 0),
            "gemm_strided_batched_ex");
}

}  // namespace

void GpuBlas::gemm(const GemmArgs& g, bool tf32) {
  check_gemm_args(g);
  if (!is_float(g.dtype))
    throw InvalidArgument("gpu gemm: " + std::string(dtype_name(g.dtype)) +
                          " is not a GEMM type: use f32, f64, bf16 or f16");
  if (g.m == 0 || g.n == 0 || g.batch == 0) return;
  const BlasGemm b = column_major(g);
  const Library& lib = *api_->lib;
  const Sizes z = sizes(b, lib);
  if (g.dtype == DType::kF32 && !(tf32 && &lib == &kCublas)) {  // rocBLAS has no TF32
    const float alpha = 1, beta = static_cast<float>(b.beta);
    api_->check(
        api_->sgemm(handle_, z.ta, z.tb, z.m, z.n, z.k, &alpha, static_cast<const float*>(b.a),
                    z.lda, b.stride_a, static_cast<const float*>(b.b), z.ldb, b.stride_b, &beta,
                    static_cast<float*>(b.c), z.ldc, b.stride_c, z.batch),
        "sgemm");
  } else if (g.dtype == DType::kF64) {
    const double alpha = 1, beta = b.beta;
    api_->check(
        api_->dgemm(handle_, z.ta, z.tb, z.m, z.n, z.k, &alpha, static_cast<const double*>(b.a),
                    z.lda, b.stride_a, static_cast<const double*>(b.b), z.ldb, b.stride_b, &beta,
                    static_cast<double*>(b.c), z.ldc, b.stride_c, z.batch),
        "dgemm");
  } else {
    gemm_ex(*api_, handle_, b, z, g.dtype, g.c_f32);
  }
}

}  // namespace disc::devices
