// ZeRO-1 on a model rank: each stage's parameters, read as one flat vector
// in parameter order, are cut into D contiguous shares (`shardRange`), and
// this replica's optimizer holds and steps share k only. The share is a
// list of 1-D working tensors (one per parameter it touches: its values,
// and its averaged gradient during the step); the optimizer updates them elementwise, as
// the unsharded optimizer updates those values, and the runtime all-gathers
// every replica's updated share into the whole stage
// (`setStageParameters`). Checkpoints: a rank writes the whole weights and
// its share of the optimizer state (zeros elsewhere, the owned ranges in
// the `shards` metadata); `mergeShardedStates` joins the replicas' files
// into the single-device layout. Not exported from the package.

import type { Layer, Parameter } from "../../nn/layer.ts";
import type { OptimizerBase, OptimizerState } from "../../nn/optimizer_base.ts";
import { createOptimizer, type OptimizerSpec } from "../../nn/optimizer_spec.ts";
import {
  encodeSafetensors,
  parseSafetensors,
  type SafetensorsTensor,
} from "../../nn/safetensors.ts";
import { parseTrainingCheckpoint } from "../../nn/training_checkpoint.ts";
import * as ops from "../../tensor/ops.ts";
import type { Tensor } from "../../tensor/mod.ts";
import { keep } from "../../tensor/tidy.ts";
import { shardRange } from "../runtime/optimizer_sharding.ts";

/** This rank's place among the replicas (`ModelStageOptions.shard`). */
export interface ShardPlace {
  /** Replica k. */
  readonly replica: number;
  /** Replicas D. */
  readonly replicas: number;
}

// A share's working parameter: its values live from build to dispose (the
// optimizer's state is keyed by them); its gradient only from the
// reduce-scatter to the end of the step (allocated when first read).
class WorkParameter implements Parameter {
  readonly name: string;
  readonly value: Tensor;
  #grad: Tensor | null = null;
  constructor(name: string, value: Tensor) {
    this.name = name;
    this.value = value;
  }
  get grad(): Tensor {
    return this.#grad ??= keep(this.value.backend.zeros(this.value.shape));
  }
  get gradBytes(): number {
    return this.#grad?.bytes ?? 0;
  }
  dropGrad(): void {
    this.#grad?.dispose();
    this.#grad = null;
  }
}

// The part [start, end) of parameter `param`'s flat values that the share holds.
interface Piece {
  readonly param: number;
  readonly start: number;
  readonly end: number;
}

interface StageShard {
  readonly params: readonly Parameter[];
  readonly pieces: readonly Piece[];
  readonly work: readonly WorkParameter[];
  readonly optimizer: OptimizerBase;
  // The whole stage's values before its step, while a rollback may need them.
  snapshot: Tensor[] | null;
}

/** One rank's stages with their optimizer state sharded across the replicas. */
export class ShardedStages {
  readonly #stages = new Map<number, StageShard>();

