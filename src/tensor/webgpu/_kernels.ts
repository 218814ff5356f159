/**
 * The WGSL kernels of the WebGPU backend, with their binding signatures,
 * their named `Params` fields and their named op codes.
 *
 * Every kernel file in `kernels/` binds a uniform `struct Params` at binding
 * 0 and storage buffers from binding 1 on. For each kernel this module
 * states:
 * - `bindings`: those storage buffers in order, read-only (`"r"`) or
 *   read-write (`"w"`); the device core builds explicit bind group layouts
 *   from it, so a binding a specialisation leaves unused is still accepted;
 * - `params`: the `Params` fields by name and WGSL type, checked against
 *   the WGSL struct when this module loads (see `_params.ts`);
 * - for family kernels, the op-code table whose entries must each appear in
 *   the WGSL as `const OP_NAME: u32 = code;` (checked here too).
 *
 * A mismatch between a WGSL file and its entry here throws at import, naming
 * the kernel and both sides.
 *
 * Kernels take what they share from the `kernels/_*.wgsl` snippets through
 * `//#include` lines, resolved here before the checks: the entry points of
 * the row-wise (`_rows.wgsl`), per-unit (`_units.wgsl`) and column-chunk
 * (`_column_chunks.wgsl`) kernels, which call the kernel's own `rowMain`,
 * `unitMain` or `columnMain`; the matmul `Params`; the activation formulas;
 * the NaN tests.
 *
 * @module
 */

import adamw from "../../../kernels/adamw.wgsl" with { type: "text" };
import addBias from "../../../kernels/add_bias.wgsl" with { type: "text" };
import axpy from "../../../kernels/axpy.wgsl" with { type: "text" };
import binary from "../../../kernels/binary.wgsl" with { type: "text" };
import checkIndices from "../../../kernels/check_indices.wgsl" with { type: "text" };
import copy2d from "../../../kernels/copy2d.wgsl" with { type: "text" };
import crossEntropy from "../../../kernels/cross_entropy.wgsl" with { type: "text" };
import crossEntropyBackward from "../../../kernels/cross_entropy_backward.wgsl" with {
  type: "text",
};
import embedding from "../../../kernels/embedding.wgsl" with { type: "text" };
import embeddingBackward from "../../../kernels/embedding_backward.wgsl" with { type: "text" };
import embeddingBackwardScan from "../../../kernels/embedding_backward_scan.wgsl" with {
  type: "text",
};
import embeddingKeys from "../../../kernels/embedding_keys.wgsl" with { type: "text" };
import bitonicSort from "../../../kernels/bitonic_sort.wgsl" with { type: "text" };
import fill from "../../../kernels/fill.wgsl" with { type: "text" };
import logSumExp from "../../../kernels/log_sum_exp.wgsl" with { type: "text" };
import layerNorm from "../../../kernels/layer_norm.wgsl" with { type: "text" };
import layerNormBackwardInput from "../../../kernels/layer_norm_backward_input.wgsl" with {
  type: "text",
};
import layerNormBackwardWeight from "../../../kernels/layer_norm_backward_weight.wgsl" with {
  type: "text",
};
import matmul from "../../../kernels/matmul.wgsl" with { type: "text" };
import matmulTiled from "../../../kernels/matmul_tiled.wgsl" with { type: "text" };
import permute from "../../../kernels/permute.wgsl" with { type: "text" };
import rmsNorm from "../../../kernels/rms_norm.wgsl" with { type: "text" };
import rmsNormBackwardInput from "../../../kernels/rms_norm_backward_input.wgsl" with {
  type: "text",
};
import rmsNormBackwardWeight from "../../../kernels/rms_norm_backward_weight.wgsl" with {
  type: "text",
};
import reduce from "../../../kernels/reduce.wgsl" with { type: "text" };
import scale from "../../../kernels/scale.wgsl" with { type: "text" };
import scaleInPlace from "../../../kernels/scale_in_place.wgsl" with { type: "text" };
import sgd from "../../../kernels/sgd.wgsl" with { type: "text" };
import softmax from "../../../kernels/softmax.wgsl" with { type: "text" };
import softmaxBackward from "../../../kernels/softmax_backward.wgsl" with { type: "text" };
import sumRows from "../../../kernels/sum_rows.wgsl" with { type: "text" };
import unary from "../../../kernels/unary.wgsl" with { type: "text" };
import unaryBackward from "../../../kernels/unary_backward.wgsl" with { type: "text" };
import where from "../../../kernels/where.wgsl" with { type: "text" };
import dropout from "../../../kernels/dropout.wgsl" with { type: "text" };
import activations from "../../../kernels/_activations.wgsl" with { type: "text" };
import columnChunks from "../../../kernels/_column_chunks.wgsl" with { type: "text" };
import matmulParams from "../../../kernels/_matmul_params.wgsl" with { type: "text" };
import nan from "../../../kernels/_nan.wgsl" with { type: "text" };
import rows from "../../../kernels/_rows.wgsl" with { type: "text" };
import units from "../../../kernels/_units.wgsl" with { type: "text" };
import { BINARY_OPS, opCodes, UNARY_GRAD_OPS, UNARY_OPS } from "../_elementwise_ops.ts";
import { resolveIncludes } from "./_shader.ts";
import {
  checkOpCodes,
  checkParamsStruct,
  layoutParams,
  type ParamFields,
  type ParamsLayout,
} from "./_params.ts";

