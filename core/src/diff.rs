//! What a stage did to a list of messages, as a diff a person reads: the
//! messages it kept (in runs), dropped, replaced and inserted, in the order
//! of its output, each changed one with an excerpt of its text.
//!
//! A diff is bounded whatever the lists hold: each excerpt is cut at
//! [`DiffLimits::excerpt_chars`], the excerpts of one diff share
//! [`DiffLimits::text_bytes`], a long run of dropped messages (the budget
//! leaving out the oldest of a long log) shows only its last
//! [`DiffLimits::run_shown`] and counts the rest, and past
//! [`DiffLimits::changes`] changed messages the rest are only counted.
//!
//! ```
//! use agent_host_core::diff::{Change, DiffLimits, diff};
//! use agent_host_core::Message;
//!
//! let a = Message::user("first").with_id("a");
//! let b = Message::assistant("second").with_id("b");
//! let c = Message::user("third").with_id("c");
//! let summary = Message::assistant("first and second, in short").with_id("s");
//! let d = diff(&[a, b, c.clone()], &[summary, c], &[], &DiffLimits::default());
//! assert!(matches!(&d.changes[0], Change::Dropped { message } if message.id == "a"));
//! assert!(matches!(&d.changes[1], Change::Dropped { message } if message.id == "b"));
//! assert!(matches!(&d.changes[2], Change::Inserted { message } if message.id == "s"));
//! assert!(matches!(&d.changes[3], Change::Kept { count: 1, .. }));
//! ```

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::message::{Message, Role};

/// The bounds of a [`ViewDiff`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiffLimits {
    /// Characters of a message's text kept in its excerpt.
    pub excerpt_chars: usize,
    /// Bytes of excerpt text one diff keeps; later excerpts keep none.
    pub text_bytes: usize,
    /// Messages of a run of dropped ones shown (the last of the run).
    pub run_shown: usize,
    /// Changed messages listed; the rest are counted in
    /// [`ViewDiff::not_listed`].
    pub changes: usize,
}

impl Default for DiffLimits {
    fn default() -> Self {
        DiffLimits {
            excerpt_chars: 2_000,
            text_bytes: 64 * 1024,
            run_shown: 10,
            changes: 200,
        }
    }
}

/// A message as a diff shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Excerpt {
    /// Its id.
    pub id: String,
    /// Its role.
    pub role: Role,
    /// The tool it answers or names, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// Whether it is a summary checkpoint's message.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub summary: bool,
    /// The start of its text (and its tool calls, one line each).
    pub text: String,
    /// The length of the whole of it, in characters.
    pub chars: usize,
    /// Whether `text` holds less than the whole (cut, or left out because
    /// the diff's text budget was spent).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cut: bool,
}

/// One entry of a diff.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "change", rename_all = "snake_case")]
pub enum Change {
    /// A run of messages passed on unchanged.
    Kept {
        /// How many.
        count: usize,
        /// The first one's id.
        first: String,
        /// The last one's id.
        last: String,
    },
    /// Dropped messages counted, not listed (the start of a long run).
    DroppedRun {
        /// How many.
        count: usize,
        /// The first one's id.
        first: String,
        /// The last one's id.
        last: String,
    },
    /// A message dropped.
    Dropped {
        /// It.
        message: Excerpt,
    },
    /// A message replaced by another (or by a changed version of itself).
    Replaced {
        /// What it was.
        before: Excerpt,
        /// What took its place.
        after: Excerpt,
    },
    /// A message that was not in the input.
    Inserted {
        /// It.
        message: Excerpt,
    },
}

/// What a stage did to its input, in the order of its output.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ViewDiff {
    /// Messages in.
    pub before: usize,
    /// Messages out.
    pub after: usize,
    /// Counts by kind.
    pub kept: usize,
    /// Messages dropped.
    pub dropped: usize,
    /// Messages replaced.
    pub replaced: usize,
    /// Messages inserted.
    pub inserted: usize,
    /// The entries.
    pub changes: Vec<Change>,
    /// Changed messages past [`DiffLimits::changes`], counted only.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub not_listed: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// The diff from `before` to `after`. A message of `after` comes from the
