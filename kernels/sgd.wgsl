// In place SGD step over vec4s (2-D grid, padding as in binary.wgsl), as
// PyTorch's SGD without dampening or Nesterov:
//   d = g + weightDecay · p;  with MOMENTUM: buf = momentum · buf + d, d = buf;
//   p -= lr · d.
// One pass instead of a scale, axpys and a fresh momentum buffer per step.
// Without MOMENTUM the backend binds no buffer at binding 3.

const MOMENTUM: bool = true;

struct Params {
  n: u32, // vec4s
  lr: f32,
  momentum: f32,
  weightDecay: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> PARAM: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> GRAD: array<vec4<f32>>;
//#if MOMENTUM
@group(0) @binding(3) var<storage, read_write> BUF: array<vec4<f32>>;
//#endif

//#include _units.wgsl

fn unitMain(i: u32) {
  let w = PARAM[i];
  var d = fma(vec4<f32>(p.weightDecay), w, GRAD[i]);
  //#if MOMENTUM
  d = fma(vec4<f32>(p.momentum), BUF[i], d);
  BUF[i] = d;
  //#endif
  PARAM[i] = fma(vec4<f32>(-p.lr), d, w);
}
