/**
 * A pipeline-parallel model's training checkpoint: every rank's share
 * (its stages' weights and optimizer state) gathered into one file in the
 * single-device layout (`@conveyor/core`'s training checkpoint format), and
 * a file checked against the whole model on the main thread before any
 * rank loads its share, so that a refused file changes nothing. Nothing in
 * the file depends on placement: it loads into any rank count, schedule,
 * or the single-device model (`loadTrainingCheckpoint`).
 *
 * @module
 */

import { checkOptionsObject, checkOptionSpelling } from "../../text/nearest.ts";
import { checkFiniteTensor } from "../../nn/safetensors.ts";
import { parseSafetensors } from "../../nn/safetensors.ts";
import { createOptimizer, type OptimizerSpec } from "../../nn/optimizer_spec.ts";
import {
  checkCheckpointFits,
  decodeTrainingCheckpoint,
  encodeTrainingCheckpoint,
  type TrainingCheckpoint,
  type TrainingCheckpointInfo,
} from "../../nn/training_checkpoint.ts";
import type { RankGroup } from "../runtime/rank_group.ts";
import type { ModelStageCalls } from "./stage_calls.ts";
import { callEveryRank, replicasAgreeing } from "./_every_rank.ts";
import { mergeShardedStates } from "./_optimizer_shard.ts";
import { filePath } from "./_file_path.ts";
import { describeValue } from "../../text/describe.ts";

/** Options of `PipelineParallelModel.saveCheckpoint`. */
export interface SaveCheckpointOptions {
  /**
   * Whatever the data order needs to continue (strings; e.g. a batch
   * `Rng`'s `JSON.stringify(rng.state())`), stored as the `data` metadata
   * and given back by `loadCheckpoint` / `resumedFrom`.
   */
  readonly data?: Readonly<Record<string, string>>;
}

/** A model parameter: name and shape. */
export interface ModelParameter {
  readonly name: string;
  readonly shape: readonly number[];
}

/**
 * The bytes of `source`: a path or a `file:` URL (percent-decoded) is read,
 * bytes are taken as they are; another URL scheme is a TypeError.
 */
export async function readCheckpointSource(
  source: string | URL | Uint8Array,
  where: string,
): Promise<Uint8Array> {
  if (source instanceof Uint8Array) return source;
  if (typeof source !== "string" && !(source instanceof URL)) {
    throw new TypeError(
      `${where} must be a path, a file URL or the checkpoint's bytes (Uint8Array), got ${
        describeValue(source)
      }`,
    );
  }
  const path = filePath(source, where);
  try {
    return await Deno.readFile(path);
  } catch (e) {
    throw new Error(`${where}: cannot read ${path}: ${(e as Error).message}`, {
      cause: e,
    });
  }
}

/**
 * Reads and checks a checkpoint to load (`where` names the option or
 * method in errors): its bytes and what it holds.
 */
export async function readModelCheckpoint(
  source: string | URL | Uint8Array,
  where: string,
  params: readonly ModelParameter[],
  optimizer: OptimizerSpec,
  allowNonFinite = false,
): Promise<{ bytes: Uint8Array; info: TrainingCheckpointInfo }> {
  const bytes = await readCheckpointSource(source, where);
  const ck = checkModelCheckpoint(bytes, params, optimizer, allowNonFinite);
  return {
    bytes,
    info: {
      step: ck.step,
      optimizerStep: ck.optimizerStep,
      optimizer: ck.optimizer,
      data: ck.data,
    },
  };
}

/**
 * Parses `bytes` and checks them against the whole model (see
 * `checkCheckpointFits`), then their checksums: every rule of the training
 * checkpoint reader (non-finite values refused unless `allowNonFinite`).
 */
export function checkModelCheckpoint(
  bytes: Uint8Array,
  params: readonly ModelParameter[],
  optimizer: OptimizerSpec,
  allowNonFinite = false,
): TrainingCheckpoint {
  const { ck, verify } = decodeTrainingCheckpoint(bytes, { allowNonFinite });
  const probe = createOptimizer(optimizer, []);
  probe.dispose();
  checkCheckpointFits(ck, params, { kind: probe.kind, stateSlots: probe.stateSlots });
  verify();
  return ck;
}

/**
 * Gathers every rank's share into one checkpoint: tensors in the model's
 * parameter order (the single-device writer's order, so the same state
 * gives the same bytes), metadata from `optimizer` (its full description)
 * and `options.data`. `step` is the model's training steps (skipped ones
 * included); the ranks' optimizers tell the steps they applied. With a
 * sharded optimizer (ZeRO-1) each slot is taken from the replica that owns
 * each range: the file is the unsharded one.
 */
