/**
 * A demo that learns something you can check: a small GPT, trained across
 * pipeline ranks in Deno workers with a zero-bubble schedule, learns to add
 * two numbers of up to 3 digits written as characters. Problems come from
 * a seed; a held-out set of problems is never trained on, and the model's
 * exact-match accuracy on it (every answer digit right, by greedy decoding)
 * is measured as it trains.
 *
 * ```sh
 * deno run -A examples/learn_addition.ts            # 2 ranks, zb-h1, CPU backend
 * deno run -A examples/learn_addition.ts --ranks 4 --schedule zb-v --layers 5 --json
 * ```
 *
 * It prints a progress bar with the loss and the held-out accuracy, writes
 * both curves to `addition.svg`, prints a few held-out problems with the
 * model's answers, and with `--json` ends with one line
 * `{"accuracy": A, "steps": N, "seconds": S, "ranks": P, "schedule": "…"}`.
 *
 * The model writes the sum least significant digit first, as 4 digits
 * (`"123+045="` → `"8610"` for 168): see `_addition.ts` for why. The
 * defaults were chosen by experiment (the README's section on this demo
 * gives the measurements): 2 blocks of width 48, 64 problems per step, 1000
 * steps, AdamW at lr 3e-3 and 3e-4 for the last 250 steps; about 70 s and
 * 99.8% held-out exact match on 2 quiet cores.
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
  Rng,
  SCHEDULE_NAMES,
  type TrainingBatch,
} from "../mod.ts";
import { checkOutputPath, ProgressBar } from "../callbacks.ts";
import {
  answerOf,
  type AnswerOrder,
  encodeBatch,
  exactMatch,
  greedyAnswers,
  heldOutProblems,
  keyOf,
  type Problem,
  ProblemStream,
  PROMPT_LENGTH,
  promptOf,
  readAnswer,
  SEQ_LEN,
  TOKENIZER,
} from "./_addition.ts";

const DEFAULTS = {
  ranks: 2,
  schedule: "zb-h1",
  microbatches: 4,
  steps: 1000,
  batch: 64,
  lr: 3e-3,
  finalLr: 3e-4,
  finalSteps: 250,
  dim: 48,
  layers: 2,
  heads: 4,
  evalEvery: 50,
  evalSize: 200,
  heldOut: 1000,
  backend: "cpu",
  answerOrder: "reversed",
  seed: 1,
  show: 8,
  svg: "addition.svg",
};

const USAGE = `Usage: deno run -A examples/learn_addition.ts [options]

  --ranks P          pipeline ranks, one worker each (default ${DEFAULTS.ranks})
  --schedule NAME    ${SCHEDULE_NAMES.join(" | ")} (default ${DEFAULTS.schedule})
  --microbatches M   micro-batches per step (default ${DEFAULTS.microbatches})
  --steps N          training steps (default ${DEFAULTS.steps})
  --batch B          problems per step (default ${DEFAULTS.batch})
  --lr X             AdamW learning rate (default ${DEFAULTS.lr})
  --final-lr X       learning rate of the last --final-steps steps (default ${DEFAULTS.finalLr})
  --final-steps N    steps at --final-lr; 0 keeps --lr throughout (default a quarter of
                     --steps, at most ${DEFAULTS.finalSteps})
  --dim D            model width (default ${DEFAULTS.dim})
  --layers L         Transformer blocks (default ${DEFAULTS.layers})
  --heads H          attention heads, dividing D (default ${DEFAULTS.heads})
  --eval-every K     measure held-out accuracy every K steps (default ${DEFAULTS.evalEvery})
  --eval-size N      held-out problems used for the curve (default ${DEFAULTS.evalSize})
  --held-out N       held-out problems, all measured at the end (default ${DEFAULTS.heldOut})
  --backend KIND     cpu | webgpu | auto (default ${DEFAULTS.backend})
  --answer-order O   reversed (least significant digit first) | plain (default ${DEFAULTS.answerOrder})
  --seed S           seed of the problems and the weights (default ${DEFAULTS.seed})
  --show N           held-out problems printed with the model's answers (default ${DEFAULTS.show})
  --svg PATH         loss and accuracy curves (default ${DEFAULTS.svg})
  --json             end with one JSON line {"accuracy", "steps", "seconds", "ranks", "schedule"}
  --help             this text
`;

/** Exit with a usage error that names the flag and the value. */
function fail(message: string): never {
  console.error(`learn_addition: ${message}`);
  Deno.exit(2);
}

function intArg(flag: string, value: string | undefined, fallback: number, min = 1): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!/^\s*-?\d+\s*$/.test(value) || !Number.isSafeInteger(n) || n < min) {
    fail(`--${flag} must be an integer ≥ ${min}, got ${JSON.stringify(value)}`);
  }
  return n;
}

