// The CUDA C of attention on the tensor cores; see attention_mma_source.h. Embedded at build time
// by embed_cu.cmake as attention_mma_source() without this opening comment, which ends at the first
// empty line.
//
// Layouts of mma.m16n8k16 (PTX ISA, "Matrix fragments for mma.m16n8k16"), for lane = 4 g + t:
//   A (16 x 16, row-major), 4 registers of two halves: rows g and g + 8, columns 2t, 2t + 1 and
//     2t + 8, 2t + 9, in the order (g, 2t) (g + 8, 2t) (g, 2t + 8) (g + 8, 2t + 8);
//   B (16 x 8, by column), 2 registers: rows 2t, 2t + 1 and 2t + 8, 2t + 9 of column g;
//   C (16 x 8, f32), 4 floats: (g, 2t) (g, 2t + 1) (g + 8, 2t) (g + 8, 2t + 1).
// A C tile's rows are an A tile's rows with its columns in the same lanes, so that softmax's P
// (and dS) go from one product into the next without leaving registers. The shared tiles hold
// rows of keys, values, queries or dO as they are in memory, each padded by 8 halves so that the
// eight rows an ldmatrix reads at once fall in different banks: a B register is two adjacent
// halves of a row where the row is B's column (QK^T, dO V^T: ldmatrix), two halves of one column in
// adjacent rows where the rows run along k (PV, dS K, P^T dO, dS^T Q: ldmatrix .trans).


#define DISC_MMA_PAD 8
// The host build stops where a GPU would fault on an access not aligned to its size.
#ifdef DISC_HOST_BUILD
#define DISC_HOST_ALIGNED(p, bytes) \
  if ((unsigned long long)(p) % (bytes)) __builtin_trap()