// Shared WGSL taken in by `//#include NAME` lines (snippets include no others).
const SNIPPETS = {
  "_activations.wgsl": activations,
  "_column_chunks.wgsl": columnChunks,
  "_matmul_params.wgsl": matmulParams,
  "_nan.wgsl": nan,
  "_rows.wgsl": rows,
  "_units.wgsl": units,
};

/** Access of one storage binding: read-only or read-write. */
export type BindingAccess = "r" | "w";

/** A kernel source, its storage bindings and its named `Params` fields. */
export interface KernelSource<F extends ParamFields = ParamFields> {
  readonly name: string;
  readonly src: string;
  readonly bindings: readonly BindingAccess[];
  /** The `Params` fields by name (type carrier for dispatches). */
  readonly fields: F;
  readonly layout: ParamsLayout;
}

/** Op-code tables a family kernel checks: WGSL constant prefix → table. */
type OpTables = Readonly<Record<string, Readonly<Record<string, number>>>>;

function k<F extends ParamFields>(
  name: string,
  src: string,
  bindings: string,
  fields: F,
  codes: OpTables = {},
): KernelSource<F> {
  const full = resolveIncludes(src, SNIPPETS);
  checkParamsStruct(name, full, fields);
  for (const [prefix, table] of Object.entries(codes)) checkOpCodes(name, full, prefix, table);
  return {
    name,
    src: full,
    bindings: [...bindings] as BindingAccess[],
    fields,
    layout: layoutParams(fields),
  };
}

// Elementwise kernels whose only field is the unit count.
const N = { n: "u32" } as const;
// Elementwise kernels with a broadcast layout: element count (vec4 count in
// the same-shape layout), merged rank, shape and per-operand strides.
const BCAST2 = {
  n: "u32",
  rank: "u32",
  shape: "array<vec4<u32>, 2>",
  aStrides: "array<vec4<u32>, 2>",
  bStrides: "array<vec4<u32>, 2>",
} as const;
const BCAST3 = {
  n: "u32",
  rank: "u32",
  shape: "array<vec4<u32>, 2>",
  cStrides: "array<vec4<u32>, 2>",
  aStrides: "array<vec4<u32>, 2>",
  bStrides: "array<vec4<u32>, 2>",
} as const;
const MATMUL = {
  M: "u32",
  N: "u32",
  K: "u32",
  lda: "u32",
  ldb: "u32",
  ldc: "u32",
  strideA: "u32",
  strideB: "u32",
  strideC: "u32",
  offX: "u32",
  offY: "u32",
  offZ: "u32",
} as const;
const SGD = { n: "u32", lr: "f32", momentum: "f32", weightDecay: "f32" } as const;
const ROWS = { rows: "u32", cols: "u32" } as const;
const CHUNKED = { rows: "u32", cols: "u32", chunk: "u32" } as const;
// The two embedding scatter-adds: units to visit, units per row, ids.
const SCATTER = { n: "u32", cols: "u32", count: "u32" } as const;

