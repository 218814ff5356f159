/**
 * Activation checkpointing configuration: which layers of a stage keep what
 * their backward needs, and which are recomputed from a stored segment input.
 *
 * Memory for L layers checkpointed every k layers is about
 * (L/k)·A_in + k·A_layer, smallest near k = √L (Chen et al. 2016).
 *
 * @module
 */

import { didYouMean } from "../../text/nearest.ts";
import { describeValue } from "../../text/describe.ts";

/**
 * What the backward recomputes:
 * - `"none"`: nothing; every layer keeps its state (checkpointing off).
 * - `"selective"`: expensive (matmul-heavy) layers keep their state and
 *   their output; cheap ones (activations, norms) are recomputed.
 * - `"full"`: only each segment's input is kept; the whole segment is
 *   recomputed before its backward.
 */
export type RecomputePolicy = "none" | "selective" | "full";

/** Options of {@linkcode ActivationCheckpointConfig}; every field is optional. */
export interface ActivationCheckpointOptions {
  /** Master switch. Default: true when `recompute` is given and not "none", else false. */
  readonly enabled?: boolean;
  /** Segment length: one stored input per this many layers. Integer ≥ 1, default 1. */
  readonly everyNLayers?: number;
  /**
   * Most micro-batches whose activations one stage may hold at once (from
   * forward until the last backward pass that needs them), in the
   * schedule's unit of one stage-micro-batch. Integer ≥ 0; 0 = no cap
   * (default). Applies whether or not checkpointing is enabled.
   */
  readonly maxActivationsInMemory?: number;
  /** Default `"full"` when enabled, `"none"` when disabled. */
  readonly recompute?: RecomputePolicy;
  /**
   * Whether the stage's first layer takes part in checkpointing (default
   * true). When false it runs normally and keeps its state — worth it for an
   * embedding, whose input (token ids) is small and whose state is cheap —
   * and segments start at the second layer.
   */
  readonly checkpointFirstLayer?: boolean;
  /**
   * Which layer kinds `"selective"` treats as expensive (kept, not
   * recomputed). A string compiles case-insensitively. Default
   * {@linkcode DEFAULT_EXPENSIVE_KINDS}.
   */
  readonly expensiveKinds?: string | RegExp;
}

/**
 * Layer kinds `"selective"` keeps by default: matmul-heavy layers (Linear,
 * attention, MLP and Transformer blocks, matmul). Activations, norms and
 * embedding gathers are cheap to recompute.
 *
 * @example
 * ```ts
 * import { DEFAULT_EXPENSIVE_KINDS } from "@conveyor/core/analysis";
 * console.log(DEFAULT_EXPENSIVE_KINDS.test("Linear"), DEFAULT_EXPENSIVE_KINDS.test("GELU"));
 * ```
 */
export const DEFAULT_EXPENSIVE_KINDS: RegExp = /linear|attention|attn|mlp|transformer|matmul/i;

/** A run of consecutive layers of a stage recomputed from its stored input. */
export interface CheckpointSegment {
  /** First layer (stage-local index); its input is stored. */
  readonly start: number;
  /** One past the last layer. */
  readonly end: number;
}

/**
 * How one stage's layers run under a checkpoint config (stage-local indices).
 *
 * Forward: layer i runs with its state saved iff `keep[i]`; the input of a
 * segment is stored when its first layer is recomputed, and so is the
 * output of layer i where `keepOutput[i]` (a kept layer whose successor in
 * the segment is recomputed: the recompute starts there instead of at the
 * segment input).
 * Backward of a segment: recompute the layers with `keep[i] = false` from
 * the nearest stored tensor of the same micro-batch, then run the backward
 * passes from the segment's last layer to its first.
 */
export interface StageCheckpointPlan {
  /** Checkpointed segments, in order, disjoint; layers outside keep their state. */
  readonly segments: readonly CheckpointSegment[];
  /** Per layer: its forward state is kept (not recomputed). */
  readonly keep: readonly boolean[];
  /** Per layer: its output is stored as a recompute starting point. */
  readonly keepOutput: readonly boolean[];
}

