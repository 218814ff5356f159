// bench/peers.ts's jax-js child: one job (see _peer_job.ts) on jax-js's
// Wasm device; prints one result line. `navigator.hardwareConcurrency`
// sizes jax-js's worker pool, so it is set to the job's threads before the
// import, and the workers jax-js starts are counted (the result's `info`
// says how many) to show that it took. Run by bench/peers.ts; not exported
// from the package.

import { GPT, gptData, MLP, mlpData, readJob, report, timeCalls, uniform } from "./_peer_job.ts";

const job = readJob();
if (job.threads !== null) {
  Object.defineProperty(navigator, "hardwareConcurrency", {
    value: job.threads,
    configurable: true,
  });
}
let workers = 0;
const RealWorker = globalThis.Worker;
globalThis.Worker = class extends RealWorker {
  constructor(url: string | URL, options?: WorkerOptions) {
    super(url, options);
    workers++;
  }
};

// A computed specifier: `deno check bench/` does not fetch the package.
const spec = ["npm:@jax-js", "jax@0.1.25"].join("/");
// deno-lint-ignore no-explicit-any
const jax: any = await import(spec);
const { numpy: np, nn, jit, valueAndGrad, tree } = jax;
await jax.init("wasm");
jax.defaultDevice("wasm");
const infoOf = () =>
  `jax-js 0.1.25 ${jax.defaultDevice()}, ${workers} worker${workers === 1 ? "" : "s"} started ` +
  `(navigator.hardwareConcurrency = ${navigator.hardwareConcurrency})`;

// deno-lint-ignore no-explicit-any
type A = any;

if (job.row === "matmul") {
  const n = job.n;
  const a = np.array(uniform(n * n, 1, 1)).reshape([n, n]);
  const b = np.array(uniform(n * n, 1, 2)).reshape([n, n]);
  const t = await timeCalls(job, async () => {
    const c = np.matmul(a.ref, b.ref);
    await c.blockUntilReady();
    c.dispose();
  });
  report({ ...t, info: infoOf() });
} else if (job.row === "mlp") {
  const d = mlpData();
  const s = MLP.sizes;
  let params: A = {
    w: d.weights.map((w, l) => np.array(w).reshape([s[l], s[l + 1]])),
    b: d.biases.map((b) => np.array(b)),
  };
  const x = np.array(d.x).reshape([MLP.batch, s[0]]);
  const y = np.array(d.y).reshape([MLP.batch, s[s.length - 1]]);
  const lossFn = (p: A, x: A, y: A) => {
    let h = x;
    for (let l = 0; l < p.w.length; l++) {
      h = np.matmul(h, p.w[l]).add(p.b[l]);
      if (l + 1 < p.w.length) h = nn.relu(h);
    }
    return np.mean(np.square(h.sub(y)));
  };
  const step = jit((p: A, x: A, y: A) => {
    const [loss, g] = valueAndGrad(lossFn)(tree.ref(p), x, y);
    return [loss, tree.map((pi: A, gi: A) => pi.sub(gi.mul(MLP.lr)), p, g)];
  });
  let loss = NaN;
  const t = await timeCalls(job, async () => {
    const [l, next] = step(params, x.ref, y.ref);
    params = next;
    loss = (await l.data())[0];
  });
  report({ ...t, info: infoOf(), loss });
} else {
  void GPT, gptData;
  report({ ms: NaN, calls: 0, info: "not written" });
}
