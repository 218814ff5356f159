/**
 * Conveyor's CPU backend beside its JavaScript peers, on this machine:
 * jax-js 0.1.25 (`npm:@jax-js/jax`, its Wasm device) on one thread and on
 * all threads, and TensorFlow.js 4.22.0 with its wasm backend
 * (`npm:@tensorflow/tfjs-backend-wasm`) on one thread and on all threads.
 * Conveyor runs as `new CpuBackend({ threads: 1 })`, as `new CpuBackend()`
 * (every core: "Conveyor default", which every ratio divides by) and
 * as `new CpuBackend({ exact: true })` (the f64 reference backend, the
 * "before" of issue 35).
 *
 * ```sh
 * deno run -A bench/peers.ts                    # the whole table: about 5 minutes on 2 cores
 * deno run -A bench/peers.ts --rows matmul --sizes 1024 --rounds 5
 * deno run -A bench/peers.ts --peers conveyor,jax --rows mlp
 * deno run -A bench/peers.ts --json             # one JSON object per cell
 * ```
 *
 * Flags: `--rounds N` (default 3); `--rows` a list of matmul, mlp, gpt;
 * `--sizes` the matmul's n (default 256,512,1024); `--peers` a list of
 * conveyor, jax, tfjs; `--timeout` seconds per child (default 60);
 * `--warmup-ms`, `--min-ms` (defaults 500, 1000); `--json` one object per
 * cell (every round's outcome, the median, min and max) instead of the table.
 *
 * Rows: square matmul C = A·B for each n of `--sizes` (ms and GFLOP/s,
 * 2n³ FLOP), one training step of an MLP 512-1024-1024-16 (ReLU between
 * the layers, batch 256, mean squared error, plain SGD lr 0.01: forward,
 * gradients of every parameter, the update, the loss read back), and one
 * step of the tiny GPT (`createTinyGPT({ vocabSize: 65, seqLen: 64, dim:
 * 128, heads: 4, layers: 6 })`, a 16 × 64 batch, cross-entropy, AdamW lr
 * 1e-3). Every peer computes the same row the way its users would: Conveyor
 * with its layers, losses and optimizers on one backend; jax-js with one
 * `jit` of `valueAndGrad` and the update (its GPT written out in
 * `bench/_peer_jax.ts`: the same layers, tanh GELU, `dotProductAttention`
 * with `isCausal`, AdamW with Conveyor's defaults); tfjs with
 * `optimizer.minimize`. tfjs has no GPT here: its row says "not written".
 * (Checked once, not by the bench: from the same weights, jax-js's GPT gives
 * the exact backend's losses over 3 AdamW steps to 1e-6, and the three
 * peers' MLPs the same loss after 5 SGD steps to 1e-5.)
 *
 * How it is measured: each (row, configuration) runs in its own child
 * process (`bench/_peer_conveyor.ts`, `_peer_jax.ts`, `_peer_tfjs.ts`),
 * which warms up (at least 2 calls and `--warmup-ms`), then times calls
 * (at least 3 and `--min-ms`) and reports the median call. Rounds are
 * interleaved: round 1 runs every configuration once, round 2 again, …, so
 * a slow spell of a shared machine lands on some rounds of every
 * configuration, not on all of one. The table gives, per cell, the median
 * over the rounds and their min–max, and the median's ratio to Conveyor
 * default's (time over time: above 1 is slower than Conveyor default). A
 * child that has not finished after `--timeout` seconds is killed and its
 * round counted as hung (jax-js's all-thread runs were seen to hang); one
 * that exits with an error counts as failed, its first error line listed
 * under the table. A configuration that fails every row of round 1 is not
 * run again. The children get the parent's permissions, no more, and write
 * no lock file; the npm packages (pinned: jax-js 0.1.25, tfjs 4.22.0) are
 * fetched by Deno into its cache on first use. Under Deno, tfjs sees Node and
 * turns its threaded build off; forcing it on fails to start its pthread
 * workers (`ERR_WORKER_PATH`), which the table shows as failed.
 *
 * @module
 */

import { benchArgs, intFlag, positiveFlag } from "./_args.ts";
import { noiseVerdict } from "./_noise.ts";
import { GPT, type PeerJob, type PeerResult, RESULT_PREFIX } from "./_peer_job.ts";

/** The rows the bench knows. */
export type RowKind = PeerJob["row"];

