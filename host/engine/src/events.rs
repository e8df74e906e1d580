//! What the engine reports while it works: the front end decides how to
//! show it (a spinner and lines on a terminal, server-sent events on the
//! server). The engine itself never prints.

use agent_host_provider::StreamEvent;
use agent_host_runtime::ProcessorReport;
use agent_host_store::SessionRef;

/// Something that happened during an engine call.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum EngineEvent {
    /// What the model's answer streams: text, reasoning, a tool call
    /// starting, or a retry the provider announces.
    Model(StreamEvent),
    /// A summarization request to the model started.
    SummaryStarted {
        /// Messages being summarized (0 for a merge of partial summaries).
        messages: usize,
        /// Partial summaries being merged.
        partials: usize,
        /// The model writing it.
        model: String,
    },
    /// The summarization request ended; `error` says why it failed.
    SummaryFinished {
        /// The failure, if it failed.
        error: Option<String>,
    },
    /// A summary checkpoint is about to be stored: `messages` are the ones
    /// it covers, as they are before the summary replaces them in views (the
    /// moment a long-term memory flush hooks into).
    BeforeCompaction {
        /// The session.
        session: SessionRef,
        /// The messages the checkpoint covers, in log order.
        messages: Vec<agent_host_core::Message>,
    },
    /// The long-term memory flush ran over the messages a checkpoint is
    /// about to cover (before it is stored): `facts` new facts.
    MemoryFlushed {
        /// The session.
        session: SessionRef,
        /// How many facts it added.
        facts: usize,
    },
    /// Facts were extracted into long-term memory (at the flush, or every
    /// few exchanges with the model).
    MemoryExtracted {
        /// The session.
        session: SessionRef,
        /// How many new facts.
        facts: usize,
        /// `model` or `offline`.
        by: String,
        /// Why the model's extraction failed, when the offline extractor
        /// stood in.
        fell_back: Option<String>,
    },
    /// Long-term memory recalled facts into a turn's view (after its newest
    /// message).
    MemoryRecalled {
        /// The session.
        session: SessionRef,
        /// What was recalled, with its tokens.
        recall: agent_host_core::memory::recall::Recall,
    },
    /// The model called a memory tool in a turn and the engine ran it.
    MemoryTool {
        /// The session.
        session: SessionRef,
        /// `memory_search`, `memory_write` or `memory_recall`.
        tool: String,
        /// Why the call could not be carried out (the model was told so).
        error: Option<String>,
    },
    /// A summary checkpoint was stored.
    ContextCompacted {
        /// The session.
        session: SessionRef,
        /// How many messages the checkpoint covers.
        covered: usize,
        /// Tokens of the history since the previous checkpoint (with the
        /// system prompt and the previous summary): what the summary replaced.
        tokens_before: u64,
        /// Tokens of the view after it.
        tokens_after: u64,
        /// `llm` or `extractive`.
        summarizer: &'static str,
    },
    /// A processor ran (or failed) on the view.
    Processor(Box<ProcessorReport>),
    /// The provider refused the view as too long; the engine prunes harder
    /// and retries once.
    AggressiveRetry {
        /// The provider's message.
        message: String,
    },
}

/// Receives [`EngineEvent`]s. Called from the engine's tasks and threads,
/// so it must be cheap and must not block for long.
pub trait Observer: Send + Sync {
    /// One event.
    fn event(&self, event: &EngineEvent);
}

/// Ignores every event.
#[derive(Clone, Copy, Debug, Default)]
pub struct Quiet;

impl Observer for Quiet {
    fn event(&self, _: &EngineEvent) {}
}

impl<F: Fn(&EngineEvent) + Send + Sync> Observer for F {
    fn event(&self, event: &EngineEvent) {
        self(event)
    }
}
