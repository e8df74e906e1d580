//! What a processor's call saw and answered, recorded so that it can be run
//! again and its answer checked byte for byte (`agent-host replay`).
//!
//! A [`RunRecord`] holds the call's input (the digest of the history it was
//! given), its context, configuration, grants and limits, the digest of its
//! answer with a bounded summary of its edits, the digest of the history
//! after the answer was applied, the host services it called and their
//! answers, and which sources of nondeterminism it used ([`Sources`]).
//!
//! The canonical serialisations behind the digests are told on
//! [`RunRecord`].

use std::collections::BTreeMap;

use agent_host_core::{Message, Usage};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::bindings::wit;
use crate::{FailurePolicy, Grants, InvalidPolicy, Limits, RunInfo};

/// The version of the record's shape; a replay refuses another.
pub const RECORD_VERSION: u32 = 1;

/// At most this many entries of an answer's edit summary are kept; the
/// digest still covers the whole answer.
pub const MAX_RECORDED_EDITS: usize = 10_000;

/// What one processor call saw and answered.
///
/// The canonical serialisations behind the digests (all SHA-256, lowercase
/// hex):
///
/// - a **history** is hashed as native JSONL: each message as one line of
///   core's JSONL writer (`format::jsonl::write_line`: the message model's
///   fields in their order, metadata keys in their order), each line ending
///   in `\n`; exactly what `agent-host convert --to jsonl` writes.
/// - an **answer** is hashed as one JSON line per item, each ending in `\n`:
///   `{"keep":I}`, `{"replace":I,"message":M}`, `{"insert":M}`, or, when the
///   processor answered with an error, the single line `{"error":{"bad-config":T}}`
///   or `{"error":{"failed":T}}`. `M` is the message as the guest returned it,
///   in the WIT record's field order with its WIT names (`id`, `role`,
///   `content`, `parts`, `reasoning`, `tool-calls`, `tool-call-id`,
///   `tool-name`, `usage`, `model`, `timestamp`, `agent`, `channel`,
///   `flags`, `metadata`, `tokens`): a variant as a one-key object
///   (`{"text":T}`, `{"url":U}`), flags as the list of their names, an
///   absent option as `null`, records with their WIT field names in WIT
///   order. JSON is written compact, as `serde_json` writes it. A 0.1.0 and
///   a 0.2.0 answer with the same items hash the same.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// The record's shape ([`RECORD_VERSION`]).
    pub version: u32,
    /// The contract the processor speaks (`0.1.0`, `0.2.0`).
    pub contract: String,
    /// The history it was given.
    pub input: HistoryDigest,
    /// What the host told it about the run.
    pub context: RecordedContext,
    /// The configuration it was given, as the exact text passed.
    pub config: String,
    /// Its capabilities.
    pub grants: Grants,
    /// Its limits.
    pub limits: Limits,
    /// What its failure did to the run.
    pub on_failure: FailurePolicy,
    /// What an answer breaking the provider rules became.
    pub on_invalid: InvalidPolicy,
    /// Its answer; `None` when it gave none (a trap, a limit, a denied call).
    pub answer: Option<AnswerRecord>,
    /// The history after its answer was applied (its input when it failed).
    pub output: HistoryDigest,
    /// The WASI functions it called that read a clock, randomness, the
    /// environment or files.
    pub sources: Sources,
    /// Whether it used no source of nondeterminism and made no call it was
    /// not granted: a replay must then give the same answer.
    pub deterministic: bool,
    /// The host services it called, in order, with their answers (its
    /// report's): a replay answers from these
    /// ([`RecordedServices`](crate::RecordedServices)) instead of calling
    /// the services.
    #[serde(default)]
    pub services: Vec<crate::ServiceCall>,
}

/// A history, by digest.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryDigest {
    /// The SHA-256 of the history as native JSONL.
    pub sha256: String,
    /// How many messages it holds.
    pub messages: usize,
}

impl HistoryDigest {
    /// The digest of `messages`.
    pub fn of(messages: &[Message]) -> HistoryDigest {
        HistoryDigest {
            sha256: history_sha256(messages),
            messages: messages.len(),
        }
    }
}

