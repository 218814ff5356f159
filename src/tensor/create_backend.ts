/**
 * Backend selection: WebGPU on a hardware adapter, the CPU reference
 * otherwise, or either one on request.
 *
 * @module
 */

import { checkOptionsObject } from "../text/nearest.ts";
import { describeValue } from "../text/describe.ts";
import type { Backend } from "./backend.ts";
import { CpuBackend, type CpuBackendOptions } from "./cpu/backend.ts";
import { WebGPUBackend, type WebGPUBackendOptions } from "./webgpu/mod.ts";
import { isSoftwareAdapter } from "./software_adapter.ts";

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
 * What `"auto"` (or an explicit kind) comes to on this machine, and why.
 *
 * @example
 * ```ts
 * import { type BackendChoice, chooseBackend } from "@conveyor/core/tensor";
 * const c: BackendChoice = await chooseBackend("cpu");
 * console.log(c.kind, c.reason); // cpu asked for
 * ```
 */
export interface BackendChoice {
  /** The backend to create. */
  readonly kind: "cpu" | "webgpu";
  /** Why, in a few words (the adapter's description when one was looked at). */
  readonly reason: string;
  /** The adapter looked at, to create the WebGPU backend on. */
  readonly adapter?: GPUAdapter;
}

/**
 * Options of {@linkcode chooseBackend}.
 *
 * @example
 * ```ts
 * import { chooseBackend, type ChooseBackendOptions } from "@conveyor/core/tensor";
 * const quiet: ChooseBackendOptions = { notice: false };
 * console.log((await chooseBackend("cpu", quiet)).kind); // cpu
 * ```
 */
export interface ChooseBackendOptions {
  /** The adapter to judge; by default `navigator.gpu.requestAdapter()`. */
  readonly adapter?: GPUAdapter | null;
  /** Passed to `requestAdapter` when no adapter is given. */
  readonly powerPreference?: GPUPowerPreference;
  /**
   * Whether to say on stderr what `"auto"` chose and why (default true);
   * said once per process (per thread), at the first `"auto"` choice.
   */
  readonly notice?: boolean;
  /**
   * This process's rank where several processes choose (under MPI), named
   * in the notice: `conveyor: rank 2: backend "auto" chose …`.
   */
  readonly rank?: number;
}

let noticed = false;

/**
 * Resolves a {@linkcode BackendKind}: `"cpu"` and `"webgpu"` as asked;
 * `"auto"` is WebGPU on a hardware adapter and the CPU backend where there
 * is no adapter or only a software one (llvmpipe, lavapipe, SwiftShader, a
 * fallback adapter: see {@linkcode isSoftwareAdapter}), which runs the
 * same kernels on the CPU more slowly than the CPU backend. The first
 * `"auto"` choice of the process (thread) is said once on stderr.
 *
 * @example
 * ```ts
 * import { chooseBackend } from "@conveyor/core/tensor";
 * const fake = { info: { description: "llvmpipe (LLVM 15.0.6, 256 bits)" } } as GPUAdapter;
 * const c = await chooseBackend("auto", { adapter: fake, notice: false });
 * console.log(c.kind); // cpu
 * ```
 */
export async function chooseBackend(
  kind: BackendKind = "auto",
  options: ChooseBackendOptions = {},
): Promise<BackendChoice> {
  if (kind !== "auto" && kind !== "cpu" && kind !== "webgpu") {
    throw new RangeError(
      `backend kind must be "auto", "cpu" or "webgpu", got ${JSON.stringify(kind)}`,
    );
  }
  checkOptionsObject(
    options,
    ["adapter", "powerPreference", "notice", "rank"],
    "chooseBackend: ",
  );
  const rank = options.rank;
  if (rank !== undefined && (!Number.isSafeInteger(rank) || rank < 0)) {
    throw new RangeError(`chooseBackend: rank must be an integer >= 0, got ${describeValue(rank)}`);
  }
  if (kind !== "auto") return { kind, reason: "asked for" };
  let choice: BackendChoice;
  const gpu = (globalThis.navigator as { gpu?: GPU } | undefined)?.gpu;
  let adapter = options.adapter ?? null;
  if (adapter === null && gpu !== undefined) {
    adapter = await gpu.requestAdapter({ powerPreference: options.powerPreference })
      .catch(() => null);
  }
  if (adapter === null) {
    choice = {
      kind: "cpu",
      reason: gpu === undefined
        ? "no WebGPU here (navigator.gpu is undefined)"
        : "no WebGPU adapter",
    };
  } else {
    const info = adapter.info;
    const name = JSON.stringify(info?.description || info?.vendor || "unknown adapter");
    choice = isSoftwareAdapter(info)
      ? {
        kind: "cpu",
        reason: `the WebGPU adapter ${name} is a software renderer on the CPU, slower ` +
          `than the CPU backend (backend "webgpu" uses it anyway)`,
      }
      : { kind: "webgpu", reason: `WebGPU adapter ${name}`, adapter };
  }
  if (options.notice !== false && !noticed) {
    noticed = true;
    const who = rank === undefined ? "" : `rank ${rank}: `;
    console.error(`conveyor: ${who}backend "auto" chose ${choice.kind}: ${choice.reason}`);
  }
  return choice;
}

