// The OS threads of this process, from /proc (Linux). Deno tells neither
// whether a worker's thread still runs nor how much CPU it uses; /proc does,
// where it exists and may be read. Not exported from the package.

const TASKS = "/proc/self/task";

/** Whether /proc/self/task can be read here (Linux, with read permission). */
export function canWatchThreads(): boolean {
  try {
    return Deno.permissions.querySync({ name: "read", path: TASKS }).state === "granted" &&
      Deno.statSync(TASKS).isDirectory;
  } catch {
    return false;
  }
}

/** Whether thread `tid` of this process is alive; undefined where that cannot be seen. */
export function threadAlive(tid: number | undefined): boolean | undefined {
  if (tid === undefined) return undefined;
  try {
    Deno.statSync(`${TASKS}/${tid}`);
    return true;
  } catch (e) {
    return e instanceof Deno.errors.NotFound ? false : undefined;
  }
}

/**
 * CPU time (user + system, in clock ticks) of thread `tid`; undefined where
 * it cannot be read. A worker held in synchronous compute uses CPU; one
 * blocked in a wait does not.
 */
export function threadCpuTicks(tid: number | undefined): number | undefined {
  if (tid === undefined) return undefined;
  try {
    const stat = Deno.readTextFileSync(`${TASKS}/${tid}/stat`);
    // Fields after the parenthesised name: state, ppid, …; utime and stime
    // are fields 14 and 15 of the line, 12th and 13th after the name.
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const ticks = Number(f[11]) + Number(f[12]);
    return Number.isFinite(ticks) ? ticks : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Waits until none of the threads `tids` is alive, or `timeoutMs` has
 * passed. Returns whether it could watch them: false at once without /proc,
 * without read access or without thread ids.
 */
export async function waitForThreadsToExit(
  tids: readonly number[],
  timeoutMs: number,
): Promise<boolean> {
  if (tids.length === 0 || !canWatchThreads()) return false;
  const deadline = performance.now() + timeoutMs;
  let left = tids.filter((t) => threadAlive(t) !== false);
  while (left.length > 0 && performance.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 2));
    left = left.filter((t) => threadAlive(t) !== false);
  }
  return true;
}

/** The threads of `tids` still alive (empty where that cannot be seen). */
export function threadsAlive(tids: readonly number[]): number[] {
  return tids.filter((t) => threadAlive(t) === true);
}
