// createBackend and chooseBackend: "auto" is WebGPU on a hardware adapter
// only, the CPU backend on a software one (llvmpipe, lavapipe, SwiftShader,
// a fallback adapter) or without one, said once per process on stderr;
// "webgpu" and "cpu" are obeyed. Fake adapters stand in for the hardware.

import assert from "node:assert/strict";
import { isSoftwareAdapter } from "../../src/tensor/software_adapter.ts";
import { chooseBackend, createBackend } from "../../src/tensor/create_backend.ts";

const SCRIPT = new URL("./_auto_backend.ts", import.meta.url).pathname;

Deno.test("isSoftwareAdapter: llvmpipe, lavapipe, SwiftShader and fallback adapters; not GPUs", () => {
  const software = [
    { vendor: "65541", description: "llvmpipe (LLVM 15.0.6, 256 bits)" },
    { vendor: "mesa", device: "lavapipe", description: "" },
    { vendor: "Google", description: "SwiftShader Device (Subzero)" },
    { architecture: "swiftshader" },
    { vendor: "microsoft", description: "Microsoft Basic Render Driver (software)" },
    { description: "NVIDIA whatever", isFallbackAdapter: true },
  ];
  for (const info of software) assert.equal(isSoftwareAdapter(info), true, JSON.stringify(info));
  const hardware = [
    { vendor: "nvidia", architecture: "hopper", description: "NVIDIA H200" },
    { vendor: "amd", architecture: "rdna-3", description: "AMD Radeon RX 7900 XTX" },
    { vendor: "apple", architecture: "metal-3", description: "Apple M2", isFallbackAdapter: false },
    { vendor: "intel", description: "Intel(R) UHD Graphics 770 (ADL-S GT1)" },
    {},
  ];
  for (const info of hardware) assert.equal(isSoftwareAdapter(info), false, JSON.stringify(info));
  assert.equal(isSoftwareAdapter(undefined), false);
});

const fakeAdapter = (info: Partial<GPUAdapterInfo>) => ({ info }) as unknown as GPUAdapter;

Deno.test("chooseBackend: explicit kinds are obeyed; auto judges the adapter it is given", async () => {
  assert.deepEqual(await chooseBackend("cpu"), { kind: "cpu", reason: "asked for" });
  assert.deepEqual(await chooseBackend("webgpu"), { kind: "webgpu", reason: "asked for" });
  const soft = await chooseBackend("auto", {
    adapter: fakeAdapter({ description: "llvmpipe (LLVM 15.0.6, 256 bits)" }),
    notice: false,
  });
  assert.equal(soft.kind, "cpu");
  assert.match(soft.reason, /"llvmpipe \(LLVM 15\.0\.6, 256 bits\)" is a software renderer/);
  const gpu = fakeAdapter({ vendor: "nvidia", description: "NVIDIA H200" });
  const hard = await chooseBackend("auto", { adapter: gpu, notice: false });
  assert.equal(hard.kind, "webgpu");
  assert.equal(hard.adapter, gpu);
  assert.match(hard.reason, /"NVIDIA H200"/);
  await assert.rejects(
    () => chooseBackend("tpu" as "cpu"),
    (e) => e instanceof RangeError && /"tpu"/.test(e.message),
  );
  await assert.rejects(
    () => createBackend("tpu" as "cpu"),
    (e) => e instanceof RangeError && /"tpu"/.test(e.message),
  );
  assert.equal((await createBackend("cpu")).name, "cpu");
});

async function runAuto(...args: string[]): Promise<{ kinds: string[]; notices: string[] }> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", SCRIPT, ...args],
    env: { NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const err = new TextDecoder().decode(out.stderr);
  assert.equal(out.code, 0, err);
  return {
    kinds: JSON.parse(new TextDecoder().decode(out.stdout)),
    notices: err.split("\n").filter((l) => l.startsWith("conveyor:")),
  };
}

Deno.test("auto, in a fresh process: the choice per adapter, said once on stderr", async () => {
  const cases: [string, string, RegExp][] = [
    ["software", "cpu", /chose cpu: the WebGPU adapter "llvmpipe.*" is a software renderer/],
    ["fallback", "cpu", /chose cpu: the WebGPU adapter "Acme Graphics" is a software renderer/],
    ["hardware", "webgpu", /chose webgpu: WebGPU adapter "NVIDIA H200"$/],
    ["null", "cpu", /chose cpu: no WebGPU adapter$/],
    ["none", "cpu", /chose cpu: no WebGPU here \(navigator\.gpu is undefined\)$/],
  ];
  for (const [mode, kind, notice] of cases) {
    const r = await runAuto(mode);
    assert.ok(r.kinds.length >= 3 && r.kinds.every((k) => k === kind), `${mode}: ${r.kinds}`);
    assert.equal(r.notices.length, 1, `${mode}: one notice, got ${JSON.stringify(r.notices)}`);
    assert.match(r.notices[0], /^conveyor: backend "auto" chose /);
    assert.match(r.notices[0], notice);
  }
});

Deno.test("auto in a pipeline of worker ranks: decided once in the main thread, said once, every rank on it", async () => {
  const r = await runAuto("software", "model");
  assert.deepEqual(r.kinds, ["cpu", "cpu", "cpu", "cpu", "cpu", "cpu"]);
  assert.equal(r.notices.length, 1, JSON.stringify(r.notices));
});

Deno.test("chooseBackend's notice names the process's rank when given one (under MPI each process says its own choice), and nothing else changes", async () => {
  const url = new URL("../../src/tensor/create_backend.ts", import.meta.url).href;
  const code = `import { chooseBackend } from ${JSON.stringify(url)};
const adapter = { info: { description: "llvmpipe (LLVM 15.0.6, 256 bits)" } };
await chooseBackend("auto", { adapter, rank: 3 });`;
  const r = await new Deno.Command(Deno.execPath(), {
    args: ["eval", "--quiet", code],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(r.code, 0);
  assert.match(
    new TextDecoder().decode(r.stderr),
    /^conveyor: rank 3: backend "auto" chose cpu: the WebGPU adapter "llvmpipe/,
  );
  await assert.rejects(() => chooseBackend("cpu", { rank: -1 }), /rank must be an integer >= 0/);
});
