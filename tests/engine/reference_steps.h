// disc against a recording of PyTorch (tests/reference/<family>.safetensors, written by
// tools/torch_reference.py): the first step's loss, logits, gradients and gradient norm, and the
// parameters after the recording's AdamW steps with clipping, each within 1e-4 (relative, f32).
// Shared by the model families' test and the ONNX import's, which runs the same recordings
// through models exported to ONNX.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "engine/safetensors.h"
#include "engine/tensor.h"
#include "engine/trainer.h"
#include "ir/models/model.h"

namespace disc::engine {

// max |a - b| / max |b|: the error relative to the reference tensor's scale.
double relative_error(const Tensor& a, const Tensor& b);

// |mine - the recording's scalar `name`| / |the recording's|.
double scalar_error(float mine, const TensorFile& ref, const std::string& name);

// The recording's batch (`input.<name>`, int32) for these inputs, made in `alloc`.
Batch reference_batch(const TensorFile& ref, const std::vector<std::string>& inputs,
                      memory::Allocator& alloc);

// Runs `m` (its training step built here, with gradient outputs) from the recording's weights
// and batch, and checks it against the recording with gtest expectations.
void expect_matches_reference(ir::models::Model m, const TensorFile& ref, memory::Allocator& alloc);

}  // namespace disc::engine
