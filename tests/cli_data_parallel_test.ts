import assert from "node:assert/strict";
import { cli } from "./_cli.ts";
import { allElements, parseXml } from "./pipeline/_xml.ts";

const P2M2 = ["--schedule", "1f1b", "--ranks", "2", "--microbatches", "2"];

Deno.test("cli schedule --data-parallel: the D x P rank grid and the timeline with each all-reduce", async () => {
  // 1F1B p=2, m=2: stage 1's last B ends at 7, stage 0's at 9; G = 4, comm 0, D = 2:
  // each all-reduce takes 2·1/2 · 4 = 4, so 7..11 and 9..13.
  const r = await cli("schedule", ...P2M2, "--data-parallel", "2", "--gradient-time", "4");
  assert.equal(r.code, 0, r.err);
  assert.equal(
    r.out,
    [
      "4 ranks: 2 replicas x 2 pipeline ranks (rank = replica * 2 + pipeline rank)",
      "           p0      p1",
      "replica 0  r0: s0  r1: s1",
      "replica 1  r2: s0  r3: s1",
      "",
      "r0  0F0 0F1 ... ... 0B0 --- ... 0B1 --- ... ... ... ...",
      "ar0 ... ... ... ... ... ... ... ... ... 0AR --- --- ---",
      "r1  ... 1F0 1B0 --- 1F1 1B1 --- ... ... ... ... ... ...",
      "ar1 ... ... ... ... ... ... ... 1AR --- --- --- ... ...",
      "arN: the gradient all-reduces of rank N's stages over their replicas (sAR: stage s)",
      "",
    ].join("\n"),
  );
  // --comm is the link's latency too: 2(D − 1) = 2 rounds of 0.5 more (and later passes).
  const c = await cli("schedule", ...P2M2, "--data-parallel", "3", "--comm", "0.5");
  assert.equal(c.code, 0, c.err);
  assert.match(c.out, /^6 ranks: 3 replicas x 2 pipeline ranks/);
  assert.match(c.out, /\nar1 .*1AR/);
});

Deno.test("cli schedule --data-parallel --format svg: an AR box per stage; other formats refused", async () => {
  const r = await cli("schedule", ...P2M2, "--data-parallel", "2", "--format", "svg");
  assert.equal(r.code, 0, r.err);
  const boxes = allElements(parseXml(r.out)).filter((e) => e.attrs.class === "box AR");
  assert.equal(boxes.length, 2);
  assert.match(r.out, /1f1b {2}p=2 m=2 d=2/);
  for (const format of ["json", "csv", "trace"]) {
    const bad = await cli("schedule", ...P2M2, "--data-parallel", "2", "--format", format);
    assert.equal(bad.code, 2, format);
    assert.match(bad.err, new RegExp(`--data-parallel needs --format text or svg, got ${format}`));
  }
  for (
    const [flag, v] of [["--data-parallel", "0"], ["--data-parallel", "1.5"], [
      "--gradient-time",
      "-1",
    ]]
  ) {
    const bad = await cli("schedule", ...P2M2, "--data-parallel", "2", flag, v);
    assert.equal(bad.code, 2, `${flag} ${v}`);
    assert.match(bad.err, new RegExp(`${flag} must be`));
  }
  // Without the flag, the default format is still JSON.
  const plain = await cli("schedule", ...P2M2);
  assert.equal(JSON.parse(plain.out).ranks, 2);
});
