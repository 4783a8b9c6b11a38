// The CUDA C of the GPU op kernels (gpu_ops.h). Every kernel but attention's gives one thread one
// item of work (an element, a row, a column) in a grid-stride loop, with no warp collectives: any
// grid runs it, the same item always runs the same arithmetic in the same order (no atomics in a
// sum), and the host build that the tests make of this source computes exactly what a GPU does.
// Attention's kernels give a block a tile of rows and share what the rows read through shared
// memory; each thread still goes over it in its own order. The host build runs a block's threads
// as host threads that meet at each barrier (a few blocks at most), so it checks the shared loads
// and the idle threads too. They take the head sizes as template arguments and their element
// type (f32, bf16 or f16), so that a row's operands and accumulators stay in registers;
// DISC_ATTENTION(D, DV, T) instantiates them, one type per module.
//
// gpu_op_source() returns this source after half.cu's conversions. Embedded at build time by
// embed_cu.cmake without this opening comment, which ends at the first empty line.

typedef long long disc_i64;
#define DISC_NEG_INF (-__int_as_float(0x7f800000))
#define DISC_FOR_ITEMS(t, n) \
  for (disc_i64 t = (disc_i64)blockIdx.x * blockDim.x + threadIdx.x; t < (n); t += (disc_i64)gridDim.x * blockDim.x)

// The element types the float kernels read and write: f32, and bf16 and f16 as their bits
// (disc_bf16_to_f32 and the others come from gpu_half_source()). A kernel computes in f32, widens
// what it loads and rounds what it stores, once, as the reference kernels do through
// ir/ops/half_widening.h.
struct disc_bf16 { unsigned short bits; };
struct disc_f16 { unsigned short bits; };
__device__ __forceinline__ float disc_wide(float x) { return x; }
__device__ __forceinline__ float disc_wide(disc_bf16 x) { return disc_bf16_to_f32(x.bits); }
__device__ __forceinline__ float disc_wide(disc_f16 x) { return disc_f16_to_f32(x.bits); }
__device__ __forceinline__ void disc_put(float* p, float v) { *p = v; }
__device__ __forceinline__ void disc_put(disc_bf16* p, float v) { p->bits = disc_f32_to_bf16(v); }
__device__ __forceinline__ void disc_put(disc_f16* p, float v) { p->bits = disc_f32_to_f16(v); }
#define DISC_FLOATS(M) M(float, f32) M(disc_bf16, bf16) M(disc_f16, f16)

// f32 arrays rounded to 16 bits (a 16-bit head's weight gradient, summed over its chunks in f32).
template <typename T>
__device__ void disc_narrow(const float* in, T* out, disc_i64 n) {
  DISC_FOR_ITEMS(t, n) disc_put(out + t, in[t]);
}
#define DISC_CONVERT(T, S)                                                          \
  extern "C" __global__ void disc_narrow_##S(const float* in, T* out, disc_i64 n) { \
    disc_narrow(in, out, n);                                                        \
  }
DISC_CONVERT(disc_bf16, bf16)
DISC_CONVERT(disc_f16, f16)

// i / n and i % n (i >= 0, n > 0) in 32 bits where both fit: a 64-bit division is a long subroutine
// on a GPU.
__device__ __forceinline__ disc_i64 disc_div(disc_i64 i, disc_i64 n) {
  return (i | n) >> 32 ? i / n : (disc_i64)((unsigned)i / (unsigned)n);
}
__device__ __forceinline__ disc_i64 disc_mod(disc_i64 i, disc_i64 n) {
  return (i | n) >> 32 ? i % n : (disc_i64)((unsigned)i % (unsigned)n);
}

// Transpose: output element o reads input element sum(index_d(o) * in_strides[d]), where
// in_strides[d] is the input stride of the input dim that output dim d is.
struct disc_perm {
  disc_i64 out_dims[8];
  disc_i64 in_strides[8];
  int rank;
};
template <typename T>
__device__ void disc_transpose(const T* in, T* out, disc_i64 n, disc_perm p) {
  DISC_FOR_ITEMS(o, n) {
    disc_i64 src = 0, rest = o;
    for (int d = p.rank - 1; d >= 0; --d) {
      src += disc_mod(rest, p.out_dims[d]) * p.in_strides[d];
      rest = disc_div(rest, p.out_dims[d]);
    }
    out[o] = in[src];
  }
}
extern "C" __global__ void disc_transpose_2(const unsigned short* in, unsigned short* out, disc_i64 n,
                                            disc_perm p) {
  disc_transpose(in, out, n, p);
}
extern "C" __global__ void disc_transpose_4(const unsigned* in, unsigned* out, disc_i64 n, disc_perm p) {
  disc_transpose(in, out, n, p);
}
extern "C" __global__ void disc_transpose_8(const unsigned long long* in, unsigned long long* out, disc_i64 n,
                                            disc_perm p) {
  disc_transpose(in, out, n, p);
}

