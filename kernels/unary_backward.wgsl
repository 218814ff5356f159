// Elementwise input gradients of the unary ops over vec4s, OP one of the
// named codes below (checked against src/tensor/_elementwise_ops.ts at
// load). V is the forward input x for relu, gelu and silu and the forward
// output y for tanh and sigmoid:
//   relu: dy · (x > 0)            gelu: dy · gelu'(x), tanh approximation
//   tanh: dy · (1 - y²)           sigmoid: dy · y · (1 - y)
//   silu: dy · s · (1 + x (1 - s)), s = sigmoid(x)
// NaN in V or DY gives NaN. 2-D grid, padding as in binary.wgsl.

const OP: u32 = 0u;
const OP_RELU: u32 = 0u;
const OP_GELU: u32 = 1u;
const OP_TANH: u32 = 2u;
const OP_SIGMOID: u32 = 3u;
const OP_SILU: u32 = 4u;

struct Params {
  n: u32, // vec4s
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> V: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> DY: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> O: array<vec4<f32>>;

//#include _nan.wgsl
//#include _activations.wgsl

fn apply(v: vec4<f32>, g: vec4<f32>) -> vec4<f32> {
  if (OP == OP_RELU) {
    return select(vec4<f32>(0.0), g, v > vec4<f32>(0.0));
  } else if (OP == OP_GELU) {
    let t = safeTanh(GELU_C * (v + GELU_A * v * v * v));
    let du = GELU_C * (1.0 + 3.0 * GELU_A * v * v);
    return g * (0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * du);
  } else if (OP == OP_TANH) {
    return g * (1.0 - v * v);
  } else if (OP == OP_SIGMOID) {
    return g * v * (1.0 - v);
  } else {
    let s = sigmoid(v);
    return g * s * (1.0 + v * (1.0 - s));
  }
}

//#include _units.wgsl

fn unitMain(i: u32) {
  let v = V[i];
  let g = DY[i];
  O[i] = select(apply(v, g), nan4(v), isNan4(v) | isNan4(g));
}
