/**
 * Validation of the public ops: every bad input throws a TypeError or
 * RangeError that names the shapes or values, before any kernel runs and
 * without allocating or changing anything.
 */

import assert from "node:assert/strict";
import type { AdamWParams, Backend, SGDParams, Shape } from "../../src/tensor/backend.ts";
import { CpuBackend } from "../../src/tensor/cpu/backend.ts";
import * as ops from "../../src/tensor/ops.ts";
import type { Tensor } from "../../src/tensor/tensor.ts";
import { assertThrowsWith, lcgData } from "./_helpers.ts";
import { testBackends } from "./_backends.ts";

const backends = await testBackends();

const KERNELS = [
  "matmul",
  "add",
  "sub",
  "mul",
  "addBias",
  "scale",
  "axpyInPlace",
  "fillInPlace",
  "copy",
  "copyInPlace",
  "scaleInPlace",
  "sgdInPlace",
  "relu",
  "reluBackward",
  "gelu",
  "geluBackward",
  "tanh",
  "tanhBackward",
  "softmax",
  "softmaxBackward",
  "layerNorm",
  "layerNormBackwardInput",
  "layerNormBackwardWeight",
  "sumRows",
  "sum",
  "sumSquares",
  "crossEntropy",
  "crossEntropyBackward",
  "embedding",
  "embeddingBackwardInPlace",
  "adamwInPlace",
  "sliceRows",
  "concatRows",
  "permute",
  "binary",
  "unary",
  "unaryBackward",
  "where",
  "sumToShape",
  "full",
  "logSumExp",
  "rmsNorm",
  "rmsNormBackwardInput",
  "rmsNormBackwardWeight",
  "dropout",
] as const;

/**
 * A CPU backend that records every kernel call and the bytes the test itself
 * uploads (net of what it disposed), to prove that validation runs before
 * any kernel and allocates nothing.
 */
class SpyBackend extends CpuBackend {
  readonly calls: string[] = [];
  uploaded = 0;
  constructor() {
    super();
    const self = this as unknown as Record<string, (...a: unknown[]) => unknown>;
    const proto = CpuBackend.prototype as unknown as Record<string, (...a: unknown[]) => unknown>;
    for (const k of KERNELS) {
      const orig = proto[k];
      self[k] = (...args: unknown[]) => {
        this.calls.push(k);
        return orig.apply(this, args);
      };
    }
  }
  override fromData(data: Float32Array, shape: Shape): Tensor {
    const out = super.fromData(data, shape);
    this.uploaded += out.bytes;
    return out;
  }
  override release(storage: unknown, bytes: number): void {
    super.release(storage, bytes);
    this.uploaded -= bytes;
  }
}

function t(be: Backend, shape: Shape, seed = 1): Tensor {
  let n = 1;
  for (const d of shape) n *= d;
  return be.fromData(lcgData(n, seed), shape);
}

function ids(be: Backend, values: number[], shape: Shape = [values.length]): Tensor {
  return be.fromData(new Float32Array(values), shape);
}

const HP: AdamWParams = {
  lr: 1e-3,
  beta1: 0.9,
  beta2: 0.999,
  eps: 1e-8,
  weightDecay: 0.01,
  step: 1,
};

const SGD_HP: SGDParams = { lr: 0.1, momentum: 0, weightDecay: 0 };

type Cls = TypeErrorConstructor | RangeErrorConstructor;
interface BadCase {
  /** Builds the inputs on `be` and returns the failing call. */
  setup(be: Backend): () => unknown;
  cls: Cls;
  /** Strings the message must contain. */
  parts: string[];
}

/** Runs each case on a spy backend: right error, no kernel ran, nothing allocated or changed. */
async function checkCases(cases: Record<string, BadCase>): Promise<void> {
  for (const [name, c] of Object.entries(cases)) {
    const be = new SpyBackend();
    const call = c.setup(be);
    const live = be.memory.liveBytes - be.uploaded;
    const before = be.calls.length;
    try {
      assertThrowsWith(call, c.cls, c.parts);
    } catch (e) {
      throw new Error(`case "${name}": ${(e as Error).message}`);
    }
    assert.deepEqual(be.calls.slice(before), [], `case "${name}": a kernel ran before the error`);
    // Only the inputs the call itself uploaded may have been added.
    assert.equal(be.memory.liveBytes - be.uploaded, live, `case "${name}": memory changed`);
    await be.sync();
  }
}

