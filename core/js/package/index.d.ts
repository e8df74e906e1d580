// The types of agent-host-core: jco's, generated from the WIT world
// `agent-host:core/core-library` (wit/core/v0.1.0/core.wit), with two
// additions: `CoreError`, and `History.load`'s format as an optional argument
// (jco types an `option<string>` parameter as required `string | undefined`).
import type { ErrorKind, History as HistoryInstance } from "./dist/interfaces/agent-host-core-core.js";
import { History as GeneratedHistory } from "./dist/interfaces/agent-host-core-core.js";

export * from "./dist/interfaces/agent-host-core-core.js";

/** A history held inside the component. */
export type History = HistoryInstance;
export declare const History: Omit<typeof GeneratedHistory, "load"> & {
  /**
   * Reads `text` (JSON or JSONL) in `format`, or a detected one, within core's
   * default limits (256 MiB, 500,000 messages). Throws `CoreError`.
   */
  load(text: string, format?: string): History;
  readonly prototype: History;
};

/**
 * What a call whose WIT result is a `failure` throws: the failure's kind
 * (`invalid-input`, `limit-exceeded`, ...) and its message.
 */
export declare class CoreError extends Error {
  readonly name: "CoreError";
  readonly kind: ErrorKind;
}
