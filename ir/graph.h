// The graph: values (typed tensors with a role), nodes (an op applied to operand values), named
// inputs and outputs, and the shape graph of its symbols. Nodes are kept in a valid execution
// order: every operand is defined before the node that uses it.
//
//   ir::Graph g("mlp");
//   g.shapes().add_symbol({"B", 1, 256});
//   auto* x = g.add_argument("x", {DType::kF32, {DimExpr::symbol("B"), 784}}, Role::kInput);
//   auto* w = g.add_argument("w", {DType::kF32, {784, 10}}, Role::kParameter);
//   auto* y = g.add("matmul", {x, w});            // f32[B, 10], inferred
//   g.add_output("logits", y);
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/attribute.h"
#include "ir/op_def.h"
#include "ir/shape_graph.h"
#include "ir/tensor_type.h"

namespace disc::ir {

class Node;

enum class Role : uint8_t { kInput, kParameter, kState, kConstant, kIntermediate };
std::string_view role_name(Role r);  // "input", "param", "state", "constant", "intermediate"

// Where a node was written in a text file (line 0: built in code).
struct SourceLoc {
  int line = 0;
  int col = 0;
};

class Value {
 public:
  const std::string& name() const { return name_; }
  const TensorType& type() const { return type_; }
  DType dtype() const { return type_.dtype; }
  const std::vector<DimExpr>& shape() const { return type_.shape; }
  int rank() const { return type_.rank(); }
  Role role() const { return role_; }
  Node* producer() const { return producer_; }  // null for graph arguments
  int result_index() const { return result_index_; }
  // One entry per use: a node that uses this value twice appears twice.
  const std::vector<Node*>& users() const { return users_; }

 private:
  friend class Graph;
  std::string name_;
  TensorType type_;
  Role role_ = Role::kIntermediate;
  Node* producer_ = nullptr;
  int result_index_ = 0;
  std::vector<Node*> users_;
};

class Node {
 public:
  const OpDef& op() const { return *op_; }
  const std::vector<Value*>& operands() const { return operands_; }
  Value* operand(int i) const { return operands_.at(i); }
  const std::vector<Value*>& results() const { return results_; }
  Value* result(int i = 0) const { return results_.at(i); }
  const Attributes& attrs() const { return attrs_; }
  SourceLoc loc() const { return loc_; }

 private:
  friend class Graph;
  const OpDef* op_ = nullptr;
  std::vector<Value*> operands_;
  std::vector<Value*> results_;
  Attributes attrs_;
  SourceLoc loc_;
};

class Graph {
 public:
  explicit Graph(std::string name = "main") : name_(std::move(name)) {}
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  const std::string& name() const { return name_; }
  // The file the graph was read from, used in messages ("model.disc:12:3: ...").
  const std::string& source() const { return source_; }
  void set_source(std::string file) { source_ = std::move(file); }
  ShapeGraph& shapes() { return shapes_; }
  const ShapeGraph& shapes() const { return shapes_; }

  // A graph input, parameter or optimizer state. Every symbol in `type` must be declared.
  Value* add_argument(const std::string& name, TensorType type, Role role);

  // Appends a node. Checks the operands and attributes against the op, infers the result types
  // (recording the dim equalities they imply) and, when `declared` is given, checks that they
  // match it. `names` names the results (generated when empty). Throws VerifyError naming the
  // node; the graph is unchanged but for symbol facts.
  Node* add_node(const std::string& op, const std::vector<Value*>& operands, Attributes attrs = {},
                 std::vector<std::string> names = {},
                 const std::optional<std::vector<TensorType>>& declared = std::nullopt,
                 SourceLoc loc = {});
  // add_node for a single-result op; returns the result.
  Value* add(const std::string& op, const std::vector<Value*>& operands, Attributes attrs = {},
             const std::string& name = "");
  void add_output(const std::string& name, Value* v);
  // Drops the outputs whose name fails `keep` (their values stay, as intermediates).
  void keep_outputs(const std::function<bool(const std::string&)>& keep);
  // After a step, `argument` (a param or state) takes the value of `value` (an optimizer update).
  void add_update(Value* argument, Value* value);

  const std::vector<Value*>& arguments() const { return arguments_; }
  std::vector<Node*> nodes() const;
  size_t num_nodes() const { return nodes_.size(); }
  const std::vector<std::pair<std::string, Value*>>& outputs() const { return outputs_; }
  const std::vector<std::pair<Value*, Value*>>& updates() const {
    return updates_;
  }  // (argument, value)
  Value* find_value(const std::string& name) const;
  // True when `v` is an output or the value of an update: it must outlive the step.
  bool is_output(const Value* v) const;

  // Editing, for passes.
  void set_operand(Node* n, int i, Value* v);
  void set_attrs(Node* n, Attributes attrs);  // re-checked by the verifier, not here
  void set_type(Value* v, TensorType t);
  // Every use of `from` (operands and outputs) becomes a use of `to`.
  void replace_all_uses(Value* from, Value* to);
  // Moves `n` (just added, say) to just before `pos` in the node order, which must stay
  // topological: n's operands must be produced before `pos`. Throws VerifyError otherwise.
  void move_before(const Node* n, const Node* pos);
  // Puts the nodes in `order`, which must hold every node once and keep each operand's producer
  // before its readers; throws VerifyError otherwise. For passes that move many nodes at once.
  void reorder(const std::vector<const Node*>& order);
  // Removes the nodes matching `dead`; their results must have no users and not be outputs.
  void erase_nodes(const std::function<bool(const Node&)>& dead);

  // A name not yet used by any value, built from `hint`.
  std::string unique_name(const std::string& hint);
  // "file:12:3: node %x = matmul" (or without the location when built in code).
  std::string describe(const Node& n) const;

 private:
  Value* new_value(const std::string& name, TensorType type, Role role);
  void check_symbols_declared(const TensorType& t, const std::string& where) const;

  std::string name_;
  std::string source_;
  ShapeGraph shapes_;
  std::vector<std::unique_ptr<Value>> values_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<Value*> arguments_;
  std::vector<std::pair<std::string, Value*>> outputs_;
  std::vector<std::pair<Value*, Value*>> updates_;
  std::map<const Value*, int> kept_;  // how many outputs and updates name a value: is_output
  std::map<std::string, Value*, std::less<>> by_name_;
  int next_id_ = 0;
};

}  // namespace disc::ir
