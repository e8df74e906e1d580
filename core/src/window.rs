//! The part of a session's log the pipeline reads, kept up to date as
//! messages are appended: a context report whose cost follows the window,
//! not the log.
//!
//! Without a summarizer, [`compact`](crate::pipeline::compact) reads a log's
//! system prompt, its latest checkpoint's pair, and its messages since the
//! checkpoint from the end back until they pass a token cap (twice the
//! budget, or a trigger's threshold when larger); older messages are only
//! counted. A [`LogWindow`] holds exactly that, plus the count of the
//! messages it no longer holds, so that a server can keep a hot session's
//! window in memory, append to it, and run the pipeline over it in the time
//! the window takes, however long the session is. What it gives equals what
//! `compact` gives for the whole log: the same view and the same report
//! (the tests check it after every append).
//!
//! What it leaves out: summaries (a summary needs every message since the
//! checkpoint) and new checkpoints (a caller builds a new window then).

use std::sync::Arc;

use chrono::{DateTime, Utc};

use crate::budget::{is_system_prompt, split_log};
use crate::message::Message;
use crate::pipeline::{Compaction, PipelineConfig, PipelineReport, Run, history_tail};
use crate::session::Checkpoint;
use crate::tokens::TokenCounter;

/// How many messages a window may grow by, beyond twice what it held after
/// its last trim, before [`LogWindow::push`] trims it again: trimming costs
/// what the window holds, so it runs once in that many appends.
const SLACK: usize = 1024;

/// A log as the pipeline reads it, without the messages it only counts.
///
/// Holds the log's system prompt, the latest checkpoint's boundary and
/// summary messages when they lie before the rest, and the log from the
/// oldest message the pipeline reads on (a little more until the next
/// trim); `hidden` counts the messages since the checkpoint between them.
///
/// ```
/// use std::sync::Arc;
/// use agent_host_core::pipeline::{compact, PipelineConfig};
/// use agent_host_core::window::LogWindow;
/// use agent_host_core::{HeuristicCounter, Message};
///
/// let config = PipelineConfig::default();
/// let counter = HeuristicCounter::default();
/// // 5,000 messages of 104 tokens: twice the budget is 2,383 of them.
/// let mut log: Vec<Message> = (0..5_000)
///     .map(|i| Message::user("x".repeat(400)).with_id(format!("m{i}")))
///     .collect();
/// let mut window = LogWindow::new(log.clone(), None, config.clone(), Arc::new(counter));
/// let more = Message::assistant("done").with_id("last");
/// window.push([more.clone()]);
/// log.push(more);
///
/// // Under half the log is held, the rest counted; the report is the
/// // whole log's.
/// assert_eq!(window.held(), 2_384);
/// assert_eq!(window.hidden(), 2_617);
/// let now = chrono::DateTime::UNIX_EPOCH;
/// let whole = compact(&log, None, &config, &counter, None, now);
/// assert_eq!(window.compact(now).report, whole.report);
/// ```
pub struct LogWindow {
    /// The system prompt, then `moved` pair messages, then the newest
    /// messages of the log.
    log: Vec<Message>,
    /// How many of the latest checkpoint's pair messages follow the system
    /// prompt, moved there when the messages around them were dropped.
    moved: usize,
    /// Messages since the checkpoint that lie before the newest ones held
    /// (never one of the pair).
    hidden: usize,
    /// The log's latest checkpoint.
    checkpoint: Option<Checkpoint>,
    /// What the pipeline runs with.
    config: PipelineConfig,
    /// What it counts tokens with.
    counter: Arc<dyn TokenCounter>,
    /// The length at which `push` trims.
    trim_at: usize,
}

impl std::fmt::Debug for LogWindow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogWindow")
            .field("held", &self.log.len())
            .field("moved", &self.moved)
            .field("hidden", &self.hidden)
            .finish_non_exhaustive()
    }
}

