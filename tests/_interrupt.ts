// Runs `deno <args>` as a child process and sends it SIGINT (a Ctrl-C) once
// its standard output holds `marker`; collects what it wrote. Shared by the
// tests of the Ctrl-C handling (cli train, the training script example).

/** What the interrupted child gave: its exit code, stdout and stderr. */
export interface Interrupted {
  code: number;
  out: string;
  err: string;
}

/** Spawns `deno <args>` in `cwd`, interrupts it after `marker` on stdout, waits for its end. */
export async function interruptAfter(
  args: string[],
  marker: string,
  cwd?: string,
): Promise<Interrupted> {
  const child = new Deno.Command(Deno.execPath(), {
    args,
    ...(cwd === undefined ? {} : { cwd }),
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const err = new Response(child.stderr).text(); // read alongside, so the pipe never fills
  const dec = new TextDecoder();
  let out = "";
  const reader = child.stdout.getReader();
  while (!out.includes(marker)) {
    const r = await reader.read();
    if (r.done) break;
    out += dec.decode(r.value);
  }
  child.kill("SIGINT");
  for (let r = await reader.read(); !r.done; r = await reader.read()) out += dec.decode(r.value);
  const status = await child.status;
  return { code: status.code, out, err: await err };
}
