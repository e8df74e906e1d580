// agent-host-core/instantiate: the entry for runtimes that refuse to compile
// WebAssembly from bytes at run time (Cloudflare Workers, Vercel Edge, ...).
// They compile a Wasm file imported as a module into a `WebAssembly.Module`;
// the program imports the package's three core modules that way and passes
// them here. `dist/agent-host-core.instantiate.js` is what `jco transpile
// --instantiation async` made of the same component as the default entry
// (core/js/build.sh); it loads nothing by itself.
import { instantiate as instantiateComponent } from "./dist/agent-host-core.instantiate.js";
import { api } from "./api.js";

export { CoreError } from "./api.js";

/**
 * The component's core modules by key, and their file names (in `dist/`;
 * exported as `agent-host-core/core.wasm`, `core2.wasm`, `core3.wasm`): the
 * core itself, then the shim and fixup of the History resource's destructor.
 */
export const coreModuleNames = Object.freeze({
  core: "agent-host-core.core.wasm",
  core2: "agent-host-core.core2.wasm",
  core3: "agent-host-core.core3.wasm",
});

function described(value) {
  if (value === null) return "null";
  if (typeof value !== "object" && typeof value !== "function") return typeof value;
  return value.constructor?.name ?? "an object";
}

const usage =
  "instantiate() takes { core, core2, core3 }, the compiled WebAssembly.Modules of " +
  "agent-host-core/core.wasm, core2.wasm and core3.wasm (or a function given a file name " +
  "that returns its module)";

function getter(modules) {
  if (typeof modules === "function") return modules;
  if (modules === null || typeof modules !== "object") {
    throw new TypeError(`${usage}, not ${described(modules)}; in Node.js or a browser, import "agent-host-core" instead`);
  }
  const byName = new Map();
  for (const [key, name] of Object.entries(coreModuleNames)) {
    const module = modules[key];
    if (!(module instanceof WebAssembly.Module)) {
      throw new TypeError(`${usage}; ${key} is ${described(module)}`);
    }
    byName.set(name, module);
  }
  return (name) => {
    const module = byName.get(name);
    if (!module) throw new Error(`agent-host-core asked for a core module it does not ship: ${name}`);
    return module;
  };
}

/**
 * Instantiates the core from its compiled modules: `{ core, core2, core3 }`
 * (each a `WebAssembly.Module`), or a function given a module's file name
 * (`coreModuleNames`) that returns it or a promise of it. Resolves to
 * `{ History, formats, detect }`, the default entry's exports. Instantiate
 * once and keep the result.
 */
export async function instantiate(modules) {
  const root = await instantiateComponent(getter(modules), {});
  return api(root.core);
}
