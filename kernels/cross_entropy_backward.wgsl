// Cross-entropy input gradient: out[r, c] = (probs[r, c] - [c == target[r]]) ·
// scale, one element per invocation on a 2-D grid.

struct Params {
  n: u32,
  cols: u32,
  scale: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> P: array<f32>;
@group(0) @binding(2) var<storage, read> T: array<f32>;
@group(0) @binding(3) var<storage, read_write> O: array<f32>;

//#include _units.wgsl

fn unitMain(i: u32) {
  let c = i % p.cols;
  let hit = T[i / p.cols] == f32(c);
  O[i] = select(P[i], P[i] - 1.0, hit) * p.scale;
}
