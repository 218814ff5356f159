/**
 * The elementwise op families, shared by both backends: each op's name, its
 * code in the family's WGSL kernel (`const OP_NAME: u32 = code;`, checked
 * against the WGSL when the kernels load) and its CPU reference formula.
 *
 * Adding an elementwise op touches three files:
 * 1. `kernels/unary.wgsl` (or `unary_backward.wgsl`, `binary.wgsl`): the
 *    `OP_NAME` constant and the formula;
 * 2. this file: the name in the union, the code and the CPU formula;
 * 3. `src/tensor/ops/*.ts`: the public op (checks, JSDoc, example).
 * Neither backend class changes: both run every entry of these tables.
 *
 * NaN semantics (both backends, every op here): a NaN operand gives a NaN
 * result. The backends apply that rule around the formulas (the WGSL tests
 * NaN by its bits, since `max`, `clamp` and compilers that assume no NaN
 * may drop one), so a formula need not handle NaN itself.
 *
 * @module
 */

const GELU_C = Math.sqrt(2 / Math.PI);
const GELU_A = 0.044715;

/**
 * A unary elementwise op: `y = f(x)` (`Backend.unary`).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend } from "@conveyor/core";
 * import { type UnaryOp } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const op: UnaryOp = "exp";
 * assert.deepEqual([...await be.unary(op, be.zeros([2])).toArray()], [1, 1]);
 * ```
 */
export type UnaryOp = "relu" | "gelu" | "tanh" | "sigmoid" | "silu" | "exp" | "log";

/**
 * The input gradient of a unary op, `dy · f'(·)`, computed from `v`: the
 * forward input `x` for relu, gelu and silu, the forward output `y` for
 * tanh and sigmoid (`Backend.unaryBackward`).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend } from "@conveyor/core";
 * import { type UnaryGradOp } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const op: UnaryGradOp = "sigmoid"; // from y: dy · y · (1 − y)
 * const y = be.fromData(new Float32Array([0.5]), [1]);
 * assert.deepEqual([...await be.unaryBackward(op, y, be.fromData(new Float32Array([4]), [1])).toArray()], [1]);
 * ```
 */
export type UnaryGradOp = "relu" | "gelu" | "tanh" | "sigmoid" | "silu";

/**
 * A binary elementwise op with broadcasting: `out = a (op) b`
 * (`Backend.binary`, which takes the broadcast output shape).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend } from "@conveyor/core";
 * import { type BinaryOp } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const op: BinaryOp = "maximum";
 * const a = be.fromData(new Float32Array([1, 5]), [2]), b = be.fromData(new Float32Array([3]), [1]);
 * assert.deepEqual([...await be.binary(op, a, b, [2]).toArray()], [3, 5]);
 * ```
 */
export type BinaryOp = "add" | "sub" | "mul" | "div" | "maximum";

interface UnaryDef {
  readonly code: number;
  readonly cpu: (x: number) => number;
}

interface UnaryGradDef {
  readonly code: number;
  /** `dy · f'` from `v` (x or y, see {@linkcode UnaryGradOp}) and `g` = dy. */
  readonly cpu: (v: number, g: number) => number;
}

interface BinaryDef {
  readonly code: number;
  readonly cpu: (a: number, b: number) => number;
}

/** Logistic sigmoid, stable for large |x|: `e / (1 + e)` or `1 / (1 + e)`, `e = exp(-|x|)`. */
export function sigmoid(x: number): number {
  const e = Math.exp(-Math.abs(x));
  return (x >= 0 ? 1 : e) / (1 + e);
}

/** Unary ops (`kernels/unary.wgsl`). */
export const UNARY_OPS: Readonly<Record<UnaryOp, UnaryDef>> = {
  relu: { code: 0, cpu: (x) => (x > 0 ? x : 0) },
  gelu: { code: 1, cpu: (x) => 0.5 * x * (1 + Math.tanh(GELU_C * (x + GELU_A * x * x * x))) },
  tanh: { code: 2, cpu: Math.tanh },
  sigmoid: { code: 3, cpu: sigmoid },
  silu: { code: 4, cpu: (x) => x * sigmoid(x) },
  exp: { code: 5, cpu: Math.exp },
  log: { code: 6, cpu: Math.log },
};

/** Unary input gradients (`kernels/unary_backward.wgsl`). */
export const UNARY_GRAD_OPS: Readonly<Record<UnaryGradOp, UnaryGradDef>> = {
  relu: { code: 0, cpu: (x, g) => (x > 0 ? g : 0) },
  gelu: {
    code: 1,
    cpu: (x, g) => {
      const t = Math.tanh(GELU_C * (x + GELU_A * x * x * x));
      const du = GELU_C * (1 + 3 * GELU_A * x * x);
      return g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * du);
    },
  },
  tanh: { code: 2, cpu: (y, g) => g * (1 - y * y) },
  sigmoid: { code: 3, cpu: (y, g) => g * y * (1 - y) },
  silu: {
    code: 4,
    cpu: (x, g) => {
      const s = sigmoid(x);
      return g * s * (1 + x * (1 - s));
    },
  },
};

/**
 * Binary ops (`kernels/binary.wgsl`). `maximum` is NaN when either operand
 * is NaN and +0 for (0, −0), as `Math.max`.
 */
export const BINARY_OPS: Readonly<Record<BinaryOp, BinaryDef>> = {
  add: { code: 0, cpu: (a, b) => a + b },
  sub: { code: 1, cpu: (a, b) => a - b },
  mul: { code: 2, cpu: (a, b) => a * b },
  div: { code: 3, cpu: (a, b) => a / b },
  maximum: { code: 4, cpu: Math.max },
};

/** Name → WGSL code of a table, for the kernel loader's check. */
export function opCodes(table: Readonly<Record<string, { readonly code: number }>>): Record<
  string,
  number
> {
  return Object.fromEntries(Object.entries(table).map(([k, v]) => [k, v.code]));
}
