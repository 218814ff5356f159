// A Ctrl-C during a command's training: the first aborts `signal` (train
// ends the window running, and the command writes its outputs as at the
// end), a second ends the process at once (exit 130). Not exported from
// the package.

/** A Ctrl-C listener held until disposed (once; later disposals do nothing). */
export interface Interrupt extends Disposable {
  /** Aborted by the first Ctrl-C. */
  readonly signal: AbortSignal;
}

/**
 * Listens for SIGINT while held, when `enabled` (not under MPI: every
 * process gets the signal, and the ranks must stop at one step).
 */
export function listenForInterrupt(enabled: boolean): Interrupt {
  const stop = new AbortController();
  const interrupt = () => stop.signal.aborted ? Deno.exit(130) : stop.abort();
  let held = enabled;
  if (held) Deno.addSignalListener("SIGINT", interrupt);
  return {
    signal: stop.signal,
    [Symbol.dispose]: () => {
      if (held) Deno.removeSignalListener("SIGINT", interrupt);
      held = false;
    },
  };
}