Deno.test("ops: mismatched shapes throw RangeError naming both shapes", async () => {
  await checkCases({
    "add": {
      setup: (be) => () => ops.add(t(be, [2, 3]), t(be, [3, 2])),
      cls: RangeError,
      parts: ["add", "a [2, 3]", "b [3, 2]"],
    },
    "sub rank": {
      setup: (be) => () => ops.sub(t(be, [2, 3]), t(be, [2, 3, 1])),
      cls: RangeError,
      parts: ["sub", "[2, 3]", "[2, 3, 1]"],
    },
    "mul": {
      setup: (be) => () => ops.mul(t(be, [4]), t(be, [5])),
      cls: RangeError,
      parts: ["mul", "[4]", "[5]"],
    },
    "matmul transA": {
      setup: (be) => {
        const a = t(be, [3, 2]), b = t(be, [2, 5]);
        return () => ops.matmul(a, b, { transA: true });
      },
      cls: RangeError,
      parts: ["inner dimensions differ", "a [3, 2] (transA=true)", "b [2, 5] (transB=false)"],
    },
    "matmul transB": {
      setup: (be) => {
        const a = t(be, [2, 3]), b = t(be, [3, 4]);
        return () => ops.matmul(a, b, { transB: true });
      },
      cls: RangeError,
      parts: ["inner dimensions differ", "a [2, 3]", "b [3, 4] (transB=true)"],
    },
    "matmul batch": {
      setup: (be) => {
        const a = t(be, [2, 3, 4]), b = t(be, [3, 4, 5]);
        return () => ops.matmul(a, b);
      },
      cls: RangeError,
      parts: ["batch dimensions differ", "[2, 3, 4]", "[3, 4, 5]"],
    },
    "matmul 1-D": {
      setup: (be) => () => ops.matmul(t(be, [3]), t(be, [3, 2])),
      cls: RangeError,
      parts: ["a", "at least 2 dimensions", "[3]"],
    },
    "matmul b 1-D": {
      setup: (be) => () => ops.matmul(t(be, [2, 3]), t(be, [3])),
      cls: RangeError,
      parts: ["b", "at least 2 dimensions", "[3]"],
    },
    "addBias": {
      setup: (be) => () => ops.addBias(t(be, [2, 3]), t(be, [4])),
      cls: RangeError,
      parts: ["bias", "[3]", "[2, 3]", "[4]"],
    },
    "addBias 2-D bias": {
      setup: (be) => () => ops.addBias(t(be, [2, 3]), t(be, [1, 3])),
      cls: RangeError,
      parts: ["bias", "[1, 3]"],
    },
    "axpyInPlace": {
      setup: (be) => () => ops.axpyInPlace(t(be, [2, 2]), 1, t(be, [4])),
      cls: RangeError,
      parts: ["y [2, 2]", "x [4]"],
    },
    "copyInPlace": {
      setup: (be) => () => ops.copyInPlace(t(be, [2, 3]), t(be, [3, 2])),
      cls: RangeError,
      parts: ["copyInPlace", "dst [2, 3]", "src [3, 2]"],
    },
    "sgdInPlace grad": {
      setup: (be) => () => ops.sgdInPlace(t(be, [3]), t(be, [1, 3]), null, SGD_HP),
      cls: RangeError,
      parts: ["sgdInPlace", "param [3]", "grad [1, 3]"],
    },
    "sgdInPlace buf": {
      setup: (be) => () => ops.sgdInPlace(t(be, [3]), t(be, [3]), t(be, [4]), SGD_HP),
      cls: RangeError,
      parts: ["param [3]", "buf [4]"],
    },
    "reluBackward": {
      setup: (be) => () => ops.reluBackward(t(be, [2, 3]), t(be, [3, 2])),
      cls: RangeError,
      parts: ["x [2, 3]", "dy [3, 2]"],
    },
    "geluBackward": {
      setup: (be) => () => ops.geluBackward(t(be, [6]), t(be, [3, 2])),
      cls: RangeError,
      parts: ["[6]", "[3, 2]"],
    },
    "tanhBackward": {
      setup: (be) => () => ops.tanhBackward(t(be, [2]), t(be, [3])),
      cls: RangeError,
      parts: ["y [2]", "dy [3]"],
    },
    "softmaxBackward": {
      setup: (be) => () => ops.softmaxBackward(t(be, [2, 4]), t(be, [2, 5])),
      cls: RangeError,
      parts: ["[2, 4]", "[2, 5]"],
    },
    "softmax causal not square": {
      setup: (be) => () => ops.softmax(t(be, [2, 3]), { causal: true }),
      cls: RangeError,
      parts: ["causal", "[..., T, T]", "[2, 3]"],
    },
    "softmax causal 1-D": {
      setup: (be) => () => ops.softmax(t(be, [4]), { causal: true }),
      cls: RangeError,
      parts: ["[4]"],
    },
    "softmax scalar": {
      setup: (be) => () => ops.softmax(t(be, [])),
      cls: RangeError,
      parts: ["at least 1 dimension", "[]"],
    },
    "layerNorm gamma": {
      setup: (be) => () => ops.layerNorm(t(be, [2, 3]), t(be, [4]), t(be, [3])),
      cls: RangeError,
      parts: ["gamma", "[3]", "[2, 3]", "[4]"],
    },
    "layerNorm beta": {
      setup: (be) => () => ops.layerNorm(t(be, [2, 3]), t(be, [3]), t(be, [2])),
      cls: RangeError,
      parts: ["beta", "[2]"],
    },
    "layerNorm empty rows": {
      setup: (be) => () => ops.layerNorm(t(be, [2, 0]), t(be, [0]), t(be, [0])),
      cls: RangeError,
      parts: ["non-empty last dimension", "[2, 0]"],
    },
    "layerNormBackwardInput mean": {
      setup: (be) => {
        const x = t(be, [2, 3]);
        return () =>
          ops.layerNormBackwardInput(
            t(be, [2, 3]),
            x,
            { mean: t(be, [3]), rstd: t(be, [2]) },
            t(be, [3]),
          );
      },
      cls: RangeError,
      parts: ["mean", "[2]", "[2, 3]", "got [3]"],
    },
    "layerNormBackwardInput dy": {
      setup: (be) => () =>
        ops.layerNormBackwardInput(
          t(be, [3, 2]),
          t(be, [2, 3]),
          { mean: t(be, [2]), rstd: t(be, [2]) },
          t(be, [3]),
        ),
      cls: RangeError,
      parts: ["dy [3, 2]", "x [2, 3]"],
    },
    "layerNormBackwardInput gamma": {
      setup: (be) => () =>
        ops.layerNormBackwardInput(
          t(be, [2, 3]),
          t(be, [2, 3]),
          { mean: t(be, [2]), rstd: t(be, [2]) },
          t(be, [2]),
        ),
      cls: RangeError,
      parts: ["gamma", "got [2]"],
    },
    "layerNormBackwardWeight rstd": {
      setup: (be) => () =>
        ops.layerNormBackwardWeight(t(be, [4, 3]), t(be, [4, 3]), {
          mean: t(be, [4]),
          rstd: t(be, [2, 2]),
        }),
      cls: RangeError,
      parts: ["rstd", "[4]", "[2, 2]"],
    },
    "layerNormBackwardWeight stats": {
      setup: (be) => () =>
        ops.layerNormBackwardWeight(
          t(be, [4, 3]),
          t(be, [4, 3]),
          null as unknown as { mean: Tensor; rstd: Tensor },
        ),
      cls: TypeError,
      parts: ["layerNormBackwardWeight", "stats", "{ mean, rstd }", "null"],
    },
    "crossEntropy targets": {
      setup: (be) => () => ops.crossEntropy(t(be, [2, 5]), ids(be, [0, 1, 2])),
      cls: RangeError,
      parts: ["targets", "[2]", "[2, 5]", "got [3]"],
    },
    "crossEntropy no classes": {
      setup: (be) => () => ops.crossEntropy(t(be, [2, 0]), ids(be, [0, 0])),
      cls: RangeError,
      parts: ["logits", "[2, 0]"],
    },
    "crossEntropyBackward targets": {
      setup: (be) => () => ops.crossEntropyBackward(t(be, [3, 4]), ids(be, [0, 1], [1, 2]), 1),
      cls: RangeError,
      parts: ["targets", "[3]", "[3, 4]", "[1, 2]"],
    },
    "embedding 1-D table": {
      setup: (be) => () => ops.embedding(t(be, [5]), ids(be, [0])),
      cls: RangeError,
      parts: ["table", "2-D", "[5]"],
    },
    "embeddingBackwardInPlace dy": {
      setup: (be) => () =>
        ops.embeddingBackwardInPlace(t(be, [5, 2]), ids(be, [0, 1, 2]), t(be, [3, 4])),
      cls: RangeError,
      parts: ["dy", "[3, 2]", "[3, 4]"],
    },
    "adamwInPlace m": {
      setup: (be) => () => ops.adamwInPlace(t(be, [3]), t(be, [3]), t(be, [4]), t(be, [3]), HP),
      cls: RangeError,
      parts: ["param [3]", "m [4]"],
    },
    "adamwInPlace grad": {
      setup: (be) => () => ops.adamwInPlace(t(be, [3]), t(be, [1, 3]), t(be, [3]), t(be, [3]), HP),
      cls: RangeError,
      parts: ["grad [1, 3]"],
    },
    "concatRows columns": {
      setup: (be) => () => ops.concatRows([t(be, [2, 3]), t(be, [2, 4])]),
      cls: RangeError,
      parts: ["parts[1]", "[2, 4]", "[2, 3]"],
    },
    "concatRows rank": {
      setup: (be) => () => ops.concatRows([t(be, [2, 3]), t(be, [1, 2, 3])]),
      cls: RangeError,
      parts: ["[1, 2, 3]"],
    },
    "sumRows scalar": {
      setup: (be) => () => ops.sumRows(t(be, [])),
      cls: RangeError,
      parts: ["x", "[]"],
    },
  });
});

