/**
 * The kernels that differ between the CPU backend's two modes, as one
 * interface over Float32Array storage: {@linkcode EXACT_KERNELS} (the f64
 * reference loops) and `WasmKernels` (WebAssembly SIMD over the shared
 * memory the arrays are views of). The backend holds one of the two and
 * calls it; every other op is the same JavaScript loop in both modes.
 *
 * @module
 */

import type { AdamWParams, BinaryOp, Shape, UnaryGradOp, UnaryOp } from "../backend.ts";
import {
  addBiasInto,
  binaryInto,
  type Operand,
  unaryBackwardInto,
  unaryInto,
} from "./_elementwise.ts";
import { permuteInto } from "./_layout.ts";
import { matmulInto } from "./_matmul.ts";
import { adamwInto } from "./_optimizers.ts";
import {
  layerNormBackwardInputInto,
  layerNormBackwardWeightInto,
  layerNormInto,
  softmaxBackwardInto,
  softmaxInto,
  sumRowsInto,
} from "./_rows.ts";

/** The mode-specific kernels; shapes as the reference functions' docs say. */
export interface CpuKernels {
  /** See `matmulInto`. */
  matmul(
    A: Float32Array,
    B: Float32Array,
    C: Float32Array,
    batch: number,
    M: number,
    K: number,
    N: number,
    transA: boolean,
    transB: boolean,
    bShared: boolean,
  ): void;
  /** See `addBiasInto`. */
  addBias(X: Float32Array, Bv: Float32Array, rows: number, n: number, O: Float32Array): void;
  /** See `unaryInto`. */
  unary(op: UnaryOp, X: Float32Array, O: Float32Array): void;
  /** See `unaryBackwardInto`. */
  unaryBackward(op: UnaryGradOp, V: Float32Array, G: Float32Array, O: Float32Array): void;
  /** See `softmaxInto`. */
  softmax(X: Float32Array, rows: number, n: number, causal: boolean, O: Float32Array): void;
  /** See `softmaxBackwardInto`. */
  softmaxBackward(Y: Float32Array, G: Float32Array, rows: number, n: number, O: Float32Array): void;
  /** See `layerNormInto`. */
  layerNorm(
    X: Float32Array,
    Gm: Float32Array,
    Bt: Float32Array,
    eps: number,
    rows: number,
    n: number,
    Y: Float32Array,
    Mn: Float32Array,
    Rs: Float32Array,
  ): void;
  /** See `layerNormBackwardInputInto`. */
  layerNormBackwardInput(
    G: Float32Array,
    X: Float32Array,
    Mn: Float32Array,
    Rs: Float32Array,
    Gm: Float32Array,
    rows: number,
    n: number,
    O: Float32Array,
  ): void;
  /** See `layerNormBackwardWeightInto`. */
  layerNormBackwardWeight(
    G: Float32Array,
    X: Float32Array,
    Mn: Float32Array,
    Rs: Float32Array,
    rows: number,
    n: number,
    DG: Float32Array,
    DB: Float32Array,
  ): void;
  /** See `sumRowsInto`. */
  sumRows(X: Float32Array, rows: number, n: number, O: Float32Array): void;
  /** See `binaryInto`. */
  binary(op: BinaryOp, a: Operand, b: Operand, out: Shape, O: Float32Array): void;
  /** See `permuteInto`. */
  permute(X: Float32Array, shape: Shape, perm: readonly number[], O: Float32Array): void;
  /** See `adamwInto`. */
  adamw(P: Float32Array, G: Float32Array, M: Float32Array, V: Float32Array, hp: AdamWParams): void;
}

/** The exact mode's kernels: the reference loops, f64 sums in order. */
export const EXACT_KERNELS: CpuKernels = {
  matmul: matmulInto,
  addBias: addBiasInto,
  unary: unaryInto,
  unaryBackward: unaryBackwardInto,
  softmax: softmaxInto,
  softmaxBackward: softmaxBackwardInto,
  layerNorm: layerNormInto,
  layerNormBackwardInput: layerNormBackwardInputInto,
  layerNormBackwardWeight: layerNormBackwardWeightInto,
  sumRows: sumRowsInto,
  binary: binaryInto,
  permute: permuteInto,
  adamw: adamwInto,
};
