// Data × pipeline parallelism under real mpirun jobs (Open MPI): D·P
// processes, process k·P + p running pipeline rank p of replica k.
// `cli.ts train --comm mpi --data-parallel D --ranks P` at (D, P) = (2, 2)
// and (2, 1) over shared memory, and (2, 2) over TCP only, equals --ranks 1
// (single-device training) and gives the same bits as the in-process group
// with the same D and P; the model API does too, weight by weight; a killed
// process of a (2, 2) job ends it within 20 s naming the lost rank; a
// process count other than D·P is one line. Skipped, saying so once, where
// Open MPI is not installed (see mpi/_open_mpi.ts).

import assert from "node:assert/strict";
import { cli } from "./_cli.ts";
import { mpirun as runMpirun, SHM, TCP } from "./mpi/_mpirun.ts";
import { mpiTest } from "./mpi/_open_mpi.ts";

const ROOT = new URL("../", import.meta.url).pathname;
const CLI = `${ROOT}cli.ts`;
const DP_RANK = `${ROOT}tests/mpi/_data_parallel_rank.ts`;
// --batch given: --ranks 1 trains on the same 8 sequences a step.
const TRAIN = [
  "--schedule",
  "1f1b",
  "--microbatches",
  "4",
  "--batch",
  "8",
  "--layers",
  "3",
  "--steps",
  "3",
  "--seed",
  "4",
  "--backend",
  "cpu",
  "--json",
];

interface Job {
  code: number;
  endedAt: number;
  stdout: string;
  stderr: string;
  /** Rank → pid, from each rank's start line. */
  pids: Map<number, number>;
}

// `mpirun -n <n> <program>`, collecting the output and every rank's pid.
async function mpirun(
  n: number,
  program: string[],
  options: { btl?: string; timeoutMs?: number; onOutput?: (job: Job) => void } = {},
): Promise<Job> {
  const job: Job = { code: -1, endedAt: 0, stdout: "", stderr: "", pids: new Map() };
  const grew = (into: "stdout" | "stderr") => (text: string) => {
    job[into] += text;
    for (const m of job.stderr.matchAll(/conveyor: rank (\d+) of \d+: host [^,]*, pid (\d+)/g)) {
      job.pids.set(Number(m[1]), Number(m[2]));
    }
    options.onOutput?.(job);
  };
  const end = await runMpirun(n, program, {
    btl: options.btl,
    timeoutMs: options.timeoutMs ?? 120_000,
    onStdout: grew("stdout"),
    onStderr: grew("stderr"),
    rankPids: () => job.pids.values(),
  });
  return Object.assign(job, end);
}

function deno(script: string, ...args: string[]): string[] {
  return [Deno.execPath(), "run", "-A", script, ...args];
}

function jsonLines(out: string): Record<string, number>[] {
  return out.trim().split("\n").map((l) => JSON.parse(l));
}

async function inProcess(...flags: string[]): Promise<Record<string, number>[]> {
  const r = await cli("train", "--in-process", ...flags, ...TRAIN);
  assert.equal(r.code, 0, r.err);
  return jsonLines(r.out);
}

// Single-device training through the same CLI, in this process.
const single = await inProcess("--ranks", "1");

for (
  const [d, p, btl, where] of [[2, 2, SHM, "shared memory"], [2, 1, SHM, "shared memory"], [
    2,
    2,
    TCP,
    "TCP only",
  ]] as const
) {
  mpiTest(
    `mpirun -n ${
      d * p
    } cli.ts train --comm mpi --data-parallel ${d} --ranks ${p} over ${where}: single-device training, the in-process bits`,
    async () => {
      const flags = ["--data-parallel", String(d), "--ranks", String(p)];
      const job = await mpirun(d * p, deno(CLI, "train", "--comm", "mpi", ...flags, ...TRAIN), {
        btl,
      });
      assert.equal(job.code, 0, job.stderr);
      assert.deepEqual([...job.pids.keys()].sort(), [...Array(d * p).keys()], "every rank started");
      const got = jsonLines(job.stdout);
      assert.equal(got.length, 4, "three steps and the parameter sums, printed once (rank 0)");
      for (let i = 0; i < 3; i++) {
        assert.equal(got[i].step, i + 1);
        const rel = Math.abs(got[i].loss - single[i].loss) / single[i].loss;
        assert.ok(rel <= 1e-6, `step ${i + 1}: loss ${got[i].loss} vs ${single[i].loss}`);
      }
      // The sums of the final weights (a plain sum cancels: 1e-5 as in cli_mpi_test.ts).
      for (const [k, tol] of [["paramSumSq", 1e-6], ["paramSum", 1e-5]] as const) {
        const rel = Math.abs(got[3][k] - single[3][k]) / Math.abs(single[3][k]);
        assert.ok(rel <= tol, `${k} ${got[3][k]} vs ${single[3][k]} (rel ${rel})`);
      }
      // The same fixed-order average as the in-process group: the same bits.
      const same = await inProcess(...flags);
      assert.deepEqual(got.map((l) => l.loss), same.map((l) => l.loss));
      assert.deepEqual(got[3], same[3]);
    },
  );
}

