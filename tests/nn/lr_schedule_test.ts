import assert from "node:assert/strict";
import { checkLrSchedule, lrAt, type LrScheduleSpec } from "../../src/nn/lr_schedule.ts";
import { checkOptimizerSpec, createOptimizer } from "../../src/nn/optimizer_spec.ts";
import { AdamW } from "../../src/nn/adamw.ts";
import { CpuBackend } from "../../src/tensor/cpu/backend.ts";

// PyTorch's schedulers as PyTorch runs them: the *recursive* get_lr of
// torch/optim/lr_scheduler.py (2.x), mutating the group's lr once per
// scheduler.step() after each optimizer step. lrAt uses the closed forms;
// both must give the same lr at every step (within float64 rounding of the
// recursion).
interface Group {
  lr: number;
}
interface TorchScheduler {
  lastEpoch: number;
  step(epoch?: number): void;
}

function torchLinear(g: Group, base: number, s: number, e: number, T: number): TorchScheduler {
  const sch = {
    lastEpoch: 0,
    step(epoch?: number) {
      if (epoch !== undefined) { // closed form, as step(0) from SequentialLR
        this.lastEpoch = epoch;
        g.lr = base * (s + (e - s) * Math.min(T, epoch) / T);
        return;
      }
      this.lastEpoch++;
      const t = this.lastEpoch;
      if (t > T) return;
      g.lr = g.lr * (1 + (e - s) / (T * s + (t - 1) * (e - s)));
    },
  };
  g.lr = base * s; // the initial step: last_epoch 0
  return sch;
}

function torchCosine(g: Group, base: number, T: number, min: number): TorchScheduler {
  return {
    lastEpoch: 0,
    step(epoch?: number) {
      if (epoch !== undefined) {
        this.lastEpoch = epoch;
        g.lr = min + (base - min) * (1 + Math.cos(Math.PI * epoch / T)) / 2;
        return;
      }
      this.lastEpoch++;
      const t = this.lastEpoch;
      if ((t - 1 - T) % (2 * T) === 0) {
        g.lr = g.lr + (base - min) * (1 - Math.cos(Math.PI / T)) / 2;
      } else {
        g.lr = (1 + Math.cos(Math.PI * t / T)) / (1 + Math.cos(Math.PI * (t - 1) / T)) *
            (g.lr - min) + min;
      }
    },
  };
}

function torchStep(g: Group, stepSize: number, gamma: number): TorchScheduler {
  return {
    lastEpoch: 0,
    step() {
      this.lastEpoch++;
      if (this.lastEpoch % stepSize === 0) g.lr *= gamma;
    },
  };
}

function torchSequential(
  g: Group,
  base: number,
  make: ((g: Group) => TorchScheduler)[],
  milestones: number[],
): TorchScheduler {
  // SequentialLR: every scheduler built (each one's initial step), the lr reset to
  // the initial lr, then only the first scheduler's initial step.
  const schedulers = make.map((m) => m(g));
  g.lr = base;
  schedulers[0] = make[0](g);
  let last = 0;
  return {
    lastEpoch: 0,
    step() {
      last++;
      let idx = 0;
      while (idx < milestones.length && milestones[idx] <= last) idx++;
      if (idx > 0 && milestones[idx - 1] === last) schedulers[idx].step(0);
      else schedulers[idx].step();
    },
  };
}

/** The lr of steps 0 … n − 1 as PyTorch gives them. */
function torchLrs(g: Group, sch: TorchScheduler, n: number): number[] {
  const out: number[] = [];
  for (let t = 0; t < n; t++) {
    out.push(g.lr); // the lr the optimizer step uses
    sch.step();
  }
  return out;
}

function assertClose(got: number[], want: number[], label: string, tol = 1e-12): void {
  assert.equal(got.length, want.length);
  got.forEach((v, t) => {
    const err = Math.abs(v - want[t]) / Math.max(1e-30, Math.abs(want[t]));
    assert.ok(
      err <= tol || Math.abs(v - want[t]) <= 1e-15,
      `${label}: step ${t}: ${v} vs ${want[t]}`,
    );
  });
}

const ours = (s: LrScheduleSpec, base: number, n: number) =>
  Array.from({ length: n }, (_, t) => lrAt(s, base, t));

Deno.test("lrAt linear equals PyTorch's LinearLR (recursive) at every step, before and after total_iters", () => {
  for (const [s, e, T] of [[1 / 3, 1, 5], [0.1, 1, 7], [1, 0.2, 4], [0.5, 0.5, 3]] as const) {
    const g = { lr: 0 };
    const want = torchLrs(g, torchLinear(g, 0.3, s, e, T), 20);
    assertClose(
      ours({ kind: "linear", steps: T, startFactor: s, endFactor: e }, 0.3, 20),
      want,
      `linear ${s}→${e}/${T}`,
    );
  }
  // PyTorch's defaults: start 1/3, end 1.
  assert.equal(lrAt({ kind: "linear", steps: 3 }, 0.9, 0), 0.3);
  assert.equal(lrAt({ kind: "linear", steps: 3 }, 0.9, 3), 0.9);
});

