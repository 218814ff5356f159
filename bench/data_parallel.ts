/**
 * Data × pipeline parallelism on real compute: the tiny GPT (dim 128 by
 * default) on the CPU backend, ranks in workers, at (D, P) = (1, 1),
 * (2, 1), (1, 2) and (2, 2) (`dataParallel` D replicas of a P-rank
 * pipeline, the same whole batch per step). Every grid point's model is
 * built first; then the repeats run interleaved (each round times every
 * grid point once, so that a load change on the machine touches all of
 * them alike). Per grid point: the median step over the rounds' medians,
 * the spread (max − min of the rounds' medians), the speed-up over
 * (1, 1), and the simulator's prediction of the step: `simulate` with the
 * per-action costs measured in the point's own last round, each stage's
 * gradient bytes and a link model (`--link-latency-ms`,
 * `--link-bytes-per-ms`) for the all-reduce, beside the measured median.
 *
 * ```sh
 * deno run -A bench/data_parallel.ts [--steps 4] [--repeats 3] [--dim 128] [--json]
 * ```
 *
 * Measure on a quiet machine: the numbers of a loaded one say little.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { CharTokenizer } from "../src/nn/char_tokenizer.ts";
import { TINY_CORPUS } from "../src/nn/data/tiny_corpus.ts";
import { createTinyGPT } from "../src/nn/gpt.ts";
import { CpuBackend } from "../src/tensor/cpu/backend.ts";
import { simulate } from "../src/pipeline/analysis/simulate.ts";
import { checkScheduleName } from "../src/pipeline/schedule/generate.ts";
import { PipelineParallelModel } from "../src/pipeline/model/pipeline_parallel_model.ts";
import { measuredCosts, REAL_COMPUTE, realBatches } from "./_real_compute.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    steps: { type: "string", default: "4" },
    repeats: { type: "string", default: "3" },
    dim: { type: "string", default: "128" },
    layers: { type: "string", default: "4" },
    batch: { type: "string", default: "16" },
    microbatches: { type: "string", default: "4" },
    schedule: { type: "string", default: "1f1b" },
    "link-latency-ms": { type: "string", default: "0.2" },
    "link-bytes-per-ms": { type: "string", default: "1000000" },
    json: { type: "boolean", default: false },
  },
});
function positiveInt(name: keyof typeof values): number {
  const v = Number(values[name]);
  if (!Number.isInteger(v) || v < 1) {
    throw new RangeError(`--${name} must be a positive integer, got ${values[name]}`);
  }
  return v;
}
function positive(name: keyof typeof values): number {
  const v = Number(values[name]);
  if (!Number.isFinite(v) || v < 0) {
    throw new RangeError(`--${name} must be a finite number >= 0, got ${values[name]}`);
  }
  return v;
}
const steps = positiveInt("steps"), repeats = positiveInt("repeats");
const CFG = {
  ...REAL_COMPUTE,
  dim: positiveInt("dim"),
  layers: positiveInt("layers"),
  batch: positiveInt("batch"),
  microBatches: positiveInt("microbatches"),
  seqLen: 32,
};
const link = {
  latencyMs: positive("link-latency-ms"),
  bytesPerMs: positive("link-bytes-per-ms"),
};
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
  readonly rounds: number[];
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
    return { d, p, model, gradientBytes, rounds: [] };
  } finally {
    net.dispose();
  }
}

const points: Point[] = [];
try {
  for (const [d, p] of GRID) points.push(await build(d, p));
  for (const pt of points) await pt.model.train(realBatches(CFG, 1, 99)); // warm-up
  const batches = realBatches(CFG, steps, 7);
  for (let round = 0; round < repeats; round++) {
    for (const pt of points) {
      const times: number[] = [];
      for (const b of batches) {
        const t = performance.now();
        await pt.model.step(b);
        times.push(performance.now() - t);
      }
      pt.rounds.push(median(times));
    }
  }
  const base = median(points[0].rounds);
  const rows = points.map((pt) => {
    const events = pt.model.lastEvents;
    const costs = measuredCosts(events, pt.model.schedule.stageToRank.length);
    const sim = simulate(pt.model.schedule, {
      costs,
      ...(pt.d === 1 ? {} : { dataParallel: pt.d, link, gradientBytes: pt.gradientBytes }),
    });
    const stepMs = median(pt.rounds);
    return {
      dataParallel: pt.d,
      ranks: pt.p,
      stepMs,
      spreadMs: Math.max(...pt.rounds) - Math.min(...pt.rounds),
      speedup: base / stepMs,
      simulatedMs: sim.makespan,
      simulatedOverMeasured: sim.makespan / stepMs,
    };
  });
  if (values.json) {
    for (const r of rows) console.log(JSON.stringify(r));
  } else {
    console.log(
      `tiny GPT dim ${CFG.dim}, ${CFG.layers} blocks, ${schedule}, a ${CFG.batch} × ${CFG.seqLen} ` +
        `batch in ${CFG.microBatches} micro-batches per replica, CPU, workers; ${repeats} ` +
        `interleaved rounds of ${steps} steps; link ${link.latencyMs} ms + bytes / ` +
        `${link.bytesPerMs} per ms\n`,
    );
    console.log(
      "| (D, P) | step ms (median) | spread ms | speed-up | simulated ms | sim / measured |",
    );
    console.log(
      "| :----- | ---------------: | --------: | -------: | -----------: | -------------: |",
    );
    for (const r of rows) {
      console.log(
        `| (${r.dataParallel}, ${r.ranks}) | ${r.stepMs.toFixed(1).padStart(16)} | ${
          r.spreadMs.toFixed(1).padStart(9)
        } | ${r.speedup.toFixed(2).padStart(8)} | ${r.simulatedMs.toFixed(1).padStart(12)} | ${
          r.simulatedOverMeasured.toFixed(2).padStart(14)
        } |`,
      );
    }
  }
} finally {
  for (const pt of points) await pt.model.dispose();
}
