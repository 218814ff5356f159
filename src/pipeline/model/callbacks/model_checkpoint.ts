/**
 * Training checkpoints every N steps, from inside the loop.
 *
 * @module
 */

import { checkOutputPath } from "../output_path.ts";
import { filePath } from "../_file_path.ts";
import type { SaveCheckpointOptions } from "../checkpoint_file.ts";
import type { StepResult } from "../results.ts";
import type { TrainBeginInfo, TrainCallback } from "../train_callback.ts";
import { checkOptionSpelling, didYouMean } from "../../../text/nearest.ts";
import { describeValue } from "../../../text/describe.ts";

const MODEL_CHECKPOINT_OPTIONS: readonly (keyof ModelCheckpointOptions)[] = [
  "path",
  "every",
  "data",
];

/** What {@linkcode ModelCheckpoint} saves from: a `PipelineParallelModel`. */
export interface CheckpointSource {
  /** Writes a training checkpoint to `path`. */
  saveCheckpoint(path: string, options?: SaveCheckpointOptions): Promise<void>;
}

/** Options of {@linkcode ModelCheckpoint}. */
export interface ModelCheckpointOptions {
  /**
   * Where to write: a path or a `file:` URL; `{step}` in it becomes the step
   * count (`ckpt-{step}.safetensors` keeps one file per save). `{step}` is
   * the only placeholder: any other `{name}` (`{epoch}`: the model counts
   * steps, not epochs) is a TypeError, not a file named with it.
   */
  readonly path: string | URL;
  /** A positive integer: save after every step whose count is a multiple of it. */
  readonly every: number;
  /**
   * The data order's state to store with it (the checkpoint's `data`),
   * read at the save: at an exact step, the source stands exactly after it.
   */
  readonly data?: () => Readonly<Record<string, string>>;
}

/**
 * Saves `model.saveCheckpoint(path, { data: data() })` after every
 * `every`-th step. Those steps are exact (the model and the data stand
 * after exactly that step), so a run resumed from any of these files
 * continues bit for bit. The path is checked when `train` starts (folder,
 * not a directory, read and write permission for the folder: a TypeError
 * naming the path and the rule). Under MPI every process runs it (the
 * save gathers from every rank) and rank 0 writes.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { ModelCheckpoint } from "@conveyor/core/callbacks";
 * const saved: string[] = [];
 * const model = { saveCheckpoint: async (p: string) => void saved.push(p) };
 * const every2 = new ModelCheckpoint(model, { path: "ckpt-{step}.safetensors", every: 2 });
 * assert.equal(every2.every, 2); // train ends a window after every 2nd step
 * for (const step of [0, 1, 2, 3]) {
 *   await every2.onStepEnd({ step } as never);
 * }
 * assert.deepEqual(saved, ["ckpt-2.safetensors", "ckpt-4.safetensors"]);
 * ```
 */
export class ModelCheckpoint implements TrainCallback {
  /** Steps between saves (makes them exact steps). */
  readonly every: number;
  readonly #model: CheckpointSource;
  readonly #path: string;
  readonly #data?: () => Readonly<Record<string, string>>;

  /** Checks the options (the path itself is checked when training starts). */
  constructor(model: CheckpointSource, options: ModelCheckpointOptions) {
    if (model === null || typeof model !== "object" || typeof model.saveCheckpoint !== "function") {
      throw new TypeError("ModelCheckpoint: model must have a saveCheckpoint method");
    }
    if (options === null || typeof options !== "object") {
      throw new TypeError(`ModelCheckpoint: options must be an object { path, every, data }`);
    }
    checkOptionSpelling(options, MODEL_CHECKPOINT_OPTIONS, "ModelCheckpoint: ");
    this.#path = filePath(options.path, "ModelCheckpoint: path");
    for (const [whole, name] of this.#path.matchAll(/\{(\w*)\}/g)) {
      if (name === "step") continue;
      throw new TypeError(
        `ModelCheckpoint: path ${JSON.stringify(this.#path)} holds the placeholder ${whole}, ` +
          `which it does not know: {step} (the step count) is the only one${
            name === "epoch" ? " (the model counts steps, not epochs)" : didYouMean(name, ["step"])
          }`,
      );
    }
    if (!Number.isSafeInteger(options.every) || options.every < 1) {
      throw new RangeError(
        `ModelCheckpoint: every must be a positive integer, got ${describeValue(options.every)}`,
      );
    }
    if (options.data !== undefined && typeof options.data !== "function") {
      throw new TypeError(`ModelCheckpoint: data must be a function, got ${typeof options.data}`);
    }
    this.every = options.every;
    this.#model = model;
    this.#data = options.data;
  }

  /** The path of the save after step count `count`. */
  pathAt(count: number): string {
    return this.#path.replaceAll("{step}", String(count));
  }

  /** Checks the path (the first save's). */
  onTrainBegin(info: TrainBeginInfo): void {
    if (info.localRank !== null && info.localRank !== 0) return;
    const first = Math.ceil((info.firstStep + 1) / this.every) * this.every;
    checkOutputPath(this.pathAt(first), "ModelCheckpoint: path");
  }

  /** Saves at every `every`-th step. */
  async onStepEnd(step: StepResult): Promise<void> {
    const count = step.step + 1;
    if (count % this.every !== 0) return;
    const data = this.#data?.();
    await this.#model.saveCheckpoint(this.pathAt(count), data === undefined ? {} : { data });
  }
}
