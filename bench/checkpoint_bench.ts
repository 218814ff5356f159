/**
 * Activation checkpointing: peak activation bytes and recompute time for
 * stacks of L = 16, 64, 256 layers checkpointed every k = √L layers, next to
 * the same stack without checkpointing (CPU backend, memory from the
 * backend's accounting). One forward plus one fused backward per run.
 *
 *   deno run -A bench/checkpoint_bench.ts [--stack linear-gelu|mlp|transformer] [--rows 256]
 *     [--width 64] [--repeats 3] [--json]
 *
 * Under `deno bench` it times forward + backward at L = 64 with and without
 * checkpointing instead.
 *
 * @module
 */

import { benchArgs, intFlag } from "./_args.ts";
import { GELU } from "../src/nn/gelu.ts";
import type { Layer } from "../src/nn/layer.ts";
import { Linear } from "../src/nn/linear.ts";
import { MLP } from "../src/nn/mlp.ts";
import { TransformerBlock } from "../src/nn/transformer_block.ts";
import type { ActivationCheckpointOptions } from "../src/pipeline/checkpoint/checkpoint.ts";
import { CheckpointedStage } from "../src/pipeline/checkpoint/checkpointed_stage.ts";
import { CpuBackend } from "../src/tensor/cpu/backend.ts";
import { randomTensor, Rng } from "../src/tensor/random.ts";
import type { Tensor } from "../src/tensor/tensor.ts";

type StackKind = "linear-gelu" | "mlp" | "transformer";

function buildStack(be: CpuBackend, kind: StackKind, L: number, width: number): Layer[] {
  const rng = new Rng(1);
  return Array.from({ length: L }, (_, i) => {
    if (kind === "mlp") return new MLP(be, width, { rng });
    if (kind === "transformer") return new TransformerBlock(be, width, 4, { rng });
    return i % 2 === 0 ? new Linear(be, width, width, { rng }) : new GELU(be);
  });
}

function inputShape(kind: StackKind, rows: number, width: number): number[] {
  // Transformer blocks take [batch, T, dim]; 16 positions per sequence.
  return kind === "transformer" ? [Math.max(1, Math.floor(rows / 16)), 16, width] : [rows, width];
}

interface Measure {
  peakBytes: number;
  forwardMs: number;
  backwardMs: number;
}

/** One forward + fused backward; peak bytes above the starting live bytes. */
function measureOnce(
  be: CpuBackend,
  chunk: CheckpointedStage,
  x: Tensor,
  dy: Tensor,
): Measure {
  const base = be.memory.liveBytes;
  be.memory.resetPeak();
  const t0 = performance.now();
  const y = chunk.forward(x, { key: "mb0" });
  const t1 = performance.now();
  y.dispose();
  const dx = chunk.backward(dy, "mb0");
  const t2 = performance.now();
  dx.dispose();
  return { peakBytes: be.memory.peakBytes - base, forwardMs: t1 - t0, backwardMs: t2 - t1 };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

function measure(
  be: CpuBackend,
  layers: Layer[],
  cfg: ActivationCheckpointOptions,
  x: Tensor,
  dy: Tensor,
  repeats: number,
): Measure {
  const chunk = new CheckpointedStage(layers, cfg);
  measureOnce(be, chunk, x, dy); // warm-up
  const runs = Array.from({ length: repeats }, () => measureOnce(be, chunk, x, dy));
  return {
    peakBytes: Math.max(...runs.map((r) => r.peakBytes)),
    forwardMs: median(runs.map((r) => r.forwardMs)),
    backwardMs: median(runs.map((r) => r.backwardMs)),
  };
}

{
  const be = new CpuBackend();
  const layers = buildStack(be, "linear-gelu", 64, 64);
  const x = randomTensor(be, [128, 64], new Rng(2));
  const dy = randomTensor(be, [128, 64], new Rng(3));
  for (
    const [name, cfg] of [
      ["no checkpointing", {}],
      ["every 8 layers (full)", { enabled: true, everyNLayers: 8 }],
    ] as const
  ) {
    const chunk = new CheckpointedStage(layers, cfg);
    Deno.bench(`L=64 ${name}`, { group: "forward+backward, 64 Linear/GELU layers" }, () => {
      const y = chunk.forward(x, { key: 0 });
      y.dispose();
      chunk.backward(dy, 0).dispose();
    });
  }
}

function main(): void {
  const values = benchArgs("bench/checkpoint_bench.ts", {
    stack: { type: "string", default: "linear-gelu" },
    rows: { type: "string", default: "256" },
    width: { type: "string", default: "64" },
    repeats: { type: "string", default: "5" },
    json: { type: "boolean", default: false },
  });
  const kind = values.stack as StackKind;
  if (!["linear-gelu", "mlp", "transformer"].includes(kind)) {
    throw new RangeError(`--stack must be linear-gelu, mlp or transformer, got ${kind}`);
  }
  const rows = intFlag("bench/checkpoint_bench.ts", "rows", values.rows),
    width = intFlag("bench/checkpoint_bench.ts", "width", values.width);
  const repeats = intFlag("bench/checkpoint_bench.ts", "repeats", values.repeats);
  if (!values.json) {
    console.log(
      `stack: ${kind}, input [${inputShape(kind, rows, width)}], CPU backend, median of ${repeats}`,
    );
    console.log(
      "| L | k | peak, none | peak, every k | ratio | in activations (none → k) | 2√L | fwd ms | fwd+bwd ms, none | fwd+bwd ms, every k | extra ms | extra / fwd |",
    );
    console.log("|---|---|---|---|---|---|---|---|---|---|---|---|");
  }
  for (const L of [16, 64, 256]) {
    const k = Math.round(Math.sqrt(L));
    const be = new CpuBackend();
    const layers = buildStack(be, kind, L, width);
    const shape = inputShape(kind, rows, width);
    const x = randomTensor(be, shape, new Rng(4));
    const dy = randomTensor(be, shape, new Rng(5));
    const none = measure(be, layers, {}, x, dy, repeats);
    const ck = measure(be, layers, { enabled: true, everyNLayers: k }, x, dy, repeats);
    const unit = x.bytes;
    const tNone = none.forwardMs + none.backwardMs;
    const tCk = ck.forwardMs + ck.backwardMs;
    const row = {
      stack: kind,
      L,
      k,
      peakBytesNone: none.peakBytes,
      peakBytesCheckpoint: ck.peakBytes,
      ratio: ck.peakBytes / none.peakBytes,
      activationsNone: none.peakBytes / unit,
      activationsCheckpoint: ck.peakBytes / unit,
      forwardMs: none.forwardMs,
      stepMsNone: tNone,
      stepMsCheckpoint: tCk,
      extraMs: tCk - tNone,
    };
    if (values.json) console.log(JSON.stringify(row));
    else {
      const kib = (b: number) => `${(b / 1024).toFixed(0)} KiB`;
      console.log(
        `| ${L} | ${k} | ${kib(none.peakBytes)} | ${kib(ck.peakBytes)} | ${
          row.ratio.toFixed(3)
        } | ${row.activationsNone.toFixed(1)} → ${row.activationsCheckpoint.toFixed(1)} | ${
          (2 * Math.sqrt(L)).toFixed(0)
        } | ${none.forwardMs.toFixed(1)} | ${tNone.toFixed(1)} | ${tCk.toFixed(1)} | ${
          row.extraMs.toFixed(1)
        } | ${(row.extraMs / none.forwardMs).toFixed(2)} |`,
      );
    }
    x.dispose();
    dy.dispose();
    for (const l of layers) l.dispose();
  }
}

if (import.meta.main) main();