Deno.test("ops: non-finite or non-number scalars and bad options are refused", async () => {
  const nan = Number.NaN;
  await checkCases({
    "scale NaN": {
      setup: (be) => () => ops.scale(t(be, [2]), nan),
      cls: RangeError,
      parts: ["scale", "s", "NaN"],
    },
    "scale Infinity": {
      setup: (be) => () => ops.scale(t(be, [2]), Infinity),
      cls: RangeError,
      parts: ["Infinity"],
    },
    "scale string": {
      setup: (be) => () => ops.scale(t(be, [2]), "2" as unknown as number),
      cls: TypeError,
      parts: ["s", "string 2"],
    },
    "axpy alpha": {
      setup: (be) => () => ops.axpyInPlace(t(be, [2]), -Infinity, t(be, [2])),
      cls: RangeError,
      parts: ["alpha", "-Infinity"],
    },
    "scaleInPlace NaN": {
      setup: (be) => () => ops.scaleInPlace(t(be, [2]), nan),
      cls: RangeError,
      parts: ["scaleInPlace", "s", "NaN"],
    },
    "sgd lr negative": {
      setup: (be) => () => ops.sgdInPlace(t(be, [2]), t(be, [2]), null, { ...SGD_HP, lr: -1 }),
      cls: RangeError,
      parts: ["hp.lr", "-1"],
    },
    "sgd momentum 1": {
      setup: (be) => () =>
        ops.sgdInPlace(t(be, [2]), t(be, [2]), t(be, [2]), { ...SGD_HP, momentum: 1 }),
      cls: RangeError,
      parts: ["hp.momentum", "[0, 1)", "got 1"],
    },
    "sgd momentum without buf": {
      setup: (be) => () =>
        ops.sgdInPlace(t(be, [2]), t(be, [2]), null, { ...SGD_HP, momentum: 0.9 }),
      cls: RangeError,
      parts: ["momentum 0.9", "buf null"],
    },
    "sgd weightDecay NaN": {
      setup: (be) => () =>
        ops.sgdInPlace(t(be, [2]), t(be, [2]), null, { ...SGD_HP, weightDecay: nan }),
      cls: RangeError,
      parts: ["hp.weightDecay", "NaN"],
    },
    "sgd param aliases buf": {
      setup: (be) => () => {
        const p = t(be, [2]);
        return ops.sgdInPlace(p, t(be, [2]), p.reshape([2]), { ...SGD_HP, momentum: 0.5 });
      },
      cls: RangeError,
      parts: ["param and buf", "share storage"],
    },
    "sgd hp missing": {
      setup: (be) => () =>
        ops.sgdInPlace(t(be, [2]), t(be, [2]), null, null as unknown as SGDParams),
      cls: TypeError,
      parts: ["hp", "SGDParams", "null"],
    },
    "fill NaN": {
      setup: (be) => () => ops.fillInPlace(t(be, [2]), nan),
      cls: RangeError,
      parts: ["value", "NaN"],
    },
    "crossEntropyBackward scale": {
      setup: (be) => () => ops.crossEntropyBackward(t(be, [1, 2]), ids(be, [0]), nan),
      cls: RangeError,
      parts: ["scale", "NaN"],
    },
    "layerNorm eps 0": {
      setup: (be) => () => ops.layerNorm(t(be, [1, 2]), t(be, [2]), t(be, [2]), 0),
      cls: RangeError,
      parts: ["eps", "positive", "0"],
    },
    "layerNorm eps NaN": {
      setup: (be) => () => ops.layerNorm(t(be, [1, 2]), t(be, [2]), t(be, [2]), nan),
      cls: RangeError,
      parts: ["eps", "NaN"],
    },
    "matmul transA": {
      setup: (be) => () =>
        ops.matmul(t(be, [2, 2]), t(be, [2, 2]), { transA: "yes" as unknown as boolean }),
      cls: TypeError,
      parts: ["transA", "yes"],
    },
    "softmax causal": {
      setup: (be) => () => ops.softmax(t(be, [2, 2]), { causal: 1 as unknown as boolean }),
      cls: TypeError,
      parts: ["causal", "1"],
    },
    "adamw lr": {
      setup: (be) => () => adamw(be, { ...HP, lr: nan }),
      cls: RangeError,
      parts: ["hp.lr", "NaN"],
    },
    "adamw lr negative": {
      setup: (be) => () => adamw(be, { ...HP, lr: -1 }),
      cls: RangeError,
      parts: ["hp.lr", "-1"],
    },
    "adamw beta1": {
      setup: (be) => () => adamw(be, { ...HP, beta1: 1 }),
      cls: RangeError,
      parts: ["hp.beta1", "[0, 1)", "got 1"],
    },
    "adamw beta2": {
      setup: (be) => () => adamw(be, { ...HP, beta2: -0.5 }),
      cls: RangeError,
      parts: ["hp.beta2", "-0.5"],
    },
    "adamw eps": {
      setup: (be) => () => adamw(be, { ...HP, eps: 0 }),
      cls: RangeError,
      parts: ["hp.eps", "got 0"],
    },
    "adamw weightDecay": {
      setup: (be) => () => adamw(be, { ...HP, weightDecay: -0.1 }),
      cls: RangeError,
      parts: ["hp.weightDecay", "-0.1"],
    },
    "adamw step 0": {
      setup: (be) => () => adamw(be, { ...HP, step: 0 }),
      cls: RangeError,
      parts: ["hp.step", "got 0"],
    },
    "adamw step 1.5": {
      setup: (be) => () => adamw(be, { ...HP, step: 1.5 }),
      cls: RangeError,
      parts: ["hp.step", "1.5"],
    },
    "adamw hp missing": {
      setup: (be) => () => adamw(be, undefined as unknown as AdamWParams),
      cls: TypeError,
      parts: ["hp"],
    },
  });
});

