/**
 * WebGPU embedding weight gradient: the old scanning kernel (every table
 * entry scans every id, O(V·C·N)) against the sorted one (bitonic sort of
 * the ids, then each id's run of rows added in position order, O(N·C)
 * after an O(N log² N) sort), over vocabulary sizes V.
 *
 *   deno run -A bench/embedding_backward.ts [--n 8192] [--c 64]
 *
 * The scan is skipped where V·C·N > 2^31 (minutes per call on llvmpipe).
 * Each cell is the median of 7 timed batches of calls (one sync per
 * batch). Both variants add in the CPU's order: the last column checks the
 * sorted result against the CPU reference bit for bit ("max |diff|" = 0).
 * On llvmpipe (software WebGPU) on a shared machine the numbers are noisy.
 *
 * @module
 */

import { benchArgs, intFlag } from "./_args.ts";
import { CpuBackend } from "../src/tensor/cpu/backend.ts";
import * as ops from "../src/tensor/ops.ts";
import type { Tensor } from "../src/tensor/tensor.ts";
import { WebGPUBackend } from "../src/tensor/webgpu/mod.ts";

const args = {
  values: benchArgs("bench/embedding_backward.ts", {
    n: { type: "string" },
    c: { type: "string" },
  }),
};
const N = intFlag("bench/embedding_backward.ts", "n", args.values.n ?? "8192"),
  C = intFlag("bench/embedding_backward.ts", "c", args.values.c ?? "64");

const scan = await WebGPUBackend.create({ matmul: "default", embeddingBackward: "scan" });
const sort = await WebGPUBackend.create({ matmul: "default", embeddingBackward: "sort" });
const cpu = new CpuBackend();

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

async function timeIt(be: WebGPUBackend, dT: Tensor, ids: Tensor, dy: Tensor, budgetMs: number) {
  ops.embeddingBackwardInPlace(dT, ids, dy); // compile
  await be.sync();
  // Calls per batch so that a batch lasts about budgetMs.
  let t0 = performance.now();
  ops.embeddingBackwardInPlace(dT, ids, dy);
  await be.sync();
  const one = performance.now() - t0;
  const reps = Math.max(1, Math.min(50, Math.round(budgetMs / Math.max(one, 0.01))));
  const samples: number[] = [];
  for (let s = 0; s < 7; s++) {
    t0 = performance.now();
    for (let i = 0; i < reps; i++) ops.embeddingBackwardInPlace(dT, ids, dy);
    await be.sync();
    samples.push((performance.now() - t0) / reps);
  }
  return median(samples);
}

const rows: string[][] = [];
for (const V of [64, 512, 4096, 32768]) {
  const idData = Float32Array.from({ length: N }, (_, i) => (i * 7919 + (i >> 3)) % V);
  const dyData = Float32Array.from({ length: N * C }, (_, i) => Math.sin(i) * 0.01);
  const run = async (be: WebGPUBackend) => {
    const dT = be.zeros([V, C]), ids = be.fromData(idData, [N]), dy = be.fromData(dyData, [N, C]);
    const ms = await timeIt(be, dT, ids, dy, 200);
    // One fresh call from zeros against the CPU reference.
    ops.fillInPlace(dT, 0);
    ops.embeddingBackwardInPlace(dT, ids, dy);
    const got = await dT.toArray();
    for (const t of [dT, ids, dy]) t.dispose();
    return { ms, got };
  };
  const ref = cpu.zeros([V, C]);
  ops.embeddingBackwardInPlace(ref, cpu.fromData(idData, [N]), cpu.fromData(dyData, [N, C]));
  const want = await ref.toArray();
  // The scan grows as V·C·N: past ~2^31 steps one call takes minutes on llvmpipe.
  const old = V * C * N <= 2 ** 31 ? await run(scan) : null;
  const neu = await run(sort);
  let diff = 0;
  for (let i = 0; i < want.length; i++) diff = Math.max(diff, Math.abs(neu.got[i] - want[i]));
  rows.push([
    String(V),
    old === null ? "(skipped)" : `${old.ms.toFixed(2)} ms`,
    `${neu.ms.toFixed(2)} ms`,
    old === null ? "-" : `${(old.ms / neu.ms).toFixed(1)}x`,
    String(diff),
  ]);
}
await scan.close();
await sort.close();

const head = ["V", "scan (old)", "sorted (new)", "speed-up", "max |diff| vs CPU"];
const w = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
const line = (r: string[]) => r.map((c, i) => c.padStart(w[i])).join("  ");
console.log(`embedding backward, N = ${N} ids, C = ${C}, on ${sort.description}`);
console.log(line(head));
for (const r of rows) console.log(line(r));
