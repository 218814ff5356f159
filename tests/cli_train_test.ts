import assert from "node:assert/strict";
import { cli } from "./_cli.ts";
import { interruptAfter } from "./_interrupt.ts";
import { AdamW } from "../src/nn/adamw.ts";
import { CharTokenizer } from "../src/nn/char_tokenizer.ts";
import { TINY_CORPUS } from "../src/nn/data/tiny_corpus.ts";
import { createTinyGPT } from "../src/nn/gpt.ts";
import { crossEntropyLoss } from "../src/nn/losses.ts";
import { sampleBatch } from "../src/nn/sample_batch.ts";
import { CpuBackend } from "../src/tensor/cpu/backend.ts";
import { Rng } from "../src/tensor/random.ts";
import { liveCount as liveWorkers } from "../src/pipeline/runtime/_worker_registry.ts";
import { lrAt, type LrScheduleSpec } from "../src/nn/lr_schedule.ts";
import { encodeSafetensors, parseSafetensors, saveSafetensors } from "../src/nn/safetensors.ts";
import { parseTrainingCheckpoint, saveTrainingCheckpoint } from "../src/nn/training_checkpoint.ts";

/**
 * Single-device training with the documented defaults of `train`: the tiny
 * GPT (seq-len 16, dim 16, 2 heads, `layers` blocks, seed S), AdamW lr 0.01
 * without weight decay, batches from Rng(S + 1) of max(8, M) sequences.
 */
async function singleDevice(
  steps: number,
  seed: number,
  batch: number,
  layers: number,
  lrSchedule?: LrScheduleSpec,
) {
  const be = new CpuBackend();
  const tok = CharTokenizer.fromText(TINY_CORPUS);
  const tokens = tok.encode(TINY_CORPUS);
  const model = createTinyGPT(
    { vocabSize: tok.vocabSize, seqLen: 16, dim: 16, heads: 2, layers, seed },
    be,
  );
  const opt = new AdamW(model.parameters(), {
    lr: 0.01,
    weightDecay: 0,
    ...(lrSchedule === undefined ? {} : { lrSchedule }),
  });
  const rng = new Rng(seed + 1);
  const losses: number[] = [];
  for (let s = 0; s < steps; s++) {
    const b = sampleBatch(tokens, batch, 16, rng);
    const x = be.fromData(b.ids, b.shape), t = be.fromData(b.targets, b.shape);
    const y = model.forward(x);
    const { loss, grad } = crossEntropyLoss(y, t);
    model.backward(grad).dispose();
    opt.step();
    model.zeroGrad();
    losses.push((await loss.toArray())[0]);
    for (const z of [x, t, y, loss, grad]) z.dispose();
  }
  let paramSum = 0, paramSumSq = 0;
  for (const p of model.parameters()) {
    for (const v of await p.value.toArray()) {
      paramSum += v;
      paramSumSq += v * v;
    }
  }
  opt.dispose();
  model.dispose();
  return { losses, paramSum, paramSumSq };
}

function parseJsonLines(out: string) {
  const lines = out.trim().split("\n").map((l) => JSON.parse(l));
  const last = lines.pop();
  return { steps: lines, last };
}

// Tolerances: losses agree within 1e-6 relative; the parameter sums within
// 5e-5 (AdamW turns the rounding noise on zero-gradient entries, e.g. the
// attention's key bias, into ±lr steps: see the pipeline model tests; the
// CPU backend's f32 sums make that noise larger than its f64 sums did:
// measured 1.2e-5, 1e-5 was the bound then).
function assertAgrees(
  got: ReturnType<typeof parseJsonLines>,
  want: Awaited<ReturnType<typeof singleDevice>>,
) {
  got.steps.forEach((s, i) => {
    const rel = Math.abs(s.loss - want.losses[i]) / want.losses[i];
    assert.ok(rel <= 1e-6, `step ${i + 1}: loss ${s.loss} vs ${want.losses[i]}`);
  });
  for (const k of ["paramSum", "paramSumSq"] as const) {
    const rel = Math.abs(got.last[k] - want[k]) / Math.abs(want[k]);
    assert.ok(rel <= 5e-5, `${k}: ${got.last[k]} vs ${want[k]} (rel ${rel})`);
  }
}

const COMMON = ["--steps", "3", "--seed", "4", "--backend", "cpu", "--json"];

