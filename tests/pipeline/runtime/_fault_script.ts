// Runs one synthetic pipeline with one injected fault and prints, as JSON
// lines, what the run failed with and what dispose said; then it ends by
// itself, or not (the fault suite checks which). Usage:
//   deno run -A _fault_script.ts <workers|subprocess|in-process> <fault> <at>

import { generateSchedule } from "../../../src/pipeline/schedule/generate.ts";
import { WorkerRankGroup } from "../../../src/pipeline/runtime/worker_rank_group.ts";
import { SubprocessRankGroup } from "../../../src/pipeline/runtime/subprocess_rank_group.ts";
import { InProcessRankGroup } from "../../../src/pipeline/runtime/in_process_rank_group.ts";
import type { RankGroup } from "../../../src/pipeline/runtime/rank_group.ts";
import type { FaultKind } from "../../../src/pipeline/runtime/fault_injection.ts";
import {
  createSyntheticExecutor,
  SYNTHETIC_EXECUTOR_URL,
} from "../../../src/pipeline/testing/synthetic_executor.ts";

const [kind, fault, at] = Deno.args;
const schedule = generateSchedule("zb-h1", { ranks: 2, microBatches: 2 });
const spec = { at, fault: fault as FaultKind };
// Long enough that a loaded machine (a rank without CPU for half a second) is not taken for a
// hang or a stall, short enough that the block and loop faults end soon.
const timeouts = { heartbeatMs: 1000, stallTimeoutMs: 2500 };
const executor = { module: SYNTHETIC_EXECUTOR_URL, options: { ms: 1 } };
let group: RankGroup;
if (kind === "in-process") {
  group = await InProcessRankGroup.create({
    schedule,
    createExecutor: createSyntheticExecutor,
    executorOptions: { ms: 1 },
    policy: { faultInjection: spec },
  });
} else {
  const create = kind === "subprocess" ? SubprocessRankGroup.create : WorkerRankGroup.create;
  group = await create({
    schedule,
    executor,
    heartbeatIntervalMs: 100,
    policy: { faultInjection: spec, ...timeouts },
  });
}
const t = performance.now();
try {
  await group.run({ iterations: 1 });
  console.log(JSON.stringify({ ran: true }));
} catch (e) {
  console.log(JSON.stringify({
    error: (e as Error).message,
    name: (e as Error).name,
    ms: Math.round(performance.now() - t),
  }));
}
try {
  await group.dispose();
  console.log(JSON.stringify({ disposed: true }));
} catch (e) {
  console.log(JSON.stringify({ disposeError: (e as Error).message }));
}
