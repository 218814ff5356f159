/**
 * The fast CPU backend's kernels: the WebAssembly module of
 * `kernels/wasm/` instantiated over the backend's shared memory
 * ({@linkcode WasmHeap}), its threads ({@linkcode ThreadPool}), and one
 * typed method per kernel. Operands are addresses in the memory: the
 * tensors' own storage, never a copy.
 *
 * A call runs on the pool's threads when its work passes a threshold
 * (below it, waking the workers costs more than they save), else on the
 * calling thread. Either way each output is computed by the same
 * arithmetic (the kernels' tasks never depend on the thread count), so
 * the bits are the same.
 *
 * @module
 */

import type { AdamWParams, BinaryOp, Shape, UnaryGradOp, UnaryOp } from "../backend.ts";
import { BINARY_OPS, UNARY_GRAD_OPS, UNARY_OPS } from "../_elementwise_ops.ts";
import type { CpuKernels } from "./_kernels.ts";
import { binaryInto, type Operand, unaryInto } from "./_elementwise.ts";
import { permuteInto, permutePlan } from "./_layout.ts";
import { broadcastPlan } from "../_broadcast.ts";
import type { WasmKernelModule } from "./_wasm_module.ts";
import { WasmHeap } from "./_wasm_heap.ts";
import { CONTROL_BYTES, ThreadPool } from "./_thread_pool.ts";

type Kernel = (job: number, tid: number) => void;

const NAMES = [
  "matmul",
  "unary",
  "unary_backward",
  "adamw",
  "softmax",
  "softmax_backward",
  "layer_norm",
  "layer_norm_backward_input",
  "sum_rows",
  "layer_norm_backward_weight",
  "add_bias",
  "binary",
  "permute",
] as const;
type Name = typeof NAMES[number];
// Each kernel's index in NAMES, as the pool's workers call it.
const INDEX = Object.fromEntries(NAMES.map((n, i) => [n, i])) as Record<Name, number>;

// `xs` (at most MAX_RANK extents or strides) padded with zeros to MAX_RANK.
function pad(xs: readonly number[]): number[] {
  return [...xs, ...new Array<number>(MAX_RANK - xs.length).fill(0)];
}

// The Job struct of kernels/wasm/_simd.h: 32 ints, 8 floats at byte 128,
// the task counter at byte 160.
const JOB_BYTES = 192;
const MAX_RANK = 6;
const STACK_BYTES = 65536;
// Work (multiply-adds or values touched) past which a call uses the
// threads: waking a sleeping worker takes tens of microseconds.
const MATMUL_PARALLEL_WORK = 1 << 19;
const ELEMENTWISE_PARALLEL_WORK = 1 << 16;

/**
 * Rows of a matmul task (the kernel's MC): the largest multiple of 6 up to
 * 384 that still cuts the product into at least 2 tasks a thread (each
 * task packs its block of B again: fewer, taller tasks pack less). The
 * bits of the product do not depend on it.
 */
export function matmulRowBlock(batch: number, m: number, n: number, threads: number): number {
  if (threads === 1) return 384;
  const nBlocks = Math.ceil(n / 256);
  for (let mc = 384; mc > 48; mc -= 48) {
    if (batch * Math.ceil(m / mc) * nBlocks >= 2 * threads) return mc;
  }
  return 48;
}

/** The kernels of one fast CPU backend. */
export class WasmKernels implements CpuKernels {
  /** The memory the tensors live in, and its allocator. */
  readonly heap: WasmHeap;
  /** Threads that run a kernel (the calling one included). */
  readonly threads: number;
  /** Which build of the kernels runs. */
  readonly variant: WasmKernelModule["variant"];
  readonly #fns: Record<Name, Kernel>;
  readonly #pool: ThreadPool;
  readonly #job: number;
  readonly #ji: Int32Array;
  readonly #jf: Float32Array;
  readonly #counter: Int32Array;
  readonly #scratchFloats: number;
  #scratch = 0;

