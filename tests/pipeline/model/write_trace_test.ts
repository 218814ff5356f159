import assert from "node:assert/strict";
import { summarizeTimeline } from "../../../src/pipeline/analysis/timeline_summary.ts";
import { allElements, parseXml, type XmlElement } from "../_xml.ts";
import { cpuModel, tokenBatches } from "./_reference_training.ts";

const batches = tokenBatches(5, 8, 3);

function boxes(svg: string): XmlElement[] {
  return allElements(parseXml(svg)).filter((e) =>
    e.name === "rect" && (e.attrs.class ?? "").split(" ")[0] === "box"
  );
}
const title = (svg: string) => allElements(parseXml(svg)).find((e) => e.attrs.class === "title")!;

Deno.test("writeTrace: the last step by default, { step } picks one of the call's steps, each titled with its own bubble; Chrome traces likewise", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await using m = await cpuModel({
      schedule: "zb-h1",
      microBatches: 4,
      optimizer: { kind: "sgd", lr: 0.1 },
    });
    const r = await m.train(batches); // one window: the steps interlock
    await m.writeTrace(`${dir}/last.svg`);
    await m.writeTrace(`${dir}/two.svg`, { step: 2 });
    await m.writeTrace(`${dir}/two.json`, { step: 2 });
    for (const [file, k] of [["last.svg", 4], ["two.svg", 2]] as const) {
      const svg = await Deno.readTextFile(`${dir}/${file}`);
      const step = r.steps[k];
      assert.equal(boxes(svg).length, step.events.length, file);
      assert.ok(
        boxes(svg).every((b) =>
          / · iteration (\d+) · /.exec(b.children[0].text)![1] ===
            String(step.events[0].iteration)
        ),
        `${file}: only the step's own actions`,
      );
      const bubble = summarizeTimeline(step.events, 2).bubbleFraction;
      assert.equal(step.bubble, bubble);
      assert.equal(
        title(svg).text,
        `zb-h1: 2 ranks, 4 micro-batches, step ${k + 1} (index ${k}) · bubble ${
          (100 * bubble).toFixed(1)
        }%`,
      );
    }
    const trace = JSON.parse(await Deno.readTextFile(`${dir}/two.json`));
    assert.equal(
      trace.traceEvents.filter((e: { ph: string }) => e.ph === "X").length,
      r.steps[2].events.length,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("writeTrace { step: 'all' }: one block of rank lanes per step, each step from its own start, every box in its step's lanes", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await using m = await cpuModel({
      schedule: "1f1b",
      microBatches: 4,
      optimizer: { kind: "sgd", lr: 0.1 },
    });
    const r = await m.train(batches);
    await m.writeTrace(`${dir}/all.svg`, { step: "all" });
    const svg = await Deno.readTextFile(`${dir}/all.svg`);
    const els = allElements(parseXml(svg));
    const labels = els.filter((e) => e.attrs.class === "rank").map((e) => e.text);
    assert.deepEqual(
      labels,
      [1, 2, 3, 4, 5].flatMap((s) => [`step ${s} · rank 0`, `step ${s} · rank 1`]),
    );
    const lanes = els.filter((e) => e.name === "rect" && e.attrs.class === "lane");
    const all = boxes(svg);
    assert.equal(all.length, r.events.length);
    // A box of step s on rank q sits in lane 2s + q, and each step's first box at the left edge.
    for (const b of all) {
      const it = Number(/ · iteration (\d+) · /.exec(b.children[0].text)![1]);
      const s = r.steps.findIndex((x) => x.events[0].iteration === it);
      const inLane = lanes.findIndex((l) => l.attrs.y === b.attrs.y);
      const rank = r.steps[s].events.find((e) =>
        b.children[0].text.startsWith(`${e.action.stage}${e.action.kind}${e.action.microBatch} `)
      )!.rank;
      assert.equal(inLane, 2 * s + rank);
    }
    const left = Number(lanes[0].attrs.x);
    for (let s = 0; s < 5; s++) {
      const xs = all.filter((b) =>
        [2 * s, 2 * s + 1].includes(lanes.findIndex((l) => l.attrs.y === b.attrs.y))
      )
        .map((b) => Number(b.attrs.x));
      assert.ok(Math.abs(Math.min(...xs) - left) < 0.01, `step ${s} starts at the left edge`);
    }
    assert.match(
      title(svg).text,
      /^1f1b: 2 ranks, 4 micro-batches, steps 1–5, each from its own start; over the call: · bubble /,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("writeTrace: a step not in the last call, a bad step, a prediction's trace, and output paths checked (TypeError naming the path and the rule)", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await using m = await cpuModel({
      schedule: "1f1b",
      microBatches: 4,
      optimizer: { kind: "sgd", lr: 0.1 },
    });
    await m.train(batches.slice(0, 2));
    await m.train(batches.slice(2, 4)); // steps 2 and 3
    await assert.rejects(
      m.writeTrace(`${dir}/x.svg`, { step: 0 }),
      (e: Error) =>
        e instanceof RangeError &&
        /step 0 is not a step of the last train\(\) call \(steps 2–3\)/.test(e.message),
    );
    await assert.rejects(m.writeTrace(`${dir}/x.svg`, { step: 2.5 }), TypeError);
    await m.writeTrace(`${dir}/three.svg`, { step: 3 });
    await assert.rejects(
      m.writeTrace(`${dir}/missing/t.svg`),
      (e: Error) =>
        e instanceof TypeError &&
        e.message ===
          `writeTrace: path ${dir}/missing/t.svg: the folder ${dir}/missing does not exist (create it first)`,
    );
    // Another picture's extension would get JSON: refused, and nothing is written.
    await assert.rejects(
      m.writeTrace(`${dir}/t.png`),
      (e: Error) =>
        e instanceof TypeError &&
        e.message ===
          `writeTrace: path ${dir}/t.png: a trace is an SVG timeline (a name ending in .svg) or a Chrome trace (JSON, any other name such as .json), not PNG`,
    );
    await assert.rejects(Deno.stat(`${dir}/t.png`), Deno.errors.NotFound);
    await assert.rejects(
      m.writeTrace(dir),
      (e: Error) =>
        e instanceof TypeError &&
        e.message === `writeTrace: path ${dir}: it is a directory: name a file to write`,
    );
    await m.predict({ inputs: batches[0].inputs, shape: batches[0].shape });
    await m.writeTrace(`${dir}/p.svg`);
    const svg = await Deno.readTextFile(`${dir}/p.svg`);
    assert.ok(boxes(svg).every((b) => b.attrs.class === "box F"), "the prediction: forwards only");
    await assert.rejects(
      m.writeTrace(`${dir}/p.svg`, { step: 3 }),
      /the last run was a prediction/,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
