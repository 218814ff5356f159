/**
 * How good is the advisor? For the tiny GPT of the real-compute benches
 * (dim 128, 6 blocks as 12 halves, a 16 × 64 batch, m = 8) and an MLP
 * (64 → 6 × [Linear 512, GELU] → 10 classes, a 256-row batch, m = 8) on
 * the CPU backend at P = 2 workers, `adviseSchedule` predicts every
 * schedule, then each is trained for real with its predicted partition and
 * the table sets predicted beside measured: ms per step (steady state),
 * bubble, and peak activation bytes per rank. The prediction is the
 * advisor's default: calibrated against short real 1F1B and ZB-H1 runs
 * (each action kind's measured / profiled ratio, the runtime's costs).
 * Three more show what that buys: the profile-only prediction the advisor
 * keeps beside it (`uncalibratedMs`: the contention simulation of the
 * alone and together profiles), one profiled with one copy alone
 * (`concurrent: false`, uncalibrated), one with the together costs
 * throughout.
 *
 * The measurement is interleaved: `--rounds` rounds each train every
 * schedule for `--steps` steps, in an order rotated from round to round, so
 * that a slow spell of the machine falls on several schedules rather than
 * all the steps of one. Each round builds the schedule's pipeline afresh,
 * warms it up `--warmup` steps, measures it and disposes of it: only the
 * pipeline measured is alive, as in a user's run and in the advisor's own
 * calibration runs. (`--keep-pipelines` builds every pipeline once and keeps
 * them all for the rounds, as this bench did until 2026-12-02: the idle
 * pipelines' workers collect their heaps while another is measured, and 8
 * idle GPT pipelines slowed the one measured by 3–7%.) Measured ms is the
 * median of all the steady-state periods of a schedule (each round's first
 * step is left out); its spread is the range of the rounds' medians.
 *
 * ```sh
 * deno run -A bench/advise_accuracy.ts                  # both models, Markdown and a verdict
 * deno run -A bench/advise_accuracy.ts --model mlp --json
 * deno run -A bench/advise_accuracy.ts --schedule 1f1b --schedule zb-h1 --steps 4 --rounds 2
 * deno run -A bench/advise_accuracy.ts --keep-pipelines  # every pipeline alive for all rounds
 * ```
 *
 * The verdict checks the targets (meant for a quiet machine): every
 * prediction within 10% of its measurement, the first pick within 5% of the
 * fastest measured (or statistically indistinguishable from it: the
 * ranges of their rounds' medians overlap; the line says so), every rank's
 * predicted activation bytes within 10% of what the rank reported (its
 * largest over the steps), and the advice without verification within
 * 60 s on the tiny GPT.
 *
 * A shared machine changes speed over minutes, and the rounds come minutes
 * after the advice: under each model's calibration line a drift line sets
 * the schedules the advisor trained for its calibration (1F1B, ZB-H1)
 * measured during the advice beside the same schedules in the rounds, their
 * geometric mean ratio, and every error with that factor taken out
 * (`machineDrift`, `driftLine`; `drift` in `--json`). The verdict itself
 * judges the raw errors; the line before it says whether the run was
 * steady (every schedule's rounds' medians within 15% of its median) or
 * noisy, naming the widest (`noise` in `--json`, `bench/_noise.ts`).
 *
 * @module
 */

import { benchArgs } from "./_args.ts";
import { noiseVerdict } from "./_noise.ts";
import { GELU } from "../src/nn/gelu.ts";
import { Linear } from "../src/nn/linear.ts";
import { Sequential } from "../src/nn/sequential.ts";
import { CharTokenizer } from "../src/nn/char_tokenizer.ts";
import { TINY_CORPUS } from "../src/nn/data/tiny_corpus.ts";
import { createTinyGPT } from "../src/nn/gpt.ts";
import { CpuBackend } from "../src/tensor/cpu/backend.ts";
import { Rng } from "../src/tensor/random.ts";
import { SCHEDULE_NAMES } from "../src/pipeline/schedule/generate.ts";
import { type Advice, adviseSchedule } from "../src/advise/advise.ts";
import type { TrainingBatch } from "../src/pipeline/model/batch.ts";
import { PipelineParallelModel } from "../src/pipeline/model/pipeline_parallel_model.ts";
import { FixedPartition } from "../src/pipeline/partition/partition.ts";
import { summarizeTimeline } from "../src/pipeline/analysis/timeline_summary.ts";
import { type AdviceCandidate, formatBytes } from "../src/advise/advice_table.ts";
import { predictStep, stageCosts } from "../src/advise/step_prediction.ts";
import type { PassProfile } from "../src/pipeline/partition/layer_passes.ts";
import { REAL_COMPUTE, realBatches } from "./_real_compute.ts";