Deno.test("cli train --json: one line per step and the parameter sums; P = 2 in workers equals single-device training", async () => {
  const r = await cli(
    "train",
    "--schedule",
    "1f1b",
    "--stages",
    "2",
    "--microbatches",
    "4",
    ...COMMON,
  );
  assert.equal(r.code, 0, r.err);
  assert.equal(liveWorkers(), 0, "every worker ended");
  const got = parseJsonLines(r.out);
  assert.equal(got.steps.length, 3);
  got.steps.forEach((s, i) => {
    assert.deepEqual(Object.keys(s), ["step", "loss", "bubble", "makespanMs", "lr"]);
    assert.equal(s.lr, 0.01, "constant lr by default");
    assert.equal(s.step, i + 1);
    assert.ok(s.bubble >= 0 && s.bubble < 1 && s.makespanMs > 0);
  });
  assert.deepEqual(Object.keys(got.last), ["paramSum", "paramSumSq"]);
  assertAgrees(got, await singleDevice(3, 4, 8, 2));
});

Deno.test("cli train --threads: each rank's CPU threads change nothing of the training, bit for bit; 0 is refused", async () => {
  // A model wide enough that its kernels share out across threads.
  const args = [
    "train",
    "--schedule",
    "1f1b",
    "--ranks",
    "2",
    "--microbatches",
    "2",
    "--in-process",
  ];
  const wide = ["--dim", "64", "--seq-len", "32", "--batch", "16", ...COMMON];
  const one = await cli(...args, "--threads", "1", ...wide);
  const three = await cli(...args, "--threads", "3", ...wide);
  assert.equal(one.code, 0, one.err);
  assert.equal(three.code, 0, three.err);
  const [a, b] = [parseJsonLines(one.out), parseJsonLines(three.out)];
  assert.deepEqual(b.steps.map((x) => x.loss), a.steps.map((x) => x.loss));
  assert.deepEqual(b.last, a.last);
  const bad = await cli(...args, "--threads", "0", ...COMMON);
  assert.equal(bad.code, 2);
  assert.match(bad.err, /--threads must be a positive integer, got "0"/);
});

Deno.test("cli train --stages 1 is single-device training; P = 4 (ZB-H1) agrees too", async () => {
  const want = await singleDevice(3, 4, 8, 2);
  const one = await cli(
    "train",
    "--schedule",
    "1f1b",
    "--stages",
    "1",
    "--microbatches",
    "1",
    ...COMMON,
  );
  assert.equal(one.code, 0, one.err);
  assertAgrees(parseJsonLines(one.out), want);
  const four = await cli(
    "train",
    "--schedule",
    "zb-h1",
    "--stages",
    "4",
    "--microbatches",
    "8",
    ...COMMON,
  );
  assert.equal(four.code, 0, four.err);
  assertAgrees(parseJsonLines(four.out), want);
  assert.equal(liveWorkers(), 0);
});

