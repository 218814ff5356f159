// In place AdamW with bias correction and decoupled weight decay over vec4s
// (2-D grid, padding as in binary.wgsl):
//   m = β1 m + (1-β1) g,  v = β2 v + (1-β2) g²,
//   p -= lr · ((m / bc1) / (sqrt(v / bc2) + eps) + weightDecay · p)
// with bc1 = 1 - β1^step and bc2 = 1 - β2^step computed on the host in f64.

struct Params {
  n: u32, // vec4s
  lr: f32,
  beta1: f32,
  oneMinusBeta1: f32,
  beta2: f32,
  oneMinusBeta2: f32,
  eps: f32,
  weightDecay: f32,
  bc1: f32,
  bc2: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> PARAM: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> GRAD: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> M: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> V: array<vec4<f32>>;

//#include _units.wgsl

fn unitMain(i: u32) {
  let g = GRAD[i];
  let m = p.beta1 * M[i] + p.oneMinusBeta1 * g;
  let v = p.beta2 * V[i] + p.oneMinusBeta2 * g * g;
  M[i] = m;
  V[i] = v;
  let w = PARAM[i];
  PARAM[i] = w - p.lr * ((m / p.bc1) / (sqrt(v / p.bc2) + p.eps) + p.weightDecay * w);
}
