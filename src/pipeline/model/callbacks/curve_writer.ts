/**
 * The loss and validation curves of a training run, drawn as an SVG file
 * when the run ends.
 *
 * @module
 */

import { type Curve, curvesSvg } from "../../render/curves_svg.ts";
import { checkOutputPath } from "../output_path.ts";
import { filePath } from "../_file_path.ts";
import { writeFileAtomically } from "../_atomic_write.ts";
import type { StepResult, TrainResult } from "../results.ts";
import type { StepContext, TrainBeginInfo, TrainCallback } from "../train_callback.ts";
import { checkOptionSpelling } from "../../../text/nearest.ts";
import { describeValue } from "../../../text/describe.ts";

const CURVE_WRITER_OPTIONS: readonly (keyof CurveWriterOptions)[] = [
  "title",
  "subtitle",
  "writeEvery",
];

/** Options of {@linkcode CurveWriter}. */
export interface CurveWriterOptions {
  /** The chart's title (default "training curves"). */
  readonly title?: string;
  /** A line under the title. */
  readonly subtitle?: string;
  /** Also rewrite the file every `writeEvery` steps (default 0: at the end only). */
  readonly writeEvery?: number;
}

/**
 * Collects each step's loss (skipped steps leave a gap in nothing: their
 * point is left out), the validation loss and accuracy when measured, and
 * writes `curvesSvg` of them to `path` when `train` ends (and every
 * `writeEvery` steps), atomically (a temporary file renamed over it). The
 * path is checked when `train` starts (folder, not a directory, read and
 * write permission for the folder: a TypeError naming the path and the
 * rule). Steps are counted from 1 over the model's life. Under MPI only
 * rank 0 writes. Needs no model (it keeps `train`'s windows).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CurveWriter } from "@conveyor/core/callbacks";
 * const dir = await Deno.makeTempDir();
 * const curves = new CurveWriter(`${dir}/loss.svg`, { title: "run 1" });
 * curves.onTrainBegin({ firstStep: 0, localRank: null });
 * for (const [step, loss] of [[0, 2], [1, 1.5], [2, 1]]) {
 *   curves.onStepEnd({ step, loss } as never, { exact: true, stop: () => {} });
 * }
 * await curves.onTrainEnd();
 * assert.match(await Deno.readTextFile(`${dir}/loss.svg`), /^<svg[\s\S]*run 1/);
 * assert.deepEqual(curves.loss, [[1, 2], [2, 1.5], [3, 1]]);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export class CurveWriter implements TrainCallback {
  /** The file's local path. */
  readonly path: string;
  readonly #title: string;
  readonly #subtitle?: string;
  readonly #writeEvery: number;
  readonly #loss: [number, number][] = [];
  readonly #validation: [number, number][] = [];
  readonly #accuracy: [number, number][] = [];
  #silent = false;

  /** Checks the options (the path itself is checked when training starts). */
  constructor(path: string | URL, options: CurveWriterOptions = {}) {
    this.path = filePath(path, "CurveWriter: path");
    if (options === null || typeof options !== "object") {
      throw new TypeError(`CurveWriter: options must be an object, got ${describeValue(options)}`);
    }
    checkOptionSpelling(options, CURVE_WRITER_OPTIONS, "CurveWriter: ");
    const every = options.writeEvery ?? 0;
    if (!Number.isSafeInteger(every) || every < 0) {
      throw new RangeError(
        `CurveWriter: writeEvery must be an integer >= 0, got ${describeValue(every)}`,
      );
    }
    this.#title = options.title ?? "training curves";
    this.#subtitle = options.subtitle;
    this.#writeEvery = every;
  }

  /** The training loss points so far, `[step count, loss]`. */
  get loss(): Curve {
    return this.#loss;
  }

  /** Checks the path. */
  onTrainBegin(info: TrainBeginInfo): void {
    this.#silent = info.localRank !== null && info.localRank !== 0;
    if (!this.#silent) checkOutputPath(this.path, "CurveWriter: path");
  }

  /** Records the step (and writes the file every `writeEvery` steps). */
  async onStepEnd(step: StepResult, context: StepContext): Promise<void> {
    const n = step.step + 1;
    if (step.loss > 0 && Number.isFinite(step.loss)) this.#loss.push([n, step.loss]);
    const v = context.validation;
    if (v !== undefined && v.loss > 0 && Number.isFinite(v.loss)) {
      this.#validation.push([n, v.loss]);
    }
    if (v?.accuracy !== undefined) this.#accuracy.push([n, v.accuracy]);
    if (this.#writeEvery > 0 && n % this.#writeEvery === 0) await this.write();
  }

  /** Writes the file. */
  async onTrainEnd(_result?: TrainResult): Promise<void> {
    await this.write();
  }

  /** Writes the picture of the points so far (nothing before the first finite loss). */
  async write(): Promise<void> {
    if (this.#silent || this.#loss.length === 0) return;
    const svg = curvesSvg({
      title: this.#title,
      ...(this.#subtitle === undefined ? {} : { subtitle: this.#subtitle }),
      loss: this.#loss,
      validationLoss: this.#validation,
      accuracy: this.#accuracy,
    });
    await writeFileAtomically(this.path, new TextEncoder().encode(svg));
  }
}
