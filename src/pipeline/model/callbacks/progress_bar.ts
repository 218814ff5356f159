/**
 * A progress bar for training loops: steps, loss, ms per step and the time
 * left, redrawn in place on a terminal; off a terminal (logs, CI, pipes)
 * quiet, or one plain line every N steps.
 *
 * @module
 */

import type { StepResult, TrainResult } from "../results.ts";
import type { StepContext, TrainBeginInfo, TrainCallback } from "../train_callback.ts";
import { checkOptionSpelling } from "../../../text/nearest.ts";
import { describeValue } from "../../../text/describe.ts";

const PROGRESS_BAR_OPTIONS: readonly (keyof ProgressBarOptions)[] = [
  "total",
  "every",
  "tty",
  "width",
  "write",
  "status",
];

/** Options of {@linkcode ProgressBar}. */
export interface ProgressBarOptions {
  /**
   * The step count the bar fills up to (a step count over the model's life:
   * a run resumed at step 40 of 60 starts at 40/60). Default: the end of
   * the `train` call when its batches are an array; else no bar, the step
   * alone.
   */
  readonly total?: number;
  /**
   * Off a terminal: a line every `every` steps (and at the last step of
   * `total`); 0 (the default) prints nothing there.
   */
  readonly every?: number;
  /** Whether to draw on a terminal (default: whether stdout is one). */
  readonly tty?: boolean;
  /** Characters of the bar (default 24). */
  readonly width?: number;
  /** Where the text goes (default: stdout). */
  readonly write?: (text: string) => void;
  /** More text after the built-in fields of a step's line (e.g. the lr). */
  readonly status?: (step: StepResult, context: StepContext) => string;
}

const enc = new TextEncoder();

function positiveInt(v: unknown, what: string, zero: boolean): void {
  if (v !== undefined && (!Number.isSafeInteger(v) || (v as number) < (zero ? 0 : 1))) {
    throw new RangeError(
      `ProgressBar: ${what} must be ${zero ? "an integer >= 0" : "a positive integer"}, got ${
        String(v)
      }`,
    );
  }
}

/**
 * A loss to 4 significant digits ("3.359", "0.001610"), so a small loss
 * (a regression's) keeps its digits where a fixed 3 decimals showed 0.002.
 */
function lossText(x: number): string {
  if (!Number.isFinite(x)) return String(x);
  return Math.abs(x) >= 1e4 ? x.toFixed(0) : x.toPrecision(4);
}

/** "850 ms", "12 s", "4.5 min", "1.2 h". */
function duration(ms: number): string {
  if (!Number.isFinite(ms)) return "?";
  if (ms < 1) return "0 s";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 90_000) return `${Math.round(ms / 1000)} s`;
  if (ms < 5_400_000) return `${(ms / 60_000).toFixed(1)} min`;
  return `${(ms / 3_600_000).toFixed(1)} h`;
}

/**
 * A progress bar, as a `train` callback or by hand (`update`, `done`). On a
 * terminal one line is redrawn in place:
 * `[######------------------] step 12/60  loss 3.359  85 ms/step  ETA 4 s`,
 * with the last validation loss (and accuracy) once measured and
 * `skipped (non-finite loss)` for a skipped step; off a terminal it is quiet
 * unless `every` asks for a plain line every N steps. Under MPI only rank 0
 * prints. Needs no model (it keeps `train`'s windows).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { ProgressBar } from "@conveyor/core/callbacks";
 * let out = "";
 * const bar = new ProgressBar({ total: 4, every: 2, tty: false, write: (t) => void (out += t) });
 * for (let i = 1; i <= 4; i++) bar.update(i, `loss ${(1 / i).toFixed(2)}`);
 * bar.done();
 * assert.equal(out, "step 2/4  loss 0.50\nstep 4/4  loss 0.25\n");
 * ```
 */
export class ProgressBar implements TrainCallback {
  readonly #total: number | undefined;
  readonly #every: number;
  readonly #tty: boolean;
  readonly #width: number;
  readonly #write: (text: string) => void;
  readonly #status?: (step: StepResult, context: StepContext) => string;
  #callTotal: number | undefined;
  #lastLen = 0;
  #t0 = 0;
  #steps = 0;
  #silent = false;
  #validation = "";

