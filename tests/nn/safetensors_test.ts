import assert from "node:assert/strict";
import * as zlib from "node:zlib";
import type { Backend, Tensor } from "../../src/tensor/mod.ts";
import { CpuBackend } from "../../src/tensor/cpu/backend.ts";
import { createTinyGPT } from "../../src/nn/gpt.ts";
import type { Layer } from "../../src/nn/layer.ts";
import { Linear } from "../../src/nn/linear.ts";
import { ReLU } from "../../src/nn/relu.ts";
import { Sequential } from "../../src/nn/sequential.ts";
import { loadSafetensors, parseSafetensors, saveSafetensors } from "../../src/nn/safetensors.ts";
import { label, testBackends } from "../tensor/_backends.ts";
import { ids, uniform } from "./_layer_checks.ts";

const backends = await testBackends();

const mlp = (be: Backend, seed: number) =>
  new Sequential([
    new Linear(be, 3, 4, { seed }),
    new ReLU(be),
    new Linear(be, 4, 2, { seed: seed + 1 }),
  ]);

async function snapshot(model: Layer): Promise<Float32Array[]> {
  return await Promise.all(model.parameters().map((p) => p.value.toArray()));
}

/** Splits a file into its header object and data section. */
function split(bytes: Uint8Array): { header: Record<string, unknown>; body: Uint8Array } {
  const n = Number(new DataView(bytes.buffer, bytes.byteOffset).getBigUint64(0, true));
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + n)));
  return { header, body: bytes.slice(8 + n) };
}

/** Builds a file from a header object (or raw header text) and a data section. */
function build(header: Record<string, unknown> | string, body: Uint8Array): Uint8Array {
  const json = new TextEncoder().encode(
    typeof header === "string" ? header : JSON.stringify(header),
  );
  const out = new Uint8Array(8 + json.length + body.length);
  new DataView(out.buffer).setBigUint64(0, BigInt(json.length), true);
  out.set(json, 8);
  out.set(body, 8 + json.length);
  return out;
}

Deno.test("safetensors: the layout is the documented one (LE u64 length, JSON header, LE f32 data, data_crc32 and header_crc32 as zlib's CRC-32)", async () => {
  const be = new CpuBackend();
  const m = mlp(be, 1);
  const bytes = await saveSafetensors(m, { metadata: { format: "pt", by: "conveyor" } });
  const { header, body } = split(bytes);
  assert.equal((bytes.length - body.length - 8) % 8, 0, "header padded to 8 bytes");
  const { data_crc32, header_crc32, ...meta } = header.__metadata__ as Record<string, string>;
  assert.deepEqual(meta, { format: "pt", by: "conveyor" });
  const params = m.parameters();
  // The checksums, against zlib's CRC-32 (an independent implementation).
  let at = 0;
  const sums = params.map((p) => {
    const n = p.value.size * 4;
    at += n;
    return zlib.crc32(body.subarray(at - n, at)).toString(16).padStart(8, "0");
  });
  assert.equal(data_crc32, sums.join(" "));
  const canonical = JSON.stringify([
    [["by", "conveyor"], ["data_crc32", data_crc32], ["format", "pt"]],
    params.reduce<[string, string, number[], number, number][]>((list, p) => {
      const begin = list.length === 0 ? 0 : list[list.length - 1][4];
      return [...list, [p.name, "F32", [...p.value.shape], begin, begin + p.value.size * 4]];
    }, []),
  ]);
  assert.equal(
    header_crc32,
    zlib.crc32(new TextEncoder().encode(canonical)).toString(16).padStart(8, "0"),
  );
  assert.deepEqual(
    Object.keys(header).filter((k) => k !== "__metadata__"),
    params.map((p) => p.name),
  );
  let offset = 0;
  for (const p of params) {
    const e = header[p.name] as { dtype: string; shape: number[]; data_offsets: number[] };
    assert.equal(e.dtype, "F32");
    assert.deepEqual(e.shape, [...p.value.shape]);
    assert.deepEqual(e.data_offsets, [offset, offset + p.value.size * 4]);
    const dv = new DataView(body.buffer, body.byteOffset + offset);
    const want = await p.value.toArray();
    for (let i = 0; i < want.length; i++) assert.equal(dv.getFloat32(4 * i, true), want[i]);
    offset += p.value.size * 4;
  }
  assert.equal(offset, body.length);
  m.dispose();
});