/// message of `before` with its id, or from the one `replaced` names
/// (`(input id, output id)` pairs, as a processor's report gives them);
/// one that differs from where it came from is a replacement, one from
/// nowhere an insertion; a message of `before` that nothing came from was
/// dropped, and is shown where it stood.
pub fn diff(
    before: &[Message],
    after: &[Message],
    replaced: &[(String, String)],
    limits: &DiffLimits,
) -> ViewDiff {
    let before: Vec<&Message> = before.iter().collect();
    let after: Vec<&Message> = after.iter().collect();
    diff_refs(&before, &after, replaced, limits)
}

/// [`diff`] over borrowed messages (an input gathered from parts of a log).
pub fn diff_refs(
    before: &[&Message],
    after: &[&Message],
    replaced: &[(String, String)],
    limits: &DiffLimits,
) -> ViewDiff {
    let mut at: HashMap<&str, usize> = HashMap::with_capacity(before.len());
    for (i, m) in before.iter().enumerate() {
        at.entry(m.id.as_str()).or_insert(i);
    }
    let source_of: HashMap<&str, &str> = replaced
        .iter()
        .map(|(from, by)| (by.as_str(), from.as_str()))
        .collect();
    let mut used = vec![false; before.len()];
    let sources: Vec<Option<usize>> = after
        .iter()
        .map(|m| {
            let id = source_of.get(m.id.as_str()).copied().unwrap_or(&m.id);
            let j = *at.get(id)?;
            (!used[j]).then(|| {
                used[j] = true;
                j
            })
        })
        .collect();
    let mut out = Builder::new(limits, before.len(), after.len());
    let mut next = 0;
    // Insertions wait for the drops before the next message that came from
    // the input, so that what left is shown before what came in its place.
    let mut inserted: Vec<&Message> = Vec::new();
    for (m, source) in after.iter().zip(sources) {
        match source {
            Some(j) => {
                if j >= next {
                    for (k, dropped) in before.iter().enumerate().take(j).skip(next) {
                        if !used[k] {
                            out.dropped(dropped);
                        }
                    }
                    next = j + 1;
                }
                for new in inserted.drain(..) {
                    out.inserted(new);
                }
                let was = before[j];
                if was.id == m.id && was == *m {
                    out.kept(m);
                } else {
                    out.replaced(was, m);
                }
            }
            None => inserted.push(m),
        }
    }
    for (k, dropped) in before.iter().enumerate().skip(next) {
        if !used[k] {
            out.dropped(dropped);
        }
    }
    for new in inserted {
        out.inserted(new);
    }
    out.finish()
}

struct Builder<'a> {
    limits: &'a DiffLimits,
    diff: ViewDiff,
    text_left: usize,
    listed: usize,
    run: Vec<&'a Message>,
}

impl<'a> Builder<'a> {
    fn new(limits: &'a DiffLimits, before: usize, after: usize) -> Self {
        Builder {
            limits,
            diff: ViewDiff {
                before,
                after,
                ..ViewDiff::default()
            },
            text_left: limits.text_bytes,
            listed: 0,
            run: Vec::new(),
        }
    }

    fn excerpt(&mut self, m: &Message) -> Excerpt {
        let mut whole = m.text().into_owned();
        for call in &m.tool_calls {
            if !whole.is_empty() {
                whole.push('\n');
            }
            whole.push_str(&format!("→ {}({})", call.name, call.arguments));
        }
        let chars = whole.chars().count();
        let mut text: String = whole.chars().take(self.limits.excerpt_chars).collect();
        if text.len() > self.text_left {
            text.clear();
        }
        self.text_left -= text.len();
        Excerpt {
            id: m.id.clone(),
            role: m.role,
            tool: m
                .tool_name
                .clone()
                .or_else(|| (m.tool_calls.len() == 1).then(|| m.tool_calls[0].name.clone())),
            summary: m.summary,
            cut: text.chars().count() < chars,
            text,
            chars,
        }
    }

    /// Whether one more changed message may be listed; counts it either way.
    fn listing(&mut self) -> bool {
        self.listed += 1;
        if self.listed > self.limits.changes {
            self.diff.not_listed += 1;
            return false;
        }
        true
    }

    fn flush_run(&mut self) {
        if self.run.is_empty() {
            return;
        }
        let run = std::mem::take(&mut self.run);
        let shown = run.len().min(self.limits.run_shown);
        let counted = run.len() - shown;
        if counted > 0 {
            self.diff.changes.push(Change::DroppedRun {
                count: counted,
                first: run[0].id.clone(),
                last: run[counted - 1].id.clone(),
            });
        }
        for m in &run[counted..] {
            if self.listing() {
                let message = self.excerpt(m);
                self.diff.changes.push(Change::Dropped { message });
            }
        }
    }