#else
#define DISC_HOST_ALIGNED(p, bytes)
#endif
// Two adjacent halves as one 32-bit register (the first in the low half): one 4-byte load, or two
// 2-byte ones where p is not aligned to 4 bytes (a view 2 bytes into its buffer).
__device__ __forceinline__ unsigned disc_ld2(const unsigned short* p) {
#ifndef DISC_HOST_BUILD
  if (((unsigned long long)p & 3) == 0) return *(const unsigned*)p;
#endif
  return (unsigned)p[0] | (unsigned)p[1] << 16;
}
// Two floats rounded to T (to nearest even, as disc_put) in one register, lo in the low half.
template <typename T>
__device__ __forceinline__ unsigned disc_pack(float lo, float hi) {
  T a, b;
  disc_put(&a, lo);
  disc_put(&b, hi);
  return (unsigned)a.bits | (unsigned)b.bits << 16;
}
#ifndef DISC_HOST_BUILD
template <>
__device__ __forceinline__ unsigned disc_pack<disc_bf16>(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
template <>
__device__ __forceinline__ unsigned disc_pack<disc_f16>(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
#endif
// c += a b for one warp: a 16 x 16, b 16 x 8, c 16 x 8 in f32.
#ifdef DISC_HOST_BUILD
// The host build's block is one warp: the lanes trade their registers through shared arrays.
template <typename T>
__device__ __forceinline__ void disc_mma(float* c, const unsigned* a, const unsigned* b) {
  __shared__ unsigned xa[32][4], xb[32][2];
  const unsigned lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  for (int i = 0; i < 4; ++i) xa[lane][i] = a[i];
  for (int i = 0; i < 2; ++i) xb[lane][i] = b[i];
  __syncthreads();
  auto half = [](unsigned r, int k) { return disc_wide(T{(unsigned short)(k % 2 ? r >> 16 : r & 0xffffu)}); };
  for (int i = 0; i < 4; ++i) {
    const unsigned row = g + (i >= 2 ? 8 : 0), col = 2 * t + (i & 1);
    float s = c[i];
    for (int k = 0; k < 16; ++k)
      s += half(xa[(row % 8) * 4 + (k % 8) / 2][(row >= 8) + 2 * (k >= 8)], k) *
           half(xb[col * 4 + (k % 8) / 2][k >= 8], k);
    c[i] = s;
  }
  __syncthreads();
}
#else
template <typename T>
__device__ __forceinline__ void disc_mma(float* c, const unsigned* a, const unsigned* b);
template <>
__device__ __forceinline__ void disc_mma<disc_bf16>(float* c, const unsigned* a, const unsigned* b) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
template <>
__device__ __forceinline__ void disc_mma<disc_f16>(float* c, const unsigned* a, const unsigned* b) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
#endif
// A rows of x [n, N] (row r0 + g and r0 + g + 8; zeros past n): the A fragments of all N / 16
// column steps.
template <int N, typename T>
__device__ __forceinline__ void disc_a_rows(unsigned (*a)[4], const T* x, disc_i64 r0, disc_i64 n) {
  const unsigned lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const unsigned short* p = (const unsigned short*)x;
  DISC_UNROLL for (int kk = 0; kk < N / 16; ++kk)
    DISC_UNROLL for (int i = 0; i < 4; ++i) {
      const disc_i64 r = r0 + g + (i & 1) * 8;
      a[kk][i] = r < n ? disc_ld2(p + r * N + kk * 16 + (i >> 1) * 8 + 2 * t) : 0u;
    }
}
// Four 8 x 8 matrices of halves from shared memory in one instruction (ldmatrix .x4): lane l
// gives the address of row l % 8 of matrix l / 8 (16 bytes, aligned to 16), and r[i] gets lane
// 4 g + t's share of matrix i, its halves (g, 2t) and (g, 2t + 1); TRANS: (2t, g) and (2t + 1, g),
// the share of the transposed matrix. Shares are B registers of mma.m16n8k16: of a matrix whose
// rows are B's columns, or (TRANS) whose rows run along B's k.
template <bool TRANS>
__device__ __forceinline__ void disc_ldsm4(unsigned* r, const unsigned short* p) {
#ifdef DISC_HOST_BUILD
  __shared__ const unsigned short* rows[32];
  const unsigned lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  DISC_HOST_ALIGNED(p, 16);
  rows[lane] = p;
  __syncthreads();
  for (int i = 0; i < 4; ++i) {
    const unsigned short* const* m = rows + 8 * i;
    const unsigned lo = TRANS ? m[2 * t][g] : m[g][2 * t], hi = TRANS ? m[2 * t + 1][g] : m[g][2 * t + 1];
    r[i] = lo | hi << 16;
  }
  __syncthreads();
#else
  const unsigned a = (unsigned)__cvta_generic_to_shared(p);
  if (TRANS)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
#endif
}
// c[n] = A B for the warp's 16 rows of A (fragments a, K / 16 steps) and columns n * 8 .. of B,
// B's column j being row j of the shared tile s (row-major [columns][K + pad]). One ldmatrix takes
// the B registers of two column blocks (n, n + 1) at one k step.
template <int K, int COLS, typename T>
__device__ __forceinline__ void disc_mma_rows(float (*c)[4], const unsigned (*a)[4], const unsigned short* s) {
  const unsigned lane = threadIdx.x & 31, i = lane >> 3;
  DISC_UNROLL for (int n = 0; n < COLS / 8; ++n) c[n][0] = c[n][1] = c[n][2] = c[n][3] = 0.f;
  DISC_UNROLL for (int n = 0; n < COLS / 8; n += 2) {
    const unsigned short* row = s + ((n + (i >> 1)) * 8 + (lane & 7)) * (K + DISC_MMA_PAD) + (i & 1) * 8;
    DISC_UNROLL for (int kk = 0; kk < K / 16; ++kk) {
      unsigned b[4];
      disc_ldsm4<false>(b, row + kk * 16);
      disc_mma<T>(c[n], a[kk], b);
      disc_mma<T>(c[n + 1], a[kk], b + 2);
    }
  }
}
// acc[n] += P B, P the warp's 16 x KEYS values p (C layout, rounded to T), B = the shared tile s
// ([KEYS][N + pad]; its rows are B's k): ldmatrix .trans takes the B registers of two column
// blocks (n, n + 1) at one k step.
template <int KEYS, int N, typename T>
__device__ __forceinline__ void disc_mma_acc(float (*acc)[4], const float (*p)[4], const unsigned short* s) {
  const unsigned lane = threadIdx.x & 31, i = lane >> 3;
  DISC_UNROLL for (int kk = 0; kk < KEYS / 16; ++kk) {
    const unsigned a[4] = {disc_pack<T>(p[2 * kk][0], p[2 * kk][1]), disc_pack<T>(p[2 * kk][2], p[2 * kk][3]),
                           disc_pack<T>(p[2 * kk + 1][0], p[2 * kk + 1][1]),
                           disc_pack<T>(p[2 * kk + 1][2], p[2 * kk + 1][3])};
    const unsigned short* rows = s + (kk * 16 + (i & 1) * 8 + (lane & 7)) * (N + DISC_MMA_PAD) + (i >> 1) * 8;
    DISC_UNROLL for (int n = 0; n < N / 8; n += 2) {
      unsigned b[4];
      disc_ldsm4<true>(b, rows + n * 8);
      disc_mma<T>(acc[n], a, b);
      disc_mma<T>(acc[n + 1], a, b + 2);
    }
  }
}
// 16 bytes from global to shared memory without passing through registers (cp.async; zeros where
// !valid, g then only a valid address), to be waited for by disc_cp_wait; the host build copies
// them at once.
__device__ __forceinline__ void disc_cp16(unsigned short* s, const unsigned short* g, bool valid) {
#ifdef DISC_HOST_BUILD
  DISC_HOST_ALIGNED(s, 16);
  DISC_HOST_ALIGNED(g, 16);
  for (int e = 0; e < 8; ++e) s[e] = valid ? g[e] : (unsigned short)0;
#else
  const unsigned a = (unsigned)__cvta_generic_to_shared(s);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(a), "l"(g), "r"(valid ? 16 : 0));
#endif
}
// The copies issued since the last commit as one group; waiting until at most N groups are left.
__device__ __forceinline__ void disc_cp_commit() {
#ifndef DISC_HOST_BUILD
  asm volatile("cp.async.commit_group;");
#endif
}
template <int N>
__device__ __forceinline__ void disc_cp_wait() {
#ifndef DISC_HOST_BUILD
  asm volatile("cp.async.wait_group %0;" ::"n"(N));
#endif
}
// Rows [r0, r0 + R) of x [n, N] into the shared tile s [R][N + pad], zeros past n: copies of 16
// bytes in flight (disc_cp16) where x is aligned to them (N is a multiple of 16), else 2-byte
// loads and stores. Every thread of the block calls it.
template <int R, int N, typename T>
__device__ __forceinline__ void disc_tile_in(unsigned short* s, const T* x, disc_i64 r0, disc_i64 n) {
  const unsigned short* p = (const unsigned short*)x + r0 * N;
  if (((unsigned long long)p & 15) == 0) {
    for (int e = threadIdx.x; e < R * N / 8; e += blockDim.x) {
      const int r = e / (N / 8), c = e % (N / 8) * 8;
      const bool in = r0 + r < n;
      disc_cp16(s + r * (N + DISC_MMA_PAD) + c, in ? p + r * N + c : (const unsigned short*)x, in);
    }
    return;
  }
  for (int e = threadIdx.x; e < R * N; e += blockDim.x) {
    const int r = e / N, c = e % N;
    s[r * (N + DISC_MMA_PAD) + c] = r0 + r < n ? p[r * N + c] : (unsigned short)0;
  }
}
// Tiles j0 = lo, lo + STEP, ... below end, two buffers deep: load(buf, j0) issues tile j0's copies
// into buffer buf, and body(buf, j0) runs once they have landed, while the next tile's copies are
// in flight. Every thread of the block calls it with the same bounds (it synchronises the block).
template <int STEP, typename L, typename B>
__device__ __forceinline__ void disc_pipeline(disc_i64 lo, disc_i64 end, L load, B body) {
  __syncthreads();  // the buffers' last readers are done
  if (lo < end) load(0, lo);
  disc_cp_commit();
  int buf = 0;
  for (disc_i64 j0 = lo; j0 < end; j0 += STEP, buf ^= 1) {
    if (j0 + STEP < end) load(buf ^ 1, j0 + STEP);
    disc_cp_commit();
    disc_cp_wait<1>();  // all but the newest group: tile j0
    __syncthreads();
    body(buf, j0);
    __syncthreads();  // body's reads of buf are done before the next load into it
  }
}
// The sum over a row's four lanes (lanes 4g .. 4g + 3 hold row g), the same bits in each.
__device__ __forceinline__ float disc_quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}
__device__ __forceinline__ float disc_quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
// Key tiles: 64 keys, 32 where the head is large (the registers of four 64-key products would
// spill).
template <int D, int DV>
struct disc_mma_tile {
  static const int keys = D + DV > 128 ? 32 : 64;
};
// Which keys a query row sees: every key, or those up to its own (causal); with packed sequences
// (offsets, null otherwise), only its own sequence's.
struct disc_mask {
  disc_i64 sq, sk;
  int causal;
  const int* offsets;
  disc_i64 sequences;
};
// The rows a row sees, [lo, hi): a query row's keys or a key row's queries; empty past the tensor.
struct disc_span {
  disc_i64 lo, hi;
};
// Row r's sequence, [lo, hi), packed; every one of the n rows otherwise.
__device__ __forceinline__ disc_span disc_sequence_span(const disc_mask& m, disc_i64 r, disc_i64 n) {
  if (!m.offsets) return {0, n};
  const disc_i64 s = disc_sequence_of(m.offsets, m.sequences, r);
  return {m.offsets[s], m.offsets[s + 1]};
}
__device__ __forceinline__ disc_span disc_keys_of_query(const disc_mask& m, disc_i64 i) {
  if (i >= m.sq) return {0, 0};
  const disc_span s = disc_sequence_span(m, i, m.sk);
  return {s.lo, m.causal ? disc_min(i + 1, s.hi) : s.hi};
}
__device__ __forceinline__ disc_span disc_queries_of_key(const disc_mask& m, disc_i64 j) {
  if (j >= m.sk) return {0, 0};
  const disc_span s = disc_sequence_span(m, j, m.sq);
  return {m.causal ? j : s.lo, s.hi};
}
// A warp's 16 rows from w0 (of n): the spans of its first and last row, which bound every row's
// (the spans never move backwards from row to row).
struct disc_warp_spans {
  disc_span first, last;
  bool full;  // all 16 rows exist
};
template <typename F>
__device__ __forceinline__ disc_warp_spans disc_spans_of_warp(disc_i64 w0, disc_i64 n, F span_of) {
  if (w0 >= n) return {{0, 0}, {0, 0}, false};
  return {span_of(w0), span_of(disc_min(w0 + 15, n - 1)), w0 + 16 <= n};
}
// Whether every row of the warp sees every row of the tile [j0, j0 + nj) (most tiles, which then
// skip the check per score), and whether none does (the tile is skipped).
__device__ __forceinline__ bool disc_sees_all(const disc_warp_spans& w, disc_i64 j0, int nj) {
  return w.full && j0 >= w.last.lo && j0 + nj <= w.first.hi;
}
__device__ __forceinline__ bool disc_sees_none(const disc_warp_spans& w, disc_i64 j0, int nj) {
  return j0 >= w.last.hi || j0 + nj <= w.first.lo;
}
__device__ __forceinline__ bool disc_in(const disc_span& s, disc_i64 j) {
  return j >= s.lo && j < s.hi;
}
// Softmax in base 2: scores times scale log2(e), exp2f of their distance to the row's max (the
// hardware's ex2, without expf's range reduction); the log-sum-exp in stats is in base 2 too.
#define DISC_LOG2E 1.44269504088896341f
// Row r of the warp's two (whose keys are `keys`) of the scores of the key tile at j0, in place:
// times sl2 where the row sees the key, -inf where it does not; returns this lane's max of them
// (-3e38 for none).
template <int KEYS>
__device__ __forceinline__ float disc_window_row(float (*s)[4], int r, const disc_span& keys, disc_i64 j0, bool all,
                                                 float sl2) {
  const unsigned t = threadIdx.x & 3;
  float mx = -3.0e38f;
  DISC_UNROLL for (int n = 0; n < KEYS / 8; ++n)
    DISC_UNROLL for (int c = 0; c < 2; ++c) {
      const bool seen = all || disc_in(keys, j0 + n * 8 + 2 * t + c);
      s[n][2 * r + c] = seen ? s[n][2 * r + c] * sl2 : DISC_NEG_INF;
      mx = fmaxf(mx, s[n][2 * r + c]);
    }
  return mx;
}
// 2^(x - m) for a score from disc_window_row; 0 outside the window.
__device__ __forceinline__ float disc_exp2_in(float x, float m) {
  return x == DISC_NEG_INF ? 0.f : exp2f(x - m);
}

