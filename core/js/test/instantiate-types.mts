// Type-checked against the installed package's instantiate.d.ts by
// core/js/tests/package.rs (the pinned TypeScript, --strict, with the DOM's
// WebAssembly types as a Worker's or a browser's project has them): a Worker
// written in TypeScript against `agent-host-core/instantiate`.
import {
  instantiate,
  coreModuleNames,
  CoreError,
  type AgentHostCore,
  type Compaction,
  type CoreModuleSource,
  type CoreModules,
  type History,
  type PipelineReport,
} from "agent-host-core/instantiate";

declare const coreModule: WebAssembly.Module;
const modules: CoreModules = { core: coreModule, core2: coreModule, core3: coreModule };

const core: AgentHostCore = await instantiate(modules);
const getter: CoreModuleSource = async (name: string) => (name === coreModuleNames.core ? coreModule : coreModule);
const again: AgentHostCore = await instantiate(getter);
const history: History = core.History.load('[{"role":"user","content":"hi"}]');
const compaction: Compaction = history.compact({ contextLimit: 8000, compact: true, now: "2025-06-01T09:00:00Z" });
const report: PipelineReport = compaction.report;
const tokens: bigint = again.History.load("[]", "openai").tokens();
const names: string[] = core.formats().map((f) => f.name);
const format: string = core.detect("[]");
let kind: string | undefined;
try {
  core.History.load("not a transcript");
} catch (e) {
  if (e instanceof CoreError) kind = e.kind;
}
export const used = [report.usage.view.total, tokens, names, format, kind];
