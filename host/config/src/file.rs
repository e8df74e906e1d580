//! The file itself: its schema as serde structs, and errors that name the key,
//! the file and the line.
//!
//! Every table denies unknown fields, so a misspelt key is an error, not a
//! silently ignored line. toml's errors carry a byte span but not the key's
//! path; [`Document::parse`] finds the path by walking toml's spanned tree
//! ([`DeTable`]) to the span, so that a user reads
//! `agent-host.toml:4: unknown key `context.pruning.soft_ratioo``.

use std::fmt;
use std::io::Read;
use std::marker::PhantomData;
use std::ops::Range;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::Deserialize;
use serde::de::{self, Deserializer, Unexpected, Visitor};
use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::{ConfigError, SummarizerKind};

/// The largest configuration file read: real ones are a few KiB; a planted
/// huge (or endless) file is refused instead of filling memory.
const MAX_FILE: u64 = 1 << 20;
use agent_host_provider::{MaxTokensField, ProviderKind};
use agent_host_runtime::{FailurePolicy, InvalidPolicy};

/// The whole file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFile {
    #[serde(default)]
    pub context: RawContext,
    pub provider: Option<RawProvider>,
    #[serde(default)]
    pub store: RawStore,
    #[serde(default)]
    pub processors: Vec<RawProcessor>,
    #[serde(default)]
    pub upstreams: Vec<RawUpstream>,
    #[serde(default)]
    pub memory: RawMemory,
}

/// `[memory]`: long-term memory in turns, views and the gateway.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMemory {
    pub user: Option<String>,
    pub tools: Option<bool>,
    pub extraction: Option<Choice<crate::MemoryExtraction>>,
    pub extraction_threshold: Option<usize>,
    pub retrieval_limit: Option<usize>,
    pub recall_tokens: Option<u32>,
}

/// One `[[upstreams]]` entry: a server the gateway sends the requests for
/// some models to.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawUpstream {
    pub name: String,
    pub kind: Choice<ProviderKind>,
    pub models: Vec<String>,
    pub model: Option<String>,
    pub base_url: Option<String>,
    pub api_key_env: Option<String>,
    pub default: Option<bool>,
    pub responses: Option<bool>,
    pub max_tokens: Option<u32>,
    pub max_tokens_field: Option<Choice<MaxTokensField>>,
    pub timeout_secs: Option<u64>,
}

/// `[context]`: the budget, summarization, doom loops, truncation.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawContext {
    pub context_limit: Option<u32>,
    pub response_reserve: Option<u32>,
    pub tool_definition_tokens: Option<u32>,
    pub auto_summarize: Option<bool>,
    pub max_messages_before_summary: Option<Switch<u64>>,
    pub max_tokens_before_summary: Option<Switch<u64>>,
    pub summarize_fraction: Option<Switch<f64>>,
    pub min_messages_to_summarize: Option<usize>,
    pub keep_last_turns: Option<usize>,
    pub min_recent_messages: Option<usize>,
    pub summary_share: Option<f64>,
    pub summary_max_words: Option<usize>,
    pub summarizer: Option<Choice<SummarizerKind>>,
    pub extractive_fallback: Option<bool>,
    #[serde(default)]
    pub pruning: RawPruning,
    pub doom_loop_threshold: Option<usize>,
    pub max_tool_result_chars: Option<usize>,
}

/// `[context.pruning]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPruning {
    pub min_chars: Option<usize>,
    pub soft_ratio: Option<f64>,
    pub hard_ratio: Option<f64>,
    pub keep_chars: Option<usize>,
    pub protected_assistant_turns: Option<usize>,
    pub excluded_tools: Option<Vec<String>>,
}

/// `[provider]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawProvider {
    pub kind: Option<Choice<ProviderKind>>,
    pub base_url: Option<String>,
    pub model: Option<String>,
    pub api_key_env: Option<String>,
    pub max_tokens: Option<u32>,
    pub max_tokens_field: Option<Choice<MaxTokensField>>,
    pub temperature: Option<f32>,
    pub stream: Option<bool>,
    pub timeout_secs: Option<u64>,
    pub connect_timeout_secs: Option<u64>,
    pub max_retries: Option<u32>,
    pub tools: Option<Vec<toml::Table>>,
}

/// `[store]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawStore {
    pub path: Option<String>,
}

