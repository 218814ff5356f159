import assert from "node:assert/strict";

const root = new URL("../../../", import.meta.url).pathname.replace(/\/$/, "");

Deno.test("worker ranks without read permission for the package: Deno's NotCapable names the flag to add (--allow-read=<package folder>), and the script ends", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const script = `${dir}/no_read.ts`;
    await Deno.writeTextFile(
      script,
      `import { CpuBackend, Linear, PipelineParallelModel, Sequential } from "${root}/mod.ts";
const be = new CpuBackend();
const net = new Sequential([new Linear(be, 2, 4, { seed: 1 }), new Linear(be, 4, 1, { seed: 2 })]);
try {
  await PipelineParallelModel.create({
    model: net, schedule: "1f1b", ranks: 2, microBatches: 2, loss: "mse", backend: "cpu",
    optimizer: { kind: "sgd", lr: 0.1 },
  });
  console.log("created");
} catch (e) {
  console.log(e instanceof Deno.errors.NotCapable, e.message);
}
`,
    );
    // Static imports need no permission; the workers' module loads do.
    const r = await new Deno.Command(Deno.execPath(), {
      args: ["run", "--quiet", `--allow-read=${dir}`, script],
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).output();
    const out = new TextDecoder().decode(r.stdout);
    assert.equal(r.code, 0, new TextDecoder().decode(r.stderr));
    assert.ok(
      out.startsWith(
        `true the worker ranks load their modules from ${root}, which this script may not read: ` +
          `run with --allow-read=${root} (or run every rank in this thread: rankGroup: "in-process", ` +
          `or --in-process on cli.ts) ` +
          "[Requires read access to",
      ),
      out,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
