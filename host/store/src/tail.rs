//! What [`SessionStore::load_tail`](crate::SessionStore::load_tail) asks for
//! and answers, and the answer computed from a whole [`History`]: the
//! reference every backend's tail read equals.

use agent_host_core::{Checkpoint, Message};

use crate::{History, SessionMeta, StoreWarning, leads};

/// Where the messages of a [`Tail`] start.
///
/// Only the messages after the log's leading system messages are searched
/// and counted: those are always returned, in [`Tail::system`].
///
/// For a turn, start where the latest checkpoint's history starts
/// ([`TailStart::since`]), or, with no checkpoint, take the newest messages
/// the view can hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TailStart {
    /// From the newest message with this id, inclusive. When no message
    /// after the leading system ones has it, the tail is all of them, and
    /// [`Tail::found`] says so (not a warning: a checkpoint may name messages
    /// a clear removed).
    AtId(String),
    /// Where a checkpoint's history starts, as core's `budget::split_log`
    /// finds it: from the newest message with id `last` that comes before
    /// the newest messages with ids `boundary` and `summary` (the pair),
    /// inclusive. A message after the pair that reuses `last` (a hostile or
    /// merged log) is not the start. When there is no such message, the
    /// tail is all of them and [`Tail::found`] is false.
    Covered {
        /// The id of the last message the checkpoint covers.
        last: String,
        /// The id of the checkpoint's boundary message.
        boundary: String,
        /// The id of the checkpoint's summary message.
        summary: String,
    },
    /// The newest `n` messages (all of them when there are fewer).
    Newest(usize),
}

impl TailStart {
    /// Where a turn's log starts after `checkpoint`, the session's latest:
    /// at the last message it covers. Core's `budget::split_log` finds in
    /// [`Tail::into_log`] what it finds in the whole log: the checkpoint's pair
    /// and, from the last covered message, where the history since the
    /// checkpoint starts. `None` when the checkpoint covers nothing (then a
    /// turn needs every message).
    ///
    /// Not the checkpoint's boundary: a compaction appends its pair after
    /// the messages it kept unsummarized, and those are still history.
    ///
    /// ```
    /// use agent_host_core::Checkpoint;
    /// use agent_host_store::TailStart;
    ///
    /// let checkpoint = Checkpoint {
    ///     boundary_id: "checkpoint-m7-boundary".into(),
    ///     summary_id: "checkpoint-m7-summary".into(),
    ///     covers: vec!["m6".into(), "m7".into()],
    ///     created: chrono::DateTime::UNIX_EPOCH,
    ///     usage: None,
    /// };
    /// assert_eq!(
    ///     TailStart::since(&checkpoint),
    ///     Some(TailStart::Covered {
    ///         last: "m7".into(),
    ///         boundary: "checkpoint-m7-boundary".into(),
    ///         summary: "checkpoint-m7-summary".into(),
    ///     })
    /// );
    /// ```
    pub fn since(checkpoint: &Checkpoint) -> Option<TailStart> {
        checkpoint.covers.last().map(|last| TailStart::Covered {
            last: last.clone(),
            boundary: checkpoint.boundary_id.clone(),
            summary: checkpoint.summary_id.clone(),
        })
    }

    /// A search for this start over messages fed newest first.
    pub(crate) fn scan(&self) -> StartScan<'_> {
        StartScan {
            from: self,
            seen: 0,
            pair: (false, false),
            found: false,
        }
    }
}

/// Looks for a [`TailStart`] among messages fed newest first, as every
/// backend reads a log backwards: [`StartScan::found`] once the message just
/// fed is the start (or, for [`TailStart::Newest`], once enough were fed).
pub(crate) struct StartScan<'a> {
    from: &'a TailStart,
    seen: usize,
    pair: (bool, bool),
    found: bool,
}

