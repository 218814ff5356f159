/**
 * Pipeline parallelism across MPI processes on real compute: the tiny GPT
 * of `bench/pipeline_speedup.ts` (dim 128, 6 blocks, a 16 × 64 batch,
 * m = 8, CPU) trained by `mpirun -n P` processes with `rankGroup: "mpi"`
 * (`bench/_mpi_pipeline_rank.ts`), printed as a Markdown table:
 *
 * - speedup: P processes over shared memory against one process
 *   (`mpirun -n 1`, the same code) — issue 13's targets on 2 cores,
 *   ≥ 1.6x for 1f1b and ≥ 1.75x for zb-h1 at P = 2;
 * - prediction: the simulator with the per-action costs measured at P = 1
 *   (each stage's share by its FLOPs, `partition.stageCosts`), the
 *   communication delay of one activation from the link measured between
 *   ranks 0 and 1 (`measureLink`, then `messageDelay`), and the P = 1
 *   time outside actions (optimizer step) divided by P, against the step
 *   time measured over TCP only (`--mca btl tcp,self`, the stand-in for
 *   separate hosts) at each `--predict` P;
 * - a projection to `--project N` hosts with the same link and the model
 *   cut into N·V equal stages: what to expect before renting them.
 *
 * ```sh
 * deno run -A bench/mpi_pipeline.ts                        # table + verdict
 * deno run -A bench/mpi_pipeline.ts --json                 # one JSON object per row
 * deno run -A bench/mpi_pipeline.ts --schedule 1f1b --predict 2 --predict 4 --project 16
 * ```
 *
 * Step times are the median period (time between consecutive steps' ends)
 * of `--steps` steps after `--warmup`. With more processes than cores
 * (P = 4 on 2 cores) the ranks share cores, which the simulator (one core
 * per rank) does not model: such rows are marked. Needs `mpirun`.
 *
 * @module
 */

import { benchArgs } from "./_args.ts";
import { generateSchedule, SCHEDULE_NAMES } from "../src/pipeline/schedule/generate.ts";
import { simulate } from "../src/pipeline/analysis/simulate.ts";
import { summarizeTimeline } from "../src/pipeline/analysis/timeline_summary.ts";
import type { ActionCosts } from "../src/pipeline/analysis/simulate.ts";
import { type LinkModel, messageDelay } from "../src/pipeline/comm/link_model.ts";
import { REAL_COMPUTE } from "./_real_compute.ts";
import { mpirunRows } from "./_mpirun.ts";

const RANK = new URL("./_mpi_pipeline_rank.ts", import.meta.url).pathname;

/** What one `mpirun` job reports (rank 0's `ROW`). */
export interface MpiRun {
  readonly schedule: string;
  readonly ranks: number;
  readonly stepMs: number;
  readonly bubbleMeasured: number;
  readonly costs: Record<string, number[]>;
  readonly stageCosts: number[];
  readonly busyPerStepMs: number[];
  readonly link: LinkModel | null;
  readonly activationBytes: number;
}

/** One row of the table. */
export interface MpiPipelineRow {
  readonly schedule: string;
  readonly ranks: number;
  readonly transport: "shm" | "tcp";
  readonly stepMs: number;
  readonly speedup: number;
  readonly predictedMs?: number;
  readonly latencyUs?: number;
  readonly gbps?: number;
  readonly coresShared: boolean;
}

/** Runs one job: `mpirun -n ranks` over `btl`. */
export async function mpiRun(
  schedule: string,
  ranks: number,
  btl: string,
  warmup: number,
  steps: number,
): Promise<MpiRun> {
  const out = await mpirunRows(ranks, btl, RANK, [schedule, String(warmup), String(steps)]);
  if (!out.success || out.rows.length === 0) {
    throw new Error(`mpirun -n ${ranks} (${btl}) ${schedule} failed:\n${out.stdout}${out.stderr}`);
  }
  const run = out.rows[0] as unknown as MpiRun;
  // JSON writes an unbounded bandwidth (no slower at 16 MiB than at 4 bytes) as null.
  if (run.link !== null && run.link.bytesPerMs === null) {
    return { ...run, link: { ...run.link, bytesPerMs: Infinity } };
  }
  return run;
}

/**
 * The step time the simulator predicts for `schedule` at `ranks` from a
 * P = 1 run: each kind's P = 1 cost split over the stages by `stageCosts`,
 * `comm` per message, plus the P = 1 time outside actions over `ranks`.
 */
export function predictStepMs(
  one: MpiRun,
  schedule: string,
  ranks: number,
  stageCosts: readonly number[],
  comm: number,
  steps: number,
): number {
  const total = stageCosts.reduce((a, b) => a + b, 0);
  const costs: Record<string, number[]> = {};
  for (const [kind, [whole]] of Object.entries(one.costs)) {
    costs[kind] = stageCosts.map((c) => whole * c / total);
  }
  const s = generateSchedule(schedule, { ranks, microBatches: REAL_COMPUTE.microBatches });
  const sim = simulate(s, { costs: costs as ActionCosts, comm, iterations: steps });
  const period = summarizeTimeline(sim.events, ranks, { steadyFrom: 1 }).period!;
  const outside = Math.max(0, one.stepMs - one.busyPerStepMs[0]);
  return period + outside / ranks;
}

function fmt(x: number | undefined, digits = 0): string {
  return x === undefined ? "—" : x.toFixed(digits);
}