  /** Kernels of `compiled` over a fresh heap, run on `threads` threads. */
  constructor(compiled: WasmKernelModule, threads: number, maxIdleBytes: number) {
    const probe = new WebAssembly.Instance(compiled.module, {
      env: { memory: new WebAssembly.Memory({ initial: 2, maximum: 2, shared: true }) },
    });
    const base = (probe.exports.__heap_base as WebAssembly.Global).value as number;
    this.heap = new WasmHeap(base, maxIdleBytes);
    const { exports } = new WebAssembly.Instance(compiled.module, {
      env: { memory: this.heap.memory },
    });
    this.#fns = Object.fromEntries(NAMES.map((n) => [n, exports[n] as Kernel])) as Record<
      Name,
      Kernel
    >;
    this.#scratchFloats = (exports.matmul_scratch_floats as () => number)();
    this.threads = threads;
    this.variant = compiled.variant;
    const control = this.heap.alloc(CONTROL_BYTES, true);
    this.#job = this.heap.alloc(JOB_BYTES, true);
    this.#ji = new Int32Array(this.heap.buffer, this.#job, 32);
    this.#jf = new Float32Array(this.heap.buffer, this.#job + 128, 8);
    this.#counter = new Int32Array(this.heap.buffer, this.#job + 160, 1);
    const stacks: number[] = [];
    for (let t = 1; t < threads; t++) {
      stacks.push(this.heap.alloc(STACK_BYTES, false) + STACK_BYTES);
    }
    this.#pool = new ThreadPool({
      memory: this.heap.memory,
      module: compiled.module,
      names: NAMES,
      control,
      stacks,
    });
  }

  /** Ends the pool's workers when `owner` is collected unclosed. */
  watch(owner: object): void {
    this.#pool.watch(owner);
  }

  /** Ends the threads; the memory goes with the last view of it. */
  close(): void {
    this.#pool.close();
    this.heap.trim();
  }

  // Writes the job's integers and floats, resets its task counter, and
  // runs kernel `name` on the threads when `work` is large enough.
  #run(name: Name, work: number, ints: readonly number[], floats: readonly number[] = []): void {
    const ji = this.#ji, jf = this.#jf;
    for (let k = 0; k < ints.length; k++) ji[k] = ints[k];
    for (let k = 0; k < floats.length; k++) jf[k] = floats[k];
    Atomics.store(this.#counter, 0, 0);
    const fn = this.#fns[name];
    if (
      this.threads > 1 &&
      work >= (name === "matmul" ? MATMUL_PARALLEL_WORK : ELEMENTWISE_PARALLEL_WORK)
    ) {
      this.#pool.run(INDEX[name], this.#job, fn);
    } else {
      fn(this.#job, 0);
    }
  }

  matmul(
    A: Float32Array,
    B: Float32Array,
    C: Float32Array,
    batch: number,
    M: number,
    K: number,
    N: number,
    transA: boolean,
    transB: boolean,
    bShared: boolean,
  ): void {
    if (this.#scratch === 0) {
      this.#scratch = this.heap.alloc(this.threads * this.#scratchFloats * 4, false);
    }
    const ints = [A.byteOffset, B.byteOffset, C.byteOffset, batch, M, K, N];
    const work = batch * M * N * Math.max(K, 1);
    const threads = this.threads > 1 && work >= MATMUL_PARALLEL_WORK ? this.threads : 1;
    this.#run("matmul", work, [
      ...ints,
      +transA,
      +transB,
      +bShared,
      this.#scratch,
      matmulRowBlock(batch, M, N, threads),
    ]);
  }

  addBias(X: Float32Array, Bv: Float32Array, rows: number, n: number, O: Float32Array): void {
    this.#run("add_bias", rows * n, [X.byteOffset, Bv.byteOffset, O.byteOffset, rows, n]);
  }

  unary(op: UnaryOp, X: Float32Array, O: Float32Array): void {
    // log has no kernel: the reference loop, on the same memory.
    if (op === "log") unaryInto(op, X, O);
    else {this.#run("unary", 8 * O.length, [
        UNARY_OPS[op].code,
        X.byteOffset,
        O.byteOffset,
        O.length,
      ]);}
  }

  unaryBackward(op: UnaryGradOp, V: Float32Array, G: Float32Array, O: Float32Array): void {
    const code = UNARY_GRAD_OPS[op].code;
    this.#run("unary_backward", 8 * O.length, [
      code,
      V.byteOffset,
      G.byteOffset,
      O.byteOffset,
      O.length,
    ]);
  }

  softmax(X: Float32Array, rows: number, n: number, causal: boolean, O: Float32Array): void {
    this.#run("softmax", 4 * rows * n, [X.byteOffset, O.byteOffset, rows, n, +causal]);
  }

  softmaxBackward(
    Y: Float32Array,
    G: Float32Array,
    rows: number,
    n: number,
    O: Float32Array,
  ): void {
    this.#run("softmax_backward", 2 * rows * n, [
      Y.byteOffset,
      G.byteOffset,
      O.byteOffset,
      rows,
      n,
    ]);
  }

  layerNorm(
    X: Float32Array,
    Gm: Float32Array,
    Bt: Float32Array,
    eps: number,
    rows: number,
    n: number,
    Y: Float32Array,
    Mn: Float32Array,
    Rs: Float32Array,
  ): void {
    const at = [X, Gm, Bt, Y, Mn, Rs].map((a) => a.byteOffset);
    this.#run("layer_norm", 3 * rows * n, [...at, rows, n], [eps]);
  }

  layerNormBackwardInput(
    G: Float32Array,
    X: Float32Array,
    Mn: Float32Array,
    Rs: Float32Array,
    Gm: Float32Array,
    rows: number,
    n: number,
    O: Float32Array,
  ): void {
    const at = [G, X, Mn, Rs, Gm, O].map((a) => a.byteOffset);
    this.#run("layer_norm_backward_input", 3 * rows * n, [...at, rows, n]);
  }

  layerNormBackwardWeight(
    G: Float32Array,
    X: Float32Array,
    Mn: Float32Array,
    Rs: Float32Array,
    rows: number,
    n: number,
    DG: Float32Array,
    DB: Float32Array,
  ): void {
    const at = [G, X, Mn, Rs, DG, DB].map((a) => a.byteOffset);
    this.#run("layer_norm_backward_weight", 2 * rows * n, [...at, rows, n]);
  }

  sumRows(X: Float32Array, rows: number, n: number, O: Float32Array): void {
    this.#run("sum_rows", rows * n, [X.byteOffset, O.byteOffset, rows, n]);
  }

  binary(op: BinaryOp, a: Operand, b: Operand, out: Shape, O: Float32Array): void {
    const plan = broadcastPlan(out, [a.shape, b.shape]);
    const rank = plan.shape.length;
    if (rank === 0 || rank > MAX_RANK) {
      binaryInto(op, a, b, out, O);
      return;
    }
    this.#run("binary", 2 * O.length, [
      BINARY_OPS[op].code,
      a.data.byteOffset,
      b.data.byteOffset,
      O.byteOffset,
      rank,
      ...pad(plan.shape),
      ...pad(plan.strides[0]),
      ...pad(plan.strides[1]),
    ]);
  }

  permute(X: Float32Array, shape: Shape, perm: readonly number[], O: Float32Array): void {
    const { shape: outShape, strides } = permutePlan(shape, perm);
    const rank = outShape.length;
    if (rank === 0 || rank > MAX_RANK || O.length === 0) {
      permuteInto(X, shape, perm, O);
      return;
    }
    this.#run("permute", O.length, [
      X.byteOffset,
      O.byteOffset,
      rank,
      ...pad(outShape),
      ...pad(strides),
    ]);
  }

  adamw(P: Float32Array, G: Float32Array, M: Float32Array, V: Float32Array, hp: AdamWParams): void {
    const { lr, beta1, beta2, eps, weightDecay, step } = hp;
    const bc = [1 - Math.pow(beta1, step), 1 - Math.pow(beta2, step)];
    const at = [P, G, M, V].map((a) => a.byteOffset);
    this.#run("adamw", 4 * P.length, [...at, P.length], [
      lr,
      beta1,
      beta2,
      eps,
      weightDecay,
      ...bc,
    ]);
  }
}
