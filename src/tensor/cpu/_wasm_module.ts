/**
 * The compiled WebAssembly kernels (`kernels/wasm/`, built by
 * `deno task build:wasm`), compiled once per thread: the relaxed-SIMD
 * variant where the engine validates it (its multiply-add is fused where
 * the CPU has FMA), else the plain SIMD128 one.
 *
 * @module
 */

import simd128Text from "../../../kernels/wasm/conveyor_simd128.wasm.b64" with { type: "text" };
import relaxedText from "../../../kernels/wasm/conveyor_relaxed.wasm.b64" with { type: "text" };

/** A variant of the kernels. */
export type WasmVariant = "relaxed" | "simd128";

/** A compiled variant. */
export interface WasmKernelModule {
  readonly variant: WasmVariant;
  readonly module: WebAssembly.Module;
}

const compiled = new Map<WasmVariant, WasmKernelModule | null>();

function bytesOf(variant: WasmVariant): Uint8Array {
  return Uint8Array.fromBase64((variant === "relaxed" ? relaxedText : simd128Text).trim());
}

/**
 * The module of `variant`, or null where this engine cannot run it
 * (validated once per thread).
 */
export function wasmModule(variant: WasmVariant): WasmKernelModule | null {
  let m = compiled.get(variant);
  if (m === undefined) {
    const bytes = bytesOf(variant);
    m = WebAssembly.validate(bytes as BufferSource)
      ? { variant, module: new WebAssembly.Module(bytes as BufferSource) }
      : null;
    compiled.set(variant, m);
  }
  return m;
}

/** The best variant this engine runs (relaxed SIMD, else SIMD128), or null for none. */
export function bestWasmModule(): WasmKernelModule | null {
  return wasmModule("relaxed") ?? wasmModule("simd128");
}
