/**
 * Planning a pipeline-parallel model, before any rank starts: options →
 * schedule → input shape → layer costs → partition into p·V stages →
 * placement (each stage's spec and weights on the rank the schedule puts it).
 *
 * @module
 */

import type { Shape } from "../../tensor/mod.ts";
import type { LayerSpec, Parameter } from "../../nn/layer.ts";
import { saveSafetensors } from "../../nn/safetensors.ts";
import type { Schedule } from "../schedule/schedule.ts";
import { generateSchedule } from "../schedule/generate.ts";
import { checkSchedule } from "../runtime/checked_schedule.ts";
import { checkInFlightCap } from "../analysis/in_flight.ts";
import {
  LoadBalancedPartition,
  type PartitionResult,
  validatePartition,
} from "../partition/partition.ts";
import { layerCosts } from "../partition/layer_costs.ts";
import type { PipelineParallelModelOptions } from "./options.ts";
import { describeValue } from "../../text/describe.ts";
import { tiedLinks } from "./_tied_placement.ts";
import type { TiedLink } from "./stage_options.ts";

/** Where everything goes: the schedule, the cut, each stage's spec and each rank's weights. */
export interface ModelPlan {
  /** The schedule every step follows (validated). */
  readonly schedule: Schedule;
  /** How the layers were cut into stages. */
  readonly partition: PartitionResult;
  /** One spec per global stage: the stage as a `Sequential`. */
  readonly stageSpecs: readonly LayerSpec[];
  /** Per rank: its stages' parameters as one safetensors file. */
  readonly weights: readonly Uint8Array[];
  /** Shared parameters held on two ranks (tied embeddings across ranks). */
  readonly tied: readonly TiedLink[];
  /** Every parameter of the model, in its order: name and shape. */
  readonly params: readonly { readonly name: string; readonly shape: readonly number[] }[];
}

function buildSchedule(o: PipelineParallelModelOptions): Schedule {
  if (typeof o.schedule === "string") {
    return generateSchedule(o.schedule, {
      ranks: o.ranks as number,
      microBatches: o.microBatches as number,
      stagesPerRank: o.stagesPerRank,
    });
  }
  const s = o.schedule;
  if (s === null || typeof s !== "object") {
    throw new TypeError(`schedule must be a name or a Schedule, got ${describeValue(s)}`);
  }
  for (
    const [what, want, got] of [
      ["ranks", o.ranks, s.ranks],
      ["microBatches", o.microBatches, s.microBatches],
      ["stagesPerRank", o.stagesPerRank, s.stagesPerRank],
    ] as const
  ) {
    if (want !== undefined && want !== got) {
      throw new RangeError(`${what} is ${want} but the given schedule has ${what} ${got}`);
    }
  }
  return s;
}

function inferInputShape(spec: LayerSpec): Shape | null {
  const a = spec.args as Record<string, unknown>;
  switch (spec.kind) {
    case "TokenPositionEmbedding":
      return [1, a.maxLen as number];
    case "Embedding":
      return [1, 1];
    case "Linear":
      return [1, a.inFeatures as number];
    case "LayerNorm":
    case "MLP":
      return [1, a.dim as number];
    case "TransformerBlock":
    case "CausalSelfAttention":
      return [1, 1, a.dim as number];
    case "Sequential": {
      const first = (a.layers as LayerSpec[])[0];
      return first === undefined ? null : inferInputShape(first);
    }
    default:
      return null;
  }
}

/**
 * Plans `o` (whose other options are already checked): builds and validates
 * the schedule, checks a checkpoint cap against it, costs the layers, cuts
 * them into p·V stages and gathers each rank's weights.
 */
