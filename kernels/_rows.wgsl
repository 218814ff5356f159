// Frame of the row-wise kernels: one workgroup of WG invocations per row,
// the rows laid out on a 2-D grid of workgroups, and the workgroup
// reductions they share. Not a kernel: a kernel takes it in with the line
// `//#include _rows.wgsl`, declares a `Params` with `rows` and `cols` bound
// as `p`, and defines
//   fn rowMain(row: u32, base: u32, lid: u32)
// for row `row`, whose elements start at `base` = row · cols, as seen by
// invocation `lid` of the row's workgroup. Every invocation of the
// workgroup calls it, so it may call allSum and allMax (workgroup barriers)
// outside branches on `lid`. The host specialises WG.

const WG: u32 = 64u;

var<workgroup> sh: array<f32, WG>;

// Every invocation gets the same result, in the same summation order.
fn allSum(v: f32, lid: u32) -> f32 {
  workgroupBarrier();
  sh[lid] = v;
  workgroupBarrier();
  var s = 0.0;
  for (var i = 0u; i < WG; i++) {
    s += sh[i];
  }
  return s;
}

fn allMax(v: f32, lid: u32) -> f32 {
  workgroupBarrier();
  sh[lid] = v;
  workgroupBarrier();
  var m = sh[0];
  for (var i = 1u; i < WG; i++) {
    m = max(m, sh[i]);
  }
  return m;
}

@compute @workgroup_size(WG)
fn main(
  @builtin(local_invocation_id) lid: vec3<u32>,
  @builtin(workgroup_id) wid: vec3<u32>,
  @builtin(num_workgroups) nwg: vec3<u32>,
) {
  let row = wid.x + wid.y * nwg.x;
  if (row < p.rows) {
    rowMain(row, row * p.cols, lid.x);
  }
}
