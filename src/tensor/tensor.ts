/**
 * The `Tensor` handle: a shape plus backend storage.
 *
 * A tensor is created by a backend (`backend.fromData`, `backend.zeros`) or
 * by an op from `ops.ts`. Its data stays on the backend until `toArray()` is
 * awaited, so many ops can be queued before one read-back.
 *
 * @module
 */

import type { Backend, Shape } from "./backend.ts";
import { track } from "./_scope.ts";
import { describeValue, formatShape } from "../text/describe.ts";

/** Storage shared by a tensor and its reshaped views; freed with the last. */
interface SharedStorage {
  readonly data: unknown;
  readonly bytes: number;
  refs: number;
}

/** Number of elements of a shape (1 for a scalar shape `[]`). */
export function shapeSize(shape: Shape): number {
  // Index loops here and below: called for every tensor, where an
  // iterator would be allocated per call.
  let n = 1;
  for (let i = 0; i < shape.length; i++) n *= shape[i];
  return n;
}

/** Throws a RangeError unless every dimension is a non-negative integer. */
export function checkShape(shape: Shape, what = "shape"): void {
  if (!Array.isArray(shape)) {
    throw new TypeError(`${what} must be an array of dimensions, got ${describeValue(shape)}`);
  }
  for (let i = 0; i < shape.length; i++) {
    const d = shape[i];
    if (!Number.isInteger(d) || d < 0) {
      throw new RangeError(
        `${what} must hold non-negative integers, got ${formatShape(shape)}`,
      );
    }
  }
}

/** Proof that a tensor is built by this module (see {@linkcode createTensor}). */
const BUILD: unique symbol = Symbol("Tensor.build");

let build: (backend: Backend, shape: Shape, storage: SharedStorage) => Tensor;
let shared: (t: Tensor) => SharedStorage;

/**
 * Wraps backend storage (a `Float32Array`, a `GPUBuffer`, …) of `bytes`
 * bytes in a new tensor of `shape`. For backends only: the package does not
 * export it; users create tensors through a backend (`fromData`, `zeros`,
 * `full`), an op or `randomTensor`.
 */
export function createTensor(
  backend: Backend,
  shape: Shape,
  storage: unknown,
  bytes: number,
): Tensor {
  return build(backend, shape, { data: storage, bytes, refs: 1 });
}

/**
 * The backend storage behind `t` (shared with its reshaped views). For
 * backends and ops only; not exported by the package. Throws a TypeError
 * after `dispose()`.
 */
export function tensorStorage(t: Tensor): unknown {
  return shared(t).data;
}

/**
 * An f32 tensor living on one backend.
 *
 * @example
 * ```ts
 * import { createBackend } from "@conveyor/core/tensor";
 * const be = await createBackend("cpu");
 * const t = be.fromData(new Float32Array([1, 2, 3, 4]), [2, 2]);
 * console.log(t.shape, await t.toArray());
 * t.dispose();
 * ```
 */
export class Tensor {
  /** Dimensions, outermost first. */
  readonly shape: Shape;
  /** Number of elements. */
  readonly size: number;
  /** The backend that owns the storage. */
  readonly backend: Backend;
  #storage: SharedStorage | null;

  static {
    build = (backend, shape, storage) => new Tensor(BUILD, backend, shape, storage);
    shared = (t) => t.#shared();
  }

  /**
   * Not for users: tensors come from a backend (`fromData`, `zeros`,
   * `full`), an op or `randomTensor`; a direct call throws a TypeError.
   *
   * @ignore
   */
  private constructor(
    proof: typeof BUILD,
    backend: Backend,
    shape: Shape,
    storage: SharedStorage,
  ) {
    if (proof !== BUILD) {
      throw new TypeError(
        "Tensor: the constructor is internal; create tensors with backend.fromData, " +
          "backend.zeros, backend.full, an op or randomTensor",
      );
    }
    this.backend = backend;
    this.shape = Object.freeze(shape.slice());
    this.size = shapeSize(shape);
    this.#storage = storage;
    // Inside tidy(): disposed when the scope ends, unless returned or kept.
    track(this);
  }

  /** True once `dispose()` has been called on this handle. */
  get disposed(): boolean {
    return this.#storage === null;
  }

  /** Number of rows: product of all dimensions but the last (1 for 1-D). */
  get rows(): number {
    // A product, not size / cols: a shape such as [3, 0] has 3 rows.
    let n = 1;
    for (let i = 0; i < this.shape.length - 1; i++) n *= this.shape[i];
    return n;
  }

  /** Size of the last dimension (1 for a scalar). */
  get cols(): number {
    return this.shape.length === 0 ? 1 : this.shape[this.shape.length - 1];
  }

  /** Bytes of the underlying storage. */
  get bytes(): number {
    return this.size * 4;
  }

  /**
   * A view with another shape of the same size, sharing storage. The storage
   * is released when every view has been disposed.
   */
  reshape(shape: Shape): Tensor {
    checkShape(shape);
    const n = shapeSize(shape);
    if (n !== this.size) {
      throw new RangeError(
        `cannot reshape ${formatShape(this.shape)} (${this.size} elements) to [${
          shape.join(", ")
        }] (${n} elements)`,
      );
    }
    const storage = this.#shared();
    const view = new Tensor(BUILD, this.backend, shape, storage);
    storage.refs++;
    return view;
  }

  /** Copies the data out; waits for pending work on the backend. */
  toArray(): Promise<Float32Array> {
    this.#shared();
    return this.backend.read(this);
  }

  /**
   * Copies the data out within this call where the backend can (the CPU
   * backend always; WebGPU where its read-backs complete when issued, which
   * blocks until the device has done the work queued before); null where it
   * can only come back asynchronously (`toArray()`).
   */
  tryToArraySync(): Float32Array | null {
    this.#shared();
    return this.backend.readSync?.(this) ?? null;
  }

  /**
   * Releases this handle when a `using` declaration goes out of scope
   * (same as `dispose()`).
   *
   * @example
   * ```ts
   * import assert from "node:assert/strict";
   * import { CpuBackend } from "@conveyor/core";
   * import { ops } from "@conveyor/core/tensor";
   * const be = new CpuBackend();
   * {
   *   using x = be.zeros([1000]);
   *   using y = ops.scale(x, 2);
   *   assert.equal(be.memory.liveBytes, 8000);
   * }
   * assert.equal(be.memory.liveBytes, 0); // both released at the block's end
   * ```
   */
  [Symbol.dispose](): void {
    this.dispose();
  }

  /** Releases this handle; storage is freed once no view uses it. Idempotent. */
  dispose(): void {
    const s = this.#storage;
    if (s === null) return;
    this.#storage = null;
    s.refs--;
    if (s.refs === 0) this.backend.release(s.data, s.bytes);
  }

  #shared(): SharedStorage {
    if (this.#storage === null) {
      throw new TypeError(`tensor of shape ${formatShape(this.shape)} used after dispose`);
    }
    return this.#storage;
  }
}
