import { describeValue } from "../../text/describe.ts";
/**
 * A line chart of training curves as a standalone SVG, no dependencies:
 * losses on a log scale (left axis) and an accuracy in [0, 1] (right
 * axis) against the step, with a legend naming every curve drawn.
 *
 * @module
 */

/** A curve: `[step, value]` points in step order. */
export type Curve = readonly (readonly [number, number])[];

/** What {@linkcode curvesSvg} draws. */
export interface CurvesInput {
  /** Title above the plot. */
  readonly title: string;
  /** Training loss per step (positive finite values; drawn on a log scale, left axis). */
  readonly loss: Curve;
  /** Validation loss at the steps it was measured (left axis, dashed). */
  readonly validationLoss?: Curve;
  /** Accuracy in [0, 1] at the steps it was measured (right axis, 0–100%). */
  readonly accuracy?: Curve;
  /** Legend text of the loss curve (default "training loss"). */
  readonly lossLabel?: string;
  /** Legend text of the validation loss curve (default "validation loss"). */
  readonly validationLossLabel?: string;
  /** Legend text of the accuracy curve (default "validation accuracy"). */
  readonly accuracyLabel?: string;
  /** A line under the title (e.g. the configuration). */
  readonly subtitle?: string;
  /** Steps marked with a dashed vertical line and its label (e.g. an lr change). */
  readonly marks?: readonly { readonly step: number; readonly label: string }[];
}

const W = 720, H = 400;
const PAD = { left: 64, right: 64, top: 76, bottom: 48 };
const LOSS_COLOR = "#d9480f", VAL_COLOR = "#7048e8", ACC_COLOR = "#1971c2";

function esc(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;");
}

function fmt(v: number): string {
  return Number(v.toFixed(1)).toString();
}

/**
 * The log-scale loss axis: `lo`, `hi` as powers of ten and the values
 * labelled. Losses spanning a decade or more get whole decades; a narrower
 * span (4.17 → 2.97) fills the plot, labelled at round values (multiples of
 * 1, 2 or 5 × 10^k), where a whole decade drew it nearly flat.
 */
function lossAxis(min: number, max: number): { lo: number; hi: number; ticks: number[] } {
  const lmin = Math.log10(min), lmax = Math.log10(max);
  if (lmax - lmin >= 1) {
    const lo = Math.floor(lmin), hi = Math.max(Math.ceil(lmax), lo + 1);
    return { lo, hi, ticks: Array.from({ length: hi - lo + 1 }, (_, i) => 10 ** (lo + i)) };
  }
  const pad = Math.max(lmax - lmin, 0.02) * 0.1;
  const lo = lmin - pad, hi = lmax + pad;
  const vlo = 10 ** lo, vhi = 10 ** hi;
  const raw = (vhi - vlo) / 5;
  const p = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((k) => k * p).find((s) => s >= raw) ?? 10 * p;
  const ticks: number[] = [];
  for (let k = Math.ceil(vlo / step); k * step <= vhi; k++) ticks.push(k * step);
  return { lo, hi, ticks };
}

/** Round step ticks: about 6 of them, multiples of 1, 2 or 5 × 10^k. */
function stepTicks(max: number): number[] {
  const raw = max / 6;
  const p = 10 ** Math.floor(Math.log10(Math.max(raw, 1)));
  const unit = [1, 2, 5, 10].map((m) => m * p).find((u) => u >= raw) ?? 10 * p;
  const out: number[] = [];
  for (let s = 0; s <= max + 1e-9; s += unit) out.push(s);
  return out;
}

function checkCurve(
  name: string,
  curve: Curve | undefined,
  ok: (v: number) => boolean,
  rule: string,
): void {
  if (curve === undefined) return;
  if (!Array.isArray(curve)) {
    throw new TypeError(
      `curvesSvg: ${name} must be an array of [step, value], got ${typeof curve}`,
    );
  }
  curve.forEach((p, i) => {
    if (!Array.isArray(p) || p.length !== 2 || !Number.isFinite(p[0])) {
      throw new TypeError(
        `curvesSvg: ${name}[${i}] must be a [step, value] pair with a finite step`,
      );
    }
    if (!ok(p[1])) {
      throw new RangeError(
        `curvesSvg: ${name} at step ${p[0]} must be ${rule}, got ${describeValue(p[1])}`,
      );
    }
  });
}

/**
 * The chart as an SVG document. Throws a RangeError when the loss curve is
 * empty, a loss (training or validation) is not a positive finite number,
 * or an accuracy lies outside [0, 1]; a TypeError for a malformed curve.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { curvesSvg } from "@conveyor/core";
 * const svg = curvesSvg({
 *   title: "training",
 *   loss: [[1, 2.5], [2, 1.2], [3, 0.6]],
 *   validationLoss: [[3, 0.8]],
 *   accuracy: [[3, 0.4]],
 * });
 * assert.ok(svg.startsWith("<svg"));
 * assert.equal(svg.match(/<polyline /g)?.length, 3);
 * assert.throws(() => curvesSvg({ title: "", loss: [] }), /the loss curve is empty/);
 * ```
 */
