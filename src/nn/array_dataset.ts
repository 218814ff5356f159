/**
 * A dataset from arrays: examples cut into batches, shuffled per epoch by a
 * seed, a validation split held out, and a position that a training
 * checkpoint stores so that a resumed run continues with the next batch.
 *
 * @module
 */

import { checkOptionSpelling } from "../text/nearest.ts";
import { Rng } from "../tensor/random.ts";
import { describeValue } from "../text/describe.ts";

/** What {@linkcode ArrayDataset} yields: a training batch (`model.train` takes it as it is). */
export interface ArrayBatch {
  /** The batch's inputs, row-major. */
  readonly inputs: Float32Array;
  /** `[rows, ...the example's input shape]`. */
  readonly shape: readonly number[];
  /** The batch's targets, row-major (the same number of values per example as given). */
  readonly targets: Float32Array;
}

/** Options of {@linkcode ArrayDataset}. */
export interface ArrayDatasetOptions {
  /** Every example's inputs, row-major: `shape[0]` examples. */
  readonly inputs: Float32Array;
  /** The inputs' shape `[examples, ...]`. */
  readonly shape: readonly number[];
  /** Every example's targets, row-major: the same number of values per example. */
  readonly targets: Float32Array;
  /** Examples per batch (positive integer). */
  readonly batchSize: number;
  /** Shuffle the training examples anew every epoch (default true). */
  readonly shuffle?: boolean;
  /** The shuffle's seed (a safe integer, default 0). */
  readonly seed?: number;
  /** Passes over the training examples (positive integer, default 1). */
  readonly epochs?: number;
  /** Leave out each epoch's last batch when it would be short (default false). */
  readonly dropLast?: boolean;
  /**
   * The fraction in [0, 1) of the examples held out for validation: the
   * last ⌊examples · fraction⌋, before any shuffling, as Keras takes them
   * (default 0).
   */
  readonly validationSplit?: number;
  /** The key of {@linkcode ArrayDataset.checkpointData} (default `"dataset"`). */
  readonly key?: string;
}

/** Where an {@linkcode ArrayDataset} stands: the next batch is `batch` of `epoch` (from 0). */
export interface DatasetPosition {
  /** The epoch of the next batch. */
  readonly epoch: number;
  /** The next batch's index within its epoch. */
  readonly batch: number;
}

const FORMAT = "conveyor-array-dataset";

function positive(v: unknown, what: string): number {
  if (!Number.isSafeInteger(v) || (v as number) < 1) {
    throw new RangeError(
      `ArrayDataset: ${what} must be a positive integer, got ${describeValue(v)}`,
    );
  }
  return v as number;
}

/**
 * Examples from arrays as training batches, shuffled by a seed every epoch,
 * for `model.train(dataset)` (it is an iterable of batches, continuing from
 * its position) or any loop. The position advances as batches are taken,
 * so at an exact step of `train` (see `TrainCallback`) it stands after
 * exactly the batches trained; `checkpointData()` stores it in a training
 * checkpoint's `data` and `restore(model.resumedFrom)` continues there:
 * the resumed run gets the batches the uninterrupted one would have.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { ArrayDataset } from "@conveyor/core/data";
 * const ds = new ArrayDataset({
 *   inputs: new Float32Array([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]), shape: [10, 1],
 *   targets: new Float32Array(10), batchSize: 4, epochs: 2, seed: 1, validationSplit: 0.2,
 * });
 * assert.deepEqual([ds.trainSize, ds.validationSize, ds.stepsPerEpoch, ds.steps], [8, 2, 2, 4]);
 * assert.deepEqual([...ds.validation().inputs], [8, 9]);
 * const first = ds.next()!; // a batch of 4 of the 8 training examples, shuffled
 * assert.deepEqual(first.shape, [4, 1]);
 * const saved = ds.checkpointData(); // what a checkpoint after step 1 stores
 * const rest = [...ds]; // the 3 other batches (the second epoch reshuffled)
 * const resumed = new ArrayDataset(ds.options);
 * resumed.restore(saved); // or resumed.restore(model.resumedFrom)
 * assert.deepEqual([...resumed], rest);
 * assert.equal(resumed.taken, 4);
 * ```
 */
export class ArrayDataset implements Iterable<ArrayBatch> {
  /** The options it was built with. */
  readonly options: ArrayDatasetOptions;
  /** Examples in all. */
  readonly size: number;
  /** Examples trained on (the first `size − validationSize`). */
  readonly trainSize: number;
  /** Examples held out (the last ones). */
  readonly validationSize: number;
  /** Batches per epoch. */
  readonly stepsPerEpoch: number;
  /** Batches over all epochs. */
  readonly steps: number;
  readonly #rowIn: number;
  readonly #rowOut: number;
  readonly #epochs: number;
  #epoch = 0;
  #batch = 0;
  #order: Int32Array | null = null; // the current epoch's order of training examples

