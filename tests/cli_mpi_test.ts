// `cli.ts train --comm mpi` and PipelineParallelModel with rankGroup "mpi"
// in real mpirun jobs (Open MPI): every schedule at P = 2 and 4 equals
// --ranks 1, over shared memory and over TCP only (the stand-in for
// separate hosts); a rank killed mid-training ends the job within 20 s,
// non-zero, the survivors naming it; bad launches are one line. Every job
// is checked to leave no process behind. The tests that start mpirun jobs
// are skipped, saying so once, where Open MPI is not installed (CI's .ci/run
// installs it and sets CONVEYOR_REQUIRE_MPI=1; see mpi/_open_mpi.ts).

import assert from "node:assert/strict";
import { cli } from "./_cli.ts";
import { SCHEDULE_NAMES } from "../src/pipeline/schedule/generate.ts";
import { childEnv, mpirunJob, SHM, TCP } from "./mpi/_mpirun.ts";
import { mpiTest } from "./mpi/_open_mpi.ts";

const ROOT = new URL("../", import.meta.url).pathname;
const CLI = `${ROOT}cli.ts`;
const SCHEDULES = `${ROOT}tests/mpi/_train_schedules.ts`;
const MODEL_RANK = `${ROOT}tests/mpi/_model_rank.ts`;
// The same model at every P: 5 blocks (8 layers) hold 4 ranks × 2 stages.
// `train` with 1F1B at P = 2 as MPI processes (the rest of the flags per test).
const MPI_1F1B_P2 = ["train", "--comm", "mpi", "--schedule", "1f1b", "--ranks", "2"];
const TRAIN = [
  "--microbatches",
  "8",
  "--layers",
  "5",
  "--steps",
  "3",
  "--seed",
  "4",
  "--backend",
  "cpu",
  "--json",
];

function parseJsonLines(out: string) {
  const lines = out.trim().split("\n").map((l) => JSON.parse(l));
  const last = lines.pop();
  return { steps: lines, last };
}

// --ranks 1 through the same CLI, in this process: single-device training
// (tests/cli_train_test.ts checks it against a plain training loop).
const reference = await (async () => {
  const r = await cli("train", "--schedule", "1f1b", "--ranks", "1", "--in-process", ...TRAIN);
  assert.equal(r.code, 0);
  return parseJsonLines(r.out);
})();

// Same tolerances as tests/cli_train_test.ts: losses 1e-6, parameter sums 1e-5 (relative).
function assertAgrees(out: string, label: string): void {
  const got = parseJsonLines(out);
  assert.equal(got.steps.length, 3, `${label}: one line per step, once`);
  got.steps.forEach((s, i) => {
    assert.deepEqual(Object.keys(s), ["step", "loss", "bubble", "makespanMs", "lr"]);
    assert.equal(s.step, i + 1);
    assert.ok(s.bubble >= 0 && s.bubble < 1 && s.makespanMs > 0, `${label}: ${JSON.stringify(s)}`);
    const rel = Math.abs(s.loss - reference.steps[i].loss) / reference.steps[i].loss;
    assert.ok(rel <= 1e-6, `${label} step ${i + 1}: loss ${s.loss} vs ${reference.steps[i].loss}`);
  });
  assert.deepEqual(Object.keys(got.last), ["paramSum", "paramSumSq"]);
  for (const k of ["paramSum", "paramSumSq"] as const) {
    const rel = Math.abs(got.last[k] - reference.last[k]) / Math.abs(reference.last[k]);
    assert.ok(rel <= 1e-5, `${label}: ${k} ${got.last[k]} vs ${reference.last[k]} (rel ${rel})`);
  }
}

function deno(script: string, ...args: string[]): string[] {
  return [Deno.execPath(), "run", "-A", script, ...args];
}

