// One matmul tuning for all ranks: workers have no tuning cache (no
// localStorage), so each would time the candidates itself at start-up, all at
// once on shared cores, and could pick different kernels.

import type { MatmulConfig } from "../../tensor/mod.ts";
import type { BackendKind } from "../../tensor/create_backend.ts";
import { WebGPUBackend } from "../../tensor/webgpu/mod.ts";

/**
 * The large-matmul variant for ranks that will create a `kind` backend, tuned
 * in this thread (or taken from its cache), or undefined where they will not
 * use WebGPU: `"cpu"`, or no adapter here (then `"auto"` ranks fall back to
 * the CPU and `"webgpu"` ranks fail with their own error, as without this).
 */
export async function tuneMatmulForRanks(kind: BackendKind): Promise<MatmulConfig | undefined> {
  if (kind === "cpu") return undefined;
  let backend: WebGPUBackend;
  try {
    backend = await WebGPUBackend.create();
  } catch {
    return undefined;
  }
  const config = backend.matmulConfig;
  // The device is released asynchronously; let it go before the ranks open theirs.
  await backend.close();
  return config;
}
