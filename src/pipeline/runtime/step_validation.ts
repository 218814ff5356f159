/**
 * Post-validation of optimizer steps (the Zero Bubble paper, section 4): the
 * protocol that {@linkcode runRank} calls at named points of its loop, kept
 * apart from the loop itself.
 *
 * Each stage steps right after its own last backward, on its own
 * judgement, and tells every other rank whether its gradients (and, on the
 * last stage, its losses) were finite and, with clipping, its sum of
 * squared gradients ({@linkcode StepValidation.afterStep}). A rank needs
 * the verdict of iteration k, all stages' flags, only before its first step
 * of k + 1 ({@linkcode StepValidation.beforeFirstStep}; all flags of k were
 * sent by then: every stage's step of k precedes its forwards of k + 1,
 * which precede every backward of k + 1), or at the end of the run
 * ({@linkcode StepValidation.finish}): no barrier in the common path. A
 * verdict that undoes the step (a non-finite flag, or with clipping a
 * global norm above the limit) that arrives while the rank runs iteration
 * k + 1 abandons that attempt at once ({@linkcode StepValidation.beforeAction},
 * also out of a receive: {@linkcode StepValidation.receive}), so that no rank
 * waits for a message from a rank that has already abandoned. The rank then
 * runs the iteration again as its next attempt, on the restored weights
 * ({@linkcode StepValidation.abandon}).
 *
 * @module
 */

import type { CommBackend } from "../comm/backend.ts";
import type { RankExecutor, StepCheck, StepResultOf } from "./rank_executor.ts";
import { isClip, type Verdict, VerdictBoard } from "./_verdicts.ts";
import type { NonFinitePolicy, RunPolicy } from "./run_policy.ts";
import { isTensorTagOf, isVerdictTagOf } from "./tag.ts";

/** A step rolled back by post-validation. */
export interface RolledBack {
  /** The iteration whose steps were undone. */
  readonly iteration: number;
  /** The lowest stage whose check failed. */
  readonly stage: number;
  /** What that stage found not finite, where it said. */
  readonly what?: "loss" | "gradient";
  /** The first micro-batch whose loss was not finite, where known. */
  readonly microBatch?: number;
}

/** An iteration's global gradient norm, as clipping by post-validation found it. */
export interface GradNorm {
  /** The iteration. */
  readonly iteration: number;
  /** The global gradient norm before clipping (NaN or ∞ where not finite). */
  readonly norm: number;
  /** Whether the steps were redone clipped. */
  readonly clipped: boolean;
}

/**
 * Thrown inside a rank's iteration when the previous iteration's verdict
 * undoes its step.
 *
 * @example
 * ```ts
 * import { Abandon } from "./step_validation.ts";
 * const e = new Abandon({ iteration: 3, stage: 1, finite: false, what: "gradient" });
 * console.log(e.message); // "iteration 3's step is rolled back"
 * ```
 */
export class Abandon extends Error {
  /** The verdict of the previous iteration. */
  readonly verdict: Verdict;
  /** `verdict`: the verdict that undoes the previous iteration's steps. */
  constructor(verdict: Verdict) {
    super(
      `iteration ${verdict.iteration}'s step is ${
        isClip(verdict) ? "redone clipped" : "rolled back"
      }`,
    );
    this.verdict = verdict;
    this.name = "Abandon";
  }
}

/** What one rank's step validation works with. */
export interface StepValidationInit {
  /** The rank's transport (the flags travel on it). */
  readonly comm: CommBackend;
  /** The rank's executor (commits, redoes or rolls back its stages' steps). */
  readonly executor: RankExecutor;
  /** The schedule's placement: the rank of each global stage. */
  readonly stageToRank: readonly number[];
  /** The stages this rank steps, ascending. */
  readonly stages: readonly number[];
  /** The run's first iteration. */
  readonly firstIteration: number;
  /** The run's checked policy (`nonFinite`, `clipGradNorm`). */
  readonly policy: RunPolicy;
  /** Whether the run only predicts (then nothing steps and nothing is validated). */
  readonly forwardOnly: boolean;
}

