/**
 * The CPU backend's storage reuse (`new CpuBackend({ poolBytes })`) on and
 * off, where it matters: one copy of the tiny GPT (dim 128, 4 blocks, AdamW)
 * training in a worker on the whole 16 × 32 batch, and two copies at once
 * each on half of it (as the two replicas of a (D, P) = (2, 1) step, without
 * their gradient average). With every array allocated afresh, V8's garbage
 * collector works on helper threads that the two copies must share with
 * it on a machine of two cores.
 *
 * Interleaved: each round runs every setting once (pool on and off × one
 * and two copies), so a change of the machine's speed falls on all of them.
 * Per setting: the median over the rounds of the step (with two copies, the
 * slower copy's median step of the round), the spread (max − min of the
 * rounds'), the CPU per step of V8's helper threads (Linux /proc; shared by
 * every isolate of the process), the speed-up of two copies over one
 * (the same work per step), and the pool's reuse count.
 *
 * ```sh
 * deno run -A bench/cpu_pool.ts [--rounds 3] [--steps 4] [--warmup 2] [--json]
 * ```
 *
 * About a minute here (2 cores). Measure on a quiet machine: the step
 * times of one setting swing by 20% on a noisy one, the helpers' CPU less.
 *
 * @module
 */

import { benchArgs } from "./_args.ts";
import { type CpuSnapshot, cpuSnapshot } from "./_cpu_accounting.ts";
import type { PoolWorkerJob } from "./_cpu_pool_worker.ts";

const values = benchArgs("bench/cpu_pool.ts", {
  rounds: { type: "string", default: "3" },
  steps: { type: "string", default: "4" },
  warmup: { type: "string", default: "2" },
  json: { type: "boolean", default: false },
});
function positiveInt(name: "rounds" | "steps" | "warmup"): number {
  const v = Number(values[name]);
  if (!Number.isInteger(v) || v < 1) {
    throw new RangeError(`--${name} must be a positive integer, got ${values[name]}`);
  }
  return v;
}
const rounds = positiveInt("rounds"), steps = positiveInt("steps"), warmup = positiveInt("warmup");
const BATCH = 16, MICRO_BATCHES = 4, DEFAULT_POOL = 256 * 2 ** 20;
const SETTINGS = [
  { pool: true, copies: 1 },
  { pool: false, copies: 1 },
  { pool: true, copies: 2 },
  { pool: false, copies: 2 },
] as const;

const median = (xs: readonly number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 === 1 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

// CPU ms of V8's helper threads between two snapshots.
function helperMs(a: CpuSnapshot | null, b: CpuSnapshot | null): number {
  if (a === null || b === null) return NaN;
  let ms = 0;
  for (const [tid, t] of b.threads) {
    if (t.name.startsWith("V8 ")) ms += t.cpuMs - (a.threads.get(tid)?.cpuMs ?? 0);
  }
  return ms;
}

interface Run {
  /** The slowest copy's median step, ms. */
  readonly stepMs: number;
  /** V8 helpers' CPU per step, ms. */
  readonly helpersMs: number;
  /** Allocations served by reuse, all copies, over the timed steps and warm-up. */
  readonly reused: number;
}

// `copies` workers, each training on BATCH / copies rows; timed together.
async function run(pool: boolean, copies: number): Promise<Run> {
  const job: PoolWorkerJob = {
    poolBytes: pool ? DEFAULT_POOL : 0,
    dim: 128,
    layers: 4,
    rows: BATCH / copies,
    seqLen: 32,
    microBatches: MICRO_BATCHES,
    warmup,
    steps,
    seed: 7,
  };
  const url = new URL("./_cpu_pool_worker.ts", import.meta.url);
  const workers = Array.from({ length: copies }, () => new Worker(url, { type: "module" }));
  try {
    const next = (w: Worker) =>
      new Promise<unknown>((resolve, reject) => {
        w.onmessage = (e) => resolve(e.data);
        w.onerror = (e) => {
          e.preventDefault();
          reject(new Error(`pool bench worker failed: ${e.message}`));
        };
      });
    let waiting = workers.map(next);
    for (const w of workers) w.postMessage(job);
    await Promise.all(waiting);
    waiting = workers.map(next);
    const before = cpuSnapshot();
    for (const w of workers) w.postMessage("go");
    const results = await Promise.all(waiting) as {
      times: number[];
      pool: { reused: number };
    }[];
    const after = cpuSnapshot();
    return {
      stepMs: Math.max(...results.map((r) => median(r.times))),
      helpersMs: helperMs(before, after) / steps,
      reused: results.reduce((n, r) => n + r.pool.reused, 0),
    };
  } finally {
    for (const w of workers) w.terminate();
  }
}

const runs = SETTINGS.map(() => [] as Run[]);
for (let r = 0; r < rounds; r++) {
  for (const [i, s] of SETTINGS.entries()) runs[i].push(await run(s.pool, s.copies));
}
const rows = SETTINGS.map((s, i) => {
  const steps = runs[i].map((x) => x.stepMs);
  return {
    pool: s.pool,
    copies: s.copies,
    stepMs: median(steps),
    spreadMs: Math.max(...steps) - Math.min(...steps),
    helpersMsPerStep: median(runs[i].map((x) => x.helpersMs)),
    reused: median(runs[i].map((x) => x.reused)),
  };
});
const one = (pool: boolean) => rows.find((r) => r.pool === pool && r.copies === 1)!.stepMs;
const out = rows.map((r) => ({ ...r, speedup: r.copies === 2 ? one(r.pool) / r.stepMs : 1 }));
if (values.json) {
  for (const r of out) console.log(JSON.stringify(r));
} else {
  console.log(
    `tiny GPT dim 128, 4 blocks, a ${BATCH} × 32 batch in ${MICRO_BATCHES} micro-batches per copy ` +
      `(two copies: half the batch each), AdamW, CPU, workers; ${rounds} interleaved rounds of ` +
      `${warmup} warm-up and ${steps} timed steps\n`,
  );
  console.log(
    "| storage reuse | copies | step ms (median) | spread ms | V8 helpers ms per step | speed-up of 2 copies | reused |",
  );
  console.log("| :-- | --: | --: | --: | --: | --: | --: |");
  for (const r of out) {
    console.log(
      `| ${r.pool ? "on (256 MiB)" : "off (poolBytes 0)"} | ${r.copies} | ${
        r.stepMs.toFixed(1)
      } | ${r.spreadMs.toFixed(1)} | ${r.helpersMsPerStep.toFixed(1)} | ${
        r.copies === 2 ? `${r.speedup.toFixed(2)}x` : ""
      } | ${r.reused} |`,
    );
  }
}
