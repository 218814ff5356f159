// Starts a rank group of the given kind whose ranks try to write files,
// runs it once and prints, as one JSON line, what each rank's write of each
// path gave. Usage:
//   deno run <flags> _permission_script.ts <workers|subprocess|in-process> <path>...

import { generateSchedule } from "../../../src/pipeline/schedule/generate.ts";
import { WorkerRankGroup } from "../../../src/pipeline/runtime/worker_rank_group.ts";
import { SubprocessRankGroup } from "../../../src/pipeline/runtime/subprocess_rank_group.ts";
import { InProcessRankGroup } from "../../../src/pipeline/runtime/in_process_rank_group.ts";
import type { RankGroup } from "../../../src/pipeline/runtime/rank_group.ts";
import { createRankExecutor, type ProbeCalls } from "./_write_probe_executor.ts";

const [kind, ...paths] = Deno.args;
const schedule = generateSchedule("1f1b", { ranks: 2, microBatches: 2 });
const options = { ms: 1 };
let group: RankGroup<ProbeCalls>;
try {
  if (kind === "in-process") {
    group = await InProcessRankGroup.create<ProbeCalls>({
      schedule,
      createExecutor: createRankExecutor,
      executorOptions: options,
    });
  } else {
    const create = kind === "subprocess" ? SubprocessRankGroup.create : WorkerRankGroup.create;
    group = await create<ProbeCalls>({
      schedule,
      executor: { module: new URL("./_write_probe_executor.ts", import.meta.url), options },
    });
  }
} catch (e) {
  console.log(JSON.stringify({ startError: (e as Error).message }));
  Deno.exit(0);
}
const events = (await group.run()).events.length;
const writes: Record<string, string[]> = {};
for (const path of paths) {
  writes[path] = [
    await group.call(0, "tryWrite", `${path}.0`),
    await group.call(1, "tryWrite", `${path}.1`),
  ];
}
await group.dispose();
console.log(JSON.stringify({ events, writes }));
