#include "ir/graph.h"

#include <algorithm>
#include <set>

#include "base/error.h"
#include "ir/op_registry.h"

namespace disc::ir {

std::string_view role_name(Role r) {
  switch (r) {
    case Role::kInput:
      return "input";
    case Role::kParameter:
      return "param";
    case Role::kState:
      return "state";
    case Role::kConstant:
      return "constant";
    case Role::kIntermediate:
      return "intermediate";
  }
  return "?";
}

std::vector<TensorType> infer_types(const OpDef& def, const std::vector<const TensorType*>& in,
                                    const Attributes& attrs, ShapeGraph& shapes) {
  int n = static_cast<int>(in.size());
  if (n < def.min_operands || (def.max_operands >= 0 && n > def.max_operands)) {
    std::string want = def.min_operands == def.max_operands ? std::to_string(def.min_operands)
                       : def.max_operands < 0 ? "at least " + std::to_string(def.min_operands)
                                              : std::to_string(def.min_operands) + " to " +
                                                    std::to_string(def.max_operands);
    throw VerifyError("takes " + want + " operands, got " + std::to_string(n));
  }
  InferContext ctx(in, attrs, shapes);
  auto types = def.infer(ctx);
  for (auto& t : types) {
    for (auto& d : t.shape) d = shapes.canonical(d);
  }
  return types;
}

namespace {

// A dim that may be negative for some bindings is left to binding; one below 0 for every binding
// (a constant such as -4) can never describe a tensor. Symbols must be declared already.
void check_dims_nonnegative(const ShapeGraph& shapes, const TensorType& t,
                            const std::string& where) {
  for (const auto& d : t.shape) {
    auto c = d.constant();
    if (c ? *c < 0 : shapes.proven_nonnegative(-d - 1)) {
      throw VerifyError(where + ": dimension " + d.str() + " of " + t.str() +
                        " is negative; a dimension counts elements, 0 or more");
    }
  }
}

}  // namespace

void Graph::check_symbols_declared(const TensorType& t, const std::string& where) const {
  for (const auto& d : t.shape) {
    for (const auto& s : d.symbols()) {
      if (!shapes_.find(s)) {
        throw VerifyError(where + ": symbol " + s + " is not declared (declare it with `sym " + s +
                          " in [lo, hi]`)");
      }
    }
  }
}

Value* Graph::new_value(const std::string& name, TensorType type, Role role) {
  auto v = std::make_unique<Value>();
  v->name_ = name;
  v->type_ = std::move(type);
  v->role_ = role;
  Value* raw = v.get();
  values_.push_back(std::move(v));
  by_name_[name] = raw;
  return raw;
}

Value* Graph::add_argument(const std::string& name, TensorType type, Role role) {
  if (role == Role::kConstant || role == Role::kIntermediate) {
    throw InvalidArgument("argument %" + name + ": an argument is an input, param or state");
  }
  if (by_name_.contains(name)) throw VerifyError("value %" + name + " is defined twice");
  check_symbols_declared(type, "argument %" + name);
  check_dims_nonnegative(shapes_, type, "argument %" + name);
  Value* v = new_value(name, std::move(type), role);
  arguments_.push_back(v);
  return v;
}

std::string Graph::describe(const Node& n) const {
  std::string s;
  if (n.loc_.line > 0) {
    s = (source_.empty() ? "<input>" : source_) + ":" + std::to_string(n.loc_.line) + ":" +
        std::to_string(n.loc_.col) + ": ";
  }
  s += "node ";
  for (size_t i = 0; i < n.results_.size(); ++i) s += (i ? ", %" : "%") + n.results_[i]->name_;
  return s + " = " + n.op_->name;
}

Node* Graph::add_node(const std::string& op, const std::vector<Value*>& operands, Attributes attrs,
                      std::vector<std::string> names,
                      const std::optional<std::vector<TensorType>>& declared, SourceLoc loc) {
  auto node = std::make_unique<Node>();
  node->op_ = &OpRegistry::instance().get(op);
  node->loc_ = loc;
  const OpDef& def = *node->op_;
  for (auto& n : names) {
    if (by_name_.contains(n)) throw VerifyError("value %" + n + " is defined twice");
  }
  if (names.empty() && def.num_results < 0)
    throw VerifyError("node " + op + ": its results must be named (the op has a variable number)");
  if (names.empty()) {
    for (int i = 0; i < def.num_results; ++i) names.push_back(unique_name(""));
  }
  // Results exist (unregistered) before checks so that messages can name the node.
  for (size_t i = 0; i < names.size(); ++i) {
    auto v = std::make_unique<Value>();
    v->name_ = names[i];
    node->results_.push_back(v.release());
  }
  std::vector<std::unique_ptr<Value>> owned(node->results_.begin(), node->results_.end());
  auto fail = [&](const std::string& what) -> void {
    throw VerifyError(describe(*node) + ": " + what);
  };
  if (std::string problem = apply_attr_schema(attrs, def.attrs); !problem.empty()) fail(problem);
  std::vector<const TensorType*> in;
  for (Value* v : operands) in.push_back(&v->type_);
  std::vector<TensorType> types;
  try {
    types = infer_types(def, in, attrs, shapes_);
  } catch (const Error& e) {
    fail(e.what());
  }
  const int results = def.num_results < 0 ? static_cast<int>(types.size()) : def.num_results;
  if (static_cast<int>(names.size()) != results) {
    fail("has " + std::to_string(results) + " results, " + std::to_string(names.size()) +
         " are named");
  }
  if (declared) {
    if (declared->size() != types.size()) {
      fail("declares " + std::to_string(declared->size()) + " result types, the op has " +
           std::to_string(types.size()));
    }
    const std::string where = describe(*node);  // once: a fused node may have 1000s of results
    for (size_t i = 0; i < types.size(); ++i) {
      check_symbols_declared((*declared)[i], where);
      check_dims_nonnegative(shapes_, (*declared)[i], where);
      TensorType want = (*declared)[i];
      for (auto& d : want.shape) d = shapes_.canonical(d);
      if (want != types[i]) {
        fail("result " + std::to_string(i) + " is declared " + (*declared)[i].str() +
             " but the op gives " + types[i].str());
      }
      types[i] = (*declared)[i];  // keep the spelling the author chose
    }
  }
  node->operands_ = operands;
  node->attrs_ = std::move(attrs);
  bool constant = def.category == OpCategory::kConstant;
  for (size_t i = 0; i < owned.size(); ++i) {
    Value* v = owned[i].get();
    v->type_ = types[i];
    v->role_ = constant ? Role::kConstant : Role::kIntermediate;
    v->producer_ = node.get();
    v->result_index_ = static_cast<int>(i);
    by_name_[v->name_] = v;
    values_.push_back(std::move(owned[i]));
  }
  for (Value* v : operands) v->users_.push_back(node.get());
  nodes_.push_back(std::move(node));
  return nodes_.back().get();
}

Value* Graph::add(const std::string& op, const std::vector<Value*>& operands, Attributes attrs,
                  const std::string& name) {
  std::vector<std::string> names;
  if (!name.empty()) names.push_back(unique_name(name));
  return add_node(op, operands, std::move(attrs), names)->result(0);
}

void Graph::add_output(const std::string& name, Value* v) {
  for (const auto& [n, _] : outputs_) {
    if (n == name) throw VerifyError("output `" + name + "` is declared twice");
  }
  outputs_.emplace_back(name, v);
  ++kept_[v];
}

void Graph::keep_outputs(const std::function<bool(const std::string&)>& keep) {
  std::erase_if(outputs_, [&](const auto& o) {
    if (keep(o.first)) return false;
    if (--kept_[o.second] == 0) kept_.erase(o.second);
    return true;
  });
}

void Graph::add_update(Value* argument, Value* value) {
  std::string what = "update of %" + argument->name_;
  if (argument->role_ != Role::kParameter && argument->role_ != Role::kState) {
    throw VerifyError(what + ": only a param or state argument can be updated");
  }
  for (const auto& [arg, v] : updates_) {
    if (arg == argument) throw VerifyError(what + ": the argument is updated twice");
  }
  if (argument->type_ != value->type_) {
    throw VerifyError(what + ": the new value %" + value->name_ + " has type " +
                      value->type_.str() + ", the argument " + argument->type_.str());
  }
  updates_.emplace_back(argument, value);
  ++kept_[value];
}

std::vector<Node*> Graph::nodes() const {
  std::vector<Node*> out;
  for (const auto& n : nodes_) out.push_back(n.get());
  return out;
}

Value* Graph::find_value(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

bool Graph::is_output(const Value* v) const {
  return kept_.contains(v);
}

void Graph::set_operand(Node* n, int i, Value* v) {
  Value*& slot = n->operands_.at(i);
  auto& users = slot->users_;
  users.erase(std::find(users.begin(), users.end(), n));
  slot = v;
  v->users_.push_back(n);
}

void Graph::set_attrs(Node* n, Attributes attrs) {
  n->attrs_ = std::move(attrs);
}

void Graph::set_type(Value* v, TensorType t) {
  v->type_ = std::move(t);
}

void Graph::replace_all_uses(Value* from, Value* to) {
  if (from == to) return;
  for (Node* user : std::vector<Node*>(from->users_)) {
    for (int i = 0; i < static_cast<int>(user->operands_.size()); ++i) {
      if (user->operands_[i] == from) set_operand(user, i, to);
    }
  }
  for (auto& [name, v] : outputs_) {
    if (v == from) v = to;
  }
  for (auto& [arg, v] : updates_) {
    if (v == from) v = to;
  }
  if (auto it = kept_.find(from); it != kept_.end()) {
    const int count = it->second;
    kept_.erase(it);
    kept_[to] += count;
  }
}

void Graph::move_before(const Node* n, const Node* pos) {
  auto index = [&](const Node* x) {
    auto it =
        std::find_if(nodes_.begin(), nodes_.end(), [&](const auto& p) { return p.get() == x; });
    if (it == nodes_.end()) throw VerifyError("move_before: the node is not in graph @" + name_);
    return it - nodes_.begin();
  };
  const auto from = index(n), to = index(pos);
  if (from <= to) throw VerifyError(describe(*n) + ": move_before can only move a node earlier");
  for (auto i = to; i < from; ++i) {
    for (const Value* r : nodes_[i]->results_) {
      if (std::find(n->operands_.begin(), n->operands_.end(), r) != n->operands_.end()) {
        throw VerifyError(describe(*n) + ": cannot move before " + describe(*pos) +
                          ", which comes before %" + r->name_ + " that it reads");
      }
    }
  }
  std::rotate(nodes_.begin() + to, nodes_.begin() + from, nodes_.begin() + from + 1);
}

void Graph::reorder(const std::vector<const Node*>& order) {
  std::map<const Node*, size_t> at;
  for (size_t i = 0; i < nodes_.size(); ++i) at[nodes_[i].get()] = i;
  if (order.size() != nodes_.size())
    throw VerifyError("reorder: " + std::to_string(order.size()) + " nodes for a graph of " +
                      std::to_string(nodes_.size()));
  std::set<const Node*> done;  // checked before anything moves: a refused order changes nothing
  for (const Node* n : order) {
    if (!at.contains(n) || done.contains(n))
      throw VerifyError("reorder: a node is missing from the graph or listed twice");
    for (const Value* o : n->operands_)
      if (o->producer_ && !done.contains(o->producer_))
        throw VerifyError("reorder: " + describe(*n) + " would come before the node that makes %" +
                          o->name_);
    done.insert(n);
  }
  std::vector<std::unique_ptr<Node>> placed;
  for (const Node* n : order) placed.push_back(std::move(nodes_[at.at(n)]));
  nodes_ = std::move(placed);
}

void Graph::erase_nodes(const std::function<bool(const Node&)>& dead) {
  std::set<const Node*> doomed;
  for (const auto& n : nodes_) {
    if (dead(*n)) doomed.insert(n.get());
  }
  // Check everything before changing anything: a refused erase leaves the graph as it was.
  for (const Node* n : doomed) {
    for (const Value* r : n->results_) {
      bool used_by_survivor = std::any_of(r->users_.begin(), r->users_.end(),
                                          [&](const Node* u) { return !doomed.contains(u); });
      if (used_by_survivor || is_output(r)) {
        throw VerifyError(describe(*n) + ": cannot erase, %" + r->name_ + " is still used");
      }
    }
  }
  std::set<const Value*> gone;
  for (const Node* n : doomed) {
    for (Value* op : n->operands_) std::erase(op->users_, n);
    for (Value* r : n->results_) {
      by_name_.erase(r->name_);
      gone.insert(r);
    }
  }
  std::erase_if(nodes_, [&](const auto& n) { return doomed.contains(n.get()); });
  std::erase_if(values_, [&](const auto& v) { return gone.contains(v.get()); });
}

std::string Graph::unique_name(const std::string& hint) {
  if (!hint.empty() && !by_name_.contains(hint)) return hint;
  std::string base = hint.empty() ? "" : hint + ".";
  while (true) {
    std::string n = base + std::to_string(next_id_++);
    if (!by_name_.contains(n)) return n;
  }
}

}  // namespace disc::ir
