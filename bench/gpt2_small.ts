/**
 * GPT-2 small's shapes (124M parameters: 12 blocks of width 768, 12 heads,
 * vocabulary 50257, 1024 positions), random weights written in Hugging
 * Face's layout: the folder loads, the model takes training steps on 2
 * ranks (1f1b, worker ranks, AdamW; the tied table is on both ranks, its
 * gradients summed), generates with the key/value cache, and the
 * advisor's predicted peak bytes per rank are compared with the measured
 * ones (the ranks' live bytes between steps plus the step's measured
 * activation peak).
 *
 *   deno run -A bench/gpt2_small.ts [--layers 12] [--seq-len 64] [--batch 2] [--steps 2]
 *     [--tokens 8]
 *
 * @module
 */

import { benchArgs, intFlag } from "./_args.ts";
import { CpuBackend, PipelineParallelModel } from "../mod.ts";
import { encodeSafetensors, loadGPT2 } from "../format.ts";
import { Rng } from "../data.ts";
import { adviseSchedule, FixedPartition } from "../analysis.ts";

const S = "bench/gpt2_small.ts";
const values = benchArgs(S, {
  layers: { type: "string", default: "12" },
  "seq-len": { type: "string", default: "64" },
  batch: { type: "string", default: "2" },
  steps: { type: "string", default: "2" },
  tokens: { type: "string", default: "8" },
});
const L = intFlag(S, "layers", values.layers);
const T = intFlag(S, "seq-len", values["seq-len"]);
const B = intFlag(S, "batch", values.batch);
const steps = intFlag(S, "steps", values.steps);
const genTokens = intFlag(S, "tokens", values.tokens);
const V = 50257, P = 1024, C = 768, H = 12;

const gib = (b: number) => `${(b / 2 ** 30).toFixed(3)} GiB`;
const secs = (t0: number) => ((performance.now() - t0) / 1000).toFixed(1);

// The folder: GPT-2's names with the transformer. prefix, Conv1D [in, out].
const dir = await Deno.makeTempDir({ prefix: "conveyor_gpt2_small_" });
try {
  let t0 = performance.now();
  const rng = new Rng(1);
  const tensors: { name: string; shape: number[]; data: Float32Array }[] = [];
  const add = (name: string, shape: number[], std: number, mean = 0) => {
    const data = new Float32Array(shape.reduce((a, b) => a * b, 1));
    for (let i = 0; i < data.length; i++) data[i] = mean + std * rng.normal();
    tensors.push({ name: `transformer.${name}`, shape, data });
  };
  add("wte.weight", [V, C], 0.02);
  add("wpe.weight", [P, C], 0.01);
  for (let i = 0; i < L; i++) {
    const h = `h.${i}.`;
    add(h + "ln_1.weight", [C], 0, 1);
    add(h + "ln_1.bias", [C], 0);
    add(h + "attn.c_attn.weight", [C, 3 * C], 0.02);
    add(h + "attn.c_attn.bias", [3 * C], 0);
    add(h + "attn.c_proj.weight", [C, C], 0.02 / Math.sqrt(2 * L));
    add(h + "attn.c_proj.bias", [C], 0);
    add(h + "ln_2.weight", [C], 0, 1);
    add(h + "ln_2.bias", [C], 0);
    add(h + "mlp.c_fc.weight", [C, 4 * C], 0.02);
    add(h + "mlp.c_fc.bias", [4 * C], 0);
    add(h + "mlp.c_proj.weight", [4 * C, C], 0.02 / Math.sqrt(2 * L));
    add(h + "mlp.c_proj.bias", [C], 0);
  }
  add("ln_f.weight", [C], 0, 1);
  add("ln_f.bias", [C], 0);
  const count = tensors.reduce((a, t) => a + t.data.length, 0);
  await Deno.writeTextFile(
    `${dir}/config.json`,
    JSON.stringify({
      model_type: "gpt2",
      vocab_size: V,
      n_positions: P,
      n_embd: C,
      n_head: H,
      n_layer: L,
      layer_norm_epsilon: 1e-5,
      activation_function: "gelu_new",
    }),
  );
  await Deno.writeFile(`${dir}/model.safetensors`, encodeSafetensors(tensors));
  tensors.length = 0;
  console.log(`folder: ${(count / 1e6).toFixed(1)}M parameters written in ${secs(t0)} s`);

  t0 = performance.now();
  const { model: net } = await loadGPT2(dir, new CpuBackend());
  console.log(`loadGPT2: ${secs(t0)} s`);

  const data = Float32Array.from({ length: B * T }, (_, i) => (i * 7919) % V);
  const targets = Float32Array.from({ length: B * T }, (_, i) => (i * 7919 + 1) % V);
  const batch = { inputs: data, shape: [B, T], targets };
  const optimizer = { kind: "adamw", lr: 1e-4, weightDecay: 0 } as const;

  t0 = performance.now();
  const advice = await adviseSchedule(net, batch, {
    loss: "cross-entropy",
    optimizer,
    schedules: ["1f1b"],
    ranks: 2,
    microBatches: 2,
    backend: "cpu",
    repeats: 1,
    warmup: 0,
    verify: 0,
    calibrate: false,
    nonFinite: "off",
  });
  const candidate = advice.candidates[0];
  const predicted = candidate.peakBytes;
  console.log(
    `advisor: ${secs(t0)} s, stages ${candidate.boundaries}, predicted peak per rank ${
      predicted.map(gib).join(", ")
    }`,
  );

  t0 = performance.now();
  await using model = await PipelineParallelModel.create({
    model: net,
    schedule: "1f1b",
    ranks: 2,
    microBatches: 2,
    loss: "cross-entropy",
    optimizer,
    backend: "cpu",
    nonFinite: "off",
    // The advisor's cut, so that the bytes compared are of the same stages.
    partition: new FixedPartition(candidate.boundaries),
  });
  console.log(`create (2 worker ranks): ${secs(t0)} s; stages ${model.partition.boundaries}`);
  let last;
  for (let i = 0; i < steps; i++) {
    t0 = performance.now();
    last = await model.step(batch);
    console.log(`step ${i + 1}: loss ${last.loss.toFixed(4)}, ${secs(t0)} s`);
  }
  const info = await model.rankInfo();
  const measured = info.map((r, k) => r.liveBytes + last!.peakActivationBytes[k]);
  console.log(
    `measured peak per rank ${measured.map(gib).join(", ")} (live between steps ${
      info.map((r) => gib(r.liveBytes)).join(", ")
    } + activation peak ${last!.peakActivationBytes.map(gib).join(", ")})`,
  );
  t0 = performance.now();
  const g = await model.generate([464, 2068, 7586], { maxTokens: genTokens, temperature: 0 });
  console.log(
    `generate ${genTokens} tokens (KV cache, 2 ranks): ${secs(t0)} s, ${
      g.tokensPerSecond.toFixed(2)
    } tokens/s: ${g.ids[0]}`,
  );
  console.log(
    `predicted / measured: ${predicted.map((p, k) => (p / measured[k]).toFixed(3)).join(", ")}`,
  );
  console.log(`predicted parts: ${JSON.stringify(candidate.memory)}`);
  net.dispose();
} finally {
  await Deno.remove(dir, { recursive: true });
}
