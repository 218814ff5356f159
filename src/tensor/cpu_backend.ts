/**
 * The CPU reference backend: Float32Array storage and plain synchronous
 * loops. It defines what every other backend's kernels must compute.
 *
 * @module
 */

import type {
  AdamWParams,
  Backend,
  BackendName,
  CrossEntropyResult,
  LayerNormResult,
  MemoryStats,
  SGDParams,
  Shape,
} from "./backend.ts";
import { MemoryTracker } from "./_memory.ts";
import { rowCount } from "./_rows.ts";
import { checkFromData, checkZeros } from "./_validate.ts";
import { shapeSize, Tensor } from "./tensor.ts";

const GELU_C = Math.sqrt(2 / Math.PI);
const GELU_A = 0.044715;

/** Storage of a CPU tensor. */
function data(t: Tensor): Float32Array {
  return t.storage as Float32Array;
}

/**
 * The CPU reference backend. Kernels run synchronously on Float32Array
 * storage; sums are accumulated in JS numbers (f64) and stored as f32.
 *
 * Integer inputs (embedding ids, cross-entropy targets) are checked here
 * against the table size before anything is written, since only the CPU can
 * see values synchronously.
 *
 * @example
 * ```ts
 * import { CpuBackend, ops } from "@conveyor/core";
 * const be = new CpuBackend();
 * const a = be.fromData(new Float32Array([1, 2, 3, 4]), [2, 2]);
 * const c = ops.matmul(a, a);
 * console.log(await c.toArray()); // Float32Array [7, 10, 15, 22]
 * ```
 */
export class CpuBackend implements Backend {
  /** Always `"cpu"`. */
  readonly name: BackendName = "cpu";
  /** Human-readable description. */
  readonly description: string = "CPU reference (Float32Array)";
  readonly #memory = new MemoryTracker();

  /** Memory accounting of tensors created on this backend. */
  get memory(): MemoryStats {
    return this.#memory;
  }

