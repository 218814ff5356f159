/**
 * Data × pipeline parallelism on real compute: the tiny GPT (dim 128 by
 * default) on the CPU backend, ranks in workers, at (D, P) = (1, 1),
 * (2, 1), (1, 2) and (2, 2) (`dataParallel` D replicas of a P-rank
 * pipeline, the same whole batch per step). Every grid point's model is
 * built and trained `--warmup` steps (3: while V8 compiles the kernels,
 * on helper threads that (2, 1) shares with its replicas, a step is slower)
 * first; then the repeats run interleaved (each round times every
 * grid point once, so that a load change on the machine touches all of
 * them alike). Per grid point: the median step over the rounds' medians,
 * the spread (max − min of the rounds' medians), the speed-up over
 * (1, 1), and the simulator's prediction of the step: `simulate` with the
 * per-action costs measured in the point's own timed steps (each kind's
 * median per stage over every timed step of every round), each stage's
 * gradient bytes and the link for the all-reduce, beside the measured
 * median; and the same with each stage's optimizer step added (its time
 * measured on this thread; the simulator itself has no optimizer cost);
 * and the prediction: that plus the step's time outside the actions (the
 * main thread's hand-out of the batch and collection of the results, each
 * rank's loop between actions), calibrated once per rank group as the
 * (1, 1) row's measured minus simulated-with-optimizer step and added to
 * every row of the group (`predictedMs`, `predictedOverMeasured`,
 * `stepOverheadMs` in `--json`).
 *
 * The link is measured before the grid is built: two workers time
 * ping-pongs over the runtime's worker transport (`WorkerBackend`) with
 * copying sends, as the gradient all-reduce sends (see `_worker_link.ts`).
 * The simulator charges a ring all-reduce on it; the runtime sends each
 * bucket to every other replica, the same as the ring at D = 2. `--link-latency-ms` and `--link-bytes-per-ms` (both) replace it
 * with a given link, e.g. a network's between hosts.
 *
 * Each timed step's CPU is accounted for from Linux's /proc (per grid
 * point, medians over the steps; skipped where /proc cannot be read): the
 * busiest rank thread's CPU (the step if every rank had a core to itself),
 * all ranks' CPU, the longest any rank thread waited runnable for a core,
 * this process's other threads (main thread, V8's helpers) and the cores
 * other processes kept busy. On a machine of 2 cores, (2, 1) has no spare
 * core: one other busy process halves its replicas' cores while (1, 1)
 * runs beside it, so compare the busiest-rank speed-up with the measured
 * one before reading a slow (2, 1) as the runtime's.
 *
 * The same grid runs as MPI processes too (`mpirun -n D·P` over shared
 * memory, `rankGroup: "mpi"`, `bench/_mpi_pipeline_rank.ts`): one job per
 * grid point and round, taking its turn in the round after the workers'
 * points; each job warms up `--mpi-warmup` steps (3: a fresh process's
 * first steps run slower while V8 compiles, and two processes compiling at
 * once have no spare core for it, where one has), then times `--steps`
 * steps as above (its launch is not timed) and measures its own link between ranks 0 and
 * 1 (`measureLink`) for the simulator. Its speed-up is over `mpirun -n 1`.
 * Skipped, saying so, where `mpirun` is not installed, or with `--no-mpi`.
 *
 * Then a projection to 16 hosts: for each P of the grid, the (1, P)
 * point's measured per-stage costs, gradient bytes and optimizer steps,
 * simulated at D = 1, 2, 4, 8, 16 replicas (each replica a batch of its
 * own) on the link, and the implied throughput speed-up `D · step(1) /
 * step(D)`. A projection, not a measurement: the worker link stands in for
 * the network between hosts.
 *
 * ```sh
 * deno run -A bench/data_parallel.ts [--steps 4] [--repeats 5] [--warmup 3] [--mpi-warmup 3] [--dim 128] [--no-mpi] [--shard-optimizer] [--json]
 * ```
 *
 * `--shard-optimizer`: every point with D > 1 runs ZeRO-1 (`shardOptimizer`:
 * each replica steps 1/D of the AdamW state; gradients reduce-scattered,
 * parameters all-gathered); compare its (2, 1) row with a run without it.
 *
 * `--json` prints one line per grid point and rank group (`rankGroup`:
 * `"workers"` or `"mpi"`; `cpu`: the accounting above, or null; MPI
 * points have none), then one `{"projection": …}`
 * line (a bandwidth of `null` stands for unbounded: a transfer that copies
 * nothing).
 *
 * Measure on a quiet machine: the numbers of a loaded one say little.
 *
 * @module
 */

