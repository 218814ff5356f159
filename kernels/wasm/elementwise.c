// Elementwise activations and their input gradients in f32 (reference:
// UNARY_OPS and UNARY_GRAD_OPS in src/tensor/_elementwise_ops.ts, whose
// op codes these kernels share). Tasks of EW_TASK values.
#include "_simd.h"

#define EW_TASK 16384

static const float GELU_C = 0.7978845608028654f; // sqrt(2 / pi)
static const float GELU_A = 0.044715f;

// y = f(x) for the op codes relu 0, gelu 1, tanh 2, sigmoid 3, silu 4, exp 5.
static inline v128_t unary4(int op, v128_t x) {
  const v128_t one = wasm_f32x4_splat(1.0f);
  switch (op) {
    case 0: // max(x, 0); wasm's max keeps NaN
      return wasm_f32x4_max(x, wasm_f32x4_splat(0.0f));
    case 1: { // 0.5 x (1 + tanh(u)) = x sigmoid(2u), u = c (x + a x³): accurate in both tails
      const v128_t x3 = wasm_f32x4_mul(wasm_f32x4_mul(x, x), x);
      const v128_t u = wasm_f32x4_mul(wasm_f32x4_splat(GELU_C),
                                      wasm_f32x4_add(x, wasm_f32x4_mul(wasm_f32x4_splat(GELU_A), x3)));
      return wasm_f32x4_mul(x, sigmoid_from_exp(exp4(wasm_f32x4_neg(wasm_f32x4_add(u, u)))));
    }
    case 2:
      return tanh4(x);
    case 3: // 1 / (1 + e^-x)
      return sigmoid_from_exp(exp4(wasm_f32x4_neg(x)));
    case 4:
      return wasm_f32x4_div(x, wasm_f32x4_add(one, exp4(wasm_f32x4_neg(x))));
    default:
      return exp4(x);
  }
}

// dx = dy · f' from v (x for relu, gelu, silu; y for tanh, sigmoid).
static inline v128_t unary_grad4(int op, v128_t v, v128_t g) {
  const v128_t one = wasm_f32x4_splat(1.0f);
  switch (op) {
    case 0:
      return wasm_v128_and(g, wasm_f32x4_gt(v, wasm_f32x4_splat(0.0f)));
    case 1: {
      // With s = sigmoid(2u) = (1 + tanh u) / 2 and e = e^(-2u): 1 - tanh² u
      // = 4 s (1 - s) = 4 e s², so dy · (s + 2 x e s² du), du = c (1 + 3 a x²).
      // ±Inf gives NaN, as the reference's ∞ · 0.
      const v128_t x2 = wasm_f32x4_mul(v, v);
      const v128_t u = wasm_f32x4_mul(
        wasm_f32x4_splat(GELU_C),
        wasm_f32x4_add(v, wasm_f32x4_mul(wasm_f32x4_splat(GELU_A), wasm_f32x4_mul(x2, v))));
      const v128_t m2u = wasm_f32x4_pmin(wasm_f32x4_neg(wasm_f32x4_add(u, u)), wasm_f32x4_splat(88.0f));
      const v128_t e = exp4(m2u);
      const v128_t s = sigmoid_from_exp(e);
      const v128_t du = wasm_f32x4_mul(
        wasm_f32x4_splat(GELU_C), wasm_f32x4_add(one, wasm_f32x4_mul(wasm_f32x4_splat(3 * GELU_A), x2)));
      const v128_t b = wasm_f32x4_mul(wasm_f32x4_mul(wasm_f32x4_add(v, v), wasm_f32x4_mul(e, wasm_f32x4_mul(s, s))), du);
      const v128_t r = wasm_f32x4_mul(g, wasm_f32x4_add(s, b));
      const v128_t inf = wasm_f32x4_eq(wasm_f32x4_abs(v), wasm_f32x4_splat(__builtin_inff()));
      return wasm_v128_bitselect(wasm_f32x4_splat(__builtin_nanf("")), r, inf);
    }
    case 2: // 1 - y² as (1 - y)(1 + y): no cancellation near |y| = 1
      return wasm_f32x4_mul(g, wasm_f32x4_mul(wasm_f32x4_sub(one, v), wasm_f32x4_add(one, v)));
    case 3:
      return wasm_f32x4_mul(wasm_f32x4_mul(g, v), wasm_f32x4_sub(one, v));
    default: { // silu: s (1 + x (1 - s))
      const v128_t s = wasm_f32x4_div(one, wasm_f32x4_add(one, exp4(wasm_f32x4_neg(v))));
      return wasm_f32x4_mul(
        wasm_f32x4_mul(g, s), wasm_f32x4_add(one, wasm_f32x4_mul(v, wasm_f32x4_sub(one, s))));
    }
  }
}

// f(x), and x itself where x is NaN (as the reference).
static inline v128_t unary_nan(int op, v128_t x) {
  return wasm_v128_bitselect(x, unary4(op, x), wasm_f32x4_ne(x, x));
}

// dy · f'(v), and v + dy (NaN) where either is NaN (as the reference).
static inline v128_t unary_grad_nan(int op, v128_t v, v128_t g) {
  const v128_t nan = wasm_v128_or(wasm_f32x4_ne(v, v), wasm_f32x4_ne(g, g));
  return wasm_v128_bitselect(wasm_f32x4_add(v, g), unary_grad4(op, v, g), nan);
}

// One task of a unary op whose code is a constant where inlined (clang
// specialises the loop for it).
static inline void unary_task(int op, const float* x, float* y, int lo, int hi) {
  int j = lo;
  for (; j + 4 <= hi; j += 4) wasm_v128_store(y + j, unary_nan(op, wasm_v128_load(x + j)));
  for (; j < hi; j++) y[j] = wasm_f32x4_extract_lane(unary_nan(op, wasm_f32x4_splat(x[j])), 0);
}

