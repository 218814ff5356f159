/**
 * Save and load weights in the safetensors format, so that other tools
 * (Hugging Face `safetensors`, PyTorch) can read them.
 *
 * Layout: 8 bytes little-endian u64 `N`, then `N` bytes of UTF-8 JSON
 * `{"name": {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]},
 * "__metadata__": {"key": "value"}}` (padded with spaces to a multiple of 8),
 * then the data section: little-endian f32 values, offsets relative to its
 * start. As the reference implementation requires, the tensors' byte ranges
 * tile the data section exactly: no gaps, no overlaps, nothing after the end.
 *
 * **Checksums.** Every file Conveyor writes carries, in `__metadata__`,
 * `data_crc32` (the CRC-32, as zlib computes it, of each tensor's bytes: 8
 * hex digits per tensor, separated by spaces, in the data section's order)
 * and `header_crc32` (the CRC-32 of the other metadata and every tensor's
 * name, dtype, shape and offsets). Reading checks them after every other
 * rule, so a flipped bit is refused naming the tensor it falls in (or the
 * header). A file without them (another writer's, or Conveyor's from before
 * checksums) is read unchecked; a file with them wrong is refused. Both keys
 * are reserved: a caller's metadata may not use them, and the parsed
 * `metadata` leaves them out.
 *
 * **Limits.** Before its JSON is parsed, a header is refused (RangeError)
 * when it is over 100 000 000 bytes (as the reference implementation), lists
 * more than 100 000 tensors, holds more than 2 000 000 values or a shape of
 * more than 64 dimensions: a crafted header costs neither the memory nor
 * the time of building millions of objects.
 *
 * @module
 */

import { checkOptionsObject } from "../text/nearest.ts";
import type { Tensor } from "../tensor/mod.ts";
import * as ops from "../tensor/ops.ts";
import { fmtShape, sameShape } from "./_util.ts";
import type { Layer, Parameter } from "./layer.ts";
import { describeValue } from "../text/describe.ts";
import { checkHeaderLimits } from "./_header_limits.ts";
import {
  type ChecksumEntry,
  checksumMetadata,
  DATA_CRC32,
  dataOrder,
  HEADER_CRC32,
  verifyChecksums,
} from "./_checksum.ts";

/** One tensor read from a safetensors file. */
export interface SafetensorsEntry {
  /** Always `"F32"` (the only dtype Conveyor reads). */
  readonly dtype: "F32";
  /** Dimensions. */
  readonly shape: number[];
  /** The values, row-major. */
  readonly data: Float32Array;
}

/** A parsed safetensors file. */
export interface SafetensorsFile {
  /** Tensors by name, in the header's order. */
  readonly tensors: Map<string, SafetensorsEntry>;
  /** The `__metadata__` string map (empty when absent), without the checksums it carried. */
  readonly metadata: Record<string, string>;
}

/** Options of {@linkcode saveSafetensors}. */
export interface SaveSafetensorsOptions {
  /** String key-value pairs stored as `__metadata__`. */
  readonly metadata?: Record<string, string>;
}

/** Options of {@linkcode loadSafetensors}. */
export interface LoadSafetensorsOptions {
  /**
   * Accept tensors in the file that the model lacks (default `false`). A
   * pipeline stage loading its slice of a whole-model file sets it.
   */
  readonly allowExtra?: boolean;
  /**
   * Accept NaN and ±Infinity in the weights (default `false`: a file holding
   * one is refused, naming the tensor and the index, before any change).
   */
  readonly allowNonFinite?: boolean;
}

/**
 * Throws a RangeError naming the first NaN or ±Infinity of `data` as
 * `tensor[index]`, so that non-finite weights never reach a model unasked.
 */
export function checkFiniteTensor(name: string, data: Float32Array): void {
  for (let i = 0; i < data.length; i++) {
    if (!Number.isFinite(data[i])) {
      throw new RangeError(
        `safetensors: tensor ${name} holds ${data[i]} at index ${i}; weights must be finite ` +
          "(pass allowNonFinite to load it anyway)",
      );
    }
  }
}

const MAX_HEADER = 100_000_000; // as the reference implementation

function paramsOf(source: Layer | readonly Parameter[], where: string): readonly Parameter[] {
  if (Array.isArray(source)) return source;
  if (source !== null && typeof source === "object" && "parameters" in source) {
    return (source as Layer).parameters();
  }
  throw new TypeError(
    `${where}: expected a Layer or a Parameter array, got ${describeValue(source)}`,
  );
}