// The forward: a warp per 16 query rows, a block per 16 x (warps) rows of one head; online softmax
// over tiles of keys, S = Q K^T and O += P V on the tensor cores.
template <int D, int DV, typename T>
__device__ void disc_attention_fwd_mma(const T* q, const T* k, const T* v, T* o, disc_i64 heads, disc_i64 sq,
                                       disc_i64 sk, int causal, float scale, const int* offsets,
                                       disc_i64 sequences) {
  const disc_mask mk{sq, sk, causal, offsets, sequences};
  auto keys_of = [&](disc_i64 i) { return disc_keys_of_query(mk, i); };
  const int KEYS = disc_mma_tile<D, DV>::keys;
  alignas(16) __shared__ unsigned short ks[2][KEYS * (D + DISC_MMA_PAD)], vs[2][KEYS * (DV + DISC_MMA_PAD)];
  const unsigned lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const float sl2 = scale * DISC_LOG2E;
  const disc_i64 rows = blockDim.x / 2, tiles = (sq + rows - 1) / rows;
  for (disc_i64 b = blockIdx.x; b < heads * tiles; b += gridDim.x) {
    const disc_i64 h = b / tiles, r0 = b % tiles * rows, w0 = r0 + 16 * (threadIdx.x >> 5);
    const T *kh = k + h * sk * D, *vh = v + h * sk * DV;
    unsigned qa[D / 16][4];
    disc_a_rows<D>(qa, q + h * sq * D, w0, sq);
    float acc[DV / 8][4] = {}, m[2] = {-3.0e38f, -3.0e38f}, l[2] = {0.f, 0.f};
    // The keys of the block's rows, of the warp's, and of this lane's two rows.
    const disc_i64 lo = keys_of(r0).lo, end = keys_of(disc_min(r0 + rows, sq) - 1).hi;
    const disc_warp_spans warp = disc_spans_of_warp(w0, sq, keys_of);
    const disc_span mine[2] = {keys_of(w0 + g), keys_of(w0 + g + 8)};
    auto load = [&](int buf, disc_i64 j0) {
      disc_tile_in<KEYS, D>(ks[buf], kh, j0, sk);
      disc_tile_in<KEYS, DV>(vs[buf], vh, j0, sk);
    };
    disc_pipeline<KEYS>(lo, end, load, [&](int buf, disc_i64 j0) {
      if (disc_sees_none(warp, j0, KEYS)) return;  // no row of the warp sees a key of the tile
      const bool all = disc_sees_all(warp, j0, KEYS);
      float s[KEYS / 8][4];
      disc_mma_rows<D, KEYS, T>(s, qa, ks[buf]);
      DISC_UNROLL for (int r = 0; r < 2; ++r) {
        const float mx = disc_window_row<KEYS>(s, r, mine[r], j0, all, sl2);
        const float mn = fmaxf(m[r], disc_quad_max(mx)), corr = exp2f(m[r] - mn);
        float sum = 0.f;
        DISC_UNROLL for (int n = 0; n < KEYS / 8; ++n)
          DISC_UNROLL for (int c = 0; c < 2; ++c) {
            const float p = disc_exp2_in(s[n][2 * r + c], mn);
            s[n][2 * r + c] = p;
            sum += p;
          }
        l[r] = l[r] * corr + disc_quad_sum(sum);
        m[r] = mn;
        DISC_UNROLL for (int n = 0; n < DV / 8; ++n) acc[n][2 * r] *= corr, acc[n][2 * r + 1] *= corr;
      }
      disc_mma_acc<KEYS, DV, T>(acc, s, vs[buf]);
    });
    DISC_UNROLL for (int r = 0; r < 2; ++r) {
      const disc_i64 i = w0 + g + 8 * r;
      if (i >= sq) continue;
      const float inv = l[r] > 0.f ? 1.f / l[r] : 0.f;
      T* out = o + (h * sq + i) * DV;
      DISC_UNROLL for (int n = 0; n < DV / 8; ++n)
        disc_put(out + n * 8 + 2 * t, acc[n][2 * r] * inv), disc_put(out + n * 8 + 2 * t + 1, acc[n][2 * r + 1] * inv);
    }
  }
}