Deno.test("safetensors: a file from another writer (other key order, unpadded header) loads", async () => {
  const be = new CpuBackend();
  const lin = new Linear(be, 2, 2, { seed: 3 });
  // bias first in the data, weight second, keys in yet another order.
  const body = new Uint8Array(24);
  const dv = new DataView(body.buffer);
  [10, 20].forEach((v, i) => dv.setFloat32(4 * i, v, true));
  [1, 2, 3, 4].forEach((v, i) => dv.setFloat32(8 + 4 * i, v, true));
  const file = build(
    '{"weight":{"dtype":"F32","shape":[2,2],"data_offsets":[8,24]},"__metadata__":{},"bias":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}',
    body,
  );
  loadSafetensors(lin, file);
  assert.deepEqual([...await lin.weight.toArray()], [1, 2, 3, 4]);
  assert.deepEqual([...await lin.bias!.toArray()], [10, 20]);
  const parsed = parseSafetensors(file);
  assert.deepEqual([...parsed.tensors.keys()], ["weight", "bias"]);
  assert.deepEqual(parsed.metadata, {});
  lin.dispose();
});

for (const be of backends) {
  Deno.test(`safetensors: save → load → identical predictions (tiny GPT, ${label(be)})`, async () => {
    const cfg = { vocabSize: 11, seqLen: 6, dim: 8, heads: 2, layers: 1 };
    const a = createTinyGPT({ ...cfg, seed: 1 }, be), b = createTinyGPT({ ...cfg, seed: 2 }, be);
    const x = ids(be, [2, 6], 11, 5);
    const ya = await a.forward(x, { save: false }).toArray();
    assert.notDeepEqual(await b.forward(x, { save: false }).toArray(), ya, "different before");
    loadSafetensors(b, await saveSafetensors(a));
    assert.deepEqual(await b.forward(x, { save: false }).toArray(), ya);
    assert.deepEqual(await snapshot(b), await snapshot(a));
    x.dispose();
    a.dispose();
    b.dispose();
  });
}

Deno.test("safetensors: a stage loads its slice of a whole-model file with allowExtra", async () => {
  const be = new CpuBackend();
  const a = mlp(be, 1), b = mlp(be, 7);
  const bytes = await saveSafetensors(a);
  const stage = b.slice(2);
  assert.throws(() => loadSafetensors(stage, bytes), /tensor 0\.weight, which the model lacks/);
  loadSafetensors(stage, bytes, { allowExtra: true });
  assert.deepEqual(
    await (stage.layers[0] as Linear).weight.toArray(),
    await (a.layers[2] as Linear).weight.toArray(),
  );
  a.dispose();
  b.dispose();
});

// ---- malformed files: each refused with a clear error, the model left unchanged ----

async function refused(
  name: string,
  corrupt: (good: Uint8Array) => Uint8Array,
  pattern: RegExp,
): Promise<void> {
  const be = new CpuBackend();
  const src = mlp(be, 1), target = mlp(be, 9);
  const good = await saveSafetensors(src);
  const before = await snapshot(target);
  const x = uniform(be, [2, 3], 4);
  const yBefore = await target.forward(x, { save: false }).toArray();
  const bad = corrupt(good);
  assert.throws(() => loadSafetensors(target, bad), (e: Error) => {
    assert.ok(e instanceof RangeError || e instanceof TypeError, `${name}: ${e}`);
    assert.match(e.message, pattern, name);
    return true;
  });
  assert.deepEqual(await snapshot(target), before, `${name}: model unchanged`);
  assert.deepEqual(await target.forward(x, { save: false }).toArray(), yBefore);
  x.dispose();
  src.dispose();
  target.dispose();
}

