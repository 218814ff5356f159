import assert from "node:assert/strict";
import { generateSchedule } from "../../../src/pipeline/schedule/generate.ts";
import { renderAscii } from "../../../src/pipeline/render/render_ascii.ts";
import { renderSvg } from "../../../src/pipeline/render/render_svg.ts";
import { simulate } from "../../../src/pipeline/analysis/simulate.ts";
import type { AllReduceSpan } from "../../../src/pipeline/analysis/all_reduce.ts";
import { gpipe2x2 } from "../_hand_events.ts";
import { allElements, parseXml, type XmlElement } from "../_xml.ts";

// 1F1B p=2, m=2 on 2 replicas: rank 0 F0 [0,1] F1 [1,2] B0 [4,6] B1 [7,9];
// rank 1 F0 [1,2] B0 [2,4] F1 [4,5] B1 [5,7]; stage 1's all-reduce 7..12,
// stage 0's 9..11 (see the simulator's tests).
function dp2(): ReturnType<typeof simulate> {
  const s = generateSchedule("1f1b", { ranks: 2, microBatches: 2 });
  return simulate(s, {
    dataParallel: 2,
    link: { latencyMs: 0.5, bytesPerMs: 100 },
    gradientBytes: [100, 400],
  });
}

const span = (rank: number, stage: number, start: number, end: number): AllReduceSpan => ({
  rank,
  stage,
  iteration: 0,
  start,
  end,
  bytes: 4,
});

Deno.test("renderAscii: each rank's all-reduces on a line arN under its row (hand-computed)", () => {
  const r = dp2();
  assert.equal(
    renderAscii(r.events, { allReduce: r.allReduce }),
    [
      "r0  0F0 0F1 ... ... 0B0 --- ... 0B1 --- ... ... ...",
      "ar0 ... ... ... ... ... ... ... ... ... 0AR --- ...",
      "r1  ... 1F0 1B0 --- 1F1 1B1 --- ... ... ... ... ...",
      "ar1 ... ... ... ... ... ... ... 1AR --- --- --- ---",
      "arN: the gradient all-reduces of rank N's stages over their replicas (sAR: stage s)",
    ].join("\n"),
  );
  // Slot mode: one column per distinct start (0, 1, 2, 4, 5, 7, 9).
  assert.equal(
    renderAscii(r.events, { allReduce: r.allReduce, mode: "slot", labels: false }),
    [
      "0F0 0F1 ... 0B0 ... 0B1 ...",
      "... ... ... ... ... ... 0AR",
      "... 1F0 1B0 1F1 1B1 ... ...",
      "... ... ... ... ... 1AR ...",
    ].join("\n"),
  );
});

Deno.test("renderAscii: no spans, the same grid as before; only ranks with spans get a line", () => {
  const events = gpipe2x2();
  const plain = renderAscii(events);
  assert.equal(renderAscii(events, { allReduce: [] }), plain);
  assert.equal(
    renderAscii(events, { allReduce: undefined, mode: "slot" }),
    renderAscii(events, { mode: "slot" }),
  );
  assert.ok(!plain.includes("AR"));
  const lines = renderAscii(events, { allReduce: [span(1, 1, 9, 11)] }).split("\n");
  assert.deepEqual(lines.map((l) => l.split(" ")[0]), ["r0", "r1", "ar1", "arN:"]);
  // The span widens the time axis: 0..11 is 11 columns.
  assert.equal(lines[2], `ar1 ${[...new Array(9).fill("..."), "1AR", "---"].join(" ")}`);
  // A span of a rank with no events adds the rank's rows.
  assert.equal(renderAscii(events, { allReduce: [span(3, 3, 0, 1)] }).split("\n").length, 6);
});

Deno.test("renderAscii and renderSvg: refuse bad spans, naming them", () => {
  for (const render of [renderAscii, renderSvg]) {
    const opts = (allReduce: unknown) => ({ allReduce: allReduce as AllReduceSpan[] });
    assert.throws(() => render(gpipe2x2(), opts("x")), TypeError);
    assert.throws(() => render(gpipe2x2(), opts([null])), /allReduce\[0\]/);
    assert.throws(() => render(gpipe2x2(), opts([span(-1, 0, 0, 1)])), /allReduce\[0\]\.rank/);
    assert.throws(() => render(gpipe2x2(), opts([span(0, 0, 2, 1)])), /2\.\.1/);
    assert.throws(() => render(gpipe2x2(), opts([span(0, 0, 0, NaN)])), RangeError);
  }
});

function rects(svg: string, cls: string): XmlElement[] {
  return allElements(parseXml(svg)).filter((e) => e.name === "rect" && e.attrs.class === cls);
}

Deno.test("renderSvg: an orange box per all-reduce on a strip under its rank's lane, at its times", () => {
  const r = dp2();
  const svg = renderSvg(r.events, { allReduce: r.allReduce, width: 1000 });
  const ar = rects(svg, "box AR");
  assert.equal(ar.length, 2);
  const lanes = rects(svg, "lane");
  const strips = rects(svg, "lane allreduce-lane");
  assert.equal(lanes.length, 2);
  assert.equal(strips.length, 2);
  const num = (e: XmlElement, k: string) => Number(e.attrs[k]);
  for (const [i, s] of r.allReduce!.entries()) {
    const box = ar[i];
    assert.equal(box.attrs.fill, "#f4a259");
    // Under its rank's lane, inside its strip, above the next lane.
    const lane = lanes[s.rank], strip = strips[s.rank];
    assert.ok(num(box, "y") >= num(lane, "y") + num(lane, "height"));
    assert.equal(num(box, "y"), num(strip, "y"));
    if (s.rank + 1 < lanes.length) {
      assert.ok(num(box, "y") + num(box, "height") < num(lanes[s.rank + 1], "y"));
    }
    assert.match(box.children[0].text, new RegExp(`all-reduce of stage ${s.stage}`));
  }
  // Time scale shared with the passes: stage 1's all-reduce starts where rank 1's B1 ends (7),
  // and the axis runs to 12, the all-reduce's end.
  const b1 = allElements(parseXml(svg)).filter((e) =>
    e.name === "rect" && e.attrs.class === "box B"
  )
    .find((e) => e.children[0].text.startsWith("1B1"))!;
  const s1 = ar[r.allReduce!.findIndex((s) => s.stage === 1)];
  assert.ok(Math.abs(num(s1, "x") - (num(b1, "x") + num(b1, "width"))) < 0.02);
  assert.ok(
    Math.abs(num(s1, "x") + num(s1, "width") - (num(lanes[0], "x") + num(lanes[0], "width"))) <
      0.02,
  );
  assert.equal(rects(svg, "legend-swatch AR").length, 1);
});

Deno.test("renderSvg: without spans, no strip, no AR box, no AR legend: the same document", () => {
  const events = gpipe2x2();
  const plain = renderSvg(events, { title: "t" });
  assert.equal(renderSvg(events, { title: "t", allReduce: [] }), plain);
  assert.equal(rects(plain, "box AR").length, 0);
  assert.equal(rects(plain, "lane allreduce-lane").length, 0);
  assert.ok(!plain.includes("all-reduce"));
});
