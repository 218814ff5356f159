/**
 * What reading a checked file costs: checking the CRC-32 checksums of a
 * ~100 MB safetensors file, and a crafted header of 1.5M tensors (100 MB)
 * refused before its JSON is parsed (time and memory).
 *
 *   deno run -A bench/file_integrity.ts [--mb 100] [--runs 7]
 *
 * @module
 */

import { benchArgs, intFlag, positiveFlag } from "./_args.ts";
import { encodeSafetensors, parseSafetensors } from "../format.ts";
import { decodeSafetensors } from "../src/nn/safetensors.ts";
import { crc32 } from "../src/nn/_crc32.ts";

const values = benchArgs("bench/file_integrity.ts", {
  mb: { type: "string", default: "100" },
  runs: { type: "string", default: "7" },
});
const mb = positiveFlag("bench/file_integrity.ts", "mb", values.mb),
  runs = intFlag("bench/file_integrity.ts", "runs", values.runs);

function median(f: () => void): number {
  const ts: number[] = [];
  for (let r = 0; r < runs; r++) {
    const t0 = performance.now();
    f();
    ts.push(performance.now() - t0);
  }
  return ts.sort((a, b) => a - b)[ts.length >> 1];
}

// ~mb MB of f32 values in tensors of 1M values.
const count = Math.max(1, Math.round((mb * 1e6) / 4e6));
const tensors = Array.from({ length: count }, (_, i) => {
  const data = new Float32Array(1_000_000);
  for (let k = 0; k < data.length; k++) data[k] = Math.sin(i * 1e6 + k);
  return { name: `layer${i}.weight`, shape: [1000, 1000], data };
});
const file = encodeSafetensors(tensors);
const size = file.length / 1e6;
// The checks alone (decoding allocates the tensors: its time swings with the garbage collector).
const decoded = decodeSafetensors(file);
const verify = median(() => decoded.verify());
const whole = median(() => crc32(file));
const parse = median(() => parseSafetensors(file));
console.log(`file of ${size.toFixed(1)} MB, ${count} tensors, median of ${runs} runs`);
console.log(
  `checking its checksums: ${verify.toFixed(1)} ms (${
    (size / (verify / 1000)).toFixed(0)
  } MB/s); ` +
    `CRC-32 of the whole file: ${whole.toFixed(1)} ms (${(size / (whole / 1000)).toFixed(0)} MB/s)`,
);
console.log(`parseSafetensors, checks included: ${parse.toFixed(1)} ms`);

// A crafted 100 MB header: 1.5M zero-size tensors.
const parts: string[] = [];
for (let i = 0; i < 1_500_000; i++) {
  parts.push(`"model.p${i}":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}`);
}
const json = new TextEncoder().encode(`{${parts.join(",")}}`);
parts.length = 0;
const crafted = new Uint8Array(8 + json.length);
new DataView(crafted.buffer).setBigUint64(0, BigInt(json.length), true);
crafted.set(json, 8);
const rss0 = Deno.memoryUsage().rss;
const t0 = performance.now();
let message = "accepted";
try {
  parseSafetensors(crafted);
} catch (e) {
  message = (e as Error).message;
}
const ms = performance.now() - t0;
const grew = (Deno.memoryUsage().rss - rss0) / 1e6;
console.log(
  `crafted header of ${(crafted.length / 1e6).toFixed(1)} MB, 1.5M tensors: refused in ` +
    `${ms.toFixed(1)} ms, RSS grew ${grew.toFixed(1)} MB: ${message.slice(0, 80)}…`,
);