// deno-lint-ignore no-explicit-any -- tests poke at arbitrary header fields
function editHeader(good: Uint8Array, f: (h: Record<string, any>) => void): Uint8Array {
  const { header, body } = split(good);
  f(header);
  return build(header, body);
}

Deno.test("safetensors refuses: a missing tensor", async () => {
  await refused("missing", (g) =>
    editHeader(g, (h) => {
      // Drop the last tensor and its bytes so the rest of the file stays consistent.
      delete h["2.bias"];
    }).slice(0, -8), /no tensor 2\.bias/);
});

Deno.test("safetensors refuses: a wrong shape", async () => {
  await refused(
    "shape",
    (g) => editHeader(g, (h) => (h["0.weight"].shape = [3, 4])),
    /0\.weight has shape \[3, 4\], the model needs \[4, 3\]/,
  );
});

Deno.test("safetensors refuses: a wrong dtype", async () => {
  await refused(
    "dtype",
    (g) => editHeader(g, (h) => (h["2.weight"].dtype = "F16")),
    /2\.weight has dtype F16/,
  );
});

Deno.test("safetensors refuses: a header that is not JSON", async () => {
  await refused("json", (g) => {
    const { body } = split(g);
    return build('{"0.weight": {"dtype": "F32", ', body);
  }, /header is not valid UTF-8 JSON/);
});

Deno.test("safetensors refuses: a header that is not an object", async () => {
  await refused("array", (g) => build("[1, 2]", split(g).body), /header must be a JSON object/);
});

Deno.test("safetensors refuses: a header length beyond the file", async () => {
  await refused("length", (g) => {
    const c = g.slice();
    new DataView(c.buffer).setBigUint64(0, BigInt(c.length), true);
    return c;
  }, /header length \d+ runs beyond the file/);
});

Deno.test("safetensors refuses: a file shorter than the length field", async () => {
  await refused("tiny", (g) => g.slice(0, 5), /5 bytes is shorter than the 8-byte header length/);
});

Deno.test("safetensors refuses: data_offsets out of range", async () => {
  await refused(
    "range",
    (g) => editHeader(g, (h) => (h["2.bias"].data_offsets = [h["2.bias"].data_offsets[0], 10_000])),
    /out of range: tensor 2\.bias ends at byte 10000/,
  );
});

Deno.test("safetensors refuses: overlapping data_offsets", async () => {
  await refused("overlap", (g) =>
    editHeader(g, (h) => {
      h["0.bias"].data_offsets = [0, 16]; // lies inside 0.weight's bytes
    }), /overlaps the previous tensor/);
});

Deno.test("safetensors refuses: data_offsets that disagree with the shape", async () => {
  await refused(
    "size",
    (g) => editHeader(g, (h) => (h["0.bias"].shape = [3])),
    /0\.bias of shape \[3\] needs 12 bytes/,
  );
});

Deno.test("safetensors refuses: a truncated body", async () => {
  await refused("truncated", (g) => g.slice(0, g.length - 3), /truncated body/);
});

Deno.test("safetensors refuses: trailing bytes after the last tensor", async () => {
  await refused("trailing", (g) => {
    const c = new Uint8Array(g.length + 4);
    c.set(g);
    return c;
  }, /4 bytes after the last tensor/);
});

Deno.test("safetensors refuses: a tensor the model lacks (without allowExtra)", async () => {
  await refused("extra", (g) =>
    editHeader(g, (h) => {
      h["3.weight"] = {
        dtype: "F32",
        shape: [0],
        data_offsets: [h["2.bias"].data_offsets[1], h["2.bias"].data_offsets[1]],
      };
    }), /tensor 3\.weight, which the model lacks/);
});

