// Batched matrix product C[b] = op(A[b]) · op(B[b]) in f32, the kernel of
// CpuBackend.matmul (reference: src/tensor/cpu/_matmul.ts).
//
// Blocking (after BLIS and XNNPACK): the output is cut into tasks of
// MC × NC (MC chosen by the caller, a multiple of 6: the larger, the fewer
// times B is packed, but the fewer tasks to share); a task walks K in blocks of KC, packs op(B)'s KC × NC block into
// panels of NR columns (k-major, zero-padded past N) in the thread's
// scratch, and runs a 6 × 8 register-blocked micro-kernel over each panel:
// 12 accumulators of 4 lanes, A's values broadcast from memory (read in
// place through strides, so transposed A costs nothing).
//
// Every output element is summed alone, k = 0, 1, …, K-1 in order, with
// MADD, in one f32 accumulator (stored and reloaded between K blocks,
// which is exact): the bits of an output never depend on the tile that
// computed it, on M, on N, or on the thread count.
#include "_simd.h"

#define MR 6
#define NR 8
#define NC 256
#define KC 256

// Scratch floats each thread needs for packing (read by the backend
// through matmul_scratch_floats).
EXPORT(matmul_scratch_floats) int matmul_scratch_floats(void) { return KC * NC; }

// op(B)[k0 + k][n0 + j] = B[(k0 + k) * bk + (n0 + j) * bj], packed as
// panels of NR columns: panel p holds columns p*NR.., k-major.
static void pack_b(const float* B, int bk, int bj, int k0, int kc, int n0, int nc, float* bp) {
  for (int j = 0; j < nc; j += NR) {
    const int nr = min_int(nc - j, NR);
    float* panel = bp + j * kc;
    for (int k = 0; k < kc; k++) {
      const float* src = B + (k0 + k) * bk + (n0 + j) * bj;
      float* dst = panel + k * NR;
      if (bj == 1 && nr == NR) {
        wasm_v128_store(dst, wasm_v128_load(src));
        wasm_v128_store(dst + 4, wasm_v128_load(src + 4));
        continue;
      }
      int c = 0;
      for (; c < nr; c++) dst[c] = src[c * bj];
      for (; c < NR; c++) dst[c] = 0.0f;
    }
  }
}

// Lanes lo..lo+3 of an output row holding nr valid values (0 past nr).
static inline v128_t load_c(const float* c, int nr, int lo) {
  if (nr >= lo + 4) return wasm_v128_load(c + lo);
  v128_t v = wasm_f32x4_splat(0.0f);
  if (nr > lo) v = wasm_f32x4_replace_lane(v, 0, c[lo]);
  if (nr > lo + 1) v = wasm_f32x4_replace_lane(v, 1, c[lo + 1]);
  if (nr > lo + 2) v = wasm_f32x4_replace_lane(v, 2, c[lo + 2]);
  return v;
}

static inline void store_c(float* c, int nr, int lo, v128_t v) {
  if (nr >= lo + 4) {
    wasm_v128_store(c + lo, v);
    return;
  }
  if (nr > lo) c[lo] = wasm_f32x4_extract_lane(v, 0);
  if (nr > lo + 1) c[lo + 1] = wasm_f32x4_extract_lane(v, 1);
  if (nr > lo + 2) c[lo + 2] = wasm_f32x4_extract_lane(v, 2);
}

// C[0..6][0..nr) (row stride ldc) = (first ? 0 : C) + Σ_k a[r*ai + k*ak] · bp[k][·].
static void kernel_6x8(int kc, const float* a, int ai, int ak, const float* bp, float* c, int ldc,
                       int first, int nr) {
  v128_t c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
  if (first) {
    c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = c40 = c41 = c50 = c51 = wasm_f32x4_splat(0.0f);
  } else {
    c00 = load_c(c, nr, 0), c01 = load_c(c, nr, 4);
    c10 = load_c(c + ldc, nr, 0), c11 = load_c(c + ldc, nr, 4);
    c20 = load_c(c + 2 * ldc, nr, 0), c21 = load_c(c + 2 * ldc, nr, 4);
    c30 = load_c(c + 3 * ldc, nr, 0), c31 = load_c(c + 3 * ldc, nr, 4);
    c40 = load_c(c + 4 * ldc, nr, 0), c41 = load_c(c + 4 * ldc, nr, 4);
    c50 = load_c(c + 5 * ldc, nr, 0), c51 = load_c(c + 5 * ldc, nr, 4);
  }
  const float *a0 = a, *a1 = a + ai, *a2 = a + 2 * ai, *a3 = a + 3 * ai, *a4 = a + 4 * ai,
              *a5 = a + 5 * ai;
  for (int k = 0; k < kc; k++) {
    const v128_t b0 = wasm_v128_load(bp), b1 = wasm_v128_load(bp + 4);
    bp += NR;
    v128_t x;
    x = wasm_f32x4_splat(*a0), c00 = MADD(x, b0, c00), c01 = MADD(x, b1, c01);
    x = wasm_f32x4_splat(*a1), c10 = MADD(x, b0, c10), c11 = MADD(x, b1, c11);
    x = wasm_f32x4_splat(*a2), c20 = MADD(x, b0, c20), c21 = MADD(x, b1, c21);
    x = wasm_f32x4_splat(*a3), c30 = MADD(x, b0, c30), c31 = MADD(x, b1, c31);
    x = wasm_f32x4_splat(*a4), c40 = MADD(x, b0, c40), c41 = MADD(x, b1, c41);
    x = wasm_f32x4_splat(*a5), c50 = MADD(x, b0, c50), c51 = MADD(x, b1, c51);
    a0 += ak, a1 += ak, a2 += ak, a3 += ak, a4 += ak, a5 += ak;
  }
  store_c(c, nr, 0, c00), store_c(c, nr, 4, c01);
  store_c(c + ldc, nr, 0, c10), store_c(c + ldc, nr, 4, c11);
  store_c(c + 2 * ldc, nr, 0, c20), store_c(c + 2 * ldc, nr, 4, c21);
  store_c(c + 3 * ldc, nr, 0, c30), store_c(c + 3 * ldc, nr, 4, c31);
  store_c(c + 4 * ldc, nr, 0, c40), store_c(c + 4 * ldc, nr, 4, c41);
  store_c(c + 5 * ldc, nr, 0, c50), store_c(c + 5 * ldc, nr, 4, c51);
}

