import assert from "node:assert/strict";
import { readFrames, writeFrame } from "../../../src/pipeline/runtime/_frames.ts";
import {
  FrameLineReader,
  frameLines,
  lineTag,
} from "../../../src/pipeline/runtime/_frame_lines.ts";

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

// The host's answers travel in tagged lines among what its ranks print:
// the text must come through byte for byte and the messages whole, however
// the stream is cut.
Deno.test("tagged message lines among printed text: text passes through as it came, messages arrive whole", () => {
  const tag = lineTag("0123abcd");
  const big = { i: 1, data: new Float32Array(300_000).map((_, k) => k) }; // 1.2 MB: two lines
  const enc = new TextEncoder();
  const stream = [
    enc.encode("rank 1 says hi\npartial "),
    enc.encode(frameLines({ i: 0, s: "é" }, tag).join("\n") + "\n"),
    enc.encode("\x1enot a message line\n"),
    enc.encode(frameLines(big, tag).join("\n") + "\n"),
    enc.encode("tail without newline \x1ebegun"),
  ];
  const whole = new Uint8Array(stream.reduce((n, s) => n + s.length, 0));
  stream.reduce((at, s) => (whole.set(s, at), at + s.length), 0);
  for (const cut of [5, 4093, 1 << 20, whole.length]) {
    const reader = new FrameLineReader(tag);
    const text: Uint8Array[] = [];
    const messages: unknown[] = [];
    for (let at = 0; at < whole.length; at += cut) {
      const r = reader.push(whole.subarray(at, at + cut));
      text.push(...r.text);
      messages.push(...r.messages);
    }
    text.push(reader.end());
    const printed = text.map((t) => new TextDecoder().decode(t)).join("");
    assert.equal(
      printed,
      "rank 1 says hi\npartial \x1enot a message line\ntail without newline \x1ebegun",
      `cut ${cut}`,
    );
    assert.equal(messages.length, 2, `cut ${cut}`);
    assert.deepEqual(messages[0], { i: 0, s: "é" });
    const got = messages[1] as typeof big;
    assert.equal(got.data.length, big.data.length);
    assert.ok(got.data.every((v, k) => v === k), `cut ${cut}: the large message is intact`);
  }
});
