import assert from "node:assert/strict";
import { cli } from "./_cli.ts";
import { generateSchedule, SCHEDULE_NAMES } from "../src/pipeline/schedule/generate.ts";
import { scheduleFromCsv } from "../src/pipeline/schedule/schedule_csv.ts";
import { simulate } from "../src/pipeline/analysis/simulate.ts";
import { allElements, parseXml } from "./pipeline/_xml.ts";

function plain(
  actions: readonly (readonly { kind: string; stage: number; microBatch: number }[])[],
) {
  return actions.map((row) =>
    row.map((a) => ({ kind: a.kind, stage: a.stage, microBatch: a.microBatch }))
  );
}

const P4M8 = ["--ranks", "4", "--microbatches", "8"];

Deno.test("cli schedule --format json: exact shape, actions equal generateSchedule's", async () => {
  for (const name of SCHEDULE_NAMES) {
    const r = await cli("schedule", "--schedule", name, ...P4M8);
    assert.equal(r.code, 0, `${name}: ${r.err}`);
    assert.equal(r.err, "");
    assert.ok(r.out.endsWith("\n"));
    const j = JSON.parse(r.out);
    assert.deepEqual(Object.keys(j), [
      "schedule",
      "ranks",
      "microBatches",
      "stagesPerRank",
      "actions",
    ]);
    assert.equal(j.schedule, name);
    assert.equal(j.ranks, 4);
    assert.equal(j.microBatches, 8);
    assert.ok(Number.isInteger(j.stagesPerRank) && j.stagesPerRank >= 1);
    assert.ok(Array.isArray(j.actions));
    assert.equal(j.actions.length, 4, "one list per rank");
    for (const row of j.actions) {
      assert.ok(Array.isArray(row));
      for (const a of row) {
        assert.deepEqual(Object.keys(a), ["kind", "stage", "microBatch"]);
        assert.ok(["F", "B", "I", "W"].includes(a.kind));
        assert.ok(Number.isInteger(a.stage) && Number.isInteger(a.microBatch));
      }
    }
    const s = generateSchedule(name, { ranks: 4, microBatches: 8 });
    assert.equal(j.stagesPerRank, s.stagesPerRank);
    assert.deepEqual(j.actions, plain(s.actions), name);
  }
});

Deno.test("cli schedule: --virtual-stages reaches the generator", async () => {
  const r = await cli(
    "schedule",
    "--schedule",
    "interleaved-1f1b",
    ...P4M8,
    "--virtual-stages",
    "4",
  );
  assert.equal(r.code, 0, r.err);
  const j = JSON.parse(r.out);
  assert.equal(j.stagesPerRank, 4);
  const s = generateSchedule("interleaved-1f1b", { ranks: 4, microBatches: 8, stagesPerRank: 4 });
  assert.deepEqual(j.actions, plain(s.actions));
  assert.equal(new Set(j.actions.flat().map((a: { stage: number }) => a.stage)).size, 16);
});

Deno.test("cli schedule --format csv round-trips to the same actions", async () => {
  for (const name of ["1f1b", "zb-h1", "zb-v"]) {
    const r = await cli("schedule", "--schedule", name, ...P4M8, "--format", "csv");
    assert.equal(r.code, 0, r.err);
    const s = generateSchedule(name, { ranks: 4, microBatches: 8 });
    assert.deepEqual(scheduleFromCsv(r.out), plain(s.actions));
  }
});

Deno.test("cli schedule --format text|svg|trace: pictures of a simulated run", async () => {
  const s = generateSchedule("zb-h1", { ranks: 4, microBatches: 8 });
  const n = s.actions.flat().length;
  const text = await cli("schedule", "--schedule", "zb-h1", ...P4M8, "--format", "text");
  assert.equal(text.code, 0, text.err);
  assert.equal(text.out.trimEnd().split("\n").length, 4);

  const svg = await cli("schedule", "--schedule", "zb-h1", ...P4M8, "--format", "svg");
  assert.equal(svg.code, 0, svg.err);
  const els = allElements(parseXml(svg.out));
  assert.equal(els.filter((e) => e.name === "rect" && e.attrs.class?.startsWith("box ")).length, n);
  const title = els.find((e) => e.attrs.class === "title")?.text ?? "";
  const bubble = simulate(s).bubbleFraction;
  assert.ok(title.includes(`bubble ${(bubble * 100).toFixed(1)}%`), title);

  const trace = await cli("schedule", "--schedule", "zb-h1", ...P4M8, "--format", "trace");
  assert.equal(trace.code, 0, trace.err);
  const t = JSON.parse(trace.out);
  assert.equal(t.traceEvents.filter((e: { ph: string }) => e.ph === "X").length, n);
});