const KNOWN_OPTIONS = new Set([
  "enabled",
  "everyNLayers",
  "maxActivationsInMemory",
  "recompute",
  "checkpointFirstLayer",
  "expensiveKinds",
]);
const POLICIES: readonly RecomputePolicy[] = ["none", "selective", "full"];

function checkBoolean(name: string, v: unknown, dflt: boolean): boolean {
  if (v === undefined) return dflt;
  if (typeof v !== "boolean") {
    throw new TypeError(`${name} must be a boolean, got ${JSON.stringify(v) ?? String(v)}`);
  }
  return v;
}

function checkInteger(name: string, v: unknown, min: number, dflt: number): number {
  if (v === undefined) return dflt;
  if (typeof v !== "number" || !Number.isInteger(v) || v < min) {
    throw new RangeError(`${name} must be an integer >= ${min}, got ${describeValue(v)}`);
  }
  return v;
}

/**
 * A validated activation checkpointing configuration. Every invalid value
 * throws at construction (RangeError for out-of-range numbers and unknown
 * policies, TypeError for wrong types and unknown option names), naming the
 * value; so do contradictions (`enabled: true` with `recompute: "none"`,
 * `enabled: false` with another policy).
 *
 * @example
 * ```ts
 * import { ActivationCheckpointConfig } from "@conveyor/core";
 * const cfg = new ActivationCheckpointConfig({ enabled: true, everyNLayers: 2 });
 * const plan = cfg.plan(["Linear", "GELU", "Linear", "GELU", "Linear"]);
 * console.log(plan.segments); // [{start:0,end:2},{start:2,end:4},{start:4,end:5}]
 * ```
 */
export class ActivationCheckpointConfig {
  /** Whether any layer is recomputed. */
  readonly enabled: boolean;
  /** Segment length in layers (≥ 1). */
  readonly everyNLayers: number;
  /** Cap on micro-batches held per stage at once; 0 = no cap. */
  readonly maxActivationsInMemory: number;
  /** What the backward recomputes. */
  readonly recompute: RecomputePolicy;
  /** Whether the stage's first layer is checkpointed too. */
  readonly checkpointFirstLayer: boolean;
  /** Kinds that `"selective"` keeps rather than recomputes. */
  readonly expensiveKinds: RegExp;

  /** Validates `options`; see the class documentation for the errors. */
  constructor(options: ActivationCheckpointOptions = {}) {
    if (options === null || typeof options !== "object") {
      throw new TypeError(`options must be an object, got ${describeValue(options)}`);
    }
    for (const key of Object.keys(options)) {
      if (!KNOWN_OPTIONS.has(key)) {
        throw new TypeError(
          `unknown checkpoint option ${JSON.stringify(key)}${
            didYouMean(key, [...KNOWN_OPTIONS])
          }; known: ${[...KNOWN_OPTIONS].join(", ")}`,
        );
      }
    }
    const recompute = options.recompute;
    if (recompute !== undefined && !POLICIES.includes(recompute)) {
      throw new RangeError(
        `recompute must be "none", "selective" or "full", got ${
          JSON.stringify(recompute) ?? String(recompute)
        }`,
      );
    }
    const enabled = checkBoolean(
      "enabled",
      options.enabled,
      recompute !== undefined && recompute !== "none",
    );
    if (enabled && recompute === "none") {
      throw new RangeError(
        'recompute "none" contradicts enabled: true; use "selective" or "full", or enabled: false',
      );
    }
    if (!enabled && recompute !== undefined && recompute !== "none") {
      throw new RangeError(
        `recompute ${JSON.stringify(recompute)} contradicts enabled: false; use enabled: true`,
      );
    }
    this.enabled = enabled;
    this.recompute = recompute ?? (enabled ? "full" : "none");
    this.everyNLayers = checkInteger("everyNLayers", options.everyNLayers, 1, 1);
    this.maxActivationsInMemory = checkInteger(
      "maxActivationsInMemory",
      options.maxActivationsInMemory,
      0,
      0,
    );
    this.checkpointFirstLayer = checkBoolean(
      "checkpointFirstLayer",
      options.checkpointFirstLayer,
      true,
    );
    const kinds = options.expensiveKinds;
    if (kinds === undefined) this.expensiveKinds = DEFAULT_EXPENSIVE_KINDS;
    else if (kinds instanceof RegExp) {
      this.expensiveKinds = new RegExp(kinds.source, kinds.flags.replace(/[gy]/g, ""));
    } else if (typeof kinds === "string") {
      try {
        this.expensiveKinds = new RegExp(kinds, "i");
      } catch (e) {
        throw new TypeError(
          `expensiveKinds must be a valid regular expression, got ${JSON.stringify(kinds)}: ${
            (e as Error).message
          }`,
        );
      }
    } else {
      throw new TypeError(
        `expensiveKinds must be a string or a RegExp, got ${describeValue(kinds)}`,
      );
    }
    Object.freeze(this);
  }