  #wrap(shape: Shape, buf: Float32Array): Tensor {
    this.#memory.alloc(buf.byteLength);
    return new Tensor(this, shape, buf, buf.byteLength);
  }

  #alloc(shape: Shape): [Tensor, Float32Array] {
    const buf = new Float32Array(shapeSize(shape));
    return [this.#wrap(shape, buf), buf];
  }

  // ---- storage -----------------------------------------------------------

  /** Creates a tensor holding a copy of `data`. */
  fromData(data: Float32Array, shape: Shape): Tensor {
    checkFromData(data, shape);
    return this.#wrap(shape, new Float32Array(data));
  }

  /** Creates a tensor of zeros. */
  zeros(shape: Shape): Tensor {
    checkZeros(shape);
    return this.#alloc(shape)[0];
  }

  /** Copies a tensor's contents out. */
  read(t: Tensor): Promise<Float32Array> {
    return Promise.resolve(this.readSync(t));
  }

  /** Copies a tensor's contents out now (the data is in host memory). */
  readSync(t: Tensor): Float32Array {
    return new Float32Array(data(t));
  }

  /** Releases storage (called by `Tensor.dispose`). */
  release(_storage: unknown, bytes: number): void {
    this.#memory.free(bytes);
  }

  /** No-op: CPU kernels run synchronously. */
  flush(): void {}

  /** Resolves at once: CPU kernels run synchronously. */
  sync(): Promise<void> {
    return Promise.resolve();
  }

  /** No resources to release. */
  destroy(): void {}

  // ---- kernels -------------------------------------------------------------

  /** Batched matrix product (see `Backend.matmul`). */
  matmul(a: Tensor, b: Tensor, transA: boolean, transB: boolean): Tensor {
    const ar = a.shape.length, br = b.shape.length;
    const M = transA ? a.shape[ar - 1] : a.shape[ar - 2];
    const K = transA ? a.shape[ar - 2] : a.shape[ar - 1];
    const N = transB ? b.shape[br - 2] : b.shape[br - 1];
    const batch = shapeSize(a.shape.slice(0, -2));
    const [out, C] = this.#alloc([...a.shape.slice(0, -2), M, N]);
    const A = data(a), B = data(b);
    const bShared = br === 2;
    const acc = new Float64Array(N);
    // Transposing b up front keeps the inner loop contiguous (i-k-j order).
    let Bt: Float32Array | null = null;
    for (let bi = 0; bi < batch; bi++) {
      const aOff = bi * M * K;
      let Bm: Float32Array, bOff: number;
      if (transB) {
        if (Bt === null || !bShared) {
          Bt = transpose2d(B, bShared ? 0 : bi * K * N, N, K, Bt);
        }
        Bm = Bt;
        bOff = 0;
      } else {
        Bm = B;
        bOff = bShared ? 0 : bi * K * N;
      }
      const cOff = bi * M * N;
      for (let i = 0; i < M; i++) {
        acc.fill(0);
        for (let k = 0; k < K; k++) {
          const aik = transA ? A[aOff + k * M + i] : A[aOff + i * K + k];
          const row = bOff + k * N;
          for (let j = 0; j < N; j++) acc[j] += aik * Bm[row + j];
        }
        C.set(acc, cOff + i * N);
      }
    }
    return out;
  }

  /** Elementwise `a + b`. */
  add(a: Tensor, b: Tensor): Tensor {
    const [out, O] = this.#alloc(a.shape);
    const A = data(a), B = data(b);
    for (let i = 0; i < O.length; i++) O[i] = A[i] + B[i];
    return out;
  }

  /** Elementwise `a - b`. */
  sub(a: Tensor, b: Tensor): Tensor {
    const [out, O] = this.#alloc(a.shape);
    const A = data(a), B = data(b);
    for (let i = 0; i < O.length; i++) O[i] = A[i] - B[i];
    return out;
  }

  /** Elementwise `a * b`. */
  mul(a: Tensor, b: Tensor): Tensor {
    const [out, O] = this.#alloc(a.shape);
    const A = data(a), B = data(b);
    for (let i = 0; i < O.length; i++) O[i] = A[i] * B[i];
    return out;
  }

  /** `x + bias` broadcast over rows. */
  addBias(x: Tensor, bias: Tensor): Tensor {
    const [out, O] = this.#alloc(x.shape);
    const X = data(x), Bv = data(bias);
    const n = x.cols, rows = x.size / (n || 1);
    for (let r = 0; r < rows; r++) {
      const o = r * n;
      for (let j = 0; j < n; j++) O[o + j] = X[o + j] + Bv[j];
    }
    return out;
  }

  /** `s * x`. */
  scale(x: Tensor, s: number): Tensor {
    const [out, O] = this.#alloc(x.shape);
    const X = data(x);
    for (let i = 0; i < O.length; i++) O[i] = X[i] * s;
    return out;
  }

  /** In place `y += alpha * x`. */
  axpyInPlace(y: Tensor, alpha: number, x: Tensor): void {
    const Y = data(y), X = data(x);
    for (let i = 0; i < Y.length; i++) Y[i] += alpha * X[i];
  }

  /** In place fill. */
  fillInPlace(x: Tensor, value: number): void {
    data(x).fill(value);
  }

  /** A fresh copy. */
  copy(x: Tensor): Tensor {
    return this.#wrap(x.shape, new Float32Array(data(x)));
  }

  /** In place `dst ← src`. */
  copyInPlace(dst: Tensor, src: Tensor): void {
    data(dst).set(data(src));
  }

  /** In place `x ← s * x`. */
  scaleInPlace(x: Tensor, s: number): void {
    const X = data(x);
    for (let i = 0; i < X.length; i++) X[i] *= s;
  }

  /** `max(x, 0)`. */
  relu(x: Tensor): Tensor {
    const [out, O] = this.#alloc(x.shape);
    const X = data(x);
    for (let i = 0; i < O.length; i++) O[i] = X[i] > 0 ? X[i] : 0;
    return out;
  }

  /** `dy * (x > 0)`. */
  reluBackward(x: Tensor, dy: Tensor): Tensor {
    const [out, O] = this.#alloc(x.shape);
    const X = data(x), G = data(dy);
    for (let i = 0; i < O.length; i++) O[i] = X[i] > 0 ? G[i] : 0;
    return out;
  }

  /** GELU (tanh approximation). */
  gelu(x: Tensor): Tensor {
    const [out, O] = this.#alloc(x.shape);
    const X = data(x);
    for (let i = 0; i < O.length; i++) {
      const v = X[i];
      O[i] = 0.5 * v * (1 + Math.tanh(GELU_C * (v + GELU_A * v * v * v)));
    }
    return out;
  }

  /** `dy * gelu'(x)`. */
  geluBackward(x: Tensor, dy: Tensor): Tensor {
    const [out, O] = this.#alloc(x.shape);
    const X = data(x), G = data(dy);
    for (let i = 0; i < O.length; i++) {
      const v = X[i];
      const t = Math.tanh(GELU_C * (v + GELU_A * v * v * v));
      const du = GELU_C * (1 + 3 * GELU_A * v * v);
      O[i] = G[i] * (0.5 * (1 + t) + 0.5 * v * (1 - t * t) * du);
    }
    return out;
  }

  /** `tanh(x)`. */
  tanh(x: Tensor): Tensor {
    const [out, O] = this.#alloc(x.shape);
    const X = data(x);
    for (let i = 0; i < O.length; i++) O[i] = Math.tanh(X[i]);
    return out;
  }

  /** `dy * (1 - y²)`. */
  tanhBackward(y: Tensor, dy: Tensor): Tensor {
    const [out, O] = this.#alloc(y.shape);
    const Y = data(y), G = data(dy);
    for (let i = 0; i < O.length; i++) O[i] = G[i] * (1 - Y[i] * Y[i]);
    return out;
  }

  /** Row softmax, optionally causal. */
  softmax(x: Tensor, causal: boolean): Tensor {
    const [out, O] = this.#alloc(x.shape);
    const X = data(x);
    const n = x.cols, rows = rowCount(x);
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
      // Entries past lim stay 0 (fresh storage).
    }
    return out;
  }

  /** Softmax input gradient. */
  softmaxBackward(y: Tensor, dy: Tensor): Tensor {
    const [out, O] = this.#alloc(y.shape);
    const Y = data(y), G = data(dy);
    const n = y.cols, rows = rowCount(y);
    for (let r = 0; r < rows; r++) {
      const o = r * n;
      let dot = 0;
      for (let j = 0; j < n; j++) dot += Y[o + j] * G[o + j];
      for (let j = 0; j < n; j++) O[o + j] = Y[o + j] * (G[o + j] - dot);
    }
    return out;
  }

  /** Layer norm forward. */
  layerNorm(x: Tensor, gamma: Tensor, beta: Tensor, eps: number): LayerNormResult {
    const n = x.cols, rows = rowCount(x);
    const [y, Y] = this.#alloc(x.shape);
    const [mean, Mn] = this.#alloc([rows]);
    const [rstd, Rs] = this.#alloc([rows]);
    const X = data(x), Gm = data(gamma), Bt = data(beta);
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
      const rs = 1 / Math.sqrt(v / n + eps);
      Mn[r] = mu;
      Rs[r] = rs;
      // Use the stored f32 statistics so backward sees exactly what forward used.
      const muF = Mn[r], rsF = Rs[r];
      for (let j = 0; j < n; j++) Y[o + j] = (X[o + j] - muF) * rsF * Gm[j] + Bt[j];
    }
    return { y, mean, rstd };
  }

  /** Layer norm input gradient. */
  layerNormBackwardInput(
    dy: Tensor,
    x: Tensor,
    mean: Tensor,
    rstd: Tensor,
    gamma: Tensor,
  ): Tensor {
    const n = x.cols, rows = rowCount(x);
    const [out, O] = this.#alloc(x.shape);
    const X = data(x), G = data(dy), Mn = data(mean), Rs = data(rstd), Gm = data(gamma);
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
    return out;
  }

  /** Layer norm weight gradients. */
  layerNormBackwardWeight(
    dy: Tensor,
    x: Tensor,
    mean: Tensor,
    rstd: Tensor,
  ): { dgamma: Tensor; dbeta: Tensor } {
    const n = x.cols, rows = rowCount(x);
    const X = data(x), G = data(dy), Mn = data(mean), Rs = data(rstd);
    const dg = new Float64Array(n), db = new Float64Array(n);
    for (let r = 0; r < rows; r++) {
      const o = r * n, mu = Mn[r], rs = Rs[r];
      for (let j = 0; j < n; j++) {
        const g = G[o + j];
        dg[j] += g * (X[o + j] - mu) * rs;
        db[j] += g;
      }
    }
    return {
      dgamma: this.#wrap([n], Float32Array.from(dg)),
      dbeta: this.#wrap([n], Float32Array.from(db)),
    };
  }

  /** Column sums `[..., N]` → `[N]`. */
  sumRows(x: Tensor): Tensor {
    const n = x.cols, rows = rowCount(x);
    const X = data(x), acc = new Float64Array(n);
    for (let r = 0; r < rows; r++) {
      const o = r * n;
      for (let j = 0; j < n; j++) acc[j] += X[o + j];
    }
    return this.#wrap([n], Float32Array.from(acc));
  }

  /** Sum of all elements, `[1]`. */
  sum(x: Tensor): Tensor {
    const X = data(x);
    let s = 0;
    for (let i = 0; i < X.length; i++) s += X[i];
    return this.#wrap([1], Float32Array.of(s));
  }

  /** Sum of squares, `[1]`. */
  sumSquares(x: Tensor): Tensor {
    const X = data(x);
    let s = 0;
    for (let i = 0; i < X.length; i++) s += X[i] * X[i];
    return this.#wrap([1], Float32Array.of(s));
  }

  /** Softmax cross-entropy forward. */
  crossEntropy(logits: Tensor, targets: Tensor): CrossEntropyResult {
    const n = logits.cols, rows = rowCount(logits);
    const T = data(targets);
    checkIndices("crossEntropy", "target", T, n);
    const X = data(logits);
    const [probs, P] = this.#alloc(logits.shape);
    const [loss, L] = this.#alloc([rows]);
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
    return { loss, probs };
  }

  /** `(probs - onehot(targets)) * scale`. */
  crossEntropyBackward(probs: Tensor, targets: Tensor, scale: number): Tensor {
    const n = probs.cols, rows = rowCount(probs);
    const T = data(targets);
    checkIndices("crossEntropyBackward", "target", T, n);
    const P = data(probs);
    const [out, O] = this.#alloc(probs.shape);
    for (let i = 0; i < P.length; i++) O[i] = P[i] * scale;
    for (let r = 0; r < rows; r++) O[r * n + T[r]] = (P[r * n + T[r]] - 1) * scale;
    return out;
  }

  /** Row gather. */
  embedding(table: Tensor, ids: Tensor): Tensor {
    const [V, C] = table.shape;
    const I = data(ids);
    checkIndices("embedding", "id", I, V);
    const Tb = data(table);
    const [out, O] = this.#alloc([...ids.shape, C]);
    for (let i = 0; i < I.length; i++) O.set(Tb.subarray(I[i] * C, I[i] * C + C), i * C);
    return out;
  }

  /** Scatter-add of `dy` rows into `dTable`. */
  embeddingBackwardInPlace(dTable: Tensor, ids: Tensor, dy: Tensor): void {
    const [V, C] = dTable.shape;
    const I = data(ids);
    checkIndices("embeddingBackwardInPlace", "id", I, V);
    const D = data(dTable), G = data(dy);
    for (let i = 0; i < I.length; i++) {
      const o = I[i] * C, g = i * C;
      for (let j = 0; j < C; j++) D[o + j] += G[g + j];
    }
  }

  /** AdamW with bias correction and decoupled weight decay. */
  adamwInPlace(param: Tensor, grad: Tensor, m: Tensor, v: Tensor, hp: AdamWParams): void {
    const P = data(param), G = data(grad), Mm = data(m), Vv = data(v);
    const { lr, beta1, beta2, eps, weightDecay, step } = hp;
    const bc1 = 1 - Math.pow(beta1, step), bc2 = 1 - Math.pow(beta2, step);
    for (let i = 0; i < P.length; i++) {
      const g = G[i];
      const mi = beta1 * Mm[i] + (1 - beta1) * g;
      const vi = beta2 * Vv[i] + (1 - beta2) * g * g;
      Mm[i] = mi;
      Vv[i] = vi;
      const p = P[i];
      P[i] = p - lr * ((mi / bc1) / (Math.sqrt(vi / bc2) + eps) + weightDecay * p);
    }
  }

  /** SGD with optional momentum buffer and L2 weight decay. */
  sgdInPlace(param: Tensor, grad: Tensor, buf: Tensor | null, hp: SGDParams): void {
    const P = data(param), G = data(grad);
    const { lr, momentum, weightDecay } = hp;
    if (buf === null) {
      for (let i = 0; i < P.length; i++) P[i] -= lr * (G[i] + weightDecay * P[i]);
      return;
    }
    const Bf = data(buf);
    for (let i = 0; i < P.length; i++) {
      // The stored (f32) buffer drives the step, as in the unfused update.
      Bf[i] = momentum * Bf[i] + (G[i] + weightDecay * P[i]);
      P[i] -= lr * Bf[i];
    }
  }

  /** Copy of rows `[start, end)` along dimension 0. */
  sliceRows(x: Tensor, start: number, end: number): Tensor {
    const inner = shapeSize(x.shape.slice(1));
    const shape = [end - start, ...x.shape.slice(1)];
    return this.#wrap(shape, data(x).slice(start * inner, end * inner));
  }

  /** Concatenation along dimension 0. */
  concatRows(parts: readonly Tensor[]): Tensor {
    const rest = parts[0].shape.slice(1);
    let rows = 0;
    for (const p of parts) rows += p.shape[0];
    const [out, O] = this.#alloc([rows, ...rest]);
    let off = 0;
    for (const p of parts) {
      O.set(data(p), off);
      off += p.size;
    }
    return out;
  }

  /** Axis permutation (a copy). */
  permute(x: Tensor, perm: readonly number[]): Tensor {
    const rank = x.shape.length;
    const outShape = perm.map((p) => x.shape[p]);
    const [out, O] = this.#alloc(outShape);
    const X = data(x);
    if (O.length === 0) return out;
    if (rank === 0) {
      O[0] = X[0];
      return out;
    }
    const inStrides = new Array<number>(rank);
    let s = 1;
    for (let d = rank - 1; d >= 0; d--) {
      inStrides[d] = s;
      s *= x.shape[d];
    }
    // Input stride of each output axis; the innermost output axis runs in a tight loop.
    const st = perm.map((p) => inStrides[p]);
    const last = rank - 1, nLast = outShape[last], sLast = st[last];
    const idx = new Array<number>(rank).fill(0);
    let src = 0;
    for (let o = 0; o < O.length; o += nLast) {
      let k = src;
      for (let j = 0; j < nLast; j++, k += sLast) O[o + j] = X[k];
      // Odometer over the outer output axes.
      for (let d = last - 1; d >= 0; d--) {
        idx[d]++;
        src += st[d];
        if (idx[d] < outShape[d]) break;
        src -= st[d] * outShape[d];
        idx[d] = 0;
      }
    }
    return out;
  }
}

/** `src` rows×cols (from offset) → a fresh or reused cols×rows matrix. */
function transpose2d(
  src: Float32Array,
  off: number,
  rows: number,
  cols: number,
  reuse: Float32Array | null,
): Float32Array {
  const t = reuse !== null && reuse.length === rows * cols ? reuse : new Float32Array(rows * cols);
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) t[c * rows + r] = src[off + r * cols + c];
  }
  return t;
}

/** Throws a RangeError unless every value is an integer in [0, n). */
function checkIndices(op: string, what: string, values: Float32Array, n: number): void {
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (!Number.isInteger(v) || v < 0 || v >= n) {
      throw new RangeError(
        `${op}: ${what} at position ${i} must be an integer in [0, ${n}), got ${v}`,
      );
    }
  }
}
