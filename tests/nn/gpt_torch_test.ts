/**
 * One device's tied training equals PyTorch's tied GPT (issue 36): a tiny
 * `createTinyGPT({ tieEmbeddings: true })` and a nanoGPT-style torch module
 * (`nn.Embedding`, `nn.LayerNorm`, `nn.Linear`, `F.gelu(approximate="tanh")`,
 * causal softmax attention, `lm_head.weight = wte.weight`) in float64, loaded
 * with the same f32 weights, train 3 AdamW steps on the same fixed batches
 * (`F.cross_entropy`, mean over every position; `torch.optim.AdamW` with
 * the same lr, betas, eps and weight decay). Compared: the loss of each
 * step, the tied table's gradient after the first backward, and every
 * parameter after the 3 steps. A sanity check: the same torch model with
 * the head untied (its own copy of the table) differs from Conveyor far
 * beyond the tolerances, so a broken tie cannot pass.
 *
 * Needs `python3` with `torch` (Debian: `apt-get install python3-torch`).
 * Skipped, saying so, where either is missing; CI's `.ci/run` installs it and
 * sets CONVEYOR_REQUIRE_TORCH=1, which turns its absence into a failure.
 */

import assert from "node:assert/strict";
import { CpuBackend } from "../../src/tensor/cpu/backend.ts";
import { Rng } from "../../src/tensor/random.ts";
import { AdamW } from "../../src/nn/adamw.ts";
import { createTinyGPT, type TinyGPTConfig } from "../../src/nn/gpt.ts";
import { crossEntropyLoss } from "../../src/nn/losses.ts";

/**
 * The first of `$CONVEYOR_PYTHON`, `python3` and `/usr/bin/python3` that
 * imports torch (a pyenv or venv `python3` on PATH does not see Debian's
 * python3-torch, which only the system interpreter imports), or what is
 * missing.
 */
async function findTorch(): Promise<{ python: string } | { missing: string }> {
  const env = Deno.env.get("CONVEYOR_PYTHON");
  const candidates = env !== undefined ? [env] : ["python3", "/usr/bin/python3"];
  const why: string[] = [];
  for (const python of candidates) {
    let out: Deno.CommandOutput;
    try {
      out = await new Deno.Command(python, {
        args: ["-c", "import torch"],
        stdout: "null",
        stderr: "piped",
      }).output();
    } catch {
      why.push(`${python} not found`);
      continue;
    }
    if (out.success) return { python };
    const last = new TextDecoder().decode(out.stderr).trim().split("\n").pop();
    why.push(`${python} cannot import torch: ${last}`);
  }
  return { missing: why.join("; ") };
}

const found = await findTorch();
const missing = "missing" in found ? found.missing : null;
const python = "python" in found ? found.python : "python3";
const required = Deno.env.get("CONVEYOR_REQUIRE_TORCH") === "1";
if (missing !== null && !required) {
  console.log(
    `gpt_torch_test: SKIPPED: python3 with torch not found (${missing}; ` +
      "install python3-torch to check tied training against PyTorch)",
  );
}

const CONFIG = {
  vocabSize: 37,
  seqLen: 8,
  dim: 16,
  heads: 2,
  layers: 2,
  tieEmbeddings: true,
  seed: 7,
} as const satisfies TinyGPTConfig;
const BATCH = 3;
const STEPS = 3;
// AdamW's hyper-parameters, the same on both sides (Conveyor's defaults for
// betas and eps; a larger lr and weight decay so that 3 steps move every
// weight by well over the tolerances).
const HYPER = { lr: 1e-2, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0.1 };

// Tolerances, each relative to the compared tensor's largest entry (the
// loss: to the loss). Conveyor stores every tensor in f32 while torch runs
// f64 from the same f32 weights. The exact backend sums in f64 and rounds
// each stored result to f32 (6e-8 relative per rounding): through two
// blocks and the loss its gradients agree to ~4e-7 (measured). AdamW then
// magnifies that error where the steps' gradients nearly cancel in m̂ (an
// entry's update m̂ / (√v̂ + ε) is a ratio of near-equal sums), and the
// biases, which start at 0, have largest entries of only ~3 · lr after 3
// steps: the weights agree to ~8e-5 (measured, in an attention bias). The
// fast backend also sums in f32 (an error growing with the summed length):
// losses and gradients ~1e-6, weights ~2e-3 (measured, again a bias). Each
// tolerance is 5-10x the measured worst, so that another thread count or
// SIMD variant of the fast kernels (another summation order) still passes;
// the untied model misses each by far more (asserted in the test).
const TOL = {
  exact: { loss: 1e-6, grad: 2e-6, param: 5e-4 },
  fast: { loss: 1e-5, grad: 1e-5, param: 1e-2 },
};

