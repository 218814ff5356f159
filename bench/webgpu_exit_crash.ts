/**
 * How often Deno crashes at process exit around worker threads that used
 * WebGPU, without any Conveyor code: each variant is a script of a few
 * lines, run `--runs` times as its own `deno run`; a run that ends by a
 * signal or a non-zero code counts as a crash (glibc's "corrupted size vs.
 * prev_size in fastbins", "malloc_consolidate(): unaligned fastbin chunk", or
 * a segfault). It is why the README tells users of WebGPU ranks to dispose
 * before their script ends, and what `deno task test` sometimes prints after
 * its summary.
 *
 * ```sh
 * deno run -A bench/webgpu_exit_crash.ts              # 200 runs per variant
 * deno run -A bench/webgpu_exit_crash.ts --runs 500
 * ```
 *
 * Needs a WebGPU adapter (llvmpipe here). Measured on 2 cores while other
 * jobs ran: exit right after terminating a WebGPU worker 46 of 921, an
 * unref'd node worker holding a device 21 of 596, no WebGPU in the worker
 * 0 of 1859, waiting for the worker's thread to leave /proc first 0 of 747;
 * quiet, `--runs 150`: main thread only 0, terminated WebGPU worker 5, no
 * WebGPU 0, waiting 0, unref'd node worker 6 (all SIGSEGV).
 *
 * @module
 */

import { benchArgs, intFlag } from "./_args.ts";

const values = benchArgs("bench/webgpu_exit_crash.ts", {
  runs: { type: "string", default: "200" },
});
const runs = intFlag("bench/webgpu_exit_crash.ts", "runs", values.runs);
if (!Number.isInteger(runs) || runs < 1) {
  throw new RangeError(`--runs must be a positive integer, got ${values.runs}`);
}

const GPU_WORKER = `const a = await navigator.gpu.requestAdapter();
const d = await a.requestDevice();
d.destroy();
self.postMessage("done");`;
const CPU_WORKER = `self.postMessage(new Float32Array(1 << 20).fill(1).length);`;
const NODE_GPU_WORKER = `import { parentPort } from "node:worker_threads";
const a = await navigator.gpu.requestAdapter();
const d = await a.requestDevice();
parentPort.postMessage("ready");
parentPort.unref();`;
const TERMINATE = `const w = new Worker(new URL("./w.js", import.meta.url), { type: "module" });
await new Promise((r) => (w.onmessage = r));
w.terminate();`;

const variants: { name: string; main: string; worker: string; file: string }[] = [
  {
    name: "WebGPU in the main thread only, then exit",
    main: `const a = await navigator.gpu.requestAdapter();
const d = await a.requestDevice();
d.destroy();`,
    worker: "",
    file: "w.js",
  },
  {
    name: "a web Worker used WebGPU, terminate(), exit at once",
    main: TERMINATE,
    worker: GPU_WORKER,
    file: "w.js",
  },
  { name: "the same worker without WebGPU", main: TERMINATE, worker: CPU_WORKER, file: "w.js" },
  {
    name: "WebGPU worker, terminate(), wait for its thread to leave /proc",
    main: `const before = new Set([...Deno.readDirSync("/proc/self/task")].map((e) => e.name));
${TERMINATE.replace("w.terminate();", "")}
const mine = [...Deno.readDirSync("/proc/self/task")].map((e) => e.name).filter((t) => !before.has(t));
w.terminate();
const alive = () => mine.some((t) => { try { Deno.statSync("/proc/self/task/" + t); return true; } catch { return false; } });
const t0 = Date.now();
while (alive() && Date.now() - t0 < 2000) await new Promise((r) => setTimeout(r, 5));`,
    worker: GPU_WORKER,
    file: "w.js",
  },
  {
    name: "an unref'd node worker holding a WebGPU device, never ended",
    main: `import { Worker } from "node:worker_threads";
const w = new Worker(new URL("./w.mjs", import.meta.url));
await new Promise((r) => w.once("message", r));
w.unref();`,
    worker: NODE_GPU_WORKER,
    file: "w.mjs",
  },
];

const dir = await Deno.makeTempDir({ prefix: "conveyor-exit-crash-" });
try {
  console.log(`each variant run ${runs} times as its own process (deno ${Deno.version.deno})\n`);
  console.log("| variant | crashed | runs | how |");
  console.log("| :------ | ------: | ---: | :-- |");
  for (const v of variants) {
    const sub = `${dir}/${variants.indexOf(v)}`;
    await Deno.mkdir(sub);
    await Deno.writeTextFile(`${sub}/main.js`, v.main);
    if (v.worker !== "") await Deno.writeTextFile(`${sub}/${v.file}`, v.worker);
    let crashed = 0;
    const how = new Map<string, number>();
    for (let i = 0; i < runs; i++) {
      const r = await new Deno.Command(Deno.execPath(), {
        args: ["run", "-A", `${sub}/main.js`],
        stdout: "null",
        stderr: "piped",
      }).output();
      if (r.success) continue;
      crashed++;
      const text = new TextDecoder().decode(r.stderr).trim().split("\n").pop() ?? "";
      const key = r.signal !== null
        ? `${r.signal}${text === "" ? "" : `: ${text}`}`
        : `exit ${r.code}`;
      how.set(key, (how.get(key) ?? 0) + 1);
    }
    const kinds = [...how].map(([k, n]) => `${n}× ${k}`).join("; ");
    console.log(`| ${v.name} | ${crashed} | ${runs} | ${kinds || "—"} |`);
  }
} finally {
  await Deno.remove(dir, { recursive: true });
}
