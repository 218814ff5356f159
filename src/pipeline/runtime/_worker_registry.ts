// Every worker the runtime starts, with a closed flag set when it is
// terminated: Deno has no API that tells whether a worker is alive, and
// tests must check that none outlives its pool.

interface Entry {
  closed: boolean;
}

const entries = new Set<Entry>();

/** A started worker and the only way the runtime ends it. */
export interface TrackedWorker {
  readonly worker: Worker;
  /** Terminates the worker (idempotent) and marks it closed. */
  terminate(): void;
  readonly closed: boolean;
}

/** Starts a module worker from `url` and registers it. */
export function startWorker(url: string, name: string): TrackedWorker {
  const worker = new Worker(url, { type: "module", name });
  const entry: Entry = { closed: false };
  entries.add(entry);
  return {
    worker,
    terminate() {
      if (entry.closed) return;
      entry.closed = true;
      entries.delete(entry);
      worker.terminate();
    },
    get closed() {
      return entry.closed;
    },
  };
}

/** Workers started and not yet terminated. */
export function liveCount(): number {
  return entries.size;
}
