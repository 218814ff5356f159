/**
 * Comparisons of the pipeline tests: parameter files tensor by tensor, and
 * loss curves.
 *
 * @module
 */

import { parseSafetensors } from "../../../src/nn/safetensors.ts";

/** The tensors of a safetensors file by name. */
export function tensorsOf(bytes: Uint8Array): Map<string, Float32Array> {
  const out = new Map<string, Float32Array>();
  for (const [k, e] of parseSafetensors(bytes).tensors) out.set(k, e.data);
  return out;
}

/**
 * `worst`: the largest per-tensor relative error max|a − b| / max|b|;
 * `l2`: ‖a − b‖ / ‖b‖ over all parameters together.
 */
export function paramError(
  got: Map<string, Float32Array>,
  want: Map<string, Float32Array>,
): { worst: number; worstName: string; l2: number } {
  if (got.size !== want.size) throw new Error(`${got.size} tensors, want ${want.size}`);
  let worst = 0, worstName = "", dd = 0, nn = 0;
  for (const [name, w] of want) {
    const g = got.get(name);
    if (g === undefined || g.length !== w.length) throw new Error(`tensor ${name} differs in size`);
    let mx = 0, md = 0;
    for (let i = 0; i < w.length; i++) {
      const d = g[i] - w[i];
      mx = Math.max(mx, Math.abs(w[i]));
      md = Math.max(md, Math.abs(d));
      dd += d * d;
      nn += w[i] * w[i];
    }
    const rel = mx === 0 ? md : md / mx;
    if (rel > worst) {
      worst = rel;
      worstName = name;
    }
  }
  return { worst, worstName, l2: Math.sqrt(dd / nn) };
}

/** The largest relative difference |a − b| / |b| over the entries. */
export function maxRelative(a: readonly number[], b: readonly number[]): number {
  let worst = 0;
  a.forEach((v, i) => worst = Math.max(worst, Math.abs(v - b[i]) / Math.abs(b[i])));
  return worst;
}
