// Row-wise log Σ exp over the last dimension, one workgroup per row on a
// 2-D grid, stable: m + log Σ exp(x - m) with m the row maximum. A row
// holding NaN gives NaN (tested by bits: `max` may drop a NaN); a row whose
// maximum is ±inf gives that maximum.

struct Params {
  rows: u32,
  cols: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> X: array<f32>;
@group(0) @binding(2) var<storage, read_write> O: array<f32>;

//#include _rows.wgsl
//#include _nan.wgsl

fn rowMain(row: u32, base: u32, lid: u32) {
  // -inf, built at run time (an infinite constant is a shader-creation error).
  let negInf = bitcast<f32>(0xff800000u | (p.rows & 0u));
  var m = negInf;
  var nans = 0.0;
  for (var j = lid; j < p.cols; j += WG) {
    let v = X[base + j];
    if (isNan(v)) {
      nans += 1.0;
    } else {
      m = max(m, v);
    }
  }
  let mx = allMax(m, lid);
  let anyNan = allSum(nans, lid) > 0.0;
  var s = 0.0;
  for (var j = lid; j < p.cols; j += WG) {
    let v = X[base + j];
    if (!isNan(v)) {
      s += exp(v - mx);
    }
  }
  let tot = allSum(s, lid);
  if (lid == 0u) {
    let infinite = (bitcast<u32>(mx) & 0x7fffffffu) == 0x7f800000u;
    var r = select(mx + log(tot), mx, infinite);
    if (anyNan) {
      r = bitcast<f32>(0x7fc00000u | (p.rows & 0u));
    }
    O[row] = r;
  }
}
