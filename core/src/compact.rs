//! Summarization planning: when to summarize, what, and the checkpoint that
//! results.
//!
//! A summary is triggered when the messages since the last summary exceed
//! [`SummaryConfig::max_messages`], or the history's tokens exceed
//! [`SummaryConfig::max_tokens`] or [`SummaryConfig::window_fraction`] of the
//! window, and only with at least [`SummaryConfig::min_messages`] messages. The
//! last [`SummaryConfig::keep_last_turns`] turns (a turn starts at a user
//! message) stay intact; everything before them is the span. The span ends
//! where a turn starts, so no tool exchange is ever split. A history with no
//! more turns than that (a long agent run inside one user turn) keeps its last
//! `keep_last_turns` exchanges instead, whole. Kept messages that would not
//! fit beside the summary in the budget are summarized too rather than left
//! out of the view ([`SummaryPlan::fit_kept`]), when the summarizer is local
//! ([`crate::summarize::Summarizer::is_local`]): a model is asked once. Messages larger than
//! [`SummaryConfig::oversized_fraction`] of the window are left out of the
//! summarizer's input (and the checkpoint says so). A span larger than one
//! summarization call can take is split into parts, whole tool exchanges
//! each, summarized one by one and merged.
//!
//! The result is a checkpoint: a synthetic user boundary message and an
//! assistant summary message, both flagged `summary`, to be appended to the
//! log, and a [`Checkpoint`] that records the ids they cover. Nothing is
//! deleted from the log.

use chrono::{DateTime, Utc};

use crate::budget::unit_start;
use crate::message::{Message, Role, nth_last_position};
use crate::session::Checkpoint;
use crate::summarize::{DEFAULT_MAX_WORDS, Summarizer, SummaryError, SummaryRequest};
use crate::tokens::{self, TokenCounter};

/// When and how to summarize.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SummaryConfig {
    /// Summarize when more messages than this came since the last summary
    /// (default 30; `None` turns the trigger off).
    pub max_messages: Option<usize>,
    /// Summarize when the history takes more tokens than this (default 128,000).
    pub max_tokens: Option<u64>,
    /// Summarize when the history takes more than this share of the window
    /// (default 0.80; the seeds use 0.75, 0.80 or 0.85).
    pub window_fraction: Option<f64>,
    /// Never summarize fewer messages than this (default 6).
    pub min_messages: usize,
    /// The last N turns stay intact (default 4).
    pub keep_last_turns: usize,
    /// Messages over this share of the window are left out of the summary (default 0.5).
    pub oversized_fraction: f64,
    /// The most tokens one summarization call may take; `None` means half the window.
    pub max_part_tokens: Option<u32>,
    /// The summary's word cap (default 600).
    pub max_words: usize,
}

impl Default for SummaryConfig {
    fn default() -> Self {
        SummaryConfig {
            max_messages: Some(30),
            max_tokens: Some(128_000),
            window_fraction: Some(0.80),
            min_messages: 6,
            keep_last_turns: 4,
            oversized_fraction: 0.5,
            max_part_tokens: None,
            max_words: DEFAULT_MAX_WORDS,
        }
    }
}

/// What fired a summary.
#[derive(Clone, Debug, PartialEq)]
pub enum Trigger {
    /// Too many messages since the last summary.
    Messages {
        /// Messages since the last summary.
        count: usize,
        /// The limit.
        limit: usize,
    },
    /// Too many tokens.
    Tokens {
        /// Tokens of the history.
        tokens: u64,
        /// The limit.
        limit: u64,
    },
    /// Too large a share of the window.
    WindowFraction {
        /// Tokens of the history.
        tokens: u64,
        /// The threshold in tokens.
        threshold: u64,
        /// The configured share.
        fraction: f64,
    },
    /// Asked for by the user (`/summarize`).
    Forced,
}

/// How close a history is to one trigger.
#[derive(Clone, Debug, PartialEq)]
pub struct TriggerDistance {
    /// The trigger (`messages`, `tokens`, `window`).
    pub name: &'static str,
    /// Where the history stands.
    pub current: u64,
    /// Where the trigger fires.
    pub limit: u64,
    /// `current` as a percentage of `limit`.
    pub percent: f64,
}

