/**
 * One NaN semantics on every backend: NaN in gives NaN out, strictly, for
 * every elementwise op, activation and activation gradient (at exactly the
 * positions that read a NaN), and the row-wise ops (softmax, layer norm,
 * RMS norm, log-sum-exp, cross-entropy) never turn a NaN row into finite
 * numbers. `where` is the one exception by design: it returns the selected
 * element, NaN or not.
 *
 * WGSL's `max`, `clamp` and compilers that assume no NaN used to hide it
 * (ReLU(NaN) was 0 on both backends, Tanh(NaN) −1 on WebGPU).
 *
 * @module
 */

import assert from "node:assert/strict";
import type { Backend } from "../../src/tensor/backend.ts";
import * as ops from "../../src/tensor/ops.ts";
import type { Tensor } from "../../src/tensor/tensor.ts";
import { take } from "./_helpers.ts";
import { label, testBackends } from "./_backends.ts";

const backends = await testBackends();

// 11 elements: not a multiple of 4, so NaNs sit in full and partial vec4s.
const N = 11;
const NAN_AT = [0, 5, 10];
function withNaN(lo = -2, hi = 2): Float32Array {
  const d = new Float32Array(N);
  for (let i = 0; i < N; i++) d[i] = lo + ((i * 7) % N) * (hi - lo) / N;
  for (const i of NAN_AT) d[i] = NaN;
  return d;
}

function clean(lo = -2, hi = 2): Float32Array {
  return Float32Array.from({ length: N }, (_, i) => lo + ((i * 3) % N) * (hi - lo) / N + 0.01);
}

/** NaN exactly where `nan` is true, and a number everywhere else. */
function assertNaNAt(got: Float32Array, nan: (i: number) => boolean, what: string): void {
  for (let i = 0; i < got.length; i++) {
    if (nan(i) !== Number.isNaN(got[i])) {
      assert.fail(`${what}[${i}]: got ${got[i]}, expected ${nan(i) ? "NaN" : "a number"}`);
    }
  }
}

const isNanPos = (i: number) => NAN_AT.includes(i);

Deno.test("unary ops and activations: NaN in, NaN out (and nowhere else)", async () => {
  const unary: [string, (x: Tensor) => Tensor][] = [
    ["relu", ops.relu],
    ["gelu", ops.gelu],
    ["tanh", ops.tanh],
    ["sigmoid", ops.sigmoid],
    ["silu", ops.silu],
    ["exp", ops.exp],
    ["log", (x) => ops.log(ops.exp(x))],
    ["scale", (x) => ops.scale(x, 0)],
    ["copy", ops.copy],
    ["dropout", (x) => ops.dropout(x, { p: 0.5, seed: 1 })],
  ];
  for (const be of backends) {
    const x = be.fromData(withNaN(), [N]);
    for (const [name, f] of unary) assertNaNAt(await take(f(x)), isNanPos, `${label(be)} ${name}`);
    x.dispose();
  }
});

Deno.test("activation gradients: NaN in v or dy gives NaN", async () => {
  const grads: [string, (v: Tensor, dy: Tensor) => Tensor][] = [
    ["reluBackward", ops.reluBackward],
    ["geluBackward", ops.geluBackward],
    ["tanhBackward", ops.tanhBackward],
    ["sigmoidBackward", ops.sigmoidBackward],
    ["siluBackward", ops.siluBackward],
  ];
  for (const be of backends) {
    const nanV = be.fromData(withNaN(), [N]), v = be.fromData(clean(), [N]);
    const dy = be.fromData(clean(-1, 1), [N]);
    for (const [name, f] of grads) {
      assertNaNAt(await take(f(nanV, dy)), isNanPos, `${label(be)} ${name}(NaN v)`);
      assertNaNAt(await take(f(v, nanV)), isNanPos, `${label(be)} ${name}(NaN dy)`);
    }
    for (const t of [nanV, v, dy]) t.dispose();
  }
});

