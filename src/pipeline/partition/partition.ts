/**
 * Cutting a layer stack into pipeline stages: uniform by layer count, or
 * load-balanced (min-max) over per-layer costs, with an optional selection
 * by layer type as DeepSpeed's `partition_method="type:REGEX"`.
 *
 * The partitioner works on plain numbers: a list of `{ kind, cost }` records
 * (or bare costs), so it needs no tensors. `layerCosts` and
 * `profileLayerCosts` turn a model's layers into such a list.
 *
 * Stage k holds layers `[boundaries[k], boundaries[k + 1])`; with ranks·V
 * stages per rank, stage k is the schedule's global stage k.
 *
 * @module
 */

import { checkOptionsObject } from "../../text/nearest.ts";
import { minMaxPartition, segmentCost } from "./_min_max_partition.ts";
import {
  checkNumStages,
  compileTypeRegex,
  effectiveCosts,
  type NormalizedLayer,
  normalizeLayers,
} from "./_partition_input.ts";
import { uniformCounts } from "./_uniform_partition.ts";
import { describeValue, formatShape } from "../../text/describe.ts";

/**
 * One layer as the partitioner sees it: its type name and its cost.
 *
 * @example
 * ```ts
 * import type { CostedLayer } from "@conveyor/core/analysis";
 * const head: CostedLayer = { kind: "Linear", cost: 65_536 };
 * console.log(head.kind);
 * ```
 */
export interface CostedLayer {
  /** Type name of the layer, e.g. `"Linear"`, `"TransformerBlock"`. */
  readonly kind: string;
  /** Cost of the layer (parameters, FLOPs, milliseconds, …): finite, ≥ 0. */
  readonly cost: number;
}

/**
 * What a strategy partitions: `{ kind, cost }` records, or bare costs when
 * no type selection is used.
 */
export type PartitionInput = readonly CostedLayer[] | readonly number[];

/**
 * A partition of layers into stages and how even it is.
 *
 * @example
 * ```ts
 * import { LoadBalancedPartition } from "@conveyor/core/analysis";
 * const r = new LoadBalancedPartition().partition([1, 1, 2], 2);
 * console.log(r.boundaries, r.stageCosts, r.bottleneck, r.imbalance); // [0, 2, 3] [2, 2] 2 1
 * ```
 */
export interface PartitionResult {
  /** `numStages + 1` strictly increasing indices from 0 to the layer count. */
  readonly boundaries: readonly number[];
  /** Cost of each stage (only type-selected layers count, when a selection is set). */
  readonly stageCosts: readonly number[];
  /** The largest stage cost: what limits the pipeline's throughput. */
  readonly bottleneck: number;
  /** `bottleneck / mean stage cost`; 1 is perfect balance (also when all costs are 0). */
  readonly imbalance: number;
}

/**
 * A way to cut layers into stages.
 *
 * @example
 * ```ts
 * import { type PartitionStrategy, UniformPartition } from "@conveyor/core/analysis";
 * const s: PartitionStrategy = new UniformPartition();
 * console.log(s.name, s.partition([1, 2, 3, 4], 2).boundaries); // uniform [0, 2, 4]
 * ```
 */
export interface PartitionStrategy {
  /** Short name for logs and CLIs, e.g. `"uniform"`. */
  readonly name: string;
  /**
   * Cuts `layers` into `numStages` non-empty contiguous stages. Throws a
   * RangeError when `numStages` is not a positive integer, when there are
   * fewer layers than stages, or when a cost is negative or not finite.
   */
  partition(layers: PartitionInput, numStages: number): PartitionResult;
}

/** Options shared by the built-in strategies. */
export interface PartitionOptions {
  /**
   * Only layers whose `kind` matches count (as DeepSpeed's `type:REGEX`);
   * the others cost 0 for balancing and reporting but are still placed. A
   * string compiles case-insensitively. With costs of 1 per layer this is
   * exactly DeepSpeed's rule: balance the number of matching layers.
   */
  readonly typeRegex?: string | RegExp;
}

