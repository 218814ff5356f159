/**
 * LoadBalancedPartition versus UniformPartition on a model with uneven
 * layers: a token+position embedding, Transformer blocks, a final norm and a
 * large vocabulary head. Prints, per cost source and chunk count, the
 * bottleneck (largest chunk cost) of each strategy and the imbalance.
 *
 *   deno run -A bench/partition_bench.ts [--blocks 12] [--vocab 8192] [--dim 64] [--json]
 *
 * Under `deno bench` it times the min-max dynamic programme instead.
 *
 * @module
 */

import { benchArgs, intFlag } from "./_args.ts";
import { LayerNorm } from "../src/nn/layer_norm.ts";
import { Linear } from "../src/nn/linear.ts";
import { Sequential } from "../src/nn/sequential.ts";
import { TokenPositionEmbedding } from "../src/nn/token_position_embedding.ts";
import { TransformerBlock } from "../src/nn/transformer_block.ts";
import { layerCosts, profileLayerCosts } from "../src/pipeline/partition/layer_costs.ts";
import {
  type CostedLayer,
  LoadBalancedPartition,
  type PartitionResult,
  UniformPartition,
} from "../src/pipeline/partition/partition.ts";
import { CpuBackend } from "../src/tensor/cpu/backend.ts";

function randomCosts(n: number, seed: number): number[] {
  let s = seed;
  return Array.from({ length: n }, () => {
    s = (s * 1103515245 + 12345) % 2147483648;
    return (s / 2147483648) ** 2 * 1000;
  });
}

const balanced = new LoadBalancedPartition();
for (const [n, k] of [[64, 8], [256, 16], [1024, 64]] as const) {
  const costs = randomCosts(n, n + k);
  Deno.bench(`LoadBalancedPartition n=${n} k=${k}`, { group: "min-max DP" }, () => {
    balanced.partition(costs, k);
  });
}

function fmt(x: number): string {
  if (x >= 1e9) return `${(x / 1e9).toFixed(2)}G`;
  if (x >= 1e6) return `${(x / 1e6).toFixed(2)}M`;
  if (x >= 1e3) return `${(x / 1e3).toFixed(1)}k`;
  return x.toFixed(2);
}

async function main(): Promise<void> {
  const values = benchArgs("bench/partition_bench.ts", {
    blocks: { type: "string", default: "12" },
    vocab: { type: "string", default: "8192" },
    dim: { type: "string", default: "64" },
    seq: { type: "string", default: "32" },
    batch: { type: "string", default: "4" },
    json: { type: "boolean", default: false },
  });
  const blocks = intFlag("bench/partition_bench.ts", "blocks", values.blocks),
    vocab = intFlag("bench/partition_bench.ts", "vocab", values.vocab),
    dim = intFlag("bench/partition_bench.ts", "dim", values.dim);
  const seq = intFlag("bench/partition_bench.ts", "seq", values.seq),
    batch = intFlag("bench/partition_bench.ts", "batch", values.batch);
  const be = new CpuBackend();
  const model = new Sequential([
    new TokenPositionEmbedding(be, vocab, seq, dim, { seed: 1 }),
    ...Array.from({ length: blocks }, (_, i) => new TransformerBlock(be, dim, 4, { seed: 2 + i })),
    new LayerNorm(be, dim),
    new Linear(be, dim, vocab, { seed: 99 }),
  ]);
  const shape = [batch, seq];
  const ids = be.fromData(
    Float32Array.from({ length: batch * seq }, (_, i) => (i * 7919) % vocab),
    shape,
  );
  const sources: [string, CostedLayer[]][] = [
    ["params", layerCosts(model, shape, "params")],
    ["flops", layerCosts(model, shape, "flops")],
    ["profile (ms)", await profileLayerCosts(model, ids, { repeats: 3 })],
  ];
  const strategies: [string, UniformPartition | LoadBalancedPartition][] = [
    ["uniform", new UniformPartition()],
    ["uniform, lighter ends", new UniformPartition({ firstStageOffset: 1, lastStageOffset: 1 })],
    ["load-balanced", new LoadBalancedPartition()],
  ];
  const n = model.layers.length;
  if (!values.json) {
    console.log(
      `model: embedding(vocab ${vocab}) + ${blocks} TransformerBlock(dim ${dim}) + LayerNorm + head(${dim}→${vocab}), ${n} layers, input [${shape}]`,
    );
    console.log(
      "| cost source | chunks | strategy | boundaries | bottleneck | imbalance | vs uniform |",
    );
    console.log("|---|---|---|---|---|---|---|");
  }
  for (const [source, costs] of sources) {
    for (const k of [2, 4, 8]) {
      if (k > n) continue;
      const results: [string, PartitionResult][] = strategies.map((
        [name, s],
      ) => [name, s.partition(costs, k)]);
      const base = results[0][1].bottleneck;
      for (const [name, r] of results) {
        if (values.json) {
          console.log(JSON.stringify({
            source,
            chunks: k,
            strategy: name,
            boundaries: r.boundaries,
            bottleneck: r.bottleneck,
            imbalance: r.imbalance,
          }));
        } else {
          console.log(
            `| ${source} | ${k} | ${name} | ${r.boundaries.join(",")} | ${fmt(r.bottleneck)} | ${
              r.imbalance.toFixed(2)
            } | ${(r.bottleneck / base).toFixed(2)} |`,
          );
        }
      }
    }
  }
  ids.dispose();
  model.dispose();
}

if (import.meta.main) await main();
