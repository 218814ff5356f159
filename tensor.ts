/**
 * Tensors and the backends that compute on them: the {@linkcode Tensor}
 * class, the `ops` namespace (matmul, elementwise, activations, row ops,
 * reductions), the {@linkcode Backend} contract with its CPU reference
 * ({@linkcode CpuBackend}) and WebGPU ({@linkcode WebGPUBackend})
 * implementations, backend choice, {@linkcode tidy} scopes and
 * {@linkcode LeakWatch}. A training script needs only a backend to build
 * layers on (`@conveyor/core` exports `CpuBackend`); this entry point is for
 * your own layers, kernels and loops.
 *
 * @example Matrix product on the CPU backend
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend, ops, tidy } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const a = be.fromData(new Float32Array([1, 2, 3, 4]), [2, 2]);
 * const y = tidy(() => ops.matmul(a, be.fromData(new Float32Array([0, 1, 1, 0]), [2, 2])));
 * assert.deepEqual([...await y.toArray()], [2, 1, 4, 3]);
 * assert.equal(be.memory.liveBytes, 32); // a and y only
 * ```
 *
 * @module
 */

export { Tensor } from "./src/tensor/tensor.ts";
export { shapeSize } from "./src/tensor/tensor.ts";
export * as ops from "./src/tensor/ops.ts";
export type { DropoutOpOptions, MatmulOptions, SoftmaxOptions } from "./src/tensor/ops.ts";
export type {
  AdamWParams,
  Backend,
  BackendName,
  BinaryOp,
  BufferPoolStats,
  CrossEntropyResult,
  InvalidIndex,
  LayerNormResult,
  LayerNormStats,
  MemoryStats,
  RmsNormResult,
  SGDParams,
  Shape,
  UnaryGradOp,
  UnaryOp,
} from "./src/tensor/backend.ts";
export { CpuBackend, type CpuBackendOptions } from "./src/tensor/cpu/backend.ts";
export { WebGPUBackend } from "./src/tensor/webgpu/mod.ts";
export type {
  MatmulConfig,
  MatmulTuneResult,
  WebGPUBackendOptions,
} from "./src/tensor/webgpu/mod.ts";
export { chooseBackend, createBackend } from "./src/tensor/create_backend.ts";
export type {
  BackendChoice,
  BackendKind,
  ChooseBackendOptions,
  CreateBackendOptions,
} from "./src/tensor/create_backend.ts";
export { isSoftwareAdapter } from "./src/tensor/software_adapter.ts";
export type { AdapterInfoFields } from "./src/tensor/software_adapter.ts";
export { keep, tidy } from "./src/tensor/tidy.ts";
export { LeakWatch, type LeakWatchOptions } from "./src/tensor/leak_watch.ts";
export { randomTensor, Rng, type RngState } from "./src/tensor/random.ts";