export function curvesSvg(input: CurvesInput): string {
  if (input === null || typeof input !== "object") {
    throw new TypeError(
      `curvesSvg: input must be an object { title, loss, … }, got ${describeValue(input)}`,
    );
  }
  const { loss } = input;
  const validation = input.validationLoss ?? [];
  const accuracy = input.accuracy ?? [];
  const positive = (v: number) => v > 0 && Number.isFinite(v);
  checkCurve("loss", loss, positive, "positive and finite");
  checkCurve("validationLoss", input.validationLoss, positive, "positive and finite");
  checkCurve("accuracy", input.accuracy, (v) => v >= 0 && v <= 1, "in [0, 1]");
  if (loss.length === 0) throw new RangeError("curvesSvg: the loss curve is empty");
  const points = [...loss, ...validation, ...accuracy];
  const maxStep = Math.max(1, ...points.map(([s]) => s));
  const losses = [...loss, ...validation].map(([, v]) => v);
  const { lo, hi, ticks } = lossAxis(Math.min(...losses), Math.max(...losses));
  const pw = W - PAD.left - PAD.right, ph = H - PAD.top - PAD.bottom;
  const x = (s: number) => PAD.left + (s / maxStep) * pw;
  const yLoss = (v: number) => PAD.top + (1 - (Math.log10(v) - lo) / (hi - lo)) * ph;
  const yAcc = (a: number) => PAD.top + (1 - a) * ph;
  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" ` +
      `viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${W / 2}" y="22" text-anchor="middle" font-size="15">${esc(input.title)}</text>`,
  );
  if (input.subtitle) {
    out.push(
      `<text x="${W / 2}" y="40" text-anchor="middle" fill="#555">${esc(input.subtitle)}</text>`,
    );
  }
  // Grid and axes: accuracy every 20% (right, when drawn), loss every decade (left), steps.
  if (accuracy.length > 0) {
    for (let a = 0; a <= 1.0001; a += 0.2) {
      const y = fmt(yAcc(a));
      out.push(
        `<line x1="${PAD.left}" x2="${W - PAD.right}" y1="${y}" y2="${y}" stroke="#eee"/>`,
        `<text x="${W - PAD.right + 6}" y="${y}" dy="4" fill="${ACC_COLOR}">${
          Math.round(a * 100)
        }%</text>`,
      );
    }
  }
  for (const v of ticks) {
    const label = String(Number(v.toPrecision(6)));
    out.push(
      `<text x="${PAD.left - 6}" y="${
        fmt(yLoss(v))
      }" dy="4" text-anchor="end" fill="${LOSS_COLOR}">${label}</text>`,
    );
  }
  for (const s of stepTicks(maxStep)) {
    out.push(
      `<text x="${fmt(x(s))}" y="${H - PAD.bottom + 18}" text-anchor="middle">${s}</text>`,
    );
  }
  out.push(
    `<rect x="${PAD.left}" y="${PAD.top}" width="${pw}" height="${ph}" fill="none" stroke="#999"/>`,
    `<text x="${PAD.left + pw / 2}" y="${H - 10}" text-anchor="middle">step</text>`,
  );
  for (const m of input.marks ?? []) {
    const mx = fmt(x(m.step));
    out.push(
      `<line x1="${mx}" x2="${mx}" y1="${PAD.top}" y2="${H - PAD.bottom}" stroke="#888" ` +
        `stroke-dasharray="4 3"/>`,
      `<text x="${mx}" y="${H - PAD.bottom - 6}" dx="-4" text-anchor="end" fill="#555">${
        esc(m.label)
      }</text>`,
    );
  }
  const poly = (pts: string[], color: string, dash = "") =>
    `<polyline fill="none" stroke="${color}" stroke-width="1.6"${dash} points="${pts.join(" ")}"/>`;
  const dots = (curve: Curve, y: (v: number) => number, color: string) =>
    curve.map(([s, v]) => `<circle cx="${fmt(x(s))}" cy="${fmt(y(v))}" r="2.5" fill="${color}"/>`);
  out.push(poly(loss.map(([s, v]) => `${fmt(x(s))},${fmt(yLoss(v))}`), LOSS_COLOR));
  // Legend: one entry per curve drawn, in a row between the titles and the plot.
  const legend: [string, string, string][] = [
    [`${input.lossLabel ?? "training loss"} (left, log scale)`, LOSS_COLOR, ""],
  ];
  if (validation.length > 0) {
    out.push(
      poly(
        validation.map(([s, v]) => `${fmt(x(s))},${fmt(yLoss(v))}`),
        VAL_COLOR,
        ' stroke-dasharray="6 3"',
      ),
      ...dots(validation, yLoss, VAL_COLOR),
    );
    legend.push([`${input.validationLossLabel ?? "validation loss"} (left)`, VAL_COLOR, "6 3"]);
  }
  if (accuracy.length > 0) {
    out.push(
      poly(accuracy.map(([s, a]) => `${fmt(x(s))},${fmt(yAcc(a))}`), ACC_COLOR),
      ...dots(accuracy, yAcc, ACC_COLOR),
    );
    legend.push([`${input.accuracyLabel ?? "validation accuracy"} (right)`, ACC_COLOR, ""]);
  }
  const ly = PAD.top - 14;
  let lx = PAD.left + 28;
  for (const [text, color, dash] of legend) {
    out.push(
      `<line class="legend" x1="${lx - 28}" x2="${lx - 6}" y1="${ly}" y2="${ly}" ` +
        `stroke="${color}" stroke-width="2"${dash === "" ? "" : ` stroke-dasharray="${dash}"`}/>`,
      `<text class="legend" x="${lx}" y="${ly}" dy="4">${esc(text)}</text>`,
    );
    lx += text.length * 6.4 + 48;
  }
  out.push("</svg>");
  return out.join("\n") + "\n";
}
