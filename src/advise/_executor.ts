// The advisor's rank: a worker that rebuilds the user's model from its
// spec and weights on its own backend and answers the advisor's requests:
// profile every layer's F, I and W (all ranks at once, so that each pass
// runs under the concurrency of a pipeline), measure stages' activation
// bytes, and time hand-overs to a peer. Its actions do no compute: they
// hand over arrays of the activations' size, so that a run of them times
// what the runtime adds per action. Not exported from the package.

import type { Backend, MatmulConfig, Shape, Tensor } from "../tensor/mod.ts";
import { createBackend } from "../tensor/create_backend.ts";
import type { LayerSpec } from "../nn/layer.ts";
import { layerFromSpec } from "../nn/layer_registry.ts";
import { withoutRandomInit } from "../tensor/random.ts";
import { Sequential } from "../nn/sequential.ts";
import { loadSafetensors } from "../nn/safetensors.ts";
import type { OptimizerSpec } from "../nn/optimizer_spec.ts";
import { type PassProfile, profileLayerPasses } from "../pipeline/partition/layer_passes.ts";
import { profileStageMemory, type StageMemory } from "../pipeline/partition/stage_memory.ts";
import type {
  CallHandlers,
  RankExecutor,
  RankExecutorInit,
  StageContext,
} from "../pipeline/runtime/rank_executor.ts";
import type { PipelineLoss } from "../pipeline/model/model_rank_executor.ts";
import { describeValue } from "../text/describe.ts";

/** What every advisor rank gets. */
export interface AdviseRankOptions {
  readonly spec: LayerSpec;
  readonly weights: Uint8Array;
  readonly backend: "auto" | "cpu" | "webgpu";
  readonly tunedMatmul?: MatmulConfig;
  /** Threads of the rank's CPU backend (default: every core). */
  readonly threads?: number;
  readonly modules: readonly string[];
  readonly loss: PipelineLoss;
  readonly optimizer: OptimizerSpec;
  readonly stepCheck: boolean;
  readonly inputs: Float32Array;
  readonly shape: readonly number[];
  readonly targets: Float32Array;
  readonly targetTail: readonly number[];
  /** Rows the loss averages over in the whole batch. */
  readonly lossRows: number;
  /** Floats each do-nothing action hands over. */
  readonly handOverFloats: number;
}

/** The advisor's requests. */
export type AdviseCalls = {
  readonly profile: {
    readonly args: {
      readonly rows: number;
      readonly repeats: number;
      readonly warmup: number;
      readonly minTimeMs: number;
    };
    readonly result: PassProfile;
  };
  readonly stageMemory: {
    readonly args: { readonly rows: number; readonly boundaries: readonly number[] };
    readonly result: StageMemory[];
  };
  readonly ping: {
    readonly args: {
      readonly peer: number;
      readonly floats: number;
      readonly rounds: number;
      readonly lead: boolean;
    };
    readonly result: number[];
  };
};

function rowSize(shape: readonly number[]): number {
  let n = 1;
  for (let i = 1; i < shape.length; i++) n *= shape[i];
  return n;
}

class AdviseExecutor implements RankExecutor<AdviseCalls> {
  readonly #o: AdviseRankOptions;
  readonly #backend: Backend;
  readonly #model: Sequential;
  readonly #init: RankExecutorInit;

  constructor(init: RankExecutorInit, backend: Backend, model: Sequential) {
    this.#init = init;
    this.#o = init.options as AdviseRankOptions;
    this.#backend = backend;
    this.#model = model;
  }