/** Conveyor's parameter name to the torch module's (both `split` layouts). */
function torchName(name: string, split: "blocks" | "halves"): string {
  if (name === "0.token") return "wte.weight";
  if (name === "0.position") return "wpe.weight";
  const m = /^(\d+)\.(?:inner\.)?(.*)$/.exec(name);
  if (m === null) throw new Error(`unexpected parameter name ${name}`);
  const layer = Number(m[1]) - 1;
  const blocks = CONFIG.layers;
  const block = split === "blocks" ? layer : Math.floor(layer / 2);
  if (block === blocks) return `ln_f.${m[2]}`;
  return `h.${block}.${m[2]}`;
}

/**
 * Fixed batches, a new one each step: `[B, T]` random ids, each target a
 * fixed function of its id (`(3 · id + 1) mod V`).
 */
function batches(): { ids: number[][]; targets: number[][] }[] {
  const rng = new Rng(11);
  const out = [];
  for (let s = 0; s < STEPS; s++) {
    const ids: number[][] = [], targets: number[][] = [];
    for (let b = 0; b < BATCH; b++) {
      const row = Array.from({ length: CONFIG.seqLen }, () => rng.int(CONFIG.vocabSize));
      ids.push(row);
      targets.push(row.map((id) => (3 * id + 1) % CONFIG.vocabSize));
    }
    out.push({ ids, targets });
  }
  return out;
}

interface Run {
  losses: number[];
  /** Every parameter's gradient after the first backward (the table's holds both uses). */
  grads: Map<string, Float64Array>;
  params: Map<string, Float64Array>;
}

/** Conveyor's tied training: losses, the table's first gradient, the final weights. */
async function conveyorRun(
  be: CpuBackend,
  split: "blocks" | "halves",
): Promise<{ run: Run; initial: Map<string, { shape: number[]; data: Float32Array }> }> {
  const model = createTinyGPT({ ...CONFIG, split }, be);
  const initial = new Map<string, { shape: number[]; data: Float32Array }>();
  for (const p of model.parameters()) {
    initial.set(torchName(p.name, split), {
      shape: [...p.value.shape],
      data: Float32Array.from(await p.value.toArray()),
    });
  }
  const opt = new AdamW(model.parameters(), HYPER);
  const losses: number[] = [];
  const grads = new Map<string, Float64Array>();
  for (const [s, batch] of batches().entries()) {
    const shape = [BATCH, CONFIG.seqLen];
    const x = be.fromData(Float32Array.from(batch.ids.flat()), shape);
    const t = be.fromData(Float32Array.from(batch.targets.flat()), shape);
    model.zeroGrad();
    const y = model.forward(x);
    const { loss, grad } = crossEntropyLoss(y, t);
    model.backward(grad).dispose();
    if (s === 0) {
      for (const p of model.parameters()) {
        grads.set(torchName(p.name, split), Float64Array.from(await p.grad.toArray()));
      }
    }
    opt.step();
    losses.push((await loss.toArray())[0]);
    for (const z of [x, t, y, loss, grad]) z.dispose();
  }
  const params = new Map<string, Float64Array>();
  for (const p of model.parameters()) {
    params.set(torchName(p.name, split), Float64Array.from(await p.value.toArray()));
  }
  opt.dispose();
  model.dispose();
  return { run: { losses, grads, params }, initial };
}

