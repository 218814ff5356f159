// out[r, c] = x[r, c] + bias[c]. With VEC the row length is a multiple of 4
// and whole vec4s are processed; otherwise one element per invocation.
// 2-D grid of workgroups for large tensors.

const VEC: bool = false;

struct Params {
  // Units (vec4s with VEC, else floats) in x, and per row.
  n: u32,
  cols: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
//#if VEC
@group(0) @binding(1) var<storage, read> X: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> BIAS: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> O: array<vec4<f32>>;
//#else
@group(0) @binding(1) var<storage, read> X: array<f32>;
@group(0) @binding(2) var<storage, read> BIAS: array<f32>;
@group(0) @binding(3) var<storage, read_write> O: array<f32>;
//#endif

//#include _units.wgsl

fn unitMain(i: u32) {
  O[i] = X[i] + BIAS[i % p.cols];
}