Deno.test("safetensors refuses: malformed entries (shape, offsets, metadata)", async () => {
  await refused(
    "neg shape",
    (g) => editHeader(g, (h) => (h["0.bias"].shape = [-4])),
    /shape \[-4\], not a list/,
  );
  await refused(
    "offsets",
    (g) => editHeader(g, (h) => (h["0.bias"].data_offsets = [1])),
    /data_offsets \[1\], not \[begin, end\]/,
  );
  await refused(
    "reversed",
    (g) => editHeader(g, (h) => (h["0.bias"].data_offsets = [64, 48])),
    /end < begin/,
  );
  await refused(
    "meta",
    (g) => editHeader(g, (h) => (h.__metadata__ = { n: 1 })),
    /__metadata__\.n must be a string/,
  );
});

Deno.test("parseSafetensors: returns Float32Arrays and refuses other dtypes", async () => {
  const be = new CpuBackend();
  const lin = new Linear(be, 2, 3, { seed: 1 });
  const good = await saveSafetensors(lin, { metadata: { a: "b" } });
  const f = parseSafetensors(good);
  assert.deepEqual(f.metadata, { a: "b" });
  assert.deepEqual(f.tensors.get("weight")!.data, await lin.weight.toArray());
  assert.deepEqual(f.tensors.get("weight")!.shape, [3, 2]);
  assert.throws(
    () => parseSafetensors(editHeader(good, (h) => (h.bias.dtype = "BF16"))),
    /bias has dtype BF16; only F32/,
  );
  lin.dispose();
});

Deno.test("saveSafetensors: duplicate or reserved names are refused", async () => {
  const be = new CpuBackend();
  const t: Tensor = be.zeros([1]);
  const p = { name: "x", value: t, grad: t };
  await assert.rejects(() => saveSafetensors([p, p]), /"x" appears twice/);
  await assert.rejects(() => saveSafetensors([{ ...p, name: "__metadata__" }]), /reserved/);
});

