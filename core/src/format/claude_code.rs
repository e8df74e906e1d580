//! Claude Code session logs (`~/.claude/projects/<project>/<session>.jsonl`),
//! import only.
//!
//! Each line is a record `{type, uuid, parentUuid, sessionId, timestamp, cwd,
//! message: {role, content}, ...}`:
//! - `user` records become user messages; their `tool_result` blocks become
//!   tool messages (one per block, before any text of the same record);
//! - `assistant` records are Anthropic content blocks; Claude Code writes one
//!   streamed turn over several lines that share `message.id`, and those lines
//!   are merged into one message (at the place of the first), with the usage
//!   of the last and every line's `uuid` kept;
//! - records with `isSidechain: true` are a subagent's conversation (the
//!   `Task` tool): they were never in the main thread's context, so they go
//!   to [`Transcript::sidechains`], one list per subagent run (a sidechain
//!   record joins the sidechain of its `parentUuid`, or starts a new one);
//! - `summary` records give the transcript's title;
//! - a compaction (a `system` record of subtype `compact_boundary`, then the
//!   `user` record marked `isCompactSummary` holding the summary) becomes a
//!   summary checkpoint message ([`Message::summary`]), the boundary record
//!   kept in its metadata, rather than a plain user message;
//! - a rewind leaves the abandoned records in the log, on a `parentUuid`
//!   chain the conversation no longer follows: the main line is the chain of
//!   the log's last record (across compactions, by `logicalParentUuid`), and
//!   messages off it go to [`Transcript::branches`], one list per abandoned
//!   run (only when the chain is whole: a chain that leads to a record not in
//!   the file leaves the messages as they are);
//! - other record types are not conversation messages and are listed in
//!   [`Transcript::skipped`];
//! - a record that cannot be read (bad JSON, a bad block) is left out and
//!   listed in [`Transcript::quarantined`] with its error, and the rest of the
//!   log is read; a log of which no record could be read is an error.
//!
//! The records `claude -p --output-format stream-json` prints (and web
//! exports) have the same `message` objects without the log's bookkeeping:
//! `session_id` for `sessionId`, no `uuid` or `parentUuid`; `system` (init)
//! and `result` records are listed as skipped, and the messages of a
//! subagent (`parent_tool_use_id` set) go to a sidechain per tool call.
//!
//! A message's id is its record's `uuid` (`uuid:N` for the N-th extra message
//! of one record), or, without one, derived from the line and text. Everything
//! else the record carries (`cwd`, `gitBranch`, `sessionId`, `toolUseResult`,
//! ...) is kept in its metadata under `"claude_code"`.
//!
//! A record is read by one of two routes. The typed route (`typed.rs`) reads
//! a `user` or `assistant` record straight from its line, building only what
//! is kept (the other fields, the content, the usage numbers), and takes it
//! only when it reads it whole, with no error. Every other record (another
//! type, a bad block, a field of an unexpected type, bad JSON) is parsed into
//! a `serde_json::Value` and read from that (the generic route), which gives
//! the same messages for every record the typed route takes, and the errors.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use super::anthropic::{self, AssistantContent, ToolNames};
use super::limits::Tally;
use super::{Format, FormatError, Quarantined, Skipped, Transcript, kind_of};
use crate::message::{Message, Usage, document_id};

mod typed;

/// The metadata key under which a record's other fields are kept.
pub const EXTRA_KEY: &str = "claude_code";

const FORMAT: Format = Format::ClaudeCode;

/// Reads a session log within the default [`Limits`](super::Limits).
pub fn parse(text: &str) -> Result<Transcript, FormatError> {
    super::parse_within(FORMAT, text, &super::Limits::default())
}

/// Which conversation a message belongs to.
#[derive(Clone, Copy)]
enum Thread {
    Main,
    Sidechain(usize),
}

/// Reads records one at a time (see [`super::LineReader`]).
#[derive(Default)]
pub(super) struct Reader {
    transcript: Transcript,
    tool_names: ToolNames,
    /// Streamed assistant turns: `message.id` -> where the turn is.
    turns: HashMap<String, (Thread, usize)>,
    /// Record uuids of sidechains (and `tool:<id>` for the subagent of a
    /// stream-json tool call) -> which sidechain.
    sidechain_of: HashMap<String, usize>,
    /// Every record uuid -> its parent's (`parentUuid`, or across a
    /// compaction `logicalParentUuid`).
    parents: HashMap<String, Option<String>>,
    /// The uuid of the last main-line record.
    leaf: Option<String>,
    /// For each main-line message, the uuid of its record.
    records: Vec<Option<String>>,
    /// The compaction boundary waiting for its summary record.
    boundary: Option<Map<String, Value>>,
}

impl Reader {
    /// The thread a record goes to: the main one, the sidechain its parent is
    /// in, or a new sidechain.
    fn thread_of(&mut self, record: &Links<'_>) -> Thread {
        let tool = record.tool;
        if !record.on_a_sidechain() {
            return Thread::Main;
        }
        let parent = match tool {
            Some(tool) => Some(format!("tool:{tool}")),
            None => record.parent.map(str::to_owned),
        };
        let k = match parent.as_ref().and_then(|p| self.sidechain_of.get(p)) {
            Some(&k) => k,
            None => {
                self.transcript.sidechains.push(Vec::new());
                let k = self.transcript.sidechains.len() - 1;
                if let Some(tool) = tool {
                    self.sidechain_of.insert(format!("tool:{tool}"), k);
                }
                k
            }
        };
        if let Some(uuid) = record.uuid {
            self.sidechain_of.insert(uuid.to_owned(), k);
        }
        Thread::Sidechain(k)
    }

