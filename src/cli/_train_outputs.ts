// The files `cli.ts train` writes (--save-checkpoint, --trace, --metrics,
// --curves), checked before anything runs, and --trace-step. Not exported
// from the package.

import { checkOutputPath } from "../pipeline/model/output_path.ts";
import { traceFormat } from "../pipeline/render/trace_format.ts";
import { positiveInt } from "./_options.ts";
import { UsageError } from "./command.ts";

/** A flag naming a file the run writes. */
export type Output = "trace" | "save-checkpoint" | "metrics" | "curves";

/** The files a run writes, each checked now (exit 2 naming the flag), not after training. */
export function readOutputs(values: Record<string, unknown>): Partial<Record<Output, string>> {
  const out: Partial<Record<Output, string>> = {};
  // A checkpoint and a picture are written beside their path, then renamed over it.
  const how = {
    "save-checkpoint": "replace",
    trace: "direct",
    metrics: "direct",
    curves: "replace",
  } as const;
  for (const flag of ["save-checkpoint", "trace", "metrics", "curves"] as const) {
    const v = values[flag];
    if (v === undefined) continue;
    if (String(v) === "") throw new UsageError(`--${flag} needs a path`);
    try {
      if (flag === "trace") traceFormat(String(v), "--trace");
      out[flag] = checkOutputPath(String(v), `--${flag}`, { write: how[flag] });
    } catch (e) {
      if (e instanceof TypeError) throw new UsageError(e.message);
      throw e;
    }
  }
  return out;
}

/** `--trace-step N|all`: a step number as the lines print it (from 1), or "all". */
export function readTraceStep(values: Record<string, unknown>): number | "all" | undefined {
  const v = values["trace-step"];
  if (v === undefined) return undefined;
  if (values.trace === undefined) throw new UsageError("--trace-step needs --trace PATH");
  if (String(v).trim() === "all") return "all";
  return positiveInt(values, "trace-step", false);
}
