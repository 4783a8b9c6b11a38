// Rotary position embedding on the CPU: the reference kernel's arithmetic (double, each result
// rounded once to the tensor's type), bit for bit, over every row in parallel and in vector code,
// and on bf16 and f16 tensors as they are (the reference widens them to f32 copies first).
//
//   RopeArgs a{.dtype = DType::kBF16, .rows = B * S * H, .d = 64, .seq = S, .inner = H * 64,
//              .position = pos, .cos = c, .sin = s, .x = x};
//   rope(dev, a, y);   // y may be x
#pragma once

#include <cstdint>

#include "devices/device.h"

namespace disc::devices {

struct RopeArgs {
  DType dtype = DType::kF32;  // f32, f64, bf16 or f16
  // rows of d elements; row r's index along the sequence axis is (r * d / inner) % seq.
  int64_t rows = 0, d = 0, seq = 0, inner = 1;
  const int64_t* position = nullptr;  // [seq]: the row of the tables each index reads
  // [positions, d / 2] each: cos and sin of the angles (ir/ops/rope_dims.h's rope_table).
  const double* cos = nullptr;
  const double* sin = nullptr;
  bool inverse = false;  // rotate by -angle
  const void* x = nullptr;
};

// y[r] = x[r] rotated; y may alias x (each pair is read before it is written). Throws
// InvalidArgument for a dtype it does not know and for a device whose memory is not host memory.
void rope(Device& dev, const RopeArgs& a, void* y);

}  // namespace disc::devices
