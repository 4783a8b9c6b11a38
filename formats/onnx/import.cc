#include "formats/onnx/import.h"

#include <set>
#include <span>

#include "base/error.h"
#include "base/finite.h"
#include "formats/onnx/op_context.h"
#include "formats/onnx/proto.h"
#include "formats/onnx/tensor_proto.h"
#include "ir/nn.h"

namespace disc::onnx {
namespace {

using ir::DimExpr;
using ir::Value;

constexpr int64_t kMaxFoldedInitializer = int64_t{1} << 16;  // integer initializers fold

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

bool default_domain(const std::string& d) {
  return d.empty() || d == "ai.onnx";
}

int64_t opset_of(const proto::Model& m, const std::string& source) {
  for (const auto& o : m.opset_import)
    if (default_domain(o.domain)) return o.version;
  throw InvalidArgument(source + ": the model imports no opset of the default ONNX domain");
}

class GraphImport {
 public:
  GraphImport(const proto::Graph& gp, const std::string& source, int64_t opset,
              const ImportOptions& o, Imported& out)
      : gp_(gp), opset_(opset), options_(o), out_(out), state_{*out.graph, source, {}, nullptr} {}

  void run() {
    if (static_cast<int64_t>(gp_.node.size()) > options_.max_nodes)
      fail("the graph has " + std::to_string(gp_.node.size()) + " nodes, more than the " +
           std::to_string(options_.max_nodes) + " disc imports (ImportOptions::max_nodes)");
    std::set<std::string> initialized;
    for (const auto& t : gp_.initializer) initialized.insert(t.name);
    for (const auto& in : gp_.input)
      if (!initialized.contains(in.name)) add_input(in);
    for (const auto& t : gp_.initializer) add_initializer(t);
    for (const auto& n : gp_.node) add_node(n);
    for (const auto& o : gp_.output) add_output(o);
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw InvalidArgument(state_.source + ": " + why);
  }

  void bind(const std::string& name, Slot s, const std::string& what) {
    if (name.empty()) fail(what + " has no name");
    if (!state_.slots.emplace(name, std::move(s)).second)
      fail(what + " `" + name + "` is defined twice (ONNX names each value once)");
  }

  DimExpr input_dim(const proto::ValueInfo& in, int i, const proto::Dim& d, int64_t bound) {
    if (d.value) {
      if (*d.value < 0) fail("input `" + in.name + "` has a negative dim");
      return *d.value;
    }
    const std::string& name = d.param;
    if (name.empty())
      fail("input `" + in.name + "` dim " + std::to_string(i) +
           " has neither a size nor a name (export it with dynamic_axes naming it, e.g. " + "{\"" +
           in.name + "\": {" + std::to_string(i) + ": \"seq\"}})");
    if (!state_.graph.shapes().find(name)) {
      if (static_cast<int64_t>(state_.graph.shapes().symbols().size()) >= options_.max_symbols)
        fail("input `" + in.name + "` dim " + std::to_string(i) + " names dim_param `" + name +
             "`, past the " + std::to_string(options_.max_symbols) +
             " distinct dim_params disc imports (ImportOptions::max_symbols)");
      auto b = options_.bounds.find(name);
      int64_t hi = bound > 0                    ? bound
                   : b != options_.bounds.end() ? b->second
                                                : options_.default_bound;
      state_.graph.shapes().add_symbol({name, 1, hi, 1, std::nullopt});
    }
    return DimExpr::symbol(name);
  }

