/**
 * SVG timeline of a pipeline schedule: one lane per rank, one box per pass,
 * coloured as in the Zero Bubble paper's figures (forward blue, input-gradient
 * backward teal, weight-gradient green, fused full backward dark teal), with
 * micro-batch numbers inside, a time axis and a legend. Works for simulated
 * events (abstract time units) and measured ones (milliseconds). With data
 * parallelism, each rank's gradient all-reduces in orange on a strip under
 * its lane.
 *
 * @module
 */

import { checkOptionsObject } from "../../text/nearest.ts";
import { type ActionKind, formatAction } from "../schedule/action.ts";
import type { TimedEvent } from "../schedule/schedule.ts";
import type { AllReduceSpan } from "../analysis/all_reduce.ts";
import { byRank, checkEvents, checkSpans, timeSpan } from "./_timeline.ts";
import { describeValue } from "../../text/describe.ts";

/** Options of {@linkcode renderSvg}. */
export interface SvgOptions {
  /** Title above the timeline. */
  readonly title?: string;
  /** Bubble fraction (0…1) to append to the title as a percentage. */
  readonly bubbleFraction?: number;
  /** Unit of the time axis, e.g. `"ms"`; default none (simulated units). */
  readonly timeUnit?: string;
  /** Number of rank lanes; default one more than the highest rank in the events. */
  readonly ranks?: number;
  /** Total width in pixels; default 960. */
  readonly width?: number;
  /** Height of one rank lane in pixels; default 26. */
  readonly rowHeight?: number;
  /** Draw the legend; default true. */
  readonly legend?: boolean;
  /** The lanes' labels, one per lane (default `rank 0`, `rank 1`, …). */
  readonly laneLabels?: readonly string[];
  /**
   * Gradient all-reduce spans (a data-parallel simulation's `allReduce`):
   * drawn as orange `<rect class="box AR">` boxes (the stage inside) on a
   * strip under each rank's lane, with a legend entry. None, no strip.
   */
  readonly allReduce?: readonly AllReduceSpan[];
}

const SVG_OPTIONS: readonly (keyof SvgOptions)[] = [
  "title",
  "bubbleFraction",
  "timeUnit",
  "ranks",
  "width",
  "rowHeight",
  "legend",
  "laneLabels",
  "allReduce",
];

const AR_STYLE: KindStyle = {
  fill: "#f4a259",
  stroke: "#b5651d",
  label: "AR all-reduce of a stage's gradients over its replicas (strip under each rank)",
};

interface KindStyle {
  readonly fill: string;
  readonly stroke: string;
  readonly label: string;
}

// Zero Bubble paper (Qi et al. 2024) palette: F blue, B (input gradient) teal,
// W green. A fused full backward gets a darker teal so it cannot be mistaken
// for an input-gradient-only pass.
const STYLES: Record<ActionKind, KindStyle> = {
  F: { fill: "#8fb8e8", stroke: "#3f6fa8", label: "F forward" },
  I: { fill: "#7fd1bd", stroke: "#2f8a76", label: "I backward, input grad" },
  W: { fill: "#bfe39a", stroke: "#6b9a3a", label: "W backward, weight grad" },
  B: { fill: "#3f9e8c", stroke: "#1f5f53", label: "B full backward (I+W)" },
};
const KIND_ORDER: readonly ActionKind[] = ["F", "I", "W", "B"];

const FONT = 'font-family="Helvetica, Arial, sans-serif"';

/**
 * Renders timed events as a standalone SVG document (a string). Each event is
 * one `<rect class="box …">`; a rank's second (third, …) model stage is drawn
 * in a darker shade of its kind's colour, as in the paper's interleaved and
 * V-shape figures. Hovering a box shows its action, iteration and times; a
 * dark bar marks where each later iteration begins on a rank.
 *
 * @example
 * ```ts
 * import { renderSvg } from "@conveyor/core";
 * const svg = renderSvg([
 *   { rank: 0, action: { kind: "F", stage: 0, microBatch: 0 }, iteration: 0, start: 0, end: 1 },
 *   { rank: 1, action: { kind: "F", stage: 1, microBatch: 0 }, iteration: 0, start: 1, end: 2 },
 * ], { title: "two ranks", bubbleFraction: 0.5 });
 * console.log(svg.startsWith("<svg")); // true
 * ```
 */