/**
 * Serialises parameter values (of a layer or a list) into safetensors bytes,
 * tensors in parameter order. Reads every tensor back from its backend (the
 * reads overlap).
 *
 * @example
 * ```ts
 * import { CpuBackend, Linear } from "@conveyor/core";
 * import { parseSafetensors, saveSafetensors } from "@conveyor/core/format";
 * const be = new CpuBackend();
 * const lin = new Linear(be, 3, 2, { seed: 1 });
 * const bytes = await saveSafetensors(lin, { metadata: { format: "pt" } });
 * const file = parseSafetensors(bytes);
 * console.log([...file.tensors.keys()], file.tensors.get("weight")!.shape); // ["weight", "bias"] [2, 3]
 * lin.dispose();
 * ```
 */
export async function saveSafetensors(
  source: Layer | readonly Parameter[],
  opts?: SaveSafetensorsOptions,
): Promise<Uint8Array> {
  if (opts !== undefined) checkOptionsObject(opts, ["metadata"], "saveSafetensors: ");
  const params = paramsOf(source, "saveSafetensors");
  checkNames(params.map((p) => p.name), "saveSafetensors: parameter name");
  checkMetadata(opts?.metadata, "saveSafetensors");
  const datas = await Promise.all(params.map((p) => p.value.toArray()));
  return encode(
    params.map((p, i) => ({ name: p.name, shape: p.value.shape, data: datas[i] })),
    opts,
  );
}

/** One tensor to write with {@linkcode encodeSafetensors}. */
export interface SafetensorsTensor {
  /** Its name in the file. */
  readonly name: string;
  /** Its dimensions (their product is the data's length). */
  readonly shape: readonly number[];
  /** Its values, row-major. */
  readonly data: Float32Array;
}

/**
 * Serialises host arrays into safetensors bytes (F32), tensors in the given
 * order, as {@linkcode saveSafetensors} does for parameters. Throws a
 * RangeError naming the tensor whose shape and data disagree, or a reserved
 * or repeated name.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { encodeSafetensors, parseSafetensors } from "@conveyor/core/format";
 * const bytes = encodeSafetensors([{ name: "w", shape: [2], data: new Float32Array([1, 2]) }], {
 *   metadata: { note: "hi" },
 * });
 * const file = parseSafetensors(bytes);
 * assert.deepEqual([...file.tensors.get("w")!.data], [1, 2]);
 * assert.equal(file.metadata.note, "hi");
 * ```
 */
export function encodeSafetensors(
  tensors: readonly SafetensorsTensor[],
  opts?: SaveSafetensorsOptions,
): Uint8Array {
  if (!Array.isArray(tensors)) {
    throw new TypeError(
      `encodeSafetensors: tensors must be an array, got ${describeValue(tensors)}`,
    );
  }
  checkNames(tensors.map((t) => t.name), "encodeSafetensors: tensor name");
  checkMetadata(opts?.metadata, "encodeSafetensors");
  for (const t of tensors) {
    let size = 1;
    for (const d of t.shape) size *= d;
    if (!(t.data instanceof Float32Array) || t.data.length !== size) {
      throw new RangeError(
        `encodeSafetensors: tensor ${t.name} of shape ${
          fmtShape(t.shape)
        } needs a Float32Array of ${size} values, got ${
          t.data instanceof Float32Array ? t.data.length : typeof t.data
        }`,
      );
    }
  }
  return encode(tensors, opts);
}

function checkNames(names: readonly string[], what: string): void {
  const seen = new Set<string>();
  for (const name of names) {
    if (name === "__metadata__" || name === "") {
      throw new RangeError(`${what} ${JSON.stringify(name)} is reserved`);
    }
    if (seen.has(name)) throw new RangeError(`${what} ${JSON.stringify(name)} appears twice`);
    seen.add(name);
  }
}

function checkMetadata(meta: Record<string, string> | undefined, where: string): void {
  if (meta === undefined) return;
  for (const [k, v] of Object.entries(meta)) {
    if (k === DATA_CRC32 || k === HEADER_CRC32) {
      throw new RangeError(
        `${where}: metadata key ${k} is reserved (the writer computes the file's checksums)`,
      );
    }
    if (typeof v !== "string") {
      throw new TypeError(`${where}: metadata value of ${k} must be a string, got ${typeof v}`);
    }
  }
}

const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

