// Every option object a user writes gets a did-you-mean for a misspelt key,
// before any work (the project's rule; seen before: `validation: { batch,
// evry: 5 }` said `validation.every must be a positive integer, got
// undefined`). One misspelling per entry point, each a TypeError naming the
// key and the option meant.

// webgpu_test: no WebGPU tests here (WebGPUBackend.create refuses a misspelt option first)
import assert from "node:assert/strict";
import { ActivationCheckpointConfig } from "../../src/pipeline/checkpoint/checkpoint.ts";
import { AdamW } from "../../src/nn/adamw.ts";
import { CpuBackend } from "../../src/tensor/cpu/backend.ts";
import { createTinyGPT } from "../../src/nn/gpt.ts";
import { Dropout } from "../../src/nn/dropout.ts";
import { Embedding } from "../../src/nn/embedding.ts";
import { LayerNorm } from "../../src/nn/layer_norm.ts";
import { Linear } from "../../src/nn/linear.ts";
import { MLP } from "../../src/nn/mlp.ts";
import { PipelineParallelModel } from "../../src/pipeline/model/pipeline_parallel_model.ts";
import { RMSNorm } from "../../src/nn/rms_norm.ts";
import { Sequential } from "../../src/nn/sequential.ts";
import { SGD } from "../../src/nn/sgd.ts";
import { TokenPositionEmbedding } from "../../src/nn/token_position_embedding.ts";
import { TransformerBlock } from "../../src/nn/transformer_block.ts";
import { createOptimizer } from "../../src/nn/optimizer_spec.ts";
import { ArrayDataset } from "../../src/nn/array_dataset.ts";
import { renderAscii } from "../../src/pipeline/render/render_ascii.ts";
import { renderSvg } from "../../src/pipeline/render/render_svg.ts";
import { simulate } from "../../src/pipeline/analysis/simulate.ts";
import { summarizeTimeline } from "../../src/pipeline/analysis/timeline_summary.ts";
import { LeakWatch } from "../../src/tensor/leak_watch.ts";
import { WorkerRankGroup } from "../../src/pipeline/runtime/worker_rank_group.ts";
import { InProcessRankGroup } from "../../src/pipeline/runtime/in_process_rank_group.ts";
import { SubprocessRankGroup } from "../../src/pipeline/runtime/subprocess_rank_group.ts";
import { MpiBackend } from "../../src/pipeline/comm/mpi_backend.ts";
import { WebGPUBackend } from "../../src/tensor/webgpu/backend.ts";
import { profileLayerPasses } from "../../src/pipeline/partition/layer_passes.ts";
import { saveSafetensors } from "../../src/nn/safetensors.ts";
import { loadTrainingCheckpoint } from "../../src/nn/training_checkpoint.ts";
import { SYNTHETIC_EXECUTOR_URL } from "../../src/pipeline/testing/synthetic_executor.ts";
import { summary } from "../../src/pipeline/partition/summary.ts";
import { checkOutputPath } from "../../src/pipeline/model/output_path.ts";
import { LoadBalancedPartition, UniformPartition } from "../../src/pipeline/partition/partition.ts";
import { chooseBackend } from "../../src/tensor/create_backend.ts";
import { toChromeTrace } from "../../src/pipeline/render/chrome_trace.ts";
import { generateSchedule } from "../../src/pipeline/schedule/generate.ts";
import { CurveWriter } from "../../src/pipeline/model/callbacks/curve_writer.ts";
import { EarlyStopping } from "../../src/pipeline/model/callbacks/early_stopping.ts";
import { MetricsLogger } from "../../src/pipeline/model/callbacks/metrics_logger.ts";
import { ModelCheckpoint } from "../../src/pipeline/model/callbacks/model_checkpoint.ts";
import { ProgressBar } from "../../src/pipeline/model/callbacks/progress_bar.ts";
import { lrAt } from "../../src/nn/lr_schedule.ts";

const be = new CpuBackend();
const events = simulate(generateSchedule("1f1b", { ranks: 2, microBatches: 2 }), {
  costs: { F: 1, B: 2 },
}).events;

async function tiny(o: object = {}): Promise<PipelineParallelModel> {
  const net = new Sequential([
    new Linear(be, 2, 4, { seed: 1 }),
    new Linear(be, 4, 1, { seed: 2 }),
  ]);
  const m = await PipelineParallelModel.create({
    model: net,
    schedule: "1f1b",
    ranks: 2,
    microBatches: 2,
    loss: "mse",
    backend: "cpu",
    rankGroup: "in-process",
    optimizer: { kind: "sgd", lr: 0.1 },
    ...o,
  });
  net.dispose();
  return m;
}
const batch = { inputs: new Float32Array(8), shape: [4, 2], targets: new Float32Array(4) };