export function renderSvg(events: readonly TimedEvent[], options: SvgOptions = {}): string {
  checkOptionsObject(options, SVG_OPTIONS, "renderSvg: ");
  const width = options.width ?? 960;
  const rowHeight = options.rowHeight ?? 26;
  if (!Number.isFinite(width) || width < 200) {
    throw new RangeError(`width must be a finite number >= 200, got ${describeValue(width)}`);
  }
  if (!Number.isFinite(rowHeight) || rowHeight < 8) {
    throw new RangeError(`rowHeight must be a finite number >= 8, got ${describeValue(rowHeight)}`);
  }
  const bubble = options.bubbleFraction;
  if (bubble !== undefined && !Number.isFinite(bubble)) {
    throw new RangeError(`bubbleFraction must be a finite number, got ${describeValue(bubble)}`);
  }
  const spans = checkSpans(options.allReduce, "allReduce");
  let rows = checkEvents(events, options.ranks);
  for (const s of spans) rows = Math.max(rows, s.rank + 1);
  const labels = options.laneLabels;
  if (labels !== undefined && (!Array.isArray(labels) || labels.length !== rows)) {
    throw new RangeError(
      `laneLabels must be an array of ${rows} labels (one per lane), got ${
        Array.isArray(labels) ? `${labels.length}` : typeof labels
      }`,
    );
  }
  // Ranks whose lane holds a later iteration than its first: a dark bar marks where it begins.
  const lanes = byRank(events, rows);
  const bars = lanes.some((l) => l.some((e) => e.iteration !== l[0].iteration));

  const [t0, t1Raw] = timeSpan([...events, ...spans]);
  const t1 = t1Raw > t0 ? t1Raw : t0 + 1;
  const titleText = [
    options.title ?? "",
    bubble === undefined ? "" : `bubble ${(bubble * 100).toFixed(1)}%`,
  ].filter((s) => s.length > 0).join(" · ");

  const left = labels === undefined
    ? 64
    : Math.max(64, 12 + 6.6 * Math.max(...labels.map((l) => String(l).length)));
  const right = 16;
  const gap = 4;
  // The all-reduce strip under each lane, when there are spans.
  const strip = spans.length > 0 ? Math.max(6, Math.round(rowHeight * 0.5)) : 0;
  const stride = rowHeight + gap + (strip > 0 ? strip + 2 : 0);
  const top = titleText.length > 0 ? 36 : 10;
  const plotW = width - left - right;
  const plotH = rows * stride - gap;
  const axisY = top + plotH + 6;
  const legendY = axisY + 34;
  const showLegend = options.legend ?? true;
  const legendRows = 1 + (bars ? 1 : 0) + (strip > 0 ? 1 : 0);
  const height = (showLegend ? legendY + 22 * legendRows : axisY + 30) + 4;
  const scale = plotW / (t1 - t0);
  const x = (t: number): number => left + (t - t0) * scale;

  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" ` +
      `viewBox="0 0 ${width} ${height}">`,
  );
  out.push(
    `<rect class="background" x="0" y="0" width="${width}" height="${height}" fill="#fff"/>`,
  );
  if (titleText.length > 0) {
    out.push(
      `<text class="title" x="${left}" y="22" ${FONT} font-size="15" font-weight="bold" ` +
        `fill="#222">${escapeXml(titleText)}</text>`,
    );
  }

  // Lanes: the grey shows through wherever a rank idles.
  for (let r = 0; r < rows; r++) {
    const y = top + r * stride;
    out.push(
      `<rect class="lane" x="${left}" y="${y}" width="${fmt(plotW)}" height="${rowHeight}" ` +
        `fill="#eeeeee"/>`,
    );
    if (strip > 0) {
      out.push(
        `<rect class="lane allreduce-lane" x="${left}" y="${y + rowHeight + 2}" ` +
          `width="${fmt(plotW)}" height="${strip}" fill="#f6f6f6"/>`,
      );
    }
    out.push(
      `<text class="rank" x="${left - 8}" y="${fmt(y + rowHeight / 2 + 4)}" ${FONT} ` +
        `font-size="12" text-anchor="end" fill="#333">${
          escapeXml(labels === undefined ? `rank ${r}` : String(labels[r]))
        }</text>`,
    );
  }

  // Time axis with "nice" ticks.
  const step = niceStep((t1 - t0) / 10);
  out.push(
    `<line class="axis" x1="${left}" y1="${axisY}" x2="${left + plotW}" y2="${axisY}" ` +
      `stroke="#555" stroke-width="1"/>`,
  );
  for (let k = 0, t = 0; t <= t1 - t0 + step * 1e-9; k++, t = k * step) {
    const tx = fmt(x(t0 + t));
    out.push(
      `<line class="tick" x1="${tx}" y1="${axisY}" x2="${tx}" y2="${axisY + 4}" stroke="#555"/>`,
    );
    out.push(
      `<text class="tick-label" x="${tx}" y="${axisY + 16}" ${FONT} font-size="10" ` +
        `text-anchor="middle" fill="#444">${fmtTick(t, step)}</text>`,
    );
  }
  const axisLabel = options.timeUnit ? `time (${options.timeUnit})` : "time";
  out.push(
    `<text class="axis-label" x="${left + plotW}" y="${axisY + 30}" ${FONT} font-size="11" ` +
      `text-anchor="end" fill="#444">${escapeXml(axisLabel)}</text>`,
  );

  // Boxes. A rank's stages are numbered by their stage order on that rank.
  let maxStages = 1;
  for (let r = 0; r < rows; r++) {
    const stages = [...new Set(lanes[r].map((e) => e.action.stage))].sort((a, b) => a - b);
    maxStages = Math.max(maxStages, stages.length);
    const y = top + r * stride;
    for (const e of lanes[r]) {
      const style = STYLES[e.action.kind];
      const nth = stages.indexOf(e.action.stage);
      const fill = shade(style.fill, nth);
      const bx = x(e.start);
      const bw = Math.max(0.5, (e.end - e.start) * scale);
      const tip = `${formatAction(e.action)} · iteration ${e.iteration} · ${fmtTime(e.start)}–${
        fmtTime(e.end)
      }${options.timeUnit ? " " + options.timeUnit : ""}`;
      out.push(
        `<g><rect class="box ${e.action.kind}" x="${fmt(bx)}" y="${y}" width="${fmt(bw)}" ` +
          `height="${rowHeight}" fill="${fill}" stroke="${style.stroke}" stroke-width="0.8">` +
          `<title>${escapeXml(tip)}</title></rect>`,
      );
      const label = String(e.action.microBatch);
      const fontSize = Math.min(12, rowHeight * 0.5);
      if (bw >= label.length * fontSize * 0.62 + 2) {
        out.push(
          `<text x="${fmt(bx + bw / 2)}" y="${fmt(y + rowHeight / 2 + fontSize * 0.35)}" ` +
            `${FONT} font-size="${fmt(fontSize)}" text-anchor="middle" ` +
            `fill="${textColour(fill)}" pointer-events="none">${label}</text>`,
        );
      }
      out.push("</g>");
    }
    // A dark bar where each later iteration begins on this rank, so
    // back-to-back iterations can be told apart.
    let seen = -1;
    for (const e of lanes[r]) {
      if (e.iteration > seen) {
        if (seen >= 0) {
          const bx = fmt(x(e.start));
          out.push(
            `<line class="iteration-start" x1="${bx}" y1="${y - 1}" x2="${bx}" ` +
              `y2="${y + rowHeight + 1}" stroke="#222" stroke-width="2"/>`,
          );
        }
        seen = e.iteration;
      }
    }
  }

  for (const sp of spans) {
    const y = top + sp.rank * stride + rowHeight + 2;
    const bx = x(sp.start);
    const bw = Math.max(0.5, (sp.end - sp.start) * scale);
    const tip = `all-reduce of stage ${sp.stage} · ${sp.bytes} bytes · ${fmtTime(sp.start)}–${
      fmtTime(sp.end)
    }${options.timeUnit ? " " + options.timeUnit : ""}`;
    out.push(
      `<g><rect class="box AR" x="${fmt(bx)}" y="${y}" width="${fmt(bw)}" height="${strip}" ` +
        `fill="${AR_STYLE.fill}" stroke="${AR_STYLE.stroke}" stroke-width="0.8">` +
        `<title>${escapeXml(tip)}</title></rect>`,
    );
    const label = String(sp.stage);
    const fontSize = Math.min(10, strip * 0.8);
    if (bw >= label.length * fontSize * 0.62 + 2) {
      out.push(
        `<text x="${fmt(bx + bw / 2)}" y="${fmt(y + strip / 2 + fontSize * 0.35)}" ${FONT} ` +
          `font-size="${fmt(fontSize)}" text-anchor="middle" fill="#1a1a1a" ` +
          `pointer-events="none">${label}</text>`,
      );
    }
    out.push("</g>");
  }

  if (showLegend) {
    const present = KIND_ORDER.filter((k) => events.some((e) => e.action.kind === k));
    let lx = left;
    for (const k of present.length > 0 ? present : KIND_ORDER) {
      const s = STYLES[k];
      out.push(
        `<rect class="legend-swatch" x="${lx}" y="${legendY}" width="14" height="14" ` +
          `fill="${s.fill}" stroke="${s.stroke}" stroke-width="0.8"/>`,
      );
      out.push(
        `<text class="legend" x="${lx + 19}" y="${legendY + 11}" ${FONT} font-size="11" ` +
          `fill="#333">${escapeXml(s.label)}</text>`,
      );
      lx += 19 + s.label.length * 6.3 + 16;
    }
    if (maxStages > 1) {
      out.push(
        `<text class="legend" x="${lx}" y="${legendY + 11}" ${FONT} font-size="11" ` +
          `fill="#333">darker: later stage on the rank · numbers: micro-batch · grey: idle</text>`,
      );
    } else {
      out.push(
        `<text class="legend" x="${lx}" y="${legendY + 11}" ${FONT} font-size="11" ` +
          `fill="#333">numbers: micro-batch · grey: idle</text>`,
      );
    }
    if (bars) {
      const y = legendY + 22;
      out.push(
        `<line class="legend-swatch iteration-start" x1="${left + 7}" y1="${y}" x2="${left + 7}" ` +
          `y2="${y + 14}" stroke="#222" stroke-width="2"/>`,
        `<text class="legend" x="${left + 19}" y="${y + 11}" ${FONT} font-size="11" ` +
          `fill="#333">dark bar: the next iteration (step) begins on this rank</text>`,
      );
    }
    if (strip > 0) {
      const y = legendY + 22 * (bars ? 2 : 1);
      out.push(
        `<rect class="legend-swatch AR" x="${left}" y="${y}" width="14" height="14" ` +
          `fill="${AR_STYLE.fill}" stroke="${AR_STYLE.stroke}" stroke-width="0.8"/>`,
        `<text class="legend" x="${left + 19}" y="${y + 11}" ${FONT} font-size="11" ` +
          `fill="#333">${escapeXml(AR_STYLE.label)} · numbers: stage</text>`,
      );
    }
  }
  out.push("</svg>");
  return out.join("\n") + "\n";
}