const PYTHON = `
import json, math, sys
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)
cfg = json.load(open(sys.argv[1]))
V, T, C, H, L = cfg["vocabSize"], cfg["seqLen"], cfg["dim"], cfg["heads"], cfg["layers"]
hp = cfg["hyper"]

class Attn(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(C, 3 * C)
        self.proj = nn.Linear(C, C)
    def forward(self, x):
        B, T_, _ = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (z.view(B, T_, H, C // H).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // H)
        mask = torch.tril(torch.ones(T_, T_, dtype=torch.bool))
        att = F.softmax(att.masked_fill(~mask, float("-inf")), dim=-1)
        return self.proj((att @ v).transpose(1, 2).reshape(B, T_, C))

class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(C, 4 * C)
        self.proj = nn.Linear(4 * C, C)
    def forward(self, x):
        return self.proj(F.gelu(self.fc(x), approximate="tanh"))

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(C, eps=1e-5)
        self.attn = Attn()
        self.ln2 = nn.LayerNorm(C, eps=1e-5)
        self.mlp = MLP()
    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))

class GPT(nn.Module):
    def __init__(self, tied):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(T, C)
        self.h = nn.ModuleList([Block() for _ in range(L)])
        self.ln_f = nn.LayerNorm(C, eps=1e-5)
        self.lm_head = nn.Linear(C, V, bias=False)
        if tied:
            self.lm_head.weight = self.wte.weight  # nanoGPT's weight tying
    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for b in self.h:
            x = b(x)
        return self.lm_head(self.ln_f(x))

weights = json.load(open(sys.argv[2]))
out = {}
for tied in (True, False):
    model = GPT(tied)
    named = dict(model.named_parameters())
    with torch.no_grad():
        for name, w in weights.items():
            named[name].copy_(torch.tensor(w["data"]).view(w["shape"]))
        if not tied:
            model.lm_head.weight.copy_(model.wte.weight)  # the same start, its own copy
    assert len(list(model.parameters())) == len(weights) + (0 if tied else 1)
    opt = torch.optim.AdamW(model.parameters(), lr=hp["lr"], betas=(hp["beta1"], hp["beta2"]),
                            eps=hp["eps"], weight_decay=hp["weightDecay"])
    losses, grads = [], None
    for s, batch in enumerate(cfg["batches"]):
        idx, tgt = torch.tensor(batch["ids"]), torch.tensor(batch["targets"])
        opt.zero_grad()
        logits = model(idx)
        loss = F.cross_entropy(logits.view(-1, V), tgt.view(-1))
        loss.backward()
        if s == 0:
            named = dict(model.named_parameters())
            grads = {n: named[n].grad.flatten().tolist() for n in weights}
        opt.step()
        losses.append(loss.item())
    named = dict(model.named_parameters())
    out["tied" if tied else "untied"] = {
        "losses": losses,
        "grads": grads,
        "params": {n: named[n].detach().flatten().tolist() for n in weights},
    }
json.dump(out, open(sys.argv[3], "w"))
`;

