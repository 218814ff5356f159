// Softmax input gradient from its output: out = y · (dy - Σ_row(dy · y)).
// One workgroup per row on a 2-D grid.

const WG: u32 = 64u;

struct Params {
  rows: u32,
  cols: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> Y: array<f32>;
@group(0) @binding(2) var<storage, read> DY: array<f32>;
@group(0) @binding(3) var<storage, read_write> O: array<f32>;

//#include _row_reduce.wgsl

@compute @workgroup_size(WG)
fn main(
  @builtin(local_invocation_id) lid: vec3<u32>,
  @builtin(workgroup_id) wid: vec3<u32>,
  @builtin(num_workgroups) nwg: vec3<u32>,
) {
  let row = wid.x + wid.y * nwg.x;
  if (row >= p.rows) {
    return;
  }
  let base = row * p.cols;
  var d = 0.0;
  for (var j = lid.x; j < p.cols; j += WG) {
    d += Y[base + j] * DY[base + j];
  }
  let dot = allSum(d, lid.x);
  for (var j = lid.x; j < p.cols; j += WG) {
    O[base + j] = Y[base + j] * (DY[base + j] - dot);
  }
}
