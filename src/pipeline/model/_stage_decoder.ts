// The rank side of prediction and generation outside runs: `predict`, and a key/value cache per
// (session, prompt, stage) kept on the rank that owns the stage, each
// `decode` call one forward of new positions through one stage. Not
// exported from the package.

import type { Backend } from "../../tensor/mod.ts";
import * as ops from "../../tensor/ops.ts";
import type { Layer } from "../../nn/layer.ts";
import { cachedForward, KVCache } from "../../nn/kv_cache.ts";
import { CheckpointedStage } from "../checkpoint/checkpointed_stage.ts";
import type { DecodeArgs, PredictArgs, TensorData } from "./stage_calls.ts";

/** The caches of one rank's stages and the forwards that fill them. */
export class StageDecoder {
  readonly #backend: Backend;
  readonly #stage: (s: number) => Layer;
  readonly #caches = new Map<string, KVCache>();

  /** Decodes on `backend` through the layers `stage(s)` gives. */
  constructor(backend: Backend, stage: (s: number) => Layer) {
    this.#backend = backend;
    this.#stage = stage;
  }

  /** `stage`'s forward of `data`, nothing kept (the `predict` call). */
  async predict({ stage, data, shape }: PredictArgs): Promise<TensorData> {
    const x = this.#backend.fromData(data, [...shape]);
    try {
      const y = this.#stage(stage).forward(x, { save: false });
      const out = await y.toArray().finally(() => y.dispose());
      return { data: out, shape: [...y.shape] };
    } finally {
      x.dispose();
    }
  }

  /**
   * The forward of `args.data` (new positions of prompt `slot`) through
   * stage `args.stage` with its cache (made on the prompt's first call);
   * with `lastOnly`, only the last position's output comes back.
   */
  async decode(args: DecodeArgs): Promise<TensorData> {
    const key = `${args.session}/${args.slot}/${args.stage}`;
    let layer = this.#stage(args.stage);
    if (layer instanceof CheckpointedStage) layer = layer.sequential;
    let cache = this.#caches.get(key);
    if (cache === undefined) this.#caches.set(key, cache = new KVCache());
    const x = this.#backend.fromData(args.data, [...args.shape]);
    let y;
    try {
      y = cachedForward(layer, x, cache);
    } finally {
      x.dispose();
    }
    const [b, t] = y.shape;
    if (args.lastOnly && b === 1 && t > 1) {
      const rows = y.reshape([t, ...y.shape.slice(2)]);
      y.dispose();
      const last = ops.sliceRows(rows, t - 1, t);
      rows.dispose();
      y = last.reshape([1, 1, ...last.shape.slice(1)]);
      last.dispose();
    }
    const shape = [...y.shape];
    const data = await y.toArray().finally(() => y.dispose());
    return { data, shape };
  }

  /** Drops the caches of `session`; null (the call's answer). */
  end(session: number): null {
    for (const [k, c] of [...this.#caches]) {
      if (k.startsWith(`${session}/`)) {
        c.dispose();
        this.#caches.delete(k);
      }
    }
    return null;
  }

  /** Drops every cache. */
  dispose(): void {
    for (const c of this.#caches.values()) c.dispose();
    this.#caches.clear();
  }
}
