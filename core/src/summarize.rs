//! Summarizers: what turns a span of the log into the text of a checkpoint.
//!
//! The compaction pipeline decides *what* to summarize (see `compact`); a
//! [`Summarizer`] decides *how*. Core ships the extractive summarizer
//! ([`crate::extractive::ExtractiveSummarizer`]), which needs no model; the
//! host adds an LLM summarizer behind the same trait.

use crate::message::Message;
use crate::tokens::TokenCounter;

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

    /// Whether this summarizer reads a span of any size in one call, its
    /// largest messages included (the extractive one does; a model has a
    /// window). When it does, the pipeline gives it the whole span at once
    /// instead of parts to merge, and leaves no message out for its size.
    fn reads_whole_spans(&self) -> bool {
        false
    }

    /// Whether a call is local work only (no model, nothing paid for):
    /// then the pipeline may summarize again with a wider span when the
    /// messages it keeps after the summary do not fit beside it, rather
    /// than leave the oldest of them out of the view. A model summarizer
    /// (the default) is called once a compaction; what does not fit is
    /// left out as packing leaves it, and counted in the report.
    fn is_local(&self) -> bool {
        false
    }

    /// Summarizes as [`summarize`](Self::summarize) does, in at most
    /// `max_tokens` tokens of text as `counter` counts them, so that the
    /// summary fits its share of the context without being cut.
    ///
    /// The default ignores the limit (a model cannot be held to a token
    /// count; the pipeline cuts what is over); a summarizer that can measure
    /// what it writes, like the extractive one, writes less instead.
    fn summarize_within(
        &self,
        request: &SummaryRequest<'_>,
        max_tokens: u32,
        counter: &dyn TokenCounter,
    ) -> Result<String, SummaryError> {
        let _ = (max_tokens, counter);
        self.summarize(request)
    }
}