/**
 * Options of {@linkcode createBackend}: the CPU backend's (`threads`,
 * `exact`, `simd`, `poolBytes`) where the CPU backend is made, WebGPU's
 * where WebGPU is.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { createBackend, type CreateBackendOptions } from "@conveyor/core/tensor";
 * const options: CreateBackendOptions = { threads: 1 };
 * const be = await createBackend("cpu", options);
 * assert.match(be.description, /1 thread/);
 * await be.close();
 * ```
 */
export interface CreateBackendOptions extends WebGPUBackendOptions, CpuBackendOptions {}

const CPU_OPTIONS = ["threads", "exact", "simd", "poolBytes"] as const;

// The options that go to one backend's constructor.
function split(options: CreateBackendOptions): [CpuBackendOptions, WebGPUBackendOptions] {
  const cpu: Record<string, unknown> = {}, gpu: Record<string, unknown> = { ...options };
  for (const k of CPU_OPTIONS) {
    if (k in gpu) cpu[k] = gpu[k];
    delete gpu[k];
  }
  return [cpu as CpuBackendOptions, gpu as WebGPUBackendOptions];
}

/**
 * Creates a tensor backend.
 *
 * - `"auto"` (default): as {@linkcode chooseBackend} decides (WebGPU on a
 *   hardware adapter, else the CPU backend), said once on stderr; if
 *   WebGPU then fails to start, the CPU backend after a line saying why.
 * - `"webgpu"`: WebGPU (a software adapter too) or an Error that says there
 *   is no adapter.
 * - `"cpu"`: the CPU backend (its fast mode unless `exact`; `threads`
 *   per kernel, default every core).
 *
 * `options`: the CPU backend's go to `new CpuBackend`, the others to
 * `WebGPUBackend.create`, whichever is made.
 *
 * @example
 * ```ts
 * import { createBackend, ops } from "@conveyor/core/tensor";
 * const be = await createBackend("cpu");
 * const x = be.fromData(new Float32Array([1, -1]), [2]);
 * console.log(be.name, await ops.relu(x).toArray()); // cpu Float32Array [1, 0]
 * ```
 */
export async function createBackend(
  kind: BackendKind = "auto",
  options: CreateBackendOptions = {},
): Promise<Backend> {
  if (kind !== "auto" && kind !== "cpu" && kind !== "webgpu") {
    throw new RangeError(
      `createBackend: kind must be "auto", "cpu" or "webgpu", got ${JSON.stringify(kind)}`,
    );
  }
  const [cpuOptions, gpuOptions] = split(options);
  if (kind === "cpu") return new CpuBackend(cpuOptions);
  if (kind === "webgpu") return await WebGPUBackend.create(gpuOptions);
  const choice = await chooseBackend("auto", {
    adapter: options.adapter,
    powerPreference: options.powerPreference,
  });
  if (choice.kind === "cpu") return new CpuBackend(cpuOptions);
  try {
    return await WebGPUBackend.create({ ...gpuOptions, adapter: choice.adapter });
  } catch (e) {
    console.error(
      `conveyor: WebGPU unavailable (${(e as Error).message}); using the CPU backend`,
    );
    return new CpuBackend(cpuOptions);
  }
}