Deno.test("lrAt cosine equals PyTorch's CosineAnnealingLR (recursive) up to T_max, then stays at the floor (the documented difference)", () => {
  for (const [T, min] of [[10, 0], [7, 0.01], [1, 0.05], [25, 0.2]] as const) {
    const g = { lr: 0.5 };
    const want = torchLrs(g, torchCosine(g, 0.5, T, min), T + 1);
    const s: LrScheduleSpec = { kind: "cosine", decaySteps: T, minLr: min };
    assertClose(ours(s, 0.5, T + 1), want, `cosine T ${T} min ${min}`, 1e-9);
    assert.equal(lrAt(s, 0.5, T), min);
    for (const t of [T + 1, 2 * T, 3 * T + 1]) assert.equal(lrAt(s, 0.5, t), min);
  }
  // Definition at the midpoint: min + (base − min)/2.
  assert.ok(Math.abs(lrAt({ kind: "cosine", decaySteps: 8, minLr: 0.1 }, 0.5, 4) - 0.3) < 1e-15);
});

Deno.test("lrAt step equals PyTorch's StepLR at every step (default gamma 0.1)", () => {
  for (const [size, gamma] of [[3, 0.5], [1, 0.9], [4, 0.1]] as const) {
    const g = { lr: 0.2 };
    const want = torchLrs(g, torchStep(g, size, gamma), 15);
    assertClose(
      ours({ kind: "step", stepSize: size, gamma }, 0.2, 15),
      want,
      `step ${size} ${gamma}`,
    );
  }
  assert.ok(Math.abs(lrAt({ kind: "step", stepSize: 2 }, 1, 5) - 0.01) < 1e-15);
});

Deno.test("lrAt warmup-cosine and sequential equal PyTorch's SequentialLR([LinearLR, CosineAnnealingLR], [W]); step 0 runs at base · startFactor", () => {
  for (
    const [W, T, min, s] of [[3, 10, 0.001, 0.1], [1, 4, 0, 1 / 3], [5, 5, 0.02, 0.5]] as const
  ) {
    const base = 0.05;
    const g = { lr: base };
    const sch = torchSequential(g, base, [
      (g) => torchLinear(g, base, s, 1, W),
      (g) => torchCosine(g, base, T, min),
    ], [W]);
    const want = torchLrs(g, sch, W + T + 1);
    const wc: LrScheduleSpec = {
      kind: "warmup-cosine",
      warmupSteps: W,
      decaySteps: T,
      minLr: min,
      startFactor: s,
    };
    assertClose(ours(wc, base, W + T + 1), want, `warmup-cosine ${W}/${T}`, 1e-9);
    const seq: LrScheduleSpec = {
      kind: "sequential",
      schedules: [{ kind: "linear", steps: W, startFactor: s }, {
        kind: "cosine",
        decaySteps: T,
        minLr: min,
      }],
      milestones: [W],
    };
    assert.deepEqual(ours(seq, base, W + T + 3), ours(wc, base, W + T + 3));
    assert.equal(lrAt(wc, base, 0), base * s, "step 0 uses the warmup's start lr");
    assert.equal(lrAt(wc, base, W), base, "the cosine starts at the base lr");
  }
  // No warmup: the cosine alone.
  assert.deepEqual(
    ours({ kind: "warmup-cosine", warmupSteps: 0, decaySteps: 6 }, 1, 8),
    ours({ kind: "cosine", decaySteps: 6 }, 1, 8),
  );
  // Three pieces: constant, then step decay restarting at its own step 0.
  const three: LrScheduleSpec = {
    kind: "sequential",
    schedules: [{ kind: "constant" }, { kind: "step", stepSize: 2, gamma: 0.5 }, {
      kind: "constant",
    }],
    milestones: [2, 6],
  };
  assert.deepEqual(ours(three, 8, 8), [8, 8, 8, 8, 4, 4, 8, 8]);
});

