/**
 * Values as error messages show them: short whatever their size, so a
 * wrong array of a million numbers gives its type and length, not its
 * contents.
 *
 * @module
 */

/** The most dimensions or characters a message spells out. */
const MAX_ITEMS = 8;
const MAX_CHARS = 60;

/**
 * `[2, 3]`; a shape of more than 8 dimensions as its first ones, "…" and
 * its length.
 *
 * @example
 * ```ts
 * import { formatShape } from "./describe.ts";
 * console.log(formatShape([2, 3])); // "[2, 3]"
 * console.log(formatShape(new Array(100).fill(1))); // "[1, 1, 1, 1, 1, 1, 1, 1, … (100 dimensions)]"
 * ```
 */
export function formatShape(shape: readonly unknown[]): string {
  if (!Array.isArray(shape)) return describeValue(shape);
  if (shape.length <= MAX_ITEMS) return `[${shape.map((d) => describeValue(d)).join(", ")}]`;
  return `[${
    shape.slice(0, MAX_ITEMS).map((d) => describeValue(d)).join(", ")
  }, … (${shape.length} dimensions)]`;
}

/**
 * A value for an error message: numbers, booleans, null and undefined as
 * they are, strings quoted (long strings cut), arrays and typed arrays by type
 * and length, other objects by their constructor's name.
 *
 * @example
 * ```ts
 * import { describeValue } from "./describe.ts";
 * console.log(describeValue(new Float64Array(1e6))); // "a Float64Array of 1000000"
 * console.log(describeValue("abc")); // "\"abc\""
 * console.log(describeValue("2") === describeValue(2)); // false
 * console.log(describeValue(NaN)); // "NaN"
 * console.log(describeValue(new ArrayBuffer(8))); // "an ArrayBuffer"
 * console.log(describeValue(new Uint8Array(2))); // "a Uint8Array of 2"
 * ```
 */
export function describeValue(v: unknown): string {
  if (v === null || v === undefined || typeof v === "number" || typeof v === "boolean") {
    return String(v);
  }
  if (typeof v === "bigint") return `${v}n`;
  if (typeof v === "string") {
    // Quoted, so that "2" (a string) is not read as the number 2.
    return v.length > MAX_CHARS
      ? `${JSON.stringify(v.slice(0, MAX_CHARS))}… (${v.length} characters)`
      : JSON.stringify(v);
  }
  if (typeof v === "function") return "a function";
  if (typeof v === "symbol") return String(v);
  if (Array.isArray(v)) return `an Array of ${v.length}`;
  if (ArrayBuffer.isView(v)) {
    const n = (v as unknown as { length?: number }).length ?? v.byteLength;
    const name = v.constructor.name;
    return `${/^[AEIO]/.test(name) ? "an" : "a"} ${name} of ${n}`;
  }
  const name = (v as object).constructor?.name;
  if (name === undefined || name === "Object") return "an object";
  return `${/^[AEIO]/.test(name) ? "an" : "a"} ${name}`;
}
