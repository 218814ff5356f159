// The child side of bench/peers.ts: what one child process measures (a
// job, given as JSON in its first argument), the timing loop every peer
// shares, the MLP's data (the same numbers for every peer) and the one
// line a child prints. Used by bench/_peer_*.ts; not exported from the
// package.

/** What one child measures: one row of the table in one configuration. */
export interface PeerJob {
  /** `"matmul"`: C = A·B, both n × n; `"mlp"`, `"gpt"`: one training step. */
  readonly row: "matmul" | "mlp" | "gpt";
  /** The matmul's n (unused by the other rows). */
  readonly n: number;
  /** Threads of the peer's pool; `null`: the peer's default (every core). */
  readonly threads: number | null;
  /** Conveyor only: the exact f64 reference backend. */
  readonly exact: boolean;
  /** Warm-up: at least 2 calls and at least this long, ms. */
  readonly warmupMs: number;
  /** Timed: at least 3 calls and at least this long, ms. */
  readonly minMs: number;
}

/** What a child prints (after {@linkcode RESULT_PREFIX}, as one JSON line). */
export interface PeerResult {
  /** Median ms of one call over the timed calls. */
  readonly ms: number;
  /** Timed calls. */
  readonly calls: number;
  /** What ran, in the peer's words (backend, SIMD, threads seen). */
  readonly info: string;
  /** The loss after the last step (training rows), a sanity check. */
  readonly loss?: number;
}

/** The prefix of the result line, so a peer's own output is told apart. */
export const RESULT_PREFIX = "PEER_RESULT ";

/** The MLP row's sizes: 512-1024-1024-16, batch 256, ReLU, MSE, SGD lr 0.01. */
export const MLP = { sizes: [512, 1024, 1024, 16], batch: 256, lr: 0.01 } as const;

/** The tiny GPT row: vocabulary 65, context 64, width 128, 4 heads, 6 blocks, batch 16 × 64, AdamW. */
export const GPT = {
  vocabSize: 65,
  seqLen: 64,
  dim: 128,
  heads: 4,
  layers: 6,
  batch: 16,
  lr: 1e-3,
} as const;

/** The job in `Deno.args[0]`, checked. */
export function readJob(args: readonly string[] = Deno.args): PeerJob {
  const job = JSON.parse(args[0] ?? "null") as PeerJob | null;
  if (
    job === null || !["matmul", "mlp", "gpt"].includes(job.row) || !(job.n >= 1) ||
    !(job.threads === null || job.threads >= 1) || !(job.minMs >= 0) || !(job.warmupMs >= 0)
  ) {
    throw new TypeError(`a peer job as JSON, got ${JSON.stringify(args[0])}`);
  }
  return job;
}

/** `count` numbers uniform in [−scale, scale) from a fixed seed (the same for every peer). */
export function uniform(count: number, scale: number, seed: number): Float32Array {
  const out = new Float32Array(count);
  let s = (seed * 2654435761) >>> 0 || 1;
  for (let i = 0; i < count; i++) {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    out[i] = ((s / 4294967296) * 2 - 1) * scale;
  }
  return out;
}

/** The MLP's weights `[in, out]` and biases (uniform ±1/√in), its input and target. */
export function mlpData(): {
  weights: Float32Array[];
  biases: Float32Array[];
  x: Float32Array;
  y: Float32Array;
} {
  const s = MLP.sizes;
  const weights = [], biases = [];
  for (let l = 0; l + 1 < s.length; l++) {
    weights.push(uniform(s[l] * s[l + 1], 1 / Math.sqrt(s[l]), 10 + l));
    biases.push(uniform(s[l + 1], 1 / Math.sqrt(s[l]), 20 + l));
  }
  return {
    weights,
    biases,
    x: uniform(MLP.batch * s[0], 1, 1),
    y: uniform(MLP.batch * s[s.length - 1], 1, 2),
  };
}

/** Token ids and next-token targets of the GPT row, `[batch, seqLen]` each, as integers. */
export function gptData(): { ids: Int32Array; targets: Int32Array } {
  const n = GPT.batch * GPT.seqLen;
  const r = uniform(n + 1, 1, 3);
  const all = Int32Array.from(
    r,
    (v) => Math.min(GPT.vocabSize - 1, Math.floor((v + 1) / 2 * GPT.vocabSize)),
  );
  return { ids: all.slice(0, n), targets: all.slice(1, n + 1) };
}

/**
 * Warms `call` up (at least 2 calls and `warmupMs`), then times it (at
 * least 3 calls and `minMs`); the median ms of one call.
 */
export async function timeCalls(
  job: PeerJob,
  call: () => unknown,
): Promise<{ ms: number; calls: number }> {
  const t0 = performance.now();
  for (let i = 0; i < 2 || performance.now() - t0 < job.warmupMs; i++) await call();
  const times: number[] = [];
  const t1 = performance.now();
  while (times.length < 3 || performance.now() - t1 < job.minMs) {
    const s = performance.now();
    await call();
    times.push(performance.now() - s);
  }
  times.sort((a, b) => a - b);
  const k = times.length;
  const ms = k % 2 === 1 ? times[(k - 1) / 2] : (times[k / 2 - 1] + times[k / 2]) / 2;
  return { ms, calls: k };
}

/** Prints the result line and ends the process (a peer's idle workers must not keep it alive). */
export function report(result: PeerResult): never {
  console.log(RESULT_PREFIX + JSON.stringify(result));
  Deno.exit(0);
}
