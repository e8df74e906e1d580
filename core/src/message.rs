//! The message model: one entry of an agent conversation, rich enough for every
//! format agent-host reads and writes.

use std::fmt;
use std::sync::atomic::{AtomicU8, AtomicU32, AtomicU64, Ordering};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use xxhash_rust::xxh3::xxh3_64;

use crate::tokens::TokenCounter;

/// Who speaks in a message.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions for the model (the system prompt).
    System,
    /// The human, or whatever stands in for one.
    #[default]
    User,
    /// The model.
    Assistant,
    /// The result of a tool call, linked to the call by `tool_call_id`.
    Tool,
}

impl Role {
    /// The lowercase name used by every format (`"system"`, `"user"`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where the bytes of an image live.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MediaRef {
    /// A URL, including `data:` URLs that carry the bytes inline.
    Url(String),
    /// A path in the session's media folder.
    Path(String),
}

/// One piece of a message's content beyond its plain text.
///
/// A format that sends content as a list of parts (OpenAI content arrays,
/// Anthropic content blocks) is kept as parts, in order, text parts included;
/// a format that sends a plain string fills [`Message::content`] instead.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Part {
    /// A piece of text.
    Text {
        /// The text.
        text: String,
    },
    /// An image, by URL or media path.
    Image {
        /// Where the image is.
        source: MediaRef,
        /// Its MIME type, when known (`image/png`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
    },
    /// A reference to a file.
    File {
        /// The file's display name.
        name: String,
        /// Where the file is (a path or URL).
        path: String,
        /// Its MIME type, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
    },
}

/// The model's reasoning (thinking) that belongs to an assistant message.
///
/// It travels with its message: dropping the message drops its reasoning, and
/// no stage may attach it to another message.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reasoning {
    /// The reasoning text; for redacted reasoning, the provider's opaque data.
    pub text: String,
    /// The provider's signature over the reasoning (Anthropic), needed to send
    /// it back unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// Whether `text` is opaque redacted data rather than readable reasoning.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub redacted: bool,
}

/// A tool call made by an assistant message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The id the tool result refers to.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments, as JSON text exactly as the model produced them.
    pub arguments: String,
}

/// Token usage reported by the provider for the request that produced a message.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens the provider read (the prompt).
    pub input_tokens: u64,
    /// Tokens the provider wrote (the completion).
    pub output_tokens: u64,
    /// Prompt tokens served from the provider's cache, when reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read_tokens: Option<u64>,
    /// Prompt tokens written to the provider's cache, when reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_tokens: Option<u64>,
}

/// One message of a conversation.
///
/// Fields are public so that converters, stages and tests can build and edit
/// messages freely. The token count is cached on first use by
/// [`Message::tokens`]; code that edits the text of a message that may already
/// have been counted calls [`Message::invalidate_tokens`] (the setters of this
/// type do it for you).
///
/// ```
/// use agent_host_core::{Message, Role};
///
/// let mut m = Message::assistant("Reading the file.");
/// m.push_tool_call("call_1", "read_file", r#"{"path":"README.md"}"#);
/// assert_eq!(m.role, Role::Assistant);
/// assert_eq!(m.tool_calls[0].name, "read_file");
///
/// let result = Message::tool_result("call_1", "read_file", "# agent-host");
/// assert_eq!(result.tool_call_id.as_deref(), Some("call_1"));
/// ```
#[derive(Debug, Default, PartialEq)]
pub struct Message {
    /// Stable identifier, unique within its session.
    pub id: String,
    /// Who speaks.
    pub role: Role,
    /// The plain text content (empty when the content is given as `parts`).
    pub content: String,
    /// Structured content: text, images and file references, in order.
    pub parts: Vec<Part>,
    /// The model's reasoning, kept with its assistant message.
    pub reasoning: Option<Reasoning>,
    /// Tool calls made by an assistant message.
    pub tool_calls: Vec<ToolCall>,
    /// For a tool result: the id of the call it answers.
    pub tool_call_id: Option<String>,
    /// For a tool result: the name of the tool that produced it.
    pub tool_name: Option<String>,
    /// For a tool result: whether the tool reported an error.
    pub is_error: bool,
    /// Provider-reported usage for the request that produced this message.
    pub usage: Option<Usage>,
    /// The model that produced this message.
    pub model: Option<String>,
    /// When the message was created.
    pub timestamp: Option<DateTime<Utc>>,
    /// The agent that owns or wrote the message.
    pub agent: Option<String>,
    /// Where the message came from (`telegram`, `cli`, a forwarding agent, ...).
    pub channel: Option<String>,
    /// Made by agent-host rather than said by a participant (a repair, a
    /// warning, a summary boundary).
    pub synthetic: bool,
    /// Part of a summary checkpoint.
    pub summary: bool,
    /// Free-form data that survives every round trip, including fields a
    /// source format has that this model has no place for.
    pub metadata: Map<String, Value>,
    tokens: TokenCache,
}

