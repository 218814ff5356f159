/**
 * ASCII grid of a pipeline timeline: one row per rank, one column per time
 * unit (or per slot), each cell showing the action in PyTorch's text form
 * (`1F3`), idle time as dots; with data parallelism, a line of each rank's
 * gradient all-reduces under its row.
 *
 * @module
 */

import { checkOptionsObject } from "../../text/nearest.ts";
import { formatAction } from "../schedule/action.ts";
import type { TimedEvent } from "../schedule/schedule.ts";
import type { AllReduceSpan } from "../analysis/all_reduce.ts";
import { byRank, checkEvents, checkSpans, slotGrid, type Timed, timeSpan } from "./_timeline.ts";
import { describeValue } from "../../text/describe.ts";

/** Options of {@linkcode renderAscii}. */
export interface AsciiOptions {
  /**
   * `"time"` (default): one column per `unit` of time, so a pass that lasts
   * two units fills two cells (its text, then `-`). `"slot"`: one column per
   * distinct start time, so each action fills one cell and actions that start
   * together line up.
   */
  readonly mode?: "time" | "slot";
  /** Time per column in `"time"` mode; default the shortest event's duration. */
  readonly unit?: number;
  /** Most columns in `"time"` mode before `unit` is widened to fit; default 2000. */
  readonly maxColumns?: number;
  /** Number of rank rows; default one more than the highest rank in the events. */
  readonly ranks?: number;
  /** Prefix each row with its rank (`r0 `); default true. */
  readonly labels?: boolean;
  /**
   * Gradient all-reduce spans (a data-parallel simulation's `allReduce`):
   * each rank that has some gets a line `ar<rank>` under its row, each span
   * shown as `<stage>AR`, and a legend line ends the grid (when labelled).
   */
  readonly allReduce?: readonly AllReduceSpan[];
}

const ASCII_OPTIONS: readonly (keyof AsciiOptions)[] = [
  "mode",
  "unit",
  "maxColumns",
  "ranks",
  "labels",
  "allReduce",
];

/** One cell's content placed in time on a line of the grid. */
interface Item extends Timed {
  readonly text: string;
}

/**
 * Renders timed events as an ASCII grid, one line per rank, joined by `\n`
 * (no trailing newline). Idle cells are dots; in `"time"` mode a pass longer
 * than one unit shows its text in its first cell and `-` in the others.
 *
 * Time is quantised to `unit`: each event starts at its rounded column but
 * never before the previous event of its rank has ended, so every event stays
 * visible and in order even when `unit` is coarser than the shortest pass.
 *
 * @example
 * ```ts
 * import { renderAscii } from "@conveyor/core";
 * const grid = renderAscii([
 *   { rank: 0, action: { kind: "F", stage: 0, microBatch: 0 }, iteration: 0, start: 0, end: 1 },
 *   { rank: 1, action: { kind: "F", stage: 1, microBatch: 0 }, iteration: 0, start: 1, end: 2 },
 *   { rank: 1, action: { kind: "B", stage: 1, microBatch: 0 }, iteration: 0, start: 2, end: 4 },
 * ]);
 * console.log(grid);
 * // r0 0F0 ... ... ...
 * // r1 ... 1F0 1B0 ---
 * ```
 */
export function renderAscii(events: readonly TimedEvent[], options: AsciiOptions = {}): string {
  checkOptionsObject(options, ASCII_OPTIONS, "renderAscii: ");
  const mode = options.mode ?? "time";
  if (mode !== "time" && mode !== "slot") {
    throw new RangeError(`mode must be "time" or "slot", got ${JSON.stringify(mode)}`);
  }
  if (options.unit !== undefined && !(Number.isFinite(options.unit) && options.unit > 0)) {
    throw new RangeError(
      `unit must be a positive finite number, got ${describeValue(options.unit)}`,
    );
  }
  const maxColumns = options.maxColumns ?? 2000;
  if (!Number.isInteger(maxColumns) || maxColumns < 1) {
    throw new RangeError(`maxColumns must be a positive integer, got ${describeValue(maxColumns)}`);
  }
  const spans = checkSpans(options.allReduce, "allReduce");
  let ranks = checkEvents(events, options.ranks);
  for (const s of spans) ranks = Math.max(ranks, s.rank + 1);

  // Lines: each rank's row, then its all-reduce line when it has spans.
  const line: number[] = [], arLine: number[] = [], labelOf: string[] = [];
  for (let r = 0; r < ranks; r++) {
    line.push(labelOf.length);
    labelOf.push(`r${r}`);
    arLine.push(spans.some((s) => s.rank === r) ? labelOf.length : -1);
    if (arLine[r] >= 0) labelOf.push(`ar${r}`);
  }
  const rows = labelOf.length;
  const items: Item[] = [
    ...events.map((e) => ({ ...e, rank: line[e.rank], text: formatAction(e.action) })),
    ...spans.map((s) => ({
      rank: arLine[s.rank],
      start: s.start,
      end: s.end,
      text: `${s.stage}AR`,
    })),
  ];

  let width = 1;
  for (const e of items) width = Math.max(width, e.text.length);
  const idle = ".".repeat(width);
  const cont = "-".repeat(width);
  const cell = (e: Item): string => e.text.padEnd(width);

  let cells: string[][];
  if (mode === "slot") {
    cells = slotGrid(items, rows).map((row) => row.map((e) => (e === null ? idle : cell(e))));
  } else {
    const [t0, t1] = timeSpan(items);
    let unit = options.unit ?? shortestDuration(events);
    if ((t1 - t0) / unit > maxColumns) unit = (t1 - t0) / maxColumns;
    cells = byRank(items, rows).map((lane) => {
      const row: string[] = [];
      for (const e of lane) {
        const first = Math.max(Math.round((e.start - t0) / unit), row.length);
        const last = Math.max(first + 1, Math.round((e.end - t0) / unit));
        while (row.length < first) row.push(idle);
        row.push(cell(e));
        while (row.length < last) row.push(cont);
      }
      return row;
    });
    const columns = Math.max(0, ...cells.map((row) => row.length));
    for (const row of cells) while (row.length < columns) row.push(idle);
  }

  const labelWidth = Math.max(1, ...labelOf.map((l) => l.length));
  const lines = cells.map((row, r) => {
    const body = row.join(" ");
    if (options.labels === false) return body;
    const label = labelOf[r].padEnd(labelWidth);
    return body.length > 0 ? `${label} ${body}` : label;
  });
  if (spans.length > 0 && options.labels !== false) {
    lines.push(
      "arN: the gradient all-reduces of rank N's stages over their replicas (sAR: stage s)",
    );
  }
  return lines.join("\n");
}

function shortestDuration(events: readonly TimedEvent[]): number {
  let d = Infinity;
  for (const e of events) {
    const len = e.end - e.start;
    if (len > 0 && len < d) d = len;
  }
  return Number.isFinite(d) ? d : 1;
}
