//! The extractive summarizer: the seeds' structured summary written from the
//! messages themselves, with no model.
//!
//! [`ExtractiveSummarizer`] reads a span of the log, pulls out the facts worth
//! keeping ([`extract_facts`]) and writes them under five headings, always
//! present and always in this order:
//!
//! - `## Files Modified`: paths given to tools that write or edit files
//!   (tool names containing `edit`, `write`, `create`, `str_replace`, `patch`
//!   or `insert`, with a `file_path`, `path`, `notebook_path`, ... argument,
//!   or a patch, as an argument or as the whole free-form input of Codex
//!   CLI's `apply_patch`, or else the file their result names), and the files the
//!   agent's shell commands write ([`written_paths`]: redirections, `tee`,
//!   `sed -i`, here-documents, `apply_patch`, `mv`, `cp`, ...), and the
//!   files of edit blocks in the assistant's text ([`edit_block_paths`]:
//!   Aider's `<<<<<<< SEARCH` blocks after a file name line);
//! - `## Key Decisions`: short sentences of the assistant that announce a
//!   decision (`I'll`, `I will`, `Let's`, `decided`, `instead`, `because`, ...);
//! - `## Important Values`: error lines, URLs, other paths, commands,
//!   identifiers and numbers with units, each one verbatim in a bullet (in
//!   backticks, unless the value itself holds a backtick); when that would
//!   leave out a key value, one-word values share bullets, eight to a bullet
//!   (`` - `a.rs` `b.rs` ``);
//! - `## Current State`: the last thing the assistant said, shortened;
//! - `## Pending Tasks`: the user's unanswered requests, the open items of the
//!   last todo list, and TODO-like lines.
//!
//! The values a summary must keep (its *key values*: file paths, URLs and
//! error lines, see [`key_values`] and [`message_key_values`]) are defined
//! here precisely, so that the quality of a summary can be measured: the
//! share of the key values of a span that appear verbatim in its summary.
//!
//! Commands are what the agent ran ([`commands`]): the `command` argument of
//! a shell tool call, or the fenced block that ends the text of an agent that
//! writes its actions (SWE-agent's thought-action mode).
//!
//! Within the word cap, facts are ranked by frequency (in how many messages
//! they appear) plus recency (how late they were last seen; not for a value
//! seen only in listings such as a `find` output) plus use (the agent passed
//! it to a tool or ran it). They are placed in this order, each group
//! best-ranked first, and the lowest-ranked facts are dropped first: the
//! modified files and the paths and URLs the agent used; the other paths,
//! URLs and numbers with units outside listings, within half of the room
//! left; the commands and the rest of what the agent used; the other key
//! values; the rest. A value that already appears verbatim inside a kept one (a
//! path inside an error line) costs nothing. Asked to fit a number of tokens
//! ([`Summarizer::summarize_within`]), the summary is written again with
//! fewer words until it does: values are dropped whole, never cut.
//!
//! What it deliberately leaves out: reasoning (thinking) text and message
//! metadata are not read; nothing is paraphrased.
//!
//! ```
//! use agent_host_core::Message;
//! use agent_host_core::extractive::ExtractiveSummarizer;
//! use agent_host_core::summarize::{Summarizer, SummaryRequest};
//!
//! let mut call = Message::assistant("I'll fix the parser instead of the lexer.");
//! call.push_tool_call("c1", "Edit", r#"{"file_path": "/repo/src/parse.rs"}"#);
//! let messages = [
//!     Message::user("cargo test fails"),
//!     call,
//!     Message::tool_result("c1", "Edit", "error[E0308]: mismatched types"),
//! ];
//! let summary = ExtractiveSummarizer::default()
//!     .summarize(&SummaryRequest {
//!         messages: &messages,
//!         previous: None,
//!         partials: &[],
//!         max_words: 600,
//!     })
//!     .unwrap();
//! assert!(summary.starts_with("## Files Modified\n- `/repo/src/parse.rs`"));
//! assert!(summary.contains("error[E0308]: mismatched types"));
//! assert!(summary.contains("I'll fix the parser instead of the lexer."));
//! ```

mod facts;
#[cfg(test)]
mod fixtures;
mod prose;
mod rank;
mod render;
mod sections;
mod shell;
mod values;

