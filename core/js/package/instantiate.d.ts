// The types of agent-host-core/instantiate: the default entry's, reached
// through `instantiate` rather than imported.
import type * as Core from "./index.js";

export { CoreError } from "./index.js";
export type * from "./dist/interfaces/agent-host-core-core.js";

/** A history held inside the component. */
export type History = Core.History;

/** What `instantiate` resolves to: the default entry's exports. */
export interface AgentHostCore {
  /** Histories: `History.load(text, format?)`. */
  readonly History: typeof Core.History;
  /** Every supported format, and whether each can be written. */
  readonly formats: typeof Core.formats;
  /** The format a text is in, by the detection `History.load` uses. */
  readonly detect: typeof Core.detect;
}

/** The component's core modules, compiled: `agent-host-core/core.wasm`, `core2.wasm`, `core3.wasm`. */
export interface CoreModules {
  readonly core: WebAssembly.Module;
  readonly core2: WebAssembly.Module;
  readonly core3: WebAssembly.Module;
}

/**
 * What `instantiate` takes: the compiled core modules (imported as Wasm
 * modules by the runtime or its bundler), or a function given a module's file
 * name (a value of `coreModuleNames`) that returns it.
 */
export type CoreModuleSource =
  | CoreModules
  | ((name: string) => WebAssembly.Module | PromiseLike<WebAssembly.Module>);

/** The file names of the core modules, by key. */
export declare const coreModuleNames: {
  readonly core: "agent-host-core.core.wasm";
  readonly core2: "agent-host-core.core2.wasm";
  readonly core3: "agent-host-core.core3.wasm";
};

/**
 * Instantiates the core from its compiled modules, for runtimes that compile
 * no WebAssembly from bytes (Cloudflare Workers, Vercel Edge). Instantiate
 * once and keep the result.
 */
export declare function instantiate(modules: CoreModuleSource): Promise<AgentHostCore>;
