#include "setup.h"

#include <fnmatch.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "apps/data/byte_tokenizer.h"
#include "apps/data/sentencepiece_tokenizer.h"
#include "apps/data/synthetic.h"
#include "apps/data/text_dataset.h"
#include "base/error.h"
#include "formats/lora_adapter.h"
#include "formats/onnx/weights.h"
#include "ir/binding.h"
#include "ir/models/packed_rows.h"
#include "ir/text_format.h"
#include "lora_setup.h"

namespace disc::apps {
namespace {

// data.tokenizer: bytes, a sentencepiece model file, or (auto) model.hf's tokenizer.model when
// the folder has one. A Llama folder's BOS and EOS ids come from its config.json.
std::unique_ptr<data::Tokenizer> make_tokenizer(const Config& c, const formats::HfLlama* hf) {
  std::string file = c.get_string("data.tokenizer");
  if (file == "auto" && hf && !std::filesystem::exists(hf->dir + "/tokenizer.model")) {
    // Byte ids would train the model on tokens that mean nothing to it.
    throw InvalidArgument(hf->dir + " has no tokenizer.model (a sentencepiece model), the only " +
                          "tokenizer disc reads: name one with data.tokenizer, or set " +
                          "data.tokenizer: bytes to train on byte ids anyway");
  }
  if (file == "auto") {
    file = hf ? hf->dir + "/tokenizer.model" : "bytes";
  } else if (file != "bytes") {
    file = resolve_path(c, file);
  }
  if (file == "bytes") return std::make_unique<data::ByteTokenizer>();
  return std::make_unique<data::SentencePieceTokenizer>(file, hf ? hf->bos_id : -1,
                                                        hf ? hf->eos_id : -1);
}

void load_synthetic(const Config& c, RunSetup& s) {
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
}

// The examples of a json, jsonl or text file, as data.* says to read them (data.path's or
// eval.path's, with its fields).
data::Dataset load_text_file(const Config& c, const std::string& path,
                             const std::vector<std::string>& fields,
                             const data::Tokenizer& tokenizer, data::LoadNotes* notes) {
  data::TextFileSpec spec;
  spec.path = resolve_path(c, path);
  spec.format = c.get_string("data.source");
  spec.fields = fields;
  spec.max_len = c.get_int("data.max_len");
  if (const std::string prompt = c.get_string("data.template.prompt"); !prompt.empty())
    spec.prompt_template = data::PromptTemplate{prompt, c.get_string("data.template.response")};
  spec.train_on = c.get_string("data.train_on");
  if (spec.train_on == "response" && !spec.prompt_template) {
    throw InvalidArgument(
        "data.train_on is response, but data.template.prompt is empty: give the template that "
        "makes each record's prompt, so the loss knows where the response starts");
  }
  data::Dataset d = data::load_text_dataset(spec, tokenizer, notes);
  if (d.examples.empty()) throw InvalidArgument(spec.path + " holds no examples");
  return d;
}

void load_examples(const Config& c, RunSetup& s) {
  std::string source = c.get_string("data.source");
  if (source == "synthetic") return load_synthetic(c, s);
  std::string path = c.get_string("data.path");
  if (path.empty())
    throw InvalidArgument("data.source is " + source +
                          " but data.path is empty: set data.path to the dataset file");
  data::LoadNotes notes;
  const bool templated = !c.get_string("data.template.prompt").empty();
  const auto tokenizer = make_tokenizer(c, s.hf.get());
  data::Dataset d = load_text_file(c, path, c.get_strings("data.fields"), *tokenizer, &notes);
  s.examples = std::move(d.examples);
  s.loss_start = std::move(d.loss_start);
  if (notes.lacking_fields > 0) {
    s.data_notes = std::to_string(notes.lacking_fields) +
                   (notes.lacking_fields == 1 ? " record lacks" : " records lack") + " some of " +
                   (templated ? "the template's fields" : "data.fields") +
                   ", the first: " + notes.first_lacking;
  }
  if (notes.empty_records > 0) {
    s.data_notes += (s.data_notes.empty() ? "" : "; ") + std::to_string(notes.empty_records) +
                    (notes.empty_records == 1 ? " record" : " records") +
                    " skipped with every field empty, the first: " + notes.first_empty;
  }
  if (notes.cut_responses > 0) {
    s.data_notes += (s.data_notes.empty() ? "" : "; ") + std::to_string(notes.cut_responses) +
                    " dropped whose response data.max_len cuts off, the first: " + notes.first_cut;
  }
  s.vocab = tokenizer->vocab_size();
  s.max_len = c.get_int("data.max_len");
  s.tokenizer = tokenizer->describe();
}

// eval.path's examples, read as data.path's are (the first eval.max_examples of them).
void load_eval(const Config& c, RunSetup& s) {
  const std::string path = c.get_string("eval.path");
  if (path.empty()) return;
  if (c.get_string("data.source") == "synthetic")
    throw InvalidArgument(
        "eval.path is set, but data.source is synthetic: eval.path is read in data.source's "
        "format; set data.source to json, jsonl or text, or eval.path to ''");
  std::vector<std::string> fields = c.get_strings("eval.fields");
  if (fields.empty()) fields = c.get_strings("data.fields");
  data::Dataset d;
  try {
    d = load_text_file(c, path, fields, *make_tokenizer(c, s.hf.get()), nullptr);
  } catch (const Error& e) {
    throw InvalidArgument("eval.path: " + std::string(e.what()));
  }
  if (const int64_t most = c.get_int("eval.max_examples");
      most > 0 && static_cast<int64_t>(d.examples.size()) > most) {
    d.examples.resize(most);
    if (!d.loss_start.empty()) d.loss_start.resize(most);
  }
  s.eval_examples = std::move(d.examples);
  s.eval_loss_start = std::move(d.loss_start);
}

// The batch symbol's upper bound: the most rows a batch can have. It sizes the largest step, the
// one a memory cap is checked against before the run.
int64_t batch_bound(const Config& c) {
  return c.get_int("data.token_budget") == 0
             ? std::min(c.get_int("data.batch_size"), c.get_int("model.max_batch"))
             : c.get_int("model.max_batch");
}

// The batch shapes the batcher can hand a graph: [rows, seq] at the extremes.
struct DataShapes {
  int64_t max_rows = 0, min_rows = 0, max_seq = 0, min_seq = 0;
  int64_t longest = 0;    // the longest example's tokens: positions run to longest - 1
  std::string rows_from;  // the key that sets max_rows
};

DataShapes data_shapes(const Config& c, const RunSetup& s) {
  DataShapes d;
  const auto n = static_cast<int64_t>(s.examples.size());
  d.min_seq = d.max_seq = static_cast<int64_t>(s.examples.front().size());
  for (const auto& e : s.examples) {
    d.max_seq = std::max(d.max_seq, static_cast<int64_t>(e.size()));
    d.min_seq = std::min(d.min_seq, static_cast<int64_t>(e.size()));
  }
  d.longest = d.max_seq;
  if (int64_t budget = c.get_int("data.token_budget"); budget > 0) {
    d.max_rows =
        std::min({c.get_int("model.max_batch"), n, std::max<int64_t>(1, budget / d.min_seq)});
    d.min_rows = 1;
    d.rows_from = "data.token_budget and model.max_batch";
  } else {
    int64_t size = c.get_int("data.batch_size");
    d.max_rows = std::min(size, n);
    d.min_rows = n % size ? n % size : size;  // an epoch's last batch takes what is left
    d.rows_from = "data.batch_size";
  }
  if (c.get_bool("data.packing")) {  // one row of the step's tokens, as an ONNX model takes it
    const int64_t budget = c.get_int("data.token_budget");
    d.max_seq = budget > 0 ? budget : d.max_rows * d.max_seq;
    d.max_rows = d.min_rows = 1;
  }
  return d;
}

// v without a cast before it (an imported model widens int32 token ids).
const ir::Value* uncast(const ir::Value* v) {
  return v && v->producer() && v->producer()->op().name == "cast" ? v->producer()->operand(0) : v;
}

// v is the input `name`, or that input cast.
bool is_input(const ir::Value* v, const char* name) {
  v = uncast(v);
  return v && v->role() == ir::Role::kInput && v->name() == name;
}

// v indexes the sequence (an iota, or one cast): a gather at it reads learned positions.
bool is_position_index(const ir::Value* v) {
  v = uncast(v);
  return v && v->producer() && v->producer()->op().name == "iota";
}

// A graph file must take what the data gives: inputs disc-train feeds, symbol bounds that admit
// every batch shape, and embedding and logits wide enough for every token id. Checked here, so
// that a mismatch is one line before anything is written rather than an error at step 1.
void check_graph_fits_data(const std::string& file, const ir::Graph& g, const Config& c,
                           const RunSetup& s) {
  const std::string fed =
      "disc-train feeds `tokens` and `targets` i32[B, S] (and `seed` i64[] when declared)";
  const bool onnx = file.ends_with(".onnx");  // advice in the file's own terms
  for (const char* input : {"tokens", "targets"}) {
    const ir::Value* v = g.find_value(input);
    if (!v || v->role() != ir::Role::kInput || v->dtype() != DType::kI32 || v->rank() != 2) {
      throw InvalidArgument(
          file + ": disc-train feeds `" + input + "` i32[B, S]; " +
          (onnx ? "export the model with one graph input, the token ids (int64 or int32, "
                  "[batch, seq])"
                : "declare `input %" + std::string(input) + " : i32[B, S]`"));
    }
  }
  ir::ShapeOf largest, smallest;
  const DataShapes d = data_shapes(c, s);
  for (const ir::Value* a : g.arguments()) {
    if (a->role() == ir::Role::kInput) {
      if (a->name() == "seed" && a->dtype() == DType::kI64 && a->rank() == 0) {
        largest[a->name()] = smallest[a->name()] = {a->dtype(), {}};
      } else if (a->name() != "tokens" && a->name() != "targets") {
        throw InvalidArgument(file + ": " + (onnx ? "graph input `" : "input %") + a->name() +
                              (onnx ? "` (" : " (") + a->type().str() +
                              ") is not something the data gives; " + fed +
                              (onnx ? ": export the model with the token ids as its one input"
                                    : ": compute it in the graph or make it a param"));
      } else {
        largest[a->name()] = {a->dtype(), {d.max_rows, d.max_seq}};
        smallest[a->name()] = {a->dtype(), {d.min_rows, d.min_seq}};
      }
      continue;
    }
    std::vector<int64_t> shape;
    for (const auto& dim : a->shape()) {
      auto k = dim.constant();
      if (!k) {
        throw InvalidArgument(file + ": " + std::string(ir::role_name(a->role())) + " %" +
                              a->name() + " has the symbolic shape " + a->type().str() +
                              "; parameters need fixed dims");
      }
      shape.push_back(*k);
    }
    largest[a->name()] = smallest[a->name()] = {a->dtype(), shape};
  }
  auto check = [&](const ir::ShapeOf& shapes, const std::vector<int64_t>& bs,
                   const std::string& which, const std::string& fix) {
    try {
      ir::bind_symbols(g, shapes);
    } catch (const Error& e) {
      throw InvalidArgument(file + ": the data gives batches as " + which + " as [" +
                            std::to_string(bs[0]) + ", " + std::to_string(bs[1]) +
                            "], which the graph refuses: " + e.what() + " (or " + fix + ")");
    }
  };
  const std::string max_len =
      c.get_string("data.source") == "synthetic" ? "data.synthetic.max_len" : "data.max_len";
  check(largest, {d.max_rows, d.max_seq}, "large", "lower " + d.rows_from + " or " + max_len);
  check(smallest, {d.min_rows, d.min_seq}, "small", "lower the symbols' lower bounds in the graph");
  const std::string tokens_hint = " the data's token ids go up to " + std::to_string(s.vocab - 1) +
                                  " (" + c.get_string("data.source") + " data, vocab " +
                                  std::to_string(s.vocab) + ")";
  for (const ir::Node* n : g.nodes()) {
    if (n->op().name == "gather" && is_position_index(n->operand(1))) {
      auto rows = n->operand(0)->shape().front().constant();
      if (rows && *rows < d.longest)
        throw InvalidArgument(file + ": position embedding %" + n->operand(0)->name() + " has " +
                              std::to_string(*rows) + " rows, but the data's examples run to " +
                              std::to_string(d.longest) + " tokens: lower " + max_len + " to " +
                              std::to_string(*rows));
      continue;
    }
    bool embeds = n->op().name == "gather" && is_input(n->operand(1), "tokens");
    bool scores = n->op().name == "cross_entropy" && is_input(n->operand(1), "targets");
    if (!embeds && !scores) continue;
    const ir::Value* table = n->operand(0);
    const auto& dim = embeds ? table->shape().front() : table->shape().back();
    auto size = dim.constant();
    if (size && *size < s.vocab) {
      throw InvalidArgument(
          file + ": " +
          (embeds ? "embedding %" + table->name() + " has " + std::to_string(*size) + " rows"
                  : "logits %" + table->name() + " score " + std::to_string(*size) + " classes") +
          ", but" + tokens_hint + ": make it at least " + std::to_string(s.vocab));
    }
  }
}

// model.hf's llama, its symbols bounded by the data as the built-in llama's are.
ir::models::Model build_hf_llama(const Config& c, RunSetup& s) {
  if (!c.get_string("model.graph").empty() || c.get_string("model.family") != "llama") {
    throw InvalidArgument(
        "model.hf names a Hugging Face llama, but model." +
        std::string(c.get_string("model.graph").empty() ? "family is gpt2" : "graph is set") +
        ": leave model.family llama and model.graph empty");
  }
  ir::models::LlamaConfig l = s.hf->config;
  if (l.vocab < s.vocab) {
    throw InvalidArgument("the data's token ids go up to " + std::to_string(s.vocab - 1) + " (" +
                          s.tokenizer + "), but " + s.hf->dir + "/config.json has vocab_size " +
                          std::to_string(l.vocab) + ", so the embedding has rows for ids below " +
                          std::to_string(l.vocab) + " only: the model needs vocab_size " +
                          std::to_string(s.vocab) + " or more (and tensors of that many rows), " +
                          "or data.tokenizer a tokenizer of at most " + std::to_string(l.vocab) +
                          " ids");
  }
  l.max_batch = batch_bound(c), l.max_seq = s.max_len,
  l.max_tokens = c.get_int("data.token_budget"), l.packed = c.get_bool("data.packing");
  if (s.hf->max_positions > 0 && s.max_len > s.hf->max_positions) {
    spdlog::warn(
        "sequences may be {} tokens long, but {} was trained on {} positions "
        "(max_position_embeddings): lower data.max_len to stay within them",
        s.max_len, s.hf->dir, s.hf->max_positions);
  }
  l.lora = lora_config(c, s.hf->tensors.at("model.embed_tokens.weight").entry->dtype);
  s.llama = l;
  ir::models::Model m = ir::models::build_llama(l);
  // The folder's weights replace the initialisation (load_initial_weights): zeros cost a memset,
  // where drawing a billion normals costs a minute. New adapters keep theirs.
  for (const formats::HfName& n : formats::hf_llama_names(l))
    m.init.at(n.disc).kind = ir::models::ParamInit::Kind::kZeros;
  return m;
}

// model.onnx's model: its one input is the token ids, bounded by the data as the built-in
// models' symbols are; disc adds `targets` and the cross-entropy unless it has a `loss` output.
ir::models::Model build_onnx_model(const Config& c, RunSetup& s) {
  const std::string file = c.get_string("model.onnx");
  if (!c.get_string("model.graph").empty() || !c.get_string("model.hf").empty())
    throw InvalidArgument("model.onnx is set, and so is model." +
                          std::string(c.get_string("model.hf").empty() ? "graph" : "hf") +
                          ": name one model");
  onnx::ImportOptions o;
  const bool packed = c.get_bool("data.packing");
  if (packed && !c.get_bool("jit.attention"))
    throw InvalidArgument(
        "data.packing: an ONNX model packs through its attention as disc's attention op; set "
        "jit.attention: true, or data.packing: false");
  const int64_t budget = c.get_int("data.token_budget");
  // Packed: one row of the step's tokens (ir/models/packed_rows.h), up to the budget or the
  // padded batch's positions.
  const int64_t packed_row = budget > 0 ? budget : batch_bound(c) * s.max_len;
  o.inputs = {{"tokens", packed ? std::vector<int64_t>{1, packed_row}
                                : std::vector<int64_t>{batch_bound(c), s.max_len}}};
  auto imported = std::make_shared<onnx::Imported>(onnx::import_file(resolve_path(c, file), o));
  if (imported->inputs.size() != 1)
    throw InvalidArgument(file + ": disc-train feeds one input, the token ids [batch, seq]; the " +
                          "model has " + std::to_string(imported->inputs.size()) +
                          " (export the forward with the token ids alone)");
  if (budget > 0) {
    const ir::Value* tokens = imported->graph->find_value("tokens");
    imported->graph->shapes().add_limit(ir::product(tokens->shape()), budget);
  }
  ir::models::Model m = onnx::language_model(*imported);
  check_graph_fits_data(file, *m.graph, c, s);
  if (packed) ir::models::pack_one_row(*m.graph, batch_bound(c));
  // The initializers replace the initialisation (load_initial_weights).
  for (auto& [name, init] : m.init) init.kind = ir::models::ParamInit::Kind::kZeros;
  s.onnx = std::move(imported);
  return m;
}

ir::models::Model build_model(const Config& c, RunSetup& s) {
  if (c.get_bool("data.packing")) {
    if (!c.get_string("model.graph").empty()) {
      throw InvalidArgument(
          "data.packing: the model from model.graph cannot take packed steps (disc-train packs "
          "its own llama and gpt2, model.hf's llama and ONNX models whose attention and RoPE it "
          "recognises; a graph file's attention and positions are its own): set data.packing: "
          "false");
    }
  }
  if (lora_requested(c)) {
    const char* other =
        !c.get_string("model.onnx").empty()    ? "model.onnx"
        : !c.get_string("model.graph").empty() ? "model.graph"
        : c.get_string("model.family") != "llama" && c.get_string("model.hf").empty()
            ? "model.family gpt2"
            : nullptr;
    if (other)
      throw InvalidArgument(std::string("model.lora adapts a llama's projections (disc's llama or "
                                        "model.hf's), not ") +
                            other + ": drop model.lora, or train a llama");
    s.lora_from = resolve_path(c, c.get_string("model.lora.from"));
  }
  if (!c.get_string("model.onnx").empty()) return build_onnx_model(c, s);
  if (s.hf) return build_hf_llama(c, s);  // the folder's vocab_size, not model.vocab
  int64_t vocab = c.get_int("model.vocab") ? c.get_int("model.vocab") : s.vocab;
  if (vocab < s.vocab) {
    throw InvalidArgument("model.vocab is " + std::to_string(vocab) +
                          " but the data's tokens go up to " + std::to_string(s.vocab - 1) +
                          ": set model.vocab to 0 (take the data's) or at least " +
                          std::to_string(s.vocab));
  }
  if (std::string file = c.get_string("model.graph"); !file.empty()) {
    auto m = ir::models::model_from_graph(ir::parse_graph_file(resolve_path(c, file)),
                                          c.get_float("model.init_std"));
    check_graph_fits_data(file, *m.graph, c, s);
    return m;
  }
  if (c.get_string("model.family") == "gpt2") {
    ir::models::Gpt2Config g;
    g.vocab = vocab, g.hidden = c.get_int("model.hidden"), g.layers = c.get_int("model.layers");
    g.heads = c.get_int("model.heads"), g.ffn = c.get_int("model.ffn"), g.max_seq = s.max_len;
    g.max_batch = batch_bound(c), g.max_tokens = c.get_int("data.token_budget");
    g.packed = c.get_bool("data.packing");
    g.norm_eps = c.get_float("model.norm_eps");
    g.init_std = c.get_float("model.init_std"), g.dropout = c.get_float("model.dropout");
    return ir::models::build_gpt2(g);
  }
  ir::models::LlamaConfig l;
  l.vocab = vocab, l.hidden = c.get_int("model.hidden"), l.layers = c.get_int("model.layers");
  l.heads = c.get_int("model.heads"), l.kv_heads = c.get_int("model.kv_heads"),
  l.ffn = c.get_int("model.ffn");
  l.norm_eps = c.get_float("model.norm_eps"), l.rope_theta = c.get_float("model.rope_theta");
  l.tied_embeddings = c.get_bool("model.tied_embeddings"),
  l.init_std = c.get_float("model.init_std");
  l.max_batch = batch_bound(c), l.max_seq = s.max_len,
  l.max_tokens = c.get_int("data.token_budget"), l.packed = c.get_bool("data.packing");
  l.lora = lora_config(c, DType::kF32);
  if (l.hidden % l.heads != 0 || (l.hidden / l.heads) % 2 != 0) {
    throw InvalidArgument("model.hidden (" + std::to_string(l.hidden) +
                          ") must be a multiple of 2 * model.heads (" + std::to_string(l.heads) +
                          ") so that each head has an even size for RoPE");
  }
  if (l.heads % l.kv_heads != 0) {
    throw InvalidArgument("model.heads (" + std::to_string(l.heads) +
                          ") must be a multiple of model.kv_heads (" + std::to_string(l.kv_heads) +
                          ")");
  }
  s.llama = l;
  return ir::models::build_llama(l);
}

// train.freeze's patterns as parameter names. A pattern matches a disc name (l0.wq) or, for a
// llama, the Hugging Face name of the same tensor (model.layers.0.self_attn.q_proj.weight); one
// that matches nothing is a mistake worth a refusal, not a run that trains what it should not.
std::set<std::string> frozen_parameters(const Config& c, const RunSetup& s) {
  std::map<std::string, std::string> hf_name;
  if (s.llama)
    for (const formats::HfName& n : formats::hf_llama_names(*s.llama)) hf_name[n.disc] = n.hf;
  std::set<std::string> frozen;
  for (const std::string& pattern : c.get_strings("train.freeze")) {
    bool matched = false;
    for (const ir::Value* p : s.model.params) {
      auto hf = hf_name.find(p->name());
      if (fnmatch(pattern.c_str(), p->name().c_str(), 0) == 0 ||
          (hf != hf_name.end() && fnmatch(pattern.c_str(), hf->second.c_str(), 0) == 0)) {
        frozen.insert(p->name()), matched = true;
      }
    }
    if (!matched) {
      throw InvalidArgument("train.freeze: `" + pattern + "` matches no parameter (they are " +
                            "named like " + s.model.params.front()->name() +
                            (s.llama ? " or model.embed_tokens.weight" : "") +
                            "; `disc-train plan` lists them all)");
    }
  }
  return frozen;
}

engine::TrainerOptions trainer_options(const Config& c) {
  engine::TrainerOptions t;
  t.device = c.get_string("device.name");
  t.threads = static_cast<int>(c.get_int("device.threads"));
  t.tf32 = c.get_bool("device.tf32");
  t.bf16_dot = c.get_bool("device.bf16_dot");
  t.seed = static_cast<uint64_t>(c.get_int("train.seed"));
  t.precision = *parse_dtype(c.get_string("train.precision"));  // the schema's choices parse
  t.memory = {.cap = c.get_bytes("memory.cap"),
              .schedule = c.get_bool("memory.schedule"),
              .remat = c.get_bool("memory.remat"),
              .offload = c.get_bool("memory.offload")};
  auto& o = t.optimizer;
  o.kind = c.get_string("optimizer.name") == "sgd" ? ir::OptimizerConfig::Kind::kSgd
                                                   : ir::OptimizerConfig::Kind::kAdamW;
  o.weight_decay = c.get_float("optimizer.weight_decay"), o.beta1 = c.get_float("optimizer.beta1");
  o.beta2 = c.get_float("optimizer.beta2"), o.eps = c.get_float("optimizer.eps");
  o.momentum = c.get_float("optimizer.momentum"), o.nesterov = c.get_bool("optimizer.nesterov");
  o.clip_norm = c.get_float("optimizer.clip_norm");
  const std::string passes = c.get_string("optimizer.clip_passes");
  o.clip_passes = passes == "auto" ? 0 : std::stoi(passes);
  const std::string state = c.get_string("optimizer.state_dtype");
  o.state = state == "int8"   ? ir::OptimizerConfig::State::kInt8
            : state == "bf16" ? ir::OptimizerConfig::State::kBF16
                              : ir::OptimizerConfig::State::kF32;
  o.accumulate = c.get_int("train.accumulate") > 1;
  t.jit = c.get_bool("jit.fusion");
  t.fuse_attention = c.get_bool("jit.attention");
  t.fuse_cross_entropy = c.get_bool("jit.cross_entropy");
  t.backward_recompute = c.get_bool("memory.backward_recompute");
  t.buckets = c.get_ints("jit.buckets");
  t.kernel_cache_dir = kernel_cache_dir(c);
  t.background_compile = c.get_bool("jit.background_compile");
  return t;
}

}  // namespace

void load_initial_weights(const RunSetup& s, engine::Trainer& trainer) {
  if (s.onnx) {
    onnx::load_weights(*s.onnx, trainer);
    spdlog::info("weights from {}", s.onnx->source);
    return;
  }
  if (s.hf) {
    formats::load_hf_weights(*s.hf, trainer);
    spdlog::info("weights from {}", s.hf->dir);
  }
  if (!s.lora_from.empty()) {
    formats::load_peft_adapter(s.lora_from, *s.llama, trainer);
    spdlog::info("LoRA adapters from {}", s.lora_from);
  }
}

std::optional<DType> export_dtype(const Config& c) {
  const std::string d = c.get_string("export.dtype");
  if (d == "source") return std::nullopt;
  return parse_dtype(d);
}

std::string kernel_cache_dir(const Config& c) {
  const std::string dir = c.get_string("jit.cache_dir");
  if (dir != "auto") return dir;
  // The XDG base directory spec: $XDG_CACHE_HOME when it is an absolute path, else ~/.cache.
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && xdg[0] == '/') return std::string(xdg) + "/disc/kernels";
  const char* home = std::getenv("HOME");
  if (home != nullptr && home[0] == '/') return std::string(home) + "/.cache/disc/kernels";
  return "";  // nowhere to keep it: compile every run
}

