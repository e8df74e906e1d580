// agent-host-core: the ESM entry. The component's one interface,
// `agent-host:core/core@0.1.0`, by name. `dist/` is what `jco transpile`
// made of the component (core/js/build.sh); it loads the core module beside
// itself (`fetch` in a browser, `node:fs` in Node.js). `api.js` names the
// exports and turns failures into `CoreError`. Runtimes that compile no
// WebAssembly from bytes use `instantiate.js` instead.
import { core } from "./dist/agent-host-core.js";
import { api } from "./api.js";

export { CoreError } from "./api.js";

const exported = api(core);
/** A history held inside the component; see index.d.ts. */
export const History = exported.History;
/** Every supported format, and whether each can be written. */
export const formats = exported.formats;
/** The format a text is in, by the detection `History.load` uses. */
export const detect = exported.detect;
