/**
 * The backends the tensor test suites run over: always the CPU backend in
 * both modes (fast, and the exact reference), plus WebGPU when
 * `createBackend("webgpu")` succeeds on this machine.
 *
 * Set `CONVEYOR_TEST_BACKENDS=cpu` to run the suites on the CPU backend alone
 * (the issue asks that the same suite pass that way too).
 *
 * @module
 */

import type { Backend } from "../../src/tensor/backend.ts";
import { CpuBackend } from "../../src/tensor/cpu/backend.ts";

type CreateBackend = (kind?: "auto" | "cpu" | "webgpu") => Promise<Backend>;

let cached: Promise<Backend[]> | null = null;

/**
 * `[new CpuBackend(), new CpuBackend({ exact: true }), webgpu?]`, created
 * once per test module. The WebGPU
 * backend is loaded through `src/tensor/create_backend.ts` when that module
 * exists; until then (or without an adapter) the list holds the CPU backend only.
 */
export function testBackends(): Promise<Backend[]> {
  cached ??= load();
  return cached;
}

async function load(): Promise<Backend[]> {
  const list: Backend[] = [new CpuBackend(), new CpuBackend({ exact: true })];
  if (Deno.env.get("CONVEYOR_TEST_BACKENDS") === "cpu") return list;
  // NOTE(tensor core): the specifier is computed so that this helper type-checks
  // and runs before create_backend.ts lands; the WebGPU engineer may replace
  // this with a static import once it exists.
  const spec = new URL("../../src/tensor/create_backend.ts", import.meta.url).href;
  let createBackend: CreateBackend;
  try {
    createBackend = (await import(spec)).createBackend as CreateBackend;
  } catch (e) {
    if (e instanceof TypeError && /Module not found|Cannot find module/i.test(e.message)) {
      return list;
    }
    throw e;
  }
  try {
    list.push(await createBackend("webgpu"));
  } catch (e) {
    console.error(`tests: WebGPU backend unavailable, CPU only (${(e as Error).message})`);
  }
  return list;
}

/** A backend's label in test names: `cpu`, `cpu-exact`, `webgpu`. */
export function label(be: Backend): string {
  return be instanceof CpuBackend && be.exact ? "cpu-exact" : be.name;
}