static inline void unary_grad_task(int op, const float* v, const float* g, float* dx, int lo, int hi) {
  int j = lo;
  for (; j + 4 <= hi; j += 4) {
    wasm_v128_store(dx + j, unary_grad_nan(op, wasm_v128_load(v + j), wasm_v128_load(g + j)));
  }
  for (; j < hi; j++) {
    dx[j] = wasm_f32x4_extract_lane(unary_grad_nan(op, wasm_f32x4_splat(v[j]), wasm_f32x4_splat(g[j])), 0);
  }
}

// i: op, x, out, n.
EXPORT(unary)
void unary(Job* job, int tid) {
  const int op = job->i[0], n = job->i[3];
  const float* x = (const float*)job->i[1];
  float* y = (float*)job->i[2];
  const int tasks = (n + EW_TASK - 1) / EW_TASK;
  for (int t = claim(job); t < tasks; t = claim(job)) {
    const int lo = t * EW_TASK, hi = min_int(n, lo + EW_TASK);
    switch (op) {
      case 0: unary_task(0, x, y, lo, hi); break;
      case 1: unary_task(1, x, y, lo, hi); break;
      case 2: unary_task(2, x, y, lo, hi); break;
      case 3: unary_task(3, x, y, lo, hi); break;
      case 4: unary_task(4, x, y, lo, hi); break;
      default: unary_task(5, x, y, lo, hi); break;
    }
  }
}

// i: op, v, dy, out, n.
EXPORT(unary_backward)
void unary_backward(Job* job, int tid) {
  const int op = job->i[0], n = job->i[4];
  const float* v = (const float*)job->i[1];
  const float* g = (const float*)job->i[2];
  float* dx = (float*)job->i[3];
  const int tasks = (n + EW_TASK - 1) / EW_TASK;
  for (int t = claim(job); t < tasks; t = claim(job)) {
    const int lo = t * EW_TASK, hi = min_int(n, lo + EW_TASK);
    switch (op) {
      case 0: unary_grad_task(0, v, g, dx, lo, hi); break;
      case 1: unary_grad_task(1, v, g, dx, lo, hi); break;
      case 2: unary_grad_task(2, v, g, dx, lo, hi); break;
      case 3: unary_grad_task(3, v, g, dx, lo, hi); break;
      default: unary_grad_task(4, v, g, dx, lo, hi); break;
    }
  }
}

// AdamW (reference: CpuBackend.adamwInPlace). i: param, grad, m, v, n;
// f: lr, beta1, beta2, eps, weightDecay, 1 - beta1^step, 1 - beta2^step.
EXPORT(adamw)
void adamw(Job* job, int tid) {
  float* P = (float*)job->i[0];
  const float* G = (const float*)job->i[1];
  float* Mm = (float*)job->i[2];
  float* Vv = (float*)job->i[3];
  const int n = job->i[4];
  const float lr = job->f[0], b1 = job->f[1], b2 = job->f[2], eps = job->f[3], wd = job->f[4];
  const float bc1 = job->f[5], bc2 = job->f[6];
  const v128_t vb1 = wasm_f32x4_splat(b1), vb2 = wasm_f32x4_splat(b2);
  const v128_t vc1 = wasm_f32x4_splat(1.0f - b1), vc2 = wasm_f32x4_splat(1.0f - b2);
  const v128_t vbc1 = wasm_f32x4_splat(bc1), vbc2 = wasm_f32x4_splat(bc2);
  const v128_t veps = wasm_f32x4_splat(eps), vwd = wasm_f32x4_splat(wd), vlr = wasm_f32x4_splat(lr);
  const int tasks = (n + EW_TASK - 1) / EW_TASK;
  for (int t = claim(job); t < tasks; t = claim(job)) {
    const int lo = t * EW_TASK, hi = min_int(n, lo + EW_TASK);
    int j = lo;
    for (; j + 4 <= hi; j += 4) {
      const v128_t g = wasm_v128_load(G + j), p = wasm_v128_load(P + j);
      const v128_t m = wasm_f32x4_add(wasm_f32x4_mul(vb1, wasm_v128_load(Mm + j)), wasm_f32x4_mul(vc1, g));
      const v128_t v = wasm_f32x4_add(wasm_f32x4_mul(vb2, wasm_v128_load(Vv + j)),
                                      wasm_f32x4_mul(wasm_f32x4_mul(vc2, g), g));
      wasm_v128_store(Mm + j, m);
      wasm_v128_store(Vv + j, v);
      const v128_t step = wasm_f32x4_add(
        wasm_f32x4_div(wasm_f32x4_div(m, vbc1), wasm_f32x4_add(wasm_f32x4_sqrt(wasm_f32x4_div(v, vbc2)), veps)),
        wasm_f32x4_mul(vwd, p));
      wasm_v128_store(P + j, wasm_f32x4_sub(p, wasm_f32x4_mul(vlr, step)));
    }
    for (; j < hi; j++) {
      const float g = G[j], p = P[j];
      const float m = b1 * Mm[j] + (1.0f - b1) * g;
      const float v = b2 * Vv[j] + (1.0f - b2) * g * g;
      Mm[j] = m, Vv[j] = v;
      const float s = wasm_f32x4_extract_lane(wasm_f32x4_sqrt(wasm_f32x4_splat(v / bc2)), 0);
      P[j] = p - lr * ((m / bc1) / (s + eps) + wd * p);
    }
  }
}