mpiTest(
  "clipping under mpirun (no barrier, a clipped step redone on every process) equals single-device clipGradNorm",
  async () => {
    const job = await mpirunJob(2, deno(MODEL_RANK, "zb-h2", "0.5"));
    assert.equal(job.code, 0, job.stderr);
    const results = job.stdout.trim().split("\n").filter((l) => l.startsWith("RESULT "))
      .map((l) => JSON.parse(l.slice(7))).sort((a, b) => a.rank - b.rank);
    assert.deepEqual(results.map((r) => r.rank), [0, 1]);
    for (const r of results) {
      assert.ok(r.refNorms.every((n: number) => n > 0.5), `every step clips: ${r.refNorms}`);
      assert.ok(r.normError <= 1e-6, `rank ${r.rank}: pre-clip norms off by ${r.normError}`);
      assert.ok(r.lossError <= 1e-6, `rank ${r.rank}: losses off by ${r.lossError}`);
      assert.ok(r.paramWorst <= 1e-5, `rank ${r.rank}: parameters off by ${r.paramWorst}`);
      assert.equal(r.savedDigest, results[0].savedDigest, "the same file on every rank");
    }
  },
);

for (const [btl, where] of [[SHM, "shared memory"], [TCP, "TCP only"]] as const) {
  for (const p of [2, 4]) {
    mpiTest(
      `cli train --comm mpi, P = ${p} over ${where}: every schedule equals --ranks 1`,
      async () => {
        const job = await mpirunJob(
          p,
          deno(SCHEDULES, ...SCHEDULE_NAMES, "--", "--ranks", String(p), ...TRAIN),
          { btl },
        );
        assert.equal(job.code, 0, job.stderr);
        const runs = job.stdout.trim().split("\n").map((l) => JSON.parse(l));
        assert.deepEqual(
          runs.map((r) => r.schedule),
          [...SCHEDULE_NAMES],
          "one report per schedule",
        );
        for (const r of runs) {
          assert.equal(r.code, 0, `${r.schedule}: exit code`);
          assertAgrees(r.out, `${r.schedule} P=${p} ${where}`);
        }
        // Every rank of every model named its device once.
        assert.equal(
          job.stderr.match(/conveyor: rank \d+ of \d+: /g)?.length,
          p * SCHEDULE_NAMES.length,
        );
      },
    );
  }
}