  void add_input(const proto::ValueInfo& in) {
    if (!in.is_tensor)
      fail("input `" + in.name + "` is not a tensor (sequences and maps are not imported)");
    auto dtype = dtype_of(in.elem_type);
    if (!dtype)
      fail("input `" + in.name + "` holds " + onnx_type_name(in.elem_type) +
           ", which disc does not import (float, double, float16, bfloat16, int32, int64, bool)");
    if (!in.has_shape) fail("input `" + in.name + "` has no shape");
    const size_t position = out_.inputs.size();
    InputOptions o = position < options_.inputs.size() ? options_.inputs[position] : InputOptions{};
    std::vector<DimExpr> shape;
    for (int i = 0; i < static_cast<int>(in.dims.size()); ++i) {
      int64_t bound = i < static_cast<int>(o.bounds.size()) ? o.bounds[i] : 0;
      shape.push_back(input_dim(in, i, in.dims[i], bound));
    }
    bool narrow = *dtype == DType::kI64 && options_.int64_inputs_as_i32;
    const std::string name = o.name.empty() ? in.name : o.name;
    Value* v =
        state_.graph.add_argument(name, {narrow ? DType::kI32 : *dtype, shape}, ir::Role::kInput);
    if (narrow) v = state_.graph.add("cast", {v}, {{"dtype", DType::kI64}});
    out_.inputs.push_back(name);
    bind(in.name, Slot{v}, "input");
  }

  void add_initializer(const proto::Tensor& t) {
    if (state_.slots.contains(t.name))  // before the graph's own check, which names no file
      fail("initializer `" + t.name + "` is defined twice (ONNX names each value once)");
    auto dtype = dtype_of(t.data_type);
    if (dtype && is_float(*dtype)) {
      std::vector<int64_t> dims = dims_of(t);
      Value* p = state_.graph.add_argument(t.name, {DType::kF32, {dims.begin(), dims.end()}},
                                           ir::Role::kParameter);
      out_.weights[t.name] = float_values(t);
      const std::vector<float>& w = out_.weights[t.name];
      if (const NonFinite bad = non_finite(DType::kF32, std::as_bytes(std::span(w))); bad.count)
        fail("initializer `" + t.name + "` holds " + bad.str() +
             ": the file is damaged or was exported from a diverged run; export it again");
      bind(t.name, Slot{p}, "initializer");
      return;
    }
    try {
      bind(t.name, Slot{nullptr, known_of(t, kMaxFoldedInitializer)}, "initializer");
    } catch (const InvalidArgument& e) {
      if (std::string(e.what()).starts_with(state_.source)) throw;
      fail("initializer: " + std::string(e.what()));
    }
  }

  void add_node(const proto::Node& n) {
    if (!default_domain(n.domain))
      fail(node_label(n, opset_) + ": the op is in domain `" + n.domain +
           "`; disc imports the default ONNX domain only");
    auto rule = rules().find(n.op_type);
    if (rule == rules().end() || opset_ < rule->second.since || opset_ > rule->second.until)
      fail(node_label(n, opset_) + ": disc does not import " + n.op_type + " at opset " +
           std::to_string(opset_) + "; it imports " + join(supported_ops(opset_)));
    OpContext ctx(state_, n, opset_);
    std::vector<Slot> results;
    try {
      results = rule->second.rule(ctx);
    } catch (const InvalidArgument& e) {
      if (std::string(e.what()).starts_with(state_.source)) throw;
      ctx.fail(e.what());
    } catch (const Error& e) {
      ctx.fail(e.what());
    }
    for (int i = 0; i < static_cast<int>(n.output.size()); ++i) {
      if (n.output[i].empty()) continue;
      if (i >= static_cast<int>(results.size()) ||
          (!results[i].value && !results[i].known && !results[i].fill)) {
        // An output the rule does not make (LayerNormalization's mean, Dropout's mask): fine
        // while nothing reads it.
        unmade_.insert(n.output[i]);
        continue;
      }
      bind(n.output[i], std::move(results[i]), node_label(n, opset_) + ": output");
    }
  }

  void add_output(const proto::ValueInfo& declared) {
    const std::string& name = declared.name;
    auto it = state_.slots.find(name);
    if (it == state_.slots.end())
      fail("graph output `" + name + "` is made by no node" +
           (unmade_.contains(name) ? " disc imports (an optional output disc does not compute)"
                                   : ""));
    proto::Node none{.name = "graph outputs", .op_type = "Output"};
    OpContext ctx(state_, none, opset_);
    Value* v = ctx.value_of(it->second);
    check_declared(declared, *v);
    state_.graph.add_output(name, v);
    out_.outputs.push_back(name);
  }