// The gradient per query row, as the forward's tiles: one pass for the log-sum-exp and
// dsum = sum_j p_j dp_j (dp = dO V^T, online like the softmax's sum), one for
// dq = scale sum_j p_j (dp_j - dsum) k_j; lse and dsum go to stats for the key rows' kernel.
template <int D, int DV, typename T>
__device__ void disc_attention_bwd_q_mma(const T* q, const T* k, const T* v, const T* dout, T* dq, float* stats,
                                         disc_i64 heads, disc_i64 sq, disc_i64 sk, int causal, float scale,
                                         const int* offsets, disc_i64 sequences) {
  const disc_mask mk{sq, sk, causal, offsets, sequences};
  auto keys_of = [&](disc_i64 i) { return disc_keys_of_query(mk, i); };
  const int KEYS = disc_mma_tile<D, DV>::keys;
  alignas(16) __shared__ unsigned short ks[2][KEYS * (D + DISC_MMA_PAD)], vs[2][KEYS * (DV + DISC_MMA_PAD)];
  const unsigned lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const float sl2 = scale * DISC_LOG2E;
  const disc_i64 rows = blockDim.x / 2, tiles = (sq + rows - 1) / rows;
  for (disc_i64 b = blockIdx.x; b < heads * tiles; b += gridDim.x) {
    const disc_i64 h = b / tiles, r0 = b % tiles * rows, w0 = r0 + 16 * (threadIdx.x >> 5);
    const T *kh = k + h * sk * D, *vh = v + h * sk * DV;
    auto load = [&](int buf, disc_i64 j0) {
      disc_tile_in<KEYS, D>(ks[buf], kh, j0, sk);
      disc_tile_in<KEYS, DV>(vs[buf], vh, j0, sk);
    };
    unsigned qa[D / 16][4], da[DV / 16][4];
    disc_a_rows<D>(qa, q + h * sq * D, w0, sq);
    disc_a_rows<DV>(da, dout + h * sq * DV, w0, sq);
    float m[2] = {-3.0e38f, -3.0e38f}, l[2] = {0.f, 0.f}, ds[2] = {0.f, 0.f}, lse[2], dsum[2];
    const disc_i64 lo = keys_of(r0).lo, end = keys_of(disc_min(r0 + rows, sq) - 1).hi;
    const disc_warp_spans warp = disc_spans_of_warp(w0, sq, keys_of);
    const disc_span mine[2] = {keys_of(w0 + g), keys_of(w0 + g + 8)};
    for (int pass = 0; pass < 2; ++pass) {
      float acc[D / 8][4] = {};
      disc_pipeline<KEYS>(lo, end, load, [&](int buf, disc_i64 j0) {
        if (disc_sees_none(warp, j0, KEYS)) return;
        const bool all = disc_sees_all(warp, j0, KEYS);
        float s[KEYS / 8][4], dp[KEYS / 8][4];
        disc_mma_rows<D, KEYS, T>(s, qa, ks[buf]);
        disc_mma_rows<DV, KEYS, T>(dp, da, vs[buf]);
        DISC_UNROLL for (int r = 0; r < 2; ++r) {
          const float mx = disc_window_row<KEYS>(s, r, mine[r], j0, all, sl2);
          if (pass == 0) {  // the running max, sum and dsum, rescaled as the max grows
            const float mn = fmaxf(m[r], disc_quad_max(mx)), corr = exp2f(m[r] - mn);
            float sum = 0.f, dsm = 0.f;
            DISC_UNROLL for (int n = 0; n < KEYS / 8; ++n)
              DISC_UNROLL for (int c = 0; c < 2; ++c) if (s[n][2 * r + c] != DISC_NEG_INF) {
                const float p = exp2f(s[n][2 * r + c] - mn);
                sum += p;
                dsm += p * dp[n][2 * r + c];
              }
            l[r] = l[r] * corr + disc_quad_sum(sum);
            ds[r] = ds[r] * corr + disc_quad_sum(dsm);
            m[r] = mn;
          } else {  // dS = P (dP - dsum), into s
            DISC_UNROLL for (int n = 0; n < KEYS / 8; ++n)
              DISC_UNROLL for (int c = 0; c < 2; ++c)
                s[n][2 * r + c] = disc_exp2_in(s[n][2 * r + c], lse[r]) * (dp[n][2 * r + c] - dsum[r]);
          }
        }
        if (pass == 1) disc_mma_acc<KEYS, D, T>(acc, s, ks[buf]);
      });
      if (pass == 0) {
        DISC_UNROLL for (int r = 0; r < 2; ++r) {
          lse[r] = m[r] + log2f(l[r]);
          dsum[r] = l[r] > 0.f ? ds[r] / l[r] : 0.f;
        }
        continue;
      }
      DISC_UNROLL for (int r = 0; r < 2; ++r) {
        const disc_i64 i = w0 + g + 8 * r;
        if (i >= sq) continue;
        T* out = dq + (h * sq + i) * D;
        DISC_UNROLL for (int n = 0; n < D / 8; ++n)
          disc_put(out + n * 8 + 2 * t, acc[n][2 * r] * scale), disc_put(out + n * 8 + 2 * t + 1, acc[n][2 * r + 1] * scale);
        if (t == 0) stats[2 * (h * sq + i)] = lse[r], stats[2 * (h * sq + i) + 1] = dsum[r];
      }
    }
  }
}

