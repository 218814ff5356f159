// The `deno run` permission flags that give a child Deno process exactly
// this process's permissions, deny lists included. Deno has no API that
// lists them (a query says "granted" for `-A` even with `--deny-write=DIR`),
// so they are read from this process's own command line
// (/proc/<pid>/cmdline: Linux), then checked against this process's
// permission queries. Not exported from the package.

/** The permission names Deno knows, and the short flags that grant them. */
const NAMES = ["read", "write", "net", "env", "sys", "run", "ffi", "import"] as const;
type Name = typeof NAMES[number];
const SHORT: Readonly<Record<string, Name>> = {
  R: "read",
  W: "write",
  N: "net",
  E: "env",
  S: "sys",
  I: "import",
};
// Deno's flags whose value may come as the next argument (`--config x`).
const LONG_WITH_VALUE = new Set([
  "cert",
  "conditions",
  "config",
  "coverage-threshold",
  "ext",
  "filter",
  "host",
  "import-map",
  "inspect-publish-uid",
  "junit-path",
  "location",
  "lock",
  "log-level",
  "min-dep-age",
  "node-modules-linker",
  "port",
  "preload",
  "related",
  "repeats",
  "reporter",
  "require",
  "retry",
  "seed",
  "shard",
]);
const SHORT_WITH_VALUE = new Set(["c", "L"]);

/** One permission flag: `allow`, `deny` or `ignore` of `name`, for every value or for `values`. */
interface Grant {
  readonly kind: "allow" | "deny" | "ignore";
  readonly name: Name;
  readonly values: readonly string[] | null;
}

/** Thrown when the flags cannot be told for sure; the message says why. */
export class PermissionFlagsError extends Error {
  /** An error with `message`. */
  constructor(message: string) {
    super(message);
    this.name = "PermissionFlagsError";
  }
}

function grantOf(flag: string): Grant | null {
  const m = /^--(allow|deny|ignore)-([a-z]+)(?:=(.*))?$/s.exec(flag);
  if (m === null || !(NAMES as readonly string[]).includes(m[2])) return null;
  return {
    kind: m[1] as Grant["kind"],
    name: m[2] as Name,
    values: m[3] === undefined ? null : m[3].split(","),
  };
}

/**
 * The permission flags among `deno`, the arguments Deno itself read (the
 * command line between the executable and the script's own arguments),
 * each as one `--allow-…`, `--deny-…`, `--ignore-…` or `-A` argument.
 * Throws a PermissionFlagsError on a permission set (`-P`), whose
 * content the flags do not show.
 */
export function permissionFlagsIn(deno: readonly string[]): string[] {
  const out: string[] = deno[0] === "eval" ? ["-A"] : []; // `deno eval` has every permission
  for (let i = 0; i < deno.length; i++) {
    const arg = deno[i];
    if (arg === "--") break;
    if (arg.startsWith("--")) {
      const [name] = arg.slice(2).split("=", 1);
      if (name === "allow-all") out.push("-A");
      else if (name === "permission-set") throw permissionSet(arg);
      else if (grantOf(arg) !== null) out.push(arg);
      else if (LONG_WITH_VALUE.has(name) && !arg.includes("=")) i++;
    } else if (arg.startsWith("-") && arg.length > 1) {
      // A cluster of short flags (`-RW`, `-qA`, `-R=/data`).
      const eq = arg.indexOf("=");
      const letters = eq < 0 ? arg.slice(1) : arg.slice(1, eq);
      for (let k = 0; k < letters.length; k++) {
        const c = letters[k];
        const last = k === letters.length - 1;
        if (c === "A") out.push("-A");
        else if (c === "P") throw permissionSet(arg);
        else if (c in SHORT) {
          out.push(last && eq >= 0 ? `--allow-${SHORT[c]}${arg.slice(eq)}` : `--allow-${SHORT[c]}`);
        } else if (SHORT_WITH_VALUE.has(c)) {
          if (last && eq < 0) i++;
          break;
        }
      }
    }
  }
  return out;
}

function permissionSet(arg: string): PermissionFlagsError {
  return new PermissionFlagsError(
    `this process took its permissions from a permission set (${arg}), which cannot be passed ` +
      `on exactly: start it with --allow-… and --deny-… flags instead`,
  );
}

function descriptor(name: Name, value: string | null): Deno.PermissionDescriptor {
  if (value === null) return { name } as Deno.PermissionDescriptor;
  switch (name) {
    case "read":
    case "write":
    case "ffi":
      return { name, path: value };
    case "net":
    case "import":
      return { name, host: value };
    case "env":
      return { name, variable: value };
    case "sys":
      return { name, kind: value as Deno.SysPermissionDescriptor["kind"] };
    case "run":
      return { name, command: value };
  }
}

function state(d: Deno.PermissionDescriptor): Deno.PermissionState | "unknown" {
  try {
    return Deno.permissions.querySync(d).state;
  } catch {
    return "unknown";
  }
}