// A bad value at position i, kept in the check record (jit/gpu/device_checks.h) unless an earlier
// one is there: the check's tag and the position plus one in the first word, the value in the second.
__device__ __forceinline__ void disc_report_bad(unsigned long long* record, unsigned long long tag, disc_i64 i,
                                                disc_i64 value) {
  if (atomicCAS(record, 0ull, tag | (unsigned long long)(i + 1)) == 0ull) record[1] = (unsigned long long)value;
}

// Rope, as the reference computes it: the angle, its cosine and sine and the rotation in double.
// The cosines and sines depend on the position and the pair only, so they come from a table that
// disc_rope_table fills (tab[2 (p d/2 + i)] and the next: position p, pair i) and later calls of the
// same head size and theta reuse. A thread per pair (x[i], x[i + d/2]) of a row: it reads both
// before it writes, so y may be x.
extern "C" __global__ void disc_rope_table(double* tab, disc_i64 positions, disc_i64 d, double theta) {
  const disc_i64 half = d / 2;
  DISC_FOR_ITEMS(t, positions * half) {
    const double angle = (double)disc_div(t, half) * pow(theta, -2.0 * (double)disc_mod(t, half) / (double)d);
    tab[2 * t] = cos(angle);
    tab[2 * t + 1] = sin(angle);
  }
}
// Packed sequences give each index along the sequence axis its position (pos, null otherwise):
// the table holds positions [0, seq), and one outside is reported (as gather's bad index) and
// read as 0.
template <typename T>
__device__ void disc_rope(const T* x, T* y, disc_i64 rows, disc_i64 d, disc_i64 inner, disc_i64 seq,
                          const double* tab, double sign, const int* pos, unsigned long long* bad,
                          unsigned long long tag) {
  const disc_i64 half = d / 2;
  DISC_FOR_ITEMS(t, rows * half) {
    const disc_i64 r = disc_div(t, half), i = disc_mod(t, half);
    disc_i64 p = disc_mod(disc_div(r * d, inner), seq);
    if (pos) {
      const disc_i64 at = p;
      p = pos[at];
      if (p < 0 || p >= seq) disc_report_bad(bad, tag, at, p), p = 0;
    }
    const double c = tab[2 * (p * half + i)], s = sign * tab[2 * (p * half + i) + 1];
    const double x0 = disc_wide(x[r * d + i]), x1 = disc_wide(x[r * d + i + half]);
    disc_put(y + r * d + i, (float)(x0 * c - x1 * s));
    disc_put(y + r * d + i + half, (float)(x1 * c + x0 * s));
  }
}
#define DISC_ROPE(T, S)                                                                                 \
  extern "C" __global__ void disc_rope_##S(const T* x, T* y, disc_i64 rows, disc_i64 d, disc_i64 inner, \
                                           disc_i64 seq, const double* tab, double sign, const int* pos, \
                                           unsigned long long* bad, unsigned long long tag) {            \
    disc_rope(x, y, rows, d, inner, seq, tab, sign, pos, bad, tag);                                     \
  }
DISC_FLOATS(DISC_ROPE)

