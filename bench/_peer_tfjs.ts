// bench/peers.ts's TensorFlow.js child: one job (see _peer_job.ts) on
// tfjs-core with the wasm backend (`@tensorflow/tfjs-backend-wasm`, its SIMD
// build, one thread: under Deno tfjs sees Node, where it turns its threaded
// build off, and forcing it fails to start its pthread workers; see
// bench/peers.ts); prints one result line. Run by bench/peers.ts; not
// exported from the package.

import { MLP, mlpData, readJob, report, timeCalls, uniform } from "./_peer_job.ts";

const job = readJob();
// Computed specifiers: `deno check bench/` does not fetch the packages.
const at = (name: string) => ["npm:@tensorflow", `${name}@4.22.0`].join("/");
// deno-lint-ignore no-explicit-any
const tf: any = await import(at("tfjs-core"));
// The gradients sit outside tfjs-core's main entry: the umbrella package registers them.
await import(at("tfjs"));
// deno-lint-ignore no-explicit-any
const wasm: any = await import(at("tfjs-backend-wasm"));
if (job.threads !== null && job.threads > 1) {
  tf.env().set("WASM_HAS_MULTITHREAD_SUPPORT", true);
  wasm.setThreadsCount(job.threads);
}
if (!(await tf.setBackend("wasm"))) throw new Error("tfjs: the wasm backend did not start");
const info = `tfjs 4.22.0 ${tf.getBackend()}, SIMD ${tf.env().getBool("WASM_HAS_SIMD_SUPPORT")}, ` +
  `${wasm.getThreadsCount()} thread(s)`;

if (job.row === "matmul") {
  const n = job.n;
  const a = tf.tensor2d(uniform(n * n, 1, 1), [n, n]);
  const b = tf.tensor2d(uniform(n * n, 1, 2), [n, n]);
  const t = await timeCalls(job, () => tf.matMul(a, b).dispose());
  report({ ...t, info });
} else if (job.row === "mlp") {
  const d = mlpData();
  const s = MLP.sizes;
  const w = d.weights.map((v, l) => tf.variable(tf.tensor2d(v, [s[l], s[l + 1]])));
  const b = d.biases.map((v) => tf.variable(tf.tensor1d(v)));
  const x = tf.tensor2d(d.x, [MLP.batch, s[0]]);
  const y = tf.tensor2d(d.y, [MLP.batch, s[s.length - 1]]);
  const opt = tf.train.sgd(MLP.lr);
  let loss = NaN;
  const t = await timeCalls(job, async () => {
    const l = opt.minimize(() => {
      let h = x;
      for (let i = 0; i < w.length; i++) {
        h = tf.add(tf.matMul(h, w[i]), b[i]);
        if (i + 1 < w.length) h = tf.relu(h);
      }
      return tf.mean(tf.square(tf.sub(h, y)));
    }, true);
    loss = (await l.data())[0];
    l.dispose();
  });
  report({ ...t, info, loss });
} else {
  report({ ms: NaN, calls: 0, info: "not written" });
}