impl SummaryConfig {
    /// How close `messages` messages and `tokens` tokens are to each trigger.
    pub fn distances(
        &self,
        messages: usize,
        tokens: u64,
        context_limit: u32,
    ) -> Vec<TriggerDistance> {
        let mut out = Vec::new();
        let mut push = |name, current: u64, limit: u64| {
            let percent = if limit == 0 {
                100.0
            } else {
                current as f64 * 100.0 / limit as f64
            };
            out.push(TriggerDistance {
                name,
                current,
                limit,
                percent,
            });
        };
        if let Some(limit) = self.max_messages {
            push("messages", messages as u64, limit as u64);
        }
        if let Some(limit) = self.max_tokens {
            push("tokens", tokens, limit);
        }
        if let Some(fraction) = self.window_fraction {
            push("window", tokens, window_threshold(fraction, context_limit));
        }
        out
    }

    /// The trigger that fires for `messages` messages since the last summary
    /// and `tokens` tokens of history, if any (ignoring the minimum).
    pub fn trigger(&self, messages: usize, tokens: u64, context_limit: u32) -> Option<Trigger> {
        if let Some(limit) = self.max_messages.filter(|&l| messages > l) {
            return Some(Trigger::Messages {
                count: messages,
                limit,
            });
        }
        if let Some(limit) = self.max_tokens.filter(|&l| tokens > l) {
            return Some(Trigger::Tokens { tokens, limit });
        }
        let fraction = self.window_fraction?;
        let threshold = window_threshold(fraction, context_limit);
        (tokens > threshold).then_some(Trigger::WindowFraction {
            tokens,
            threshold,
            fraction,
        })
    }
}

fn window_threshold(fraction: f64, context_limit: u32) -> u64 {
    (f64::from(context_limit) * fraction) as u64
}

/// What a summary would cover.
#[derive(Clone, Debug, PartialEq)]
pub struct SummaryPlan {
    /// Why.
    pub trigger: Trigger,
    /// `messages[..span]` are covered by the checkpoint.
    pub span: usize,
    /// Indices (within the span) of messages too large to summarize.
    pub oversized: Vec<usize>,
    /// Indices of the messages of each summarization call, in order.
    pub parts: Vec<Vec<usize>>,
    /// The most tokens of material one summarization call carries (the
    /// messages of a part, or the partial summaries of a merge).
    pub part_tokens: u64,
}

impl SummaryPlan {
    /// The plan for a summarizer that reads whole spans
    /// ([`Summarizer::reads_whole_spans`]): the span in one part, no message
    /// left out.
    ///
    /// ```
    /// use agent_host_core::compact::{SummaryPlan, Trigger};
    ///
    /// let plan = SummaryPlan {
    ///     trigger: Trigger::Forced,
    ///     span: 4,
    ///     oversized: vec![2],
    ///     parts: vec![vec![0, 1], vec![3]],
    ///     part_tokens: 100,
    /// };
    /// let whole = plan.whole();
    /// assert_eq!(whole.parts, [vec![0, 1, 2, 3]]);
    /// assert!(whole.oversized.is_empty());
    /// ```
    pub fn whole(self) -> SummaryPlan {
        SummaryPlan {
            parts: if self.span == 0 {
                Vec::new()
            } else {
                vec![(0..self.span).collect()]
            },
            oversized: Vec::new(),
            ..self
        }
    }

