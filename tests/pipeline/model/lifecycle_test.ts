/**
 * A training script's life as a user runs it: `deno run` on a small script
 * in a temporary folder that imports the package, trains a step and prints
 * the loss. It must exit by itself, with status 0, whether it disposes the
 * model or not (worker ranks are unref'd between calls), also when the
 * package comes over HTTP (as from JSR), and it needs no permission beyond
 * reading the package's files.
 *
 * @module
 */

import assert from "node:assert/strict";

const ROOT = new URL("../../../", import.meta.url);
const TIMEOUT_MS = 60_000;

function script(modUrl: string, body: string): string {
  return `import { CpuBackend, Linear, PipelineParallelModel, ReLU, Sequential } from ${
    JSON.stringify(modUrl)
  };
const be = new CpuBackend();
const net = new Sequential([new Linear(be, 2, 8, { seed: 1 }), new ReLU(be), new Linear(be, 8, 1, { seed: 2 })]);
const options = {
  model: net, schedule: "1f1b", ranks: 2, microBatches: 2,
  optimizer: { kind: "sgd", lr: 0.1 }, loss: "mse", backend: "cpu", rankGroup: Deno.args[0] === "in-process" ? "in-process" : "workers",
} as const;
const batch = { inputs: new Float32Array([0, 1, 1, 0, 1, 1, 0, 0]), shape: [4, 2], targets: new Float32Array([1, 1, 0, 0]) };
${body}
`;
}

interface Exit {
  code: number;
  out: string;
  err: string;
  ms: number;
  timedOut: boolean;
}

async function runScript(text: string, flags: string[], args: string[] = []): Promise<Exit> {
  const dir = await Deno.makeTempDir();
  const path = `${dir}/train.ts`;
  await Deno.writeTextFile(path, text);
  const t0 = performance.now();
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "--quiet", ...flags, path, ...args],
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    child.kill("SIGKILL");
  }, TIMEOUT_MS);
  const r = await child.output();
  clearTimeout(timer);
  await Deno.remove(dir, { recursive: true });
  const dec = new TextDecoder();
  return {
    code: r.code,
    out: dec.decode(r.stdout),
    err: dec.decode(r.stderr),
    ms: performance.now() - t0,
    timedOut,
  };
}

const readPackage = `--allow-read=${new URL(".", ROOT).pathname}`;
const NO_DISPOSE = `const model = await PipelineParallelModel.create(options);
net.dispose();
const r = await model.step(batch);
console.log("loss", r.loss.toFixed(6)); // and no dispose: the process must still exit`;

for (const mode of ["workers", "in-process"]) {
  Deno.test(`a script that never disposes its model (${mode}) exits by itself with status 0, reading only the package`, async () => {
    const r = await runScript(script(new URL("mod.ts", ROOT).href, NO_DISPOSE), [readPackage], [
      mode,
    ]);
    assert.ok(!r.timedOut, `the script hung (killed after ${TIMEOUT_MS} ms)\n${r.err}`);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /^loss \d+\.\d{6}\n$/);
  });
}

Deno.test("`await using` disposes the model at the end of its block; the script exits", async () => {
  const body = `let kept;
{
  await using model = await PipelineParallelModel.create(options);
  kept = model;
  console.log("loss", (await model.step(batch)).loss > 0);
  console.log("open", model.closed);
}
console.log("closed", kept.closed);
net.dispose();`;
  const r = await runScript(script(new URL("mod.ts", ROOT).href, body), [readPackage]);
  assert.ok(!r.timedOut, r.err);
  assert.equal(r.code, 0, r.err);
  assert.equal(r.out, "loss true\nopen false\nclosed true\n");
});

Deno.test("the package imported over HTTP (as from JSR): worker ranks start (node workers take file: URLs only) and the script exits without dispose", async () => {
  const root = new URL(".", ROOT).pathname;
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (req) => {
    const path = decodeURIComponent(new URL(req.url).pathname);
    if (path.includes("..")) return new Response("no", { status: 403 });
    try {
      const body = await Deno.readFile(root + path.slice(1));
      const type = path.endsWith(".ts") ? "application/typescript" : "text/plain";
      return new Response(body, { headers: { "content-type": type } });
    } catch {
      return new Response("not found", { status: 404 });
    }
  });
  try {
    const host = `127.0.0.1:${server.addr.port}`;
    const r = await runScript(
      script(`http://${host}/mod.ts`, NO_DISPOSE),
      [`--allow-import=${host}`, "--reload"],
    );
    assert.ok(!r.timedOut, r.err);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /^loss \d+\.\d{6}\n$/);
  } finally {
    await server.shutdown();
  }
});
