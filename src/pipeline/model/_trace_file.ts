/**
 * What `PipelineParallelModel.writeTrace` draws (a step of the last train()
 * call, all of its steps, or the last prediction) and the text it writes:
 * an SVG timeline when the path ends in `.svg`, else a Chrome trace (JSON,
 * opens in Perfetto).
 *
 * @module
 */

import { checkOptionSpelling } from "../../text/nearest.ts";
import type { TimedEvent } from "../schedule/schedule.ts";
import { summarizeTimeline } from "../analysis/timeline_summary.ts";
import { toChromeTrace } from "../render/chrome_trace.ts";
import { renderSvg } from "../render/render_svg.ts";
import { traceFormat } from "../render/trace_format.ts";
import type { StepResult } from "./results.ts";
import { describeValue } from "../../text/describe.ts";

/** Options of `PipelineParallelModel.writeTrace`. */
export interface WriteTraceOptions {
  /**
   * The step to draw (its `StepResult.step`, among the last train() call's
   * steps), or `"all"`: every step of that call. Default: the call's last
   * step.
   */
  readonly step?: number | "all";
}

/** What a trace shows. */
export type TraceSelection =
  | { readonly kind: "step"; readonly step: StepResult }
  | { readonly kind: "all"; readonly steps: readonly StepResult[] }
  | { readonly kind: "predict"; readonly events: readonly TimedEvent[] };

/**
 * The steps or events to draw: `options.step` of `steps` (the last train()
 * call's, empty when a prediction ran after it), else the last step, else
 * the prediction's `events`. Throws a RangeError when nothing has run, or
 * when the step is not one of the call's, and a TypeError for a bad option.
 */
export function pickTrace(
  steps: readonly StepResult[],
  events: readonly TimedEvent[],
  options: WriteTraceOptions | undefined,
): TraceSelection {
  if (options !== undefined && (options === null || typeof options !== "object")) {
    throw new TypeError(
      `writeTrace: options must be an object { step }, got ${describeValue(options)}`,
    );
  }
  if (options !== undefined) checkOptionSpelling(options, ["step"], "writeTrace: ");
  const step = options?.step;
  if (step !== undefined && step !== "all" && !Number.isSafeInteger(step)) {
    throw new TypeError(
      `writeTrace: step must be a step index (an integer) or "all", got ${JSON.stringify(step)}`,
    );
  }
  if (steps.length === 0) {
    if (events.length === 0) {
      throw new RangeError("writeTrace: no step has run yet, so there is nothing to write");
    }
    if (step !== undefined) {
      throw new RangeError(
        `writeTrace: step ${JSON.stringify(step)}: the last run was a prediction, not train()`,
      );
    }
    return { kind: "predict", events };
  }
  if (step === "all") return { kind: "all", steps };
  if (step === undefined) return { kind: "step", step: steps[steps.length - 1] };
  const found = steps.find((s) => s.step === step);
  if (found === undefined) {
    throw new RangeError(
      `writeTrace: step ${step} is not a step of the last train() call (steps ${steps[0].step}` +
        `–${steps[steps.length - 1].step})`,
    );
  }
  return { kind: "step", step: found };
}

/**
 * Renders `picked` (times in ms) for `path`'s format. Titles and lanes
 * count steps from 1, as the logs print them (`StepResult.step + 1`).
 */
export function traceText(
  path: string,
  picked: TraceSelection,
  schedule: { name: string },
  ranks: number,
  microBatches: number,
): string {
  const events = picked.kind === "predict"
    ? picked.events
    : picked.kind === "step"
    ? picked.step.events
    : picked.steps.flatMap((s) => s.events).sort((a, b) => a.start - b.start || a.rank - b.rank);
  const head = `${schedule.name}: ${ranks} ranks, ${microBatches} micro-batches`;
  if (traceFormat(path, "writeTrace: path") !== "svg") {
    return JSON.stringify(
      toChromeTrace(events, { ranks, microsecondsPerUnit: 1000, processName: schedule.name }),
    );
  }
  if (picked.kind !== "all") {
    return renderSvg(events, {
      title: picked.kind === "step"
        ? `${head}, step ${picked.step.step + 1} (index ${picked.step.step})`
        : `${head}, forward-only run`,
      bubbleFraction: summarizeTimeline(events, ranks).bubbleFraction,
      timeUnit: "ms",
      ranks,
    });
  }
  // Every step: one block of rank lanes per step, each step from its own start.
  const lanes: TimedEvent[] = [];
  const labels: string[] = [];
  picked.steps.forEach((s, k) => {
    const t0 = s.events.length === 0 ? 0 : Math.min(...s.events.map((e) => e.start));
    for (const e of s.events) {
      lanes.push({ ...e, rank: k * ranks + e.rank, start: e.start - t0, end: e.end - t0 });
    }
    for (let r = 0; r < ranks; r++) labels.push(`step ${s.step + 1} · rank ${r}`);
  });
  const first = picked.steps[0].step + 1, last = picked.steps[picked.steps.length - 1].step + 1;
  return renderSvg(lanes, {
    title: `${head}, steps ${first}–${last}, each from its own start; over the call:`,
    bubbleFraction: summarizeTimeline(events, ranks).bubbleFraction,
    timeUnit: "ms",
    ranks: picked.steps.length * ranks,
    laneLabels: labels,
  });
}
