// Type-checked against the installed package's index.d.ts by
// core/js/tests/package.rs (the pinned TypeScript of the toolchain, --strict):
// what a TypeScript user writes must compile, and the types must be the
// package's, not `any` (the last lines must fail to compile: see the test).
import {
  History,
  CoreError,
  formats,
  detect,
  type Compaction,
  type ErrorKind,
  type PipelineOptions,
  type PipelineReport,
  type Query,
  type Role,
  type SummaryOutcome,
} from "agent-host-core";

const history: History = History.load('[{"role":"user","content":"hi"}]');
const again: History = History.load("[]", "openai");
const options: PipelineOptions = { contextLimit: 8000, compact: true, now: "2025-06-01T09:00:00Z" };
const compaction: Compaction = history.compact(options);
const report: PipelineReport = compaction.report;
const summary: SummaryOutcome = report.summary;
const covered: number = summary.tag === "summarized" ? summary.val.covered : 0;
const tokens: bigint = history.tokens();
const roles: Role[] = history.roles();
const query: Query = { roles: ["user"], agents: [], includeForwarded: false, contains: "hi", limit: 3 };
const found: History = history.query(query);
const names: string[] = formats().filter((f) => f.writable).map((f) => f.name);
const format: string = detect("[]");
const text: string = compaction.view.dump("openai") + history.markdown(undefined);
let kind: ErrorKind | undefined;
try {
  History.load("not a transcript");
} catch (e) {
  if (e instanceof CoreError) kind = e.kind;
}
export const used = [again, covered, tokens, roles, found, names, format, text, kind, report.usage.view.total];
