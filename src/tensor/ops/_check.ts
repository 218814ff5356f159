/**
 * Argument checks shared by the public ops (`src/tensor/ops/*.ts`): each op
 * validates here, once, before it calls its backend kernel, so every
 * backend refuses bad input with the same TypeError or RangeError.
 *
 * @module
 */

import type { Backend, Shape } from "../backend.ts";
import { broadcastPlan, broadcastShapes } from "../_broadcast.ts";
import { fmtShape } from "../_validate.ts";
import { Tensor, tensorStorage } from "../tensor.ts";

export { fmtShape };

const backendIds = new WeakMap<Backend, number>();
let nextBackendId = 1;

/** `cpu#1`: the backend's name plus an instance number, so two CPU backends differ. */
export function backendLabel(b: Backend): string {
  let id = backendIds.get(b);
  if (id === undefined) {
    id = nextBackendId++;
    backendIds.set(b, id);
  }
  return `${b.name}#${id}`;
}

/** A value for an error message: never the contents of an array, only its type and length. */
export function describe(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return `array of length ${v.length}`;
  if (ArrayBuffer.isView(v)) {
    const len = (v as unknown as { length?: number }).length ?? v.byteLength;
    return `${v.constructor.name} of length ${len}`;
  }
  if (typeof v === "object") return (v as object).constructor?.name ?? "object";
  return `${typeof v} ${String(v)}`;
}

/** Most dimensions a broadcast may keep after merging (the WebGPU kernels' limit). */
export const MAX_BROADCAST_AXES = 8;

/**
 * The broadcast shape of the named tensors (NumPy rules), or a RangeError
 * naming every shape and the first conflicting dimension.
 */
export function checkBroadcast(op: string, named: Record<string, Tensor>): Shape {
  const entries = Object.entries(named);
  const shapes = entries.map(([, t]) => t.shape);
  const r = broadcastShapes(shapes);
  // Written only for an error: this runs for every broadcasting op.
  const list = () => entries.map(([n, t]) => `${n} ${fmtShape(t.shape)}`).join(", ");
  if (!("shape" in r)) {
    throw new RangeError(
      `${op}: shapes ${list()} cannot be broadcast together: dimension ${r.axis} has extents ${
        r.extents.join(" vs ")
      } (each must be 1 or the same)`,
    );
  }
  const merged = broadcastPlan(r.shape, shapes).shape.length;
  if (merged > MAX_BROADCAST_AXES) {
    throw new RangeError(
      `${op}: shapes ${list()} broadcast over ${merged} separate axes; at most ${MAX_BROADCAST_AXES} are supported`,
    );
  }
  return r.shape;
}

/** Checks a shape argument (array of non-negative integers), naming only type and length when long. */
export function checkShapeArg(op: string, name: string, shape: unknown): Shape {
  if (!Array.isArray(shape)) {
    throw new TypeError(`${op}: ${name} must be an array of dimensions, got ${describe(shape)}`);
  }
  const bad = shape.findIndex((d) => !Number.isInteger(d) || d < 0);
  if (bad >= 0) {
    const what = shape.length <= 8 ? fmtShape(shape) : describe(shape);
    throw new RangeError(
      `${op}: ${name} must hold non-negative integers, got ${what} (entry ${bad} is ${
        describe(shape[bad])
      })`,
    );
  }
  return shape;
}

/** `backend` must be a Backend. */
export function checkBackend(op: string, backend: unknown): Backend {
  if (
    backend === null || typeof backend !== "object" ||
    typeof (backend as Backend).full !== "function"
  ) {
    throw new TypeError(`${op}: backend must be a Backend, got ${describe(backend)}`);
  }
  const be = backend as Backend;
  if (be.closed) throw new TypeError(`${op}: backend ${backendLabel(be)} ${CLOSED}`);
  return be;
}

const CLOSED = "was closed (its close() was called); create a new backend";

/** Throws the RangeError of an integer input outside [0, n) (ids, targets), if any. */
export function checkIndices(op: string, what: string, be: Backend, ids: Tensor, n: number): void {
  const bad = be.invalidIndex(ids, n);
  if (bad) {
    throw new RangeError(
      `${op}: ${what} at position ${bad.index} must be an integer in [0, ${n}), got ${bad.value}`,
    );
  }
}

