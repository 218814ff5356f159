/**
 * What global-norm clipping costs on real compute: the tiny GPT of
 * `bench/pipeline_speedup.ts` (CPU, 2 ranks in workers, m = 8) trained by
 * `train()` on 8 batches at a time (one window, so consecutive steps
 * interlock), without clipping, with a limit that never clips, and with one
 * that clips every step. Clipping is checked by post-validation: a step that
 * does not clip costs a copy of the stage's gradients and nothing waits; a
 * step that clips is redone on every stage and the next step, begun on the
 * unclipped weights, starts over.
 *
 * ```sh
 * deno run -A bench/clipping.ts                      # zb-h2 and 1f1b
 * deno run -A bench/clipping.ts --schedule zb-v --calls 5
 * ```
 *
 * Prints ms per step (median over calls, each call's mean) and the bubble
 * over the call. Timing on a shared machine is noisy: read the spread.
 *
 * @module
 */

import { benchArgs, intFlag } from "./_args.ts";
import { createRealPipeline, REAL_COMPUTE, realBatches } from "./_real_compute.ts";

const values = benchArgs("bench/clipping.ts", {
  schedule: { type: "string", multiple: true },
  calls: { type: "string", default: "3" },
  steps: { type: "string", default: "8" },
});
const schedules = values.schedule ?? ["zb-h2", "1f1b"];
const calls = intFlag("bench/clipping.ts", "calls", values.calls);
const steps = intFlag("bench/clipping.ts", "steps", values.steps);
for (const [name, n] of [["calls", calls], ["steps", steps]] as const) {
  if (!Number.isInteger(n) || n < 1) {
    throw new RangeError(`--${name} must be a positive integer, got ${n}`);
  }
}

const cfg = REAL_COMPUTE;
const batches = realBatches(cfg, steps, 11);
// The gradient norm of this model's first steps is about 1-3: 1e9 never
// clips, 1e-3 always does (checked from the reported norms below).
const modes = [
  { label: "no clipping", clip: undefined },
  { label: "limit never reached", clip: 1e9 },
  { label: "every step clipped", clip: 1e-3 },
] as const;

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 === 1 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

console.log(
  `tiny GPT dim ${cfg.dim}, ${cfg.layers} blocks, batch ${cfg.batch} × ${cfg.seqLen}, m = ${cfg.microBatches}, ${cfg.backend}, 2 workers; train() on ${steps} batches per call, 1 warm-up + ${calls} calls\n`,
);
console.log("| schedule | clipping | ms per step | vs no clipping | bubble | steps clipped |");
console.log("| :------- | :------- | ----------: | -------------: | -----: | ------------: |");
for (const schedule of schedules) {
  let base = NaN;
  for (const mode of modes) {
    const model = await createRealPipeline(cfg, schedule, 2, "workers", mode.clip);
    try {
      await model.train(batches); // warm-up
      const perStep: number[] = [], bubbles: number[] = [];
      let clipped = 0;
      for (let c = 0; c < calls; c++) {
        const t0 = performance.now();
        const r = await model.train(batches);
        perStep.push((performance.now() - t0) / steps);
        bubbles.push(r.bubble);
        if (mode.clip !== undefined) {
          clipped += r.steps.filter((s) => (s.gradNorm ?? 0) > mode.clip!).length;
        }
      }
      const ms = median(perStep);
      if (mode.clip === undefined) base = ms;
      console.log(
        `| ${schedule} | ${mode.label} | ${ms.toFixed(0)} | ${(ms / base).toFixed(2)}x | ${
          (100 * median(bubbles)).toFixed(1)
        }% | ${mode.clip === undefined ? "—" : `${clipped} / ${calls * steps}`} |`,
      );
    } finally {
      await model.dispose();
    }
  }
}