// A fused kernel's label check (jit/kernel_ir): its count of bad labels, if any, reported under
// `tag`.
extern "C" __global__ void disc_report_nonzero(const double* total, unsigned long long* bad, unsigned long long tag) {
  if (blockIdx.x == 0 && threadIdx.x == 0 && *total != 0.0) disc_report_bad(bad, tag, 0, (disc_i64)*total);
}
// Gather and scatter_add over rows of `cols` floats. An index outside [0, rows) is skipped, and
// reported in the check record under `tag`.
template <typename I>
__device__ void disc_gather(const float* table, const I* idx, float* out, disc_i64 n, disc_i64 rows,
                            disc_i64 cols, unsigned long long* bad, unsigned long long tag) {
  DISC_FOR_ITEMS(t, n * cols) {
    const disc_i64 i = t / cols, r = (disc_i64)idx[i];
    if (r < 0 || r >= rows) {
      disc_report_bad(bad, tag, i, r);
      continue;
    }
    out[t] = table[r * cols + t % cols];
  }
}
// scatter_add: out (holding the base) += each update row at its index, each row's updates added in
// index order as the reference adds them, so the same bits. First the positions sorted by (row,
// position) into order: each position's rank counted over all positions (every thread reads the
// same index at once), a permutation since no two positions tie, so the same for any grid; a bad
// index ranks last and is reported in the check record under `tag`.
template <typename I>
__device__ __forceinline__ disc_i64 disc_row_or(const I* idx, disc_i64 i, disc_i64 rows) {
  const disc_i64 r = (disc_i64)idx[i];
  return r < 0 || r >= rows ? rows : r;
}
template <typename I>
__device__ void disc_scatter_order(const I* idx, disc_i64 n, disc_i64 rows, int* order, unsigned long long* bad,
                                   unsigned long long tag) {
  DISC_FOR_ITEMS(i, n) {
    const disc_i64 r = disc_row_or(idx, i, rows);
    if (r == rows) disc_report_bad(bad, tag, i, (disc_i64)idx[i]);
    disc_i64 rank = 0;
    for (disc_i64 j = 0; j < n; ++j) {
      const disc_i64 s = disc_row_or(idx, j, rows);
      rank += s < r || (s == r && j < i);
    }
    order[rank] = (int)i;
  }
}
// Then a thread per column and run of positions with one row (its first thread; the others have
// nothing to do), adding the run's updates in order.
template <typename I>
__device__ void disc_scatter_runs(float* out, const I* idx, const float* u, const int* order, disc_i64 n,
                                  disc_i64 rows, disc_i64 cols) {
  DISC_FOR_ITEMS(t, n * cols) {
    const disc_i64 p = t / cols, c = t % cols, r = disc_row_or(idx, order[p], rows);
    if (r == rows || (p > 0 && disc_row_or(idx, order[p - 1], rows) == r)) continue;
    float acc = out[r * cols + c];
    for (disc_i64 q = p; q < n && disc_row_or(idx, order[q], rows) == r; ++q) acc += u[(disc_i64)order[q] * cols + c];
    out[r * cols + c] = acc;
  }
}
#define DISC_INDEXED(I, SUFFIX)                                                                              \
  extern "C" __global__ void disc_gather_##SUFFIX(const float* table, const I* idx, float* out, disc_i64 n,  \
                                                  disc_i64 rows, disc_i64 cols, unsigned long long* bad,     \
                                                  unsigned long long tag) {                                  \
    disc_gather(table, idx, out, n, rows, cols, bad, tag);                                                   \
  }                                                                                                          \
  extern "C" __global__ void disc_scatter_order_##SUFFIX(const I* idx, disc_i64 n, disc_i64 rows, int* order,        \
                                                         unsigned long long* bad, unsigned long long tag) {           \
    disc_scatter_order(idx, n, rows, order, bad, tag);                                                                \
  }                                                                                                                   \
  extern "C" __global__ void disc_scatter_runs_##SUFFIX(float* out, const I* idx, const float* u, const int* order,  \
                                                        disc_i64 n, disc_i64 rows, disc_i64 cols) {                   \
    disc_scatter_runs(out, idx, u, order, n, rows, cols);                                                             \
  }
DISC_INDEXED(int, i32)
DISC_INDEXED(long long, i64)

