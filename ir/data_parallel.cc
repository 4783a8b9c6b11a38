#include "ir/data_parallel.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>
#include <string>
#include <utility>

#include "base/error.h"
#include "ir/nn.h"

namespace disc::ir {

using nn::scalar;

std::vector<size_t> made_order(const Graph& g, const std::vector<Value*>& values) {
  std::map<const Node*, size_t> position;
  for (const Node* n : g.nodes()) position.emplace(n, position.size());
  auto made_at = [&](size_t i) {
    return values[i]->producer() ? position.at(values[i]->producer()) : size_t{0};
  };
  std::vector<size_t> order(values.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return made_at(a) < made_at(b); });
  return order;
}

Value* loss_count(Graph& g, Value* loss) {
  const DType t = loss->dtype();
  const Node* n = loss->producer();
  int labels_at = -1;
  if (n && n->op().name == "cross_entropy") labels_at = 1;
  if (n && n->op().name == "linear_cross_entropy") labels_at = 2;
  if (labels_at < 0) return scalar(g, 1.0, t);
  Value* labels = n->operand(labels_at);
  const double ignore = static_cast<double>(n->attrs().get_int("ignore_index"));
  Value* ignored = g.add(
      "full", {}, {{"shape", labels->shape()}, {"value", ignore}, {"dtype", labels->dtype()}});
  Value* counted = g.add("cast", {g.add("ne", {labels, ignored})}, {{"dtype", t}});
  std::vector<int64_t> all(labels->rank());
  std::iota(all.begin(), all.end(), 0);
  return g.add("reduce_sum", {counted}, {{"axes", all}});
}

Value* global_loss(Graph& g, Value* loss) {
  Value* count = loss_count(g, loss);
  Node* sums = g.add_node("all_reduce", {g.add("mul", {loss, count}), count}, {},
                          {g.unique_name("loss.sum"), g.unique_name("loss.count")});
  // No rank counts anything (every label ignored): the loss is 0, as cross-entropy's is then.
  Value* total = g.add("max", {sums->result(1), scalar(g, 1e-30, loss->dtype())});
  return g.add("div", {sums->result(0), total});
}

namespace {

// One `op` node (with `attrs`) per bucket of about `bucket_bytes` of `grads`, filled in the order
// the backward makes them; its results, named NAME.`suffix`, in the order of `grads`.
std::vector<Value*> in_buckets(Graph& g, const std::vector<Value*>& grads, int64_t bucket_bytes,
                               const std::string& op, const Attributes& attrs,
                               const std::string& suffix) {
  const std::vector<size_t> order = made_order(g, grads);
  std::vector<Value*> sums(grads.size());
  std::vector<size_t> bucket;
  int64_t bytes = 0;
  auto close = [&] {
    std::vector<Value*> operands;
    std::vector<std::string> names;
    for (size_t i : bucket) {
      operands.push_back(grads[i]);
      names.push_back(g.unique_name(grads[i]->name() + suffix));
    }
    Node* n = g.add_node(op, operands, attrs, names);
    for (size_t k = 0; k < bucket.size(); ++k) sums[bucket[k]] = n->result(static_cast<int>(k));
    bucket.clear();
    bytes = 0;
  };
  for (size_t i : order) {
    const std::optional<int64_t> b = grads[i]->type().bytes().constant();
    if (!b) {
      throw InvalidArgument("gradient %" + grads[i]->name() + " has the symbolic shape " +
                            grads[i]->type().str() + "; data parallelism needs static parameters");
    }
    if (!bucket.empty() && grads[bucket[0]]->dtype() != grads[i]->dtype()) close();
    bucket.push_back(i);
    bytes += *b;
    if (bytes >= bucket_bytes) close();
  }
  if (!bucket.empty()) close();
  return sums;
}

}  // namespace

void copy_rank_part(const void* whole, int64_t numel, int64_t esize, int64_t rank, void* part,
                    int64_t part_size) {
  const int64_t begin = std::clamp<int64_t>(rank * part_size, 0, numel);
  const int64_t end = std::min(numel, begin + part_size);
  std::memset(part, 0, static_cast<size_t>(part_size * esize));
  std::memcpy(part, static_cast<const char*>(whole) + begin * esize,
              static_cast<size_t>((end - begin) * esize));
}

std::vector<Value*> all_reduce_in_buckets(Graph& g, const std::vector<Value*>& grads,
                                          int64_t bucket_bytes) {
  return in_buckets(g, grads, bucket_bytes, "all_reduce", {}, ".sum");
}

std::vector<Value*> reduce_scatter_in_buckets(Graph& g, const std::vector<Value*>& grads,
                                              int64_t bucket_bytes, int64_t ranks) {
  return in_buckets(g, grads, bucket_bytes, "reduce_scatter", {{"ranks", ranks}}, ".part");
}

}  // namespace disc::ir