std::string resolve_path(const Config& c, const std::string& path) {
  if (path.empty() || std::filesystem::path(path).is_absolute() || c.file().empty()) return path;
  auto base = std::filesystem::path(c.file()).parent_path();
  auto candidate = base / path;
  // A path that exists relative to the working directory wins (command-line habits).
  std::error_code ec;
  return std::filesystem::exists(path, ec) ? path : candidate.lexically_normal().string();
}

namespace {

// 1234567 -> "1.2M": a parameter count at a glance.
std::string human_count(int64_t n) {
  const char* units[] = {"", "K", "M", "B"};
  double v = static_cast<double>(n);
  int u = 0;
  for (; v >= 1000 && u < 3; ++u) v /= 1000;
  return u == 0 ? std::to_string(n) : fmt::format("{:.1f}{}", v, units[u]);
}

// ", LoRA r 16 on q_proj, v_proj (base in bf16): 1.1M of 126M parameters train", or "".
std::string lora_summary(const RunSetup& s) {
  if (!s.llama || !s.llama->lora.on()) return "";
  std::string targets;
  for (const ir::models::Projection& p : ir::models::lora_targets(s.llama->lora))
    targets += (targets.empty() ? "" : ", ") + p.hf;
  int64_t trained = 0, all = 0;
  for (const ir::Value* p : s.model.params) {
    const int64_t n = *ir::product(p->shape()).constant();
    all += n;
    if (!s.model.frozen.contains(p->name())) trained += n;
  }
  return ", LoRA r " + std::to_string(s.llama->lora.rank) + " on " + targets + " (base in " +
         std::string(dtype_name(s.llama->lora.base)) + "): " + human_count(trained) + " of " +
         human_count(all) + " parameters train";
}

}  // namespace

