// Every worker the runtime starts, with a closed flag set when it is
// terminated: Deno has no API that tells whether a worker is alive, and
// tests must check that none outlives its pool.
//
// Workers are node:worker_threads workers behind a web-Worker face
// (onmessage, onerror, postMessage with transfers): Deno runs them as its
// own workers, and they alone can be unref'd (`worker.unref()`), so that a
// group idle between calls does not keep the process alive. Deno's web
// `Worker` has no such switch: a live one holds the process forever.

import { Worker as NodeWorker } from "node:worker_threads";
import { fileURLToPath } from "node:url";

interface Entry {
  closed: boolean;
}

const entries = new Set<Entry>();

/** The web-Worker face of a started worker. */
export interface WorkerFace {
  /** Called with each message from the worker. */
  onmessage: ((e: MessageEvent) => void) | null;
  /** Called when the worker throws an uncaught error (it then exits). */
  onerror: ((e: ErrorEvent) => void) | null;
  /** Called when a message from the worker cannot be deserialised. */
  onmessageerror: ((e: MessageEvent) => void) | null;
  /** Posts `message`, transferring `transfer` (ports, buffers). */
  postMessage(message: unknown, transfer?: Transferable[]): void;
}

/** A started worker and the only way the runtime ends it. */
export interface TrackedWorker {
  readonly worker: WorkerFace;
  /** Terminates the worker (idempotent) and marks it closed. */
  terminate(): void;
  readonly closed: boolean;
  /** Lets the worker keep the process alive (the default). */
  ref(): void;
  /** Lets the process exit while the worker lives (it is then ended with the process). */
  unref(): void;
}

// node:worker_threads takes file: and data: URLs only; a module from
// anywhere else (the package imported from JSR: https) starts through a
// data: module that imports it and hands it the messages that came first.
function bootstrap(url: string): URL {
  const code = `const early = [];
globalThis.onmessage = (e) => early.push(e);
import(${JSON.stringify(url)}).then(() => {
  const handle = globalThis.onmessage;
  for (const e of early) handle?.(e);
}, (error) => setTimeout(() => { throw error; }));`;
  return new URL(`data:text/javascript,${encodeURIComponent(code)}`);
}

/**
 * Deno's refusal to read a worker's module, rethrown naming the flag that
 * allows it: the package's folder when the module is the package's, else
 * the module's folder.
 */
function readRefused(e: Deno.errors.NotCapable, target: URL): Error {
  const root = new URL("../../../", import.meta.url); // the package's folder
  const pkg = root.protocol === "file:" ? fileURLToPath(root).replace(/[\\/]$/, "") : null;
  const needed = /"([^"]+)"/.exec(e.message)?.[1] ??
    (target.protocol === "file:" ? fileURLToPath(target) : target.href);
  const inside = pkg !== null && (needed.startsWith(pkg + "/") || needed.startsWith(pkg + "\\"));
  const dir = inside
    ? pkg
    : needed.slice(0, Math.max(needed.lastIndexOf("/"), needed.lastIndexOf("\\"))) || needed;
  return new Deno.errors.NotCapable(
    `the worker ranks load their modules from ${dir}, which this script may not read: run ` +
      `with --allow-read=${dir} (or run every rank in this thread: rankGroup: "in-process", or ` +
      `--in-process on cli.ts) ` +
      `[${e.message}]`,
    { cause: e },
  );
}

// node:worker_threads copies the whole of process.env into a worker unless
// told otherwise, and reading it all asks for env access: on a terminal a
// script run without --allow-env stopped at a prompt as its ranks started.
// Without that permission a worker gets an empty process.env (Deno.env
// still answers under the script's own permissions); with it, the copy.
function workerEnv(): { env?: Record<string, string> } {
  return Deno.permissions.querySync({ name: "env" }).state === "granted" ? {} : { env: {} };
}

/** Starts a module worker from `url` and registers it. */
export function startWorker(url: string, name: string): TrackedWorker {
  const target = new URL(url);
  let node: NodeWorker;
  try {
    node = new NodeWorker(target.protocol === "file:" ? target : bootstrap(target.href), {
      name,
      ...workerEnv(),
    });
  } catch (e) {
    if (e instanceof Deno.errors.NotCapable) throw readRefused(e, target);
    throw e;
  }
  const face: WorkerFace = {
    onmessage: null,
    onerror: null,
    onmessageerror: null,
    postMessage(message, transfer) {
      node.postMessage(message, transfer as never);
    },
  };
  node.on("message", (data: unknown) => face.onmessage?.(new MessageEvent("message", { data })));
  node.on(
    "messageerror",
    (data: unknown) => face.onmessageerror?.(new MessageEvent("messageerror", { data })),
  );
  node.on("error", (error: unknown) => {
    const message = error instanceof Error ? error.message : String(error);
    face.onerror?.(new ErrorEvent("error", { message, error }));
  });
  const entry: Entry = { closed: false };
  entries.add(entry);
  return {
    worker: face,
    terminate() {
      if (entry.closed) return;
      entry.closed = true;
      entries.delete(entry);
      void node.terminate().catch(() => {});
    },
    get closed() {
      return entry.closed;
    },
    ref() {
      if (!entry.closed) node.ref();
    },
    unref() {
      if (!entry.closed) node.unref();
    },
  };
}

/** Workers started and not yet terminated. */
export function liveCount(): number {
  return entries.size;
}
