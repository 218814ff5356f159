/**
 * Training checkpoints: the weights, every optimizer state tensor, the step
 * count (the lr schedule's position), a learning rate set by hand and the
 * data order's state, in one safetensors file, so that a stopped run
 * resumes bit for bit. A pipeline-parallel model writes the same file
 * (gathered from every rank) and reads it into any rank count, schedule or
 * the single-device model: nothing in it depends on placement.
 *
 * **Format (version 1).** A safetensors file (F32 tensors, readable by any
 * safetensors tool) with
 *
 * - `model.<parameter name>`: each parameter, in the model's order;
 * - `optim.<parameter name>.<slot>`: each optimizer state tensor, named as
 *   in PyTorch's state dict (AdamW `exp_avg`, `exp_avg_sq`; SGD with
 *   momentum `momentum_buffer`), present from step 1 on;
 * - `__metadata__` (strings): `format` = `"conveyor-training-checkpoint"`,
 *   `format_version` = `"1"`, `step` (training steps taken, steps skipped
 *   as non-finite included: the next step's index), `optimizer_step`
 *   (optimizer steps applied: AdamW's bias correction and the lr schedule's
 *   position), `skipped_steps` (steps skipped; `step` = `optimizer_step` +
 *   `skipped_steps`), `optimizer` (JSON of the optimizer spec it was
 *   written with: kind, every hyper-parameter, `lrSchedule`), `lr_override`
 *   (JSON number, only when `setLearningRate` was called), `data` (JSON
 *   object of strings, only when given: whatever the data order needs, e.g.
 *   an `Rng` state) and the safetensors checksums (`data_crc32`,
 *   `header_crc32`: see `parseSafetensors`).
 *
 * A file written before `optimizer_step`, `skipped_steps` and the checksums
 * existed loads as it did: `optimizer_step` = `step`, nothing skipped, no
 * checksum to check.
 *
 * **Loading.** Everything is checked before anything changes: the file's
 * layout, the format and version, every metadata field and that the step
 * counts agree, every tensor's name, every weight finite and every
 * optimizer state value finite (unless `allowNonFinite`), no negative
 * `exp_avg_sq` (never, whatever is allowed: no run writes one), the
 * optimizer kind against the model's, every parameter present with its
 * shape, no tensor the model lacks, every state slot present with its
 * parameter's shape once the optimizer has stepped, and last the
 * checksums (a flipped bit is refused naming its tensor). The checkpoint
 * restores *state* (weights, state slots, the step counts, a hand-set lr);
 * the optimizer's *configuration* (hyper-parameters, lr schedule) stays
 * the model's own, and the schedule continues from the restored optimizer
 * step count.
 *
 * @module
 */

import { checkOptionsObject } from "../text/nearest.ts";
import type { Layer, Parameter } from "./layer.ts";
import * as ops from "../tensor/ops.ts";
import { fmtShape, sameShape } from "./_util.ts";
import {
  decodeSafetensors,
  encodeSafetensors,
  type SafetensorsEntry,
  type SafetensorsTensor,
} from "./safetensors.ts";
import type { OptimizerBase, OptimizerState } from "./optimizer_base.ts";
import { checkOptimizerSpec, type OptimizerSpec, optimizerStateSlots } from "./optimizer_spec.ts";
import { checkValues } from "./_state_values.ts";
import { checkData, checkStepsAgree, fail, json, stepCounts } from "./_checkpoint_fields.ts";
import { describeValue } from "../text/describe.ts";

// The `format` metadata value of a training checkpoint.
const CHECKPOINT_FORMAT = "conveyor-training-checkpoint";
// The format version this module writes and reads.
const CHECKPOINT_FORMAT_VERSION = 1;

/** A parsed, validated training checkpoint. */
export interface TrainingCheckpoint {
  /** Training steps taken when it was written, skipped ones included: the next step's index. */
  readonly step: number;
  /** Optimizer steps applied (AdamW's bias correction, the lr schedule's position). */
  readonly optimizerStep: number;
  /** Steps skipped as non-finite: `step - optimizerStep`. */
  readonly skippedSteps: number;
  /** The optimizer spec it was written with (every hyper-parameter, the lr schedule). */
  readonly optimizer: OptimizerSpec;
  /** The learning rate set by hand (`setLearningRate`), or null. */
  readonly lrOverride: number | null;
  /** The data order's state as the writer gave it (empty when none). */
  readonly data: Readonly<Record<string, string>>;
  /** Parameter name → its tensor, in the file's order. */
  readonly weights: ReadonlyMap<string, SafetensorsEntry>;
  /** The optimizer's state, keyed by parameter name. */
  readonly optimizerState: OptimizerState;
}

