/**
 * The WebGPU backend, kept at this path for existing imports; it lives in
 * `./webgpu/` (device core, matmul, and glue per kernel family).
 *
 * @module
 */

export { WebGPUBackend } from "./webgpu/mod.ts";
export type {
  BufferPoolStats,
  MatmulConfig,
  MatmulTuneResult,
  WebGPUBackendOptions,
} from "./webgpu/mod.ts";
