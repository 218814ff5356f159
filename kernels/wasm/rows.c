// Row kernels in f32 (references: the matching methods of CpuBackend's
// exact mode, src/tensor/cpu/_reference_rows.ts). A row's sums use four
// lane accumulators over the row's whole vectors, the tail after them,
// then the lanes in a fixed order: the bits depend on the row's values and
// length only. Tasks are runs of whole rows (row kernels) or of columns
// (column sums, which add rows in order).
#include "_simd.h"

// Rows per task: about 4096 values, at least one row.
static inline int rows_per_task(int n) { return n >= 4096 ? 1 : 4096 / (n > 0 ? n : 1); }

static inline float row_max(const float* x, int n) {
  v128_t m = wasm_f32x4_splat(-__builtin_inff());
  int j = 0;
  for (; j + 4 <= n; j += 4) m = wasm_f32x4_max(m, wasm_v128_load(x + j));
  for (; j < n; j++) m = wasm_f32x4_max(m, wasm_f32x4_splat(x[j]));
  m = wasm_f32x4_max(m, wasm_i32x4_shuffle(m, m, 2, 3, 0, 1));
  m = wasm_f32x4_max(m, wasm_i32x4_shuffle(m, m, 1, 0, 3, 2));
  return wasm_f32x4_extract_lane(m, 0);
}

static inline float row_sum(const float* x, int n) {
  v128_t s = wasm_f32x4_splat(0.0f);
  int j = 0;
  for (; j + 4 <= n; j += 4) s = wasm_f32x4_add(s, wasm_v128_load(x + j));
  float t = hsum(s);
  for (; j < n; j++) t += x[j];
  return t;
}

static inline float row_dot(const float* x, const float* y, int n) {
  v128_t s = wasm_f32x4_splat(0.0f);
  int j = 0;
  for (; j + 4 <= n; j += 4) s = MADD(wasm_v128_load(x + j), wasm_v128_load(y + j), s);
  v128_t t = wasm_f32x4_splat(hsum(s));
  for (; j < n; j++) t = MADD(wasm_f32x4_splat(x[j]), wasm_f32x4_splat(y[j]), t);
  return wasm_f32x4_extract_lane(t, 0);
}

// Softmax of each row; causal: row r keeps its first (r mod n) + 1 values,
// the rest are 0. i: x, out, rows, n, causal.
EXPORT(softmax)
void softmax(Job* job, int tid) {
  const float* X = (const float*)job->i[0];
  float* Y = (float*)job->i[1];
  const int rows = job->i[2], n = job->i[3], causal = job->i[4];
  const int rpt = rows_per_task(n), tasks = (rows + rpt - 1) / rpt;
  for (int t = claim(job); t < tasks; t = claim(job)) {
    for (int r = t * rpt; r < min_int(rows, (t + 1) * rpt); r++) {
      const float* x = X + r * n;
      float* y = Y + r * n;
      const int lim = causal ? r % n + 1 : n;
      const v128_t mx = wasm_f32x4_splat(row_max(x, lim));
      v128_t s4 = wasm_f32x4_splat(0.0f);
      int j = 0;
      for (; j + 4 <= lim; j += 4) {
        const v128_t e = exp4(wasm_f32x4_sub(wasm_v128_load(x + j), mx));
        wasm_v128_store(y + j, e);
        s4 = wasm_f32x4_add(s4, e);
      }
      float s = hsum(s4);
      for (; j < lim; j++) {
        const float e = wasm_f32x4_extract_lane(exp4(wasm_f32x4_sub(wasm_f32x4_splat(x[j]), mx)), 0);
        y[j] = e;
        s += e;
      }
      const v128_t inv = wasm_f32x4_splat(1.0f / s);
      j = 0;
      for (; j + 4 <= lim; j += 4) wasm_v128_store(y + j, wasm_f32x4_mul(wasm_v128_load(y + j), inv));
      for (; j < lim; j++) y[j] *= wasm_f32x4_extract_lane(inv, 0);
      for (; j < n; j++) y[j] = 0.0f;
    }
  }
}

// dx = y (dy - Σ y dy) per row. i: y, dy, out, rows, n.
EXPORT(softmax_backward)
void softmax_backward(Job* job, int tid) {
  const float* Y = (const float*)job->i[0];
  const float* G = (const float*)job->i[1];
  float* O = (float*)job->i[2];
  const int rows = job->i[3], n = job->i[4];
  const int rpt = rows_per_task(n), tasks = (rows + rpt - 1) / rpt;
  for (int t = claim(job); t < tasks; t = claim(job)) {
    for (int r = t * rpt; r < min_int(rows, (t + 1) * rpt); r++) {
      const float *y = Y + r * n, *g = G + r * n;
      float* o = O + r * n;
      const v128_t dot = wasm_f32x4_splat(row_dot(y, g, n));
      int j = 0;
      for (; j + 4 <= n; j += 4) {
        wasm_v128_store(o + j, wasm_f32x4_mul(wasm_v128_load(y + j), wasm_f32x4_sub(wasm_v128_load(g + j), dot)));
      }
      for (; j < n; j++) o[j] = y[j] * (g[j] - wasm_f32x4_extract_lane(dot, 0));
    }
  }
}

