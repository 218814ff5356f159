import assert from "node:assert/strict";
import { curvesSvg } from "../../../src/pipeline/render/curves_svg.ts";
import { allElements, parseXml } from "../_xml.ts";

Deno.test("curvesSvg: loss, validation loss and accuracy drawn where they belong; the legend names every curve drawn", () => {
  const svg = curvesSvg({
    title: "t <&>",
    loss: [[1, 2.5], [2, 0.5], [3, 0.01]],
    validationLoss: [[3, 0.1]],
    accuracy: [[0, 0], [3, 0.75]],
  });
  assert.match(svg, /^<svg [\s\S]*<\/svg>\n$/);
  const els = allElements(parseXml(svg));
  assert.equal(els.filter((e) => e.name === "polyline").length, 3);
  assert.match(svg, /t &lt;&amp;&gt;/);
  // The plot frame, and the accuracy 0.75 drawn three quarters of the way up it.
  const frame = els.find((e) => e.name === "rect" && e.attrs.fill === "none")!;
  const y = Number(frame.attrs.y), h = Number(frame.attrs.height);
  const acc = els.filter((e) => e.name === "circle" && e.attrs.fill === "#1971c2")
    .map((e) => Number(e.attrs.cy));
  assert.equal(acc.length, 2);
  assert.ok(Math.abs(acc[0] - (y + h)) < 0.1 && Math.abs(acc[1] - (y + h / 4)) < 0.1, `${acc}`);
  // Log scale: decades 10^-2 … 10^1 over the frame; 0.1 sits a third of the way down.
  const val = els.filter((e) => e.name === "circle" && e.attrs.fill === "#7048e8");
  assert.equal(val.length, 1);
  assert.ok(Math.abs(Number(val[0].attrs.cy) - (y + (2 / 3) * h)) < 0.1, val[0].attrs.cy);
  const legend = els.filter((e) => e.name === "text" && e.attrs.class === "legend").map((e) =>
    e.text
  );
  assert.deepEqual(legend, [
    "training loss (left, log scale)",
    "validation loss (left)",
    "validation accuracy (right)",
  ]);
  // Only the training loss: one curve, one legend entry, no accuracy axis.
  const plain = allElements(parseXml(curvesSvg({ title: "", loss: [[1, 1], [2, 0.5]] })));
  assert.equal(plain.filter((e) => e.name === "polyline").length, 1);
  assert.equal(plain.filter((e) => e.name === "text" && e.attrs.class === "legend").length, 1);
  assert.ok(!plain.some((e) => e.name === "text" && e.text === "100%"));
});

Deno.test("curvesSvg: bad values refused naming the curve and the step", () => {
  assert.throws(
    () => curvesSvg({ title: "", loss: [[1, 0]] }),
    /loss at step 1 must be positive and finite, got 0/,
  );
  assert.throws(
    () => curvesSvg({ title: "", loss: [[1, 1]], validationLoss: [[2, NaN]] }),
    /validationLoss at step 2 must be positive and finite, got NaN/,
  );
  assert.throws(
    () => curvesSvg({ title: "", loss: [[1, 1]], accuracy: [[1, 1.5]] }),
    /accuracy at step 1 must be in \[0, 1\], got 1\.5/,
  );
  assert.throws(() => curvesSvg({ title: "", loss: [] }), /loss curve is empty/);
  assert.throws(() => curvesSvg({ title: "", loss: [[1]] as never }), TypeError);
});

Deno.test("curvesSvg: a loss that falls within a decade (4.17 → 2.97, the demo's) fills the plot's height, labelled at round values (was: a 1–10 axis on which it looked flat)", () => {
  const loss: [number, number][] = [[0, 4.17], [10, 3.6], [20, 2.97]];
  const els = allElements(parseXml(curvesSvg({ title: "", loss })));
  const frame = els.find((e) => e.name === "rect" && e.attrs.fill === "none")!;
  const h = Number(frame.attrs.height);
  const line = els.find((e) => e.name === "polyline")!;
  const ys = line.attrs.points.split(" ").map((p) => Number(p.split(",")[1]));
  const drop = ys[2] - ys[0];
  assert.ok(drop > 0.7 * h, `the curve spans ${drop.toFixed(0)} of ${h} px`);
  const labels = els.filter((e) => e.name === "text" && e.attrs.fill === "#d9480f")
    .map((e) => Number(e.text));
  assert.ok(labels.length >= 3, `${labels}`);
  for (const v of labels) {
    assert.ok(v > 2.9 && v < 4.3, `label ${v} inside the data's range`);
    assert.equal(Number((v * 10).toFixed(6)) % 1, 0, `round label ${v}`);
  }
});
