/**
 * Layer counts of a uniform partition with optional lighter ends.
 *
 * @module
 */

/**
 * Indices `pool[⌊(2j+1)·s/(2r)⌋]`, j = 0 … r−1: r of the s entries of `pool`,
 * evenly spaced and centred (s > r, so the picks are distinct).
 */
function spread(pool: readonly number[], r: number): number[] {
  const s = pool.length;
  const out: number[] = [];
  for (let j = 0; j < r; j++) out.push(pool[Math.floor(((2 * j + 1) * s) / (2 * r))]);
  return out;
}

/**
 * Layer count of each of `k` stages for `n` layers (1 ≤ k ≤ n), where stage
 * 0 is counted as already holding `first` extra layers and stage k−1 `last`
 * extra layers (non-negative integers; the embedding and the head/loss).
 *
 * Rule: every stage gets at least one layer; the counted loads
 * (count + offset) are levelled: the largest level L with
 * Σ max(1, L − offset_i) ≤ n is filled, and the r layers left over go one
 * each to stages that can still grow at level L + 1, spread evenly over the
 * stages without an offset first (so the ends stay lighter), then to the
 * offset ends, smaller offset first, stage 0 before stage k−1 on a tie.
 */
export function uniformCounts(n: number, k: number, first: number, last: number): number[] {
  if (k === 1) return [n];
  const off = new Array<number>(k).fill(0);
  off[0] += first;
  off[k - 1] += last;
  const need = (level: number): number => {
    let s = 0;
    for (const o of off) s += Math.max(1, level - o);
    return s;
  };
  // need(1) = k ≤ n; need(n + max offset) > n when k ≥ 2.
  let lo = 1;
  let hi = n + Math.max(first, last);
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (need(mid) <= n) lo = mid;
    else hi = mid - 1;
  }
  const level = lo;
  const counts = off.map((o) => Math.max(1, level - o));
  const r = n - counts.reduce((a, b) => a + b, 0);
  if (r === 0) return counts;
  const growable: number[] = [];
  for (let i = 0; i < k; i++) if (level - off[i] >= 1) growable.push(i);
  const interior = growable.filter((i) => off[i] === 0);
  const ends = growable.filter((i) => off[i] > 0).sort((a, b) => off[a] - off[b] || a - b);
  const picks = r <= interior.length
    ? spread(interior, r)
    : [...interior, ...ends.slice(0, r - interior.length)];
  for (const i of picks) counts[i]++;
  return counts;
}
