import assert from "node:assert/strict";
import { Rng } from "../../../src/tensor/random.ts";
import { CharTokenizer } from "../../../src/nn/char_tokenizer.ts";
import { TINY_CORPUS } from "../../../src/nn/data/tiny_corpus.ts";
import { sampleBatch } from "../../../src/nn/sample_batch.ts";
import type { OptimizerSpec } from "../../../src/nn/optimizer_spec.ts";
import type {
  PipelineParallelModelOptions,
  StepResult,
  TrainingBatch,
} from "../../../src/pipeline/model/pipeline_parallel_model.ts";
import type { StepContext, TrainCallback } from "../../../src/pipeline/model/train_callback.ts";
import { cpuModel, GPT, tokenBatches } from "./_reference_training.ts";

const SPEC: OptimizerSpec = {
  kind: "adamw",
  lr: 1e-2,
  lrSchedule: { kind: "warmup-cosine", warmupSteps: 2, decaySteps: 10 },
};
const STEPS = 12;
const batches = tokenBatches(STEPS, 8, 5);
const held = tokenBatches(1, 8, 99)[0];

function build(options: Partial<PipelineParallelModelOptions> = {}) {
  return cpuModel({ schedule: "zb-h1", microBatches: 4, optimizer: SPEC, ...options });
}

interface Log {
  pulled: number;
  returned: boolean;
}

function* syncSource(list: readonly TrainingBatch[], log: Log) {
  try {
    for (const b of list) {
      log.pulled++;
      yield b;
    }
  } finally {
    log.returned = true;
  }
}

async function* asyncSource(list: readonly TrainingBatch[], log: Log) {
  try {
    for (const b of list) {
      await new Promise((r) => setTimeout(r, 1)); // a loader that takes time
      log.pulled++;
      yield b;
    }
  } finally {
    log.returned = true;
  }
}

type Kind = "array" | "sync" | "async";
function source(kind: Kind, list: readonly TrainingBatch[], log: Log) {
  if (kind === "array") {
    log.pulled = list.length;
    return list;
  }
  return kind === "sync" ? syncSource(list, log) : asyncSource(list, log);
}

// The definition: one step at a time (window 1), evaluating after every step.
const reference = await (async () => {
  await using m = await build();
  const evals: number[] = [];
  for (const b of batches) {
    await m.train([b], { window: 1 });
    evals.push((await m.evaluate(held)).loss);
  }
  return { evals, bytes: await m.checkpointBytes() };
})();

Deno.test("exact steps: a callback's every, validation and onStep see the model of exactly their step, and the source pulled up to it, for arrays, iterables and async iterables in any window", async () => {
  for (const kind of ["array", "sync", "async"] as const) {
    for (const window of [undefined, 3, 8]) {
      const label = `${kind}, window ${window ?? "default"}`;
      const log = { pulled: 0, returned: false };
      await using m = await build();
      const seen: [number, number, number, boolean][] = []; // step, eval loss, pulled ahead, exact
      const validations: [number, number][] = [];
      const every5: TrainCallback = {
        every: 5,
        onStepEnd: async (s, c) => {
          if ((s.step + 1) % 5 !== 0) return;
          seen.push([s.step, (await m.evaluate(held)).loss, log.pulled - (s.step + 1), c.exact]);
        },
      };
      const watch: TrainCallback = {
        onStepEnd: (s, c) => {
          if (c.validation !== undefined) validations.push([s.step, c.validation.loss]);
        },
      };
      const r = await m.train(source(kind, batches, log), {
        ...(window === undefined ? {} : { window }),
        validation: { batch: held, every: 4 },
        callbacks: [every5, watch],
      });
      assert.equal(r.steps.length, STEPS, label);
      assert.deepEqual(seen, [
        [4, reference.evals[4], kind === "array" ? STEPS - 5 : 0, true],
        [9, reference.evals[9], kind === "array" ? STEPS - 10 : 0, true],
      ], label);
      assert.deepEqual(validations, [3, 7, 11].map((k) => [k, reference.evals[k]]), label);
      assert.deepEqual(await m.checkpointBytes(), reference.bytes, `${label}: same training`);
    }
  }
});

