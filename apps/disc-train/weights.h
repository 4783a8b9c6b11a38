// The weights a command that reads a trained model (export, eval) starts from: a checkpoint, named
// or the newest complete one in checkpoint.dir, else those a run of the config starts from.
#pragma once

#include <map>
#include <string>

#include "config.h"
#include "engine/tensor.h"
#include "setup.h"

namespace disc::apps {

// `named`, else the newest complete checkpoint in checkpoint.dir; "" when checkpoint.dir is ''.
// `verb` ("export", "evaluate") says what for in the error when checkpoint.dir holds none.
std::string checkpoint_to_use(const Config& c, const std::string& named, const std::string& verb);

// The parameters a run of this config starts from: model.onnx's initializers, model.hf's weights,
// or the seeded initialisation.
std::map<std::string, engine::Tensor> initial_weights(const RunSetup& s, memory::Allocator& host);

// The tensors of checkpoint `from` (parameters and optimizer state, on `host`), after checking that
// it holds every parameter of `m` in its shape (InvalidArgument: another run's checkpoint).
std::map<std::string, engine::Tensor> checkpoint_parameters(const ir::models::Model& m,
                                                            const std::string& from,
                                                            memory::Allocator& host);

}  // namespace disc::apps
