/**
 * The WGSL kernel sources as the WebGPU backend loads them: every file in
 * `kernels/` is either a kernel the backend registers or a `_` snippet that
 * kernels take in with `//#include`, no include is left unresolved, and
 * every registered kernel compiles into a pipeline with its default
 * constants (the compile check needs an adapter; the rest does not).
 *
 * @module
 */

import assert from "node:assert/strict";
import { KERNELS } from "../../src/tensor/webgpu/_kernels.ts";
import { specialize } from "../../src/tensor/webgpu/_shader.ts";

const DIR = new URL("../../kernels/", import.meta.url);
const INCLUDE = /^[ \t]*\/\/#include[ \t]+(\S+)[ \t]*$/gm;

async function kernelFiles(): Promise<Map<string, string>> {
  const files = new Map<string, string>();
  for await (const e of Deno.readDir(DIR)) {
    if (e.isFile && e.name.endsWith(".wgsl")) {
      files.set(e.name, await Deno.readTextFile(new URL(e.name, DIR)));
    }
  }
  return files;
}

Deno.test("kernels: every file is a registered kernel or a snippet some kernel includes", async () => {
  const files = await kernelFiles();
  const registered = new Set(Object.values(KERNELS).map((k) => k.name));
  const included = new Set<string>();
  for (const [name, src] of files) {
    for (const m of src.matchAll(INCLUDE)) {
      assert.ok(files.has(m[1]), `${name} includes ${m[1]}, which is not in kernels/`);
      assert.ok(m[1].startsWith("_"), `${name} includes ${m[1]}, which is not a _ snippet`);
      assert.ok(!name.startsWith("_"), `snippet ${name} includes ${m[1]}`);
      included.add(m[1]);
    }
  }
  for (const name of files.keys()) {
    if (name.startsWith("_")) assert.ok(included.has(name), `snippet ${name} is included nowhere`);
    else assert.ok(registered.has(name.slice(0, -5)), `kernel ${name} is not registered`);
  }
  for (const k of Object.values(KERNELS)) {
    assert.equal([...k.src.matchAll(INCLUDE)].length, 0, `${k.name} keeps an //#include`);
  }
});

async function openDevice(): Promise<GPUDevice | null> {
  if (Deno.env.get("CONVEYOR_TEST_BACKENDS") === "cpu") return null;
  const adapter = await navigator.gpu?.requestAdapter();
  return adapter ? await adapter.requestDevice() : null;
}
const device = await openDevice();

if (device !== null) {
  const dev = device;
  Deno.test("kernels: every registered kernel compiles into a pipeline with its defaults", async () => {
    const failed: string[] = [];
    for (const k of Object.values(KERNELS)) {
      dev.pushErrorScope("validation");
      const module = dev.createShaderModule({ code: specialize(k.src, {}) });
      const info = await module.getCompilationInfo();
      dev.createComputePipeline({ layout: "auto", compute: { module, entryPoint: "main" } });
      const err = await dev.popErrorScope();
      const errors = info.messages.filter((m) => m.type === "error").map((m) => m.message);
      if (err !== null) errors.push(err.message);
      if (errors.length > 0) failed.push(`${k.name}: ${errors.join("; ")}`);
    }
    dev.destroy();
    assert.deepEqual(failed, []);
  });
}
