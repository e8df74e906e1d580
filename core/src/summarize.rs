//! Summarizers: what turns a span of the log into the text of a checkpoint.
//!
//! The compaction pipeline decides *what* to summarize (see `compact`); a
//! [`Summarizer`] decides *how*. Core ships the extractive summarizer
//! ([`crate::extractive::ExtractiveSummarizer`]), which needs no model; the
//! host adds an LLM summarizer behind the same trait.

use crate::message::Message;

/// The seeds' cap on a summary's length, in words.
pub const DEFAULT_MAX_WORDS: usize = 600;

/// One summarization call.
#[derive(Clone, Copy, Debug)]
pub struct SummaryRequest<'a> {
    /// The span to summarize, in log order. Empty when merging `partials`.
    pub messages: &'a [Message],
    /// The summary of the previous checkpoint, whose facts should be carried
    /// forward, if there is one.
    pub previous: Option<&'a str>,
    /// Summaries of the parts of a span too large for one call, in order, to
    /// be merged into one. Empty for an ordinary call.
    pub partials: &'a [String],
    /// The most words the summary may have.
    pub max_words: usize,
}

/// Why a summary could not be made.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SummaryError {
    /// The summarizer failed; the reason is for the user.
    #[error("summarization failed: {0}")]
    Failed(String),
}

/// Writes summaries.
///
/// Implementations write the seeds' structured summary: Files Modified, Key
/// Decisions, Important Values (kept verbatim), Current State, Pending Tasks,
/// within `max_words`.
pub trait Summarizer {
    /// Summarizes `request.messages`, or merges `request.partials` when the
    /// messages are empty and partials are given.
    fn summarize(&self, request: &SummaryRequest<'_>) -> Result<String, SummaryError>;
}
