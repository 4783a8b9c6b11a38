// attention_mma_source(): attention_mma.cu, embedded at build time (embed_cu.cmake writes it into
// a generated header).
#include "jit/gpu/attention_mma_source.h"

#include "jit/gpu/attention_mma_cu.h"

namespace disc::jit {

const char* attention_mma_source() {
  return kAttentionMmaCu;
}

}  // namespace disc::jit
