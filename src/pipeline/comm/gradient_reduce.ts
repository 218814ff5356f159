import { describeValue } from "../../text/describe.ts";
/**
 * Fixed-order gradient averaging for data parallelism: the D replicas of a
 * stage average their gradients so that every replica ends with the very
 * same bits, whatever order the replicas' buffers arrive in.
 *
 * A stage's gradients (one Float32Array per parameter, in the stage's
 * parameter order) are cut into buckets of at most a given byte size by
 * {@linkcode planBuckets}: the parameters laid end to end, cut every
 * `floor(bucketBytes / 4)` values, so a bucket may end inside a parameter
 * and the next one go on from there. Each bucket travels as one buffer
 * ({@linkcode packBucket}); {@linkcode BucketAverage} collects the D
 * replicas' buffers of a bucket in any order and averages them in replica
 * order: `(g_0 + g_1 + … + g_{D−1}) / D`, summed in float64 and rounded to
 * float32 once; {@linkcode unpackBucket} writes the average back.
 *
 * @module
 */

/** A run of one parameter's values inside a bucket: `[start, end)` of parameter `param`. */
export interface BucketSegment {
  /** Index of the parameter in the stage's parameter order. */
  readonly param: number;
  /** First value (element index, inclusive). */
  readonly start: number;
  /** End (element index, exclusive). */
  readonly end: number;
}

/** One bucket: its segments in order, and its size. */
export interface GradientBucket {
  /** Runs of parameter values, in parameter order then element order. */
  readonly segments: readonly BucketSegment[];
  /** Values in the bucket (the sum of the segments' lengths). */
  readonly length: number;
  /** `4 · length`. */
  readonly bytes: number;
}

/**
 * Cuts parameters of `sizes` values each (in order) into buckets of at most
 * `bucketBytes` bytes (f32 values, so `floor(bucketBytes / 4)` values): the
 * parameters laid end to end and cut every that many values. Every bucket
 * but the last is full; empty parameters appear in none. The plan depends
 * only on its arguments, so every replica makes the same one.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { planBuckets } from "./gradient_reduce.ts";
 * const plan = planBuckets([3, 5, 2], 16); // 4 values a bucket
 * assert.deepEqual(plan.map((b) => b.segments.map((s) => `${s.param}:${s.start}-${s.end}`)), [
 *   ["0:0-3", "1:0-1"],
 *   ["1:1-5"],
 *   ["2:0-2"],
 * ]);
 * assert.deepEqual(plan.map((b) => b.bytes), [16, 16, 8]);
 * ```
 */
export function planBuckets(sizes: readonly number[], bucketBytes: number): GradientBucket[] {
  if (!Array.isArray(sizes)) {
    throw new TypeError(`sizes must be an array of value counts, got ${typeof sizes}`);
  }
  sizes.forEach((n, i) => {
    if (!Number.isInteger(n) || n < 0) {
      throw new RangeError(`sizes[${i}] must be a non-negative integer, got ${describeValue(n)}`);
    }
  });
  if (!Number.isInteger(bucketBytes) || bucketBytes < 4) {
    throw new RangeError(
      `bucketBytes must be an integer >= 4 (one f32), got ${describeValue(bucketBytes)}`,
    );
  }
  const cap = Math.floor(bucketBytes / 4);
  const out: GradientBucket[] = [];
  let segments: BucketSegment[] = [];
  let length = 0;
  const close = () => {
    if (length > 0) out.push({ segments, length, bytes: 4 * length });
    segments = [];
    length = 0;
  };
  sizes.forEach((n, param) => {
    let start = 0;
    while (start < n) {
      const take = Math.min(n - start, cap - length);
      segments.push({ param, start, end: start + take });
      start += take;
      length += take;
      if (length === cap) close();
    }
  });
  close();
  return out;
}

function checkGrads(bucket: GradientBucket, grads: readonly Float32Array[]): void {
  if (!Array.isArray(grads)) {
    throw new TypeError(`grads must be an array of Float32Array, got ${typeof grads}`);
  }
  for (const s of bucket.segments) {
    const g = grads[s.param];
    if (!(g instanceof Float32Array) || g.length < s.end) {
      throw new RangeError(
        `grads[${s.param}] must be a Float32Array of at least ${s.end} values, got ${
          g instanceof Float32Array ? `${g.length}` : typeof g
        }`,
      );
    }
  }
}

