/**
 * A metrics log of a training run: one line per step, as JSON Lines or CSV.
 *
 * @module
 */

import { checkOutputPath } from "../output_path.ts";
import { filePath } from "../_file_path.ts";
import type { StepResult } from "../results.ts";
import type { StepContext, TrainBeginInfo, TrainCallback } from "../train_callback.ts";
import { checkOptionSpelling } from "../../../text/nearest.ts";
import { describeValue } from "../../../text/describe.ts";

const METRICS_LOGGER_OPTIONS: readonly (keyof MetricsLoggerOptions)[] = ["format", "append"];

/** Options of {@linkcode MetricsLogger}. */
export interface MetricsLoggerOptions {
  /** `"jsonl"` or `"csv"` (default: `"csv"` for a path ending in `.csv`, else `"jsonl"`). */
  readonly format?: "jsonl" | "csv";
  /**
   * Add to the file rather than start it afresh (default false): a resumed
   * run continues the log of the run it resumes. The file is read first
   * (read permission for it): when training starts past step 0 (a resumed
   * run), the lines of later steps are cut off (an interrupted run logged
   * past its last checkpoint; the resumed run logs those steps again), and
   * a CSV file's header must be this logger's.
   */
  readonly append?: boolean;
}

/** One line of a {@linkcode MetricsLogger} in JSON Lines. */
export interface MetricsLine {
  /** The step's count over the model's life (`StepResult.step + 1`, as the CLI prints it). */
  readonly step: number;
  /** The step's loss. */
  readonly loss: number;
  /** The step's learning rate. */
  readonly lr: number;
  /** The step's makespan, ms. */
  readonly makespanMs: number;
  /** The step's measured bubble fraction. */
  readonly bubble: number;
  /** The global gradient norm before clipping (with clipping). */
  readonly gradNorm?: number;
  /** Present (true) when the step was skipped as non-finite. */
  readonly skipped?: true;
  /** The validation loss after this step (at validation steps). */
  readonly validationLoss?: number;
  /** The validation accuracy after this step (cross-entropy, at validation steps). */
  readonly validationAccuracy?: number;
  /** Wall-clock ms from the `train` call's start to this step's hooks. */
  readonly wallMs: number;
}

/**
 * The CSV header: the {@linkcode MetricsLine} fields, snake_case.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { METRICS_CSV_HEADER } from "@conveyor/core/callbacks";
 * assert.equal(METRICS_CSV_HEADER.split(",")[1], "loss");
 * ```
 */
export const METRICS_CSV_HEADER =
  "step,loss,lr,makespan_ms,bubble,grad_norm,skipped,validation_loss,validation_accuracy,wall_ms";

// The log's text without the lines of steps after `lastStep` (steps counted
// from 1, as the lines hold them) and without a torn last line; the text as
// it is when nothing goes.
function linesUpTo(text: string, lastStep: number, format: "jsonl" | "csv"): string {
  const lines = text.split("\n");
  const tail = lines.pop(); // "" after a final newline, else a torn line
  const first = format === "csv" ? 1 : 0;
  let keep = lines.length;
  for (let i = first; i < lines.length; i++) {
    let step: number;
    try {
      step = format === "jsonl" ? JSON.parse(lines[i]).step : Number(lines[i].split(",")[0]);
    } catch {
      continue; // not a line of ours: left as it is
    }
    if (typeof step === "number" && step > lastStep) {
      keep = i;
      break;
    }
  }
  if (keep === lines.length && tail === "") return text;
  return lines.slice(0, keep).map((l) => `${l}\n`).join("");
}