/** What {@linkcode encodeTrainingCheckpoint} writes. */
export interface TrainingCheckpointContents {
  /** Training steps taken, skipped ones included. */
  readonly step: number;
  /** Optimizer steps applied (default `step`: none skipped); at most `step`. */
  readonly optimizerStep?: number;
  /** The optimizer spec (written as JSON; its kind decides the state slots). */
  readonly optimizer: OptimizerSpec;
  /** A learning rate set by hand, or null. */
  readonly lrOverride: number | null;
  /** The data order's state (optional). */
  readonly data?: Readonly<Record<string, string>>;
  /** Every parameter, in the model's order, named as in the model. */
  readonly weights: readonly SafetensorsTensor[];
  /** Parameter name → its state slots in the optimizer's slot order (empty before step 1). */
  readonly slots: ReadonlyMap<string, readonly Float32Array[]>;
}

/** What a loaded checkpoint tells its loader. */
export interface TrainingCheckpointInfo {
  /** Training steps taken, skipped ones included: the next training step has this index (0-based). */
  readonly step: number;
  /** Optimizer steps applied (`step` less the steps skipped as non-finite). */
  readonly optimizerStep: number;
  /** The optimizer spec it was written with. */
  readonly optimizer: OptimizerSpec;
  /** The data order's state as the writer gave it (empty when none). */
  readonly data: Readonly<Record<string, string>>;
}

/** Options of the checkpoint readers. */
export interface LoadCheckpointOptions {
  /**
   * Accept NaN and ±Infinity in the weights and the optimizer state
   * (default `false`: refused, naming the tensor and the index, before any
   * change). A negative `exp_avg_sq` is refused either way.
   */
  readonly allowNonFinite?: boolean;
}

/** An optimizer as a checkpoint is checked against it. */
export interface CheckpointOptimizer {
  /** `"sgd"` or `"adamw"`. */
  readonly kind: string;
  /** Its state slots' names (see `optimizerStateSlots`). */
  readonly stateSlots: readonly string[];
  /** Names of the parameters it optimizes (default: every parameter checked). */
  readonly paramNames?: readonly string[];
}

/** A parameter as a checkpoint is checked against it. */
export interface CheckpointParameter {
  /** Its name in the model. */
  readonly name: string;
  /** Its shape. */
  readonly shape: readonly number[];
}

const SEP = "."; // tensor names: model.<name>, optim.<name>.<slot>

/**
 * Writes a training checkpoint (its format is in the `@conveyor/core/format`
 * module documentation). Tensors: every `model.<name>` in the given order, then every
 * `optim.<name>.<slot>` in the same order.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { encodeTrainingCheckpoint, parseTrainingCheckpoint } from "@conveyor/core/format";
 * const bytes = encodeTrainingCheckpoint({
 *   step: 0, optimizer: { kind: "sgd", lr: 0.1 }, lrOverride: null,
 *   weights: [{ name: "w", shape: [2], data: new Float32Array([1, 2]) }], slots: new Map(),
 * });
 * const ck = parseTrainingCheckpoint(bytes);
 * assert.equal(ck.step, 0);
 * assert.deepEqual([...ck.weights.get("w")!.data], [1, 2]);
 * ```
 */
