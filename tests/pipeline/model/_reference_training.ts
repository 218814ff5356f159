/**
 * Single-device training for the pipeline tests: a plain `Sequential` and
 * the same optimizer on the whole batch; and the tests' tiny GPT, its
 * batches, and its pipeline model in this thread. `_compare.ts` compares.
 *
 * @module
 */

import { CpuBackend } from "../../../src/tensor/cpu/backend.ts";
import { Rng } from "../../../src/tensor/random.ts";
import { CharTokenizer } from "../../../src/nn/char_tokenizer.ts";
import { TINY_CORPUS } from "../../../src/nn/data/tiny_corpus.ts";
import { createTinyGPT, type TinyGPTConfig } from "../../../src/nn/gpt.ts";
import { sampleBatch } from "../../../src/nn/sample_batch.ts";
import { crossEntropyLoss, mseLoss } from "../../../src/nn/losses.ts";
import { clipGradNorm } from "../../../src/nn/clip_grad_norm.ts";
import { saveSafetensors } from "../../../src/nn/safetensors.ts";
import type { Sequential } from "../../../src/nn/sequential.ts";
import { createOptimizer, type OptimizerSpec } from "../../../src/nn/optimizer_spec.ts";
import type { Optimizer } from "../../../src/nn/optimizer.ts";
import { tensorsOf } from "./_compare.ts";
import {
  PipelineParallelModel,
  type PipelineParallelModelOptions,
  type TrainingBatch,
} from "../../../src/pipeline/model/pipeline_parallel_model.ts";

export const cpu = new CpuBackend();
const tok = CharTokenizer.fromText(TINY_CORPUS);
const tokens = tok.encode(TINY_CORPUS);

/** 5 blocks: 8 layers, enough for 4 ranks × 2 stages. */
export const GPT: TinyGPTConfig = {
  vocabSize: tok.vocabSize,
  seqLen: 6,
  dim: 8,
  heads: 2,
  layers: 5,
  seed: 3,
};

export function gpt(config: TinyGPTConfig = GPT): Sequential {
  return createTinyGPT(config, cpu);
}

/**
 * A pipeline model on the CPU with every rank in this thread: 2 ranks,
 * cross-entropy, then `options`; of `options.model`, or else of `newNet()`
 * (default {@linkcode gpt}), which is disposed once the model has copied it.
 */
export async function cpuModel(
  options: Partial<PipelineParallelModelOptions>,
  newNet: () => Sequential = gpt,
): Promise<PipelineParallelModel> {
  const net = options.model ?? newNet();
  try {
    return await PipelineParallelModel.create({
      model: net,
      ranks: 2,
      loss: "cross-entropy",
      backend: "cpu",
      rankGroup: "in-process",
      ...options,
    } as PipelineParallelModelOptions);
  } finally {
    if (options.model === undefined) net.dispose();
  }
}

/** `n` token batches of `rows` sequences (seeded). */
export function tokenBatches(n: number, rows: number, seed = 7): TrainingBatch[] {
  const rng = new Rng(seed);
  return Array.from({ length: n }, () => {
    const b = sampleBatch(tokens, rows, GPT.seqLen, rng);
    return { inputs: b.ids, shape: b.shape, targets: b.targets };
  });
}

export interface Reference {
  readonly losses: number[];
  readonly gradNorms: number[];
  readonly bytes: Uint8Array;
  readonly tensors: Map<string, Float32Array>;
}

/**
 * Trains `model` in place on the whole batches, one step each, with a new
 * optimizer of `optimizer`'s spec or with `optimizer` itself (which it
 * then leaves open); returns what it saw.
 */
export async function referenceTraining(
  model: Sequential,
  optimizer: OptimizerSpec | Optimizer,
  batches: readonly TrainingBatch[],
  loss: "cross-entropy" | "mse" = "cross-entropy",
  clip?: number,
): Promise<Reference> {
  const given = typeof (optimizer as Optimizer).step === "function";
  const opt = given
    ? optimizer as Optimizer
    : createOptimizer(optimizer as OptimizerSpec, model.parameters());
  const losses: number[] = [], gradNorms: number[] = [];
  for (const [step, b] of batches.entries()) {
    const x = cpu.fromData(b.inputs, b.shape);
    // The whole batch at once: its rows start at 0; the step numbers Dropout's masks.
    const y = model.forward(x, { training: true, step, rowOffset: 0 });
    const tShape = loss === "mse" ? y.shape : y.shape.slice(0, -1);
    const t = cpu.fromData(b.targets, tShape);
    const r = loss === "mse" ? mseLoss(y, t) : crossEntropyLoss(y, t);
    model.backward(r.grad).dispose();
    if (clip !== undefined) gradNorms.push(await clipGradNorm(model.parameters(), clip));
    opt.step();
    model.zeroGrad();
    losses.push((await r.loss.toArray())[0]);
    for (const z of [x, y, t, r.loss, r.grad]) z.dispose();
  }
  if (!given) opt.dispose();
  const bytes = await saveSafetensors(model);
  return { losses, gradNorms, bytes, tensors: tensorsOf(bytes) };
}
