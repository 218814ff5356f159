// Runs `cli.ts` in this process and collects what it writes. Shared by the
// CLI tests.

import { main } from "../cli.ts";

/** What one CLI run gave: its exit code, stdout and stderr. */
export interface Run {
  code: number;
  out: string;
  err: string;
}

/** Runs `cli.ts <args>` in this process. */
export async function cli(...args: string[]): Promise<Run> {
  let out = "";
  let err = "";
  const code = await main(args, { out: (t) => void (out += t), err: (t) => void (err += t) });
  return { code, out, err };
}