impl Clone for Message {
    /// Every field, with the token cache. Written out rather than derived:
    /// most messages carry no metadata, and cloning an empty map this way
    /// costs nothing (a derived clone spent as long on it as on the text).
    fn clone(&self) -> Self {
        Message {
            id: self.id.clone(),
            role: self.role,
            content: self.content.clone(),
            parts: self.parts.clone(),
            reasoning: self.reasoning.clone(),
            tool_calls: self.tool_calls.clone(),
            tool_call_id: self.tool_call_id.clone(),
            tool_name: self.tool_name.clone(),
            is_error: self.is_error,
            usage: self.usage,
            model: self.model.clone(),
            timestamp: self.timestamp,
            agent: self.agent.clone(),
            channel: self.channel.clone(),
            synthetic: self.synthetic,
            summary: self.summary,
            metadata: if self.metadata.is_empty() {
                Map::new()
            } else {
                self.metadata.clone()
            },
            tokens: self.tokens.clone(),
        }
    }
}

impl Message {
    /// A message with a role and plain text content, and an empty id.
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        Message {
            role,
            content: content.into(),
            ..Message::default()
        }
    }

    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Self::new(Role::System, content)
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self::new(Role::User, content)
    }

    /// An assistant message.
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::new(Role::Assistant, content)
    }

    /// A tool result answering the call `call_id` of tool `tool_name`.
    pub fn tool_result(
        call_id: impl Into<String>,
        tool_name: impl Into<String>,
        content: impl Into<String>,
    ) -> Self {
        Message {
            tool_call_id: Some(call_id.into()),
            tool_name: Some(tool_name.into()),
            ..Self::new(Role::Tool, content)
        }
    }

    /// Sets the id, builder style.
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = id.into();
        self
    }

    /// Adds a tool call to this (assistant) message.
    pub fn push_tool_call(
        &mut self,
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) {
        self.tool_calls.push(ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        });
        self.invalidate_tokens();
    }

    /// Replaces the plain text content.
    pub fn set_content(&mut self, content: impl Into<String>) {
        self.content = content.into();
        self.invalidate_tokens();
    }

    /// Replaces all the text of the message (its `content` and text parts)
    /// with `text`; images and file references stay.
    pub fn set_text(&mut self, text: impl Into<String>) {
        self.parts.retain(|p| !matches!(p, Part::Text { .. }));
        self.set_content(text);
    }

    /// All the text of the message: `content` followed by the text parts,
    /// separated by blank lines. Borrowed when there is only one piece.
    pub fn text(&self) -> std::borrow::Cow<'_, str> {
        let mut pieces = std::iter::once(self.content.as_str())
            .chain(self.parts.iter().filter_map(|p| match p {
                Part::Text { text } => Some(text.as_str()),
                _ => None,
            }))
            .filter(|s| !s.is_empty());
        let Some(first) = pieces.next() else {
            return "".into();
        };
        match pieces.next() {
            None => first.into(),
            Some(second) => {
                let mut all = format!("{first}\n\n{second}");
                for piece in pieces {
                    all.push_str("\n\n");
                    all.push_str(piece);
                }
                all.into()
            }
        }
    }

    /// Whether this is an assistant message that calls tools.
    pub fn has_tool_calls(&self) -> bool {
        !self.tool_calls.is_empty()
    }

    /// The estimated token count of this message, computed by `counter` on
    /// first use and cached.
    ///
    /// The cache remembers which counter filled it ([`TokenCounter::cache_key`]);
    /// asking with a different counter computes afresh without caching.
    pub fn tokens(&self, counter: &dyn TokenCounter) -> u32 {
        let key = counter.cache_key();
        if let Some((cached_key, count)) = self.tokens.get() {
            if cached_key == key {
                return count;
            }
            return counter.count_message(self);
        }
        let count = counter.count_message(self);
        // A concurrent caller may have won the race with the same value.
        self.tokens.set(key, count);
        count
    }

    /// The cached token count, if any counter has filled it.
    pub fn cached_tokens(&self) -> Option<u32> {
        self.tokens.get().map(|(_, count)| count)
    }

    /// Forgets the cached token count; call after editing a counted message.
    pub fn invalidate_tokens(&mut self) {
        self.tokens = TokenCache::default();
    }
}

