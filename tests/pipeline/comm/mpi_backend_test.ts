// MpiBackend against the CommBackend contract with real `mpirun` jobs (Open
// MPI), over shared memory and over TCP only, plus failure and setup errors.
// The tests that need Open MPI are skipped, saying so once, where it is not
// installed (CI's .ci/run installs it and sets CONVEYOR_REQUIRE_MPI=1; see
// tests/mpi/_open_mpi.ts).

import assert from "node:assert/strict";
import { digest, pattern, SIZES } from "./_mpi_rank.ts";
import { makeTag } from "../../../src/pipeline/runtime/tag.ts";
import { MpiBackend, MpiSetupError } from "../../../src/pipeline/comm/mpi_backend.ts";
import { LIBMPI_ENV, openLibmpi } from "../../../src/pipeline/comm/_mpi_ffi.ts";
import { childEnv, mpirun as runMpirun, SHM, TCP } from "../../mpi/_mpirun.ts";
import { mpiTest } from "../../mpi/_open_mpi.ts";

const RANK_SCRIPT = new URL("./_mpi_rank.ts", import.meta.url).pathname;

interface Job {
  code: number;
  ms: number;
  stdout: string;
  stderr: string;
  pids: Map<number, number>;
  results: Map<number, Record<string, unknown>>;
}

interface JobOptions {
  btl?: string;
  mpirunArgs?: string[];
  timeoutMs?: number;
  /** Called with each stdout line as it arrives (and the lines so far). */
  onLine?: (line: string, job: Job) => void;
}

// Runs `mpirun -n <n> deno run --allow-ffi _mpi_rank.ts <scenario>`.
async function mpirun(n: number, scenario: string, options: JobOptions = {}): Promise<Job> {
  const job: Job = {
    code: -1,
    ms: 0,
    stdout: "",
    stderr: "",
    pids: new Map(),
    results: new Map(),
  };
  let pending = "";
  const end = await runMpirun(n, [Deno.execPath(), "run", "--allow-ffi", RANK_SCRIPT, scenario], {
    btl: options.btl,
    mpirunArgs: options.mpirunArgs,
    timeoutMs: options.timeoutMs ?? 60_000,
    onStdout: (chunk) => {
      job.stdout += chunk;
      pending += chunk;
      let nl: number;
      while ((nl = pending.indexOf("\n")) >= 0) {
        const line = pending.slice(0, nl);
        pending = pending.slice(nl + 1);
        const pid = /^PID (\d+) (\d+)$/.exec(line);
        if (pid !== null) job.pids.set(Number(pid[1]), Number(pid[2]));
        if (line.startsWith("RESULT ")) {
          const r = JSON.parse(line.slice(7));
          job.results.set(r.rank, r);
        }
        options.onLine?.(line, job);
      }
    },
    onStderr: (chunk) => void (job.stderr += chunk),
    rankPids: () => job.pids.values(),
  });
  job.code = end.code;
  job.ms = end.ms;
  assert.equal(job.pids.size, n, `every rank started:\n${job.stdout}\n${job.stderr}`);
  return job;
}

function assertClean(job: Job, n: number): void {
  assert.equal(
    job.code,
    0,
    `the job exits with status 0 by itself:\n${job.stdout}\n${job.stderr}`,
  );
  assert.equal(job.results.size, n, `every rank reported:\n${job.stdout}\n${job.stderr}`);
}