Deno.test("cli: --stages is an alias of --ranks; both given must agree", async () => {
  const a = await cli("schedule", "--schedule", "1f1b", "--stages", "3", "--microbatches", "4");
  const b = await cli("schedule", "--schedule", "1f1b", "--ranks", "3", "--microbatches", "4");
  assert.equal(a.code, 0, a.err);
  assert.equal(a.out, b.out);
  assert.equal(JSON.parse(a.out).ranks, 3);
  const both = await cli(
    "schedule",
    "--schedule",
    "1f1b",
    "--ranks",
    "3",
    "--stages",
    "2",
    "--microbatches",
    "4",
  );
  assert.equal(both.code, 2);
  assert.match(both.err, /--ranks 3 and --stages 2 disagree/);
  const none = await cli("schedule", "--schedule", "1f1b", "--microbatches", "4");
  assert.equal(none.code, 2);
  assert.match(none.err, /--ranks is required/);
});

Deno.test("cli simulate: figures equal simulate()'s; --cost-i is I, --cost-b the full backward", async () => {
  const args = [
    "--schedule",
    "zb-h2",
    ...P4M8,
    "--cost-f",
    "1",
    "--cost-i",
    "1.2",
    "--cost-w",
    "0.8",
    "--comm",
    "0.1",
    "--iterations",
    "3",
  ];
  const costs = { F: 1, I: 1.2, W: 0.8, B: 2 };
  const s = generateSchedule("zb-h2", { ranks: 4, microBatches: 8, costs });
  const expected = simulate(s, { costs, comm: 0.1, iterations: 3 });

  const j = await cli("simulate", ...args, "--json");
  assert.equal(j.code, 0, j.err);
  const o = JSON.parse(j.out);
  assert.equal(o.schedule, "zb-h2");
  assert.equal(o.iterations, 3);
  assert.deepEqual(o.costs, costs);
  assert.equal(o.comm, 0.1);
  assert.equal(o.makespan, expected.makespan);
  assert.deepEqual(o.busy, expected.busy);
  assert.deepEqual(o.idle, expected.idle);
  assert.equal(o.bubbleFraction, expected.bubbleFraction);
  assert.equal(typeof o.steadyStateBubble, "number");
  assert.equal(o.steadyStateBubble, expected.steadyStateBubble);
  assert.deepEqual(o.peakActivations, expected.peakActivations);

  const h = await cli("simulate", ...args);
  assert.equal(h.code, 0, h.err);
  const mk = /^makespan\s+(\S+)$/m.exec(h.out);
  assert.ok(mk, h.out);
  assert.ok(Math.abs(Number(mk[1]) - expected.makespan) < 1e-3);
  assert.ok(h.out.includes(`${(expected.bubbleFraction * 100).toFixed(2)}%`));
  assert.ok(h.out.includes(`${(expected.steadyStateBubble! * 100).toFixed(2)}%`));
  const rows = h.out.split("\n").filter((l) => /^\d+\s/.test(l));
  assert.equal(rows.length, 4);
  rows.forEach((l, r) =>
    assert.equal(Number(l.trim().split(/\s+/)[3]), expected.peakActivations[r])
  );

  const single = JSON.parse((await cli("simulate", "--schedule", "1f1b", ...P4M8, "--json")).out);
  assert.equal(single.steadyStateBubble, null);
  assert.ok(Math.abs(single.bubbleFraction - 3 / 11) < 1e-12, "1F1B p=4 m=8: (p-1)/(m+p-1)");

  const grid = await cli("simulate", "--schedule", "gpipe", ...P4M8, "--grid");
  assert.equal(grid.code, 0, grid.err);
  assert.equal(grid.out.split("\n").filter((l) => /^r\d /.test(l)).length, 4);
  // --cost-b is B = I + W as in the API: B 2 with W 0.8 leaves I = 1.2, the same run.
  const viaB = await cli(
    "simulate",
    ...args.map((x) => (x === "--cost-i" ? "--cost-b" : x === "1.2" ? "2" : x)),
    "--json",
  );
  assert.equal(viaB.code, 0, viaB.err);
  assert.deepEqual(JSON.parse(viaB.out).costs, costs);
  assert.equal(JSON.parse(viaB.out).makespan, expected.makespan);
  const api = simulate(s, { costs: { F: 1, B: 2, W: 0.8 }, comm: 0.1, iterations: 3 });
  assert.equal(api.makespan, expected.makespan);
  const bad = await cli("simulate", "--schedule", "1f1b", ...P4M8, "--cost-b", "0.5");
  assert.equal(bad.code, 2);
  assert.match(bad.err, /--cost-b 0\.5 is below --cost-w 1/);
});

