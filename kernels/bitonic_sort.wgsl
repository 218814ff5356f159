// Bitonic sort of (id, position) keys, ascending by id then position (the
// keys are distinct, so the order is total and the result deterministic).
// The host pads the keys to a power of two P ≥ BLOCK and runs:
// - LOCAL with k = 0: each workgroup sorts its block of BLOCK keys in
//   workgroup memory (every stage k ≤ BLOCK);
// - for each stage k > BLOCK: one global compare-exchange dispatch per
//   distance j ≥ BLOCK (`k`, `j`), then LOCAL with `k` for the distances
//   below BLOCK, in workgroup memory.
// A pair (i, i + j) is put in ascending order when bit k of i is 0 and
// descending otherwise.

const LOCAL: bool = false;
const WG: u32 = 256u;
const BLOCK: u32 = 2u * WG;

struct Params {
  n: u32,
  k: u32,
  j: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> KEYS: array<vec2<u32>>;

var<workgroup> sk: array<vec2<u32>, BLOCK>;

fn greater(a: vec2<u32>, b: vec2<u32>) -> bool {
  return a.x > b.x || (a.x == b.x && a.y > b.y);
}

// Compare-exchange of block-local pair t at distance j, stage k (global
// index base + i decides the direction).
fn localStep(t: u32, j: u32, k: u32, base: u32) {
  let i = 2u * j * (t / j) + (t % j);
  let a = sk[i];
  let b = sk[i + j];
  let ascending = ((base + i) & k) == 0u;
  if (greater(a, b) == ascending) {
    sk[i] = b;
    sk[i + j] = a;
  }
}

@compute @workgroup_size(WG)
fn main(
  @builtin(global_invocation_id) gid: vec3<u32>,
  @builtin(local_invocation_id) lid: vec3<u32>,
  @builtin(workgroup_id) wid: vec3<u32>,
  @builtin(num_workgroups) nwg: vec3<u32>,
) {
  if (LOCAL) {
    let block = wid.x + wid.y * nwg.x;
    let base = block * BLOCK;
    if (base >= p.n) {
      return;
    }
    let t = lid.x;
    sk[t] = KEYS[base + t];
    sk[t + WG] = KEYS[base + t + WG];
    workgroupBarrier();
    if (p.k == 0u) {
      for (var k = 2u; k <= BLOCK; k *= 2u) {
        for (var j = k / 2u; j > 0u; j /= 2u) {
          localStep(t, j, k, base);
          workgroupBarrier();
        }
      }
    } else {
      for (var j = BLOCK / 2u; j > 0u; j /= 2u) {
        localStep(t, j, p.k, base);
        workgroupBarrier();
      }
    }
    KEYS[base + t] = sk[t];
    KEYS[base + t + WG] = sk[t + WG];
  } else {
    let t = gid.x + gid.y * nwg.x * WG;
    if (t >= p.n / 2u) {
      return;
    }
    let i = 2u * p.j * (t / p.j) + (t % p.j);
    let a = KEYS[i];
    let b = KEYS[i + p.j];
    let ascending = (i & p.k) == 0u;
    if (greater(a, b) == ascending) {
      KEYS[i] = b;
      KEYS[i + p.j] = a;
    }
  }
}
