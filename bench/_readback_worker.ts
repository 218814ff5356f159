// Worker side of bench/readback.ts's hand-over rows: two workers, each with
// its own WebGPU device, pass a tensor back and forth through a
// MessagePort. Each hop is one hand-over as a pipeline makes it: the upload
// of what arrived, an op on the device, the read-back, the transfer to the
// peer. The "driver" times round trips; the "echo" answers each arrival.
// Not a bench by itself.

import { WebGPUBackend } from "../src/tensor/webgpu/backend.ts";
import * as ops from "../src/tensor/ops.ts";

interface Init {
  readonly type: "init";
  readonly role: "driver" | "echo";
  readonly port: MessagePort;
  readonly readPath: "auto" | "awaited";
}
interface Go {
  readonly type: "go";
  readonly floats: number;
  readonly trips: number;
}

const scope = globalThis as unknown as {
  onmessage: ((e: MessageEvent<Init | Go>) => void) | null;
  postMessage(m: unknown): void;
};

let port: MessagePort;
let be: WebGPUBackend;
let arrived: ((a: Float32Array) => void) | null = null;

// Uploads, computes, reads back and sends on: one hand-over.
async function hop(data: Float32Array): Promise<void> {
  const x = be.fromData(data, [data.length]);
  const y = ops.scale(x, 1);
  x.dispose();
  const out = y.tryToArraySync() ?? await y.toArray();
  y.dispose();
  port.postMessage(out, [out.buffer as ArrayBuffer]);
}

function roundTrip(data: Float32Array): Promise<Float32Array> {
  const back = new Promise<Float32Array>((resolve) => arrived = resolve);
  return hop(data).then(() => back);
}

scope.onmessage = async (e) => {
  const m = e.data;
  if (m.type === "init") {
    port = m.port;
    be = await WebGPUBackend.create({ matmul: "default", readPath: m.readPath });
    port.onmessage = (ev: MessageEvent<Float32Array>) => {
      if (m.role === "echo") {
        hop(ev.data);
        return;
      }
      const r = arrived;
      arrived = null;
      r?.(ev.data);
    };
    scope.postMessage({ type: "ready", readPath: be.readPath });
    return;
  }
  // The driver: two hand-overs per round trip.
  await roundTrip(new Float32Array(m.floats)); // warm: the op's pipelines compile
  const ms: number[] = [];
  for (let i = 0; i < m.trips; i++) {
    const t0 = performance.now();
    const back = await roundTrip(new Float32Array(m.floats).fill(i));
    if (back[0] !== i) throw new Error(`hand-over ${i} came back as ${back[0]}`);
    ms.push((performance.now() - t0) / 2);
  }
  scope.postMessage({ type: "done", ms });
};