/** One row: a schedule of a model, predicted and measured. */
export interface AccuracyRow {
  readonly model: string;
  readonly schedule: string;
  readonly ranks: number;
  readonly microBatches: number;
  readonly boundaries: readonly number[];
  readonly predictedMs: number;
  /** The advisor's profile-only prediction (contention model, no calibration). */
  readonly predictedUncalibratedMs: number;
  /** Predicted from a profile of one copy alone. */
  readonly predictedAloneMs: number;
  /** Predicted with the together costs throughout (no contention model), same partition. */
  readonly predictedTogetherMs: number;
  /** Median of every steady-state period over the rounds. */
  readonly measuredMs: number;
  /** Each round's median period, in round order. */
  readonly measuredRoundsMs: readonly number[];
  /** measured / predicted − 1. */
  readonly error: number;
  readonly uncalibratedError: number;
  readonly aloneError: number;
  readonly togetherError: number;
  readonly predictedBubble: number;
  readonly measuredBubble: number;
  readonly predictedActivationBytes: readonly number[];
  readonly measuredActivationBytes: readonly number[];
  /** Largest |predicted / measured − 1| over the ranks. */
  readonly activationError: number;
  /** Per rank: compute per step with the alone costs (the optimizer step included), ms. */
  readonly busyAloneMs: readonly number[];
  /** Per rank: the same with the costs profiled with every rank computing at once, ms. */
  readonly busyTogetherMs: readonly number[];
  /** Per rank: the measured compute per step (median over the rounds), ms. */
  readonly measuredBusyMs: readonly number[];
  /** Per rank: the measured share of its compute overlapped by another rank's (median). */
  readonly measuredOverlap: readonly number[];
}

/** What one model's advice gave besides its rows. */
export interface ModelRun {
  readonly model: string;
  readonly rows: AccuracyRow[];
  /** The advisor's first pick. */
  readonly pick: string;
  /** Seconds to the ranked predictions (profiling included, verification not). */
  readonly adviseSeconds: number;
  /** The profile's spread of the sweeps (concurrent). */
  readonly spread: number;
  /** The calibration the predictions took, in words. */
  readonly calibration: string;
  /** How much slower the machine ran in the rounds than during the advice. */
  readonly drift: Drift;
}

/**
 * The machine's drift between the advice and the measured rounds: the
 * schedules the advisor trained for its calibration, measured again in the
 * rounds. On a shared machine a slow spell of minutes moves every
 * measurement of the rounds alike; this factor tells it from an error of
 * the advisor's model.
 */
export interface Drift {
  /** Each calibration run whose schedule is in the rows: its ms during the advice and in the rounds. */
  readonly runs: readonly {
    readonly schedule: string;
    readonly adviceMs: number;
    readonly roundsMs: number;
  }[];
  /** Geometric mean of `roundsMs / adviceMs` over `runs` (1 when there is none). */
  readonly factor: number;
}

/**
 * The drift ({@linkcode Drift}) from the advisor's calibration runs (their
 * schedule and measured ms per step) and the rows measured in the rounds.
 */