function parse() {
  let parsed;
  try {
    parsed = parseArgs({
      args: Deno.args,
      options: {
        ranks: { type: "string" },
        schedule: { type: "string" },
        microbatches: { type: "string" },
        steps: { type: "string" },
        batch: { type: "string" },
        lr: { type: "string" },
        "final-lr": { type: "string" },
        "final-steps": { type: "string" },
        dim: { type: "string" },
        layers: { type: "string" },
        heads: { type: "string" },
        "eval-every": { type: "string" },
        "eval-size": { type: "string" },
        "held-out": { type: "string" },
        backend: { type: "string" },
        "answer-order": { type: "string" },
        seed: { type: "string" },
        show: { type: "string" },
        svg: { type: "string" },
        json: { type: "boolean" },
        help: { type: "boolean", short: "h" },
      },
      strict: true,
    });
  } catch (e) {
    fail((e as Error).message);
  }
  const o = parsed.values;
  if (o.help) {
    console.log(USAGE);
    Deno.exit(0);
  }
  const schedule = o.schedule ?? DEFAULTS.schedule;
  if (!(SCHEDULE_NAMES as readonly string[]).includes(schedule)) {
    fail(`--schedule must be one of ${SCHEDULE_NAMES.join(", ")}, got ${JSON.stringify(schedule)}`);
  }
  const backend = o.backend ?? DEFAULTS.backend;
  if (backend !== "cpu" && backend !== "webgpu" && backend !== "auto") {
    fail(`--backend must be cpu, webgpu or auto, got ${JSON.stringify(backend)}`);
  }
  const answerOrder = o["answer-order"] ?? DEFAULTS.answerOrder;
  if (answerOrder !== "reversed" && answerOrder !== "plain") {
    fail(`--answer-order must be reversed or plain, got ${JSON.stringify(answerOrder)}`);
  }
  const rate = (flag: string, value: string | undefined, fallback: number) => {
    const x = value === undefined ? fallback : Number(value);
    if (!Number.isFinite(x) || x <= 0) {
      fail(`--${flag} must be a positive number, got ${JSON.stringify(value)}`);
    }
    return x;
  };
  const lr = rate("lr", o.lr, DEFAULTS.lr);
  const finalLr = rate("final-lr", o["final-lr"], DEFAULTS.finalLr);
  const cfg = {
    ranks: intArg("ranks", o.ranks, DEFAULTS.ranks),
    schedule,
    microBatches: intArg("microbatches", o.microbatches, DEFAULTS.microbatches),
    steps: intArg("steps", o.steps, DEFAULTS.steps),
    batch: intArg("batch", o.batch, DEFAULTS.batch),
    lr,
    finalLr,
    // Unless given, a quarter of the steps (250 of the default 1000), so
    // that --steps alone shortens a run.
    finalSteps: intArg(
      "final-steps",
      o["final-steps"],
      Math.min(DEFAULTS.finalSteps, Math.floor(intArg("steps", o.steps, DEFAULTS.steps) / 4)),
      0,
    ),
    dim: intArg("dim", o.dim, DEFAULTS.dim),
    layers: intArg("layers", o.layers, DEFAULTS.layers),
    heads: intArg("heads", o.heads, DEFAULTS.heads),
    evalEvery: intArg("eval-every", o["eval-every"], DEFAULTS.evalEvery),
    evalSize: intArg("eval-size", o["eval-size"], DEFAULTS.evalSize),
    heldOut: intArg("held-out", o["held-out"], DEFAULTS.heldOut),
    backend: backend as "cpu" | "webgpu" | "auto",
    answerOrder: answerOrder as AnswerOrder,
    seed: intArg("seed", o.seed, DEFAULTS.seed, 0),
    show: intArg("show", o.show, DEFAULTS.show, 0),
    svg: outputPath(o.svg ?? DEFAULTS.svg),
    json: o.json ?? false,
  };
  if (cfg.dim % cfg.heads !== 0) {
    fail(`--heads must divide --dim, got heads ${cfg.heads} and dim ${cfg.dim}`);
  }
  if (cfg.heldOut > 100_000) fail(`--held-out must be at most 100000, got ${cfg.heldOut}`);
  if (cfg.batch < cfg.microBatches) {
    fail(`--batch must be at least --microbatches (${cfg.microBatches}), got ${cfg.batch}`);
  }
  if (cfg.finalSteps >= cfg.steps) {
    fail(`--final-steps must be less than --steps (${cfg.steps}), got ${cfg.finalSteps}`);
  }
  cfg.evalSize = Math.min(cfg.evalSize, cfg.heldOut);
  return cfg;
}

