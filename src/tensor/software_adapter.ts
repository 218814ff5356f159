/**
 * Whether a WebGPU adapter is a software renderer that runs shaders on the
 * CPU (Mesa's llvmpipe and lavapipe, SwiftShader, or any adapter that says
 * it is a fallback adapter): not a GPU, and slower than the CPU backend.
 *
 * @module
 */

/**
 * The fields of `GPUAdapterInfo` that {@linkcode isSoftwareAdapter} reads.
 *
 * @example
 * ```ts
 * import { type AdapterInfoFields, isSoftwareAdapter } from "@conveyor/core/tensor";
 * const info: AdapterInfoFields = { description: "Acme", isFallbackAdapter: true };
 * console.log(isSoftwareAdapter(info)); // true
 * ```
 */
export interface AdapterInfoFields {
  /** The adapter's vendor (a name or a PCI id). */
  readonly vendor?: string;
  /** The adapter's architecture (a family name, often empty). */
  readonly architecture?: string;
  /** The adapter's device (a name or an id). */
  readonly device?: string;
  /** What the driver calls it, e.g. "llvmpipe (LLVM 15.0.6, 256 bits)". */
  readonly description?: string;
  /** Set by the browser or runtime when the adapter is a fallback (software) one. */
  readonly isFallbackAdapter?: boolean;
}

/**
 * True when `info` describes a software adapter: `isFallbackAdapter`, or a
 * vendor, architecture, device or description naming llvmpipe, lavapipe,
 * SwiftShader, "software" or "cpu".
 *
 * @example
 * ```ts
 * import { isSoftwareAdapter } from "@conveyor/core/tensor";
 * console.log(isSoftwareAdapter({ description: "llvmpipe (LLVM 15.0.6, 256 bits)" })); // true
 * console.log(isSoftwareAdapter({ vendor: "nvidia", description: "NVIDIA H100" })); // false
 * ```
 */
export function isSoftwareAdapter(info: AdapterInfoFields | undefined): boolean {
  if (info === undefined || info === null) return false;
  if (info.isFallbackAdapter === true) return true;
  const text = [info.vendor, info.architecture, info.device, info.description].join(" ");
  return /llvmpipe|lavapipe|swiftshader|software|\bcpu\b/i.test(text);
}
