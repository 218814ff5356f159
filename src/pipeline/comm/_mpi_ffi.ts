// Open MPI through Deno FFI: finding and loading libmpi (pinned in memory),
// the few libc calls the MPI backend needs, and the setup errors. Used by
// the MPI backend's files (mpi_backend.ts, _mpi_*.ts); not exported from the package.
//
// Open MPI's C handles (MPI_COMM_WORLD, MPI_FLOAT, ...) are the addresses of
// global symbols (`ompi_mpi_comm_world`, ...); Deno.dlopen's statics of type
// "pointer" give exactly those addresses. MPI_Status in Open MPI 4 and 5 is
// { int MPI_SOURCE; int MPI_TAG; int MPI_ERROR; int _cancelled; size_t
// _ucount } (24 bytes on 64-bit Linux; mpi.h, ompi_status_public_t); only
// the first two fields are read here, counts come from MPI_Get_count.

/** Environment variable naming the libmpi to load (a path or a soname). */
export const LIBMPI_ENV = "CONVEYOR_LIBMPI";

/** Tried in this order when neither the option nor the variable names one. */
export const LIBMPI_CANDIDATES: readonly string[] = [
  "libmpi.so.40",
  "libmpi.so",
  "/usr/lib/x86_64-linux-gnu/libmpi.so.40",
  "/usr/lib/aarch64-linux-gnu/libmpi.so.40",
  "/usr/lib64/openmpi/lib/libmpi.so.40",
  "/usr/lib/openmpi/libmpi.so.40",
  "/usr/local/lib/libmpi.so.40",
  "/opt/homebrew/lib/libmpi.40.dylib",
  "/usr/local/lib/libmpi.40.dylib",
];

/** MPI_Status size in bytes (Open MPI 4/5, 64-bit). */
export const STATUS_BYTES = 24;
/** MPI_ANY_SOURCE in Open MPI. */
export const ANY_SOURCE = -1;
/** MPI_THREAD_SERIALIZED: calls come from one thread at a time. */
export const THREAD_SERIALIZED = 2;
/** Keyval of MPI_TAG_UB (first of Open MPI's predefined attribute keyvals). */
export const KEYVAL_TAG_UB = 0;

/**
 * The environment cannot run an MPI rank: FFI permission missing, libmpi not
 * found or not Open MPI, not launched under mpirun, MPI already finalised.
 * The message says what to do.
 *
 * @example
 * ```ts
 * import { MpiSetupError } from "@conveyor/core/runtime";
 * const e = new MpiSetupError("not launched under mpirun");
 * console.log(e.name, e.message); // MpiSetupError not launched under mpirun
 * ```
 */
export class MpiSetupError extends Error {
  /** Creates the error with its one-line `message`. */
  constructor(message: string) {
    super(message);
    this.name = "MpiSetupError";
  }
}

const MPI_SYMBOLS = {
  MPI_Initialized: { parameters: ["buffer"], result: "i32" },
  MPI_Finalized: { parameters: ["buffer"], result: "i32" },
  MPI_Init_thread: { parameters: ["pointer", "pointer", "i32", "buffer"], result: "i32" },
  MPI_Finalize: { parameters: [], result: "i32" },
  MPI_Comm_rank: { parameters: ["pointer", "buffer"], result: "i32" },
  MPI_Comm_size: { parameters: ["pointer", "buffer"], result: "i32" },
  MPI_Comm_get_attr: { parameters: ["pointer", "i32", "buffer", "buffer"], result: "i32" },
  MPI_Comm_set_errhandler: { parameters: ["pointer", "pointer"], result: "i32" },
  MPI_Comm_idup: { parameters: ["pointer", "buffer", "buffer"], result: "i32" },
  MPI_Isend: {
    parameters: ["buffer", "i32", "pointer", "i32", "i32", "pointer", "buffer"],
    result: "i32",
  },
  MPI_Irecv: {
    parameters: ["buffer", "i32", "pointer", "i32", "i32", "pointer", "buffer"],
    result: "i32",
  },
  MPI_Improbe: {
    parameters: ["i32", "i32", "pointer", "buffer", "buffer", "buffer"],
    result: "i32",
  },
  MPI_Imrecv: { parameters: ["buffer", "i32", "pointer", "buffer", "buffer"], result: "i32" },
  MPI_Test: { parameters: ["buffer", "buffer", "buffer"], result: "i32" },
  MPI_Get_count: { parameters: ["buffer", "pointer", "buffer"], result: "i32" },
  MPI_Error_string: { parameters: ["i32", "buffer", "buffer"], result: "i32" },
  ompi_mpi_comm_world: { type: "pointer" },
  ompi_mpi_float: { type: "pointer" },
  ompi_mpi_byte: { type: "pointer" },
  ompi_mpi_errors_return: { type: "pointer" },
} as const;