import { benchArgs } from "./_args.ts";
import { noiseVerdict } from "./_noise.ts";
import { CharTokenizer } from "../src/nn/char_tokenizer.ts";
import { TINY_CORPUS } from "../src/nn/data/tiny_corpus.ts";
import { createTinyGPT } from "../src/nn/gpt.ts";
import { CpuBackend } from "../src/tensor/cpu/backend.ts";
import { simulate } from "../src/pipeline/analysis/simulate.ts";
import { checkScheduleName } from "../src/pipeline/schedule/generate.ts";
import { PipelineParallelModel } from "../src/pipeline/model/pipeline_parallel_model.ts";
import { createOptimizer } from "../src/nn/optimizer_spec.ts";
import type { Sequential } from "../src/nn/sequential.ts";
import type { AllReduceLink } from "../src/pipeline/analysis/all_reduce.ts";
import { measuredCosts, REAL_COMPUTE, realBatches } from "./_real_compute.ts";
import { measureWorkerLink } from "./_worker_link.ts";
import { projectReplicas, stepWithOptimizer } from "./_data_parallel_projection.ts";
import { cpuBetween, cpuSnapshot, type CpuSpan } from "./_cpu_accounting.ts";
import { mpirunRows } from "./_mpirun.ts";
import type { ActionCosts } from "../src/pipeline/analysis/simulate.ts";
import type { TimedEvent } from "../src/pipeline/schedule/schedule.ts";

const MPI_RANK = new URL("./_mpi_pipeline_rank.ts", import.meta.url).pathname;

const values = benchArgs("bench/data_parallel.ts", {
  steps: { type: "string", default: "4" },
  repeats: { type: "string", default: "5" },
  warmup: { type: "string", default: "3" },
  "mpi-warmup": { type: "string", default: "3" },
  dim: { type: "string", default: "128" },
  layers: { type: "string", default: "4" },
  batch: { type: "string", default: "16" },
  microbatches: { type: "string", default: "4" },
  schedule: { type: "string", default: "1f1b" },
  "link-latency-ms": { type: "string" },
  "link-bytes-per-ms": { type: "string" },
  "no-mpi": { type: "boolean", default: false },
  "shard-optimizer": { type: "boolean", default: false },
  json: { type: "boolean", default: false },
});
function positiveInt(name: keyof typeof values): number {
  const v = Number(values[name]);
  if (!Number.isInteger(v) || v < 1) {
    throw new RangeError(`--${name} must be a positive integer, got ${values[name]}`);
  }
  return v;
}
function positive(name: keyof typeof values, zero = true): number {
  const v = Number(values[name]);
  if (!Number.isFinite(v) || v < 0 || (!zero && v === 0)) {
    throw new RangeError(
      `--${name} must be a finite number ${zero ? ">= 0" : "> 0"}, got ${values[name]}`,
    );
  }
  return v;
}
const steps = positiveInt("steps"), repeats = positiveInt("repeats");
const warmup = positiveInt("warmup"), mpiWarmup = positiveInt("mpi-warmup");
const CFG = {
  ...REAL_COMPUTE,
  dim: positiveInt("dim"),
  layers: positiveInt("layers"),
  batch: positiveInt("batch"),
  microBatches: positiveInt("microbatches"),
  seqLen: 32,
};
const given =
  [values["link-latency-ms"], values["link-bytes-per-ms"]].filter((v) => v !== undefined).length;