function checkContract(job: Job, n: number): void {
  assertClean(job, n);
  for (let rank = 0; rank < n; rank++) {
    const r = job.results.get(rank)!;
    assert.equal(r.size, n);
    assert.ok((r.tagUpperBound as number) >= 32767, "MPI_TAG_UB is at least the standard's 32767");
    // Every tensor arrives byte-exact under its own tag, whatever the order.
    const expected: Record<string, string> = {};
    for (let q = 0; q < n; q++) {
      if (q === rank) continue;
      for (const space of ["activation", "gradient"] as const) {
        for (let mb = 0; mb < SIZES.length; mb++) {
          const tag = makeTag({ space, microBatch: mb, stage: rank, iteration: 1 });
          const seed = q * 1000 + rank * 100 + mb * 2 + (space === "activation" ? 0 : 1);
          expected[`${q}>${rank}:${tag}`] = digest(pattern(seed, SIZES[mb]));
        }
      }
    }
    assert.deepEqual(r.exchange, expected, `rank ${rank}: byte-exact exchange`);
    assert.equal(r.detached, true, "a transferring send detaches the caller's array");
    const fifo: number[] = [];
    for (let i = 0; i < 24; i++) {
      const len = i % 3 === 0 ? 300_000 : 2;
      fifo.push(i, len, i);
    }
    assert.deepEqual(r.fifo, fifo, `rank ${rank}: same (peer, tag) is FIFO`);
    const prev = (rank - 1 + n) % n;
    assert.deepEqual(r.stringTags, [[3, prev], [2, prev], [1, prev], [0, prev]]);
    assert.deepEqual(r.copy, [41, 42], "a copied send is unaffected by later writes");
    assert.deepEqual(r.view, [7, 8]);
    assert.deepEqual(r.viewNeighbours, [6, 7, 8, 9], "a view's neighbours stay usable");
    assert.deepEqual(r.later, [5, prev], "a promised array is sent once it resolves");
    assert.deepEqual(r.self, [rank, 99]);
    const control = [];
    for (let q = 0; q < n; q++) if (q !== rank) control.push(`ping from ${q} [${q},0.5] ${q}`);
    assert.deepEqual(r.control, control.sort(), `rank ${rank}: control messages`);
    assert.match(r.refused as string, /^TypeError: control message must be structured-cloneable/);
  }
  const barriers = [...job.results.values()].map((r) => r.barrier as Record<string, number>);
  const lastArrival = Math.max(...barriers.map((b) => b.before));
  assert.ok(lastArrival - Math.min(...barriers.map((b) => b.before)) >= 100);
  for (const b of barriers) {
    assert.ok(b.after >= lastArrival - 1, `left the barrier at ${b.after} before ${lastArrival}`);
  }
}

mpiTest("MpiBackend: contract over shared memory, 2 ranks", async () => {
  checkContract(await mpirun(2, "contract", { btl: SHM }), 2);
});

mpiTest(
  "MpiBackend: contract over TCP only, 2 ranks (exits 0: no crash after MPI_Finalize)",
  async () => {
    checkContract(await mpirun(2, "contract", { btl: TCP }), 2);
  },
);

mpiTest("MpiBackend: contract over shared memory, 4 ranks oversubscribed", async () => {
  checkContract(await mpirun(4, "contract", { btl: SHM }), 4);
});

mpiTest("MpiBackend: contract over TCP only, 4 ranks oversubscribed", async () => {
  checkContract(await mpirun(4, "contract", { btl: TCP }), 4);
});

mpiTest(
  "MpiBackend: abort rejects the peers' pending and later operations, naming rank and reason",
  async () => {
    const job = await mpirun(3, "abort", { btl: TCP });
    assertClean(job, 3);
    assert.equal(job.results.get(1)!.late, "communication aborted: boom");
    for (const rank of [0, 2]) {
      const r = job.results.get(rank)!;
      assert.equal(r.error, "CommAbortedError: communication aborted: rank 1: boom");
      assert.equal(r.send, "communication aborted: rank 1: boom");
      assert.equal(r.aborted, true);
    }
  },
);

mpiTest("MpiBackend: an error report names the failing rank to every other rank", async () => {
  const job = await mpirun(3, "error", { btl: SHM });
  assertClean(job, 3);
  for (const rank of [0, 2]) {
    assert.equal(
      job.results.get(rank)!.error,
      "communication aborted: rank 1 failed: kaboom in stage 1",
    );
  }
});

// Starts the kill scenario and SIGKILLs rank 1 once it streams.
async function killRank1(scenario: string, mpirunArgs: string[] = [], btl = SHM): Promise<Job> {
  let killedAt = 0;
  const job = await mpirun(3, scenario, {
    btl,
    mpirunArgs,
    timeoutMs: 40_000,
    onLine: (line, j) => {
      if (line === "STREAMING" && killedAt === 0) {
        killedAt = performance.now();
        Deno.kill(j.pids.get(1)!, "SIGKILL");
      }
    },
  });
  assert.ok(killedAt > 0, `rank 1 never streamed:\n${job.stdout}\n${job.stderr}`);
  const afterKill = performance.now() - killedAt;
  assert.ok(afterKill < 20_000, `the job ended ${afterKill.toFixed(0)} ms after the kill`);
  return job;
}

mpiTest(
  "MpiBackend: a rank killed mid-exchange ends the job (non-zero) and the survivors name it",
  async () => {
    const job = await killRank1("kill");
    assert.notEqual(job.code, 0, "the job fails");
    for (const rank of [0, 2]) {
      assert.match(job.stderr, new RegExp(`conveyor: rank ${rank}: .*lost rank 1 \\(`));
    }
  },
);

