/**
 * Specialisation of WGSL kernel sources.
 *
 * Kernels in `kernels/*.wgsl` are plain WGSL that compiles as written. A
 * host-side variant changes two things only:
 * - `const NAME: T = value;` lines get a new value (tile sizes, flags), so
 *   the compiler folds every branch on them;
 * - `//#if NAME` … `//#else` … `//#endif` blocks keep one side, for code
 *   whose two sides cannot both type-check (a binding read as `vec4<f32>`
 *   versus `f32`). Conditions are a const name, optionally negated with `!`.
 * - `//#unroll` before a `for (var i = 0u; i < BOUND; i++) {` line and
 *   `//#endunroll` after its closing brace repeat the body BOUND times, each
 *   copy in its own block starting `let i = <n>u;`. The shader compilers
 *   behind some adapters (naga → GLSL → Mesa) do not unroll such loops, and
 *   register blocks only stay in registers when every array index is a
 *   constant. The unmodified source still compiles (as a loop).
 *
 * The one exception to "compiles as written": a `//#include NAME` line
 * stands for the shared snippet `kernels/NAME` (a kernel takes its entry
 * point from `_rows.wgsl`, `_units.wgsl` or `_column_chunks.wgsl`, and
 * shared helpers from the others). Includes are resolved once, when the
 * kernel sources are loaded, before any specialisation, so a snippet's
 * constants (such as `WG`) are specialised like the kernel's own.
 *
 * @module
 */

/** Values for a kernel's `const` declarations. */
export type ShaderDefines = Readonly<Record<string, number | boolean>>;

function literal(type: string, v: number | boolean): string {
  if (typeof v === "boolean") return v ? "true" : "false";
  if (type === "u32") {
    if (!Number.isInteger(v) || v < 0) {
      throw new RangeError(`u32 constant must be a non-negative integer, got ${v}`);
    }
    return `${v}u`;
  }
  if (type === "i32") return `${Math.trunc(v)}i`;
  if (type === "f32") return Number.isInteger(v) ? `${v}.0` : `${v}`;
  throw new TypeError(`cannot specialise a constant of type ${type}`);
}

/**
 * Returns `src` with every `//#include NAME` line replaced by
 * `snippets[NAME]`. Snippets do not include others.
 */
export function resolveIncludes(src: string, snippets: Readonly<Record<string, string>>): string {
  return src.replace(/^[ \t]*\/\/#include[ \t]+(\S+)[ \t]*$/gm, (_line, name: string) => {
    const snippet = snippets[name];
    if (snippet === undefined) throw new RangeError(`kernel includes unknown snippet ${name}`);
    return snippet;
  });
}

/**
 * Returns `src` with the given constants replaced and `//#if` blocks
 * resolved. Every define must name a `const` of the source (a typo would
 * otherwise silently leave the default in place).
 */
export function specialize(src: string, defines: ShaderDefines): string {
  let out = src;
  for (const [name, value] of Object.entries(defines)) {
    const re = new RegExp(`^const ${name}: (\\w+) = [^;]+;`, "m");
    const m = re.exec(out);
    if (m === null) throw new RangeError(`kernel has no constant named ${name}`);
    out = out.replace(re, `const ${name}: ${m[1]} = ${literal(m[1], value)};`);
  }
  return unrollLoops(resolveIfs(out, defines));
}

function resolveIfs(src: string, defines: ShaderDefines): string {
  const lines = src.split("\n");
  const kept: string[] = [];
  // Each frame: is this branch active, and was the enclosing context active.
  const stack: { active: boolean; parent: boolean; taken: boolean }[] = [];
  let active = true;
  for (const line of lines) {
    const t = line.trim();
    if (t.startsWith("//#if ")) {
      const cond = t.slice(6).trim();
      const neg = cond.startsWith("!");
      const name = neg ? cond.slice(1) : cond;
      const v = lookup(src, name, defines);
      const take = neg ? !v : v;
      stack.push({ active, parent: active, taken: take });
      active = active && take;
    } else if (t === "//#else") {
      const top = stack[stack.length - 1];
      if (top === undefined) throw new SyntaxError("//#else without //#if in kernel source");
      active = top.parent && !top.taken;
    } else if (t === "//#endif") {
      const top = stack.pop();
      if (top === undefined) throw new SyntaxError("//#endif without //#if in kernel source");
      active = top.parent;
    } else if (active) {
      kept.push(line);
    }
  }
  if (stack.length !== 0) throw new SyntaxError("unterminated //#if in kernel source");
  return kept.join("\n");
}

