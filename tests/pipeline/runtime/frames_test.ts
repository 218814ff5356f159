import assert from "node:assert/strict";
import { readFrames, writeFrame } from "../../../src/pipeline/runtime/_frames.ts";

// Frames far larger than a socket's buffer go out in many partial writes;
// written at once (as a rank group's parallel calls do), they must still
// arrive whole and in order.
Deno.test("frames written at once over a Unix socket arrive whole, in order", async () => {
  const dir = await Deno.makeTempDir();
  const path = `${dir}/frames.sock`;
  const listener = Deno.listen({ transport: "unix", path });
  try {
    const [client, server] = await Promise.all([
      Deno.connect({ transport: "unix", path }),
      listener.accept(),
    ]);
    const sizes = [3 << 20, 1 << 20, 17, 2 << 20];
    const messages = sizes.map((n, i) => ({ i, data: new Float32Array(n / 4).fill(i + 0.5) }));
    const reading = (async () => {
      const got: { i: number; data: Float32Array }[] = [];
      for await (const m of readFrames(server)) {
        got.push(m as { i: number; data: Float32Array });
        if (got.length === messages.length) break;
      }
      return got;
    })();
    await Promise.all(messages.map((m) => writeFrame(client, m)));
    const got = await reading;
    assert.deepEqual(got.map((m) => m.i), [0, 1, 2, 3]);
    got.forEach((m, i) => {
      assert.equal(m.data.length, messages[i].data.length);
      assert.ok(m.data.every((v) => v === i + 0.5), `message ${i} intact`);
    });
    client.close();
    server.close();
  } finally {
    listener.close();
    await Deno.remove(dir, { recursive: true });
  }
});
