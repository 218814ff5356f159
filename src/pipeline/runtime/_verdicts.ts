// The verdict board of step post-validation (see step_validation.ts): the
// stages' flags of each iteration, exchanged between every pair of ranks
// with no barrier, and the verdicts read from them. Not exported from the
// package.

import type { CommBackend } from "../comm/backend.ts";
import { verdictTag } from "./tag.ts";

/** One stage's flag of one iteration. */
export interface StageFlag {
  /** Whether the stage's gradients (and losses) were finite. */
  readonly finite: boolean;
  /** What was not: `"loss"` or `"gradient"`. */
  readonly what?: "loss" | "gradient";
  /** The first micro-batch whose loss was not finite, where known. */
  readonly microBatch?: number;
  /** With clipping: the stage's sum of squared gradients (f64, sent exactly). */
  readonly normSquared?: number;
}

/** A bad verdict: the first stage (lowest index) whose flag was not finite. */
export interface BadVerdict extends StageFlag {
  readonly iteration: number;
  readonly stage: number;
}

/**
 * A clip verdict: every stage's flag was finite and the global norm (the
 * square root of the stages' sums, added in stage order) exceeds the
 * limit, so every stage redoes its step with its gradients times `scale`.
 */
export interface ClipVerdict {
  readonly clip: true;
  readonly iteration: number;
  /** The global gradient norm before clipping. */
  readonly norm: number;
  /** `clipNorm / (norm + 1e-6)`, as `clipGradNorm`. */
  readonly scale: number;
}

/** A verdict that undoes an iteration's steps: a rollback or a redo. */
export type Verdict = BadVerdict | ClipVerdict;

/** Whether `v` is a clip verdict (else a non-finite one). */
export function isClip(v: Verdict): v is ClipVerdict {
  return "clip" in v;
}

// [finite, loss?, micro-batch, has a norm, then the f64 norm² as raw bytes].
function encode(f: StageFlag): Float32Array {
  const a = new Float32Array(6);
  a[0] = f.finite ? 1 : 0;
  a[1] = f.what === "loss" ? 1 : 0;
  a[2] = f.microBatch ?? -1;
  if (f.normSquared !== undefined) {
    a[3] = 1;
    new Float64Array(a.buffer, 16, 1)[0] = f.normSquared;
  }
  return a;
}

function decode(d: Float32Array): StageFlag {
  // A copy of the same element type copies the bytes (the received view may be unaligned).
  const norm = d[3] === 1 ? { normSquared: new Float64Array(d.slice(4, 6).buffer)[0] } : {};
  return d[0] === 1 ? { finite: true, ...norm } : {
    finite: false,
    what: d[1] === 1 ? "loss" : "gradient",
    ...(d[2] >= 0 ? { microBatch: d[2] } : {}),
    ...norm,
  };
}

/** The flags one rank has seen, per iteration and stage. */
export class VerdictBoard {
  readonly #comm: CommBackend;
  readonly #rank: number;
  readonly #stageToRank: readonly number[];
  readonly #clipNorm: number | undefined;
  readonly #flags = new Map<number, (StageFlag | undefined)[]>();
  readonly #bad = new Map<number, { promise: Promise<Verdict>; resolve(v: Verdict): void }>();

  /** `clipNorm`: the global-norm limit, where the flags carry the stages' sums of squares. */
  constructor(comm: CommBackend, stageToRank: readonly number[], clipNorm?: number) {
    this.#comm = comm;
    this.#rank = comm.rank;
    this.#stageToRank = stageToRank;
    this.#clipNorm = clipNorm;
  }