mpiTest(
  "MpiBackend: over TCP a killed rank ends the job too (Open MPI may end survivors first)",
  async () => {
    // Open MPI 4.1.4's TCP transport ends a process whose connection to a peer
    // breaks or cannot be made (ob1 treats both as fatal). That can happen
    // inside an MPI call before the survivor's own check has seen the peer's
    // process end; Open MPI's notice then names the survivor's PID, mpirun
    // names the lost rank and ends the other survivors, whose last output
    // mpirun may drop. So here only the job's end and one account are sure.
    const job = await killRank1("kill", [], TCP);
    assert.notEqual(job.code, 0, "the job fails");
    assert.match(
      job.stderr,
      /mpirun noticed that process rank 1 with PID \d+ on node \S+ exited on signal 9/,
    );
    const accounts = [0, 2].filter((rank) =>
      new RegExp(`conveyor: rank ${rank}: .*lost rank 1 \\(`).test(job.stderr) ||
      new RegExp(`PID:\\s+${job.pids.get(rank)}\\n`).test(job.stderr)
    );
    assert.ok(accounts.length >= 1, `no survivor said anything about the loss:\n${job.stderr}`);
  },
);

mpiTest(
  "MpiBackend: without heartbeats the survivors still name the lost rank on mpirun's SIGTERM",
  async () => {
    const job = await killRank1("kill-quiet");
    assert.notEqual(job.code, 0, "the job fails");
    for (const rank of [0, 2]) {
      assert.match(
        job.stderr,
        new RegExp(
          `conveyor: rank ${rank}: SIGTERM \\(mpirun is ending the job\\); lost rank 1 \\(its process \\d+`,
        ),
      );
    }
  },
);

mpiTest(
  "MpiBackend: when mpirun keeps the job going (--enable-recovery), survivors detect the loss and fail",
  async () => {
    // Without detection this job would never end: mpirun waits for the survivors.
    // (Open MPI 4.1.4's mpirun then exits 0 whatever the ranks do, even after
    // MPI_Abort, so the survivors' own failure is what is checked.)
    const job = await killRank1("kill", ["--enable-recovery"]);
    for (const rank of [0, 2]) {
      assert.match(job.stderr, new RegExp(`conveyor: rank ${rank}: lost rank 1 \\(`));
      assert.match(
        job.stdout,
        new RegExp(`FAILED ${rank} communication aborted: rank 1 lost: its process \\d+`),
      );
    }
  },
);

// Rank 1 goes silent while the others wait for it (heartbeats every 200 ms,
// heartbeatTimeoutMs 1000, peerTimeoutMs 3000): stopped or blocked, its
// process uses no CPU and it is lost after heartbeatTimeoutMs; computing
// without a break, after peerTimeoutMs. Either way the job ends, non-zero,
// and every survivor names rank 1.
for (
  const [scenario, why, bound] of [
    [
      "stop",
      /hung: no message for [\d.]+ s and its process \d+ used no CPU for [\d.]+ s \(it is stopped\)/,
      1000,
    ],
    ["block", /hung: no message for [\d.]+ s and its process \d+ used no CPU for [\d.]+ s\)/, 1000],
    [
      "spin",
      /stalled: no message for [\d.]+ s while its process \d+ computes without a break/,
      3000,
    ],
  ] as const
) {
  mpiTest(
    `MpiBackend: a rank that is ${
      scenario === "stop" ? "SIGSTOPped" : scenario === "spin" ? "computing for 30 s" : "blocked"
    } ends the job within its bound, the survivors naming it`,
    async () => {
      let silentAt = 0;
      const failedAt = new Map<number, number>();
      const job = await mpirun(3, scenario, {
        timeoutMs: 30_000,
        onLine: (line, j) => {
          if (line === "SILENT" && silentAt === 0) {
            silentAt = performance.now();
            if (scenario === "stop") Deno.kill(j.pids.get(1)!, "SIGSTOP");
          }
          const m = /^FAILED (\d+) /.exec(line);
          if (m !== null) failedAt.set(Number(m[1]), performance.now());
        },
      });
      assert.notEqual(job.code, 0, "the job fails");
      for (const rank of [0, 2]) {
        assert.match(
          job.stderr,
          new RegExp(`conveyor: rank ${rank}: lost rank 1 \\((?:${why.source}|.*seen by rank)`),
        );
        assert.match(job.stdout, new RegExp(`FAILED ${rank} communication aborted: rank 1 lost: `));
        const ms = failedAt.get(rank)! - silentAt;
        // Liveness: the message says which detection fired; the ceiling leaves room for a
        // loaded machine and stays under the 30 s a spinning rank would take to end by itself.
        assert.ok(
          ms < bound + 15_000,
          `rank ${rank} failed ${ms.toFixed(0)} ms after rank 1 went silent`,
        );
        console.log(
          `${scenario}: rank ${rank} failed ${ms.toFixed(0)} ms after rank 1 went silent`,
        );
      }
      assert.match(job.stderr, why, "at least one survivor saw it itself");
    },
  );
}