// The gradient per key row: a warp per 16 key rows, over tiles of the query rows that see them,
// with S^T = K Q^T and dP^T = V dO^T: dv += P^T dO and dk += dS^T Q, dS^T = P^T (dP^T - dsum).
template <int D, int DV, typename T>
__device__ void disc_attention_bwd_kv_mma(const T* q, const T* k, const T* v, const T* dout, const float* stats,
                                          T* dk, T* dv, disc_i64 heads, disc_i64 sq, disc_i64 sk, int causal,
                                          float scale, const int* offsets, disc_i64 sequences) {
  const disc_mask mk{sq, sk, causal, offsets, sequences};
  auto queries_of = [&](disc_i64 j) { return disc_queries_of_key(mk, j); };
  const int QR = disc_mma_tile<D, DV>::keys;
  alignas(16) __shared__ unsigned short qs[2][QR * (D + DISC_MMA_PAD)], dos[2][QR * (DV + DISC_MMA_PAD)];
  __shared__ float st[2][2 * QR];
  const unsigned lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const float sl2 = scale * DISC_LOG2E;
  const disc_i64 rows = blockDim.x / 2, tiles = (sk + rows - 1) / rows;
  for (disc_i64 b = blockIdx.x; b < heads * tiles; b += gridDim.x) {
    const disc_i64 h = b / tiles, r0 = b % tiles * rows, w0 = r0 + 16 * (threadIdx.x >> 5);
    const T *qh = q + h * sq * D, *doh = dout + h * sq * DV;
    const float* sh = stats + 2 * h * sq;
    unsigned ka[D / 16][4], va[DV / 16][4];
    disc_a_rows<D>(ka, k + h * sk * D, w0, sk);
    disc_a_rows<DV>(va, v + h * sk * DV, w0, sk);
    float dka[D / 8][4] = {}, dva[DV / 8][4] = {};
    auto load = [&](int buf, disc_i64 i0) {
      disc_tile_in<QR, D>(qs[buf], qh, i0, sq);
      disc_tile_in<QR, DV>(dos[buf], doh, i0, sq);
      for (int e = threadIdx.x; e < 2 * QR; e += blockDim.x) st[buf][e] = i0 + e / 2 < sq ? sh[2 * i0 + e] : 0.f;
    };
    // The queries that see the block's keys, the warp's, and this lane's two keys.
    const disc_i64 lo = queries_of(r0).lo, end = queries_of(disc_min(r0 + rows, sk) - 1).hi;
    const disc_warp_spans warp = disc_spans_of_warp(w0, sk, queries_of);
    const disc_span mine[2] = {queries_of(w0 + g), queries_of(w0 + g + 8)};
    disc_pipeline<QR>(lo, end, load, [&](int buf, disc_i64 i0) {
      if (disc_sees_none(warp, i0, QR)) return;  // no query of the tile sees a key of the warp
      const bool all = disc_sees_all(warp, i0, QR);
      const float* sb = st[buf];
      float p[QR / 8][4], dp[QR / 8][4];
      disc_mma_rows<D, QR, T>(p, ka, qs[buf]);
      disc_mma_rows<DV, QR, T>(dp, va, dos[buf]);
      DISC_UNROLL for (int r = 0; r < 2; ++r) {
        DISC_UNROLL for (int n = 0; n < QR / 8; ++n)
          DISC_UNROLL for (int c = 0; c < 2; ++c) {
            const int ii = n * 8 + 2 * t + c;
            const bool seen = all || disc_in(mine[r], i0 + ii);
            const float pr = seen ? exp2f(p[n][2 * r + c] * sl2 - sb[2 * ii]) : 0.f;
            p[n][2 * r + c] = pr;
            dp[n][2 * r + c] = pr * (dp[n][2 * r + c] - sb[2 * ii + 1]);
          }
      }
      disc_mma_acc<QR, DV, T>(dva, p, dos[buf]);
      disc_mma_acc<QR, D, T>(dka, dp, qs[buf]);
    });
    DISC_UNROLL for (int r = 0; r < 2; ++r) {
      const disc_i64 j = w0 + g + 8 * r;
      if (j >= sk) continue;
      T *ok = dk + (h * sk + j) * D, *ov = dv + (h * sk + j) * DV;
      DISC_UNROLL for (int n = 0; n < D / 8; ++n)
        disc_put(ok + n * 8 + 2 * t, dka[n][2 * r] * scale), disc_put(ok + n * 8 + 2 * t + 1, dka[n][2 * r + 1] * scale);
      DISC_UNROLL for (int n = 0; n < DV / 8; ++n)
        disc_put(ov + n * 8 + 2 * t, dva[n][2 * r]), disc_put(ov + n * 8 + 2 * t + 1, dva[n][2 * r + 1]);
    }
  }
}
#define DISC_ATTENTION_MMA(D, DV, T)                                                                              \
  extern "C" __global__ void disc_attention_mma_fwd_##D##_##DV(                                                   \
      const T* q, const T* k, const T* v, T* o, disc_i64 heads, disc_i64 sq, disc_i64 sk, int causal, float scale, \
      const int* offsets, disc_i64 sequences) {                                                                   \
    disc_attention_fwd_mma<D, DV, T>(q, k, v, o, heads, sq, sk, causal, scale, offsets, sequences);               \
  }                                                                                                               \
  extern "C" __global__ void disc_attention_mma_bwd_q_##D##_##DV(                                                 \
      const T* q, const T* k, const T* v, const T* dout, T* dq, float* stats, disc_i64 heads, disc_i64 sq,        \
      disc_i64 sk, int causal, float scale, const int* offsets, disc_i64 sequences) {                             \
    disc_attention_bwd_q_mma<D, DV, T>(q, k, v, dout, dq, stats, heads, sq, sk, causal, scale, offsets,           \
                                       sequences);                                                                \
  }                                                                                                               \
  extern "C" __global__ void disc_attention_mma_bwd_kv_##D##_##DV(                                                \
      const T* q, const T* k, const T* v, const T* dout, const float* stats, T* dk, T* dv, disc_i64 heads,        \
      disc_i64 sq, disc_i64 sk, int causal, float scale, const int* offsets, disc_i64 sequences) {                \
    disc_attention_bwd_kv_mma<D, DV, T>(q, k, v, dout, stats, dk, dv, heads, sq, sk, causal, scale, offsets,      \
                                        sequences);                                                               \
  }