const LIBC_SYMBOLS = {
  dlopen: { parameters: ["buffer", "i32"], result: "pointer" },
  dlerror: { parameters: [], result: "pointer" },
  getenv: { parameters: ["buffer"], result: "pointer" },
  gethostname: { parameters: ["buffer", "usize"], result: "i32" },
  kill: { parameters: ["i32", "i32"], result: "i32" },
  // Sleeps on a thread of Deno's blocking pool: the event loop stays free
  // and, unlike setTimeout (about 2 ms at least in Deno), sub-millisecond.
  usleep: { parameters: ["u32"], result: "i32", nonblocking: true },
  usleepSync: { name: "usleep", parameters: ["u32"], result: "i32" },
  poll: { parameters: ["buffer", "u64", "i32"], result: "i32" },
  close: { parameters: ["i32"], result: "i32" },
  fopen: { parameters: ["buffer", "buffer"], result: "pointer" },
  fread: { parameters: ["buffer", "usize", "usize", "pointer"], result: "usize" },
  fclose: { parameters: ["pointer"], result: "i32" },
  errnoLocation: {
    name: Deno.build.os === "darwin" ? "__error" : "__errno_location",
    parameters: [],
    result: "pointer",
  },
} as const;

/** The MPI functions and handles the backend uses. */
export type MpiSymbols = Deno.DynamicLibrary<typeof MPI_SYMBOLS>["symbols"];
/** The libc functions the backend uses. */
export type LibcSymbols = Deno.DynamicLibrary<typeof LIBC_SYMBOLS>["symbols"];

const RTLD_NOW = 0x2;
const RTLD_GLOBAL = 0x100;
const RTLD_NODELETE = Deno.build.os === "darwin" ? 0x80 : 0x1000;

const encoder = new TextEncoder();
const cString = (s: string): Uint8Array => encoder.encode(s + "\0");

let libc: LibcSymbols | null = null;

/** Throws an MpiSetupError unless Deno may call native libraries. */
export function checkFfiPermission(): void {
  let state: Deno.PermissionState;
  try {
    state = Deno.permissions.querySync({ name: "ffi" }).state;
  } catch {
    state = "denied";
  }
  if (state !== "granted") {
    throw new MpiSetupError(
      `MpiBackend needs FFI permission to call libmpi (ffi is ${state}): ` +
        `run deno with --allow-ffi`,
    );
  }
}

/** The C library, opened once per process. */
export function openLibc(): LibcSymbols {
  if (libc === null) {
    const name = Deno.build.os === "darwin" ? "libSystem.B.dylib" : "libc.so.6";
    libc = Deno.dlopen(name, LIBC_SYMBOLS).symbols;
  }
  return libc;
}

/** An environment variable read through libc (no --allow-env needed), or null. */
export function getenv(name: string): string | null {
  const p = openLibc().getenv(cString(name));
  return p === null ? null : Deno.UnsafePointerView.getCString(p);
}

/** This machine's host name (gethostname). */
export function hostname(): string {
  const buf = new Uint8Array(256);
  if (openLibc().gethostname(buf, BigInt(buf.length)) !== 0) return "?";
  const end = buf.indexOf(0);
  return new TextDecoder().decode(buf.subarray(0, end < 0 ? buf.length : end));
}

/**
 * Whether process `pid` of this machine still exists (kill(pid, 0)); a
 * process that is gone and reaped gives ESRCH, one of another user EPERM
 * (it exists).
 */
export function processExists(pid: number): boolean {
  const c = openLibc();
  if (c.kill(pid, 0) === 0) return true;
  const ESRCH = 3;
  const p = c.errnoLocation();
  return p === null || new Deno.UnsafePointerView(p).getInt32() !== ESRCH;
}

