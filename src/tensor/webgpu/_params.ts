/**
 * Named uniform parameters of the WGSL kernels.
 *
 * Every kernel binds a `struct Params` at binding 0. The host describes the
 * same struct as a named field list, e.g. `{ n: "u32", alpha: "f32" }`:
 * - `checkParamsStruct` compares that list with the kernel's WGSL struct
 *   (same names, same order, same types) when the kernel sources load, so a
 *   field added on one side only fails at import with both lists named;
 * - `layoutParams` places every field by WGSL's uniform address-space rules
 *   (scalars 4-byte aligned, `vec4` and arrays of `vec4` 16-byte aligned);
 * - `writeParams` writes a dispatch's values, given by name, at those
 *   offsets, checking that u32 fields hold u32 values.
 *
 * So a dispatch reads `{ n, alpha }` rather than "the u32s, then the f32s".
 *
 * @module
 */

/** A scalar field type. */
export type ScalarType = "u32" | "i32" | "f32";

/** The field types a kernel's `Params` may use. */
export type FieldType =
  | ScalarType
  | "vec4<u32>"
  | "vec4<f32>"
  | `array<vec4<u32>, ${number}>`
  | `array<vec4<f32>, ${number}>`;

/** A `Params` struct as the host sees it: field name → WGSL type, in order. */
export type ParamFields = Readonly<Record<string, FieldType>>;

/** Values for a struct's fields: a number per scalar, 4·N numbers per vec4 array. */
export type ParamValues<F extends ParamFields> = {
  readonly [K in keyof F]: F[K] extends ScalarType ? number : readonly number[];
};

/** Where one field lives, in 4-byte words from the start of the struct. */
interface Slot {
  readonly name: string;
  readonly scalar: ScalarType;
  readonly word: number;
  /** 1 for a scalar, 4 for a vec4, 4·N for an array of N vec4s. */
  readonly count: number;
}

/** The placed fields of a `Params` struct and its size. */
export interface ParamsLayout {
  readonly slots: readonly Slot[];
  /** Struct size in bytes (a multiple of its alignment). */
  readonly bytes: number;
}

const ARRAY_RE = /^array<vec4<(u32|i32|f32)>,\s*(\d+)>$/;
const VEC4_RE = /^vec4<(u32|i32|f32)>$/;

function place(type: string): { scalar: ScalarType; count: number; align: number } {
  if (type === "u32" || type === "i32" || type === "f32") {
    return { scalar: type, count: 1, align: 4 };
  }
  const v = VEC4_RE.exec(type);
  if (v !== null) return { scalar: v[1] as ScalarType, count: 4, align: 16 };
  const a = ARRAY_RE.exec(type);
  if (a !== null) return { scalar: a[1] as ScalarType, count: 4 * Number(a[2]), align: 16 };
  throw new TypeError(`kernel params: unsupported uniform field type ${type}`);
}

/** Places `fields` by the WGSL uniform layout rules. */
export function layoutParams(fields: ParamFields): ParamsLayout {
  const slots: Slot[] = [];
  let offset = 0, maxAlign = 4;
  for (const [name, type] of Object.entries(fields)) {
    const { scalar, count, align } = place(type);
    offset = Math.ceil(offset / align) * align;
    slots.push({ name, scalar, word: offset / 4, count });
    offset += count * 4;
    maxAlign = Math.max(maxAlign, align);
  }
  return { slots, bytes: Math.ceil(offset / maxAlign) * maxAlign };
}

/** The fields of the WGSL `struct Params { … }` in `src`, in order. */
export function parseParamsStruct(src: string): [string, string][] {
  const m = /struct Params\s*\{([^}]*)\}/.exec(src);
  if (m === null) throw new SyntaxError("kernel source has no struct Params");
  const body = m[1].replace(/\/\/[^\n]*/g, "");
  const fields: [string, string][] = [];
  // Split on commas outside angle brackets (`array<vec4<u32>, 2>` holds one).
  let depth = 0, cur = "";
  const flush = () => {
    const t = cur.trim();
    cur = "";
    if (t === "") return;
    const f = /^(\w+)\s*:\s*(.+)$/s.exec(t);
    if (f === null) throw new SyntaxError(`cannot read Params field "${t}"`);
    fields.push([f[1], f[2].replace(/\s+/g, " ").replace(/,\s*/g, ", ").trim()]);
  };
  for (const ch of body) {
    if (ch === "<") depth++;
    if (ch === ">") depth--;
    if (ch === "," && depth === 0) flush();
    else cur += ch;
  }
  flush();
  return fields;
}