/// One `[[processors]]` entry.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawProcessor {
    pub path: PathBuf,
    pub config: Option<toml::Table>,
    pub on_failure: Option<Choice<FailurePolicy>>,
    pub on_invalid: Option<Choice<InvalidPolicy>>,
    pub deadline_ms: Option<u64>,
    pub memory_mib: Option<usize>,
    pub allow_dirs: Option<Vec<PathBuf>>,
    pub allow_clocks: Option<bool>,
    pub allow_random: Option<bool>,
    pub allow_summarize: Option<bool>,
    pub allow_count_tokens: Option<bool>,
    pub allow_memory: Option<bool>,
    pub service_calls: Option<u32>,
    pub model_tokens: Option<u64>,
    pub answer_tokens: Option<u32>,
    pub service_time_ms: Option<u64>,
    pub routes: Option<Vec<Choice<crate::ProcessorRoute>>>,
    pub models: Option<Vec<String>>,
    pub chains: Option<Vec<String>>,
}

/// A summarization trigger: a number, or the string `"off"` to turn it off.
///
/// `0` is not "off": it would fire on every turn, so the spelling that turns a
/// trigger off is a word nobody writes by accident.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Switch<T>(pub Option<T>);

/// The word that turns a trigger off.
pub(super) const OFF: &str = "off";

struct SwitchVisitor<T>(PhantomData<T>);

impl<'de> Deserialize<'de> for Switch<u64> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(SwitchVisitor::<u64>(PhantomData))
    }
}

impl Visitor<'_> for SwitchVisitor<u64> {
    type Value = Switch<u64>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a whole number, or \"{OFF}\"")
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Switch(Some(v)))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        u64::try_from(v)
            .map(|v| Switch(Some(v)))
            .map_err(|_| E::invalid_value(Unexpected::Signed(v), &self))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        if v == OFF {
            Ok(Switch(None))
        } else {
            Err(E::invalid_value(Unexpected::Str(v), &self))
        }
    }
}

impl<'de> Deserialize<'de> for Switch<f64> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(SwitchVisitor::<f64>(PhantomData))
    }
}

impl Visitor<'_> for SwitchVisitor<f64> {
    type Value = Switch<f64>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a number, or \"{OFF}\"")
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Ok(Switch(Some(v)))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Switch(Some(v as f64)))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Switch(Some(v as f64)))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        if v == OFF {
            Ok(Switch(None))
        } else {
            Err(E::invalid_value(Unexpected::Str(v), &self))
        }
    }
}

/// A choice among a few names, spelt alike in the file and on the command
/// line (where each type's `FromStr` reads them).
pub(super) trait Named: Copy + 'static {
    /// Every value, in the order messages list them.
    const ALL: &'static [Self];
    /// The value's name.
    fn name(self) -> &'static str;
}

impl Named for SummarizerKind {
    const ALL: &'static [Self] = &[SummarizerKind::Llm, SummarizerKind::Extractive];
    fn name(self) -> &'static str {
        self.as_str()
    }
}

impl Named for crate::MemoryExtraction {
    const ALL: &'static [Self] = &[
        crate::MemoryExtraction::Offline,
        crate::MemoryExtraction::Model,
    ];
    fn name(self) -> &'static str {
        self.as_str()
    }
}

impl Named for ProviderKind {
    const ALL: &'static [Self] = &[ProviderKind::OpenAi, ProviderKind::Anthropic];
    fn name(self) -> &'static str {
        self.as_str()
    }
}

impl Named for MaxTokensField {
    const ALL: &'static [Self] = &[
        MaxTokensField::MaxTokens,
        MaxTokensField::MaxCompletionTokens,
    ];
    fn name(self) -> &'static str {
        self.as_str()
    }
}

impl Named for crate::ProcessorRoute {
    const ALL: &'static [Self] = &[
        crate::ProcessorRoute::ChatCompletions,
        crate::ProcessorRoute::Messages,
        crate::ProcessorRoute::Responses,
        crate::ProcessorRoute::Turns,
    ];
    fn name(self) -> &'static str {
        self.as_str()
    }
}

impl Named for FailurePolicy {
    const ALL: &'static [Self] = &[FailurePolicy::Skip, FailurePolicy::Fail];
    fn name(self) -> &'static str {
        match self {
            FailurePolicy::Skip => "skip",
            FailurePolicy::Fail => "fail",
        }
    }
}

impl Named for InvalidPolicy {
    const ALL: &'static [Self] = &[InvalidPolicy::Reject, InvalidPolicy::Repair];
    fn name(self) -> &'static str {
        match self {
            InvalidPolicy::Reject => "reject",
            InvalidPolicy::Repair => "repair",
        }
    }
}

/// One of the names of a [`Named`] type.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Choice<T>(pub T);

impl<'de, T: Named> Deserialize<'de> for Choice<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(ChoiceVisitor::<T>(PhantomData))
    }
}

struct ChoiceVisitor<T>(PhantomData<T>);

impl<T: Named> Visitor<'_> for ChoiceVisitor<T> {
    type Value = Choice<T>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&names::<T>())
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        T::ALL
            .iter()
            .find(|t| t.name() == v)
            .map(|&t| Choice(t))
            .ok_or_else(|| E::invalid_value(Unexpected::Str(v), &self))
    }
}

