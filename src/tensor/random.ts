/**
 * Seeded randomness: a small fast PRNG and random tensors, so that every
 * initialisation and every test is reproducible from a seed.
 *
 * @module
 */

import type { Backend, Shape } from "./backend.ts";
import { checkShape, shapeSize, type Tensor } from "./tensor.ts";
import { describeValue } from "../text/describe.ts";

/** splitmix32 step: spreads a seed's bits so nearby seeds give unrelated streams. */
function splitmix32(state: number): [number, number] {
  state = (state + 0x9e3779b9) | 0;
  let z = state;
  z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
  z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
  return [state, (z ^ (z >>> 16)) >>> 0];
}

/**
 * A seeded pseudo-random generator (xoshiro128**, 2^128 − 1 period), seeded
 * through splitmix32. The same seed gives the same stream on every platform.
 *
 * @example
 * ```ts
 * import { Rng } from "@conveyor/core";
 * const rng = new Rng(42);
 * const u = rng.next(); // uniform in [0, 1)
 * const z = rng.normal(); // standard normal
 * const k = rng.int(10); // integer in [0, 10)
 * console.log(u, z, k);
 * ```
 */
export class Rng {
  #s0: number;
  #s1: number;
  #s2: number;
  #s3: number;
  #spare: number | null = null;

