#include "ir/training_step.h"

#include <optional>

#include "base/error.h"
#include "base/hash.h"
#include "ir/autodiff.h"
#include "ir/nn.h"
#include "ir/ops/state_codec.h"

namespace disc::ir {
namespace {

using nn::scalar;

Value* stretch(Graph& g, Value* s, const Value* like) {
  return g.add("broadcast", {s}, {{"shape", like->shape()}, {"dims", std::vector<int64_t>{}}});
}

// sqrt(sum over every gradient of g^2), as a scalar; with `parts`, each rank holds a part of each
// gradient, and the sum is over every rank's. The terms are summed in `order` (made_order's, taken
// before any sum over ranks, so that every way of sharding sums alike): a depth-first order then
// computes each layer's weight gradients beside that layer's backward, while the activations they
// read are alive or can be recomputed, not all after the first layer's.
Value* global_norm(Graph& g, const std::vector<Value*>& grads, const std::vector<size_t>& order,
                   DType t, bool parts) {
  Value* total = scalar(g, 0.0, t);
  for (size_t k : order) {
    Value* d = grads[k];
    std::vector<int64_t> all;
    for (int i = 0; i < d->rank(); ++i) all.push_back(i);
    Value* sq = g.add("mul", {d, d});
    total = g.add("add", {total, all.empty() ? sq : g.add("reduce_sum", {sq}, {{"axes", all}})});
  }
  if (parts)
    total = g.add_node("all_reduce", {total}, {}, {g.unique_name("grad_sq.sum")})->result(0);
  return g.add("sqrt", {total}, {}, "grad_norm");
}

// PyTorch's clip_grad_norm_: scale = min(1, max_norm / (norm + 1e-6)).
std::vector<Value*> clip(Graph& g, const std::vector<Value*>& grads, Value* norm, double max_norm) {
  DType t = norm->dtype();
  Value* ratio = g.add("div", {scalar(g, max_norm, t), g.add("add", {norm, scalar(g, 1e-6, t)})});
  Value* scale = g.add("min", {ratio, scalar(g, 1.0, t)});
  std::vector<Value*> out;
  for (Value* d : grads) out.push_back(g.add("mul", {d, stretch(g, scale, d)}));
  return out;
}

// Optimizer state named after parameter p, of `part`'s type (p's, or its shard's).
Value* state_like(Graph& g, const Value* p, const Value* part, const std::string& suffix) {
  return g.add_argument(p->name() + "." + suffix, part->type(), Role::kState);
}

const char* state_name(OptimizerConfig::State s) {
  return s == OptimizerConfig::State::kBF16 ? "bf16" : "int8";
}

// A compact state's tensors for the moment `suffix` of p: `P.m` in bf16, or `P.m` (u8 codes) and
// `P.m.scale` (f32, one per block of 256) for int8; the types adamw_update_compact checks.
std::vector<Value*> compact_state(Graph& g, const Value* p, const Value* part,
                                  const std::string& suffix, OptimizerConfig::State s) {
  const std::string name = p->name() + "." + suffix;
  if (s == OptimizerConfig::State::kBF16)
    return {g.add_argument(name, {DType::kBF16, part->shape()}, Role::kState)};
  const std::optional<int64_t> n = part->type().numel().constant();
  if (!n)
    throw InvalidArgument("%" + p->name() + " has shape " + part->type().str() +
                          "; an int8 optimizer state needs parameters of static shapes");
  return {
      g.add_argument(name, {DType::kU8, part->shape()}, Role::kState),
      g.add_argument(name + ".scale", {DType::kF32, {state_codec::blocks_of(*n)}}, Role::kState)};
}

// What the optimizer updates: each parameter whole, or, with the state sharded (ZeRO stage 1),
// this rank's part of it, whose update the ranks then join.
struct Updated {
  const DataParallel* dp = nullptr;  // sharding when set
  Value* rank = nullptr;

