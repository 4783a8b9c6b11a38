// The sizes, positions and rotation table of one rope node: the reference kernel and the
// devices' rope (engine/kernels/cpu.cc) read them the same way, so they rotate by the same angles.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/tensor_ref.h"

namespace disc::ir {

// x [..., S (seq_axis), ..., D]: rows of D, each pair (x[i], x[i + D/2]) rotated by the angle of
// its row's position. Row r's index along seq_axis is (r * D / inner) % seq.
struct RopeDims {
  int64_t rows = 0, d = 0, seq = 0, inner = 1;
  double theta = 10000.0;
  bool inverse = false;  // rotate by -angle (rope's gradient)
  // Each index along seq_axis: its position (index p itself, or the op's positions[p] for packed
  // sequences, each from 0), and the table's rows: the largest position + 1.
  std::vector<int64_t> position;
  int64_t positions = 0;
};

// Throws InvalidArgument naming the first position outside [0, seq).
RopeDims rope_dims(const KernelArgs& a);

// cos and sin of p * theta^(-2i/D) in double, at [p * D/2 + i] for p in [0, positions), i in
// [0, D/2). Unsigned: rope's gradient negates sin where it reads it (exactly).
struct RopeTable {
  int64_t positions = 0;
  std::vector<double> cos, sin;
};
RopeTable rope_table(int64_t d, double theta, int64_t positions);

}  // namespace disc::ir