/// The SHA-256 (hex) of `messages` as native JSONL: what `agent-host
/// convert --to jsonl` writes.
pub fn history_sha256(messages: &[Message]) -> String {
    let mut hasher = Sha256::new();
    let mut line = Vec::new();
    for m in messages {
        line.clear();
        agent_host_core::format::jsonl::write_line(m, &mut line);
        hasher.update(&line);
    }
    crate::cache::hex(&hasher.finalize())
}

/// The SHA-256 (hex) of `bytes`: the digest a component is known by.
pub fn sha256_hex(bytes: &[u8]) -> String {
    crate::cache::hex(&crate::cache::sha256(bytes))
}

/// The run context a processor was given (`run-context` in the contract).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedContext {
    /// The session's key.
    pub session_key: Option<String>,
    /// The agent.
    pub agent: Option<String>,
    /// The model.
    pub model: Option<String>,
    /// The model's context window, in tokens.
    pub context_window: u32,
    /// Tokens available for the history.
    pub budget: u32,
    /// The host's estimate of the history's tokens.
    pub total_tokens: u32,
    /// The number of the current turn.
    pub turn: u32,
    /// Usage summed over the history.
    pub usage: Usage,
    /// The time of the run.
    pub now: DateTime<Utc>,
}

impl RecordedContext {
    /// What the host passes to a run with this context (the history's
    /// tokens, turn and usage are computed from the history again).
    pub fn run_info(&self) -> RunInfo {
        RunInfo {
            session_key: self.session_key.clone(),
            agent: self.agent.clone(),
            model: self.model.clone(),
            context_window: self.context_window,
            budget: self.budget,
            now: self.now,
        }
    }

    pub(crate) fn of(ctx: &wit::RunContext, now: DateTime<Utc>) -> RecordedContext {
        RecordedContext {
            session_key: ctx.session_key.clone(),
            agent: ctx.agent.clone(),
            model: ctx.model.clone(),
            context_window: ctx.context_window,
            budget: ctx.budget,
            total_tokens: ctx.total_tokens,
            turn: ctx.turn,
            usage: Usage {
                input_tokens: ctx.usage.input_tokens,
                output_tokens: ctx.usage.output_tokens,
                cache_read_tokens: ctx.usage.cache_read_tokens,
                cache_write_tokens: ctx.usage.cache_write_tokens,
            },
            now,
        }
    }
}

/// A processor's answer, by digest, with a bounded summary of its edits.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnswerRecord {
    /// The SHA-256 of the answer's canonical serialisation.
    pub sha256: String,
    /// Items in the answer (0 for an error answer).
    pub items: usize,
    /// The edits, in order, at most [`MAX_RECORDED_EDITS`]: `keep A-B` for a
    /// run of kept input indices, `replace I H`, `insert H` (`H`: the first
    /// 16 hex digits of the SHA-256 of the item's line), or `error KIND H`.
    pub edits: Vec<String>,
    /// Edits past [`MAX_RECORDED_EDITS`], covered by the digest only.
    #[serde(default)]
    pub edits_left_out: usize,
}

impl AnswerRecord {
    /// The record of an answer of `items`.
    pub(crate) fn of_items(items: &[wit::Item]) -> AnswerRecord {
        let mut whole = Sha256::new();
        let mut summary = EditSummary::default();
        for item in items {
            let line = item_line(item);
            whole.update(line.as_bytes());
            whole.update(b"\n");
            match item {
                wit::Item::Keep(i) => summary.keep(*i),
                wit::Item::Replace(r) => {
                    summary.push(format!("replace {} {}", r.index, short_sha256(&line)));
                }
                wit::Item::Insert(_) => summary.push(format!("insert {}", short_sha256(&line))),
            }
        }
        let (edits, edits_left_out) = summary.finish();
        AnswerRecord {
            sha256: crate::cache::hex(&whole.finalize()),
            items: items.len(),
            edits,
            edits_left_out,
        }
    }