Deno.test("cli train (text): a header, one line per step, the parameter sums and a trace file", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const r = await cli(
      "train",
      "--schedule",
      "zb-v",
      "--stages",
      "2",
      "--microbatches",
      "4",
      "--steps",
      "2",
      "--backend",
      "cpu",
      "--in-process",
      "--trace",
      `${dir}/t.svg`,
    );
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /pipeline: zb-v, 2 ranks × 2 stages, 4 micro-batches/);
    assert.match(r.out, /step 1\/2 {2}loss \d\.\d{4} {2}bubble [\d.]+% {2}makespan [\d.]+ ms/);
    assert.match(r.out, /step 2\/2 /);
    assert.match(r.out, /parameters: sum -?[\d.]+, sum of squares [\d.]+/);
    assert.match(await Deno.readTextFile(`${dir}/t.svg`), /^<svg/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("cli train: bad flags exit with code 2 naming the flag, before any worker starts", async () => {
  const base = ["--schedule", "1f1b", "--stages", "2", "--microbatches", "4", "--backend", "cpu"];
  const cases: [string[], RegExp][] = [
    [["train", "--stages", "2", "--microbatches", "4"], /--schedule is required/],
    [
      ["train", "--schedule", "nope", "--stages", "2", "--microbatches", "4"],
      /--schedule must be one of/,
    ],
    [
      ["train", "--schedule", "1f1b", "--stages", "0", "--microbatches", "4"],
      /--stages must be a positive integer, got "0"/,
    ],
    [["train", "--schedule", "1f1b", "--stages", "2"], /--microbatches is required/],
    [["train", ...base, "--steps", "x"], /--steps must be a positive integer, got "x"/],
    [["train", ...base, "--seed", "1.5"], /--seed must be an integer, got "1.5"/],
    [["train", ...base.slice(0, -1), "tpu"], /--backend must be cpu, webgpu or auto, got "tpu"/],
    [["train", ...base, "--lr", "-1"], /--lr must be a finite number > 0, got "-1"/],
    [["train", ...base, "--heads", "3"], /--heads must divide --dim, got --heads 3 and --dim 16/],
    [["train", ...base, "--batch", "2"], /--batch 2 is smaller than --microbatches 4/],
    [
      ["train", "--schedule", "zb-v", "--stages", "4", "--microbatches", "8", "--layers", "1"],
      /--layers 1 gives 4 layers .* fewer than the 8 stages/,
    ],
    [
      ["train", "--schedule", "dualpipe-v", "--stages", "4", "--microbatches", "4"],
      /dualpipe-v needs microBatches >= 2 × ranks/,
    ],
    [["train", ...base, "--foo"], /unknown flag --foo for "train"/],
  ];
  for (const [args, re] of cases) {
    const r = await cli(...args);
    assert.equal(r.code, 2, `${args.join(" ")}: ${r.err}`);
    assert.match(r.err, re);
    assert.equal(liveWorkers(), 0);
  }
  const help = await cli("train", "--help");
  assert.equal(help.code, 0);
  assert.match(help.out, /Usage: cli\.ts train/);
  assert.match((await cli("--help")).out, /train +train the tiny GPT/);
});

Deno.test("cli train: sizes whose memory is absurd are refused before any allocation, naming flag and bytes", async () => {
  const base = [
    "train",
    "--schedule",
    "1f1b",
    "--ranks",
    "2",
    "--microbatches",
    "2",
    "--backend",
    "cpu",
  ];
  for (
    const [flags, want] of [
      [["--batch", "2000000000"], /--batch 2000000000 .*would need [\d.]+ TiB/],
      [["--dim", "100000"], /--dim 100000: one array would need [\d.]+ GiB/],
      [
        ["--dim", "4096", "--layers", "400"],
        /--dim 4096 --layers 400: training would need about [\d.]+ TiB/,
      ],
    ] as const
  ) {
    const r = await cli(...base, ...flags);
    assert.equal(r.code, 2, r.err);
    assert.match(r.err, want);
  }
});

const TRAIN = ["train", "--schedule", "zb-h1", "--ranks", "2", "--microbatches", "4"];
const QUIET = ["--seed", "3", "--backend", "cpu", "--json"];
// A model small enough for a run of many steps.
const SMALL = ["--layers", "1", "--dim", "16", "--heads", "2"];

Deno.test("cli train --lr-schedule: each step line carries the schedule's lr (PyTorch's convention), and training equals single-device AdamW with that schedule", async () => {
  const cases: [string[], LrScheduleSpec][] = [
    [[
      "--lr-schedule",
      "warmup-cosine",
      "--warmup-steps",
      "2",
      "--decay-steps",
      "3",
      "--min-lr",
      "0.001",
    ], {
      kind: "warmup-cosine",
      warmupSteps: 2,
      decaySteps: 3,
      minLr: 0.001,
    }],
    [["--lr-schedule", "warmup-cosine", "--warmup-steps", "1"], {
      kind: "warmup-cosine",
      warmupSteps: 1,
      decaySteps: 4, // default: to the run's last step (5 − 1)
    }],
    [["--lr-schedule", "step", "--decay-steps", "2", "--lr-gamma", "0.5"], {
      kind: "step",
      stepSize: 2,
      gamma: 0.5,
    }],
    [["--lr-schedule", "step", "--decay-steps", "2", "--warmup-steps", "2"], {
      kind: "sequential",
      schedules: [{ kind: "linear", steps: 2 }, { kind: "step", stepSize: 2 }],
      milestones: [2],
    }],
    [["--warmup-steps", "3"], { kind: "linear", steps: 3 }],
  ];
  for (const [flags, schedule] of cases) {
    const r = await cli(...TRAIN, ...QUIET, "--steps", "5", "--in-process", ...flags);
    assert.equal(r.code, 0, r.err);
    const got = parseJsonLines(r.out);
    assert.deepEqual(
      got.steps.map((s) => s.lr),
      [0, 1, 2, 3, 4].map((t): number => lrAt(schedule, 0.01, t)),
      flags.join(" "),
    );
    assertAgrees(got, await singleDevice(5, 3, 8, 2, schedule));
  }
});

Deno.test("cli train --save-checkpoint then --resume: the resumed run starts at step N + 1 and prints the same lines and parameter sums as N + M steps in one run", async () => {
  const dir = await Deno.makeTempDir();
  const ck = `${dir}/run.safetensors`;
  const sched = ["--lr-schedule", "warmup-cosine", "--warmup-steps", "1", "--decay-steps", "4"];
  try {
    const whole = await cli(...TRAIN, ...QUIET, ...sched, "--steps", "5", "--in-process");
    assert.equal(whole.code, 0, whole.err);
    const first = await cli(...TRAIN, ...QUIET, ...sched, "--steps", "3", "--save-checkpoint", ck);
    assert.equal(first.code, 0, first.err);
    const file = parseTrainingCheckpoint(await Deno.readFile(ck));
    assert.equal(file.step, 3);
    assert.ok(file.data.batch_rng !== undefined, "the batch order is stored");
    // Resumed in workers, with other --seed (weights and batches come from the file).
    const rest = await cli(
      ...TRAIN,
      ...QUIET.slice(2),
      "--seed",
      "99",
      ...sched,
      "--steps",
      "2",
      "--resume",
      ck,
    );
    assert.equal(rest.code, 0, rest.err);
    assert.equal(liveWorkers(), 0);
    const w = parseJsonLines(whole.out),
      a = parseJsonLines(first.out),
      b = parseJsonLines(rest.out);
    assert.deepEqual(b.steps.map((s) => s.step), [4, 5], "step numbers continue");
    const strip = (s: { step: number; loss: number; lr: number }) => [s.step, s.loss, s.lr];
    assert.deepEqual(
      [...a.steps, ...b.steps].map(strip),
      w.steps.map(strip),
      "losses and lrs, exactly",
    );
    assert.deepEqual(b.last, w.last, "parameter sums, exactly");
    // The text mode says where it resumed.
    const text = await cli(
      ...TRAIN,
      "--backend",
      "cpu",
      "--in-process",
      ...sched,
      "--steps",
      "1",
      "--resume",
      ck,
    );
    assert.equal(text.code, 0, text.err);
    assert.match(text.out, new RegExp(`resumed from ${ck.replace(/[.]/g, "\\.")} at step 3`));
    assert.match(text.out, /step 4\/4 {2}loss \d\.\d{4} {2}bubble .* {2}lr \d\.\d{3}e-\d\n/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("cli train: bad lr-schedule and checkpoint flags exit with code 2 naming the flag and the rule, before any worker starts", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const weightsOnly = `${dir}/weights.safetensors`;
    const be = new CpuBackend();
    const tok = CharTokenizer.fromText(TINY_CORPUS);
    const net = createTinyGPT({
      vocabSize: tok.vocabSize,
      seqLen: 16,
      dim: 16,
      heads: 2,
      layers: 2,
      seed: 1,
    }, be);
    await Deno.writeFile(weightsOnly, await saveSafetensors(net));
    // A training checkpoint of the same model written without the CLI's batch order.
    const foreign = `${dir}/foreign.safetensors`;
    const opt = new AdamW(net.parameters(), { lr: 0.01, weightDecay: 0 });
    await Deno.writeFile(foreign, await saveTrainingCheckpoint(net, opt));
    opt.dispose();
    net.dispose();
    const ck = `${dir}/ck.safetensors`;
    assert.equal(
      (await cli(...TRAIN, ...QUIET, "--steps", "1", "--in-process", "--save-checkpoint", ck)).code,
      0,
    );
    const cases: [string[], RegExp][] = [
      [
        ["--lr-schedule", "linear"],
        /--lr-schedule must be constant, warmup-cosine or step, got "linear"/,
      ],
      [["--min-lr", "0.1"], /--min-lr applies to --lr-schedule warmup-cosine only, not constant/],
      [
        ["--decay-steps", "3"],
        /--decay-steps applies to --lr-schedule warmup-cosine or step, not constant/,
      ],
      [["--lr-schedule", "step"], /--lr-schedule step needs --decay-steps N/],
      [
        ["--lr-schedule", "step", "--decay-steps", "2", "--min-lr", "0"],
        /--min-lr applies to --lr-schedule warmup-cosine only, not step/,
      ],
      [
        ["--lr-schedule", "warmup-cosine", "--lr-gamma", "0.5"],
        /--lr-gamma applies to --lr-schedule step only/,
      ],
      [["--warmup-steps", "-1"], /--warmup-steps must be an integer >= 0, got "-1"/],
      [
        ["--lr-schedule", "warmup-cosine", "--decay-steps", "0"],
        /--decay-steps must be a positive integer, got "0"/,
      ],
      [["--resume", `${dir}/none.safetensors`], /--resume: cannot read .*none\.safetensors/],
      [
        ["--resume", weightsOnly],
        /--resume .*weights\.safetensors: checkpoint: __metadata__\.format must be "conveyor-training-checkpoint"/,
      ],
      [
        ["--resume", ck, "--dim", "8"],
        /--resume .*ck\.safetensors: checkpoint: tensor model\.\S+ has shape/,
      ],
      [["--save-checkpoint", ""], /--save-checkpoint needs a path/],
      [
        ["--resume", foreign],
        /--resume .*foreign\.safetensors: no batch order: it has no data\.batch_rng \(not written by cli\.ts train\)/,
      ],
    ];
    for (const [flags, re] of cases) {
      const r = await cli(...TRAIN, "--backend", "cpu", ...flags);
      assert.equal(r.code, 2, `${flags.join(" ")}: ${r.err}`);
      assert.match(r.err, re, flags.join(" "));
      assert.equal(liveWorkers(), 0);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("cli train --save-checkpoint without read and write access to its folder is refused before training (exit 2), as deno run reports it", async () => {
  const root = new URL("../", import.meta.url).pathname;
  const dir = await Deno.makeTempDir();
  try {
    const r = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "--quiet",
        `--allow-read=${root}`,
        `--allow-write=${dir}`,
        `${root}cli.ts`,
        ...TRAIN,
        "--backend",
        "cpu",
        "--json",
        "--save-checkpoint",
        `${dir}/ck.safetensors`,
      ],
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).output();
    const err = new TextDecoder().decode(r.stderr);
    assert.equal(r.code, 2, err);
    assert.equal(new TextDecoder().decode(r.stdout), "", "no step ran");
    assert.match(
      err,
      /--save-checkpoint .*ck\.safetensors needs read access to .* \(run with --allow-read=/,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("cli train --resume refuses a checkpoint holding a NaN weight, an infinite or negative exp_avg_sq, or a flipped bit: exit 2 naming the tensor (and the index), before any worker starts", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const ck = `${dir}/ck.safetensors`;
    const saved = await cli(
      ...TRAIN,
      ...QUIET,
      "--steps",
      "1",
      "--in-process",
      "--save-checkpoint",
      ck,
    );
    assert.equal(saved.code, 0, saved.err);
    const good = await Deno.readFile(ck);
    const f = parseSafetensors(good);
    const first = [...f.tensors.keys()][0].slice("model.".length);
    const withValue = (tensor: string, index: number, value: number) =>
      encodeSafetensors(
        [...f.tensors].map(([name, e]) => {
          const data = e.data.slice();
          if (name === tensor) data[index] = value;
          return { name, shape: e.shape, data };
        }),
        { metadata: f.metadata },
      );
    const flipped = good.slice();
    flipped[flipped.length - 3] ^= 0x04;
    const lastTensor = [...f.tensors.keys()].at(-1)!;
    const esc = (s: string) => s.replace(/\./g, "\\.");
    const cases: [Uint8Array, RegExp][] = [
      [
        withValue(`model.${first}`, 7, NaN),
        new RegExp(`tensor model\\.${esc(first)} holds NaN at index 7; weights must be finite`),
      ],
      [
        withValue(`optim.${first}.exp_avg_sq`, 0, Infinity),
        /exp_avg_sq holds Infinity at index 0; optimizer state must be finite/,
      ],
      [
        withValue(`optim.${first}.exp_avg_sq`, 2, -1),
        /exp_avg_sq holds -1 at index 2; exp_avg_sq .* is never negative/,
      ],
      [flipped, new RegExp(`tensor ${esc(lastTensor)} fails its checksum`)],
    ];
    for (const [bytes, re] of cases) {
      const path = `${dir}/bad.safetensors`;
      await Deno.writeFile(path, bytes);
      const r = await cli(...TRAIN, ...QUIET, "--steps", "1", "--resume", path);
      assert.equal(r.code, 2, r.err);
      assert.match(r.err, /--resume .*bad\.safetensors: checkpoint: /);
      assert.match(r.err, re);
      assert.equal(r.out, "", "nothing trained");
      assert.equal(liveWorkers(), 0);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test('cli train: a skipped step (non-finite loss) says so (--json: "skipped": true and where; text: "skipped (non-finite loss)") and still counts: 2 steps, a checkpoint and 2 resumed steps number and end as 4 steps in one run', async () => {
  const dir = await Deno.makeTempDir();
  const ck = `${dir}/run.safetensors`;
  // An lr this large sends the weights past f32 after step 1: every later loss is NaN.
  const huge = ["--lr", "1e30", "--in-process"];
  try {
    const whole = await cli(...TRAIN, ...QUIET, ...huge, "--steps", "4");
    assert.equal(whole.code, 0, whole.err);
    const w = parseJsonLines(whole.out);
    assert.deepEqual(w.steps.map((s) => [s.step, s.skipped ?? false]), [
      [1, false],
      [2, true],
      [3, true],
      [4, true],
    ]);
    assert.deepEqual(Object.keys(w.steps[0]), ["step", "loss", "bubble", "makespanMs", "lr"]);
    for (const s of w.steps.slice(1)) {
      assert.equal(s.loss, null);
      assert.equal(s.nonFinite.what, "loss");
      assert.ok(Number.isInteger(s.nonFinite.stage));
    }
    const first = await cli(...TRAIN, ...QUIET, ...huge, "--steps", "2", "--save-checkpoint", ck);
    assert.equal(first.code, 0, first.err);
    const file = parseTrainingCheckpoint(await Deno.readFile(ck));
    assert.deepEqual([file.step, file.optimizerStep, file.skippedSteps], [2, 1, 1]);
    const rest = await cli(...TRAIN, ...QUIET, ...huge, "--steps", "2", "--resume", ck);
    assert.equal(rest.code, 0, rest.err);
    const a = parseJsonLines(first.out), b = parseJsonLines(rest.out);
    const strip = (s: { step: number; skipped?: boolean; lr: number }) => [s.step, s.skipped, s.lr];
    assert.deepEqual([...a.steps, ...b.steps].map(strip), w.steps.map(strip), "numbering, skips");
    assert.deepEqual(b.last, w.last, "parameter sums, exactly");
    const text = await cli(...TRAIN, "--seed", "3", "--backend", "cpu", ...huge, "--steps", "2");
    assert.equal(text.code, 0, text.err);
    assert.match(text.out, /step 1\/2 {2}loss \d\.\d{4} {2}bubble/);
    assert.match(text.out, /step 2\/2 {2}loss NaN {2}skipped \(non-finite loss\) {2}bubble/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("cli train --resume of a crafted checkpoint header listing 100001 tensors is refused at once (exit 2, naming the limit), before its JSON is parsed", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const meta = {
      format: "conveyor-training-checkpoint",
      format_version: "1",
      step: "0",
      optimizer: JSON.stringify({ kind: "adamw", lr: 0.01, weightDecay: 0 }),
    };
    const parts = [`"__metadata__":${JSON.stringify(meta)}`];
    for (let i = 0; i <= 100_000; i++) {
      parts.push(`"model.p${i}":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}`);
    }
    const json = new TextEncoder().encode(`{${parts.join(",")}}`);
    const file = new Uint8Array(8 + json.length);
    new DataView(file.buffer).setBigUint64(0, BigInt(json.length), true);
    file.set(json, 8);
    const path = `${dir}/crafted.safetensors`;
    await Deno.writeFile(path, file);
    const t0 = performance.now();
    const r = await cli(...TRAIN, ...QUIET, "--steps", "1", "--resume", path);
    const ms = performance.now() - t0;
    assert.equal(r.code, 2, r.err);
    assert.match(
      r.err,
      /--resume .*crafted\.safetensors: checkpoint: not a valid safetensors file: safetensors: the header lists more than 100000 tensors \(at the entry of "model\.p100000"\); refused before parsing it/,
    );
    assert.ok(ms < 30_000, `refused in ${ms.toFixed(0)} ms`); // liveness: a loaded machine is slow
    assert.equal(liveWorkers(), 0);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("cli train --data-parallel 2 (D·P = 4 workers) equals single-device training; an uneven batch is refused first", async () => {
  const r = await cli(
    "train",
    "--schedule",
    "zb-h1",
    "--ranks",
    "2",
    "--microbatches",
    "2",
    "--data-parallel",
    "2",
    ...COMMON,
  );
  assert.equal(r.code, 0, r.err);
  assert.equal(liveWorkers(), 0, "every worker ended");
  // Default batch max(8, M·D) = 8: shards of 4 sequences.
  assertAgrees(parseJsonLines(r.out), await singleDevice(3, 4, 8, 2));
  const bad = await cli(
    "train",
    "--schedule",
    "1f1b",
    "--ranks",
    "1",
    "--microbatches",
    "2",
    "--data-parallel",
    "2",
    "--batch",
    "7",
    ...COMMON,
  );
  assert.equal(bad.code, 2, bad.err);
  assert.match(bad.err, /--batch 7 cannot be cut into 2 equal shards/);
});

Deno.test("train: with --backend auto (the default) the pipeline line names the backend the ranks chose", async () => {
  // A child process: backend "auto" looks for a WebGPU adapter, kept out of the test process.
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      new URL("../cli.ts", import.meta.url).pathname,
      "train",
      "--schedule",
      "1f1b",
      "--stages",
      "2",
      "--microbatches",
      "2",
      "--steps",
      "1",
      "--in-process",
    ],
    env: { NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(out.stdout);
  assert.ok(out.success, new TextDecoder().decode(out.stderr));
  assert.match(text, /, backend auto: (cpu|webgpu), in-process\n/);
});

Deno.test("cli train without read access to the package: one line naming --allow-read and --in-process, exit code 2", async () => {
  const cliPath = new URL("../cli.ts", import.meta.url).pathname;
  const root = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
  const r = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--no-prompt",
      cliPath,
      "train",
      "--schedule",
      "1f1b",
      "--ranks",
      "2",
      "--microbatches",
      "2",
      "--steps",
      "1",
      "--backend",
      "cpu",
    ],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const err = new TextDecoder().decode(r.stderr);
  assert.equal(r.code, 2, err);
  assert.match(
    err,
    new RegExp(
      `^error: the worker ranks load their modules from ${root}, which this script may not read: ` +
        `run with --allow-read=${root} \\(or run every rank in this thread: rankGroup: "in-process", ` +
        `or --in-process on cli\\.ts\\)`,
      "m",
    ),
  );
});

Deno.test("cli train: a Ctrl-C (SIGINT) ends the window running, writes the checkpoint and the trace (the last step when --trace-step was not reached) and exits 130 naming the step; --resume continues from it", async () => {
  const dir = await Deno.makeTempDir();
  const ck = `${dir}/run.safetensors`;
  try {
    const { code, out, err } = await interruptAfter(
      [
        "run",
        "-A",
        new URL("../cli.ts", import.meta.url).pathname,
        ...TRAIN,
        ...QUIET,
        ...SMALL,
        "--steps",
        "2000",
        "--save-checkpoint",
        ck,
        // A step the interrupted run does not reach: the last one is drawn instead.
        "--trace",
        `${dir}/t.svg`,
        "--trace-step",
        "1999",
      ],
      '"step":2,',
    );
    assert.equal(code, 130, err);
    const at = Number(/interrupted \(Ctrl-C\) after step (\d+) of 2000/.exec(err)?.[1]);
    assert.ok(at >= 2 && at < 2000, err);
    assert.equal(at % 10, 0, "a window of 10 steps ends");
    assert.equal(parseJsonLines(out).steps.length, at, "a line per step trained");
    assert.equal(parseTrainingCheckpoint(await Deno.readFile(ck)).step, at);
    assert.match(err, /--trace-step 1999 was not reached: the last step is drawn/);
    assert.match(await Deno.readTextFile(`${dir}/t.svg`), new RegExp(`step ${at} \\(index`));
    const rest = await cli(
      ...TRAIN,
      ...QUIET,
      ...SMALL,
      "--steps",
      "1",
      "--in-process",
      "--resume",
      ck,
    );
    assert.equal(rest.code, 0, rest.err);
    assert.deepEqual(parseJsonLines(rest.out).steps.map((s) => s.step), [at + 1]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