mpiTest("MpiBackend: a rank that never calls close finalises MPI at exit (status 0)", async () => {
  const job = await mpirun(3, "noclose", { btl: TCP });
  assertClean(job, 3);
  for (const [rank, r] of job.results) assert.equal(r.got, (rank + 2) % 3);
});

mpiTest(
  "MpiBackend: MPI starts once per process; a second init after close is refused",
  async () => {
    const job = await mpirun(2, "setup", { btl: SHM });
    assertClean(job, 2);
    for (const r of job.results.values()) {
      assert.match(r.again as string, /^MpiSetupError: MPI already ran and ended in this process/);
      assert.match(r.library as string, /libmpi/);
    }
  },
);

// Runs the rank script without mpirun; returns the exit code and stderr.
async function runAlone(
  permissions: string[],
  env: Record<string, string> = {},
): Promise<{ code: number; stderr: string }> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--no-prompt", ...permissions, RANK_SCRIPT, "setup"],
    env: childEnv(env),
    clearEnv: true,
    stdout: "piped",
    stderr: "piped",
  }).output();
  return { code: out.code, stderr: new TextDecoder().decode(out.stderr) };
}

Deno.test("MpiBackend: setup errors are one clear line (FFI permission, libmpi not found or not Open MPI)", async () => {
  const noFfi = await runAlone([]);
  assert.notEqual(noFfi.code, 0);
  assert.match(noFfi.stderr, /MpiSetupError: MpiBackend needs FFI permission .*--allow-ffi/);

  const missing = await runAlone(["--allow-ffi"], { [LIBMPI_ENV]: "/nonexistent/libmpi.so.40" });
  assert.notEqual(missing.code, 0);
  assert.match(
    missing.stderr,
    /MpiSetupError: libmpi not found \(CONVEYOR_LIBMPI=\/nonexistent\/libmpi\.so\.40\) \(.*No such file/,
  );

  const notMpi = await runAlone(["--allow-ffi"], { [LIBMPI_ENV]: "libc.so.6" });
  assert.notEqual(notMpi.code, 0);
  assert.match(notMpi.stderr, /MpiSetupError: libc\.so\.6 is not a usable Open MPI libmpi/);
});

mpiTest("MpiBackend: not under mpirun (libmpi found) is one clear line", async () => {
  const alone = await runAlone(["--allow-ffi"]);
  assert.notEqual(alone.code, 0);
  assert.match(
    alone.stderr,
    /MpiSetupError: not launched under mpirun \(OMPI_COMM_WORLD_SIZE and PMIX_RANK are unset\): run under mpirun/,
  );
});

Deno.test("MpiBackend: the libmpi search names every path tried and the variable", () => {
  assert.throws(
    () => openLibmpi({ env: null, candidates: ["/nope/libmpi.so.40", "libnotmpi.so.99"] }),
    (e: Error) =>
      e instanceof MpiSetupError &&
      e.message.startsWith(
        "libmpi not found (CONVEYOR_LIBMPI unset, tried /nope/libmpi.so.40, libnotmpi.so.99): " +
          "install Open MPI",
      ),
  );
});

Deno.test("MpiBackend: bad options are refused before anything starts", async () => {
  await assert.rejects(
    MpiBackend.init({ pollMaxUs: 0 }),
    /RangeError: pollMaxUs must be a number >= 25, got 0/,
  );
  await assert.rejects(
    MpiBackend.init({ heartbeatIntervalMs: -1 }),
    /heartbeatIntervalMs must be a number >= 0, got -1/,
  );
  await assert.rejects(
    MpiBackend.init({ pollSpinUs: NaN }),
    /pollSpinUs must be a number >= 0, got NaN/,
  );
  await assert.rejects(
    MpiBackend.init({ heartbeatTimeoutMs: 0 }),
    /heartbeatTimeoutMs must be a number >= 1, got 0/,
  );
});