    fn thread(&mut self, thread: Thread) -> &mut Vec<Message> {
        match thread {
            Thread::Main => &mut self.transcript.messages,
            Thread::Sidechain(k) => &mut self.transcript.sidechains[k],
        }
    }

    /// Adds a message to a thread, remembering its record on the main line.
    fn push(&mut self, thread: Thread, m: Message, record: Option<&str>) {
        if let Thread::Main = thread {
            self.records.push(record.map(str::to_owned));
        }
        self.thread(thread).push(m);
    }

    /// What was read.
    pub(super) fn into_transcript(mut self) -> Transcript {
        self.split_branches();
        self.transcript
    }

    /// Moves the main-line messages off the chain of the last record to
    /// [`Transcript::branches`].
    fn split_branches(&mut self) {
        let Some(leaf) = self.leaf.clone() else {
            return;
        };
        let mut chain = std::collections::HashSet::new();
        let mut at = Some(leaf);
        while let Some(uuid) = at {
            if !chain.insert(uuid.clone()) {
                break; // a cycle: the chain is what was walked
            }
            match self.parents.get(&uuid) {
                Some(parent) => at = parent.clone(),
                // The chain leads out of the file: which records are on it
                // cannot be told.
                None => return,
            }
        }
        let off = |record: &Option<String>| {
            record
                .as_ref()
                .is_some_and(|r| self.parents.contains_key(r) && !chain.contains(r))
        };
        if !self.records.iter().any(off) {
            return;
        }
        let messages = std::mem::take(&mut self.transcript.messages);
        let mut last_off = false;
        for (m, record) in messages.into_iter().zip(&self.records) {
            if off(record) {
                if !last_off {
                    self.transcript.branches.push(Vec::new());
                }
                self.transcript
                    .branches
                    .last_mut()
                    .expect("pushed above")
                    .push(m);
                last_off = true;
            } else {
                self.transcript.messages.push(m);
                last_off = false;
            }
        }
    }

    /// Reads one record; a record that cannot be read is quarantined (the
    /// caller adds the line to errors that stop the read: none here).
    pub(super) fn read_record(&mut self, line: &str, line_no: usize) -> Result<(), FormatError> {
        let read = serde_json::from_str(line)
            .map_err(|e| FormatError::new(FORMAT, format!("not valid JSON: {e}")))
            .and_then(|record| self.record(record, line, line_no));
        self.quarantine(read, line_no);
        Ok(())
    }

    /// [`Reader::read_record`] of a record already parsed from `line` (its
    /// values counted as it was: see `LineReader::push`).
    pub(super) fn read_value(&mut self, record: Value, line: &str, line_no: usize) {
        let read = self.record(record, line, line_no);
        self.quarantine(read, line_no);
    }

    /// Quarantines a record that could not be read.
    fn quarantine(&mut self, read: Result<(), FormatError>, line_no: usize) {
        if let Err(error) = read {
            self.transcript.quarantined.push(Quarantined {
                line: line_no,
                error: error.at_line(line_no),
            });
        }
    }

    /// Notes a record's place on the `parentUuid` chains.
    fn chain(&mut self, record: &Links<'_>) {
        // Only a log's records are chained (stream-json records carry a
        // `uuid` and no `parentUuid`).
        let Some(uuid) = record.uuid else {
            return;
        };
        if !record.has_parent {
            return;
        }
        let parent = record.parent.or(record.logical_parent);
        self.parents
            .insert(uuid.to_owned(), parent.map(str::to_owned));
        if !record.on_a_sidechain() {
            self.leaf = Some(uuid.to_owned());
        }
    }

    fn record(&mut self, record: Value, line: &str, line_no: usize) -> Result<(), FormatError> {
        let Value::Object(mut record) = record else {
            return Err(FormatError::new(
                FORMAT,
                format!("expected a record object, found {}", kind_of(&record)),
            ));
        };
        let kind = match record.shift_remove("type") {
            Some(Value::String(kind)) => kind,
            _ => return Err(FormatError::new(FORMAT, "missing string `type`").at_field("type")),
        };
        let links = Links::of(&record);
        self.chain(&links);
        match kind.as_str() {
            "summary" => {
                if self.transcript.title.is_none() {
                    self.transcript.title = record
                        .get("summary")
                        .and_then(Value::as_str)
                        .map(str::to_owned);
                }
            }
            "user" => {
                let thread = self.thread_of(&links);
                let compact_summary = is_compact_summary(&record);
                let (mut message, common) = split_record(record, line_no)?;
                let content = message.shift_remove("content").unwrap_or(Value::Null);
                let (results, user) = anthropic::user_content(FORMAT, content, &self.tool_names)?;
                self.push_user(thread, results, user, common, compact_summary);
            }
            "assistant" => {
                let thread = self.thread_of(&links);
                self.read_assistant(record, thread, line_no)?;
            }
            "system"
                if record.get("subtype").and_then(Value::as_str) == Some("compact_boundary") =>
            {
                self.boundary = Some(record);
                self.transcript.skipped.push(Skipped {
                    line: line_no,
                    kind: "system:compact_boundary".into(),
                });
            }
            _ => {
                let kind = match record.get("subtype").and_then(Value::as_str) {
                    Some(sub) => format!("{kind}:{sub}"),
                    None => kind,
                };
                if record.contains_key("payload")
                    && let Some(other) = Format::of_line(line).filter(|&f| f != FORMAT)
                {
                    return Err(FormatError::new(
                        FORMAT,
                        format!(
                            "record type `{kind}` is no Claude Code record; it is a {other} \
                             record: read the file with --format {other}"
                        ),
                    )
                    .at_field("type"));
                }
                self.transcript.skipped.push(Skipped {
                    line: line_no,
                    kind,
                })
            }
        }
        Ok(())
    }

