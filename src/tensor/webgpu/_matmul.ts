/**
 * WebGPU glue of the matmul: which kernel variant runs (tuned per adapter,
 * see `_matmul_config.ts`) and how a product is dispatched
 * (`matmul.wgsl`, the register-blocked `direct` family, or
 * `matmul_tiled.wgsl`, the shared-tile `tiled` family).
 *
 * @module
 */

import { shapeSize, type Tensor } from "../tensor.ts";
import { buf, ceilDiv, type DeviceCore, MAX_GROUPS, round4 } from "./_device.ts";
import { KERNELS } from "./_kernels.ts";
import { stridedCopy, type StridedView } from "./_layout.ts";
import {
  cachedConfig,
  candidateConfigs,
  checkConfig,
  configDefines,
  defaultConfig,
  LARGE_MATMUL_OUTPUTS,
  type MatmulConfig,
  type MatmulTuneResult,
  rankConfigs,
  storeConfig,
  workgroupTile,
} from "./_matmul_config.ts";

/** The matmul of one device: the chosen variants, tuning, and dispatch. */
export class MatmulEngine {
  readonly #core: DeviceCore;
  readonly #adapterKey: string;
  // Variant for matmuls with at least LARGE_MATMUL_OUTPUTS outputs (tuned)
  // and for smaller ones (quick to compile).
  #large: MatmulConfig;
  #small: MatmulConfig;
  #tuneResults: readonly MatmulTuneResult[] = [];

  /** Starts from the untimed default variant of the adapter class. */
  constructor(core: DeviceCore, adapterKey: string) {
    this.#core = core;
    this.#adapterKey = adapterKey;
    this.#large = this.#small = defaultConfig(core.cpuAdapter);
  }

  /** The variant for large problems. */
  get config(): MatmulConfig {
    return this.#large;
  }

  /** Timings of the last tuning, fastest first. */
  get tuneResults(): readonly MatmulTuneResult[] {
    return this.#tuneResults;
  }