/** Every kernel, by the name the backend uses. */
export const KERNELS = {
  adamw: k("adamw", adamw, "wrww", {
    n: "u32",
    lr: "f32",
    beta1: "f32",
    oneMinusBeta1: "f32",
    beta2: "f32",
    oneMinusBeta2: "f32",
    eps: "f32",
    weightDecay: "f32",
    bc1: "f32",
    bc2: "f32",
  }),
  addBias: k("add_bias", addBias, "rrw", { n: "u32", cols: "u32" }),
  axpy: k("axpy", axpy, "wr", { n: "u32", alpha: "f32" }),
  binary: k("binary", binary, "rrw", BCAST2, { OP: opCodes(BINARY_OPS) }),
  checkIndices: k("check_indices", checkIndices, "rw", { n: "u32", limit: "u32" }),
  copy2d: k("copy2d", copy2d, "rw", {
    n: "u32",
    rows: "u32",
    cols: "u32",
    inRows: "u32",
    inCols: "u32",
    rowStride: "u32",
    colStride: "u32",
    inStride: "u32",
  }),
  crossEntropy: k("cross_entropy", crossEntropy, "rrww", ROWS),
  crossEntropyBackward: k("cross_entropy_backward", crossEntropyBackward, "rrw", {
    n: "u32",
    cols: "u32",
    scale: "f32",
  }),
  dropout: k("dropout", dropout, "rw", {
    n: "u32",
    key: "u32",
    base: "u32",
    threshold: "u32",
    scale: "f32",
  }),
  embedding: k("embedding", embedding, "rrw", { n: "u32", cols: "u32", vocab: "u32" }),
  embeddingBackward: k("embedding_backward", embeddingBackward, "wrr", SCATTER),
  embeddingBackwardScan: k("embedding_backward_scan", embeddingBackwardScan, "wrr", SCATTER),
  embeddingKeys: k("embedding_keys", embeddingKeys, "rw", {
    n: "u32",
    count: "u32",
    vocab: "u32",
  }),
  bitonicSort: k("bitonic_sort", bitonicSort, "w", { n: "u32", k: "u32", j: "u32" }),
  fill: k("fill", fill, "w", { n: "u32", value: "f32" }),
  layerNorm: k("layer_norm", layerNorm, "rrrwww", { rows: "u32", cols: "u32", eps: "f32" }),
  layerNormBackwardInput: k(
    "layer_norm_backward_input",
    layerNormBackwardInput,
    "rrrrrw",
    ROWS,
  ),
  layerNormBackwardWeight: k(
    "layer_norm_backward_weight",
    layerNormBackwardWeight,
    "rrrrw",
    CHUNKED,
  ),
  logSumExp: k("log_sum_exp", logSumExp, "rw", ROWS),
  matmul: k("matmul", matmul, "rrw", MATMUL),
  matmulTiled: k("matmul_tiled", matmulTiled, "rrw", MATMUL),
  permute: k("permute", permute, "rw", {
    n: "u32",
    rank: "u32",
    shape: "array<vec4<u32>, 2>",
    strides: "array<vec4<u32>, 2>",
  }),
  rmsNorm: k("rms_norm", rmsNorm, "rrww", { rows: "u32", cols: "u32", eps: "f32" }),
  rmsNormBackwardInput: k("rms_norm_backward_input", rmsNormBackwardInput, "rrrrw", ROWS),
  rmsNormBackwardWeight: k("rms_norm_backward_weight", rmsNormBackwardWeight, "rrrw", CHUNKED),
  reduce: k("reduce", reduce, "rw", N),
  scale: k("scale", scale, "rw", { n: "u32", s: "f32" }),
  scaleInPlace: k("scale_in_place", scaleInPlace, "w", { n: "u32", s: "f32" }),
  // One source, two layouts: with and without the momentum buffer.
  sgd: k("sgd", sgd, "wrw", SGD),
  sgdPlain: k("sgd_plain", sgd, "wr", SGD),
  softmax: k("softmax", softmax, "rw", ROWS),
  softmaxBackward: k("softmax_backward", softmaxBackward, "rrw", ROWS),
  sumRows: k("sum_rows", sumRows, "rw", CHUNKED),
  unary: k("unary", unary, "rw", N, { OP: opCodes(UNARY_OPS) }),
  unaryBackward: k("unary_backward", unaryBackward, "rrw", N, { OP: opCodes(UNARY_GRAD_OPS) }),
  where: k("where", where, "rrrw", BCAST3),
} as const;
