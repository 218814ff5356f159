// `train --comm`: where the ranks run, and the checks of an MPI launch made
// before MPI starts, each failing with one line that says what to do. Not
// exported from the package.

import { UsageError } from "./command.ts";

/** Where `train` runs its ranks. */
export type TrainComm = "workers" | "in-process" | "mpi";

const COMMS: readonly TrainComm[] = ["workers", "in-process", "mpi"];

/**
 * Reads `--comm` (where the ranks run) and `--in-process` (an alias of
 * `--comm in-process`). Returns the transport and the flag values without
 * `comm`.
 */
export function readTrainComm(
  values: Record<string, string | boolean | undefined>,
): { comm: TrainComm; values: Record<string, string | boolean | undefined> } {
  const raw = values.comm;
  const inProcess = values["in-process"] === true;
  if (raw === undefined) return { comm: inProcess ? "in-process" : "workers", values };
  if (!(COMMS as readonly string[]).includes(String(raw))) {
    const delay = /^[-+]?[0-9.]/.test(String(raw))
      ? " (a communication delay for zb-auto's search is --comm-delay T)"
      : "";
    throw new UsageError(
      `--comm must be workers, in-process or mpi, got ${JSON.stringify(raw)}${delay}`,
    );
  }
  const comm = raw as TrainComm;
  if (inProcess && comm !== "in-process") {
    throw new UsageError(`--in-process contradicts --comm ${comm}: give one of them`);
  }
  const rest = { ...values };
  delete rest.comm;
  return { comm, values: rest };
}

// Permissions are asked before reading: on a terminal a read without one
// stops at a prompt, which the README's commands must not meet.
function env(name: string): string | undefined {
  // no --allow-env: MpiBackend reads what it needs through libc
  if (Deno.permissions.querySync({ name: "env", variable: name }).state !== "granted") {
    return undefined;
  }
  return Deno.env.get(name);
}

function onPath(program: string): boolean {
  const path = env("PATH");
  if (path === undefined) return false;
  return path.split(":").some((dir) => {
    try {
      return Deno.statSync(`${dir || "."}/${program}`).isFile;
    } catch {
      return false;
    }
  });
}

/** What Open MPI's launcher told this process. */
export interface MpiLaunch {
  /** MPI_COMM_WORLD rank. */
  readonly rank: number;
  /** Processes in the job. */
  readonly size: number;
  /** Rank among the job's processes on this host (e.g. for its GPU). */
  readonly localRank: number;
}

/**
 * Checks that this process was started by mpirun with one process per
 * rank (from Open MPI's environment, before MPI starts): otherwise a
 * UsageError naming what is wrong (mpirun missing from PATH, not launched
 * by it, a different process count than `--ranks` times `--data-parallel`).
 */
export function checkMpiLaunch(ranks: number, replicas = 1): MpiLaunch {
  const size = env("OMPI_COMM_WORLD_SIZE");
  const rank = env("OMPI_COMM_WORLD_RANK");
  const n = ranks * replicas;
  const dp = replicas === 1 ? "" : ` --data-parallel ${replicas}`;
  if (size === undefined || rank === undefined) {
    const example = `mpirun -n ${n} deno run -A cli.ts train --comm mpi${dp} --ranks ${ranks} …`;
    throw new UsageError(
      onPath("mpirun")
        ? `--comm mpi needs one process per rank started by mpirun (OMPI_COMM_WORLD_SIZE is ` +
          `unset): run ${example}`
        : `--comm mpi needs Open MPI's mpirun, which is not on PATH: install Open MPI ` +
          `(apt-get install openmpi-bin libopenmpi-dev), then run ${example}`,
    );
  }
  if (replicas > 1 && Number(size) !== n) {
    throw new UsageError(
      `mpirun started ${size} processes but --data-parallel ${replicas} × --ranks ${ranks} ` +
        `needs ${n}: --comm mpi runs one rank per process (mpirun -n ${n})`,
    );
  }
  if (replicas === 1 && Number(size) !== ranks) {
    throw new UsageError(
      `mpirun started ${size} processes but --ranks is ${ranks}: --comm mpi runs one rank ` +
        `per process (mpirun -n ${ranks}, or --ranks ${size})`,
    );
  }
  return {
    rank: Number(rank),
    size: Number(size),
    localRank: Number(env("OMPI_COMM_WORLD_LOCAL_RANK") ?? rank),
  };
}

/** The rank this process would be under mpirun, before any check (0 when not under mpirun). */
export function launchRank(): number {
  const r = Number(env("OMPI_COMM_WORLD_RANK") ?? "0");
  return Number.isInteger(r) && r >= 0 ? r : 0;
}

/** This host's name, for the per-rank start line. */
export function hostName(): string {
  const sys = Deno.permissions.querySync({ name: "sys", kind: "hostname" });
  return sys.state === "granted" ? Deno.hostname() : "?";
}
