/**
 * The named-uniform helper of the WebGPU backend (`webgpu/_params.ts`):
 * reading a WGSL `struct Params`, placing fields by the uniform layout
 * rules, writing values by name, and refusing a host field list or op-code
 * table that disagrees with the WGSL. Needs no adapter.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  checkOpCodes,
  checkParamsStruct,
  layoutParams,
  opConstName,
  parseParamsStruct,
  writeParams,
} from "../../src/tensor/webgpu/_params.ts";
import { KERNELS } from "../../src/tensor/webgpu/_kernels.ts";

const SRC = `
struct Params {
  n: u32, // a count
  rank: u32,
  scale: f32,
  shape: array<vec4<u32>, 2>,
  bias: i32,
}
`;

Deno.test("params: the WGSL struct is read in order, comments and nested commas included", () => {
  assert.deepEqual(parseParamsStruct(SRC), [
    ["n", "u32"],
    ["rank", "u32"],
    ["scale", "f32"],
    ["shape", "array<vec4<u32>, 2>"],
    ["bias", "i32"],
  ]);
});

Deno.test("params: offsets follow the uniform layout (vec4 arrays 16-byte aligned)", () => {
  const layout = layoutParams({
    n: "u32",
    rank: "u32",
    scale: "f32",
    shape: "array<vec4<u32>, 2>",
    bias: "i32",
  });
  assert.deepEqual(layout.slots.map((s) => [s.name, s.word, s.count]), [
    ["n", 0, 1],
    ["rank", 1, 1],
    ["scale", 2, 1],
    ["shape", 4, 8], // word 3 is padding: the array starts at byte 16
    ["bias", 12, 1],
  ]);
  assert.equal(layout.bytes, 64, "size rounded up to the 16-byte alignment");
});

Deno.test("params: values are written by name at their offsets; bad values are refused", () => {
  const fields = { n: "u32", scale: "f32", shape: "array<vec4<u32>, 1>", bias: "i32" } as const;
  const layout = layoutParams(fields);
  const buffer = new ArrayBuffer(256);
  const u32 = new Uint32Array(buffer), i32 = new Int32Array(buffer), f32 = new Float32Array(buffer);
  writeParams("t", layout, { scale: 0.5, n: 7, shape: [1, 2, 3, 4], bias: -3 }, u32, i32, f32, 8);
  assert.equal(u32[8], 7);
  assert.equal(f32[9], 0.5);
  assert.deepEqual([...u32.subarray(12, 16)], [1, 2, 3, 4]);
  assert.equal(i32[16], -3);
  assert.throws(
    () =>
      writeParams("t", layout, { n: -1, scale: 0, shape: [0, 0, 0, 0], bias: 0 }, u32, i32, f32, 0),
    (e) => e instanceof RangeError && /kernel t: param n must be a u32, got -1/.test(e.message),
  );
  assert.throws(
    () => writeParams("t", layout, { n: 1, scale: 0, shape: [0, 0], bias: 0 }, u32, i32, f32, 0),
    (e) => e instanceof TypeError && /param shape must be an array of 4 numbers/.test(e.message),
  );
  assert.throws(
    () => writeParams("t", layout, { n: 1, shape: [0, 0, 0, 0], bias: 0 }, u32, i32, f32, 0),
    (e) => e instanceof TypeError && /param scale must be a number/.test(e.message),
  );
});

Deno.test("params: a host field list that differs from the WGSL struct names both", () => {
  const fields = {
    n: "u32",
    rank: "u32",
    scale: "f32",
    shape: "array<vec4<u32>, 2>",
    bias: "i32",
  } as const;
  checkParamsStruct("ok", SRC, fields);
  for (
    const bad of [
      { ...fields, extra: "u32" },
      { rank: "u32", n: "u32", scale: "f32", shape: "array<vec4<u32>, 2>", bias: "i32" },
      { ...fields, scale: "u32" },
    ] as const
  ) {
    assert.throws(
      () => checkParamsStruct("k", SRC, bad),
      (e) =>
        e instanceof Error &&
        /kernel k: host Params \{.*\} do not match the WGSL struct Params \{ n: u32; rank: u32/
          .test(e.message),
    );
  }
});

Deno.test("op codes: WGSL constants must equal the host table by name", () => {
  assert.equal(opConstName("OP", "logSumExp"), "OP_LOG_SUM_EXP");
  const src = "const OP: u32 = 0u;\nconst OP_ADD: u32 = 0u;\nconst OP_SUB: u32 = 1u;\n";
  checkOpCodes("b", src, "OP", { add: 0, sub: 1 });
  const tables: Record<string, number>[] = [{ add: 0, sub: 2 }, { add: 0 }, {
    add: 0,
    sub: 1,
    mul: 2,
  }];
  for (const table of tables) {
    assert.throws(
      () => checkOpCodes("b", src, "OP", table),
      (e) => e instanceof Error && /kernel b: op codes differ/.test(e.message),
    );
  }
});

Deno.test("kernels: every kernel's host Params match its WGSL (checked at load)", () => {
  // Loading _kernels.ts ran every check; this proves each kernel has a layout.
  for (const [name, k] of Object.entries(KERNELS)) {
    assert.ok(k.layout.slots.length > 0, `${name} has params`);
    assert.ok(k.layout.bytes <= 256, `${name} fits one uniform slot`);
  }
});
