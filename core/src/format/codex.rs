//! OpenAI Codex CLI rollouts (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`),
//! import only.
//!
//! Each line is a record `{timestamp, type, payload}`:
//! - `response_item`: a Responses API item (messages, function, custom and
//!   shell calls and their outputs, reasoning with its encrypted content),
//!   read as [`super::responses`] reads items, stamped with the record's
//!   time;
//! - `compacted`: the summary Codex put in place of the history before it
//!   (`payload.message`), which becomes a summary checkpoint message; the
//!   history Codex kept in its place (`replacement_history`), when given,
//!   is kept verbatim in its metadata under `"codex"`;
//! - `turn_context`: names the model of the assistant messages that follow;
//! - `session_meta`, `event_msg` (the UI's copies of the items, token
//!   counts), `turn_context` and other records are not messages and are
//!   listed in [`Transcript::skipped`](super::Transcript::skipped).
//!
//! Rollouts written before Codex 0.4x have no envelope: a header line `{id,
//! timestamp, instructions}`, then bare items and `{record_type: "state"}`
//! lines; they are read the same way.
//!
//! Messages carry no ids in this format; ids are derived from position and
//! text (`codex-NNNNN-hash`), so importing a file twice gives the same ids.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use super::responses::{self, Items};
use super::{Format, FormatError, Skipped, Transcript, kind_of};
use crate::message::Message;

/// The metadata key under which Codex's own data is kept.
pub const EXTRA_KEY: &str = "codex";

/// The record types of a rollout.
pub const RECORD_TYPES: [&str; 5] = [
    "session_meta",
    "response_item",
    "event_msg",
    "turn_context",
    "compacted",
];

const FORMAT: Format = Format::Codex;

/// Reads a rollout within the default [`Limits`](super::Limits).
pub fn parse(text: &str) -> Result<Transcript, FormatError> {
    super::parse_within(FORMAT, text, &super::Limits::default())
}

/// Reads records one at a time (see [`super::LineReader`]).
pub(super) struct Reader {
    items: Items,
    skipped: Vec<Skipped>,
}

impl Default for Reader {
    fn default() -> Self {
        Reader {
            items: Items::new(FORMAT),
            skipped: Vec::new(),
        }
    }
}

impl Reader {
    /// What was read.
    pub(super) fn into_transcript(self) -> Transcript {
        Transcript {
            messages: self.items.finish("codex"),
            skipped: self.skipped,
            ..Transcript::default()
        }
    }

    fn skip(&mut self, line: usize, kind: String) {
        self.skipped.push(Skipped { line, kind });
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
        let timestamp = timestamp(&record)?;
        let kind = match record.get("type") {
            Some(Value::String(kind)) => kind.clone(),
            // The header and state lines of an early rollout.
            None if record.contains_key("record_type") || record.contains_key("instructions") => {
                let kind = record
                    .get("record_type")
                    .and_then(Value::as_str)
                    .unwrap_or("session_meta");
                self.skip(line_no, kind.to_owned());
                return Ok(());
            }
            _ => return Err(FormatError::new(FORMAT, "missing string `type`").at_field("type")),
        };
        if !record.contains_key("payload") {
            // An early rollout's bare item.
            if responses::ITEM_TYPES.contains(&kind.as_str()) {
                return self
                    .items
                    .push(Value::Object(record), timestamp)
                    .map_err(|e| e.at_field("payload"));
            }
            return Err(self.foreign(line, &kind));
        }
        let payload = record.shift_remove("payload").unwrap_or(Value::Null);
        match kind.as_str() {
            "response_item" => self
                .items
                .push(payload, timestamp)
                .map_err(|e| prefixed(e, "payload")),
            "compacted" => {
                let Value::Object(mut payload) = payload else {
                    return Err(
                        FormatError::new(FORMAT, "`payload` must be an object").at_field("payload")
                    );
                };
                let text = match payload.shift_remove("message") {
                    Some(Value::String(text)) => text,
                    None | Some(Value::Null) => String::new(),
                    Some(other) => {
                        return Err(FormatError::new(
                            FORMAT,
                            format!("`message` must be a string, found {}", kind_of(&other)),
                        )
                        .at_field("payload.message"));
                    }
                };
                let mut m = Message::user(text);
                m.summary = true;
                m.timestamp = timestamp;
                let mut kept = Map::new();
                kept.insert("compacted".into(), Value::Object(payload));
                m.metadata.insert(EXTRA_KEY.into(), Value::Object(kept));
                self.items.push_message(m);
                Ok(())
            }
            "turn_context" => {
                if let Some(model) = payload.get("model").and_then(Value::as_str) {
                    self.items.model = Some(model.to_owned());
                }
                self.skip(line_no, kind);
                Ok(())
            }
            "session_meta" | "event_msg" => {
                let kind = match payload.get("type").and_then(Value::as_str) {
                    Some(sub) => format!("{kind}:{sub}"),
                    None => kind,
                };
                self.skip(line_no, kind);
                Ok(())
            }
            _ => {
                self.skip(line_no, kind);
                Ok(())
            }
        }
    }