  /** Checks the options (a RangeError or TypeError naming the option). */
  constructor(options: ProgressBarOptions = {}) {
    if (options === null || typeof options !== "object") {
      throw new TypeError(`ProgressBar: options must be an object, got ${describeValue(options)}`);
    }
    checkOptionSpelling(options, PROGRESS_BAR_OPTIONS, "ProgressBar: ");
    positiveInt(options.total, "total", false);
    positiveInt(options.every, "every", true);
    positiveInt(options.width, "width", false);
    for (const f of ["write", "status"] as const) {
      if (options[f] !== undefined && typeof options[f] !== "function") {
        throw new TypeError(`ProgressBar: ${f} must be a function, got ${typeof options[f]}`);
      }
    }
    this.#total = options.total;
    this.#every = options.every ?? 0;
    this.#tty = options.tty ?? Deno.stdout.isTerminal();
    this.#width = options.width ?? 24;
    this.#write = options.write ?? ((t) => void Deno.stdout.writeSync(enc.encode(t)));
    this.#status = options.status;
  }

  /** Whether the bar redraws in place (a terminal) rather than printing lines. */
  get tty(): boolean {
    return this.#tty;
  }

  /** Reports step `done` (a count from 1) with a status text, e.g. the loss. */
  update(done: number, status: string): void {
    if (this.#silent) return;
    const total = this.#total ?? this.#callTotal;
    const head = total === undefined
      ? `step ${done}`
      : `step ${String(done).padStart(String(total).length)}/${total}`;
    const line = status === "" ? head : `${head}  ${status}`;
    if (!this.#tty) {
      if (this.#every > 0 && (done % this.#every === 0 || done === total)) {
        this.#write(`${line}\n`);
      }
      return;
    }
    let text = line;
    if (total !== undefined) {
      const filled = Math.max(0, Math.min(this.#width, Math.round((done / total) * this.#width)));
      text = `[${"#".repeat(filled)}${"-".repeat(this.#width - filled)}] ${line}`;
    }
    const pad = " ".repeat(Math.max(0, this.#lastLen - text.length));
    this.#lastLen = text.length;
    this.#write(`\r${text}${pad}`);
  }

  /** Ends the bar's line (on a terminal). */
  done(): void {
    if (this.#tty && this.#lastLen > 0) this.#write("\n");
    this.#lastLen = 0;
  }

  /** Starts timing; takes the call's end as the total when none was given. */
  onTrainBegin(info: TrainBeginInfo): void {
    this.#silent = info.localRank !== null && info.localRank !== 0;
    this.#callTotal = info.steps === undefined ? undefined : info.firstStep + info.steps;
    this.#t0 = performance.now();
    this.#steps = 0;
    this.#validation = "";
  }

  /** Draws the step: loss, ms per step (wall clock over the call), time left. */
  onStepEnd(step: StepResult, context: StepContext): void {
    if (this.#steps === 0 && this.#t0 === 0) this.#t0 = performance.now();
    this.#steps++;
    const msPerStep = (performance.now() - this.#t0) / this.#steps;
    const total = this.#total ?? this.#callTotal;
    const v = context.validation;
    if (v !== undefined) {
      this.#validation = `  validation ${lossText(v.loss)}${
        v.accuracy === undefined ? "" : ` (${(100 * v.accuracy).toFixed(1)}%)`
      }`;
    }
    const parts = [
      `loss ${lossText(step.loss)}`,
      ...(step.skipped === true ? [`skipped (non-finite ${step.nonFinite?.what ?? "value"})`] : []),
      `${msPerStep.toFixed(0)} ms/step`,
      ...(total === undefined
        ? []
        : [`ETA ${duration(Math.max(0, total - step.step - 1) * msPerStep)}`]),
    ];
    const extra = this.#status?.(step, context) ?? "";
    this.update(
      step.step + 1,
      parts.join("  ") + this.#validation + (extra === "" ? "" : `  ${extra}`),
    );
  }

  /** Ends the line. */
  onTrainEnd(_result: TrainResult): void {
    this.done();
    this.#t0 = 0;
  }
}
