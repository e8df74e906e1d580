//! Pruning of large tool results.
//!
//! A single tool result (a file dump, a log, a search result) can take more of
//! the window than the rest of the conversation. Only results of at least
//! [`PruneConfig::min_chars`] characters are eligible. Above
//! [`PruneConfig::soft_ratio`] of context use they are soft-trimmed: the first
//! and last [`PruneConfig::keep_chars`] characters stay, with a notice of what
//! was cut between them. Above [`PruneConfig::hard_ratio`] they are cleared to
//! a notice. The last [`PruneConfig::protected_assistant_turns`] assistant
//! messages and their results are never pruned, nor are the results of the
//! tools named in [`PruneConfig::excluded_tools`].
//!
//! [`PruneConfig::aggressive`] gives lower thresholds for the retry after a
//! provider said the context was too long.

use serde_json::Value;

use crate::message::{Message, Role, nth_last_position};

/// The metadata key set on pruned results (`"soft"` or `"hard"`).
pub const PRUNED_KEY: &str = "pruned";

/// When and how tool results are pruned.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PruneConfig {
    /// Results shorter than this many characters are never pruned (default 50,000).
    pub min_chars: usize,
    /// Context use (0 to 1) above which eligible results are soft-trimmed (default 0.30).
    pub soft_ratio: f64,
    /// Context use above which eligible results are cleared (default 0.50).
    pub hard_ratio: f64,
    /// Characters kept at each end of a soft-trimmed result (default 1,500).
    pub keep_chars: usize,
    /// The last N assistant messages and their results are protected (default 3).
    pub protected_assistant_turns: usize,
    /// Tools whose results are never pruned.
    pub excluded_tools: Vec<String>,
}

impl Default for PruneConfig {
    fn default() -> Self {
        PruneConfig {
            min_chars: 50_000,
            soft_ratio: 0.30,
            hard_ratio: 0.50,
            keep_chars: 1_500,
            protected_assistant_turns: 3,
            excluded_tools: Vec::new(),
        }
    }
}

impl PruneConfig {
    /// Lower thresholds, for the retry after a context-length error: results
    /// of 10,000 characters or more are trimmed at any use and cleared above
    /// 30%, and only the last assistant message is protected.
    pub fn aggressive(&self) -> Self {
        PruneConfig {
            min_chars: self.min_chars.min(10_000),
            soft_ratio: 0.0,
            hard_ratio: self.hard_ratio.min(0.30),
            keep_chars: self.keep_chars.min(500),
            protected_assistant_turns: self.protected_assistant_turns.min(1),
            excluded_tools: self.excluded_tools.clone(),
        }
    }
}

/// One pruned result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pruned {
    /// The tool message.
    pub id: String,
    /// Its tool, when known.
    pub tool: Option<String>,
    /// Its length in characters before.
    pub chars_before: usize,
    /// Its length in characters after.
    pub chars_after: usize,
    /// Whether it was cleared (true) or soft-trimmed (false).
    pub cleared: bool,
}

/// Prunes the eligible tool results of `messages` for a context use of
/// `usage` (0 to 1; tokens of the history over the budget); returns what it
/// pruned.
///
/// ```
/// use agent_host_core::Message;
/// use agent_host_core::prune::{prune, PruneConfig};
///
/// let mut call = Message::assistant("");
/// call.push_tool_call("c1", "cat", "{}");
/// let mut history = vec![call, Message::tool_result("c1", "cat", "x".repeat(60_000))];
/// for i in 0..3 {
///     history.push(Message::assistant(format!("turn {i}")));
/// }
/// let pruned = prune(&mut history, 0.4, &PruneConfig::default());
/// assert_eq!(pruned.len(), 1);
/// assert!(history[1].content.len() < 4_000);
/// ```
pub fn prune(messages: &mut [Message], usage: f64, config: &PruneConfig) -> Vec<Pruned> {
    let Some((hard, protected_from)) = pruning(messages, usage, config) else {
        return Vec::new();
    };
    let mut pruned = Vec::new();
    for m in &mut messages[..protected_from] {
        let Some((text, chars)) = prunable(m, hard, config) else {
            continue;
        };
        let text = if hard {
            format!("[tool result of {chars} characters cleared by agent-host to save context]")
        } else {
            soft_trim(&text, chars, config.keep_chars)
        };
        m.set_text(text);
        m.metadata.insert(
            PRUNED_KEY.into(),
            Value::String(if hard { "hard" } else { "soft" }.into()),
        );
        pruned.push(Pruned {
            id: m.id.clone(),
            tool: m.tool_name.clone(),
            chars_before: chars,
            chars_after: m.content.chars().count(),
            cleared: hard,
        });
    }
    pruned
}

/// Whether [`prune`] would prune anything of `messages` at `usage`, found
/// without copying or changing them (for a caller that would prune a copy).
///
/// ```
/// use agent_host_core::Message;
/// use agent_host_core::prune::{would_prune, PruneConfig};
///
/// let mut call = Message::assistant("");
/// call.push_tool_call("c1", "cat", "{}");
/// let mut history = vec![call, Message::tool_result("c1", "cat", "x".repeat(60_000))];
/// history.extend((0..3).map(|i| Message::assistant(format!("turn {i}"))));
/// assert!(would_prune(&history, 0.4, &PruneConfig::default()));
/// assert!(!would_prune(&history, 0.1, &PruneConfig::default()));
/// ```
pub fn would_prune(messages: &[Message], usage: f64, config: &PruneConfig) -> bool {
    pruning(messages, usage, config).is_some_and(|(hard, protected_from)| {
        messages[..protected_from]
            .iter()
            .any(|m| prunable(m, hard, config).is_some())
    })
}

