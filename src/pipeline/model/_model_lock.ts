/**
 * The model's lifecycle guard: one call at a time, and a failed pipeline
 * run closes the model (its ranks are in an unknown state) with every rank
 * released.
 *
 * @module
 */

/** Busy, closed and failed state of one `PipelineParallelModel`. */
export class ModelLock {
  #busy = false;
  #closed = false;
  #failure: Error | null = null;
  readonly #release: () => Promise<void>;

  /** `release` ends every rank; it is called once when a run fails. */
  constructor(release: () => Promise<void>) {
    this.#release = release;
  }

  /** Whether the model was disposed or brought down by a failure. */
  get closed(): boolean {
    return this.#closed;
  }

  /** Marks the model closed; true the first time. */
  close(): boolean {
    if (this.#closed) return false;
    this.#closed = true;
    return true;
  }

  /** Throws unless a new call may start now. */
  check(): void {
    if (this.#failure !== null) {
      throw new Error(`the model failed and is closed: ${this.#failure.message}`, {
        cause: this.#failure,
      });
    }
    if (this.#closed) throw new Error("the PipelineParallelModel was disposed");
    if (this.#busy) {
      throw new Error("the PipelineParallelModel is busy: await the previous call first");
    }
  }

  /**
   * Runs `body` as the model's one call. With `run` (a pipeline run or a
   * state load), a failure closes the model and releases the ranks.
   */
  async exclusive<T>(body: () => Promise<T>, run = false): Promise<T> {
    this.check();
    this.#busy = true;
    try {
      return await body();
    } catch (e) {
      if (run) {
        this.#failure = e instanceof Error ? e : new Error(String(e));
        this.#closed = true;
        await this.#release().catch(() => {});
      }
      throw e;
    } finally {
      this.#busy = false;
    }
  }
}
