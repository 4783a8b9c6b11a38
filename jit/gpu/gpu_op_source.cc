// gpu_op_source(): the kernels of gpu_ops.cu after half.cu's conversions, both embedded at build
// time (embed_cu.cmake writes them into generated headers).
#include "jit/gpu/gpu_op_source.h"

#include "jit/gpu/gpu_ops_cu.h"
#include "jit/gpu/half_source.h"

namespace disc::jit {

std::string gpu_op_source() {
  return std::string(gpu_half_source()) + kGpuOpsCu;
}

}  // namespace disc::jit