  #check(config: MatmulConfig): void {
    const l = this.#core.device.limits;
    checkConfig(config, l.maxComputeInvocationsPerWorkgroup, l.maxComputeWorkgroupStorageSize);
  }

  /** Takes `config` (tuned elsewhere) for large problems; small ones keep the default. */
  useTuned(config: MatmulConfig): void {
    this.#check(config);
    this.#large = { ...config };
  }

  /** Takes this adapter's cached choice, if there is one; says whether it did. */
  useCached(): boolean {
    const cached = cachedConfig(this.#adapterKey);
    if (cached === undefined) return false;
    this.#large = cached;
    return true;
  }

  /** Uses `config` for every later matmul of any size. */
  pin(config: MatmulConfig): void {
    this.#check(config);
    this.#large = this.#small = { ...config };
  }

  /**
   * Times the candidates on a 512³ problem, keeps the fastest for large
   * matmuls, caches it for this adapter and returns all timings.
   */
  async tune(description: string): Promise<readonly MatmulTuneResult[]> {
    const core = this.#core;
    const n = 512;
    const data = new Float32Array(n * n);
    for (let i = 0; i < data.length; i++) data[i] = ((i * 7919) % 1000) / 1000 - 0.5;
    const a = core.upload(data, [n, n]);
    const b = core.upload(data, [n, n]);
    const c = core.newTensor([n, n]);
    const candidates = candidateConfigs(core.cpuAdapter).filter((cfg) => {
      try {
        this.#check(cfg);
        return true;
      } catch {
        return false;
      }
    });
    const warmed = new Set<MatmulConfig>();
    const reps = new Map<MatmulConfig, number>();
    const time = async (cfg: MatmulConfig): Promise<number> => {
      await core.sync();
      if (!warmed.has(cfg)) {
        // Compiles the pipeline; not timed.
        this.#into(cfg, a, b, c, false, false);
        await core.sync();
        warmed.add(cfg);
      }
      let r = reps.get(cfg) ?? 1;
      for (;;) {
        const t0 = performance.now();
        for (let i = 0; i < r; i++) this.#into(cfg, a, b, c, false, false);
        await core.sync();
        const dt = (performance.now() - t0) / 1000;
        // A submit-and-wait round trip costs ~10 ms on some adapters: batch
        // more matmuls per sample until that is a small share of a sample.
        if (dt >= 0.04 || r >= 1024) {
          reps.set(cfg, r);
          return dt / r;
        }
        r *= dt < 0.005 ? 8 : 2;
      }
    };
    try {
      const results = await rankConfigs(candidates, 2 * n * n * n, 3, time);
      const best = results[0];
      if (best === undefined || !Number.isFinite(best.seconds)) {
        throw new Error(`matmul autotune: no candidate ran on ${description}`);
      }
      this.#large = best.config;
      this.#tuneResults = results;
      storeConfig(this.#adapterKey, best.config);
      return results;
    } finally {
      a.dispose();
      b.dispose();
      c.dispose();
    }
  }

  /** Batched matrix product (see `Backend.matmul`). */
  matmul(a: Tensor, b: Tensor, transA: boolean, transB: boolean): Tensor {
    const ar = a.shape.length, br = b.shape.length;
    const M = transA ? a.shape[ar - 1] : a.shape[ar - 2];
    const N = transB ? b.shape[br - 2] : b.shape[br - 1];
    const out = this.#core.newTensor([...a.shape.slice(0, -2), M, N]);
    const cfg = out.size >= LARGE_MATMUL_OUTPUTS ? this.#large : this.#small;
    this.#into(cfg, a, b, out, transA, transB);
    return out;
  }

  /**
   * Records C = op(A) · op(B) into `out` with variant `cfg`. The direct
   * family needs row strides and K padded to multiples of 4: operands that
   * are not are copied into zero-padded temporaries, and a result with N not
   * a multiple of 4 is computed padded and cropped.
   */
  #into(
    cfg: MatmulConfig,
    a: Tensor,
    b: Tensor,
    out: Tensor,
    transA: boolean,
    transB: boolean,
  ): void {
    const core = this.#core;
    const ar = a.shape.length, br = b.shape.length;
    const M = transA ? a.shape[ar - 1] : a.shape[ar - 2];
    const K = transA ? a.shape[ar - 2] : a.shape[ar - 1];
    const N = transB ? b.shape[br - 2] : b.shape[br - 1];
    const batch = shapeSize(a.shape.slice(0, -2));
    const bShared = br === 2;
    if (out.size === 0) return;
    if (K === 0) {
      core.clear(buf(out), out.size);
      return;
    }
    const temps: GPUBuffer[] = [];
    const strided = (src: GPUBuffer, view: StridedView, rows: number, cols: number) => {
      const dst = core.temp(view.batch * rows * cols * 4);
      temps.push(dst);
      stridedCopy(core, src, view, rows, cols, dst);
      return dst;
    };
    let A = buf(a), B = buf(b), C = buf(out);
    const direct = cfg.family === "direct";
    const K4 = round4(K), M4 = round4(M), N4 = round4(N);
    const bBatch = bShared ? 1 : batch;
    // The direct family reads A as [M, K4] or [K4, M4] and B as [K4, N4] or
    // [N, K4], zero-padded; other layouts are copied into that shape.
    let padA = direct, padB = direct;
    if (cfg.transposes === "copy") {
      // Read transposed operands in the plain layout: one strided copy
      // (padding included) instead of another kernel variant to compile.
      if (transA) {
        const view = { batch, rows: M, cols: K, rowStride: 1, colStride: M, batchStride: K * M };
        A = strided(A, view, M, direct ? K4 : K);
        padA = false;
      }
      if (transB) {
        const view = {
          batch: bBatch,
          rows: K,
          cols: N,
          rowStride: 1,
          colStride: K,
          batchStride: N * K,
        };
        B = strided(B, view, direct ? K4 : K, direct ? N4 : N);
        padB = false;
      }
      transA = transB = false;
    }
    // Row strides (elements) of A, B, C as the kernel will see them.
    let lda = transA ? M : K, ldb = transB ? K : N, ldc = N;
    let kk = K;
    if (direct) {
      const [aRows, aCols, aRows4, aCols4] = transA ? [K, M, K4, M4] : [M, K, M, K4];
      if (padA && (aRows !== aRows4 || aCols !== aCols4)) {
        const view = {
          batch,
          rows: aRows,
          cols: aCols,
          rowStride: aCols,
          colStride: 1,
          batchStride: aRows * aCols,
        };
        A = strided(A, view, aRows4, aCols4);
      }
      const [bRows, bCols, bRows4, bCols4] = transB ? [N, K, N, K4] : [K, N, K4, N4];
      if (padB && (bRows !== bRows4 || bCols !== bCols4)) {
        const view = {
          batch: bBatch,
          rows: bRows,
          cols: bCols,
          rowStride: bCols,
          colStride: 1,
          batchStride: bRows * bCols,
        };
        B = strided(B, view, bRows4, bCols4);
      }
      lda = transA ? M4 : K4;
      ldb = transB ? K4 : N4;
      kk = K4;
      if (N !== N4) {
        C = core.temp(batch * M * N4 * 4);
        temps.push(C);
        ldc = N4;
      }
    }
    const strideA = (transA ? kk : M) * lda;
    const strideB = bShared ? 0 : (transB ? N : kk) * ldb;
    const strideC = M * ldc;
    const kernel = direct ? KERNELS.matmul : KERNELS.matmulTiled;
    const defines = configDefines(cfg, transA, transB);
    const { bm, bn } = workgroupTile(cfg);
    const gx = ceilDiv(N, bn), gy = ceilDiv(M, bm);
    for (let oz = 0; oz < batch; oz += MAX_GROUPS) {
      for (let oy = 0; oy < gy; oy += MAX_GROUPS) {
        for (let ox = 0; ox < gx; ox += MAX_GROUPS) {
          core.dispatch(
            kernel,
            defines,
            { M, N, K: kk, lda, ldb, ldc, strideA, strideB, strideC, offX: ox, offY: oy, offZ: oz },
            [A, B, C],
            [
              Math.min(MAX_GROUPS, gx - ox),
              Math.min(MAX_GROUPS, gy - oy),
              Math.min(MAX_GROUPS, batch - oz),
            ],
          );
        }
      }
    }
    if (C !== buf(out)) {
      // Crop the padded columns.
      const view = { batch, rows: M, cols: N, rowStride: ldc, colStride: 1, batchStride: M * ldc };
      stridedCopy(core, C, view, M, N, buf(out));
    }
    for (const t of temps) core.pool.release(t);
  }
}
