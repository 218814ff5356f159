/**
 * Hand-made parameters for optimizer tests.
 *
 * @module
 */

import type { Backend } from "../../src/tensor/mod.ts";
import type { Parameter } from "../../src/nn/layer.ts";
import { lcgData } from "../tensor/_helpers.ts";

/** A parameter with values and gradient drawn from `seed`. */
export function param(be: Backend, name: string, n: number, seed: number): Parameter {
  return {
    name,
    value: be.fromData(lcgData(n, seed), [n]),
    grad: be.fromData(lcgData(n, seed + 100, -2, 2), [n]),
  };
}
