// Runs a bench rank script under Open MPI's mpirun and reads the `ROW <json>`
// lines it prints. Shared by bench/mpi_pipeline.ts and bench/transport_bench.ts.

/** What an mpirun job printed. */
export interface MpirunRows {
  /** Whether mpirun exited with status 0. */
  readonly success: boolean;
  /** The job's standard output and error. */
  readonly stdout: string;
  readonly stderr: string;
  /** The objects of its `ROW <json>` lines, in order. */
  readonly rows: Record<string, unknown>[];
}

/**
 * Runs `deno run -A script ...args` in `ranks` processes:
 * `mpirun -n ranks --oversubscribe --mca btl <btl>`. Without mpirun it
 * throws Deno.errors.NotFound.
 */
export async function mpirunRows(
  ranks: number,
  btl: string,
  script: string,
  args: readonly string[],
): Promise<MpirunRows> {
  const out = await new Deno.Command("mpirun", {
    args: [
      "-n",
      String(ranks),
      "--oversubscribe",
      "--mca",
      "btl",
      btl,
      Deno.execPath(),
      "run",
      "-A",
      script,
      ...args,
    ],
    env: { OMPI_ALLOW_RUN_AS_ROOT: "1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM: "1", NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const stdout = new TextDecoder().decode(out.stdout);
  return {
    success: out.success,
    stdout,
    stderr: new TextDecoder().decode(out.stderr),
    rows: stdout.split("\n").filter((l) => l.startsWith("ROW ")).map((l) => JSON.parse(l.slice(4))),
  };
}
