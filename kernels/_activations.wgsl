// Activation pieces of unary.wgsl and unary_backward.wgsl, so that a
// gradient uses the very formulas of its forward: the tanh approximation of
// gelu and a sigmoid that cannot overflow. Not a kernel: taken in with the
// line `//#include _activations.wgsl`.

const GELU_C: f32 = 0.7978845608028654; // sqrt(2 / pi)
const GELU_A: f32 = 0.044715;

// tanh saturates to ±1 in f32 beyond |x| = 10; clamping first keeps
// implementations that evaluate it through exp(2x) away from inf / inf.
fn safeTanh(x: vec4<f32>) -> vec4<f32> {
  return tanh(clamp(x, vec4<f32>(-10.0), vec4<f32>(10.0)));
}

// 1 / (1 + exp(-x)) without overflow: e = exp(-|x|) is at most 1.
fn sigmoid(x: vec4<f32>) -> vec4<f32> {
  let e = exp(-abs(x));
  return select(e, vec4<f32>(1.0), x >= vec4<f32>(0.0)) / (1.0 + e);
}
