// Elementwise out = s · x over vec4s (2-D grid, padding as in binary.wgsl).

struct Params {
  n: u32, // vec4s
  s: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> X: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> O: array<vec4<f32>>;

//#include _units.wgsl

fn unitMain(i: u32) {
  O[i] = X[i] * p.s;
}
