/**
 * Rebuilding layers from their {@linkcode LayerSpec}: a registry from kind
 * to factory, holding every built-in layer, to which custom layers add
 * themselves with {@linkcode registerLayer}. Pipeline workers rebuild their
 * stages with {@linkcode layerFromSpec}; a worker imports the user modules
 * named in the pipeline's options first, so custom layers registered at the
 * top level of such a module are known there too.
 *
 * @module
 */

import type { Backend } from "../tensor/mod.ts";
import { CausalSelfAttention } from "./causal_self_attention.ts";
import { Dropout } from "./dropout.ts";
import { Embedding } from "./embedding.ts";
import { GELU } from "./gelu.ts";
import type { Layer, LayerSpec } from "./layer.ts";
import { LayerNorm } from "./layer_norm.ts";
import { Linear } from "./linear.ts";
import { MLP } from "./mlp.ts";
import { ReLU } from "./relu.ts";
import { RMSNorm } from "./rms_norm.ts";
import { Sequential } from "./sequential.ts";
import { TiedHead, tieParameters } from "./tied_head.ts";
import { Residual } from "./residual.ts";
import { SiLU } from "./silu.ts";
import { Tanh } from "./tanh.ts";
import { TokenPositionEmbedding } from "./token_position_embedding.ts";
import { TransformerBlock } from "./transformer_block.ts";
import { describeValue } from "../text/describe.ts";

/**
 * Builds a layer of one kind from its spec's `args` on `backend`;
 * `build` rebuilds nested specs (for composites) on the same backend.
 */
export type LayerFactory = (
  args: Readonly<Record<string, unknown>>,
  backend: Backend,
  build: (spec: LayerSpec) => Layer,
) => Layer;

/** A spec's `args`, read with errors naming the kind and the argument. */
interface Args {
  /** The argument `key`, which must be a number. */
  num(key: string): number;
  /** The argument `key`: undefined, or a number. */
  optNum(key: string): number | undefined;
  /** The arguments as given. */
  readonly raw: Readonly<Record<string, unknown>>;
}

function argsOf(kind: string, raw: Readonly<Record<string, unknown>>): Args {
  const num = (key: string): number => {
    const v = raw[key];
    if (typeof v !== "number") {
      throw new TypeError(
        `layerFromSpec: ${kind}.args.${key} must be a number, got ${describeValue(v)}`,
      );
    }
    return v;
  };
  return { num, optNum: (key) => raw[key] === undefined ? undefined : num(key), raw };
}

function residualFromSpec(a: Args, backend: Backend, build: (spec: LayerSpec) => Layer): Layer {
  const inner = a.raw.inner;
  if (inner === null || typeof inner !== "object" || Array.isArray(inner)) {
    throw new TypeError(`layerFromSpec: Residual.args.inner must be a layer spec`);
  }
  const layer = build(inner as LayerSpec);
  try {
    return new Residual(backend, layer);
  } catch (e) {
    layer.dispose();
    throw e;
  }
}

function sequentialFromSpec(a: Args, _backend: Backend, build: (spec: LayerSpec) => Layer): Layer {
  const { layers, names } = a.raw;
  if (!Array.isArray(layers)) {
    throw new TypeError(`layerFromSpec: Sequential.args.layers must be an array of specs`);
  }
  if (names !== undefined && (!Array.isArray(names) || names.some((n) => typeof n !== "string"))) {
    throw new TypeError(`layerFromSpec: Sequential.args.names must be an array of strings`);
  }
  const built: Layer[] = [];
  try {
    for (const s of layers) built.push(build(s as LayerSpec));
    const seq = new Sequential(built, { names: names as string[] | undefined });
    // A head tied to a parameter of this model shares it (one copy, as the original).
    tieParameters([seq]);
    return seq;
  } catch (e) {
    for (const l of built) l.dispose();
    throw e;
  }
}

/** A built-in kind's factory, reading its args through {@linkcode Args}. */
type BuiltInFactory = (a: Args, be: Backend, build: (spec: LayerSpec) => Layer) => Layer;

