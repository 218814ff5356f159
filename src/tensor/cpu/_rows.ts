/**
 * CPU reference of the row-wise ops added beside softmax and layer norm:
 * RMS norm (forward, input gradient, weight gradient) and log-sum-exp.
 * Rows are the product of all dimensions but the last; sums run in f64.
 *
 * @module
 */

/**
 * RMS norm of `rows` rows of `n`: `rstd = 1 / sqrt(mean(x²) + eps)` (stored
 * as f32 in `Rs` and used as stored), `y = x · rstd · w`.
 */
export function rmsNormInto(
  X: Float32Array,
  W: Float32Array,
  eps: number,
  rows: number,
  n: number,
  Y: Float32Array,
  Rs: Float32Array,
): void {
  for (let r = 0; r < rows; r++) {
    const o = r * n;
    let ss = 0;
    for (let j = 0; j < n; j++) ss += X[o + j] * X[o + j];
    Rs[r] = 1 / Math.sqrt(ss / n + eps);
    const rs = Rs[r];
    for (let j = 0; j < n; j++) Y[o + j] = X[o + j] * rs * W[j];
  }
}

/** RMS norm input gradient: with g = dy·w and x̂ = x·rstd, `dx = rstd·(g − x̂·mean(g·x̂))`. */
export function rmsNormBackwardInputInto(
  G: Float32Array,
  X: Float32Array,
  Rs: Float32Array,
  W: Float32Array,
  rows: number,
  n: number,
  O: Float32Array,
): void {
  for (let r = 0; r < rows; r++) {
    const o = r * n, rs = Rs[r];
    let sgx = 0;
    for (let j = 0; j < n; j++) sgx += G[o + j] * W[j] * X[o + j] * rs;
    sgx /= n;
    for (let j = 0; j < n; j++) {
      O[o + j] = rs * (G[o + j] * W[j] - X[o + j] * rs * sgx);
    }
  }
}

/** RMS norm weight gradient: `dw = Σ_rows dy · x · rstd`, `[n]`. */
export function rmsNormBackwardWeight(
  G: Float32Array,
  X: Float32Array,
  Rs: Float32Array,
  rows: number,
  n: number,
): Float32Array {
  const acc = new Float64Array(n);
  for (let r = 0; r < rows; r++) {
    const o = r * n, rs = Rs[r];
    for (let j = 0; j < n; j++) acc[j] += G[o + j] * X[o + j] * rs;
  }
  return Float32Array.from(acc);
}

/**
 * `log Σ exp(x)` per row, stable: `m + log Σ exp(x − m)` with m the row
 * maximum; NaN if the row holds a NaN, m itself when m is ±∞.
 */
export function logSumExpInto(X: Float32Array, rows: number, n: number, O: Float32Array): void {
  for (let r = 0; r < rows; r++) {
    const o = r * n;
    let m = -Infinity, nan = false;
    for (let j = 0; j < n; j++) {
      const v = X[o + j];
      if (v !== v) nan = true;
      else if (v > m) m = v;
    }
    if (nan) {
      O[r] = NaN;
      continue;
    }
    if (m === Infinity || m === -Infinity) {
      O[r] = m;
      continue;
    }
    let s = 0;
    for (let j = 0; j < n; j++) s += Math.exp(X[o + j] - m);
    O[r] = m + Math.log(s);
  }
}
