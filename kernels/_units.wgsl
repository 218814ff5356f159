// Frame of the kernels that run one invocation per unit (a float or a
// vec4), the units laid out on a 2-D grid of workgroups (x ≤ 65535) for
// large tensors. Not a kernel: a kernel takes it in with the line
// `//#include _units.wgsl`, declares a `Params` whose field `n` counts the
// units, bound as `p`, and defines
//   fn unitMain(i: u32)
// called once for each unit i < n. The host's grid uses the same WG.

const WG: u32 = 256u;

@compute @workgroup_size(WG)
fn main(
  @builtin(global_invocation_id) gid: vec3<u32>,
  @builtin(num_workgroups) nwg: vec3<u32>,
) {
  let i = gid.x + gid.y * nwg.x * WG;
  if (i < p.n) {
    unitMain(i);
  }
}