/** Options of {@linkcode UniformPartition}. */
export interface UniformPartitionOptions extends PartitionOptions {
  /**
   * Count the first stage as already holding this many layers (e.g. 1 for
   * the embedding), so it receives fewer real layers. Integer ≥ 0, default 0.
   */
  readonly firstStageOffset?: number;
  /**
   * Count the last stage as already holding this many layers (e.g. 1 for
   * the head and loss). Integer ≥ 0, default 0.
   */
  readonly lastStageOffset?: number;
}

function checkOffset(name: string, v: unknown): number {
  if (v === undefined) return 0;
  if (typeof v !== "number" || !Number.isInteger(v) || v < 0) {
    throw new RangeError(`${name} must be an integer >= 0, got ${describeValue(v)}`);
  }
  return v;
}

function checkEnoughLayers(numLayers: number, numStages: number): void {
  if (numLayers < numStages) {
    throw new RangeError(
      `cannot cut ${numLayers} layers into ${numStages} stages: every stage needs at least one layer`,
    );
  }
}

function resultOf(costs: readonly number[], boundaries: readonly number[]): PartitionResult {
  const stageCosts: number[] = [];
  for (let k = 0; k + 1 < boundaries.length; k++) {
    stageCosts.push(segmentCost(costs, boundaries[k], boundaries[k + 1]));
  }
  const bottleneck = Math.max(...stageCosts);
  const mean = stageCosts.reduce((a, b) => a + b, 0) / stageCosts.length;
  return {
    boundaries: Object.freeze([...boundaries]),
    stageCosts: Object.freeze(stageCosts),
    bottleneck,
    imbalance: mean === 0 ? 1 : bottleneck / mean,
  };
}

function prepare(
  layers: PartitionInput,
  numStages: number,
  typeRegex: RegExp | undefined,
): number[] {
  checkNumStages(numStages);
  const { layers: norm, hasKinds } = normalizeLayers(layers as readonly unknown[]);
  checkEnoughLayers(norm.length, numStages);
  return effectiveCosts(norm as readonly NormalizedLayer[], hasKinds, typeRegex);
}

/**
 * Checks user-given stage boundaries: integers, `boundaries[0] = 0`, the
 * last equal to `numLayers`, strictly increasing (every stage non-empty),
 * and `numStages + 1` entries when `numStages` is given. Throws a
 * RangeError naming the offending value and the rule.
 *
 * @example
 * ```ts
 * import { validatePartition } from "@conveyor/core/analysis";
 * validatePartition([0, 3, 5], 5, 2); // fine
 * try {
 *   validatePartition([0, 3, 3, 5], 5);
 * } catch (e) {
 *   console.log((e as Error).message); // stage 1 would be empty
 * }
 * ```
 */
export function validatePartition(
  boundaries: readonly number[],
  numLayers: number,
  numStages?: number,
): void {
  if (typeof numLayers !== "number" || !Number.isInteger(numLayers) || numLayers < 0) {
    throw new RangeError(`numLayers must be an integer >= 0, got ${describeValue(numLayers)}`);
  }
  if (numStages !== undefined) checkNumStages(numStages);
  if (!Array.isArray(boundaries)) {
    throw new TypeError(
      `boundaries must be an array of layer indices, got ${describeValue(boundaries)}`,
    );
  }
  if (boundaries.length < 2) {
    throw new RangeError(
      `boundaries must hold at least 2 entries (one stage), got ${formatShape(boundaries)}`,
    );
  }
  if (numStages !== undefined && boundaries.length !== numStages + 1) {
    throw new RangeError(
      `boundaries must hold numStages + 1 = ${numStages + 1} entries, got ${
        describeValue(boundaries.length)
      }`,
    );
  }
  for (let i = 0; i < boundaries.length; i++) {
    const b = boundaries[i];
    if (typeof b !== "number" || !Number.isInteger(b)) {
      throw new RangeError(`boundaries must be integers, got ${describeValue(b)} at index ${i}`);
    }
  }
  if (boundaries[0] !== 0) {
    throw new RangeError(`boundaries must start at 0, got ${describeValue(boundaries[0])}`);
  }
  const last = boundaries[boundaries.length - 1];
  if (last !== numLayers) {
    throw new RangeError(
      `boundaries must end at numLayers = ${numLayers}, got ${describeValue(last)}`,
    );
  }
  for (let i = 1; i < boundaries.length; i++) {
    if (boundaries[i] <= boundaries[i - 1]) {
      throw new RangeError(
        `boundaries must be strictly increasing, got ${boundaries[i - 1]} then ${
          boundaries[i]
        } at index ${i} (stage ${i - 1} would be empty)`,
      );
    }
    if (boundaries[i] > numLayers) {
      throw new RangeError(
        `boundaries must lie within 0…${numLayers}, got ${
          describeValue(boundaries[i])
        } at index ${i}`,
      );
    }
  }
}