  /** Checks the options (a RangeError or TypeError naming the value and the rule). */
  constructor(options: ArrayDatasetOptions) {
    if (options === null || typeof options !== "object") {
      throw new TypeError(`ArrayDataset: options must be an object, got ${describeValue(options)}`);
    }
    checkOptionSpelling(options, [
      "inputs",
      "shape",
      "targets",
      "batchSize",
      "shuffle",
      "seed",
      "epochs",
      "dropLast",
    ], "ArrayDataset: ");
    const { inputs, shape, targets } = options;
    if (!(inputs instanceof Float32Array)) {
      throw new TypeError(
        `ArrayDataset: inputs must be a Float32Array, got ${describeValue(inputs)}`,
      );
    }
    if (!(targets instanceof Float32Array)) {
      throw new TypeError(
        `ArrayDataset: targets must be a Float32Array, got ${describeValue(targets)}`,
      );
    }
    if (
      !Array.isArray(shape) || shape.length < 1 ||
      shape.some((d) => !Number.isSafeInteger(d) || d < 1)
    ) {
      throw new RangeError(
        `ArrayDataset: shape must be [examples, ...] of positive integers, got ${
          JSON.stringify(shape)
        }`,
      );
    }
    const n = shape[0];
    const rowIn = shape.slice(1).reduce((a, b) => a * b, 1);
    if (inputs.length !== n * rowIn) {
      throw new RangeError(
        `ArrayDataset: inputs holds ${inputs.length} values, shape [${shape.join(", ")}] needs ${
          n * rowIn
        }`,
      );
    }
    if (targets.length === 0 || targets.length % n !== 0) {
      throw new RangeError(
        `ArrayDataset: targets holds ${targets.length} values, not the same positive number for each of the ${n} examples`,
      );
    }
    const batchSize = positive(options.batchSize, "batchSize");
    const epochs = positive(options.epochs ?? 1, "epochs");
    const seed = options.seed ?? 0;
    if (!Number.isSafeInteger(seed)) {
      throw new RangeError(`ArrayDataset: seed must be a safe integer, got ${describeValue(seed)}`);
    }
    const split = options.validationSplit ?? 0;
    if (typeof split !== "number" || !(split >= 0 && split < 1)) {
      throw new RangeError(
        `ArrayDataset: validationSplit must be in [0, 1), got ${describeValue(split)}`,
      );
    }
    const held = Math.floor(n * split);
    if (split > 0 && held === 0) {
      throw new RangeError(
        `ArrayDataset: validationSplit ${split} of ${n} examples holds out none`,
      );
    }
    const trainSize = n - held;
    const perEpoch = options.dropLast === true
      ? Math.floor(trainSize / batchSize)
      : Math.ceil(trainSize / batchSize);
    if (perEpoch === 0) {
      throw new RangeError(
        `ArrayDataset: ${trainSize} training examples make no batch of ${batchSize} with dropLast`,
      );
    }
    if (options.key !== undefined && (typeof options.key !== "string" || options.key === "")) {
      throw new TypeError(
        `ArrayDataset: key must be a non-empty string, got ${describeValue(options.key)}`,
      );
    }
    this.options = options;
    this.size = n;
    this.trainSize = trainSize;
    this.validationSize = held;
    this.stepsPerEpoch = perEpoch;
    this.steps = perEpoch * epochs;
    this.#rowIn = rowIn;
    this.#rowOut = targets.length / n;
    this.#epochs = epochs;
  }

  /** The next batch's place. */
  get position(): DatasetPosition {
    return { epoch: this.#epoch, batch: this.#batch };
  }

  /** Batches taken over all epochs (the steps a run on it has trained). */
  get taken(): number {
    return this.#epoch * this.stepsPerEpoch + this.#batch;
  }

  /** Whether every epoch has been taken. */
  get done(): boolean {
    return this.#epoch >= this.#epochs;
  }

  /** The held-out examples as one batch. Throws a RangeError without a validation split. */
  validation(): ArrayBatch {
    if (this.validationSize === 0) {
      throw new RangeError("ArrayDataset: no validationSplit was given, so nothing is held out");
    }
    return this.#gather(
      Int32Array.from({ length: this.validationSize }, (_, i) => this.trainSize + i),
    );
  }

