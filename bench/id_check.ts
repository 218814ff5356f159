/**
 * Cost of the out-of-range id checks on WebGPU (`src/tensor/webgpu/_index_check.ts`).
 *
 *   deno run -A bench/id_check.ts
 *
 * Prints, per id count N:
 * - record: the scan `fromData` does to keep a host record of integer data
 *   (and, for comparison, of float data, which stops at the first value);
 * - host check: `invalidIndex` on recorded ids, per call (what every
 *   embedding / cross-entropy call pays for host ids);
 * - device check: the extra wall time per embedding call for ids with no
 *   host record (computed on the GPU), from 20 calls with one sync, against
 *   the same calls on host ids.
 * Timings on a shared machine are noisy; medians of several runs.
 *
 * @module
 */

import * as ops from "../src/tensor/ops.ts";
import { WebGPUBackend } from "../src/tensor/webgpu/mod.ts";
import { recordValues } from "../src/tensor/webgpu/_host_values.ts";

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

function time(fn: () => void, reps: number): number {
  const t0 = performance.now();
  for (let i = 0; i < reps; i++) fn();
  return (performance.now() - t0) / reps;
}

const be = await WebGPUBackend.create({ matmul: "default" });
const V = 50_000, C = 64;
const table = be.fromData(new Float32Array(V * C).fill(0.5), [V, C]);
const rows: string[][] = [];
for (const N of [1_024, 16_384, 65_536, 262_144]) {
  const idData = Float32Array.from({ length: N }, (_, i) => (i * 7919) % V);
  const floatData = Float32Array.from({ length: N }, (_, i) => Math.sin(i) * 0.1);
  const recInt = median(Array.from({ length: 9 }, () => time(() => recordValues(idData), 5)));
  const recFloat = median(Array.from({ length: 9 }, () => time(() => recordValues(floatData), 50)));
  const ids = be.fromData(idData, [N]);
  const host = median(Array.from({ length: 9 }, () => time(() => be.invalidIndex(ids, V), 10_000)));
  // Device-computed ids (no host record): ids · 1 on the GPU.
  const devIds = ops.scale(ids, 1);
  const run = async (x: typeof ids) => {
    await be.sync();
    const t0 = performance.now();
    for (let i = 0; i < 20; i++) ops.embedding(table, x).dispose();
    await be.sync();
    return (performance.now() - t0) / 20;
  };
  await run(ids);
  await run(devIds); // compile both paths first
  const tHost: number[] = [], tDev: number[] = [];
  for (let r = 0; r < 7; r++) {
    tHost.push(await run(ids));
    tDev.push(await run(devIds));
  }
  rows.push([
    String(N),
    `${(recInt * 1000).toFixed(1)} µs`,
    `${(recFloat * 1000).toFixed(2)} µs`,
    `${(host * 1e6).toFixed(0)} ns`,
    `${median(tHost).toFixed(3)} ms`,
    `${(median(tDev) - median(tHost)).toFixed(3)} ms`,
  ]);
  ids.dispose();
  devIds.dispose();
}
await be.close();
const head = [
  "N ids",
  "record (int)",
  "record (float)",
  "host check/call",
  "embedding/call",
  "device check extra/call",
];
const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
const line = (r: string[]) => r.map((c, i) => c.padStart(widths[i])).join("  ");
console.log(`WebGPU id checks on ${be.description} (V = ${V}, C = ${C})`);
console.log(line(head));
for (const r of rows) console.log(line(r));
