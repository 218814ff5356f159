/**
 * The house's floors and the pipeline package's groups, read from the
 * import graph of `src/` (every relative import, type-only ones included):
 *
 * - floors: `src/tensor/` imports only itself; `src/nn/` only tensor;
 *   `src/pipeline/` only nn and tensor below it; `src/advise/` (the
 *   advisor: it measures the user's model in pipelines and predicts every
 *   candidate) the pipeline package, nn and tensor; `src/cli/` anything;
 * - pipeline groups: schedule/ imports nothing else in src; analysis/ only
 *   schedule/; render/ only schedule/ and analysis/; comm/ nothing;
 *   runtime/ only schedule/, analysis/ and comm/; partition/ and
 *   checkpoint/ only nn and tensor (and themselves); only model/ joins
 *   runtime/ with nn and tensor, and nothing in the pipeline package
 *   imports the advisor above it; production
 *   code never imports testing/; `src/text/` (plain string helpers: the
 *   nearest name for "did you mean", a value as error messages show it)
 *   imports nothing and may be imported from every group;
 * - a `_name.ts` file is imported only from its own folder (a folder owns
 *   its subfolders: `tensor/webgpu/` may use `tensor/_validate.ts`);
 * - a source file is one concept, and may be as long as that takes; no
 *   file is over 1000 lines, the ceiling that catches one grown into
 *   several (split it by meaning, never to pass a count: the 600-line
 *   limit this replaced made fragments that exist only to shorten a file);
 *   and the import graph has no cycle
 *   (but the tensor ↔ backend type reference);
 * - only `tensor/webgpu/_readback.ts` maps GPU buffers (`mapAsync`,
 *   `getMappedRange`, `mappedAtCreation`, MAP_READ usage): the one read
 *   path, which makes every staging buffer mapped at creation so that Deno
 *   never panics on one it has not mapped before;
 * - the public API in tiers: every entry point in `deno.json` lists its
 *   exports by name (no `export *`), opens with a `@module` doc that has
 *   an example, is doc-linted on its own by `deno task check` and
 *   doc-tested by `deno task test`; `mod.ts` has a bounded number of names and none
 *   of the internals; no doc example is skipped (`ts ignore`).
 * - only `pipeline/runtime/tag.ts` composes the runtime's message tags
 *   (`act/…`, `grad/…`, `verdict/…`) and state keys (`i<iteration>m<mb>`):
 *   every rank of a run must build them alike.
 *
 * @module
 */

import assert from "node:assert/strict";

const ROOT = new URL("../", import.meta.url);
const SRC = new URL("src/", ROOT);

async function* walk(dir: URL): AsyncGenerator<URL> {
  for await (const e of Deno.readDir(dir)) {
    const u = new URL(e.name + (e.isDirectory ? "/" : ""), dir);
    if (e.isDirectory) yield* walk(u);
    else if (e.name.endsWith(".ts")) yield u;
  }
}