    /// An assistant record: a new turn, or a streamed piece of an earlier one.
    fn read_assistant(
        &mut self,
        record: Map<String, Value>,
        thread: Thread,
        line_no: usize,
    ) -> Result<(), FormatError> {
        let (mut message, common) = split_record(record, line_no)?;
        let content = message.shift_remove("content").unwrap_or(Value::Null);
        let usage = message.get("usage").map(usage_from_value);
        let message_id = message.get("id").and_then(Value::as_str).map(str::to_owned);
        let mut tool_names = std::mem::take(&mut self.tool_names);
        if let Some(&(turn_thread, index)) = message_id.as_ref().and_then(|id| self.turns.get(id)) {
            // Added block by block: a bad block leaves the ones before it.
            let m = &mut self.thread(turn_thread)[index];
            let added = anthropic::assistant_content(FORMAT, content, m, &mut tool_names);
            merged(m, usage, common.uuid);
            self.tool_names = tool_names;
            return added;
        }
        let mut m = Message::assistant("");
        let added = anthropic::assistant_content(FORMAT, content, &mut m, &mut tool_names);
        self.tool_names = tool_names;
        added?;
        let model = message
            .get("model")
            .and_then(Value::as_str)
            .map(str::to_owned);
        self.push_turn(thread, m, usage, model, message_id, common);
        Ok(())
    }

    /// Adds a new assistant turn, its content read into `m`.
    fn push_turn(
        &mut self,
        thread: Thread,
        mut m: Message,
        usage: Option<Usage>,
        model: Option<String>,
        message_id: Option<String>,
        mut common: Common,
    ) {
        m.id = common.id(&m);
        m.usage = usage;
        m.model = model;
        if let Some(id) = &message_id {
            common
                .extra
                .insert("message_id".into(), Value::String(id.clone()));
        }
        common.stamp_last(&mut m);
        let messages = self.thread(thread);
        if let Some(id) = message_id {
            let index = messages.len();
            self.turns.insert(id, (thread, index));
        }
        self.push(thread, m, common.uuid.as_deref());
    }

    /// Adds a user record's messages: its tool results, then its user
    /// message.
    fn push_user(
        &mut self,
        thread: Thread,
        results: Vec<Message>,
        user: Option<Message>,
        mut common: Common,
        compact_summary: bool,
    ) {
        if compact_summary && let Some(boundary) = self.boundary.take() {
            common
                .extra
                .insert("compact_boundary".into(), Value::Object(boundary));
        }
        let record_uuid = common.uuid.clone();
        let last = results.len() + usize::from(user.is_some());
        for (n, mut m) in results.into_iter().chain(user).enumerate() {
            let base = common.id(&m);
            m.id = if n == 0 { base } else { format!("{base}:{n}") };
            m.summary = compact_summary && m.tool_call_id.is_none();
            if n + 1 == last {
                common.stamp_last(&mut m);
            } else {
                common.stamp(&mut m);
            }
            self.push(thread, m, record_uuid.as_deref());
        }
    }

    /// Reads a `user` or `assistant` record through the typed route (see
    /// [`typed`]), its values counted into `tally`, or leaves it (`false`)
    /// with nothing changed, for [`Reader::read_value`] or
    /// [`Reader::read_record`]. What it reads it reads as they do: only a
    /// record read whole, with no error, is taken.
    pub(super) fn read_typed(&mut self, line: &str, line_no: usize, tally: &Tally) -> bool {
        let Some(record) = typed::read(line, tally) else {
            return false;
        };
        // What can fail, before anything changes.
        let timestamp = match record
            .timestamp
            .as_deref()
            .map(DateTime::parse_from_rfc3339)
        {
            None => None,
            Some(Ok(t)) => Some(t.with_timezone(&Utc)),
            Some(Err(_)) => return false,
        };
        let content = match (record.kind, record.content) {
            (_, Some(typed::Content::Assistant(content))) => Content::Assistant(content),
            (kind, content) => {
                let content = match content {
                    Some(typed::Content::Value(content)) => content,
                    _ => Value::Null,
                };
                let read = match kind {
                    typed::Kind::User => anthropic::user_content(FORMAT, content, &self.tool_names)
                        .map(|(results, user)| Content::User(results, user)),
                    typed::Kind::Assistant => {
                        anthropic::read_assistant_content(FORMAT, content).map(Content::Assistant)
                    }
                };
                match read {
                    Ok(read) => read,
                    Err(_) => return false,
                }
            }
        };
        let links = Links::of_typed(&record.extra, record.uuid.as_deref());
        self.chain(&links);
        let thread = self.thread_of(&links);
        let compact_summary = is_compact_summary(&record.extra);
        let common = Common {
            uuid: record.uuid,
            line: line_no,
            timestamp,
            extra: record.extra,
        };
        match content {
            Content::User(results, user) => {
                self.push_user(thread, results, user, common, compact_summary)
            }
            Content::Assistant(content) => {
                let message_id = record.message_id;
                let turn = message_id.as_ref().and_then(|id| self.turns.get(id));
                if let Some(&(turn_thread, index)) = turn {
                    let mut tool_names = std::mem::take(&mut self.tool_names);
                    let m = &mut self.thread(turn_thread)[index];
                    content.add_to(m, &mut tool_names);
                    merged(m, record.usage, common.uuid);
                    self.tool_names = tool_names;
                } else {
                    let mut m = Message::assistant("");
                    content.add_to(&mut m, &mut self.tool_names);
                    self.push_turn(thread, m, record.usage, record.model, message_id, common);
                }
            }
        }
        true
    }
}

