// Sum (or, with SQUARE, sum of squares) of n floats, one stage: workgroup w
// (on a 2-D grid) reduces elements [w·WG·PER, (w+1)·WG·PER) to out[w]. The
// host repeats the stage (without SQUARE) until one value is left.

const SQUARE: bool = false;
const WG: u32 = 64u;
const PER: u32 = 16u;

struct Params {
  n: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> X: array<f32>;
@group(0) @binding(2) var<storage, read_write> O: array<f32>;

var<workgroup> sh: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(
  @builtin(local_invocation_id) lid: vec3<u32>,
  @builtin(workgroup_id) wid: vec3<u32>,
  @builtin(num_workgroups) nwg: vec3<u32>,
) {
  let w = wid.x + wid.y * nwg.x;
  let start = w * WG * PER;
  // The 2-D grid may hold a few workgroups past the end.
  if (start >= p.n) {
    return;
  }
  var s = 0.0;
  for (var k = 0u; k < PER; k++) {
    // Strided so that neighbouring invocations read neighbouring floats.
    let i = start + k * WG + lid.x;
    if (i < p.n) {
      let v = X[i];
      if (SQUARE) {
        s += v * v;
      } else {
        s += v;
      }
    }
  }
  sh[lid.x] = s;
  workgroupBarrier();
  if (lid.x == 0u) {
    var t = 0.0;
    for (var i = 0u; i < WG; i++) {
      t += sh[i];
    }
    O[w] = t;
  }
}