/// Whether pruning runs at `usage`, and then whether it clears results
/// (hard) and where the protected messages start.
fn pruning(messages: &[Message], usage: f64, config: &PruneConfig) -> Option<(bool, usize)> {
    if usage <= config.soft_ratio || messages.is_empty() {
        return None;
    }
    let hard = usage > config.hard_ratio;
    Some((
        hard,
        protected_from(messages, config.protected_assistant_turns),
    ))
}

/// The text of `m` and its length in characters when pruning takes it: a
/// tool result of a tool not excluded, not pruned already, and long enough.
fn prunable<'m>(
    m: &'m Message,
    hard: bool,
    config: &PruneConfig,
) -> Option<(std::borrow::Cow<'m, str>, usize)> {
    if m.role != Role::Tool
        || m.tool_name
            .as_ref()
            .is_some_and(|t| config.excluded_tools.contains(t))
        || m.metadata.contains_key(PRUNED_KEY)
    {
        return None;
    }
    let text = m.text();
    let chars = text.chars().count();
    if chars < config.min_chars || (!hard && chars <= 2 * config.keep_chars) {
        return None;
    }
    Some((text, chars))
}

/// The index from which messages are protected: the N-th last assistant
/// message (its results follow it, so they are protected too).
fn protected_from(messages: &[Message], turns: usize) -> usize {
    nth_last_position(messages, turns, |m| m.role == Role::Assistant)
}

/// The first and last `keep` characters of `text`, with a notice between.
fn soft_trim(text: &str, chars: usize, keep: usize) -> String {
    let head_end = text.char_indices().nth(keep).map_or(text.len(), |(i, _)| i);
    let tail_start = text
        .char_indices()
        .nth(chars - keep)
        .map_or(text.len(), |(i, _)| i);
    let cut = chars - 2 * keep;
    format!(
        "{}\n\n[... {cut} of {chars} characters trimmed by agent-host to save context ...]\n\n{}",
        &text[..head_end],
        &text[tail_start..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn history(result: &str, tool: &str, trailing_turns: usize) -> Vec<Message> {
        let mut call = Message::assistant("").with_id("a0");
        call.push_tool_call("c1", tool, "{}");
        let mut h = vec![call, Message::tool_result("c1", tool, result).with_id("r1")];
        for i in 0..trailing_turns {
            h.push(Message::assistant(format!("t{i}")).with_id(format!("a{}", i + 1)));
        }
        h
    }

    #[test]
    fn below_the_soft_threshold_nothing_changes() {
        let mut h = history(&"x".repeat(60_000), "cat", 3);
        assert!(prune(&mut h, 0.30, &PruneConfig::default()).is_empty());
        assert_eq!(h[1].content.len(), 60_000);
    }

    #[test]
    fn soft_trim_keeps_both_ends_and_says_how_much_was_cut() {
        let text = format!("HEAD{}TAIL", "é".repeat(59_992));
        let mut h = history(&text, "cat", 3);
        let pruned = prune(&mut h, 0.35, &PruneConfig::default());
        assert_eq!(pruned[0].chars_before, 60_000);
        assert!(!pruned[0].cleared);
        let out = &h[1].content;
        assert!(out.starts_with("HEAD") && out.ends_with("TAIL"));
        assert!(
            out.contains("[... 57000 of 60000 characters trimmed"),
            "{}",
            &out[..100]
        );
        assert_eq!(h[1].metadata[PRUNED_KEY], "soft");
        // Pruning again changes nothing.
        assert!(prune(&mut h, 0.9, &PruneConfig::default()).is_empty());
    }

    #[test]
    fn above_the_hard_threshold_results_are_cleared() {
        let mut h = history(&"x".repeat(50_000), "cat", 3);
        let pruned = prune(&mut h, 0.51, &PruneConfig::default());
        assert!(pruned[0].cleared);
        assert_eq!(
            h[1].content,
            "[tool result of 50000 characters cleared by agent-host to save context]"
        );
    }

    #[test]
    fn small_protected_and_excluded_results_are_kept() {
        let config = PruneConfig {
            excluded_tools: vec!["keep".into()],
            ..PruneConfig::default()
        };
        let mut small = history(&"x".repeat(49_999), "cat", 3);
        assert!(prune(&mut small, 0.9, &config).is_empty());
        let mut protected = history(&"x".repeat(60_000), "cat", 2);
        assert!(prune(&mut protected, 0.9, &config).is_empty());
        let mut excluded = history(&"x".repeat(60_000), "keep", 3);
        assert!(prune(&mut excluded, 0.9, &config).is_empty());
    }

    #[test]
    fn results_given_as_text_parts_are_pruned_too() {
        // Regression (review): Anthropic tool results with block content are
        // read into parts, and pruning only looked at `content`.
        let mut h = history("", "cat", 3);
        h[1].parts.push(crate::message::Part::Text {
            text: "p".repeat(60_000),
        });
        let pruned = prune(&mut h, 0.6, &PruneConfig::default());
        assert_eq!(pruned.len(), 1);
        assert!(h[1].parts.is_empty());
        assert!(
            h[1].content
                .starts_with("[tool result of 60000 characters cleared")
        );
    }

    #[test]
    fn aggressive_mode_prunes_what_the_default_keeps() {
        // Three later assistant turns: only the size keeps it from the default.
        let mut h = history(&"x".repeat(20_000), "cat", 3);
        assert!(prune(&mut h, 0.2, &PruneConfig::default()).is_empty());
        let pruned = prune(&mut h, 0.2, &PruneConfig::default().aggressive());
        assert_eq!(pruned.len(), 1);
        assert!(!pruned[0].cleared);
    }
}