/**
 * One replica's values of `bucket`, gathered from its parameters'
 * gradients `grads` into one buffer, in the bucket's order: a new one, or
 * `into` (a buffer of the bucket's length to reuse).
 *
 * @param bucket The bucket, from {@linkcode planBuckets}.
 * @param grads The replica's gradients, one array per parameter.
 * @param into A buffer of `bucket.length` values to write into, instead of a new one.
 * @returns The packed values (`into` when given).
 * @throws {TypeError} When `grads` is not an array.
 * @throws {RangeError} When a gradient is too short, or `into` is not a Float32Array of the bucket's length.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { packBucket, planBuckets } from "./gradient_reduce.ts";
 * const [first] = planBuckets([2, 2], 12); // 3 values a bucket
 * const buf = packBucket(first, [new Float32Array([1, 2]), new Float32Array([3, 4])]);
 * assert.deepEqual([...buf], [1, 2, 3]);
 * const again = packBucket(first, [new Float32Array([5, 6]), new Float32Array([7, 8])], buf);
 * assert.equal(again, buf);
 * assert.deepEqual([...buf], [5, 6, 7]);
 * ```
 */
export function packBucket(
  bucket: GradientBucket,
  grads: readonly Float32Array[],
  into?: Float32Array,
): Float32Array {
  checkGrads(bucket, grads);
  if (into !== undefined && (!(into instanceof Float32Array) || into.length !== bucket.length)) {
    throw new RangeError(
      `into must be a Float32Array of the bucket's ${bucket.length} values, got ${
        into instanceof Float32Array ? `${into.length}` : typeof into
      }`,
    );
  }
  const out = into ?? new Float32Array(bucket.length);
  let at = 0;
  for (const s of bucket.segments) {
    out.set(grads[s.param].subarray(s.start, s.end), at);
    at += s.end - s.start;
  }
  return out;
}

/**
 * Writes a bucket's `values` (say, the average) back into the parameters'
 * gradients `grads`, in place; the inverse of {@linkcode packBucket}.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { planBuckets, unpackBucket } from "./gradient_reduce.ts";
 * const [, second] = planBuckets([2, 2], 12); // the last value of parameter 1
 * const grads = [new Float32Array(2), new Float32Array(2)];
 * unpackBucket(second, new Float32Array([9]), grads);
 * assert.deepEqual([...grads[1]], [0, 9]);
 * ```
 */
export function unpackBucket(
  bucket: GradientBucket,
  values: Float32Array,
  grads: readonly Float32Array[],
): void {
  if (!(values instanceof Float32Array) || values.length !== bucket.length) {
    throw new RangeError(
      `values must be a Float32Array of the bucket's ${bucket.length} values, got ${
        values instanceof Float32Array ? `${values.length}` : typeof values
      }`,
    );
  }
  checkGrads(bucket, grads);
  let at = 0;
  for (const s of bucket.segments) {
    grads[s.param].set(values.subarray(at, at + s.end - s.start), s.start);
    at += s.end - s.start;
  }
}

/**
 * The average of D replicas' buffers of one bucket, taken in replica order
 * whatever order they arrive in: `add(replica, values)` in any order, and
 * once all D are in, `result()` is `(v_0 + v_1 + … + v_{D−1}) / D` per
 * value, summed in float64 in replica order and rounded to float32 once.
 * Every replica that holds the same D buffers gets the same bits.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { BucketAverage } from "./gradient_reduce.ts";
 * const avg = new BucketAverage(3, 2);
 * assert.equal(avg.add(2, new Float32Array([5, 0])), false);
 * avg.add(0, new Float32Array([1, 1]));
 * assert.equal(avg.add(1, new Float32Array([3, 2])), true); // all 3 are in
 * assert.deepEqual([...avg.result()], [3, 1]);
 * ```
 */
export class BucketAverage {
  /** Replicas D. */
  readonly replicas: number;
  /** Values per buffer. */
  readonly length: number;
  #parts: (Float32Array | undefined)[];
  #count = 0;

  /** An empty average of `replicas` buffers of `length` values. */
  constructor(replicas: number, length: number) {
    if (!Number.isInteger(replicas) || replicas < 1) {
      throw new RangeError(`replicas must be a positive integer, got ${describeValue(replicas)}`);
    }
    if (!Number.isInteger(length) || length < 0) {
      throw new RangeError(`length must be a non-negative integer, got ${describeValue(length)}`);
    }
    this.replicas = replicas;
    this.length = length;
    this.#parts = new Array(replicas).fill(undefined);
  }