  /** Starts listening for every other rank's flags of `iteration`. */
  listen(iteration: number): void {
    if (this.#flags.has(iteration)) return;
    this.#flags.set(iteration, new Array(this.#stageToRank.length).fill(undefined));
    this.#stageToRank.forEach((r, s) => {
      if (r === this.#rank) return;
      this.#comm.recv(r, verdictTag(iteration, s)).then(
        (d) => this.#record(iteration, s, decode(d)),
        () => {}, // an abort: the run fails on its own path
      );
    });
  }

  /** Records this rank's flag of `stage` and sends it to every other rank. */
  publish(iteration: number, stage: number, flag: StageFlag): void {
    this.listen(iteration);
    for (let r = 0; r < this.#comm.size; r++) {
      if (r !== this.#rank) {
        this.#comm.send(r, verdictTag(iteration, stage), encode(flag), { transfer: true })
          .catch(() => {});
      }
    }
    this.#record(iteration, stage, flag);
  }

  /**
   * The verdict of `iteration` that undoes its steps, as far as known: a
   * non-finite flag, or once every flag is in, a clip; else null.
   */
  badSoFar(iteration: number): Verdict | null {
    const flags = this.#flags.get(iteration);
    if (flags === undefined) return null;
    const s = flags.findIndex((f) => f !== undefined && !f.finite);
    if (s >= 0) return { iteration, stage: s, ...flags[s]! };
    const norm = this.norm(iteration);
    const max = this.#clipNorm;
    if (norm === undefined || max === undefined || !Number.isFinite(norm) || !(norm > max)) {
      return null;
    }
    return { clip: true, iteration, norm, scale: max / (norm + 1e-6) };
  }

  /** Resolves when a verdict that undoes the steps of `iteration` is known (never, if none is). */
  whenBad(iteration: number): Promise<Verdict> {
    const seen = this.badSoFar(iteration);
    if (seen !== null) return Promise.resolve(seen);
    return this.#badSlot(iteration).promise;
  }

  /**
   * Resolves with the verdict of `iteration` (null: commit) once it is
   * known: at the first non-finite flag, else once every stage's flag is in.
   */
  async verdict(iteration: number): Promise<Verdict | null> {
    this.listen(iteration);
    const flags = this.#flags.get(iteration)!;
    while (flags.some((f) => f === undefined)) {
      const bad = this.badSoFar(iteration);
      if (bad !== null) return bad;
      await new Promise<void>((resolve) => this.#waiting.push(resolve));
    }
    return this.badSoFar(iteration);
  }

  /**
   * The global gradient norm of `iteration`, the square root of the stages'
   * sums of squares added in stage order (the same bits on every rank), once
   * every flag is in (else undefined; a flag without a sum counts 0).
   */
  norm(iteration: number): number | undefined {
    const flags = this.#flags.get(iteration);
    if (flags === undefined || flags.some((f) => f === undefined)) return undefined;
    let total = 0;
    for (const f of flags) total += f!.normSquared ?? 0;
    return Math.sqrt(total);
  }

  /**
   * Resolves once every stage's flag of `iteration` is in: null when all are
   * finite, else where the bad value first appeared: a non-finite loss (the
   * forward reached the last stage with it) before any gradient, else the
   * highest stage with a non-finite gradient (gradients flow down the stages).
   */
  async complete(iteration: number): Promise<BadVerdict | null> {
    this.listen(iteration);
    const flags = this.#flags.get(iteration)!;
    while (flags.some((f) => f === undefined)) {
      await new Promise<void>((resolve) => this.#waiting.push(resolve));
    }
    let pick = -1;
    flags.forEach((f, s) => {
      if (f!.finite) return;
      const p = pick < 0 ? undefined : flags[pick]!;
      if (
        p === undefined || (f!.what === "loss" && p.what !== "loss") ||
        (f!.what === p.what && s > pick)
      ) {
        pick = s;
      }
    });
    return pick < 0 ? null : { iteration, stage: pick, ...flags[pick]! };
  }

  /** Forgets iterations below `iteration`. */
  forgetBefore(iteration: number): void {
    for (const k of [...this.#flags.keys()]) if (k < iteration) this.#flags.delete(k);
    for (const k of [...this.#bad.keys()]) if (k < iteration) this.#bad.delete(k);
  }

  #waiting: (() => void)[] = [];

  #record(iteration: number, stage: number, flag: StageFlag): void {
    const flags = this.#flags.get(iteration);
    if (flags === undefined || flags[stage] !== undefined) return;
    flags[stage] = flag;
    const bad = this.badSoFar(iteration);
    if (bad !== null) this.#badSlot(iteration).resolve(bad);
    for (const w of this.#waiting.splice(0)) w();
  }

  #badSlot(iteration: number): { promise: Promise<Verdict>; resolve(v: Verdict): void } {
    let slot = this.#bad.get(iteration);
    if (slot === undefined) {
      let resolve!: (v: Verdict) => void;
      const promise = new Promise<Verdict>((r) => (resolve = r));
      slot = { promise, resolve };
      this.#bad.set(iteration, slot);
    }
    return slot;
  }
}