RunSetup make_setup(const Config& c) {
  RunSetup s;
  try {
    engine::check_device_name(c.get_string("device.name"));
  } catch (const InvalidArgument& e) {
    throw InvalidArgument("device.name: " + std::string(e.what()));
  }
  if (const std::string hf = c.get_string("model.hf"); !hf.empty())
    s.hf = std::make_shared<const formats::HfLlama>(formats::open_hf_llama(resolve_path(c, hf)));
  load_examples(c, s);
  load_eval(c, s);
  s.batching.batch_size = c.get_int("data.batch_size");
  s.batching.token_budget = c.get_int("data.token_budget");
  s.batching.max_rows = c.get_int("model.max_batch");  // the batch symbol's bound
  s.batching.shuffle = c.get_bool("data.shuffle");
  s.batching.packing = c.get_bool("data.packing");
  s.batching.seed = static_cast<uint64_t>(c.get_int("train.seed"));
  if (s.batching.token_budget > 0 && s.batching.token_budget < s.max_len) {
    throw InvalidArgument("data.token_budget (" + std::to_string(s.batching.token_budget) +
                          ") is below the longest sequence (" + std::to_string(s.max_len) +
                          "): raise it or lower data.max_len" +
                          (s.batching.packing ? " (packed steps never split an example)" : ""));
  }
  if (s.batching.token_budget == 0 && s.batching.batch_size > c.get_int("model.max_batch")) {
    throw InvalidArgument("data.batch_size (" + std::to_string(s.batching.batch_size) +
                          ") exceeds model.max_batch (" +
                          std::to_string(c.get_int("model.max_batch")) +
                          "): raise model.max_batch");
  }
  s.model = build_model(c, s);
  // An adapter of another base is refused before any output (its tensors load with the weights).
  if (!s.lora_from.empty()) formats::check_peft_adapter(s.lora_from, *s.llama);
  s.trainer = trainer_options(c);
  s.trainer.frozen = frozen_parameters(c, s);
  const int64_t layers = s.llama ? s.llama->layers : c.get_int("model.layers"),
                hidden = s.llama ? s.llama->hidden : c.get_int("model.hidden");
  s.describe =
      (s.onnx ? s.onnx->source + " (ONNX, opset " + std::to_string(s.onnx->opset) + ")"
              : c.get_string("model.family") + " " + std::to_string(layers) + "x" +
                    std::to_string(hidden)) +
      (s.hf ? " from " + s.hf->dir : "") + ", " + std::to_string(s.examples.size()) + " " +
      c.get_string("data.source") + " examples, token ids < " + std::to_string(s.vocab) +
      (s.tokenizer.empty() ? "" : " (" + s.tokenizer + ")") + lora_summary(s) +
      (s.trainer.frozen.empty() ? ""
                                : ", frozen: " + std::to_string(s.trainer.frozen.size()) + " of " +
                                      std::to_string(s.model.params.size()) + " parameters") +
      (s.data_notes.empty() ? "" : " (" + s.data_notes + ")");
  return s;
}

