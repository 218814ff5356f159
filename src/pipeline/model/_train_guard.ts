// What a model allows while its train() runs: calls from the call's hooks
// (onStep, callbacks) act between windows; calls that change the model from
// anywhere else are refused; a call from a hook whose step the model has run
// past is refused (its answer would be about a later model). Used by
// PipelineParallelModel only.

/** The state of a model's running train() call, and the refusals it makes. */
export class TrainGuard {
  #training = false;
  #inHook = 0; // hooks running now
  #hookStep: number | null = null; // the step the running hook names

  /** Whether a train() call runs. */
  get training(): boolean {
    return this.#training;
  }

  /** Marks the start of a train() call; throws when one runs already. */
  begin(): void {
    if (this.#training) {
      throw new Error("the PipelineParallelModel is already training: train() cannot nest");
    }
    this.#training = true;
  }

  /** Marks its end. */
  end(): void {
    this.#training = false;
  }

  /** Runs `fn` as a hook of `step`. */
  async hook<T>(step: number, fn: () => T | Promise<T>): Promise<T> {
    const outer = this.#hookStep;
    this.#hookStep = step;
    this.#inHook++;
    try {
      return await fn();
    } finally {
      this.#inHook--;
      this.#hookStep = outer;
    }
  }

  /**
   * Refuses `call` from a hook whose step is not where the model stands
   * (`nextStep`: the model's step count), e.g. a step inside a window that
   * has run on.
   */
  standsAt(call: string, nextStep: number): void {
    const step = this.#hookStep;
    if (!this.#training || this.#inHook === 0 || step === null || step + 1 === nextStep) return;
    throw new Error(
      `${call} from a train() hook of step ${step}: the model stands after step ${
        nextStep - 1
      } (those steps ran as one window), so it would not answer for step ${step}; a callback ` +
        "that uses the model names its steps with every (onStep and validation steps are " +
        "always exact)",
    );
  }

  /**
   * Refuses `call` while train() runs (from its hooks too, unless
   * `fromHook`): it would change the model under the running call.
   */
  notTraining(call: string, fromHook: boolean): void {
    if (!this.#training || (fromHook && this.#inHook > 0)) return;
    throw new Error(
      `${call}: the model is training (a train() call is running) and ${call} would change it ` +
        `under that call: ${
          fromHook
            ? "call it from train's onStep, or after train() resolves"
            : "call it after train() resolves (stop train with its signal first)"
        }`,
    );
  }
}