/** One configuration: a peer, its threads, the rows it has. */
export interface PeerConfig {
  /** The peer's flag name (`--peers`). */
  readonly peer: "conveyor" | "jax" | "tfjs";
  /** The table's name for it. */
  readonly label: string;
  /** Its child script, from bench/. */
  readonly script: string;
  /** Threads of its pool; `null`: the peer's default (every core). */
  readonly threads: number | null;
  /** Conveyor's exact f64 reference backend. */
  readonly exact: boolean;
  /** The rows it has an equivalent of; the others say "not written". */
  readonly rows: readonly RowKind[];
}

/** The label of the configuration every ratio divides by. */
export const BASELINE = "Conveyor default";

/** Every configuration, in the table's order; `cores` is this machine's. */
export function peerConfigs(cores: number): PeerConfig[] {
  const all: RowKind[] = ["matmul", "mlp", "gpt"];
  const c =
    (peer: PeerConfig["peer"], script: string, rows: RowKind[]) =>
    (label: string, threads: number | null, exact = false): PeerConfig => ({
      peer,
      label,
      script,
      threads,
      exact,
      rows,
    });
  const conveyor = c("conveyor", "_peer_conveyor.ts", all);
  const jax = c("jax", "_peer_jax.ts", all);
  const tfjs = c("tfjs", "_peer_tfjs.ts", ["matmul", "mlp"]);
  return [
    conveyor("Conveyor 1 thread", 1),
    conveyor(BASELINE, null),
    conveyor("Conveyor exact (before)", null, true),
    jax("jax-js 1 thread", 1),
    jax(`jax-js ${cores} threads`, null),
    tfjs("tfjs-wasm 1 thread", 1),
    tfjs(`tfjs-wasm ${cores} threads`, cores),
  ];
}

/** One row of the table: its kind and, for matmul, its n. */
export interface RowSpec {
  readonly kind: RowKind;
  readonly n: number;
}

/** The row's name in the table. */
export function rowName(r: RowSpec): string {
  return r.kind === "matmul"
    ? `matmul n = ${r.n}`
    : r.kind === "mlp"
    ? "MLP 512-1024-1024-16, batch 256, SGD step"
    : `tiny GPT step (dim ${GPT.dim}, ${GPT.layers} blocks, ${GPT.batch} × ${GPT.seqLen}, AdamW)`;
}

/** What one round of one cell gave. */
export type RoundOutcome =
  | { readonly kind: "ok"; readonly ms: number; readonly info: string; readonly loss?: number }
  | { readonly kind: "hung"; readonly afterS: number }
  | { readonly kind: "failed"; readonly message: string };