    /// The plan with its span moved up to the messages that packing would
    /// keep after it ([`crate::budget::pack`]: whole exchanges, newest first,
    /// while they fit in `room` tokens, and at least `min_recent` messages),
    /// so that what packing would leave out of the view is summarized
    /// instead of lost. The last [`SummaryConfig::keep_last_turns`] turns of
    /// a long agent run (files read whole, listings) can take more than the
    /// budget leaves them. The last exchange is always kept.
    ///
    /// ```
    /// use agent_host_core::compact::{SummaryConfig, SummaryPlan, Trigger};
    /// use agent_host_core::{HeuristicCounter, Message};
    ///
    /// let messages: Vec<Message> = (0..8)
    ///     .map(|i| Message::assistant("x".repeat(400)).with_id(format!("m{i}")))
    ///     .collect();
    /// let config = SummaryConfig::default();
    /// let counter = HeuristicCounter::default();
    /// let plan = SummaryPlan::of_span(&messages[..4], Trigger::Forced, 8_000, &config, &counter);
    /// // Four kept messages of about 100 tokens each, room for two.
    /// let plan = plan.fit_kept(&messages, 230, 1, 8_000, &config, &counter);
    /// assert_eq!(plan.span, 6);
    /// ```
    pub fn fit_kept(
        self,
        messages: &[Message],
        room: u64,
        min_recent: usize,
        context_limit: u32,
        config: &SummaryConfig,
        counter: &dyn TokenCounter,
    ) -> SummaryPlan {
        let refs: Vec<&Message> = messages.iter().collect();
        let mut start = refs.len();
        let mut used = 0u64;
        while start > self.span {
            let unit = unit_start(&refs, start);
            let tokens = tokens::total(&messages[unit..start], counter);
            if used + tokens > room && refs.len() - start >= min_recent.max(1) {
                break;
            }
            used += tokens;
            start = unit;
        }
        if start <= self.span {
            return self;
        }
        SummaryPlan::of_span(
            &messages[..start],
            self.trigger,
            context_limit,
            config,
            counter,
        )
    }
}

/// Why no summary is planned.
#[derive(Clone, Debug, PartialEq)]
pub enum NoPlan {
    /// No trigger fired.
    NotTriggered,
    /// A trigger fired, but there are fewer messages than the minimum.
    TooFewMessages {
        /// The trigger.
        trigger: Trigger,
        /// Messages since the last summary.
        count: usize,
    },
    /// A trigger fired, but everything is in the last turns that stay intact.
    NothingBeforeKeptTurns {
        /// The trigger.
        trigger: Trigger,
    },
    /// A trigger fired, but every message of the span is too large to summarize.
    NothingSummarizable {
        /// The trigger.
        trigger: Trigger,
    },
    /// Messages have empty or repeated ids, so a checkpoint could not say
    /// which messages it covers.
    UnusableIds {
        /// The first offending id (empty for a missing one).
        id: String,
    },
}

/// Plans a summary of `messages` (the history since the last checkpoint, no
/// system prompt or summary), whose whole history takes `total_tokens`.
/// `trigger` forces a plan with the given reason instead of checking the
/// triggers.
pub fn plan(
    messages: &[Message],
    total_tokens: u64,
    context_limit: u32,
    config: &SummaryConfig,
    counter: &dyn TokenCounter,
    forced: bool,
) -> Result<SummaryPlan, NoPlan> {
    plan_counted(
        messages,
        messages.len(),
        total_tokens,
        context_limit,
        config,
        counter,
        forced,
    )
}

/// [`plan`] where the trigger counts `since_summary` messages, which may be
/// more than `messages` holds (the pipeline only loads what can matter).
pub fn plan_counted(
    messages: &[Message],
    since_summary: usize,
    total_tokens: u64,
    context_limit: u32,
    config: &SummaryConfig,
    counter: &dyn TokenCounter,
    forced: bool,
) -> Result<SummaryPlan, NoPlan> {
    let trigger = if forced {
        Trigger::Forced
    } else {
        config
            .trigger(since_summary, total_tokens, context_limit)
            .ok_or(NoPlan::NotTriggered)?
    };
    if messages.len() < config.min_messages {
        return Err(NoPlan::TooFewMessages {
            trigger,
            count: messages.len(),
        });
    }
    let mut span = kept_turns_start(messages, config.keep_last_turns);
    if span == 0 {
        // Fewer turns than are kept: a long agent run inside one user turn.
        // Keep its last exchanges instead, so that it can still be compacted.
        span = kept_units_start(messages, config.keep_last_turns);
    }
    if span == 0 {
        return Err(NoPlan::NothingBeforeKeptTurns { trigger });
    }
    let plan = SummaryPlan::of_span(&messages[..span], trigger, context_limit, config, counter);
    if plan.parts.is_empty() {
        return Err(NoPlan::NothingSummarizable {
            trigger: plan.trigger,
        });
    }
    Ok(plan)
}

