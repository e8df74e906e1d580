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

/// Reads a session log.
pub fn parse(text: &str) -> Result<Transcript, FormatError> {
    let mut transcript = Transcript::default();
    let mut tool_names = ToolNames::default();
    // Streamed assistant turns: `message.id` -> index in `transcript.messages`.
    let mut turns: HashMap<String, usize> = HashMap::new();
    for (i, line) in text.lines().enumerate() {
        let line_no = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        read_record(line, line_no, &mut transcript, &mut tool_names, &mut turns)
            .map_err(|e| e.at_line(line_no))?;
    }
    Ok(transcript)
}

fn read_record(
    line: &str,
    line_no: usize,
    transcript: &mut Transcript,
    tool_names: &mut ToolNames,
    turns: &mut HashMap<String, usize>,
) -> Result<(), FormatError> {
    let record: Value = serde_json::from_str(line)
        .map_err(|e| FormatError::new(FORMAT, format!("not valid JSON: {e}")))?;
    let Value::Object(mut record) = record else {
        return Err(FormatError::new(
            FORMAT,
            format!("expected a record object, found {}", kind_of(&record)),
        ));
    };
    let kind = match record.remove("type") {
        Some(Value::String(kind)) => kind,
        _ => return Err(FormatError::new(FORMAT, "missing string `type`").at_field("type")),
    };
    match kind.as_str() {
        "summary" => {
            if transcript.title.is_none() {
                transcript.title = record
                    .get("summary")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
            }
            Ok(())
        }
        "user" => {
            let (mut message, common) = split_record(record)?;
            let content = message.remove("content").unwrap_or(Value::Null);
            let (results, user) = anthropic::user_content(FORMAT, content, tool_names)?;
            for (n, mut m) in results.into_iter().chain(user).enumerate() {
                m.id = if n == 0 {
                    common.uuid.clone()
                } else {
                    format!("{}:{n}", common.uuid)
                };
                common.stamp(&mut m);
                transcript.messages.push(m);
            }
            Ok(())
        }
        "assistant" => {
            let (mut message, mut common) = split_record(record)?;
            let content = message.remove("content").unwrap_or(Value::Null);
            let usage = message.get("usage").map(usage_from_value);
            let message_id = message.get("id").and_then(Value::as_str).map(str::to_owned);
            if let Some(&index) = message_id.as_ref().and_then(|id| turns.get(id)) {
                let m = &mut transcript.messages[index];
                anthropic::assistant_content(FORMAT, content, m, tool_names)?;
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
                return Ok(());
            }
            let mut m = Message::assistant("");
            anthropic::assistant_content(FORMAT, content, &mut m, tool_names)?;
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
            if let Some(id) = message_id {
                turns.insert(id, transcript.messages.len());
            }
            transcript.messages.push(m);
            Ok(())
        }
        _ => {
            transcript.skipped.push(Skipped {
                line: line_no,
                kind,
            });
            Ok(())
        }
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
    let message = match record.remove("message") {
        Some(Value::Object(message)) => message,
        _ => return Err(FormatError::new(FORMAT, "missing object `message`").at_field("message")),
    };
    let uuid = match record.remove("uuid") {
        Some(Value::String(uuid)) => uuid,
        _ => return Err(FormatError::new(FORMAT, "missing string `uuid`").at_field("uuid")),
    };
    let timestamp = match record.remove("timestamp") {
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
