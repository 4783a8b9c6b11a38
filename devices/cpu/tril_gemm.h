// Products whose left operand is lower triangular, as in causal attention: the probabilities
// after a causal mask (and their gradient) are zero above the diagonal, so the products that
// read them (p v, p^T dO, dS k, dS^T q) need not visit those blocks: about half of each GEMM
// for long sequences.
//
//   gemm_tril_a(dev, g);  // C = op(tril(A)) op(B), A square (m == k)
//
// It runs as block GEMMs over row blocks of kTrilBlock rows of C, skipping the blocks of A
// above the diagonal. The diagonal blocks are read whole, which equals tril(A) when A is zero
// above its diagonal: this is checked, and any other A is multiplied through a copy with its
// upper triangle cleared. So the result is tril(A)'s for every input; only its rounding differs
// from a plain GEMM's (the contraction is split differently).
#pragma once

#include <cstdint>

#include "devices/device.h"

namespace disc::devices {

// Rows of C per block GEMM: small enough to skip most of the upper triangle, large enough that
// each block runs near the library's peak (64 was fastest here for S from 256 to 512).
inline constexpr int64_t kTrilBlock = 64;

// C = op(tril(A)) op(B) on a host device (the check reads A on the CPU). Throws
// InvalidArgument when A is not square or the device's memory is not host memory.
void gemm_tril_a(Device& dev, const GemmArgs& g);

}  // namespace disc::devices