Deno.test("checkLrSchedule refuses bad schedules with the field and the rule", () => {
  const cases: [unknown, new (...a: never[]) => Error, RegExp][] = [
    [null, TypeError, /lrSchedule must be an object \{ kind: "constant" \| "linear"/],
    [(s: number) => s, TypeError, /got a function/],
    [
      { kind: "exp" },
      TypeError,
      /lrSchedule\.kind must be one of constant, linear, cosine, step, sequential, warmup-cosine, got "exp"/,
    ],
    [
      { kind: "cosine", decaySteps: 10, warmup: 3 },
      TypeError,
      /unknown cosine schedule option "warmup" in lrSchedule; known: decaySteps, minLr/,
    ],
    [
      { kind: "cosine", decaySteps: 0 },
      RangeError,
      /lrSchedule\.decaySteps must be a positive integer, got 0/,
    ],
    [
      { kind: "cosine", decaySteps: 5, minLr: -1 },
      RangeError,
      /lrSchedule\.minLr must be a finite number ≥ 0, got -1/,
    ],
    [
      { kind: "linear", steps: 4, startFactor: 0 },
      RangeError,
      /lrSchedule\.startFactor must lie in \(0, 1\], got 0/,
    ],
    [
      { kind: "linear", steps: 4, endFactor: 2 },
      RangeError,
      /lrSchedule\.endFactor must lie in \[0, 1\], got 2/,
    ],
    [
      { kind: "step", stepSize: 1.5 },
      RangeError,
      /lrSchedule\.stepSize must be a positive integer, got 1\.5/,
    ],
    [
      { kind: "warmup-cosine", warmupSteps: -1, decaySteps: 3 },
      RangeError,
      /warmupSteps must be an integer ≥ 0, got -1/,
    ],
    [
      { kind: "sequential", schedules: [{ kind: "constant" }], milestones: [3] },
      RangeError,
      /milestones must hold 0 step\(s\)/,
    ],
    [
      {
        kind: "sequential",
        schedules: [{ kind: "constant" }, { kind: "constant" }, { kind: "constant" }],
        milestones: [4, 4],
      },
      RangeError,
      /milestones must increase strictly/,
    ],
    [
      { kind: "sequential", schedules: [{ kind: "constant" }, { kind: "step" }], milestones: [2] },
      RangeError,
      /lrSchedule\.schedules\[1\]\.stepSize must be a positive integer, got undefined/,
    ],
  ];
  for (const [spec, type, re] of cases) {
    assert.throws(() => checkLrSchedule(spec as LrScheduleSpec), (e: unknown) => {
      assert.ok(e instanceof type, `${JSON.stringify(spec)}: ${e}`);
      assert.match((e as Error).message, re);
      return true;
    });
  }
  assert.throws(() => lrAt({ kind: "constant" }, 0.1, -1), /step must be an integer ≥ 0, got -1/);
  assert.throws(
    () => lrAt({ kind: "constant" }, NaN, 0),
    /baseLr must be a finite number ≥ 0, got NaN/,
  );
});

Deno.test("optimizer specs: lrSchedule is data, checked with the spec; an lr function is refused with what to do instead", () => {
  assert.deepEqual(
    checkOptimizerSpec({ kind: "sgd", lr: 0.1, lrSchedule: { kind: "step", stepSize: 2 } }),
    { kind: "sgd", lr: 0.1, lrSchedule: { kind: "step", stepSize: 2 } },
  );
  assert.throws(
    () => checkOptimizerSpec({ kind: "sgd", lr: ((s: number) => 0.1 * s) as unknown as number }),
    /optimizer\.lr must be a number, got a function: a function cannot cross to the pipeline's workers; give a schedule as data in optimizer\.lrSchedule/,
  );
  assert.throws(
    () => checkOptimizerSpec({ kind: "adamw", lrSchedule: { kind: "cosine", decaySteps: -2 } }),
    /AdamW: lrSchedule\.decaySteps must be a positive integer, got -2/,
  );
});

Deno.test("an optimizer with lrSchedule steps at lrAt(schedule, initial group lr, stepCount) per group; setLearningRate replaces the schedule", () => {
  const be = new CpuBackend();
  const mk = () => ({
    name: "w",
    value: be.fromData(new Float32Array([1]), [1]),
    grad: be.fromData(new Float32Array([1]), [1]),
  });
  const a = mk(), b = { ...mk(), name: "b" };
  const schedule: LrScheduleSpec = {
    kind: "warmup-cosine",
    warmupSteps: 2,
    decaySteps: 3,
    minLr: 0.001,
  };
  const sgd = createOptimizer({ kind: "sgd", lr: 0.1, lrSchedule: schedule }, [a]);
  const seen: number[] = [];
  for (let t = 0; t < 7; t++) {
    assert.equal(sgd.learningRate, lrAt(schedule, 0.1, t));
    sgd.step();
    seen.push(sgd.groups[0].lr);
  }
  assert.deepEqual(seen, ours(schedule, 0.1, 7));
  sgd.setLearningRate(0.02);
  sgd.step();
  assert.equal(sgd.groups[0].lr, 0.02);
  assert.equal(sgd.learningRate, 0.02);
  assert.throws(() => sgd.setLearningRate(-1), /SGD: lr must be a finite number ≥ 0, got -1/);
  sgd.dispose();
  // Groups keep their own initial lr as the schedule's base.
  const adamw = new AdamW([{ params: [a], lr: 0.1 }, { params: [b], lr: 0.4 }], {
    lrSchedule: { kind: "step", stepSize: 1, gamma: 0.5 },
  });
  adamw.step();
  adamw.step();
  assert.deepEqual(adamw.groups.map((g) => g.lr), [0.05, 0.2]);
  adamw.dispose();
  for (const p of [a, b]) {
    p.value.dispose();
    p.grad.dispose();
  }
});