Deno.test("cli: bad flags and values exit 2 naming the flag and value", async () => {
  const cases: [string[], RegExp][] = [
    [["schedule", "--schedule", "1f1b", ...P4M8, "--bogus"], /unknown flag --bogus/],
    [
      ["schedule", "--schedule", "1f1b", "--stages", "abc", "--microbatches", "8"],
      /--stages.*"abc"/,
    ],
    [["schedule", "--schedule", "1f1b", "--stages", "0", "--microbatches", "8"], /--stages.*"0"/],
    [["schedule", "--schedule", "1f1b", "--stages", "-1", "--microbatches", "8"], /--stages.*"-1"/],
    [
      ["schedule", "--schedule", "1f1b", "--stages", "2.5", "--microbatches", "8"],
      /--stages.*"2.5"/,
    ],
    [["schedule", "--schedule", "1f1b", "--stages", "4"], /--microbatches is required/],
    [["schedule", "--schedule", "nope", ...P4M8], /--schedule must be one of .*"nope"/],
    [["schedule", ...P4M8], /--schedule is required/],
    [["schedule", "--schedule", "1f1b", ...P4M8, "--format", "xml"], /--format .*"xml"$/m],
    [
      ["schedule", "--schedule", "1f1b", ...P4M8, "--format", "ascii"],
      /--format .*"ascii"; did you mean text\? \(the ASCII grid\)$/m,
    ],
    [["schedule", "--schedule", "1f1b", ...P4M8, "--format", "SVG"], /"SVG"; did you mean svg\?/],
    [["schedule", "--schedule", "1f1b", ...P4M8, "--virtual-stages", "x"], /--virtual-stages.*"x"/],
    [["schedule", "--schedule", "1f1b", ...P4M8, "extra"], /unexpected argument "extra"/],
    [["schedule", "--schedule", "1f1b", "--stages"], /--stages/],
    [["simulate", "--schedule", "1f1b", ...P4M8, "--cost-f", "-1"], /--cost-f.*"-1"/],
    [["simulate", "--schedule", "1f1b", ...P4M8, "--comm", "fast"], /--comm.*"fast"/],
    [["simulate", "--schedule", "1f1b", ...P4M8, "--iterations", "0"], /--iterations.*"0"/],
    [["simulate", "--schedule", "1f1b", ...P4M8, "--json=yes"], /--json/],
    [["frobnicate"], /unknown command "frobnicate"/],
  ];
  for (const [args, re] of cases) {
    const r = await cli(...args);
    assert.equal(r.code, 2, `${args.join(" ")}: code ${r.code}, ${r.err}`);
    assert.equal(r.out, "");
    assert.match(r.err, /^error: /);
    assert.equal(r.err.trimEnd().split("\n").length, 1, "one error line");
    assert.match(r.err, re, args.join(" "));
  }
  const none = await cli();
  assert.equal(none.code, 2);
  assert.match(none.err, /Usage/);
});

Deno.test("cli: a combination the generator refuses is a bad value too", async () => {
  const r = await cli("schedule", "--schedule", "zb-v", ...P4M8, "--virtual-stages", "3");
  assert.equal(r.code, 2, r.err);
  assert.match(r.err, /^error: .*--virtual-stages 3/);
});

Deno.test("cli: --help lists the commands and each command's options", async () => {
  const top = await cli("--help");
  assert.equal(top.code, 0);
  assert.match(top.out, /schedule\s+print a schedule/);
  assert.match(top.out, /simulate\s+simulate a schedule/);
  for (const c of ["schedule", "simulate"]) {
    const r = await cli(c, "--help");
    assert.equal(r.code, 0);
    for (const flag of ["--schedule", "--stages", "--microbatches", "--virtual-stages"]) {
      assert.ok(r.out.includes(flag), `${c} --help mentions ${flag}`);
    }
    for (const name of SCHEDULE_NAMES) assert.ok(r.out.includes(name));
  }
  assert.match((await cli("simulate", "-h")).out, /--iterations/);
});

