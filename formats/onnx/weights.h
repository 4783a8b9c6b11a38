// An imported model's initializers into a Trainer, and trained weights back into an ONNX file.
//
//   onnx::Imported m = onnx::import_file("llama.onnx");
//   engine::Trainer trainer(onnx::language_model(m), options);
//   onnx::load_weights(m, trainer);
//   ... train ...
//   onnx::export_weights("llama.onnx", engine::parameters_of(trainer), "tuned.onnx");
#pragma once

#include <map>
#include <string>

#include "engine/tensor.h"
#include "engine/trainer.h"
#include "formats/onnx/import.h"

namespace disc::onnx {

// Sets every parameter of `trainer` that an initializer of `m` holds to that value.
void load_weights(const Imported& m, engine::Trainer& trainer);

// Writes `out`: the model at `source` with each float initializer that `params` names replaced by
// that parameter's values (in the initializer's own dtype and shape). Everything else in the file
// (nodes, opsets, metadata) stays as it was. The file is written whole under a hidden name and
// renamed into place. Throws InvalidArgument when a parameter is missing from the file or has
// another shape, and when `out` is `source`.
void export_weights(const std::string& source, const std::map<std::string, engine::Tensor>& params,
                    const std::string& out);

}  // namespace disc::onnx
