// One rank of an mpirun job that runs `cli.ts train --comm mpi` once per
// schedule named on the command line, in this one process (later models
// reuse the process's MPI transport), so that a test covers every schedule
// with one job. Arguments: the schedules, then `--`, then the train flags
// shared by all. Rank 0 prints one JSON line per schedule:
// {"schedule", "code", "out"}, `out` being what `cli.ts train` printed.

import { main } from "../../cli.ts";

const sep = Deno.args.indexOf("--");
const schedules = Deno.args.slice(0, sep);
const flags = Deno.args.slice(sep + 1);
let worst = 0;
for (const schedule of schedules) {
  let out = "";
  const code = await main(["train", "--comm", "mpi", "--schedule", schedule, ...flags], {
    out: (t) => void (out += t),
    err: (t) => void Deno.stderr.writeSync(new TextEncoder().encode(t)),
  });
  worst = Math.max(worst, code);
  if (out !== "") console.log(JSON.stringify({ schedule, code, out }));
}
Deno.exit(worst);
