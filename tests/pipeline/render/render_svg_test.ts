import assert from "node:assert/strict";
import { formatAction } from "../../../src/pipeline/schedule/action.ts";
import { generateSchedule, SCHEDULE_NAMES } from "../../../src/pipeline/schedule/generate.ts";
import { renderSvg } from "../../../src/pipeline/render/render_svg.ts";
import { simulate } from "../../../src/pipeline/analysis/simulate.ts";
import { ev, gpipe2x2, splitV2x2 } from "../_hand_events.ts";
import { allElements, parseXml, type XmlElement } from "../_xml.ts";

function boxes(svg: string): XmlElement[] {
  return allElements(parseXml(svg)).filter((e) =>
    e.name === "rect" && (e.attrs.class ?? "").split(" ")[0] === "box"
  );
}

Deno.test("renderSvg: well-formed SVG with one box per event", () => {
  // the checker itself refuses broken markup
  assert.throws(() => parseXml("<svg><g></svg>"), SyntaxError);
  assert.throws(() => parseXml('<svg><text x="1">a < b</text></svg>'), SyntaxError);
  assert.throws(() => parseXml("<svg>a & b</svg>"), SyntaxError);
  for (const events of [gpipe2x2(), splitV2x2()]) {
    const svg = renderSvg(events, { title: "t" });
    const root = parseXml(svg);
    assert.equal(root.name, "svg");
    assert.equal(root.attrs.xmlns, "http://www.w3.org/2000/svg");
    assert.ok(Number(root.attrs.width) > 0 && Number(root.attrs.height) > 0);
    assert.equal(boxes(svg).length, events.length);
    for (const kind of ["F", "B", "I", "W"]) {
      assert.equal(
        boxes(svg).filter((b) => b.attrs.class === `box ${kind}`).length,
        events.filter((e) => e.action.kind === kind).length,
        kind,
      );
    }
  }
});

Deno.test("renderSvg: boxes sit in their rank's lane, left to right by start time", () => {
  const events = gpipe2x2();
  const svg = renderSvg(events, { width: 1000 });
  const bs = boxes(svg);
  const lanes = allElements(parseXml(svg)).filter((e) =>
    e.name === "rect" && e.attrs.class === "lane"
  );
  assert.equal(lanes.length, 2);
  const laneY = lanes.map((l) => Number(l.attrs.y));
  const tips = bs.map((b) => b.children.find((c) => c.name === "title")?.text ?? "");
  for (const e of events) {
    const i = tips.findIndex((t) => t.startsWith(`${formatAction(e.action)} `));
    assert.ok(i >= 0, formatAction(e.action));
    assert.equal(Number(bs[i].attrs.y), laneY[e.rank]);
  }
  // x is affine in start time, and width proportional to duration
  const x = (t: number) => {
    const i = events.findIndex((e) => e.start === t);
    return Number(
      bs[tips.findIndex((s) => s.startsWith(formatAction(events[i].action) + " "))].attrs.x,
    );
  };
  const scale = (x(7) - x(0)) / 7;
  assert.ok(scale > 0);
  assert.ok(Math.abs(x(3) - x(0) - 3 * scale) < 0.05);
  const widthOf = (kind: string) =>
    Number(bs.find((b) => b.attrs.class === `box ${kind}`)!.attrs.width);
  assert.ok(Math.abs(widthOf("B") - 2 * widthOf("F")) < 0.05);
});

Deno.test("renderSvg: micro-batch numbers inside boxes, colours tell kinds and stages apart", () => {
  const events = splitV2x2();
  const svg = renderSvg(events);
  const texts = allElements(parseXml(svg)).filter((e) =>
    e.name === "text" && e.attrs.class === undefined
  );
  assert.equal(texts.length, events.length);
  assert.deepEqual(
    texts.map((t) => t.text).sort(),
    events.map((e) => String(e.action.microBatch)).sort(),
  );
  const bs = boxes(svg);
  const fillOf = (kind: string, stage: number) => {
    const b = bs.find((b) =>
      b.attrs.class === `box ${kind}` &&
      b.children[0].text.startsWith(`${stage}${kind}`)
    );
    return b!.attrs.fill;
  };
  const fills = new Set([fillOf("F", 0), fillOf("I", 0), fillOf("W", 0)]);
  assert.equal(fills.size, 3, "F, I and W have distinct colours");
  assert.notEqual(fillOf("F", 0), fillOf("F", 3), "second stage is shaded differently");
  const full = boxes(renderSvg(gpipe2x2())).find((b) => b.attrs.class === "box B")!.attrs.fill;
  assert.ok(!fills.has(full), "full B differs from F, I and W");
});

Deno.test("renderSvg: title with escaped text and bubble, axis unit, legend of present kinds", () => {
  const svg = renderSvg(gpipe2x2(), {
    title: "a<b & c",
    bubbleFraction: 0.2727,
    timeUnit: "ms",
  });
  const els = allElements(parseXml(svg));
  const title = els.find((e) => e.attrs.class === "title");
  assert.equal(title?.text, "a<b & c · bubble 27.3%");
  assert.equal(els.find((e) => e.attrs.class === "axis-label")?.text, "time (ms)");
  const legend = els.filter((e) => e.attrs.class === "legend").map((e) => e.text);
  assert.ok(legend.some((t) => t.startsWith("F ")));
  assert.ok(legend.some((t) => t.startsWith("B ")));
  assert.ok(!legend.some((t) => t.startsWith("W ")), "no W in a GPipe timeline");
  const ranks = els.filter((e) => e.attrs.class === "rank").map((e) => e.text);
  assert.deepEqual(ranks, ["rank 0", "rank 1"]);
  const ticks = els.filter((e) => e.attrs.class === "tick-label").map((e) => Number(e.text));
  assert.equal(ticks[0], 0);
  assert.ok(ticks[ticks.length - 1] <= 9 && ticks[ticks.length - 1] >= 8);
  assert.equal(renderSvg(gpipe2x2(), { legend: false }).includes('class="legend"'), false);
});