// Layer norm: mean, rstd = 1 / sqrt(var + eps) per row, y = (x - mean) ·
// rstd · gamma + beta. i: x, gamma, beta, y, mean, rstd, rows, n; f: eps.
EXPORT(layer_norm)
void layer_norm(Job* job, int tid) {
  const float* X = (const float*)job->i[0];
  const float* Gm = (const float*)job->i[1];
  const float* Bt = (const float*)job->i[2];
  float* Y = (float*)job->i[3];
  float* Mn = (float*)job->i[4];
  float* Rs = (float*)job->i[5];
  const int rows = job->i[6], n = job->i[7];
  const float eps = job->f[0];
  const int rpt = rows_per_task(n), tasks = (rows + rpt - 1) / rpt;
  for (int t = claim(job); t < tasks; t = claim(job)) {
    for (int r = t * rpt; r < min_int(rows, (t + 1) * rpt); r++) {
      const float* x = X + r * n;
      float* y = Y + r * n;
      const float mu = row_sum(x, n) / (float)n;
      const v128_t vmu = wasm_f32x4_splat(mu);
      v128_t s4 = wasm_f32x4_splat(0.0f);
      int j = 0;
      for (; j + 4 <= n; j += 4) {
        const v128_t d = wasm_f32x4_sub(wasm_v128_load(x + j), vmu);
        s4 = MADD(d, d, s4);
      }
      v128_t s = wasm_f32x4_splat(hsum(s4));
      for (; j < n; j++) {
        const v128_t d = wasm_f32x4_splat(x[j] - mu);
        s = MADD(d, d, s);
      }
      const float var = wasm_f32x4_extract_lane(s, 0) / (float)n;
      const float rs = 1.0f / wasm_f32x4_extract_lane(wasm_f32x4_sqrt(wasm_f32x4_splat(var + eps)), 0);
      Mn[r] = mu, Rs[r] = rs;
      const v128_t vrs = wasm_f32x4_splat(rs);
      j = 0;
      for (; j + 4 <= n; j += 4) {
        const v128_t xh = wasm_f32x4_mul(wasm_f32x4_sub(wasm_v128_load(x + j), vmu), vrs);
        wasm_v128_store(y + j, wasm_f32x4_add(wasm_f32x4_mul(xh, wasm_v128_load(Gm + j)), wasm_v128_load(Bt + j)));
      }
      for (; j < n; j++) y[j] = (x[j] - mu) * rs * Gm[j] + Bt[j];
    }
  }
}

// Layer norm input gradient: with g = dy · gamma and xh = (x - mean) rstd,
// dx = rstd (g - mean(g) - xh mean(g xh)). i: dy, x, mean, rstd, gamma, out, rows, n.
EXPORT(layer_norm_backward_input)
void layer_norm_backward_input(Job* job, int tid) {
  const float* G = (const float*)job->i[0];
  const float* X = (const float*)job->i[1];
  const float* Mn = (const float*)job->i[2];
  const float* Rs = (const float*)job->i[3];
  const float* Gm = (const float*)job->i[4];
  float* O = (float*)job->i[5];
  const int rows = job->i[6], n = job->i[7];
  const int rpt = rows_per_task(n), tasks = (rows + rpt - 1) / rpt;
  for (int t = claim(job); t < tasks; t = claim(job)) {
    for (int r = t * rpt; r < min_int(rows, (t + 1) * rpt); r++) {
      const float *g = G + r * n, *x = X + r * n;
      float* o = O + r * n;
      const float mu = Mn[r], rs = Rs[r];
      const v128_t vmu = wasm_f32x4_splat(mu), vrs = wasm_f32x4_splat(rs);
      v128_t sg4 = wasm_f32x4_splat(0.0f), sgx4 = sg4;
      int j = 0;
      for (; j + 4 <= n; j += 4) {
        const v128_t gg = wasm_f32x4_mul(wasm_v128_load(g + j), wasm_v128_load(Gm + j));
        const v128_t xh = wasm_f32x4_mul(wasm_f32x4_sub(wasm_v128_load(x + j), vmu), vrs);
        sg4 = wasm_f32x4_add(sg4, gg);
        sgx4 = MADD(gg, xh, sgx4);
      }
      float sg = hsum(sg4);
      v128_t sgx = wasm_f32x4_splat(hsum(sgx4));
      for (; j < n; j++) {
        const float gg = g[j] * Gm[j];
        sg += gg;
        sgx = MADD(wasm_f32x4_splat(gg), wasm_f32x4_splat((x[j] - mu) * rs), sgx);
      }
      const v128_t msg = wasm_f32x4_splat(sg / (float)n);
      const v128_t msgx = wasm_f32x4_splat(wasm_f32x4_extract_lane(sgx, 0) / (float)n);
      j = 0;
      for (; j + 4 <= n; j += 4) {
        const v128_t gg = wasm_f32x4_mul(wasm_v128_load(g + j), wasm_v128_load(Gm + j));
        const v128_t xh = wasm_f32x4_mul(wasm_f32x4_sub(wasm_v128_load(x + j), vmu), vrs);
        wasm_v128_store(o + j, wasm_f32x4_mul(vrs, wasm_f32x4_sub(wasm_f32x4_sub(gg, msg), wasm_f32x4_mul(xh, msgx))));
      }
      for (; j < n; j++) {
        const float xh = (x[j] - mu) * rs;
        o[j] = rs * ((g[j] * Gm[j] - wasm_f32x4_extract_lane(msg, 0)) - xh * wasm_f32x4_extract_lane(msgx, 0));
      }
    }
  }
}

