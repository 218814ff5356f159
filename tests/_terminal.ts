// Runs a command on a pseudo-terminal (util-linux `script`), where Deno asks
// for a missing permission at a prompt instead of denying it silently, and
// ends the command at the first prompt. Shared by the tests that the
// README's commands run without one.

/** What the command printed on its terminal, and whether Deno stopped at a prompt. */
export interface TerminalRun {
  /** Everything the terminal showed (stdout and stderr together). */
  out: string;
  /** True when Deno asked for a permission (the command was then ended). */
  prompted: boolean;
}

/** Whether `script` is here to give a command a terminal. */
export function haveTerminal(): boolean {
  try {
    return new Deno.Command("script", { args: ["--version"], stdout: "null", stderr: "null" })
      .outputSync().success;
  } catch {
    return false;
  }
}

/** Runs `deno <args>` in `cwd` on a terminal; ends it at a permission prompt. */
export async function runOnTerminal(args: string[], cwd: string): Promise<TerminalRun> {
  const quoted = [Deno.execPath(), ...args].map((a) => `'${a.replaceAll("'", `'\\''`)}'`);
  const child = new Deno.Command("script", {
    args: ["-qec", quoted.join(" "), "/dev/null"],
    cwd,
    stdin: "piped", // kept open: a prompt waits on it
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const err = new Response(child.stderr).text();
  const dec = new TextDecoder();
  let out = "";
  let prompted = false;
  const reader = child.stdout.getReader();
  for (let r = await reader.read(); !r.done; r = await reader.read()) {
    out += dec.decode(r.value);
    if (!prompted && /Deno requests|Allow\?/.test(out)) {
      prompted = true;
      child.kill("SIGKILL");
    }
  }
  await child.stdin.close().catch(() => {});
  await child.status;
  return { out: out + (await err), prompted };
}