engine::Batch to_tensors(const data::HostBatch& hb, engine::Trainer& t, const ir::Graph& g,
                         int64_t seed, int64_t step) {
  engine::Batch b;
  // Packed: [T] streams and N + 1 offsets; padded: [B, S] rows. A graph over rows (an ONNX
  // model) takes a packed stream as its one row [1, T].
  const std::vector<int64_t> shape = hb.shape();
  const ir::Value* tokens = g.find_value("tokens");
  const std::vector<int64_t> rows =
      hb.packed() && tokens && tokens->rank() == 2 ? std::vector<int64_t>{1, shape[0]} : shape;
  b["tokens"] = engine::Tensor::from<int32_t>(rows, hb.tokens, t.allocator());
  b["targets"] = engine::Tensor::from<int32_t>(rows, hb.targets, t.allocator());
  if (hb.packed()) {
    b["positions"] = engine::Tensor::from<int32_t>(shape, hb.positions, t.allocator());
    b["offsets"] = engine::Tensor::from<int32_t>({hb.batch + 1}, hb.offsets, t.allocator());
  }
  // Dropout draws from (seed, stream, element): a per-step seed keeps masks fresh and reproducible.
  if (g.find_value("seed"))
    b["seed"] = engine::Tensor::from<int64_t>({}, {seed * 1000003 + step}, t.allocator());
  return b;
}

}  // namespace disc::apps