/** The rows as a Markdown table. */
export function mpiTable(rows: readonly MpiPipelineRow[]): string {
  const head = [
    "schedule",
    "P",
    "link",
    "step ms",
    "speedup",
    "predicted ms",
    "measured / predicted",
    "latency µs",
    "GB/s",
  ];
  const body = rows.map((r) => [
    r.schedule,
    `${r.ranks}${r.coresShared ? "*" : ""}`,
    r.transport === "shm" ? "shared memory" : "TCP",
    fmt(r.stepMs),
    `${r.speedup.toFixed(2)}x`,
    fmt(r.predictedMs),
    r.predictedMs === undefined ? "—" : (r.stepMs / r.predictedMs).toFixed(2),
    fmt(r.latencyUs, 1),
    r.gbps === undefined ? "—" : r.gbps.toFixed(2),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((b) => b[i].length)));
  const line = (cells: string[]) =>
    `| ${cells.map((c, i) => i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i])).join(" | ")} |`;
  const rule = `| ${
    widths.map((w, i) => i === 0 ? ":" + "-".repeat(w - 1) : "-".repeat(w - 1) + ":").join(" | ")
  } |`;
  return [line(head), rule, ...body.map(line)].join("\n");
}

/** The measured fields of a row. */
function baseRow(r: MpiRun, transport: "shm" | "tcp", cores: number) {
  return {
    schedule: r.schedule,
    ranks: r.ranks,
    transport,
    stepMs: r.stepMs,
    coresShared: r.ranks > cores,
    ...(r.link === null ? {} : {
      latencyUs: 1000 * r.link.latencyMs,
      gbps: r.link.bytesPerMs / 1e6,
    }),
  };
}

/** Issue 13's targets for 2 processes against 1 over shared memory. */
export const MPI_SPEEDUP_TARGETS: Readonly<Record<string, number>> = { "1f1b": 1.6, "zb-h1": 1.75 };

if (import.meta.main) {
  const values = benchArgs("bench/mpi_pipeline.ts", {
    schedule: { type: "string", multiple: true },
    ranks: { type: "string", default: "2" },
    predict: { type: "string", multiple: true },
    project: { type: "string", default: "16" },
    warmup: { type: "string", default: "1" },
    steps: { type: "string", default: "4" },
    json: { type: "boolean", default: false },
  });
  const int = (flag: string, text: string, min: number) => {
    const v = Number(text);
    if (!Number.isInteger(v) || v < min) {
      throw new RangeError(`--${flag} must be an integer >= ${min}, got "${text}"`);
    }
    return v;
  };
  const names = values.schedule ?? ["1f1b", "zb-h1"];
  for (const n of names) {
    if (!(SCHEDULE_NAMES as readonly string[]).includes(n)) {
      throw new RangeError(`--schedule must be one of ${SCHEDULE_NAMES.join(", ")}, got "${n}"`);
    }
  }
  const ranks = int("ranks", values.ranks, 2);
  const predict = (values.predict ?? ["2", "4"]).map((t) => int("predict", t, 2));
  const project = int("project", values.project, 2);
  const warmup = int("warmup", values.warmup, 0);
  const steps = int("steps", values.steps, 2);
  const cores = navigator.hardwareConcurrency;
  const rows: MpiPipelineRow[] = [];
  const emit = (r: MpiPipelineRow) => {
    rows.push(r);
    if (values.json) console.log(JSON.stringify(r));
    else console.error(`  ${r.schedule} P=${r.ranks} ${r.transport}: ${r.stepMs.toFixed(0)} ms`);
  };
  const projections: string[] = [];
  for (const name of names) {
    const one = await mpiRun(name, 1, "vader,self", warmup, steps);
    emit({ ...baseRow(one, "shm", cores), speedup: 1 });
    const shm = await mpiRun(name, ranks, "vader,self", warmup, steps);
    emit({ ...baseRow(shm, "shm", cores), speedup: one.stepMs / shm.stepMs });
    let lastLink: LinkModel | null = null;
    for (const p of predict) {
      const tcp = await mpiRun(name, p, "tcp,self", warmup, steps);
      lastLink = tcp.link!;
      const comm = messageDelay(tcp.link!, tcp.activationBytes);
      emit({
        ...baseRow(tcp, "tcp", cores),
        speedup: one.stepMs / tcp.stepMs,
        predictedMs: predictStepMs(one, name, p, tcp.stageCosts, comm, steps),
      });
    }
    if (lastLink !== null) {
      const v = generateSchedule(name, { ranks: project, microBatches: REAL_COMPUTE.microBatches })
        .stagesPerRank;
      const comm = messageDelay(lastLink, one.activationBytes);
      const ms = predictStepMs(one, name, project, new Array(project * v).fill(1), comm, steps);
      projections.push(
        `${name}: P = ${project} over this TCP link, the model in ${project * v} equal stages: ` +
          `${ms.toFixed(0)} ms per step (${(one.stepMs / ms).toFixed(2)}x of P = 1)`,
      );
    }
  }
  if (!values.json) {
    const c = REAL_COMPUTE;
    console.log(
      `tiny GPT dim ${c.dim}, ${c.layers} blocks, batch ${c.batch} × ${c.seqLen}, m = ${c.microBatches}, ` +
        `CPU; ${cores} cores; ${warmup} warm-up + ${steps} measured steps per row` +
        ` (* more processes than cores)\n`,
    );
    console.log(mpiTable(rows));
    console.log();
    for (const line of projections) console.log(`projection: ${line}`);
    const misses = rows.flatMap((r) => {
      const target = MPI_SPEEDUP_TARGETS[r.schedule];
      return r.transport === "shm" && r.ranks === 2 && target !== undefined &&
          !(r.speedup >= target)
        ? [`${r.schedule} ${r.speedup.toFixed(2)}x < ${target}x`]
        : [];
    });
    console.log(
      `verdict: ${misses.length === 0 ? "PASS" : "FAIL"} (2 processes over shared memory: ` +
        `>= 1.6x 1f1b, >= 1.75x zb-h1)${misses.length === 0 ? "" : `: ${misses.join("; ")}`}`,
    );
  }
}
