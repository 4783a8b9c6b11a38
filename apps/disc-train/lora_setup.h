// model.lora.* as the llama's LoraConfig (ir/models/lora.h): the keys read and checked against
// each other, an adapter folder's config taken (model.lora.from), the base's dtype chosen.
#pragma once

#include "base/dtype.h"
#include "config.h"
#include "ir/models/lora.h"

namespace disc::apps {

// Whether the config asks for LoRA: model.lora.rank above 0, or model.lora.from.
bool lora_requested(const Config& c);

// The LoRA the config asks for (rank 0: none). The base is held in `source` (the dtype of
// model.hf's weights on disk) when that is 16-bit, else in train.precision's 16-bit dtype, else
// bf16. InvalidArgument (one line) for LoRA keys set while the rank is 0, or keys that disagree
// with model.lora.from's adapter_config.json.
ir::models::LoraConfig lora_config(const Config& c, DType source);

}  // namespace disc::apps
