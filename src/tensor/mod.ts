/**
 * Tensors and backends (CPU reference, WebGPU).
 *
 * @module
 */

export type * from "./backend.ts";
export { checkShape, shapeSize, Tensor } from "./tensor.ts";
export * as ops from "./ops.ts";
export type { DropoutOpOptions, MatmulOptions, SoftmaxOptions } from "./ops.ts";
export { CpuBackend, type CpuBackendOptions } from "./cpu/backend.ts";
export { randomTensor, Rng, type RngState } from "./random.ts";
export { WebGPUBackend } from "./webgpu/mod.ts";
export type { MatmulConfig, MatmulTuneResult, WebGPUBackendOptions } from "./webgpu/mod.ts";
export { chooseBackend, createBackend } from "./create_backend.ts";
export { isSoftwareAdapter } from "./software_adapter.ts";
export type { AdapterInfoFields } from "./software_adapter.ts";
export { keep, tidy } from "./tidy.ts";
export { LeakWatch, type LeakWatchOptions } from "./leak_watch.ts";
export type {
  BackendChoice,
  BackendKind,
  ChooseBackendOptions,
  CreateBackendOptions,
} from "./create_backend.ts";
export { describeValue, formatShape } from "../text/describe.ts";
