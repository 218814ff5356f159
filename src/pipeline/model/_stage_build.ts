// A model rank's stages and their optimizers, built from the stage options:
// each stage a `Sequential` from its spec (wrapped for activation
// checkpointing when asked), each with its optimizer, or with ZeRO-1
// (`shard`) this replica's share of it. Not exported from the package.

import type { Backend } from "../../tensor/mod.ts";
import type { Layer } from "../../nn/layer.ts";
import { layerFromSpec } from "../../nn/layer_registry.ts";
import { Sequential } from "../../nn/sequential.ts";
import type { OptimizerBase } from "../../nn/optimizer_base.ts";
import { createOptimizer } from "../../nn/optimizer_spec.ts";
import { tieParameters } from "../../nn/tied_head.ts";
import { CheckpointedStage } from "../checkpoint/checkpointed_stage.ts";
import type { ModelStageOptions } from "./stage_options.ts";
import { ShardedStages } from "./_optimizer_shard.ts";

/** A rank's built stages. */
export interface BuiltStages {
  readonly layers: Map<number, Layer>;
  readonly optimizers: Map<number, OptimizerBase>;
  /** ZeRO-1's shares (null: whole optimizers). */
  readonly shards: ShardedStages | null;
}

/** Builds `stages` on `backend`; on a failure everything built so far is released. */
export function buildStages(
  o: ModelStageOptions,
  stages: readonly number[],
  backend: Backend,
): BuiltStages {
  const layers = new Map<number, Layer>();
  const optimizers = new Map<number, OptimizerBase>();
  let shards: ShardedStages | null = null;
  try {
    for (const s of stages) {
      const built = layerFromSpec(o.stageSpecs[s], backend);
      if (!(built instanceof Sequential)) {
        built.dispose();
        throw new TypeError(
          `spec of stage ${s} must be a Sequential, got ${o.stageSpecs[s].kind}`,
        );
      }
      const layer = o.checkpoint === undefined ? built : new CheckpointedStage(built, o.checkpoint);
      layers.set(s, layer);
    }
    // A tied head shares its table with the stage that holds it on this rank (plan checked).
    tieParameters([...layers.values()]);
    if (o.shard === undefined) {
      for (const [s, layer] of layers) {
        optimizers.set(s, createOptimizer(o.optimizer, layer.parameters()));
      }
    } else {
      shards = new ShardedStages(o.optimizer, layers, o.shard);
      for (const s of stages) optimizers.set(s, shards.optimizer(s));
    }
  } catch (e) {
    for (const c of layers.values()) c.dispose();
    for (const opt of optimizers.values()) opt.dispose();
    shards?.dispose();
    throw e;
  }
  return { layers, optimizers, shards };
}