/**
 * One rank's side of step post-validation: publishes its stages' flags,
 * settles each iteration's steps once its verdict is in (commit, redo
 * clipped, or roll back), abandons an attempt whose weights came from an
 * undone step, and numbers the attempts at each iteration.
 *
 * @example
 * ```ts
 * import { InProcessBackend } from "@conveyor/core/runtime";
 * import { createSyntheticExecutor } from "@conveyor/core/testing";
 * import { StepValidation } from "./step_validation.ts";
 * const [comm] = InProcessBackend.createGroup(1);
 * const executor = createSyntheticExecutor({
 *   rank: 0, ranks: 1, stages: [0], numStages: 1, microBatches: 1, options: { ms: 0 },
 *   abortFlag: new Int32Array(1), signal: new AbortController().signal, comm,
 * });
 * const init = { comm, executor, stageToRank: [0], stages: [0], firstIteration: 0, forwardOnly: false };
 * const off = StepValidation.create({ ...init, policy: { nonFinite: "off" } });
 * const skip = StepValidation.create({ ...init, policy: { nonFinite: "skip" } });
 * console.log(off, skip?.attempt(0), skip?.mustSettleBefore(0)); // null 0 false
 * comm.close();
 * ```
 */
export class StepValidation {
  /** The iterations whose steps were rolled back, in order. */
  readonly rolledBack: RolledBack[] = [];
  /** With clipping: each settled iteration's global gradient norm. */
  readonly gradNorms: GradNorm[] = [];
  readonly #comm: CommBackend;
  readonly #executor: RankExecutor;
  readonly #stages: readonly number[];
  readonly #validate: NonFinitePolicy;
  readonly #clipNorm: number | undefined;
  readonly #board: VerdictBoard;
  readonly #attempts = new Map<number, number>();
  // The last iteration whose verdict was acted upon (its steps committed or rolled back).
  #settledUpTo: number;

  /**
   * Checks that the executor can redo a clipped step before any work; null
   * where nothing is validated (`nonFinite` off without clipping, or a
   * forward-only run).
   */
  static create(init: StepValidationInit): StepValidation | null {
    const validate = init.policy.nonFinite;
    const clipNorm = init.policy.clipGradNorm;
    if (clipNorm !== undefined && typeof init.executor.redoStep !== "function") {
      throw new TypeError(
        `clipGradNorm needs an executor with redoStep, got ${typeof init.executor.redoStep}`,
      );
    }
    if ((validate === "off" && clipNorm === undefined) || init.forwardOnly) return null;
    return new StepValidation(init, validate, clipNorm);
  }

  private constructor(
    init: StepValidationInit,
    validate: NonFinitePolicy,
    clipNorm: number | undefined,
  ) {
    this.#comm = init.comm;
    this.#executor = init.executor;
    this.#stages = init.stages;
    this.#validate = validate;
    this.#clipNorm = clipNorm;
    this.#board = new VerdictBoard(init.comm, init.stageToRank, clipNorm);
    this.#settledUpTo = init.firstIteration - 1;
  }

  /** The attempt at `iteration` now running (0 first, 1 after one abandon, …). */
  attempt(iteration: number): number {
    return this.#attempts.get(iteration) ?? 0;
  }

  /** Called as an attempt at `iteration` begins: listens for its flags. */
  beginIteration(iteration: number): void {
    this.#board.listen(iteration);
  }