    /// The record of an error answer.
    pub(crate) fn of_error(error: &wit::Error) -> AnswerRecord {
        let (kind, text) = match error {
            wit::Error::BadConfig(t) => ("bad-config", t),
            wit::Error::Failed(t) => ("failed", t),
        };
        let line = json!({ "error": { kind: text } }).to_string();
        AnswerRecord {
            sha256: sha256_hex(format!("{line}\n").as_bytes()),
            items: 0,
            edits: vec![format!("error {kind} {}", short_sha256(&line))],
            edits_left_out: 0,
        }
    }

    /// Where `replayed` first departs from this answer, when it does.
    pub fn first_difference(&self, replayed: &AnswerRecord) -> Option<EditDifference> {
        if self.sha256 == replayed.sha256 {
            return None;
        }
        let at = self
            .edits
            .iter()
            .zip(&replayed.edits)
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| self.edits.len().min(replayed.edits.len()));
        let (recorded, replayed_edit) = (self.edits.get(at), replayed.edits.get(at));
        let beyond = recorded.is_none()
            && replayed_edit.is_none()
            && (self.edits_left_out > 0 || replayed.edits_left_out > 0);
        Some(EditDifference {
            index: at,
            recorded: recorded.cloned(),
            replayed: replayed_edit.cloned(),
            beyond_summary: beyond,
        })
    }
}

/// Where two answers first differ, in their edit summaries.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EditDifference {
    /// The position in the edit summaries.
    pub index: usize,
    /// The recorded edit there (`None`: the recorded answer ended).
    pub recorded: Option<String>,
    /// The replayed edit there (`None`: the replayed answer ended).
    pub replayed: Option<String>,
    /// The summaries agree as far as they were kept: the difference lies
    /// past [`MAX_RECORDED_EDITS`].
    pub beyond_summary: bool,
}

/// The edit summary of an answer, runs of kept indices merged.
#[derive(Default)]
struct EditSummary {
    edits: Vec<String>,
    left_out: usize,
    /// The open run of kept indices.
    run: Option<(u32, u32)>,
}

impl EditSummary {
    fn keep(&mut self, i: u32) {
        match &mut self.run {
            Some((_, end)) if end.checked_add(1) == Some(i) => *end = i,
            _ => {
                self.close();
                self.run = Some((i, i));
            }
        }
    }

    fn push(&mut self, edit: String) {
        self.close();
        self.add(edit);
    }

    fn add(&mut self, edit: String) {
        if self.edits.len() < MAX_RECORDED_EDITS {
            self.edits.push(edit);
        } else {
            self.left_out += 1;
        }
    }

    fn close(&mut self) {
        if let Some((a, b)) = self.run.take() {
            self.add(if a == b {
                format!("keep {a}")
            } else {
                format!("keep {a}-{b}")
            });
        }
    }

    fn finish(mut self) -> (Vec<String>, usize) {
        self.close();
        (self.edits, self.left_out)
    }
}

/// The first 16 hex digits of the SHA-256 of `line` (with its newline).
fn short_sha256(line: &str) -> String {
    let mut h = Sha256::new();
    h.update(line.as_bytes());
    h.update(b"\n");
    let mut hex = crate::cache::hex(&h.finalize());
    hex.truncate(16);
    hex
}

/// An answer's item as its canonical JSON line (without the newline).
fn item_line(item: &wit::Item) -> String {
    match item {
        wit::Item::Keep(i) => json!({ "keep": i }),
        wit::Item::Replace(r) => {
            json!({ "replace": r.index, "message": message_value(&r.message) })
        }
        wit::Item::Insert(m) => json!({ "insert": message_value(m) }),
    }
    .to_string()
}