/// The index of the `n`-th last message (1-based) for which `pred` holds; 0
/// when fewer than `n` do, and `messages.len()` when `n` is 0.
pub(crate) fn nth_last_position(
    messages: &[Message],
    n: usize,
    pred: impl Fn(&Message) -> bool,
) -> usize {
    if n == 0 {
        return messages.len();
    }
    messages
        .iter()
        .enumerate()
        .rev()
        .filter(|(_, m)| pred(m))
        .nth(n - 1)
        .map_or(0, |(i, _)| i)
}

/// The per-message token cache: `(counter key, count)`, set once, ignored by
/// equality.
///
/// Three atomics rather than a `OnceLock`: a clone copies a filled cache
/// with plain stores (cloning a `OnceLock` runs its once-initialisation,
/// which took a tenth of the time of cloning a pipeline's worth of short
/// messages).
#[derive(Debug, Default)]
struct TokenCache {
    /// [`EMPTY`], [`FILLING`] or [`FILLED`]; the key and count are read only
    /// once it is `FILLED` (acquire), after they were written (release).
    state: AtomicU8,
    key: AtomicU64,
    count: AtomicU32,
}

const EMPTY: u8 = 0;
const FILLING: u8 = 1;
const FILLED: u8 = 2;

impl TokenCache {
    fn filled(key: u64, count: u32) -> Self {
        TokenCache {
            state: AtomicU8::new(FILLED),
            key: AtomicU64::new(key),
            count: AtomicU32::new(count),
        }
    }

    fn get(&self) -> Option<(u64, u32)> {
        (self.state.load(Ordering::Acquire) == FILLED).then(|| {
            (
                self.key.load(Ordering::Relaxed),
                self.count.load(Ordering::Relaxed),
            )
        })
    }

    /// Fills the cache unless it is filled (or being filled) already: the
    /// first writer wins, as with `OnceLock::set`.
    fn set(&self, key: u64, count: u32) {
        if self
            .state
            .compare_exchange(EMPTY, FILLING, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            self.key.store(key, Ordering::Relaxed);
            self.count.store(count, Ordering::Relaxed);
            self.state.store(FILLED, Ordering::Release);
        }
    }
}

impl Clone for TokenCache {
    fn clone(&self) -> Self {
        match self.get() {
            Some((key, count)) => TokenCache::filled(key, count),
            None => TokenCache::default(),
        }
    }
}

