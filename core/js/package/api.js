// The package's API over the component's `core` interface, shared by both
// entries (index.js, instantiate.js) so that `CoreError` is one class: the
// names the package exports, and a WIT `failure` (jco throws it wrapped, its
// message `[object Object]`) turned into a `CoreError` that says what went
// wrong.

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

const wrapped = new WeakSet();

/**
 * `{ History, formats, detect }` of a transpiled component's `core`
 * interface, every call whose WIT result is a `failure` throwing `CoreError`.
 */
export function api(core) {
  const { History } = core;
  // A History class seen before (jco's instantiation mode may share one
  // between instances) is wrapped already.
  if (!wrapped.has(History)) {
    wrapped.add(History);
    const proto = History.prototype;
    for (const name of ["dump", "query", "compact"]) {
      proto[name] = failing(proto[name]);
    }
    History.load = failing(History.load);
  }
  return { History, formats: core.formats, detect: failing(core.detect) };
}
