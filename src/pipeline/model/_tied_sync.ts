// Tied parameters held on two ranks (a `TiedHead` on one, the embedding's
// table on another): each copy's gradient is summed with the other's
// before either stage steps (as Megatron's embedding group), so the copies
// stay identical and equal one device's tied training. Not exported from
// the package.

import type { Backend, Tensor } from "../../tensor/mod.ts";
import * as ops from "../../tensor/ops.ts";
import type { Parameter } from "../../nn/layer.ts";
import type { CommBackend } from "../comm/backend.ts";
import type { PendingAverage } from "../runtime/gradient_sync.ts";
import { tiedTag } from "../runtime/tag.ts";
import type { TiedLink } from "./stage_options.ts";

/** One rank's side of its tied links. */
export class TiedSync {
  readonly #links: readonly TiedLink[];
  readonly #rank: number;
  readonly #comm: CommBackend;
  readonly #backend: Backend;

  /** The links of `rank` among `links` (absent: none). */
  constructor(
    links: readonly TiedLink[] | undefined,
    rank: number,
    comm: CommBackend,
    backend: Backend,
  ) {
    this.#links = (links ?? []).filter((l) => l.ownerRank === rank || l.headRank === rank);
    this.#rank = rank;
    this.#comm = comm;
    this.#backend = backend;
  }

  /** Whether the head copies of `stage` (on this rank) are `p`. */
  #copyOf(stage: number, name: string): TiedLink | undefined {
    return this.#links.find((l) =>
      l.headRank === this.#rank && l.headStage === stage && l.headParam === name
    );
  }

  /** `stage`'s parameters with every head copy named as the whole model names it. */
  named(stage: number, params: Parameter[]): Parameter[] {
    if (this.#links.length === 0) return params;
    return params.map((p) => {
      const l = this.#copyOf(stage, p.name);
      return l === undefined ? p : { ...p, name: l.name };
    });
  }

  /** `stage`'s parameters for the global gradient norm: a copy counts once, on its owner. */
  forNorm(stage: number, params: Parameter[]): Parameter[] {
    if (this.#links.length === 0) return params;
    return params.filter((p) => this.#copyOf(stage, p.name) === undefined);
  }

  /**
   * Null where `stage` holds no tied copy, else what starts summing its
   * tied gradients (`params()`, the stage's own names) with the other
   * ranks' copies: each side sends its gradient and adds the other's
   * (a + b is the same f32 on both), the stage stepping once `finish()`
   * resolves.
   */
  start(
    stage: number,
    iteration: number,
    attempt: number,
    params: () => readonly Parameter[],
  ): (() => PendingAverage) | null {
    const tied = this.#links.some((l) =>
      (l.ownerRank === this.#rank && l.ownerStage === stage) ||
      (l.headRank === this.#rank && l.headStage === stage)
    );
    return tied ? () => this.#start(stage, iteration, attempt, params()) : null;
  }

  #start(
    stage: number,
    iteration: number,
    attempt: number,
    params: readonly Parameter[],
  ): PendingAverage {
    const mine = this.#links.flatMap((l) => {
      const owner = l.ownerRank === this.#rank && l.ownerStage === stage;
      const head = l.headRank === this.#rank && l.headStage === stage;
      if (!owner && !head) return [];
      const p = params.find((q) => q.name === (owner ? l.name : l.headParam));
      if (p === undefined) throw new Error(`tied parameter ${l.name} is not on stage ${stage}`);
      return [{ l, owner, grad: p.grad }];
    });
    let ready = false;
    const done = Promise.all(mine.map(({ l, owner, grad }) => {
      const peer = owner ? l.headRank : l.ownerRank;
      return this.#exchange(
        grad,
        peer,
        tiedTag(iteration, attempt, l.name, owner ? "owner" : "head"),
        tiedTag(iteration, attempt, l.name, owner ? "head" : "owner"),
      );
    })).finally(() => ready = true);
    done.catch(() => {}); // seen by finish(); an abandoned attempt never calls it
    return {
      get ready() {
        return ready;
      },
      finish: async () => void await done,
    };
  }

  async #exchange(grad: Tensor, peer: number, sendTag: string, recvTag: string): Promise<void> {
    const own = await grad.toArray();
    const sent = this.#comm.send(peer, sendTag, own.slice());
    const other = await this.#comm.recv(peer, recvTag);
    await sent;
    if (other.length !== own.length) {
      throw new Error(
        `tied gradient ${recvTag}: ${other.length} values from rank ${peer}, want ${own.length}`,
      );
    }
    const sum = new Float32Array(own.length);
    for (let i = 0; i < sum.length; i++) sum[i] = own[i] + other[i];
    const t = this.#backend.fromData(sum, [...grad.shape]);
    ops.copyInPlace(grad, t);
    t.dispose();
  }
}