Deno.test("exact steps: onStep evaluates at every step the model of that step, whatever the window (the issue's 'evaluate every 10 steps' with a window of 4)", async () => {
  for (const kind of ["sync", "async"] as const) {
    await using m = await build();
    const log = { pulled: 0, returned: false };
    const evals: number[] = [];
    const exact: boolean[] = [];
    await m.train(source(kind, batches, log), {
      window: 4,
      onStep: async (s, c) => {
        exact.push(c.exact && log.pulled === s.step + 1);
        if ((s.step + 1) % 3 === 0) evals.push((await m.evaluate(held)).loss);
      },
    });
    assert.deepEqual(evals, [2, 5, 8, 11].map((k) => reference.evals[k]), kind);
    assert.ok(exact.every((x) => x), `${kind}: ${exact}`);
  }
});

Deno.test("exact steps: a callback that uses the model at a step it did not name (its window ran on) is refused naming both steps; the model stays usable", async () => {
  await using m = await build();
  await assert.rejects(
    m.train(batches.slice(0, 4), {
      window: 4,
      callbacks: [{ onStepEnd: async () => void await m.evaluate(held) }],
    }),
    (e: Error) => {
      assert.match(
        e.message,
        /^evaluate from a train\(\) hook of step 0: the model stands after step 3 .*names its steps with every/,
      );
      return true;
    },
  );
  assert.equal(m.stepCount, 4);
  // At the window's last step the model does stand there: allowed, and exact.
  const flags: boolean[] = [];
  await m.train(batches.slice(4, 8), {
    callbacks: [{
      onStepEnd: async (_s, c) => {
        flags.push(c.exact);
        if (c.exact) await m.evaluate(held);
      },
    }],
  });
  assert.deepEqual(flags, [false, false, false, true]);
  for (const call of ["checkpointBytes", "saveSafetensors", "parameterStats", "predict"] as const) {
    const at = m.stepCount;
    await assert.rejects(
      m.train(batches.slice(0, 2), {
        callbacks: [{
          onStepEnd: async () =>
            void await (call === "predict"
              ? m.predict({ inputs: held.inputs, shape: held.shape })
              : m[call]()),
        }],
      }),
      new RegExp(`^Error: ${call} from a train\\(\\) hook of step ${at}: .* after step ${at + 1} `),
    );
  }
});

Deno.test("exact steps: a checkpoint taken inside the loop (onStep or a callback's every) resumes bit for bit with an async function* source, as the README's recipe writes it", async () => {
  const tok = CharTokenizer.fromText(TINY_CORPUS);
  const tokens = tok.encode(TINY_CORPUS);
  const TOTAL = 14, AT = 6; // not a multiple of the default window of 4
  async function* draw(rng: Rng, from: number, to: number) {
    for (let s = from; s < to; s++) {
      await new Promise((r) => setTimeout(r, 1));
      yield sampleBatch(tokens, 8, GPT.seqLen, rng); // fits train directly
    }
  }
  const whole = await (async () => {
    await using m = await build();
    const r = await m.train(draw(new Rng(2), 0, TOTAL));
    return { losses: r.steps.map((s) => s.loss), bytes: await m.checkpointBytes() };
  })();
  const hooks: [string, (save: (s: StepResult) => Promise<void>) => object][] = [
    [
      "onStep",
      (save) => ({ onStep: (s: StepResult) => (s.step + 1 === AT ? save(s) : undefined) }),
    ],
    ["a callback with every", (save) => ({ callbacks: [{ every: AT, onStepEnd: save }] })],
  ];
  for (const [label, options] of hooks) {
    let saved: Uint8Array | null = null;
    {
      await using m = await build();
      const rng = new Rng(2);
      await m.train(draw(rng, 0, TOTAL), {
        ...options(async (s) => {
          if (saved === null && s.step + 1 === AT) {
            saved = await m.checkpointBytes({ data: { rng: JSON.stringify(rng.state()) } });
          }
        }),
      });
    }
    assert.ok(saved !== null, label);
    await using resumed = await build({ resume: saved! });
    assert.equal(resumed.stepCount, AT, label);
    const rng = Rng.fromState(JSON.parse(resumed.resumedFrom!.data.rng));
    const rest = await resumed.train(draw(rng, AT, TOTAL));
    assert.deepEqual(rest.steps.map((s) => s.loss), whole.losses.slice(AT), `${label}: losses`);
    assert.deepEqual(await resumed.checkpointBytes(), whole.bytes, `${label}: bit for bit`);
  }
});

