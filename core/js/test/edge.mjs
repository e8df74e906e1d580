// Node.js made to act as an edge runtime for the package's entry
// `agent-host-core/instantiate`: the core modules are compiled first, as
// Cloudflare Workers and Vercel Edge compile Wasm module imports when they
// load the code; after that every way of compiling WebAssembly from bytes
// throws, as it does there ("Wasm code generation disallowed by embedder").
// Used by differential.test.mjs (AGENT_HOST_CORE_ENTRY=instantiate) and
// instantiate.test.mjs, from a folder where agent-host-core is installed.
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

/** The bytes of `agent-host-core/<key>.wasm` (core, core2, core3), found through the package's exports. */
export function coreModuleBytes(key = "core") {
  return readFileSync(fileURLToPath(import.meta.resolve(`agent-host-core/${key}.wasm`)));
}

let refusing = false;

/** From now on, compiling WebAssembly from bytes throws; instantiating a compiled module still works. */
export function refuseCompilingBytes() {
  if (refusing) return;
  refusing = true;
  const { Module, instantiate, CompileError } = WebAssembly;
  const refused = () => new CompileError("Wasm code generation disallowed by embedder (edge runtime emulation)");
  WebAssembly.compile = async () => {
    throw refused();
  };
  WebAssembly.compileStreaming = async () => {
    throw refused();
  };
  WebAssembly.instantiateStreaming = async () => {
    throw refused();
  };
  WebAssembly.instantiate = (source, imports) =>
    source instanceof Module ? instantiate(source, imports) : Promise.reject(refused());
  WebAssembly.Module = new Proxy(Module, {
    construct() {
      throw refused();
    },
  });
}

/**
 * The core modules `{ core, core2, core3 }` compiled while that is allowed;
 * then compiling bytes refused. What an edge runtime hands the code:
 * `WebAssembly.Module`s.
 */
export function compiledThenRefusing() {
  const modules = {};
  for (const key of ["core", "core2", "core3"]) {
    modules[key] = new WebAssembly.Module(coreModuleBytes(key));
  }
  refuseCompilingBytes();
  return modules;
}

/** The package as an edge runtime gets it: `{ History, formats, detect, CoreError }`. */
export async function instantiatedAtTheEdge() {
  const modules = compiledThenRefusing();
  const { instantiate, CoreError } = await import("agent-host-core/instantiate");
  return { ...(await instantiate(modules)), CoreError };
}
