// out = cond ≠ 0 ? a : b (a NaN cond counts as true: only ±0 is false,
// tested by its bits). Layouts as in binary.wgsl: vec4s for equal shapes,
// else one element per invocation with per-operand broadcast strides.

const BCAST: bool = false;

struct Params {
  n: u32,
  rank: u32,
  shape: array<vec4<u32>, 2>,
  cStrides: array<vec4<u32>, 2>,
  aStrides: array<vec4<u32>, 2>,
  bStrides: array<vec4<u32>, 2>,
}

@group(0) @binding(0) var<uniform> p: Params;
//#if BCAST
@group(0) @binding(1) var<storage, read> C: array<f32>;
@group(0) @binding(2) var<storage, read> A: array<f32>;
@group(0) @binding(3) var<storage, read> B: array<f32>;
@group(0) @binding(4) var<storage, read_write> O: array<f32>;
//#else
@group(0) @binding(1) var<storage, read> C: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> A: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> B: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> O: array<vec4<f32>>;
//#endif

fn pick(c: vec4<f32>, a: vec4<f32>, b: vec4<f32>) -> vec4<f32> {
  return select(b, a, (bitcast<vec4<u32>>(c) & vec4<u32>(0x7fffffffu)) != vec4<u32>(0u));
}

//#include _units.wgsl

fn unitMain(i: u32) {
  //#if BCAST
  var rest = i;
  var ic = 0u;
  var ia = 0u;
  var ib = 0u;
  for (var d = 0u; d < p.rank; d++) {
    let axis = p.rank - 1u - d;
    let dim = p.shape[axis / 4u][axis % 4u];
    let k = rest % dim;
    rest /= dim;
    ic += k * p.cStrides[axis / 4u][axis % 4u];
    ia += k * p.aStrides[axis / 4u][axis % 4u];
    ib += k * p.bStrides[axis / 4u][axis % 4u];
  }
  O[i] = pick(vec4<f32>(C[ic]), vec4<f32>(A[ia]), vec4<f32>(B[ib])).x;
  //#else
  O[i] = pick(C[i], A[i], B[i]);
  //#endif
}
