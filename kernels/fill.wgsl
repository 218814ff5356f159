// In place x = value over vec4s (2-D grid, padding as in binary.wgsl).

struct Params {
  n: u32, // vec4s
  value: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> X: array<vec4<f32>>;

//#include _units.wgsl

fn unitMain(i: u32) {
  X[i] = vec4<f32>(p.value);
}