impl SummaryPlan {
    /// The plan for summarizing all of `span` (no turns kept back): its
    /// messages too large to summarize left out, the rest in parts of at
    /// most [`SummaryConfig::max_part_tokens`] (half the window unless
    /// set). A summarizer that was handed a whole span and cannot read it
    /// at once plans its parts with this.
    pub fn of_span(
        span: &[Message],
        trigger: Trigger,
        context_limit: u32,
        config: &SummaryConfig,
        counter: &dyn TokenCounter,
    ) -> SummaryPlan {
        let oversized_limit = (f64::from(context_limit) * config.oversized_fraction) as u64;
        let oversized: Vec<usize> = (0..span.len())
            .filter(|&i| u64::from(span[i].tokens(counter)) > oversized_limit)
            .collect();
        let max_part = u64::from(config.max_part_tokens.unwrap_or(context_limit / 2).max(1));
        let parts = split_parts(span, &oversized, max_part, counter);
        SummaryPlan {
            trigger,
            span: span.len(),
            parts,
            oversized,
            part_tokens: max_part,
        }
    }
}

/// The index where the last `turns` turns start (a turn starts at a user
/// message that is not synthetic); 0 when there are not more turns than that.
fn kept_turns_start(messages: &[Message], turns: usize) -> usize {
    nth_last_position(messages, turns, |m| m.role == Role::User && !m.synthetic)
}

/// The index where the last `units` exchanges (a message and the tool
/// results that follow it) start; 0 when there are not more than that.
fn kept_units_start(messages: &[Message], units: usize) -> usize {
    let refs: Vec<&Message> = messages.iter().collect();
    let mut start = refs.len();
    for _ in 0..units.max(1) {
        if start == 0 {
            return 0;
        }
        start = unit_start(&refs, start);
    }
    start
}

/// Splits a span into parts of at most `max_part` tokens, whole exchanges each,
/// leaving out the oversized messages.
fn split_parts(
    span: &[Message],
    oversized: &[usize],
    max_part: u64,
    counter: &dyn TokenCounter,
) -> Vec<Vec<usize>> {
    let refs: Vec<&Message> = span.iter().collect();
    // Units, oldest first.
    let mut units = Vec::new();
    let mut end = refs.len();
    while end > 0 {
        let start = unit_start(&refs, end);
        units.push(start..end);
        end = start;
    }
    units.reverse();
    let mut parts: Vec<Vec<usize>> = Vec::new();
    let mut current: Vec<usize> = Vec::new();
    let mut current_tokens = 0u64;
    for unit in units {
        // `oversized` is in ascending order.
        let indices: Vec<usize> = unit
            .filter(|i| oversized.binary_search(i).is_err())
            .collect();
        let tokens: u64 = indices
            .iter()
            .map(|&i| u64::from(span[i].tokens(counter)))
            .sum();
        if !current.is_empty() && current_tokens + tokens > max_part {
            parts.push(std::mem::take(&mut current));
            current_tokens = 0;
        }
        current.extend(indices);
        current_tokens += tokens;
    }
    if !current.is_empty() {
        parts.push(current);
    }
    parts
}

/// Runs the summarizer over a plan: one call per part, then merges of the
/// parts when there are several. `previous` is the summary of the checkpoint
/// being replaced, whose facts are carried forward. With `max_tokens`, the
/// call that writes the final summary is asked to fit it
/// ([`Summarizer::summarize_within`]).
///
/// A merge carries at most [`SummaryPlan::part_tokens`] of partial summaries
/// (as `counter` counts them), like a part: many parts are merged in groups,
/// and the groups' summaries merged again, so no request outgrows the window
/// however long the span.
pub fn summarize(
    messages: &[Message],
    plan: &SummaryPlan,
    previous: Option<&str>,
    summarizer: &dyn Summarizer,
    max_words: usize,
    max_tokens: Option<u32>,
    counter: &dyn TokenCounter,
) -> Result<String, SummaryError> {
    let last = |request: &SummaryRequest<'_>| match max_tokens {
        Some(tokens) => summarizer.summarize_within(request, tokens, counter),
        None => summarizer.summarize(request),
    };
    let part_messages: Vec<Vec<Message>> = plan
        .parts
        .iter()
        .map(|part| part.iter().map(|&i| messages[i].clone()).collect())
        .collect();
    match part_messages.as_slice() {
        [] => Ok(previous.unwrap_or_default().to_owned()),
        [only] => last(&SummaryRequest {
            messages: only,
            previous,
            partials: &[],
            max_words,
        }),
        many => {
            let mut partials = many
                .iter()
                .map(|part| {
                    summarizer.summarize(&SummaryRequest {
                        messages: part,
                        previous: None,
                        partials: &[],
                        max_words,
                    })
                })
                .collect::<Result<Vec<String>, SummaryError>>()?;
            loop {
                let groups = merge_groups(&partials, plan.part_tokens, counter);
                if groups.len() == 1 {
                    return last(&SummaryRequest {
                        messages: &[],
                        previous,
                        partials: &partials,
                        max_words,
                    });
                }
                let mut merged = Vec::with_capacity(groups.len());
                for group in groups {
                    match &partials[group.clone()] {
                        [one] => merged.push(one.clone()),
                        several => merged.push(summarizer.summarize(&SummaryRequest {
                            messages: &[],
                            previous: None,
                            partials: several,
                            max_words,
                        })?),
                    }
                }
                partials = merged;
            }
        }
    }
}

