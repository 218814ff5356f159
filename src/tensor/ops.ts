/**
 * The public tensor operations. Each op checks its arguments (tensors alive
 * and on one backend, shapes compatible, scalars finite) and only then calls
 * the backend kernel of the same name, so a bad call throws a TypeError or
 * RangeError before any work is queued, identically on every backend.
 *
 * @example
 * ```ts
 * import { CpuBackend } from "@conveyor/core";
 * import { ops } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const x = be.fromData(new Float32Array([1, -2, 3, -4]), [2, 2]);
 * const y = ops.relu(ops.matmul(x, x, { transB: true }));
 * console.log(await y.toArray());
 * ```
 *
 * @module
 */

export * from "./ops/matmul.ts";
export * from "./ops/elementwise.ts";
export * from "./ops/activations.ts";
export * from "./ops/rows.ts";
export * from "./ops/reductions.ts";
export * from "./ops/losses.ts";
export * from "./ops/optimizers.ts";
export * from "./ops/layout.ts";
export * from "./ops/dropout.ts";
