/**
 * Matmul kernel variants for the WebGPU backend and the per-device choice
 * between them.
 *
 * Two families: `direct` (kernels/matmul.wgsl: a register block per
 * invocation read straight from storage, operands padded to multiples of 4)
 * and `tiled` (kernels/matmul_tiled.wgsl: workgroup-shared tiles, any shape).
 * CPU adapters (llvmpipe, SwiftShader) pay every load per invocation and
 * spill at barriers, so big register blocks without shared memory win there;
 * discrete and integrated GPUs want shared tiles. Rather than hard-code
 * either, the backend times a few candidates on a mid-size problem the first
 * time a device is used and keeps the fastest; the choice is cached per
 * adapter (in memory, and in `localStorage` when the runtime has one).
 *
 * @module
 */

import { isSoftwareAdapter } from "../software_adapter.ts";

/**
 * One matmul kernel variant: `direct` (register blocks read straight from
 * storage; best on CPU adapters) or `tiled` (workgroup-shared tiles; GPUs).
 *
 * @example
 * ```ts
 * import type { MatmulConfig } from "@conveyor/core/tensor";
 * const c: MatmulConfig = { family: "tiled", tm: 4, tn: 4, wx: 16, wy: 16, bk: 16 };
 * console.log(c.wx * c.tn); // 64 columns of C per workgroup
 * ```
 */
export interface MatmulConfig {
  /** Kernel family: register blocks from storage, or shared tiles. */
  readonly family: "direct" | "tiled";
  /** Rows of C per invocation (multiple of 4). */
  readonly tm: number;
  /** Columns of C per invocation (multiple of 4). */
  readonly tn: number;
  /** Workgroup size along N. */
  readonly wx: number;
  /** Workgroup size along M. */
  readonly wy: number;
  /** Depth of a shared tile (tiled family only). */
  readonly bk?: number;
  /**
   * How transposed operands are read: by kernel variants specialised for
   * each transpose (`"kernel"`, the default), or by copying them to the
   * untransposed layout first and running the plain variant (`"copy"`, one
   * extra O(n²) pass). The latter suits variants that take long to compile,
   * such as the biggest register blocks on CPU adapters.
   */
  readonly transposes?: "kernel" | "copy";
}

/** Rows and columns of C covered by one workgroup. */
export function workgroupTile(c: MatmulConfig): { bm: number; bn: number } {
  return { bm: c.wy * c.tm, bn: c.wx * c.tn };
}

/** A short label such as `direct 16x16 @8x4`. */
export function configLabel(c: MatmulConfig): string {
  const bk = c.family === "tiled" ? ` bk${c.bk}` : "";
  const tr = c.transposes === "copy" ? " (transpose by copy)" : "";
  return `${c.family} ${c.tm}x${c.tn} @${c.wx}x${c.wy}${bk}${tr}`;
}

/** Throws unless `c` is a variant the kernels can compile and run. */
export function checkConfig(c: MatmulConfig, maxInvocations: number, maxShared: number): void {
  const bad = (rule: string) => {
    throw new RangeError(`matmul config ${JSON.stringify(c)}: ${rule}`);
  };
  if (c.family !== "direct" && c.family !== "tiled") bad(`family must be "direct" or "tiled"`);
  for (const [k, v] of [["tm", c.tm], ["tn", c.tn]] as const) {
    if (!Number.isInteger(v) || v < 4 || v % 4 !== 0) bad(`${k} must be a positive multiple of 4`);
  }
  for (const [k, v] of [["wx", c.wx], ["wy", c.wy]] as const) {
    if (!Number.isInteger(v) || v < 1) bad(`${k} must be a positive integer`);
  }
  if (c.wx * c.wy > maxInvocations) bad(`wx·wy must be at most ${maxInvocations}`);
  if (c.transposes !== undefined && c.transposes !== "kernel" && c.transposes !== "copy") {
    bad(`transposes must be "kernel" or "copy"`);
  }
  if (c.family === "tiled") {
    const bk = c.bk ?? 0;
    if (!Number.isInteger(bk) || bk < 1) bad("bk must be a positive integer");
    const { bm, bn } = workgroupTile(c);
    const nt = c.wx * c.wy;
    if ((bk * bm / 4) % nt !== 0 || (bk * bn / 4) % nt !== 0) {
      bad("bk·bm/4 and bk·bn/4 must be multiples of wx·wy (each invocation stages whole vec4s)");
    }
    if (bk * (bm + bn) * 4 > maxShared) bad(`shared tiles must fit in ${maxShared} bytes`);
  }
}

/** Shader constants of a variant for the given transposes. */
export function configDefines(
  c: MatmulConfig,
  transA: boolean,
  transB: boolean,
): Record<string, number | boolean> {
  const d: Record<string, number | boolean> = {
    TM: c.tm,
    TN: c.tn,
    WX: c.wx,
    WY: c.wy,
    TRANS_A: transA,
    TRANS_B: transB,
  };
  if (c.family === "tiled") d.BK = c.bk ?? 16;
  return d;
}

/** Whether an adapter runs shaders on the CPU (llvmpipe, lavapipe, SwiftShader). */
export function isCpuAdapter(info: GPUAdapterInfo | undefined): boolean {
  return isSoftwareAdapter(info);
}

/**
 * Candidates to time on a device. CPU adapters get register-blocked direct
 * variants only: shared-tile kernels with barriers take seconds to compile
 * there and lose anyway, and since every load is paid per invocation the
 * biggest block (most FMAs per load) tends to win — but it also compiles
 * slowest, so it is timed rather than assumed. GPUs get the usual
 * shared-tile shapes plus one direct variant, so a GPU on which it wins is
 * not forced onto tiles.
 */
