import assert from "node:assert/strict";
import { cli } from "./_cli.ts";
import { liveCount as liveWorkers } from "../src/pipeline/runtime/_worker_registry.ts";
import { allElements, parseXml } from "./pipeline/_xml.ts";

const TRAIN = [
  "train",
  "--schedule",
  "1f1b",
  "--ranks",
  "2",
  "--microbatches",
  "4",
  "--backend",
  "cpu",
  "--in-process",
];

Deno.test("cli train: every output path (--save-checkpoint, --trace, --metrics, --curves) is checked before the first step: a missing folder or a directory exits 2 naming the flag, the path and the rule", async () => {
  const dir = await Deno.makeTempDir();
  try {
    for (const flag of ["--save-checkpoint", "--trace", "--metrics", "--curves"]) {
      const cases: [string, string][] = [
        [
          `${dir}/nonexistent/dir/x.out`,
          `${flag} ${dir}/nonexistent/dir/x.out: the folder ${dir}/nonexistent/dir does not exist (create it first)`,
        ],
        [dir, `${flag} ${dir}: it is a directory: name a file to write`],
      ];
      for (const [path, message] of cases) {
        const r = await cli(...TRAIN, "--steps", "2", flag, path);
        assert.equal(r.code, 2, `${flag} ${path}: ${r.err}`);
        assert.equal(r.out, "", "no step ran");
        assert.ok(r.err.includes(message), `${r.err}\nwanted: ${message}`);
      }
    }
    // --trace at another picture's name would get JSON.
    const png = await cli(...TRAIN, "--steps", "2", "--trace", `${dir}/t.png`);
    assert.equal(png.code, 2, png.err);
    assert.equal(png.out, "", "no step ran");
    assert.match(png.err, /--trace .*t\.png: a trace is an SVG timeline .* not PNG/);
    assert.deepEqual([...Deno.readDirSync(dir)], [], "nothing written");
    assert.equal(liveWorkers(), 0);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("cli train --metrics (CSV / JSON Lines) and --curves: a line per step with the printed losses, and the loss curve", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const json = await cli(...TRAIN, "--steps", "3", "--json", "--metrics", `${dir}/m.jsonl`);
    assert.equal(json.code, 0, json.err);
    const printed = json.out.trim().split("\n").slice(0, 3).map((l) => JSON.parse(l));
    const logged = (await Deno.readTextFile(`${dir}/m.jsonl`)).trim().split("\n").map((l) =>
      JSON.parse(l)
    );
    assert.deepEqual(
      logged.map((l) => [l.step, l.loss, l.lr]),
      printed.map((p) => [p.step, p.loss, p.lr]),
    );
    const text = await cli(
      ...TRAIN,
      "--steps",
      "3",
      "--metrics",
      `${dir}/m.csv`,
      "--curves",
      `${dir}/c.svg`,
    );
    assert.equal(text.code, 0, text.err);
    assert.match(text.out, /metrics written to .*m\.csv\ncurves written to .*c\.svg\n$/);
    const rows = (await Deno.readTextFile(`${dir}/m.csv`)).trim().split("\n");
    assert.equal(rows.length, 4);
    assert.deepEqual(rows.slice(1).map((r) => Number(r.split(",")[1])), printed.map((p) => p.loss));
    const svg = allElements(parseXml(await Deno.readTextFile(`${dir}/c.svg`)));
    assert.equal(svg.filter((e) => e.name === "polyline").length, 1);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("cli train --trace draws the last step by default; --trace-step N draws step N (as the lines number it), all draws every step; a step outside the run exits 2", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const titleOf = async (file: string) =>
      allElements(parseXml(await Deno.readTextFile(file))).find((e) => e.attrs.class === "title")!
        .text;
    const last = await cli(...TRAIN, "--steps", "3", "--trace", `${dir}/last.svg`);
    assert.equal(last.code, 0, last.err);
    assert.match(
      await titleOf(`${dir}/last.svg`),
      /^1f1b: 2 ranks, 4 micro-batches, step 3 \(index 2\) · bubble /,
    );
    const two = await cli(
      ...TRAIN,
      "--steps",
      "3",
      "--trace",
      `${dir}/two.svg`,
      "--trace-step",
      "2",
    );
    assert.equal(two.code, 0, two.err);
    assert.match(await titleOf(`${dir}/two.svg`), /step 2 \(index 1\)/);
    const all = await cli(
      ...TRAIN,
      "--steps",
      "3",
      "--trace",
      `${dir}/all.svg`,
      "--trace-step",
      "all",
    );
    assert.equal(all.code, 0, all.err);
    const lanes = allElements(parseXml(await Deno.readTextFile(`${dir}/all.svg`)))
      .filter((e) => e.attrs.class === "rank").map((e) => e.text);
    assert.deepEqual(lanes, [
      "step 1 · rank 0",
      "step 1 · rank 1",
      "step 2 · rank 0",
      "step 2 · rank 1",
      "step 3 · rank 0",
      "step 3 · rank 1",
    ]);
    const cases: [string[], RegExp][] = [
      [
        ["--trace", `${dir}/x.svg`, "--trace-step", "4"],
        /--trace-step 4 is not a step of this run \(steps 1–3\)/,
      ],
      [
        ["--trace", `${dir}/x.svg`, "--trace-step", "0"],
        /--trace-step must be a positive integer, got "0"/,
      ],
      [["--trace-step", "2"], /--trace-step needs --trace PATH/],
    ];
    for (const [flags, re] of cases) {
      const r = await cli(...TRAIN, "--steps", "3", ...flags);
      assert.equal(r.code, 2, r.err);
      assert.match(r.err, re);
      assert.equal(r.out, "");
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("cli train --metrics without write permission exits 2 before training, naming the flag to add", async () => {
  const root = new URL("../", import.meta.url).pathname;
  const dir = await Deno.makeTempDir();
  try {
    const r = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "--quiet",
        `--allow-read=${root}`,
        `${root}cli.ts`,
        ...TRAIN,
        "--metrics",
        `${dir}/m.jsonl`,
      ],
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).output();
    const err = new TextDecoder().decode(r.stderr);
    assert.equal(r.code, 2, err);
    assert.equal(new TextDecoder().decode(r.stdout), "");
    assert.ok(
      err.includes(
        `--metrics ${dir}/m.jsonl needs write access to ${dir}/m.jsonl (run with --allow-write=${dir}/m.jsonl, or its folder)`,
      ),
      err,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