  /** Whether all D buffers are in. */
  get complete(): boolean {
    return this.#count === this.replicas;
  }

  /**
   * Takes replica `replica`'s buffer (kept, not copied: leave it unchanged
   * until `result()`); returns whether all D are now in. Refuses a replica
   * out of range, a second buffer of one replica and a wrong length.
   */
  add(replica: number, values: Float32Array): boolean {
    if (!Number.isInteger(replica) || replica < 0 || replica >= this.replicas) {
      throw new RangeError(
        `replica must be an integer in [0, ${this.replicas}), got ${describeValue(replica)}`,
      );
    }
    if (!(values instanceof Float32Array) || values.length !== this.length) {
      throw new RangeError(
        `replica ${replica}'s buffer must be a Float32Array of ${this.length} values, got ${
          values instanceof Float32Array ? `${values.length}` : typeof values
        }`,
      );
    }
    if (this.#parts[replica] !== undefined) {
      throw new RangeError(`replica ${replica}'s buffer was already added`);
    }
    this.#parts[replica] = values;
    this.#count++;
    return this.complete;
  }

  /** The average in replica order; throws naming the missing replicas before all are in. */
  result(): Float32Array {
    if (!this.complete) {
      const missing = this.#parts.flatMap((p, i) => p === undefined ? [i] : []);
      throw new RangeError(`the average needs every replica; missing [${missing.join(", ")}]`);
    }
    return averageInOrder(this.#parts as Float32Array[]);
  }
}

/**
 * `(parts[0] + parts[1] + … + parts[D−1]) / D` per value: summed in float64
 * in that order, divided by D, rounded to float32 once.
 */
function averageInOrder(parts: readonly Float32Array[]): Float32Array {
  const n = parts[0].length, d = parts.length;
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    let s = 0;
    for (let k = 0; k < d; k++) s += parts[k][i];
    out[i] = s / d;
  }
  return out;
}

/**
 * Averages D replicas' gradients of one stage bucket by bucket:
 * `replicas[k]` holds replica k's gradients, one Float32Array per parameter
 * (the same sizes on every replica). Returns the averaged gradients (new
 * arrays, the same for every replica) and leaves the inputs unchanged. What
 * a replica computes from the D buffers of each bucket, with no transport.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { averageGradients } from "./gradient_reduce.ts";
 * const avg = averageGradients([
 *   [new Float32Array([1, 2]), new Float32Array([0])],
 *   [new Float32Array([3, 6]), new Float32Array([1])],
 * ], 4);
 * assert.deepEqual(avg.map((g) => [...g]), [[2, 4], [0.5]]);
 * ```
 */
export function averageGradients(
  replicas: readonly (readonly Float32Array[])[],
  bucketBytes: number,
): Float32Array[] {
  if (!Array.isArray(replicas) || replicas.length === 0) {
    throw new RangeError(`replicas must be a non-empty array of gradient lists`);
  }
  const first = replicas[0];
  if (!Array.isArray(first)) throw new TypeError(`replicas[0] must be an array of Float32Array`);
  const sizes = first.map((g, i) => {
    if (!(g instanceof Float32Array)) {
      throw new TypeError(`replicas[0][${i}] must be a Float32Array, got ${typeof g}`);
    }
    return g.length;
  });
  replicas.forEach((grads, k) => {
    if (!Array.isArray(grads) || grads.length !== sizes.length) {
      throw new RangeError(
        `replicas[${k}] must hold ${sizes.length} gradients like replicas[0], got ${
          Array.isArray(grads) ? grads.length : typeof grads
        }`,
      );
    }
    grads.forEach((g, i) => {
      if (!(g instanceof Float32Array) || g.length !== sizes[i]) {
        throw new RangeError(
          `replicas[${k}][${i}] must be a Float32Array of ${
            sizes[i]
          } values like replicas[0][${i}]`,
        );
      }
    });
  });
  const plan = planBuckets(sizes, bucketBytes);
  const out = sizes.map((n) => new Float32Array(n));
  for (const bucket of plan) {
    const avg = new BucketAverage(replicas.length, bucket.length);
    replicas.forEach((grads, k) => avg.add(k, packBucket(bucket, grads)));
    unpackBucket(bucket, avg.result(), out);
  }
  return out;
}