const BUILT_IN_FACTORIES: [string, BuiltInFactory][] = [
  ["Linear", (a, be) => {
    if (a.raw.bias !== undefined && typeof a.raw.bias !== "boolean") {
      throw new TypeError(
        `layerFromSpec: Linear.args.bias must be a boolean, got ${describeValue(a.raw.bias)}`,
      );
    }
    return new Linear(be, a.num("inFeatures"), a.num("outFeatures"), {
      bias: a.raw.bias as boolean | undefined,
    });
  }],
  ["ReLU", (_a, be) => new ReLU(be)],
  ["GELU", (_a, be) => new GELU(be)],
  ["Tanh", (_a, be) => new Tanh(be)],
  ["SiLU", (_a, be) => new SiLU(be)],
  ["RMSNorm", (a, be) => new RMSNorm(be, a.num("dim"), { eps: a.optNum("eps") })],
  ["Dropout", (a, be) => new Dropout(be, a.num("p"), { seed: a.optNum("seed") })],
  ["LayerNorm", (a, be) => new LayerNorm(be, a.num("dim"), { eps: a.optNum("eps") })],
  ["Embedding", (a, be) => new Embedding(be, a.num("numEmbeddings"), a.num("dim"))],
  [
    "TokenPositionEmbedding",
    (a, be) => new TokenPositionEmbedding(be, a.num("vocabSize"), a.num("maxLen"), a.num("dim")),
  ],
  ["CausalSelfAttention", (a, be) => new CausalSelfAttention(be, a.num("dim"), a.num("heads"))],
  ["MLP", (a, be) => new MLP(be, a.num("dim"), { hidden: a.optNum("hidden") })],
  [
    "TransformerBlock",
    (a, be) =>
      new TransformerBlock(be, a.num("dim"), a.num("heads"), {
        hidden: a.optNum("hidden"),
        eps: a.optNum("eps"),
      }),
  ],
  ["TiedHead", (a, be) => {
    if (typeof a.raw.tiedTo !== "string") {
      throw new TypeError(
        `layerFromSpec: TiedHead.args.tiedTo must be a string, got ${describeValue(a.raw.tiedTo)}`,
      );
    }
    return new TiedHead(be, a.num("vocabSize"), a.num("dim"), { tiedTo: a.raw.tiedTo });
  }],
  ["Sequential", sequentialFromSpec],
  ["Residual", residualFromSpec],
];

const BUILT_IN: ReadonlyMap<string, LayerFactory> = new Map<string, LayerFactory>(
  BUILT_IN_FACTORIES.map(([kind, f]): [string, LayerFactory] => [
    kind,
    (raw, be, build) => f(argsOf(kind, raw), be, build),
  ]),
);

const custom = new Map<string, LayerFactory>();

/**
 * Registers `factory` for layers of `kind`, so that {@linkcode layerFromSpec}
 * (and so a pipeline worker) can rebuild them. Call it at the top level of
 * the module that defines the layer and list that module in the pipeline's
 * `modules` option. Registering the same factory again is a no-op; a
 * built-in kind, or a kind taken by another factory, is a RangeError.
 *
 * @example
 * ```ts
 * import { CpuBackend, type LayerSpec, type Shape } from "@conveyor/core";
 * import { ops, type Tensor } from "@conveyor/core/tensor";
 * import { LayerBase, type LayerCost, layerFromSpec, registerLayer } from "@conveyor/core/nn";
 * class Scale extends LayerBase {
 *   readonly kind = "Scale";
 *   constructor(be: CpuBackend, readonly factor: number) {
 *     super(be);
 *   }
 *   override spec(): LayerSpec {
 *     return { kind: "Scale", args: { factor: this.factor } };
 *   }
 *   protected outputShapeOf(s: Shape): Shape {
 *     return s;
 *   }
 *   protected costOf(s: Shape): LayerCost {
 *     return { params: 0, flops: s.reduce((a, b) => a * b, 1) };
 *   }
 *   protected forwardImpl(x: Tensor): { y: Tensor } {
 *     return { y: ops.scale(x, this.factor) };
 *   }
 *   protected backwardInputImpl(dy: Tensor): Tensor {
 *     return ops.scale(dy, this.factor);
 *   }
 *   protected backwardWeightImpl(): void {}
 * }
 * registerLayer("Scale", (args, be) => new Scale(be as CpuBackend, args.factor as number));
 * const copy = layerFromSpec({ kind: "Scale", args: { factor: 3 } }, new CpuBackend());
 * console.log(copy.spec?.()); // { kind: "Scale", args: { factor: 3 } }
 * ```
 */
