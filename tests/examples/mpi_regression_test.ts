import assert from "node:assert/strict";
import { parseSafetensors } from "../../src/nn/safetensors.ts";
import { requireMpirun } from "../mpi/_mpirun.ts";
import { mpiTest } from "../mpi/_open_mpi.ts";

const script = new URL("../../examples/mpi_regression.ts", import.meta.url).pathname;

mpiTest(
  "mpi regression example: 2 processes train, rank 0 prints and writes the weights",
  async () => {
    await requireMpirun();
    const dir = await Deno.makeTempDir();
    try {
      const file = `${dir}/w.safetensors`;
      const env: Record<string, string> = {};
      for (const [k, v] of Object.entries(Deno.env.toObject())) {
        if (!/^(OMPI_|PMIX_|PMI_|CONVEYOR_)/.test(k)) env[k] = v;
      }
      const r = await new Deno.Command("mpirun", {
        args: ["-n", "2", "--oversubscribe", Deno.execPath(), "run", "-A", script, file],
        env: {
          ...env,
          STEPS: "20",
          OMPI_ALLOW_RUN_AS_ROOT: "1",
          OMPI_ALLOW_RUN_AS_ROOT_CONFIRM: "1",
          NO_COLOR: "1",
        },
        clearEnv: true,
        stdout: "piped",
        stderr: "piped",
        signal: AbortSignal.timeout(120_000),
      }).output();
      const out = new TextDecoder().decode(r.stdout);
      assert.equal(r.code, 0, new TextDecoder().decode(r.stderr));
      const losses = [...out.matchAll(/^step (\d+): loss (\d+\.\d+), bubble \d+%$/gm)];
      assert.deepEqual(losses.map((m) => m[1]), ["20"], "printed once, by rank 0");
      const tensors = parseSafetensors(await Deno.readFile(file)).tensors;
      assert.equal(tensors.size, 6, "3 Linear layers: weight and bias each");
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
);
