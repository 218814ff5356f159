/**
 * CPU reference (exact mode) of the row-wise ops: softmax, layer norm and
 * RMS norm (forward, input gradient, weight gradient), log-sum-exp,
 * cross-entropy, column sums. Rows are the product of all dimensions but
 * the last; sums run in f64, in order, and are stored as f32. The fast
 * mode's kernels (`kernels/wasm/rows.c`) are tested against these.
 *
 * @module
 */

/** Row softmax of `rows` rows of `n`; causal: row r keeps its first (r mod n) + 1 values. */
export function softmaxInto(
  X: Float32Array,
  rows: number,
  n: number,
  causal: boolean,
  O: Float32Array,
): void {
  for (let r = 0; r < rows; r++) {
    const o = r * n;
    // Row r of a [..., T, T] score block is query r mod T (T = n).
    const lim = causal ? (r % n) + 1 : n;
    let mx = -Infinity;
    for (let j = 0; j < lim; j++) if (X[o + j] > mx) mx = X[o + j];
    let s = 0;
    for (let j = 0; j < lim; j++) {
      const e = Math.exp(X[o + j] - mx);
      O[o + j] = e;
      s += e;
    }
    const inv = 1 / s;
    for (let j = 0; j < lim; j++) O[o + j] *= inv;
    for (let j = lim; j < n; j++) O[o + j] = 0;
  }
}

/** Softmax input gradient: `dx = y (dy − Σ y dy)` per row. */
export function softmaxBackwardInto(
  Y: Float32Array,
  G: Float32Array,
  rows: number,
  n: number,
  O: Float32Array,
): void {
  for (let r = 0; r < rows; r++) {
    const o = r * n;
    let dot = 0;
    for (let j = 0; j < n; j++) dot += Y[o + j] * G[o + j];
    for (let j = 0; j < n; j++) O[o + j] = Y[o + j] * (G[o + j] - dot);
  }
}

/**
 * Layer norm: per row mean and `rstd = 1 / sqrt(var + eps)` (stored as f32
 * in `Mn`, `Rs` and used as stored, so backward sees what forward used),
 * `y = (x − mean) · rstd · gamma + beta`.
 */
export function layerNormInto(
  X: Float32Array,
  Gm: Float32Array,
  Bt: Float32Array,
  eps: number,
  rows: number,
  n: number,
  Y: Float32Array,
  Mn: Float32Array,
  Rs: Float32Array,
): void {
  for (let r = 0; r < rows; r++) {
    const o = r * n;
    let s = 0;
    for (let j = 0; j < n; j++) s += X[o + j];
    const mu = s / n;
    let v = 0;
    for (let j = 0; j < n; j++) {
      const d = X[o + j] - mu;
      v += d * d;
    }
    Mn[r] = mu;
    Rs[r] = 1 / Math.sqrt(v / n + eps);
    const muF = Mn[r], rsF = Rs[r];
    for (let j = 0; j < n; j++) Y[o + j] = (X[o + j] - muF) * rsF * Gm[j] + Bt[j];
  }
}

/** Layer norm input gradient: with g = dy·gamma, x̂ = (x − mean)·rstd, `dx = rstd (g − mean(g) − x̂ mean(g x̂))`. */
export function layerNormBackwardInputInto(
  G: Float32Array,
  X: Float32Array,
  Mn: Float32Array,
  Rs: Float32Array,
  Gm: Float32Array,
  rows: number,
  n: number,
  O: Float32Array,
): void {
  for (let r = 0; r < rows; r++) {
    const o = r * n, mu = Mn[r], rs = Rs[r];
    let sg = 0, sgx = 0;
    for (let j = 0; j < n; j++) {
      const g = G[o + j] * Gm[j];
      sg += g;
      sgx += g * (X[o + j] - mu) * rs;
    }
    sg /= n;
    sgx /= n;
    for (let j = 0; j < n; j++) {
      const xh = (X[o + j] - mu) * rs;
      O[o + j] = rs * (G[o + j] * Gm[j] - sg - xh * sgx);
    }
  }
}

/** Layer norm weight gradients: `dgamma = Σ_rows dy · x̂`, `dbeta = Σ_rows dy`. */
export function layerNormBackwardWeightInto(
  G: Float32Array,
  X: Float32Array,
  Mn: Float32Array,
  Rs: Float32Array,
  rows: number,
  n: number,
  DG: Float32Array,
  DB: Float32Array,
): void {
  const dg = new Float64Array(n), db = new Float64Array(n);
  for (let r = 0; r < rows; r++) {
    const o = r * n, mu = Mn[r], rs = Rs[r];
    for (let j = 0; j < n; j++) {
      const g = G[o + j];
      dg[j] += g * (X[o + j] - mu) * rs;
      db[j] += g;
    }
  }
  DG.set(dg);
  DB.set(db);
}

/** Column sums `[rows, n]` → `[n]`. */
export function sumRowsInto(X: Float32Array, rows: number, n: number, O: Float32Array): void {
  const acc = new Float64Array(n);
  for (let r = 0; r < rows; r++) {
    const o = r * n;
    for (let j = 0; j < n; j++) acc[j] += X[o + j];
  }
  O.set(acc);
}

/**
 * Softmax cross-entropy per row: `P` the probabilities, `L[r] = log Σ exp
 * − x[target]` (stable, with the row maximum taken out).
 */
export function crossEntropyInto(
  X: Float32Array,
  T: Float32Array,
  rows: number,
  n: number,
  P: Float32Array,
  L: Float32Array,
): void {
  for (let r = 0; r < rows; r++) {
    const o = r * n;
    let mx = -Infinity;
    for (let j = 0; j < n; j++) if (X[o + j] > mx) mx = X[o + j];
    let s = 0;
    for (let j = 0; j < n; j++) {
      const e = Math.exp(X[o + j] - mx);
      P[o + j] = e;
      s += e;
    }
    const inv = 1 / s;
    for (let j = 0; j < n; j++) P[o + j] *= inv;
    L[r] = Math.log(s) - (X[o + T[r]] - mx);
  }
}

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

/** Cross-entropy input gradient `(probs − onehot(targets)) · scale`, rows of `n`. */
export function crossEntropyBackwardInto(
  P: Float32Array,
  T: Float32Array,
  n: number,
  scale: number,
  O: Float32Array,
): void {
  for (let i = 0; i < P.length; i++) O[i] = P[i] * scale;
  for (let r = 0; r < T.length; r++) O[r * n + T[r]] = (P[r * n + T[r]] - 1) * scale;
}