  /**
   * Checkpointing off: every layer keeps its state.
   *
   * @example
   * ```ts
   * import { ActivationCheckpointConfig } from "@conveyor/core";
   * console.log(ActivationCheckpointConfig.disabled().enabled); // false
   * ```
   */
  static disabled(): ActivationCheckpointConfig {
    return new ActivationCheckpointConfig({ enabled: false });
  }

  /**
   * Whether `"selective"` keeps a layer of this kind (matmul-heavy).
   *
   * @example
   * ```ts
   * import { ActivationCheckpointConfig } from "@conveyor/core";
   * const cfg = new ActivationCheckpointConfig({ recompute: "selective" });
   * console.log(cfg.isExpensive("Linear"), cfg.isExpensive("LayerNorm")); // true false
   * ```
   */
  isExpensive(kind: string): boolean {
    return this.expensiveKinds.test(kind);
  }

  /**
   * The plan for a stage whose layers have these kinds, in order. Segments
   * are `everyNLayers` long from the first checkpointed layer (the last may
   * be shorter); under `"selective"` a segment whose layers are all kept is
   * dropped, as it has nothing to recompute.
   *
   * @example
   * ```ts
   * import { ActivationCheckpointConfig } from "@conveyor/core";
   * const cfg = new ActivationCheckpointConfig({ recompute: "selective", everyNLayers: 3 });
   * const p = cfg.plan(["Linear", "GELU", "LayerNorm"]);
   * console.log(p.keep, p.keepOutput); // [true, false, false] [true, false, false]
   * ```
   */
  plan(kinds: readonly string[]): StageCheckpointPlan {
    if (!Array.isArray(kinds)) {
      throw new TypeError(`kinds must be an array of layer kinds, got ${describeValue(kinds)}`);
    }
    const n = kinds.length;
    const keep = new Array<boolean>(n).fill(true);
    const keepOutput = new Array<boolean>(n).fill(false);
    const segments: CheckpointSegment[] = [];
    if (!this.enabled) return { segments, keep, keepOutput };
    const first = this.checkpointFirstLayer ? 0 : 1;
    for (let start = first; start < n; start += this.everyNLayers) {
      const end = Math.min(n, start + this.everyNLayers);
      let recomputed = 0;
      for (let i = start; i < end; i++) {
        keep[i] = this.recompute === "selective" && this.isExpensive(kinds[i]);
        if (!keep[i]) recomputed++;
      }
      if (recomputed === 0) continue;
      segments.push({ start, end });
      for (let i = start; i + 1 < end; i++) keepOutput[i] = keep[i] && !keep[i + 1];
    }
    return { segments, keep, keepOutput };
  }
}