export function encodeTrainingCheckpoint(contents: TrainingCheckpointContents): Uint8Array {
  const c = contents;
  if (c === null || typeof c !== "object") {
    throw new TypeError(`checkpoint contents must be an object, got ${describeValue(c)}`);
  }
  if (!Number.isSafeInteger(c.step) || c.step < 0) {
    fail(`step must be an integer ≥ 0, got ${describeValue(c.step)}`);
  }
  const optimizerStep = c.optimizerStep ?? c.step;
  if (!Number.isSafeInteger(optimizerStep) || optimizerStep < 0 || optimizerStep > c.step) {
    fail(
      `optimizerStep must be an integer from 0 to step ${c.step}, got ${
        describeValue(optimizerStep)
      }`,
    );
  }
  const optimizer = checkOptimizerSpec(c.optimizer);
  const slotNames = optimizerStateSlots(optimizer);
  const tensors: SafetensorsTensor[] = c.weights.map((w) => ({
    ...w,
    name: `model${SEP}${w.name}`,
  }));
  for (const w of c.weights) {
    const slots = c.slots.get(w.name);
    if (slots === undefined) continue;
    if (slots.length !== slotNames.length) {
      fail(
        `parameter ${w.name} has ${slots.length} state slot(s), ${optimizer.kind} keeps ${slotNames.length}`,
      );
    }
    slots.forEach((data, i) =>
      tensors.push({ name: `optim${SEP}${w.name}${SEP}${slotNames[i]}`, shape: w.shape, data })
    );
  }
  for (const name of c.slots.keys()) {
    if (!c.weights.some((w) => w.name === name)) {
      fail(`state slots for ${name}, which has no weights`);
    }
  }
  const metadata: Record<string, string> = {
    format: CHECKPOINT_FORMAT,
    format_version: String(CHECKPOINT_FORMAT_VERSION),
    step: String(c.step),
    optimizer_step: String(optimizerStep),
    skipped_steps: String(c.step - optimizerStep),
    optimizer: JSON.stringify(optimizer),
  };
  if (c.lrOverride !== null && c.lrOverride !== undefined) {
    metadata.lr_override = JSON.stringify(c.lrOverride);
  }
  if (c.data !== undefined && Object.keys(c.data).length > 0) {
    metadata.data = JSON.stringify(checkData(c.data, "data"));
  }
  return encodeSafetensors(tensors, { metadata });
}

/**
 * Parses and checks a training checkpoint as {@linkcode parseTrainingCheckpoint}
 * does, except the checksums, which `verify()` checks: a loader checks the
 * file against its model first, so that a file breaking a rule is refused
 * naming that rule. Not exported from the package.
 */