/**
 * Throws unless the host's field list equals the WGSL struct of kernel
 * `name` (names, order and types), naming both lists.
 */
export function checkParamsStruct(name: string, src: string, fields: ParamFields): void {
  const wgsl = parseParamsStruct(src).map(([n, t]) => `${n}: ${t}`);
  const host = Object.entries(fields).map(([n, t]) => `${n}: ${t}`);
  if (wgsl.join("; ") !== host.join("; ")) {
    throw new Error(
      `kernel ${name}: host Params { ${host.join("; ")} } do not match the WGSL struct Params { ${
        wgsl.join("; ")
      } }`,
    );
  }
}

/**
 * Writes `values` into the struct at word `base` of the three views (which
 * share one buffer). A u32 field must hold an integer in [0, 2^32), an i32
 * one an integer in [-2^31, 2^31); arrays must have the declared length.
 */
export function writeParams(
  kernel: string,
  layout: ParamsLayout,
  values: Readonly<Record<string, number | readonly number[]>>,
  u32: Uint32Array,
  i32: Int32Array,
  f32: Float32Array,
  base: number,
): void {
  for (const s of layout.slots) {
    const v = values[s.name];
    if (s.count === 1) {
      if (typeof v !== "number") {
        throw new TypeError(`kernel ${kernel}: param ${s.name} must be a number, got ${typeof v}`);
      }
      put(kernel, s, v, base + s.word, u32, i32, f32);
    } else {
      if (!Array.isArray(v) || v.length !== s.count) {
        throw new TypeError(
          `kernel ${kernel}: param ${s.name} must be an array of ${s.count} numbers`,
        );
      }
      for (let i = 0; i < s.count; i++) put(kernel, s, v[i], base + s.word + i, u32, i32, f32);
    }
  }
}

function put(
  kernel: string,
  s: Slot,
  v: number,
  at: number,
  u32: Uint32Array,
  i32: Int32Array,
  f32: Float32Array,
): void {
  if (s.scalar === "f32") {
    f32[at] = v;
  } else if (s.scalar === "u32") {
    if (v >>> 0 !== v) {
      throw new RangeError(`kernel ${kernel}: param ${s.name} must be a u32, got ${v}`);
    }
    u32[at] = v;
  } else {
    if ((v | 0) !== v) {
      throw new RangeError(`kernel ${kernel}: param ${s.name} must be an i32, got ${v}`);
    }
    i32[at] = v;
  }
}

/**
 * `"OP_" + UPPER_SNAKE(name)`: the WGSL constant of one entry of an op-code
 * table (`logSumExp` → `OP_LOG_SUM_EXP`).
 */
export function opConstName(prefix: string, name: string): string {
  return `${prefix}_${name.replace(/([a-z0-9])([A-Z])/g, "$1_$2").toUpperCase()}`;
}

/**
 * Throws unless the `const PREFIX_NAME: u32 = <code>u;` declarations of
 * `src` are exactly the entries of `table` (every entry present with its
 * code, no other constant with that prefix), so WGSL and host agree on
 * every op code by name.
 */
export function checkOpCodes(
  name: string,
  src: string,
  prefix: string,
  table: Readonly<Record<string, number>>,
): void {
  const wgsl = new Map<string, number>();
  for (const m of src.matchAll(new RegExp(`^const (${prefix}_\\w+): u32 = (\\d+)u;`, "gm"))) {
    wgsl.set(m[1], Number(m[2]));
  }
  const want = new Map(Object.entries(table).map(([k, v]) => [opConstName(prefix, k), v]));
  const fmt = (m: Map<string, number>) => [...m].map(([k, v]) => `${k}=${v}`).sort().join(", ");
  if (fmt(wgsl) !== fmt(want)) {
    throw new Error(
      `kernel ${name}: op codes differ: host { ${fmt(want)} }, WGSL { ${fmt(wgsl)} }`,
    );
  }
}