Deno.test("exact steps: context.stop() at a named step runs no later step; the source is closed; train resolves with stopped and the callbacks' onTrainEnd", async () => {
  for (const kind of ["array", "sync", "async"] as const) {
    await using m = await build();
    const log = { pulled: 0, returned: false };
    const order: string[] = [];
    const stopper: TrainCallback = {
      every: 5,
      onTrainBegin: (i) => void order.push(`begin ${i.firstStep} ${i.steps} ${i.localRank}`),
      onStepEnd: (s: StepResult, c: StepContext) => {
        if (s.step === 4) c.stop("enough");
      },
      onTrainEnd: (r) => void order.push(`end ${r.steps.length} ${r.stopped}`),
    };
    const r = await m.train(source(kind, batches, log), { window: 8, callbacks: [stopper] });
    assert.deepEqual(r.steps.map((s) => s.step), [0, 1, 2, 3, 4], kind);
    assert.deepEqual([r.stopped, r.aborted, m.stepCount], ["enough", false, 5]);
    assert.deepEqual(order, [
      `begin 0 ${kind === "array" ? STEPS : undefined} null`,
      "end 5 enough",
    ]);
    if (kind !== "array") {
      assert.equal(log.pulled, 5, `${kind}: nothing pulled past the stop`);
      assert.ok(log.returned, `${kind}: the source was closed`);
    }
  }
  // A stop at a step that is not exact takes effect after its window.
  await using m = await build();
  const r = await m.train(batches, {
    window: 4,
    callbacks: [{ onStepEnd: (s, c) => s.step === 1 ? c.stop("later") : undefined }],
  });
  assert.deepEqual([r.steps.length, r.stopped], [4, "later"]);
});

Deno.test("train: an empty array, an empty generator and an empty async generator all run zero steps alike (callbacks begin and end)", async () => {
  await using m = await build();
  const empties: [string, () => unknown][] = [
    ["[]", () => []],
    ["function*", function* () {}],
    ["async function*", async function* () {}],
  ];
  for (const [label, make] of empties) {
    const calls: string[] = [];
    const r = await m.train(make() as never, {
      callbacks: [{
        onTrainBegin: () => void calls.push("begin"),
        onStepEnd: () => void calls.push("step"),
        onTrainEnd: () => void calls.push("end"),
      }],
    });
    assert.deepEqual(
      [r.steps.length, r.aborted, r.makespanMs, r.events.length, r.stopped],
      [0, false, 0, 0, undefined],
      label,
    );
    assert.deepEqual(calls, ["begin", "end"], label);
  }
  assert.equal(m.stepCount, 0);
});

Deno.test("exact steps: a callback that throws in onTrainBegin stops train before any batch is pulled", async () => {
  await using m = await build();
  const log = { pulled: 0, returned: false };
  await assert.rejects(
    m.train(syncSource(batches, log), {
      callbacks: [{
        onTrainBegin: () => {
          throw new TypeError("metrics.csv: the folder does not exist");
        },
      }],
    }),
    /metrics\.csv: the folder does not exist/,
  );
  assert.deepEqual([log.pulled, m.stepCount], [0, 0]);
});