  /** Shares of `layers`' stages for `place`, each with an optimizer built from `spec`. */
  constructor(spec: OptimizerSpec, layers: ReadonlyMap<number, Layer>, place: ShardPlace) {
    try {
      for (const [s, layer] of layers) {
        const params = layer.parameters();
        const total = params.reduce((n, p) => n + p.value.size, 0);
        const { start, end } = shardRange(total, place.replica, place.replicas);
        const pieces: Piece[] = [];
        let base = 0;
        params.forEach((p, i) => {
          const lo = Math.max(start, base), hi = Math.min(end, base + p.value.size);
          if (lo < hi) pieces.push({ param: i, start: lo - base, end: hi - base });
          base += p.value.size;
        });
        const work = pieces.map(({ param, start, end }) => {
          const p = params[param];
          return new WorkParameter(
            `${p.name}[${start}:${end}]`,
            keep(p.value.backend.zeros([end - start])),
          );
        });
        this.#stages.set(s, {
          params,
          pieces,
          work,
          optimizer: createOptimizer(spec, work),
          snapshot: null,
        });
      }
    } catch (e) {
      this.dispose();
      throw e;
    }
  }

  /** The optimizer of `stage`'s share. */
  optimizer(stage: number): OptimizerBase {
    return this.#get(stage).optimizer;
  }

  /** The working parameters of `stage`'s share (what its optimizer steps). */
  work(stage: number): readonly Parameter[] {
    return this.#get(stage).work;
  }

  /**
   * Takes the share's part of `grads` (the whole stage's gradients, one
   * array per parameter, averaged over the replicas within the share).
   */
  setGradients(stage: number, grads: readonly Float32Array[]): void {
    const st = this.#get(stage);
    if (grads.length !== st.params.length) {
      throw new RangeError(
        `stage ${stage} has ${st.params.length} parameters, got ${grads.length} gradients`,
      );
    }
    st.params.forEach((p, i) => {
      if (!(grads[i] instanceof Float32Array) || grads[i].length !== p.value.size) {
        throw new RangeError(
          `gradient ${i} of stage ${stage} (${p.name}) must be a Float32Array of ${p.value.size} values`,
        );
      }
    });
    st.pieces.forEach((piece, j) => {
      writeInto(st.work[j].grad, grads[piece.param].subarray(piece.start, piece.end));
    });
  }

  /** Keeps the whole stage's values until the step is final (for a rollback). */
  snapshot(stage: number): void {
    const st = this.#get(stage);
    this.drop(stage);
    st.snapshot = st.params.map((p) => keep(ops.copy(p.value)));
  }

  /** Puts the whole stage's values of the last snapshot back. */
  rollback(stage: number): void {
    const st = this.#get(stage);
    st.snapshot?.forEach((t, i) => ops.copyInPlace(st.params[i].value, t));
    this.drop(stage);
  }

  /** The step is final: the snapshot goes. */
  drop(stage: number): void {
    const st = this.#get(stage);
    for (const t of st.snapshot ?? []) t.dispose();
    st.snapshot = null;
  }

  /** The step is done: the share's gradients go (a redo copies them back). */
  dropGrads(stage: number): void {
    for (const w of this.#get(stage).work) w.dropGrad();
  }

  /** The share's values after the step, flat in parameter order. */
  async owned(stage: number): Promise<Float32Array> {
    const st = this.#get(stage);
    const parts = await Promise.all(st.work.map((w) => w.value.toArray()));
    const out = new Float32Array(parts.reduce((n, a) => n + a.length, 0));
    let at = 0;
    for (const a of parts) {
      out.set(a, at);
      at += a.length;
    }
    return out;
  }

  /** Writes the whole stage from `values` (flat, every replica's share). */
  setAll(stage: number, values: Float32Array): void {
    const st = this.#get(stage);
    const total = st.params.reduce((n, p) => n + p.value.size, 0);
    if (!(values instanceof Float32Array) || values.length !== total) {
      throw new RangeError(`stage ${stage} has ${total} parameter values, got ${values?.length}`);
    }
    let at = 0;
    for (const p of st.params) {
      writeInto(p.value, values.subarray(at, at + p.value.size));
      at += p.value.size;
    }
  }

  /** Copies every share's values from the stages' parameters (after a load). */
  async refresh(): Promise<void> {
    for (const st of this.#stages.values()) {
      const datas = await Promise.all(st.params.map((p) => p.value.toArray()));
      st.pieces.forEach((piece, j) => {
        writeInto(st.work[j].value, datas[piece.param].subarray(piece.start, piece.end));
      });
    }
  }

  /**
   * The rank's share of a checkpoint: every stage's whole weights
   * (`model.<name>`), its optimizer slots at their whole size
   * (`optim.<name>.<slot>`) with this share's ranges filled and zeros
   * elsewhere, and in metadata `step`, `lr_override` and `shards` (each
   * parameter's owned ranges).
   */
  async saveState(): Promise<Uint8Array> {
    const tensors: SafetensorsTensor[] = [];
    const owned: Record<string, [number, number]> = {};
    let step = 0, override: number | null = null;
    const optim: SafetensorsTensor[] = [];
    for (const st of this.#stages.values()) {
      const state = await st.optimizer.saveState();
      step = state.step;
      override = state.lrOverride;
      const datas = await Promise.all(st.params.map((p) => p.value.toArray()));
      st.params.forEach((p, i) =>
        tensors.push({ name: `model.${p.name}`, shape: p.value.shape, data: datas[i] })
      );
      const slots = st.optimizer.stateSlots;
      const whole = new Map<number, Float32Array[]>();
      st.pieces.forEach((piece, j) => {
        const saved = state.slots.get(st.work[j].name);
        if (saved === undefined) return;
        const p = st.params[piece.param];
        const full = whole.get(piece.param) ??
          slots.map(() => new Float32Array(p.value.size));
        whole.set(piece.param, full);
        saved.forEach((d, k) => full[k].set(d, piece.start));
        owned[p.name] = [piece.start, piece.end];
      });
      st.params.forEach((p, i) => {
        // Every slot of every parameter is written (zeros outside the share),
        // so that the replicas' files hold the same tensors.
        const full = whole.get(i) ??
          (state.step > 0 && slots.length > 0
            ? slots.map(() => new Float32Array(p.value.size))
            : null);
        full?.forEach((data, k) =>
          optim.push({ name: `optim.${p.name}.${slots[k]}`, shape: p.value.shape, data })
        );
      });
    }
    return encodeSafetensors([...tensors, ...optim], {
      metadata: {
        step: String(step),
        ...(override === null ? {} : { lr_override: JSON.stringify(override) }),
        shards: JSON.stringify(owned),
      },
    });
  }

  /**
   * Loads the rank's stages and this share of their optimizer state from a
   * whole training checkpoint (checked against the model by the caller):
   * every share's state is checked before anything is written.
   */
  loadState(bytes: Uint8Array): void {
    const allow = { allowNonFinite: true };
    const ck = parseTrainingCheckpoint(bytes, allow);
    const states: OptimizerState[] = [];
    for (const [s, st] of this.#stages) {
      const slots = new Map<string, readonly Float32Array[]>();
      for (const p of st.params) {
        const w = ck.weights.get(p.name);
        if (w === undefined || w.data.length !== p.value.size) {
          throw new RangeError(
            `checkpoint: tensor model.${p.name} of stage ${s} is missing or of another size`,
          );
        }
      }
      st.pieces.forEach((piece, j) => {
        const whole = ck.optimizerState.slots.get(st.params[piece.param].name);
        if (whole !== undefined) {
          slots.set(st.work[j].name, whole.map((d) => d.slice(piece.start, piece.end)));
        }
      });
      const state = { step: ck.optimizerStep, lrOverride: ck.lrOverride, slots };
      st.optimizer.checkState(state, allow);
      states.push(state);
    }
    // Checked: now write.
    [...this.#stages.values()].forEach((st, i) => {
      st.optimizer.loadState(states[i], allow);
      st.params.forEach((p) => writeInto(p.value, ck.weights.get(p.name)!.data));
      st.pieces.forEach((piece, j) => {
        const data = ck.weights.get(st.params[piece.param].name)!.data;
        writeInto(st.work[j].value, data.subarray(piece.start, piece.end));
      });
    });
  }

  /** Bytes of the working tensors and snapshots (the optimizer's state is its own `stateBytes`). */
  get bytes(): number {
    let n = 0;
    for (const st of this.#stages.values()) {
      for (const w of st.work) n += w.value.bytes + w.gradBytes;
      for (const t of st.snapshot ?? []) n += t.bytes;
    }
    return n;
  }

  /** Releases the working tensors and snapshots (the optimizers are disposed by their owner). */
  dispose(): void {
    for (const st of this.#stages.values()) {
      for (const w of st.work) {
        w.value.dispose();
        w.dropGrad();
      }
      for (const t of st.snapshot ?? []) t.dispose();
      st.snapshot = null;
    }
  }

  #get(stage: number): StageShard {
    const st = this.#stages.get(stage);
    if (st === undefined) throw new RangeError(`this rank holds no share of stage ${stage}`);
    return st;
  }
}

