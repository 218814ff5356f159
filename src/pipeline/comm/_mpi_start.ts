// Starting MPI in this process for the MPI backend: load libmpi, check the
// launch, MPI_Init_thread, and a communicator of the backend's own. Used by
// mpi_backend.ts only.

import {
  check,
  KEYVAL_TAG_UB,
  launchedByMpirun,
  type LibcSymbols,
  MpiSetupError,
  type MpiSymbols,
  openLibc,
  openLibmpi,
  STATUS_BYTES,
  THREAD_SERIALIZED,
} from "./_mpi_ffi.ts";
import { POLL_MIN_US } from "./_mpi_settings.ts";

/** MPI, started: the libraries, this rank's communicator and its place in the job. */
export interface MpiSession {
  readonly mpi: MpiSymbols;
  readonly libc: LibcSymbols;
  /** The backend's own duplicate of MPI_COMM_WORLD (errors return codes). */
  readonly comm: Deno.PointerObject;
  readonly rank: number;
  readonly size: number;
  /** MPI_TAG_UB. */
  readonly tagUb: number;
  /** Whether this call initialised MPI (and so finalises it). */
  readonly ownsMpi: boolean;
  /** The libmpi that loaded. */
  readonly library: string;
}

/**
 * Loads libmpi (`libraryPath`, else the usual search), refuses a process
 * not started by mpirun, initialises MPI (MPI_THREAD_SERIALIZED) unless it
 * already runs, and duplicates MPI_COMM_WORLD. Calls `started` once MPI is
 * initialised. Throws an MpiSetupError with a one-line explanation.
 */
export async function startMpi(
  libraryPath: string | undefined,
  started: () => void,
): Promise<MpiSession> {
  const lib = openLibmpi(libraryPath === undefined ? {} : { path: libraryPath });
  if (!launchedByMpirun()) {
    throw new MpiSetupError(
      "not launched under mpirun (OMPI_COMM_WORLD_SIZE and PMIX_RANK are unset): " +
        "run under mpirun, e.g. mpirun -n 2 deno run --allow-ffi script.ts",
    );
  }
  const mpi = lib.symbols;
  const flag = new Int32Array(1);
  check(mpi, mpi.MPI_Finalized(flag), "MPI_Finalized");
  if (flag[0] !== 0) {
    throw new MpiSetupError("MPI was finalised in this process and cannot start again");
  }
  check(mpi, mpi.MPI_Initialized(flag), "MPI_Initialized");
  const ownsMpi = flag[0] === 0;
  if (ownsMpi) {
    const provided = new Int32Array(1);
    check(mpi, mpi.MPI_Init_thread(null, null, THREAD_SERIALIZED, provided), "MPI_Init_thread");
  }
  started();
  const world = mpi.ompi_mpi_comm_world;
  const out = new Int32Array(1);
  check(mpi, mpi.MPI_Comm_rank(world, out), "MPI_Comm_rank");
  const rank = out[0];
  check(mpi, mpi.MPI_Comm_size(world, out), "MPI_Comm_size");
  const size = out[0];
  const attr = new BigUint64Array(1);
  check(mpi, mpi.MPI_Comm_get_attr(world, KEYVAL_TAG_UB, attr, flag), "MPI_Comm_get_attr");
  const tagUb = flag[0] !== 0
    ? new Deno.UnsafePointerView(Deno.UnsafePointer.create(attr[0])!).getInt32()
    : 32767;
  // Our own communicator: no other MPI user of this process can match our
  // messages, and its errors come back as codes instead of aborting.
  const dup = new BigUint64Array(new ArrayBuffer(8));
  const req = new BigUint64Array(new ArrayBuffer(8));
  check(mpi, mpi.MPI_Comm_idup(world, dup, req), "MPI_Comm_idup");
  const libc = openLibc();
  const status = new Uint8Array(STATUS_BYTES);
  for (let us = POLL_MIN_US;; us = Math.min(2 * us, 1000)) {
    check(mpi, mpi.MPI_Test(req, flag, status), "MPI_Test (MPI_Comm_idup)");
    if (flag[0] !== 0) break;
    await libc.usleep(us);
  }
  const comm = Deno.UnsafePointer.create(dup[0])!;
  check(
    mpi,
    mpi.MPI_Comm_set_errhandler(comm, mpi.ompi_mpi_errors_return),
    "MPI_Comm_set_errhandler",
  );
  return { mpi, libc, comm, rank, size, tagUb, ownsMpi, library: lib.path };
}
