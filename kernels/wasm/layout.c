// Strided elementwise kernels over a contiguous output: the broadcasting
// binary ops (reference: binaryInto in src/tensor/cpu/_elementwise.ts,
// BINARY_OPS' codes) and the axis permutation (reference: permuteInto in
// src/tensor/cpu/_layout.ts). The output is walked in runs of its
// innermost (merged) axis; each input's offset follows an odometer over
// the outer axes with that input's strides. Tasks are ranges of runs.
#include "_simd.h"

#define MAX_RANK 6

// Runs of `len` outputs per task: about EW_RUN_TASK values, at least one run.
#define EW_RUN_TASK 16384

// The input offset of run `r` (0-based over the outer axes, last outer
// axis fastest), from the axes' extents and the input's strides.
static inline int run_offset(int r, int rank, const int* shape, const int* stride) {
  int off = 0;
  for (int d = rank - 2; d >= 0; d--) {
    off += (r % shape[d]) * stride[d];
    r /= shape[d];
  }
  return off;
}

// Advances the odometer `idx` over the outer axes by one run, moving the
// offsets `oa`, `ob` by their strides.
static inline void next_run(int rank, const int* shape, int* idx, const int* sa, const int* sb, int* oa,
                            int* ob) {
  for (int d = rank - 2; d >= 0; d--) {
    idx[d]++;
    *oa += sa[d], *ob += sb[d];
    if (idx[d] < shape[d]) return;
    *oa -= sa[d] * shape[d], *ob -= sb[d] * shape[d];
    idx[d] = 0;
  }
}

static inline v128_t binary4(int op, v128_t a, v128_t b) {
  switch (op) {
    case 0: return wasm_f32x4_add(a, b);
    case 1: return wasm_f32x4_sub(a, b);
    case 2: return wasm_f32x4_mul(a, b);
    case 3: return wasm_f32x4_div(a, b);
    default: return wasm_f32x4_max(a, b); // NaN kept, as Math.max
  }
}

static inline void binary_run(int op, const float* a, int sa, const float* b, int sb, float* o, int len) {
  int j = 0;
  if (sa == 1 && sb == 1) {
    for (; j + 4 <= len; j += 4) wasm_v128_store(o + j, binary4(op, wasm_v128_load(a + j), wasm_v128_load(b + j)));
  } else if (sa == 1 && sb == 0) {
    const v128_t vb = wasm_f32x4_splat(*b);
    for (; j + 4 <= len; j += 4) wasm_v128_store(o + j, binary4(op, wasm_v128_load(a + j), vb));
  } else if (sa == 0 && sb == 1) {
    const v128_t va = wasm_f32x4_splat(*a);
    for (; j + 4 <= len; j += 4) wasm_v128_store(o + j, binary4(op, va, wasm_v128_load(b + j)));
  }
  for (; j < len; j++) {
    o[j] = wasm_f32x4_extract_lane(binary4(op, wasm_f32x4_splat(a[j * sa]), wasm_f32x4_splat(b[j * sb])), 0);
  }
}

// out = a (op) b broadcast. i: op, a, b, out, rank, shape[6], strideA[6],
// strideB[6] (merged axes, outermost first; stride 0 where broadcast).
EXPORT(binary)
void binary(Job* job, int tid) {
  const int op = job->i[0], rank = job->i[4];
  const float* A = (const float*)job->i[1];
  const float* B = (const float*)job->i[2];
  float* O = (float*)job->i[3];
  const int* shape = job->i + 5;
  const int* sa = job->i + 5 + MAX_RANK;
  const int* sb = job->i + 5 + 2 * MAX_RANK;
  const int len = shape[rank - 1], la = sa[rank - 1], lb = sb[rank - 1];
  int runs = 1;
  for (int d = 0; d < rank - 1; d++) runs *= shape[d];
  const int per = len >= EW_RUN_TASK ? 1 : EW_RUN_TASK / len;
  const int tasks = (runs + per - 1) / per;
  for (int t = claim(job); t < tasks; t = claim(job)) {
    const int r0 = t * per, r1 = min_int(runs, r0 + per);
    int idx[MAX_RANK];
    int rest = r0;
    for (int d = rank - 2; d >= 0; d--) idx[d] = rest % shape[d], rest /= shape[d];
    int oa = run_offset(r0, rank, shape, sa), ob = run_offset(r0, rank, shape, sb);
    for (int r = r0; r < r1; r++) {
      switch (op) {
        case 0: binary_run(0, A + oa, la, B + ob, lb, O + r * len, len); break;
        case 1: binary_run(1, A + oa, la, B + ob, lb, O + r * len, len); break;
        case 2: binary_run(2, A + oa, la, B + ob, lb, O + r * len, len); break;
        case 3: binary_run(3, A + oa, la, B + ob, lb, O + r * len, len); break;
        default: binary_run(4, A + oa, la, B + ob, lb, O + r * len, len); break;
      }
      next_run(rank, shape, idx, sa, sb, &oa, &ob);
    }
  }
}

// out = x permuted: out's axes have extents shape[] and read x with
// strides stride[] (the input stride of each output axis). i: x, out,
// rank, shape[6], stride[6].
EXPORT(permute)
void permute(Job* job, int tid) {
  const float* X = (const float*)job->i[0];
  float* O = (float*)job->i[1];
  const int rank = job->i[2];
  const int* shape = job->i + 3;
  const int* st = job->i + 3 + MAX_RANK;
  const int zero[MAX_RANK] = {0, 0, 0, 0, 0, 0};
  const int len = shape[rank - 1], sl = st[rank - 1];
  int runs = 1;
  for (int d = 0; d < rank - 1; d++) runs *= shape[d];
  const int per = len >= EW_RUN_TASK ? 1 : EW_RUN_TASK / len;
  const int tasks = (runs + per - 1) / per;
  for (int t = claim(job); t < tasks; t = claim(job)) {
    const int r0 = t * per, r1 = min_int(runs, r0 + per);
    int idx[MAX_RANK];
    int rest = r0;
    for (int d = rank - 2; d >= 0; d--) idx[d] = rest % shape[d], rest /= shape[d];
    int ox = run_offset(r0, rank, shape, st), unused = 0;
    for (int r = r0; r < r1; r++) {
      const float* x = X + ox;
      float* o = O + r * len;
      if (sl == 1) {
        int j = 0;
        for (; j + 4 <= len; j += 4) wasm_v128_store(o + j, wasm_v128_load(x + j));
        for (; j < len; j++) o[j] = x[j];
      } else {
        for (int j = 0; j < len; j++) o[j] = x[j * sl];
      }
      next_run(rank, shape, idx, st, zero, &ox, &unused);
    }
  }
}