// `data` into tensor `t` (same number of values).
function writeInto(t: Tensor, data: Float32Array): void {
  const src = t.backend.fromData(data, t.shape);
  try {
    ops.copyInPlace(t, src);
  } finally {
    src.dispose();
  }
}

/**
 * Joins the ranks' checkpoint files of a sharded group (`files[k·P + p]`:
 * replica k's pipeline rank p) into pipeline ranks 0 … P−1's files in the
 * unsharded layout: the weights (the same on every replica, checked) and
 * each optimizer slot taken from the replica that owns each range. Files
 * without `shards` metadata are returned as replica 0's after the same
 * check of every tensor.
 */
export function mergeShardedStates(files: readonly Uint8Array[], replicas: number): Uint8Array[] {
  const P = files.length / replicas;
  const out: Uint8Array[] = [];
  for (let p = 0; p < P; p++) {
    const parsed = Array.from({ length: replicas }, (_, k) => parseSafetensors(files[k * P + p]));
    const first = parsed[0];
    const tensors: SafetensorsTensor[] = [];
    for (const [name, e] of first.tensors) {
      const data = e.data.slice();
      if (name.startsWith("model.")) {
        for (let k = 1; k < replicas; k++) {
          const other = parsed[k].tensors.get(name)?.data;
          if (other === undefined || !sameBits(other, data)) {
            throw new Error(
              `replica ${k}'s pipeline rank ${p} (rank ${k * P + p}) holds other weights ` +
                `(${name}) than replica 0's: the replicas diverged`,
            );
          }
        }
      } else {
        // optim.<name>.<slot>: each replica's owned range of <name>.
        const param = name.slice("optim.".length, name.lastIndexOf("."));
        for (let k = 0; k < replicas; k++) {
          const owned = JSON.parse(parsed[k].metadata.shards ?? "{}")[param];
          const src = parsed[k].tensors.get(name)?.data;
          if (owned === undefined || src === undefined) continue;
          data.set(src.subarray(owned[0], owned[1]), owned[0]);
        }
      }
      tensors.push({ name, shape: e.shape, data });
    }
    const { shards: _, ...metadata } = first.metadata;
    for (let k = 1; k < replicas; k++) {
      const m = parsed[k].metadata;
      if (m.step !== metadata.step || m.lr_override !== metadata.lr_override) {
        throw new Error(
          `replica ${k}'s pipeline rank ${p} is at step ${m.step}, replica 0's at ${metadata.step}: ` +
            "the replicas disagree",
        );
      }
    }
    out.push(encodeSafetensors(tensors, { metadata }));
  }
  return out;
}

function sameBits(a: Float32Array, b: Float32Array): boolean {
  if (a.length !== b.length) return false;
  const x = new Uint32Array(a.buffer, a.byteOffset, a.length);
  const y = new Uint32Array(b.buffer, b.byteOffset, b.length);
  for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return false;
  return true;
}