export function candidateConfigs(cpuAdapter: boolean): MatmulConfig[] {
  if (cpuAdapter) {
    return [
      // Each variant of this one takes ~7 s to compile on llvmpipe: only the
      // plain one is built, transposed operands are copied first.
      { family: "direct", tm: 32, tn: 32, wx: 8, wy: 2, transposes: "copy" },
      { family: "direct", tm: 16, tn: 16, wx: 8, wy: 4 },
    ];
  }
  return [
    { family: "tiled", tm: 4, tn: 4, wx: 16, wy: 16, bk: 16 },
    { family: "tiled", tm: 8, tn: 4, wx: 16, wy: 16, bk: 16 },
    { family: "tiled", tm: 8, tn: 8, wx: 16, wy: 16, bk: 8 },
    { family: "tiled", tm: 4, tn: 4, wx: 8, wy: 8, bk: 32 },
    { family: "direct", tm: 4, tn: 8, wx: 16, wy: 8 },
  ];
}

/**
 * The variant for small problems, and for every problem when tuning is
 * skipped: quick to compile (a tenth of a second on llvmpipe, against
 * seconds for the biggest register blocks) and never far from the best
 * where a matmul is too small to keep the device busy anyway.
 */
export function defaultConfig(cpuAdapter: boolean): MatmulConfig {
  return cpuAdapter
    ? { family: "direct", tm: 8, tn: 8, wx: 8, wy: 8 }
    : { family: "tiled", tm: 4, tn: 4, wx: 16, wy: 16, bk: 16 };
}

/**
 * Outputs (M·N·batch) from which a matmul uses the tuned variant (512²).
 * Below it a matmul is too small for the big register blocks to pay off, and
 * those take seconds to compile on CPU adapters.
 */
export const LARGE_MATMUL_OUTPUTS = 1 << 18;

/**
 * Key of an adapter in the tuning cache: the adapter's identity plus a hash
 * of its candidate list, so that a changed candidate list re-tunes.
 */
export function adapterKey(info: GPUAdapterInfo | undefined): string {
  const id = info === undefined
    ? "unknown-adapter"
    : [info.vendor, info.architecture, info.device, info.description].join("|");
  const text = JSON.stringify(candidateConfigs(isCpuAdapter(info)));
  let h = 2166136261;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 16777619) >>> 0;
  return `${id}|${h.toString(16)}`;
}

const STORAGE_PREFIX = "conveyor.matmul.v1:";
const memo = new Map<string, MatmulConfig>();

// localStorage exists on the main thread only; typed so that this module
// type-checks in workers too.
const storage = (): Storage | undefined => (globalThis as { localStorage?: Storage }).localStorage;

/** A cached choice for this adapter, if one was made in this process or stored. */
export function cachedConfig(key: string): MatmulConfig | undefined {
  const hit = memo.get(key);
  if (hit !== undefined) return hit;
  try {
    const raw = storage()?.getItem(STORAGE_PREFIX + key);
    if (raw) {
      const c = JSON.parse(raw) as MatmulConfig;
      memo.set(key, c);
      return c;
    }
  } catch {
    // No localStorage here (workers, restricted permissions): memory only.
  }
  return undefined;
}

/** Records the choice for this adapter. */
export function storeConfig(key: string, c: MatmulConfig): void {
  memo.set(key, c);
  try {
    storage()?.setItem(STORAGE_PREFIX + key, JSON.stringify(c));
  } catch {
    // Memory only.
  }
}

/** Forgets cached choices (tests). */
export function clearConfigCache(): void {
  memo.clear();
  try {
    const ls = storage();
    if (ls === undefined) return;
    for (let i = ls.length - 1; i >= 0; i--) {
      const k = ls.key(i);
      if (k?.startsWith(STORAGE_PREFIX)) ls.removeItem(k);
    }
  } catch {
    // Nothing stored.
  }
}

/**
 * Timing of one candidate during tuning.
 *
 * @example
 * ```ts
 * import type { MatmulTuneResult } from "@conveyor/core/tensor";
 * const r: MatmulTuneResult = {
 *   config: { family: "direct", tm: 8, tn: 8, wx: 8, wy: 8 },
 *   seconds: 0.01,
 *   gflops: 26.8,
 * };
 * console.log(r.gflops);
 * ```
 */
export interface MatmulTuneResult {
  /** The candidate variant. */
  readonly config: MatmulConfig;
  /** Best seconds per matmul over the samples, or Infinity if it failed. */
  readonly seconds: number;
  /** GFLOP/s at the tuning size. */
  readonly gflops: number;
}

/**
 * Times every candidate with `time(config)` (seconds per matmul, one sample)
 * round-robin for `rounds` rounds, so that background load hits all of them
 * alike, and returns the results sorted fastest first. A candidate whose
 * sample throws is dropped.
 */
export async function rankConfigs(
  candidates: readonly MatmulConfig[],
  flops: number,
  rounds: number,
  time: (c: MatmulConfig) => Promise<number>,
): Promise<MatmulTuneResult[]> {
  const best = candidates.map(() => Infinity);
  const failed = candidates.map(() => false);
  for (let r = 0; r < rounds; r++) {
    for (let i = 0; i < candidates.length; i++) {
      if (failed[i]) continue;
      try {
        best[i] = Math.min(best[i], await time(candidates[i]));
      } catch {
        failed[i] = true;
        best[i] = Infinity;
      }
    }
  }
  return candidates
    .map((config, i) => ({ config, seconds: best[i], gflops: flops / best[i] / 1e9 }))
    .sort((a, b) => a.seconds - b.seconds);
}