/**
 * Logs every step to a file, one line each, written as the step's hooks
 * run (one write per line: a crash loses at most the line being written):
 * JSON Lines ({@linkcode MetricsLine}) or CSV ({@linkcode METRICS_CSV_HEADER},
 * empty cells for absent fields). The path is checked when `train` starts,
 * before the first step (folder, not a directory, permission: a TypeError
 * naming the path and the rule). Under MPI only rank 0 writes. Needs no
 * model (it keeps `train`'s windows). By hand: `onTrainBegin` then
 * `onStepEnd(step, context)` from `onStep`.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { MetricsLogger } from "@conveyor/core/callbacks";
 * const dir = await Deno.makeTempDir();
 * const log = new MetricsLogger(`${dir}/m.csv`);
 * log.onTrainBegin({ firstStep: 0, localRank: null });
 * const step = { step: 0, loss: 2.5, lr: 0.01, makespanMs: 12, bubble: 0.25 };
 * log.onStepEnd(step as never, { exact: true, stop: () => {} });
 * const [head, line] = (await Deno.readTextFile(`${dir}/m.csv`)).trim().split("\n");
 * assert.equal(head, "step,loss,lr,makespan_ms,bubble,grad_norm,skipped,validation_loss,validation_accuracy,wall_ms");
 * assert.match(line, /^1,2\.5,0\.01,12,0\.25,,,,,\d/);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export class MetricsLogger implements TrainCallback {
  /** The file's local path. */
  readonly path: string;
  /** `"jsonl"` or `"csv"`. */
  readonly format: "jsonl" | "csv";
  readonly #append: boolean;
  #ready = false;
  #silent = false;
  #t0 = 0;

  /** Checks the options (the path itself is checked when training starts). */
  constructor(path: string | URL, options: MetricsLoggerOptions = {}) {
    this.path = filePath(path, "MetricsLogger: path");
    if (options === null || typeof options !== "object") {
      throw new TypeError(
        `MetricsLogger: options must be an object, got ${describeValue(options)}`,
      );
    }
    checkOptionSpelling(options, METRICS_LOGGER_OPTIONS, "MetricsLogger: ");
    const format = options.format ?? (this.path.endsWith(".csv") ? "csv" : "jsonl");
    if (format !== "jsonl" && format !== "csv") {
      throw new TypeError(
        `MetricsLogger: format must be "jsonl" or "csv", got ${describeValue(format)}`,
      );
    }
    this.format = format;
    this.#append = options.append ?? false;
  }

  /** Checks the path and starts the file (or checks the CSV header it continues). */
  onTrainBegin(info: TrainBeginInfo): void {
    this.#silent = info.localRank !== null && info.localRank !== 0;
    this.#t0 = performance.now();
    if (this.#silent) return;
    checkOutputPath(this.path, "MetricsLogger: path", { write: "direct" });
    let existing = "";
    if (this.#append) {
      try {
        existing = Deno.readTextFileSync(this.path);
      } catch (e) {
        if (!(e instanceof Deno.errors.NotFound)) {
          throw new TypeError(
            `MetricsLogger: path ${this.path}: cannot read the log it appends to ` +
              `(${(e as Error).message}; run with --allow-read=${this.path})`,
          );
        }
      }
    }
    if (this.format === "csv" && existing !== "") {
      const nl = existing.indexOf("\n");
      const head = nl < 0 ? existing : existing.slice(0, nl);
      if (head !== METRICS_CSV_HEADER) {
        throw new TypeError(
          `MetricsLogger: path ${this.path}: its header ${JSON.stringify(head)} is not ` +
            `${JSON.stringify(METRICS_CSV_HEADER)}: append to a log of this format only`,
        );
      }
    }
    // Appending drops a torn last line, and a resumed run (past step 0) the
    // lines an interrupted run logged past its checkpoint: the log is cut in
    // place (the kept text is a prefix of it; write access to the file suffices).
    const last = info.firstStep > 0 ? info.firstStep : Infinity;
    const kept = this.#append ? linesUpTo(existing, last, this.format) : existing;
    if (kept !== existing) Deno.truncateSync(this.path, new TextEncoder().encode(kept).length);
    const start = this.format === "csv" && kept === "" ? `${METRICS_CSV_HEADER}\n` : "";
    Deno.writeTextFileSync(this.path, start, { append: this.#append });
    this.#ready = true;
  }

  /** Writes the step's line. */
  onStepEnd(step: StepResult, context: StepContext): void {
    if (this.#silent) return;
    if (!this.#ready) this.onTrainBegin({ firstStep: step.step, localRank: null });
    const line: MetricsLine = {
      step: step.step + 1,
      loss: step.loss,
      lr: step.lr,
      makespanMs: step.makespanMs,
      bubble: step.bubble,
      ...(step.gradNorm === undefined ? {} : { gradNorm: step.gradNorm }),
      ...(step.skipped === true ? { skipped: true as const } : {}),
      ...(context.validation === undefined ? {} : { validationLoss: context.validation.loss }),
      ...(context.validation?.accuracy === undefined
        ? {}
        : { validationAccuracy: context.validation.accuracy }),
      wallMs: Math.round(performance.now() - this.#t0),
    };
    const text = this.format === "jsonl" ? JSON.stringify(line) : [
      line.step,
      line.loss,
      line.lr,
      line.makespanMs,
      line.bubble,
      line.gradNorm ?? "",
      line.skipped === true ? "true" : "",
      line.validationLoss ?? "",
      line.validationAccuracy ?? "",
      line.wallMs,
    ].join(",");
    Deno.writeTextFileSync(this.path, `${text}\n`, { append: true });
  }

  /** Nothing to close (every line is written as it comes). */
  onTrainEnd(): void {
    this.#ready = false;
  }
}