/// A message of an answer in the WIT record's field order and names.
fn message_value(m: &wit::Message) -> Value {
    let role = match m.role {
        wit::Role::System => "system",
        wit::Role::User => "user",
        wit::Role::Assistant => "assistant",
        wit::Role::Tool => "tool",
    };
    let parts: Vec<Value> = m
        .parts
        .iter()
        .map(|p| match p {
            wit::Part::Text(t) => json!({ "text": t }),
            wit::Part::Image(i) => json!({ "image": {
                "source": match &i.source {
                    wit::MediaSource::Url(u) => json!({ "url": u }),
                    wit::MediaSource::Path(p) => json!({ "path": p }),
                },
                "mime-type": i.mime_type,
            }}),
            wit::Part::File(f) => json!({ "file": {
                "name": f.name,
                "path": f.path,
                "mime-type": f.mime_type,
            }}),
        })
        .collect();
    let mut flags = Vec::new();
    for (flag, name) in [
        (wit::MessageFlags::SYNTHETIC, "synthetic"),
        (wit::MessageFlags::SUMMARY, "summary"),
        (wit::MessageFlags::ERROR, "error"),
    ] {
        if m.flags.contains(flag) {
            flags.push(name);
        }
    }
    json!({
        "id": m.id,
        "role": role,
        "content": m.content,
        "parts": parts,
        "reasoning": m.reasoning.as_ref().map(|r| json!({
            "text": r.text,
            "signature": r.signature,
            "redacted": r.redacted,
        })),
        "tool-calls": m.tool_calls.iter().map(|c| json!({
            "id": c.id,
            "name": c.name,
            "arguments": c.arguments,
        })).collect::<Vec<_>>(),
        "tool-call-id": m.tool_call_id,
        "tool-name": m.tool_name,
        "usage": m.usage.map(|u| json!({
            "input-tokens": u.input_tokens,
            "output-tokens": u.output_tokens,
            "cache-read-tokens": u.cache_read_tokens,
            "cache-write-tokens": u.cache_write_tokens,
        })),
        "model": m.model,
        "timestamp": m.timestamp.map(|t| json!({
            "seconds": t.seconds,
            "nanoseconds": t.nanoseconds,
        })),
        "agent": m.agent,
        "channel": m.channel,
        "flags": flags,
        "metadata": m.metadata,
        "tokens": m.tokens,
    })
}

/// The WASI functions a call used that read a clock, randomness, the
/// environment or files, counted at the host, and the calls it made without
/// their grant.
///
/// Which of them make a run nondeterministic ([`Sources::nondeterministic`]):
/// every clock function (`wasi:clocks/*`), the generators of
/// `wasi:random/random` and `wasi:random/insecure`, `wasi:random/insecure-seed`
/// when random numbers were granted (without the grant the host answers it
/// with a fixed seed, the same in every run: language runtimes ask for it at
/// start-up to seed their hash tables), and the granted folders
/// (`wasi:filesystem/preopens`, `open-at`), whose files may change between
/// runs. The environment, the arguments and the working directory
/// (`wasi:cli/environment`) are counted but fixed: the host always serves
/// them empty.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sources {
    /// Calls of each such function, by name (`wasi:clocks/wall-clock#now`).
    pub calls: BTreeMap<String, u64>,
    /// The functions among `calls` whose answers may differ between runs.
    pub nondeterministic: Vec<String>,
    /// Functions called without their grant (each such call trapped).
    pub denied: Vec<String>,
}

impl Sources {
    /// Whether the call used no source of nondeterminism and made no call
    /// it was not granted.
    pub fn deterministic(&self) -> bool {
        self.nondeterministic.is_empty() && self.denied.is_empty()
    }
}

/// What a call's WASI use is counted into, in its store.
#[derive(Default)]
pub(crate) struct SourceLog {
    sources: Sources,
}

impl SourceLog {
    /// Counts a call of `function`; `varies` says whether its answer may
    /// differ between runs.
    pub(crate) fn called(&mut self, function: &str, varies: bool) {
        let n = self.sources.calls.entry(function.to_owned()).or_insert(0);
        *n = n.saturating_add(1);
        if varies && !self.sources.nondeterministic.iter().any(|f| f == function) {
            self.sources.nondeterministic.push(function.to_owned());
        }
    }

    /// Notes a call of `function` refused for want of a grant.
    pub(crate) fn denied(&mut self, function: &str) {
        if !self.sources.denied.iter().any(|f| f == function) {
            self.sources.denied.push(function.to_owned());
        }
    }

    pub(crate) fn take(&mut self) -> Sources {
        std::mem::take(&mut self.sources)
    }
}