// linear_cross_entropy's panel rows (logits, as the reference computes them in
// devices/cpu/linear_cross_entropy.cc): a block per row, its threads striding over the classes, sums
// combined in a fixed tree; the logits read twice (the max and the sum of exponentials together,
// then the gradient). Each row's gradient (softmax - onehot) * scale goes to g (f32 in place
// of the logits, or rounded once to bf16 or f16 for a 16-bit head's GEMMs) and its loss term to
// terms[row]; a row whose label is ignore_index (or counted == 0) has a zero gradient.
#define DISC_ROW_BLOCK 256
// The rows' loops unrolled, so that each thread has eight loads in flight rather than one.
#define DISC_UNROLL8 _Pragma("unroll 8")
__device__ __forceinline__ double disc_block_sum_d(double v, double* red) {
  red[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
    __syncthreads();
  }
  v = red[0];
  __syncthreads();
  return v;
}
__device__ __forceinline__ float disc_block_max_f(float v, float* red) {
  red[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
    __syncthreads();
  }
  v = red[0];
  __syncthreads();
  return v;
}
// The labels other than ignore, which the mean is over, counted by one block into *count, on the
// device so that the host need not wait for them; a label outside [0, classes) that is not ignore
// is reported in the check record under `tag` (and the rows skip it).
template <typename I>
__device__ void disc_lce_count(const I* labels, disc_i64 n, disc_i64 classes, disc_i64 ignore,
                               unsigned long long* bad, unsigned long long tag, disc_i64* count) {
  __shared__ double red[DISC_ROW_BLOCK];
  if (blockIdx.x != 0) return;
  double c = 0.0;  // exact: fewer than 2^53 labels
  for (disc_i64 i = threadIdx.x; i < n; i += blockDim.x) {
    const disc_i64 label = (disc_i64)labels[i];
    if (label == ignore) continue;
    if (label < 0 || label >= classes)
      disc_report_bad(bad, tag, i, label);
    else
      c += 1.0;
  }
  c = disc_block_sum_d(c, red);
  if (threadIdx.x == 0) *count = (disc_i64)c;
}
// Each row's gradient, scaled by 1 / count as the reference scales it, and its loss term.
template <typename I, typename G>
__device__ void disc_lce_rows(const float* x0, G* g0, const I* labels, disc_i64 n, disc_i64 classes, disc_i64 ignore,
                              const disc_i64* count, double* terms) {
  __shared__ double dred[DISC_ROW_BLOCK];
  __shared__ float fred[DISC_ROW_BLOCK];
  const disc_i64 counted = *count;
  const float scale = counted == 0 ? 0.f : (float)(1.0 / (double)counted);
  for (disc_i64 r = blockIdx.x; r < n; r += gridDim.x) {
    const float* x = x0 + r * classes;
    G* g = g0 + r * classes;
    const disc_i64 label = (disc_i64)labels[r];
    if (counted == 0 || label == ignore || label < 0 || label >= classes) {
      for (disc_i64 j = threadIdx.x; j < classes; j += blockDim.x) disc_put(g + j, 0.f);
      if (threadIdx.x == 0) terms[r] = 0.0;
      continue;
    }
    const float at_label = x[label];
    // One read for the max and the sum of exp(x - max): each thread's sum is rescaled when its own
    // max grows, and by exp(its max - the row's) once the row's is known.
    float m = DISC_NEG_INF;
    double part = 0.0;
    DISC_UNROLL8 for (disc_i64 j = threadIdx.x; j < classes; j += blockDim.x) {
      const float v = x[j];
      if (v > m) {
        part = part * (double)expf(m - v) + 1.0;
        m = v;
      } else if (v != DISC_NEG_INF) {
        part += (double)expf(v - m);
      }
    }
    const float top = disc_block_max_f(m, fred);
    const double sum = disc_block_sum_d(m == DISC_NEG_INF ? 0.0 : part * (double)expf(m - top), dred);
    const float factor = (float)(scale / sum);
    // x may be g (f32): each thread reads and writes only its own elements.
    DISC_UNROLL8 for (disc_i64 j = threadIdx.x; j < classes; j += blockDim.x)
      disc_put(g + j, expf(x[j] - top) * factor);
    __syncthreads();
    if (threadIdx.x == 0) {
      disc_put(g + label, expf(at_label - top) * factor - scale);
      terms[r] = log(sum) + (double)top - (double)at_label;
    }
    __syncthreads();
  }
}
// The mean of the loss terms: one block, each thread summing rows t, t + blockDim.x, ... in order,
// then the fixed tree of disc_block_sum_d: the same bits every run.
extern "C" __global__ void __launch_bounds__(DISC_ROW_BLOCK)
    disc_lce_loss(const double* terms, disc_i64 rows, const disc_i64* counted, float* loss) {
  __shared__ double red[DISC_ROW_BLOCK];
  if (blockIdx.x != 0) return;
  const disc_i64 count = *counted;
  double total = 0.0;
  for (disc_i64 r = threadIdx.x; r < rows; r += blockDim.x) total += terms[r];
  total = disc_block_sum_d(total, red);
  if (threadIdx.x == 0) *loss = (float)(count == 0 ? 0.0 : total / (double)count);
}

#define DISC_LCE_ROWS(I, SI, G, SG)                                                                         \
  extern "C" __global__ void __launch_bounds__(DISC_ROW_BLOCK)                                              \
      disc_lce_rows_##SI##_##SG(const float* x, G* g, const I* labels, disc_i64 n, disc_i64 classes,        \
                                disc_i64 ignore, const disc_i64* count, double* terms) {                    \
    disc_lce_rows(x, g, labels, n, classes, ignore, count, terms);                                          \
  }
