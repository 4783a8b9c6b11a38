#include "engine/state_shards.h"

#include "ir/data_parallel.h"

namespace disc::engine {

StateShards::StateShards(const ir::Graph& step, const std::vector<ir::Value*>& params,
                         devices::Communicator* comm, bool sharding)
    : comm_(comm) {
  if (!sharding || !comm || comm->size() < 2) return;
  for (const ir::Value* p : params) {
    std::vector<int64_t> shape;
    for (const ir::DimExpr& d : p->shape()) shape.push_back(*d.constant());
    for (const char* suffix : {".m", ".v", ".momentum"}) {
      const ir::Value* s = step.find_value(p->name() + suffix);
      if (s && s->role() == ir::Role::kState) whole_shape_[s->name()] = shape;
    }
  }
}

std::vector<int64_t> StateShards::saved_shape(const std::string& name, const Tensor& t) const {
  auto it = whole_shape_.find(name);
  return it == whole_shape_.end() ? t.shape() : it->second;
}

std::map<std::string, Tensor> StateShards::gather(const std::map<std::string, Tensor>& state,
                                                  memory::Allocator& host) const {
  std::map<std::string, Tensor> whole = state;
  for (const auto& [name, shape] : whole_shape_) {
    const Tensor& part = state.at(name);
    std::vector<std::byte> mine(static_cast<size_t>(part.bytes()));
    part.download(mine.data());
    Tensor t = Tensor::empty(part.dtype(), shape, host);
    comm_->start_all_gather(mine.data(), part.numel(), part.dtype(), t.raw(), t.numel()).get();
    whole[name] = std::move(t);
  }
  return whole;
}

void StateShards::take_part(const std::string& name, const Tensor& whole,
                            const Tensor& part) const {
  if (!whole_shape_.contains(name)) return part.copy_from(whole);
  std::vector<std::byte> all(static_cast<size_t>(whole.bytes())), mine(part.bytes());
  whole.download(all.data());
  ir::copy_rank_part(all.data(), whole.numel(), dtype_size(part.dtype()), comm_->rank(),
                     mine.data(), part.numel());
  part.upload(mine.data());
}

}  // namespace disc::engine
