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

/**
 * Waits until none of the OS threads `tids` of this process is alive, or
 * `timeoutMs` has passed. Deno reports no worker exit: the thread is looked
 * up in /proc (Linux). Returns whether it could watch them: false at once
 * without /proc, without read access or without thread ids.
 */
export async function waitForThreadsToExit(
  tids: readonly number[],
  timeoutMs: number,
): Promise<boolean> {
  const dir = "/proc/self/task";
  if (tids.length === 0) return false;
  try {
    if (Deno.permissions.querySync({ name: "read", path: dir }).state !== "granted") return false;
  } catch {
    return false;
  }
  const alive = (tid: number): boolean => {
    try {
      Deno.statSync(`${dir}/${tid}`);
      return true;
    } catch {
      return false;
    }
  };
  const deadline = performance.now() + timeoutMs;
  let left = tids.filter(alive);
  while (left.length > 0 && performance.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 2));
    left = left.filter(alive);
  }
  return true;
}