/** One cell of the table: a row in a configuration, over the rounds. */
export interface PeerCell {
  readonly row: string;
  readonly config: string;
  /** FLOP of one call (matmul rows), else undefined. */
  readonly flop?: number;
  /** `"not written"` when the peer has no equivalent of the row; else the rounds. */
  readonly rounds: readonly RoundOutcome[] | "not written";
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  return n === 0 ? NaN : n % 2 === 1 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

/** The median, min and max ms over a cell's measured rounds (NaN when none measured). */
export function cellStats(cell: PeerCell): { median: number; min: number; max: number } {
  const ms = cell.rounds === "not written"
    ? []
    : cell.rounds.flatMap((r) => r.kind === "ok" ? [r.ms] : []);
  return { median: median(ms), min: Math.min(...ms), max: Math.max(...ms) };
}

const fmtMs = (ms: number) =>
  ms >= 100 ? ms.toFixed(0) : ms >= 10 ? ms.toFixed(1) : ms >= 1 ? ms.toFixed(2) : ms.toFixed(3);

/**
 * The Markdown table: one line per cell, grouped by row, with the median
 * ms, the rounds' min–max, GFLOP/s (matmul rows), the ratio of the median
 * to {@linkcode BASELINE}'s in the same row, and how many rounds measured
 * (and why the others did not).
 */
export function peersTable(cells: readonly PeerCell[]): string {
  const head = [
    "row",
    "configuration",
    "median ms",
    "min–max ms",
    "GFLOP/s",
    `time vs ${BASELINE}`,
    "rounds",
  ];
  const lines = [head, head.map((_, i) => i < 2 ? ":--" : "--:")];
  for (const cell of cells) {
    const base = cells.find((c) => c.row === cell.row && c.config === BASELINE);
    const b = base === undefined ? NaN : cellStats(base).median;
    if (cell.rounds === "not written") {
      lines.push([cell.row, cell.config, "not written", "", "", "", ""]);
      continue;
    }
    const s = cellStats(cell);
    const ok = cell.rounds.filter((r) => r.kind === "ok").length;
    const hung = cell.rounds.filter((r) => r.kind === "hung").length;
    const failed = cell.rounds.length - ok - hung;
    const why = [hung > 0 ? `${hung} hung` : "", failed > 0 ? `${failed} failed` : ""]
      .filter((w) => w !== "").join(", ");
    const rounds = `${ok} of ${cell.rounds.length}${why === "" ? "" : ` (${why})`}`;
    if (ok === 0) {
      lines.push([cell.row, cell.config, hung > 0 ? "hung" : "failed", "", "", "", rounds]);
      continue;
    }
    lines.push([
      cell.row,
      cell.config,
      fmtMs(s.median),
      `${fmtMs(s.min)}–${fmtMs(s.max)}`,
      cell.flop === undefined ? "" : (cell.flop / (s.median * 1e6)).toFixed(1),
      Number.isFinite(b) ? `${(s.median / b).toFixed(2)}×` : "",
      rounds,
    ]);
  }
  const widths = head.map((_, i) => Math.max(...lines.map((l) => l[i].length)));
  return lines.map((l, li) =>
    `| ${
      l.map((v, i) =>
        li === 1
          ? (v.startsWith(":") ? ":" + "-".repeat(widths[i] - 1) : "-".repeat(widths[i] - 1) + ":")
          : i < 2
          ? v.padEnd(widths[i])
          : v.padStart(widths[i])
      ).join(" | ")
    } |`
  ).join("\n");
}

/** The flags that the permissions the parent holds in full give its children. */
function childPermissions(): string[] {
  const names = ["read", "write", "net", "env", "run", "sys", "ffi", "import"] as const;
  return names.filter((name) => Deno.permissions.querySync({ name }).state === "granted")
    .map((name) => `--allow-${name}`);
}

// deno-lint-ignore no-control-regex
const stripAnsi = (s: string) => s.replace(/\x1b\[[0-9;]*m/g, "");

/** Runs one child for `job` in `config`, killed after `timeoutS` seconds. */
async function runChild(config: PeerConfig, job: PeerJob, timeoutS: number): Promise<RoundOutcome> {
  const script = new URL(config.script, import.meta.url).pathname;
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "--no-lock", "--quiet", ...childPermissions(), script, JSON.stringify(job)],
    stdout: "piped",
    stderr: "piped",
    stdin: "null",
  }).spawn();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    try {
      child.kill("SIGKILL");
    } catch { /* already gone */ }
  }, timeoutS * 1000);
  const out = await child.output();
  clearTimeout(timer);
  if (timedOut) return { kind: "hung", afterS: timeoutS };
  const text = new TextDecoder();
  const line = text.decode(out.stdout).split("\n").find((l) => l.startsWith(RESULT_PREFIX));
  if (out.code === 0 && line !== undefined) {
    const r = JSON.parse(line.slice(RESULT_PREFIX.length)) as PeerResult;
    return {
      kind: "ok",
      ms: r.ms,
      info: r.info,
      ...(r.loss === undefined ? {} : { loss: r.loss }),
    };
  }
  const err = stripAnsi(text.decode(out.stderr)).split("\n").map((l) => l.trim())
    .find((l) => /error/i.test(l)) ?? `exit code ${out.code}, no result line`;
  return { kind: "failed", message: err.slice(0, 300) };
}

/** The flags of the bench, as `peers.ts` reads them. */
export const PEERS_FLAGS = {
  rounds: { type: "string", default: "3" },
  rows: { type: "string", default: "matmul,mlp,gpt" },
  sizes: { type: "string", default: "256,512,1024" },
  peers: { type: "string", default: "conveyor,jax,tfjs" },
  timeout: { type: "string", default: "60" },
  "warmup-ms": { type: "string", default: "500" },
  "min-ms": { type: "string", default: "1000" },
  json: { type: "boolean", default: false },
} as const;

function listFlag(name: string, text: string, known: readonly string[]): string[] {
  const items = text.split(",").map((s) => s.trim()).filter((s) => s !== "");
  const bad = items.find((s) => !known.includes(s));
  if (items.length === 0 || bad !== undefined) {
    console.error(
      `bench/peers.ts: --${name} must be a comma-separated list of ${known.join(", ")}, got ${
        JSON.stringify(text)
      } (see --help)`,
    );
    Deno.exit(2);
  }
  return items;
}