/** [what, the call, the misspelt key, the key meant]. */
const sync: [string, () => unknown, string, string][] = [
  ["Linear", () => new Linear(be, 2, 3, { sed: 1 } as never), "sed", "seed"],
  ["Embedding", () => new Embedding(be, 5, 3, { sed: 1 } as never), "sed", "seed"],
  ["LayerNorm", () => new LayerNorm(be, 4, { ep: 1e-5 } as never), "ep", "eps"],
  ["RMSNorm", () => new RMSNorm(be, 4, { ep: 1e-5 } as never), "ep", "eps"],
  ["Dropout", () => new Dropout(be, 0.1, { sed: 1 } as never), "sed", "seed"],
  ["MLP", () => new MLP(be, 4, { sed: 1 } as never), "sed", "seed"],
  ["TransformerBlock", () => new TransformerBlock(be, 4, 2, { sed: 1 } as never), "sed", "seed"],
  [
    "TokenPositionEmbedding",
    () => new TokenPositionEmbedding(be, 5, 4, 3, { sed: 1 } as never),
    "sed",
    "seed",
  ],
  [
    "Sequential",
    () => new Sequential([new Linear(be, 2, 2)], { name: ["a"] } as never),
    "name",
    "names",
  ],
  [
    "createTinyGPT",
    () =>
      createTinyGPT(
        { vocabSize: 5, seqLen: 4, dim: 4, heads: 2, layers: 1, sed: 1 } as never,
        be,
      ),
    "sed",
    "seed",
  ],
  ["AdamW", () => new AdamW([], { lr: 1, weightDecy: 0.1 } as never), "weightDecy", "weightDecay"],
  ["SGD", () => new SGD([], { lr: 1, momentun: 0.9 } as never), "momentun", "momentum"],
  [
    "createOptimizer",
    () => createOptimizer({ kind: "adamw", lr: 1, bta1: 0.9 } as never, []),
    "bta1",
    "beta1",
  ],
  [
    "lrSchedule",
    () => lrAt({ kind: "warmup-cosine", warmupStep: 2, decaySteps: 5 } as never, 1, 0),
    "warmupStep",
    "warmupSteps",
  ],
  [
    "ArrayDataset",
    () =>
      new ArrayDataset({
        inputs: new Float32Array(4),
        shape: [2, 2],
        targets: new Float32Array(2),
        batchSize: 1,
        shufle: true,
      } as never),
    "shufle",
    "shuffle",
  ],
  ["renderSvg", () => renderSvg(events, { widht: 300 } as never), "widht", "width"],
  ["renderAscii", () => renderAscii(events, { maxColums: 30 } as never), "maxColums", "maxColumns"],
  ["toChromeTrace", () => toChromeTrace(events, { rank: 2 } as never), "rank", "ranks"],
  [
    "summarizeTimeline",
    () => summarizeTimeline(events, 2, { steadyFrm: 1 } as never),
    "steadyFrm",
    "steadyFrom",
  ],
  [
    "ActivationCheckpointConfig",
    () => new ActivationCheckpointConfig({ everyNLayer: 2 } as never),
    "everyNLayer",
    "everyNLayers",
  ],
  ["EarlyStopping", () => new EarlyStopping({ patiense: 2 } as never), "patiense", "patience"],
  ["ProgressBar", () => new ProgressBar({ widht: 20 } as never), "widht", "width"],
  [
    "MetricsLogger",
    () => new MetricsLogger("m.jsonl", { apend: true } as never),
    "apend",
    "append",
  ],
  [
    "CurveWriter",
    () => new CurveWriter("c.svg", { writeEvry: 2 } as never),
    "writeEvry",
    "writeEvery",
  ],
  [
    "ModelCheckpoint",
    () => new ModelCheckpoint({ saveCheckpoint: async () => {} }, { path: "c", evry: 2 } as never),
    "evry",
    "every",
  ],
  [
    "summary",
    () =>
      summary(
        new Sequential([new Linear(be, 2, 2)]),
        { inputShape: [1, 2], boundries: [0, 1] } as never,
      ),
    "boundries",
    "boundaries",
  ],
  [
    "checkOutputPath",
    () => checkOutputPath("x.json", "out", { wirte: "direct" } as never),
    "wirte",
    "write",
  ],
  [
    "UniformPartition",
    () => new UniformPartition({ typeRegx: "Linear" } as never),
    "typeRegx",
    "typeRegex",
  ],
  [
    "LoadBalancedPartition",
    () => new LoadBalancedPartition({ typeRegx: "Linear" } as never),
    "typeRegx",
    "typeRegex",
  ],
  ["LeakWatch", () => new LeakWatch(be.memory, { patiance: 3 } as never), "patiance", "patience"],
  [
    "loadTrainingCheckpoint",
    () =>
      loadTrainingCheckpoint([], new SGD([], { lr: 1 }), new Uint8Array(8), {
        allowNonFinit: true,
      } as never),
    "allowNonFinit",
    "allowNonFinite",
  ],
];