    /// The error for a record of another format in a rollout.
    fn foreign(&self, line: &str, kind: &str) -> FormatError {
        let mut detail = format!("record type `{kind}` without a `payload` is no Codex record");
        if let Some(other) = Format::of_line(line).filter(|&f| f != FORMAT) {
            detail.push_str(&format!(
                "; it is a {other} record: read the file with --format {other}"
            ));
        }
        FormatError::new(FORMAT, detail).at_field("type")
    }
}

/// The field of an item error, inside the record's `payload`.
fn prefixed(mut e: FormatError, prefix: &str) -> FormatError {
    e.location.field = Some(match e.location.field.take() {
        Some(field) => format!("{prefix}.{field}"),
        None => prefix.to_owned(),
    });
    e
}

fn timestamp(record: &Map<String, Value>) -> Result<Option<DateTime<Utc>>, FormatError> {
    match record.get("timestamp") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(t)) => DateTime::parse_from_rfc3339(t)
            .map(|t| Some(t.with_timezone(&Utc)))
            .map_err(|e| {
                FormatError::new(FORMAT, format!("`{t}` is not an RFC 3339 time ({e})"))
                    .at_field("timestamp")
            }),
        Some(other) => Err(FormatError::new(
            FORMAT,
            format!("`timestamp` must be a string, found {}", kind_of(other)),
        )
        .at_field("timestamp")),
    }
}

