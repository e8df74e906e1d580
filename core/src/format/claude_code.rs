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
//! - other record types are not conversation messages and are listed in
//!   [`Transcript::skipped`].
//!
//! A message's id is its record's `uuid` (`uuid:N` for the N-th extra message
//! of one record). Everything else the record carries (`cwd`, `gitBranch`,
//! `sessionId`, `toolUseResult`, ...) is kept in its metadata under
//! `"claude_code"`.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use super::anthropic::{self, ToolNames};
use super::{Format, FormatError, Skipped, Transcript, kind_of};
use crate::message::{Message, Usage};

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
    /// Record uuids of sidechains -> which sidechain.
    sidechain_of: HashMap<String, usize>,
}

impl Reader {
    /// The thread a record goes to: the main one, the sidechain its parent is
    /// in, or a new sidechain.
    fn thread_of(&mut self, record: &Map<String, Value>) -> Thread {
        if record.get("isSidechain").and_then(Value::as_bool) != Some(true) {
            return Thread::Main;
        }
        let parent = record.get("parentUuid").and_then(Value::as_str);
        let k = match parent.and_then(|p| self.sidechain_of.get(p)) {
            Some(&k) => k,
            None => {
                self.transcript.sidechains.push(Vec::new());
                self.transcript.sidechains.len() - 1
            }
        };
        if let Some(uuid) = record.get("uuid").and_then(Value::as_str) {
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

    /// What was read.
    pub(super) fn into_transcript(self) -> Transcript {
        self.transcript
    }

    /// Reads one record; the caller adds the line to errors.
    pub(super) fn read_record(&mut self, line: &str, line_no: usize) -> Result<(), FormatError> {
        let record: Value = serde_json::from_str(line)
            .map_err(|e| FormatError::new(FORMAT, format!("not valid JSON: {e}")))?;
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
                let thread = self.thread_of(&record);
                let (mut message, common) = split_record(record)?;
                let content = message.shift_remove("content").unwrap_or(Value::Null);
                let (results, user) = anthropic::user_content(FORMAT, content, &self.tool_names)?;
                for (n, mut m) in results.into_iter().chain(user).enumerate() {
                    m.id = if n == 0 {
                        common.uuid.clone()
                    } else {
                        format!("{}:{n}", common.uuid)
                    };
                    common.stamp(&mut m);
                    self.thread(thread).push(m);
                }
            }
            "assistant" => {
                let thread = self.thread_of(&record);
                self.read_assistant(record, thread)?;
            }
            _ => self.transcript.skipped.push(Skipped {
                line: line_no,
                kind,
            }),
        }
        Ok(())
    }

    /// An assistant record: a new turn, or a streamed piece of an earlier one.
    fn read_assistant(
        &mut self,
        record: Map<String, Value>,
        thread: Thread,
    ) -> Result<(), FormatError> {
        let (mut message, mut common) = split_record(record)?;
        let content = message.shift_remove("content").unwrap_or(Value::Null);
        let usage = message.get("usage").map(usage_from_value);
        let message_id = message.get("id").and_then(Value::as_str).map(str::to_owned);
        let mut tool_names = std::mem::take(&mut self.tool_names);
        if let Some(&(turn_thread, index)) = message_id.as_ref().and_then(|id| self.turns.get(id)) {
            let m = &mut self.thread(turn_thread)[index];
            let added = anthropic::assistant_content(FORMAT, content, m, &mut tool_names);
            m.usage = usage.or(m.usage);
            m.invalidate_tokens();
            if let Some(Value::Object(extra)) = m.metadata.get_mut(EXTRA_KEY) {
                let merged = extra
                    .entry("merged_uuids")
                    .or_insert_with(|| Value::Array(Vec::new()));
                if let Value::Array(uuids) = merged {
                    uuids.push(Value::String(common.uuid));
                }
            }
            self.tool_names = tool_names;
            return added;
        }
        let mut m = Message::assistant("");
        let added = anthropic::assistant_content(FORMAT, content, &mut m, &mut tool_names);
        self.tool_names = tool_names;
        added?;
        m.id = common.uuid.clone();
        m.usage = usage;
        m.model = message
            .get("model")
            .and_then(Value::as_str)
            .map(str::to_owned);
        if let Some(id) = &message_id {
            common
                .extra
                .insert("message_id".into(), Value::String(id.clone()));
        }
        common.stamp(&mut m);
        let messages = self.thread(thread);
        if let Some(id) = message_id {
            let index = messages.len();
            self.turns.insert(id, (thread, index));
        }
        self.thread(thread).push(m);
        Ok(())
    }
}

/// What every message of one record shares.
struct Common {
    uuid: String,
    timestamp: Option<DateTime<Utc>>,
    extra: Map<String, Value>,
}

impl Common {
    fn stamp(&self, m: &mut Message) {
        m.timestamp = self.timestamp;
        if !self.extra.is_empty() {
            m.metadata
                .insert(EXTRA_KEY.into(), Value::Object(self.extra.clone()));
        }
    }
}

/// Splits a record into its `message` object and the fields around it.
fn split_record(
    mut record: Map<String, Value>,
) -> Result<(Map<String, Value>, Common), FormatError> {
    let message = match record.shift_remove("message") {
        Some(Value::Object(message)) => message,
        _ => return Err(FormatError::new(FORMAT, "missing object `message`").at_field("message")),
    };
    let uuid = match record.shift_remove("uuid") {
        Some(Value::String(uuid)) => uuid,
        _ => return Err(FormatError::new(FORMAT, "missing string `uuid`").at_field("uuid")),
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
                "{\"type\":\"user\",\"message\":{\"content\":\"x\"}}",
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
}
