// Workgroup reductions of the row-wise kernels (one workgroup of WG
// invocations per row). Not a kernel: a kernel takes it in with the line
// `//#include _row_reduce.wgsl` and declares `const WG: u32` itself.

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