export function machineDrift(
  rows: readonly AccuracyRow[],
  calibrationRuns: readonly { readonly schedule: string; readonly measuredMs: number }[],
): Drift {
  const runs = calibrationRuns.flatMap((c) => {
    const r = rows.find((x) => x.schedule === c.schedule);
    return r === undefined || !(c.measuredMs > 0)
      ? []
      : [{ schedule: c.schedule, adviceMs: c.measuredMs, roundsMs: r.measuredMs }];
  });
  const logs = runs.map((r) => Math.log(r.roundsMs / r.adviceMs));
  const factor = runs.length === 0 ? 1 : Math.exp(logs.reduce((a, b) => a + b, 0) / runs.length);
  return { runs, factor };
}

/**
 * The errors with the machine's drift taken out (measured / (predicted ·
 * drift) − 1), in words: how far the advisor's model missed once the
 * machine's own change of speed between advice and rounds is set aside.
 * A calibration schedule's own error is then about what the calibration's
 * fit left of it (the prediction was fitted to the advice's runs).
 */
export function driftLine(run: ModelRun): string {
  const { runs, factor } = run.drift;
  if (runs.length === 0) return `${run.model}: no calibration run to measure the machine's drift`;
  const adjusted = run.rows.map((r) => ({
    schedule: r.schedule,
    error: r.measuredMs / (r.predictedMs * factor) - 1,
  }));
  const within = adjusted.filter((a) => Math.abs(a.error) <= 0.1).length;
  return `${run.model}: the machine's drift between the advice and the rounds: ${
    runs.map((r) =>
      `${r.schedule} ${r.adviceMs.toFixed(0)} → ${r.roundsMs.toFixed(0)} ms (${
        pct(r.roundsMs / r.adviceMs - 1)
      })`
    ).join(", ")
  }, ×${factor.toFixed(3)}; errors with it taken out: ${
    adjusted.map((a) => `${a.schedule} ${pct(a.error)}`).join(", ")
  } (within 10%: ${within} of ${adjusted.length}; a calibration schedule's own error here is about what its fit left)`;
}

function tinyGpt(): { model: Sequential; sample: TrainingBatch } {
  const tok = CharTokenizer.fromText(TINY_CORPUS);
  const c = REAL_COMPUTE;
  const model = createTinyGPT({
    vocabSize: tok.vocabSize,
    seqLen: c.seqLen,
    dim: c.dim,
    heads: c.heads,
    layers: c.layers,
    seed: c.seed,
    split: c.split,
  }, new CpuBackend());
  return { model, sample: realBatches(c, 1, 7)[0] };
}

function mlp(): { model: Sequential; sample: TrainingBatch } {
  const be = new CpuBackend();
  const rng = new Rng(3);
  const layers = [];
  let width = 64;
  for (let i = 0; i < 6; i++) {
    layers.push(new Linear(be, width, 512, { rng }), new GELU(be));
    width = 512;
  }
  layers.push(new Linear(be, width, 10, { rng }));
  const rows = 256;
  const inputs = new Float32Array(rows * 64).map(() => rng.normal());
  const targets = new Float32Array(rows).map((_, i) => i % 10);
  return { model: new Sequential(layers), sample: { inputs, shape: [rows, 64], targets } };
}

const median = (xs: readonly number[]): number => {
  const v = [...xs].sort((a, b) => a - b);
  const h = v.length >> 1;
  return v.length % 2 === 1 ? v[h] : (v[h - 1] + v[h]) / 2;
};

/** Time during `own` spans (disjoint) when at least one of `others` runs, ms. */
export function overlapMs(
  own: readonly { start: number; end: number }[],
  others: readonly { start: number; end: number }[],
): number {
  // The union of the others' spans, then its intersection with each own span.
  const sorted = [...others].sort((a, b) => a.start - b.start);
  const union: [number, number][] = [];
  for (const e of sorted) {
    const last = union[union.length - 1];
    if (last !== undefined && e.start <= last[1]) last[1] = Math.max(last[1], e.end);
    else union.push([e.start, e.end]);
  }
  let t = 0;
  for (const e of own) {
    for (const [a, b] of union) t += Math.max(0, Math.min(b, e.end) - Math.max(a, e.start));
  }
  return t;
}

