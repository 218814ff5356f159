// The MPI backend's barrier, from point-to-point messages (not MPI_Barrier,
// which would block the thread): the n-th barrier of a rank is generation n;
// each rank announces its arrival to every peer and passes once all peers
// announced the same generation. Used by mpi_backend.ts only.

import { CommAbortedError } from "./backend.ts";

/** Barrier generations of one rank: peers' arrivals and this rank's waits. */
export class Barriers {
  #size: number;
  #count = 0;
  #arrivals = new Map<number, Set<number>>();
  #waits = new Map<number, { resolve(): void; reject(e: Error): void }>();

  /** Barriers among `size` ranks. */
  constructor(size: number) {
    this.#size = size;
  }

  /** Whether this rank waits in a barrier. */
  get waiting(): boolean {
    return this.#waits.size > 0;
  }

  /** Starts this rank's next barrier and returns its generation. */
  next(): number {
    return ++this.#count;
  }

  /** Whether `q` has already arrived at generation `gen`. */
  arrived(gen: number, q: number): boolean {
    return this.#arrivals.get(gen)?.has(q) ?? false;
  }

  /**
   * After this rank announced `gen`: resolves at once if every peer is
   * there already, else once the last arrives (see {@linkcode arrive}).
   */
  wait(gen: number): Promise<void> {
    if ((this.#arrivals.get(gen)?.size ?? 0) === this.#size - 1) {
      this.#arrivals.delete(gen);
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => this.#waits.set(gen, { resolve, reject }));
  }

  /** Peer `src` arrived at generation `gen`. */
  arrive(gen: number, src: number): void {
    const set = this.#arrivals.get(gen) ?? new Set<number>();
    set.add(src);
    this.#arrivals.set(gen, set);
    const wait = this.#waits.get(gen);
    if (wait !== undefined && set.size === this.#size - 1) {
      this.#waits.delete(gen);
      this.#arrivals.delete(gen);
      wait.resolve();
    }
  }

  /** Peer `src` closed: the barriers it has not reached fail. */
  closed(src: number): void {
    for (const [gen, wait] of this.#waits) {
      if (!this.#arrivals.get(gen)?.has(src)) {
        this.#waits.delete(gen);
        wait.reject(new CommAbortedError(`rank ${src} closed`));
      }
    }
  }

  /** Every waiting barrier fails with `error`. */
  fail(error: Error): void {
    for (const w of this.#waits.values()) w.reject(error);
    this.#waits.clear();
  }
}