pub use facts::{Fact, FactKind, Facts, LISTING, extract_facts};
pub use shell::{commands, edit_block_paths, patch_paths, written_paths};
pub use values::{
    KeyValue, MAX_ERROR_LINE_CHARS, MAX_PATH_BYTES, ValueKind, error_lines, identifiers,
    key_values, message_key_values, paths, quantities, urls,
};

use crate::summarize::{Summarizer, SummaryError, SummaryRequest};
use crate::tokens::TokenCounter;

/// The words of the five section headings: the smallest summary there is.
pub const MIN_WORDS: usize = 15;

/// The extractive summarizer; see the [module documentation](self).
///
/// Its fields tune how the word cap is shared; the defaults suit the seeds'
/// 600 words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExtractiveSummarizer {
    /// The most words of the Current State (default 60), and never more than
    /// a tenth of the cap.
    pub state_words: usize,
    /// The share of the cap, in percent, that Key Decisions and Pending Tasks
    /// each get before the key values are placed (default 8); they may grow
    /// into what the values leave.
    pub reserved_percent: usize,
}

impl Default for ExtractiveSummarizer {
    fn default() -> Self {
        ExtractiveSummarizer {
            state_words: 60,
            reserved_percent: 8,
        }
    }
}

impl ExtractiveSummarizer {
    /// The facts of a request: the previous summary's, then the span's or
    /// the partial summaries'.
    fn facts_of(request: &SummaryRequest<'_>) -> Result<Facts, SummaryError> {
        if request.max_words < MIN_WORDS {
            return Err(SummaryError::Failed(format!(
                "a word cap of {} is too small for the summary's five headings; \
                 allow at least {MIN_WORDS} words",
                request.max_words
            )));
        }
        let mut facts = request
            .previous
            .map(Facts::from_summary)
            .unwrap_or_default();
        if !request.messages.is_empty() {
            facts.append(extract_facts(request.messages));
        } else {
            for partial in request.partials {
                facts.append(Facts::from_summary(partial));
            }
        }
        Ok(facts)
    }
}

impl Summarizer for ExtractiveSummarizer {
    fn summarize(&self, request: &SummaryRequest<'_>) -> Result<String, SummaryError> {
        let facts = Self::facts_of(request)?;
        Ok(self.render(&facts, request.max_words, None))
    }

    /// It reads spans of any size in one pass.
    fn reads_whole_spans(&self) -> bool {
        true
    }

    /// It calls no model: summarizing again costs only the pass.
    fn is_local(&self) -> bool {
        true
    }

    /// Writes the summary within the word cap and `max_tokens`: when the
    /// text at the cap is over, it is written both ways that fit and the one
    /// that keeps more of the files and values is taken: the texts chosen
    /// within the tokens (best-ranked first; one that does not fit is
    /// skipped), and the text at the largest word cap that fits (down to the
    /// headings alone). Values are dropped whole, never cut.
    fn summarize_within(
        &self,
        request: &SummaryRequest<'_>,
        max_tokens: u32,
        counter: &dyn TokenCounter,
    ) -> Result<String, SummaryError> {
        let facts = Self::facts_of(request)?;
        let text = self.render(&facts, request.max_words, None);
        let tokens = counter.count_text(&text);
        if tokens <= max_tokens || request.max_words <= MIN_WORDS {
            return Ok(text);
        }
        // Over: the texts are chosen within the tokens the headings leave,
        // less what the estimate (a sum over the texts) missed, if it did.
        let frame = counter.count_text(&self.render(&Facts::default(), MIN_WORDS, None));
        let mut left = max_tokens.saturating_sub(frame);
        let mut within_tokens = None;
        for _ in 0..TOKEN_TRIES {
            let text = self.render(&facts, request.max_words, Some((left, counter)));
            let tokens = counter.count_text(&text);
            if tokens <= max_tokens {
                within_tokens = Some(text);
                break;
            }
            left = left.saturating_sub(tokens - max_tokens + left / 20 + 1);
        }
        let by_words = self.largest_that_fits(
            &facts,
            &text,
            tokens,
            request.max_words,
            max_tokens,
            counter,
        );
        // Whichever keeps more of the evidence: choosing within the tokens
        // keeps many short values where a few long ones would not fit, but
        // gives the state, decisions and tasks their shares of the whole
        // word cap.
        Ok(match within_tokens {
            Some(text) if evidence(&facts, &text) > evidence(&facts, &by_words) => text,
            _ => by_words,
        })
    }
}