/** What the interleaved training of one schedule measured. */
interface Measurement {
  /** Per rank: ms of compute per step (the actions' spans), over every measured step. */
  busy: number[][];
  /** Per rank: the share of its compute during which another rank computed too. */
  overlap: number[][];
  periods: number[];
  rounds: number[];
  bubbles: number[];
  activationBytes: number[];
}

/**
 * Trains every candidate for real, interleaved: `rounds` rounds, each
 * training every schedule for `steps` steps, the order rotated by one
 * schedule per round. By default each round builds the schedule's pipeline
 * afresh, warms it up `warmup` steps, measures and disposes of it, so that
 * only the pipeline measured is alive, as in a user's run and in the
 * advisor's own calibration runs; with `keep`, every pipeline is built and
 * warmed up once and kept for all the rounds (idle pipelines' workers
 * collect their heaps while another pipeline is measured: 8 idle GPT
 * pipelines took 6–9% of a core here, and slowed the one measured by 3–7%).
 */
async function measureInterleaved(
  advice: Advice,
  sample: TrainingBatch,
  model: Sequential,
  o: {
    readonly warmup: number;
    readonly steps: number;
    readonly rounds: number;
    readonly keep: boolean;
  },
  progress: (m: string) => void,
): Promise<Measurement[]> {
  const cs = advice.candidates;
  const kept: (PipelineParallelModel | null)[] = cs.map(() => null);
  const build = (c: AdviceCandidate) =>
    PipelineParallelModel.create({
      model,
      schedule: c.generated!,
      partition: new FixedPartition(c.boundaries),
      optimizer: { kind: "adamw", lr: 1e-3, weightDecay: 0 },
      loss: "cross-entropy",
      backend: "cpu",
      rankGroup: "workers",
      nonFinite: "skip",
    });
  const out: Measurement[] = cs.map((c) => ({
    busy: Array.from({ length: c.ranks }, () => []),
    overlap: Array.from({ length: c.ranks }, () => []),
    periods: [],
    rounds: [],
    bubbles: [],
    activationBytes: new Array<number>(c.ranks).fill(0),
  }));
  const record = (i: number, steps: readonly { peakActivationBytes: readonly number[] }[]) =>
    steps.forEach((st) =>
      st.peakActivationBytes.forEach((b, r) => {
        out[i].activationBytes[r] = Math.max(out[i].activationBytes[r], b);
      })
    );
  // A built pipeline, warmed up: kept for every round with `keep`.
  const pipeline = async (i: number): Promise<PipelineParallelModel> => {
    const had = kept[i];
    if (had !== null) return had;
    const pipe = await build(cs[i]);
    try {
      if (o.warmup > 0) {
        record(i, (await pipe.train(new Array<TrainingBatch>(o.warmup).fill(sample))).steps);
      }
    } catch (e) {
      await pipe.dispose();
      throw e;
    }
    if (o.keep) kept[i] = pipe;
    return pipe;
  };
  try {
    if (o.keep) {
      for (let i = 0; i < cs.length; i++) await pipeline(i);
    }
    for (let round = 0; round < o.rounds; round++) {
      progress(`measuring round ${round + 1} of ${o.rounds}`);
      for (let j = 0; j < cs.length; j++) {
        const i = (j + round) % cs.length;
        const pipe = await pipeline(i);
        let r: Awaited<ReturnType<PipelineParallelModel["train"]>>;
        try {
          r = await pipe.train(new Array<TrainingBatch>(o.steps).fill(sample));
        } finally {
          if (!o.keep) await pipe.dispose();
        }
        record(i, r.steps);
        // Periods from the second step of the round on: end(k) − end(k − 1).
        const byStep = new Map<number, number>();
        for (const e of r.events) {
          byStep.set(e.iteration, Math.max(byStep.get(e.iteration) ?? -Infinity, e.end));
        }
        const ends = [...byStep.keys()].sort((a, b) => a - b).map((k) => byStep.get(k)!);
        const periods = ends.slice(1).map((e, k) => e - ends[k]);
        out[i].periods.push(...periods);
        out[i].rounds.push(median(periods));
        const sum = summarizeTimeline(r.events, cs[i].ranks, { steadyFrom: 1 });
        out[i].bubbles.push(sum.steadyStateBubble ?? r.bubble);
        const first = Math.min(...r.events.map((e) => e.iteration));
        const steady = r.events.filter((e) => e.iteration > first);
        for (let rank = 0; rank < cs[i].ranks; rank++) {
          const own = steady.filter((e) => e.rank === rank);
          const others = steady.filter((e) => e.rank !== rank);
          const busy = own.reduce((a, e) => a + e.end - e.start, 0);
          out[i].busy[rank].push(busy / (o.steps - 1));
          out[i].overlap[rank].push(busy > 0 ? overlapMs(own, others) / busy : 0);
        }
      }
    }
    return out;
  } finally {
    for (const p of kept) await p?.dispose();
  }
}

