/**
 * A small SVG line chart of training curves for the examples: the loss on
 * a log scale (left axis), optionally a second loss to compare (dashed), and
 * an accuracy in [0, 1] (right axis) against the step, no dependencies.
 *
 * @module
 */

/** A curve: `[step, value]` points in step order. */
export type Curve = readonly (readonly [number, number])[];

/** What {@linkcode curvesSvg} draws. */
export interface CurvesInput {
  /** Title above the plot. */
  readonly title: string;
  /** Training loss per step (positive values; drawn on a log scale). */
  readonly loss: Curve;
  /** Accuracy in [0, 1] at the steps it was measured (drawn 0–100%). */
  readonly accuracy: Curve;
  /** Legend text of the accuracy curve (default "held-out exact match"). */
  readonly accuracyLabel?: string;
  /** Legend text of the loss curve (default "training loss"). */
  readonly lossLabel?: string;
  /** A second training loss on the same axis, drawn dashed (e.g. another run). */
  readonly compareLoss?: Curve;
  /** Legend text of `compareLoss` (default "compared loss"). */
  readonly compareLossLabel?: string;
  /** A line under the title (e.g. the configuration). */
  readonly subtitle?: string;
  /** Steps marked with a dashed vertical line and a label (e.g. an lr change). */
  readonly marks?: readonly { readonly step: number; readonly label: string }[];
}

const W = 720, H = 400;
const PAD = { left: 64, right: 64, top: 76, bottom: 48 };
const LOSS_COLOR = "#d9480f", ACC_COLOR = "#1971c2", COMPARE_COLOR = "#2b8a3e";

function esc(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

function fmt(v: number): string {
  return Number(v.toFixed(1)).toString();
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

/**
 * The chart as an SVG document. Throws a RangeError when the loss curve is
 * empty or holds a value that is not a positive finite number, or an
 * accuracy lies outside [0, 1].
 */
export function curvesSvg(input: CurvesInput): string {
  const { loss, accuracy } = input;
  const compare = input.compareLoss ?? [];
  if (loss.length === 0) throw new RangeError("curvesSvg: the loss curve is empty");
  for (const [s, v] of [...loss, ...compare]) {
    if (!(v > 0) || !Number.isFinite(v)) {
      throw new RangeError(`curvesSvg: loss at step ${s} must be positive and finite, got ${v}`);
    }
  }
  for (const [s, v] of accuracy) {
    if (!(v >= 0 && v <= 1)) {
      throw new RangeError(`curvesSvg: accuracy at step ${s} must be in [0, 1], got ${v}`);
    }
  }
  const losses = [...loss, ...compare];
  const maxStep = Math.max(1, ...losses.map(([s]) => s), ...accuracy.map(([s]) => s));
  let lo = Math.log10(Math.min(...losses.map(([, v]) => v)));
  let hi = Math.log10(Math.max(...losses.map(([, v]) => v)));
  lo = Math.floor(lo);
  hi = Math.max(Math.ceil(hi), lo + 1);
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
  // Grid and axes: accuracy every 20% (right), loss every decade (left), steps (bottom).
  for (let a = 0; a <= 1.0001; a += 0.2) {
    const y = fmt(yAcc(a));
    out.push(`<line x1="${PAD.left}" x2="${W - PAD.right}" y1="${y}" y2="${y}" stroke="#eee"/>`);
    // The right axis only with an accuracy curve (or none to compare with, as before).
    if (accuracy.length > 0 || compare.length === 0) {
      out.push(
        `<text x="${W - PAD.right + 6}" y="${y}" dy="4" fill="${ACC_COLOR}">${
          Math.round(a * 100)
        }%</text>`,
      );
    }
  }
  for (let d = lo; d <= hi; d++) {
    const v = 10 ** d;
    const label = d >= 0 ? String(v) : v.toFixed(-d);
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
    `<polyline fill="none" stroke="${color}" stroke-width="1.6"${
      dash === "" ? "" : ` stroke-dasharray="${dash}"`
    } points="${pts.join(" ")}"/>`;
  out.push(poly(loss.map(([s, v]) => `${fmt(x(s))},${fmt(yLoss(v))}`), LOSS_COLOR));
  if (compare.length > 0) {
    const pts = compare.map(([s, v]) => `${fmt(x(s))},${fmt(yLoss(v))}`);
    out.push(poly(pts, COMPARE_COLOR, "6 4"));
  }
  if (accuracy.length > 0) {
    out.push(poly(accuracy.map(([s, a]) => `${fmt(x(s))},${fmt(yAcc(a))}`), ACC_COLOR));
    for (const [s, a] of accuracy) {
      out.push(`<circle cx="${fmt(x(s))}" cy="${fmt(yAcc(a))}" r="2.5" fill="${ACC_COLOR}"/>`);
    }
  }
  // Legend: one row between the titles and the plot.
  const ly = PAD.top - 14;
  const lossText = `${input.lossLabel ?? "training loss"} (left, log scale)`;
  // The second entry: the accuracy, or the compared loss when there is no accuracy.
  const [second, secondColor, secondDash] = accuracy.length > 0 || compare.length === 0
    ? [`${input.accuracyLabel ?? "held-out exact match"} (right)`, ACC_COLOR, ""]
    : [`${input.compareLossLabel ?? "compared loss"} (dashed)`, COMPARE_COLOR, "6 4"];
  const lx = PAD.left + pw / 2 - 150;
  out.push(
    `<line x1="${lx - 28}" x2="${
      lx - 6
    }" y1="${ly}" y2="${ly}" stroke="${LOSS_COLOR}" stroke-width="2"/>`,
    `<text x="${lx}" y="${ly}" dy="4">${esc(lossText)}</text>`,
    `<line x1="${lx + 200}" x2="${lx + 222}" y1="${ly}" y2="${ly}" stroke="${secondColor}" ` +
      `stroke-width="2"${secondDash === "" ? "" : ` stroke-dasharray="${secondDash}"`}/>`,
    `<text x="${lx + 228}" y="${ly}" dy="4">${esc(second)}</text>`,
    "</svg>",
  );
  return out.join("\n") + "\n";
}
