// Axis permutation (a copy), one output element per invocation on a 2-D
// grid. The host passes the output shape and, for each output axis, the
// stride of the input axis it comes from (rank ≤ 8 after merging axes that
// stay adjacent).

struct Params {
  n: u32,
  rank: u32,
  // Output shape and matching input strides, 4 axes per vec4.
  shape: array<vec4<u32>, 2>,
  strides: array<vec4<u32>, 2>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> X: array<f32>;
@group(0) @binding(2) var<storage, read_write> O: array<f32>;

//#include _units.wgsl

fn unitMain(i: u32) {
  var rest = i;
  var src = 0u;
  for (var d = 0u; d < p.rank; d++) {
    let axis = p.rank - 1u - d;
    let dim = p.shape[axis / 4u][axis % 4u];
    src += (rest % dim) * p.strides[axis / 4u][axis % 4u];
    rest /= dim;
  }
  O[i] = X[src];
}
