// bench/peers.ts: the table's shape (each cell's median, spread, GFLOP/s,
// ratio to Conveyor default and rounds; hung, failed and not-written cells),
// and a tiny real run with Conveyor only (no npm, no network): a Markdown
// table with a measured line per configuration, a child past its timeout
// reported as hung (the bench still exits 0), and a bad flag refused.

import assert from "node:assert/strict";
import { BASELINE, type PeerCell, peerConfigs, peersTable } from "../../bench/peers.ts";

function cellsOf(line: string): string[] {
  return line.split("|").slice(1, -1).map((c) => c.trim());
}

Deno.test("peersTable: median, min–max, GFLOP/s, ratio to Conveyor default and rounds per cell", () => {
  const row = "matmul n = 100";
  const ok = (ms: number) => ({ kind: "ok" as const, ms, info: "x" });
  const cells: PeerCell[] = [
    { row, config: BASELINE, flop: 2e6, rounds: [ok(2), ok(1), ok(4)] },
    { row, config: "peer A", flop: 2e6, rounds: [ok(8), { kind: "hung", afterS: 60 }, ok(4)] },
    { row, config: "peer B", flop: 2e6, rounds: [{ kind: "hung", afterS: 60 }] },
    { row, config: "peer C", flop: 2e6, rounds: [{ kind: "failed", message: "no" }, ok(3)] },
    { row: "MLP", config: BASELINE, rounds: [ok(10)] },
    { row: "MLP", config: "peer D", rounds: "not written" },
  ];
  const lines = peersTable(cells).split("\n");
  assert.equal(lines.length, 2 + cells.length);
  assert.ok(lines.every((l) => cellsOf(l).length === 7), lines.join("\n"));
  assert.ok(cellsOf(lines[1]).every((c) => /^:?-+:?$/.test(c)), lines[1]);
  // Median 2 ms of 2e6 FLOP: 1 GFLOP/s.
  assert.deepEqual(cellsOf(lines[2]).slice(1), [
    BASELINE,
    "2.00",
    "1.00–4.00",
    "1.0",
    "1.00×",
    "3 of 3",
  ]);
  // The hung round is left out of the median (6 = median of 8 and 4) and counted.
  assert.deepEqual(cellsOf(lines[3]).slice(2), [
    "6.00",
    "4.00–8.00",
    "0.3",
    "3.00×",
    "2 of 3 (1 hung)",
  ]);
  assert.deepEqual(cellsOf(lines[4]).slice(2), ["hung", "", "", "", "0 of 1 (1 hung)"]);
  assert.deepEqual(cellsOf(lines[5]).slice(4), ["0.7", "1.50×", "1 of 2 (1 failed)"]);
  assert.deepEqual(cellsOf(lines[6]).slice(4), ["", "1.00×", "1 of 1"]);
  assert.deepEqual(cellsOf(lines[7]).slice(1, 3), ["peer D", "not written"]);
});

Deno.test("peerConfigs: Conveyor 1 thread, default and exact; jax-js 1 and all threads; tfjs-wasm", () => {
  const configs = peerConfigs(8);
  assert.deepEqual(configs.map((c) => c.label), [
    "Conveyor 1 thread",
    BASELINE,
    "Conveyor exact (before)",
    "jax-js 1 thread",
    "jax-js 8 threads",
    "tfjs-wasm 1 thread",
    "tfjs-wasm 8 threads",
  ]);
  assert.deepEqual(configs.map((c) => c.threads), [1, null, null, 1, null, 1, 8]);
  assert.deepEqual(configs.map((c) => c.exact), [false, false, true, false, false, false, false]);
});

async function peers(...args: string[]) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", new URL("../../bench/peers.ts", import.meta.url).pathname, ...args],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = (b: Uint8Array) => new TextDecoder().decode(b);
  return { code: out.code, stdout: text(out.stdout), stderr: text(out.stderr) };
}

const TINY = [
  "--rows",
  "matmul",
  "--sizes",
  "64",
  "--peers",
  "conveyor",
  "--warmup-ms",
  "0",
  "--min-ms",
  "0",
];

Deno.test("bench/peers.ts: a tiny Conveyor-only run prints the table, a measured line per configuration", async () => {
  const r = await peers(...TINY, "--rounds", "2");
  assert.equal(r.code, 0, r.stderr);
  const table = r.stdout.split("\n").filter((l) => l.startsWith("|"));
  assert.equal(table.length, 2 + 3, r.stdout);
  assert.deepEqual(cellsOf(table[0]), [
    "row",
    "configuration",
    "median ms",
    "min–max ms",
    "GFLOP/s",
    `time vs ${BASELINE}`,
    "rounds",
  ]);
  const body = table.slice(2).map(cellsOf);
  assert.deepEqual(body.map((c) => c[1]), [
    "Conveyor 1 thread",
    BASELINE,
    "Conveyor exact (before)",
  ]);
  for (const c of body) {
    assert.equal(c[0], "matmul n = 64");
    const [median, min, max, gflops] = [Number(c[2]), ...c[3].split("–").map(Number), Number(c[4])];
    assert.ok(median > 0 && min <= median && median <= max, c.join(" | "));
    // 2 · 64³ FLOP in `median` ms.
    assert.ok(
      Math.abs(gflops - 2 * 64 ** 3 / (median * 1e6)) <= 0.05 * gflops + 0.05,
      c.join(" | "),
    );
    assert.equal(c[6], "2 of 2");
  }
  assert.equal(body[1][5], "1.00×");
  assert.match(r.stdout, /- Conveyor exact \(before\): CPU exact reference/);
  assert.match(r.stdout, /- Conveyor 1 thread: CPU \(WebAssembly .*, 1 thread\)/);
});

Deno.test("bench/peers.ts: a child past --timeout is killed and reported as hung; the bench exits 0", async () => {
  const r = await peers(...TINY, "--rounds", "1", "--timeout", "0.01");
  assert.equal(r.code, 0, r.stderr);
  const body = r.stdout.split("\n").filter((l) => l.startsWith("|")).slice(2).map(cellsOf);
  assert.equal(body.length, 3, r.stdout);
  for (const c of body) assert.deepEqual([c[2], c[6]], ["hung", "0 of 1 (1 hung)"]);
});

Deno.test("bench/peers.ts: an unknown row or peer is one line naming it, exit code 2", async () => {
  const r = await peers("--rows", "matmul,mpl");
  assert.equal(r.code, 2);
  assert.equal(
    r.stderr.trim(),
    'bench/peers.ts: --rows must be a comma-separated list of matmul, mlp, gpt, got "matmul,mpl" (see --help)',
  );
  const p = await peers("--peers", "torch");
  assert.equal(p.code, 2);
  assert.match(
    p.stderr,
    /--peers must be a comma-separated list of conveyor, jax, tfjs, got "torch"/,
  );
});

Deno.test("bench/peers.ts: without --allow-run it says to run it with -A, exit code 2", async () => {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--no-prompt", new URL("../../bench/peers.ts", import.meta.url).pathname],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(out.code, 2);
  assert.equal(
    new TextDecoder().decode(out.stderr).trim(),
    "bench/peers.ts: each peer runs in a child process: run it with -A (see --help)",
  );
});
