// Runs test modules' Deno.test cases in a `deno run` process, on its main
// thread, for tests/webgpu_test.ts. Why: `deno test` runs each module on a
// thread of its own that lives until the process exits, and Deno (2.9.6,
// Mesa's llvmpipe here) then crashes at exit about one run in ten when such
// a thread used WebGPU (even only requestAdapter). WebGPU used from a
// process's main thread, or from workers that end before it does, never
// crashed in hundreds of runs.
//
//   deno run -A tests/_webgpu_child.ts list MODULE...   # LIST {"module","names"} per module
//                                                       # (the tests that run, not the ignored)
//   deno run -A tests/_webgpu_child.ts run MODULE... < SKIP_JSON
//
// `run` runs every test of each module but those the JSON on stdin
// ({module: [names]}) names, one after another, and prints a RESULT {"module","name",
// "ok","error"?,"ms"} line for each; it exits 0 once all have run.

type Fn = (t: unknown) => void | Promise<void>;
interface Case {
  readonly name: string;
  readonly fn: Fn;
  readonly ignore: boolean;
}

let registered: Case[] = [];

// Deno.test's forms: (name, fn), (name, options, fn), (options), (fn), (options, fn).
function register(a: unknown, b?: unknown, c?: unknown): void {
  let name = "", fn: Fn | undefined, ignore = false;
  const opts = (o: unknown) => {
    const d = o as { name?: string; fn?: Fn; ignore?: boolean };
    if (d.name !== undefined) name = d.name;
    if (d.fn !== undefined) fn = d.fn;
    ignore = d.ignore === true;
  };
  if (typeof a === "string") {
    name = a;
    if (typeof b === "function") fn = b as Fn;
    else {
      opts(b);
      fn = c as Fn;
    }
  } else if (typeof a === "function") {
    fn = a as Fn;
    name = a.name;
  } else {
    opts(a);
    if (typeof b === "function") fn = b as Fn;
  }
  if (fn === undefined) throw new TypeError(`test ${JSON.stringify(name)} has no function`);
  registered.push({ name, fn, ignore });
}
Object.defineProperty(Deno, "test", { value: register, configurable: true, writable: true });

async function load(module: string): Promise<Case[]> {
  registered = [];
  await import(new URL(module, `file://${Deno.cwd()}/`).href);
  return registered;
}

// A context for the few tests that use one: steps run inline.
function context(name: string) {
  return {
    name,
    step: async (s: string | { name: string; fn: Fn }, f?: Fn) => {
      const fn = typeof s === "string" ? f! : s.fn;
      await fn(context(typeof s === "string" ? s : s.name));
      return true;
    },
  };
}

const [mode, ...rest] = Deno.args;
if (mode === "list") {
  for (const module of rest) {
    const names = (await load(module)).filter((c) => !c.ignore).map((c) => c.name);
    console.log(`LIST ${JSON.stringify({ module, names })}`);
  }
} else if (mode === "run") {
  const skip = JSON.parse(await new Response(Deno.stdin.readable).text()) as Record<
    string,
    string[]
  >;
  for (const module of rest) {
    const known = new Set(skip[module] ?? []);
    for (const c of await load(module)) {
      if (c.ignore || known.has(c.name)) continue;
      const t0 = performance.now();
      let error: string | undefined;
      try {
        await c.fn(context(c.name));
      } catch (e) {
        error = e instanceof Error ? `${e.stack ?? e.message}` : String(e);
      }
      const ms = Math.round(performance.now() - t0);
      const result = {
        module,
        name: c.name,
        ok: error === undefined,
        ...(error ? { error } : {}),
        ms,
      };
      console.log(`RESULT ${JSON.stringify(result)}`);
    }
  }
} else {
  console.error("usage: _webgpu_child.ts list MODULE... | run MODULE... < SKIP_JSON");
  Deno.exit(2);
}