  /** The next batch, advancing the position; undefined once done. */
  next(): ArrayBatch | undefined {
    if (this.done) return undefined;
    const order = this.#order ??= this.#orderOf(this.#epoch);
    const b = this.options.batchSize;
    const rows = order.subarray(this.#batch * b, Math.min(this.trainSize, (this.#batch + 1) * b));
    const batch = this.#gather(rows);
    if (++this.#batch === this.stepsPerEpoch) {
      this.#batch = 0;
      this.#epoch++;
      this.#order = null;
    }
    return batch;
  }

  /** Batches from the position on, to the end of the last epoch. */
  *[Symbol.iterator](): Iterator<ArrayBatch> {
    for (let b = this.next(); b !== undefined; b = this.next()) yield b;
  }

  /**
   * The position and what it depends on, as a checkpoint's `data`
   * (`{ [key]: JSON }`): `model.saveCheckpoint(path, { data: ds.checkpointData() })`.
   */
  checkpointData(): Record<string, string> {
    return {
      [this.options.key ?? "dataset"]: JSON.stringify({
        format: FORMAT,
        epoch: this.#epoch,
        batch: this.#batch,
        size: this.size,
        validationSize: this.validationSize,
        batchSize: this.options.batchSize,
        seed: this.options.seed ?? 0,
        shuffle: this.options.shuffle ?? true,
        dropLast: this.options.dropLast ?? false,
      }),
    };
  }

  /**
   * Moves to the position a checkpoint stored: `source` is a checkpoint's
   * info (`model.resumedFrom`) or its `data`; null or undefined (a fresh
   * run) leaves the position at the start. Throws a TypeError naming the
   * field when the data is missing, malformed, or was written for another
   * dataset (size, split, batch size, seed, shuffle, drop-last), and a
   * RangeError for a position out of range; nothing changes then.
   */
  restore(
    source:
      | { readonly data: Readonly<Record<string, string>> }
      | Readonly<Record<string, string>>
      | null
      | undefined,
  ): void {
    if (source === null || source === undefined) return;
    const data =
      (typeof (source as { data?: unknown }).data === "object"
        ? (source as { data: Readonly<Record<string, string>> }).data
        : source) as Readonly<Record<string, string>>;
    const key = this.options.key ?? "dataset";
    const text = data[key];
    if (typeof text !== "string") {
      throw new TypeError(
        `ArrayDataset.restore: the checkpoint's data has no "${key}" (not saved with checkpointData())`,
      );
    }
    let saved: Record<string, unknown>;
    try {
      saved = JSON.parse(text);
    } catch (e) {
      throw new TypeError(`ArrayDataset.restore: data.${key} is not JSON: ${(e as Error).message}`);
    }
    if (saved === null || typeof saved !== "object" || saved.format !== FORMAT) {
      throw new TypeError(
        `ArrayDataset.restore: data.${key} is not an ArrayDataset position (format ${
          JSON.stringify(saved?.format)
        })`,
      );
    }
    const now = JSON.parse(this.checkpointData()[key]);
    for (const field of ["size", "validationSize", "batchSize", "seed", "shuffle", "dropLast"]) {
      if (saved[field] !== now[field]) {
        throw new TypeError(
          `ArrayDataset.restore: data.${key}.${field} is ${
            JSON.stringify(saved[field])
          }, this dataset's is ${
            JSON.stringify(now[field])
          }: the checkpoint's batches came from another dataset`,
        );
      }
    }
    const { epoch, batch } = saved as { epoch: unknown; batch: unknown };
    if (!Number.isSafeInteger(epoch) || (epoch as number) < 0 || (epoch as number) > this.#epochs) {
      throw new RangeError(
        `ArrayDataset.restore: data.${key}.epoch must be in [0, ${this.#epochs}], got ${
          describeValue(epoch)
        }`,
      );
    }
    if (
      !Number.isSafeInteger(batch) || (batch as number) < 0 ||
      (batch as number) >= this.stepsPerEpoch
    ) {
      throw new RangeError(
        `ArrayDataset.restore: data.${key}.batch must be in [0, ${this.stepsPerEpoch - 1}], got ${
          describeValue(batch)
        }`,
      );
    }
    this.#epoch = epoch as number;
    this.#batch = batch as number;
    this.#order = null;
  }

  /** The training examples' order in `epoch`: Fisher–Yates with that epoch's own seed. */
  #orderOf(epoch: number): Int32Array {
    const order = Int32Array.from({ length: this.trainSize }, (_, i) => i);
    if (this.options.shuffle === false) return order;
    // Each epoch's generator is seeded by the epoch-th draw of the dataset's seed.
    const seeds = new Rng(this.options.seed ?? 0);
    let s = 0;
    for (let e = 0; e <= epoch; e++) s = seeds.nextUint32();
    const rng = new Rng(s);
    for (let i = order.length - 1; i > 0; i--) {
      const j = rng.int(i + 1);
      [order[i], order[j]] = [order[j], order[i]];
    }
    return order;
  }

  #gather(rows: Int32Array): ArrayBatch {
    const inputs = new Float32Array(rows.length * this.#rowIn);
    const targets = new Float32Array(rows.length * this.#rowOut);
    rows.forEach((r, k) => {
      inputs.set(
        this.options.inputs.subarray(r * this.#rowIn, (r + 1) * this.#rowIn),
        k * this.#rowIn,
      );
      targets.set(
        this.options.targets.subarray(r * this.#rowOut, (r + 1) * this.#rowOut),
        k * this.#rowOut,
      );
    });
    return { inputs, shape: [rows.length, ...this.options.shape.slice(1)], targets };
  }
}
