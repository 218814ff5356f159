/**
 * The pipeline demo (`deno task demo`): trains the tiny character-level GPT
 * across pipeline stages, one Deno worker per rank, each with its own WebGPU
 * device (the CPU backend where no adapter exists). Prints a progress bar
 * with the loss per step, then the measured bubble and the peak activation
 * memory of every stage, writes `timeline.svg`: the timeline of the last
 * measured step, and samples some text from the trained model (through the
 * pipeline's stages). `--text FILE` trains on any text file instead of the
 * built-in corpus.
 *
 * ```sh
 * deno run -A examples/pipeline_demo.ts --schedule zb-v --stages 4 --microbatches 8 --steps 40
 * deno run -A examples/pipeline_demo.ts --text notes.txt --steps 300 --prompt "The "
 * ```
 *
 * @module
 */

import { parseArgs } from "node:util";
import {
  CpuBackend,
  createTinyGPT,
  generateSchedule,
  PipelineParallelModel,
  ProgressBar,
  renderSvg,
  Rng,
  sampleBatch,
  SCHEDULE_NAMES,
  simulate,
  type StepResult,
  type TrainingBatch,
} from "../mod.ts";
import { loadText, sampleText } from "./_text.ts";

const USAGE = `Usage: deno run -A examples/pipeline_demo.ts [options]

  --schedule NAME       ${SCHEDULE_NAMES.join(" | ")} (default zb-v)
  --stages P            pipeline ranks, one worker each (default 4)
  --microbatches M      micro-batches per step (default 8)
  --virtual-stages V    chunks per rank, for the schedules that take it
  --steps K             training steps (default 40)
  --backend KIND        auto | webgpu | cpu (default auto)
  --seed S              seed of the weights and batches (default 1)
  --svg PATH            timeline of the last step (default timeline.svg)
  --text FILE           train on this text file (default: the built-in corpus)
  --sample N            characters to generate after training (default 120, 0 = none)
  --prompt TEXT         start of the sample (default "The ", or the file's first 4 characters)
  --temperature T       sampling temperature, 0 = always the most likely (default 1)
  --help                this text
`;

/** Exit with a usage error that names the flag and the value. */
function fail(message: string): never {
  console.error(`error: ${message}`);
  Deno.exit(2);
}

function positiveInt(flag: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n <= 0) {
    fail(`--${flag} must be a positive integer, got ${JSON.stringify(value)}`);
  }
  return n;
}

function kib(bytes: number): string {
  return `${(bytes / 1024).toFixed(0)} KiB`;
}

let parsed;
try {
  parsed = parseArgs({
    args: Deno.args,
    options: {
      schedule: { type: "string" },
      stages: { type: "string" },
      microbatches: { type: "string" },
      "virtual-stages": { type: "string" },
      steps: { type: "string" },
      backend: { type: "string" },
      seed: { type: "string" },
      svg: { type: "string" },
      text: { type: "string" },
      sample: { type: "string" },
      prompt: { type: "string" },
      temperature: { type: "string" },
      help: { type: "boolean" },
    },
  });
} catch (e) {
  fail((e as Error).message);
}
const o = parsed.values;
if (o.help) {
  console.log(USAGE);
  Deno.exit(0);
}
const name = o.schedule ?? "zb-v";
if (!(SCHEDULE_NAMES as readonly string[]).includes(name)) {
  fail(`--schedule must be one of ${SCHEDULE_NAMES.join(", ")}, got ${JSON.stringify(name)}`);
}
const ranks = positiveInt("stages", o.stages, 4);
const microBatches = positiveInt("microbatches", o.microbatches, 8);
const stagesPerRank = o["virtual-stages"] === undefined
  ? undefined
  : positiveInt("virtual-stages", o["virtual-stages"], 2);
const steps = positiveInt("steps", o.steps, 40);
const seed = positiveInt("seed", o.seed, 1);
const backend = o.backend ?? "auto";
if (backend !== "auto" && backend !== "webgpu" && backend !== "cpu") {
  fail(`--backend must be auto, webgpu or cpu, got ${JSON.stringify(backend)}`);
}
const svgPath = o.svg ?? "timeline.svg";
const sampleLength = o.sample?.trim() === "0" ? 0 : positiveInt("sample", o.sample, 120);
const temperature = o.temperature === undefined ? 1 : Number(o.temperature);
if (!Number.isFinite(temperature) || temperature < 0) {
  fail(`--temperature must be a number ≥ 0, got ${JSON.stringify(o.temperature)}`);
}

let schedule;
try {
  schedule = generateSchedule(name, { ranks, microBatches, stagesPerRank });
} catch (e) {
  fail((e as Error).message);
}

// Sizes: about two layers per chunk (so the load-balanced partition has room
// to even out the cheap embedding, norm and head), and a batch big enough
// that every micro-batch has at least two sequences.
const chunks = schedule.stageToRank.length;
const seqLen = 32;
let corpus;
try {
  corpus = await loadText(o.text, seqLen + 1);
} catch (e) {
  fail((e as Error).message);
}
const { tokenizer, tokens } = corpus;
const prompt = o.prompt ?? corpus.defaultPrompt;
const badChar = [...prompt].find((c) => !tokenizer.vocab.includes(c));
if (badChar !== undefined) {
  fail(`--prompt has ${JSON.stringify(badChar)}, which is not in the text`);
}
if (prompt === "") fail("--prompt must not be empty");
const config = {
  vocabSize: tokenizer.vocabSize,
  seqLen,
  dim: 32,
  heads: 2,
  layers: Math.max(4, 2 * chunks - 3),
  seed,
};
const batchRows = Math.max(16, 2 * microBatches);