export async function planModel(
  o: PipelineParallelModelOptions,
  maxActivationsInMemory: number | undefined,
): Promise<ModelPlan> {
  // Checked once here; the rank groups take the checked copy as it is.
  const schedule = checkSchedule(buildSchedule(o));
  // The stages refuse a forward past the cap: fail here, not in the first step.
  if (maxActivationsInMemory !== undefined) checkInFlightCap(schedule, maxActivationsInMemory);
  const numStages = schedule.stageToRank.length;
  const costSource = o.partitionCosts ?? "flops";
  let shape = o.inputShape ?? null;
  if (shape === null && costSource !== "flops") shape = [1, 1];
  if (shape === null) shape = inferInputShape(o.model.spec());
  if (shape === null) {
    throw new TypeError(
      `cannot infer an input shape for the FLOPs costs from a first layer of kind ${
        o.model.layers[0].kind
      }; pass inputShape or partitionCosts "params" or "count"`,
    );
  }
  const costs = costSource === "flops"
    ? layerCosts(o.model, shape, "flops")
    : o.model.layers.map((l) => ({
      kind: l.kind,
      cost: costSource === "count" ? 1 : l.parameters().reduce((a, p) => a + p.value.size, 0),
    }));
  const strategy = o.partition ?? new LoadBalancedPartition();
  if (
    strategy === null || typeof strategy !== "object" || typeof strategy.partition !== "function"
  ) {
    throw new TypeError(
      `partition must be a PartitionStrategy (an object with a partition method: ` +
        `new LoadBalancedPartition(), the default, new UniformPartition() or ` +
        `new FixedPartition(boundaries), from @conveyor/core), got ${describeValue(strategy)}`,
    );
  }
  if (costs.length < numStages) {
    const ranks = new Set(schedule.stageToRank).size;
    const name = typeof o.schedule === "string" ? `${o.schedule} ` : "the schedule ";
    throw new RangeError(
      `the model has ${costs.length} layer${costs.length === 1 ? "" : "s"}, fewer than the ` +
        `${numStages} stages of ${name}on ${ranks} rank${ranks === 1 ? "" : "s"}` +
        (numStages === ranks ? "" : ` (${numStages / ranks} stages per rank)`) +
        ": every stage needs at least one layer; use fewer ranks" +
        (numStages === ranks ? "" : " or a schedule of one stage per rank") +
        ", or a model of more layers",
    );
  }
  const partition = strategy.partition(costs, numStages);
  const b = partition?.boundaries;
  // A user's strategy may return anything: check its cut before slicing by it.
  try {
    validatePartition(b, costs.length, numStages);
  } catch (e) {
    const shown = Array.isArray(b)
      ? `[${b.slice(0, 20).join(", ")}${b.length > 20 ? ", …" : ""}]`
      : String(b);
    throw new RangeError(
      `partition ${shown} from the "${String(strategy.name)}" strategy: ${(e as Error).message} ` +
        `(${costs.length} layers into ${numStages} stages)`,
    );
  }
  const slices = Array.from({ length: numStages }, (_, s) => o.model.slice(b[s], b[s + 1]));
  const tied = tiedLinks(slices, schedule);
  if (tied.length > 0 && o.shardOptimizer === true && (o.dataParallel ?? 1) > 1) {
    const t = tied[0].link;
    throw new RangeError(
      `shardOptimizer with tied embeddings on two ranks (${t.name} on rank ${t.ownerRank}, its ` +
        `head on rank ${t.headRank}) is not supported: train without shardOptimizer, or with a ` +
        `schedule that puts the first and last stage on one rank (zb-v, dualpipe-v)`,
    );
  }
  // Each rank's weights: its stages' parameters, named as in the whole model.
  const rankParams: Parameter[][] = Array.from({ length: schedule.ranks }, () => []);
  slices.forEach((sl, s) => rankParams[schedule.stageToRank[s]].push(...sl.parameters()));
  // A tied head on another rank than its table starts from a copy of it.
  for (const { link, param } of tied) {
    rankParams[link.headRank].push(param);
  }
  return {
    schedule,
    partition,
    stageSpecs: slices.map((sl) => sl.spec()),
    tied: tied.map((t) => t.link),
    weights: await Promise.all(rankParams.map((ps) => saveSafetensors(ps))),
    params: o.model.parameters().map((p) => ({ name: p.name, shape: [...p.value.shape] })),
  };
}
