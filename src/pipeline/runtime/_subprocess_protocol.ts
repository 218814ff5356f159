// Messages between a subprocess rank group (this process) and its host
// process, which runs the ranks as a worker rank group. Not exported from
// the package.

import type { Schedule } from "../schedule/schedule.ts";
import type { RunPolicy } from "./run_policy.ts";
import type { ErrorFields } from "./_error_fields.ts";

/** How the host builds its worker rank group. */
export interface HostInit {
  readonly type: "init";
  readonly schedule: Schedule;
  readonly module: string;
  /** Executor options per rank. */
  readonly options: readonly unknown[];
  readonly heartbeatIntervalMs: number;
  readonly startupTimeoutMs: number;
  /** The run's policy, checked again by the host. */
  readonly policy: RunPolicy;
}

export type ToHost =
  | HostInit
  | {
    readonly type: "run";
    readonly id: number;
    readonly iterations: number;
    readonly forwardOnly: boolean;
    /** Per rank, per iteration (or undefined: none). */
    readonly payloads: readonly (readonly unknown[] | undefined)[];
  }
  | {
    readonly type: "call";
    readonly id: number;
    readonly rank: number;
    readonly method: string;
    readonly args: unknown;
  }
  | { readonly type: "dispose"; readonly id: number };

export type FromHost =
  | { readonly type: "started" }
  | { readonly type: "ready" }
  | { readonly type: "result"; readonly id: number; readonly value: unknown }
  | {
    readonly type: "error";
    readonly id: number;
    readonly error: ErrorFields;
    readonly fatal: boolean;
  }
  | { readonly type: "disposed"; readonly id: number; readonly stuck: readonly number[] };
