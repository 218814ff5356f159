// Frame of the column-sum kernels: one invocation per column (x) and one
// row of workgroups per chunk of `chunk` rows (y), so that chunk k covers
// rows [k · chunk, min((k + 1) · chunk, rows)). Not a kernel: a kernel
// takes it in with the line `//#include _column_chunks.wgsl`, which also
// declares and binds the `Params` these kernels share, and defines
//   fn columnMain(c: u32, k: u32, r0: u32, r1: u32)
// for column c of chunk k over rows [r0, r1).

const WG: u32 = 64u;

struct Params {
  rows: u32,
  cols: u32,
  chunk: u32,
}

@group(0) @binding(0) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(
  @builtin(global_invocation_id) gid: vec3<u32>,
  @builtin(workgroup_id) wid: vec3<u32>,
) {
  let c = gid.x;
  if (c < p.cols) {
    let r0 = wid.y * p.chunk;
    columnMain(c, wid.y, r0, min(r0 + p.chunk, p.rows));
  }
}
