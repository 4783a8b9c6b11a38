#include "devices/cpu/widened_attention.h"

#include <algorithm>
#include <vector>

#include "devices/cpu/block_attention.h"
#include "devices/cpu/half_arrays.h"

namespace disc::devices::cpu {
namespace {

// One f32 tensor of a chunk: `per_head` elements per head of the 16-bit tensor at `half`.
struct Slice {
  DType type;
  const void* half;
  int64_t per_head;
  std::vector<float> f32;

  const void* at(int64_t h0) const { return static_cast<const uint16_t*>(half) + h0 * per_head; }
  void widen(int64_t h0, int64_t heads) {
    f32.resize(static_cast<size_t>(heads * per_head));
    widen_half(type, at(h0), f32.data(), heads * per_head);
  }
  void narrow_into(void* out, int64_t h0, int64_t heads) const {
    narrow_half(type, f32.data(), static_cast<uint16_t*>(out) + h0 * per_head, heads * per_head);
  }
};

// Calls f(h0, heads) over chunks of heads whose f32 copies, `floats_per_head` each, fit the
// scratch budget.
template <typename F>
void for_chunks(const AttentionArgs& a, int64_t floats_per_head, F&& f) {
  const int64_t chunk =
      std::clamp<int64_t>(kWidenedAttentionBytes / std::max<int64_t>(1, 4 * floats_per_head), 1,
                          std::max<int64_t>(1, a.heads));
  for (int64_t h0 = 0; h0 < a.heads; h0 += chunk) f(h0, std::min(chunk, a.heads - h0));
}

AttentionArgs f32_chunk(const AttentionArgs& a, int64_t heads, const Slice& q, const Slice& k,
                        const Slice& v) {
  AttentionArgs c = a;
  c.dtype = DType::kF32, c.heads = heads;
  c.q = q.f32.data(), c.k = k.f32.data(), c.v = v.f32.data();
  return c;
}

}  // namespace

void widened_attention_forward(Device& dev, const AttentionArgs& a, void* out) {
  const DType t = a.dtype;
  Slice q{t, a.q, a.sq * a.d}, k{t, a.k, a.sk * a.d}, v{t, a.v, a.sk * a.dv},
      o{t, out, a.sq * a.dv};
  for_chunks(a, q.per_head + k.per_head + v.per_head + o.per_head, [&](int64_t h0, int64_t n) {
    q.widen(h0, n), k.widen(h0, n), v.widen(h0, n);
    o.f32.resize(static_cast<size_t>(n * o.per_head));
    attention_forward(dev, f32_chunk(a, n, q, k, v), o.f32.data());
    o.narrow_into(out, h0, n);
  });
}

void widened_attention_backward(Device& dev, const AttentionArgs& a, const void* dout, void* dq,
                                void* dk, void* dv) {
  const DType t = a.dtype;
  Slice q{t, a.q, a.sq * a.d}, k{t, a.k, a.sk * a.d}, v{t, a.v, a.sk * a.dv},
      g{t, dout, a.sq * a.dv};
  Slice gq{t, dq, q.per_head}, gk{t, dk, k.per_head}, gv{t, dv, v.per_head};
  const int64_t floats = 2 * (q.per_head + k.per_head + v.per_head) + g.per_head;
  for_chunks(a, floats, [&](int64_t h0, int64_t n) {
    q.widen(h0, n), k.widen(h0, n), v.widen(h0, n), g.widen(h0, n);
    for (Slice* s : {&gq, &gk, &gv}) s->f32.resize(static_cast<size_t>(n * s->per_head));
    attention_backward(dev, f32_chunk(a, n, q, k, v), g.f32.data(), gq.f32.data(), gk.f32.data(),
                       gv.f32.data());
    gq.narrow_into(dq, h0, n), gk.narrow_into(dk, h0, n), gv.narrow_into(dv, h0, n);
  });
}

}  // namespace disc::devices::cpu
