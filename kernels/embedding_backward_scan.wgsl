// In place scatter-add dTable[ids[i]] += dy[i], the scanning variant: one
// invocation per (table row v, column unit c) on a 2-D grid scans every id
// in order and adds the matching dy rows, so each table entry receives its
// updates in position order, exactly as the CPU reference adds them.
// Cost: V · C · N comparisons, so the host uses it for small V · N only and
// otherwise sorts the ids (embedding_backward.wgsl). Ids that are not
// integers in [0, V) match no row.

const VEC: bool = false;

struct Params {
  // Units in the table, units per row (C or C / 4), and ids N.
  n: u32,
  cols: u32,
  count: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
//#if VEC
@group(0) @binding(1) var<storage, read_write> DT: array<vec4<f32>>;
//#else
@group(0) @binding(1) var<storage, read_write> DT: array<f32>;
//#endif
@group(0) @binding(2) var<storage, read> IDS: array<f32>;
//#if VEC
@group(0) @binding(3) var<storage, read> DY: array<vec4<f32>>;
//#else
@group(0) @binding(3) var<storage, read> DY: array<f32>;
//#endif

//#include _units.wgsl

fn unitMain(i: u32) {
  let v = f32(i / p.cols);
  let c = i % p.cols;
  var acc = DT[i];
  for (var k = 0u; k < p.count; k++) {
    if (IDS[k] == v) {
      acc += DY[k * p.cols + c];
    }
  }
  DT[i] = acc;
}
