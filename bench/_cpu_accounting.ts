// Where the CPU time of a timed span went, from Linux's /proc: each thread
// of this process (CPU time and time spent runnable but waiting for a core,
// from /proc/self/task/<tid>/schedstat, in ns) and the cores that other
// processes kept busy (/proc/stat minus this process, in clock ticks). On a
// shared machine a step of D replicas on D cores loses to any other load
// what a one-rank step does not (it has a spare core): these numbers tell
// a slow step from a busy machine. Used by bench/data_parallel.ts; null
// where /proc cannot be read.

/** One thread's CPU and run-queue wait, in ms since it started. */
export interface ThreadTimes {
  /** Thread name (`/proc/.../comm`, e.g. "worker-3"). */
  readonly name: string;
  /** CPU time, ms. */
  readonly cpuMs: number;
  /** Time runnable but waiting for a core, ms. */
  readonly waitMs: number;
}

/** A snapshot: this process's threads by id, the machine's busy ms and this process's. */
export interface CpuSnapshot {
  readonly threads: ReadonlyMap<string, ThreadTimes>;
  /** Busy CPU time of the whole machine, ms (all cores, from clock ticks). */
  readonly machineBusyMs: number;
  /** Busy CPU time of this process, ms (from clock ticks). */
  readonly processBusyMs: number;
  /** `performance.now()` when taken. */
  readonly at: number;
}

/** Linux's clock tick (USER_HZ), 100 on every common kernel. */
const TICK_MS = 10;

/** A snapshot of this process's threads and the machine's load; null where /proc cannot be read. */
export function cpuSnapshot(): CpuSnapshot | null {
  try {
    const threads = new Map<string, ThreadTimes>();
    for (const e of Deno.readDirSync("/proc/self/task")) {
      try {
        const [run, wait] = Deno.readTextFileSync(`/proc/self/task/${e.name}/schedstat`)
          .split(" ").map(Number);
        const name = Deno.readTextFileSync(`/proc/self/task/${e.name}/comm`).trim();
        threads.set(e.name, { name, cpuMs: run / 1e6, waitMs: wait / 1e6 });
      } catch {
        // The thread ended between the listing and the read.
      }
    }
    const cpu = Deno.readTextFileSync("/proc/stat").split("\n")[0].trim().split(/\s+/)
      .slice(1).map(Number);
    // Busy: everything but idle (4th) and iowait (5th).
    const machineBusyMs = (cpu.reduce((a, b) => a + b, 0) - cpu[3] - cpu[4]) * TICK_MS;
    const stat = Deno.readTextFileSync("/proc/self/stat");
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const processBusyMs = (Number(f[11]) + Number(f[12])) * TICK_MS;
    if (![machineBusyMs, processBusyMs].every(Number.isFinite)) return null;
    return { threads, machineBusyMs, processBusyMs, at: performance.now() };
  } catch {
    return null;
  }
}

/** Where one timed span's CPU went (see {@linkcode cpuBetween}). */
export interface CpuSpan {
  /** Wall time, ms. */
  readonly wallMs: number;
  /** CPU of each rank thread (the `ranks` busiest "worker-*" threads), busiest first, ms. */
  readonly rankCpuMs: number[];
  /** Run-queue wait of the same threads, ms. */
  readonly rankWaitMs: number[];
  /** CPU of this process's other threads (main thread, V8's helper threads), ms. */
  readonly otherThreadsCpuMs: number;
  /** Cores that other processes kept busy on average (clock-tick resolution). */
  readonly otherProcessesCores: number;
}

/**
 * The span between two snapshots: the `ranks` "worker-*" threads that used
 * the most CPU in it stand for the run's ranks (the other models' workers
 * sit idle meanwhile).
 */
export function cpuBetween(a: CpuSnapshot, b: CpuSnapshot, ranks: number): CpuSpan {
  const deltas = [...b.threads].map(([tid, t]) => {
    const t0 = a.threads.get(tid);
    return {
      name: t.name,
      cpu: t.cpuMs - (t0?.cpuMs ?? 0),
      wait: t.waitMs - (t0?.waitMs ?? 0),
    };
  });
  const workers = deltas.filter((d) => d.name.startsWith("worker-"))
    .sort((x, y) => y.cpu - x.cpu).slice(0, ranks);
  const all = deltas.reduce((n, d) => n + d.cpu, 0);
  const wallMs = b.at - a.at;
  const others = (b.machineBusyMs - a.machineBusyMs) - (b.processBusyMs - a.processBusyMs);
  return {
    wallMs,
    rankCpuMs: workers.map((w) => w.cpu),
    rankWaitMs: workers.map((w) => w.wait),
    otherThreadsCpuMs: all - workers.reduce((n, w) => n + w.cpu, 0),
    otherProcessesCores: wallMs > 0 ? Math.max(0, others) / wallMs : 0,
  };
}
