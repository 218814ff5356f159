/**
 * A one-line progress bar for the examples: redrawn in place with a carriage
 * return on a terminal, plain lines otherwise (logs, CI, pipes).
 *
 * @module
 */

const enc = new TextEncoder();

/** Progress output for a loop of `total` steps. */
export class Progress {
  readonly total: number;
  readonly tty: boolean;
  #width: number;
  #lastLen = 0;

  /** `tty` defaults to whether stdout is a terminal. */
  constructor(total: number, opts?: { tty?: boolean; width?: number }) {
    this.total = total;
    this.tty = opts?.tty ?? Deno.stdout.isTerminal();
    this.#width = opts?.width ?? 24;
  }

  /** Reports step `done` (1-based) with a status text, e.g. the loss. */
  update(done: number, status: string): void {
    const n = String(this.total).length;
    const head = `step ${String(done).padStart(n)}/${this.total}`;
    if (!this.tty) {
      console.log(`${head}  ${status}`);
      return;
    }
    const filled = Math.round((done / this.total) * this.#width);
    const bar = "#".repeat(filled) + "-".repeat(this.#width - filled);
    const line = `[${bar}] ${head}  ${status}`;
    const pad = " ".repeat(Math.max(0, this.#lastLen - line.length));
    this.#lastLen = line.length;
    Deno.stdout.writeSync(enc.encode(`\r${line}${pad}`));
  }

  /** Ends the bar's line (on a terminal). */
  done(): void {
    if (this.tty && this.#lastLen > 0) Deno.stdout.writeSync(enc.encode("\n"));
    this.#lastLen = 0;
  }
}
