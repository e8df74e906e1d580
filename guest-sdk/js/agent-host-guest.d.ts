// Types of the agent-host JavaScript SDK (agent-host-guest.js), for
// TypeScript users and editors. The data types follow
// wit/v0.2.0/history.wit as the componentizers give it to JavaScript.

/** Who speaks in a message. */
export type Role = "system" | "user" | "assistant" | "tool";

/** The level of a log line. */
export type Level = "trace" | "debug" | "info" | "warn" | "error";

/** A point in time: seconds and nanoseconds since the Unix epoch. */
export interface Timestamp {
  seconds: number;
  nanoseconds: number;
}

/** Where the bytes of a media part live (never the bytes themselves). */
export type MediaSource = { tag: "url"; val: string } | { tag: "path"; val: string };

/** One piece of structured content. */
export type Part =
  | { tag: "text"; val: string }
  | { tag: "image"; val: { source: MediaSource; mimeType: string | null } }
  | { tag: "file"; val: { name: string; path: string; mimeType: string | null } };

/** The model's reasoning for an assistant message. */
export interface Reasoning {
  text: string;
  signature: string | null;
  /** Whether `text` is the provider's opaque data: never change it. */
  redacted: boolean;
}

/** A tool call made by an assistant message. */
export interface ToolCall {
  id: string;
  name: string;
  /** JSON text, exactly as the model produced it. */
  arguments: string;
}

/** Token usage reported by a provider. */
export interface Usage {
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number | null;
  cacheWriteTokens: number | null;
}

/** Flags on a message. */
export interface MessageFlags {
  synthetic: boolean;
  summary: boolean;
  error: boolean;
}

/** One message of a conversation. `null` stands for a WIT `none`. */
export interface Message {
  id: string;
  role: Role;
  content: string;
  parts: Part[];
  reasoning: Reasoning | null;
  toolCalls: ToolCall[];
  toolCallId: string | null;
  toolName: string | null;
  usage: Usage | null;
  model: string | null;
  timestamp: Timestamp | null;
  agent: string | null;
  channel: string | null;
  flags: MessageFlags;
  /** A JSON object's text, or null. */
  metadata: string | null;
  /** The host's estimate, set on input; ignored on output. */
  tokens: number;
}

/** What the host tells a processor about the run. */
export interface RunContext {
  sessionKey: string | null;
  agent: string | null;
  model: string | null;
  contextWindow: number;
  budget: number;
  totalTokens: number;
  turn: number;
  usage: Usage;
  now: Timestamp;
  /** This processor's configuration as JSON text (`{}` when none was given). */
  config: string;
}

/** One entry of the answer to the host. */
export type Item =
  | { tag: "keep"; val: number }
  | { tag: "replace"; val: { index: number; message: Message } }
  | { tag: "insert"; val: Message };

/** Why a processor refused to answer. */
export class ProcessorError extends Error {
  constructor(kind: "bad-config" | "failed", message: string);
  readonly kind: "bad-config" | "failed";
  static badConfig(message: string): ProcessorError;
  static failed(message: string): ProcessorError;
}

/** A configuration spec: a default, and a parser that names the key on error. */
export interface Spec<T> {
  default(): T;
  parse(value: unknown, path: string): T;
}

/** Builders of configuration specs. */
export const config: {
  boolean(fallback?: boolean): Spec<boolean>;
  integer(options?: { default?: number; min?: number; max?: number }): Spec<number>;
  number(fallback?: number): Spec<number>;
  string(fallback?: string): Spec<string>;
  optional<T>(spec: Spec<T>): Spec<T | null>;
  list<T>(spec: Spec<T>, fallback?: () => T[]): Spec<T[]>;
  object<F extends Record<string, Spec<unknown>>>(
    fields: F,
    options?: { required?: (keyof F & string)[] },
  ): Spec<{ [K in keyof F]: F[K] extends Spec<infer T> ? T : never }>;
  /** No settings: accepts `{}` (or none), refuses any key. */
  none: Spec<Record<string, never>>;
};

/** Parses the configuration text with `spec`; empty or `null` is the default. */
export function parseConfig<T>(text: string, spec: Spec<T>): T;

/** What `defineProcessor` takes. */
export interface ProcessorDefinition<C> {
  /** Short name (`keep-last-turns`). */
  name: string;
  /** Its version (semver). */
  version: string;
  /** What it does, in a sentence or two. */
  summary: string;
  /** Its configuration spec (default: `config.none`). */
  config?: Spec<C>;
  /** An example configuration, as JSON text. */
  configExample?: string | null;
  /** The JSON Schema of its configuration, as JSON text. */
  configSchema?: string | null;
  /** Edits the history in place. Throw a `ProcessorError` to refuse. */
  process(history: History, config: C): void;
}

/** Declares a processor. */
export function defineProcessor<C>(definition: ProcessorDefinition<C>): Readonly<Required<ProcessorDefinition<C>>>;

/** The host's imports (`agent-host:history/host`, 0.1.0 or 0.2.0: the same functions). */
export interface HostImports {
  log(level: Level, text: string): void;
  estimateTokens(text: string): number;
  estimateMessageTokens(message: Message): number;
}

/** The `agent-host:history/services@0.2.0` import, as the bindings give it. */
export interface ServiceImports {
  summarize(
    prompt: string,
    text: string,
    caps: { maxTokens: number; timeoutMs: number },
  ): { text: string; inputTokens: bigint | number; outputTokens: bigint | number };
  countTokens(text: string): number;
  readMemory(query: string, limit: number): unknown[];
}

