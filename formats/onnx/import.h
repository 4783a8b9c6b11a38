// ONNX models as disc graphs: `torch.onnx.export(..., dynamic_axes=...)` in, a forward graph with
// symbolic dims out, trainable by disc under a memory cap.
//
//   onnx::ImportOptions o;
//   o.bounds = {{"batch", 64}, {"seq", 1024}};        // dim_params' upper bounds
//   onnx::Imported m = onnx::import_file("llama.onnx", o);
//   ir::models::Model model = onnx::language_model(m); // + targets and the cross-entropy
//   engine::Trainer trainer(std::move(model), options);
//   onnx::load_weights(m, trainer);                    // the initializers' values
//
// What becomes what:
//   - graph inputs: inputs; each dim_param a symbol named after it, in [1, its bound];
//   - float initializers: parameters (f32), named as in the file; integer ones fold;
//   - Constant, Shape and the shape arithmetic on them fold at import (formats/onnx/known.h), so
//   that a
//     Reshape whose target Concat built from Shape gets a symbolic target and no node remains;
//   - every other node: disc ops (formats/onnx/rules/), each with its gradient through disc's
//   autodiff.
// Anything else is one InvalidArgument naming the file, the node, its op and the opset, and for an
// op disc lacks, the ops it imports at that opset. Nothing is read past a malformed protobuf.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "ir/models/model.h"

namespace disc::onnx {

// One graph input as disc takes it.
struct InputOptions {
  std::string name;             // the disc input's name (empty: the file's)
  std::vector<int64_t> bounds;  // each dim's symbol's upper bound (0 or missing: as `bounds` says)
};

struct ImportOptions {
  std::map<std::string, int64_t> bounds;  // a dim_param's upper bound, by name
  int64_t default_bound = 4096;           // for dim_params not in `bounds`
  std::vector<InputOptions> inputs;       // by the graph inputs' position (initializers skipped)
  // Integer graph inputs of type int64 are taken as i32 (what disc-train's batches hold) and
  // widened in the graph.
  bool int64_inputs_as_i32 = true;
  // What the importer takes before it builds anything sized by the file: a file past these is
  // refused naming the count (a 1e6-node file imported in 10 s, then ran out of memory in the
  // training step; a 32-layer llama exports to about 10,000 nodes and 2 dim_params).
  int64_t max_nodes = 200000;
  int64_t max_symbols = 256;  // distinct dim_params
};

struct Imported {
  std::unique_ptr<ir::Graph> graph;  // the forward: the model's inputs, params, outputs
  std::string source;                // the file
  int64_t opset = 0;                 // the default domain's
  std::map<std::string, std::vector<float>> weights;  // each parameter's initializer, row-major
  std::vector<std::string> inputs;                    // the graph inputs, in the file's order
  std::vector<std::string> outputs;                   // the graph outputs, in the file's order
};

// The opsets the importer takes (the default ONNX domain).
inline constexpr int64_t kMinOpset = 13, kMaxOpset = 17;

Imported import_file(const std::string& path, const ImportOptions& options = {});
// A serialized ModelProto; `name` stands for the file in messages.
Imported import_bytes(std::string_view bytes, const std::string& name,
                      const ImportOptions& options = {});

// The ONNX ops the importer handles at `opset`, sorted.
std::vector<std::string> supported_ops(int64_t opset);

// A trainable model: with a float scalar output named `loss`, that is the loss; otherwise the
// first output is the logits [..., classes], and the model gets an input `targets` i32 of the
// logits' leading shape and the loss cross_entropy(logits, targets) (targets -100 do not count).
// Parameters keep their initializer values (load_weights); ParamInit stays the default.
ir::models::Model language_model(Imported& imported);

}  // namespace disc::onnx
