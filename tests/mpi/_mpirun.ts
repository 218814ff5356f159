// Running real `mpirun` jobs (Open MPI) from the tests: a clean child
// environment, a clear failure when mpirun is missing, a time limit that
// kills every process of the job, and the check that no rank process
// outlives its job. Shared by tests/cli_mpi_test.ts,
// tests/cli_mpi_data_parallel_test.ts and
// tests/pipeline/comm/mpi_backend_test.ts.

import assert from "node:assert/strict";

/** Open MPI's shared-memory transport (one host). */
export const SHM = "vader,self";
/** TCP only: the stand-in for separate hosts. */
export const TCP = "tcp,self";

/** Environment of every child: no inherited MPI or Conveyor settings, then `extra`. */
export function childEnv(extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(Deno.env.toObject())) {
    if (!/^(OMPI_|PMIX_|PMI_|CONVEYOR_)/.test(k)) env[k] = v;
  }
  return {
    ...env,
    NO_COLOR: "1",
    OMPI_ALLOW_RUN_AS_ROOT: "1",
    OMPI_ALLOW_RUN_AS_ROOT_CONFIRM: "1",
    ...extra,
  };
}

let mpirunChecked: Promise<void> | null = null;

/** Resolves once `mpirun --version` ran; without mpirun the tests fail, saying why. */
export function requireMpirun(): Promise<void> {
  mpirunChecked ??= (async () => {
    try {
      const out = await new Deno.Command("mpirun", { args: ["--version"], stdout: "piped" })
        .output();
      assert.ok(out.success, "mpirun --version failed");
    } catch (e) {
      throw new Error(
        "mpirun not found on PATH: these tests need Open MPI " +
          "(apt-get install -y openmpi-bin libopenmpi-dev; .ci/run installs it)",
        { cause: e },
      );
    }
  })();
  return mpirunChecked;
}

/** Whether process `pid` runs (a zombie does not). */
export function alive(pid: number): boolean {
  try {
    const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return false;
  }
}

// The processes `pid` started (mpirun's children: the ranks' deno processes).
function childrenOf(pid: number): number[] {
  const out: number[] = [];
  for (const e of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(e.name)) continue;
    try {
      const stat = Deno.readTextFileSync(`/proc/${e.name}/stat`);
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid === pid) out.push(Number(e.name));
    } catch { /* gone */ }
  }
  return out;
}

/** Fails unless every process of `pids` has ended (within 2 s). */
export async function assertAllEnded(pids: Iterable<number>): Promise<void> {
  const list = [...pids];
  for (let i = 0; i < 40 && list.some(alive); i++) await new Promise((r) => setTimeout(r, 50));
  assert.deepEqual(list.filter(alive), [], "no rank process outlives its job");
}

/** How an mpirun job ended. */
export interface MpirunEnd {
  /** mpirun's exit code. */
  readonly code: number;
  /** From the start to the end of its output, ms. */
  readonly ms: number;
  /** performance.now() when mpirun ended. */
  readonly endedAt: number;
}

/** Options of {@linkcode mpirun}. */
export interface MpirunOptions {
  /** Open MPI's byte transfer layers (default {@linkcode SHM}). */
  readonly btl?: string;
  /** More mpirun arguments, before the program. */
  readonly mpirunArgs?: readonly string[];
  /** More environment for the ranks (see {@linkcode childEnv}). */
  readonly env?: Record<string, string>;
  /** The job is killed, and the test fails, after this long (ms). */
  readonly timeoutMs: number;
  /** Called with each piece of the job's stdout, as it arrives. */
  readonly onStdout: (text: string) => void;
  /** Called with each piece of the job's stderr, as it arrives. */
  readonly onStderr: (text: string) => void;
  /** The ranks' pids known so far (from their output): killed at the time limit, checked to end. */
  readonly rankPids: () => Iterable<number>;
}

