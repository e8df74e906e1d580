// The types of agent-host-core: jco's, generated from the WIT world
// `agent-host:core/core-library` (wit/core/v0.1.0/core.wit), and CoreError.
import type { ErrorKind } from "./dist/interfaces/agent-host-core-core.js";

export * from "./dist/interfaces/agent-host-core-core.js";

/**
 * What a call whose WIT result is a `failure` throws: the failure's kind
 * (`invalid-input`, `limit-exceeded`, ...) and its message.
 */
export declare class CoreError extends Error {
  readonly name: "CoreError";
  readonly kind: ErrorKind;
}
