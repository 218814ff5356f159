// The model's options as `PipelineParallelModel.create` takes them: unknown
// names refused naming the nearest known one, the removed flags refused, and
// the schedule's full check (a dry run) run once per model.

import assert from "node:assert/strict";
import { PipelineParallelModel } from "../../../src/pipeline/model/pipeline_parallel_model.ts";
import { scheduleChecks } from "../../../src/pipeline/runtime/checked_schedule.ts";
import { withFaultInjection } from "../../../src/pipeline/runtime/fault_injection.ts";
import { liveCount as liveWorkers } from "../../../src/pipeline/runtime/_worker_registry.ts";
import { cpuModel, gpt, tokenBatches } from "./_reference_training.ts";

const SGD = { kind: "sgd", lr: 0.1 } as const;

/** create on 2 worker ranks with `extra` options added. */
const createWith = (net: ReturnType<typeof gpt>, extra: Record<string, unknown>) =>
  PipelineParallelModel.create({
    model: net,
    schedule: "1f1b",
    ranks: 2,
    microBatches: 2,
    loss: "cross-entropy",
    optimizer: SGD,
    rankGroup: "workers",
    ...extra,
  } as never);

Deno.test("create refuses an unknown option, naming it and the nearest known one, before any rank starts", async () => {
  const cases: [Record<string, unknown>, string][] = [
    [{ clipGradnorm: 1 }, "unknown option clipGradnorm: did you mean clipGradNorm?"],
    [{ microbatches: 4 }, "unknown option microbatches: did you mean microBatches?"],
    [{ nonfinite: "skip" }, "unknown option nonfinite: did you mean nonFinite?"],
    [{ heartbeatTimeoutMs: 100 }, "unknown option heartbeatTimeoutMs: did you mean heartbeatMs?"],
    // The removed flags: refused, not ignored.
    [{ workers: true }, "unknown option workers"],
    [{ faultInjection: { failAt: "0F0" } }, "unknown option faultInjection"],
  ];
  for (const [extra, message] of cases) {
    const net = gpt();
    await assert.rejects(
      createWith(net, extra),
      (e: Error) => e instanceof TypeError && e.message.startsWith(message),
      message,
    );
    net.dispose();
  }
  assert.equal(liveWorkers(), 0, "no worker started");
  // A name far from every option lists them all.
  await assert.rejects(
    cpuModel({ zzzzzzzzzzzzzzzzzz: 1 } as never),
    /unknown option zzzzzzzzzzzzzzzzzz: the options are model, schedule, ranks, /,
  );
});

Deno.test("create: a string where checkpoint or partition takes an object says what to pass", async () => {
  const cases: [Record<string, unknown>, RegExp][] = [
    [
      { checkpoint: "full" },
      /^TypeError: checkpoint must be an ActivationCheckpointConfig or its options \{ recompute, everyNLayers, … \}, got "full": pass \{ recompute: "full" \}/,
    ],
    [
      { partition: "balanced" },
      /^TypeError: partition must be a PartitionStrategy .*new LoadBalancedPartition\(\).*new UniformPartition\(\).*new FixedPartition\(boundaries\).*got "balanced"/,
    ],
  ];
  for (const [extra, re] of cases) {
    const net = gpt();
    await assert.rejects(
      createWith(net, extra),
      re,
    );
    net.dispose();
  }
  assert.equal(liveWorkers(), 0, "no worker started");
});

Deno.test("withFaultInjection is the one way to inject a fault into a model (its option is checked by create)", async () => {
  await assert.rejects(
    cpuModel(
      withFaultInjection({ schedule: "1f1b", microBatches: 2, optimizer: SGD }, { failAt: "9Q9" }),
    ),
    /faultInjection\.failAt must name an action/,
  );
  await using m = await cpuModel(
    withFaultInjection({ schedule: "1f1b", microBatches: 2, optimizer: SGD }, { failAt: "1F1" }),
  );
  await assert.rejects(
    m.step(tokenBatches(1, 4)[0]),
    /rank 1 failed in 1F1 .*injected failure at 1F1/,
  );
});

Deno.test("the schedule's full check (a dry run) runs once per create, whatever the rank group", async () => {
  for (const rankGroup of ["in-process", "workers", "subprocess"] as const) {
    const before = scheduleChecks();
    await using _m = await cpuModel({
      schedule: "zb-h1",
      microBatches: 2,
      optimizer: SGD,
      rankGroup,
    });
    assert.equal(scheduleChecks() - before, 1, `${rankGroup}: one check per model`);
  }
  assert.equal(liveWorkers(), 0);
});