  /** Creates a generator; `seed` must be a safe integer (negative allowed). */
  constructor(seed: number) {
    if (typeof seed !== "number" || !Number.isSafeInteger(seed)) {
      throw new RangeError(`Rng: seed must be a safe integer, got ${describeValue(seed)}`);
    }
    // Both 32-bit halves feed the state so seeds differing only above bit 32 differ.
    const lo = seed >>> 0;
    const hi = Math.floor(seed / 0x100000000) >>> 0;
    let st = lo ^ Math.imul(hi, 0x27d4eb2d);
    let out: number;
    [st, out] = splitmix32(st);
    this.#s0 = out;
    [st, out] = splitmix32(st ^ hi);
    this.#s1 = out;
    [st, out] = splitmix32(st);
    this.#s2 = out;
    [st, out] = splitmix32(st);
    this.#s3 = out;
    if ((this.#s0 | this.#s1 | this.#s2 | this.#s3) === 0) this.#s0 = 1;
  }

  /** Next raw 32-bit unsigned integer. */
  nextUint32(): number {
    const s0 = this.#s0, s1 = this.#s1, s2 = this.#s2, s3 = this.#s3;
    const r = Math.imul(rotl(Math.imul(s1, 5), 7), 9) >>> 0;
    const t = s1 << 9;
    let n2 = s2 ^ s0;
    let n3 = s3 ^ s1;
    const n1 = s1 ^ n2;
    const n0 = s0 ^ n3;
    n2 ^= t;
    n3 = rotl(n3, 11);
    this.#s0 = n0;
    this.#s1 = n1;
    this.#s2 = n2;
    this.#s3 = n3;
    return r;
  }

  /** Uniform number in [0, 1) with 32 random bits. */
  next(): number {
    return this.nextUint32() / 0x100000000;
  }

  /** Standard normal sample (Box–Muller; the second value is kept for the next call). */
  normal(): number {
    if (this.#spare !== null) {
      const z = this.#spare;
      this.#spare = null;
      return z;
    }
    // 1 - next() lies in (0, 1], so the log is finite.
    const u1 = 1 - this.next();
    const u2 = this.next();
    const r = Math.sqrt(-2 * Math.log(u1));
    const a = 2 * Math.PI * u2;
    this.#spare = r * Math.sin(a);
    return r * Math.cos(a);
  }

  /** Uniform integer in [0, n); `n` must be a positive integer at most 2^32. */
  int(n: number): number {
    if (!Number.isInteger(n) || n <= 0 || n > 0x100000000) {
      throw new RangeError(`Rng.int: n must be an integer in [1, 2^32], got ${n}`);
    }
    return Math.floor(this.next() * n);
  }

  /**
   * The generator's whole state as plain data (JSON-safe): the four 32-bit
   * words and the normal sample kept for the next `normal()` call. A
   * generator rebuilt with {@linkcode Rng.fromState} continues the same
   * stream, e.g. the batch order of a resumed training run.
   *
   * @example
   * ```ts
   * import { Rng } from "@conveyor/core";
   * const a = new Rng(3);
   * a.next();
   * const b = Rng.fromState(JSON.parse(JSON.stringify(a.state())));
   * console.log(a.next() === b.next()); // true
   * ```
   */
  state(): RngState {
    return {
      words: [this.#s0 >>> 0, this.#s1 >>> 0, this.#s2 >>> 0, this.#s3 >>> 0],
      spare: this.#spare,
    };
  }

  /**
   * A generator in the state {@linkcode Rng.state} returned. Throws a
   * TypeError naming the field unless `words` holds four integers in
   * [0, 2^32), not all zero, and `spare` is null or a finite number.
   *
   * @example
   * ```ts
   * import { Rng } from "@conveyor/core";
   * const r = Rng.fromState({ words: [1, 2, 3, 4], spare: null });
   * console.log(r.state().words); // [ 1, 2, 3, 4 ]
   * ```
   */
  static fromState(state: RngState): Rng {
    if (state === null || typeof state !== "object") {
      throw new TypeError(`Rng.fromState: state must be an object { words, spare }, got ${state}`);
    }
    const w = state.words;
    if (
      !Array.isArray(w) || w.length !== 4 ||
      !w.every((x) => Number.isInteger(x) && x >= 0 && x < 0x100000000)
    ) {
      throw new TypeError(
        `Rng.fromState: words must be 4 integers in [0, 2^32), got ${JSON.stringify(w)}`,
      );
    }
    if ((w[0] | w[1] | w[2] | w[3]) === 0) {
      throw new TypeError("Rng.fromState: words must not all be zero (xoshiro's one dead state)");
    }
    const spare = state.spare ?? null;
    if (spare !== null && (typeof spare !== "number" || !Number.isFinite(spare))) {
      throw new TypeError(`Rng.fromState: spare must be null or a finite number, got ${spare}`);
    }
    const r = new Rng(0);
    r.#s0 = w[0] | 0;
    r.#s1 = w[1] | 0;
    r.#s2 = w[2] | 0;
    r.#s3 = w[3] | 0;
    r.#spare = spare;
    return r;
  }
}

/** What {@linkcode Rng.state} returns: plain data, safe to store as JSON. */
export interface RngState {
  /** xoshiro128**'s four 32-bit state words, as unsigned integers. */
  readonly words: readonly number[];
  /** The second Box–Muller sample kept for the next `normal()`, or null. */
  readonly spare: number | null;
}

function rotl(x: number, k: number): number {
  return (x << k) | (x >>> (32 - k));
}

let skipInit = 0;

/**
 * Runs `build` with {@linkcode randomTensor} giving zeros and drawing
 * nothing: for layers whose weights are loaded right after (a pipeline
 * rank's stages, a checkpoint's model), where drawing a large model's
 * initial weights would cost seconds (about 0.1 s per million values).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { CpuBackend, Rng } from "@conveyor/core";
 * import { randomTensor, withoutRandomInit } from "./random.ts";
 * const be = new CpuBackend();
 * const rng = new Rng(1);
 * const w = withoutRandomInit(() => randomTensor(be, [2], rng));
 * assert.deepEqual([...await w.toArray()], [0, 0]);
 * assert.deepEqual(rng.state(), new Rng(1).state()); // nothing drawn
 * ```
 */
export function withoutRandomInit<T>(build: () => T): T {
  skipInit++;
  try {
    return build();
  } finally {
    skipInit--;
  }
}

/**
 * A tensor of normal samples times `scale`, drawn from `rng` in row-major
 * order (so the same seed gives the same tensor on every backend).
 *
 * @example
 * ```ts
 * import { CpuBackend, Rng } from "@conveyor/core";
 * import { randomTensor } from "@conveyor/core/tensor";
 * const be = new CpuBackend();
 * const w = randomTensor(be, [3, 4], new Rng(1), 0.02);
 * console.log(w.shape); // [3, 4]
 * w.dispose();
 * ```
 */
export function randomTensor(backend: Backend, shape: Shape, rng: Rng, scale = 1): Tensor {
  checkShape(shape, "randomTensor: shape");
  if (!(rng instanceof Rng)) {
    throw new TypeError(`randomTensor: rng must be an Rng, got ${describeValue(rng)}`);
  }
  if (typeof scale !== "number" || !Number.isFinite(scale)) {
    throw new RangeError(
      `randomTensor: scale must be a finite number, got ${describeValue(scale)}`,
    );
  }
  if (skipInit > 0) return backend.zeros(shape);
  const data = new Float32Array(shapeSize(shape));
  for (let i = 0; i < data.length; i++) data[i] = rng.normal() * scale;
  return backend.fromData(data, shape);
}