/** What /proc tells of a process's main thread. */
export interface ThreadStat {
  /** Its state letter: R running, S sleeping, D waiting on a device, T stopped, … */
  readonly state: string;
  /** CPU time it used (user + system), in clock ticks. */
  readonly ticks: number;
}

/**
 * The state and CPU time of process `pid`'s main thread, read from
 * /proc/<pid>/task/<pid>/stat through libc (Deno lets only a process with
 * every permission read /proc/<pid>, and FFI is allowed here anyway);
 * undefined where there is no such file (not Linux, the process gone).
 */
export function mainThreadStat(pid: number): ThreadStat | undefined {
  const c = openLibc();
  const f = c.fopen(cString(`/proc/${pid}/task/${pid}/stat`), cString("r"));
  if (f === null) return undefined;
  const buf = new Uint8Array(1024);
  const n = Number(c.fread(buf, 1n, BigInt(buf.length), f));
  c.fclose(f);
  const text = new TextDecoder().decode(buf.subarray(0, n));
  // After the parenthesised name: state, ppid, …; utime and stime are the
  // 12th and 13th fields after the name.
  const fields = text.slice(text.lastIndexOf(")") + 2).split(" ");
  const ticks = Number(fields[11]) + Number(fields[12]);
  return fields.length > 13 && Number.isFinite(ticks) ? { state: fields[0], ticks } : undefined;
}

/** Whether this process was started by Open MPI's launcher (mpirun/mpiexec/orterun/prterun). */
export function launchedByMpirun(): boolean {
  return getenv("OMPI_COMM_WORLD_SIZE") !== null || getenv("PMIX_RANK") !== null;
}

let pidfdOpen: ((pid: number, flags: number) => number) | null | undefined;

// glibc >= 2.34 wraps pidfd_open (Linux >= 5.3); elsewhere null.
function pidfdOpener(): ((pid: number, flags: number) => number) | null {
  if (pidfdOpen === undefined) {
    try {
      const lib = Deno.dlopen(
        "libc.so.6",
        {
          pidfd_open: { parameters: ["i32", "u32"], result: "i32" },
        } as const,
      );
      pidfdOpen = (pid, flags) => lib.symbols.pidfd_open(pid, flags);
    } catch {
      pidfdOpen = null;
    }
  }
  return pidfdOpen;
}

/**
 * Watches processes of this machine for their end: through a pidfd each
 * where Linux offers it (readable as soon as the process has exited, even
 * before it is reaped; one poll(2) for all), else through kill(pid, 0).
 */
export class ProcessWatch {
  #pids: number[] = [];
  #fds: number[] = [];
  #keys: number[] = [];
  #pollfds = new Uint8Array(0);

  /** Watches `pid` under `key` (a rank). */
  add(key: number, pid: number): void {
    const open = pidfdOpener();
    this.#keys.push(key);
    this.#pids.push(pid);
    this.#fds.push(open === null ? -1 : open(pid, 0));
    this.#rebuild();
  }

