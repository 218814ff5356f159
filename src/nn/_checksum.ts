// The checksums Conveyor writes into a safetensors file's `__metadata__`
// and checks when it reads one (files of other writers, and its own written
// before checksums existed, carry none and are read unchecked):
//
// - `data_crc32`: the CRC-32 (zlib's) of each tensor's bytes, as 8 hex
//   digits, separated by spaces, in the order of the data section (by
//   offset; zero-size tensors, whose CRC-32 is 00000000, by name);
// - `header_crc32`: the CRC-32 of the UTF-8 JSON text
//   `[metadata, tensors]`, where `metadata` is every `__metadata__` entry but
//   `header_crc32` as `[key, value]` pairs sorted by key (`data_crc32`
//   included) and `tensors` is `[name, dtype, shape, begin, end]` per
//   tensor in the data section's order.
//
// A flipped bit in the data section fails the tensor it falls in; an
// edited metadata value, dtype, shape or offset fails the header. Used by
// safetensors.ts; not exported from the package.

import { crc32, hex8 } from "./_crc32.ts";

/** The metadata key of the tensors' checksums. */
export const DATA_CRC32 = "data_crc32";
/** The metadata key of the header's checksum. */
export const HEADER_CRC32 = "header_crc32";

/** A tensor as the checksums see it: byte range relative to the data section. */
export interface ChecksumEntry {
  readonly name: string;
  readonly dtype: string;
  readonly shape: readonly number[];
  readonly begin: number;
  readonly end: number;
}

/** `entries` in the data section's order (offset, then name). */
export function dataOrder<T extends ChecksumEntry>(entries: Iterable<T>): T[] {
  return [...entries].sort((a, b) =>
    a.begin - b.begin || a.end - b.end || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)
  );
}

/** The checksum of the header (see the module comment); `ordered` in data order. */
export function headerCrc32(
  metadata: Readonly<Record<string, string>>,
  ordered: readonly ChecksumEntry[],
): string {
  const meta = Object.keys(metadata).filter((k) => k !== HEADER_CRC32).sort().map((k) => [
    k,
    metadata[k],
  ]);
  const tensors = ordered.map((e) => [e.name, e.dtype, e.shape, e.begin, e.end]);
  return hex8(crc32(new TextEncoder().encode(JSON.stringify([meta, tensors]))));
}

/**
 * The two checksum entries for a file whose tensors (in data order) are
 * `ordered`, with bytes `bytesOf(entry)`, and whose other metadata is
 * `metadata`.
 */
export function checksumMetadata(
  metadata: Readonly<Record<string, string>>,
  ordered: readonly ChecksumEntry[],
  bytesOf: (e: ChecksumEntry, i: number) => Uint8Array,
): Record<string, string> {
  const data = ordered.map((e, i) => hex8(crc32(bytesOf(e, i)))).join(" ");
  const withData = { ...metadata, [DATA_CRC32]: data };
  return { [DATA_CRC32]: data, [HEADER_CRC32]: headerCrc32(withData, ordered) };
}

/**
 * Checks a file's checksums, when it has them: RangeError naming the
 * tensor whose bytes changed, or the header. `data` is the data section,
 * `ordered` the tensors in data order, `metadata` every `__metadata__`
 * entry (the checksums included).
 */
export function verifyChecksums(
  data: Uint8Array,
  ordered: readonly ChecksumEntry[],
  metadata: Readonly<Record<string, string>>,
): void {
  const sums = metadata[DATA_CRC32], head = metadata[HEADER_CRC32];
  if (sums === undefined && head === undefined) return; // written without checksums
  if (sums === undefined || head === undefined) {
    throw new RangeError(
      `safetensors: __metadata__ has ${sums === undefined ? HEADER_CRC32 : DATA_CRC32} but not ` +
        `${sums === undefined ? DATA_CRC32 : HEADER_CRC32}: the checksums are written together`,
    );
  }
  const want = headerCrc32(metadata, ordered);
  if (head !== want) {
    throw new RangeError(
      `safetensors: the header fails its checksum (${HEADER_CRC32} ${JSON.stringify(head)}, ` +
        `the header gives ${want}): the metadata or a tensor's dtype, shape or offsets changed ` +
        "after the file was written",
    );
  }
  const list = sums === "" ? [] : sums.split(" ");
  if (list.length !== ordered.length || !list.every((s) => /^[0-9a-f]{8}$/.test(s))) {
    throw new RangeError(
      `safetensors: __metadata__.${DATA_CRC32} must hold one 8-hex-digit CRC-32 per tensor ` +
        `(${ordered.length}), separated by spaces`,
    );
  }
  ordered.forEach((e, i) => {
    const got = hex8(crc32(data.subarray(e.begin, e.end)));
    if (got !== list[i]) {
      throw new RangeError(
        `safetensors: tensor ${e.name} fails its checksum (its ${
          e.end - e.begin
        } bytes give CRC-32 ${got}, ${DATA_CRC32} says ${list[i]}): the file changed after it ` +
          "was written (a flipped bit, a torn or altered copy)",
      );
    }
  });
}
