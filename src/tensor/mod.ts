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
  Shape,
} from "./backend.ts";
export { checkShape, shapeSize, Tensor } from "./tensor.ts";