/// Consecutive groups of `partials` of at most `budget` tokens each; when no
/// two fit together, pairs, so that every round of merges shortens the list.
fn merge_groups(
    partials: &[String],
    budget: u64,
    counter: &dyn TokenCounter,
) -> Vec<std::ops::Range<usize>> {
    let mut groups = Vec::new();
    let mut start = 0;
    let mut tokens = 0u64;
    for (i, partial) in partials.iter().enumerate() {
        let t = u64::from(counter.count_text(partial));
        if i > start && tokens + t > budget {
            groups.push(start..i);
            start = i;
            tokens = 0;
        }
        tokens += t;
    }
    groups.push(start..partials.len());
    if groups.len() == partials.len() && partials.len() > 1 {
        return (0..partials.len())
            .step_by(2)
            .map(|i| i..(i + 2).min(partials.len()))
            .collect();
    }
    groups
}

/// The checkpoint for a summary of `messages[..plan.span]`: the boundary and
/// summary messages to append to the log, and the [`Checkpoint`] that records
/// what they cover.
pub fn checkpoint(
    messages: &[Message],
    plan: &SummaryPlan,
    summary: String,
    now: DateTime<Utc>,
) -> (Vec<Message>, Checkpoint) {
    let covered = &messages[..plan.span];
    let last_id = covered.last().map_or("empty", |m| m.id.as_str());
    let mut note = format!(
        "[Earlier conversation summarized: {} messages",
        covered.len()
    );
    if let (Some(first), Some(last)) = (
        covered.first().and_then(|m| m.timestamp),
        covered.last().and_then(|m| m.timestamp),
    ) {
        note.push_str(&format!(
            " from {} to {}",
            first.format("%Y-%m-%d %H:%M"),
            last.format("%Y-%m-%d %H:%M")
        ));
    }
    if !plan.oversized.is_empty() {
        let ids: Vec<&str> = plan
            .oversized
            .iter()
            .map(|&i| messages[i].id.as_str())
            .collect();
        note.push_str(&format!(
            "; {} too large to summarize, left out: {}",
            ids.len(),
            ids.join(", ")
        ));
    }
    note.push(']');
    let mut boundary = Message::user(note).with_id(format!("checkpoint-{last_id}-boundary"));
    let mut text = Message::assistant(summary).with_id(format!("checkpoint-{last_id}-summary"));
    for m in [&mut boundary, &mut text] {
        m.synthetic = true;
        m.summary = true;
        m.timestamp = Some(now);
    }
    let cp = Checkpoint {
        usage: None,
        boundary_id: boundary.id.clone(),
        summary_id: text.id.clone(),
        covers: covered.iter().map(|m| m.id.clone()).collect(),
        created: now,
    };
    (vec![boundary, text], cp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens::HeuristicCounter;
    use chrono::TimeZone;

    /// `turns` turns of: user, assistant with a call, its result, assistant text.
    fn turns(turns: usize, result_chars: usize) -> Vec<Message> {
        let mut out = Vec::new();
        for t in 0..turns {
            out.push(Message::user(format!("question {t}")).with_id(format!("u{t}")));
            let mut call = Message::assistant("").with_id(format!("a{t}"));
            call.push_tool_call(format!("c{t}"), "read", "{}");
            out.push(call);
            out.push(
                Message::tool_result(format!("c{t}"), "read", "x".repeat(result_chars))
                    .with_id(format!("r{t}")),
            );
            out.push(Message::assistant(format!("answer {t}")).with_id(format!("b{t}")));
        }
        out
    }

    struct Echo;
    impl Summarizer for Echo {
        fn summarize(&self, r: &SummaryRequest<'_>) -> Result<String, SummaryError> {
            if r.messages.is_empty() {
                return Ok(format!("merged[{}]", r.partials.join("|")));
            }
            Ok(format!(
                "{}..{}",
                r.messages[0].id,
                r.messages.last().unwrap().id
            ))
        }
    }

    #[test]
    fn triggers_fire_on_messages_tokens_and_window_share() {
        let c = SummaryConfig::default();
        assert_eq!(c.trigger(30, 0, 200_000), None);
        assert_eq!(
            c.trigger(31, 0, 200_000),
            Some(Trigger::Messages {
                count: 31,
                limit: 30
            })
        );
        assert_eq!(
            c.trigger(5, 128_001, 1_000_000),
            Some(Trigger::Tokens {
                tokens: 128_001,
                limit: 128_000
            })
        );
        assert!(matches!(
            c.trigger(5, 81_000, 100_000),
            Some(Trigger::WindowFraction {
                threshold: 80_000,
                ..
            })
        ));
        let d = c.distances(15, 40_000, 100_000);
        assert_eq!(
            d.iter()
                .map(|t| t.percent.round() as u32)
                .collect::<Vec<_>>(),
            [50, 31, 50]
        );
    }

    /// A user message, then `exchanges` calls each with a result of
    /// `result_chars` characters (a long agent run inside one user turn).
    fn agent_run(exchanges: usize, result_chars: usize) -> Vec<Message> {
        let mut out = vec![Message::user("fix it").with_id("u0")];
        for t in 0..exchanges {
            let mut call = Message::assistant("").with_id(format!("a{t}"));
            call.push_tool_call(format!("c{t}"), "read", "{}");
            out.push(call);
            out.push(
                Message::tool_result(format!("c{t}"), "read", "x".repeat(result_chars))
                    .with_id(format!("r{t}")),
            );
        }
        out
    }

    // Regression: the kept exchanges of a long agent run (the Codex CLI
    // trajectory of `extractive_styles`) took more than the budget left
    // them, and packing dropped the oldest with no summary of it.
    #[test]
    fn fit_kept_summarizes_the_kept_exchanges_packing_would_drop() {
        let counter = HeuristicCounter::default();
        let config = SummaryConfig::default();
        let run = agent_run(8, 400);
        let plan = plan(&run, 10_000, 4_000, &config, &counter, true).unwrap();
        // The last four exchanges are kept back.
        assert_eq!(plan.span, 9);
        let two = tokens::total(&run[13..], &counter);
        let wider = plan
            .clone()
            .fit_kept(&run, two, 1, 4_000, &config, &counter);
        // Room for two exchanges: the two before them are summarized, whole.
        assert_eq!(wider.span, 13);
        assert_eq!(wider.parts.concat(), (0..13).collect::<Vec<_>>());
        assert_eq!(wider.trigger, plan.trigger);
        // One token short of two exchanges: one is kept.
        let one_short = plan
            .clone()
            .fit_kept(&run, two - 1, 1, 4_000, &config, &counter);
        assert_eq!(one_short.span, 15);
    }

    #[test]
    fn fit_kept_leaves_a_plan_whose_kept_messages_fit() {
        let counter = HeuristicCounter::default();
        let config = SummaryConfig::default();
        let run = agent_run(8, 400);
        let plan = plan(&run, 10_000, 4_000, &config, &counter, true).unwrap();
        let all = tokens::total(&run[plan.span..], &counter);
        assert_eq!(
            plan.clone()
                .fit_kept(&run, all, 1, 4_000, &config, &counter),
            plan
        );
    }

    #[test]
    fn fit_kept_keeps_the_recent_messages_packing_always_keeps() {
        let counter = HeuristicCounter::default();
        let config = SummaryConfig::default();
        let run = agent_run(8, 400);
        let plan = plan(&run, 10_000, 4_000, &config, &counter, true).unwrap();
        // No room at all: packing still keeps `min_recent_messages`, in
        // whole exchanges, and always the last exchange.
        let fit = |min_recent| {
            plan.clone()
                .fit_kept(&run, 0, min_recent, 4_000, &config, &counter)
                .span
        };
        assert_eq!(fit(3), 13);
        assert_eq!(fit(2), 15);
        assert_eq!(fit(0), 15);
        // Never fewer than the plan kept.
        assert_eq!(fit(100), 9);
    }

    #[test]
    fn the_span_keeps_the_last_turns_and_never_splits_an_exchange() {
        let counter = HeuristicCounter::default();
        let history = turns(10, 10);
        let plan = plan(
            &history,
            0,
            100_000,
            &SummaryConfig::default(),
            &counter,
            false,
        )
        .unwrap();
        assert!(matches!(plan.trigger, Trigger::Messages { count: 40, .. }));
        // The last 4 turns start at u6, index 24.
        assert_eq!(plan.span, 24);
        assert_eq!(history[plan.span].id, "u6");
        assert_eq!(plan.parts, [(0..24).collect::<Vec<_>>()]);
    }

    #[test]
    fn no_plan_below_the_minimum_or_without_older_turns() {
        let counter = HeuristicCounter::default();
        let config = SummaryConfig::default();
        let short = turns(1, 10);
        assert!(matches!(
            plan(&short, 0, 1_000, &config, &counter, true),
            Err(NoPlan::TooFewMessages { count: 4, .. })
        ));
        // One turn of four exchanges (7 messages): nothing older than what is kept.
        let mut three = turns(1, 10);
        let mut two_calls = Message::assistant("").with_id("x");
        two_calls.push_tool_call("x1", "read", "{}");
        two_calls.push_tool_call("x2", "read", "{}");
        three.push(two_calls);
        three.push(Message::tool_result("x1", "read", "1").with_id("x1r"));
        three.push(Message::tool_result("x2", "read", "2").with_id("x2r"));
        assert!(matches!(
            plan(&three, 0, 1_000, &config, &counter, true),
            Err(NoPlan::NothingBeforeKeptTurns { .. })
        ));
        let four = turns(4, 10);
        assert_eq!(
            plan(&four, 0, 1_000_000, &config, &counter, false),
            Err(NoPlan::NotTriggered)
        );
    }

    #[test]
    fn a_long_run_inside_one_turn_keeps_its_last_exchanges() {
        // A single user request followed by 20 tool exchanges (a Claude Code
        // agent run): regression test for such runs never being compacted.
        let counter = HeuristicCounter::default();
        let mut run = vec![Message::user("refactor everything").with_id("u")];
        for i in 0..20 {
            let mut call = Message::assistant("").with_id(format!("a{i}"));
            call.push_tool_call(format!("c{i}"), "edit", "{}");
            run.push(call);
            run.push(Message::tool_result(format!("c{i}"), "edit", "ok").with_id(format!("r{i}")));
        }
        let plan = plan(&run, 0, 100_000, &SummaryConfig::default(), &counter, true).unwrap();
        assert_eq!(run[plan.span].id, "a16");
        assert_eq!(run.len() - plan.span, 8);
    }

    #[test]
    fn oversized_messages_are_left_out_and_named() {
        let counter = HeuristicCounter::default();
        let mut history = turns(6, 10);
        history[2] = Message::tool_result("c0", "read", "x".repeat(40_000)).with_id("huge");
        let plan = plan(
            &history,
            0,
            10_000,
            &SummaryConfig::default(),
            &counter,
            true,
        )
        .unwrap();
        assert_eq!(plan.oversized, [2]);
        assert!(plan.parts.iter().all(|p| !p.contains(&2)));
        let (pair, cp) = checkpoint(
            &history,
            &plan,
            "s".into(),
            Utc.timestamp_opt(0, 0).unwrap(),
        );
        assert!(
            pair[0]
                .content
                .contains("too large to summarize, left out: huge"),
            "{}",
            pair[0].content
        );
        assert!(cp.covers.contains(&"huge".to_owned()));
    }

    #[test]
    fn a_large_span_is_split_into_parts_and_merged() {
        let counter = HeuristicCounter::default();
        let history = turns(8, 2_000); // ~500 tokens a result
        let config = SummaryConfig {
            max_part_tokens: Some(1_200),
            ..SummaryConfig::default()
        };
        let plan = plan(&history, 0, 100_000, &config, &counter, true).unwrap();
        assert!(plan.parts.len() > 1);
        // Parts cover the span in order, and never split a call from its result.
        let flat: Vec<usize> = plan.parts.concat();
        assert_eq!(flat, (0..plan.span).collect::<Vec<_>>());
        for part in &plan.parts {
            assert_ne!(history[part[0]].role, Role::Tool);
        }
        let summary = summarize(&history, &plan, None, &Echo, 600, None, &counter).unwrap();
        assert!(summary.starts_with("merged[u0.."), "{summary}");
    }

    /// Answers each part with `words` words and records the material of
    /// every merge it is asked for.
    struct Wordy {
        words: usize,
        merges: std::sync::Mutex<Vec<usize>>,
    }
    impl Summarizer for Wordy {
        fn summarize(&self, r: &SummaryRequest<'_>) -> Result<String, SummaryError> {
            if r.messages.is_empty() {
                let material: String = r.partials.concat();
                let tokens = HeuristicCounter::default().count_text(&material) as usize;
                self.merges.lock().unwrap().push(tokens);
            }
            Ok("word ".repeat(self.words))
        }
    }

    #[test]
    fn many_long_partials_are_merged_in_rounds_that_each_fit_a_part() {
        let counter = HeuristicCounter::default();
        let history = turns(40, 2_000);
        let config = SummaryConfig {
            max_part_tokens: Some(1_200),
            ..SummaryConfig::default()
        };
        let plan = plan(&history, 0, 100_000, &config, &counter, true).unwrap();
        assert!(plan.parts.len() > 10, "{}", plan.parts.len());
        // Each partial is ~500 tokens: one merge of all would carry ~10x the
        // budget of a part.
        let wordy = Wordy {
            words: 400,
            merges: std::sync::Mutex::new(Vec::new()),
        };
        summarize(&history, &plan, None, &wordy, 600, None, &counter).unwrap();
        let merges = wordy.merges.lock().unwrap();
        assert!(merges.len() > 2, "{merges:?}");
        assert!(
            merges.iter().all(|&t| t as u64 <= plan.part_tokens),
            "a merge carried more than {}: {merges:?}",
            plan.part_tokens
        );

        // Partials each over half the budget still converge, in pairs.
        let huge = Wordy {
            words: 4_000,
            merges: std::sync::Mutex::new(Vec::new()),
        };
        summarize(&history, &plan, None, &huge, 600, None, &counter).unwrap();
        assert!(huge.merges.lock().unwrap().len() >= plan.parts.len() - 1);
    }

    #[test]
    fn the_checkpoint_pair_is_flagged_and_records_the_span() {
        let counter = HeuristicCounter::default();
        let history = turns(10, 10);
        let plan = plan(
            &history,
            0,
            100_000,
            &SummaryConfig::default(),
            &counter,
            false,
        )
        .unwrap();
        let text = summarize(&history, &plan, Some("before"), &Echo, 600, None, &counter).unwrap();
        assert_eq!(text, "u0..b5");
        let now = Utc.with_ymd_and_hms(2025, 1, 1, 0, 0, 0).unwrap();
        let (pair, cp) = checkpoint(&history, &plan, text, now);
        assert_eq!((pair[0].role, pair[1].role), (Role::User, Role::Assistant));
        assert!(
            pair.iter()
                .all(|m| m.summary && m.synthetic && m.timestamp == Some(now))
        );
        assert_eq!(cp.covers.len(), 24);
        assert_eq!(cp.covers.last().unwrap(), "b5");
        assert_eq!(
            (cp.boundary_id.as_str(), cp.summary_id.as_str()),
            ("checkpoint-b5-boundary", "checkpoint-b5-summary")
        );
    }
}
