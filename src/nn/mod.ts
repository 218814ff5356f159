/**
 * Layers with a split backward, losses, optimizers and safetensors I/O.
 *
 * @module
 */

export {};