  // The first `rows` rows of the sample, and their targets.
  #batch(rows: number): { x: Tensor; t: Tensor } {
    const o = this.#o;
    if (!Number.isInteger(rows) || rows < 1 || rows > o.shape[0]) {
      throw new RangeError(
        `rows must be an integer in [1, ${o.shape[0]}], got ${describeValue(rows)}`,
      );
    }
    const shape: Shape = [rows, ...o.shape.slice(1)];
    const x = this.#backend.fromData(o.inputs.slice(0, rows * rowSize(o.shape)), shape);
    const tShape: Shape = [rows, ...o.targetTail];
    const t = this.#backend.fromData(o.targets.slice(0, rows * rowSize(tShape)), tShape);
    return { x, t };
  }

  forward(ctx: StageContext): Float32Array | null {
    return ctx.isLastStage ? null : new Float32Array(this.#o.handOverFloats);
  }

  backward(ctx: StageContext): Float32Array | null {
    return ctx.isFirstStage ? null : new Float32Array(this.#o.handOverFloats);
  }

  backwardInput(ctx: StageContext): Float32Array | null {
    return this.backward(ctx);
  }

  backwardWeight(): void {}

  step(): void {}

  readonly calls: CallHandlers<AdviseCalls> = {
    profile: async ({ rows, repeats, warmup, minTimeMs }) => {
      const { x, t } = this.#batch(rows);
      try {
        return await profileLayerPasses(this.#model, x, {
          repeats,
          warmup,
          minTimeMs,
          targets: t,
          loss: this.#o.loss,
          totalRows: this.#o.lossRows,
          optimizer: this.#o.optimizer,
          stepCheck: this.#o.stepCheck,
        });
      } finally {
        x.dispose();
        t.dispose();
      }
    },
    stageMemory: async ({ rows, boundaries }) => {
      const { x, t } = this.#batch(rows);
      const out: StageMemory[] = [];
      let h = x;
      try {
        for (let s = 0; s + 1 < boundaries.length; s++) {
          const stage = this.#model.slice(boundaries[s], boundaries[s + 1]);
          const last = s + 2 === boundaries.length;
          out.push(
            await profileStageMemory(stage, h, {
              first: s === 0,
              ...(last ? { targets: t, loss: this.#o.loss } : {}),
              totalRows: this.#o.lossRows,
            }),
          );
          if (!last) {
            const next = stage.forward(h, { save: false });
            if (h !== x) h.dispose();
            h = next;
          }
        }
      } finally {
        if (h !== x) h.dispose();
        x.dispose();
        t.dispose();
      }
      return out;
    },
    ping: async ({ peer, floats, rounds, lead }) => {
      const comm = this.#init.comm;
      const times: number[] = [];
      for (let i = 0; i < rounds; i++) {
        const tag = `advise/ping/${i}`;
        if (lead) {
          const t0 = performance.now();
          await comm.send(peer, tag, new Float32Array(floats), { transfer: true });
          await comm.recv(peer, `${tag}/back`);
          times.push((performance.now() - t0) / 2);
        } else {
          const data = await comm.recv(peer, tag);
          await comm.send(peer, `${tag}/back`, data, { transfer: true });
        }
      }
      return times;
    },
  };

  async dispose(): Promise<void> {
    this.#model.dispose();
    await this.#backend.close();
  }
}

/** The worker-side entry point: builds the rank's backend and its copy of the model. */
export async function createRankExecutor(
  init: RankExecutorInit,
): Promise<RankExecutor<AdviseCalls>> {
  const o = init.options as AdviseRankOptions;
  for (const m of o.modules) await import(m);
  const backend = await createBackend(
    o.backend,
    {
      ...(o.tunedMatmul === undefined ? {} : { tunedMatmul: o.tunedMatmul }),
      ...(o.threads === undefined ? {} : { threads: o.threads }),
    },
  );
  let model: Sequential | null = null;
  try {
    // The weights are loaded next: drawing initial ones would be wasted.
    const built = withoutRandomInit(() => layerFromSpec(o.spec, backend));
    if (!(built instanceof Sequential)) {
      built.dispose();
      throw new TypeError(
        `the model's spec must be a Sequential, got ${o.spec.kind}`,
      );
    }
    model = built;
    loadSafetensors(model.parameters(), o.weights, { allowNonFinite: true });
    return new AdviseExecutor(init, backend, model);
  } catch (e) {
    model?.dispose();
    await backend.close();
    throw e;
  }
}

/** This module's URL, for the advisor's worker group. */
export const ADVISE_EXECUTOR_URL: string = import.meta.url;