Deno.test("renderSvg: measured millisecond events with an arbitrary origin", () => {
  const t0 = 123456.789;
  const events = [ev(0, "F", 0, 0, t0, t0 + 3.25), ev(1, "F", 1, 0, t0 + 3.5, t0 + 7.1)];
  const svg = renderSvg(events, { timeUnit: "ms", width: 600 });
  const bs = boxes(svg);
  assert.equal(bs.length, 2);
  const left = Number(bs[0].attrs.x);
  const right = Number(bs[1].attrs.x) + Number(bs[1].attrs.width);
  assert.ok(left >= 0 && right <= 600, `${left}..${right}`);
  assert.ok(renderSvg([], { ranks: 2 }).includes('class="lane"'));
});

Deno.test("renderSvg: bad options and events throw", () => {
  assert.throws(() => renderSvg(gpipe2x2(), { width: 10 }), /width must be.*got 10/);
  assert.throws(() => renderSvg(gpipe2x2(), { rowHeight: NaN }), /rowHeight.*got NaN/);
  assert.throws(() => renderSvg(gpipe2x2(), { bubbleFraction: Infinity }), /bubbleFraction/);
  assert.throws(() => renderSvg([ev(0, "F", 0, 0, 0, NaN)]), /events\[0\]/);
});

Deno.test("renderSvg: a bar marks where each later iteration begins on each rank", () => {
  const one = gpipe2x2();
  const events = [0, 1, 2].flatMap((it) =>
    one.map((e) => ({ ...e, iteration: it, start: e.start + 9 * it, end: e.end + 9 * it }))
  );
  const els = allElements(parseXml(renderSvg(events)));
  const bars = els.filter((e) => e.name === "line" && e.attrs.class === "iteration-start");
  assert.equal(bars.length, 2 * 2, "ranks x (iterations - 1)");
  const bx = bars.map((b) => Number(b.attrs.x1)).sort((a, b) => a - b);
  const all = boxes(renderSvg(events));
  const boxX = (rank: number, it: number) => {
    const first = events.filter((e) => e.rank === rank && e.iteration === it)
      .sort((a, b) => a.start - b.start)[0];
    const tip = `${formatAction(first.action)} · iteration ${it} ·`;
    return Number(all.find((b) => b.children[0].text.startsWith(tip))!.attrs.x);
  };
  assert.deepEqual(bx, [boxX(0, 1), boxX(1, 1), boxX(0, 2), boxX(1, 2)].sort((a, b) => a - b));
  assert.equal(
    allElements(parseXml(renderSvg(one))).filter((e) => e.attrs.class === "iteration-start").length,
    0,
  );
});

Deno.test("renderSvg: every generated schedule, one and three iterations", () => {
  for (const name of SCHEDULE_NAMES) {
    const s = generateSchedule(name, { ranks: 4, microBatches: 8 });
    for (const iterations of [1, 3]) {
      const sim = simulate(s, { iterations });
      const svg = renderSvg(sim.events, { title: name, bubbleFraction: sim.bubbleFraction });
      assert.equal(boxes(svg).length, sim.events.length, `${name} x${iterations}`);
      const bars = allElements(parseXml(svg)).filter((e) => e.attrs.class === "iteration-start");
      assert.equal(bars.length, 4 * (iterations - 1));
    }
  }
});

Deno.test("renderSvg: every mark drawn is in the legend: the iteration bar gets a legend row only when drawn", () => {
  const one = gpipe2x2();
  const three = [0, 1, 2].flatMap((it) =>
    one.map((e) => ({ ...e, iteration: it, start: e.start + 9 * it, end: e.end + 9 * it }))
  );
  for (const [events, drawn] of [[one, false], [three, true]] as const) {
    const els = allElements(parseXml(renderSvg(events)));
    const bars = els.filter((e) => e.name === "line" && e.attrs.class === "iteration-start");
    const key = els.filter((e) =>
      e.name === "line" && e.attrs.class === "legend-swatch iteration-start"
    );
    const text = els.filter((e) => e.attrs.class === "legend").map((e) => e.text).join(" ");
    assert.equal(bars.length > 0, drawn);
    assert.equal(key.length, drawn ? 1 : 0);
    assert.equal(/dark bar: the next iteration \(step\) begins/.test(text), drawn);
    assert.match(text, /numbers: micro-batch · grey: idle/, "the lanes' grey and the numbers");
    // Each kind drawn has its swatch.
    const kinds = new Set(events.map((e) => e.action.kind));
    const swatches = els.filter((e) => e.name === "rect" && e.attrs.class === "legend-swatch");
    assert.equal(swatches.length, kinds.size);
  }
});

Deno.test("renderSvg: laneLabels name the lanes (escaped); a wrong count is refused", () => {
  const svg = renderSvg(gpipe2x2(), { laneLabels: ["step 0 · rank 0", "a<b"] });
  const labels = allElements(parseXml(svg)).filter((e) => e.attrs.class === "rank").map((e) =>
    e.text
  );
  assert.deepEqual(labels, ["step 0 · rank 0", "a<b"]);
  assert.throws(
    () => renderSvg(gpipe2x2(), { laneLabels: ["only one"] }),
    /laneLabels must be an array of 2 labels \(one per lane\), got 1/,
  );
});
