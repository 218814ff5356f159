/**
 * The WebGPU backend: tensors in GPU buffers, kernels in `kernels/*.wgsl`.
 *
 * @module
 */

export { WebGPUBackend } from "./backend.ts";
export type {
  BufferPoolStats,
  MatmulConfig,
  MatmulTuneResult,
  WebGPUBackendOptions,
} from "./backend.ts";
