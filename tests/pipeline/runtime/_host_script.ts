// Starts a subprocess rank group, prints "running <host pid>" and runs a
// long schedule; prints, as one JSON line, what the run ended with. The
// test kills this process or its host meanwhile. Usage:
//   deno run -A _host_script.ts

import { generateSchedule } from "../../../src/pipeline/schedule/generate.ts";
import { SubprocessRankGroup } from "../../../src/pipeline/runtime/subprocess_rank_group.ts";
import { SYNTHETIC_EXECUTOR_URL } from "../../../src/pipeline/testing/synthetic_executor.ts";

function hostPid(): number {
  for (const e of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(e.name)) continue;
    try {
      const stat = Deno.readTextFileSync(`/proc/${e.name}/stat`);
      if (Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) !== Deno.pid) continue;
      if (Deno.readTextFileSync(`/proc/${e.name}/cmdline`).includes("subprocess_host")) {
        return Number(e.name);
      }
    } catch { /* gone */ }
  }
  throw new Error("no host process");
}

const group = await SubprocessRankGroup.create({
  schedule: generateSchedule("1f1b", { ranks: 2, microBatches: 2 }),
  executor: { module: SYNTHETIC_EXECUTOR_URL, options: { ms: 50 } },
});
const run = group.run({ iterations: 1000 });
console.log(`running ${hostPid()}`);
try {
  await run;
  console.log(JSON.stringify({ ran: true }));
} catch (e) {
  console.log(JSON.stringify({ name: (e as Error).name, error: (e as Error).message }));
}
await group.dispose();