  /** Called before each action: throws {@linkcode Abandon} once the previous step is known undone. */
  beforeAction(iteration: number): void {
    if (iteration - 1 <= this.#settledUpTo) return;
    const bad = this.#board.badSoFar(iteration - 1);
    if (bad !== null) throw new Abandon(bad);
  }

  /** A receive of `iteration` that gives up (rejects with {@linkcode Abandon}) when the previous step turns out undone. */
  receive(data: Promise<Float32Array>, iteration: number): Promise<Float32Array> {
    if (iteration - 1 <= this.#settledUpTo) return data;
    return Promise.race([
      data,
      this.#board.whenBad(iteration - 1).then((v) => Promise.reject(new Abandon(v))),
    ]);
  }

  /**
   * Whether the rank must wait for the previous iteration's verdict before
   * its first step of `iteration` ({@linkcode StepValidation.beforeFirstStep}).
   */
  mustSettleBefore(iteration: number): boolean {
    return iteration - 1 > this.#settledUpTo;
  }

  /**
   * Before the first step of `iteration`: the previous step becomes final
   * (committed, redone clipped or rolled back); throws {@linkcode Abandon}
   * when it was undone, since this attempt ran on its weights.
   */
  async beforeFirstStep(iteration: number): Promise<void> {
    const v = await this.#settle(iteration - 1);
    if (v !== null) throw new Abandon(v);
  }

  /**
   * After `stage` stepped in `iteration`: publishes the step's check once it
   * is known (a pending one when it resolves); `failed` is told when the
   * check cannot be had.
   */
  afterStep(
    stage: number,
    iteration: number,
    out: StepResultOf,
    failed: (cause: unknown) => void,
  ): void {
    const check = out !== undefined && out !== null && "check" in out
      ? Promise.resolve(out.check)
      : Promise.resolve((out ?? { finite: true }) as StepCheck);
    check.then((c) => {
      if (this.#clipNorm !== undefined && typeof c.normSquared !== "number") {
        return failed(
          new TypeError(
            `clipGradNorm needs the step's check to carry normSquared, got ${
              String(c.normSquared)
            }`,
          ),
        );
      }
      // Without validation only the sum of squares counts.
      this.#board.publish(
        iteration,
        stage,
        this.#validate === "off" ? { finite: true, normSquared: c.normSquared } : c,
      );
    }, failed);
  }

  /**
   * After an attempt at `iteration` threw `abandoned`: the previous step is
   * settled (rolled back or redone everywhere), the attempt's traffic and
   * the executor's state of it go, and the next attempt is numbered.
   * Resolves true when the run ends here instead (`"throw"` after a rollback).
   */
  async abandon(iteration: number, abandoned: Abandon): Promise<boolean> {
    if (this.#settledUpTo < iteration - 1) await this.#settle(iteration - 1);
    const attempt = this.attempt(iteration);
    this.#comm.discard((t) => isTensorTagOf(t, iteration, attempt));
    await this.#executor.abandonIteration?.(iteration);
    if (this.#validate === "throw" && !isClip(abandoned.verdict)) {
      this.#comm.discard((t) => isVerdictTagOf(t, iteration));
      return true;
    }
    this.#attempts.set(iteration, attempt + 1);
    return false;
  }

  /** At the end of the run, before `iteration`: the run's last step is final only once its verdict is in. */
  async finish(iteration: number): Promise<void> {
    if (this.#settledUpTo < iteration - 1) await this.#settle(iteration - 1);
  }

  // Settles iteration `k`'s steps once its verdict is in: commit, redo
  // clipped, or roll back.
  async #settle(k: number): Promise<Verdict | null> {
    const board = this.#board;
    const v = await board.verdict(k);
    let bad = v === null || isClip(v) ? null : v;
    for (const s of this.#stages) {
      if (v === null) await this.#executor.commitStep?.(s, k);
      else if (isClip(v)) await this.#executor.redoStep!(s, k, v.scale);
      else await this.#executor.rollbackStep?.(s, k);
    }
    // Where it appeared, from every stage's flag (all come: each stage of k has stepped).
    if (bad !== null) bad = await board.complete(k) ?? bad;
    if (bad !== null) {
      this.rolledBack.push({
        iteration: k,
        stage: bad.stage,
        ...(bad.what === undefined ? {} : { what: bad.what }),
        ...(bad.microBatch === undefined ? {} : { microBatch: bad.microBatch }),
      });
    }
    if (this.#clipNorm !== undefined) {
      // Every flag of k is in (a bad verdict waited for them all above).
      const norm = board.norm(k) ?? NaN;
      this.gradNorms.push({ iteration: k, norm, clipped: v !== null && isClip(v) });
    }
    this.#settledUpTo = k;
    board.forgetBefore(k);
    return bad ?? v;
  }
}
