/**
 * The pipeline demo (`deno task demo`): shows on the machine it runs on
 * whether pipelining pays, against the best one-device run. It picks a
 * backend and a rank count (`backend "auto"`: WebGPU on a GPU, the CPU
 * backend where there is none or only a software adapter; no more busy
 * ranks than CPU cores), trains the same tiny GPT with the same batches on
 * 1 rank (the whole batch at once, its CPU kernels on every core) and on P
 * ranks (one Deno worker each, the cores shared: floor(cores / P) threads
 * a rank), the two runs taking turns in windows of steps so
 * that a slow spell of the machine falls on both, and ends with a
 * side-by-side summary: step time
 * (median and spread over the measured steps), the speedup, measured and
 * simulated bubble, peak activation memory per rank, and two pictures: the
 * loss curves of both runs and the timeline of the last P-rank step.
 * Flags choose everything (`--help`); `--text FILE` trains on any text.
 *
 * ```sh
 * deno run -A examples/pipeline_demo.ts
 * deno run -A examples/pipeline_demo.ts --schedule 1f1b --stages 2 --steps 4 --dim 64
 * deno run -A examples/pipeline_demo.ts --text notes.txt --sample 200 --prompt "The "
 * ```
 *
 * @module
 */

import { parseArgs } from "node:util";
import {
  CpuBackend,
  createTinyGPT,
  curvesSvg,
  generateSchedule,
  PipelineParallelModel,
  renderSvg,
  Rng,
  type Schedule,
  SCHEDULE_NAMES,
  simulate,
  type StepResult,
  type TimedEvent,
  type TinyGPTConfig,
  type TrainingBatch,
  type TrainResult,
} from "../mod.ts";
import { chooseBackend } from "../tensor.ts";
import { checkOutputPath } from "../callbacks.ts";
import { sampleBatch } from "../data.ts";
import { summarizeTimeline } from "../analysis.ts";
import { loadText, sampleText } from "./_text.ts";

const USAGE = `Usage: deno run -A examples/pipeline_demo.ts [options]

Trains the same tiny GPT on 1 rank and on P ranks and compares them.

  --schedule NAME       ${SCHEDULE_NAMES.join(" | ")} (default zb-h1)
  --stages P            pipeline ranks, one worker each (default: the CPU cores, 2 to 4)
  --microbatches M      micro-batches per step (default 8)
  --virtual-stages V    stages per rank, for the schedules that take it
  --steps K             measured steps per run (default 8, at least 2)
  --rounds R            the measured steps run in R windows per run, the two runs
                        taking turns (default: one window per 4 steps)
  --warmup W            steps before the measured ones, per run (default 2)
  --backend KIND        auto | webgpu | cpu (default auto: WebGPU on a GPU, else CPU)
  --dim N               model width (default 128)
  --layers N            Transformer blocks (default 6)
  --heads N             attention heads, dividing --dim (default 4)
  --seq-len N           characters per sequence (default 64)
  --batch N             sequences per step, at least M (default 16)
  --lr X                AdamW learning rate (default 0.003)
  --seed S              seed of the weights and batches (default 1)
  --svg PATH            timeline of the last P-rank step (default timeline.svg)
  --loss-svg PATH       loss curves of both runs (default loss.svg)
  --text FILE           train on this text file (default: the built-in corpus)
  --sample N            characters to generate after training (default 0 = none)
  --prompt TEXT         start of the sample (default "The ", or the file's first 4 characters)
  --temperature T       sampling temperature, 0 = always the most likely (default 1)
  --help                this text
`;

/** Exit with a usage error that names the flag and the value. */
function fail(message: string): never {
  console.error(`error: ${message}`);
  Deno.exit(2);
}

function integer(flag: string, value: string | undefined, fallback: number, min = 1): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < min) {
    fail(
      min === 1
        ? `--${flag} must be a positive integer, got ${JSON.stringify(value)}`
        : `--${flag} must be an integer ≥ ${min}, got ${JSON.stringify(value)}`,
    );
  }
  return n;
}