/** Per rank: the compute of one step of candidate `c` with the layer costs of `p`, ms. */
function rankBusy(c: AdviceCandidate, p: PassProfile): number[] {
  const costs = stageCosts(p.layers, c.boundaries, { lossMs: p.loss?.median ?? 0 });
  const busy = new Array<number>(c.ranks).fill(0);
  c.generated!.actions.forEach((list, r) => {
    for (const a of list) busy[r] += costs[a.kind][a.stage];
  });
  c.generated!.stageToRank.forEach((r, s) => busy[r] += costs.step[s]);
  return busy;
}

/** Advises, profiles alone too, and measures every candidate (interleaved). */
export async function measureModel(
  name: "gpt" | "mlp",
  schedules: readonly string[],
  o: {
    readonly warmup: number;
    readonly steps: number;
    readonly rounds: number;
    readonly repeats: number;
    readonly keep: boolean;
  },
): Promise<ModelRun> {
  const { model, sample } = name === "gpt" ? tinyGpt() : mlp();
  const progress = (m: string) => console.error(`  ${name}: ${m}`);
  try {
    const common = {
      loss: "cross-entropy" as const,
      schedules,
      ranks: 2,
      microBatches: 8,
      backend: "cpu" as const,
      repeats: o.repeats,
    };
    const together: Advice = await adviseSchedule(model, sample, {
      ...common,
      onProgress: progress,
    });
    const alone = await adviseSchedule(model, sample, {
      ...common,
      concurrent: false,
      calibrate: false,
    });
    const measured = await measureInterleaved(together, sample, model, o, progress);
    const aloneProfile = together.profiles[0].profile;
    const togetherProfile = together.profiles[together.profiles.length - 1].profile;
    const rows = together.candidates.map((c, i): AccuracyRow => {
      const a = alone.candidates.find((x) =>
        x.schedule === c.schedule || (x.sameRunAs ?? []).includes(c.schedule)
      )!; // same runs are folded (distinctRuns)
      const pred = c.memory.map((m) => m.activations);
      const meas = measured[i].activationBytes;
      const ms = median(measured[i].periods);
      const overheads = together.profiles[0].overheads;
      const togetherMs = predictStep(
        c.generated!,
        stageCosts(togetherProfile.layers, c.boundaries, {
          lossMs: togetherProfile.loss?.median ?? 0,
          actionMs: overheads.actionMs,
        }),
        overheads,
      ).stepMs;
      return {
        model: name,
        schedule: c.schedule,
        ranks: c.ranks,
        microBatches: c.microBatches,
        boundaries: c.boundaries,
        predictedMs: c.predictedMs,
        predictedUncalibratedMs: c.uncalibratedMs ?? c.predictedMs,
        uncalibratedError: ms / (c.uncalibratedMs ?? c.predictedMs) - 1,
        predictedAloneMs: a.predictedMs,
        predictedTogetherMs: togetherMs,
        togetherError: ms / togetherMs - 1,
        measuredMs: ms,
        measuredRoundsMs: measured[i].rounds,
        error: ms / c.predictedMs - 1,
        aloneError: ms / a.predictedMs - 1,
        predictedBubble: c.bubble,
        measuredBubble: median(measured[i].bubbles),
        predictedActivationBytes: pred,
        measuredActivationBytes: meas,
        activationError: Math.max(...pred.map((p, r) => Math.abs(p / meas[r] - 1))),
        busyAloneMs: rankBusy(c, aloneProfile),
        busyTogetherMs: rankBusy(c, togetherProfile),
        measuredBusyMs: measured[i].busy.map(median),
        measuredOverlap: measured[i].overlap.map(median),
      };
    });
    return {
      model: name,
      rows,
      pick: together.candidates[0].schedule,
      adviseSeconds: together.predictionMs / 1000,
      spread: together.profiles[together.profiles.length - 1].profile.spread,
      calibration: together.calibrations.map((k) =>
        `factors ${
          Object.entries(k.kinds).map(([n, f]) =>
            `${n} ×${f.factor.toFixed(3)} (spread ${(100 * f.spread).toFixed(0)}%, by stage ${
              f.byStage.map((x) => x?.toFixed(2) ?? "-").join("/")
            })`
          ).join(", ")
        }; ${(1000 * k.overheads.actionMs).toFixed(0)} µs per action, hand-over ${
          (1000 * k.overheads.handOverMs).toFixed(0)
        } µs, ${(k.overheads.stepMs ?? 0).toFixed(1)} ms per step; ${
          k.runs.map((r) =>
            `${r.schedule} measured ${r.measuredMs.toFixed(0)} predicted ${
              r.predictedMs.toFixed(0)
            } (uncalibrated ${r.uncalibratedMs.toFixed(0)})`
          ).join(", ")
        }; ${(k.elapsedMs / 1000).toFixed(1)} s`
      ).join(" | "),
      drift: machineDrift(rows, together.calibrations.flatMap((k) => k.runs)),
    };
  } finally {
    model.dispose();
  }
}

