// In place scatter-add dTable[ids[i]] += dy[i] from keys sorted by (id,
// position) (embedding_keys.wgsl, bitonic_sort.wgsl): one invocation per
// (sorted position s, column unit c) on a 2-D grid; the invocation at the
// first position of each id's run adds that run's dy rows, in position
// order, to the table row — exactly the order of the CPU reference, so the
// result is the same bit for bit, with no float atomics. Cost O(N · C)
// after the O(N log² N) sort, instead of the scan's O(V · C · N).
// Keys with the id NONE (padding, invalid ids) sort last and add nothing.

const VEC: bool = false;
const NONE: u32 = 0xffffffffu;

struct Params {
  // Units to visit (N · units per row), units per row (C or C / 4), ids N.
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
@group(0) @binding(2) var<storage, read> KEYS: array<vec2<u32>>;
//#if VEC
@group(0) @binding(3) var<storage, read> DY: array<vec4<f32>>;
//#else
@group(0) @binding(3) var<storage, read> DY: array<f32>;
//#endif

//#include _units.wgsl

fn unitMain(i: u32) {
  let s = i / p.cols;
  let c = i % p.cols;
  let id = KEYS[s].x;
  if (id == NONE || (s > 0u && KEYS[s - 1u].x == id)) {
    return;
  }
  let o = id * p.cols + c;
  var acc = DT[o];
  var t = s;
  loop {
    acc += DY[KEYS[t].y * p.cols + c];
    t++;
    if (t >= p.count || KEYS[t].x != id) {
      break;
    }
  }
  DT[o] = acc;
}