  // A declared output shape that the nodes contradict is refused (it was ignored): a rank, or a
  // fixed size, other than the graph computes. The file was edited, or belongs to another model.
  void check_declared(const proto::ValueInfo& declared, const Value& v) {
    if (!declared.is_tensor || !declared.has_shape) return;
    auto refuse = [&](const std::string& what) {
      fail("graph output `" + declared.name + "` is declared " + what + ", but its nodes make " +
           v.type().str() + ": export the model again, or correct the output's shape");
    };
    if (declared.dims.size() != static_cast<size_t>(v.rank()))
      refuse("of rank " + std::to_string(declared.dims.size()));
    for (size_t i = 0; i < declared.dims.size(); ++i) {
      const std::optional<int64_t> made = v.shape()[i].constant();
      if (declared.dims[i].value && made && *declared.dims[i].value != *made)
        refuse("with dim " + std::to_string(i) + " of size " +
               std::to_string(*declared.dims[i].value));
    }
  }

  const proto::Graph& gp_;
  int64_t opset_;
  const ImportOptions& options_;
  Imported& out_;
  ImportState state_;
  std::set<std::string> unmade_;
};

}  // namespace

const RuleTable& rules() {
  static const RuleTable table = [] {
    RuleTable t;
    add_elementwise_rules(t);
    add_layout_rules(t);
    add_shape_rules(t);
    add_nn_rules(t);
    return t;
  }();
  return table;
}

std::vector<std::string> supported_ops(int64_t opset) {
  std::vector<std::string> out;
  for (const auto& [name, e] : rules())
    if (opset >= e.since && opset <= e.until) out.push_back(name);
  return out;
}

Imported import_bytes(std::string_view bytes, const std::string& name,
                      const ImportOptions& options) {
  proto::Model m = proto::parse_model(bytes, name);
  if (!m.graph) throw InvalidArgument(name + ": the model has no graph (is it an ONNX model?)");
  int64_t opset = opset_of(m, name);
  if (opset < kMinOpset || opset > kMaxOpset)
    throw InvalidArgument(name + ": opset " + std::to_string(opset) + "; disc imports opsets " +
                          std::to_string(kMinOpset) + " to " + std::to_string(kMaxOpset) +
                          " (export again with opset_version=" + std::to_string(kMaxOpset) + ")");
  Imported out;
  std::string graph_name = m.graph->name.empty() ? "onnx" : m.graph->name;
  out.graph = std::make_unique<ir::Graph>(graph_name);
  out.graph->set_source(name);
  out.source = name;
  out.opset = opset;
  GraphImport(*m.graph, name, opset, options, out).run();
  return out;
}

Imported import_file(const std::string& path, const ImportOptions& options) {
  return import_bytes(proto::read_file(path), path, options);
}

ir::models::Model language_model(Imported& imported) {
  ir::Graph& g = *imported.graph;
  ir::models::Model m;
  for (const auto& [name, v] : g.outputs())
    if (name == "loss" && v->rank() == 0 && is_float(v->dtype())) m.loss = v;
  if (!m.loss) {
    if (g.outputs().empty()) throw InvalidArgument(imported.source + ": the model has no output");
    Value* logits = g.outputs().front().second;
    if (logits->rank() < 2 || !is_float(logits->dtype()))
      throw InvalidArgument(imported.source + ": the first output `" + g.outputs().front().first +
                            "` is " + logits->type().str() +
                            "; disc adds a cross-entropy to logits [..., classes], or uses an " +
                            "output named `loss` (a float scalar)");
    std::vector<DimExpr> rows(logits->shape().begin(), logits->shape().end() - 1);
    if (g.find_value("targets"))
      throw InvalidArgument(imported.source + ": the model already has a value named `targets`; " +
                            "disc adds that input for the cross-entropy");
    Value* targets = g.add_argument("targets", {DType::kI32, rows}, ir::Role::kInput);
    m.loss = ir::nn::cross_entropy(g, logits, targets);
    g.add_output("loss", m.loss);
  }
  for (Value* a : g.arguments())
    if (a->role() == ir::Role::kParameter) m.params.push_back(a);
  for (Value* p : m.params) m.init[p->name()] = {};
  m.graph = std::move(imported.graph);
  return m;
}

}  // namespace disc::onnx