/// `one of "a", "b"`: the names of a value enum, for messages.
pub(super) fn names<T: Named>() -> String {
    let names: Vec<String> = T::ALL.iter().map(|t| format!("\"{}\"", t.name())).collect();
    format!("one of {}", names.join(", "))
}

/// The file as read: its path, its text and what it says.
#[derive(Debug)]
pub(super) struct Document {
    pub path: PathBuf,
    text: String,
    pub raw: RawFile,
}

impl Document {
    /// Reads and parses the file at `path`.
    pub fn read(path: &Path) -> Result<Document> {
        let mut text = String::new();
        std::fs::File::open(path)
            .and_then(|f| f.take(MAX_FILE + 1).read_to_string(&mut text))
            .with_context(|| format!("cannot read the configuration file {}", path.display()))?;
        if text.len() as u64 > MAX_FILE {
            return Err(ConfigError {
                file: Some(path.to_owned()),
                line: None,
                key: None,
                message: format!(
                    "the configuration file is larger than {} MiB: it is not an agent-host.toml",
                    MAX_FILE >> 20
                ),
            }
            .into());
        }
        Ok(Document::parse(path, text)?)
    }

    /// The file's text, as read and parsed.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Parses `text`, read from `path`; errors name the key, the file and
    /// the line.
    pub fn parse(path: &Path, text: String) -> Result<Document, ConfigError> {
        let error = |span: Option<Range<usize>>, message: String| ConfigError {
            file: Some(path.to_owned()),
            line: span.map(|s| line_at(&text, s.start)),
            key: None,
            message,
        };
        // The spanned tree first: it reports syntax errors, and says where
        // every key is for the errors serde finds after.
        let tree = match DeTable::parse(&text) {
            Ok(tree) => tree,
            Err(e) => return Err(error(e.span(), e.message().to_owned())),
        };
        let raw = match toml::from_str::<RawFile>(&text) {
            Ok(raw) => raw,
            Err(e) => {
                let key = e.span().and_then(|s| key_at(tree.get_ref(), s.start));
                let message = explain(e.message(), key.as_deref());
                let mut err = error(e.span(), message);
                err.key = key;
                return Err(err);
            }
        };
        drop(tree);
        Ok(Document {
            path: path.to_owned(),
            text,
            raw,
        })
    }

    /// The line (from 1) of dotted `key` (`context.pruning.soft_ratio`,
    /// `processors[1].path`), when the file says it.
    pub fn line_of(&self, key: &str) -> Option<usize> {
        let tree = DeTable::parse(&self.text).ok()?;
        let mut table = tree.get_ref();
        let mut found: Option<Range<usize>> = None;
        let parts: Vec<&str> = key.split('.').collect();
        for (i, part) in parts.iter().enumerate() {
            let (name, index) = match part.split_once('[') {
                Some((name, rest)) => (name, rest.trim_end_matches(']').parse::<usize>().ok()),
                None => (*part, None),
            };
            let (k, v) = table.iter().find(|(k, _)| k.get_ref() == name)?;
            let v: &Spanned<DeValue<'_>> = match (index, v.get_ref()) {
                (Some(i), DeValue::Array(items)) => items.get(i)?,
                (Some(_), _) => return None,
                (None, _) => v,
            };
            found = Some(if index.is_some() { v.span() } else { k.span() });
            if i + 1 < parts.len() {
                table = v.get_ref().as_table()?;
            }
        }
        found.map(|s| line_at(&self.text, s.start))
    }
}

/// The line (from 1) of byte `at`.
fn line_at(text: &str, at: usize) -> usize {
    text.as_bytes()[..at.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// The dotted path of the key or value at byte `at`: a key whose name is
/// there, else a plain value there, else the innermost table or array there
/// (a missing field is reported at its table).
fn key_at(tree: &DeTable<'_>, at: usize) -> Option<String> {
    find_in_table(tree, at, "", false).or_else(|| find_in_table(tree, at, "", true))
}

fn find_in_table(table: &DeTable<'_>, at: usize, prefix: &str, containers: bool) -> Option<String> {
    table.iter().find_map(|(k, v)| {
        let path = if prefix.is_empty() {
            k.get_ref().to_string()
        } else {
            format!("{prefix}.{}", k.get_ref())
        };
        if !containers && k.span().contains(&at) {
            return Some(path);
        }
        find_in_value(v, at, &path, containers)
    })
}

fn find_in_value(
    value: &Spanned<DeValue<'_>>,
    at: usize,
    path: &str,
    containers: bool,
) -> Option<String> {
    let inner = match value.get_ref() {
        DeValue::Table(t) => find_in_table(t, at, path, containers),
        DeValue::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, item)| find_in_value(item, at, &format!("{path}[{i}]"), containers)),
        _ => None,
    };
    let leaf = !matches!(value.get_ref(), DeValue::Table(_) | DeValue::Array(_));
    inner.or_else(|| (leaf != containers && value.span().contains(&at)).then(|| path.to_owned()))
}

