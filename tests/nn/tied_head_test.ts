import assert from "node:assert/strict";
import { CpuBackend } from "../../src/tensor/cpu/backend.ts";
import { createTinyGPT } from "../../src/nn/gpt.ts";
import { TiedHead, tieParameters } from "../../src/nn/tied_head.ts";
import { layerFromSpec } from "../../src/nn/layer_registry.ts";
import { crossEntropyLoss } from "../../src/nn/losses.ts";
import { loadSafetensors, parseSafetensors, saveSafetensors } from "../../src/nn/safetensors.ts";
import { Linear } from "../../src/nn/linear.ts";
import { Sequential } from "../../src/nn/sequential.ts";
import { TokenPositionEmbedding } from "../../src/nn/token_position_embedding.ts";
import { assertThrowsWith } from "../tensor/_helpers.ts";

const be = new CpuBackend();
const cfg = { vocabSize: 11, seqLen: 5, dim: 8, heads: 2, layers: 2, seed: 2 };

Deno.test("createTinyGPT tieEmbeddings: one table, listed once as 0.token, a TiedHead without bias", async () => {
  const g = createTinyGPT({ ...cfg, tieEmbeddings: true }, be);
  const head = g.layers[g.layers.length - 1] as TiedHead;
  assert.equal(head.kind, "TiedHead");
  assert.ok(head.tied);
  const names = g.parameters().map((p) => p.name);
  assert.equal(names.filter((n) => n === "0.token").length, 1);
  assert.ok(!names.some((n) => n.startsWith("4.")), `the head lists nothing: ${names}`);
  assert.equal(head.weight, g.parameters()[0].value);
  // The safetensors file holds it once; a copy rebuilt from the spec ties again and loads it.
  const bytes = await saveSafetensors(g);
  assert.equal(
    [...parseSafetensors(bytes).tensors.keys()].filter((k) => k === "0.token").length,
    1,
  );
  const copy = layerFromSpec(JSON.parse(JSON.stringify(g.spec())), be) as Sequential;
  loadSafetensors(copy, bytes);
  assert.equal((copy.layers[4] as TiedHead).weight, copy.parameters()[0].value);
  const ids = be.fromData(new Float32Array([1, 2, 3, 4, 5]), [1, 5]);
  assert.deepEqual(
    await g.forward(ids, { save: false }).toArray(),
    await copy.forward(ids, { save: false }).toArray(),
  );
  g.dispose();
  copy.dispose();
});

Deno.test("TiedHead: the tied gradient is the embedding's plus the head's (checked against an untied copy)", async () => {
  // Untied model with the head's weight equal to the token table: the tied
  // gradient must be the sum of the untied model's two gradients.
  const tied = createTinyGPT({ ...cfg, tieEmbeddings: true }, be);
  // Same seed: layers 0..3 draw the same weights; the head is drawn last.
  const base = createTinyGPT(cfg, be);
  base.layers[4].dispose();
  const untiedHead = new Linear(be, cfg.dim, cfg.vocabSize, { bias: false });
  const untied = new Sequential([...base.layers.slice(0, 4), untiedHead]);
  const table = await tied.parameters()[0].value.toArray();
  const w = be.fromData(table, [cfg.vocabSize, cfg.dim]);
  loadSafetensors(untiedHead, await saveSafetensors([{ name: "weight", value: w, grad: w }]));
  w.dispose();
  const ids = be.fromData(new Float32Array([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]), [2, 5]);
  const t = be.fromData(new Float32Array([2, 3, 4, 5, 6, 7, 8, 9, 10, 0]), [2, 5]);
  const grads = [];
  for (const m of [tied, untied]) {
    const y = m.forward(ids);
    const r = crossEntropyLoss(y, t);
    m.backward(r.grad).dispose();
    grads.push(m.parameters());
  }
  const gTied = await grads[0][0].grad.toArray();
  const gEmb = await grads[1][0].grad.toArray();
  const gHead = await untiedHead.parameters()[0].grad.toArray();
  let worst = 0, scale = 0;
  for (let i = 0; i < gTied.length; i++) {
    worst = Math.max(worst, Math.abs(gTied[i] - (gEmb[i] + gHead[i])));
    scale = Math.max(scale, Math.abs(gTied[i]));
  }
  assert.ok(scale > 0 && worst <= 1e-6 * scale, `worst ${worst} of ${scale}`);
  tied.dispose();
  untied.dispose();
});

Deno.test("tieParameters: binds to the named parameter; leaves a head whose parameter is elsewhere; refuses a wrong shape", () => {
  const head = new TiedHead(be, 10, 4, { tiedTo: "0.token" });
  const alone = new Sequential([head], { names: ["3"] });
  assert.deepEqual(tieParameters([alone]), [head]);
  assert.deepEqual(alone.parameters().map((p) => p.name), ["3.weight"]);
  const emb = new TokenPositionEmbedding(be, 10, 3, 4);
  const first = new Sequential([emb], { names: ["0"] });
  assert.deepEqual(tieParameters([first, alone]), []);
  assert.deepEqual([...first.parameters(), ...alone.parameters()].map((p) => p.name), [
    "0.token",
    "0.position",
  ]);
  const wrong = new TiedHead(be, 9, 4);
  assertThrowsWith(() => wrong.tie(emb.parameters()[0]), RangeError, [
    "must be [9, 4], got [10, 4]",
  ]);
  for (const l of [first, alone, wrong]) l.dispose();
});
