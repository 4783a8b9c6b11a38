// When each value of a training step is alive, for a given order of its nodes, and how many bytes
// that holds at each step: symbolically (for printing and for the scheduler) and for concrete
// symbol values (for the run-time memory plan).
//
// A value lives from the step that produces it to the last step that reads it, or up to the step
// before when that step writes its result into the value's buffer (in place). An update
// (`update %w = %w_new`) copies its value into the argument after the argument's last reader and
// the value's producer have both run, so a scheduler may put the optimizer anywhere and never
// overwrite a parameter that a later step still reads. Where nothing reads the argument after the
// value's producer, and the producer reads it (if at all) only at the index it writes, the
// producer writes the value straight into the argument instead: no buffer of its own, no copy
// (AdamW then updates the parameter and its moments in place).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"

namespace disc::memory {

struct Life {
  int def = 0;            // the step that produces it
  int last = 0;           // the last step that needs it; the order's size for graph outputs
  std::vector<int> uses;  // steps that read it, ascending, without repeats
  bool donated = false;   // its last reader writes its result into this value's buffer
};

struct Liveness {
  std::vector<const ir::Node*> order;
  std::map<const ir::Value*, Life> lives;  // every value a node produces
  // After step i: the updates to apply (argument, value), then the values to free.
  std::vector<std::vector<std::pair<const ir::Value*, const ir::Value*>>> copies_after;
  std::vector<std::vector<const ir::Value*>> frees_after;
  // Updated arguments: the step after which each holds its new value.
  std::map<const ir::Value*, int> overwritten_after;
  // Update values written straight into their argument (value -> argument): no copy.
  std::map<const ir::Value*, const ir::Value*> written_into;
  // Results written in place: each -> the operand whose buffer it takes (one that its op may
  // overwrite, which dies there, with the result's dtype and element count).
  std::map<const ir::Value*, const ir::Value*> donor;

  int steps() const { return static_cast<int>(order.size()); }
  // True when `v` is held during step i (produced values only; arguments are always held).
  bool live_at(const ir::Value* v, int i) const;
};

// `order` must hold every node of `g` once, each after its operands' producers; throws
// InvalidArgument otherwise, and for an update whose value is an argument (it would read an
// argument that another update may already have overwritten).
Liveness analyze_liveness(const ir::Graph& g, std::vector<const ir::Node*> order);

// The bytes a value occupies for `b`, rounded as the allocators round them.
int64_t concrete_bytes(const ir::Value& v, const ir::Bindings& b);

// Bytes of produced values held during each step (arguments excluded: they are held throughout).
std::vector<ir::DimExpr> live_curve(const Liveness& l);
std::vector<int64_t> live_curve(const Liveness& l, const ir::Bindings& b);
// With each value's bytes from `bytes_of`: the scheduler compares several orders on the same
// bindings and computes each value's bytes once.
std::vector<int64_t> live_curve(const Liveness& l,
                                const std::function<int64_t(const ir::Value&)>& bytes_of);

// One line per step: `3: %c = exp  holds 8*N` (the bytes of produced values held during it).
std::string print_schedule(const ir::Graph& g, const Liveness& l);

}  // namespace disc::memory