function adamw(be: Backend, hp: AdamWParams): void {
  ops.adamwInPlace(t(be, [3]), t(be, [3]), t(be, [3]), t(be, [3]), hp);
}

Deno.test("ops: row ranges and permutations must be valid integers in range", async () => {
  await checkCases({
    "slice start > end": {
      setup: (be) => () => ops.sliceRows(t(be, [4, 3]), 3, 2),
      cls: RangeError,
      parts: ["start 3", "end 2", "4", "[4, 3]"],
    },
    "slice end > rows": {
      setup: (be) => () => ops.sliceRows(t(be, [4, 3]), 0, 5),
      cls: RangeError,
      parts: ["end 5", "<= 4"],
    },
    "slice negative": {
      setup: (be) => () => ops.sliceRows(t(be, [4, 3]), -1, 2),
      cls: RangeError,
      parts: ["start -1"],
    },
    "slice fractional": {
      setup: (be) => () => ops.sliceRows(t(be, [4, 3]), 0.5, 2),
      cls: RangeError,
      parts: ["start 0.5", "integers"],
    },
    "slice NaN": {
      setup: (be) => () => ops.sliceRows(t(be, [4, 3]), 0, NaN),
      cls: RangeError,
      parts: ["end NaN"],
    },
    "slice scalar": {
      setup: (be) => () => ops.sliceRows(t(be, []), 0, 0),
      cls: RangeError,
      parts: ["[]"],
    },
    "permute length": {
      setup: (be) => () => ops.permute(t(be, [2, 3]), [0]),
      cls: RangeError,
      parts: ["permutation of 0..1", "[2, 3]", "got [0]"],
    },
    "permute duplicate": {
      setup: (be) => () => ops.permute(t(be, [2, 3]), [0, 0]),
      cls: RangeError,
      parts: ["got [0, 0]"],
    },
    "permute out of range": {
      setup: (be) => () => ops.permute(t(be, [2, 3]), [0, 2]),
      cls: RangeError,
      parts: ["got [0, 2]"],
    },
    "permute fractional": {
      setup: (be) => () => ops.permute(t(be, [2, 3]), [0.5, 1]),
      cls: RangeError,
      parts: ["got [0.5, 1]"],
    },
    "permute rank 7": {
      setup: (be) => () => ops.permute(t(be, [1, 1, 1, 1, 1, 1, 2]), [0, 1, 2, 3, 4, 5, 6]),
      cls: RangeError,
      parts: ["at most 6", "[1, 1, 1, 1, 1, 1, 2]"],
    },
    "permute not array": {
      setup: (be) => () => ops.permute(t(be, [2]), "0" as unknown as number[]),
      cls: TypeError,
      parts: ["perm"],
    },
    "concatRows empty": {
      setup: () => () => ops.concatRows([]),
      cls: RangeError,
      parts: ["empty", "0"],
    },
    "concatRows not array": {
      setup: (be) => () => ops.concatRows(t(be, [2]) as unknown as Tensor[]),
      cls: TypeError,
      parts: ["parts", "Tensor"],
    },
  });
});