export function registerLayer(kind: string, factory: LayerFactory): void {
  if (typeof kind !== "string" || kind === "") {
    throw new TypeError(
      `registerLayer: kind must be a non-empty string, got ${describeValue(kind)}`,
    );
  }
  if (typeof factory !== "function") {
    throw new TypeError(
      `registerLayer: factory for ${kind} must be a function, got ${describeValue(factory)}`,
    );
  }
  if (BUILT_IN.has(kind)) {
    throw new RangeError(`registerLayer: ${kind} is a built-in layer kind and cannot be replaced`);
  }
  const had = custom.get(kind);
  if (had !== undefined && had !== factory) {
    throw new RangeError(`registerLayer: kind ${kind} is already registered to another factory`);
  }
  custom.set(kind, factory);
}

/**
 * The kinds {@linkcode layerFromSpec} can build: the built-in ones, then
 * those registered, in registration order.
 *
 * @example
 * ```ts
 * import { registeredLayerKinds } from "@conveyor/core/nn";
 * console.log(registeredLayerKinds().includes("TransformerBlock")); // true
 * ```
 */
export function registeredLayerKinds(): string[] {
  return [...BUILT_IN.keys(), ...custom.keys()];
}

/**
 * Builds a fresh layer (new weights, deterministic from seed 0) of the
 * architecture `spec` describes on `backend`; load weights into it with
 * `loadSafetensors`. An unknown kind is a RangeError listing the known
 * ones; a malformed spec or argument is a TypeError or RangeError naming it.
 *
 * @example
 * ```ts
 * import { CpuBackend, createTinyGPT } from "@conveyor/core";
 * import { layerFromSpec } from "@conveyor/core/nn";
 * import { loadSafetensors, saveSafetensors } from "@conveyor/core/format";
 * const be = new CpuBackend();
 * const gpt = createTinyGPT({ vocabSize: 10, seqLen: 4, dim: 8, heads: 2, layers: 1, seed: 3 }, be);
 * const copy = layerFromSpec(JSON.parse(JSON.stringify(gpt.spec())), be);
 * loadSafetensors(copy, await saveSafetensors(gpt)); // same architecture, same weights
 * console.log(copy.parameters().length === gpt.parameters().length); // true
 * gpt.dispose();
 * copy.dispose();
 * ```
 */
export function layerFromSpec(spec: LayerSpec, backend: Backend): Layer {
  if (spec === null || typeof spec !== "object" || typeof spec.kind !== "string") {
    throw new TypeError(
      `layerFromSpec: spec must be an object { kind: string, args }, got ${
        JSON.stringify(spec) ?? String(spec)
      }`,
    );
  }
  const args = spec.args ?? {};
  if (args === null || typeof args !== "object" || Array.isArray(args)) {
    throw new TypeError(
      `layerFromSpec: ${spec.kind}.args must be an object, got ${describeValue(args)}`,
    );
  }
  const factory = BUILT_IN.get(spec.kind) ?? custom.get(spec.kind);
  if (factory === undefined) {
    throw new RangeError(
      `layerFromSpec: unknown layer kind ${JSON.stringify(spec.kind)}; known: ${
        registeredLayerKinds().join(", ")
      }. A custom layer must be registered with registerLayer(kind, factory) at the top level of a ` +
        "module, and pipeline workers must import that module: list its URL in the modules option of " +
        'PipelineParallelModel.create (modules: [new URL("./my_layers.ts", import.meta.url).href])',
    );
  }
  return factory(args, backend, (s) => layerFromSpec(s, backend));
}