impl ExtractiveSummarizer {
    /// The summary at the largest word cap whose text fits `max_tokens`,
    /// given the `text` at `max_words`, `tokens` long, that does not.
    fn largest_that_fits(
        &self,
        facts: &Facts,
        text: &str,
        tokens: u32,
        max_words: usize,
        max_tokens: u32,
        counter: &dyn TokenCounter,
    ) -> String {
        // The cap that failed: no more words than the text it gave, which
        // may be far below the cap.
        let mut over = word_count(text).min(max_words);
        let mut best = (MIN_WORDS, None);
        // Tokens grow about as words do: a first guess a little under, then
        // a bisection between the largest cap that fits and the smallest
        // that does not.
        let mut words =
            (over as u64 * u64::from(max_tokens) * 95 / (u64::from(tokens) * 100)) as usize;
        for _ in 0..SEARCH_STEPS {
            words = words.clamp(best.0, over.saturating_sub(1).max(best.0));
            if best.1.is_some() && words <= best.0 {
                break;
            }
            let text = self.render(facts, words, None);
            if counter.count_text(&text) <= max_tokens {
                best = (words, Some(text));
            } else {
                over = word_count(&text).min(words);
            }
            if over <= best.0 + 1 {
                break;
            }
            words = best.0 + (over - best.0) / 2;
        }
        match best.1 {
            Some(text) => text,
            None => self.render(facts, MIN_WORDS, None),
        }
    }
}

/// How many of the files and values of `facts` (identifiers aside) a
/// summary holds verbatim.
fn evidence(facts: &Facts, summary: &str) -> usize {
    facts
        .facts
        .iter()
        .filter(|f| match f.kind {
            FactKind::FileModified => true,
            FactKind::Value(kind) => kind != ValueKind::Identifier,
            _ => false,
        })
        .filter(|f| summary.contains(f.text.as_str()))
        .count()
}

/// The most summaries written to find the largest word cap that fits a
/// number of tokens ([`Summarizer::summarize_within`]), when choosing within
/// the tokens did not fit.
const SEARCH_STEPS: usize = 12;

/// The most summaries written choosing texts within a number of tokens
/// ([`Summarizer::summarize_within`]), each with fewer tokens than the last.
const TOKEN_TRIES: usize = 4;

/// The number of words of a text: its whitespace-separated tokens. This is
/// how the word cap is counted.
pub fn word_count(text: &str) -> usize {
    text.split_whitespace().count()
}

#[cfg(test)]
mod tests {
    use super::fixtures::{assert_headings, call, merge, sections_of, summarize};
    use super::*;
    use crate::Message;

    #[test]
    fn concrete_values_are_kept_verbatim_in_their_sections() {
        let messages = [
            Message::user(
                "Deploy to https://staging.example.com/api/v2. (see docs) and keep it under 12 MB; \
                 reservation ZFA04Y costs $305.",
            ),
            call(
                "I'll patch the config instead of the code, because the bug is there.",
                "c1",
                "Edit",
                r#"{"file_path":"\/srv\/app\/config.toml","old_string":"a","new_string":"b"}"#,
            ),
            Message::tool_result("c1", "Edit", "ok"),
            call(
                "",
                "c2",
                "Bash",
                r#"{"command":"cargo test --workspace 2>&1 | tail"}"#,
            ),
            Message::tool_result(
                "c2",
                "Bash",
                "running 3 tests\nthread 'main' panicked at src/lib.rs:10:5:\n\
                 test result: FAILED. 2 passed; 1 failed; finished in 0.31s",
            ),
            Message::assistant("The test in src/lib.rs fails; next I will read tests/it.rs."),
        ];
        let summary = summarize(&messages, 600);
        assert_headings(&summary);
        for value in [
            "https://staging.example.com/api/v2",
            "/srv/app/config.toml",
            "thread 'main' panicked at src/lib.rs:10:5:",
            "test result: FAILED. 2 passed; 1 failed; finished in 0.31s",
            "cargo test --workspace 2>&1 | tail",
            "ZFA04Y",
            "$305",
            "12 MB",
            "I'll patch the config instead of the code, because the bug is there.",
        ] {
            assert!(summary.contains(value), "missing {value:?} in\n{summary}");
        }
        assert_eq!(
            sections_of(&summary, "/srv/app/config.toml"),
            ["Files Modified"]
        );
        assert_eq!(sections_of(&summary, "cargo test"), ["Important Values"]);
        assert_eq!(
            sections_of(&summary, "next I will read"),
            ["Key Decisions", "Current State"]
        );
        // Every key value of the span is there.
        for value in messages.iter().flat_map(message_key_values) {
            assert!(summary.contains(&value.text), "missing {value:?}");
        }
    }