// The curves' path, checked before any training: a missing folder or
// write permission is said now, not after the run.
function outputPath(path: string): string {
  try {
    return checkOutputPath(path, "--svg", { write: "direct" }); // written in place
  } catch (e) {
    fail((e as Error).message);
  }
}

/** `123 + 45 = 168` as a person writes it. */
function human(p: Problem, sum: number | string): string {
  return `${String(p.a).padStart(3)} + ${String(p.b).padStart(3)} = ${String(sum).padStart(4)}`;
}

async function main(): Promise<void> {
  const cfg = parse();
  const t0 = performance.now();
  const seconds = () => (performance.now() - t0) / 1000;

  let schedule;
  try {
    schedule = generateSchedule(cfg.schedule, {
      ranks: cfg.ranks,
      microBatches: cfg.microBatches,
    });
  } catch (e) {
    fail((e as Error).message);
  }
  // The GPT is a Sequential of the embedding, the blocks, a norm and the
  // head; every stage of the schedule needs at least one of them.
  const stages = schedule.stageToRank.length;
  if (cfg.layers + 3 < stages) {
    fail(
      `${schedule.name} on ${cfg.ranks} ranks cuts the model into ${stages} stages, but ` +
        `${cfg.layers} blocks make ${cfg.layers + 3} layers: use --layers ${stages - 3} or more`,
    );
  }
  // Problems: the held-out set first, then a stream of training problems
  // from another seed that skips every held-out problem.
  const held = heldOutProblems(cfg.heldOut, cfg.seed);
  const evalSet = held.slice(0, cfg.evalSize);
  const stream = new ProblemStream(new Rng(cfg.seed + 1), new Set(held.map(keyOf)));

  const net = createTinyGPT(
    {
      vocabSize: TOKENIZER.vocabSize,
      seqLen: SEQ_LEN,
      dim: cfg.dim,
      heads: cfg.heads,
      layers: cfg.layers,
      seed: cfg.seed + 2,
    },
    new CpuBackend(),
  );
  const nParams = net.parameters().reduce((s, p) => s + p.value.size, 0);
  const dropAt = cfg.finalSteps > 0 ? cfg.steps - cfg.finalSteps : Infinity;
  // The model is built once on the CPU; its layer specs and weights travel
  // to the workers, which rebuild their stages on their own backends. The lr
  // drops to --final-lr for the last --final-steps steps (PyTorch's StepLR):
  // a constant lr gave late loss spikes on some seeds.
  let model: PipelineParallelModel;
  try {
    model = await PipelineParallelModel.create({
      model: net,
      schedule,
      optimizer: {
        kind: "adamw",
        lr: cfg.lr,
        weightDecay: 0,
        ...(dropAt === Infinity
          ? {}
          : { lrSchedule: { kind: "step", stepSize: dropAt, gamma: cfg.finalLr / cfg.lr } }),
      },
      loss: "cross-entropy",
      backend: cfg.backend,
    });
  } catch (e) {
    net.dispose();
    fail((e as Error).message);
  }

  try {
    const info = await model.rankInfo();
    const example = { a: 123, b: 45 };
    console.log(
      `task: a + b for a, b in [0, 999]; prompt ${JSON.stringify(promptOf(example))}, answer ` +
        `${JSON.stringify(answerOf(example, cfg.answerOrder))} (the sum 168 as 4 digits, ` +
        (cfg.answerOrder === "reversed" ? "least significant first)" : "as people write it)"),
    );
    console.log(
      `data: ${cfg.batch} fresh problems per step from seed ${cfg.seed + 1}, each operand ` +
        `1–3 digits; ${cfg.heldOut} held-out problems (seed ${cfg.seed}), operands uniform in ` +
        `[0, 999], never trained on`,
    );
    console.log(
      `model: GPT, ${cfg.layers} blocks, dim ${cfg.dim}, ${cfg.heads} heads, ` +
        `${nParams} parameters; AdamW lr ${cfg.lr}` +
        (cfg.finalSteps > 0
          ? `, ${cfg.finalLr} for the last ${cfg.finalSteps} step${cfg.finalSteps > 1 ? "s" : ""}`
          : ""),
    );
    const perMicroBatch = cfg.batch % cfg.microBatches === 0
      ? `${cfg.batch / cfg.microBatches}`
      : `~${Math.round(cfg.batch / cfg.microBatches)}`;
    console.log(
      `pipeline: ${schedule.name}, ${cfg.ranks} ranks in workers, ${cfg.microBatches} ` +
        `micro-batches of ${perMicroBatch} problems, backend ${info[0].backend}`,
    );
    console.log(
      `loss: mean cross-entropy over the ${SEQ_LEN} positions (the ${
        PROMPT_LENGTH - 1
      } that would predict ` +
        `prompt digits are trained to predict "." and soon cost ~0); held-out: exact match by ` +
        `greedy decoding on ${evalSet.length} held-out problems every ${cfg.evalEvery} steps, ` +
        `on all ${held.length} at the end`,
    );

    const logits = async (inputs: Float32Array, shape: [number, number]) =>
      (await model.predict({ inputs, shape })).data;
    const measure = async (set: readonly Problem[]) =>
      exactMatch(set, await greedyAnswers(set, logits), cfg.answerOrder);

    const loss: [number, number][] = [];
    const accuracy: [number, number][] = [[0, await measure(evalSet)]];
    // On a terminal one bar, redrawn every step; in a pipe or a log, a line
    // at each held-out measurement (not 1000 lines of a default run).
    const progress = new ProgressBar({ total: cfg.steps, every: cfg.evalEvery });
    const status = (l: number) =>
      `loss ${l.toFixed(4)}  held-out ${(100 * accuracy[accuracy.length - 1][1]).toFixed(1)}%  ` +
      `${seconds().toFixed(0)} s`;
    // Steps run back to back in groups of up to 10 (inside a group consecutive
    // steps interlock: each stage steps its optimizer right after its own
    // last backward); a group ends at every accuracy measurement.
    for (let done = 0; done < cfg.steps;) {
      const next = Math.min(
        cfg.steps,
        (Math.floor(done / 10) + 1) * 10,
        (Math.floor(done / cfg.evalEvery) + 1) * cfg.evalEvery,
      );
      const batches: TrainingBatch[] = [];
      for (let s = done; s < next; s++) {
        const b = encodeBatch(
          Array.from({ length: cfg.batch }, () => stream.next()),
          cfg.answerOrder,
        );
        batches.push({ inputs: b.inputs, shape: b.shape, targets: b.targets });
      }
      const run = await model.train(batches);
      done = next;
      if (done % cfg.evalEvery === 0 && done < cfg.steps) {
        accuracy.push([done, await measure(evalSet)]);
      }
      run.steps.forEach((s, i) => {
        loss.push([done - run.steps.length + i + 1, s.loss]);
        progress.update(loss.length, status(s.loss));
      });
    }
    // The final accuracy: every held-out problem.
    const answers = await greedyAnswers(held, logits);
    const acc = exactMatch(held, answers, cfg.answerOrder);
    accuracy.push([cfg.steps, acc]);
    progress.done();
    const secs = seconds();

    console.log(
      `\nheld-out exact match: ${(100 * acc).toFixed(1)}% of ${held.length} problems ` +
        `after ${cfg.steps} steps, ${secs.toFixed(1)} s`,
    );
    if (cfg.show > 0) {
      console.log(
        `held-out problems: prompt, the model's answer as written, read as a number` +
          (cfg.answerOrder === "reversed" ? " (its digits reversed):" : ":"),
      );
      // Show the first problems, and a wrong one when there is one.
      const shown = held.slice(0, cfg.show).map((_, i) => i);
      const wrong = held.findIndex((p, i) => readAnswer(answers[i], cfg.answerOrder) !== p.a + p.b);
      if (wrong >= cfg.show) shown[shown.length - 1] = wrong;
      for (const i of shown) {
        const p = held[i], got = readAnswer(answers[i], cfg.answerOrder);
        const ok = got === p.a + p.b;
        console.log(
          `  ${promptOf(p)}${answers[i]}   ${human(p, got ?? "?")}   ` +
            (ok ? "✓" : `✗ (true sum ${p.a + p.b})`),
        );
      }
    }
    await Deno.writeTextFile(
      cfg.svg,
      curvesSvg({
        title: `learn_addition: ${cfg.ranks} ranks, ${schedule.name}, backend ${info[0].backend}`,
        subtitle: `GPT ${cfg.layers}×${cfg.dim}, ${cfg.heads} heads, batch ${cfg.batch}, ` +
          `held-out exact match ${(100 * acc).toFixed(1)}% of ${held.length} ` +
          `after ${cfg.steps} steps, ${secs.toFixed(0)} s`,
        loss,
        accuracy,
        accuracyLabel: "held-out exact match",
        marks: cfg.finalSteps > 0 ? [{ step: dropAt, label: `lr ${cfg.lr} → ${cfg.finalLr}` }] : [],
      }),
    );
    console.log(`loss and accuracy curves written to ${cfg.svg}`);
    if (cfg.json) {
      console.log(JSON.stringify({
        accuracy: Number(acc.toFixed(4)),
        steps: cfg.steps,
        seconds: Number(secs.toFixed(1)),
        ranks: cfg.ranks,
        schedule: schedule.name,
      }));
    }
  } finally {
    await model.dispose();
    net.dispose();
  }
}

if (import.meta.main) await main();
