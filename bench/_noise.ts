// One line on how steady a bench run was: the largest spread of a row's
// rounds (max − min of the rounds' medians) as a share of its median. On a
// shared machine a slow spell lands on some rounds and not others; a run
// whose rounds spread far says less than its medians suggest. Used by the
// bench scripts that print tables; not exported from the package.

/** One measured row: its label, median and spread of its rounds, ms. */
export interface SpreadRow {
  readonly label: string;
  readonly medianMs: number;
  readonly spreadMs: number;
}

/**
 * "Steady run: …" when every row's rounds spread by at most `limit` of its
 * median, else "Noisy run: …" naming the worst row, its spread and the
 * advice to measure again.
 *
 * @param rows The table's rows.
 * @param limit The largest spread, as a share of the median, of a steady run (default 0.15).
 * @returns One line.
 * @throws {RangeError} When `rows` is empty, or a median is not a positive finite number.
 */
export function noiseVerdict(rows: readonly SpreadRow[], limit = 0.15): string {
  if (rows.length === 0) throw new RangeError("noiseVerdict needs at least one row, got none");
  let worst = rows[0], share = -1;
  for (const r of rows) {
    if (!(r.medianMs > 0) || !Number.isFinite(r.medianMs)) {
      throw new RangeError(
        `row ${r.label}: the median must be a positive number, got ${r.medianMs}`,
      );
    }
    if (r.spreadMs / r.medianMs > share) [worst, share] = [r, r.spreadMs / r.medianMs];
  }
  const pct = (x: number) => `${(100 * x).toFixed(0)}%`;
  return share <= limit
    ? `Steady run: every row's rounds spread by at most ${
      pct(share)
    } of its median (${worst.label}).`
    : `Noisy run: the rounds of ${worst.label} spread by ${pct(share)} of their median ` +
      `(${worst.spreadMs.toFixed(1)} of ${worst.medianMs.toFixed(1)} ms; steady is at most ` +
      `${pct(limit)}): the machine's load changed during the run, so compare the rows with care ` +
      `and measure again when it is quiet.`;
}