Deno.test("binary ops, addBias and axpy: NaN in either operand gives NaN, broadcast too", async () => {
  const binary: [string, (a: Tensor, b: Tensor) => Tensor][] = [
    ["add", ops.add],
    ["sub", ops.sub],
    ["mul", ops.mul],
    ["div", ops.div],
    ["maximum", ops.maximum],
  ];
  for (const be of backends) {
    const nan = be.fromData(withNaN(), [N]), ok = be.fromData(clean(0.5, 2), [N]);
    for (const [name, f] of binary) {
      assertNaNAt(await take(f(nan, ok)), isNanPos, `${label(be)} ${name}(NaN, x)`);
      assertNaNAt(await take(f(ok, nan)), isNanPos, `${label(be)} ${name}(x, NaN)`);
      // Broadcast: a NaN in a [1] operand spreads over the whole output.
      const one = be.fromData(Float32Array.of(NaN), [1]);
      assertNaNAt(await take(f(ok, one)), () => true, `${label(be)} ${name}(x, [NaN])`);
      one.dispose();
    }
    const rows = be.fromData(clean(), [1, N]);
    const bias = be.fromData(withNaN(), [N]);
    assertNaNAt(await take(ops.addBias(rows, bias)), isNanPos, `${label(be)} addBias`);
    const y = be.fromData(clean(), [N]);
    ops.axpyInPlace(y, 2, nan);
    assertNaNAt(await take(y), isNanPos, `${label(be)} axpyInPlace`);
    for (const t of [nan, ok, rows, bias]) t.dispose();
  }
});

Deno.test("where returns the selected element: NaN only where a NaN is picked", async () => {
  for (const be of backends) {
    const nan = be.fromData(withNaN(), [N]), zero = be.zeros([N]);
    const cond = be.fromData(Float32Array.from({ length: N }, (_, i) => i % 2), [N]);
    // NaN at 0, 5, 10; picked from a at odd positions only: 5.
    assertNaNAt(await take(ops.where(cond, nan, zero)), (i) => i === 5, `${label(be)} where`);
    for (const t of [nan, zero, cond]) t.dispose();
  }
});

async function rowIsNaN(be: Backend, what: string, t: Tensor, rows: number): Promise<void> {
  const d = await take(t);
  const per = d.length / rows;
  // Row 1 holds the NaN; it must not come out all finite. Row 0 stays finite.
  assert.ok(d.subarray(0, per).every(Number.isFinite), `${label(be)} ${what}: clean row finite`);
  assert.ok(d.subarray(per, 2 * per).some(Number.isNaN), `${label(be)} ${what}: NaN row hides NaN`);
}

Deno.test("row-wise ops never turn a NaN row into finite numbers", async () => {
  for (const be of backends) {
    const d = Float32Array.from({ length: 10 }, (_, i) => Math.sin(i));
    d[7] = NaN; // row 1 of [2, 5]
    const x = be.fromData(d, [2, 5]);
    const ones = ops.ones(be, [5]), zeros = be.zeros([5]);
    await rowIsNaN(be, "softmax", ops.softmax(x), 2);
    const ln = ops.layerNorm(x, ones, zeros);
    await rowIsNaN(be, "layerNorm", ln.y, 2);
    ln.mean.dispose();
    ln.rstd.dispose();
    const rn = ops.rmsNorm(x, ones);
    await rowIsNaN(be, "rmsNorm", rn.y, 2);
    rn.rstd.dispose();
    const lse = await take(ops.logSumExp(x));
    assert.ok(Number.isFinite(lse[0]) && Number.isNaN(lse[1]), `${label(be)} logSumExp: ${lse}`);
    const t = be.fromData(Float32Array.of(1, 2), [2]);
    const ce = ops.crossEntropy(x, t);
    const loss = await take(ce.loss);
    assert.ok(Number.isFinite(loss[0]) && Number.isNaN(loss[1]), `${label(be)} crossEntropy`);
    await rowIsNaN(be, "crossEntropy.probs", ce.probs, 2);
    for (const u of [x, ones, zeros, t]) u.dispose();
  }
});
