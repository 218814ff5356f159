/**
 * How good is the advisor? For the tiny GPT of the real-compute benches
 * (dim 128, 6 blocks as 12 halves, a 16 × 64 batch, m = 8) and an MLP
 * (64 → 6 × [Linear 512, GELU] → 10 classes, a 256-row batch, m = 8) on
 * the CPU backend at P = 2 workers, `adviseSchedule` predicts every
 * schedule, then trains each for real (2 warm-up and 8 measured steps, its
 * predicted partition) and the table sets predicted beside measured: ms per
 * step (steady state), bubble, and peak activation bytes per rank. A second
 * prediction profiled with one copy alone (`concurrent: false`) shows what
 * profiling under the run's concurrency buys.
 *
 * ```sh
 * deno run -A bench/advise_accuracy.ts                  # both models, Markdown and a verdict
 * deno run -A bench/advise_accuracy.ts --model mlp --json
 * deno run -A bench/advise_accuracy.ts --schedule 1f1b --schedule zb-h1 --steps 4
 * ```
 *
 * The verdict checks the targets (meant for a quiet machine): every
 * prediction within 10% of its measurement, the first pick within 5% of the
 * fastest measured, every rank's predicted activation bytes within 10% of
 * what the rank reported (its largest over the steps), and the advice
 * without verification within 60 s on the tiny GPT.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { GELU } from "../src/nn/gelu.ts";
import { Linear } from "../src/nn/linear.ts";
import { Sequential } from "../src/nn/sequential.ts";
import { CharTokenizer } from "../src/nn/char_tokenizer.ts";
import { TINY_CORPUS } from "../src/nn/data/tiny_corpus.ts";
import { createTinyGPT } from "../src/nn/gpt.ts";
import { CpuBackend } from "../src/tensor/cpu/backend.ts";
import { Rng } from "../src/tensor/random.ts";
import { SCHEDULE_NAMES } from "../src/pipeline/schedule/generate.ts";
import { type Advice, adviseSchedule } from "../src/pipeline/model/advise.ts";
import type { TrainingBatch } from "../src/pipeline/model/batch.ts";
import { formatBytes } from "../src/pipeline/advise/advice_table.ts";
import { REAL_COMPUTE, realBatches } from "./_real_compute.ts";

/** One row: a schedule of a model, predicted and measured. */
export interface AccuracyRow {
  readonly model: string;
  readonly schedule: string;
  readonly ranks: number;
  readonly microBatches: number;
  readonly boundaries: readonly number[];
  readonly predictedMs: number;
  /** Predicted from a profile of one copy alone. */
  readonly predictedAloneMs: number;
  readonly measuredMs: number;
  /** measured / predicted − 1. */
  readonly error: number;
  readonly aloneError: number;
  readonly predictedBubble: number;
  readonly measuredBubble: number;
  readonly predictedActivationBytes: readonly number[];
  readonly measuredActivationBytes: readonly number[];
  /** Largest |predicted / measured − 1| over the ranks. */
  readonly activationError: number;
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

/** Advises, verifies every candidate, and profiles alone too. */
export async function measureModel(
  name: "gpt" | "mlp",
  schedules: readonly string[],
  o: { readonly warmup: number; readonly steps: number; readonly repeats: number },
): Promise<ModelRun> {
  const { model, sample } = name === "gpt" ? tinyGpt() : mlp();
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
      verify: schedules.length,
      verifyWarmup: o.warmup,
      verifySteps: o.steps,
      onProgress: (m) => console.error(`  ${name}: ${m}`),
    });
    const alone = await adviseSchedule(model, sample, { ...common, concurrent: false });
    const rows = together.candidates.map((c): AccuracyRow => {
      const a = alone.candidates.find((x) => x.schedule === c.schedule)!;
      const pred = c.memory.map((m) => m.activations);
      const meas = c.measuredActivationBytes ?? [];
      return {
        model: name,
        schedule: c.schedule,
        ranks: c.ranks,
        microBatches: c.microBatches,
        boundaries: c.boundaries,
        predictedMs: c.predictedMs,
        predictedAloneMs: a.predictedMs,
        measuredMs: c.measuredMs!,
        error: c.measuredMs! / c.predictedMs - 1,
        aloneError: c.measuredMs! / a.predictedMs - 1,
        predictedBubble: c.bubble,
        measuredBubble: c.measuredBubble!,
        predictedActivationBytes: pred,
        measuredActivationBytes: meas,
        activationError: Math.max(...pred.map((p, r) => Math.abs(p / meas[r] - 1))),
      };
    });
    return {
      model: name,
      rows,
      pick: together.candidates[0].schedule,
      adviseSeconds: together.predictionMs / 1000,
      spread: together.profiles[0].profile.spread,
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
    "measured ms",
    "error",
    "predicted alone",
    "error alone",
    "bubble pred / meas",
    "activations pred / meas per rank",
    "bytes error",
  ];
  const lines = [
    `| ${head.join(" | ")} |`,
    `| ${head.map((_, i) => (i < 2 || i === 8 ? ":---" : "---:")).join(" | ")} |`,
  ];
  for (const r of rows) {
    lines.push(
      `| ${
        [
          r.model,
          r.schedule,
          r.predictedMs.toFixed(0),
          r.measuredMs.toFixed(0),
          pct(r.error),
          r.predictedAloneMs.toFixed(0),
          pct(r.aloneError),
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

/** PASS when every target holds (see the module doc), else FAIL naming the misses. */
export function accuracyVerdict(runs: readonly ModelRun[]): string {
  const misses: string[] = [];
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
      misses.push(
        `${run.model} pick ${run.pick} measured ${
          pct(pick.measuredMs / fastest - 1)
        } off the fastest`,
      );
    }
    if (run.model === "gpt" && !(run.adviseSeconds <= 60)) {
      misses.push(`gpt advice took ${run.adviseSeconds.toFixed(1)} s`);
    }
  }
  return `verdict: ${misses.length === 0 ? "PASS" : "FAIL"} (targets: ms within 10%, first pick ` +
    `within 5% of the fastest measured, activation bytes within 10%, gpt advice <= 60 s)` +
    (misses.length === 0 ? "" : `: ${misses.join("; ")}`);
}

if (import.meta.main) {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      model: { type: "string", default: "both" },
      schedule: { type: "string", multiple: true },
      warmup: { type: "string", default: "2" },
      steps: { type: "string", default: "8" },
      repeats: { type: "string", default: "5" },
      json: { type: "boolean", default: false },
    },
    strict: true,
    allowPositionals: false,
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
    repeats: int("repeats", values.repeats, 1),
  };
  const t0 = performance.now();
  const runs: ModelRun[] = [];
  for (const m of models) {
    const run = await measureModel(m as "gpt" | "mlp", schedules, o);
    runs.push(run);
    if (values.json) { for (const r of run.rows) console.log(JSON.stringify(r)); }
  }
  const verdict = accuracyVerdict(runs);
  if (values.json) {
    console.log(JSON.stringify({
      picks: Object.fromEntries(runs.map((r) => [r.model, r.pick])),
      adviseSeconds: Object.fromEntries(runs.map((r) => [r.model, r.adviseSeconds])),
      verdict,
    }));
  } else {
    console.log(
      `CPU backend, P = 2 workers, m = 8, ${navigator.hardwareConcurrency} cores; ` +
        `${o.warmup} warm-up + ${o.steps} measured steps per schedule; profile ${o.repeats} ` +
        `sweeps; ${((performance.now() - t0) / 1000).toFixed(0)} s in all\n`,
    );
    console.log(accuracyTable(runs.flatMap((r) => r.rows)));
    console.log();
    for (const r of runs) {
      const fastest = r.rows.reduce((a, b) => (b.measuredMs < a.measuredMs ? b : a));
      console.log(
        `${r.model}: first pick ${r.pick}, fastest measured ${fastest.schedule} ` +
          `(${fastest.measuredMs.toFixed(0)} ms); advice in ${r.adviseSeconds.toFixed(1)} s ` +
          `(profile spread ${(100 * r.spread).toFixed(0)}%)`,
      );
    }
    console.log(verdict);
  }
}