mpiTest(
  "the model API with rankGroup mpi and dataParallel 2 under mpirun -n 4: single-device weights within 1e-6, the in-process file bit for bit",
  async () => {
    const job = await mpirun(4, deno(DP_RANK, "2", "2", "zb-h1"));
    assert.equal(job.code, 0, job.stderr);
    const results = job.stdout.trim().split("\n").filter((l) => l.startsWith("RESULT "))
      .map((l) => JSON.parse(l.slice(7))).sort((a, b) => a.rank - b.rank);
    assert.deepEqual(results.map((r) => r.rank), [0, 1, 2, 3]);
    const zero = results[0];
    assert.ok(zero.lossError <= 1e-6, `losses off by ${zero.lossError}`);
    assert.ok(zero.paramWorst <= 1e-6, `weights off by ${zero.paramWorst}`);
    assert.equal(zero.lossesEqualInProcess, true, "the in-process group's losses, bit for bit");
    assert.equal(zero.fileEqualsInProcess, true, "the in-process group's weights, bit for bit");
    for (const r of results) {
      assert.deepEqual(r.losses, zero.losses, `rank ${r.rank}: the same losses`);
      assert.equal(r.savedDigest, zero.savedDigest, `rank ${r.rank}: the same file`);
      assert.equal(r.busyRanks, 4, "every global rank's events on every process");
    }
  },
);

mpiTest(
  "a process SIGKILLed mid-training of a (2, 2) job ends it within 20 s, non-zero, naming the lost rank",
  async () => {
    let killedAt = 0;
    const job = await mpirun(
      4,
      deno(CLI, "train", "--comm", "mpi", "--data-parallel", "2", "--ranks", "2", ...[
        "--schedule",
        "1f1b",
        "--microbatches",
        "2",
        "--steps",
        "100000",
        "--dim",
        "32",
        "--backend",
        "cpu",
        "--json",
      ]),
      {
        timeoutMs: 60_000,
        onOutput: (j) => {
          // Kill replica 1's pipeline rank 1 (global rank 3) once training is under way.
          const pid = j.pids.get(3);
          if (killedAt === 0 && pid !== undefined && j.stdout.includes('"step":2,')) {
            killedAt = performance.now();
            Deno.kill(pid, "SIGKILL");
          }
        },
      },
    );
    assert.ok(killedAt > 0, `rank 3 was killed:\n${job.stdout}\n${job.stderr}`);
    const endedIn = job.endedAt - killedAt;
    assert.ok(endedIn < 20_000, `the job ended ${endedIn.toFixed(0)} ms after the kill`);
    assert.notEqual(job.code, 0, "the job fails");
    assert.match(
      job.stderr,
      /rank \d: lost rank 3 \(its process \d+ on \S+ has ended\)|rank 3 lost|process rank 3 with PID \d+ on node \S+ exited on signal 9/,
    );
  },
);

mpiTest("mpirun -n 3 with --data-parallel 2 --ranks 2: one clear line, exit 2", async () => {
  const job = await mpirun(
    3,
    deno(CLI, "train", "--comm", "mpi", "--data-parallel", "2", "--ranks", "2", ...TRAIN),
    { timeoutMs: 60_000 },
  );
  assert.equal(job.code, 2, job.stderr);
  assert.match(
    job.stderr,
    /^error: mpirun started 3 processes but --data-parallel 2 × --ranks 2 needs 4: .*\(mpirun -n 4\)$/m,
  );
  assert.equal(job.stderr.match(/^error: /gm)?.length, 1, `one line, from rank 0:\n${job.stderr}`);
});
