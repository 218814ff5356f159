// The MPI transport of this process for models with rankGroup "mpi": one
// MpiBackend per process (MPI starts once), started by the first such model
// and kept open for later ones; it closes (and finalises MPI) when the
// process exits.

import { MpiBackend } from "../comm/mpi_backend.ts";

let shared: Promise<MpiBackend> | null = null;

/** This process's MpiBackend, started on first use (its setup errors are thrown to every caller). */
export function processMpiComm(): Promise<MpiBackend> {
  shared ??= MpiBackend.init();
  return shared;
}
