/**
 * The Transformer feed-forward block: Linear → GELU → Linear.
 *
 * @module
 */

import type { Backend, Shape, Tensor } from "../tensor/mod.ts";
import { checkLayerOptions, checkPositiveInt, fmtShape, initRng } from "./_util.ts";
import { Block } from "./_block.ts";
import { GELU } from "./gelu.ts";
import type { ForwardOptions, InitOptions, LayerCost, LayerSpec, StateKey } from "./layer.ts";
import { Linear } from "./linear.ts";

/** Options of {@linkcode MLP}. */
export interface MLPOptions extends InitOptions {
  /** Hidden width (default `4 · dim`). */
  readonly hidden?: number;
}

/**
 * Feed-forward block `proj(gelu(fc(x)))` over the last dimension: input
 * `[..., dim]`, hidden `[..., hidden]`, output `[..., dim]`. Parameters
 * `fc.weight`, `fc.bias`, `proj.weight`, `proj.bias`. I runs the sublayers'
 * I passes in reverse order; W runs each Linear's W.
 *
 * @example
 * ```ts
 * import { CpuBackend, MLP } from "@conveyor/core";
 * const be = new CpuBackend();
 * const mlp = new MLP(be, 4, { hidden: 8, seed: 2 });
 * const x = be.zeros([2, 4]);
 * const y = mlp.forward(x, { save: false });
 * console.log(y.shape); // [2, 4]
 * x.dispose();
 * y.dispose();
 * mlp.dispose();
 * ```
 */
export class MLP extends Block {
  /** Always `"MLP"`. */
  readonly kind: string = "MLP";
  /** Input and output width. */
  readonly dim: number;
  /** Hidden width. */
  readonly hidden: number;
  /** dim → hidden. */
  readonly fc: Linear;
  /** The activation. */
  readonly act: GELU;
  /** hidden → dim. */
  readonly proj: Linear;

  /** Creates the block with weights from `opts.rng` (or `opts.seed`). */
  constructor(backend: Backend, dim: number, opts?: MLPOptions) {
    super(backend);
    checkLayerOptions("MLP", opts, ["seed", "rng", "hidden"]);
    checkPositiveInt("MLP", "dim", dim);
    const hidden = opts?.hidden ?? 4 * dim;
    checkPositiveInt("MLP", "hidden", hidden);
    this.dim = dim;
    this.hidden = hidden;
    const rng = initRng(opts);
    this.fc = this.addSublayer("fc", new Linear(backend, dim, hidden, { rng }));
    this.act = this.addSublayer("act", new GELU(backend));
    this.proj = this.addSublayer("proj", new Linear(backend, hidden, dim, { rng }));
  }

  /** The architecture for `layerFromSpec` (weights are not part of it). */
  override spec(): LayerSpec {
    return { kind: "MLP", args: { dim: this.dim, hidden: this.hidden } };
  }

  /** @ignore */
  protected outputShapeOf(s: Shape): Shape {
    if (s.length < 1 || s[s.length - 1] !== this.dim) {
      throw new RangeError(`MLP: input width must be dim = ${this.dim}, got shape ${fmtShape(s)}`);
    }
    return [...s];
  }

  /** @ignore */
  protected costOf(s: Shape): LayerCost {
    const hs = [...s.slice(0, -1), this.hidden];
    const a = this.fc.cost(s), b = this.act.cost(hs), c = this.proj.cost(hs);
    return { params: a.params + c.params, flops: a.flops + b.flops + c.flops };
  }

  /** @ignore */
  protected forwardBlock(x: Tensor, o: ForwardOptions): Tensor {
    const h = this.fc.forward(x, o); // [..., hidden]
    const g = this.act.forward(h, o); // [..., hidden]
    h.dispose();
    const y = this.proj.forward(g, o); // [..., dim]
    g.dispose();
    return y;
  }

  /** @ignore */
  protected backwardInputImpl(dy: Tensor, _s: unknown, key: StateKey): Tensor {
    const dg = this.proj.backwardInput(dy, key); // [..., hidden]
    const dh = this.act.backwardInput(dg, key); // [..., hidden]
    dg.dispose();
    const dx = this.fc.backwardInput(dh, key); // [..., dim]
    dh.dispose();
    return dx;
  }
}
