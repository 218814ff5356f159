import assert from "node:assert/strict";
import { CurveWriter } from "../../../../src/pipeline/model/callbacks/curve_writer.ts";
import { allElements, parseXml } from "../../_xml.ts";
import { cpuModel, tokenBatches } from "../_reference_training.ts";

Deno.test("CurveWriter: when train ends, the loss of every step and the validation loss and accuracy as an SVG, written atomically; the path checked before the first step", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await using m = await cpuModel({
      schedule: "1f1b",
      microBatches: 4,
      optimizer: { kind: "adamw", lr: 1e-2 },
    });
    const batches = tokenBatches(6, 8, 2);
    const curves = new CurveWriter(`${dir}/c.svg`, { title: "tiny run", writeEvery: 4 });
    const written: boolean[] = [];
    const r = await m.train(batches, {
      validation: { batch: batches[0], every: 3 },
      callbacks: [curves, {
        onStepEnd: async () =>
          void written.push(await Deno.stat(`${dir}/c.svg`).then(() => true, () => false)),
      }],
    });
    assert.deepEqual(
      written,
      [false, false, false, true, true, true],
      "every 4 steps, then at the end",
    );
    assert.deepEqual(curves.loss, r.steps.map((s) => [s.step + 1, s.loss]));
    const els = allElements(parseXml(await Deno.readTextFile(`${dir}/c.svg`)));
    assert.equal(els.filter((e) => e.name === "polyline").length, 3);
    assert.ok(els.some((e) => e.name === "text" && e.text === "tiny run"));
    const legend = els.filter((e) => e.name === "text" && e.attrs.class === "legend");
    assert.equal(legend.length, 3);
    assert.deepEqual(
      [...Deno.readDirSync(dir)].map((e) => e.name),
      ["c.svg"],
      "no temporary file left",
    );
    await assert.rejects(
      m.train(batches, { callbacks: [new CurveWriter(`${dir}/none/c.svg`)] }),
      (e: Error) =>
        e instanceof TypeError &&
        /CurveWriter: path .*none\/c\.svg: the folder .*none does not exist/.test(e.message),
    );
    assert.equal(m.stepCount, 6);
    assert.throws(
      () => new CurveWriter(`${dir}/c.svg`, { writeEvery: 1.5 }),
      /writeEvery must be an integer >= 0, got 1\.5/,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
