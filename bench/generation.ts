/**
 * Generation with and without the key/value cache: 64 tokens after a
 * 16-token prompt (greedy) from a tiny GPT (char vocabulary, dim 64, 4
 * heads, 4 blocks, context 128), on one device (CPU backend) and through a
 * 2-rank pipeline (1f1b, worker ranks): milliseconds per generated token
 * (median of the repeats, with min–max) and the cached path's speed-up.
 * The two paths give the same tokens (checked here too).
 *
 *   deno run -A bench/generation.ts [--repeats 5] [--tokens 64] [--prompt 16]
 *     [--dim 64] [--layers 4]
 *
 * @module
 */

import { benchArgs, intFlag } from "./_args.ts";
import { CpuBackend, createTinyGPT, PipelineParallelModel } from "../mod.ts";
import { generate, type GenerationOptions, type GenerationResult } from "../nn.ts";

const S = "bench/generation.ts";
const values = benchArgs(S, {
  repeats: { type: "string", default: "5" },
  tokens: { type: "string", default: "64" },
  prompt: { type: "string", default: "16" },
  dim: { type: "string", default: "64" },
  layers: { type: "string", default: "4" },
});
const repeats = intFlag(S, "repeats", values.repeats);
const tokens = intFlag(S, "tokens", values.tokens);
const promptLen = intFlag(S, "prompt", values.prompt);
const dim = intFlag(S, "dim", values.dim);
const layers = intFlag(S, "layers", values.layers);

const cfg = { vocabSize: 65, seqLen: 128, dim, heads: 4, layers, seed: 1 };
const prompt = Array.from({ length: promptLen }, (_, i) => (i * 7 + 3) % cfg.vocabSize);
const net = createTinyGPT(cfg, new CpuBackend());

type Run = (o: GenerationOptions) => Promise<GenerationResult>;

async function measure(run: Run, cache: boolean): Promise<{ ms: number[]; ids: number[] }> {
  const o = { maxTokens: tokens, temperature: 0, cache };
  const warm = await run(o);
  const ms: number[] = [];
  for (let i = 0; i < repeats; i++) ms.push(1000 * (await run(o)).seconds / tokens);
  return { ms: ms.sort((a, b) => a - b), ids: warm.ids[0] };
}

const median = (xs: number[]) => xs[Math.floor(xs.length / 2)];
const rows: string[] = [];
async function compare(label: string, run: Run): Promise<void> {
  const off = await measure(run, false);
  const on = await measure(run, true);
  if (on.ids.join() !== off.ids.join()) throw new Error(`${label}: cached tokens differ`);
  const f = (m: { ms: number[] }) =>
    `${median(m.ms).toFixed(3)} ms/token (${m.ms[0].toFixed(3)}–${m.ms.at(-1)!.toFixed(3)})`;
  rows.push(
    `${label.padEnd(26)} uncached ${f(off)}  cached ${f(on)}  speed-up ${
      (median(off.ms) / median(on.ms)).toFixed(1)
    }x`,
  );
}

await compare("one device (cpu)", (o) => generate(net, prompt, o));
{
  await using model = await PipelineParallelModel.create({
    model: net,
    schedule: "1f1b",
    ranks: 2,
    microBatches: 2,
    loss: "cross-entropy",
    optimizer: { kind: "sgd", lr: 0 },
    backend: "cpu",
  });
  await compare("2 ranks, 1f1b (workers)", (o) => model.generate(prompt, o));
}
net.dispose();
console.log(
  `generation of ${tokens} tokens after a ${promptLen}-token prompt, tiny GPT ` +
    `(vocab ${cfg.vocabSize}, dim ${dim}, 4 heads, ${layers} blocks), greedy, ${repeats} repeats:`,
);
for (const r of rows) console.log(r);
