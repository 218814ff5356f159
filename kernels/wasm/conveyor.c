// The one translation unit of Conveyor's WebAssembly kernels: build.ts
// compiles it twice (plain SIMD128, and relaxed SIMD with -DCONVEYOR_RELAXED).
#include "matmul.c"
#include "elementwise.c"
#include "rows.c"
#include "layout.c"

#ifdef CONVEYOR_RELAXED
// Never runs: build.ts replaces every call with f32x4.relaxed_madd.
v128_t conveyor_madd(v128_t a, v128_t b, v128_t c) { return wasm_f32x4_add(wasm_f32x4_mul(a, b), c); }
#endif
