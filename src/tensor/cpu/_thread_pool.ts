/**
 * The threads of one fast CPU backend: workers that each instantiate the
 * kernels' module over the backend's shared memory, and run a kernel
 * together with the calling thread when asked.
 *
 * A call writes the kernel's index and its job's address into the control
 * block, opens the job, bumps the generation and wakes the workers
 * (`Atomics.notify`); every thread, the caller included, claims the
 * kernel's tasks from the job's counter. A worker takes part only if it
 * enters while the job is open (one compare-and-swap on a word holding the
 * open bit and the count of workers in); when the caller has no task left
 * it closes the job and waits for the workers that entered. So a worker
 * the OS has not scheduled yet (a busy machine) costs nothing: the caller
 * and the others do its share, and it sits the job out. Workers sleep in
 * `Atomics.wait` between calls, using no CPU.
 *
 * Workers are node:worker_threads workers from a data: module (they import
 * nothing, read no file and need no permission; `env: {}` spares the
 * env access a copy of the parent's environment would ask for), unref'd:
 * a script that never closes its backend still exits. The pool starts on
 * the first call that wants threads, waits (at most START_WAIT_MS) for
 * the workers to be ready, and runs calls on the caller alone until then.
 *
 * @module
 */

import { Worker as NodeWorker } from "node:worker_threads";

// Control block (Int32 slots). ENTRY: 2 × (workers in the job) + 1 while
// the job is open.
const GEN = 0, FN = 1, READY = 2, JOB = 3, DONE = 4, FAILED = 5, ENTRY = 6;
/** Bytes of the control block. */
export const CONTROL_BYTES = 64;
const START_WAIT_MS = 10_000;

const WORKER_SOURCE = `import { parentPort } from "node:worker_threads";
parentPort.once("message", ({ memory, module, names, control, stack, tid }) => {
  const { exports } = new WebAssembly.Instance(module, { env: { memory } });
  exports.__stack_pointer.value = stack;
  const fns = names.map((n) => exports[n]);
  const I = new Int32Array(memory.buffer, control, 16);
  let gen = Atomics.load(I, ${GEN});
  Atomics.add(I, ${READY}, 1);
  Atomics.notify(I, ${READY});
  for (;;) {
    Atomics.wait(I, ${GEN}, gen);
    gen = Atomics.load(I, ${GEN});
    if (Atomics.load(I, ${FN}) < 0) break;
    let w, entered = false;
    while (((w = Atomics.load(I, ${ENTRY})) & 1) === 1) {
      if (Atomics.compareExchange(I, ${ENTRY}, w, w + 2) === w) {
        entered = true;
        break;
      }
    }
    if (!entered) continue;
    try {
      fns[Atomics.load(I, ${FN})](Atomics.load(I, ${JOB}), tid);
    } catch (e) {
      Atomics.store(I, ${FAILED}, 1);
      console.error("conveyor: a CPU kernel thread failed:", e);
    }
    Atomics.add(I, ${DONE}, 1);
    Atomics.notify(I, ${DONE});
  }
});`;

const WORKER_URL = new URL(`data:text/javascript,${encodeURIComponent(WORKER_SOURCE)}`);

// Ends the workers of pools whose backend was collected without close().
const orphans = new FinalizationRegistry<ThreadPool>((pool) => pool.close());

/** What a pool needs to start its workers. */
export interface ThreadPoolSetup {
  readonly memory: WebAssembly.Memory;
  readonly module: WebAssembly.Module;
  /** The kernels' export names, in the order `run` indexes them. */
  readonly names: readonly string[];
  /** Address of the control block (CONTROL_BYTES). */
  readonly control: number;
  /** Top of each worker's stack (threads - 1 of them). */
  readonly stacks: readonly number[];
}

/** Workers over one shared memory, started lazily. */
export class ThreadPool {
  readonly #setup: ThreadPoolSetup;
  readonly #workers: NodeWorker[] = [];
  #control: Int32Array | null = null;
  #started = false;
  #ready = false;
  #closed = false;

  /** A pool of `setup.stacks.length` workers (not started yet). */
  constructor(setup: ThreadPoolSetup) {
    this.#setup = setup;
  }

  /** Ends the pool's workers when `owner` is collected without `close()`. */
  watch(owner: object): void {
    orphans.register(owner, this, this);
  }

  /** Workers (the caller not counted). */
  get workers(): number {
    return this.#setup.stacks.length;
  }

  /** Whether the workers are running and take part in calls. */
  get ready(): boolean {
    return this.#ready;
  }

  /**
   * Starts the workers if not yet started and waits until they are ready
   * (at most 10 s); returns whether they are.
   */
  start(): boolean {
    if (this.#closed || this.workers === 0) return false;
    if (!this.#started) {
      this.#started = true;
      const { memory, module, names, control, stacks } = this.#setup;
      this.#control = new Int32Array(memory.buffer, control, 16);
      for (let i = 0; i < stacks.length; i++) {
        const w = new NodeWorker(WORKER_URL, { env: {}, name: `conveyor-cpu-${i + 1}` });
        w.postMessage({ memory, module, names, control, stack: stacks[i], tid: i + 1 });
        w.unref();
        this.#workers.push(w);
      }
    }
    if (!this.#ready) {
      const I = this.#control!;
      const deadline = performance.now() + START_WAIT_MS;
      let n;
      while ((n = Atomics.load(I, READY)) < this.workers) {
        const left = deadline - performance.now();
        if (left <= 0) return false;
        Atomics.wait(I, READY, n, left);
      }
      this.#ready = true;
    }
    return true;
  }

  /**
   * Runs kernel `fn` on job `job` on every thread (the caller as thread
   * 0) and returns when all are done. The caller alone runs it when the
   * pool is not ready.
   */
  run(fn: number, job: number, kernel: (job: number, tid: number) => void): void {
    if (!this.#ready && !this.start()) {
      kernel(job, 0);
      return;
    }
    const I = this.#control!;
    Atomics.store(I, FN, fn);
    Atomics.store(I, JOB, job);
    Atomics.store(I, DONE, 0);
    Atomics.store(I, ENTRY, 1);
    Atomics.add(I, GEN, 1);
    Atomics.notify(I, GEN);
    let error: unknown = null;
    try {
      kernel(job, 0);
    } catch (e) {
      error = e;
    }
    // Close the job; wait for the workers that entered it.
    let w;
    do w = Atomics.load(I, ENTRY); while (Atomics.compareExchange(I, ENTRY, w, w & ~1) !== w);
    const entered = w >> 1;
    let d;
    while ((d = Atomics.load(I, DONE)) < entered) Atomics.wait(I, DONE, d);
    if (error !== null) throw error;
    if (Atomics.exchange(I, FAILED, 0) !== 0) {
      throw new Error("a CPU kernel thread failed (its error is on stderr)");
    }
  }

  /** Ends the workers (idempotent). */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    orphans.unregister(this);
    if (this.#control !== null) {
      Atomics.store(this.#control, FN, -1);
      Atomics.add(this.#control, GEN, 1);
      Atomics.notify(this.#control, GEN);
    }
    for (const w of this.#workers) void w.terminate().catch(() => {});
    this.#workers.length = 0;
  }
}
