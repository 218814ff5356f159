// Elementwise activation gradients over vec4s (2-D grid, padding as in
// binary.wgsl). V is the forward input x for relu / gelu and the forward
// output y for tanh:
//   ACT 0: dy · (x > 0)
//   ACT 1: dy · gelu'(x), tanh approximation
//   ACT 2: dy · (1 - y²)

const ACT: u32 = 0u;
const ACT_RELU: u32 = 0u;
const ACT_GELU: u32 = 1u;
const ACT_TANH: u32 = 2u;
const WG: u32 = 256u;
const GELU_C: f32 = 0.7978845608028654; // sqrt(2 / pi)
const GELU_A: f32 = 0.044715;

struct Params {
  n4: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> V: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> DY: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> O: array<vec4<f32>>;

@compute @workgroup_size(WG)
fn main(
  @builtin(global_invocation_id) gid: vec3<u32>,
  @builtin(num_workgroups) nwg: vec3<u32>,
) {
  let i = gid.x + gid.y * nwg.x * WG;
  if (i >= p.n4) {
    return;
  }
  let v = V[i];
  let g = DY[i];
  if (ACT == ACT_RELU) {
    O[i] = select(vec4<f32>(0.0), g, v > vec4<f32>(0.0));
  } else if (ACT == ACT_GELU) {
    let u = clamp(GELU_C * (v + GELU_A * v * v * v), vec4<f32>(-10.0), vec4<f32>(10.0));
    let t = tanh(u);
    let du = GELU_C * (1.0 + 3.0 * GELU_A * v * v);
    O[i] = g * (0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * du);
  } else {
    O[i] = g * (1.0 - v * v);
  }
}
