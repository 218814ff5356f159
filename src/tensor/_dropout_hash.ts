/**
 * The counter-based hash behind dropout masks, in u32 arithmetic that the
 * CPU backend (here) and `kernels/dropout.wgsl` compute bit for bit alike.
 *
 * An element is dropped when `hash(index, key) < threshold`, where
 * - `index` is the element's flat index in the FULL batch, mod 2^32: the
 *   micro-batch's first row (`rowOffset`) times the elements per row, plus
 *   the element's flat index in the micro-batch; so the mask depends on
 *   neither the micro-batch split nor the rank that runs it;
 * - `key = pcg(pcg(seed) ^ step)` mixes the layer's seed and the step;
 * - `hash(i, k) = pcg(pcg(i ^ k) + k)`, two rounds of the PCG output hash
 *   (Jarzynski & Olano, "Hash Functions for GPU Rendering", 2020): for a
 *   fixed key a bijection of the index, well mixed across keys;
 * - `threshold = floor(p · 2^32)`, so P(drop) = p to within 2^-32.
 *
 * @module
 */

/** One LCG step followed by the PCG RXS-M-XS output function: u32 → u32. */
export function pcgHash(v: number): number {
  const state = (Math.imul(v, 747796405) + 2891336453) >>> 0;
  const word = Math.imul((state >>> ((state >>> 28) + 4)) ^ state, 277803737) >>> 0;
  return ((word >>> 22) ^ word) >>> 0;
}

/** The per-(seed, step) key. */
export function dropoutKey(seed: number, step: number): number {
  return pcgHash((pcgHash(seed >>> 0) ^ step) >>> 0);
}

/** The hash of one global element index under `key`. */
export function dropoutHash(index: number, key: number): number {
  return pcgHash((pcgHash((index ^ key) >>> 0) + key) >>> 0);
}

/** Hashes below this are dropped: `floor(p · 2^32)`, for p in [0, 1). */
export function dropoutThreshold(p: number): number {
  return Math.min(0xffffffff, Math.floor(p * 4294967296));
}

/** Factor of kept elements, `1 / (1 - p)` rounded to f32 (both backends use it). */
export function dropoutScale(p: number): number {
  return Math.fround(1 / (1 - p));
}

/**
 * Global flat index of a micro-batch's first element, mod 2^32:
 * `rowOffset · rowSize`, where `rowSize` counts the elements per row
 * (product of all dimensions but the first).
 */
export function dropoutBase(rowOffset: number, rowSize: number): number {
  // Math.imul keeps the low 32 bits of the product, as u32 arithmetic would.
  return Math.imul(rowOffset % 4294967296, rowSize % 4294967296) >>> 0;
}
