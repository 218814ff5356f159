// What the built-in blocks made of sublayers (MLP, TransformerBlock) share:
// no state of their own, a forward that hands key, save and the training
// context on to every sublayer, and a W that runs the sublayers' W passes,
// the last added first. Not exported from the package.

import type { Tensor } from "../tensor/mod.ts";
import { subOptions } from "./_util.ts";
import { LayerBase } from "./layer_base.ts";
import type { ForwardContext, ForwardOptions, Layer, StateKey } from "./layer.ts";

/**
 * @internal Base of the blocks made of sublayers: a subclass adds them
 * with `addSublayer` and implements `forwardBlock` and `backwardInputImpl`.
 */
export abstract class Block extends LayerBase<Record<string, never>> {
  readonly #sublayers: Layer[] = [];

  /** `addChild`, and the block's W runs the sublayer's W (the last added first). */
  protected addSublayer<L extends Layer>(name: string, layer: L): L {
    this.#sublayers.push(layer);
    return this.addChild(name, layer);
  }

  /** `y` from `x`, passing `o` (key, save, training context) to every sublayer's forward. */
  protected abstract forwardBlock(x: Tensor, o: ForwardOptions): Tensor;

  /** @ignore */
  protected forwardImpl(
    x: Tensor,
    key: StateKey,
    save: boolean,
    ctx: ForwardContext,
  ): { y: Tensor } {
    return { y: this.forwardBlock(x, subOptions(key, save, ctx)) };
  }

  /** @ignore */
  protected backwardWeightImpl(_s: unknown, key: StateKey): void {
    for (let i = this.#sublayers.length - 1; i >= 0; i--) this.#sublayers[i].backwardWeight(key);
  }
}