/// A record's content, read (held for a moment, on the stack).
#[allow(clippy::large_enum_variant)]
enum Content {
    /// A user record's tool results and user message.
    User(Vec<Message>, Option<Message>),
    /// An assistant record's content.
    Assistant(AssistantContent),
}

/// Notes on a turn a streamed piece merged into it: its usage, its record's
/// uuid.
fn merged(m: &mut Message, usage: Option<Usage>, uuid: Option<String>) {
    m.usage = usage.or(m.usage);
    m.invalidate_tokens();
    if let Some(Value::Object(extra)) = m.metadata.get_mut(EXTRA_KEY) {
        let merged = extra
            .entry("merged_uuids")
            .or_insert_with(|| Value::Array(Vec::new()));
        if let (Value::Array(uuids), Some(uuid)) = (merged, uuid) {
            uuids.push(Value::String(uuid));
        }
    }
}

/// Whether a record is the summary of a compaction.
fn is_compact_summary(record: &Map<String, Value>) -> bool {
    record.get("isCompactSummary").and_then(Value::as_bool) == Some(true)
}

/// A record's fields that place it: on the `parentUuid` chains, and on the
/// main line or a sidechain.
struct Links<'a> {
    uuid: Option<&'a str>,
    /// Whether the record has a `parentUuid` field (of any value).
    has_parent: bool,
    parent: Option<&'a str>,
    logical_parent: Option<&'a str>,
    sidechain: bool,
    /// `parent_tool_use_id` (stream-json).
    tool: Option<&'a str>,
}

impl<'a> Links<'a> {
    /// The links of a record.
    fn of(record: &'a Map<String, Value>) -> Self {
        Links::of_typed(record, record.get("uuid").and_then(Value::as_str))
    }

    /// The links of a record's fields but its `uuid`, which is `uuid`.
    fn of_typed(record: &'a Map<String, Value>, uuid: Option<&'a str>) -> Self {
        let str_field = |key: &str| record.get(key).and_then(Value::as_str);
        Links {
            uuid,
            has_parent: record.contains_key("parentUuid"),
            parent: str_field("parentUuid"),
            logical_parent: str_field("logicalParentUuid"),
            sidechain: record.get("isSidechain").and_then(Value::as_bool) == Some(true),
            tool: str_field("parent_tool_use_id"),
        }
    }

    /// Whether the record is a subagent's (`isSidechain`, or
    /// `parent_tool_use_id` in stream-json).
    fn on_a_sidechain(&self) -> bool {
        self.sidechain || self.tool.is_some()
    }
}

/// What every message of one record shares.
struct Common {
    uuid: Option<String>,
    line: usize,
    timestamp: Option<DateTime<Utc>>,
    extra: Map<String, Value>,
}

impl Common {
    /// The id of the record's (first) message: its uuid, or one derived from
    /// the line and the message's text.
    fn id(&self, m: &Message) -> String {
        match &self.uuid {
            Some(uuid) => uuid.clone(),
            None => document_id("claude-code", self.line, &m.text()),
        }
    }

    fn stamp(&self, m: &mut Message) {
        m.timestamp = self.timestamp;
        if !self.extra.is_empty() {
            m.metadata
                .insert(EXTRA_KEY.into(), Value::Object(self.extra.clone()));
        }
    }

    /// [`Common::stamp`] of the record's last message, which takes the
    /// record's fields rather than a copy.
    fn stamp_last(&mut self, m: &mut Message) {
        m.timestamp = self.timestamp;
        if !self.extra.is_empty() {
            m.metadata.insert(
                EXTRA_KEY.into(),
                Value::Object(std::mem::take(&mut self.extra)),
            );
        }
    }
}

/// Splits a record into its `message` object and the fields around it.
fn split_record(
    mut record: Map<String, Value>,
    line: usize,
) -> Result<(Map<String, Value>, Common), FormatError> {
    let message = match record.shift_remove("message") {
        Some(Value::Object(message)) => message,
        _ => return Err(FormatError::new(FORMAT, "missing object `message`").at_field("message")),
    };
    let uuid = match record.shift_remove("uuid") {
        Some(Value::String(uuid)) => Some(uuid),
        None | Some(Value::Null) => None,
        Some(other) => {
            return Err(FormatError::new(
                FORMAT,
                format!("`uuid` must be a string, found {}", kind_of(&other)),
            )
            .at_field("uuid"));
        }
    };
    let timestamp = match record.shift_remove("timestamp") {
        None | Some(Value::Null) => None,
        Some(Value::String(t)) => Some(
            DateTime::parse_from_rfc3339(&t)
                .map_err(|e| {
                    FormatError::new(FORMAT, format!("`{t}` is not an RFC 3339 time ({e})"))
                        .at_field("timestamp")
                })?
                .with_timezone(&Utc),
        ),
        Some(other) => {
            return Err(FormatError::new(
                FORMAT,
                format!("`timestamp` must be a string, found {}", kind_of(&other)),
            )
            .at_field("timestamp"));
        }
    };
    Ok((
        message,
        Common {
            uuid,
            line,
            timestamp,
            extra: record,
        },
    ))
}