impl StartScan<'_> {
    /// Feeds the next message, going back; nothing changes once found.
    pub(crate) fn feed(&mut self, m: &Message) {
        if self.found {
            return;
        }
        self.seen += 1;
        self.found = match self.from {
            TailStart::Newest(_) => false,
            TailStart::AtId(id) => m.id == *id,
            TailStart::Covered {
                last,
                boundary,
                summary,
            } => {
                // In split_log's order: the newest boundary, the newest
                // summary, then the covered id before both.
                if !self.pair.0 && m.id == *boundary {
                    self.pair.0 = true;
                    false
                } else if !self.pair.1 && m.id == *summary {
                    self.pair.1 = true;
                    false
                } else {
                    self.pair == (true, true) && m.id == *last
                }
            }
        };
    }

    /// Whether the messages fed so far reach the start.
    pub(crate) fn found(&self) -> bool {
        match self.from {
            TailStart::Newest(n) => self.seen >= *n,
            _ => self.found,
        }
    }
}

/// What a turn needs of a session's log, without the rest of it: the answer
/// of [`SessionStore::load_tail`](crate::SessionStore::load_tail).
///
/// `system ++ messages` ([`Tail::into_log`]) is a log core's pipeline reads as it
/// reads the whole one, from the start point on. One caveat: when
/// `skipped > 0` and `messages` starts with a system message (one from the
/// middle of the log), `split_log` takes it for part of the system prompt;
/// [`Tail::system`]'s length is the prompt's true end.
#[derive(Clone, Debug)]
pub struct Tail {
    /// The session's metadata. Its `message_count` is the stored count,
    /// not reconciled with the log (that needs all of it): the file store's
    /// state record (which a crash can leave behind the log until the next
    /// [`load`](crate::SessionStore::load)), SQLite's row that commits with
    /// the messages. When a backend read the whole log anyway, or the log
    /// needed a repair first, the count is reconciled as `load` does.
    pub meta: SessionMeta,
    /// The leading system messages: the log's first messages while they are
    /// system messages and not summaries.
    pub system: Vec<Message>,
    /// The messages from the start point to the end of the log, in log
    /// order; never one of `system`.
    pub messages: Vec<Message>,
    /// How many messages lie between `system` and `messages`, not read
    /// (derived from the stored count when they were not read at all).
    pub skipped: u64,
    /// Whether the start point was found: false only for a
    /// [`TailStart::AtId`] that no message after `system` has, when
    /// `messages` is all of them.
    pub found: bool,
    /// What was wrong with the part of the log read, and what was done (also
    /// logged).
    pub warnings: Vec<StoreWarning>,
}

impl Tail {
    /// The tail of a whole history, as a tail read from `from` returns it.
    /// The default [`load_tail`](crate::SessionStore::load_tail), and what
    /// every backend's equals.
    pub fn of_history(history: History, from: &TailStart) -> Tail {
        let History {
            meta,
            mut messages,
            warnings,
        } = history;
        let system_end = messages
            .iter()
            .position(|m| !leads(m))
            .unwrap_or(messages.len());
        let after = messages.split_off(system_end);
        let (start, found) = start_in(&after, from);
        Tail {
            meta,
            system: messages,
            skipped: start as u64,
            messages: after.into_iter().skip(start).collect(),
            found,
            warnings,
        }
    }

    /// `system ++ messages`: the log a turn runs the pipeline over.
    pub fn into_log(self) -> Vec<Message> {
        let mut log = self.system;
        log.extend(self.messages);
        log
    }
}

/// Where `from` starts among `after` (the messages after the leading
/// system ones), and whether it was found.
pub(crate) fn start_in(after: &[Message], from: &TailStart) -> (usize, bool) {
    match from {
        TailStart::Newest(n) => (after.len().saturating_sub(*n), true),
        _ => {
            let mut scan = from.scan();
            let start = after.iter().rposition(|m| {
                scan.feed(m);
                scan.found()
            });
            match start {
                Some(i) => (i, true),
                None => (0, false),
            }
        }
    }
}
