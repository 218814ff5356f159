// A memory estimate of `train`'s tiny GPT, checked before anything is
// allocated, so that absurd sizes get an error naming the flag and the bytes
// instead of an allocation failure. Not exported from the package.

import { UsageError } from "./command.ts";

/** The sizes that drive memory. */
export interface TrainSizes {
  readonly batch: number;
  readonly seqLen: number;
  readonly dim: number;
  readonly heads: number;
  readonly layers: number;
  readonly vocab: number;
  readonly microBatches: number;
}

function gib(bytes: number): string {
  return bytes >= 2 ** 40
    ? `${(bytes / 2 ** 40).toFixed(1)} TiB`
    : `${(bytes / 2 ** 30).toFixed(1)} GiB`;
}

// Asked before reading: on a terminal a read without the permission stops
// at a prompt, which the README's commands must not meet.
function machineBytes(): number {
  const sys = Deno.permissions.querySync({ name: "sys", kind: "systemMemoryInfo" });
  if (sys.state !== "granted") return 8 * 2 ** 30; // without --allow-sys: assume 8 GiB
  return Deno.systemMemoryInfo().total;
}

/**
 * Throws a UsageError naming the flags behind the largest share when the
 * estimate exceeds 80% of the machine's memory, or one array exceeds 2 GiB
 * (the largest typed array or GPU buffer the backends allocate).
 */
export function checkTrainMemory(s: TrainSizes): void {
  const f32 = 4;
  // Parameters per block: attention 4·d² + 4·d, MLP 8·d² + 5·d, two norms 4·d.
  const params = s.vocab * s.dim + s.seqLen * s.dim +
    s.layers * (12 * s.dim * s.dim + 13 * s.dim) + 2 * s.dim + s.dim * s.vocab + s.vocab;
  const mb = Math.ceil(s.batch / s.microBatches);
  const rows = mb * s.seqLen;
  const terms: { what: string; flags: string; bytes: number }[] = [
    {
      what: "parameters, gradients and AdamW state",
      flags: `--dim ${s.dim} --layers ${s.layers}`,
      bytes: 4 * params * f32,
    },
    {
      what: "the batch's token ids and targets (with their micro-batch copies)",
      flags: `--batch ${s.batch} --seq-len ${s.seqLen}`,
      bytes: 4 * s.batch * s.seqLen * f32,
    },
    {
      // Kept per block and micro-batch: ~16 d-wide rows and the attention
      // probabilities; at most every micro-batch in flight (GPipe).
      what: "activations kept for the backward",
      flags: `--batch ${s.batch} --seq-len ${s.seqLen} --dim ${s.dim}`,
      bytes: s.microBatches * s.layers * (16 * rows * s.dim + mb * s.heads * s.seqLen * s.seqLen) *
        f32,
    },
  ];
  const largestArray = [
    { flags: `--batch ${s.batch} --seq-len ${s.seqLen}`, bytes: s.batch * s.seqLen * f32 },
    { flags: `--dim ${s.dim}`, bytes: 4 * s.dim * s.dim * f32 },
    {
      flags: `--batch ${s.batch} --seq-len ${s.seqLen} --dim ${s.dim}`,
      bytes: 4 * rows * s.dim * f32,
    },
    {
      flags: `--batch ${s.batch} --seq-len ${s.seqLen} --heads ${s.heads}`,
      bytes: mb * s.heads * s.seqLen * s.seqLen * f32,
    },
  ].sort((a, b) => b.bytes - a.bytes)[0];
  const ARRAY_LIMIT = 2 ** 31;
  if (largestArray.bytes > ARRAY_LIMIT) {
    throw new UsageError(
      `${largestArray.flags}: one array would need ${gib(largestArray.bytes)}, over the ` +
        `${gib(ARRAY_LIMIT)} a backend allocates at once`,
    );
  }
  const total = terms.reduce((a, t) => a + t.bytes, 0);
  const limit = 0.8 * machineBytes();
  if (total > limit) {
    const top = [...terms].sort((a, b) => b.bytes - a.bytes)[0];
    throw new UsageError(
      `${top.flags}: training would need about ${gib(total)} (${
        gib(top.bytes)
      } for ${top.what}), ` +
        `over 80% of this machine's ${gib(limit / 0.8)}`,
    );
  }
}
