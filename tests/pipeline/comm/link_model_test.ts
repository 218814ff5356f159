import assert from "node:assert/strict";
import type {
  CommBackend,
  ControlHandler,
  SendOptions,
} from "../../../src/pipeline/comm/backend.ts";
import { InProcessBackend } from "../../../src/pipeline/comm/in_process.ts";
import {
  linkFromSamples,
  measureLink,
  messageDelay,
} from "../../../src/pipeline/comm/link_model.ts";
import { generateSchedule } from "../../../src/pipeline/schedule/generate.ts";
import { simulate } from "../../../src/pipeline/analysis/simulate.ts";

Deno.test("linkFromSamples: latency and bandwidth of a line α + n/β, whatever the order", () => {
  // α = 0.02 ms, β = 2e6 bytes/ms (2 GB/s).
  const t = (n: number) => 0.02 + n / 2e6;
  const link = linkFromSamples([1 << 20, 4, 65536].map((bytes) => ({ bytes, ms: t(bytes) })));
  assert.ok(Math.abs(link.latencyMs - 0.02) < 1e-12, `latency ${link.latencyMs}`);
  assert.ok(Math.abs(link.bytesPerMs - 2e6) < 1e-6, `bandwidth ${link.bytesPerMs}`);
});

Deno.test("linkFromSamples: a largest message that is not slower means unbounded bandwidth", () => {
  const link = linkFromSamples([{ bytes: 4, ms: 0.01 }, { bytes: 1 << 20, ms: 0.01 }]);
  assert.deepEqual(link, { latencyMs: 0.01, bytesPerMs: Infinity });
  assert.equal(messageDelay(link, 1 << 30), 0.01);
});

Deno.test("linkFromSamples: bad samples are refused with the value named", () => {
  assert.throws(() => linkFromSamples([{ bytes: 4, ms: 1 }]), /need at least 2 samples, got 1/);
  assert.throws(
    () => linkFromSamples([{ bytes: 4, ms: 1 }, { bytes: 4, ms: 2 }]),
    /two distinct sizes, got only 4 bytes/,
  );
  assert.throws(
    () => linkFromSamples([{ bytes: 4, ms: -1 }, { bytes: 8, ms: 2 }]),
    /samples\[0\]\.ms must be a finite number >= 0, got -1/,
  );
});

Deno.test("messageDelay: latency plus size over bandwidth, in the simulation's unit", () => {
  const link = { latencyMs: 0.05, bytesPerMs: 4e6 };
  assert.equal(messageDelay(link, 0), 0.05);
  assert.equal(messageDelay(link, 8e6), 2.05);
  assert.equal(messageDelay(link, 8e6, 0.5), 4.1, "costs in units of 0.5 ms");
  assert.throws(() => messageDelay(link, -1), /bytes must be a finite number >= 0, got -1/);
  assert.throws(
    () => messageDelay({ latencyMs: 0, bytesPerMs: 0 }, 4),
    /bytesPerMs must be a positive number, got 0/,
  );
  assert.throws(() => messageDelay(link, 4, 0), /unitMs must be a positive number, got 0/);
});

Deno.test("messageDelay: the simulator's step grows by the delay on each cross-rank hop", () => {
  const s = generateSchedule("gpipe", { ranks: 2, microBatches: 1 });
  const costs = { F: 10, B: 20 };
  const base = simulate(s, { costs }).makespan;
  const comm = messageDelay({ latencyMs: 1, bytesPerMs: 1e6 }, 2e6); // 3 ms
  // One micro-batch over 2 ranks: one activation hop forward, one gradient hop back.
  assert.equal(simulate(s, { costs, comm }).makespan, base + 2 * comm);
});

// An in-process backend whose every message takes α + n/β (n in bytes):
// what measureLink measures should come back.
function slowGroup(latencyMs: number, bytesPerMs: number): CommBackend[] {
  const inner = InProcessBackend.createGroup(2);
  return inner.map((b): CommBackend => ({
    rank: b.rank,
    size: b.size,
    get aborted() {
      return b.aborted;
    },
    async send(peer: number, tag: string, data, options?: SendOptions) {
      const a = await data;
      const ms = latencyMs + a.byteLength / bytesPerMs;
      await new Promise((r) => setTimeout(r, ms));
      await b.send(peer, tag, a, options);
    },
    recv: (peer: number, tag: string) => b.recv(peer, tag),
    discard: (match: (tag: string) => boolean) => b.discard(match),
    barrier: () => b.barrier(),
    broadcastControl: (m) => b.broadcastControl(m),
    onControl: (h: ControlHandler) => b.onControl(h),
    abort: (r: string) => b.abort(r),
    close: () => b.close(),
  }));
}

Deno.test("measureLink: both ranks get the same model, close to the link's true α and β", async () => {
  const [a, b] = slowGroup(5, 1e5); // 5 ms, 100 MB/s
  try {
    const sizes = [4, 4_000_000]; // 5 ms and 45 ms one way
    const [la, lb] = await Promise.all([
      measureLink(a, 1, { sizes, rounds: 3 }),
      measureLink(b, 0, { sizes, rounds: 3 }),
    ]);
    assert.deepEqual(la, lb);
    // Timers add a few ms of lateness per hop on an idle machine, tens on a loaded one: the
    // bounds tell the fit's α and β apart (a swapped or unit-wrong fit is far outside them).
    assert.ok(la.latencyMs >= 4.5 && la.latencyMs < 60, `latency ${la.latencyMs}`);
    assert.ok(la.bytesPerMs > 0.4e5 && la.bytesPerMs < 1.6e5, `bandwidth ${la.bytesPerMs}`);
  } finally {
    a.close();
    b.close();
  }
});

Deno.test("measureLink: bad arguments are refused", async () => {
  const [a, b] = InProcessBackend.createGroup(2);
  try {
    await assert.rejects(measureLink(a, 0), /peer must be another rank than 0/);
    await assert.rejects(measureLink(a, 2), /peer must be an integer rank in \[0, 1\], got 2/);
    await assert.rejects(measureLink(a, 1, { sizes: [4, 6] }), /multiple of 4 bytes, got 6/);
    await assert.rejects(
      measureLink(a, 1, { rounds: 0 }),
      /rounds must be a positive integer, got 0/,
    );
  } finally {
    a.close();
    b.close();
  }
});
