// Device check of integer inputs (ids, class targets) that have no host
// copy: FLAG[0] ends up n - i for the first position i whose value is not
// an integer in [0, limit) (0 when there is none; the host clears FLAG
// first), and STAGE 1, one invocation, stores that value's bits in FLAG[1].
// The host reads FLAG back without waiting and reports a RangeError with
// the next read or sync.

const STAGE: u32 = 0u;
const WG: u32 = 256u;

struct Params {
  n: u32,
  limit: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> IDS: array<f32>;
@group(0) @binding(2) var<storage, read_write> FLAG: array<atomic<u32>, 2>;

//#include _nan.wgsl

@compute @workgroup_size(WG)
fn main(
  @builtin(global_invocation_id) gid: vec3<u32>,
  @builtin(num_workgroups) nwg: vec3<u32>,
) {
  let i = gid.x + gid.y * nwg.x * WG;
  if (STAGE == 0u) {
    if (i >= p.n) {
      return;
    }
    let v = IDS[i];
    let ok = !isNan(v) && v >= 0.0 && v < f32(p.limit) && floor(v) == v;
    if (!ok) {
      atomicMax(&FLAG[0], p.n - i);
    }
  } else if (i == 0u) {
    let m = atomicLoad(&FLAG[0]);
    if (m != 0u) {
      atomicStore(&FLAG[1], bitcast<u32>(IDS[p.n - m]));
    }
  }
}
