/**
 * The WGSL kernels of the WebGPU backend and their binding signatures.
 *
 * Every kernel file in `kernels/` binds a uniform `Params` struct at binding
 * 0 and storage buffers from binding 1 on; `bindings` lists those storage
 * buffers in order, read-only (`"r"`) or read-write (`"w"`). The backend
 * builds explicit bind group layouts from it, so a binding that a particular
 * specialisation leaves unused is still accepted.
 *
 * @module
 */

import activation from "../../kernels/activation.wgsl" with { type: "text" };
import activationBackward from "../../kernels/activation_backward.wgsl" with { type: "text" };
import adamw from "../../kernels/adamw.wgsl" with { type: "text" };
import addBias from "../../kernels/add_bias.wgsl" with { type: "text" };
import axpy from "../../kernels/axpy.wgsl" with { type: "text" };
import binary from "../../kernels/binary.wgsl" with { type: "text" };
import copy2d from "../../kernels/copy2d.wgsl" with { type: "text" };
import crossEntropy from "../../kernels/cross_entropy.wgsl" with { type: "text" };
import crossEntropyBackward from "../../kernels/cross_entropy_backward.wgsl" with {
  type: "text",
};
import embedding from "../../kernels/embedding.wgsl" with { type: "text" };
import embeddingBackward from "../../kernels/embedding_backward.wgsl" with { type: "text" };
import fill from "../../kernels/fill.wgsl" with { type: "text" };
import layerNorm from "../../kernels/layer_norm.wgsl" with { type: "text" };
import layerNormBackwardInput from "../../kernels/layer_norm_backward_input.wgsl" with {
  type: "text",
};
import layerNormBackwardWeight from "../../kernels/layer_norm_backward_weight.wgsl" with {
  type: "text",
};
import matmul from "../../kernels/matmul.wgsl" with { type: "text" };
import matmulTiled from "../../kernels/matmul_tiled.wgsl" with { type: "text" };
import permute from "../../kernels/permute.wgsl" with { type: "text" };
import reduce from "../../kernels/reduce.wgsl" with { type: "text" };
import scale from "../../kernels/scale.wgsl" with { type: "text" };
import scaleInPlace from "../../kernels/scale_in_place.wgsl" with { type: "text" };
import sgd from "../../kernels/sgd.wgsl" with { type: "text" };
import softmax from "../../kernels/softmax.wgsl" with { type: "text" };
import softmaxBackward from "../../kernels/softmax_backward.wgsl" with { type: "text" };
import sumRows from "../../kernels/sum_rows.wgsl" with { type: "text" };
import rowReduce from "../../kernels/_row_reduce.wgsl" with { type: "text" };
import { resolveIncludes } from "./_webgpu_shader.ts";

// Shared WGSL taken in by `//#include NAME` lines.
const SNIPPETS = { "_row_reduce.wgsl": rowReduce };

/** Access of one storage binding: read-only or read-write. */
export type BindingAccess = "r" | "w";

/** A kernel source and the storage bindings it declares after the uniform. */
export interface KernelSource {
  readonly name: string;
  readonly src: string;
  readonly bindings: readonly BindingAccess[];
}

function k(name: string, src: string, bindings: string): KernelSource {
  return { name, src: resolveIncludes(src, SNIPPETS), bindings: [...bindings] as BindingAccess[] };
}

/** Every kernel, by the name the backend uses. */
export const KERNELS = {
  activation: k("activation", activation, "rw"),
  activationBackward: k("activation_backward", activationBackward, "rrw"),
  adamw: k("adamw", adamw, "wrww"),
  addBias: k("add_bias", addBias, "rrw"),
  axpy: k("axpy", axpy, "wr"),
  binary: k("binary", binary, "rrw"),
  copy2d: k("copy2d", copy2d, "rw"),
  crossEntropy: k("cross_entropy", crossEntropy, "rrww"),
  crossEntropyBackward: k("cross_entropy_backward", crossEntropyBackward, "rrw"),
  embedding: k("embedding", embedding, "rrw"),
  embeddingBackward: k("embedding_backward", embeddingBackward, "wrr"),
  fill: k("fill", fill, "w"),
  layerNorm: k("layer_norm", layerNorm, "rrrwww"),
  layerNormBackwardInput: k("layer_norm_backward_input", layerNormBackwardInput, "rrrrrw"),
  layerNormBackwardWeight: k("layer_norm_backward_weight", layerNormBackwardWeight, "rrrrw"),
  matmul: k("matmul", matmul, "rrw"),
  matmulTiled: k("matmul_tiled", matmulTiled, "rrw"),
  permute: k("permute", permute, "rw"),
  reduce: k("reduce", reduce, "rw"),
  scale: k("scale", scale, "rw"),
  scaleInPlace: k("scale_in_place", scaleInPlace, "w"),
  // One source, two layouts: with and without the momentum buffer.
  sgd: k("sgd", sgd, "wrw"),
  sgdPlain: k("sgd_plain", sgd, "wr"),
  softmax: k("softmax", softmax, "rw"),
  softmaxBackward: k("softmax_backward", softmaxBackward, "rrw"),
  sumRows: k("sum_rows", sumRows, "rw"),
} as const;
