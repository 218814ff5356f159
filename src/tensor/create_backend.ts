/**
 * Backend selection: WebGPU when an adapter exists, the CPU reference
 * otherwise, or either one on request.
 *
 * @module
 */

import type { Backend } from "./backend.ts";
import { CpuBackend } from "./cpu/backend.ts";
import { WebGPUBackend, type WebGPUBackendOptions } from "./webgpu/mod.ts";

/**
 * Which backend `createBackend` should return.
 *
 * @example
 * ```ts
 * import type { BackendKind } from "@conveyor/core";
 * const kind: BackendKind = Deno.env.get("CI") ? "cpu" : "auto";
 * console.log(kind);
 * ```
 */
export type BackendKind = "auto" | "cpu" | "webgpu";

/**
 * Creates a tensor backend.
 *
 * - `"auto"` (default): WebGPU when `navigator.gpu` gives an adapter, else
 *   the CPU backend, after one notice line on stderr saying why.
 * - `"webgpu"`: WebGPU or an Error that says there is no adapter.
 * - `"cpu"`: the CPU reference backend.
 *
 * `options` are passed to `WebGPUBackend.create` when WebGPU is used.
 *
 * @example
 * ```ts
 * import { createBackend, ops } from "@conveyor/core";
 * const be = await createBackend("cpu");
 * const x = be.fromData(new Float32Array([1, -1]), [2]);
 * console.log(be.name, await ops.relu(x).toArray()); // cpu Float32Array [1, 0]
 * ```
 */
export async function createBackend(
  kind: BackendKind = "auto",
  options: WebGPUBackendOptions = {},
): Promise<Backend> {
  if (kind !== "auto" && kind !== "cpu" && kind !== "webgpu") {
    throw new RangeError(
      `createBackend: kind must be "auto", "cpu" or "webgpu", got ${JSON.stringify(kind)}`,
    );
  }
  if (kind === "cpu") return new CpuBackend();
  if (kind === "webgpu") return await WebGPUBackend.create(options);
  try {
    return await WebGPUBackend.create(options);
  } catch (e) {
    console.error(
      `conveyor: WebGPU unavailable (${(e as Error).message}); using the CPU backend`,
    );
    return new CpuBackend();
  }
}