Deno.test("cli: a real subprocess prints the JSON and exits 2 on a bad flag", async () => {
  const cliPath = new URL("../cli.ts", import.meta.url).pathname;
  const ok = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      cliPath,
      "schedule",
      "--schedule",
      "1f1b",
      "--stages",
      "2",
      "--microbatches",
      "3",
    ],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(ok.code, 0, new TextDecoder().decode(ok.stderr));
  const j = JSON.parse(new TextDecoder().decode(ok.stdout));
  assert.deepEqual(
    j.actions,
    plain(generateSchedule("1f1b", { ranks: 2, microBatches: 3 }).actions),
  );

  const bad = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", cliPath, "simulate", "--schedule", "1f1b", "--stages", "two"],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(bad.code, 2);
  assert.equal(new TextDecoder().decode(bad.stdout), "");
  assert.match(
    new TextDecoder().decode(bad.stderr),
    /^error: --stages must be a positive integer, got "two"/,
  );
});

Deno.test("cli: absurd sizes are refused at once with status 2, naming the flags and the limit", async () => {
  for (const command of ["schedule", "simulate"]) {
    const t = performance.now();
    const r = await cli(
      command,
      "--schedule",
      "1f1b",
      "--stages",
      "100000",
      "--microbatches",
      "100000",
    );
    assert.equal(r.code, 2, r.err);
    assert.match(r.err, /ranks 100000 × microBatches 100000 .* over the limit of 3000000/);
    assert.match(r.err, /--ranks 100000 --microbatches 100000/);
    // Liveness: refused, not 10^10 actions built (a loaded machine is slow to start a process).
    assert.ok(performance.now() - t < 30_000, `${command} took ${performance.now() - t} ms`);
  }
  const sim = await cli(
    "simulate",
    "--schedule",
    "zb-v",
    "--ranks",
    "1000",
    "--microbatches",
    "500",
    "--iterations",
    "8",
  );
  assert.equal(sim.code, 2);
  assert.match(
    sim.err,
    /would simulate 24000000 events, over the limit of 6000000 .*--iterations 8/,
  );
  const mem = await cli("simulate", "--schedule", "gpipe", ...P4M8, "--memory-limit", "2");
  assert.equal(mem.code, 2);
  assert.match(
    mem.err,
    /--memory-limit applies only to the schedules that search with it \(zb-auto, v-half, v-min\); gpipe's memory is fixed/,
  );
});

Deno.test("cli: a flag without a value names the flag, last or before another flag", async () => {
  for (
    const args of [
      ["schedule", "--schedule", "gpipe", "--microbatches", "4", "--ranks"],
      ["simulate", "--schedule", "gpipe", "--ranks", "--microbatches", "4"],
      ["train", "--schedule", "gpipe", "--ranks", "--microbatches", "4"],
    ]
  ) {
    const r = await cli(...args);
    assert.equal(r.code, 2, args.join(" "));
    assert.match(r.err, /^error: --ranks needs a value/);
    assert.doesNotMatch(r.err, /ambiguous/);
  }
  // A negative number is a value (the value check reports it).
  const neg = await cli("simulate", "--schedule", "gpipe", ...P4M8, "--comm", "-1");
  assert.match(neg.err, /--comm must be a finite number >= 0, got "-1"/);
});

Deno.test("cli: an unknown flag, command or schedule names the nearest one", async () => {
  const flag = await cli("schedule", "--schedule", "gpipe", "--rnaks", "4", "--microbatches", "8");
  assert.equal(flag.code, 2);
  assert.match(flag.err, /^error: unknown flag --rnaks for "schedule"; did you mean --ranks\?/);
  const far = await cli("schedule", "--schedule", "gpipe", "--zzzzzz", "4");
  assert.match(far.err, /^error: unknown flag --zzzzzz for "schedule" \(see schedule --help\)/);
  const command = await cli("simualte", "--schedule", "gpipe");
  assert.equal(command.code, 2);
  assert.match(
    command.err,
    /^error: unknown command "simualte"; did you mean simulate\?; commands: /,
  );
  const name = await cli("schedule", "--schedule", "zb-h3", ...P4M8);
  assert.equal(name.code, 2);
  assert.match(name.err, /--schedule must be one of .*, got "zb-h3"; did you mean zb-h1\?/);
});