export function decodeTrainingCheckpoint(
  bytes: Uint8Array,
  options?: LoadCheckpointOptions,
): { ck: TrainingCheckpoint; verify(): void } {
  let decoded;
  try {
    decoded = decodeSafetensors(bytes);
  } catch (e) {
    const err = e as Error;
    fail(
      `not a valid safetensors file: ${err.message}`,
      err instanceof TypeError ? "type" : "range",
    );
  }
  const file = decoded.file;
  const meta = file.metadata;
  if (meta.format !== CHECKPOINT_FORMAT) {
    fail(
      `__metadata__.format must be ${JSON.stringify(CHECKPOINT_FORMAT)}, got ${
        meta.format === undefined ? "none" : JSON.stringify(meta.format)
      } (a weights-only safetensors file loads with loadSafetensors)`,
    );
  }
  if (meta.format_version !== String(CHECKPOINT_FORMAT_VERSION)) {
    fail(
      `__metadata__.format_version ${JSON.stringify(meta.format_version)} is not supported ` +
        `(this version reads ${CHECKPOINT_FORMAT_VERSION})`,
    );
  }
  const counts = stepCounts(meta);
  const { step, optimizerStep, skippedSteps } = counts;
  if (meta.optimizer === undefined) fail("__metadata__.optimizer is missing", "type");
  let optimizer: OptimizerSpec;
  try {
    optimizer = checkOptimizerSpec(json(meta, "optimizer") as OptimizerSpec);
  } catch (e) {
    const err = e as Error;
    if (err.message.startsWith("checkpoint:")) throw err;
    fail(`__metadata__.optimizer: ${err.message}`, err instanceof TypeError ? "type" : "range");
  }
  let lrOverride: number | null = null;
  if (meta.lr_override !== undefined) {
    const v = json(meta, "lr_override");
    if (typeof v !== "number" || !Number.isFinite(v) || v < 0) {
      // The metadata value is JSON text: shown as written.
      fail(`__metadata__.lr_override must be a finite number ≥ 0, got ${meta.lr_override}`);
    }
    lrOverride = v;
  }
  const data = meta.data === undefined ? {} : checkData(json(meta, "data"), "__metadata__.data");
  const slotNames = optimizerStateSlots(optimizer);
  const weights = new Map<string, SafetensorsEntry>();
  const slotData = new Map<string, Map<string, Float32Array>>();
  for (const [name, e] of file.tensors) {
    if (name.startsWith(`model${SEP}`) && name.length > 6) {
      weights.set(name.slice(6), e);
    } else if (name.startsWith(`optim${SEP}`)) {
      const rest = name.slice(6);
      const dot = rest.lastIndexOf(SEP);
      const param = rest.slice(0, dot), slot = rest.slice(dot + 1);
      if (dot <= 0 || !slotNames.includes(slot)) {
        fail(
          `tensor ${name}: ${optimizer.kind} keeps state slots ${
            slotNames.length === 0 ? "none" : slotNames.join(", ")
          }, so an optimizer tensor must be named optim.<parameter>.<slot> with one of them`,
        );
      }
      if (!slotData.has(param)) slotData.set(param, new Map());
      slotData.get(param)!.set(slot, e.data);
    } else {
      fail(`tensor ${name} is neither model.<parameter> nor optim.<parameter>.<slot>`);
    }
  }
  const noState = (what: string): never =>
    fail(`tensor optim.${[...slotData.keys()][0]}.*: a checkpoint ${what} has no optimizer state`);
  if (step === 0 && slotData.size > 0) noState("at step 0");
  checkStepsAgree(counts);
  if (optimizerStep === 0 && slotData.size > 0) {
    noState("whose optimizer has taken no step (optimizer_step 0)");
  }
  for (const [param, slots] of slotData) {
    const w = weights.get(param);
    if (w === undefined) fail(`optimizer state for ${param}, a parameter the file lacks`);
    for (const slot of slotNames) {
      const d = slots.get(slot);
      if (d === undefined) fail(`tensor optim.${param}.${slot} is missing`);
    }
    for (const [slot, d] of slots) {
      let size = 1;
      for (const x of w.shape) size *= x;
      if (d.length !== size) {
        fail(
          `tensor optim.${param}.${slot} must have the shape ${
            fmtShape(w.shape)
          } of model.${param}`,
        );
      }
    }
  }
  // Values, in the file's order: finite unless allowed, no negative second moment.
  const allow = options?.allowNonFinite ?? false;
  for (const [name, e] of file.tensors) {
    const slot = name.startsWith(`optim${SEP}`) ? name.slice(name.lastIndexOf(SEP) + 1) : null;
    checkValues("checkpoint: ", name, e.data, slot, allow);
  }
  const slots = new Map<string, Float32Array[]>();
  for (const [param, m] of slotData) slots.set(param, slotNames.map((s) => m.get(s)!));
  const ck: TrainingCheckpoint = {
    step,
    optimizerStep,
    skippedSteps,
    optimizer,
    lrOverride,
    data,
    weights,
    optimizerState: { step: optimizerStep, lrOverride, slots },
  };
  const verify = (): void => {
    try {
      decoded.verify();
    } catch (e) {
      fail((e as Error).message);
    }
  };
  return { ck, verify };
}

/**
 * Parses and validates a training checkpoint on its own (not against a
 * model): a RangeError or TypeError beginning `checkpoint:` names the field
 * or tensor and the rule (see the `@conveyor/core/format` module documentation: step counts that
 * disagree, a non-finite value unless `options.allowNonFinite`, a negative
 * `exp_avg_sq`, a checksum that fails). A weights-only safetensors file is
 * refused (its `format` metadata is missing).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { encodeSafetensors, parseTrainingCheckpoint } from "@conveyor/core/format";
 * const weightsOnly = encodeSafetensors([{ name: "w", shape: [1], data: new Float32Array(1) }]);
 * assert.throws(() => parseTrainingCheckpoint(weightsOnly), /__metadata__\.format must be/);
 * ```
 */
export function parseTrainingCheckpoint(
  bytes: Uint8Array,
  options?: LoadCheckpointOptions,
): TrainingCheckpoint {
  const { ck, verify } = decodeTrainingCheckpoint(bytes, options);
  verify();
  return ck;
}