/** `data`'s values as little-endian bytes (a view where the host is little-endian). */
function leBytes(data: Float32Array): Uint8Array {
  if (LITTLE_ENDIAN) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  const out = new Uint8Array(data.length * 4);
  const view = new DataView(out.buffer);
  for (let k = 0; k < data.length; k++) view.setFloat32(4 * k, data[k], true);
  return out;
}

function encode(tensors: readonly SafetensorsTensor[], opts?: SaveSafetensorsOptions): Uint8Array {
  const meta = opts?.metadata ?? {};
  const entries: (ChecksumEntry & { bytes: Uint8Array })[] = [];
  let offset = 0;
  for (const t of tensors) {
    const bytes = leBytes(t.data);
    entries.push({
      name: t.name,
      dtype: "F32",
      shape: t.shape,
      begin: offset,
      end: offset + bytes.length,
      bytes,
    });
    offset += bytes.length;
  }
  const header: Record<string, unknown> = {
    __metadata__: {
      ...meta,
      ...checksumMetadata(meta, dataOrder(entries), (e) => (e as typeof entries[number]).bytes),
    },
  };
  for (const e of entries) {
    header[e.name] = { dtype: "F32", shape: [...e.shape], data_offsets: [e.begin, e.end] };
  }
  let json = new TextEncoder().encode(JSON.stringify(header));
  const padded = Math.ceil(json.length / 8) * 8;
  if (padded !== json.length) {
    const j = new Uint8Array(padded).fill(0x20); // spaces, as the reference writer pads
    j.set(json);
    json = j;
  }
  const out = new Uint8Array(8 + json.length + offset);
  new DataView(out.buffer).setBigUint64(0, BigInt(json.length), true);
  out.set(json, 8);
  const start = 8 + json.length;
  for (const e of entries) out.set(e.bytes, start + e.begin);
  return out;
}

interface HeaderEntry {
  name: string;
  dtype: string;
  shape: number[];
  begin: number;
  end: number;
}

interface Header {
  /** Tensors by name, in the header's order. */
  entries: Map<string, HeaderEntry>;
  /** The tensors in the data section's order. */
  ordered: HeaderEntry[];
  /** Every `__metadata__` entry, the checksums included. */
  allMetadata: Record<string, string>;
  /** `__metadata__` without the checksums. */
  metadata: Record<string, string>;
  dataStart: number;
}