impl LogWindow {
    /// The window of `log`, whose latest checkpoint is `checkpoint`, for
    /// the pipeline run with `config` and `counter`.
    ///
    /// `log` is the whole log, or a log the pipeline reads as it reads the
    /// whole one: the system prompt, then the messages from the last one the
    /// checkpoint covers on (what a store's tail read since the checkpoint
    /// gives).
    pub fn new(
        log: Vec<Message>,
        checkpoint: Option<Checkpoint>,
        config: PipelineConfig,
        counter: Arc<dyn TokenCounter>,
    ) -> Self {
        let mut window = LogWindow {
            log,
            moved: 0,
            hidden: 0,
            checkpoint,
            config,
            counter,
            trim_at: 0,
        };
        window.trim();
        window
    }

    /// Messages appended to the log, in order.
    pub fn push(&mut self, messages: impl IntoIterator<Item = Message>) {
        self.log.extend(messages);
        if self.log.len() >= self.trim_at {
            self.trim();
        }
    }

    /// What [`compact`](crate::pipeline::compact) gives for the whole log
    /// with no summarizer: the view and the report of every stage.
    pub fn compact(&self, now: DateTime<Utc>) -> Compaction {
        self.run()
            .compact(None, now, true)
            .into_compaction()
            .expect("a view is made when asked for")
    }

    /// The report of [`LogWindow::compact`], without making its view when
    /// the log's messages are the view as they are (no stage changed them,
    /// none needs cutting down): what a context report needs, in the time
    /// counting them takes.
    pub fn report(&self, now: DateTime<Utc>) -> PipelineReport {
        self.run().compact(None, now, false).report
    }

    fn run(&self) -> Run<'_> {
        Run {
            log: &self.log,
            hidden: self.hidden,
            checkpoint: self.checkpoint.as_ref(),
            config: &self.config,
            counter: &*self.counter,
            clock: None,
        }
    }

    /// How many messages the window holds.
    pub fn held(&self) -> usize {
        self.log.len()
    }

    /// How many messages since the checkpoint it counts without holding.
    pub fn hidden(&self) -> usize {
        self.hidden
    }

    /// Drops the messages the pipeline no longer reads: those before the
    /// point where its read of the history stops (see
    /// [`LogWindow::compact`]), but for the checkpoint's pair, which moves
    /// up to the system prompt. [`LogWindow::push`] calls it once the
    /// window has grown by half.
    pub fn trim(&mut self) {
        let len = self.log.len();
        self.trim_at = len.saturating_mul(2).saturating_add(SLACK);
        let split = split_log(&self.log, self.checkpoint.as_ref());
        let tail = history_tail(&self.log, &split, &self.config, &*self.counter);
        if !tail.stopped {
            // Every message since the checkpoint is read.
            return;
        }
        let kept = split.system_end + self.moved;
        // The first message held after the prompt must not read as part of
        // it: a system message where the read stops keeps the one before.
        let mut from = tail.start;
        while from > kept && is_system_prompt(&self.log[from]) {
            from -= 1;
        }
        if from <= kept {
            return;
        }
        let pair = split.summary;
        if let (Some((b, s)), Some(checkpoint)) = (pair, &self.checkpoint) {
            // A pair that would read as part of the prompt once moved, or
            // whose ids are those of a covered message, is not moved: the
            // window then keeps what it holds.
            let last = checkpoint.covers.last();
            if is_system_prompt(&self.log[b])
                || is_system_prompt(&self.log[s])
                || last
                    .is_some_and(|id| *id == checkpoint.boundary_id || *id == checkpoint.summary_id)
            {
                return;
            }
        }
        let in_pair = |i: usize| pair.is_some_and(|(b, s)| i == b || i == s);
        // Messages before the checkpoint's start are covered, not since it.
        self.hidden += (kept..from)
            .filter(|&i| i >= split.start && !in_pair(i))
            .count();
        let newest = self.log.split_off(from);
        let dropped = self.log.split_off(kept);
        for (i, m) in (kept..).zip(dropped) {
            if in_pair(i) {
                self.log.push(m);
                self.moved += 1;
            }
        }
        self.log.extend(newest);
        self.trim_at = self.log.len().saturating_mul(2).saturating_add(SLACK);
    }
}
