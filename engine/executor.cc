#include "engine/executor.h"

#include <chrono>
#include <cstring>

#include "engine/binding.h"
#include "ir/error.h"

namespace disc::engine {

Executor::Executor(const ir::Graph& g, memory::Allocator& alloc) : g_(g), alloc_(alloc) {
  auto nodes = g.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (const ir::Value* v : nodes[i]->operands()) last_use_[v] = i;
    if (!nodes[i]->op().reference && nodes[i]->op().name != "matmul") {
      throw InvalidArgument("op `" + nodes[i]->op().name + "` has no reference kernel yet");
    }
  }
}

std::map<std::string, Tensor> Executor::run(std::map<std::string, Tensor>& args, StepStats* stats) {
  auto start = std::chrono::steady_clock::now();
  alloc_.reset_peak();
  int64_t allocations = alloc_.stats().allocations;
  ShapeOf shapes;
  for (const auto& [name, t] : args) shapes[name] = {t.dtype(), t.shape()};
  ir::Bindings b = bind_symbols(g_, shapes);

  std::map<const ir::Value*, Tensor> env;
  for (const ir::Value* a : g_.arguments()) env[a] = args.at(a->name());
  auto nodes = g_.nodes();
  auto since_start = [&] {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  };
  for (size_t i = 0; i < nodes.size(); ++i) {
    double begin = observer_ ? since_start() : 0;
    run_node(*nodes[i], b, env);
    for (const ir::Value* v : nodes[i]->operands()) {
      if (last_use_.at(v) == i && !g_.is_output(v) && v->producer()) env.erase(v);
    }
    for (const ir::Value* r : nodes[i]->results()) {
      if (!last_use_.contains(r) && !g_.is_output(r)) env.erase(r);  // never used
    }
    if (observer_) observer_(*nodes[i], begin, since_start(), alloc_.stats().live_bytes);
  }
  std::map<std::string, Tensor> outputs;
  for (const auto& [name, v] : g_.outputs()) outputs[name] = env.at(v);
  for (const auto& [arg, v] : g_.updates()) {
    Tensor& target = args.at(arg->name());
    const Tensor& value = env.at(v);
    if (target.raw() != value.raw()) std::memcpy(target.raw(), value.raw(), value.bytes());
  }
  if (stats) {
    stats->ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    stats->live_peak_bytes = alloc_.stats().peak_bytes;
    stats->allocations = alloc_.stats().allocations - allocations;
    stats->bindings = b;
  }
  return outputs;
}

void Executor::run_node(const ir::Node& n, const ir::Bindings& b,
                        std::map<const ir::Value*, Tensor>& env) {
  ir::KernelArgs args{.op = n.op().name, .attrs = &n.attrs(), .bindings = &b};
  for (const ir::Value* v : n.operands()) args.in.push_back(env.at(v).ref());
  for (const ir::Value* r : n.results()) {
    Tensor t = Tensor::empty(r->dtype(), concrete_shape(g_, *r, b), alloc_);
    args.out.push_back(t.ref());
    env[r] = std::move(t);
  }
  try {
    if (n.op().name == "matmul" && alloc_.device().is_host()) {
      gemm(n, args.in, args.out[0]);
    } else {
      n.op().reference(args);
    }
  } catch (const Error& e) {
    rethrow_with_context(e, g_.describe(n) + ": ");
  }
}

// matmul through the device's library GEMM: [..., M, K] x [..., K, N] (or a shared [K, N]).
void Executor::gemm(const ir::Node& n, const std::vector<ir::TensorRef>& in, const ir::TensorRef& out) {
  const ir::TensorRef &a = in[0], &bm = in[1];
  devices::GemmArgs g;
  g.dtype = a.dtype;
  g.transpose_a = n.attrs().get_bool("transpose_a");
  g.transpose_b = n.attrs().get_bool("transpose_b");
  g.m = out.dim(-2);
  g.n = out.dim(-1);
  g.k = a.dim(g.transpose_a ? -2 : -1);
  g.batch = g.m * g.n == 0 ? 0 : out.numel() / (g.m * g.n);
  g.a = a.data;
  g.b = bm.data;
  g.c = out.data;
  g.batch_stride_a = g.m * g.k;
  g.batch_stride_b = bm.rank() == 2 ? 0 : g.k * g.n;
  g.batch_stride_c = g.m * g.n;
  if (g.batch == 0) return;
  if (g.k == 0) {
    std::memset(out.data, 0, out.bytes());
    return;
  }
  alloc_.device().gemm(g);
}

}  // namespace disc::engine