const pct = (x: number) => `${x >= 0 ? "+" : ""}${(100 * x).toFixed(1)}%`;

/** The rows as a Markdown table. */
export function accuracyTable(rows: readonly AccuracyRow[]): string {
  const head = [
    "model",
    "schedule",
    "predicted ms",
    "measured ms (rounds' range)",
    "error",
    "uncalibrated",
    "error uncal.",
    "predicted alone",
    "error alone",
    "predicted together",
    "error together",
    "bubble pred / meas",
    "activations pred / meas per rank",
    "bytes error",
  ];
  const lines = [
    `| ${head.join(" | ")} |`,
    `| ${head.map((_, i) => (i < 2 || i === 12 ? ":---" : "---:")).join(" | ")} |`,
  ];
  for (const r of rows) {
    lines.push(
      `| ${
        [
          r.model,
          r.schedule,
          r.predictedMs.toFixed(0),
          `${r.measuredMs.toFixed(0)} (${Math.min(...r.measuredRoundsMs).toFixed(0)}–${
            Math.max(...r.measuredRoundsMs).toFixed(0)
          })`,
          pct(r.error),
          r.predictedUncalibratedMs.toFixed(0),
          pct(r.uncalibratedError),
          r.predictedAloneMs.toFixed(0),
          pct(r.aloneError),
          r.predictedTogetherMs.toFixed(0),
          pct(r.togetherError),
          `${(100 * r.predictedBubble).toFixed(1)}% / ${(100 * r.measuredBubble).toFixed(1)}%`,
          r.predictedActivationBytes.map((p, i) =>
            `${formatBytes(p)} / ${formatBytes(r.measuredActivationBytes[i])}`
          ).join(", "),
          `${(100 * r.activationError).toFixed(1)}%`,
        ].join(" | ")
      } |`,
    );
  }
  return lines.join("\n");
}

/**
 * Where the time goes, per schedule and rank: compute per step with the
 * alone costs, with the together costs, and measured (the actions' spans),
 * and the measured share of it that another rank's compute overlapped.
 */
