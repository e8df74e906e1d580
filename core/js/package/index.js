// agent-host-core: the ESM entry. The component's one interface,
// `agent-host:core/core@0.1.0`, by name. `dist/` is what `jco transpile`
// made of the component (core/js/build.sh); this file names its exports and
// turns a WIT `failure` (jco throws it wrapped, its message `[object Object]`)
// into a `CoreError` that says what went wrong.
import { core } from "./dist/agent-host-core.js";

/** A failure of the core: `kind` (`invalid-input`, `limit-exceeded`, ...) and `message`. */
export class CoreError extends Error {
  constructor(failure, options) {
    super(failure.message, options);
    this.name = "CoreError";
    this.kind = failure.kind;
  }
}

function failing(call) {
  return function (...args) {
    try {
      return call.apply(this, args);
    } catch (e) {
      const failure = e?.payload;
      if (failure && typeof failure.kind === "string" && typeof failure.message === "string") {
        throw new CoreError(failure, { cause: e });
      }
      throw e;
    }
  };
}

const proto = core.History.prototype;
for (const name of ["dump", "query", "compact"]) {
  proto[name] = failing(proto[name]);
}
core.History.load = failing(core.History.load);

/** A history held inside the component; see index.d.ts. */
export const History = core.History;
/** Every supported format, and whether each can be written. */
export const formats = core.formats;
/** The format a text is in, by the detection `History.load` uses. */
export const detect = failing(core.detect);
