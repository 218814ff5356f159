// Elementwise out = a (op) b, OP one of the named codes below (checked
// against src/tensor/_elementwise_ops.ts when the kernels load). NaN in
// either operand gives NaN.
//
// Two layouts:
// - same shapes (BCAST false): over vec4s; buffers are sized in whole
//   vec4s, so the last vec4 may run into padding past the tensor's end,
//   which is never read as data; `n` counts vec4s;
// - broadcast (BCAST): one element per invocation; the host passes the
//   merged output shape (rank ≤ 8) and, per operand, the stride of each axis
//   (0 where the operand is broadcast); `n` counts elements.
// Launched as a 2-D grid of workgroups (x ≤ 65535) for large tensors.

const OP: u32 = 0u;
const OP_ADD: u32 = 0u;
const OP_SUB: u32 = 1u;
const OP_MUL: u32 = 2u;
const OP_DIV: u32 = 3u;
const OP_MAXIMUM: u32 = 4u;
const BCAST: bool = false;

struct Params {
  n: u32,
  rank: u32,
  // Merged output shape and each operand's strides, 4 axes per vec4.
  shape: array<vec4<u32>, 2>,
  aStrides: array<vec4<u32>, 2>,
  bStrides: array<vec4<u32>, 2>,
}

@group(0) @binding(0) var<uniform> p: Params;
//#if BCAST
@group(0) @binding(1) var<storage, read> A: array<f32>;
@group(0) @binding(2) var<storage, read> B: array<f32>;
@group(0) @binding(3) var<storage, read_write> O: array<f32>;
//#else
@group(0) @binding(1) var<storage, read> A: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> B: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> O: array<vec4<f32>>;
//#endif

//#include _nan.wgsl

fn apply(a: vec4<f32>, b: vec4<f32>) -> vec4<f32> {
  var r: vec4<f32>;
  if (OP == OP_ADD) {
    r = a + b;
  } else if (OP == OP_SUB) {
    r = a - b;
  } else if (OP == OP_MUL) {
    r = a * b;
  } else if (OP == OP_DIV) {
    // Division by ±0 as IEEE (±inf, or NaN for 0 / 0), whatever the
    // device's division does outside its accuracy range.
    let sign = (bitcast<vec4<u32>>(a) ^ bitcast<vec4<u32>>(b)) & vec4<u32>(0x80000000u);
    let inf = bitcast<vec4<f32>>(sign | vec4<u32>(0x7f800000u));
    let byZero = select(inf, nan4(a), a == vec4<f32>(0.0));
    r = select(a / b, byZero, b == vec4<f32>(0.0));
  } else {
    // max with +0 for (0, -0) in either order, as Math.max.
    let aPos = (bitcast<vec4<u32>>(a) >> vec4<u32>(31u)) == vec4<u32>(0u);
    r = select(b, a, (a > b) | ((a == b) & aPos));
  }
  return select(r, nan4(a), isNan4(a) | isNan4(b));
}

//#include _units.wgsl

fn unitMain(i: u32) {
  //#if BCAST
  var rest = i;
  var ia = 0u;
  var ib = 0u;
  for (var d = 0u; d < p.rank; d++) {
    let axis = p.rank - 1u - d;
    let dim = p.shape[axis / 4u][axis % 4u];
    let c = rest % dim;
    rest /= dim;
    ia += c * p.aStrides[axis / 4u][axis % 4u];
    ib += c * p.bStrides[axis / 4u][axis % 4u];
  }
  O[i] = apply(vec4<f32>(A[ia]), vec4<f32>(B[ib])).x;
  //#else
  O[i] = apply(A[i], B[i]);
  //#endif
}
