// gpu_half_source(): half.cu, embedded at build time (embed_cu.cmake writes it into a generated
// header).
#include "jit/gpu/half_source.h"

#include "jit/gpu/half_cu.h"

namespace disc::jit {

const char* gpu_half_source() {
  return kHalfCu;
}

}  // namespace disc::jit