export function busyTable(rows: readonly AccuracyRow[]): string {
  const head = [
    "model",
    "schedule",
    "rank",
    "busy alone",
    "busy together",
    "busy measured",
    "overlap",
  ];
  const lines = [
    `| ${head.join(" | ")} |`,
    `| ${head.map((_, i) => (i < 2 ? ":---" : "---:")).join(" | ")} |`,
  ];
  for (const r of rows) {
    r.measuredBusyMs.forEach((b, k) => {
      lines.push(
        `| ${r.model} | ${r.schedule} | ${k} | ${r.busyAloneMs[k].toFixed(0)} | ${
          r.busyTogetherMs[k].toFixed(0)
        } | ${b.toFixed(0)} (${pct(b / r.busyAloneMs[k] - 1)} on alone) | ${
          (100 * r.measuredOverlap[k]).toFixed(0)
        }% |`,
      );
    });
  }
  return lines.join("\n");
}

/** The range of a row's rounds' medians. */
function range(r: AccuracyRow): [number, number] {
  return [Math.min(...r.measuredRoundsMs), Math.max(...r.measuredRoundsMs)];
}

/**
 * The schedules whose measurement cannot be told from the fastest's: the
 * range of their rounds' medians overlaps the fastest's range.
 */
export function indistinguishable(rows: readonly AccuracyRow[]): string[] {
  const fastest = rows.reduce((a, b) => (b.measuredMs < a.measuredMs ? b : a));
  const [lo, hi] = range(fastest);
  return rows.filter((r) => {
    const [a, b] = range(r);
    return a <= hi && b >= lo;
  }).map((r) => r.schedule);
}

/** How the first pick compares with the fastest measured, in words. */
export function pickLine(run: ModelRun): string {
  const fastest = run.rows.reduce((a, b) => (b.measuredMs < a.measuredMs ? b : a));
  const pick = run.rows.find((r) => r.schedule === run.pick)!;
  const ties = indistinguishable(run.rows);
  const off = pick.measuredMs / fastest.measuredMs - 1;
  return `${run.model}: first pick ${run.pick} measured ${pick.measuredMs.toFixed(0)} ms (${
    pct(off)
  } off the fastest), fastest measured ${fastest.schedule} (${
    fastest.measuredMs.toFixed(0)
  } ms); indistinguishable from the fastest (rounds' ranges overlap): ${ties.join(", ")}`;
}

/**
 * PASS when every target holds (see the module doc), else FAIL naming the
 * misses. A first pick more than 5% off the fastest measured passes when
 * the two are indistinguishable (their rounds' ranges overlap), and the
 * verdict says so.
 */
export function accuracyVerdict(runs: readonly ModelRun[]): string {
  const misses: string[] = [];
  const notes: string[] = [];
  for (const run of runs) {
    for (const r of run.rows) {
      if (!(Math.abs(r.error) <= 0.1)) misses.push(`${run.model} ${r.schedule} ms ${pct(r.error)}`);
      if (!(r.activationError <= 0.1)) {
        misses.push(`${run.model} ${r.schedule} bytes ${(100 * r.activationError).toFixed(1)}%`);
      }
    }
    const fastest = Math.min(...run.rows.map((r) => r.measuredMs));
    const pick = run.rows.find((r) => r.schedule === run.pick)!;
    if (!(pick.measuredMs <= 1.05 * fastest)) {
      const what = `${run.model} pick ${run.pick} measured ${
        pct(pick.measuredMs / fastest - 1)
      } off the fastest`;
      if (indistinguishable(run.rows).includes(run.pick)) {
        notes.push(`${what}, indistinguishable from it`);
      } else misses.push(what);
    }
    if (run.model === "gpt" && !(run.adviseSeconds <= 60)) {
      misses.push(`gpt advice took ${run.adviseSeconds.toFixed(1)} s`);
    }
  }
  return `verdict: ${misses.length === 0 ? "PASS" : "FAIL"} (targets: ms within 10%, first pick ` +
    `within 5% of the fastest measured or indistinguishable from it, activation bytes within ` +
    `10%, gpt advice <= 60 s)` + (misses.length === 0 ? "" : `: ${misses.join("; ")}`) +
    (notes.length === 0 ? "" : ` (${notes.join("; ")})`);
}