export async function gatherCheckpoint(
  ranks: RankGroup<ModelStageCalls>,
  params: readonly ModelParameter[],
  optimizer: OptimizerSpec,
  options: SaveCheckpointOptions | undefined,
  step: number,
): Promise<Uint8Array> {
  const all = await callEveryRank(ranks, "saveState", null);
  // ZeRO-1: each replica wrote its share of the optimizer state; join them.
  const parts = all.length > 0 && parseSafetensors(all[0]).metadata.shards !== undefined
    ? mergeShardedStates(all, ranks.replicas ?? 1)
    : replicasAgreeing(ranks, "saveState", all);
  const tensors = new Map<string, Float32Array>();
  let applied: number | undefined, override: string | undefined;
  parts.forEach((bytes, r) => {
    const f = parseSafetensors(bytes);
    if (
      applied !== undefined &&
      (String(applied) !== f.metadata.step || override !== f.metadata.lr_override)
    ) {
      throw new Error(
        `rank ${r} is at step ${f.metadata.step}, rank 0 at ${applied}: the ranks disagree`,
      );
    }
    applied = Number(f.metadata.step);
    override = f.metadata.lr_override;
    for (const [name, e] of f.tensors) tensors.set(name, e.data);
  });
  const probe = createOptimizer(optimizer, []);
  probe.dispose();
  const slots = new Map<string, Float32Array[]>();
  for (const { name } of params) {
    const s = probe.stateSlots.map((slot) => tensors.get(`optim.${name}.${slot}`));
    if (s.length > 0 && s.every((d) => d !== undefined)) slots.set(name, s as Float32Array[]);
  }
  if ((applied ?? 0) > step) {
    throw new Error(
      `the ranks' optimizers applied ${applied} steps, more than the model's ${step} steps`,
    );
  }
  return encodeTrainingCheckpoint({
    step,
    optimizerStep: applied ?? 0,
    optimizer: probe.spec() as unknown as OptimizerSpec,
    lrOverride: override === undefined ? null : Number(JSON.parse(override)),
    ...(options?.data === undefined ? {} : { data: options.data }),
    weights: params.map(({ name, shape }) => {
      const data = tensors.get(`model.${name}`);
      if (data === undefined) throw new Error(`no rank returned parameter ${name}`);
      return { name, shape, data };
    }),
    slots,
  });
}

/**
 * Checks a whole-model weights file against the model: every parameter
 * present with its shape, no tensor the model lacks (RangeError naming it).
 */
export function checkWeightsFile(
  bytes: Uint8Array,
  params: readonly ModelParameter[],
  allowNonFinite = false,
): void {
  const file = parseSafetensors(bytes);
  if (!allowNonFinite) { for (const [name, e] of file.tensors) checkFiniteTensor(name, e.data); }
  const wanted = new Set<string>();
  for (const { name, shape } of params) {
    wanted.add(name);
    const e = file.tensors.get(name);
    if (e === undefined) {
      throw new RangeError(`safetensors: the file has no tensor ${name} (shape [${shape}])`);
    }
    if (e.shape.length !== shape.length || e.shape.some((d, i) => d !== shape[i])) {
      throw new RangeError(
        `safetensors: tensor ${name} has shape [${e.shape}], the model needs [${shape}]`,
      );
    }
  }
  for (const name of file.tensors.keys()) {
    if (!wanted.has(name)) {
      throw new RangeError(`safetensors: the file has tensor ${name}, which the model lacks`);
    }
  }
}

/**
 * Checks the options of `loadSafetensors` or `loadCheckpoint` (`call`): an
 * object when given, a misspelt key named with the one meant.
 */
export function checkLoadOptions(options: unknown, known: readonly string[], call: string): void {
  if (options !== undefined) checkOptionsObject(options, known, `${call}: `);
}

/** Checks `options` of `saveCheckpoint` (TypeError naming the value). */
export function checkSaveOptions(options: SaveCheckpointOptions | undefined): void {
  if (options === undefined) return;
  if (options === null || typeof options !== "object") {
    throw new TypeError(`options must be an object { data }, got ${describeValue(options)}`);
  }
  checkOptionSpelling(options, ["data"], "checkpoint options: ");
  const d = options.data;
  if (d === undefined) return;
  if (d === null || typeof d !== "object" || Array.isArray(d)) {
    throw new TypeError(`options.data must be an object of strings, got ${JSON.stringify(d)}`);
  }
  for (const [k, v] of Object.entries(d)) {
    if (typeof v !== "string") {
      throw new TypeError(`options.data.${k} must be a string, got ${typeof v}`);
    }
  }
}