impl PartialEq for TokenCache {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

/// The id of a native log line that carries none (`jsonl-{line:05}-{hash}`),
/// or of a message a processor adds without one.
///
/// Part of the file store's format (the store derives it again on every
/// read of such a line, and its checkpoints name messages by id) and of the
/// digests a replay compares, so it never changes. The hash is FNV-1a's low
/// 32 bits over the text, one byte at a time; documents' ids use
/// [`document_id`], which is faster on long texts.
pub fn derived_id(prefix: &str, index: usize, text: &str) -> String {
    id_from_hash(prefix, index, fnv1a(text.as_bytes()))
}

/// A deterministic id for a message of a document that carries none (an
/// OpenAI, Anthropic, LangChain, pydantic-ai or Responses document, a
/// Claude Code record without `uuid`): `{prefix}-{index:05}-{hash}`.
///
/// Built from a prefix naming the source, the message's position, and a hash
/// of its text, so that importing the same document twice gives the same ids
/// and different messages at one position give different ids. The hash is
/// XXH3-64's low 32 bits, which reads eight bytes a step where FNV-1a, used
/// before (see [`document_id_before`]), waits on a multiply for every byte of
/// a long tool result.
pub fn document_id(prefix: &str, index: usize, text: &str) -> String {
    id_from_hash(prefix, index, xxh3_64(text.as_bytes()))
}

/// [`document_id`] of every message of a list, each at its index: the id of
/// `messages[i]` is `document_id(prefix, i, &messages[i].text())`.
///
/// ```
/// use agent_host_core::Message;
/// use agent_host_core::message::{document_id, document_ids};
///
/// let messages = [Message::user("hi"), Message::assistant(""), Message::user("bye")];
/// let ids = document_ids("openai", &messages);
/// assert_eq!(ids[2], document_id("openai", 2, "bye"));
/// ```
pub fn document_ids(prefix: &str, messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .enumerate()
        .map(|(index, m)| document_id(prefix, index, &m.text()))
        .collect()
}

/// The id a message read from a document had before [`document_id`] hashed
/// with XXH3 (its FNV-1a form), when `id` is the id [`document_id`] derives
/// for `text` at the position the id names, with any `:n` suffix a reader
/// adds to tell apart the messages of one record (kept as it is); `None`
/// for any other id.
///
/// A replay uses it to read a history the way the version that recorded
/// the run did.
///
/// ```
/// use agent_host_core::message::{derived_id, document_id, document_id_before};
///
/// let id = document_id("openai", 7, "hello");
/// assert_eq!(document_id_before(&id, "hello"), Some(derived_id("openai", 7, "hello")));
/// assert_eq!(document_id_before(&format!("{id}:2"), "hello"), Some(derived_id("openai", 7, "hello") + ":2"));
/// assert_eq!(document_id_before(&id, "another text"), None);
/// assert_eq!(document_id_before("msg_01", "hello"), None);
/// ```
pub fn document_id_before(id: &str, text: &str) -> Option<String> {
    let (prefix, index, _, suffix) = derived_parts(id)?;
    let base = &id[..id.len() - suffix.len()];
    (document_id(prefix, index, text) == base).then(|| derived_id(prefix, index, text) + suffix)
}

/// The place a derived id names: `{prefix}-{index}` and any `:n` suffix,
/// without the hash; `None` for an id of another shape. A document's
/// message has the same place under FNV-1a, which versions before XXH3
/// used, and under XXH3, so `sessions import` takes a held message at the
/// same place with the same text for the same message (the hash may have
/// covered less than the whole text: a streamed turn's id hashes its first
/// piece).
///
/// ```
/// use agent_host_core::message::derived_place;
///
/// assert_eq!(derived_place("claude-code-00003-3ed15acb:1").as_deref(), Some("claude-code-00003:1"));
/// assert_eq!(derived_place("openai-00012-80aabd0b").as_deref(), Some("openai-00012"));
/// assert_eq!(derived_place("msg_01"), None);
/// ```
pub fn derived_place(id: &str) -> Option<String> {
    let (prefix, _, digits, suffix) = derived_parts(id)?;
    Some(format!("{prefix}-{digits}{suffix}"))
}

/// A derived id's prefix, index (and its digits as written) and `:n`
/// suffix (empty when none), when `id` has the shape
/// `{prefix}-{index:05}-{8 hex}[:n]`.
fn derived_parts(id: &str) -> Option<(&str, usize, &str, &str)> {
    let (base, suffix) = match id.rsplit_once(':') {
        Some((base, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => {
            (base, &id[base.len()..])
        }
        _ => (id, ""),
    };
    let (rest, hash) = base.rsplit_once('-')?;
    let (prefix, digits) = rest.rsplit_once('-')?;
    let hex = |b: u8| b.is_ascii_digit() || (b'a'..=b'f').contains(&b);
    if hash.len() != 8
        || !hash.bytes().all(hex)
        || digits.len() < 5
        || !digits.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    Some((prefix, digits.parse().ok()?, digits, suffix))
}

/// `{prefix}-{index:05}-{hash:08x}` (the hash's low 32 bits), written
/// without the formatting machinery, which cost as much as a fast hash.
fn id_from_hash(prefix: &str, index: usize, hash: u64) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut digits = [b'0'; 20];
    let mut at = digits.len();
    let mut rest = index;
    while rest > 0 || at > digits.len() - 5 {
        at -= 1;
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
    }
    let low = hash as u32;
    let hex: [u8; 8] = std::array::from_fn(|k| HEX[((low >> (28 - 4 * k)) & 0xF) as usize]);
    let mut id = Vec::with_capacity(prefix.len() + 2 + digits.len() - at + hex.len());
    id.extend_from_slice(prefix.as_bytes());
    id.push(b'-');
    id.extend_from_slice(&digits[at..]);
    id.push(b'-');
    id.extend_from_slice(&hex);
    String::from_utf8(id).expect("a text and ASCII digits")
}

/// FNV-1a, 64 bits: a stable, dependency-free hash for [`derived_id`].
fn fnv1a(bytes: &[u8]) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    bytes
        .iter()
        .fold(OFFSET, |hash, &b| (hash ^ u64::from(b)).wrapping_mul(PRIME))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens::HeuristicCounter;

    /// Ids stored and imported must never change: the values themselves,
    /// FNV-1a for native log lines and the ids documents had before, XXH3-64
    /// for documents now (the reference implementation's values, from the
    /// `xxhash` Python package: `xxh3_64_intdigest(text) & 0xffffffff`).
    #[test]
    fn ids_keep_their_values() {
        assert_eq!(derived_id("openai", 3, "hello"), "openai-00003-80aabd0b");
        assert_eq!(derived_id("jsonl", 12, ""), "jsonl-00012-84222325");
        assert_eq!(document_id("openai", 3, "hello"), "openai-00003-5c62dcfd");
        assert_eq!(document_id("anthropic", 0, ""), "anthropic-00000-38d394c2");
        assert_eq!(
            document_id("openai", 123_456, &"x".repeat(1000)),
            "openai-123456-962cba82"
        );
        let messages: Vec<Message> = ["hello", "", "hi"].map(Message::user).into();
        assert_eq!(
            document_ids("p", &messages),
            [
                "p-00000-5c62dcfd",
                "p-00001-38d394c2",
                &document_id("p", 2, "hi")
            ]
        );
    }

    /// What import recognises as a document's id from before: only the id
    /// derived for that very text at that position.
    #[test]
    fn a_document_id_from_before_is_found_only_for_its_text_and_place() {
        let id = document_id("claude-code", 42, "text");
        assert_eq!(
            document_id_before(&id, "text").as_deref(),
            Some(derived_id("claude-code", 42, "text").as_str())
        );
        assert_eq!(document_id_before(&id, "text!"), None);
        // An id the source gave, however it looks, and malformed ones.
        // A record's later messages, as the Claude Code reader numbers them.
        let later = document_id("claude-code", 42, "second") + ":1";
        assert_eq!(
            document_id_before(&later, "second"),
            Some(derived_id("claude-code", 42, "second") + ":1")
        );
        assert_eq!(document_id_before(&later, "text"), None);
        let moved = id.replace("-00042-", "-00043-");
        for other in [
            "msg_01",
            "",
            "-",
            "a-b-c",
            moved.as_str(),
            "openai-0003-5c62dcfd",
            "openai-00003-5c62dcf",
            "openai-+0003-5c62dcfd",
            "openai-00003-5C62DCFD",
            "openai-00003-5c62dcfd:",
            "openai-00003-5c62dcfd:x",
        ] {
            assert_eq!(document_id_before(other, "hello"), None, "{other}");
        }
    }

    /// A derived id's place is the same under either hash, and only ids of
    /// the derived shape have one.
    #[test]
    fn a_derived_place_is_the_id_without_its_hash() {
        let (now, before) = (
            document_id("pydantic-ai", 4, "x"),
            derived_id("pydantic-ai", 4, "x"),
        );
        assert_ne!(now, before);
        assert_eq!(derived_place(&now), derived_place(&before));
        assert_eq!(derived_place(&now).as_deref(), Some("pydantic-ai-00004"));
        assert_eq!(
            derived_place(&format!("{now}:3")).as_deref(),
            Some("pydantic-ai-00004:3")
        );
        assert_eq!(
            derived_place("jsonl-123456-0000abcd").as_deref(),
            Some("jsonl-123456")
        );
        for other in [
            "",
            "msg_01",
            "a-1-0000abcd",
            "a-00001-0000abcg",
            "550e8400-e29b-41d4-a716-446655440000",
        ] {
            assert_eq!(derived_place(other), None, "{other}");
        }
    }

    #[test]
    fn text_joins_content_and_text_parts() {
        let mut m = Message::user("");
        assert_eq!(m.text(), "");
        m.parts = vec![
            Part::Text { text: "one".into() },
            Part::Image {
                source: MediaRef::Url("https://example.com/a.png".into()),
                mime_type: None,
            },
            Part::Text { text: "two".into() },
        ];
        assert_eq!(m.text(), "one\n\ntwo");
        m.content = "zero".into();
        assert_eq!(m.text(), "zero\n\none\n\ntwo");
    }

    #[test]
    fn token_cache_is_filled_once_and_invalidated_by_setters() {
        let counter = HeuristicCounter::default();
        let mut m = Message::user("a".repeat(400));
        assert_eq!(m.cached_tokens(), None);
        let first = m.tokens(&counter);
        assert_eq!(m.cached_tokens(), Some(first));
        m.set_content("a".repeat(4000));
        assert_eq!(m.cached_tokens(), None);
        assert!(m.tokens(&counter) > first);
    }

    #[test]
    fn a_different_counter_does_not_read_another_counters_cache() {
        let cheap = HeuristicCounter {
            message_overhead: 0,
            ..HeuristicCounter::default()
        };
        let m = Message::user("abcd");
        let default = m.tokens(&HeuristicCounter::default());
        assert_ne!(m.tokens(&cheap), default);
    }

    /// The ids written before the formatting was done by hand: the index
    /// padded to five digits and longer when it needs to be, the hash's low
    /// 32 bits as eight hexadecimal digits.
    #[test]
    fn ids_are_written_as_the_format_string_wrote_them() {
        let indexes = [0, 1, 9, 10, 99_999, 100_000, 1_234_567, usize::MAX];
        let hashes = [0, 1, 0xF, 0xdead_beef, u64::MAX, 0x1234_5678_9abc_def0];
        for (index, hash) in indexes.into_iter().flat_map(|i| hashes.map(|h| (i, h))) {
            assert_eq!(
                id_from_hash("claude-code", index, hash),
                format!("claude-code-{index:05}-{:08x}", hash as u32)
            );
        }
    }

    #[test]
    fn derived_ids_are_stable_and_distinguish_content() {
        assert_eq!(derived_id("x", 3, "hi"), derived_id("x", 3, "hi"));
        assert_ne!(derived_id("x", 3, "hi"), derived_id("x", 3, "ho"));
        assert_ne!(derived_id("x", 3, "hi"), derived_id("x", 4, "hi"));
    }
}