if (given === 1) {
  throw new RangeError("--link-latency-ms and --link-bytes-per-ms go together: give both or none");
}
const givenLink: AllReduceLink | null = given === 2
  ? { latencyMs: positive("link-latency-ms"), bytesPerMs: positive("link-bytes-per-ms", false) }
  : null;
const PROJECTED = [1, 2, 4, 8, 16];
const schedule = checkScheduleName(String(values.schedule));
const GRID = [[1, 1], [2, 1], [1, 2], [2, 2]] as const;
const tok = CharTokenizer.fromText(TINY_CORPUS);

const median = (xs: readonly number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 === 1 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

interface Point {
  readonly d: number;
  readonly p: number;
  readonly model: PipelineParallelModel;
  /** Bytes of each stage's gradients (f32). */
  readonly gradientBytes: number[];
  /** Each stage's optimizer step in ms (median, on this thread). */
  readonly optimizerMs: number[];
  readonly rounds: number[];
  /** Each timed step's CPU accounting (empty where /proc cannot be read). */
  readonly cpu: CpuSpan[];
  /** Every timed step's events (for the per-action costs). */
  readonly events: TimedEvent[];
}

async function build(d: number, p: number): Promise<Point> {
  const net = createTinyGPT({
    vocabSize: tok.vocabSize,
    seqLen: CFG.seqLen,
    dim: CFG.dim,
    heads: CFG.heads,
    layers: CFG.layers,
    seed: CFG.seed,
    split: CFG.split,
  }, new CpuBackend());
  try {
    const model = await PipelineParallelModel.create({
      model: net,
      schedule,
      ranks: p,
      microBatches: CFG.microBatches,
      dataParallel: d,
      shardOptimizer: values["shard-optimizer"] && d > 1,
      optimizer: { kind: "adamw", lr: 1e-3, weightDecay: 0 },
      loss: "cross-entropy",
      backend: "cpu",
      rankGroup: "workers",
    });
    const b = model.partition.boundaries;
    const gradientBytes = b.slice(0, -1).map((from, s) =>
      net.layers.slice(from, b[s + 1]).flatMap((l) => l.parameters())
        .reduce((n, q) => n + 4 * q.value.size, 0)
    );
    return {
      d,
      p,
      model,
      gradientBytes,
      optimizerMs: optimizerSteps(net, b),
      rounds: [],
      cpu: [],
      events: [],
    };
  } finally {
    net.dispose();
  }
}

// Each stage's optimizer step, timed on this thread (the CPU backend as in
// the workers): the median of 5 after one untimed, on the stage's own
// parameters. The model already copied the weights, so `net` may change.
function optimizerSteps(net: Sequential, boundaries: readonly number[]): number[] {
  return boundaries.slice(0, -1).map((from, s) => {
    const params = net.layers.slice(from, boundaries[s + 1]).flatMap((l) => l.parameters());
    const opt = createOptimizer({ kind: "adamw", lr: 1e-3, weightDecay: 0 }, params);
    try {
      const times: number[] = [];
      for (let i = 0; i <= 5; i++) {
        const t = performance.now();
        opt.step();
        if (i > 0) times.push(performance.now() - t);
      }
      return median(times);
    } finally {
      opt.dispose();
    }
  });
}

// Per step, medians over the timed steps: the busiest rank thread's CPU
// (the step if each rank had a core to itself and nothing else ran), the
// most any rank thread waited for a core, this process's other threads'
// CPU (main thread, V8's helpers) and the cores other processes kept busy.
function cpuSummary(spans: readonly CpuSpan[]) {
  if (spans.length === 0) return null;
  const m = (f: (s: CpuSpan) => number) => median(spans.map(f));
  return {
    busiestRankCpuMs: m((s) => Math.max(...s.rankCpuMs)),
    rankCpuMs: m((s) => s.rankCpuMs.reduce((a, b) => a + b, 0)),
    mostRankWaitMs: m((s) => Math.max(...s.rankWaitMs)),
    otherThreadsCpuMs: m((s) => s.otherThreadsCpuMs),
    otherProcessesCores: m((s) => s.otherProcessesCores),
  };
}

// A grid point run as MPI processes: each round's median step and per-action
// costs (medians over its timed steps), and what its last job measured
// (gradient bytes, its link).
interface MpiPoint {
  readonly d: number;
  readonly p: number;
  readonly rounds: number[];
  readonly costs: ActionCosts[];
  last: { gradientBytes: number[]; link: AllReduceLink | null } | null;
}

// Each kind's per-stage median over several rounds' costs (a kind missing
// from one round is left out).
function medianCosts(rounds: readonly ActionCosts[]): ActionCosts {
  const out: Partial<Record<keyof ActionCosts, number[]>> = {};
  for (const kind of ["F", "B", "I", "W"] as const) {
    const lists = rounds.map((c) => c[kind]);
    if (lists.length === 0 || lists.some((l) => !Array.isArray(l))) continue;
    out[kind] = (lists[0] as number[]).map((_, s) => median(lists.map((l) => (l as number[])[s])));
  }
  return out as ActionCosts;
}

// Why the MPI rows are skipped, or null when mpirun is there.
async function mpiSkipped(): Promise<string | null> {
  if (values["no-mpi"]) return "--no-mpi";
  try {
    const out = await new Deno.Command("mpirun", { args: ["--version"], stdout: "null" }).output();
    return out.success ? null : "mpirun --version failed";
  } catch {
    return "mpirun not found on PATH (Open MPI: apt-get install -y openmpi-bin libopenmpi-dev)";
  }
}

// One job of `pt`: `mpirun -n D·P` over shared memory, `mpiWarmup` warm-up
// steps, then `steps` timed steps.
async function mpiRound(pt: MpiPoint): Promise<void> {
  const config = Object.entries(CFG).map(([k, v]) => `${k}=${v}`);
  const args = [schedule, String(mpiWarmup), String(steps), ...config, `dataParallel=${pt.d}`];
  if (values["shard-optimizer"] && pt.d > 1) args.push("shardOptimizer=1");
  const out = await mpirunRows(pt.d * pt.p, "vader,self", MPI_RANK, args);
  if (!out.success || out.rows.length === 0) {
    throw new Error(
      `mpirun -n ${pt.d * pt.p} (D ${pt.d}, P ${pt.p}) failed:\n${out.stdout}${out.stderr}`,
    );
  }
  const row = out.rows[0] as {
    stepTimesMs: number[];
    costs: ActionCosts;
    gradientBytes: number[];
    link: { latencyMs: number; bytesPerMs: number | null } | null;
  };
  pt.rounds.push(median(row.stepTimesMs));
  pt.costs.push(row.costs);
  pt.last = {
    gradientBytes: row.gradientBytes,
    // JSON writes an unbounded bandwidth as null.
    link: row.link === null
      ? null
      : { latencyMs: row.link.latencyMs, bytesPerMs: row.link.bytesPerMs ?? Infinity },
  };
}

const mpiSkip = await mpiSkipped();
const mpiPoints: MpiPoint[] = mpiSkip === null
  ? GRID.map(([d, p]) => ({ d, p, rounds: [], costs: [], last: null }))
  : [];
const points: Point[] = [];
const linkStart = performance.now();
const link: AllReduceLink = givenLink ?? await measureWorkerLink();
const linkMs = performance.now() - linkStart;
try {
  for (const [d, p] of GRID) points.push(await build(d, p));
  // Warm-up: a fresh worker's first steps run slower while V8 compiles its
  // kernels on helper threads, which (2, 1) must share with its replicas
  // where (1, 1) has a spare core.
  for (const pt of points) await pt.model.train(realBatches(CFG, warmup, 99));
  const batches = realBatches(CFG, steps, 7);
  for (let round = 0; round < repeats; round++) {
    for (const pt of points) {
      const times: number[] = [];
      for (const b of batches) {
        const before = cpuSnapshot();
        const t = performance.now();
        await pt.model.step(b);
        times.push(performance.now() - t);
        const after = cpuSnapshot();
        pt.events.push(...pt.model.lastEvents);
        if (before !== null && after !== null) pt.cpu.push(cpuBetween(before, after, pt.d * pt.p));
      }
      pt.rounds.push(median(times));
    }
    for (const pt of mpiPoints) await mpiRound(pt);
  }
  // One row: the measured rounds beside the simulator's step from `costs`
  // (medians over the point's timed steps), on `pointLink` for the all-reduce.
  const rowOf = (
    rankGroup: "workers" | "mpi",
    pt: Point,
    rounds: readonly number[],
    base: number,
    costs: ActionCosts,
    gradientBytes: readonly number[],
    pointLink: AllReduceLink,
    linkMeasured: boolean,
    cpu: ReturnType<typeof cpuSummary>,
  ) => {
    const sim = simulate(pt.model.schedule, {
      costs,
      ...(pt.d === 1 ? {} : { dataParallel: pt.d, link: pointLink, gradientBytes }),
    });
    const stepMs = median(rounds);
    const withOptimizer = stepWithOptimizer(pt.model.schedule, sim, pt.optimizerMs);
    return {
      rankGroup,
      dataParallel: pt.d,
      ranks: pt.p,
      stepMs,
      spreadMs: Math.max(...rounds) - Math.min(...rounds),
      speedup: base / stepMs,
      simulatedMs: sim.makespan,
      simulatedOverMeasured: sim.makespan / stepMs,
      optimizerMs: pt.optimizerMs,
      simulatedWithOptimizerMs: withOptimizer,
      withOptimizerOverMeasured: withOptimizer / stepMs,
      linkLatencyMs: pointLink.latencyMs,
      linkBytesPerMs: pointLink.bytesPerMs,
      linkMeasured,
      cpu,
      // For the projection: one pipeline's costs at the whole batch.
      costs,
    };
  };
  const base = median(points[0].rounds);
  const rows = points.map((pt) =>
    rowOf(
      "workers",
      pt,
      pt.rounds,
      base,
      measuredCosts(pt.events, pt.model.schedule.stageToRank.length),
      pt.gradientBytes,
      link,
      givenLink === null,
      cpuSummary(pt.cpu),
    )
  );
  const mpiBase = mpiPoints.length > 0 ? median(mpiPoints[0].rounds) : 0;
  for (const m of mpiPoints) {
    // The same model, schedule and optimizer as the workers' point.
    const pt = points.find((q) => q.d === m.d && q.p === m.p)!;
    const own = m.last!.link;
    rows.push(
      rowOf(
        "mpi",
        pt,
        m.rounds,
        mpiBase,
        medianCosts(m.costs),
        m.last!.gradientBytes,
        givenLink ?? own ?? link,
        givenLink === null && own !== null,
        null,
      ),
    );
  }
  // The step outside the simulated actions (the main thread's hand-out of
  // the batch and collection of the results, each rank's loop between
  // actions): calibrated once per rank group on its (1, 1) row, as measured
  // minus simulated with the optimizer, and added to every row of the
  // group, so that (1, 1) is the one row it cannot predict.
  const overheadOf = (group: "workers" | "mpi") => {
    const one = rows.find((r) => r.rankGroup === group && r.dataParallel === 1 && r.ranks === 1);
    return one === undefined ? 0 : Math.max(0, one.stepMs - one.simulatedWithOptimizerMs);
  };
  const calibrated = rows.map((r) => {
    const stepOverheadMs = overheadOf(r.rankGroup);
    const predictedMs = r.simulatedWithOptimizerMs + stepOverheadMs;
    return { ...r, stepOverheadMs, predictedMs, predictedOverMeasured: predictedMs / r.stepMs };
  });
  // The projection: P fixed, D = 1 … 16 replicas, from each (1, P) point.
  const projection = rows.filter((r) => r.rankGroup === "workers" && r.dataParallel === 1).map(
    (r) => {
      const pt = points.find((q) => q.d === 1 && q.p === r.ranks)!;
      return {
        ranks: r.ranks,
        rows: projectReplicas(
          pt.model.schedule,
          r.costs,
          pt.gradientBytes,
          link,
          pt.optimizerMs,
          PROJECTED,
          overheadOf("workers"),
        ),
      };
    },
  );
  if (values.json) {
    for (const { costs: _, ...r } of calibrated) console.log(JSON.stringify(r));
    console.log(JSON.stringify({
      projection: {
        what: "simulated, not measured: each replica a batch of its own on the link below",
        linkLatencyMs: link.latencyMs,
        linkBytesPerMs: link.bytesPerMs,
        linkMeasured: givenLink === null,
        pipelines: projection,
      },
    }));
  } else {
    const bw = Number.isFinite(link.bytesPerMs)
      ? `${(link.bytesPerMs / 1e6).toFixed(2)} GB/s`
      : "unbounded bandwidth (a transfer copies nothing)";
    console.log(
      `tiny GPT dim ${CFG.dim}, ${CFG.layers} blocks, ${schedule}, a ${CFG.batch} × ${CFG.seqLen} ` +
        `batch in ${CFG.microBatches} micro-batches per replica, CPU, workers; ${repeats} ` +
        `interleaved rounds of ${steps} steps\nlink ${
          givenLink === null
            ? `measured between two workers, copying sends (${linkMs.toFixed(0)} ms)`
            : "given by --link-*"
        }: ${link.latencyMs.toFixed(3)} ms latency, ${bw}\n`,
    );
    console.log(
      "| ranks as | (D, P) | step ms (median) | spread ms | speed-up | simulated ms | sim / measured " +
        "| + optimizer ms | (+ opt) / measured | predicted ms | predicted / measured |",
    );
    console.log(
      "| :------- | :----- | ---------------: | --------: | -------: | -----------: | -------------: " +
        "| -------------: | -----------------: | -----------: | -------------------: |",
    );
    for (const r of calibrated) {
      console.log(
        `| ${r.rankGroup === "mpi" ? "MPI     " : "workers "} | (${r.dataParallel}, ${r.ranks}) | ${
          r.stepMs.toFixed(1).padStart(16)
        } | ${r.spreadMs.toFixed(1).padStart(9)} | ${r.speedup.toFixed(2).padStart(8)} | ${
          r.simulatedMs.toFixed(1).padStart(12)
        } | ${r.simulatedOverMeasured.toFixed(2).padStart(14)} | ${
          r.simulatedWithOptimizerMs.toFixed(1).padStart(14)
        } | ${r.withOptimizerOverMeasured.toFixed(2).padStart(18)} | ${
          r.predictedMs.toFixed(1).padStart(12)
        } | ${r.predictedOverMeasured.toFixed(2).padStart(20)} |`,
      );
    }
    console.log(
      mpiSkip === null
        ? `\nMPI: \`mpirun -n D·P\` over shared memory, one job per point and round (its launch ` +
          `and ${mpiWarmup} warm-up steps not timed), speed-up over \`mpirun -n 1\`; its simulated step uses the ` +
          `link the job measured between ranks 0 and 1.`
        : `\nMPI rows skipped: ${mpiSkip}.`,
    );
    console.log(
      "\n" + noiseVerdict(calibrated.map((r) => ({
        label: `${r.rankGroup === "mpi" ? "MPI" : "workers"} (${r.dataParallel}, ${r.ranks})`,
        medianMs: r.stepMs,
        spreadMs: r.spreadMs,
      }))),
    );
    const workerRows = rows.filter((r) => r.rankGroup === "workers");
    if (workerRows.every((r) => r.cpu !== null)) {
      console.log(
        "\n## Where the CPU went (Linux /proc; per step, medians)\n\n" +
          "busiest rank: CPU of the busiest rank thread (the step on a core per rank with nothing " +
          "else running); all ranks: their CPU summed; waited: the most a rank thread sat " +
          "runnable without a core; other threads: this process's main thread and V8 helpers; " +
          "other processes: cores they kept busy. D replicas on D cores have no spare core: " +
          "another process's load lands on their step, while a one-rank step runs beside it.\n",
      );
      console.log(
        "| (D, P) | busiest rank ms | all ranks ms | waited ms | other threads ms | other processes (cores) | speed-up by busiest rank |",
      );
      console.log(
        "| :----- | --------------: | -----------: | --------: | ---------------: | ----------------------: | -----------------------: |",
      );
      const baseCpu = workerRows[0].cpu!.busiestRankCpuMs;
      for (const r of workerRows) {
        const c = r.cpu!;
        console.log(
          `| (${r.dataParallel}, ${r.ranks}) | ${c.busiestRankCpuMs.toFixed(1).padStart(15)} | ${
            c.rankCpuMs.toFixed(1).padStart(12)
          } | ${c.mostRankWaitMs.toFixed(1).padStart(9)} | ${
            c.otherThreadsCpuMs.toFixed(1).padStart(16)
          } | ${c.otherProcessesCores.toFixed(2).padStart(23)} | ${
            (baseCpu / c.busiestRankCpuMs).toFixed(2).padStart(24)
          } |`,
        );
      }
    }
    console.log(
      '\n"+ optimizer": each stage\'s optimizer step (timed on the main thread) added after ' +
        'its all-reduce; the simulator has no optimizer cost of its own. "predicted": that ' +
        "plus the step's time outside the actions (the main thread's hand-out and collection, " +
        "each rank's loop between actions), calibrated once per rank group on its (1, 1) row " +
        `(measured minus "+ optimizer": ${
          calibrated.filter((r) => r.dataParallel === 1 && r.ranks === 1).map((r) =>
            `${r.rankGroup} ${r.stepOverheadMs.toFixed(1)} ms`
          ).join(", ")
        }), so (1, 1) meets it by construction and the other rows test it.`,
    );
    console.log(
      "\n## Projection to 16 hosts (simulated, not measured)\n\n" +
        "Each replica on a host of its own with a batch of its own (the global batch grows with " +
        "D), the (1, P) point's measured per-stage costs, gradient bytes and optimizer steps " +
        "and the workers' calibrated time outside the actions, " +
        "every stage's gradients averaged by a ring all-reduce on the link above. The link " +
        "between two workers of one process stands in for the network: a real network is " +
        "slower (give its latency and bandwidth with --link-latency-ms / --link-bytes-per-ms); " +
        "the averaging's own arithmetic is left out.\n",
    );
    console.log("| P | D | simulated step ms | all-reduce ms | throughput speed-up |");
    console.log("| -: | -: | ----------------: | ------------: | ------------------: |");
    for (const { ranks, rows: proj } of projection) {
      for (const q of proj) {
        console.log(
          `| ${ranks} | ${q.dataParallel} | ${q.stepMs.toFixed(1).padStart(17)} | ${
            q.allReduceMs.toFixed(2).padStart(13)
          } | ${q.speedup.toFixed(2).padStart(19)} |`,
        );
      }
    }
  }
} finally {
  for (const pt of points) await pt.model.dispose();
}