/**
 * Runs `mpirun -n <n> --oversubscribe --mca btl <btl> <program>`, feeding
 * its output to the callbacks; fails if it outlives `timeoutMs` (then every
 * process of the job is killed) or if any of its processes (mpirun's
 * children and the ranks' pids) outlives it.
 */
export async function mpirun(
  n: number,
  program: readonly string[],
  options: MpirunOptions,
): Promise<MpirunEnd> {
  await requireMpirun();
  const args = [
    "-n",
    String(n),
    "--oversubscribe",
    "--mca",
    "btl",
    options.btl ?? SHM,
    ...(options.mpirunArgs ?? []),
    ...program,
  ];
  const start = performance.now();
  const child = new Deno.Command("mpirun", {
    args,
    env: childEnv(options.env),
    clearEnv: true,
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const seen = new Set<number>();
  const watch = setInterval(() => {
    for (const p of childrenOf(child.pid)) seen.add(p);
  }, 50);
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    for (const p of [child.pid, ...seen, ...options.rankPids()]) {
      try {
        Deno.kill(p, "SIGKILL");
      } catch { /* ended */ }
    }
  }, options.timeoutMs);
  const read = async (stream: ReadableStream<Uint8Array>, into: (text: string) => void) => {
    for await (const chunk of stream.pipeThrough(new TextDecoderStream())) into(chunk);
  };
  let stderr = "";
  const reading = Promise.all([
    read(child.stdout, options.onStdout),
    read(child.stderr, (t) => {
      stderr += t;
      options.onStderr(t);
    }),
  ]);
  const status = await child.status;
  const endedAt = performance.now();
  await reading;
  clearTimeout(timer);
  clearInterval(watch);
  const ms = performance.now() - start;
  assert.ok(
    !timedOut,
    `mpirun ${program.join(" ")} did not end within ${options.timeoutMs} ms:\n${stderr}`,
  );
  await assertAllEnded([...seen, ...options.rankPids()]);
  return { code: status.code, ms, endedAt };
}

/** A finished mpirun job whose ranks print `conveyor: rank R of N: host H, pid PID` at start. */
export interface MpirunJob extends MpirunEnd {
  stdout: string;
  stderr: string;
  /** Rank → pid, from each rank's start line. */
  pids: Map<number, number>;
}

/** Options of {@linkcode mpirunJob}. */
export interface MpirunJobOptions {
  /** Open MPI's byte transfer layers (default {@linkcode SHM}). */
  readonly btl?: string;
  /** More environment for the ranks. */
  readonly env?: Record<string, string>;
  /** The job is killed, and the test fails, after this long (ms; default 120 000). */
  readonly timeoutMs?: number;
  /** Called with the job so far whenever its stdout or stderr grows. */
  readonly onOutput?: (job: MpirunJob) => void;
}

/**
 * {@linkcode mpirun} collecting the job's output and each rank's pid from
 * its start line (the pids are killed at the time limit and checked to end).
 */
export async function mpirunJob(
  n: number,
  program: readonly string[],
  options: MpirunJobOptions = {},
): Promise<MpirunJob> {
  const job: MpirunJob = {
    code: -1,
    ms: 0,
    endedAt: 0,
    stdout: "",
    stderr: "",
    pids: new Map(),
  };
  const grew = (into: "stdout" | "stderr") => (text: string) => {
    job[into] += text;
    for (const m of job.stderr.matchAll(/conveyor: rank (\d+) of \d+: host [^,]*, pid (\d+)/g)) {
      job.pids.set(Number(m[1]), Number(m[2]));
    }
    options.onOutput?.(job);
  };
  const end = await mpirun(n, program, {
    btl: options.btl,
    env: options.env,
    timeoutMs: options.timeoutMs ?? 120_000,
    onStdout: grew("stdout"),
    onStderr: grew("stderr"),
    rankPids: () => job.pids.values(),
  });
  return Object.assign(job, end);
}