mpiTest(
  "mpirun -n 2 deno run -A cli.ts train --comm mpi prints the --json contract once, from rank 0",
  async () => {
    for (const [p, schedule, btl] of [[2, "1f1b", SHM], [4, "zb-v", TCP]] as const) {
      const job = await mpirunJob(
        p,
        deno(CLI, "train", "--comm", "mpi", "--schedule", schedule, "--ranks", String(p), ...TRAIN),
        { btl },
      );
      assert.equal(job.code, 0, job.stderr);
      assertAgrees(job.stdout, `cli.ts ${schedule} P=${p}`);
      assert.deepEqual(
        [...job.pids.keys()].sort(),
        [...Array(p).keys()],
        "every rank's start line",
      );
      assert.match(
        job.stderr,
        /conveyor: rank 1 of \d: host \S+, pid \d+, local rank 1, backend cpu \(CPU/,
      );
    }
  },
);

mpiTest(
  "under mpirun each process's backend notice names its rank (was: the same line once per process, no rank)",
  async () => {
    const job = await mpirunJob(
      2,
      deno(CLI, ...MPI_1F1B_P2, "--microbatches", "2", "--steps", "1", "--backend", "auto"),
      { btl: SHM },
    );
    assert.equal(job.code, 0, job.stderr);
    for (const rank of [0, 1]) {
      assert.match(job.stderr, new RegExp(`conveyor: rank ${rank}: backend "auto" chose `));
    }
    assert.doesNotMatch(job.stderr, /^conveyor: backend "auto"/m);
  },
);

mpiTest(
  "the model API under mpirun: batches on rank 0 only, save, load and predict on every rank",
  async () => {
    const job = await mpirunJob(3, deno(MODEL_RANK, "zb-h1"));
    assert.equal(job.code, 0, job.stderr);
    const results = job.stdout.trim().split("\n").filter((l) => l.startsWith("RESULT "))
      .map((l) => JSON.parse(l.slice(7))).sort((a, b) => a.rank - b.rank);
    assert.deepEqual(results.map((r) => r.rank), [0, 1, 2]);
    for (const r of results) {
      assert.equal(r.rankGroup, "mpi");
      assert.ok(r.lossError <= 1e-6, `rank ${r.rank}: losses off by ${r.lossError}`);
      assert.ok(r.paramWorst <= 1e-5, `rank ${r.rank}: parameters off by ${r.paramWorst}`);
      assert.equal(r.busyRanks, 3, "every rank's events on every rank");
      assert.equal(r.reloadedIsInitial, true, "the initial weights saved back byte for byte");
      assert.equal(r.predictEqual, true, "predict equals the single-device forward");
      assert.deepEqual(r.infoRanks, [0, 1, 2]);
      assert.equal(r.savedDigest, results[0].savedDigest, "the same file on every rank");
    }
  },
);

for (const [btl, where] of [[SHM, "shared memory"], [TCP, "TCP only"]] as const) {
  mpiTest(
    `a rank SIGKILLed mid-training over ${where} ends the job within 20 s, non-zero, the survivor naming it`,
    async () => {
      let killedAt = 0;
      const job = await mpirunJob(
        2,
        deno(
          CLI,
          ...MPI_1F1B_P2,
          "--microbatches",
          "4",
          "--steps",
          "100000",
          "--dim",
          "32",
          "--backend",
          "cpu",
          "--json",
        ),
        {
          btl,
          timeoutMs: 60_000,
          onOutput: (j) => {
            // Kill rank 1 once training is under way (rank 0 printed a step).
            const pid = j.pids.get(1);
            if (killedAt === 0 && pid !== undefined && j.stdout.includes('"step":2,')) {
              killedAt = performance.now();
              Deno.kill(pid, "SIGKILL");
            }
          },
        },
      );
      assert.ok(killedAt > 0, `rank 1 was killed:\n${job.stdout}\n${job.stderr}`);
      const endedIn = job.endedAt - killedAt;
      assert.ok(endedIn < 20_000, `the job ended ${endedIn.toFixed(0)} ms after the kill`);
      assert.notEqual(job.code, 0, "the job fails");
      // Over shared memory rank 0 sees rank 1's process end; over TCP Open MPI
      // may end rank 0 first, and mpirun names the killed rank itself.
      assert.match(
        job.stderr,
        /rank 0: lost rank 1 \(its process \d+ on \S+ has ended[;)]|rank 1 lost|process rank 1 with PID \d+ on node \S+ exited on signal 9/,
      );
    },
  );
}

mpiTest(
  "a rank SIGSTOPped mid-training ends the job within heartbeatTimeoutMs (5 s), non-zero, the survivor naming it",
  async () => {
    let stoppedAt = 0;
    const job = await mpirunJob(
      2,
      deno(
        CLI,
        ...MPI_1F1B_P2,
        "--microbatches",
        "4",
        "--steps",
        "100000",
        "--backend",
        "cpu",
        "--json",
      ),
      {
        timeoutMs: 60_000,
        onOutput: (j) => {
          const pid = j.pids.get(1);
          if (stoppedAt === 0 && pid !== undefined && j.stdout.includes('"step":2,')) {
            stoppedAt = performance.now();
            Deno.kill(pid, "SIGSTOP");
          }
        },
      },
    );
    assert.ok(stoppedAt > 0, `rank 1 was stopped:\n${job.stdout}\n${job.stderr}`);
    const endedIn = job.endedAt - stoppedAt;
    // Liveness: the survivor's message names the heartbeat; room for a loaded machine.
    assert.ok(endedIn < 30_000, `the job ended ${endedIn.toFixed(0)} ms after the stop`);
    assert.notEqual(job.code, 0, "the job fails");
    assert.match(
      job.stderr,
      /conveyor: rank 0: lost rank 1 \(hung: no message for [\d.]+ s and its process \d+ used no CPU for [\d.]+ s \(it is stopped\)\)/,
    );
    console.log(`a stopped rank: the job ended ${endedIn.toFixed(0)} ms after SIGSTOP`);
  },
);

// Every process must be started with the same arguments: a rank given
// another --seed (other weights, other batches) or --batch is refused at
// start, before any step, naming the flag.
for (const [flag, mine, theirs] of [["--seed", "1", "2"], ["--batch", "8", "16"]]) {
  mpiTest(
    `mpirun with rank 1 given another ${flag}: every rank refuses at start, naming ${flag}`,
    async () => {
      const args = (v: string) =>
        deno(
          CLI,
          ...MPI_1F1B_P2,
          "--microbatches",
          "8",
          "--layers",
          "5",
          "--steps",
          "3",
          "--backend",
          "cpu",
          "--json",
          flag,
          v,
        );
      // MPMD: one command line per rank.
      const job = await mpirunJob(1, [...args(mine), ":", "-n", "1", ...args(theirs)], {
        timeoutMs: 60_000,
      });
      assert.notEqual(job.code, 0, `the job fails:\n${job.stdout}\n${job.stderr}`);
      assert.doesNotMatch(job.stdout, /"step"/, "no step ran");
      assert.match(
        job.stderr,
        new RegExp(
          `rank\\(s\\) 1 planned a different pipeline than rank 0: .*rank 1's ${flag}: ${theirs} ` +
            `\\(rank 0's: ${mine}\\).*: every process must run the same script with the same arguments`,
        ),
      );
    },
  );
}

const BAD_LAUNCH = [...MPI_1F1B_P2, "--microbatches", "2"];

Deno.test("bad MPI launches without Open MPI are one clear line each, exit 2", async () => {
  const flags = BAD_LAUNCH;
  // mpirun not on PATH.
  const noPath = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", CLI, ...flags],
    env: childEnv({ PATH: "/nonexistent" }),
    clearEnv: true,
    stderr: "piped",
    stdout: "piped",
    signal: AbortSignal.timeout(60_000),
  }).output();
  const noPathErr = new TextDecoder().decode(noPath.stderr);
  assert.equal(noPath.code, 2);
  assert.match(
    noPathErr,
    /^error: --comm mpi needs Open MPI's mpirun, which is not on PATH: install Open MPI/,
  );
  assert.equal(noPathErr.trim().split("\n").length, 1);
  // --in-process and --comm mpi; an unknown transport.
  const both = await cli(...flags, "--in-process");
  assert.equal(both.code, 2);
  assert.match(both.err, /--in-process contradicts --comm mpi/);
  const tcp = await cli(...flags.slice(0, 2), "tcp", ...flags.slice(3));
  assert.equal(tcp.code, 2);
  assert.match(tcp.err, /--comm must be workers, in-process or mpi, got "tcp"/);
});

