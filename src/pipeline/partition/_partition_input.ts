/**
 * Validation and normalisation of partitioner inputs.
 *
 * @module
 */

import { describeValue } from "../../text/describe.ts";

/** One layer as the partitioner sees it (mirrors `LayerCost` in partition.ts). */
export interface NormalizedLayer {
  readonly kind: string;
  readonly cost: number;
}

/** Throws a RangeError unless `numStages` is a positive integer. */
export function checkNumStages(numStages: number): void {
  if (typeof numStages !== "number" || !Number.isInteger(numStages) || numStages < 1) {
    throw new RangeError(`numStages must be a positive integer, got ${describeValue(numStages)}`);
  }
}

/**
 * Checks every entry and returns `{ kind, cost }` records; `hasKinds` is
 * false when the input was plain numbers.
 */
export function normalizeLayers(
  layers: readonly unknown[],
): { layers: NormalizedLayer[]; hasKinds: boolean } {
  if (!Array.isArray(layers)) {
    throw new TypeError(
      `layers must be an array of costs or { kind, cost } records, got ${describeValue(layers)}`,
    );
  }
  const out: NormalizedLayer[] = [];
  let numbers = 0;
  for (let i = 0; i < layers.length; i++) {
    const entry = layers[i];
    let kind = "";
    let cost: unknown;
    if (typeof entry === "number") {
      cost = entry;
      numbers++;
    } else if (entry !== null && typeof entry === "object") {
      const rec = entry as { kind?: unknown; cost?: unknown };
      if (typeof rec.kind !== "string") {
        throw new TypeError(
          `layer kind must be a string, got ${describeValue(rec.kind)} at index ${i}`,
        );
      }
      kind = rec.kind;
      cost = rec.cost;
    } else {
      throw new TypeError(
        `layer must be a cost or a { kind, cost } record, got ${
          describeValue(entry)
        } at index ${i}`,
      );
    }
    if (typeof cost !== "number" || !Number.isFinite(cost) || cost < 0) {
      throw new RangeError(
        `layer costs must be finite and non-negative, got ${describeValue(cost)} at index ${i}`,
      );
    }
    out.push({ kind, cost });
  }
  if (numbers !== 0 && numbers !== layers.length) {
    throw new TypeError(
      "layers must be all numbers or all { kind, cost } records, not a mix",
    );
  }
  return { layers: out, hasKinds: numbers === 0 };
}

/**
 * A RegExp for a type selection: strings compile case-insensitively (as
 * DeepSpeed's `type:REGEX` matches class names); `g`/`y` flags are dropped
 * so that `test` keeps no state between layers.
 */
export function compileTypeRegex(pattern: string | RegExp): RegExp {
  if (pattern instanceof RegExp) {
    return new RegExp(pattern.source, pattern.flags.replace(/[gy]/g, ""));
  }
  if (typeof pattern !== "string") {
    throw new TypeError(`typeRegex must be a string or a RegExp, got ${describeValue(pattern)}`);
  }
  try {
    return new RegExp(pattern, "i");
  } catch (e) {
    throw new TypeError(
      `typeRegex must be a valid regular expression, got ${JSON.stringify(pattern)}: ${
        (e as Error).message
      }`,
    );
  }
}

/**
 * The costs used for balancing: a layer's own cost when it matches
 * `typeRegex` (or when there is no selection), else 0. A selection that
 * matches no layer is refused, naming the kinds present.
 */
export function effectiveCosts(
  layers: readonly NormalizedLayer[],
  hasKinds: boolean,
  typeRegex: RegExp | undefined,
): number[] {
  if (typeRegex === undefined) return layers.map((l) => l.cost);
  if (!hasKinds) {
    throw new TypeError(
      `typeRegex ${typeRegex} needs layer kinds, got plain numbers; pass { kind, cost } records`,
    );
  }
  let matched = 0;
  const costs = layers.map((l) => {
    if (!typeRegex.test(l.kind)) return 0;
    matched++;
    return l.cost;
  });
  if (matched === 0 && layers.length > 0) {
    const kinds = [...new Set(layers.map((l) => l.kind))].join(", ");
    throw new RangeError(`typeRegex ${typeRegex} matches none of the layer kinds: ${kinds}`);
  }
  return costs;
}
