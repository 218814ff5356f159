/**
 * Tensors and backends (CPU reference, WebGPU).
 *
 * @module
 */

export type {
  AdamWParams,
  Backend,
  BackendName,
  CrossEntropyResult,
  LayerNormResult,
  MemoryStats,
  SGDParams,
  Shape,
} from "./backend.ts";
export { checkShape, shapeSize, Tensor } from "./tensor.ts";
export * as ops from "./ops.ts";
export type { MatmulOptions, SoftmaxOptions } from "./ops.ts";
export { CpuBackend } from "./cpu_backend.ts";
export { randomTensor, Rng, type RngState } from "./random.ts";
export { WebGPUBackend } from "./webgpu_backend.ts";
export type {
  BufferPoolStats,
  MatmulConfig,
  MatmulTuneResult,
  WebGPUBackendOptions,
} from "./webgpu_backend.ts";
export { createBackend } from "./create_backend.ts";
export type { BackendKind } from "./create_backend.ts";