Deno.test("cli train: --comm is where the ranks run, --comm-delay zb-auto's delay; no --cost-* flags", async () => {
  const help = await cli("train", "--help");
  assert.equal(help.code, 0);
  assert.doesNotMatch(help.out, /--cost-/);
  assert.match(
    help.out,
    /--comm KIND {12}where the ranks run: workers \(default\), in-process, or mpi/,
  );
  assert.match(help.out, /--comm-delay T {9}zb-auto, v-half, v-min: /);
  for (const command of ["schedule", "simulate"]) {
    const h = await cli(command, "--help");
    for (
      const f of ["--cost-f", "--cost-i", "--cost-w", "--cost-b", "--comm T", "--memory-limit"]
    ) {
      assert.ok(h.out.includes(f), `${command} --help lists ${f}`);
    }
  }
  const base = ["train", "--schedule", "zb-auto", "--ranks", "2", "--microbatches", "2"];
  const number = await cli(...base, "--comm", "2");
  assert.equal(number.code, 2);
  assert.match(number.err, /--comm must be workers, in-process or mpi, got "2" .*--comm-delay T/);
  const cost = await cli(...base, "--cost-f", "2");
  assert.equal(cost.code, 2);
  assert.match(cost.err, /unknown flag --cost-f for "train": .*apply to schedule and simulate/);
  // --comm-delay is read as the generator's delay, checked before any work.
  const delay = await cli(...base, "--comm-delay", "-1");
  assert.equal(delay.code, 2);
  assert.match(delay.err, /--comm-delay must be a finite number >= 0, got "-1"/);
  const ok = await cli(
    ...base,
    "--comm-delay",
    "0.5",
    "--memory-limit",
    "3",
    "--steps",
    "1",
    "--backend",
    "cpu",
    "--in-process",
    "--json",
  );
  assert.equal(ok.code, 0, ok.err);
  assert.equal(ok.out.trim().split("\n").length, 2);
});

Deno.test("cli simulate --activation-bytes --optimizer-bytes --shard-optimizer: bytes per rank in the table and the JSON", async () => {
  const flags = ["--ranks", "8", "--microbatches", "32", "--activation-bytes", "1MiB"];
  const one = await cli("simulate", "--schedule", "1f1b", ...flags, "--json");
  assert.equal(one.code, 0, one.err);
  assert.deepEqual(
    JSON.parse(one.out).activationBytes,
    [8, 7, 6, 5, 4, 3, 2, 1].map((k) => k << 20),
  );
  const v = await cli(
    "simulate",
    "--schedule",
    "v-min",
    ...flags,
    "--optimizer-bytes",
    "64MiB",
    "--shard-optimizer",
    "2",
    "--json",
  );
  assert.equal(v.code, 0, v.err);
  const j = JSON.parse(v.out);
  assert.ok(Math.max(...j.activationBytes) <= 4 << 20, "v-min: at most 4 full stages' worth");
  assert.deepEqual(j.optimizerBytes, new Array(8).fill(4 << 20), "64 MiB / 8 ranks / 2 replicas");
  const text = await cli("simulate", "--schedule", "v-min", ...flags, "--optimizer-bytes", "8MiB");
  assert.match(
    text.out,
    /rank {2}busy {8}idle {8}peak activations {2}activation bytes {2}optimizer bytes/,
  );
  assert.match(text.out, /\n0 +\d+ +[\d.]+ +\d+ +[\d.]+ MiB +1\.00 MiB\n/);
  const bad = await cli("simulate", "--schedule", "1f1b", ...P4M8, "--shard-optimizer", "2");
  assert.equal(bad.code, 2);
  assert.match(bad.err, /--shard-optimizer 2 needs --optimizer-bytes/);
  const unit = await cli(
    "simulate",
    "--schedule",
    "1f1b",
    ...P4M8,
    "--activation-bytes",
    "3 parsecs",
  );
  assert.equal(unit.code, 2);
  assert.match(unit.err, /--activation-bytes must be a non-negative number of bytes/);
});