fn usage_from_value(usage: &Value) -> Usage {
    let get = |key: &str| usage.get(key).and_then(Value::as_u64);
    Usage {
        input_tokens: get("input_tokens").unwrap_or(0),
        output_tokens: get("output_tokens").unwrap_or(0),
        cache_read_tokens: get("cache_read_input_tokens"),
        cache_write_tokens: get("cache_creation_input_tokens"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Role;

    const SESSION: &str = r#"{"type":"summary","summary":"List files","leafUuid":"u4"}
{"type":"user","uuid":"u1","parentUuid":null,"sessionId":"s","cwd":"/w","timestamp":"2025-09-03T00:47:19.293Z","message":{"role":"user","content":"list files"}}
{"type":"assistant","uuid":"u2","parentUuid":"u1","sessionId":"s","timestamp":"2025-09-03T00:47:20Z","message":{"id":"msg_1","role":"assistant","model":"claude-sonnet-4","content":[{"type":"text","text":"Listing."}],"usage":{"input_tokens":3,"output_tokens":1}}}
{"type":"assistant","uuid":"u3","parentUuid":"u2","sessionId":"s","timestamp":"2025-09-03T00:47:21Z","message":{"id":"msg_1","role":"assistant","model":"claude-sonnet-4","content":[{"type":"tool_use","id":"toolu_1","name":"LS","input":{"path":"/w"}}],"usage":{"input_tokens":3,"output_tokens":40,"cache_read_input_tokens":100}}}
{"type":"user","uuid":"u4","parentUuid":"u3","sessionId":"s","timestamp":"2025-09-03T00:47:22Z","message":{"role":"user","content":[{"tool_use_id":"toolu_1","type":"tool_result","content":"a.txt"},{"type":"text","text":"go on"}]},"toolUseResult":{"numFiles":1}}
{"type":"file-history-snapshot","messageId":"x"}
"#;

    #[test]
    fn merges_streamed_turns_and_splits_tool_results() {
        let t = parse(SESSION).unwrap();
        assert_eq!(t.title.as_deref(), Some("List files"));
        let roles: Vec<Role> = t.messages.iter().map(|m| m.role).collect();
        assert_eq!(roles, [Role::User, Role::Assistant, Role::Tool, Role::User]);
        let turn = &t.messages[1];
        assert_eq!(turn.id, "u2");
        assert_eq!((turn.content.as_str(), turn.parts.len()), ("Listing.", 0));
        assert_eq!(turn.tool_calls[0].name, "LS");
        assert_eq!(turn.usage.unwrap().output_tokens, 40);
        assert_eq!(turn.usage.unwrap().cache_read_tokens, Some(100));
        assert_eq!(turn.model.as_deref(), Some("claude-sonnet-4"));
        assert_eq!(
            turn.metadata[EXTRA_KEY]["merged_uuids"],
            serde_json::json!(["u3"])
        );
        let result = &t.messages[2];
        assert_eq!(
            (result.id.as_str(), result.tool_name.as_deref()),
            ("u4", Some("LS"))
        );
        assert_eq!(result.metadata[EXTRA_KEY]["toolUseResult"]["numFiles"], 1);
        assert_eq!(t.messages[3].id, "u4:1");
        assert_eq!(t.messages[3].text(), "go on");
        assert_eq!(
            t.skipped,
            [Skipped {
                line: 6,
                kind: "file-history-snapshot".into()
            }]
        );
        assert_eq!(t.messages[0].metadata[EXTRA_KEY]["cwd"], "/w");
    }

    /// Removing the known fields with `Map::remove` swapped the kept ones
    /// around (found by the `roundtrip` fuzz target in the OpenAI reader).
    #[test]
    fn kept_fields_keep_their_order() {
        let line = r#"{"type":"user","x1":1,"uuid":"u","x2":2,"message":{"role":"user","content":"hi"},"x3":3}"#;
        let t = parse(line).unwrap();
        let Value::Object(extra) = &t.messages[0].metadata[EXTRA_KEY] else {
            panic!("no kept fields: {:?}", t.messages[0].metadata);
        };
        let keys: Vec<&str> = extra.keys().map(String::as_str).collect();
        assert_eq!(keys, ["x1", "x2", "x3"]);
    }

    #[test]
    fn bad_records_name_their_line() {
        let cases = [
            ("{\"type\":\"user\"", "line 2: not valid JSON"),
            (
                "{\"type\":\"user\",\"uuid\":\"x\"}",
                "line 2, field `message`",
            ),
            (
                "{\"type\":\"user\",\"uuid\":7,\"message\":{\"content\":\"x\"}}",
                "line 2, field `uuid`",
            ),
            ("[]", "line 2: expected a record object"),
            (
                "{\"type\":\"user\",\"uuid\":\"x\",\"timestamp\":\"soon\",\"message\":{\"content\":\"x\"}}",
                "`soon` is not an RFC 3339 time",
            ),
        ];
        for (line, expected) in cases {
            let text = format!("{{\"type\":\"summary\",\"summary\":\"t\"}}\n{line}\n");
            let err = parse(&text).unwrap_err();
            assert!(err.to_string().starts_with("claude-code "), "{err}");
            assert!(err.to_string().contains(expected), "{err}");
        }
    }

    #[test]
    fn a_bad_record_is_quarantined_and_the_rest_is_read() {
        let text = r#"{"type":"user","uuid":"u1","parentUuid":null,"sessionId":"s","message":{"role":"user","content":"one"}}
{"type":"user","uuid":"u2","parentUuid":"u1","sessionId":"s","message":{"role":"user","content":[{"type":"video"}]}}
{"type":"assistant","uuid":"u3","parentUuid":"u1","sessionId":"s","message":{"role":"assistant","content":[{"type":"text","text":"two"}]}}
{"type":"user","uuid":
"#;
        let t = parse(text).unwrap();
        let texts: Vec<String> = t.messages.iter().map(|m| m.text().into_owned()).collect();
        assert_eq!(texts, ["one", "two"]);
        let lines: Vec<usize> = t.quarantined.iter().map(|q| q.line).collect();
        assert_eq!(lines, [2, 4]);
        let first = t.quarantined[0].error.to_string();
        assert!(first.contains("line 2, block 0, field `type`"), "{first}");
        assert!(
            t.quarantined[1]
                .error
                .to_string()
                .contains("not valid JSON")
        );
    }

    /// A rewind: the user went back to `u1` and asked again; the first
    /// answer (`u2`, `u3`) stays in the log, off the chain of the last record.
    #[test]
    fn a_rewound_branch_is_kept_apart_from_the_main_line() {
        let text = r#"{"type":"user","uuid":"u1","parentUuid":null,"sessionId":"s","message":{"role":"user","content":"fix the bug"}}
{"type":"assistant","uuid":"u2","parentUuid":"u1","sessionId":"s","message":{"id":"m1","role":"assistant","content":[{"type":"text","text":"Deleting the tests."}]}}
{"type":"user","uuid":"u3","parentUuid":"u2","sessionId":"s","message":{"role":"user","content":"no!"}}
{"type":"user","uuid":"u4","parentUuid":"u1","sessionId":"s","message":{"role":"user","content":"fix the bug, keep the tests"}}
{"type":"assistant","uuid":"u5","parentUuid":"u4","sessionId":"s","message":{"id":"m2","role":"assistant","content":[{"type":"text","text":"Patched src/lib.rs."}]}}
"#;
        let t = parse(text).unwrap();
        let ids: Vec<&str> = t.messages.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(ids, ["u1", "u4", "u5"]);
        assert_eq!(t.branches.len(), 1);
        let abandoned: Vec<&str> = t.branches[0].iter().map(|m| m.id.as_str()).collect();
        assert_eq!(abandoned, ["u2", "u3"]);
        // A chain that leads out of the file splits nothing.
        let resumed = text.replace(
            r#""uuid":"u1","parentUuid":null"#,
            r#""uuid":"u1","parentUuid":"u0""#,
        );
        let t = parse(&resumed).unwrap();
        assert_eq!((t.messages.len(), t.branches.len()), (5, 0));
    }

    #[test]
    fn a_compaction_becomes_a_summary_checkpoint() {
        let text = r#"{"type":"user","uuid":"u1","parentUuid":null,"sessionId":"s","message":{"role":"user","content":"long work"}}
{"type":"system","subtype":"compact_boundary","content":"Conversation compacted","uuid":"b1","parentUuid":null,"logicalParentUuid":"u1","sessionId":"s","compactMetadata":{"trigger":"auto","preTokens":155000}}
{"type":"user","uuid":"u2","parentUuid":"b1","sessionId":"s","isCompactSummary":true,"message":{"role":"user","content":"This session is being continued from a previous conversation. Summary: edited src/a.rs."}}
{"type":"user","uuid":"u3","parentUuid":"u2","sessionId":"s","message":{"role":"user","content":"go on"}}
"#;
        let t = parse(text).unwrap();
        let ids: Vec<&str> = t.messages.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(ids, ["u1", "u2", "u3"], "the chain crosses the compaction");
        let summary = &t.messages[1];
        assert!(summary.summary && !t.messages[2].summary);
        assert_eq!(
            summary.metadata[EXTRA_KEY]["compact_boundary"]["compactMetadata"]["preTokens"],
            155000
        );
        assert_eq!(t.skipped[0].kind, "system:compact_boundary");
    }

    /// `claude -p --output-format stream-json --verbose`: no `uuid` chain,
    /// `session_id`, init and result records, a subagent's messages tagged
    /// with the tool call that started it.
    #[test]
    fn stream_json_reads_as_a_conversation() {
        let text = r#"{"type":"system","subtype":"init","cwd":"/w","session_id":"s1","tools":["Bash","Task"],"model":"claude-sonnet-4-5"}
{"type":"assistant","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Running it."},{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls"}}],"usage":{"input_tokens":4,"output_tokens":20}},"parent_tool_use_id":null,"session_id":"s1"}
{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_1","type":"tool_result","content":"a.txt"}]},"parent_tool_use_id":null,"session_id":"s1"}
{"type":"assistant","message":{"id":"msg_2","role":"assistant","content":[{"type":"text","text":"sub"}]},"parent_tool_use_id":"toolu_9","session_id":"s1"}
{"type":"assistant","message":{"id":"msg_3","role":"assistant","content":[{"type":"text","text":"One file: a.txt."}]},"parent_tool_use_id":null,"session_id":"s1"}
{"type":"result","subtype":"success","is_error":false,"result":"One file: a.txt.","session_id":"s1","total_cost_usd":0.01}
"#;
        assert_eq!(Format::detect(text).unwrap(), Format::ClaudeCode);
        let t = parse(text).unwrap();
        let texts: Vec<String> = t.messages.iter().map(|m| m.text().into_owned()).collect();
        assert_eq!(texts, ["Running it.", "a.txt", "One file: a.txt."]);
        assert_eq!(t.messages[1].tool_name.as_deref(), Some("Bash"));
        assert_eq!(t.sidechains.len(), 1);
        assert!(t.messages[0].id.starts_with("claude-code-"));
        let kinds: Vec<&str> = t.skipped.iter().map(|s| s.kind.as_str()).collect();
        assert_eq!(kinds, ["system:init", "result:success"]);
        assert_eq!(parse(text).unwrap(), t, "ids are stable");
    }

    #[test]
    fn a_log_of_titles_only_is_an_empty_history() {
        let t =
            parse("{\"type\":\"summary\",\"summary\":\"Old chat\",\"leafUuid\":\"u9\"}\n").unwrap();
        assert_eq!(
            (t.messages.len(), t.title.as_deref()),
            (0, Some("Old chat"))
        );
    }

    /// Records of the shapes Claude Code and `claude -p` write (`message`
    /// before or after `type`, streamed turns, sidechains, a compaction,
    /// stream-json), for the typed route to be held to the generic one.
    const RECORDS: [&str; 14] = [
        r#"{"parentUuid":null,"isSidechain":false,"cwd":"/w","sessionId":"s","type":"user","message":{"role":"user","content":"list files"},"uuid":"u1","timestamp":"2025-09-03T00:47:19.293Z"}"#,
        r#"{"parentUuid":"u1","isSidechain":false,"sessionId":"s","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4","content":[{"type":"text","text":"Listing."}],"stop_reason":null,"usage":{"input_tokens":3,"cache_creation_input_tokens":5,"cache_read_input_tokens":100,"cache_creation":{"ephemeral_5m_input_tokens":5},"output_tokens":1,"service_tier":"standard"}},"requestId":"r1","type":"assistant","uuid":"u2","timestamp":"2025-09-03T00:47:20Z"}"#,
        r#"{"parentUuid":"u2","isSidechain":false,"sessionId":"s","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4","content":[{"type":"tool_use","id":"toolu_1","name":"LS","input":{"path":"/w","depth":2,"all":true,"glob":["*.rs","\u00e9\n"],"x":null,"f":-1.5e3}}],"usage":{"input_tokens":3,"output_tokens":40}},"type":"assistant","uuid":"u3","timestamp":"2025-09-03T00:47:21Z"}"#,
        r#"{"parentUuid":"u3","isSidechain":false,"sessionId":"s","type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_1","type":"tool_result","content":"a.txt"},{"type":"text","text":"go on"}]},"uuid":"u4","timestamp":"2025-09-03T00:47:22Z","toolUseResult":{"numFiles":1,"files":["a.txt"]}}"#,
        r#"{"type":"assistant","uuid":"u5","parentUuid":"u4","sessionId":"s","message":{"id":"msg_2","role":"assistant","content":[{"type":"thinking","thinking":"hm","signature":"sig"},{"type":"text","text":"Done."},{"type":"redacted_thinking","data":"xx"}]}}"#,
        r#"{"parentUuid":"u4","isSidechain":true,"sessionId":"s","message":{"id":"msg_3","role":"assistant","content":[{"type":"text","text":"sub"}]},"type":"assistant","uuid":"s1"}"#,
        r#"{"parentUuid":"s1","isSidechain":true,"type":"user","message":{"role":"user","content":"sub task"},"uuid":"s2"}"#,
        r#"{"type":"system","subtype":"compact_boundary","uuid":"b1","parentUuid":null,"logicalParentUuid":"u4","sessionId":"s"}"#,
        r#"{"type":"user","uuid":"u6","parentUuid":"b1","sessionId":"s","isCompactSummary":true,"message":{"role":"user","content":"Summary: listed files."}}"#,
        r#"{"type":"assistant","message":{"id":"msg_4","type":"message","role":"assistant","content":[{"type":"text","text":"Running."},{"type":"tool_use","id":"toolu_2","name":"Bash","input":{"command":"ls"}}]},"parent_tool_use_id":null,"session_id":"s1"}"#,
        r#"{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_2","type":"tool_result","content":[{"type":"text","text":"a"}],"is_error":true}]},"parent_tool_use_id":"toolu_9","session_id":"s1"}"#,
        r#"{"type":"summary","summary":"Title","leafUuid":"u4"}"#,
        r#"{"type":"user","uuid":"u7","parentUuid":"u6","message":{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}},{"type":"text","text":"see"}]}}"#,
        r#"{"type":"assistant","uuid":"u8","parentUuid":"u7","message":{"role":"assistant","content":"plain","usage":null}}"#,
    ];

    /// Changes to a record (the first place `.0` is found becomes `.1`):
    /// fields repeated, of other types, out of range, unknown, moved.
    const CHANGES: [(&str, &str); 30] = [
        ("", ""),
        ("\"message\":{", "\"message\":{\"zz\":1e400,"),
        ("\"message\":{", "\"message\":{\"zz\":\"\\ud800\","),
        (
            "\"message\":{",
            "\"message\":{\"zz\":{\"$serde_json::private::RawValue\":5},",
        ),
        (
            "\"message\":{",
            "\"message\":{\"usage\":{\"input_tokens\":-3,\"output_tokens\":2.0,\"cache_read_input_tokens\":5,\"cache_read_input_tokens\":7},",
        ),
        ("\"message\":{", "\"message\":{\"content\":\"first\","),
        ("\"message\":{", "\"message\":{\"role\":\"assistant\","),
        (
            "\"message\":{",
            "\"message\":{\"id\":\"msg_1\",\"model\":7,",
        ),
        ("{", "{\"cwd\":\"dup\",\"x\":[1,{\"y\":\"\\u00e9\"}],"),
        ("{", "{\"type\":\"assistant\","),
        ("{", "{\"message_id\":\"pre\",\"x\":\"\\udc00\","),
        ("\"uuid\":\"", "\"uuid\":7,\"u0\":\""),
        ("\"uuid\":\"", "\"uuid\":null,\"u0\":\""),
        ("\"timestamp\":\"", "\"timestamp\":\"soon\",\"t0\":\""),
        ("\"isSidechain\":false", "\"isSidechain\":true"),
        ("\"type\":\"text\"", "\"type\":\"video\""),
        (
            "\"type\":\"text\",\"text\":\"",
            "\"type\":\"text\",\"text\":5,\"t\":\"",
        ),
        (
            "\"type\":\"text\",\"text\":\"",
            "\"text\":\"x\",\"type\":\"text\",\"cache_control\":{\"type\":\"ephemeral\"},\"t\":\"",
        ),
        (
            "\"type\":\"tool_use\"",
            "\"type\":\"tool_use\",\"type\":\"text\"",
        ),
        ("\"id\":\"toolu_", "\"id\":5,\"i\":\"toolu_"),
        ("\"input\":{", "\"input\":{\"path\":0,"),
        ("\"input\":{", "\"input\":7,\"in\":{"),
        ("\"tool_use_id\":\"", "\"tool_use_id\":null,\"t\":\""),
        (
            "\"content\":[",
            "\"content\":[{\"type\":\"text\",\"text\":\"pre\"},",
        ),
        ("\"content\":[", "\"content\":{\"a\":["),
        ("\"type\":\"user\"", "\"type\":\"system\",\"subtype\":\"x\""),
        (
            "\"type\":\"assistant\"",
            "\"type\":\"assistant\",\"parent_tool_use_id\":\"toolu_x\"",
        ),
        ("\"type\":\"assistant\"", "\"type\":7"),
        (
            "\"message\":{",
            "\"message\":{\"zz\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]],",
        ),
        ("}", "} trailing"),
    ];

    /// A log read through the typed route where it takes a record, or
    /// through the generic route alone.
    fn read_log(text: &str, limits: super::super::Limits, typed: bool) -> String {
        let mut reader = super::super::LineReader::new(FORMAT, limits);
        if !typed {
            reader = reader.generic_only();
        }
        let read = text
            .lines()
            .enumerate()
            .try_for_each(|(i, line)| reader.push(line, i + 1))
            .and_then(|()| reader.finish());
        format!("{read:?}")
    }

    proptest::proptest! {
        /// The typed route reads what the generic route reads: the same
        /// messages, metadata, threads, quarantine and errors, and the same
        /// values counted against the limits.
        #[test]
        fn the_typed_route_reads_as_the_generic_route(
            lines in proptest::collection::vec(
                (0..RECORDS.len(), proptest::prop_oneof![3 => proptest::strategy::Just(0), 2 => 0..CHANGES.len()]),
                1..12,
            ),
            values in proptest::prop_oneof![proptest::strategy::Just(u64::MAX), 1u64..400],
        ) {
            let text: Vec<String> = lines
                .iter()
                .map(|&(record, change)| {
                    let (from, to) = CHANGES[change];
                    RECORDS[record].replacen(from, to, 1)
                })
                .collect();
            let text = text.join("\n");
            let mut limits = super::super::Limits::default();
            if values != u64::MAX {
                limits.message_values = values.min(limits.message_values);
                limits.history_values = (values * 3).min(limits.history_values);
            }
            proptest::prop_assert_eq!(read_log(&text, limits, true), read_log(&text, limits, false));
        }
    }

    /// The typed route takes the records Claude Code writes, and counts
    /// their values as the count does.
    #[test]
    fn the_typed_route_takes_claude_codes_records() {
        let mut reader = Reader::default();
        for (i, record) in RECORDS.iter().enumerate() {
            let tally = Tally::new(u64::MAX);
            let taken = reader.read_typed(record, i + 1, &tally);
            // Not the summary, nor the compaction's boundary (no message).
            assert_eq!(taken, !matches!(i, 7 | 11), "record {i}");
            if taken {
                assert_eq!(
                    Ok(tally.count()),
                    super::super::limits::count_values(record, u64::MAX),
                    "record {i}"
                );
            }
        }
    }

    /// A field the typed route reads and drops is still read as a `Value`
    /// reads it: skipping it (`IgnoredAny`) took numbers out of range, lone
    /// surrogates and nesting past serde_json's limit, which the generic
    /// route refuses (found in review of the OpenAI reader's typed route).
    #[test]
    fn the_typed_route_refuses_what_a_value_refuses() {
        let deep = format!("{}{}", "[".repeat(130), "]".repeat(130));
        for bad in ["1e400", "\"\\ud800\"", &deep] {
            for (from, to) in [
                ("\"role\":\"assistant\"", format!("\"role\":{bad}")),
                ("\"stop_reason\":null", format!("\"stop_reason\":{bad}")),
                (
                    "\"service_tier\":\"standard\"",
                    format!("\"service_tier\":{bad}"),
                ),
                ("\"input_tokens\":3", format!("\"input_tokens\":{bad}")),
            ] {
                let record = RECORDS[1].replacen(from, &to, 1);
                assert_ne!(record, RECORDS[1]);
                let tally = Tally::new(u64::MAX);
                assert!(
                    !Reader::default().read_typed(&record, 1, &tally),
                    "{record}"
                );
                let error = parse(&record).unwrap_err().to_string();
                assert!(error.contains("not valid JSON"), "{error}");
            }
        }
    }

    #[test]
    fn a_codex_rollout_read_as_claude_code_is_refused_naming_codex() {
        let text = r#"{"timestamp":"2025-10-29T00:59:38Z","type":"session_meta","payload":{"id":"x"}}
{"timestamp":"2025-10-29T00:59:38Z","type":"response_item","payload":{"type":"message","role":"user","content":"hi"}}
"#;
        let err = parse(text).unwrap_err().to_string();
        assert!(err.contains("--format codex"), "{err}");
    }
}