/**
 * Checks that `ck` fits a model with parameters `params` and an optimizer
 * `{ kind, stateSlots }` (RangeError naming the tensor and the rule): the
 * same optimizer kind and state slots, every parameter present with its
 * shape, no tensor for a parameter the model lacks.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { checkCheckpointFits, encodeTrainingCheckpoint, parseTrainingCheckpoint } from "@conveyor/core/format";
 * const ck = parseTrainingCheckpoint(encodeTrainingCheckpoint({
 *   step: 0, optimizer: { kind: "sgd" }, lrOverride: null,
 *   weights: [{ name: "w", shape: [2], data: new Float32Array(2) }], slots: new Map(),
 * }));
 * const optimizer = { kind: "sgd" as const, stateSlots: [] };
 * checkCheckpointFits(ck, [{ name: "w", shape: [2] }], optimizer); // fits
 * assert.throws(() => checkCheckpointFits(ck, [{ name: "w", shape: [3] }], optimizer), /shape \[2\]/);
 * ```
 */
export function checkCheckpointFits(
  ck: TrainingCheckpoint,
  params: readonly CheckpointParameter[],
  optimizer: CheckpointOptimizer,
): void {
  if (ck.optimizer.kind !== optimizer.kind) {
    fail(
      `its optimizer is ${ck.optimizer.kind}, the model's is ${optimizer.kind}: ` +
        "the optimizer state cannot carry over",
    );
  }
  const fileSlots = optimizerStateSlots(ck.optimizer);
  const stepped = ck.optimizerStep ?? ck.step; // what its optimizer has done
  if (stepped > 0 && fileSlots.join(",") !== optimizer.stateSlots.join(",")) {
    fail(
      `its ${ck.optimizer.kind} state has slots [${fileSlots.join(", ")}], the model's ` +
        `optimizer keeps [${optimizer.stateSlots.join(", ")}] (e.g. SGD with and without momentum)`,
    );
  }
  const wanted = new Set<string>();
  for (const { name, shape } of params) {
    wanted.add(name);
    const e = ck.weights.get(name);
    if (e === undefined) fail(`the file has no tensor model.${name} (shape ${fmtShape(shape)})`);
    if (!sameShape(e.shape, shape)) {
      fail(
        `tensor model.${name} has shape ${fmtShape(e.shape)}, the model needs ${fmtShape(shape)}`,
      );
    }
  }
  for (const name of ck.weights.keys()) {
    if (!wanted.has(name)) fail(`the file has tensor model.${name}, which the model lacks`);
  }
  if (stepped > 0 && fileSlots.length > 0) {
    for (const name of optimizer.paramNames ?? params.map((p) => p.name)) {
      if (!ck.optimizerState.slots.has(name)) {
        fail(
          `the file has no tensor optim.${name}.${fileSlots[0]} (at optimizer step ${stepped} ` +
            "every optimized parameter has state)",
        );
      }
    }
  }
}

function paramsOf(model: Layer | readonly Parameter[]): readonly Parameter[] {
  if (Array.isArray(model)) return model;
  if (model !== null && typeof model === "object" && "parameters" in model) {
    return (model as Layer).parameters();
  }
  throw new TypeError(
    `checkpoint: model must be a Layer or a Parameter array, got ${describeValue(model)}`,
  );
}

function checkOptimizerOf(optimizer: OptimizerBase, params: readonly Parameter[]): void {
  if (
    optimizer === null || typeof optimizer !== "object" ||
    typeof (optimizer as { saveState?: unknown }).saveState !== "function"
  ) {
    throw new TypeError(
      `checkpoint: optimizer must be an SGD or AdamW (an OptimizerBase), got ${
        describeValue(optimizer)
      }`,
    );
  }
  const names = new Set(params.map((p) => p.name));
  for (const g of optimizer.groups) {
    for (const p of g.params) {
      if (!names.has(p.name)) {
        throw new RangeError(`checkpoint: the optimizer's parameter ${p.name} is not in the model`);
      }
    }
  }
}

