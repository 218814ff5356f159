/**
 * The text `PipelineParallelModel.writeTrace` writes: an SVG timeline when
 * the path ends in `.svg`, else a Chrome trace (JSON, opens in Perfetto).
 *
 * @module
 */

import type { TimedEvent } from "../schedule/schedule.ts";
import { summarizeTimeline } from "../analysis/timeline_summary.ts";
import { toChromeTrace } from "../render/chrome_trace.ts";
import { renderSvg } from "../render/render_svg.ts";

/** Renders `events` (times in ms) for `path`'s format. */
export function traceText(
  path: string,
  events: readonly TimedEvent[],
  schedule: { name: string },
  ranks: number,
  microBatches: number,
): string {
  if (path.endsWith(".svg")) {
    return renderSvg(events, {
      title: `${schedule.name}: ${ranks} ranks, ${microBatches} micro-batches`,
      bubbleFraction: summarizeTimeline(events, ranks).bubbleFraction,
      timeUnit: "ms",
      ranks,
    });
  }
  return JSON.stringify(
    toChromeTrace(events, { ranks, microsecondsPerUnit: 1000, processName: schedule.name }),
  );
}
