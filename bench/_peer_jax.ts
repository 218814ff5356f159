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
  // The tiny GPT of createTinyGPT: token + position embeddings; per block
  // x + attn(ln1(x)) (qkv Linear, causal softmax attention over 4 heads,
  // proj Linear) and x + mlp(ln2(x)) (Linear 4·dim, tanh GELU, Linear);
  // final LayerNorm, Linear head; mean cross-entropy; AdamW (β 0.9, 0.999,
  // ε 1e-8, weight decay 0.01, as Conveyor's defaults).
  const { vocabSize: V, seqLen: T, dim: D, heads: H, layers: L, batch: B, lr } = GPT;
  let seed = 100;
  const lin = (i: number, o: number, scale = 1 / Math.sqrt(i)) => ({
    w: np.array(uniform(i * o, scale, seed++)).reshape([i, o]),
    b: np.zeros([o]),
  });
  const norm = () => ({ g: np.ones([D]), b: np.zeros([D]) });
  let params: A = {
    tok: np.array(uniform(V * D, 1, seed++)).reshape([V, D]),
    pos: np.array(uniform(T * D, 1, seed++)).reshape([T, D]),
    blocks: Array.from({ length: L }, () => ({
      ln1: norm(),
      qkv: lin(D, 3 * D),
      proj: lin(D, D),
      ln2: norm(),
      fc: lin(D, 4 * D),
      out: lin(4 * D, D),
    })),
    lnf: norm(),
    head: lin(D, V, 0.02),
  };
  let m: A = tree.map((x: A) => np.zerosLike(x), tree.ref(params));
  let v: A = tree.map((x: A) => np.zerosLike(x), tree.ref(params));
  const d = gptData();
  const ids = np.array(d.ids, { dtype: np.int32 }).reshape([B, T]);
  const targets = np.array(d.targets, { dtype: np.int32 }).reshape([B, T]);
  const ln = (x: A, n: A) => nn.standardize(x, -1, { epsilon: 1e-5 }).mul(n.g).add(n.b);
  const dense = (x: A, l: A) => np.matmul(x, l.w).add(l.b);
  const lossFn = (p: A, ids: A, targets: A) => {
    let h = np.take(p.tok, ids, 0).add(p.pos); // [B, T, D]
    for (const blk of p.blocks) {
      const qkv = dense(ln(h.ref, blk.ln1), blk.qkv); // [B, T, 3D]
      const [q, k, val] = np.split(qkv, 3, -1).map((t: A) => t.reshape([B, T, H, D / H]));
      const o = nn.dotProductAttention(q, k, val, { isCausal: true }).reshape([B, T, D]);
      h = h.add(dense(o, blk.proj));
      h = h.ref.add(dense(nn.gelu(dense(ln(h, blk.ln2), blk.fc)), blk.out));
    }
    const logits = dense(ln(h, p.lnf), p.head); // [B, T, V]
    const logp = nn.logSoftmax(logits, -1);
    return np.sum(logp.mul(nn.oneHot(targets, V)), -1).mean().neg();
  };
  const [b1, b2, eps, wd] = [0.9, 0.999, 1e-8, 0.01];
  const step = jit((p: A, m: A, v: A, ids: A, targets: A, c1: A, c2: A) => {
    const [loss, g] = valueAndGrad(lossFn)(tree.ref(p), ids, targets);
    const m2 = tree.map((mi: A, gi: A) => mi.mul(b1).add(gi.mul(1 - b1)), m, tree.ref(g));
    const v2 = tree.map((vi: A, gi: A) => vi.mul(b2).add(np.square(gi).mul(1 - b2)), v, g);
    const p2 = tree.map(
      (pi: A, mi: A, vi: A) =>
        pi.mul(1 - lr * wd).sub(
          mi.mul(c1.ref).div(np.sqrt(vi.mul(c2.ref)).add(eps)).mul(lr),
        ),
      p,
      tree.ref(m2),
      tree.ref(v2),
    );
    c1.dispose();
    c2.dispose();
    return [loss, p2, m2, v2];
  });
  let loss = NaN, t = 0;
  const timed = await timeCalls(job, async () => {
    t++;
    const c1 = np.array(1 / (1 - b1 ** t)), c2 = np.array(1 / (1 - b2 ** t));
    const [l, p2, m2, v2] = step(params, m, v, ids.ref, targets.ref, c1, c2);
    [params, m, v] = [p2, m2, v2];
    loss = (await l.data())[0];
  });
  report({ ...timed, info: infoOf(), loss });
}