/**
 * A single-device model's training checkpoint: its weights, `optimizer`'s
 * state and step count, and `data` (see the format in the `@conveyor/core/format` module
 * documentation).
 * `opts.step` is the training steps taken when a loop of yours skipped
 * some (it did not call `optimizer.step()`, e.g. on a non-finite loss):
 * at least the optimizer's step count, which it is by default.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend, Linear } from "@conveyor/core";
 * import { AdamW } from "@conveyor/core/nn";
 * import { loadTrainingCheckpoint, saveTrainingCheckpoint } from "@conveyor/core/format";
 * const be = new CpuBackend();
 * const a = new Linear(be, 2, 2, { seed: 1 }), b = new Linear(be, 2, 2, { seed: 2 });
 * const optA = new AdamW(a.parameters()), optB = new AdamW(b.parameters());
 * optA.step();
 * const bytes = await saveTrainingCheckpoint(a, optA, { data: { epoch: "3" } });
 * const info = loadTrainingCheckpoint(b, optB, bytes);
 * assert.equal(info.step, 1);
 * assert.equal(optB.stepCount, 1);
 * assert.deepEqual(info.data, { epoch: "3" });
 * assert.deepEqual(await b.parameters()[0].value.toArray(), await a.parameters()[0].value.toArray());
 * for (const x of [optA, optB, a, b]) x.dispose();
 * ```
 */
export async function saveTrainingCheckpoint(
  model: Layer | readonly Parameter[],
  optimizer: OptimizerBase,
  opts?: { readonly data?: Readonly<Record<string, string>>; readonly step?: number },
): Promise<Uint8Array> {
  const params = paramsOf(model);
  checkOptimizerOf(optimizer, params);
  const step = opts?.step ?? optimizer.stepCount;
  if (!Number.isSafeInteger(step) || step < optimizer.stepCount) {
    throw new RangeError(
      `checkpoint: step must be an integer ≥ the optimizer's step count ${optimizer.stepCount} ` +
        `(training steps include the optimizer's), got ${String(opts?.step)}`,
    );
  }
  const [datas, state] = await Promise.all([
    Promise.all(params.map((p) => p.value.toArray())),
    optimizer.saveState(),
  ]);
  return encodeTrainingCheckpoint({
    step,
    optimizerStep: state.step,
    optimizer: optimizer.spec() as unknown as OptimizerSpec,
    lrOverride: state.lrOverride,
    ...(opts?.data === undefined ? {} : { data: opts.data }),
    weights: params.map((p, i) => ({ name: p.name, shape: p.value.shape, data: datas[i] })),
    slots: state.slots,
  });
}

/**
 * Loads a training checkpoint into a single-device model and its
 * optimizer: weights, optimizer state, step count and hand-set lr. Checks
 * everything first (non-finite values refused unless
 * `options.allowNonFinite`; the checksums last), so a refused file changes
 * nothing; returns the step counts and the data order's state.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend, Linear } from "@conveyor/core";
 * import { SGD } from "@conveyor/core/nn";
 * import { loadTrainingCheckpoint } from "@conveyor/core/format";
 * const lin = new Linear(new CpuBackend(), 2, 1);
 * const opt = new SGD(lin.parameters(), { lr: 0.1 });
 * assert.throws(() => loadTrainingCheckpoint(lin, opt, new Uint8Array(4)), /checkpoint: not a valid safetensors file/);
 * opt.dispose();
 * lin.dispose();
 * ```
 */
export function loadTrainingCheckpoint(
  model: Layer | readonly Parameter[],
  optimizer: OptimizerBase,
  bytes: Uint8Array,
  options?: LoadCheckpointOptions,
): TrainingCheckpointInfo {
  if (options !== undefined) {
    checkOptionsObject(options, ["allowNonFinite"], "loadTrainingCheckpoint: ");
  }
  const params = paramsOf(model);
  checkOptimizerOf(optimizer, params);
  const { ck, verify } = decodeTrainingCheckpoint(bytes, options);
  checkCheckpointFits(ck, params.map((p) => ({ name: p.name, shape: p.value.shape })), {
    kind: optimizer.kind,
    stateSlots: optimizer.stateSlots,
    paramNames: optimizer.groups.flatMap((g) => g.params.map((p) => p.name)),
  });
  for (const p of params) {
    if (p.value.disposed) throw new TypeError(`checkpoint: parameter ${p.name} was disposed`);
  }
  const allow = { allowNonFinite: options?.allowNonFinite ?? false };
  optimizer.checkState(ck.optimizerState, allow);
  verify();
  // Checked: now write.
  optimizer.loadState(ck.optimizerState, allow);
  for (const p of params) {
    const t = p.value.backend.fromData(ck.weights.get(p.name)!.data, p.value.shape);
    ops.copyInPlace(p.value, t);
    t.dispose();
  }
  return { step: ck.step, optimizerStep: ck.optimizerStep, optimizer: ck.optimizer, data: ck.data };
}