/// A compacted record's kept data, for tests and callers: what Codex put in
/// place of the history.
pub fn compacted(m: &Message) -> Option<&Value> {
    m.metadata.get(EXTRA_KEY)?.get("compacted")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Role;
    use serde_json::json;

    /// A short rollout in the shape Codex 0.5x writes (made up for this test
    /// from the public format: `codex-rs/protocol`).
    const ROLLOUT: &str = r#"{"timestamp":"2025-10-29T00:59:38.317Z","type":"session_meta","payload":{"id":"019a2d7a-41c4","timestamp":"2025-10-29T00:59:38.308Z","cwd":"/w","originator":"codex_cli_rs","cli_version":"0.50.0","instructions":null}}
{"timestamp":"2025-10-29T00:59:38.317Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>\n  <cwd>/w</cwd>\n</environment_context>"}]}}
{"timestamp":"2025-10-29T00:59:38.320Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"Why does test_parse fail?"}]}}
{"timestamp":"2025-10-29T00:59:38.321Z","type":"event_msg","payload":{"type":"user_message","message":"Why does test_parse fail?","kind":"plain"}}
{"timestamp":"2025-10-29T00:59:38.322Z","type":"turn_context","payload":{"cwd":"/w","approval_policy":"on-request","model":"gpt-5-codex","effort":"medium","summary":"auto"}}
{"timestamp":"2025-10-29T00:59:40.100Z","type":"response_item","payload":{"type":"reasoning","summary":[{"type":"summary_text","text":"**Running the tests**"}],"content":null,"encrypted_content":"gAAAAABpAW-opaque"}}
{"timestamp":"2025-10-29T00:59:40.200Z","type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{\"command\":[\"bash\",\"-lc\",\"cargo test test_parse\"],\"workdir\":\"/w\"}","call_id":"call_A1"}}
{"timestamp":"2025-10-29T00:59:45.000Z","type":"response_item","payload":{"type":"function_call_output","call_id":"call_A1","output":"{\"output\":\"test test_parse ... FAILED\\nsrc/lib.rs:42: expected 3, got 4\",\"metadata\":{\"exit_code\":101,\"duration_seconds\":4.2}}"}}
{"timestamp":"2025-10-29T00:59:45.100Z","type":"event_msg","payload":{"type":"token_count","info":null}}
{"timestamp":"2025-10-29T00:59:47.000Z","type":"response_item","payload":{"type":"custom_tool_call","status":"completed","call_id":"call_B2","name":"apply_patch","input":"*** Begin Patch\n*** Update File: src/lib.rs\n@@\n-    3\n+    4\n*** End Patch"}}
{"timestamp":"2025-10-29T00:59:47.500Z","type":"response_item","payload":{"type":"custom_tool_call_output","call_id":"call_B2","output":"Success. Updated the following files:\nM src/lib.rs"}}
{"timestamp":"2025-10-29T00:59:50.000Z","type":"compacted","payload":{"message":"The user asked why test_parse fails; src/lib.rs:42 expected 3. Patched it to 4."}}
{"timestamp":"2025-10-29T00:59:51.000Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Fixed: src/lib.rs:42 now expects 4."}]}}
"#;

    #[test]
    fn reads_a_rollout_as_messages_calls_and_a_checkpoint() {
        let t = parse(ROLLOUT).unwrap();
        let roles: Vec<Role> = t.messages.iter().map(|m| m.role).collect();
        assert_eq!(
            roles,
            [
                Role::User,
                Role::User,
                Role::Assistant,
                Role::Tool,
                Role::Assistant,
                Role::Tool,
                Role::User,
                Role::Assistant
            ]
        );
        let call = &t.messages[2];
        assert_eq!(call.tool_calls[0].name, "shell");
        assert_eq!(call.model.as_deref(), Some("gpt-5-codex"));
        assert_eq!(
            call.reasoning.as_ref().unwrap().text,
            "**Running the tests**"
        );
        assert_eq!(
            call.metadata[responses::EXTRA_KEY]["items"][0]["encrypted_content"],
            "gAAAAABpAW-opaque"
        );
        assert_eq!(t.messages[3].tool_name.as_deref(), Some("shell"));
        assert!(t.messages[3].content.contains("expected 3, got 4"));
        assert_eq!(t.messages[4].tool_calls[0].name, "apply_patch");
        assert!(
            t.messages[4].tool_calls[0]
                .arguments
                .starts_with("*** Begin Patch")
        );
        let checkpoint = &t.messages[6];
        assert!(checkpoint.summary);
        assert!(checkpoint.content.contains("Patched it to 4"));
        assert_eq!(compacted(checkpoint), Some(&json!({})));
        assert_eq!(
            t.messages[7].timestamp.unwrap().to_rfc3339(),
            "2025-10-29T00:59:51+00:00"
        );
        let kinds: Vec<&str> = t.skipped.iter().map(|s| s.kind.as_str()).collect();
        assert_eq!(
            kinds,
            [
                "session_meta",
                "event_msg:user_message",
                "turn_context",
                "event_msg:token_count"
            ]
        );
        // The same file gives the same ids.
        assert_eq!(parse(ROLLOUT).unwrap().messages, t.messages);
    }

    #[test]
    fn an_early_rollout_without_envelopes_reads_too() {
        let text = r#"{"id":"5973b6c0","timestamp":"2025-04-23T20:00:00.000Z","instructions":null}
{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}
{"record_type":"state"}
{"type":"message","role":"assistant","content":[{"type":"output_text","text":"hello"}]}
"#;
        assert_eq!(Format::detect(text).unwrap(), Format::Codex);
        let t = parse(text).unwrap();
        assert_eq!(t.messages.len(), 2);
        assert_eq!(t.messages[1].text(), "hello");
    }

    #[test]
    fn bad_records_name_their_line_and_field() {
        let cases = [
            ("{\"type\":\"response_item\"", "line 2: not valid JSON"),
            (
                r#"{"type":"response_item","payload":{"type":"function_call","name":"x"}}"#,
                "line 2, field `payload.call_id`",
            ),
            (
                r#"{"type":"compacted","payload":{"message":3}}"#,
                "field `payload.message`",
            ),
            (
                r#"{"type":"response_item","timestamp":"soon","payload":{}}"#,
                "`soon` is not an RFC 3339 time",
            ),
            (
                r#"{"type":"user","uuid":"u","sessionId":"s","message":{"role":"user","content":"x"}}"#,
                "it is a claude-code record",
            ),
        ];
        for (line, expected) in cases {
            let text = format!(
                "{{\"timestamp\":\"2025-10-29T00:59:38Z\",\"type\":\"session_meta\",\"payload\":{{}}}}\n{line}\n"
            );
            let err = parse(&text).unwrap_err();
            assert!(err.to_string().starts_with("codex "), "{err}");
            assert!(err.to_string().contains(expected), "{err}");
        }
    }
}