/** `src/`-relative path → its relative imports, resolved to `src/`-relative paths. */
async function importGraph(): Promise<Map<string, string[]>> {
  const graph = new Map<string, string[]>();
  const re =
    /(?:^|\n)\s*(?:import|export)\b[^;]*?\bfrom\s*["'](\.{1,2}\/[^"']+)["']|\bimport\s*\(\s*["'](\.{1,2}\/[^"']+)["']|\bnew URL\(\s*["'](\.{1,2}\/[^"']+\.ts)["']/g;
  for await (const file of walk(SRC)) {
    const text = await Deno.readTextFile(file);
    // JSDoc examples import "@conveyor/core"; comments hold no relative imports we count.
    const code = text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");
    const deps: string[] = [];
    for (const m of code.matchAll(re)) {
      const spec = m[1] ?? m[2] ?? m[3];
      const target = new URL(spec, file);
      if (!target.href.startsWith(SRC.href)) continue;
      deps.push(target.href.slice(SRC.href.length));
    }
    graph.set(file.href.slice(SRC.href.length), deps);
  }
  return graph;
}

const graph = await importGraph();

/** The group of a `src/`-relative path: "tensor", "nn", "cli", "pipeline/<group>", … */
function group(path: string): string {
  const parts = path.split("/");
  if (parts[0] === "pipeline") return parts.length > 2 ? `pipeline/${parts[1]}` : "pipeline";
  return parts.length > 1 ? parts[0] : "(root)";
}

const ALLOWED: Record<string, readonly string[]> = {
  "text": [],
  "tensor": [],
  "nn": ["tensor"],
  "pipeline/schedule": [],
  "pipeline/analysis": ["pipeline/schedule"],
  "pipeline/render": ["pipeline/schedule", "pipeline/analysis"],
  "pipeline/comm": [],
  "pipeline/runtime": ["pipeline/schedule", "pipeline/analysis", "pipeline/comm"],
  "pipeline/partition": ["nn", "tensor"],
  "pipeline/checkpoint": ["nn", "tensor"],
  "pipeline/model": [
    "pipeline/schedule",
    "pipeline/analysis",
    "pipeline/render",
    "pipeline/comm",
    "pipeline/runtime",
    "pipeline/partition",
    "pipeline/checkpoint",
    "nn",
    "tensor",
  ],
  "pipeline/testing": [
    "pipeline/schedule",
    "pipeline/analysis",
    "pipeline/comm",
    "pipeline/runtime",
  ],
  "advise": [
    "pipeline/schedule",
    "pipeline/analysis",
    "pipeline/partition",
    "pipeline/runtime",
    "pipeline/model",
    "nn",
    "tensor",
  ],
  "cli": ["*"],
};

Deno.test("architecture: every src folder is a known group", () => {
  const unknown = [...new Set([...graph.keys()].map(group))].filter((g) => !(g in ALLOWED));
  assert.deepEqual(unknown, [], `groups without rules: ${unknown.join(", ")}`);
});

Deno.test("architecture: floors and pipeline groups import only what their rules allow", () => {
  const breaches: string[] = [];
  for (const [from, deps] of graph) {
    const g = group(from);
    const allowed = ALLOWED[g] ?? [];
    for (const to of deps) {
      const h = group(to);
      if (h === g || h === "text" || allowed.includes("*")) continue;
      if (!allowed.includes(h)) breaches.push(`${from} (${g}) imports ${to} (${h})`);
    }
  }
  assert.deepEqual(breaches, []);
});

Deno.test("architecture: production code never imports testing/", () => {
  const breaches = [...graph].flatMap(([from, deps]) =>
    group(from) === "pipeline/testing"
      ? []
      : deps.filter((d) => group(d) === "pipeline/testing").map((d) => `${from} imports ${d}`)
  );
  assert.deepEqual(breaches, []);
});

Deno.test("architecture: a _name.ts file is imported only from its own folder (or one inside it)", () => {
  const breaches: string[] = [];
  const dir = (p: string) => p.slice(0, p.lastIndexOf("/") + 1);
  for (const [from, deps] of graph) {
    for (const to of deps) {
      const base = to.slice(to.lastIndexOf("/") + 1);
      if (base.startsWith("_") && !dir(from).startsWith(dir(to))) {
        breaches.push(`${from} imports ${to}`);
      }
    }
  }
  assert.deepEqual(breaches, []);
});

// A tensor names its backend and the backend's kernels take tensors: the
// one mutual reference the design has, type-only on the backend's side.
const ALLOWED_CYCLES = new Set(["tensor/backend.ts → tensor/tensor.ts → tensor/backend.ts"]);

Deno.test("architecture: the import graph of src/ has no cycle", () => {
  const state = new Map<string, "open" | "done">();
  const cycles: string[] = [];
  const visit = (n: string, path: string[]) => {
    if (state.get(n) === "done") return;
    if (state.get(n) === "open") {
      cycles.push([...path.slice(path.indexOf(n)), n].join(" → "));
      return;
    }
    state.set(n, "open");
    for (const d of graph.get(n) ?? []) visit(d, [...path, n]);
    state.set(n, "done");
  };
  for (const n of graph.keys()) visit(n, []);
  assert.deepEqual(cycles.filter((c) => !ALLOWED_CYCLES.has(c)), []);
});

// Above it a file has become several things; below it, length is no reason to split.
const MAX_LINES = 1000;

Deno.test("architecture: no source file is over 1000 lines (one concept per file, split by meaning)", async () => {
  const long: string[] = [];
  for await (const file of walk(SRC)) {
    const lines = (await Deno.readTextFile(file)).split("\n").length;
    if (lines > MAX_LINES) long.push(`${file.href.slice(SRC.href.length)}: ${lines} lines`);
  }
  for (const top of ["mod.ts", "cli.ts"]) {
    const lines = (await Deno.readTextFile(new URL(top, ROOT))).split("\n").length;
    if (lines > MAX_LINES) long.push(`${top}: ${lines} lines`);
  }
  assert.deepEqual(long, []);
});

Deno.test("architecture: only tensor/webgpu/_readback.ts maps GPU buffers", async () => {
  const uses: string[] = [];
  const re = /\b(mapAsync|getMappedRange|mappedAtCreation|MAP_READ|onSubmittedWorkDone)\b/g;
  for await (const file of walk(SRC)) {
    const path = file.href.slice(SRC.href.length);
    if (path === "tensor/webgpu/_readback.ts") continue;
    const code = (await Deno.readTextFile(file)).replace(/\/\*[\s\S]*?\*\//g, "")
      .replace(/^\s*\/\/.*$/gm, "");
    for (const m of code.matchAll(re)) uses.push(`${path}: ${m[1]}`);
  }
  assert.deepEqual(uses, []);
});

const DENO_JSON = JSON.parse(await Deno.readTextFile(new URL("deno.json", ROOT)));
/** Entry point → its file, from `deno.json`'s `exports`. */
const ENTRY_POINTS: [string, string][] = Object.entries(DENO_JSON.exports as Record<string, string>)
  .map(([k, v]) => [k, v.replace(/^\.\//, "")]);

/** The names `deno doc` lists for an entry file. */
async function docNames(file: string): Promise<string[]> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["doc", "--json", file],
    cwd: new URL(".", ROOT),
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
  const doc = JSON.parse(new TextDecoder().decode(out.stdout));
  const nodes = Object.values(doc.nodes) as { symbols: { name: string }[] }[];
  return nodes.flatMap((n) => n.symbols.map((s) => s.name));
}

Deno.test("architecture: the package's entry points are mod.ts and named tiers", () => {
  assert.equal(DENO_JSON.exports["."], "./mod.ts");
  for (
    const sub of [
      "./cli",
      "./runtime",
      "./testing",
      "./tensor",
      "./format",
      "./analysis",
      "./callbacks",
    ]
  ) {
    assert.ok(sub in DENO_JSON.exports, `${sub} is an entry point`);
  }
});

// mod.ts holds the training API (about 100 names) and the types its
// signatures name, which `deno doc --lint mod.ts` needs from mod.ts itself
// (tensors and the backend contract that layers take, the layer contract,
// the schedule table behind `ScheduleName`): 142 names, from 302 in one flat
// list. The bound keeps it from growing unnoticed. +2 for the options and
// result of PipelineParallelModel.generate (issue 36).
const MOD_MAX_NAMES = 147;

Deno.test("architecture: mod.ts lists a bounded set of names, led by the model", async () => {
  const names = await docNames("mod.ts");
  assert.ok(names.length > 40, `mod.ts exports the training API (${names.length} names)`);
  assert.ok(
    names.length <= MOD_MAX_NAMES,
    `mod.ts exports ${names.length} names, over ${MOD_MAX_NAMES}`,
  );
  const lead = names.indexOf("PipelineParallelModel");
  assert.equal(lead, 0, `deno doc mod.ts leads with PipelineParallelModel (at ${lead})`);
});

const INTERNALS = [
  "describeValue",
  "formatShape",
  "checkShape",
  "optimizerStateSlots",
  "CHECKPOINT_FORMAT",
  "CHECKPOINT_FORMAT_VERSION",
  "MAX_SCHEDULE_ACTIONS",
];

Deno.test("architecture: no entry point exports an internal helper", async () => {
  const found: string[] = [];
  for (const [entry, file] of ENTRY_POINTS) {
    const names = new Set(await docNames(file));
    for (const n of INTERNALS) if (names.has(n)) found.push(`${entry} exports ${n}`);
  }
  assert.deepEqual(found, []);
});

Deno.test("architecture: every entry point lists its exports and opens with a @module doc with an example", async () => {
  const problems: string[] = [];
  for (const [entry, file] of ENTRY_POINTS) {
    const text = await Deno.readTextFile(new URL(file, ROOT));
    const code = text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");
    if (/\bexport\s*\*\s*from\b/.test(code)) problems.push(`${entry}: export * from`);
    const head = /^\/\*\*([\s\S]*?)\*\//.exec(text.trimStart());
    if (head === null || !head[1].includes("@module")) problems.push(`${entry}: no @module doc`);
    else if (!/```(ts|sh)\n/.test(head[1])) {
      problems.push(`${entry}: its @module doc has no example`);
    }
  }
  assert.deepEqual(problems, []);
});

Deno.test("architecture: deno task check doc-lints every entry point on its own; deno task test runs their examples", () => {
  const check: string = DENO_JSON.tasks.check;
  const test: string = DENO_JSON.tasks.test;
  const missing: string[] = [];
  for (const [, file] of ENTRY_POINTS) {
    if (!check.includes(`deno doc --lint ${file} `)) {
      missing.push(`check: deno doc --lint ${file}`);
    }
    if (!new RegExp(`deno doc --lint [^&]*\\b${file.replace(".", "\\.")}\\b`).test(check)) {
      missing.push(`check: ${file} in a doc lint`);
    }
    if (!check.split("&&").some((c) => c.includes("deno check") && c.includes(` ${file} `))) {
      missing.push(`check: deno check ${file}`);
    }
    if (!test.includes(` ${file} `)) missing.push(`test: ${file}`);
  }
  assert.deepEqual(missing, []);
});

Deno.test("architecture: no doc example is skipped (ts ignore)", async () => {
  const files: URL[] = [];
  for await (const f of walk(SRC)) files.push(f);
  for (const [, file] of ENTRY_POINTS) files.push(new URL(file, ROOT));
  const skipped: string[] = [];
  for (const f of files) {
    const text = await Deno.readTextFile(f);
    for (const m of text.matchAll(/^\s*\*\s*```(?:ts|typescript|js|tsx)\s+ignore\b/gm)) {
      const line = text.slice(0, m.index).split("\n").length;
      skipped.push(`${f.href.slice(ROOT.href.length)}:${line}`);
    }
  }
  assert.deepEqual(skipped, []);
});

Deno.test("architecture: only pipeline/runtime/tag.ts composes tags and state keys", async () => {
  const uses: string[] = [];
  // A string or template literal that starts a runtime tag, or a state key's template.
  const re = /[`"'](?:act|grad|verdict)\/|`i\$\{[^}]*\}m/g;
  for await (const file of walk(SRC)) {
    const path = file.href.slice(SRC.href.length);
    if (path === "pipeline/runtime/tag.ts") continue;
    const code = (await Deno.readTextFile(file)).replace(/\/\*[\s\S]*?\*\//g, "")
      .replace(/^\s*\/\/.*$/gm, "");
    for (const m of code.matchAll(re)) uses.push(`${path}: ${m[0]}`);
  }
  assert.deepEqual(uses, []);
});

// The run's policy crosses every hop as one value (`policy: RunPolicy`):
// the files a run passes through on its way to a rank declare none of its
// fields again, nor the older names they had at each hop.
const POLICY_HOPS =
  /^pipeline\/runtime\/(.*rank_group.*|stage_worker|subprocess_host|_protocol|_subprocess_protocol|worker_group_options)\.ts$/;
const OLD_POLICY_NAMES = ["validateSteps", "clipNorm", "checkSteps", "fault", "heartbeatTimeoutMs"];

Deno.test("architecture: no rank-group file re-lists the run policy's fields (they pass one RunPolicy)", async () => {
  const { RUN_POLICY_FIELDS } = await import("../src/pipeline/runtime/run_policy.ts");
  const names = [...RUN_POLICY_FIELDS, ...OLD_POLICY_NAMES];
  // A field declared or set by name: `readonly clipGradNorm?: …`, `{ clipGradNorm: … }`.
  const re = new RegExp(`(?:^|[{,(\\s])(${names.join("|")})\\??\\s*:(?!:)`, "gm");
  const hops: string[] = [];
  const found: string[] = [];
  for await (const file of walk(SRC)) {
    const path = file.href.slice(SRC.href.length);
    if (!POLICY_HOPS.test(path)) continue;
    hops.push(path);
    const code = (await Deno.readTextFile(file)).replace(/\/\*[\s\S]*?\*\//g, "")
      .replace(/\/\/.*$/gm, "").replace(/`(?:[^`\\]|\\.)*`|"(?:[^"\\]|\\.)*"/g, '""');
    for (const m of code.matchAll(re)) found.push(`${path}: ${m[1]}`);
  }
  assert.ok(hops.length >= 10, `the hops were found: ${hops.join(", ")}`);
  assert.deepEqual(found, []);
});
