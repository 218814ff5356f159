/**
 * Milliseconds per SGD step (momentum 0.9, weight decay 0.01) on a
 * ~1M-parameter model (4 Linear layers of 512×512 + bias), CPU and WebGPU,
 * for the fused `sgdInPlace` step and the unfused ops it replaced.
 *
 *   deno run -A bench/sgd_step.ts [--steps 20]
 *
 * @module
 */

import { benchArgs, intFlag } from "./_args.ts";
import { Linear } from "../mod.ts";
import { type Backend, createBackend, ops, type Tensor } from "../tensor.ts";
import { SGD } from "../nn.ts";

const values = benchArgs("bench/sgd_step.ts", { steps: { type: "string", default: "20" } });
const steps = intFlag("bench/sgd_step.ts", "steps", values.steps);

/** The update SGD ran before `sgdInPlace`: scale, axpys and a fresh momentum buffer per step. */
function unfusedStep(
  params: { value: Tensor; grad: Tensor }[],
  bufs: Map<Tensor, Tensor>,
  lr: number,
  mu: number,
  wd: number,
): void {
  for (const p of params) {
    const d = ops.scale(p.value, wd);
    ops.axpyInPlace(d, 1, p.grad);
    const old = bufs.get(p.value);
    let buf: Tensor;
    if (old === undefined) buf = ops.copy(d);
    else {
      buf = ops.scale(old, mu);
      ops.axpyInPlace(buf, 1, d);
      old.dispose();
    }
    bufs.set(p.value, buf);
    d.dispose();
    ops.axpyInPlace(p.value, -lr, buf);
  }
}

async function time(be: Backend, step: () => void): Promise<number> {
  step();
  step();
  await be.sync();
  const t0 = performance.now();
  for (let i = 0; i < steps; i++) step();
  await be.sync();
  return (performance.now() - t0) / steps;
}

const rows: string[] = [];
for (const kind of ["cpu", "webgpu"] as const) {
  let be: Backend;
  try {
    be = await createBackend(kind);
  } catch (e) {
    rows.push(`${kind.padEnd(7)} unavailable (${(e as Error).message})`);
    continue;
  }
  const layers = [0, 1, 2, 3].map((i) => new Linear(be, 512, 512, { seed: i }));
  const params = layers.flatMap((l) => l.parameters());
  for (const p of params) ops.fillInPlace(p.grad, 0.01);
  const n = params.reduce((a, p) => a + p.value.size, 0);
  const opt = new SGD(params, { lr: 0.01, momentum: 0.9, weightDecay: 0.01 });
  const fused = await time(be, () => opt.step());
  const bufs = new Map<Tensor, Tensor>();
  const unfused = await time(be, () => unfusedStep(params, bufs, 0.01, 0.9, 0.01));
  rows.push(
    `${kind.padEnd(7)} ${String(n).padStart(8)} params  fused ${
      fused.toFixed(2).padStart(7)
    } ms  ` +
      `unfused ${unfused.toFixed(2).padStart(7)} ms  (${(unfused / fused).toFixed(2)}×)`,
  );
  for (const b of bufs.values()) b.dispose();
  opt.dispose();
  for (const l of layers) l.dispose();
  await be.close();
}
console.log(`SGD step, ${steps} steps each, ms per step:`);
for (const r of rows) console.log(r);
