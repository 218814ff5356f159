// Elementwise out = f(x) over vec4s, f chosen by OP from the named codes
// below (the host's table in src/tensor/_elementwise_ops.ts is checked
// against them when the kernels load). NaN in gives NaN out for every op:
// wherever x is NaN the result is x itself. 2-D grid, padding as in
// binary.wgsl.

const OP: u32 = 0u;
const OP_RELU: u32 = 0u;
const OP_GELU: u32 = 1u;
const OP_TANH: u32 = 2u;
const OP_SIGMOID: u32 = 3u;
const OP_SILU: u32 = 4u;
const OP_EXP: u32 = 5u;
const OP_LOG: u32 = 6u;
// Largest f32 whose exp is finite; above it exp is +inf.
const EXP_MAX: f32 = 88.72283;

struct Params {
  n: u32, // vec4s
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> X: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> O: array<vec4<f32>>;

//#include _nan.wgsl
//#include _activations.wgsl

// ±inf with the sign of s, built at run time (an infinite constant
// expression is a shader-creation error).
fn inf4(s: vec4<f32>) -> vec4<f32> {
  return bitcast<vec4<f32>>((bitcast<vec4<u32>>(s) & vec4<u32>(0x80000000u)) | vec4<u32>(0x7f800000u));
}

fn apply(x: vec4<f32>) -> vec4<f32> {
  if (OP == OP_RELU) {
    return select(vec4<f32>(0.0), x, x > vec4<f32>(0.0));
  } else if (OP == OP_GELU) {
    return 0.5 * x * (1.0 + safeTanh(GELU_C * (x + GELU_A * x * x * x)));
  } else if (OP == OP_TANH) {
    return safeTanh(x);
  } else if (OP == OP_SIGMOID) {
    return sigmoid(x);
  } else if (OP == OP_SILU) {
    return x * sigmoid(x);
  } else if (OP == OP_EXP) {
    return select(exp(min(x, vec4<f32>(EXP_MAX))), inf4(vec4<f32>(1.0)), x > vec4<f32>(EXP_MAX));
  } else {
    // log: -inf at ±0, NaN below 0 (as IEEE, whatever the device's log does there).
    let l = select(log(x), inf4(vec4<f32>(-1.0)), x == vec4<f32>(0.0));
    let below = x < vec4<f32>(0.0);
    return select(l, nan4(x), below);
  }
}

//#include _units.wgsl

fn unitMain(i: u32) {
  let x = X[i];
  O[i] = select(apply(x), x, isNan4(x));
}
