/**
 * Conveyor: pipeline-parallel training on Deno's native WebGPU.
 *
 * - Tensors on WebGPU (WGSL kernels) with a CPU reference backend.
 * - Layers whose backward is split into an input-gradient pass (I) and a
 *   weight-gradient pass (W), losses, optimizers, safetensors I/O.
 * - Pipeline schedules as data (GPipe, 1F1B, Interleaved 1F1B, Looped BFS,
 *   ZB-H1, ZB-H2, ZB-V, automatic zero-bubble), a validator, a simulator,
 *   timeline pictures, partitioning and activation checkpointing, and a
 *   runtime whose stages run in Deno workers.
 *
 * @example
 * ```ts
 * import { generateSchedule, simulate } from "@conveyor/core";
 * const s = generateSchedule("1f1b", { ranks: 4, microBatches: 8 });
 * console.log(simulate(s).bubbleFraction.toFixed(3)); // 0.273
 * ```
 *
 * @module
 */

export * from "./src/tensor/mod.ts";
export * from "./src/nn/mod.ts";
export * from "./src/pipeline/mod.ts";