function escapeXml(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;");
}

function fmt(v: number): string {
  return String(Math.round(v * 100) / 100);
}

function fmtTime(v: number): string {
  return String(Math.round(v * 1000) / 1000);
}

function niceStep(raw: number): number {
  if (!(raw > 0)) return 1;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const f = raw / mag;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
}

function fmtTick(t: number, step: number): string {
  const digits = Math.max(0, -Math.floor(Math.log10(step) + 1e-9));
  return t.toFixed(Math.min(digits, 6));
}

function parseHex(hex: string): [number, number, number] {
  const n = parseInt(hex.slice(1), 16);
  return [(n >> 16) & 255, (n >> 8) & 255, n & 255];
}

/** Darkens a colour by about 22% per stage index on the rank. */
function shade(hex: string, nth: number): string {
  if (nth <= 0) return hex;
  const f = Math.max(0.35, 1 - 0.22 * nth);
  const [r, g, b] = parseHex(hex).map((c) => Math.round(c * f));
  return `#${((1 << 24) | (r << 16) | (g << 8) | b).toString(16).slice(1)}`;
}

function textColour(hex: string): string {
  const [r, g, b] = parseHex(hex);
  return 0.299 * r + 0.587 * g + 0.114 * b > 150 ? "#1a1a1a" : "#ffffff";
}
