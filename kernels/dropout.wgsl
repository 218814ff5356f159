// Dropout over vec4s: element i (flat index in this tensor) has global
// index g = base + i (mod 2^32) in the full batch, and is dropped when
// hash(g, key) < threshold; kept elements are scaled. The hash and the key
// are those of src/tensor/_dropout_hash.ts, in the same u32 arithmetic, so
// the CPU and this kernel drop the same elements bit for bit. A NaN input
// stays NaN (x · 0 is NaN). 2-D grid, padding as in binary.wgsl.

struct Params {
  n: u32, // vec4s
  key: u32,
  base: u32,
  threshold: u32,
  scale: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> X: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> O: array<vec4<f32>>;

// One LCG step and the PCG RXS-M-XS output function.
fn pcg(v: vec4<u32>) -> vec4<u32> {
  let state = v * 747796405u + 2891336453u;
  let word = ((state >> ((state >> vec4<u32>(28u)) + 4u)) ^ state) * 277803737u;
  return (word >> vec4<u32>(22u)) ^ word;
}

//#include _units.wgsl

fn unitMain(i: u32) {
  let g = p.base + 4u * i + vec4<u32>(0u, 1u, 2u, 3u);
  let h = pcg(pcg(g ^ vec4<u32>(p.key)) + p.key);
  let factor = select(vec4<f32>(0.0), vec4<f32>(p.scale), h >= vec4<u32>(p.threshold));
  O[i] = X[i] * factor;
}
