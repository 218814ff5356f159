/**
 * Data for training scripts: a character tokenizer, a small built-in text
 * ({@linkcode TINY_CORPUS}), random token windows ({@linkcode sampleBatch})
 * and a shuffled, resumable dataset of arrays ({@linkcode ArrayDataset}).
 * Their batches are the plain `{ shape, data }` values that
 * `PipelineParallelModel.trainStep` takes.
 *
 * @example Tokenize text and sample a batch of next-token windows
 * ```ts
 * import assert from "node:assert/strict";
 * import { CharTokenizer, Rng, sampleBatch } from "@conveyor/core/data";
 * const text = "hello world, hello pipeline";
 * const tok = CharTokenizer.fromText(text);
 * const ids = tok.encode(text);
 * assert.equal(tok.decode(ids), text);
 * const batch = sampleBatch(ids, 2, 4, new Rng(1));
 * assert.deepEqual(batch.shape, [2, 4]);
 * assert.equal(batch.targets[0], batch.inputs[1]); // the next token
 * ```
 *
 * @module
 */

export { CharTokenizer } from "./src/nn/char_tokenizer.ts";
export { BPETokenizer } from "./src/nn/bpe_tokenizer.ts";
export { sampleBatch, type TokenBatch } from "./src/nn/sample_batch.ts";
export {
  type ArrayBatch,
  ArrayDataset,
  type ArrayDatasetOptions,
  type DatasetPosition,
} from "./src/nn/array_dataset.ts";
export { TINY_CORPUS } from "./src/nn/data/tiny_corpus.ts";
// The main entry point's types that this one's API names.
export { Rng, type RngState } from "./src/tensor/random.ts";
export type { Shape } from "./src/tensor/backend.ts";
export { shardBatch } from "./src/pipeline/model/data_shards.ts";
export type { TrainingBatch } from "./src/pipeline/model/batch.ts";