/** The component's `processor` export for `definition`; without
 *  `services`, every service call throws a `denied` `ServiceError`. */
export function exportProcessor<C>(
  definition: ProcessorDefinition<C>,
  imports: HostImports,
  services?: ServiceImports | null,
): { describe(): object; process(context: RunContext, history: Message[]): Item[] };

/** Why a host service gave no answer; thrown, never a trap. */
export class ServiceError extends Error {
  constructor(kind: "denied" | "over-budget" | "failed", message: string);
  /** `denied` (not granted), `over-budget` (the run's budget), `failed`. */
  readonly kind: "denied" | "over-budget" | "failed";
}

/** What one `summarize` call asks; 0 or absent is the host's cap. */
export interface SummaryCaps {
  maxTokens?: number;
  timeoutMs?: number;
}

/** A summary the model wrote, and what it cost. */
export interface Summary {
  text: string;
  inputTokens: number;
  outputTokens: number;
}

/** A fact of the session's long-term memory. */
export interface Fact {
  id: string;
  entity: string;
  text: string;
  attribute: string | null;
  value: string | null;
  recorded: Timestamp;
}

/** A summary of `text` by the session's model, as `prompt` asks (the `summarize` grant). */
export function summarize(prompt: string, text: string, caps?: SummaryCaps): Summary;
/** The tokens `text` takes with the session's tokenizer (the `count-tokens` grant). */
export function countTokens(text: string): number;
/** The run's user's facts with the run's agent that best match `query` (the `memory` grant). */
export function readMemory(query: string, limit: number): Fact[];

/** The session's history for one call, and the edits made to it so far. */
/** What a structural processor reads of a message: no string (WIT `header`). */
export interface Header {
  role: Role;
  flags: MessageFlags;
  tokens: number;
  timestamp: Timestamp | null;
  /** For a tool result: the index of the message whose call it answers. */
  answers: number | null;
  toolCalls: number;
  parts: number;
  contentBytes: number;
  reasoningBytes: number | null;
  metadataBytes: number;
  usage: Usage | null;
}

/** The host's history resource (contract 0.2.0), as far as the SDK reads it. */
export interface HistorySource {
  len(): number;
  headers(start: number, end: number): Header[];
  messages(start: number, end: number): Message[];
}

/** The header of `message` (`answers` given, as it needs the history). */
export function headerOf(message: Message, answers?: number | null): Header;

export class History {
  /** A history given whole (tests; contract 0.1.0). */
  constructor(context: RunContext, messages: Message[]);
  /** The host's history resource: headers now, messages on first read. */
  static fromHost(context: RunContext, source: HistorySource): History;
  readonly context: RunContext;
  /** The messages as they are now; the first read fetches them. */
  readonly messages: Message[];
  readonly length: number;
  /** The input's headers, without any text. */
  readonly headers: Header[];
  /** The header of message `index` as it is now. */
  header(index: number): Header;
  /** Whether the whole messages have been fetched. */
  isLoaded(): boolean;
  /** Drops every kept message whose header fails `keep`, reading no text. */
  retainHeaders(keep: (header: Header, index: number) => boolean): void;
  get(index: number): Message | undefined;
  isKept(index: number): boolean;
  kept(): number;
  drop(index: number): void;
  restore(index: number): void;
  retain(keep: (message: Message, index: number) => boolean): void;
  replace(index: number, message: Message): void;
  /** Message `index`, to change in place (a copy, sent back as a replacement). */
  change(index: number): Message;
  isChanged(index: number): boolean;
  insertBefore(index: number, message: Message): void;
  push(message: Message): void;
  turnStarts(): number[];
  toolCallers(): (number | null)[];
  toolNames(): (string | null)[];
  keepLastTurns(turns: number): void;
  settleToolExchanges(): void;
  toItems(): Item[];
  toMessages(): Message[];
}

export function log(level: Level, text: string): void;
export function info(text: string): void;
export function warn(text: string): void;
export function debug(text: string): void;
export function estimateTokens(text: string): number;
export function estimateMessageTokens(message: Message): number;

export function message(role: Role, content?: string): Message;
export function synthetic(role: Role, content?: string): Message;
export function toolCallMessage(calls: ToolCall[]): Message;
export function toolResult(callId: string, content: string): Message;
export function cloneMessage(message: Message): Message;
export function textPieces(message: Message): string[];
export function text(message: Message): string;
export function texts(message: Message): string[];
export function setText(message: Message, index: number, value: string): void;
export function isSynthetic(message: Message): boolean;
export function isSummary(message: Message): boolean;
export function startsTurn(message: Message): boolean;
export function plural(n: number, word: string): string;
export function groupThousands(n: number): string;

/** Running a processor under Node, for its unit tests. */
export const testing: {
  readonly logs: { level: Level; text: string }[];
  context(configText?: string): RunContext;
  run<C>(
    definition: ProcessorDefinition<C>,
    configText: string,
    messages: Message[],
    options?: { context?: RunContext },
  ): Message[];
  /** Has `summarize` answer natively with `summaries(prompt, text)` (or what it throws). */
  serveSummaries(summaries: (prompt: string, text: string) => string): void;
  /** Stops what `serveSummaries` set: `summarize` fails again. */
  stopServingSummaries(): void;
};
