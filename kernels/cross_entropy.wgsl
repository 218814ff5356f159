// Softmax cross-entropy forward, one workgroup per row on a 2-D grid:
// probs = softmax(logits), loss = log Σ exp(x - max) - (x[target] - max).
// Targets are integers stored as f32; a target that is not an integer in
// [0, cols) yields a NaN loss; the host refuses such targets before
// dispatching, or reports them after (check_indices.wgsl).

struct Params {
  rows: u32,
  cols: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> X: array<f32>;
@group(0) @binding(2) var<storage, read> T: array<f32>;
@group(0) @binding(3) var<storage, read_write> LOSS: array<f32>;
@group(0) @binding(4) var<storage, read_write> PROBS: array<f32>;

//#include _rows.wgsl

fn rowMain(row: u32, base: u32, lid: u32) {
  var m = -3.4028234e38;
  for (var j = lid; j < p.cols; j += WG) {
    m = max(m, X[base + j]);
  }
  let mx = allMax(m, lid);
  var s = 0.0;
  for (var j = lid; j < p.cols; j += WG) {
    s += exp(X[base + j] - mx);
  }
  let tot = allSum(s, lid);
  let inv = 1.0 / tot;
  for (var j = lid; j < p.cols; j += WG) {
    PROBS[base + j] = exp(X[base + j] - mx) * inv;
  }
  if (lid == 0u) {
    let t = T[row];
    let ok = t >= 0.0 && t < f32(p.cols) && floor(t) == t;
    let ti = min(u32(max(t, 0.0)), p.cols - 1u);
    // Built at run time: a NaN constant expression is a shader-creation error.
    let nan = bitcast<f32>(0x7fc00000u | (p.rows & 0u));
    LOSS[row] = select(nan, log(tot) - (X[base + ti] - mx), ok);
  }
}
