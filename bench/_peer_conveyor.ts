// bench/peers.ts's Conveyor child: one job (see _peer_job.ts) on a
// `CpuBackend` of the job's threads, or the exact reference; prints one
// result line. Run by bench/peers.ts; not exported from the package.

import { CpuBackend, createTinyGPT, Linear, ReLU, Sequential } from "../mod.ts";
import { ops } from "../tensor.ts";
import { AdamW, crossEntropyLoss, mseLoss, SGD } from "../nn.ts";
import { GPT, gptData, MLP, mlpData, readJob, report, timeCalls, uniform } from "./_peer_job.ts";

const job = readJob();
const be = new CpuBackend(
  job.exact ? { exact: true } : job.threads === null ? {} : { threads: job.threads },
);
const info = be.description;

if (job.row === "matmul") {
  const n = job.n;
  const a = be.fromData(uniform(n * n, 1, 1), [n, n]);
  const b = be.fromData(uniform(n * n, 1, 2), [n, n]);
  const t = await timeCalls(job, () => ops.matmul(a, b).dispose());
  report({ ...t, info });
} else if (job.row === "mlp") {
  const d = mlpData();
  const s = MLP.sizes;
  const layers = [];
  for (let l = 0; l + 1 < s.length; l++) {
    if (l > 0) layers.push(new ReLU(be));
    layers.push(new Linear(be, s[l], s[l + 1], { seed: l }));
  }
  const net = new Sequential(layers);
  const opt = new SGD(net.parameters(), { lr: MLP.lr });
  const x = be.fromData(d.x, [MLP.batch, s[0]]);
  const y = be.fromData(d.y, [MLP.batch, s[s.length - 1]]);
  let loss = NaN;
  const t = await timeCalls(job, async () => {
    const pred = net.forward(x);
    const r = mseLoss(pred, y);
    net.backward(r.grad, undefined, { needInputGrad: false });
    opt.step();
    net.zeroGrad();
    loss = (await r.loss.toArray())[0];
    for (const z of [pred, r.loss, r.grad]) z.dispose();
  });
  report({ ...t, info, loss });
} else {
  const net = createTinyGPT({ ...GPT, seed: 1 }, be);
  const opt = new AdamW(net.parameters(), { lr: GPT.lr });
  const d = gptData();
  const shape = [GPT.batch, GPT.seqLen];
  const ids = be.fromData(Float32Array.from(d.ids), shape);
  const targets = be.fromData(Float32Array.from(d.targets), shape);
  let loss = NaN;
  const t = await timeCalls(job, async () => {
    const logits = net.forward(ids, { training: true });
    const r = crossEntropyLoss(logits, targets);
    net.backward(r.grad, undefined, { needInputGrad: false });
    opt.step();
    net.zeroGrad();
    loss = (await r.loss.toArray())[0];
    for (const z of [logits, r.loss, r.grad]) z.dispose();
  });
  report({ ...t, info, loss });
}