if (import.meta.main) {
  const values = benchArgs("bench/advise_accuracy.ts", {
    model: { type: "string", default: "both" },
    schedule: { type: "string", multiple: true },
    warmup: { type: "string", default: "3" },
    steps: { type: "string", default: "5" },
    rounds: { type: "string", default: "3" },
    repeats: { type: "string", default: "5" },
    "keep-pipelines": { type: "boolean", default: false },
    json: { type: "boolean", default: false },
  });
  const models = values.model === "both" ? ["gpt", "mlp"] as const : [values.model];
  for (const m of models) {
    if (m !== "gpt" && m !== "mlp") {
      throw new RangeError(`--model must be gpt, mlp or both, got "${values.model}"`);
    }
  }
  const schedules = values.schedule ?? [...SCHEDULE_NAMES];
  for (const s of schedules) {
    if (!(SCHEDULE_NAMES as readonly string[]).includes(s)) {
      throw new RangeError(`--schedule must be one of ${SCHEDULE_NAMES.join(", ")}, got "${s}"`);
    }
  }
  const int = (flag: string, text: string, min: number) => {
    const v = Number(text);
    if (!Number.isInteger(v) || v < min) {
      throw new RangeError(`--${flag} must be an integer >= ${min}, got "${text}"`);
    }
    return v;
  };
  const o = {
    warmup: int("warmup", values.warmup, 0),
    steps: int("steps", values.steps, 2),
    rounds: int("rounds", values.rounds, 1),
    repeats: int("repeats", values.repeats, 1),
    keep: values["keep-pipelines"],
  };
  const loadAverage = () => {
    try {
      return Deno.loadavg().map((x) => x.toFixed(2)).join(", ");
    } catch {
      return "unknown";
    }
  };
  const before = loadAverage();
  const t0 = performance.now();
  const runs: ModelRun[] = [];
  for (const m of models) {
    const run = await measureModel(m as "gpt" | "mlp", schedules, o);
    runs.push(run);
    if (values.json) { for (const r of run.rows) console.log(JSON.stringify(r)); }
  }
  const verdict = accuracyVerdict(runs);
  // How steady the rounds were: the verdict means most on a quiet machine.
  const noise = noiseVerdict(runs.flatMap((r) =>
    r.rows.map((row) => {
      const [lo, hi] = range(row);
      return { label: `${row.model} ${row.schedule}`, medianMs: row.measuredMs, spreadMs: hi - lo };
    })
  ));
  if (values.json) {
    console.log(JSON.stringify({
      picks: Object.fromEntries(runs.map((r) => [r.model, r.pick])),
      adviseSeconds: Object.fromEntries(runs.map((r) => [r.model, r.adviseSeconds])),
      indistinguishable: Object.fromEntries(runs.map((r) => [r.model, indistinguishable(r.rows)])),
      drift: Object.fromEntries(runs.map((r) => [r.model, r.drift])),
      noise,
      verdict,
    }));
  } else {
    console.log(
      `CPU backend, P = 2 workers, m = 8, ${navigator.hardwareConcurrency} cores; ` +
        `${o.rounds} interleaved rounds of ${o.steps} steps per schedule, ${
          o.keep
            ? `every pipeline built and warmed up ${o.warmup} steps once and kept`
            : `each in a pipeline built afresh and warmed up ${o.warmup} steps`
        }; profile ${o.repeats} sweeps; ${
          ((performance.now() - t0) / 1000).toFixed(0)
        } s in all; load average ${before} before, ${loadAverage()} after\n`,
    );
    console.log(accuracyTable(runs.flatMap((r) => r.rows)));
    console.log();
    console.log(busyTable(runs.flatMap((r) => r.rows)));
    console.log();
    for (const r of runs) {
      console.log(
        `${pickLine(r)}; advice in ${r.adviseSeconds.toFixed(1)} s ` +
          `(profile spread ${
            (100 * r.spread).toFixed(0)
          }%)\n${r.model} calibration: ${r.calibration}\n${driftLine(r)}`,
      );
    }
    console.log(noise);
    console.log(verdict);
  }
}