Deno.test("ops: use after dispose throws TypeError naming the argument and its shape", async () => {
  const disposed = (be: Backend, shape: Shape): Tensor => {
    const x = t(be, shape);
    x.dispose();
    return x;
  };
  await checkCases({
    "add b": {
      setup: (be) => () => ops.add(t(be, [2, 3]), disposed(be, [2, 3])),
      cls: TypeError,
      parts: ["add", "b", "[2, 3]", "after dispose"],
    },
    "matmul a": {
      setup: (be) => () => ops.matmul(disposed(be, [4, 2]), t(be, [2, 2])),
      cls: TypeError,
      parts: ["matmul", "a", "[4, 2]", "dispose"],
    },
    "relu": {
      setup: (be) => () => ops.relu(disposed(be, [5])),
      cls: TypeError,
      parts: ["relu", "x", "[5]"],
    },
    "fillInPlace": {
      setup: (be) => () => ops.fillInPlace(disposed(be, [2]), 1),
      cls: TypeError,
      parts: ["fillInPlace", "x"],
    },
    "axpyInPlace y": {
      setup: (be) => () => ops.axpyInPlace(disposed(be, [3]), 1, t(be, [3])),
      cls: TypeError,
      parts: ["y", "[3]"],
    },
    "adamw v": {
      setup: (be) => () =>
        ops.adamwInPlace(t(be, [3]), t(be, [3]), t(be, [3]), disposed(be, [3]), HP),
      cls: TypeError,
      parts: ["adamwInPlace", "v", "[3]"],
    },
    "layerNorm gamma": {
      setup: (be) => () => ops.layerNorm(t(be, [2, 3]), disposed(be, [3]), t(be, [3])),
      cls: TypeError,
      parts: ["gamma"],
    },
    "embedding ids": {
      setup: (be) => () => ops.embedding(t(be, [4, 2]), disposed(be, [3])),
      cls: TypeError,
      parts: ["ids", "[3]"],
    },
    "concatRows part": {
      setup: (be) => () => ops.concatRows([t(be, [1, 2]), disposed(be, [1, 2])]),
      cls: TypeError,
      parts: ["parts[1]", "[1, 2]"],
    },
    "view of disposed": {
      setup: (be) => {
        const x = t(be, [2, 3]);
        const v = x.reshape([6]);
        v.dispose();
        return () => ops.sum(v);
      },
      cls: TypeError,
      parts: ["sum", "[6]", "dispose"],
    },
  });
});