// The model is built once on the CPU; its layer specs and weights travel to
// the workers, which rebuild their chunks on their own backends.
const net = createTinyGPT(config, new CpuBackend());
let model: PipelineParallelModel;
try {
  model = await PipelineParallelModel.create({
    model: net,
    schedule,
    optimizer: { kind: "adamw", lr: 3e-3, weightDecay: 0 },
    loss: "cross-entropy",
    backend,
  });
} finally {
  net.dispose();
}

try {
  const info = await model.rankInfo();
  const bounds = model.partition.boundaries;
  console.log(
    `tiny GPT: ${config.layers} blocks, dim ${config.dim}, vocabulary ${config.vocabSize}; ` +
      `batch ${batchRows} × ${config.seqLen} characters of ${corpus.source} ` +
      `(${tokens.length} characters)`,
  );
  console.log(
    `pipeline: ${schedule.name}, ${ranks} stages in workers × ${schedule.stagesPerRank} ` +
      `chunk(s), ${microBatches} micro-batches, backend ${info[0].backend}`,
  );
  console.log(
    `layers per chunk: ${
      bounds.slice(0, -1).map((b, i) => `[${b}, ${bounds[i + 1]})`).join(" ")
    }  (ln vocabulary = ${Math.log(config.vocabSize).toFixed(3)})`,
  );

  const rng = new Rng(seed + 1);
  const progress = new ProgressBar({ total: steps, every: 1 });
  const results: StepResult[] = [];
  // Steps run back to back in groups: inside a group consecutive steps
  // interlock (each stage steps its optimizer after its own last backward).
  const group = 10;
  for (let done = 0; done < steps;) {
    const n = Math.min(group, steps - done);
    const batches: TrainingBatch[] = Array.from({ length: n }, () => {
      const b = sampleBatch(tokens, batchRows, config.seqLen, rng);
      return { inputs: b.ids, shape: b.shape, targets: b.targets };
    });
    const run = await model.train(batches);
    for (const s of run.steps) {
      results.push(s);
      progress.update(
        results.length,
        `loss ${s.loss.toFixed(4)}  bubble ${(100 * s.bubble).toFixed(1)}%  ` +
          `makespan ${s.makespanMs.toFixed(0)} ms`,
      );
    }
    done += n;
  }
  progress.done();

  const last = results[results.length - 1];
  const first = results[0];
  const sim = simulate(schedule);
  console.log(
    `\nloss ${first.loss.toFixed(4)} → ${last.loss.toFixed(4)} over ${steps} steps`,
  );
  console.log(
    `bubble of the last step: measured ${(100 * last.bubble).toFixed(1)}%, ` +
      `simulated with equal costs ${(100 * sim.bubbleFraction).toFixed(1)}%`,
  );
  // Each worker computes on the CPU here (the CPU backend, or llvmpipe's
  // software WebGPU): with fewer cores than ranks they take turns, so the
  // measured bubble stays near 1 − cores/ranks or above whatever the schedule.
  const cores = navigator.hardwareConcurrency;
  if (cores < ranks) {
    console.log(
      `note: ${cores} CPU cores for ${ranks} workers, so at most ${cores} stages compute at ` +
        `once: expect a measured bubble near or above ${
          (100 * (1 - cores / ranks)).toFixed(0)
        }% on this machine (bench/schedules_bench.ts measures the runtime with fixed-time ` +
        "actions instead)",
    );
  }
  if (info[0].backend === "webgpu") {
    // Deno reports GPU completion at least ~11 ms after it is asked for, so
    // each burst of actions ends a little late: busy times are upper bounds.
    console.log("note: on WebGPU, busy times include up to ~11 ms of completion-report delay");
  }
  console.log("peak activation memory per stage (rank):");
  last.peakActivationBytes.forEach((bytes, r) => {
    console.log(
      `  rank ${r} (stages ${info[r].stages.join(", ")}): ${kib(bytes)}, busy ${
        last.busyMs[r].toFixed(0)
      } ms of ${last.makespanMs.toFixed(0)} ms`,
    );
  });

  const t0 = Math.min(...last.events.map((e) => e.start));
  const events = last.events.map((e) => ({ ...e, start: e.start - t0, end: e.end - t0 }));
  await Deno.writeTextFile(
    svgPath,
    renderSvg(events, {
      title: `${schedule.name}: ${ranks} stages, ${microBatches} micro-batches, ` +
        `measured step ${steps}`,
      bubbleFraction: last.bubble,
      timeUnit: "ms",
      ranks,
    }),
  );
  console.log(`timeline of step ${steps} written to ${svgPath}`);
  if (sampleLength > 0) {
    // One sequence is fewer rows than micro-batches: predict runs it
    // through the stages one after another.
    const logits = async (inputs: Float32Array, shape: [number, number]) =>
      (await model.predict({ inputs, shape })).data;
    const text = await sampleText(logits, tokenizer, {
      prompt,
      n: sampleLength,
      seqLen: config.seqLen,
      temperature,
      rng: new Rng(seed + 2),
    });
    console.log(`sample: ${JSON.stringify(text)}`);
  }
} finally {
  await model.dispose();
}
