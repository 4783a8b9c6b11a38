// What an op rule sees while the importer turns one ONNX node into disc ops: the node's operands
// as slots (a graph value, a Known, or a lazily made fill), its attributes, and helpers that add
// disc nodes with numpy broadcasting made explicit. Rules live in formats/onnx/rules/*.cc, one file
// per family of ops, and register themselves in a RuleTable.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "formats/onnx/known.h"
#include "formats/onnx/proto.h"
#include "ir/graph.h"

namespace disc::onnx {

// A tensor of symbolic shape filled with one value, kept unmade while a rule may fold it:
// ConstantOfShape's result, and, with `triangle`, Trilu of one (exported causal masks).
struct Fill {
  DType dtype = DType::kF32;
  std::vector<ir::DimExpr> shape;
  double value = 0;
  struct Triangle {
    int64_t k = 0;
    bool upper = true;
  };
  std::optional<Triangle> triangle;  // elements outside the triangle are 0
};

// One ONNX value during import.
struct Slot {
  ir::Value* value = nullptr;  // a graph value, or
  std::optional<Known> known;  // elements known at import, or
  std::optional<Fill> fill;    // a fill not yet made

  DType dtype() const;
  std::vector<ir::DimExpr> shape() const;
  int rank() const { return static_cast<int>(shape().size()); }
};

// The import so far: the graph being built and every ONNX value by name.
struct ImportState {
  ir::Graph& graph;
  std::string source;  // the file, for messages
  std::map<std::string, Slot> slots;
  ir::Value* seed = nullptr;  // the `seed` input Dropout in training mode reads, made on first use
  int64_t dropout_streams = 0;  // each Dropout draws its own stream of the seed
};

class OpContext {
 public:
  OpContext(ImportState& state, const proto::Node& node, int64_t opset)
      : state_(state), node_(node), opset_(opset) {}

  const proto::Node& node() const { return node_; }
  int64_t opset() const { return opset_; }
  ir::Graph& graph() { return state_.graph; }
  ir::ShapeGraph& shapes() { return graph().shapes(); }
  // The `seed` input (i64[]) of a model with dropout, and a stream of it no other node draws.
  ir::Value* seed();
  int64_t next_dropout_stream() { return state_.dropout_streams++; }
  // A bool tensor of `shape`, true in the triangle (column - row >= k when upper, <= k else) of
  // its last two dims: Trilu's mask.
  ir::Value* triangle(const std::vector<ir::DimExpr>& shape, int64_t k, bool upper);

  int num_inputs() const;
  bool has(int i) const;  // input i is given (not past the end, not the empty name)
  const Slot& in(int i) const;
  bool all_known() const;                                    // every given input is a Known
  const Known& known(int i, const std::string& what) const;  // fails unless input i is known
  // Input i as a graph value (a Known or Fill is made into nodes).
  ir::Value* value(int i);
  ir::Value* value_of(const Slot& s);

  bool has_attr(const std::string& name) const;
  int64_t attr_int(const std::string& name, int64_t fallback) const;
  double attr_float(const std::string& name, double fallback) const;
  std::string attr_string(const std::string& name, const std::string& fallback) const;
  std::optional<std::vector<int64_t>> attr_ints(const std::string& name) const;
  std::optional<Known> attr_tensor(const std::string& name) const;

  // Adds a disc node; its failure names this ONNX node.
  ir::Value* add(const std::string& op, const std::vector<ir::Value*>& operands,
                 ir::Attributes attrs = {});
  // `v` broadcast (numpy rules) to `shape`; `v` unchanged when it has that shape.
  ir::Value* broadcast_to(ir::Value* v, const std::vector<ir::DimExpr>& shape);
  // The numpy broadcast of these shapes; dims that differ and are not 1 are recorded equal.
  std::vector<ir::DimExpr> broadcast_shape(const std::vector<std::vector<ir::DimExpr>>& shapes);
  ir::Value* reshape(ir::Value* v, const std::vector<ir::DimExpr>& shape);
  // A scalar constant of dtype t, as a graph value.
  ir::Value* scalar(double v, DType t);
  // `v` everywhere in a tensor of like's shape and dtype.
  ir::Value* full_like(double v, const ir::Value* like);
  // Normalises an axis attribute or input (negative counts from the end).
  int axis(int64_t a, int rank) const;

  [[noreturn]] void fail(const std::string& why) const;

 private:
  ImportState& state_;
  const proto::Node& node_;
  int64_t opset_;
  const proto::Attribute* attr(const std::string& name) const;
  // A fill or a Known made into nodes (value_of's two cases).
  ir::Value* make(const Fill& f);
  ir::Value* make(const Known& k);
};

// A rule's single result.
inline std::vector<Slot> result(ir::Value* v) {
  return {Slot{v}};
}
inline std::vector<Slot> result(Known k) {
  return {Slot{nullptr, std::move(k)}};
}

// "node `attn/MatMul` (MatMul, opset 17)": how messages name a node.
std::string node_label(const proto::Node& node, int64_t opset);

// Turns one node into its results, one per ONNX output (an empty Slot for an output it does not
// make, which must then be unused).
using OpRule = std::function<std::vector<Slot>(OpContext&)>;

struct RuleEntry {
  OpRule rule;
  int64_t since = 13;  // the first opset whose semantics the rule implements
  int64_t until = 99;  // the last
};
using RuleTable = std::map<std::string, RuleEntry>;

// Each family's rules (formats/onnx/rules/).
void add_elementwise_rules(RuleTable& t);
void add_layout_rules(RuleTable& t);
void add_shape_rules(RuleTable& t);
void add_nn_rules(RuleTable& t);
const RuleTable& rules();

}  // namespace disc::onnx