/** Runs the torch script on Conveyor's initial weights: the tied and untied runs. */
async function torchRuns(
  initial: Map<string, { shape: number[]; data: Float32Array }>,
): Promise<{ tied: Run; untied: Run }> {
  const dir = await Deno.makeTempDir({ prefix: "conveyor_gpt_torch_" });
  try {
    const script = `${dir}/gpt.py`, cfg = `${dir}/config.json`;
    const weights = `${dir}/weights.json`, result = `${dir}/result.json`;
    await Deno.writeTextFile(script, PYTHON);
    await Deno.writeTextFile(
      cfg,
      JSON.stringify({ ...CONFIG, hyper: HYPER, batches: batches() }),
    );
    // f32 values printed by JSON (shortest round-trip of the f64 widening)
    // are read back by Python as the same f64 numbers: no rounding on the way.
    await Deno.writeTextFile(
      weights,
      JSON.stringify(
        Object.fromEntries(
          [...initial].map(([n, w]) => [n, { shape: w.shape, data: Array.from(w.data) }]),
        ),
      ),
    );
    const out = await new Deno.Command(python, {
      args: [script, cfg, weights, result],
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.ok(
      out.success,
      `the torch script failed:\n${new TextDecoder().decode(out.stderr)}`,
    );
    const json = JSON.parse(await Deno.readTextFile(result));
    const toRun = (r: {
      losses: number[];
      grads: Record<string, number[]>;
      params: Record<string, number[]>;
    }): Run => ({
      losses: r.losses,
      grads: new Map(Object.entries(r.grads).map(([n, v]) => [n, Float64Array.from(v)])),
      params: new Map(Object.entries(r.params).map(([n, v]) => [n, Float64Array.from(v)])),
    });
    return { tied: toRun(json.tied), untied: toRun(json.untied) };
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/**
 * The key part of an attention's qkv bias (`[C, 2C)`), or null. Its gradient
 * is zero by definition (adding b to every key adds q·b to a whole row of
 * scores, which the softmax cancels), so what it holds is rounding noise:
 * ~1e-17 in float64, ~1e-9 in f32, and AdamW's m̂ / (√v̂ + ε) turns f32 noise
 * into steps of up to lr in random directions. Its weights are therefore
 * left out of the weight comparison and checked on their own (see the test).
 */
function keyBias(name: string): [number, number] | null {
  return /attn\.qkv\.bias$/.test(name) ? [CONFIG.dim, 2 * CONFIG.dim] : null;
}

/** max |a − b| / max |b| over the indices outside `skip`. */
function relDiff(
  a: ArrayLike<number>,
  b: ArrayLike<number>,
  skip: [number, number] | null = null,
): number {
  assert.equal(a.length, b.length);
  let d = 0, m = 0;
  for (let i = 0; i < a.length; i++) {
    if (skip !== null && i >= skip[0] && i < skip[1]) continue;
    d = Math.max(d, Math.abs(a[i] - b[i]));
    m = Math.max(m, Math.abs(b[i]));
  }
  return d / m;
}

interface Diff {
  loss: number;
  table: number;
  grad: number;
  gradAt: string;
  param: number;
  paramAt: string;
}

/** The worst differences of a Conveyor run from a torch run, each relative to its tensor's largest entry. */
function compare(ours: Run, ref: Run): Diff {
  let loss = 0;
  ours.losses.forEach((l, i) => loss = Math.max(loss, Math.abs(l - ref.losses[i]) / ref.losses[i]));
  const worst = (a: Map<string, Float64Array>, b: Map<string, Float64Array>, skipKey: boolean) => {
    let d = 0, at = "";
    for (const [name, want] of b) {
      const got = a.get(name);
      assert.ok(got !== undefined, `Conveyor has no parameter ${name}`);
      const e = relDiff(got, want, skipKey ? keyBias(name) : null);
      if (e > d) [d, at] = [e, name];
    }
    return [d, at] as const;
  };
  const table = relDiff(ours.grads.get("wte.weight")!, ref.grads.get("wte.weight")!);
  const [grad, gradAt] = worst(ours.grads, ref.grads, false);
  const [param, paramAt] = worst(ours.params, ref.params, true);
  return { loss, table, grad, gradAt, param, paramAt };
}

function fmt(d: Diff): string {
  const e = (x: number) => x.toExponential(2);
  return `loss ${e(d.loss)}, table grad ${e(d.table)}, grads ${e(d.grad)} (${d.gradAt}), ` +
    `weights ${e(d.param)} (${d.paramAt})`;
}

Deno.test({
  name:
    "tied training on one device (exact CPU backend with both splits, fast backend) equals PyTorch's tied GPT in float64: 3 AdamW steps' losses, the table's gradient, every weight",
  ignore: missing !== null && !required,
  async fn() {
    assert.equal(missing, null, `the torch reference is missing: ${missing}`);
    const exact = new CpuBackend({ exact: true });
    const fast = new CpuBackend();
    const base = await conveyorRun(exact, "blocks");
    const { tied, untied } = await torchRuns(base.initial);
    // The first loss is near ln V (a small head), and the steps move every
    // tensor far beyond the weights' tolerances (the comparison is not
    // vacuous).
    assert.ok(Math.abs(tied.losses[0] - Math.log(CONFIG.vocabSize)) < 0.5, `${tied.losses}`);
    let moved = Infinity, least = "";
    for (const [name, w] of base.initial) {
      const d = relDiff(w.data, tied.params.get(name)!);
      if (d < moved) [moved, least] = [d, name];
    }
    assert.ok(moved > 10 * TOL.exact.param, `${least} moved only ${moved}`);

    const runs: [string, Run, typeof TOL.exact][] = [
      ["exact, blocks", base.run, TOL.exact],
      ["exact, halves", (await conveyorRun(exact, "halves")).run, TOL.exact],
      ["fast, blocks", (await conveyorRun(fast, "blocks")).run, TOL.fast],
    ];
    for (const [label, run, tol] of runs) {
      const d = compare(run, tied);
      console.log(`gpt_torch_test: ${label}: worst relative differences ${fmt(d)}`);
      assert.ok(d.loss <= tol.loss, `${label}: losses ${run.losses} vs torch ${tied.losses}`);
      assert.ok(d.table <= tol.grad, `${label}: the table's gradient differs by ${d.table}`);
      assert.ok(d.grad <= tol.grad, `${label}: ${d.gradAt}'s gradient differs by ${d.grad}`);
      assert.ok(d.param <= tol.param, `${label}: ${d.paramAt} differs by ${d.param}`);
    }

    // Sanity: against the untied torch model (the head its own copy of
    // the table) the same comparison fails by far: the table's gradient
    // lacks the head's part, and the losses and weights part.
    const u = compare(base.run, untied);
    console.log(`gpt_torch_test: exact vs untied torch: ${fmt(u)}`);
    assert.ok(u.loss > 100 * TOL.fast.loss, `untied losses only ${u.loss} away`);
    assert.ok(u.table > 1000 * TOL.fast.grad, `untied table gradient only ${u.table} away`);
    assert.ok(u.param > 50 * TOL.fast.param, `untied weights only ${u.param} away`);
  },
});