/**
 * Costs of a given partition: validates `boundaries` against the layers
 * (see {@linkcode validatePartition}) and reports each stage's cost, the
 * bottleneck and the imbalance.
 *
 * @example
 * ```ts
 * import { evaluatePartition } from "@conveyor/core/analysis";
 * const r = evaluatePartition([4, 1, 1, 2], [0, 1, 4]);
 * console.log(r.stageCosts, r.imbalance); // [4, 4] 1
 * ```
 */
export function evaluatePartition(
  layers: PartitionInput,
  boundaries: readonly number[],
  options: PartitionOptions = {},
): PartitionResult {
  const { layers: norm, hasKinds } = normalizeLayers(layers as readonly unknown[]);
  validatePartition(boundaries, norm.length);
  const re = options.typeRegex === undefined ? undefined : compileTypeRegex(options.typeRegex);
  return resultOf(effectiveCosts(norm, hasKinds, re), boundaries);
}

/**
 * Equal layer counts per stage, whatever the costs (DeepSpeed's `uniform`).
 *
 * Remainder rule: with n layers and k stages, every stage gets ⌊n/k⌋ and
 * the r = n mod k extra layers go to stages spread evenly, stage
 * ⌊(2j+1)·k/(2r)⌋ for j = 0 … r−1 (10 layers in 4 stages: 2, 3, 2, 3).
 *
 * Lighter ends: `firstStageOffset` / `lastStageOffset` count the first /
 * last stage as already holding that many layers (the embedding; the head
 * and loss), levelling count + offset instead; left-over layers go to the
 * stages without an offset first. Every stage keeps at least one layer.
 *
 * @example
 * ```ts
 * import { UniformPartition } from "@conveyor/core/analysis";
 * const costs = new Array(16).fill(1);
 * console.log(new UniformPartition().partition(costs, 4).boundaries); // [0, 4, 8, 12, 16]
 * const ends = new UniformPartition({ firstStageOffset: 1, lastStageOffset: 1 });
 * console.log(ends.partition(costs, 4).boundaries); // [0, 3, 8, 13, 16]
 * ```
 */
export class UniformPartition implements PartitionStrategy {
  /** Always `"uniform"`. */
  readonly name: string = "uniform";
  /** Layers the first stage is counted as already holding. */
  readonly firstStageOffset: number;
  /** Layers the last stage is counted as already holding. */
  readonly lastStageOffset: number;
  readonly #typeRegex: RegExp | undefined;

  /** Validates the options; throws a RangeError naming a bad offset. */
  constructor(options: UniformPartitionOptions = {}) {
    checkOptionsObject(
      options,
      ["typeRegex", "firstStageOffset", "lastStageOffset"],
      "UniformPartition: ",
    );
    this.firstStageOffset = checkOffset("firstStageOffset", options.firstStageOffset);
    this.lastStageOffset = checkOffset("lastStageOffset", options.lastStageOffset);
    this.#typeRegex = options.typeRegex === undefined
      ? undefined
      : compileTypeRegex(options.typeRegex);
  }

