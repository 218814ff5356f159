// In place SGD step over vec4s (2-D grid, padding as in binary.wgsl), as
// PyTorch's SGD without dampening or Nesterov:
//   d = g + weightDecay · p;  with MOMENTUM: buf = momentum · buf + d, d = buf;
//   p -= lr · d.
// One pass instead of a scale, axpys and a fresh momentum buffer per step.
// Without MOMENTUM the backend binds no buffer at binding 3.

const MOMENTUM: bool = true;
const WG: u32 = 256u;

struct Params {
  n4: u32,
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

@compute @workgroup_size(WG)
fn main(
  @builtin(global_invocation_id) gid: vec3<u32>,
  @builtin(num_workgroups) nwg: vec3<u32>,
) {
  let i = gid.x + gid.y * nwg.x * WG;
  if (i >= p.n4) {
    return;
  }
  let w = PARAM[i];
  var d = fma(vec4<f32>(p.weightDecay), w, GRAD[i]);
  //#if MOMENTUM
  d = fma(vec4<f32>(p.momentum), BUF[i], d);
  BUF[i] = d;
  //#endif
  PARAM[i] = fma(vec4<f32>(-p.lr), d, w);
}
