/**
 * Test support: the synthetic executor (actions that take a fixed time and
 * send payloads naming their origin, to measure the runtime against the
 * simulator) and fault injection (make a chosen action throw or hang, on
 * any executor and rank group).
 *
 * @example
 * ```ts
 * import { syntheticCosts } from "@conveyor/core/testing";
 * console.log(syntheticCosts(20)); // { F: 20, I: 20, W: 20, B: 40 }
 * ```
 *
 * @module
 */

// The other entry points' types that this one's API names (so that its
// documentation stands on its own).
export type { Action, ActionKind } from "./src/pipeline/schedule/action.ts";
export type {
  CommBackend,
  ControlHandler,
  ControlMessage,
  SendOptions,
} from "./src/pipeline/comm/backend.ts";
export type {
  CallHandlers,
  CallMap,
  DeviceSpan,
  NoCalls,
  PendingCheck,
  PendingOutput,
  RankExecutor,
  RankExecutorInit,
  StageContext,
  StageOutput,
  StepCheck,
  StepResultOf,
} from "./src/pipeline/runtime/rank_executor.ts";
export type {
  SyntheticCosts,
  SyntheticExecutorOptions,
} from "./src/pipeline/testing/synthetic_executor.ts";
export {
  createSyntheticExecutor,
  SYNTHETIC_EXECUTOR_URL,
  syntheticCosts,
} from "./src/pipeline/testing/synthetic_executor.ts";
export type {
  CheckedFault,
  FaultInjection,
  FaultKind,
} from "./src/pipeline/runtime/fault_injection.ts";
export { checkFaultInjection, withFaultInjection } from "./src/pipeline/runtime/fault_injection.ts";