  Value* part(Graph& g, Value* v) const {
    return dp ? g.add("rank_shard", {v, rank}, {{"ranks", dp->ranks}}) : v;
  }
  Value* whole(Graph& g, Value* new_part, const Value* p) const {
    return dp ? g.add("all_gather", {new_part}, {{"ranks", dp->ranks}, {"shape", p->shape()}})
              : new_part;
  }
};

// The gradients of scale * loss, divided by `scale` again.
std::vector<Value*> unscaled_gradients(Graph& g, Value* loss, const std::vector<Value*>& params,
                                       Value* scale) {
  auto grads = build_gradients(g, g.add("mul", {loss, scale}), params);
  Value* inverse = g.add("div", {scalar(g, 1.0, scale->dtype()), scale});
  for (Value*& d : grads) d = g.add("mul", {d, stretch(g, inverse, d)});
  return grads;
}

// With loss scaling, each update keeps the old value unless `zero_if_finite` (norm - norm: 0 for
// a finite norm, NaN for an infinite or NaN one) is 0. The compare reads the scalar stretched to
// the update's shape, so that fusion puts it and the select in the update's kernel.
void add_update(Graph& g, Value* argument, Value* value, Value* zero_if_finite) {
  if (zero_if_finite) {
    const DType t = zero_if_finite->dtype();
    Value* keep = g.add(
        "eq", {stretch(g, zero_if_finite, argument), stretch(g, scalar(g, 0.0, t), argument)});
    value = g.add("select", {keep, value, argument});
  }
  g.add_update(argument, value);
}

// The step's scalars every update reads: the learning rate, the step count (AdamW, a compact
// state) and the loss-scaling guard (null without loss scaling).
struct UpdateScalars {
  Value *lr, *step, *guard;
};

// The optimizer's update of parameter p from `grad` (with sharding, the gradient of p's part),
// with p's state arguments: one node, adamw_update or sgd_update (f32 state, p's type) or their
// _compact forms, reading (part, grad, the state tensors, lr[, step]) and giving each anew.
void add_optimizer(Graph& g, const OptimizerConfig& opt, Value* p, Value* grad,
                   const UpdateScalars& s, const Updated& updated) {
  const bool adamw = opt.kind == OptimizerConfig::Kind::kAdamW;
  const bool compact = opt.state != OptimizerConfig::State::kF32;
  Value* part = updated.part(g, p);
  std::vector<Value*> state;
  for (const char* moment :
       adamw ? std::vector<const char*>{"m", "v"} : std::vector<const char*>{"momentum"}) {
    if (!compact) {
      state.push_back(state_like(g, p, part, moment));
      continue;
    }
    auto held = compact_state(g, p, part, moment, opt.state);
    state.insert(state.end(), held.begin(), held.end());
  }
  std::vector<Value*> operands = {part, grad};
  operands.insert(operands.end(), state.begin(), state.end());
  operands.push_back(s.lr);
  if (s.step) operands.push_back(s.step);  // AdamW's, or a compact state's
  // A compact update keeps its values itself where the guard says so: a select after it would be
  // over u8 codes, which no kernel fuses, each a full-size tensor alive at once.
  Value* guard = s.guard;
  if (compact && guard) operands.push_back(guard), guard = nullptr;
  std::vector<std::string> names = {g.unique_name(p->name() + ".new")};
  for (const Value* v : state) names.push_back(g.unique_name(v->name() + ".new"));
  Attributes attrs = adamw ? Attributes{{"beta1", opt.beta1},
                                        {"beta2", opt.beta2},
                                        {"eps", opt.eps},
                                        {"weight_decay", opt.weight_decay}}
                           : Attributes{{"momentum", opt.momentum},
                                        {"weight_decay", opt.weight_decay},
                                        {"nesterov", opt.nesterov}};
  if (compact) {
    attrs.set("state", std::string(state_name(opt.state)));
    // The dither differs per parameter (by name: the same whatever the order of parameters).
    attrs.set("salt", static_cast<int64_t>(fnv1a(p->name()) >> 1));
  }
  const std::string op =
      std::string(adamw ? "adamw_update" : "sgd_update") + (compact ? "_compact" : "");
  Node* n = g.add_node(op, operands, std::move(attrs), names);
  add_update(g, p, updated.whole(g, n->result(0), p), guard);
  for (size_t k = 0; k < state.size(); ++k) add_update(g, state[k], n->result(k + 1), guard);
}

Value* full_like(Graph& g, const Value* like, double value) {
  return g.add("full", {}, {{"shape", like->shape()}, {"value", value}, {"dtype", like->dtype()}});
}

// An accumulation buffer's update: `value`, or zeros where `apply` is 1 (the step that used it).
void add_emptying_update(Graph& g, Value* buffer, Value* value, Value* apply) {
  Value* now =
      g.add("eq", {stretch(g, apply, value), stretch(g, scalar(g, 1.0, apply->dtype()), value)});
  g.add_update(buffer, g.add("select", {now, full_like(g, buffer, 0.0), value}));
}

// Gradient accumulation (OptimizerConfig::accumulate): the loss each micro-batch's gradients are
// of, its targets' sum (so that micro-batches of different counts weigh by their counts), and the
// mean over every micro-batch so far, which the step reports.
struct Accumulation {
  Value* local_count = nullptr;  // this micro-batch's (this rank's) counted targets
  Value* mean = nullptr;         // the loss over every counted target so far (every rank's)
  Value* count = nullptr;        // those targets
  Value* apply = nullptr;        // input: 1 on the micro-batch that updates
};

Accumulation accumulate_loss(Graph& g, Value* loss, bool ranks) {
  const DType t = loss->dtype();
  Accumulation a;
  a.local_count = loss_count(g, loss);
  Value *all_summed = g.add("mul", {loss, a.local_count}), *all_count = a.local_count;
  if (ranks) {
    Node* sums = g.add_node("all_reduce", {all_summed, all_count}, {},
                            {g.unique_name("loss.sum"), g.unique_name("loss.count")});
    all_summed = sums->result(0), all_count = sums->result(1);
  }
  a.apply = g.add_argument("apply", {t, {}}, Role::kInput);
  Value* loss_before = g.add_argument("accumulated.loss", {t, {}}, Role::kState);
  Value* count_before = g.add_argument("accumulated.count", {t, {}}, Role::kState);
  Value* loss_sum = g.add("add", {loss_before, all_summed});
  a.count = g.add("add", {count_before, all_count});
  add_emptying_update(g, loss_before, loss_sum, a.apply);
  add_emptying_update(g, count_before, a.count, a.apply);
  // No target counted at all (every label ignored): 0, as cross-entropy's own loss is then.
  a.count = g.add("max", {a.count, scalar(g, 1e-30, t)});
  a.mean = g.add("div", {loss_sum, a.count});
  return a;
}

// Each gradient of the micro-batch's mean loss, times its counted targets (the gradient of their
// sum: weighed by what it counts), added to its parameter's `P.grad_sum`, which holds the sum until
// the step that applies it. The backward itself runs on the mean, at the magnitudes f16's loss
// scale is set for; the weighing is in f32, after it. Before any sum over ranks.
std::vector<Value*> accumulate_gradients(Graph& g, const std::vector<Value*>& grads,
                                         const std::vector<Value*>& params, const Accumulation& a) {
  std::vector<Value*> sums;
  for (size_t i = 0; i < grads.size(); ++i) {
    Value* before = g.add_argument(params[i]->name() + ".grad_sum", grads[i]->type(), Role::kState);
    Value* weighed = g.add("mul", {grads[i], stretch(g, a.local_count, grads[i])});
    sums.push_back(g.add("add", {before, weighed}));
    add_emptying_update(g, before, sums.back(), a.apply);
  }
  return sums;
}

}  // namespace

bool is_accumulation_state(std::string_view name) {
  return name.ends_with(".grad_sum") || name == "accumulated.loss" || name == "accumulated.count";
}

void build_training_step(Graph& g, Value* loss, const std::vector<Value*>& params,
                         const OptimizerConfig& opt, bool debug_outputs,
                         const DataParallel* data_parallel) {
  for (Value* p : params) {
    if (p->role() != Role::kParameter) {
      throw InvalidArgument("%" + p->name() + " is not a param argument and cannot be trained");
    }
  }
  bool has_loss = false;  // a forward graph read from a file may already name its loss
  for (const auto& [name, v] : g.outputs()) {
    if (name != "loss") continue;
    if (v != loss)
      throw InvalidArgument("output `loss` of graph @" + g.name() +
                            " is not the loss being trained");
    has_loss = true;
  }
  const bool two_passes = opt.clip_passes == 2;
  if (two_passes && opt.clip_norm <= 0)
    throw InvalidArgument(
        "clipping in two passes needs clipping: set a clip norm (optimizer.clip_norm), or one pass "
        "(optimizer.clip_passes: 1)");
  if (two_passes && opt.accumulate)
    throw InvalidArgument(
        "clipping in two passes saves nothing with gradient accumulation, whose buffers hold every "
        "gradient already: clip in one pass (optimizer.clip_passes: 1), or do not accumulate");
  std::optional<Accumulation> acc;
  if (data_parallel) g.keep_outputs([](const std::string& name) { return name != "loss"; });
  if (opt.accumulate) {
    g.keep_outputs([](const std::string& name) { return name != "loss"; });
    acc = accumulate_loss(g, loss, data_parallel != nullptr);
    has_loss = false;
  } else if (data_parallel) {
    loss = global_loss(g, loss);
    has_loss = false;
  }
  DType t = loss->dtype();
  Value* lr = g.add_argument("lr", {t, {}}, Role::kInput);
  // AdamW's bias correction counts steps, and a compact state's rounding draws by step.
  Value* step =
      opt.kind == OptimizerConfig::Kind::kAdamW || opt.state != OptimizerConfig::State::kF32
          ? g.add_argument("step", {DType::kI64, {}}, Role::kInput)
          : nullptr;
  Value* scale = opt.loss_scaling ? g.add_argument("loss_scale", {t, {}}, Role::kInput) : nullptr;
  auto grads =
      scale ? unscaled_gradients(g, loss, params, scale) : build_gradients(g, loss, params);
  const std::vector<size_t> order = made_order(g, grads);
  if (acc) grads = accumulate_gradients(g, grads, params, *acc);
  const bool sharded = data_parallel && data_parallel->shard_optimizer && data_parallel->ranks > 1;
  // Each rank's part would have scales of its own blocks, which a checkpoint cannot join into the
  // whole parameter's.
  if (sharded && opt.state == OptimizerConfig::State::kInt8)
    throw InvalidArgument(
        "an int8 optimizer state cannot be sharded over ranks yet: hold it in bf16, or whole on "
        "every rank");
  if (sharded) {
    grads = reduce_scatter_in_buckets(g, grads, data_parallel->bucket_bytes, data_parallel->ranks);
  } else if (data_parallel) {
    grads = all_reduce_in_buckets(g, grads, data_parallel->bucket_bytes);
  }
  if (acc)  // the mean over every counted target of every micro-batch
    for (Value*& d : grads) d = g.add("div", {d, stretch(g, acc->count, d)});
  Value* norm = global_norm(g, grads, order, t, sharded);
  // What the clip and the guard read: in two passes, the first pass's norm, so that no update
  // waits for this pass's.
  Value* read_norm = two_passes ? g.add_argument("grad_norm.given", {t, {}}, Role::kInput) : norm;
  Value* apply = acc          ? acc->apply
                 : two_passes ? g.add_argument("apply", {t, {}}, Role::kInput)
                              : nullptr;
  Value* guard = scale ? g.add("sub", {read_norm, read_norm}) : nullptr;  // updates only where 0
  if (apply) {  // and, accumulating or in two passes, on the run that applies them
    Value* hold = g.add("sub", {scalar(g, 1.0, t), apply});
    guard = guard ? g.add("add", {guard, hold}) : hold;
  }
  for (size_t i = 0; debug_outputs && i < params.size(); ++i)
    g.add_output("grad." + params[i]->name(), grads[i]);
  if (opt.clip_norm > 0) grads = clip(g, grads, read_norm, opt.clip_norm);
  if (!debug_outputs) g.keep_outputs([](const std::string& name) { return name == "loss"; });
  if (!has_loss) g.add_output("loss", acc ? acc->mean : loss);
  g.add_output("grad_norm", norm);
  Updated updated;
  if (sharded) updated = {data_parallel, g.add_argument("rank", {DType::kI64, {}}, Role::kInput)};
  for (size_t i = 0; i < params.size(); ++i)
    add_optimizer(g, opt, params[i], grads[i], {lr, step, guard}, updated);
}

}  // namespace disc::ir