/** Validates the whole layout; returns the entries and the data section's start. */
function parseHeader(bytes: Uint8Array): Header {
  if (!(bytes instanceof Uint8Array)) {
    const hint = typeof bytes === "string"
      ? `: a path; read the file first, e.g. await Deno.readFile(${JSON.stringify(bytes)})`
      : (bytes as unknown) instanceof URL
      ? `: a path; read the file first, e.g. await Deno.readFile(new URL(${
        JSON.stringify(String(bytes))
      }))`
      : (bytes as unknown) instanceof ArrayBuffer
      ? ": wrap it, new Uint8Array(buffer)"
      : "";
    throw new TypeError(
      `safetensors: expected the file's bytes, a Uint8Array, got ${describeValue(bytes)}${hint}`,
    );
  }
  if (bytes.length < 8) {
    throw new RangeError(
      `safetensors: file of ${bytes.length} bytes is shorter than the 8-byte header length`,
    );
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const n64 = view.getBigUint64(0, true);
  if (n64 > BigInt(bytes.length - 8)) {
    throw new RangeError(
      `safetensors: header length ${n64} runs beyond the file (${
        bytes.length - 8
      } bytes after the length field)`,
    );
  }
  const n = Number(n64);
  if (n > MAX_HEADER) throw new RangeError(`safetensors: header length ${n} exceeds ${MAX_HEADER}`);
  checkHeaderLimits(bytes, 8, 8 + n);
  let parsed: unknown;
  try {
    const text = new TextDecoder("utf-8", { fatal: true }).decode(bytes.subarray(8, 8 + n));
    parsed = JSON.parse(text);
  } catch (e) {
    throw new TypeError(`safetensors: header is not valid UTF-8 JSON: ${(e as Error).message}`, {
      cause: e,
    });
  }
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
    throw new TypeError("safetensors: header must be a JSON object");
  }
  const metadata: Record<string, string> = {};
  const entries = new Map<string, HeaderEntry>();
  for (const [name, raw] of Object.entries(parsed as Record<string, unknown>)) {
    if (name === "__metadata__") {
      if (raw === null || typeof raw !== "object" || Array.isArray(raw)) {
        throw new TypeError("safetensors: __metadata__ must be an object of strings");
      }
      for (const [k, v] of Object.entries(raw as Record<string, unknown>)) {
        if (typeof v !== "string") {
          throw new TypeError(`safetensors: __metadata__.${k} must be a string, got ${typeof v}`);
        }
        metadata[k] = v;
      }
      continue;
    }
    const e = raw as Record<string, unknown>;
    if (e === null || typeof e !== "object") {
      throw new TypeError(`safetensors: entry ${name} must be an object`);
    }
    const { dtype, shape, data_offsets: offs } = e;
    if (typeof dtype !== "string") {
      throw new TypeError(`safetensors: tensor ${name} has no dtype string`);
    }
    if (
      !Array.isArray(shape) ||
      !shape.every((d) => typeof d === "number" && Number.isSafeInteger(d) && d >= 0)
    ) {
      throw new TypeError(
        `safetensors: tensor ${name} has shape ${
          JSON.stringify(shape)
        }, not a list of non-negative integers`,
      );
    }
    if (
      !Array.isArray(offs) || offs.length !== 2 ||
      !offs.every((o) => typeof o === "number" && Number.isSafeInteger(o) && o >= 0)
    ) {
      throw new TypeError(
        `safetensors: tensor ${name} has data_offsets ${JSON.stringify(offs)}, not [begin, end]`,
      );
    }
    const [begin, end] = offs as number[];
    if (end < begin) {
      throw new RangeError(
        `safetensors: tensor ${name} has data_offsets [${begin}, ${end}] with end < begin`,
      );
    }
    entries.set(name, { name, dtype, shape: shape as number[], begin, end });
  }
  const dataStart = 8 + n;
  const dataLen = bytes.length - dataStart;
  // Byte ranges must tile [0, dataLen) exactly.
  const ordered = dataOrder(entries.values());
  let expect = 0;
  let last = "";
  for (const e of ordered) {
    const name = e.name;
    if (e.begin < expect) {
      throw new RangeError(
        `safetensors: tensor ${name} at [${e.begin}, ${e.end}] overlaps the previous tensor, which ends at ${expect}`,
      );
    }
    if (e.begin > expect) {
      throw new RangeError(
        `safetensors: gap in the data section: tensor ${name} starts at ${e.begin}, the previous one ends at ${expect}`,
      );
    }
    expect = e.end;
    last = name;
  }
  if (expect > dataLen) {
    throw new RangeError(
      `safetensors: truncated body or data_offsets out of range: tensor ${last} ends at byte ${expect} of the data section, which has ${dataLen} bytes`,
    );
  }
  if (expect < dataLen) {
    throw new RangeError(
      `safetensors: ${
        dataLen - expect
      } bytes after the last tensor (data section of ${dataLen} bytes, tensors end at ${expect})`,
    );
  }
  for (const [name, e] of entries) {
    if (e.dtype !== "F32") continue; // size checked only for the dtype we know; load refuses others
    let size = 1;
    for (const d of e.shape) size *= d;
    if (e.end - e.begin !== size * 4) {
      throw new RangeError(
        `safetensors: tensor ${name} of shape ${fmtShape(e.shape)} needs ${
          size * 4
        } bytes, its data_offsets [${e.begin}, ${e.end}] give ${e.end - e.begin}`,
      );
    }
  }
  const visible = { ...metadata };
  delete visible[DATA_CRC32];
  delete visible[HEADER_CRC32];
  return { entries, ordered, allMetadata: metadata, metadata: visible, dataStart };
}

/** Checks `header`'s checksums, when the file has them (RangeError naming the tensor or header). */
function verify(bytes: Uint8Array, header: Header): void {
  verifyChecksums(bytes.subarray(header.dataStart), header.ordered, header.allMetadata);
}

/**
 * Parses safetensors bytes as {@linkcode parseSafetensors} does, except
 * the checksums, which `verify()` checks: a reader with rules of its own
 * checks them first, so that a file breaking one of its rules is refused
 * naming that rule, and the checksums catch what no rule sees. Not exported
 * from the package.
 */
export function decodeSafetensors(bytes: Uint8Array): { file: SafetensorsFile; verify(): void } {
  const header = parseHeader(bytes);
  const tensors = new Map<string, SafetensorsEntry>();
  for (const [name, e] of header.entries) {
    if (e.dtype !== "F32") {
      throw new TypeError(
        `safetensors: tensor ${name} has dtype ${e.dtype}; only F32 is supported`,
      );
    }
  }
  for (const [name, e] of header.entries) {
    tensors.set(name, {
      dtype: "F32",
      shape: e.shape,
      data: readF32(bytes, header.dataStart + e.begin, (e.end - e.begin) / 4),
    });
  }
  return { file: { tensors, metadata: header.metadata }, verify: () => verify(bytes, header) };
}

