/**
 * Throughput of the CPU backend's matmul in its modes, side by side: the
 * exact reference (f64 sums, one thread), the fast mode's WebAssembly
 * kernels on one thread in both builds (relaxed SIMD, SIMD128), and on
 * every core. Shapes: one training step of the tiny GPT (dim 128, MLP 512,
 * 16 × 64 rows: forward, input gradient with B transposed, weight gradient
 * with A transposed; the attention's batched per-head products) and square
 * n = 256, 512, 1024.
 *
 *   deno run -A bench/cpu_matmul.ts            # a table (about a minute)
 *   deno run -A bench/cpu_matmul.ts --json     # one JSON object per line
 *   deno run -A bench/cpu_matmul.ts --no-exact # without the slow reference
 *
 * The configurations take turns within each shape (round 1: every one
 * once, round 2: again, …, 5 rounds); each sample is at least 0.1 s of
 * back-to-back products. Cells are GFLOP/s: the median, with the min–max
 * spread of the rounds.
 *
 * @module
 */

import { benchArgs } from "./_args.ts";
import { CpuBackend } from "../mod.ts";
import { ops } from "../tensor.ts";

const values = benchArgs("bench/cpu_matmul.ts", {
  json: { type: "boolean" },
  "no-exact": { type: "boolean" },
  rounds: { type: "string", default: "5" },
});
const rounds = Number(values.rounds);
if (!Number.isInteger(rounds) || rounds < 1) {
  throw new RangeError(`--rounds must be a positive integer, got "${values.rounds}"`);
}

const cores = navigator.hardwareConcurrency;
const configs: { name: string; be: CpuBackend }[] = [
  ...(values["no-exact"] ? [] : [{ name: "exact", be: new CpuBackend({ exact: true }) }]),
  { name: "simd128 1T", be: new CpuBackend({ simd: "simd128", threads: 1 }) },
  { name: "relaxed 1T", be: new CpuBackend({ simd: "relaxed", threads: 1 }) },
  { name: `fast ${cores}T`, be: new CpuBackend() },
];

function data(n: number): Float32Array {
  const d = new Float32Array(n);
  for (let i = 0; i < n; i++) d[i] = ((i * 7919) % 1000) / 1000 - 0.5;
  return d;
}

interface Case {
  name: string;
  batch?: number;
  M: number;
  K: number;
  N: number;
  transA?: boolean;
  transB?: boolean;
}

const R = 16 * 64, D = 128, H = 512, T = 64;
const cases: Case[] = [
  { name: "qkv x·W", M: R, K: D, N: 3 * D },
  { name: "mlp in x·W", M: R, K: D, N: H },
  { name: "mlp in dy·Wᵀ", M: R, K: H, N: D, transB: true },
  { name: "mlp in xᵀ·dy", M: D, K: R, N: H, transA: true },
  { name: "scores q·kᵀ (64 heads)", batch: 64, M: T, K: D / 4, N: T, transB: true },
  { name: "square", M: 256, K: 256, N: 256 },
  { name: "square", M: 512, K: 512, N: 512 },
  { name: "square", M: 1024, K: 1024, N: 1024 },
];

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[s.length >> 1];
}

if (!values.json) {
  console.log(
    `matmul GFLOP/s, median (min–max) of ${rounds} interleaved rounds, ${cores} cores\n`,
  );
  console.log(`| matmul | batch × M × K × N | ${configs.map((c) => c.name).join(" | ")} |`);
  console.log(`| :-- | --: | ${configs.map(() => "--:").join(" | ")} |`);
}
for (const c of cases) {
  const batch = c.batch ?? 1;
  const lead = batch > 1 ? [batch] : [];
  const samples = configs.map(() => [] as number[]);
  const ops1 = configs.map(({ be }) => {
    const a = be.fromData(data(batch * c.M * c.K), [
      ...lead,
      ...(c.transA ? [c.K, c.M] : [c.M, c.K]),
    ]);
    const b = be.fromData(data(batch * c.K * c.N), [
      ...lead,
      ...(c.transB ? [c.N, c.K] : [c.K, c.N]),
    ]);
    return () => ops.matmul(a, b, { transA: c.transA, transB: c.transB }).dispose();
  });
  for (const once of ops1) once();
  const flop = 2 * batch * c.M * c.K * c.N;
  for (let r = 0; r < rounds; r++) {
    ops1.forEach((once, k) => {
      let reps = 0;
      const t0 = performance.now();
      while (performance.now() - t0 < 100) {
        once();
        reps++;
      }
      samples[k].push(flop / ((performance.now() - t0) / reps) / 1e6);
    });
  }
  if (values.json) {
    console.log(JSON.stringify({
      ...c,
      gflops: Object.fromEntries(configs.map((cf, k) => [cf.name, +median(samples[k]).toFixed(2)])),
    }));
  } else {
    const cells = samples.map((s) =>
      `${median(s).toFixed(1)} (${Math.min(...s).toFixed(1)}–${Math.max(...s).toFixed(1)})`
    );
    console.log(`| ${c.name} | ${batch} × ${c.M} × ${c.K} × ${c.N} | ${cells.join(" | ")} |`);
  }
}
for (const { be } of configs) be.close();
