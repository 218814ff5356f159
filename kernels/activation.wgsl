// Elementwise activation over vec4s, ACT one of the named codes below: relu,
// gelu (tanh approximation), tanh. 2-D grid, padding as in binary.wgsl.

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
@group(0) @binding(1) var<storage, read> X: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> O: array<vec4<f32>>;

// tanh saturates to ±1 in f32 beyond |x| = 10; clamping first keeps
// implementations that evaluate it through exp(2x) away from inf / inf.
fn safeTanh(x: vec4<f32>) -> vec4<f32> {
  return tanh(clamp(x, vec4<f32>(-10.0), vec4<f32>(10.0)));
}

@compute @workgroup_size(WG)
fn main(
  @builtin(global_invocation_id) gid: vec3<u32>,
  @builtin(num_workgroups) nwg: vec3<u32>,
) {
  let i = gid.x + gid.y * nwg.x * WG;
  if (i >= p.n4) {
    return;
  }
  let x = X[i];
  if (ACT == ACT_RELU) {
    O[i] = max(x, vec4<f32>(0.0));
  } else if (ACT == ACT_GELU) {
    O[i] = 0.5 * x * (1.0 + safeTanh(GELU_C * (x + GELU_A * x * x * x)));
  } else {
    O[i] = safeTanh(x);
  }
}
