// The suite's WebGPU tests, as `deno task test` runs them: in a child
// process, on its main thread (tests/_webgpu_child.ts says why: Deno can
// crash at exit after a `deno test` module thread used WebGPU). The task
// sets CONVEYOR_TEST_BACKENDS=cpu and CONVEYOR_TEST_WEBGPU=child: the test
// modules then run their CPU tests only, and this file runs, module by
// module, the tests they register only with WebGPU on (listed once with
// CONVEYOR_TEST_BACKENDS=cpu, then run without it, skipping those); the
// modules that loop over tests/tensor/_backends.ts's backends inside their
// tests run whole (their CPU cases again, which are quick). Without a WebGPU
// adapter one ignored test says so. Under a plain `deno test`
// (CONVEYOR_TEST_WEBGPU unset) the modules run their WebGPU tests themselves
// and this file registers nothing. CONVEYOR_TEST_WEBGPU_MODULES (path
// ends, comma-separated) narrows the modules, for a quicker look.

import assert from "node:assert/strict";

const ROOT = new URL("../", import.meta.url);
const CHILD = "tests/_webgpu_child.ts";
/** The line of a module that mentions WebGPU but registers no WebGPU test. */
const OPT_OUT = /^\/\/ webgpu_test: no WebGPU tests here/m;
/** What marks a test module that may register WebGPU tests. */
const MARKS =
  /testBackends\(|WebGPUBackend|navigator\.gpu|backend: "webgpu"|createBackend\("webgpu"/;

/**
 * The test modules under tests/ (paths from the root) that mention WebGPU,
 * and whether each runs whole (it uses testBackends, whose backends its
 * tests may loop over inside).
 */
async function webgpuModules(): Promise<Map<string, boolean>> {
  const out = new Map<string, boolean>();
  const walk = async (dir: string) => {
    for await (const e of Deno.readDir(new URL(dir, ROOT))) {
      const path = `${dir}${e.name}`;
      if (e.isDirectory) await walk(`${path}/`);
      else if (e.name.endsWith("_test.ts") && path !== "tests/webgpu_test.ts") {
        const text = await Deno.readTextFile(new URL(path, ROOT));
        // A module that names WebGPU without using it says so on a line of its own.
        if (MARKS.test(text) && !OPT_OUT.test(text)) out.set(path, /testBackends\(/.test(text));
      }
    }
  };
  await walk("tests/");
  return new Map([...out].sort((a, b) => a[0].localeCompare(b[0])));
}

// The environment of a child: this one's without the variables that keep
// WebGPU out of this process, plus `extra`.
function childEnv(extra: Record<string, string> = {}): Record<string, string> {
  const env = Deno.env.toObject();
  delete env.CONVEYOR_TEST_BACKENDS;
  delete env.CONVEYOR_TEST_WEBGPU;
  return { ...env, NO_COLOR: "1", ...extra };
}

async function child(
  args: string[],
  env: Record<string, string>,
  stdin?: string,
): Promise<{ code: number; out: string; err: string }> {
  const p = new Deno.Command(Deno.execPath(), {
    args,
    cwd: ROOT,
    env,
    clearEnv: true,
    stdin: stdin === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (stdin !== undefined) {
    const w = p.stdin.getWriter();
    await w.write(new TextEncoder().encode(stdin));
    await w.close();
  }
  const r = await p.output();
  const dec = new TextDecoder();
  return { code: r.code, out: dec.decode(r.stdout), err: dec.decode(r.stderr) };
}

/** The WebGPU adapter a process's main thread gets here (its description), or null. */
async function adapterHere(): Promise<string | null> {
  const r = await child([
    "eval",
    "const a = await navigator.gpu?.requestAdapter(); " +
    'console.log(a ? JSON.stringify(a.info.description || a.info.vendor || "an adapter") : "null")',
  ], childEnv());
  return r.code === 0 ? JSON.parse(r.out.trim() || "null") : null;
}

interface Result {
  readonly module: string;
  readonly name: string;
  readonly ok: boolean;
  readonly error?: string;
  readonly ms: number;
}

function lines(text: string, tag: string): unknown[] {
  return text.split("\n").filter((l) => l.startsWith(`${tag} `)).map((l) =>
    JSON.parse(l.slice(tag.length + 1))
  );
}

if (Deno.env.get("CONVEYOR_TEST_WEBGPU") === "child") {
  const adapter = await adapterHere();
  if (adapter === null) {
    Deno.test({
      name:
        "WebGPU tests skipped: no WebGPU adapter here (a GPU driver or Mesa's llvmpipe gives one)",
      ignore: true,
      fn: () => {},
    });
  } else {
    // CONVEYOR_TEST_WEBGPU_MODULES=a_test.ts,b_test.ts keeps the modules whose path ends so.
    const only = Deno.env.get("CONVEYOR_TEST_WEBGPU_MODULES")?.split(",").filter((m) => m !== "");
    const found = new Map(
      [...await webgpuModules()].filter(([m]) =>
        only === undefined || only.some((o) => m.endsWith(o))
      ),
    );
    const modules = [...found.keys()];
    let run: Promise<{ code: number; err: string; results: Result[] }> | null = null;
    const results = () =>
      run ??= (async () => {
        // The tests each module registers with the CPU alone (but those that run whole).
        const partial = modules.filter((m) => !found.get(m));
        const list = await child(
          ["run", "-A", CHILD, "list", ...partial],
          childEnv({ CONVEYOR_TEST_BACKENDS: "cpu" }),
        );
        assert.equal(list.code, 0, `listing the CPU tests failed:\n${list.err}`);
        const skip: Record<string, string[]> = {};
        for (const l of lines(list.out, "LIST") as { module: string; names: string[] }[]) {
          skip[l.module] = l.names;
        }
        const r = await child(
          ["run", "-A", CHILD, "run", ...modules],
          childEnv(),
          JSON.stringify(skip),
        );
        return { code: r.code, err: r.err, results: lines(r.out, "RESULT") as Result[] };
      })();
    for (const module of modules) {
      Deno.test(`WebGPU tests of ${module} (${adapter}, a child's main thread)`, async () => {
        const { results: all, err } = await results();
        const mine = all.filter((r) => r.module === module);
        assert.ok(mine.length > 0, `${module} mentions WebGPU but ran no WebGPU test`);
        const failed = mine.filter((r) => !r.ok);
        assert.deepEqual(
          failed.map((r) => `${r.name}: ${r.error}`),
          [],
          `${failed.length} of ${mine.length} failed\n${err.slice(-4000)}`,
        );
      });
    }
    Deno.test("WebGPU tests: the child process ran every module and exited cleanly", async () => {
      const { code, err, results: all } = await results();
      assert.equal(code, 0, `exit code ${code}:\n${err.slice(-4000)}`);
      assert.ok(all.length > 0, "some WebGPU tests ran");
    });
  }
}