// One output row of the panel: the rows past the last full 6 (same sums).
static void kernel_1x8(int kc, const float* a, int ak, const float* bp, float* c, int first, int nr) {
  v128_t c0, c1;
  if (first) {
    c0 = c1 = wasm_f32x4_splat(0.0f);
  } else {
    c0 = load_c(c, nr, 0), c1 = load_c(c, nr, 4);
  }
  for (int k = 0; k < kc; k++) {
    const v128_t x = wasm_f32x4_splat(*a);
    c0 = MADD(x, wasm_v128_load(bp), c0), c1 = MADD(x, wasm_v128_load(bp + 4), c1);
    bp += NR, a += ak;
  }
  store_c(c, nr, 0, c0), store_c(c, nr, 4, c1);
}

// Rows of op(A) up to which a product skips the packing (each of B's values serves at most this many outputs, so packing
// B costs as much as the product): the rows' outputs are summed straight
// from B's rows, 32 columns at a time, with the same MADD in the same k
// order as the micro-kernel, so the bits are the same.
#define ROWS_DIRECT 4
#define DIRECT_COLS 256

// C[i][j0..j1) = Σ_k a[i*ai + k*ak] · B[k][j], for rows i of [0, m).
static void rows_direct(const float* A, int ai, int ak, const float* B, int N, int K, float* C,
                        int m, int j0, int j1) {
  for (int i = 0; i < m; i++) {
    const float* a = A + i * ai;
    float* c = C + i * N;
    int j = j0;
    for (; j + 32 <= j1; j += 32) {
      v128_t c0, c1, c2, c3, c4, c5, c6, c7;
      c0 = c1 = c2 = c3 = c4 = c5 = c6 = c7 = wasm_f32x4_splat(0.0f);
      const float* b = B + j;
      for (int k = 0; k < K; k++, b += N) {
        const v128_t x = wasm_f32x4_splat(a[k * ak]);
        c0 = MADD(x, wasm_v128_load(b), c0), c1 = MADD(x, wasm_v128_load(b + 4), c1);
        c2 = MADD(x, wasm_v128_load(b + 8), c2), c3 = MADD(x, wasm_v128_load(b + 12), c3);
        c4 = MADD(x, wasm_v128_load(b + 16), c4), c5 = MADD(x, wasm_v128_load(b + 20), c5);
        c6 = MADD(x, wasm_v128_load(b + 24), c6), c7 = MADD(x, wasm_v128_load(b + 28), c7);
      }
      wasm_v128_store(c + j, c0), wasm_v128_store(c + j + 4, c1);
      wasm_v128_store(c + j + 8, c2), wasm_v128_store(c + j + 12, c3);
      wasm_v128_store(c + j + 16, c4), wasm_v128_store(c + j + 20, c5);
      wasm_v128_store(c + j + 24, c6), wasm_v128_store(c + j + 28, c7);
    }
    for (; j + 4 <= j1; j += 4) {
      v128_t acc = wasm_f32x4_splat(0.0f);
      for (int k = 0; k < K; k++) acc = MADD(wasm_f32x4_splat(a[k * ak]), wasm_v128_load(B + k * N + j), acc);
      wasm_v128_store(c + j, acc);
    }
    for (; j < j1; j++) {
      v128_t acc = wasm_f32x4_splat(0.0f);
      for (int k = 0; k < K; k++) acc = MADD(wasm_f32x4_splat(a[k * ak]), wasm_f32x4_splat(B[k * N + j]), acc);
      c[j] = wasm_f32x4_extract_lane(acc, 0);
    }
  }
}