for (const [what, call, typo, meant] of sync) {
  Deno.test(`did-you-mean: ${what} { ${typo} } names ${meant}`, () => {
    assert.throws(call, (e: Error) => {
      assert.ok(e instanceof TypeError, `${what}: ${e}`);
      assert.match(e.message, new RegExp(`\\b${typo}\\b.*did you mean ${meant}\\?`), what);
      return true;
    });
  });
}

const sched = generateSchedule("1f1b", { ranks: 2, microBatches: 2 });
const executor = { module: SYNTHETIC_EXECUTOR_URL, options: { ms: 1 } };

Deno.test("did-you-mean: the model's calls: train's validation, create's nested objects, saveCheckpoint, loadSafetensors, writeTrace, predict", async () => {
  await using m = await tiny();
  const cases: [string, () => Promise<unknown>, string, string][] = [
    [
      "train validation",
      () => m.train([batch], { validation: { batch, evry: 5 } as never }),
      "evry",
      "every",
    ],
    [
      "create optimizer",
      () => tiny({ optimizer: { kind: "sgd", lr: 0.1, momentun: 0.9 } }),
      "momentun",
      "momentum",
    ],
    [
      "create lrSchedule",
      () =>
        tiny({
          optimizer: { kind: "sgd", lr: 0.1, lrSchedule: { kind: "cosine", decaySetps: 5 } },
        }),
      "decaySetps",
      "decaySteps",
    ],
    ["saveCheckpoint", () => m.checkpointBytes({ dat: {} } as never), "dat", "data"],
    [
      "loadSafetensors",
      async () => m.loadSafetensors(await m.saveSafetensors(), { allowNonFinit: true } as never),
      "allowNonFinit",
      "allowNonFinite",
    ],
    [
      "loadCheckpoint",
      async () => m.loadCheckpoint(await m.checkpointBytes(), { allowNonFinit: true } as never),
      "allowNonFinit",
      "allowNonFinite",
    ],
    ["chooseBackend", () => chooseBackend("cpu", { notise: false } as never), "notise", "notice"],
    [
      "WorkerRankGroup.create",
      () => WorkerRankGroup.create({ schedule: sched, executor, startupTimeotMs: 1 } as never),
      "startupTimeotMs",
      "startupTimeoutMs",
    ],
    [
      "SubprocessRankGroup.create",
      () => SubprocessRankGroup.create({ schedule: sched, executor, polcy: {} } as never),
      "polcy",
      "policy",
    ],
    [
      "InProcessRankGroup.create",
      () => InProcessRankGroup.create({ schedule: sched, createExecutr: () => ({}) } as never),
      "createExecutr",
      "createExecutor",
    ],
    [
      "MpiBackend.init",
      () => MpiBackend.init({ peerTimeotMs: 1 } as never),
      "peerTimeotMs",
      "peerTimeoutMs",
    ],
    [
      "WebGPUBackend.create",
      () => WebGPUBackend.create({ readPth: "awaited" } as never),
      "readPth",
      "readPath",
    ],
    [
      "profileLayerPasses",
      () => profileLayerPasses([], be.zeros([1, 2]), { repats: 1 } as never),
      "repats",
      "repeats",
    ],
    ["saveSafetensors", () => saveSafetensors([], { metadta: {} } as never), "metadta", "metadata"],
    ["writeTrace", () => m.writeTrace("t.json", { stpe: 0 } as never), "stpe", "step"],
  ];
  for (const [what, call, typo, meant] of cases) {
    await assert.rejects(call, (e: Error) => {
      assert.ok(e instanceof TypeError, `${what}: ${e}`);
      assert.match(e.message, new RegExp(`\\b${typo}\\b.*did you mean ${meant}\\?`), what);
      return true;
    }, what);
  }
  assert.equal(m.stepCount, 0);
  assert.equal(m.closed, false);
});