export function checkTensor(op: string, name: string, t: unknown): Tensor {
  if (!(t instanceof Tensor)) {
    throw new TypeError(`${op}: ${name} must be a Tensor, got ${describe(t)}`);
  }
  if (t.disposed) {
    throw new TypeError(`${op}: ${name} (shape ${fmtShape(t.shape)}) was used after dispose`);
  }
  return t;
}

/** Checks every named tensor is alive and that all share one backend. */
export function checkTensors(op: string, named: Record<string, unknown>): Backend {
  // A for-in loop: called by every op, where Object.entries would allocate.
  let firstName = "", first: Tensor | null = null;
  for (const name in named) {
    const tt = checkTensor(op, name, named[name]);
    if (first === null) {
      firstName = name;
      first = tt;
    } else if (tt.backend !== first.backend) {
      throw new TypeError(
        `${op}: ${firstName} and ${name} are on different backends (${firstName} on ${
          backendLabel(first.backend)
        }, ${name} on ${backendLabel(tt.backend)}); copy data across with toArray() and fromData()`,
      );
    }
  }
  if (first === null) throw new TypeError(`${op}: no tensor to check`);
  if (first.backend.closed) {
    throw new TypeError(
      `${op}: ${firstName} is on ${backendLabel(first.backend)}, which ${CLOSED}`,
    );
  }
  return first.backend;
}

export function checkFinite(op: string, name: string, v: unknown): number {
  if (typeof v !== "number") {
    throw new TypeError(`${op}: ${name} must be a number, got ${describe(v)}`);
  }
  if (!Number.isFinite(v)) {
    throw new RangeError(`${op}: ${name} must be a finite number, got ${v}`);
  }
  return v;
}

export function checkBool(op: string, name: string, v: unknown): boolean {
  if (v === undefined) return false;
  if (typeof v !== "boolean") {
    throw new TypeError(`${op}: ${name} must be a boolean, got ${describe(v)}`);
  }
  return v;
}

export function sameShape(a: readonly number[], b: readonly number[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

export function checkSameShape(op: string, an: string, a: Tensor, bn: string, b: Tensor): void {
  if (!sameShape(a.shape, b.shape)) {
    throw new RangeError(
      `${op}: shapes differ: ${an} ${fmtShape(a.shape)} vs ${bn} ${fmtShape(b.shape)}`,
    );
  }
}

export function checkRank(op: string, name: string, t: Tensor, min: number): void {
  if (t.shape.length < min) {
    throw new RangeError(
      `${op}: ${name} must have at least ${min} dimension${min === 1 ? "" : "s"}, got shape ${
        fmtShape(t.shape)
      }`,
    );
  }
}

/** `v` must be 1-D of length `n` (a per-column vector such as a bias). */
export function checkColVector(
  op: string,
  name: string,
  v: Tensor,
  xName: string,
  x: Tensor,
): void {
  if (v.shape.length !== 1 || v.shape[0] !== x.cols) {
    throw new RangeError(
      `${op}: ${name} must have shape [${x.cols}] (the last dimension of ${xName} ${
        fmtShape(x.shape)
      }), got ${fmtShape(v.shape)}`,
    );
  }
}

/** `v` must hold one value per row of `x`. */
export function checkRowStat(op: string, name: string, v: Tensor, x: Tensor): void {
  if (v.size !== x.rows || v.shape.length !== 1) {
    throw new RangeError(
      `${op}: ${name} must have shape [${x.rows}] (one value per row of x ${
        fmtShape(x.shape)
      }), got ${fmtShape(v.shape)}`,
    );
  }
}

export function checkNonEmptyRows(op: string, name: string, x: Tensor): void {
  if (x.shape.length === 0 || x.cols === 0) {
    throw new RangeError(
      `${op}: ${name} must have a non-empty last dimension, got shape ${fmtShape(x.shape)}`,
    );
  }
}

/** Targets of a row-wise classification: shape `[rows]` or the logits' leading dims. */
export function checkTargets(
  op: string,
  logitsName: string,
  logits: Tensor,
  targets: Tensor,
): void {
  const lead = logits.shape.slice(0, -1);
  const rows = logits.rows;
  if (!(sameShape(targets.shape, [rows]) || sameShape(targets.shape, lead))) {
    throw new RangeError(
      `${op}: targets must have shape [${rows}] (one per row of ${logitsName} ${
        fmtShape(logits.shape)
      }), got ${fmtShape(targets.shape)}`,
    );
  }
}

export function aliases(a: Tensor, b: Tensor): boolean {
  return tensorStorage(a) === tensorStorage(b);
}
