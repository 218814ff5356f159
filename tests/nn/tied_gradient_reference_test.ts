// Tied training against the definition: the gradient of the shared table
// (token embedding and output head at once) and of the other weights, from
// one device's backward, equals central differences of an independent
// float64 GPT-2 (GPT-2's own tensors and names, written in the test) at
// sampled entries. PyTorch is not on this machine; this reference takes its
// place.

import assert from "node:assert/strict";
import { CpuBackend } from "../../src/tensor/cpu/backend.ts";
import { loadGPT2 } from "../../src/nn/gpt2.ts";
import { crossEntropyLoss } from "../../src/nn/losses.ts";
import { Rng } from "../../src/tensor/random.ts";
import { referenceLogits, type T64, TINY, writeTinyGPT2 } from "./_gpt2_reference.ts";

const be = new CpuBackend();

function referenceLoss(t: T64, ids: readonly number[], targets: readonly number[]): number {
  const logits = referenceLogits(t, TINY, ids);
  let loss = 0;
  logits.forEach((row, i) => {
    const m = Math.max(...row);
    let z = 0;
    for (const v of row) z += Math.exp(v - m);
    loss += m + Math.log(z) - row[targets[i]];
  });
  return loss / ids.length;
}

Deno.test("tied embeddings, one device: the shared table's gradient (embedding rows and head rows) and other weights' equal float64 central differences of an independent GPT-2", async () => {
  const dir = await Deno.makeTempDir({ prefix: "conveyor_tied_fd_" });
  try {
    const t32 = await writeTinyGPT2(dir, TINY, 3, false);
    const { model } = await loadGPT2(dir, be);
    const ids = [5, 17, 250, 3, 99, 17, 42, 7];
    const targets = [17, 250, 3, 99, 17, 42, 7, 8];
    const x = be.fromData(Float32Array.from(ids), [1, ids.length]);
    const y = model.forward(x);
    const tg = be.fromData(Float32Array.from(targets), [1, ids.length]);
    const { grad } = crossEntropyLoss(y, tg);
    model.backward(grad).dispose();
    const grads = new Map(
      await Promise.all(
        model.parameters().map(async (p) => [p.name, await p.grad.toArray()] as const),
      ),
    );
    const t: T64 = new Map(
      [...t32].map(([k, v]) => [k, { shape: v.shape, data: Float64Array.from(v.data) }]),
    );
    const fd = (name: string, index: number) => {
      const d = t.get(name)!.data;
      const h = 1e-5, v = d[index];
      d[index] = v + h;
      const up = referenceLoss(t, ids, targets);
      d[index] = v - h;
      const down = referenceLoss(t, ids, targets);
      d[index] = v;
      return (up - down) / (2 * h);
    };
    const C = TINY.embd;
    const rng = new Rng(5);
    const checks: [string, string, number, number][] = []; // [hf name, ours, hf index, our index]
    // Table rows of tokens in the input (embedding and head contribute) and of others (head only).
    for (const row of [17, 5, 0, 299, 123]) {
      for (let k = 0; k < 3; k++) {
        const col = rng.int(C);
        checks.push(["wte.weight", "0.token", row * C + col, row * C + col]);
      }
    }
    // A Conv1D weight [in, out] is ours [out, in].
    for (let k = 0; k < 6; k++) {
      const i = rng.int(C), o = rng.int(3 * C);
      checks.push(["h.1.attn.c_attn.weight", "2.attn.qkv.weight", i * 3 * C + o, o * C + i]);
    }
    for (let k = 0; k < 4; k++) {
      const p = rng.int(ids.length), col = rng.int(C);
      checks.push(["wpe.weight", "0.position", p * C + col, p * C + col]);
    }
    let scale = 0;
    for (const g of grads.values()) for (const v of g) scale = Math.max(scale, Math.abs(v));
    for (const [hf, ours, hi, oi] of checks) {
      const want = fd(hf, hi);
      const got = grads.get(ours)![oi];
      assert.ok(
        Math.abs(got - want) <= 2e-3 * scale + 1e-3 * Math.abs(want),
        `${ours}[${oi}] (${hf}[${hi}]): ${got} vs float64 ${want} (gradients up to ${scale})`,
      );
    }
    // Both contributions are there: a row of an input token gets more than the head's part.
    assert.ok(grads.get("0.token")!.subarray(17 * C, 18 * C).some((v) => v !== 0));
    model.dispose();
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