/** A condition's value: the define if given, else the source's own default. */
function lookup(src: string, name: string, defines: ShaderDefines): boolean {
  if (name in defines) return Boolean(defines[name]);
  const m = new RegExp(`^const ${name}: bool = (true|false);`, "m").exec(src);
  if (m === null) throw new RangeError(`//#if names unknown boolean constant ${name}`);
  return m[1] === "true";
}

const FOR_RE = /^(\s*)for \(var (\w+) = 0u; \2 < ([\w ()*/+-]+); \2\+\+\) \{\s*$/;

function unrollLoops(src: string): string {
  const consts = constValues(src);
  const lines = src.split("\n");
  return expand(lines, 0, lines.length, consts).join("\n");
}

/** Expands `//#unroll` regions in lines[from, to), innermost first. */
function expand(lines: string[], from: number, to: number, consts: Map<string, number>): string[] {
  const out: string[] = [];
  for (let i = from; i < to; i++) {
    if (lines[i].trim() !== "//#unroll") {
      out.push(lines[i]);
      continue;
    }
    // Find the matching //#endunroll, allowing nested regions.
    let depth = 1;
    let j = i + 1;
    for (; j < to; j++) {
      const t = lines[j].trim();
      if (t === "//#unroll") depth++;
      else if (t === "//#endunroll" && --depth === 0) break;
    }
    if (j >= to) throw new SyntaxError(`unterminated //#unroll at kernel line ${i + 1}`);
    const m = FOR_RE.exec(lines[i + 1] ?? "");
    if (m === null || lines[j - 1].trim() !== "}") {
      throw new SyntaxError(`//#unroll at kernel line ${i + 1} must wrap one counted for loop`);
    }
    const [, indent, name, boundExpr] = m;
    const bound = evalConst(boundExpr, consts);
    const body = expand(lines, i + 2, j - 1, consts);
    for (let k = 0; k < bound; k++) {
      out.push(`${indent}{`, `${indent}  let ${name} = ${k}u;`, ...body, `${indent}}`);
    }
    i = j;
  }
  return out;
}

/** Values of the integer `const` declarations of a (specialised) source. */
function constValues(src: string): Map<string, number> {
  const consts = new Map<string, number>();
  for (const m of src.matchAll(/^const (\w+): (?:u32|i32) = ([^;]+);/gm)) {
    consts.set(m[1], evalConst(m[2], consts));
  }
  return consts;
}

/** Evaluates + - * / ( ) over integer literals and known consts. */
function evalConst(expr: string, consts: Map<string, number>): number {
  const tokens = expr.match(/\d+[ui]?|\w+|[-+*/()]/g) ?? [];
  let pos = 0;
  const atom = (): number => {
    const t = tokens[pos++];
    if (t === "(") {
      const v = sum();
      pos++;
      return v;
    }
    if (t !== undefined && /^\d/.test(t)) return parseInt(t, 10);
    const v = t === undefined ? undefined : consts.get(t);
    if (v === undefined) throw new RangeError(`cannot evaluate kernel constant expression ${expr}`);
    return v;
  };
  const product = (): number => {
    let v = atom();
    while (tokens[pos] === "*" || tokens[pos] === "/") {
      const op = tokens[pos++];
      const r = atom();
      v = op === "*" ? v * r : Math.trunc(v / r);
    }
    return v;
  };
  const sum = (): number => {
    let v = product();
    while (tokens[pos] === "+" || tokens[pos] === "-") {
      const op = tokens[pos++];
      const r = product();
      v = op === "+" ? v + r : v - r;
    }
    return v;
  };
  return sum();
}