/// The record of `p`'s call on a history of digest `input`, whose output
/// is `output`, which made the host-service calls `services`.
pub(crate) fn finish(
    p: &crate::Processor,
    input: HistoryDigest,
    trace: crate::CallTrace,
    output: &[Message],
    services: Vec<crate::ServiceCall>,
) -> RunRecord {
    let o = &p.options;
    RunRecord {
        version: RECORD_VERSION,
        contract: p.contract().to_owned(),
        input,
        context: trace.context,
        config: p.config.to_string(),
        grants: o.grants.clone(),
        limits: o.limits.clone(),
        on_failure: o.on_failure,
        on_invalid: o.on_invalid,
        answer: trace.answer,
        output: HistoryDigest::of(output),
        deterministic: trace.sources.deterministic(),
        sources: trace.sources,
        services,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn insert(content: &str) -> wit::Item {
        wit::Item::Insert(crate::bindings::plain_message(wit::Role::User, "", content))
    }

    #[test]
    fn runs_of_kept_indices_are_merged_and_the_first_difference_found() {
        let a = AnswerRecord::of_items(&[
            wit::Item::Keep(0),
            wit::Item::Keep(1),
            wit::Item::Keep(2),
            insert("x"),
            wit::Item::Keep(4),
        ]);
        assert_eq!(a.edits[0], "keep 0-2");
        assert!(a.edits[1].starts_with("insert "), "{:?}", a.edits);
        assert_eq!(a.edits[2], "keep 4");
        assert_eq!(a.items, 5);
        let same = AnswerRecord::of_items(&[
            wit::Item::Keep(0),
            wit::Item::Keep(1),
            wit::Item::Keep(2),
            insert("x"),
            wit::Item::Keep(4),
        ]);
        assert_eq!(a, same);
        assert_eq!(a.first_difference(&same), None);
        let b = AnswerRecord::of_items(&[
            wit::Item::Keep(0),
            wit::Item::Keep(1),
            wit::Item::Keep(2),
            insert("y"),
        ]);
        let d = a.first_difference(&b).unwrap();
        assert_eq!(d.index, 1);
        assert_ne!(d.recorded, d.replayed);
        let c = AnswerRecord::of_items(&[wit::Item::Keep(0), wit::Item::Keep(1)]);
        let d = a.first_difference(&c).unwrap();
        assert_eq!(
            (d.index, d.recorded.as_deref(), d.replayed.as_deref()),
            (0, Some("keep 0-2"), Some("keep 0-1"))
        );
    }

    #[test]
    fn an_error_answer_is_told_from_an_empty_one() {
        let e = AnswerRecord::of_error(&wit::Error::Failed("no".into()));
        let empty = AnswerRecord::of_items(&[]);
        assert_ne!(e.sha256, empty.sha256);
        assert!(e.edits[0].starts_with("error failed "), "{:?}", e.edits);
        let other = AnswerRecord::of_error(&wit::Error::BadConfig("no".into()));
        assert_ne!(e.sha256, other.sha256);
    }

    #[test]
    fn a_history_digest_is_its_native_jsonl() {
        let history = vec![Message::user("a").with_id("1"), Message::assistant("b")];
        let text = agent_host_core::format::write(agent_host_core::format::Format::Jsonl, &history)
            .unwrap();
        assert_eq!(history_sha256(&history), sha256_hex(text.as_bytes()));
        assert_ne!(history_sha256(&history), history_sha256(&history[..1]));
    }

    #[test]
    fn only_varying_sources_and_denials_make_a_run_nondeterministic() {
        let mut log = SourceLog::default();
        log.called("wasi:random/insecure-seed#insecure-seed", false);
        log.called("wasi:cli/environment#get-environment", false);
        assert!(log.sources.deterministic());
        log.called("wasi:clocks/wall-clock#now", true);
        log.called("wasi:clocks/wall-clock#now", true);
        let s = log.take();
        assert!(!s.deterministic());
        assert_eq!(s.calls["wasi:clocks/wall-clock#now"], 2);
        assert_eq!(s.nondeterministic, ["wasi:clocks/wall-clock#now"]);
        let mut log = SourceLog::default();
        log.denied("wasi:random/random#get-random-bytes");
        assert!(!log.take().deterministic());
    }
}
