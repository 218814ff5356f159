/**
 * Exact min-max partition of a sequence into contiguous non-empty stages.
 *
 * Two suffix dynamic programmes over the same segment sums:
 * 1. the smallest achievable bottleneck B* (largest stage cost);
 * 2. among partitions whose stages all cost ≤ B*, the one with the smallest
 *    sum of squared stage costs, then the smallest sum of squared layer
 *    counts, then the lexicographically smallest boundaries.
 *
 * The tie-breaks cannot be folded into pass 1: (max, Σcost²) is not a
 * monotone objective under concatenation, so a suffix that is optimal for
 * the pair can stop being optimal once a prefix stage raises the max.
 *
 * Segment sums are always accumulated left to right from the stage start,
 * exactly as `segmentCost` does, so the bottleneck found here equals the
 * reported stage cost bit for bit.
 *
 * @module
 */

/** Sum of `costs[start..end)`, accumulated left to right. */
export function segmentCost(costs: readonly number[], start: number, end: number): number {
  let s = 0;
  for (let i = start; i < end; i++) s += costs[i];
  return s;
}

/**
 * Boundaries `[0, b1, …, n]` of the optimal partition of `costs` into `k`
 * non-empty stages. Requires 1 ≤ k ≤ costs.length and valid costs (the
 * caller validates). Time O(k·n²) worst case, pruned where a segment alone
 * already exceeds the best bottleneck; memory O(k·n).
 */
export function minMaxPartition(costs: readonly number[], k: number): number[] {
  const n = costs.length;
  const w = n + 1;
  // best[c * w + i]: min bottleneck of [i, n) cut into c stages.
  const best = new Float64Array((k + 1) * w).fill(Infinity);
  for (let i = 0; i < n; i++) best[w + i] = segmentCost(costs, i, n);
  for (let c = 2; c <= k; c++) {
    const row = c * w;
    const sub = (c - 1) * w;
    for (let i = 0; i <= n - c; i++) {
      let b = Infinity;
      let seg = 0;
      for (let j = i + 1; j <= n - c + 1; j++) {
        seg += costs[j - 1];
        // Segments only grow with j (costs are non-negative): no later j can do better.
        if (seg >= b) break;
        const cand = Math.max(seg, best[sub + j]);
        if (cand < b) b = cand;
      }
      best[row + i] = b;
    }
  }
  const limit = best[k * w];

  // sq/len[c * w + i]: tie-break objectives of the best valid partition of [i, n).
  const sq = new Float64Array((k + 1) * w).fill(Infinity);
  const len = new Float64Array((k + 1) * w).fill(Infinity);
  const next = new Int32Array((k + 1) * w).fill(-1);
  for (let i = 0; i < n; i++) {
    const s = segmentCost(costs, i, n);
    if (s <= limit) {
      sq[w + i] = s * s;
      len[w + i] = (n - i) * (n - i);
      next[w + i] = n;
    }
  }
  for (let c = 2; c <= k; c++) {
    const row = c * w;
    const sub = (c - 1) * w;
    for (let i = 0; i <= n - c; i++) {
      let bestSq = Infinity;
      let bestLen = Infinity;
      let bestJ = -1;
      let seg = 0;
      for (let j = i + 1; j <= n - c + 1; j++) {
        seg += costs[j - 1];
        if (seg > limit) break;
        const rest = sq[sub + j];
        if (rest === Infinity) continue;
        const cs = seg * seg + rest;
        const cl = (j - i) * (j - i) + len[sub + j];
        // Strict improvement only, so the smallest j wins ties (lexicographic order).
        if (cs < bestSq || (cs === bestSq && cl < bestLen)) {
          bestSq = cs;
          bestLen = cl;
          bestJ = j;
        }
      }
      sq[row + i] = bestSq;
      len[row + i] = bestLen;
      next[row + i] = bestJ;
    }
  }

  const boundaries = [0];
  let i = 0;
  for (let c = k; c >= 1; c--) {
    i = next[c * w + i];
    boundaries.push(i);
  }
  return boundaries;
}
