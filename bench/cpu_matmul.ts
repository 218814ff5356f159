/**
 * Throughput of the CPU reference matmul (`CpuBackend`, f64 sums): the
 * shapes of one training step of `examples/learn_addition.ts` (rows = 64
 * sequences × 11 tokens, width 48, MLP 192; forward, input gradient with
 * B transposed, weight gradient with A transposed) and square n = 128, 512.
 *
 *   deno run -A bench/cpu_matmul.ts          # a table
 *   deno run -A bench/cpu_matmul.ts --json   # one JSON object per line
 *
 * Each figure is the best of 5 samples of at least 0.2 s, so other jobs on
 * the machine lower it less than an average would.
 *
 * @module
 */

import { benchArgs } from "./_args.ts";
import { CpuBackend } from "../mod.ts";
import { ops } from "../tensor.ts";

const values = benchArgs("bench/cpu_matmul.ts", { json: { type: "boolean" } });
const be = new CpuBackend();

function data(n: number): Float32Array {
  const d = new Float32Array(n);
  for (let i = 0; i < n; i++) d[i] = ((i * 7919) % 1000) / 1000 - 0.5;
  return d;
}

interface Case {
  name: string;
  M: number;
  K: number;
  N: number;
  transA?: boolean;
  transB?: boolean;
}

const R = 64 * 11, D = 48, H = 192;
const cases: Case[] = [
  { name: "forward x·W (qkv)", M: R, K: D, N: 3 * D },
  { name: "forward x·W (mlp in)", M: R, K: D, N: H },
  { name: "forward x·W (mlp out)", M: R, K: H, N: D },
  { name: "input grad dy·Wᵀ", M: R, K: H, N: D, transB: true },
  { name: "weight grad xᵀ·dy", M: D, K: R, N: H, transA: true },
  { name: "square", M: 128, K: 128, N: 128 },
  { name: "square", M: 512, K: 512, N: 512 },
];

if (!values.json) {
  console.log("| matmul                  |   M ×   K ×   N | GFLOP/s |     ms |");
  console.log("| :---------------------- | --------------: | ------: | -----: |");
}
for (const c of cases) {
  const a = be.fromData(data(c.M * c.K), c.transA ? [c.K, c.M] : [c.M, c.K]);
  const b = be.fromData(data(c.K * c.N), c.transB ? [c.N, c.K] : [c.K, c.N]);
  const once = () => ops.matmul(a, b, { transA: c.transA, transB: c.transB }).dispose();
  once();
  let best = Infinity;
  for (let s = 0; s < 5; s++) {
    let reps = 0;
    const t0 = performance.now();
    while (performance.now() - t0 < 200) {
      once();
      reps++;
    }
    best = Math.min(best, (performance.now() - t0) / reps);
  }
  const gflops = (2 * c.M * c.K * c.N) / (best * 1e6);
  if (values.json) {
    console.log(JSON.stringify({ ...c, gflops: +gflops.toFixed(3), ms: +best.toFixed(3) }));
  } else {
    const dims = `${c.M} × ${c.K} × ${c.N}`;
    console.log(
      `| ${c.name.padEnd(23)} | ${dims.padStart(15)} | ${gflops.toFixed(2).padStart(7)} | ${
        best.toFixed(2).padStart(6)
      } |`,
    );
  }
  a.dispose();
  b.dispose();
}