mpiTest("bad MPI launches with Open MPI are one clear line each, exit 2", async () => {
  const flags = BAD_LAUNCH;
  // Not under mpirun (this process; mpirun is on PATH).
  const alone = await cli(...flags);
  assert.equal(alone.code, 2);
  assert.match(
    alone.err,
    /^error: --comm mpi needs one process per rank started by mpirun .*mpirun -n 2 deno run -A cli.ts train --comm mpi --ranks 2/,
  );
  assert.equal(alone.err.trim().split("\n").length, 1);
  // Under mpirun: process count other than --ranks; libmpi not found; no FFI permission.
  const cases: [number, string[], Record<string, string>, RegExp][] = [
    [
      3,
      ["-A"],
      {},
      /^error: mpirun started 3 processes but --ranks is 2: .*mpirun -n 2, or --ranks 3/m,
    ],
    [
      2,
      ["-A"],
      { CONVEYOR_LIBMPI: "/nope/libmpi.so" },
      /^error: libmpi not found \(CONVEYOR_LIBMPI=\/nope\/libmpi.so\)/m,
    ],
    [
      2,
      ["--allow-read", "--allow-env"],
      {},
      /^error: MpiBackend needs FFI permission .*--allow-ffi$/m,
    ],
  ];
  for (const [n, perms, env, re] of cases) {
    const job = await mpirunJob(n, [Deno.execPath(), "run", ...perms, CLI, ...flags], { env });
    assert.equal(job.code, 2, job.stderr);
    assert.match(job.stderr, re);
    assert.equal(
      job.stderr.match(/^error: /gm)?.length,
      1,
      `one line, from rank 0:\n${job.stderr}`,
    );
  }
});
