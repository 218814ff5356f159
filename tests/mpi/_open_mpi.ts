// Whether this machine has Open MPI (mpirun on PATH and a libmpi), and
// `mpiTest`, which every test needing it registers through: without Open MPI
// those tests are ignored, and one line of the run says so and how to
// install it. CONVEYOR_REQUIRE_MPI=1 (set by .ci/run) makes a missing Open
// MPI a failure instead, so that CI always runs them. Used by every MPI
// test file (tests/cli_mpi_test.ts, tests/pipeline/comm/mpi_backend_test.ts,
// tests/examples/mpi_regression_test.ts).

import { LIBMPI_CANDIDATES, LIBMPI_ENV } from "../../src/pipeline/comm/_mpi_ffi.ts";

/** The install line of the skip notice and of the failure. */
export const INSTALL_OPEN_MPI = "apt-get install openmpi-bin libopenmpi-dev";

/** Set to 1 to fail, rather than skip, the MPI tests when Open MPI is missing. */
export const REQUIRE_MPI_ENV = "CONVEYOR_REQUIRE_MPI";

function isFile(path: string): boolean {
  try {
    return Deno.statSync(path).isFile;
  } catch {
    return false;
  }
}

/** The first `name` in the PATH directories, or null. */
export function findOnPath(name: string, path = Deno.env.get("PATH") ?? ""): string | null {
  for (const dir of path.split(":")) {
    if (dir !== "" && isFile(`${dir}/${name}`)) return `${dir}/${name}`;
  }
  return null;
}

// Where the dynamic loader looks for a bare library name (LD_LIBRARY_PATH,
// then the usual system directories).
function libraryDirs(): string[] {
  return [
    ...(Deno.env.get("LD_LIBRARY_PATH") ?? "").split(":").filter((d) => d !== ""),
    "/lib",
    "/usr/lib",
    "/lib64",
    "/usr/lib64",
    "/usr/local/lib",
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib/aarch64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
  ];
}

/** The libmpi that MpiBackend would load (CONVEYOR_LIBMPI, else its search list), or null. */
export function findLibmpi(): string | null {
  const env = Deno.env.get(LIBMPI_ENV);
  const names = env !== undefined && env !== "" ? [env] : LIBMPI_CANDIDATES;
  for (const name of names) {
    if (name.includes("/")) {
      if (isFile(name)) return name;
      continue;
    }
    for (const dir of libraryDirs()) if (isFile(`${dir}/${name}`)) return `${dir}/${name}`;
  }
  return null;
}

/** What the MPI tests need, found or not. */
export interface OpenMpi {
  readonly mpirun: string | null;
  readonly libmpi: string | null;
  /** What is missing, in words ("" when nothing is). */
  readonly missing: string;
}

function detect(): OpenMpi {
  const mpirun = findOnPath("mpirun");
  const libmpi = findLibmpi();
  const missing = [
    ...(mpirun === null ? ["mpirun is not on PATH"] : []),
    ...(libmpi === null ? ["no libmpi found"] : []),
  ].join(", ");
  return { mpirun, libmpi, missing };
}

/** This machine's Open MPI, looked for once per test module. */
export const OPEN_MPI: OpenMpi = detect();

const required = Deno.env.get(REQUIRE_MPI_ENV) === "1";
// Test modules run in their own isolates of one process: the environment is
// what they share, so the notice is registered by the first module only.
const SAID_ENV = "CONVEYOR_TEST_MPI_NOTICE_SAID";

/**
 * Registers a test that needs Open MPI: run where it is installed; else
 * ignored, with one notice per test run (or, with CONVEYOR_REQUIRE_MPI=1,
 * a failing test saying what is missing).
 */
export function mpiTest(name: string, fn: () => Promise<void>): void {
  if (OPEN_MPI.missing === "") {
    Deno.test(name, fn);
    return;
  }
  if (Deno.env.get(SAID_ENV) !== "1") {
    Deno.env.set(SAID_ENV, "1");
    const what = `Open MPI (${OPEN_MPI.missing}); install it to run them: ${INSTALL_OPEN_MPI}`;
    if (required) {
      Deno.test(`${REQUIRE_MPI_ENV}=1: the MPI tests need ${what}`, () => {
        throw new Error(`${REQUIRE_MPI_ENV}=1 but ${OPEN_MPI.missing}: ${INSTALL_OPEN_MPI}`);
      });
    } else {
      Deno.test({ name: `MPI tests skipped: no ${what}`, ignore: true, fn: () => {} });
    }
  }
  // Required: each test runs and fails on what is missing, naming it.
  Deno.test({ name, ignore: !required, fn });
}