    #[test]
    fn partial_summaries_merge_into_one() {
        let first = summarize(
            &[
                Message::user(
                    "The old API is https://old.example/v1 and the cache is /var/cache/app.db",
                ),
                call(
                    "I'll keep SQLite because it is simpler.",
                    "c1",
                    "Write",
                    r#"{"file_path":"/app/db.rs"}"#,
                ),
                Message::tool_result("c1", "Write", "Error: permission denied"),
            ],
            600,
        );
        let second = summarize(
            &[
                Message::user("Now move /var/cache/app.db to https://new.example/v2"),
                call("", "c2", "Edit", r#"{"file_path":"/app/api.rs"}"#),
                Message::tool_result("c2", "Edit", "ok"),
                Message::assistant("Moved; the API now points at v2."),
            ],
            600,
        );
        let merged = merge(&[first, second], 600);
        assert_headings(&merged);
        for value in [
            "https://old.example/v1",
            "https://new.example/v2",
            "/var/cache/app.db",
            "/app/db.rs",
            "/app/api.rs",
            "Error: permission denied",
            "I'll keep SQLite because it is simpler.",
        ] {
            assert!(merged.contains(value), "missing {value:?} in\n{merged}");
        }
        assert_eq!(merged.matches("/var/cache/app.db").count(), 1, "{merged}");
        // The later part's state wins.
        assert_eq!(sections_of(&merged, "Moved; the API"), ["Current State"]);
        // Merging is stable: merging a merged summary again changes nothing.
        assert_eq!(merge(std::slice::from_ref(&merged), 600), merged);
    }

    #[test]
    fn the_previous_summary_is_carried_forward() {
        let previous = summarize(
            &[
                call(
                    "Let's use port 8080.",
                    "c1",
                    "Write",
                    r#"{"path":"/etc/app.conf"}"#,
                ),
                Message::tool_result(
                    "c1",
                    "Write",
                    "Traceback (most recent call last):\nPermissionError: [Errno 13] denied",
                ),
                Message::assistant("Config written."),
            ],
            600,
        );
        let messages = [
            Message::user("Now check https://status.example/health"),
            Message::assistant("It is healthy."),
        ];
        let summary = ExtractiveSummarizer::default()
            .summarize(&SummaryRequest {
                messages: &messages,
                previous: Some(&previous),
                partials: &[],
                max_words: 600,
            })
            .unwrap();
        for value in [
            "/etc/app.conf",
            "PermissionError: [Errno 13] denied",
            "Let's use port 8080.",
            "https://status.example/health",
        ] {
            assert!(summary.contains(value), "missing {value:?} in\n{summary}");
        }
        assert_eq!(sections_of(&summary, "/etc/app.conf"), ["Files Modified"]);
        assert_eq!(sections_of(&summary, "It is healthy."), ["Current State"]);
        assert!(!summary.contains("Config written."), "{summary}");
    }

    #[test]
    fn a_cap_below_the_headings_is_an_error() {
        let error = ExtractiveSummarizer::default()
            .summarize(&SummaryRequest {
                messages: &[Message::user("hi")],
                previous: None,
                partials: &[],
                max_words: MIN_WORDS - 1,
            })
            .unwrap_err();
        assert!(error.to_string().contains("at least 15 words"), "{error}");
    }
}