  // struct pollfd { int fd; short events; short revents; } per process.
  #rebuild(): void {
    this.#pollfds = new Uint8Array(8 * this.#fds.length);
    const view = new DataView(this.#pollfds.buffer);
    this.#fds.forEach((f, i) => {
      view.setInt32(8 * i, f, true); // poll ignores negative fds
      view.setInt16(8 * i + 4, 1, true); // POLLIN
    });
  }

  /** Keys whose process has ended (each reported until removed). */
  ended(): number[] {
    if (this.#keys.length === 0) return [];
    const out: number[] = [];
    const c = openLibc();
    const view = new DataView(this.#pollfds.buffer);
    const ready = this.#fds.some((f) => f >= 0)
      ? c.poll(this.#pollfds, BigInt(this.#fds.length), 0)
      : 0;
    for (let i = 0; i < this.#keys.length; i++) {
      const gone = this.#fds[i] >= 0
        ? ready > 0 && view.getInt16(8 * i + 6, true) !== 0
        : !processExists(this.#pids[i]);
      if (gone) out.push(this.#keys[i]);
    }
    return out;
  }

  /** Stops watching `key`. */
  remove(key: number): void {
    const i = this.#keys.indexOf(key);
    if (i < 0) return;
    if (this.#fds[i] >= 0) openLibc().close(this.#fds[i]);
    for (const list of [this.#keys, this.#pids, this.#fds]) list.splice(i, 1);
    this.#rebuild();
  }

  /** Stops watching everything. */
  clear(): void {
    for (const f of this.#fds) if (f >= 0) openLibc().close(f);
    for (const list of [this.#keys, this.#pids, this.#fds]) list.length = 0;
    this.#rebuild();
  }
}

/** A loaded libmpi: where it came from and its symbols. */
export interface Libmpi {
  /** The path or soname that loaded. */
  readonly path: string;
  /** Functions and handles. */
  readonly symbols: MpiSymbols;
}

/** Where to look for libmpi. */
export interface FindLibmpiOptions {
  /** An explicit path (wins over everything). */
  readonly path?: string;
  /** Value of CONVEYOR_LIBMPI (default: read from the environment). */
  readonly env?: string | null;
  /** The search list when neither is given (default {@linkcode LIBMPI_CANDIDATES}). */
  readonly candidates?: readonly string[];
}

function dlerror(): string {
  const p = openLibc().dlerror();
  return p === null ? "unknown error" : Deno.UnsafePointerView.getCString(p);
}

/**
 * Loads Open MPI's libmpi. The library is first opened through libc with
 * RTLD_NODELETE (and RTLD_GLOBAL, as mpi4py does for Open MPI's plugins), so
 * it is never unmapped: without that, Deno closes it while the process
 * exits and Open MPI's TCP transport (still running on its own thread)
 * crashes the process with SIGSEGV after a clean MPI_Finalize (17 of 20
 * TCP jobs here; 0 of 20 pinned).
 */
export function openLibmpi(options: FindLibmpiOptions = {}): Libmpi {
  const env = options.env !== undefined ? options.env : getenv(LIBMPI_ENV);
  let tries: string[];
  let source: string;
  if (options.path !== undefined) {
    tries = [options.path];
    source = `libraryPath ${options.path}`;
  } else if (env !== null && env !== "") {
    tries = [env];
    source = `${LIBMPI_ENV}=${env}`;
  } else {
    tries = [...(options.candidates ?? LIBMPI_CANDIDATES)];
    source = `${LIBMPI_ENV} unset, tried ${tries.join(", ")}`;
  }
  const failures: string[] = [];
  for (const path of tries) {
    const handle = openLibc().dlopen(cString(path), RTLD_NOW | RTLD_GLOBAL | RTLD_NODELETE);
    if (handle === null) {
      failures.push(dlerror());
      continue;
    }
    let lib: Deno.DynamicLibrary<typeof MPI_SYMBOLS>;
    try {
      lib = Deno.dlopen(path, MPI_SYMBOLS);
    } catch (e) {
      throw new MpiSetupError(
        `${path} is not a usable Open MPI libmpi (${(e as Error).message}); ` +
          `MpiBackend needs Open MPI 4 or 5: set ${LIBMPI_ENV} to its libmpi.so`,
      );
    }
    return { path, symbols: lib.symbols };
  }
  const why = options.path !== undefined || (env !== null && env !== "") ? ` (${failures[0]})` : "";
  throw new MpiSetupError(
    `libmpi not found (${source})${why}: install Open MPI ` +
      `(apt-get install openmpi-bin libopenmpi-dev) or set ${LIBMPI_ENV} to the path of libmpi.so`,
  );
}

/** MPI's text for an error code (MPI_Error_string). */
export function errorString(mpi: MpiSymbols, code: number): string {
  const buf = new Uint8Array(512);
  const len = new Int32Array(1);
  if (mpi.MPI_Error_string(code, buf, len) !== 0) return `MPI error ${code}`;
  return new TextDecoder().decode(buf.subarray(0, len[0]));
}

/** Throws an Error naming `what` and MPI's text unless `code` is MPI_SUCCESS. */
export function check(mpi: MpiSymbols, code: number, what: string): void {
  if (code !== 0) throw new Error(`${what} failed: ${errorString(mpi, code)} (code ${code})`);
}
