// Shared pieces of Conveyor's WebAssembly kernels (see build.ts).
//
// Every exported kernel has the signature `void name(Job* job, int tid)`:
// the backend writes the operands (addresses in the one shared memory) and
// sizes into `job`, resets `job->counter`, and every thread of the pool
// calls the kernel with its own `tid`. A kernel cuts its work into tasks
// and the threads claim them with an atomic counter, so that which thread
// runs a task never changes what the task computes: the same inputs give
// the same bits whatever the thread count.
#ifndef CONVEYOR_SIMD_H
#define CONVEYOR_SIMD_H

#include <wasm_simd128.h>

// a * b + c on four lanes. The relaxed build calls conveyor_madd, and
// build.ts turns each call into one `f32x4.relaxed_madd` instruction (a
// fused multiply-add where the engine has one: one rounding instead of
// two); the plain build multiplies, then adds. Kernels use MADD for every
// product they sum, so one build gives one rounding rule everywhere.
#ifdef CONVEYOR_RELAXED
__attribute__((noinline)) v128_t conveyor_madd(v128_t a, v128_t b, v128_t c);
#define MADD(a, b, c) conveyor_madd((a), (b), (c))
#else
#define MADD(a, b, c) wasm_f32x4_add(wasm_f32x4_mul((a), (b)), (c))
#endif

#define EXPORT(name) __attribute__((export_name(#name)))

// The arguments of one kernel call: 32 integers (addresses, sizes, flags,
// shapes), 8 floats, and the task counter. 192 bytes; the layout is
// mirrored by src/tensor/cpu/_wasm_kernels.ts.
typedef struct {
  int i[32];
  float f[8];
  int counter;
  int unused[15];
} Job;

// The next task of `job`, claimed by the calling thread.
static inline int claim(Job* job) {
  return __atomic_fetch_add(&job->counter, 1, __ATOMIC_RELAXED);
}

static inline int min_int(int a, int b) { return a < b ? a : b; }

// Sum of the four lanes, in a fixed order: (l0 + l2) + (l1 + l3).
static inline float hsum(v128_t v) {
  v128_t s = wasm_f32x4_add(v, wasm_i32x4_shuffle(v, v, 2, 3, 0, 1));
  return wasm_f32x4_extract_lane(s, 0) + wasm_f32x4_extract_lane(s, 1);
}

// x clamped to [lo, hi], NaN kept: pmax(x, lo) is x < lo ? lo : x, and a
// NaN x fails every comparison. (The pseudo-min and -max are one x86
// instruction each; wasm's min and max, which also propagate NaN, are
// several, and made exp4 three times slower in V8.)
static inline v128_t clamp4(v128_t x, float lo, float hi) {
  return wasm_f32x4_pmin(wasm_f32x4_pmax(x, wasm_f32x4_splat(lo)), wasm_f32x4_splat(hi));
}

// e^x on four lanes (Cephes' expf polynomial, about 1 ulp): 0 below
// about -103.9, +Inf above about 88.72, NaN for NaN. 2^n is applied in two
// halves so that subnormal results and results near FLT_MAX are both right.
static inline v128_t exp4(v128_t x) {
  x = clamp4(x, -105.0f, 88.8f);
  v128_t n = wasm_f32x4_nearest(wasm_f32x4_mul(x, wasm_f32x4_splat(1.44269504088896341f)));
  v128_t r = wasm_f32x4_sub(x, wasm_f32x4_mul(n, wasm_f32x4_splat(0.693359375f)));
  r = wasm_f32x4_sub(r, wasm_f32x4_mul(n, wasm_f32x4_splat(-2.12194440e-4f)));
  v128_t p = wasm_f32x4_splat(1.9875691500e-4f);
  p = wasm_f32x4_add(wasm_f32x4_mul(p, r), wasm_f32x4_splat(1.3981999507e-3f));
  p = wasm_f32x4_add(wasm_f32x4_mul(p, r), wasm_f32x4_splat(8.3334519073e-3f));
  p = wasm_f32x4_add(wasm_f32x4_mul(p, r), wasm_f32x4_splat(4.1665795894e-2f));
  p = wasm_f32x4_add(wasm_f32x4_mul(p, r), wasm_f32x4_splat(1.6666665459e-1f));
  p = wasm_f32x4_add(wasm_f32x4_mul(p, r), wasm_f32x4_splat(5.0000001201e-1f));
  p = wasm_f32x4_add(wasm_f32x4_mul(wasm_f32x4_mul(p, r), r), wasm_f32x4_add(r, wasm_f32x4_splat(1.0f)));
  v128_t ni = wasm_i32x4_trunc_sat_f32x4(n);
  v128_t n1 = wasm_i32x4_shr(ni, 1), n2 = wasm_i32x4_sub(ni, n1);
  v128_t s1 = wasm_i32x4_shl(wasm_i32x4_add(n1, wasm_i32x4_splat(127)), 23);
  v128_t s2 = wasm_i32x4_shl(wasm_i32x4_add(n2, wasm_i32x4_splat(127)), 23);
  return wasm_f32x4_mul(wasm_f32x4_mul(p, s1), s2);
}

// 1 / (1 + e^-x) on four lanes; e^-x is passed in (callers reuse it).
static inline v128_t sigmoid_from_exp(v128_t e_neg) {
  return wasm_f32x4_div(wasm_f32x4_splat(1.0f), wasm_f32x4_add(wasm_f32x4_splat(1.0f), e_neg));
}

// tanh on four lanes: Cephes' tanhf polynomial for |u| < 0.625, else
// 1 - 2 / (e^(2u) + 1) with u clamped to [-9, 9] (tanh(9) rounds to 1 in
// f32); NaN stays NaN.
static inline v128_t tanh4(v128_t u) {
  const v128_t z = wasm_f32x4_mul(u, u);
  v128_t p = wasm_f32x4_splat(-5.70498872745e-3f);
  p = wasm_f32x4_add(wasm_f32x4_mul(p, z), wasm_f32x4_splat(2.06390887954e-2f));
  p = wasm_f32x4_add(wasm_f32x4_mul(p, z), wasm_f32x4_splat(-5.37397155531e-2f));
  p = wasm_f32x4_add(wasm_f32x4_mul(p, z), wasm_f32x4_splat(1.33314422036e-1f));
  p = wasm_f32x4_add(wasm_f32x4_mul(p, z), wasm_f32x4_splat(-3.33332819422e-1f));
  const v128_t small = wasm_f32x4_add(wasm_f32x4_mul(wasm_f32x4_mul(p, z), u), u);
  const v128_t c = clamp4(u, -9.0f, 9.0f);
  const v128_t e = exp4(wasm_f32x4_add(c, c));
  const v128_t large = wasm_f32x4_sub(
    wasm_f32x4_splat(1.0f),
    wasm_f32x4_div(wasm_f32x4_splat(2.0f), wasm_f32x4_add(e, wasm_f32x4_splat(1.0f))));
  return wasm_v128_bitselect(small, large, wasm_f32x4_lt(wasm_f32x4_abs(u), wasm_f32x4_splat(0.625f)));
}

#endif
