#include "setup.h"

#include <filesystem>

#include "apps/data/byte_tokenizer.h"
#include "apps/data/synthetic.h"
#include "apps/data/text_dataset.h"
#include "ir/error.h"
#include "ir/text_format.h"

namespace disc::apps {
namespace {

void load_examples(const Config& c, RunSetup& s) {
  std::string source = c.get_string("data.source");
  if (source == "synthetic") {
    data::SyntheticSpec spec;
    spec.vocab = c.get_int("data.synthetic.vocab");
    spec.examples = c.get_int("data.synthetic.examples");
    spec.min_len = c.get_int("data.synthetic.min_len");
    spec.max_len = c.get_int("data.synthetic.max_len");
    spec.lengths = c.get_string("data.synthetic.lengths");
    spec.seed = static_cast<uint64_t>(c.get_int("train.seed"));
    s.examples = data::make_synthetic(spec);
    s.vocab = spec.vocab;
    s.max_len = spec.max_len;
    return;
  }
  std::string path = c.get_string("data.path");
  if (path.empty()) throw InvalidArgument("data.source is " + source + " but data.path is empty: set data.path to the dataset file");
  data::TextFileSpec spec;
  spec.path = resolve_path(c, path);
  spec.format = source;
  spec.fields = c.get_strings("data.fields");
  spec.max_len = c.get_int("data.max_len");
  s.examples = data::load_text_dataset(spec);
  if (s.examples.empty()) throw InvalidArgument(spec.path + " holds no examples");
  s.vocab = data::ByteTokenizer().vocab_size();
  s.max_len = spec.max_len;
}

// The batch symbol's upper bound: the most rows a batch can have. It sizes the largest step, the
// one a memory cap is checked against before the run.
int64_t batch_bound(const Config& c) {
  return c.get_int("data.token_budget") == 0 ? std::min(c.get_int("data.batch_size"), c.get_int("model.max_batch"))
                                             : c.get_int("model.max_batch");
}

ir::models::Model build_model(const Config& c, const RunSetup& s) {
  int64_t vocab = c.get_int("model.vocab") ? c.get_int("model.vocab") : s.vocab;
  if (vocab < s.vocab) {
    throw InvalidArgument("model.vocab is " + std::to_string(vocab) + " but the data's tokens go up to " +
                          std::to_string(s.vocab - 1) + ": set model.vocab to 0 (take the data's) or at least " +
                          std::to_string(s.vocab));
  }
  if (std::string file = c.get_string("model.graph"); !file.empty()) {
    auto m = ir::models::model_from_graph(ir::parse_graph_file(resolve_path(c, file)), c.get_float("model.init_std"));
    for (const char* input : {"tokens", "targets"}) {
      const ir::Value* v = m.graph->find_value(input);
      if (!v || v->role() != ir::Role::kInput || v->dtype() != ir::DType::kI32 || v->rank() != 2) {
        throw InvalidArgument(file + ": disc-train feeds `" + input + "` i32[B, S]; declare `input %" + input + " : i32[B, S]`");
      }
    }
    return m;
  }
  if (c.get_string("model.family") == "gpt2") {
    ir::models::Gpt2Config g;
    g.vocab = vocab, g.hidden = c.get_int("model.hidden"), g.layers = c.get_int("model.layers");
    g.heads = c.get_int("model.heads"), g.ffn = c.get_int("model.ffn"), g.max_seq = s.max_len;
    g.max_batch = batch_bound(c), g.norm_eps = c.get_float("model.norm_eps");
    g.init_std = c.get_float("model.init_std"), g.dropout = c.get_float("model.dropout");
    return ir::models::build_gpt2(g);
  }
  ir::models::LlamaConfig l;
  l.vocab = vocab, l.hidden = c.get_int("model.hidden"), l.layers = c.get_int("model.layers");
  l.heads = c.get_int("model.heads"), l.kv_heads = c.get_int("model.kv_heads"), l.ffn = c.get_int("model.ffn");
  l.norm_eps = c.get_float("model.norm_eps"), l.rope_theta = c.get_float("model.rope_theta");
  l.tied_embeddings = c.get_bool("model.tied_embeddings"), l.init_std = c.get_float("model.init_std");
  l.max_batch = batch_bound(c), l.max_seq = s.max_len;
  if (l.hidden % l.heads != 0 || (l.hidden / l.heads) % 2 != 0) {
    throw InvalidArgument("model.hidden (" + std::to_string(l.hidden) + ") must be a multiple of 2 * model.heads (" +
                          std::to_string(l.heads) + ") so that each head has an even size for RoPE");
  }
  if (l.heads % l.kv_heads != 0) {
    throw InvalidArgument("model.heads (" + std::to_string(l.heads) + ") must be a multiple of model.kv_heads (" +
                          std::to_string(l.kv_heads) + ")");
  }
  return ir::models::build_llama(l);
}

engine::TrainerOptions trainer_options(const Config& c) {
  engine::TrainerOptions t;
  t.device = c.get_string("device.name");
  t.threads = static_cast<int>(c.get_int("device.threads"));
  t.seed = static_cast<uint64_t>(c.get_int("train.seed"));
  t.memory = {.cap = c.get_bytes("memory.cap"), .schedule = c.get_bool("memory.schedule"),
              .remat = c.get_bool("memory.remat"), .offload = c.get_bool("memory.offload")};
  auto& o = t.optimizer;
  o.kind = c.get_string("optimizer.name") == "sgd" ? ir::OptimizerConfig::Kind::kSgd : ir::OptimizerConfig::Kind::kAdamW;
  o.weight_decay = c.get_float("optimizer.weight_decay"), o.beta1 = c.get_float("optimizer.beta1");
  o.beta2 = c.get_float("optimizer.beta2"), o.eps = c.get_float("optimizer.eps");
  o.momentum = c.get_float("optimizer.momentum"), o.nesterov = c.get_bool("optimizer.nesterov");
  o.clip_norm = c.get_float("optimizer.clip_norm");
  return t;
}

}  // namespace

std::string resolve_path(const Config& c, const std::string& path) {
  if (path.empty() || std::filesystem::path(path).is_absolute() || c.file().empty()) return path;
  auto base = std::filesystem::path(c.file()).parent_path();
  auto candidate = base / path;
  // A path that exists relative to the working directory wins (command-line habits).
  return std::filesystem::exists(path) ? path : candidate.lexically_normal().string();
}

RunSetup make_setup(const Config& c) {
  RunSetup s;
  if (c.get_string("device.name") != "cpu" && c.get_string("device.name") != "sim") {
    throw InvalidArgument("device.name is `" + c.get_string("device.name") + "`; this build has: cpu, sim");
  }
  load_examples(c, s);
  s.batching.batch_size = c.get_int("data.batch_size");
  s.batching.token_budget = c.get_int("data.token_budget");
  s.batching.max_rows = c.get_int("model.max_batch");  // the batch symbol's bound
  s.batching.shuffle = c.get_bool("data.shuffle");
  s.batching.seed = static_cast<uint64_t>(c.get_int("train.seed"));
  if (s.batching.token_budget > 0 && s.batching.token_budget < s.max_len) {
    throw InvalidArgument("data.token_budget (" + std::to_string(s.batching.token_budget) +
                          ") is below the longest sequence (" + std::to_string(s.max_len) + "): raise it or lower data.max_len");
  }
  if (s.batching.token_budget == 0 && s.batching.batch_size > c.get_int("model.max_batch")) {
    throw InvalidArgument("data.batch_size (" + std::to_string(s.batching.batch_size) + ") exceeds model.max_batch (" +
                          std::to_string(c.get_int("model.max_batch")) + "): raise model.max_batch");
  }
  s.model = build_model(c, s);
  s.trainer = trainer_options(c);
  s.trainer.buckets = c.get_ints("jit.buckets");
  s.trainer.kernel_cache_dir = c.get_string("jit.cache_dir");
  s.describe = c.get_string("model.family") + " " + std::to_string(c.get_int("model.layers")) + "x" +
               std::to_string(c.get_int("model.hidden")) + ", " + std::to_string(s.examples.size()) + " " +
               c.get_string("data.source") + " examples, token ids < " + std::to_string(s.vocab);
  return s;
}

}  // namespace disc::apps