function readF32(bytes: Uint8Array, start: number, count: number): Float32Array {
  const out = new Float32Array(count);
  if (LITTLE_ENDIAN) {
    // The file's bytes are the host's: copied as they are (NaN payloads too).
    new Uint8Array(out.buffer).set(bytes.subarray(start, start + 4 * count));
    return out;
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let i = 0; i < count; i++) out[i] = view.getFloat32(start + 4 * i, true);
  return out;
}

/**
 * Parses and validates safetensors bytes into `Float32Array`s. Throws a
 * TypeError or RangeError naming the problem (bad header, a header over the
 * limits, offsets out of range or overlapping, truncated body, a dtype other
 * than F32, then a checksum that fails, naming the tensor or the header).
 *
 * @example
 * ```ts
 * import { CpuBackend, LayerNorm } from "@conveyor/core";
 * import { parseSafetensors, saveSafetensors } from "@conveyor/core/format";
 * const be = new CpuBackend();
 * const ln = new LayerNorm(be, 3);
 * const file = parseSafetensors(await saveSafetensors(ln));
 * console.log(file.tensors.get("weight")!.data); // Float32Array [1, 1, 1]
 * ln.dispose();
 * ```
 */
export function parseSafetensors(bytes: Uint8Array): SafetensorsFile {
  const { file, verify } = decodeSafetensors(bytes);
  verify();
  return file;
}

/**
 * Loads weights into a model (or a parameter list) from safetensors bytes.
 * Everything is validated first — the file's layout, then for every
 * parameter: present, dtype F32, same shape; and, unless `allowExtra`, no
 * tensor the model lacks; every value finite unless `allowNonFinite`; then
 * the file's checksums — and only then are weights written, so a refused
 * file leaves the model unchanged.
 *
 * @example
 * ```ts
 * import { CpuBackend, Linear } from "@conveyor/core";
 * import { loadSafetensors, saveSafetensors } from "@conveyor/core/format";
 * const be = new CpuBackend();
 * const a = new Linear(be, 3, 2, { seed: 1 });
 * const b = new Linear(be, 3, 2, { seed: 2 });
 * loadSafetensors(b, await saveSafetensors(a)); // b now equals a
 * a.dispose();
 * b.dispose();
 * ```
 */
export function loadSafetensors(
  target: Layer | readonly Parameter[],
  bytes: Uint8Array,
  opts?: LoadSafetensorsOptions,
): void {
  const params = paramsOf(target, "loadSafetensors");
  const header = parseHeader(bytes);
  const { entries, dataStart } = header;
  const wanted = new Set<string>();
  for (const p of params) {
    wanted.add(p.name);
    const e = entries.get(p.name);
    if (e === undefined) {
      throw new RangeError(
        `safetensors: the file has no tensor ${p.name} (model shape ${fmtShape(p.value.shape)})`,
      );
    }
    if (e.dtype !== "F32") {
      throw new TypeError(
        `safetensors: tensor ${p.name} has dtype ${e.dtype}, the model needs F32`,
      );
    }
    if (!sameShape(e.shape, p.value.shape)) {
      throw new RangeError(
        `safetensors: tensor ${p.name} has shape ${fmtShape(e.shape)}, the model needs ${
          fmtShape(p.value.shape)
        }`,
      );
    }
    if (p.value.disposed) throw new TypeError(`loadSafetensors: parameter ${p.name} was disposed`);
  }
  if (!(opts?.allowExtra ?? false)) {
    for (const name of entries.keys()) {
      if (!wanted.has(name)) {
        throw new RangeError(
          `safetensors: the file has tensor ${name}, which the model lacks (pass allowExtra to ignore it)`,
        );
      }
    }
  }
  // Decode every tensor before writing any, so nothing can fail half-way.
  const staged: [Tensor, Float32Array][] = params.map((p) => {
    const e = entries.get(p.name)!;
    const data = readF32(bytes, dataStart + e.begin, (e.end - e.begin) / 4);
    if (!(opts?.allowNonFinite ?? false)) checkFiniteTensor(p.name, data);
    return [p.value, data];
  });
  verify(bytes, header); // last: a file that breaks a rule is refused naming it
  for (const [value, data] of staged) {
    const t = value.backend.fromData(data, value.shape);
    ops.copyInPlace(value, t);
    t.dispose();
  }
}