#define COL_TASK 32

// Column sums out[j] = Σ_r x[r][j], rows in order. i: x, out, rows, n.
EXPORT(sum_rows)
void sum_rows(Job* job, int tid) {
  const float* X = (const float*)job->i[0];
  float* O = (float*)job->i[1];
  const int rows = job->i[2], n = job->i[3];
  const int tasks = (n + COL_TASK - 1) / COL_TASK;
  for (int t = claim(job); t < tasks; t = claim(job)) {
    const int lo = t * COL_TASK, hi = min_int(n, lo + COL_TASK);
    int j = lo;
    for (; j + 4 <= hi; j += 4) {
      v128_t s = wasm_f32x4_splat(0.0f);
      for (int r = 0; r < rows; r++) s = wasm_f32x4_add(s, wasm_v128_load(X + r * n + j));
      wasm_v128_store(O + j, s);
    }
    for (; j < hi; j++) {
      float s = 0.0f;
      for (int r = 0; r < rows; r++) s += X[r * n + j];
      O[j] = s;
    }
  }
}

// dgamma[j] = Σ_r dy · (x - mean) rstd, dbeta[j] = Σ_r dy, rows in order.
// i: dy, x, mean, rstd, dgamma, dbeta, rows, n.
EXPORT(layer_norm_backward_weight)
void layer_norm_backward_weight(Job* job, int tid) {
  const float* G = (const float*)job->i[0];
  const float* X = (const float*)job->i[1];
  const float* Mn = (const float*)job->i[2];
  const float* Rs = (const float*)job->i[3];
  float* DG = (float*)job->i[4];
  float* DB = (float*)job->i[5];
  const int rows = job->i[6], n = job->i[7];
  const int tasks = (n + COL_TASK - 1) / COL_TASK;
  for (int t = claim(job); t < tasks; t = claim(job)) {
    const int lo = t * COL_TASK, hi = min_int(n, lo + COL_TASK);
    int j = lo;
    for (; j + 4 <= hi; j += 4) {
      v128_t sg = wasm_f32x4_splat(0.0f), sb = sg;
      for (int r = 0; r < rows; r++) {
        const v128_t g = wasm_v128_load(G + r * n + j);
        const v128_t xh = wasm_f32x4_mul(wasm_f32x4_sub(wasm_v128_load(X + r * n + j), wasm_f32x4_splat(Mn[r])),
                                         wasm_f32x4_splat(Rs[r]));
        sg = MADD(g, xh, sg);
        sb = wasm_f32x4_add(sb, g);
      }
      wasm_v128_store(DG + j, sg);
      wasm_v128_store(DB + j, sb);
    }
    for (; j < hi; j++) {
      v128_t sg = wasm_f32x4_splat(0.0f);
      float sb = 0.0f;
      for (int r = 0; r < rows; r++) {
        const float g = G[r * n + j];
        sg = MADD(wasm_f32x4_splat(g), wasm_f32x4_splat((X[r * n + j] - Mn[r]) * Rs[r]), sg);
        sb += g;
      }
      DG[j] = wasm_f32x4_extract_lane(sg, 0), DB[j] = sb;
    }
  }
}

// out[r][j] = x[r][j] + bias[j]. i: x, bias, out, rows, n.
EXPORT(add_bias)
void add_bias(Job* job, int tid) {
  const float* X = (const float*)job->i[0];
  const float* Bv = (const float*)job->i[1];
  float* O = (float*)job->i[2];
  const int rows = job->i[3], n = job->i[4];
  const int rpt = rows_per_task(n), tasks = (rows + rpt - 1) / rpt;
  for (int t = claim(job); t < tasks; t = claim(job)) {
    for (int r = t * rpt; r < min_int(rows, (t + 1) * rpt); r++) {
      const float* x = X + r * n;
      float* o = O + r * n;
      int j = 0;
      for (; j + 4 <= n; j += 4) wasm_v128_store(o + j, wasm_f32x4_add(wasm_v128_load(x + j), wasm_v128_load(Bv + j)));
      for (; j < n; j++) o[j] = x[j] + Bv[j];
    }
  }
}