async function main(): Promise<void> {
  const script = "bench/peers.ts";
  const v = benchArgs(script, PEERS_FLAGS);
  if (Deno.permissions.querySync({ name: "run" }).state !== "granted") {
    console.error(`${script}: each peer runs in a child process: run it with -A (see --help)`);
    Deno.exit(2);
  }
  const rounds = intFlag(script, "rounds", v.rounds);
  const timeoutS = positiveFlag(script, "timeout", v.timeout);
  const warmupMs = intFlag(script, "warmup-ms", v["warmup-ms"], 0);
  const minMs = intFlag(script, "min-ms", v["min-ms"], 0);
  const rowKinds = listFlag("rows", v.rows, ["matmul", "mlp", "gpt"]) as RowKind[];
  const peers = listFlag("peers", v.peers, ["conveyor", "jax", "tfjs"]);
  const sizes = v.sizes.split(",").map((s) => intFlag(script, "sizes", s.trim()));
  const cores = navigator.hardwareConcurrency;
  const configs = peerConfigs(cores).filter((c) => peers.includes(c.peer));
  const rows: RowSpec[] = rowKinds.flatMap((kind): RowSpec[] =>
    kind === "matmul" ? sizes.map((n) => ({ kind, n })) : [{ kind, n: 1 }]
  );
  const key = (r: RowSpec, c: PeerConfig) => `${rowName(r)}\u0000${c.label}`;
  const results = new Map<string, RoundOutcome[]>();
  const dropped = new Set<string>();
  const t0 = performance.now();
  for (let round = 0; round < rounds; round++) {
    for (const r of rows) {
      for (const c of configs) {
        if (!c.rows.includes(r.kind) || dropped.has(c.label)) continue;
        const job: PeerJob = {
          row: r.kind,
          n: r.n,
          threads: c.threads,
          exact: c.exact,
          warmupMs,
          minMs,
        };
        const outcome = await runChild(c, job, timeoutS);
        const list = results.get(key(r, c)) ?? [];
        list.push(outcome);
        results.set(key(r, c), list);
        if (!v.json) {
          const what = outcome.kind === "ok" ? `${fmtMs(outcome.ms)} ms` : outcome.kind;
          console.error(`round ${round + 1}/${rounds}: ${rowName(r)}, ${c.label}: ${what}`);
        }
      }
    }
    // A configuration that failed every row of round 1 (it cannot start here) is not run again.
    if (round === 0) {
      for (const c of configs) {
        const own = rows.filter((r) => c.rows.includes(r.kind)).map((r) => results.get(key(r, c)));
        if (own.length > 0 && own.every((l) => l?.[0]?.kind === "failed")) dropped.add(c.label);
      }
    }
  }
  const cells: PeerCell[] = rows.flatMap((r) =>
    configs.map((c): PeerCell => ({
      row: rowName(r),
      config: c.label,
      ...(r.kind === "matmul" ? { flop: 2 * r.n ** 3 } : {}),
      rounds: c.rows.includes(r.kind) ? results.get(key(r, c)) ?? [] : "not written",
    }))
  );
  if (v.json) {
    for (const cell of cells) console.log(JSON.stringify({ ...cell, ...cellStats(cell) }));
    return;
  }
  const minutes = ((performance.now() - t0) / 60000).toFixed(1);
  console.log(
    `Conveyor beside its peers: ${rounds} interleaved round(s), ${cores} cores ` +
      `(navigator.hardwareConcurrency), Deno ${Deno.version.deno}, ${minutes} min.\n`,
  );
  console.log(peersTable(cells));
  console.log("");
  const infos = new Map<string, Set<string>>();
  const failures = new Map<string, Set<string>>();
  for (const cell of cells) {
    if (cell.rounds === "not written") continue;
    for (const r of cell.rounds) {
      const m = r.kind === "ok" ? infos : r.kind === "failed" ? failures : null;
      const what = r.kind === "ok" ? r.info : r.kind === "failed" ? r.message : "";
      if (m !== null) m.set(cell.config, (m.get(cell.config) ?? new Set()).add(what));
    }
  }
  for (const [config, set] of infos) console.log(`- ${config}: ${[...set].join("; ")}`);
  for (const [config, set] of failures) {
    console.log(
      `- ${config} failed${dropped.has(config) ? " (every row of round 1, not run again)" : ""}: ${
        [...set].join("; ")
      }`,
    );
  }
  const spread = cells.flatMap((cell) => {
    const s = cellStats(cell);
    return Number.isFinite(s.median)
      ? [{ label: `${cell.row}, ${cell.config}`, medianMs: s.median, spreadMs: s.max - s.min }]
      : [];
  });
  if (rounds > 1 && spread.length > 0) console.log(`\n${noiseVerdict(spread)}`);
}

if (import.meta.main) await main();