/**
 * Checks `flags` against this process's own permission queries: every
 * allowed value must be granted here and every denied one denied. Throws a
 * PermissionFlagsError naming the first flag that does not hold (a
 * permission narrowed since the start, as a `Deno.test` with `permissions`
 * does, or a working directory changed since, which moves relative paths).
 */
export function checkPermissionFlags(flags: readonly string[]): void {
  // A name denied outright (`-A --deny-net`) is denied, not granted, to a query.
  const deniedAll = new Set(
    flags.map(grantOf).filter((g) => g?.kind === "deny" && g.values === null).map((g) => g!.name),
  );
  for (const flag of flags) {
    const grants: Grant[] = flag === "-A"
      ? NAMES.map((name) => ({ kind: "allow", name, values: null }))
      : [grantOf(flag)!];
    for (const g of grants) {
      if (g.kind === "ignore") continue;
      const want = g.kind === "allow" && !deniedAll.has(g.name) ? "granted" : "denied";
      for (const v of g.values ?? [null]) {
        const got = state(descriptor(g.name, v));
        if (got !== want) {
          throw new PermissionFlagsError(
            `this process was started with ${flag}, but ${g.name}${
              v === null ? "" : ` of ${JSON.stringify(v)}`
            } is ${got} here, not ${want} (narrowed since the start, or the working directory ` +
              `changed): a child started with that flag would not have this process's permissions`,
          );
        }
      }
    }
  }
}

/**
 * How to start Deno: this process's executable, or `deno` from the PATH
 * where only that may be run (`--allow-run=deno` names the PATH's entry,
 * which may be a link to the executable).
 */
export function denoCommand(): string {
  const exe = Deno.execPath();
  const may = (command: string) => state({ name: "run", command }) === "granted";
  return may(exe) || !may("deno") ? exe : "deno";
}

let commandLine: Promise<string[]> | null = null;

// This process's command line. Reading /proc/<pid>/cmdline takes every
// permission with no deny list; without that, a `deno eval` child (which
// has every permission) reads it: this process may run Deno, or it could
// not start a host at all.
function ownCommandLine(): Promise<string[]> {
  commandLine ??= (async () => {
    const path = `/proc/${Deno.pid}/cmdline`;
    let bytes: Uint8Array;
    try {
      bytes = await Deno.readFile(path);
    } catch (e) {
      if (!(e instanceof Deno.errors.NotCapable)) {
        throw new PermissionFlagsError(`cannot read ${path} (${(e as Error).message}): Linux only`);
      }
      const out = await new Deno.Command(denoCommand(), {
        args: [
          "eval",
          "--quiet",
          "--no-config",
          `Deno.stdout.writeSync(Deno.readFileSync(${JSON.stringify(path)}))`,
        ],
        stdin: "null",
        stdout: "piped",
        stderr: "piped",
      }).output();
      if (!out.success) {
        throw new PermissionFlagsError(
          `cannot read ${path}: ${new TextDecoder().decode(out.stderr).trim()}`,
        );
      }
      bytes = out.stdout;
    }
    const argv = new TextDecoder().decode(bytes).split("\0");
    if (argv.at(-1) === "") argv.pop();
    return argv;
  })();
  commandLine.catch(() => commandLine = null);
  return commandLine;
}

/**
 * The flags that give a child `deno run` exactly this process's
 * permissions: `--no-prompt`, then this process's own permission flags
 * (allow, deny and ignore lists, as given), checked against its queries.
 * Permissions granted at a prompt or by `Deno.permissions.request` are not
 * among them. Throws a PermissionFlagsError when they cannot be told for
 * sure.
 */
export async function childPermissionFlags(): Promise<string[]> {
  const argv = await ownCommandLine();
  const args = Deno.args;
  const deno = argv.slice(1, argv.length - args.length);
  const tail = argv.slice(argv.length - args.length);
  if (argv.length < args.length + 1 || tail.some((a, i) => a !== args[i])) {
    throw new PermissionFlagsError(
      `this process's command line (${JSON.stringify(argv)}) does not end with its ` +
        `arguments (${JSON.stringify(args)})`,
    );
  }
  const flags = permissionFlagsIn(deno);
  // This process may run Deno (it starts the child): a command line that
  // does not say so took its permissions from elsewhere (a configuration
  // file's permissions, a prompt), which the child would not get.
  if (
    !flags.some((f) => f === "-A" || grantOf(f)?.kind === "allow" && grantOf(f)?.name === "run")
  ) {
    throw new PermissionFlagsError(
      `this process's command line (${JSON.stringify(deno)}) does not show where its ` +
        `permissions came from (a configuration file, a prompt): start it with --allow-… and ` +
        `--deny-… flags`,
    );
  }
  checkPermissionFlags(flags);
  return ["--no-prompt", ...flags];
}
