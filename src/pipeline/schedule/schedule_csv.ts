/**
 * CSV import and export of schedules in PyTorch's compute-only format
 * (`torch.distributed.pipelining`'s `_dump_csv` / `_load_csv(format="compute_only")`):
 * one row per rank, one action per cell in text form (`2F0`, `1I3`), an empty
 * cell for an idle slot.
 *
 * @module
 */

import { type Action, formatAction, parseAction } from "./action.ts";

const KINDS = new Set(["F", "B", "I", "W"]);

/**
 * Writes per-rank action lists as CSV: row r is rank r's actions in
 * execution order; a `null` entry is an idle slot and becomes an empty cell.
 * Every row ends with `\n`.
 *
 * @example
 * ```ts
 * import { scheduleToCsv } from "@conveyor/core/analysis";
 * const csv = scheduleToCsv([
 *   [{ kind: "F", stage: 0, microBatch: 0 }, { kind: "B", stage: 0, microBatch: 0 }],
 *   [null, { kind: "F", stage: 1, microBatch: 0 }],
 * ]);
 * console.log(JSON.stringify(csv)); // "0F0,0B0\n,1F0\n"
 * ```
 */
export function scheduleToCsv(rows: readonly (readonly (Action | null)[])[]): string {
  if (!Array.isArray(rows)) {
    throw new TypeError(`rows must be an array of per-rank action lists, got ${typeof rows}`);
  }
  rows.forEach((row, r) => {
    if (!Array.isArray(row)) {
      throw new TypeError(`rows[${r}] must be an array of actions, got ${typeof row}`);
    }
    row.forEach((a, i) => {
      if (a === null) return;
      if (
        typeof a !== "object" || !KINDS.has(a.kind) ||
        !Number.isInteger(a.stage) || a.stage < 0 ||
        !Number.isInteger(a.microBatch) || a.microBatch < 0
      ) {
        throw new TypeError(
          `rows[${r}][${i}] must be an action { kind: F|B|I|W, stage >= 0, microBatch >= 0 } ` +
            `or null, got ${JSON.stringify(a)}`,
        );
      }
    });
  });
  const text = (row: readonly (Action | null)[]): string =>
    row.map((a) => (a === null ? "" : formatAction(a))).join(",") + "\n";
  return rows.map(text).join("");
}

/**
 * Reads CSV in PyTorch's compute-only format into per-rank action lists.
 * Empty cells (idle slots) are skipped; surrounding spaces and quotes are
 * ignored; `\n` and `\r\n` line ends are both accepted, and the final line
 * end is optional. A cell that is not an action throws a TypeError naming its
 * 1-based row and column.
 *
 * @example
 * ```ts
 * import { scheduleFromCsv } from "@conveyor/core/analysis";
 * const ranks = scheduleFromCsv("0F0,0B0\n,1F0,1B0\n");
 * console.log(ranks[1].length); // 2
 * ```
 */
export function scheduleFromCsv(text: string): Action[][] {
  if (typeof text !== "string") {
    throw new TypeError(`CSV text must be a string, got ${typeof text}`);
  }
  if (text.length === 0) return [];
  const lines = text.split(/\r?\n/);
  if (lines[lines.length - 1] === "") lines.pop();
  return lines.map((line, r) => {
    const actions: Action[] = [];
    line.split(",").forEach((raw, c) => {
      let cell = raw.trim();
      if (cell.length >= 2 && cell.startsWith('"') && cell.endsWith('"')) {
        cell = cell.slice(1, -1).replace(/""/g, '"').trim();
      }
      if (cell === "") return;
      try {
        actions.push(parseAction(cell));
      } catch (err) {
        throw new TypeError(`CSV row ${r + 1}, column ${c + 1}: ${(err as Error).message}`);
      }
    });
    return actions;
  });
}
