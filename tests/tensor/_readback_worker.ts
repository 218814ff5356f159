// Runs tests/tensor/_readback_checks.ts inside a worker thread (as the
// pipeline's worker ranks are: node:worker_threads) and posts the outcome.

import { parentPort } from "node:worker_threads";
import { runReadbackChecks } from "./_readback_checks.ts";

try {
  parentPort!.postMessage({ ok: true, paths: await runReadbackChecks() });
} catch (e) {
  parentPort!.postMessage({
    ok: false,
    error: e instanceof Error ? e.stack ?? e.message : String(e),
  });
}
