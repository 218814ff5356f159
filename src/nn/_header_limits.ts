// Limits on a safetensors header, checked on its bytes before the JSON is
// parsed, so that a crafted header costs neither the memory nor the time of
// building millions of objects: a single pass over the bytes counts the
// header's tensors and values and its nesting, and stops at the first limit
// passed. Used by safetensors.ts; not exported from the package.

/** The most tensors a header may list (a GPT-3-sized model has well under 10 000). */
export const MAX_TENSORS = 100_000;
/** The most JSON values (object members and array elements, at any depth) in a header. */
export const MAX_HEADER_VALUES = 2_000_000;
/** The most dimensions a shape may have. */
export const MAX_RANK = 64;
/** Header → tensor entry → shape: nothing nests deeper. */
const MAX_DEPTH = 3;

const QUOTE = 0x22, BACKSLASH = 0x5c, COMMA = 0x2c, COLON = 0x3a;
const OPEN_OBJECT = 0x7b, CLOSE_OBJECT = 0x7d, OPEN_ARRAY = 0x5b, CLOSE_ARRAY = 0x5d;

function isSpace(b: number): boolean {
  return b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09;
}

const METADATA_KEY = new TextEncoder().encode('"__metadata__"');

/** Whether the bytes at `at` are the key `"__metadata__"` as a writer spells it. */
function isMetadataKey(bytes: Uint8Array, at: number, end: number): boolean {
  if (at + METADATA_KEY.length > end) return false;
  for (let k = 0; k < METADATA_KEY.length; k++) if (bytes[at + k] !== METADATA_KEY[k]) return false;
  return true;
}

/** The JSON string starting at `at` (a quote), decoded, at most 80 characters. */
function stringAt(bytes: Uint8Array, at: number, end: number): string {
  let i = at + 1;
  while (i < end && bytes[i] !== QUOTE) i += bytes[i] === BACKSLASH ? 2 : 1;
  let text: string;
  try {
    text = JSON.parse(new TextDecoder().decode(bytes.subarray(at, Math.min(i + 1, end))));
  } catch {
    text = new TextDecoder().decode(bytes.subarray(at + 1, Math.min(i, at + 81)));
  }
  return text.length > 80 ? `${text.slice(0, 80)}…` : text;
}

/**
 * Throws a RangeError when the JSON text in `bytes[start, end)` lists more
 * than {@linkcode MAX_TENSORS} tensors, holds more than
 * {@linkcode MAX_HEADER_VALUES} values or an array of more than
 * {@linkcode MAX_RANK} values, or nests deeper than a header does. It does
 * not check the syntax (JSON.parse does, afterwards).
 */
export function checkHeaderLimits(bytes: Uint8Array, start: number, end: number): void {
  // Per open container (at most MAX_DEPTH): is it an array, its items so far,
  // and whether the next non-space byte starts an item.
  const isArray: boolean[] = [];
  const items: number[] = [];
  const expect: boolean[] = [];
  let total = 0;
  let lastKey = -1; // where the last top-level key starts
  let sawMetadata = false;
  const fail = (what: string): never => {
    const near = lastKey < 0
      ? ""
      : ` (at the entry of ${JSON.stringify(stringAt(bytes, lastKey, end))})`;
    throw new RangeError(`safetensors: the header ${what}${near}; refused before parsing it`);
  };
  const countItem = (at: number): void => {
    const d = items.length - 1;
    if (d < 0 || !expect[d]) return;
    expect[d] = false;
    items[d]++;
    if (++total > MAX_HEADER_VALUES) {
      fail(`holds more than ${MAX_HEADER_VALUES} values (object members and array elements)`);
    }
    if (d === 0 && !isArray[0]) {
      lastKey = at;
      if (!sawMetadata && isMetadataKey(bytes, at, end)) sawMetadata = true;
      else if (items[0] - (sawMetadata ? 1 : 0) > MAX_TENSORS) {
        fail(`lists more than ${MAX_TENSORS} tensors`);
      }
    } else if (isArray[d] && items[d] > MAX_RANK) {
      fail(
        `has an array of more than ${MAX_RANK} values (a shape has at most ${MAX_RANK} dimensions)`,
      );
    }
  };
  for (let i = start; i < end; i++) {
    const b = bytes[i];
    if (isSpace(b)) continue;
    if (b === QUOTE) {
      countItem(i);
      for (i++; i < end && bytes[i] !== QUOTE; i++) if (bytes[i] === BACKSLASH) i++;
      continue;
    }
    if (b === OPEN_OBJECT || b === OPEN_ARRAY) {
      countItem(i);
      if (items.length === MAX_DEPTH) {
        fail(`nests deeper than ${MAX_DEPTH} levels (header, tensor entry, shape)`);
      }
      isArray.push(b === OPEN_ARRAY);
      items.push(0);
      expect.push(true);
    } else if (b === CLOSE_OBJECT || b === CLOSE_ARRAY) {
      isArray.pop();
      items.pop();
      expect.pop();
    } else if (b === COMMA) {
      if (items.length > 0) expect[items.length - 1] = true;
    } else if (b !== COLON) {
      countItem(i); // a number, true, false or null starts (its other bytes follow)
    }
  }
}
