/**
 * Checkpoint files on the disk: which file a path argument names (file URLs
 * decoded, other schemes refused), and how a save writes (synced before the
 * rename, the folder synced after, stale temporary files of the same target
 * removed).
 *
 * @module
 */

import assert from "node:assert/strict";
import { pathToFileURL } from "node:url";
import type { PipelineParallelModel } from "../../../src/pipeline/model/pipeline_parallel_model.ts";
import { cpuModel, tokenBatches } from "./_reference_training.ts";
import { encodeSafetensors, parseSafetensors } from "../../../src/nn/safetensors.ts";
import { parseTrainingCheckpoint } from "../../../src/nn/training_checkpoint.ts";

const OPTIMIZER = { kind: "adamw", lr: 1e-2 } as const;
const batches = tokenBatches(2, 4, 3);

async function trained(): Promise<PipelineParallelModel> {
  const m = await cpuModel({ schedule: "1f1b", microBatches: 2, optimizer: OPTIMIZER });
  await m.train(batches);
  return m;
}

async function names(dir: string): Promise<string[]> {
  const out: string[] = [];
  for await (const e of Deno.readDir(dir)) out.push(e.name);
  return out.sort();
}

Deno.test("file URLs are decoded as file URLs (my%20run.ckpt is `my run.ckpt`) by saveCheckpoint, loadCheckpoint, create({ resume }) and writeTrace; the same URL loads what it saved", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await using m = await trained();
    const url = new URL(`${pathToFileURL(dir).href}/my%20run.ckpt`);
    await m.saveCheckpoint(url);
    assert.deepEqual(await names(dir), ["my run.ckpt"]);
    assert.equal((await m.loadCheckpoint(url)).step, 2);
    await using r = await cpuModel({
      schedule: "1f1b",
      microBatches: 2,
      optimizer: OPTIMIZER,
      resume: url,
    });
    assert.equal(r.stepCount, 2);
    await m.writeTrace(new URL(`${pathToFileURL(dir).href}/trace%20%231.json`));
    assert.deepEqual(await names(dir), ["my run.ckpt", "trace #1.json"]);
    assert.ok(JSON.parse(await Deno.readTextFile(`${dir}/trace #1.json`)).traceEvents.length > 0);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("URLs of other schemes (https:, data:) and file URLs naming no local path are refused with a TypeError naming the URL and the rule, and nothing is written", async () => {
  const dir = await Deno.makeTempDir();
  const cwd = Deno.cwd();
  try {
    Deno.chdir(dir); // an https: URL's pathname must not become a local file here
    await using m = await trained();
    for (
      const [url, rule] of [
        ["https://example.com/run.ckpt", /only file: URLs name a local file \(not https:\)/],
        ["data:text/plain,abc", /only file: URLs name a local file \(not data:\)/],
        ["file://remote-host/tmp/run.ckpt", /names no local path/],
        [`file://${dir}/a%2Fb.ckpt`, /names no local path: .*encoded \//],
      ] as const
    ) {
      const u = new URL(url);
      const named = new RegExp(u.href.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
      for (
        const call of [
          () => m.saveCheckpoint(u),
          () => m.loadCheckpoint(u),
          () => m.writeTrace(u),
          () => cpuModel({ schedule: "1f1b", microBatches: 2, optimizer: OPTIMIZER, resume: u }),
        ]
      ) {
        await assert.rejects(call, (e: Error) => {
          assert.ok(e instanceof TypeError, `${url}: ${e.constructor.name}: ${e.message}`);
          assert.match(e.message, named);
          assert.match(e.message, rule);
          return true;
        });
      }
    }
    assert.deepEqual(await names(dir), [], "nothing was written");
    assert.equal(m.stepCount, 2, "the model is unchanged and usable");
  } finally {
    Deno.chdir(cwd);
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("saveCheckpoint removes the stale temporary files of its own target (<name>.tmp-XXXXXXXX, left by a killed save), and nothing else", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await using m = await trained();
    const keep = [
      "run.ckpt.tmp-0123456", // 7 digits
      "run.ckpt.tmp-0123456789", // 10 digits
      "run.ckpt.tmp-ABCDEF01", // not lowercase hex
      "run.ckpt.tmp-zzzzzzzz",
      "run.ckpt.bak",
      "xrun.ckpt.tmp-0badcafe", // another target
      "other.ckpt.tmp-0badcafe",
      "run.ckpt.tmp-0badcafe.keep",
    ];
    const stale = ["run.ckpt.tmp-0badcafe", "run.ckpt.tmp-12345678"];
    for (const n of [...keep, ...stale]) await Deno.writeFile(`${dir}/${n}`, new Uint8Array(64));
    await Deno.mkdir(`${dir}/run.ckpt.tmp-aaaaaaaa`); // a folder is not a temporary file
    await m.saveCheckpoint(`${dir}/run.ckpt`);
    assert.deepEqual(
      await names(dir),
      [...keep, "run.ckpt", "run.ckpt.tmp-aaaaaaaa"].sort(),
      "the stale temporary files are gone, everything else stays",
    );
    assert.equal((await m.loadCheckpoint(`${dir}/run.ckpt`)).step, 2);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("saveCheckpoint keeps the temporary file of a save still running in another process (it holds a lock on it)", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const held = `${dir}/run.ckpt.tmp-11111111`;
    await Deno.writeFile(held, new Uint8Array(8));
    // Another process holds the lock a live save holds on its temporary file.
    const child = new Deno.Command(Deno.execPath(), {
      args: [
        "eval",
        `const f = await Deno.open(${JSON.stringify(held)}, { write: true });
await f.lock(true);
console.log("locked");
await new Promise((r) => setTimeout(r, 1500));
await Deno.rename(${JSON.stringify(held)}, ${JSON.stringify(`${dir}/renamed`)});
f.close();`,
      ],
      stdout: "piped",
    }).spawn();
    const reader = child.stdout.getReader();
    assert.match(new TextDecoder().decode((await reader.read()).value), /locked/);
    await using m = await trained();
    await m.saveCheckpoint(`${dir}/run.ckpt`); // waits for the other save's lock, then leaves it
    reader.releaseLock();
    await child.stdout.cancel();
    assert.equal((await child.status).code, 0);
    assert.deepEqual(await names(dir), ["renamed", "run.ckpt"]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

/** `strace` on this machine, or null. */
async function strace(): Promise<string | null> {
  try {
    const r = await new Deno.Command("strace", { args: ["-V"], stdout: "null", stderr: "null" })
      .output();
    return r.success ? "strace" : null;
  } catch {
    return null;
  }
}

Deno.test("saveCheckpoint flushes the temporary file to the disk (fsync) before the rename and the folder after it (seen with strace)", async () => {
  if ((await strace()) === null) {
    console.log("skipped: strace is not installed, so the system calls cannot be watched");
    return;
  }
  const dir = await Deno.makeTempDir();
  try {
    const mod = new URL("../../../mod.ts", import.meta.url).href;
    const code = `import { CpuBackend, Linear, PipelineParallelModel, ReLU, Sequential } from ${
      JSON.stringify(mod)
    };
const be = new CpuBackend();
const net = new Sequential([new Linear(be, 2, 8, { seed: 1 }), new ReLU(be), new Linear(be, 8, 1, { seed: 2 })]);
await using model = await PipelineParallelModel.create({
  model: net, schedule: "1f1b", ranks: 2, microBatches: 2,
  optimizer: { kind: "sgd", lr: 0.1 }, loss: "mse", backend: "cpu", rankGroup: "in-process",
});
await model.saveCheckpoint(${JSON.stringify(`${dir}/run.ckpt`)});`;
    const log = `${dir}/strace.log`;
    const r = await new Deno.Command("strace", {
      args: [
        "-f",
        "-o",
        log,
        "-e",
        "trace=openat,fsync,fdatasync,rename,renameat,renameat2,close,dup,fcntl",
        Deno.execPath(),
        "eval",
        code,
      ],
      stdout: "piped",
      stderr: "piped",
    }).output();
    if (!r.success) {
      const err = new TextDecoder().decode(r.stderr);
      if (/ptrace|Operation not permitted/.test(err)) {
        console.log(`skipped: strace cannot trace here: ${err.trim().split("\n")[0]}`);
        return;
      }
      assert.fail(`the traced save failed: ${err}`);
    }
    // Join calls that strace split across threads ("<unfinished ...>" / "resumed>").
    const pending = new Map<string, string>();
    const calls: string[] = [];
    for (const line of (await Deno.readTextFile(log)).split("\n")) {
      const m = /^(\d+)\s+(.*)$/.exec(line);
      if (m === null) continue;
      const [, pid, rest] = m;
      if (rest.endsWith("<unfinished ...>")) {
        pending.set(pid, rest.slice(0, -"<unfinished ...>".length));
      } else if (rest.startsWith("<...")) {
        calls.push((pending.get(pid) ?? "") + rest.replace(/^<\.\.\. \w+ resumed>/, ""));
        pending.delete(pid);
      } else calls.push(rest);
    }
    // Deno syncs through a duplicate of the file's descriptor (fcntl F_DUPFD / dup).
    const synced = (open: number, end: number): boolean => {
      const fds = new Set([/= (\d+)$/.exec(calls[open])![1]]);
      for (const c of calls.slice(open + 1, end)) {
        const dup = /^(?:fcntl\((\d+), F_DUPFD(?:_CLOEXEC)?, \d+\)|dup\((\d+)\))\s*= (\d+)$/.exec(
          c,
        );
        if (dup !== null && fds.has(dup[1] ?? dup[2])) fds.add(dup[3]);
        const sync = /^f(?:data)?sync\((\d+)\)\s*= 0$/.exec(c);
        if (sync !== null && fds.has(sync[1])) return true;
      }
      return false;
    };
    const tmpOpen = calls.findIndex((c) =>
      /^openat\(.*run\.ckpt\.tmp-[0-9a-f]{8}".*= \d+$/.test(c)
    );
    assert.ok(tmpOpen >= 0, "the temporary file was opened");
    const rename = calls.findIndex((c) => /^rename(at2?)?\(.*run\.ckpt\.tmp-.*run\.ckpt"/.test(c));
    assert.ok(rename > tmpOpen, "the temporary file was renamed over the target");
    assert.ok(synced(tmpOpen, rename), "the temporary file is synced before the rename");
    const dirOpen = calls.findIndex((c, i) =>
      i > rename && c.startsWith(`openat(AT_FDCWD, "${dir}", O_RDONLY|O_CLOEXEC)`)
    );
    assert.ok(dirOpen > rename, "the folder was opened after the rename");
    assert.ok(synced(dirOpen, calls.length), "the folder is synced after the rename");
    assert.ok((await Deno.readFile(`${dir}/run.ckpt`)).length > 8, "the checkpoint is there");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

/** `bytes` re-encoded with `tensor[index] = value` (fresh checksums: only the value is wrong). */
function withValue(bytes: Uint8Array, tensor: string, index: number, value: number): Uint8Array {
  const f = parseSafetensors(bytes);
  const tensors = [...f.tensors].map(([name, e]) => {
    const data = e.data.slice();
    if (name === tensor) data[index] = value;
    return { name, shape: e.shape, data };
  });
  assert.ok(f.tensors.has(tensor), tensor);
  return encodeSafetensors(tensors, { metadata: f.metadata });
}

Deno.test("a checkpoint holding NaN or ±Infinity weights or optimizer state, or a negative exp_avg_sq, is refused by loadCheckpoint (bytes, path, file URL) and create({ resume }) naming the tensor and the index before anything changes; allowNonFinite / resumeAllowNonFinite load non-finite values, never a negative second moment", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await using m = await trained();
    const good = await m.checkpointBytes();
    const first = [...parseSafetensors(good).tensors.keys()][0].slice("model.".length);
    const before = await m.checkpointBytes();
    const cases: [string, number, number, RegExp][] = [
      [`model.${first}`, 3, NaN, /holds NaN at index 3; weights must be finite/],
      [`model.${first}`, 0, -Infinity, /holds -Infinity at index 0; weights must be finite/],
      [
        `optim.${first}.exp_avg`,
        2,
        Infinity,
        /holds Infinity at index 2; optimizer state must be finite/,
      ],
      [`optim.${first}.exp_avg_sq`, 1, NaN, /holds NaN at index 1; optimizer state must be finite/],
      [
        `optim.${first}.exp_avg_sq`,
        5,
        -0.25,
        /holds -0.25 at index 5; exp_avg_sq .* is never negative/,
      ],
    ];
    for (const [tensor, index, value, rule] of cases) {
      const bad = withValue(good, tensor, index, value);
      const path = `${dir}/bad.ckpt`;
      await Deno.writeFile(path, bad);
      const named = new RegExp(`^checkpoint: tensor ${tensor.replace(/\./g, "\\.")} `);
      const check = (e: Error) => {
        assert.ok(e instanceof RangeError, `${tensor}: ${e}`);
        assert.match(e.message, named);
        assert.match(e.message, rule);
        return true;
      };
      for (const source of [bad, path, pathToFileURL(path)]) {
        await assert.rejects(() => m.loadCheckpoint(source), check);
      }
      await assert.rejects(
        () => cpuModel({ schedule: "1f1b", microBatches: 2, optimizer: OPTIMIZER, resume: path }),
        check,
      );
      assert.deepEqual(await m.checkpointBytes(), before, `${tensor}: the model is unchanged`);
      const negative = value < 0 && Number.isFinite(value);
      if (negative) {
        await assert.rejects(() => m.loadCheckpoint(bad, { allowNonFinite: true }), check);
        await assert.rejects(
          () =>
            cpuModel({
              schedule: "1f1b",
              microBatches: 2,
              optimizer: OPTIMIZER,
              resume: bad,
              resumeAllowNonFinite: true,
            }),
          check,
        );
        continue;
      }
      // Allowed: every rank loads it as written.
      await using r = await cpuModel({
        schedule: "1f1b",
        microBatches: 2,
        optimizer: OPTIMIZER,
        resume: bad,
        resumeAllowNonFinite: true,
      });
      const back = parseTrainingCheckpoint(await r.checkpointBytes(), { allowNonFinite: true });
      const slot = tensor.split(".").at(-1);
      const data = tensor.startsWith("model.")
        ? back.weights.get(first)!.data
        : back.optimizerState.slots.get(first)![slot === "exp_avg" ? 0 : 1];
      assert.ok(Object.is(data[index], value), `${tensor}[${index}] is ${data[index]}`);
      await m.loadCheckpoint(bad, { allowNonFinite: true });
      await m.loadCheckpoint(good);
    }
    await assert.rejects(
      () =>
        cpuModel({
          schedule: "1f1b",
          microBatches: 2,
          optimizer: OPTIMIZER,
          resume: good,
          resumeAllowNonFinite: 1 as unknown as boolean,
        }),
      /resumeAllowNonFinite must be a boolean, got 1/,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a flipped bit in a checkpoint file is refused by loadCheckpoint and create({ resume }) naming the tensor it falls in; the model is unchanged", async () => {
  await using m = await trained();
  const good = await m.checkpointBytes();
  const n = Number(new DataView(good.buffer).getBigUint64(0, true));
  const header = JSON.parse(new TextDecoder().decode(good.subarray(8, 8 + n)));
  const [name, entry] = Object.entries(header).filter(([k]) => k !== "__metadata__")[2] as [
    string,
    { data_offsets: [number, number] },
  ];
  const bad = good.slice();
  bad[8 + n + entry.data_offsets[0] + 1] ^= 0x10; // a mantissa bit: the value stays finite
  const rule = new RegExp(`tensor ${name.replace(/\./g, "\\.")} fails its checksum`);
  await assert.rejects(() => m.loadCheckpoint(bad), rule);
  await assert.rejects(
    () => cpuModel({ schedule: "1f1b", microBatches: 2, optimizer: OPTIMIZER, resume: bad }),
    rule,
  );
  assert.deepEqual(await m.checkpointBytes(), good, "unchanged");
});

Deno.test("saveCheckpoint refuses a missing folder, a folder as the path and a missing permission with a TypeError naming the path, the rule and the flag to add; nothing is written", async () => {
  const m = await trained();
  const dir = await Deno.makeTempDir();
  try {
    await assert.rejects(
      () => m.saveCheckpoint(`${dir}/none/run.ckpt`),
      (e: Error) =>
        e instanceof TypeError &&
        e.message ===
          `saveCheckpoint: path ${dir}/none/run.ckpt: the folder ${dir}/none does not exist (create it first)`,
    );
    await assert.rejects(() => m.saveCheckpoint(dir), /saveCheckpoint: path .*: it is a directory/);
    assert.deepEqual(await names(dir), []);
  } finally {
    await m.dispose();
  }
  // A script allowed to read but not to write: the error names --allow-write for the folder
  // (the atomic write's temporary file is beside the target), not a temporary file's name.
  const scriptDir = await Deno.makeTempDir();
  try {
    const mod = new URL("../../../mod.ts", import.meta.url).href;
    const code = `import { CpuBackend, Linear, PipelineParallelModel, Sequential } from ${
      JSON.stringify(mod)
    };
const be = new CpuBackend();
await using model = await PipelineParallelModel.create({
  model: new Sequential([new Linear(be, 2, 2, { seed: 1 }), new Linear(be, 2, 1, { seed: 2 })]),
  schedule: "1f1b", ranks: 2, microBatches: 2,
  optimizer: { kind: "sgd", lr: 0.1 }, loss: "mse", backend: "cpu", rankGroup: "in-process",
});
try {
  await model.saveCheckpoint(${JSON.stringify(`${dir}/run.ckpt`)});
} catch (e) {
  console.log(e.constructor.name + ": " + e.message);
}`;
    const script = `${scriptDir}/save.ts`;
    await Deno.writeTextFile(script, code);
    const r = await new Deno.Command(Deno.execPath(), {
      args: ["run", "--no-prompt", "--allow-read", script],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const out = new TextDecoder().decode(r.stdout).trim();
    assert.equal(
      out,
      `TypeError: saveCheckpoint: path ${dir}/run.ckpt needs write access to ${dir} (run with ` +
        `--allow-write=${dir}; the file is written beside it, then renamed over it)`,
      new TextDecoder().decode(r.stderr),
    );
    assert.deepEqual(await names(dir), []);
  } finally {
    await Deno.remove(dir, { recursive: true });
    await Deno.remove(scriptDir, { recursive: true });
  }
});
