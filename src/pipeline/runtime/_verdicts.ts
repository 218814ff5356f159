// Post-validation of optimizer steps (the Zero Bubble paper, section 4), for
// runRank. Not exported from the package.
//
// Each stage steps right after its own last backward, on its own
// judgement, and tells every other rank whether its gradients (and, on the
// last stage, its losses) were finite. A rank needs the verdict of
// iteration k, all stages' flags, only before its first step of k + 1 (all
// flags of k were sent by then: every stage's step of k precedes its
// forwards of k + 1, which precede every backward of k + 1), or at the end
// of the run: no barrier in the common path. A bad flag that arrives while
// the rank runs iteration k + 1 abandons that attempt at once (its weights
// came from a step being rolled back), also out of a receive, so that no rank
// waits for a message from a rank that has already abandoned.

import type { CommBackend } from "../comm/backend.ts";

/** One stage's flag of one iteration. */
export interface StageFlag {
  /** Whether the stage's gradients (and losses) were finite. */
  readonly finite: boolean;
  /** What was not: `"loss"` or `"gradient"`. */
  readonly what?: "loss" | "gradient";
  /** The first micro-batch whose loss was not finite, where known. */
  readonly microBatch?: number;
}

/** A bad verdict: the first stage (lowest index) whose flag was not finite. */
export interface BadVerdict extends StageFlag {
  readonly iteration: number;
  readonly stage: number;
}

/** Thrown inside a rank's iteration when the previous iteration's verdict turns out bad. */
export class Abandon extends Error {
  constructor(readonly verdict: BadVerdict) {
    super(`iteration ${verdict.iteration}'s step is rolled back`);
    this.name = "Abandon";
  }
}

const encode = (f: StageFlag): Float32Array =>
  new Float32Array([f.finite ? 1 : 0, f.what === "loss" ? 1 : 0, f.microBatch ?? -1]);

const decode = (d: Float32Array): StageFlag =>
  d[0] === 1 ? { finite: true } : {
    finite: false,
    what: d[1] === 1 ? "loss" : "gradient",
    ...(d[2] >= 0 ? { microBatch: d[2] } : {}),
  };

/** The flags one rank has seen, per iteration and stage. */
export class VerdictBoard {
  readonly #comm: CommBackend;
  readonly #rank: number;
  readonly #stageToRank: readonly number[];
  readonly #flags = new Map<number, (StageFlag | undefined)[]>();
  readonly #bad = new Map<number, { promise: Promise<BadVerdict>; resolve(v: BadVerdict): void }>();

  constructor(comm: CommBackend, stageToRank: readonly number[]) {
    this.#comm = comm;
    this.#rank = comm.rank;
    this.#stageToRank = stageToRank;
  }

  /** Starts listening for every other rank's flags of `iteration`. */
  listen(iteration: number): void {
    if (this.#flags.has(iteration)) return;
    this.#flags.set(iteration, new Array(this.#stageToRank.length).fill(undefined));
    this.#stageToRank.forEach((r, s) => {
      if (r === this.#rank) return;
      this.#comm.recv(r, tag(iteration, s)).then(
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
        this.#comm.send(r, tag(iteration, stage), encode(flag), { transfer: true }).catch(() => {});
      }
    }
    this.#record(iteration, stage, flag);
  }

  /** The bad verdict of `iteration` seen so far, or null (all fine or not all known). */
  badSoFar(iteration: number): BadVerdict | null {
    const flags = this.#flags.get(iteration);
    if (flags === undefined) return null;
    const s = flags.findIndex((f) => f !== undefined && !f.finite);
    return s < 0 ? null : { iteration, stage: s, ...flags[s]! };
  }

  /** Resolves when a bad flag of `iteration` is seen (never, if none is). */
  whenBad(iteration: number): Promise<BadVerdict> {
    const seen = this.badSoFar(iteration);
    if (seen !== null) return Promise.resolve(seen);
    return this.#badSlot(iteration).promise;
  }

  /** Resolves with the verdict of `iteration` once every stage's flag is in (null: all finite). */
  async verdict(iteration: number): Promise<BadVerdict | null> {
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
    if (!flag.finite) {
      const bad = this.badSoFar(iteration)!;
      this.#badSlot(iteration).resolve(bad);
    }
    for (const w of this.#waiting.splice(0)) w();
  }

  #badSlot(iteration: number): { promise: Promise<BadVerdict>; resolve(v: BadVerdict): void } {
    let slot = this.#bad.get(iteration);
    if (slot === undefined) {
      let resolve!: (v: BadVerdict) => void;
      const promise = new Promise<BadVerdict>((r) => (resolve = r));
      slot = { promise, resolve };
      this.#bad.set(iteration, slot);
    }
    return slot;
  }
}

function tag(iteration: number, stage: number): string {
  return `verdict/i${iteration}/s${stage}`;
}
