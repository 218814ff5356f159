// In place x = s · x over vec4s (2-D grid, padding as in binary.wgsl).

const WG: u32 = 256u;

struct Params {
  n4: u32,
  s: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> X: array<vec4<f32>>;

@compute @workgroup_size(WG)
fn main(
  @builtin(global_invocation_id) gid: vec3<u32>,
  @builtin(num_workgroups) nwg: vec3<u32>,
) {
  let i = gid.x + gid.y * nwg.x * WG;
  if (i >= p.n4) {
    return;
  }
  X[i] = X[i] * p.s;
}