/// Rewrites a serde message for a user: the key with its section path, and
/// Rust type names as words.
fn explain(message: &str, key: Option<&str>) -> String {
    let key = key.unwrap_or("?");
    if let Some(rest) = message.strip_prefix("unknown field `") {
        let expected = rest.split_once(", ").map_or("", |(_, e)| e);
        let expected = match expected {
            "there are no fields" | "" => String::new(),
            e => format!("; {e}"),
        };
        return format!("unknown key `{key}`{expected}");
    }
    if let Some(rest) = message.strip_prefix("missing field `") {
        let field = rest.trim_end_matches('`');
        return format!("`{key}` needs `{field}`");
    }
    if message == "duplicate key" {
        return format!("duplicate key `{key}`");
    }
    let mut message = message.to_owned();
    for (rust, words) in [
        ("expected u8", "expected a whole number from 0 to 255"),
        ("expected u16", "expected a whole number from 0 to 65535"),
        (
            "expected u32",
            "expected a whole number from 0 to 4294967295",
        ),
        ("expected u64", "expected a whole number, 0 or more"),
        ("expected usize", "expected a whole number, 0 or more"),
        ("expected f32", "expected a number"),
        ("expected f64", "expected a number"),
        ("expected a map", "expected a table"),
        ("expected a sequence", "expected an array"),
    ] {
        if let Some(start) = message.strip_suffix(rust) {
            message = format!("{start}{words}");
        }
    }
    format!("`{key}`: {message}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> ConfigError {
        Document::parse(Path::new("agent-host.toml"), text.to_owned()).unwrap_err()
    }

    #[test]
    fn paths_of_keys_in_headers_dotted_keys_inline_tables_and_arrays() {
        let e = err("[context]\npruning.soft_ratioo = 1\n");
        assert_eq!(e.key.as_deref(), Some("context.pruning.soft_ratioo"));
        assert_eq!(e.line, Some(2));

        let e = err("[context]\npruning = { soft_ratio = 0.1, x = 2 }\n");
        assert_eq!(e.key.as_deref(), Some("context.pruning.x"));

        let e = err("[[processors]]\npath = 'a'\n\n[[processors]]\npath = 'b'\nallow_dir = []\n");
        assert_eq!(e.key.as_deref(), Some("processors[1].allow_dir"));
        assert_eq!(e.line, Some(6));

        let e = err("[context.pruning]\nexcluded_tools = [\n  'a',\n  3,\n]\n");
        assert_eq!(e.key.as_deref(), Some("context.pruning.excluded_tools[1]"));
        assert_eq!(e.line, Some(4));

        let e = err("[contxt]\n");
        assert_eq!(e.key.as_deref(), Some("contxt"));
        assert!(e.message.contains("`context`"), "{e}");
    }

    #[test]
    fn missing_required_key_is_named_with_its_table() {
        let e = err("[[processors]]\ndeadline_ms = 5\n");
        assert!(e.message.contains("needs `path`"), "{e}");
        assert!(e.message.contains("processors[0]"), "{e}");
    }

    #[test]
    fn triggers_take_numbers_or_off_and_nothing_else() {
        let doc = Document::parse(
            Path::new("a.toml"),
            "[context]\nmax_messages_before_summary = 'off'\nsummarize_fraction = 1\n".into(),
        )
        .unwrap();
        assert_eq!(
            doc.raw.context.max_messages_before_summary,
            Some(Switch(None))
        );
        assert_eq!(doc.raw.context.summarize_fraction, Some(Switch(Some(1.0))));

        let e = err("[context]\nmax_messages_before_summary = 'never'\n");
        assert!(e.message.contains("\"off\""), "{e}");
        let e = err("[context]\nmax_messages_before_summary = -1\n");
        assert_eq!(e.line, Some(2), "{e}");
    }

    #[test]
    fn line_of_finds_nested_and_indexed_keys() {
        let doc = Document::parse(
            Path::new("a.toml"),
            "[context]\ncontext_limit = 1\n\n[context.pruning]\nsoft_ratio = 0.9\n\n[[processors]]\npath = 'a'\n[[processors]]\npath = 'b'\n".into(),
        )
        .unwrap();
        assert_eq!(doc.line_of("context.context_limit"), Some(2));
        assert_eq!(doc.line_of("context.pruning.soft_ratio"), Some(5));
        assert_eq!(doc.line_of("processors[1].path"), Some(10));
        assert_eq!(doc.line_of("context.summary_share"), None);
    }
}
