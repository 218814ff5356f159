// What travels on a run's BroadcastChannel (the control plane) and on the
// MessagePorts between ranks (the data plane). Not exported from the package.

import type { ControlMessage } from "./backend.ts";

/** Prefix of every run's BroadcastChannel name; the run id follows. */
export const CHANNEL_PREFIX = "conveyor-pipeline:";

/** Sender id of the main thread on the control plane. */
export const MAIN = -1;

/** One control-plane message; `from` is a rank or {@linkcode MAIN}. */
export type Envelope =
  | { readonly c: "hello"; readonly from: number }
  | { readonly c: "go"; readonly from: number }
  | { readonly c: "hb"; readonly from: number; readonly seq: number }
  | { readonly c: "barrier"; readonly from: number; readonly gen: number }
  | { readonly c: "abort"; readonly from: number; readonly reason: string }
  | { readonly c: "error"; readonly from: number; readonly report: ControlMessage }
  | { readonly c: "user"; readonly from: number; readonly message: ControlMessage };

/** One tensor on a data port. */
export interface DataMessage {
  readonly tag: string;
  readonly data: Float32Array;
}

/** Whether a value received on the channel is one of ours. */
export function isEnvelope(value: unknown): value is Envelope {
  return value !== null && typeof value === "object" &&
    typeof (value as { c?: unknown }).c === "string" &&
    typeof (value as { from?: unknown }).from === "number";
}
