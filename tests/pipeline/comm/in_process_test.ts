import assert from "node:assert/strict";
import { CommAbortedError } from "../../../src/pipeline/comm/backend.ts";
import { InProcessBackend } from "../../../src/pipeline/comm/in_process.ts";
import { makeTag } from "../../../src/pipeline/runtime/tag.ts";

function group(n: number): InProcessBackend[] {
  return InProcessBackend.createGroup(n);
}

function closeAll(g: InProcessBackend[]): void {
  for (const b of g) b.close();
}

Deno.test("InProcessBackend: messages sent before recv are kept and matched by tag in any order", async () => {
  const g = group(2);
  try {
    const tags = Array.from(
      { length: 6 },
      (_, mb) => makeTag({ space: "activation", microBatch: mb, stage: 1, iteration: 0 }),
    );
    for (let mb = 0; mb < 6; mb++) await g[0].send(1, tags[mb], new Float32Array([mb, 10 + mb]));
    for (const mb of [4, 0, 5, 2, 1, 3]) {
      assert.deepEqual([...await g[1].recv(0, tags[mb])], [mb, 10 + mb]);
    }
  } finally {
    closeAll(g);
  }
});

Deno.test("InProcessBackend: recv waiting before the send resolves when it arrives", async () => {
  const g = group(3);
  try {
    const pending = g[2].recv(1, "t");
    let done = false;
    pending.then(() => done = true);
    await g[0].send(2, "t", new Float32Array([9])); // same tag, other peer: not a match
    await new Promise((r) => setTimeout(r, 5));
    assert.equal(done, false);
    await g[1].send(2, "t", new Float32Array([7]));
    assert.deepEqual([...await pending], [7]);
    assert.deepEqual([...await g[2].recv(0, "t")], [9]);
  } finally {
    closeAll(g);
  }
});

Deno.test("InProcessBackend: activation and gradient traffic of the same numbers never mix", async () => {
  const g = group(2);
  try {
    const f = { microBatch: 2, stage: 0, iteration: 1 };
    const act = makeTag({ space: "activation", ...f });
    const grad = makeTag({ space: "gradient", ...f });
    const gotGrad = g[0].recv(1, grad);
    await g[1].send(0, act, new Float32Array([1]));
    await g[1].send(0, grad, new Float32Array([2]));
    assert.deepEqual([...await gotGrad], [2]);
    assert.deepEqual([...await g[0].recv(1, act)], [1]);
  } finally {
    closeAll(g);
  }
});

Deno.test("InProcessBackend: same (peer, tag) is FIFO", async () => {
  const g = group(2);
  try {
    for (let i = 0; i < 4; i++) await g[0].send(1, "x", new Float32Array([i]));
    for (let i = 0; i < 4; i++) assert.deepEqual([...await g[1].recv(0, "x")], [i]);
  } finally {
    closeAll(g);
  }
});

Deno.test("InProcessBackend: transfer detaches the sender's buffer; copy and views do not", async () => {
  const g = group(2);
  try {
    const given = new Float32Array([1, 2, 3]);
    await g[0].send(1, "a", given, { transfer: true });
    assert.equal(given.length, 0, "a transferred array is detached");
    assert.deepEqual([...await g[1].recv(0, "a")], [1, 2, 3]);

    const kept = new Float32Array([4, 5]);
    await g[0].send(1, "b", kept);
    kept[0] = 99;
    assert.deepEqual(
      [...await g[1].recv(0, "b")],
      [4, 5],
      "a copied send is unaffected by later writes",
    );

    const whole = new Float32Array([6, 7, 8, 9]);
    await g[0].send(1, "c", whole.subarray(1, 3), { transfer: true });
    assert.deepEqual([...whole], [6, 7, 8, 9], "a view's neighbours stay usable");
    assert.deepEqual([...await g[1].recv(0, "c")], [7, 8]);
  } finally {
    closeAll(g);
  }
});