  /** Cuts `layers` into `numStages` stages of (nearly) equal layer counts. */
  partition(layers: PartitionInput, numStages: number): PartitionResult {
    const costs = prepare(layers, numStages, this.#typeRegex);
    const counts = uniformCounts(
      costs.length,
      numStages,
      this.firstStageOffset,
      this.lastStageOffset,
    );
    const boundaries = [0];
    for (const c of counts) boundaries.push(boundaries[boundaries.length - 1] + c);
    return resultOf(costs, boundaries);
  }
}

/**
 * Min-max partition: the contiguous cut into non-empty stages whose most
 * expensive stage is as cheap as possible (DeepSpeed's `parameters` and
 * `type:REGEX` methods, depending on the costs given), found exactly by
 * dynamic programming over prefix segments, O(k·n²) time, O(k·n) memory.
 *
 * Ties (several cuts with the same bottleneck) are broken, in order, by the
 * smallest sum of squared stage costs (the other stages as even as
 * possible), the smallest sum of squared layer counts (even layer counts,
 * e.g. where costs are 0), then the lexicographically smallest boundaries.
 *
 * @example
 * ```ts
 * import { LoadBalancedPartition } from "@conveyor/core/analysis";
 * const layers = [
 *   { kind: "Embedding", cost: 4 },
 *   { kind: "Block", cost: 2 },
 *   { kind: "Block", cost: 2 },
 *   { kind: "Block", cost: 2 },
 *   { kind: "Head", cost: 6 },
 * ];
 * const r = new LoadBalancedPartition().partition(layers, 3);
 * console.log(r.boundaries, r.bottleneck); // [0, 2, 4, 5] 6
 * const blocks = new LoadBalancedPartition({ typeRegex: "^block$" }).partition(layers, 3);
 * console.log(blocks.stageCosts); // [2, 2, 2]
 * ```
 */
export class LoadBalancedPartition implements PartitionStrategy {
  /** Always `"load-balanced"`. */
  readonly name: string = "load-balanced";
  readonly #typeRegex: RegExp | undefined;

  /** Validates the options (a bad `typeRegex` is a TypeError). */
  constructor(options: PartitionOptions = {}) {
    checkOptionsObject(options, ["typeRegex"], "LoadBalancedPartition: ");
    this.#typeRegex = options.typeRegex === undefined
      ? undefined
      : compileTypeRegex(options.typeRegex);
  }

  /** Cuts `layers` into `numStages` stages minimising the largest stage cost. */
  partition(layers: PartitionInput, numStages: number): PartitionResult {
    const costs = prepare(layers, numStages, this.#typeRegex);
    return resultOf(costs, minMaxPartition(costs, numStages));
  }
}

/**
 * User-given boundaries, validated against the layers at each call.
 *
 * @example
 * ```ts
 * import { FixedPartition } from "@conveyor/core/analysis";
 * const r = new FixedPartition([0, 1, 3]).partition([5, 2, 2], 2);
 * console.log(r.stageCosts); // [5, 4]
 * ```
 */
export class FixedPartition implements PartitionStrategy {
  /** Always `"fixed"`. */
  readonly name: string = "fixed";
  /** The boundaries given at construction. */
  readonly boundaries: readonly number[];
  readonly #typeRegex: RegExp | undefined;

  /**
   * Keeps a copy of `boundaries`; they are checked against the layer count
   * when `partition` is called. Throws a TypeError when not an array.
   */
  constructor(boundaries: readonly number[], options: PartitionOptions = {}) {
    if (!Array.isArray(boundaries)) {
      throw new TypeError(
        `boundaries must be an array of layer indices, got ${describeValue(boundaries)}`,
      );
    }
    this.boundaries = Object.freeze([...boundaries]);
    this.#typeRegex = options.typeRegex === undefined
      ? undefined
      : compileTypeRegex(options.typeRegex);
  }

  /** Checks the boundaries against `layers` and `numStages` and reports costs. */
  partition(layers: PartitionInput, numStages: number): PartitionResult {
    const costs = prepare(layers, numStages, this.#typeRegex);
    validatePartition(this.boundaries, costs.length, numStages);
    return resultOf(costs, this.boundaries);
  }
}