#define DISC_LCE(G, SG) DISC_LCE_ROWS(int, i32, G, SG) DISC_LCE_ROWS(long long, i64, G, SG)
DISC_FLOATS(DISC_LCE)
#define DISC_LCE_COUNT(I, SI)                                                                                  \
  extern "C" __global__ void __launch_bounds__(DISC_ROW_BLOCK)                                                 \
      disc_lce_count_##SI(const I* labels, disc_i64 n, disc_i64 classes, disc_i64 ignore, unsigned long long* bad, \
                          unsigned long long tag, disc_i64* count) {                                           \
    disc_lce_count(labels, n, classes, ignore, bad, tag, count);                                               \
  }
DISC_LCE_COUNT(int, i32)
DISC_LCE_COUNT(long long, i64)

// Attention over q [heads, sq, D], k [heads, sk, D], v [heads, sk, DV]; causal: query i sees keys
// 0..i. A thread per row (a query row; in the gradient's dk and dv kernels a key row), a block per
// tile of blockDim.x rows of one head. The block loads the rows its threads go over (keys, or
// query rows) a tile of 32 at a time (disc_tile) into shared memory, widened to f32, all its threads
// together; then each thread goes over the tile's rows for its own row, exactly as it would over
// global memory: the same arithmetic in the same order, so the same bits, with each key read once
// per block instead of once per row. Every loop over a head dim is unrolled, so that a row's
// operands and sums stay in registers, and a dot product keeps eight partial sums, so that its
// multiply-adds overlap instead of each waiting for the last.
#define DISC_UNROLL _Pragma("unroll")
// Rows of a tile whose rows hold N floats: 32, fewer where 32 would pass the 48 KiB of static
// shared memory a block may have (heads past D + DV = 384).
template <int N>
struct disc_tile {
  static const int rows = 12288 / N > 32 ? 32 : 12288 / N > 0 ? 12288 / N : 1;
};
template <int D, typename A, typename B>
__device__ __forceinline__ float disc_dot(const A* a, const B* b) {
  float s[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  DISC_UNROLL for (int e = 0; e < D; ++e) s[e % 8] += disc_wide(a[e]) * disc_wide(b[e]);
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}
template <int N, typename T>
__device__ __forceinline__ void disc_load(float* r, const T* x) {
  DISC_UNROLL for (int e = 0; e < N; ++e) r[e] = disc_wide(x[e]);
}
template <int N, typename T>
__device__ __forceinline__ void disc_store(T* x, const float* r, float scale) {
  DISC_UNROLL for (int e = 0; e < N; ++e) disc_put(x + e, scale * r[e]);
}
template <int N, typename T>
__device__ __forceinline__ void disc_axpy(float* r, float a, const T* x) {  // r += a x
  DISC_UNROLL for (int e = 0; e < N; ++e) r[e] += a * disc_wide(x[e]);
}
__device__ __forceinline__ disc_i64 disc_min(disc_i64 a, disc_i64 b) { return a < b ? a : b; }
// Rows [lo, hi) of x (NX values a row) and of y (NY; y may be null), n rows there, a tile at a time
// in xs and ys (disc_tile<NX + NY>::rows of each); for each tile, f(r, xs_r, ys_r) for this
// thread's rows r in [from, to), in order. Every thread of the block calls it with the same lo and hi, as it synchronises the block; a
// thread without a row passes from = to.
template <int NX, int NY, typename T, typename F>
__device__ __forceinline__ void disc_tiles(float (*xs)[NX], float (*ys)[NY], const T* x, const T* y, disc_i64 n,
                                           disc_i64 lo, disc_i64 hi, disc_i64 from, disc_i64 to, F f) {
  const int rows = disc_tile<NX + NY>::rows;
  for (disc_i64 r0 = lo; r0 < hi; r0 += rows) {
    __syncthreads();  // the last tile's readers are done with it
    for (int e = threadIdx.x; e < rows * NX; e += blockDim.x)
      xs[e / NX][e % NX] = r0 + e / NX < n ? disc_wide(x[(r0 + e / NX) * NX + e % NX]) : 0.f;
    if (y)
      for (int e = threadIdx.x; e < rows * NY; e += blockDim.x)
        ys[e / NY][e % NY] = r0 + e / NY < n ? disc_wide(y[(r0 + e / NY) * NY + e % NY]) : 0.f;
    __syncthreads();
    const disc_i64 first = from > r0 ? from : r0, last = disc_min(to, r0 + rows);
    for (disc_i64 r = first; r < last; ++r) f(r, xs[r - r0], ys[r - r0]);
  }
}
// The block tiles of `rows` rows per head: tile b is head b / tiles, rows from (b % tiles) * blockDim.x.
#define DISC_FOR_TILES(b, heads, rows) \
  for (disc_i64 b = blockIdx.x; b < (heads) * (((rows) + blockDim.x - 1) / blockDim.x); b += gridDim.x)
// Block tile b of `rows` rows a head: its head h and first row r0, this thread's row r and its
// index t over every head's rows, and whether that row exists.
struct disc_row_tile {
  disc_i64 h, r0, r, t;
  bool mine;
};
__device__ __forceinline__ disc_row_tile disc_tile_at(disc_i64 b, disc_i64 rows) {
  const disc_i64 tiles = (rows + blockDim.x - 1) / blockDim.x, h = b / tiles, r0 = b % tiles * blockDim.x;
  const disc_i64 r = r0 + threadIdx.x;
  return {h, r0, r, h * rows + r, r < rows};
}
// Packed sequences (offsets, `sequences` + 1 of them; null when not packed): the sequence that
// holds row r, the last s with offsets[s] <= r, found by bisection.
__device__ __forceinline__ disc_i64 disc_sequence_of(const int* offsets, disc_i64 sequences, disc_i64 r) {
  disc_i64 lo = 0, hi = sequences;
  while (hi - lo > 1) {
    const disc_i64 mid = (lo + hi) / 2;
    if (offsets[mid] <= r) lo = mid; else hi = mid;
  }
  return lo;
}
// The keys a query row's thread goes over, [begin, end), and those of any row of its tile,
// [block_begin, block_end): all keys, or up to the row's own when causal; packed, only its
// sequence's.
struct disc_keys {
  disc_i64 begin, end, block_begin, block_end;
};
__device__ __forceinline__ disc_keys disc_keys_of(const disc_row_tile& q, int causal, disc_i64 sq, disc_i64 sk,
                                                  const int* offsets, disc_i64 sequences) {
  const disc_i64 last = disc_min(q.r0 + blockDim.x, sq);  // past the tile's last row
  if (!offsets)
    return {0, !q.mine ? 0 : causal ? q.r + 1 : sk, 0, causal ? disc_min(last, sk) : sk};
  const disc_i64 first_seq = disc_sequence_of(offsets, sequences, q.r0),
                 last_seq = disc_sequence_of(offsets, sequences, last - 1);
  const disc_i64 seq = q.mine ? disc_sequence_of(offsets, sequences, q.r) : 0;
  const disc_i64 begin = offsets[seq];
  return {begin, !q.mine ? begin : causal ? q.r + 1 : offsets[seq + 1], offsets[first_seq],
          causal ? last : offsets[last_seq + 1]};
}
// The query rows that see a key row's thread, [first, end), and those of any key of its tile,
// [lo, hi): all queries, or from the key's own row when causal; packed, only its sequence's.
struct disc_queries {
  disc_i64 lo, hi, first, end;
};
__device__ __forceinline__ disc_queries disc_queries_of(const disc_row_tile& k, int causal, disc_i64 sq, disc_i64 sk,
                                                        const int* offsets, disc_i64 sequences) {
  if (!offsets) return {causal ? disc_min(k.r0, sq) : 0, sq, !k.mine ? sq : causal ? k.r : 0, sq};
  const disc_i64 last = disc_min(k.r0 + blockDim.x, sk);
  const disc_i64 first_seq = disc_sequence_of(offsets, sequences, k.r0),
                 last_seq = disc_sequence_of(offsets, sequences, last - 1);
  const disc_i64 seq = k.mine ? disc_sequence_of(offsets, sequences, k.r) : 0;
  const disc_i64 end = offsets[seq + 1];
  return {causal ? k.r0 : offsets[first_seq], offsets[last_seq + 1],
          !k.mine ? end : causal ? k.r : offsets[seq], end};
}

// The forward pass: an online softmax over the row's keys.
template <int D, int DV, typename T>
__device__ void disc_attention_fwd(const T* q, const T* k, const T* v, T* o, disc_i64 heads, disc_i64 sq, disc_i64 sk,
                                   int causal, float scale, const int* offsets, disc_i64 sequences) {
  __shared__ float ks[disc_tile<D + DV>::rows][D], vs[disc_tile<D + DV>::rows][DV];
  DISC_FOR_TILES(b, heads, sq) {
    const disc_row_tile row = disc_tile_at(b, sq);
    const disc_keys keys = disc_keys_of(row, causal, sq, sk, offsets, sequences);
    const disc_i64 h = row.h, t = row.t;
    const bool mine = row.mine;
    float qr[D], acc[DV];
    if (mine) disc_load<D>(qr, q + t * D);
    DISC_UNROLL for (int e = 0; e < DV; ++e) acc[e] = 0.f;
    float m = DISC_NEG_INF, l = 0.f;
    disc_tiles<D, DV>(ks, vs, k + h * sk * D, v + h * sk * DV, sk, keys.block_begin, keys.block_end, keys.begin,
                      keys.end,
                      [&](disc_i64, const float* kj, const float* vj) {
                        const float s = disc_dot<D>(qr, kj) * scale;
                        const float mn = fmaxf(m, s), corr = expf(m - mn), p = expf(s - mn);
                        l = l * corr + p;
                        DISC_UNROLL for (int e = 0; e < DV; ++e) acc[e] = acc[e] * corr + p * vj[e];
                        m = mn;
                      });
    if (mine) disc_store<DV>(o + t * DV, acc, l > 0.f ? 1.f / l : 0.f);
  }
}
// The backward pass, first per query row: the row's log-sum-exp, then dsum = sum_j p_j dp_j
// (dp_j = dout . v_j), then dq = scale sum_j p_j (dp_j - dsum) k_j; lse and dsum go to stats for
// the kernels per key row.
template <int D, int DV, typename T>
__device__ void disc_attention_bwd_q(const T* q, const T* k, const T* v, const T* dout, T* dq, float* stats,
                                     disc_i64 heads, disc_i64 sq, disc_i64 sk, int causal, float scale,
                                     const int* offsets, disc_i64 sequences) {
  __shared__ float ks[disc_tile<D + DV>::rows][D], vs[disc_tile<D + DV>::rows][DV];
  DISC_FOR_TILES(b, heads, sq) {
    const disc_row_tile row = disc_tile_at(b, sq);
    const disc_keys keys = disc_keys_of(row, causal, sq, sk, offsets, sequences);
    const disc_i64 h = row.h, t = row.t, begin = keys.begin, end = keys.end, block_begin = keys.block_begin,
                   block_end = keys.block_end;
    const bool mine = row.mine;
    const T *kh = k + h * sk * D, *vh = v + h * sk * DV;
    float qr[D], dr[DV], acc[D];
    if (mine) disc_load<D>(qr, q + t * D), disc_load<DV>(dr, dout + t * DV);
    DISC_UNROLL for (int e = 0; e < D; ++e) acc[e] = 0.f;
    float m = DISC_NEG_INF, l = 0.f;
    disc_tiles<D, DV>(ks, vs, kh, (const T*)0, sk, block_begin, block_end, begin, end, [&](disc_i64, const float* kj, const float*) {
      const float s = disc_dot<D>(qr, kj) * scale, mn = fmaxf(m, s);
      l = l * expf(m - mn) + expf(s - mn);
      m = mn;
    });
    const float lse = m + logf(l);
    float dsum = 0.f;
    disc_tiles<D, DV>(ks, vs, kh, vh, sk, block_begin, block_end, begin, end, [&](disc_i64, const float* kj, const float* vj) {
      const float p = expf(disc_dot<D>(qr, kj) * scale - lse);
      dsum += p * disc_dot<DV>(dr, vj);
    });
    disc_tiles<D, DV>(ks, vs, kh, vh, sk, block_begin, block_end, begin, end, [&](disc_i64, const float* kj, const float* vj) {
      const float p = expf(disc_dot<D>(qr, kj) * scale - lse);
      disc_axpy<D>(acc, p * (disc_dot<DV>(dr, vj) - dsum), kj);
    });
    if (!mine) continue;
    disc_store<D>(dq + t * D, acc, scale);
    stats[2 * t] = lse;
    stats[2 * t + 1] = dsum;
  }
}
// Then per key row j, over the query rows that see it: dv_j = sum_i p_ij dout_i in one kernel,
// dk_j = scale sum_i p_ij (dp_ij - dsum_i) q_i in another (together they would hold four rows and
// spill registers).
template <int D, int DV, typename T>
__device__ void disc_attention_bwd_v(const T* q, const T* k, const T* dout, const float* stats, T* dv,
                                     disc_i64 heads, disc_i64 sq, disc_i64 sk, int causal, float scale,
                                    const int* offsets, disc_i64 sequences) {
  __shared__ float qs[disc_tile<D + DV>::rows][D], ds[disc_tile<D + DV>::rows][DV];
  DISC_FOR_TILES(b, heads, sk) {
    const disc_row_tile key = disc_tile_at(b, sk);
    const disc_queries queries = disc_queries_of(key, causal, sq, sk, offsets, sequences);
    const disc_i64 h = key.h, t = key.t;
    const bool mine = key.mine;
    float kr[D], acc[DV];
    if (mine) disc_load<D>(kr, k + t * D);
    DISC_UNROLL for (int e = 0; e < DV; ++e) acc[e] = 0.f;
    const float* sh = stats + 2 * h * sq;
    disc_tiles<D, DV>(qs, ds, q + h * sq * D, dout + h * sq * DV, sq, queries.lo, queries.hi, queries.first, queries.end,
                      [&](disc_i64 i, const float* qi, const float* di) {
                        disc_axpy<DV>(acc, expf(disc_dot<D>(qi, kr) * scale - sh[2 * i]), di);
                      });
    if (mine) disc_store<DV>(dv + t * DV, acc, 1.f);
  }
}
template <int D, int DV, typename T>
__device__ void disc_attention_bwd_k(const T* q, const T* k, const T* v, const T* dout, const float* stats, T* dk,
                                     disc_i64 heads, disc_i64 sq, disc_i64 sk, int causal, float scale,
                                    const int* offsets, disc_i64 sequences) {
  __shared__ float qs[disc_tile<D + DV>::rows][D], ds[disc_tile<D + DV>::rows][DV];
  DISC_FOR_TILES(b, heads, sk) {
    const disc_row_tile key = disc_tile_at(b, sk);
    const disc_queries queries = disc_queries_of(key, causal, sq, sk, offsets, sequences);
    const disc_i64 h = key.h, t = key.t;
    const bool mine = key.mine;
    float kr[D], vr[DV], acc[D];
    if (mine) disc_load<D>(kr, k + t * D), disc_load<DV>(vr, v + t * DV);
    DISC_UNROLL for (int e = 0; e < D; ++e) acc[e] = 0.f;
    const float* sh = stats + 2 * h * sq;
    disc_tiles<D, DV>(qs, ds, q + h * sq * D, dout + h * sq * DV, sq, queries.lo, queries.hi, queries.first, queries.end,
                      [&](disc_i64 i, const float* qi, const float* di) {
                        const float p = expf(disc_dot<D>(qi, kr) * scale - sh[2 * i]);
                        disc_axpy<D>(acc, p * (disc_dot<DV>(di, vr) - sh[2 * i + 1]), qi);
                      });
    if (mine) disc_store<D>(dk + t * D, acc, scale);
  }
}
#define DISC_ATTENTION(D, DV, T)                                                                              \
  extern "C" __global__ void disc_attention_fwd_##D##_##DV(const T* q, const T* k, const T* v, T* o,          \
                                                           disc_i64 heads, disc_i64 sq, disc_i64 sk,          \
                                                           int causal, float scale, const int* offsets,       \
                                                           disc_i64 sequences) {                              \
    disc_attention_fwd<D, DV, T>(q, k, v, o, heads, sq, sk, causal, scale, offsets, sequences);               \
  }                                                                                                           \
  extern "C" __global__ void disc_attention_bwd_q_##D##_##DV(                                                 \
      const T* q, const T* k, const T* v, const T* dout, T* dq, float* stats, disc_i64 heads, disc_i64 sq,    \
      disc_i64 sk, int causal, float scale, const int* offsets, disc_i64 sequences) {                         \
    disc_attention_bwd_q<D, DV, T>(q, k, v, dout, dq, stats, heads, sq, sk, causal, scale, offsets, sequences); \
  }                                                                                                           \
  extern "C" __global__ void disc_attention_bwd_v_##D##_##DV(                                                 \
      const T* q, const T* k, const T* dout, const float* stats, T* dv, disc_i64 heads, disc_i64 sq,          \
      disc_i64 sk, int causal, float scale, const int* offsets, disc_i64 sequences) {                         \
    disc_attention_bwd_v<D, DV, T>(q, k, dout, stats, dv, heads, sq, sk, causal, scale, offsets, sequences);  \
  }                                                                                                           \
  extern "C" __global__ void disc_attention_bwd_k_##D##_##DV(                                                 \
      const T* q, const T* k, const T* v, const T* dout, const float* stats, T* dk, disc_i64 heads,           \
      disc_i64 sq, disc_i64 sk, int causal, float scale, const int* offsets, disc_i64 sequences) {            \
    disc_attention_bwd_k<D, DV, T>(q, k, v, dout, stats, dk, heads, sq, sk, causal, scale, offsets, sequences); \
  }