Deno.test("ops: non-tensor arguments throw TypeError", async () => {
  await checkCases({
    "add array": {
      setup: (be) => () => ops.add(t(be, [2]), [1, 2] as unknown as Tensor),
      cls: TypeError,
      parts: ["b", "Tensor", "array"],
    },
    "relu null": {
      setup: () => () => ops.relu(null as unknown as Tensor),
      cls: TypeError,
      parts: ["x", "null"],
    },
    "matmul opts": {
      setup: (be) => () => ops.matmul(t(be, [1, 1]), t(be, [1, 1]), 3 as unknown as object),
      cls: TypeError,
      parts: ["opts"],
    },
  });
});

Deno.test("ops: tensors from two backends throw TypeError naming both backends", () => {
  const be1 = new SpyBackend(), be2 = new SpyBackend();
  const a = t(be1, [2, 2]), b = t(be2, [2, 2]), v = t(be2, [2]);
  const cases: [string, () => unknown, string[]][] = [
    ["add", () => ops.add(a, b), ["a", "b"]],
    ["matmul", () => ops.matmul(a, b), ["a", "b"]],
    ["addBias", () => ops.addBias(a, v), ["x", "bias"]],
    ["axpyInPlace", () => ops.axpyInPlace(a, 1, b), ["y", "x"]],
    ["layerNorm", () => ops.layerNorm(a, t(be1, [2]), v), ["x", "beta"]],
    ["concatRows", () => ops.concatRows([a, a, b]), ["parts[0]", "parts[2]"]],
    ["adamwInPlace", () => ops.adamwInPlace(a, t(be1, [2, 2]), b, t(be1, [2, 2]), HP), [
      "param",
      "m",
    ]],
    [
      "embeddingBackwardInPlace",
      () => ops.embeddingBackwardInPlace(a, ids(be2, [0]), t(be1, [1, 2])),
      ["dTable", "ids"],
    ],
  ];
  for (const [op, call, names] of cases) {
    const live1 = be1.memory.liveBytes - be1.uploaded;
    const live2 = be2.memory.liveBytes - be2.uploaded;
    const err = assertThrowsWith(call, TypeError, [op, "different backends", ...names]);
    const labels = err.message.match(/cpu#\d+/g) ?? [];
    assert.equal(new Set(labels).size, 2, `two distinct backend labels in "${err.message}"`);
    assert.deepEqual(be1.calls, []);
    assert.deepEqual(be2.calls, []);
    assert.equal(be1.memory.liveBytes - be1.uploaded, live1);
    assert.equal(be2.memory.liveBytes - be2.uploaded, live2);
  }
});

Deno.test("ops: CPU and a second backend kind are refused together too", () => {
  if (backends.length < 2) return; // only one backend kind on this machine
  const [cpu, other] = backends;
  const a = t(cpu, [2]), b = t(other, [2]);
  assertThrowsWith(() => ops.add(a, b), TypeError, ["add", "cpu#", `${other.name}#`]);
  a.dispose();
  b.dispose();
});

Deno.test("fromData and zeros: bad data length or dimensions throw RangeError on every backend", () => {
  for (const be of backends) {
    const live = be.memory.liveBytes;
    assertThrowsWith(() => be.fromData(new Float32Array(5), [2, 3]), RangeError, [
      "length 5",
      "[2, 3]",
      "6 elements",
    ]);
    assertThrowsWith(() => be.fromData(new Float32Array(7), [7, 0]), RangeError, [
      "length 7",
      "[7, 0]",
      "0 elements",
    ]);
    assertThrowsWith(() => be.fromData(new Float32Array(3), [2, 1.5]), RangeError, [
      "non-negative integers",
      "[2, 1.5]",
    ]);
    assertThrowsWith(() => be.fromData(new Float32Array(3), [-1, -3]), RangeError, ["[-1, -3]"]);
    assertThrowsWith(() => be.fromData(new Float32Array(3), [NaN]), RangeError, ["[NaN]"]);
    assertThrowsWith(() => be.fromData(new Float32Array(3), [Infinity]), RangeError, [
      "[Infinity]",
    ]);
    assertThrowsWith(() => be.fromData([1, 2] as unknown as Float32Array, [2]), TypeError, [
      "Float32Array",
      "Array",
    ]);
    assertThrowsWith(
      () => be.fromData(new Float64Array(2) as unknown as Float32Array, [2]),
      TypeError,
      ["Float64Array"],
    );
    assertThrowsWith(() => be.fromData(new Float32Array(2), 2 as unknown as Shape), TypeError, [
      "shape",
      "2",
    ]);
    assertThrowsWith(() => be.zeros([3, -2]), RangeError, ["[3, -2]"]);
    assertThrowsWith(() => be.zeros([0.5]), RangeError, ["[0.5]"]);
    assert.equal(be.memory.liveBytes, live, `${be.name}: nothing allocated`);
  }
});

Deno.test("Tensor: reshape to another size and toArray after dispose are refused", async () => {
  for (const be of backends) {
    const x = t(be, [2, 3]);
    assertThrowsWith(() => x.reshape([4, 2]), RangeError, ["[2, 3]", "[4, 2]", "6", "8"]);
    assertThrowsWith(() => x.reshape([-6]), RangeError, ["[-6]"]);
    x.dispose();
    assertThrowsWith(() => x.reshape([6]), TypeError, ["[2, 3]", "dispose"]);
    await assert.rejects(async () => await x.toArray(), TypeError);
    x.dispose(); // idempotent
  }
});

Deno.test("CPU: out-of-range ids and targets throw RangeError with the value, writing nothing", async () => {
  const be = new CpuBackend();
  const table = t(be, [5, 2]);
  assertThrowsWith(() => ops.embedding(table, ids(be, [0, 5])), RangeError, [
    "embedding",
    "position 1",
    "[0, 5)",
    "got 5",
  ]);
  assertThrowsWith(() => ops.embedding(table, ids(be, [-1])), RangeError, ["got -1"]);
  assertThrowsWith(() => ops.embedding(table, ids(be, [1.5])), RangeError, ["got 1.5"]);
  const dTable = t(be, [5, 2], 3);
  const before = await dTable.toArray();
  assertThrowsWith(
    () => ops.embeddingBackwardInPlace(dTable, ids(be, [0, 1, 2, 9]), t(be, [4, 2])),
    RangeError,
    ["position 3", "got 9"],
  );
  assert.deepEqual(await dTable.toArray(), before, "dTable unchanged");
  assertThrowsWith(() => ops.crossEntropy(t(be, [2, 3]), ids(be, [0, 3])), RangeError, [
    "target",
    "[0, 3)",
    "got 3",
  ]);
  assertThrowsWith(() => ops.crossEntropyBackward(t(be, [2, 3]), ids(be, [-2, 0]), 1), RangeError, [
    "got -2",
  ]);
});

Deno.test("ops: aliased in-place arguments are handled or refused", async () => {
  for (const be of backends) {
    const y = be.fromData(new Float32Array([1, 2, 3]), [3]);
    const live = be.memory.liveBytes;
    ops.axpyInPlace(y, 2, y);
    assert.deepEqual(await y.toArray(), new Float32Array([3, 6, 9]));
    const view = y.reshape([1, 3]);
    ops.axpyInPlace(view, -1, y.reshape([1, 3]));
    assert.deepEqual(await y.toArray(), new Float32Array([0, 0, 0]));
    assert.equal(be.memory.liveBytes, live, "the temporary copy was released");
    assertThrowsWith(() => ops.adamwInPlace(y, y, t(be, [3]), t(be, [3]), HP), RangeError, [
      "param and grad",
      "share storage",
    ]);
    const m = t(be, [3]);
    assertThrowsWith(() => ops.adamwInPlace(y, t(be, [3]), m, m.reshape([3]), HP), RangeError, [
      "m and v",
    ]);
    const d = t(be, [2, 1]);
    assertThrowsWith(() => ops.embeddingBackwardInPlace(d, ids(be, [0, 1]), d), RangeError, [
      "dTable",
      "share storage",
    ]);
  }
});

Deno.test("ops: valid edge cases are accepted (empty slices, 1-row, 2-D b shared by a batch)", async () => {
  for (const be of backends) {
    const x = t(be, [4, 3]);
    const empty = ops.sliceRows(x, 2, 2);
    assert.deepEqual(empty.shape, [0, 3]);
    assert.deepEqual(ops.concatRows([empty, x]).shape, [4, 3]);
    assert.deepEqual(ops.permute(t(be, []), []).shape, []);
    assert.deepEqual(ops.matmul(t(be, [2, 3, 4]), t(be, [5, 4]), { transB: true }).shape, [
      2,
      3,
      5,
    ]);
    assert.deepEqual(ops.matmul(t(be, [2, 4, 3]), t(be, [4, 5]), { transA: true }).shape, [
      2,
      3,
      5,
    ]);
    assert.deepEqual(
      ops.crossEntropy(t(be, [2, 3, 5]), ids(be, [0, 1, 2, 3, 4, 0], [2, 3])).loss.shape,
      [6],
    );
    assert.deepEqual(ops.embedding(t(be, [4, 2]), ids(be, [0, 1, 2, 3], [2, 2])).shape, [2, 2, 2]);
    assert.deepEqual((await ops.sum(x).toArray()).length, 1);
  }
});