    fn dropped(&mut self, m: &'a Message) {
        self.diff.dropped += 1;
        self.run.push(m);
    }

    fn kept(&mut self, m: &Message) {
        self.flush_run();
        self.diff.kept += 1;
        if let Some(Change::Kept { count, last, .. }) = self.diff.changes.last_mut() {
            *count += 1;
            last.clone_from(&m.id);
            return;
        }
        self.diff.changes.push(Change::Kept {
            count: 1,
            first: m.id.clone(),
            last: m.id.clone(),
        });
    }

    fn replaced(&mut self, was: &Message, now: &Message) {
        self.flush_run();
        self.diff.replaced += 1;
        if self.listing() {
            let before = self.excerpt(was);
            let after = self.excerpt(now);
            self.diff.changes.push(Change::Replaced { before, after });
        }
    }

    fn inserted(&mut self, m: &Message) {
        self.flush_run();
        self.diff.inserted += 1;
        if self.listing() {
            let message = self.excerpt(m);
            self.diff.changes.push(Change::Inserted { message });
        }
    }

    fn finish(mut self) -> ViewDiff {
        self.flush_run();
        self.diff
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(id: &str, text: &str) -> Message {
        Message::user(text).with_id(id)
    }

    fn kinds(d: &ViewDiff) -> Vec<String> {
        d.changes
            .iter()
            .map(|c| match c {
                Change::Kept { count, .. } => format!("kept{count}"),
                Change::DroppedRun { count, .. } => format!("run{count}"),
                Change::Dropped { message } => format!("-{}", message.id),
                Change::Replaced { before, after } => format!("{}>{}", before.id, after.id),
                Change::Inserted { message } => format!("+{}", message.id),
            })
            .collect()
    }

    #[test]
    fn drops_stand_where_they_stood_and_kept_runs_merge() {
        let before = [m("a", "1"), m("b", "2"), m("c", "3"), m("d", "4")];
        let after = [m("a", "1"), m("x", "new"), m("d", "4")];
        let d = diff(&before, &after, &[], &DiffLimits::default());
        assert_eq!(kinds(&d), ["kept1", "-b", "-c", "+x", "kept1"]);
        assert_eq!((d.kept, d.dropped, d.inserted, d.replaced), (2, 2, 1, 0));
    }

    #[test]
    fn a_replacement_is_named_by_the_pairs_or_by_a_changed_message() {
        let before = [m("a", "long tool output"), m("b", "2"), m("c", "3")];
        let after = [m("a", "[cut]"), m("b2", "two"), m("c", "3")];
        let pairs = [("b".to_owned(), "b2".to_owned())];
        let d = diff(&before, &after, &pairs, &DiffLimits::default());
        assert_eq!(kinds(&d), ["a>a", "b>b2", "kept1"]);
        let Change::Replaced { before, after } = &d.changes[1] else {
            unreachable!()
        };
        assert_eq!((before.text.as_str(), after.text.as_str()), ("2", "two"));
    }

    #[test]
    fn a_long_run_of_drops_is_counted_and_its_end_shown() {
        let before: Vec<Message> = (0..1000).map(|i| m(&format!("m{i}"), "x")).collect();
        let after = before[995..].to_vec();
        let limits = DiffLimits {
            run_shown: 3,
            ..DiffLimits::default()
        };
        let d = diff(&before, &after, &[], &limits);
        assert_eq!(kinds(&d), ["run992", "-m992", "-m993", "-m994", "kept5"]);
        assert_eq!(d.dropped, 995);
    }

    #[test]
    fn excerpts_are_bounded_per_message_and_per_diff() {
        let big = "é".repeat(10_000);
        let before: Vec<Message> = (0..50).map(|i| m(&format!("m{i}"), &big)).collect();
        let limits = DiffLimits {
            excerpt_chars: 100,
            text_bytes: 1_000,
            run_shown: 50,
            changes: 20,
        };
        let d = diff(&before, &[], &[], &limits);
        let texts: usize = d
            .changes
            .iter()
            .map(|c| match c {
                Change::Dropped { message } => {
                    assert!(message.cut && message.chars == 10_000);
                    message.text.len()
                }
                other => panic!("{other:?}"),
            })
            .sum();
        assert!(texts <= 1_000, "{texts}");
        assert_eq!(d.changes.len(), 20);
        assert_eq!(d.not_listed, 30);
        assert_eq!(d.dropped, 50);
    }
}