Deno.test("loadSafetensors refuses a file holding NaN or Infinity, naming the tensor and index; allowNonFinite loads it", async () => {
  const { CpuBackend } = await import("../../src/tensor/cpu/backend.ts");
  const { Linear } = await import("../../src/nn/linear.ts");
  const { loadSafetensors, saveSafetensors } = await import("../../src/nn/safetensors.ts");
  const be = new CpuBackend();
  const src = new Linear(be, 3, 2, { seed: 1 });
  const dst = new Linear(be, 3, 2, { seed: 2 });
  const w = await src.parameters()[0].value.toArray();
  w[4] = NaN;
  const bad = be.fromData(w, src.parameters()[0].value.shape);
  const file = await saveSafetensors([{ ...src.parameters()[0], value: bad }, src.parameters()[1]]);
  const before = await dst.parameters()[0].value.toArray();
  assert.throws(
    () => loadSafetensors(dst, file),
    /tensor weight holds NaN at index 4; weights must be finite \(pass allowNonFinite/,
  );
  assert.deepEqual(await dst.parameters()[0].value.toArray(), before, "unchanged");
  loadSafetensors(dst, file, { allowNonFinite: true });
  assert.ok(Number.isNaN((await dst.parameters()[0].value.toArray())[4]));
  for (const t of [bad]) t.dispose();
  src.dispose();
  dst.dispose();
});

/** The tensor of `file` whose bytes hold data-section byte `at`. */
function tensorAt(file: Uint8Array, at: number): string {
  const { header } = split(file);
  for (const [name, e] of Object.entries(header)) {
    if (name === "__metadata__") continue;
    const [b, end] = (e as { data_offsets: number[] }).data_offsets;
    if (at >= b && at < end) return name;
  }
  throw new Error(`no tensor holds byte ${at}`);
}

Deno.test("safetensors checksums: a flipped bit anywhere in the data section is refused naming the tensor it falls in (300 random flips), by parseSafetensors and loadSafetensors, and the model stays unchanged", async () => {
  const be = new CpuBackend();
  const src = mlp(be, 1), target = mlp(be, 9);
  const good = await saveSafetensors(src);
  const before = await snapshot(target);
  const dataStart = good.length - split(good).body.length;
  const rng = (() => {
    let x = 12345;
    return () => (x = (x * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  })();
  for (let k = 0; k < 300; k++) {
    const at = Math.floor(rng() * (good.length - dataStart));
    const bad = good.slice();
    bad[dataStart + at] ^= 1 << Math.floor(rng() * 8);
    const name = tensorAt(good, at).replace(/\./g, "\\.");
    const rule = new RegExp(`tensor ${name} fails its checksum`);
    assert.throws(() => parseSafetensors(bad), rule, `flip at data byte ${at}`);
    // A flip may make a value non-finite: then that is named first (allowNonFinite skips it).
    assert.throws(() => loadSafetensors(target, bad, { allowNonFinite: true }), rule);
  }
  assert.deepEqual(await snapshot(target), before, "model unchanged");
  src.dispose();
  target.dispose();
});

Deno.test("safetensors checksums: an edit of the header that every other rule accepts (a metadata value, a shape of the same size) is refused as a header that fails its checksum", async () => {
  const be = new CpuBackend();
  const lin = new Linear(be, 2, 3, { seed: 1 });
  const good = await saveSafetensors(lin, { metadata: { step: "2" } });
  const text = new TextDecoder().decode(good);
  const patch = (from: string, to: string): Uint8Array => {
    assert.equal(from.length, to.length);
    const at = text.indexOf(from);
    assert.ok(at > 0, from);
    const out = good.slice();
    out.set(new TextEncoder().encode(to), at);
    return out;
  };
  assert.throws(
    () => parseSafetensors(patch('"step":"2"', '"step":"9"')),
    /safetensors: the header fails its checksum \(header_crc32 "[0-9a-f]{8}", the header gives [0-9a-f]{8}\)/,
  );
  assert.throws(
    () => parseSafetensors(patch('"shape":[3,2]', '"shape":[2,3]')),
    /the header fails its checksum/,
  );
  lin.dispose();
});

Deno.test("safetensors checksums: a file without them (another writer's, or from before checksums) is read; one of the two alone or a reserved key in the caller's metadata is refused", async () => {
  const be = new CpuBackend();
  const lin = new Linear(be, 2, 2, { seed: 3 });
  const good = await saveSafetensors(lin, { metadata: { a: "b" } });
  // The same file as written before checksums existed.
  const old = editHeader(good, (h) => {
    delete h.__metadata__.data_crc32;
    delete h.__metadata__.header_crc32;
  });
  const parsed = parseSafetensors(old);
  assert.deepEqual(parsed.metadata, { a: "b" });
  assert.deepEqual(parsed.tensors.get("weight")!.data, await lin.weight.toArray());
  const flipped = old.slice();
  flipped[flipped.length - 1] ^= 4;
  parseSafetensors(flipped); // unchecked: nothing to check it against
  assert.throws(
    () => parseSafetensors(editHeader(good, (h) => delete h.__metadata__.header_crc32)),
    /__metadata__ has data_crc32 but not header_crc32/,
  );
  assert.throws(
    () => parseSafetensors(editHeader(good, (h) => delete h.__metadata__.data_crc32)),
    /__metadata__ has header_crc32 but not data_crc32/,
  );
  assert.deepEqual(parseSafetensors(good).metadata, { a: "b" }, "the checksums are not shown");
  for (const key of ["data_crc32", "header_crc32"]) {
    await assert.rejects(
      () => saveSafetensors(lin, { metadata: { [key]: "0" } }),
      new RegExp(`metadata key ${key} is reserved`),
    );
  }
  lin.dispose();
});

/** A header-only file: `{"t0": …, "t1": …}` of `count` zero-size tensors. */
function crafted(
  count: number,
  entry = (i: number) => `"t${i}":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}`,
): Uint8Array {
  const parts: string[] = [];
  for (let i = 0; i < count; i++) parts.push(entry(i));
  return build(`{${parts.join(",")}}`, new Uint8Array(0));
}

Deno.test("safetensors limits: a header of more than 100000 tensors, 2000000 values, a 65-dimension shape or deeper nesting is refused before its JSON is parsed, quickly", () => {
  const cases: [string, Uint8Array, RegExp][] = [
    [
      "100001 tensors",
      crafted(100_001),
      /the header lists more than 100000 tensors \(at the entry of "t100000"\); refused before parsing it/,
    ],
    [
      "2000001 values",
      crafted(
        40_000,
        (i) => `"t${i}":{"dtype":"F32","shape":[${"1,".repeat(48)}0],"data_offsets":[0,0]}`,
      ),
      /holds more than 2000000 values/,
    ],
    [
      "65 dimensions",
      crafted(1, () => `"t":{"dtype":"F32","shape":[${"1,".repeat(64)}0],"data_offsets":[0,0]}`),
      /an array of more than 64 values \(a shape has at most 64 dimensions\) \(at the entry of "t"\)/,
    ],
    [
      "nesting",
      crafted(1, () => `"t":{"dtype":"F32","shape":[[0]],"data_offsets":[0,0]}`),
      /nests deeper than 3 levels/,
    ],
  ];
  for (const [label, file, rule] of cases) {
    const t0 = performance.now();
    assert.throws(() => parseSafetensors(file), (e: Error) => {
      assert.ok(e instanceof RangeError, `${label}: ${e}`);
      assert.match(e.message, rule, label);
      return true;
    });
    const ms = performance.now() - t0;
    // Liveness only (a loaded machine may be slow): the message says it was refused unread.
    assert.ok(ms < 30_000, `${label}: refused in ${ms.toFixed(0)} ms`);
  }
  // At the limits a header is read: 100000 tensors, 64 dimensions.
  assert.equal(parseSafetensors(crafted(100_000)).tensors.size, 100_000);
  const rank64 = parseSafetensors(
    crafted(1, () => `"t":{"dtype":"F32","shape":[${"1,".repeat(63)}0],"data_offsets":[0,0]}`),
  );
  assert.equal(rank64.tensors.get("t")!.shape.length, 64);
  // Strings may hold any bytes that look like structure.
  const tricky = crafted(1, () => `"t,{[\\"]}":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}`);
  assert.deepEqual([...parseSafetensors(tricky).tensors.keys()], ['t,{["]}']);
});

Deno.test("safetensors refuses: a path or an ArrayBuffer in place of the bytes, saying what to pass", async () => {
  const be = new CpuBackend();
  const lin = new Linear(be, 3, 2, { seed: 1 });
  const w = lin.parameters()[0].value;
  try {
    const before = await w.toArray();
    assert.throws(
      () => loadSafetensors(lin, "w.safetensors" as unknown as Uint8Array),
      (e: unknown) =>
        e instanceof TypeError && /got "w\.safetensors"/.test(e.message) &&
        /Deno\.readFile\("w\.safetensors"\)/.test(e.message),
    );
    assert.throws(
      () => parseSafetensors(new URL("file:///tmp/w.safetensors") as unknown as Uint8Array),
      /got a URL: a path; read the file first/,
    );
    assert.throws(
      () => loadSafetensors(lin, new ArrayBuffer(16) as unknown as Uint8Array),
      /got an ArrayBuffer: wrap it, new Uint8Array\(buffer\)/,
    );
    assert.deepEqual(await w.toArray(), before, "the layer is unchanged");
  } finally {
    lin.dispose();
  }
});