Deno.test("InProcessBackend: send takes a pending read-back and returns at once", async () => {
  const g = group(2);
  try {
    let release!: (a: Float32Array) => void;
    const readback = new Promise<Float32Array>((r) => release = r);
    const sent = g[0].send(1, "late", readback, { transfer: true });
    const got = g[1].recv(0, "late");
    release(new Float32Array([42]));
    await sent;
    assert.deepEqual([...await got], [42]);
  } finally {
    closeAll(g);
  }
});

Deno.test("InProcessBackend: a rank can send to itself", async () => {
  const g = group(2);
  try {
    await g[1].send(1, "self", new Float32Array([5]));
    assert.deepEqual([...await g[1].recv(1, "self")], [5]);
  } finally {
    closeAll(g);
  }
});

Deno.test("InProcessBackend: abort rejects pending recvs here and on peers, naming the reason", async () => {
  const g = group(3);
  try {
    const mine = g[0].recv(1, "never");
    const theirs = g[2].recv(0, "never");
    g[0].abort("disk on fire");
    await assert.rejects(
      mine,
      (e: Error) => e instanceof CommAbortedError && /disk on fire/.test(e.message),
    );
    await assert.rejects(
      theirs,
      (e: Error) => e instanceof CommAbortedError && /rank 0: disk on fire/.test(e.message),
    );
    assert.equal(g[1].aborted, true);
    await assert.rejects(g[1].recv(2, "later"), /disk on fire/);
    await assert.rejects(g[1].send(2, "later", new Float32Array(1)), /disk on fire/);
  } finally {
    closeAll(g);
  }
});

Deno.test("InProcessBackend: barrier holds every rank until all have arrived", async () => {
  const g = group(3);
  try {
    const passed: number[] = [];
    const a = g[0].barrier().then(() => passed.push(0));
    const b = g[1].barrier().then(() => passed.push(1));
    await new Promise((r) => setTimeout(r, 5));
    assert.deepEqual(passed, [], "nobody passes while rank 2 is missing");
    await g[2].barrier();
    await Promise.all([a, b]);
    assert.deepEqual(passed.sort(), [0, 1]);
    // A second round works the same way.
    await Promise.all(g.map((x) => x.barrier()));
  } finally {
    closeAll(g);
  }
});

Deno.test("InProcessBackend: control messages reach every other rank", async () => {
  const g = group(3);
  try {
    const got: string[] = [];
    const offs = g.map((b) => b.onControl((m, from) => got.push(`${b.rank}<-${from}:${m.type}`)));
    g[1].broadcastControl({ type: "hello", n: 1 });
    await new Promise((r) => setTimeout(r, 0));
    assert.deepEqual(got.sort(), ["0<-1:hello", "2<-1:hello"]);
    offs[0]();
    g[1].broadcastControl({ type: "again" });
    await new Promise((r) => setTimeout(r, 0));
    assert.deepEqual(got.filter((s) => s.includes("again")), ["2<-1:again"]);
  } finally {
    closeAll(g);
  }
});

Deno.test("InProcessBackend: bad arguments are refused with the value named", async () => {
  const g = group(2);
  try {
    assert.throws(() => InProcessBackend.createGroup(0), /size must be a positive integer, got 0/);
    await assert.rejects(g[0].send(2, "x", new Float32Array(1)), RangeError);
    await assert.rejects(g[0].send(1, "", new Float32Array(1)), TypeError);
    await assert.rejects(
      g[0].send(1, "x", [1, 2] as unknown as Float32Array),
      /data must be a Float32Array, got Array/,
    );
    await assert.rejects(g[0].recv(-1, "x"), /peer must be .* got -1/);
  } finally {
    closeAll(g);
  }
});

Deno.test("InProcessBackend: close rejects pending recvs", async () => {
  const g = group(2);
  const pending = g[1].recv(0, "x");
  g[1].close();
  await assert.rejects(pending, /closed/);
  g[0].close();
});