// The same with B transposed (B[j][k] at B + j*K + k: a Linear layer's
// weight): 8 columns at a time, their k-th values gathered into two
// vectors, each output still summed alone in k order.
static void rows_direct_t(const float* A, int ai, int ak, const float* B, int N, int K, float* C,
                          int m, int j0, int j1) {
  for (int i = 0; i < m; i++) {
    const float* a = A + i * ai;
    float* c = C + i * N;
    int j = j0;
    for (; j + 8 <= j1; j += 8) {
      const float* b = B + j * K;
      v128_t c0 = wasm_f32x4_splat(0.0f), c1 = c0;
      for (int k = 0; k < K; k++) {
        const v128_t x = wasm_f32x4_splat(a[k * ak]);
        v128_t b0 = wasm_v128_load32_zero(b + k);
        b0 = wasm_v128_load32_lane(b + K + k, b0, 1);
        b0 = wasm_v128_load32_lane(b + 2 * K + k, b0, 2);
        b0 = wasm_v128_load32_lane(b + 3 * K + k, b0, 3);
        v128_t b1 = wasm_v128_load32_zero(b + 4 * K + k);
        b1 = wasm_v128_load32_lane(b + 5 * K + k, b1, 1);
        b1 = wasm_v128_load32_lane(b + 6 * K + k, b1, 2);
        b1 = wasm_v128_load32_lane(b + 7 * K + k, b1, 3);
        c0 = MADD(x, b0, c0), c1 = MADD(x, b1, c1);
      }
      wasm_v128_store(c + j, c0), wasm_v128_store(c + j + 4, c1);
    }
    for (; j < j1; j++) {
      v128_t acc = wasm_f32x4_splat(0.0f);
      for (int k = 0; k < K; k++) acc = MADD(wasm_f32x4_splat(a[k * ak]), wasm_f32x4_splat(B[j * K + k]), acc);
      c[j] = wasm_f32x4_extract_lane(acc, 0);
    }
  }
}

// i: A, B, C, batch, M, K, N, transA, transB, bShared (one B for every
// batch entry), scratch (matmul_scratch_floats() floats per thread), MC.
EXPORT(matmul)
void matmul(Job* job, int tid) {
  const float* A0 = (const float*)job->i[0];
  const float* B0 = (const float*)job->i[1];
  float* C0 = (float*)job->i[2];
  const int batch = job->i[3], M = job->i[4], K = job->i[5], N = job->i[6];
  const int transA = job->i[7], transB = job->i[8], bShared = job->i[9];
  float* bp = (float*)job->i[10] + tid * (KC * NC);
  const int MC = job->i[11];
  // op(A)[i][k] = A[i * ai + k * ak], op(B)[k][j] = B[k * bk + j * bj].
  const int ai = transA ? 1 : K, ak = transA ? M : 1;
  const int bk = transB ? 1 : N, bj = transB ? K : 1;
  if (M <= ROWS_DIRECT) {
    const int ct = (N + DIRECT_COLS - 1) / DIRECT_COLS, tasks = batch * ct;
    for (int t = claim(job); t < tasks; t = claim(job)) {
      const int e = t / ct, j0 = (t % ct) * DIRECT_COLS, j1 = min_int(N, j0 + DIRECT_COLS);
      const float* A = A0 + e * M * K;
      const float* B = B0 + (bShared ? 0 : e * K * N);
      if (transB) rows_direct_t(A, ai, ak, B, N, K, C0 + e * M * N, M, j0, j1);
      else rows_direct(A, ai, ak, B, N, K, C0 + e * M * N, M, j0, j1);
    }
    return;
  }
  const int mt = (M + MC - 1) / MC, nt = (N + NC - 1) / NC;
  const int tasks = batch * mt * nt;
  for (int t = claim(job); t < tasks; t = claim(job)) {
    const int e = t / (mt * nt), r = t % (mt * nt);
    const int m0 = (r / nt) * MC, n0 = (r % nt) * NC;
    const int mc = min_int(M - m0, MC), nc = min_int(N - n0, NC);
    const float* A = A0 + e * M * K;
    const float* B = B0 + (bShared ? 0 : e * K * N);
    float* C = C0 + e * M * N;
    if (K == 0) {
      for (int i = 0; i < mc; i++)
        for (int j = 0; j < nc; j++) C[(m0 + i) * N + n0 + j] = 0.0f;
      continue;
    }
    for (int k0 = 0; k0 < K; k0 += KC) {
      const int kc = min_int(K - k0, KC);
      pack_b(B, bk, bj, k0, kc, n0, nc, bp);
      for (int j = 0; j < nc; j += NR) {
        const int nr = min_int(nc - j, NR);
        const float* panel = bp + j * kc;
        float* c = C + m0 * N + n0 + j;
        const float* a = A + m0 * ai + k0 * ak;
        int i = 0;
        for (; i + MR <= mc; i += MR) {
          kernel_6x8(kc, a + i * ai, ai, ak, panel, c + i * N, N, k0 == 0, nr);
        }
        for (; i < mc; i++) kernel_1x8(kc, a + i * ai, ak, panel, c + i * N, k0 == 0, nr);
      }
    }
  }
}
