// Elementwise out = a (op) b over vec4s; OP selects the op by one of the
// named codes below (the host's table of them is checked against these
// declarations when the kernels load).
//
// Buffers are sized in whole vec4s, so the last vec4 may run into padding
// past the tensor's end; that padding is never read as data.
// Launched as a 2-D grid of workgroups (x ≤ 65535) for large tensors.

const OP: u32 = 0u;
const OP_ADD: u32 = 0u;
const OP_SUB: u32 = 1u;
const OP_MUL: u32 = 2u;
const WG: u32 = 256u;

struct Params {
  n4: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> A: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> B: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> O: array<vec4<f32>>;

@compute @workgroup_size(WG)
fn main(
  @builtin(global_invocation_id) gid: vec3<u32>,
  @builtin(num_workgroups) nwg: vec3<u32>,
) {
  let i = gid.x + gid.y * nwg.x * WG;
  if (i >= p.n4) {
    return;
  }
  let a = A[i];
  let b = B[i];
  if (OP == OP_ADD) {
    O[i] = a + b;
  } else if (OP == OP_SUB) {
    O[i] = a - b;
  } else {
    O[i] = a * b;
  }
}