function kib(bytes: number): string {
  return `${(bytes / 1024).toFixed(0)} KiB`;
}

function pct(x: number | undefined): string {
  return x === undefined ? "—" : `${(100 * x).toFixed(1)}%`;
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  return n % 2 === 1 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
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
      rounds: { type: "string" },
      warmup: { type: "string" },
      backend: { type: "string" },
      dim: { type: "string" },
      layers: { type: "string" },
      heads: { type: "string" },
      "seq-len": { type: "string" },
      batch: { type: "string" },
      lr: { type: "string" },
      seed: { type: "string" },
      svg: { type: "string" },
      "loss-svg": { type: "string" },
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
const name = o.schedule ?? "zb-h1";
if (!(SCHEDULE_NAMES as readonly string[]).includes(name)) {
  fail(`--schedule must be one of ${SCHEDULE_NAMES.join(", ")}, got ${JSON.stringify(name)}`);
}
const cores = navigator.hardwareConcurrency;
// No more busy ranks than cores (each rank computes on its own core, or
// drives the GPU from it), at least 2 to compare with 1, at most 4 here.
const ranks = integer("stages", o.stages, Math.max(2, Math.min(4, cores)));
const microBatches = integer("microbatches", o.microbatches, 8);
const stagesPerRank = o["virtual-stages"] === undefined
  ? undefined
  : integer("virtual-stages", o["virtual-stages"], 2);
const steps = integer("steps", o.steps, 8, 2);
const rounds = integer("rounds", o.rounds, Math.max(1, Math.floor(steps / 4)));
if (steps % rounds !== 0 || steps / rounds < 2) {
  fail(
    `--rounds must divide --steps into windows of at least 2 steps, got --rounds ${rounds} ` +
      `and --steps ${steps}`,
  );
}
const warmup = integer("warmup", o.warmup, 2, 0);
const backendFlag = o.backend ?? "auto";
if (backendFlag !== "auto" && backendFlag !== "webgpu" && backendFlag !== "cpu") {
  fail(`--backend must be auto, webgpu or cpu, got ${JSON.stringify(backendFlag)}`);
}
const dim = integer("dim", o.dim, 128);
const layers = integer("layers", o.layers, 6);
const heads = integer("heads", o.heads, 4);
if (dim % heads !== 0) fail(`--heads must divide --dim, got --heads ${heads} and --dim ${dim}`);
const seqLen = integer("seq-len", o["seq-len"], 64);
const batchRows = integer("batch", o.batch, Math.max(16, microBatches));
if (batchRows < microBatches) {
  fail(`--batch ${batchRows} is smaller than --microbatches ${microBatches}`);
}
const lr = o.lr === undefined ? 3e-3 : Number(o.lr);
if (!(lr > 0) || !Number.isFinite(lr)) fail(`--lr must be a number > 0, got ${o.lr}`);
const seed = integer("seed", o.seed, 1);
// Both pictures' paths are checked before any training: a missing folder
// or write permission is said now, not after the run.
const outputPath = (path: string, flag: string): string => {
  try {
    return checkOutputPath(path, flag, { write: "direct" }); // written in place
  } catch (e) {
    fail((e as Error).message);
  }
};
const svgPath = outputPath(o.svg ?? "timeline.svg", "--svg");
const lossSvgPath = outputPath(o["loss-svg"] ?? "loss.svg", "--loss-svg");
const sampleLength = integer("sample", o.sample, 0, 0);
const temperature = o.temperature === undefined ? 1 : Number(o.temperature);
if (!Number.isFinite(temperature) || temperature < 0) {
  fail(`--temperature must be a number ≥ 0, got ${JSON.stringify(o.temperature)}`);
}

let schedule: Schedule;
try {
  schedule = generateSchedule(name, { ranks, microBatches, stagesPerRank });
} catch (e) {
  fail((e as Error).message);
}
// Each block is two layers (attention half, MLP half), so that schedules
// with several stages per rank can be balanced.
const stages = schedule.stageToRank.length;
if (2 * layers + 3 < stages) {
  fail(`--layers ${layers} gives ${2 * layers + 3} layers, fewer than the ${stages} stages`);
}
let corpus;
try {
  corpus = await loadText(o.text, seqLen + 1);
} catch (e) {
  fail((e as Error).message);
}
const { tokenizer, tokens } = corpus;
const prompt = o.prompt ?? corpus.defaultPrompt;
if (prompt === "") fail("--prompt must not be empty");
const badChar = [...prompt].find((c) => !tokenizer.vocab.includes(c));
if (badChar !== undefined) {
  fail(`--prompt has ${JSON.stringify(badChar)}, which is not in the text`);
}

const config: TinyGPTConfig = {
  vocabSize: tokenizer.vocabSize,
  seqLen,
  dim,
  heads,
  layers,
  seed,
  split: "halves",
};
// The same batches for both runs.
const rng = new Rng(seed + 1);
const batches: TrainingBatch[] = Array.from({ length: warmup + steps }, () => {
  const b = sampleBatch(tokens, batchRows, seqLen, rng);
  return { inputs: b.ids, shape: b.shape, targets: b.targets };
});
// "auto" is decided (and said) once, before either run.
const backend = (await chooseBackend(backendFlag)).kind;

console.log(
  `tiny GPT: ${layers} blocks, dim ${dim}, ${heads} heads, vocabulary ${config.vocabSize}; ` +
    `batch ${batchRows} × ${seqLen} characters of ${corpus.source} (${tokens.length} characters)`,
);
console.log(
  `${cores} CPU cores, backend ${backend}: 1 rank, then ${ranks} ranks in workers with ` +
    `${schedule.name} (${microBatches} micro-batches${
      schedule.stagesPerRank > 1 ? `, ${schedule.stagesPerRank} stages per rank` : ""
    }); ${warmup} warm-up + ${steps} measured steps each, taking turns in ${rounds} ` +
    `window${rounds === 1 ? "" : "s"}`,
);
if (cores < ranks) {
  console.log(
    `note: ${cores} CPU cores for ${ranks} ranks: at most ${cores} compute at once, so expect ` +
      "less than the schedule allows",
  );
}

/** One run: its losses, the measured windows, and what was measured from them. */
interface Run {
  readonly ranks: number;
  readonly losses: readonly number[];
  /** Steady-state bubble, the median over the measured windows. */
  readonly measuredBubble: number | undefined;
  /** Time between the ends of consecutive measured steps of one window, ms. */
  readonly periods: readonly number[];
  readonly simulatedBubble: number | undefined;
  readonly last: StepResult;
}

// Ends of each iteration's last action, in iteration order; their differences.
function periodsOf(events: readonly TimedEvent[]): number[] {
  const ends = new Map<number, number>();
  for (const e of events) {
    ends.set(e.iteration, Math.max(ends.get(e.iteration) ?? -Infinity, e.end));
  }
  const sorted = [...ends.entries()].sort((a, b) => a[0] - b[0]).map(([, t]) => t);
  return sorted.slice(1).map((t, i) => t - sorted[i]);
}

// The steady-state bubble `simulate` gives for `s` with each kind of action
// taking, per stage, its median time in `events`.
function simulatedBubble(s: Schedule, events: readonly TimedEvent[], iterations: number) {
  const costs: Partial<Record<"F" | "B" | "I" | "W", number[]>> = {};
  for (const kind of ["F", "B", "I", "W"] as const) {
    const per = s.stageToRank.map((_, stage) => {
      const ds = events.filter((e) => e.action.kind === kind && e.action.stage === stage)
        .map((e) => e.end - e.start);
      return ds.length === 0 ? NaN : median(ds);
    });
    if (per.every(Number.isFinite)) costs[kind] = per;
  }
  // A schedule without split backwards runs no I or W: give them half a B each.
  if (costs.B !== undefined && costs.I === undefined && costs.W === undefined) {
    costs.I = costs.W = costs.B.map((t) => t / 2);
  }
  const sim = simulate(s, { costs, iterations });
  return summarizeTimeline(sim.events, s.ranks, { steadyFrom: 1 }).steadyStateBubble;
}

/** A run in progress: its model, and the steps and windows trained so far. */
interface Trainer {
  readonly label: string;
  readonly model: PipelineParallelModel;
  readonly steps: StepResult[];
  readonly windows: TrainResult[];
}

async function start(sched: Schedule, label: string): Promise<Trainer> {
  const net = createTinyGPT(config, new CpuBackend());
  try {
    const model = await PipelineParallelModel.create({
      model: net,
      schedule: sched,
      optimizer: { kind: "adamw", lr, weightDecay: 0 },
      loss: "cross-entropy",
      backend,
    });
    return { label, model, steps: [], windows: [] };
  } finally {
    net.dispose();
  }
}

// Trains `t` on the next `n` batches in one window (steps back to back).
async function window(t: Trainer, n: number, measured: boolean): Promise<void> {
  const from = t.steps.length;
  const r = await t.model.train(batches.slice(from, from + n));
  t.steps.push(...r.steps);
  if (measured) t.windows.push(r);
}

async function finish(t: Trainer, last: boolean): Promise<Run> {
  try {
    console.log(`\n${t.label}:`);
    t.steps.forEach((s, i) => {
      console.log(
        `  step ${String(i + 1).padStart(2)}${i < warmup ? " (warm-up)" : "          "}  ` +
          `loss ${s.loss.toFixed(4)}  ${s.makespanMs.toFixed(0)} ms  idle ${pct(s.bubble)}`,
      );
    });
    if (last && sampleLength > 0) {
      // One sequence is fewer rows than micro-batches: predict runs it
      // through the stages one after another.
      const logits = async (inputs: Float32Array, shape: [number, number]) =>
        (await t.model.predict({ inputs, shape })).data;
      const text = await sampleText(logits, tokenizer, {
        prompt,
        n: sampleLength,
        seqLen,
        temperature,
        rng: new Rng(seed + 2),
      });
      console.log(`sample: ${JSON.stringify(text)}`);
    }
    const bubbles = t.windows.map((w) => w.steadyStateBubble).filter((b) => b !== undefined);
    const events = t.windows.flatMap((w) => w.events);
    return {
      ranks: t.model.schedule.ranks,
      losses: t.steps.map((s) => s.loss),
      measuredBubble: bubbles.length === 0 ? undefined : median(bubbles),
      periods: t.windows.flatMap((w) => periodsOf(w.events)),
      simulatedBubble: simulatedBubble(t.model.schedule, events, steps / rounds),
      last: t.steps[t.steps.length - 1],
    };
  } finally {
    await t.model.dispose();
  }
}

const started = performance.now();
// The baseline is the best one-device run: one rank computing on every
// core (a pipeline's ranks share them: each of P ranks gets cores / P) on
// the whole batch at once (micro-batches only cost a lone rank time).
const oneT = await start(
  generateSchedule("1f1b", { ranks: 1, microBatches: 1 }),
  `1 rank (no pipeline, the whole batch at once${
    backend === "cpu" ? `, ${cores} CPU thread${cores === 1 ? "" : "s"}` : ""
  })`,
);
let manyT: Trainer;
try {
  manyT = await start(schedule, `${ranks} ranks, ${schedule.name}`);
} catch (e) {
  await oneT.model.dispose();
  throw e;
}
// Warm-up, then the measured windows, the runs taking turns (first one,
// then the other, then the other way round) so that neither gets the
// machine's quiet or busy spells alone.
console.log(
  `\ntraining: ${warmup} warm-up step${warmup === 1 ? "" : "s"} each, then ${rounds} measured ` +
    `window${rounds === 1 ? "" : "s"} of ${steps / rounds} step${
      steps / rounds === 1 ? "" : "s"
    } each, taking turns...`,
);
if (warmup > 0) {
  await window(oneT, warmup, false);
  await window(manyT, warmup, false);
}
for (let k = 0; k < rounds; k++) {
  const order = k % 2 === 0 ? [manyT, oneT] : [oneT, manyT];
  for (const t of order) await window(t, steps / rounds, true);
}
const one = await finish(oneT, false);
const many = await finish(manyT, true);

// The pictures.
const lastEvents = many.last.events;
const t0 = Math.min(...lastEvents.map((e) => e.start));
await Deno.writeTextFile(
  svgPath,
  renderSvg(lastEvents.map((e) => ({ ...e, start: e.start - t0, end: e.end - t0 })), {
    title: `${schedule.name}: ${ranks} ranks, ${microBatches} micro-batches, ` +
      `last measured step (${warmup + steps})`,
    bubbleFraction: many.last.bubble,
    timeUnit: "ms",
    ranks,
  }),
);
const curve = (losses: readonly number[]) => losses.map((l, i) => [i + 1, l] as const);
await Deno.writeTextFile(
  lossSvgPath,
  curvesSvg({
    title: `tiny GPT on ${ranks} ranks (${schedule.name}) and on 1 rank: the same losses`,
    subtitle: `${layers} blocks, dim ${dim}, batch ${batchRows} × ${seqLen}, ` +
      `${microBatches} micro-batches, backend ${backend}`,
    loss: curve(many.losses),
    lossLabel: `${ranks} ranks`,
    // The one-rank run, dashed on the same axis.
    validationLoss: curve(one.losses),
    validationLossLabel: "1 rank",
  }),
);

// The summary, side by side.
const worst = Math.max(...one.losses.map((l, i) => Math.abs(l - many.losses[i])));
const cell = (r: Run) => {
  const ms = r.periods;
  return {
    median: `${median(ms).toFixed(0)} ms`,
    spread: `${Math.min(...ms).toFixed(0)}–${Math.max(...ms).toFixed(0)} ms`,
    measured: pct(r.measuredBubble),
    simulated: pct(r.simulatedBubble),
  };
};
const a = cell(one), b = cell(many);
const rows: [string, string, string][] = [
  ["", "1 rank", `${ranks} ranks (${schedule.name})`],
  ["step time, median", a.median, b.median],
  [
    `step time, spread (${steps - rounds} step${steps - rounds === 1 ? "" : "s"})`,
    a.spread,
    b.spread,
  ],
  ["bubble, measured", a.measured, b.measured],
  ["bubble, simulated", a.simulated, b.simulated],
  ...Array.from({ length: ranks }, (_, r): [string, string, string] => [
    `peak activations, rank ${r}`,
    r === 0 ? kib(one.last.peakActivationBytes[0]) : "",
    kib(many.last.peakActivationBytes[r]),
  ]),
  ["loss, first → last", fmtLoss(one.losses), fmtLoss(many.losses)],
];
function fmtLoss(ls: readonly number[]): string {
  return `${ls[0].toFixed(4)} → ${ls[ls.length - 1].toFixed(4)}`;
}
const w0 = Math.max(...rows.map((r) => r[0].length));
const w1 = Math.max(...rows.map((r) => r[1].length));
console.log(`\nsummary (${cores} CPU cores, backend ${backend}):`);
for (const [k, x, y] of rows) console.log(`  ${k.padEnd(w0)}  ${x.padEnd(w1)}  ${y}`);
console.log(
  `  (step time: between the ends of consecutive steps of a window; bubble: steady state ` +
    `over the measured windows; simulated: the schedule with each action's measured median time; ` +
    `a step's idle above: its ranks' time between actions, fill, drain and the runtime's gaps)`,
);
console.log(
  worst === 0
    ? `losses on 1 and ${ranks} ranks: identical at every step (the same training)`
    : `losses on 1 and ${ranks} ranks agree to ${worst.toExponential(1)} (the same training)`,
);
console.log(
  `speedup: ${(median(one.periods) / median(many.periods)).toFixed(2)}x ` +
    `(${ranks} ranks, ${schedule.name})`,
);
console.log(`loss curves written to ${lossSvgPath}`);
console.log(`timeline of the last ${ranks}-rank step written to ${svgPath}`);
console.log(`(${((performance.now() - started) / 1000).toFixed(1)} s of training and measuring)`);
