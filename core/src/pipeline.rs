//! The compaction pipeline: from the log to the view sent to the model.
//!
//! The stages run in order, each switchable in [`PipelineConfig`]:
//!
//! 1. **repair** of tool-call pairing ([`crate::repair`]);
//! 2. **doom-loop** warnings ([`crate::doom_loop`]);
//! 3. **pruning** of large tool results ([`crate::prune`]);
//! 4. **summarization** when a trigger fires ([`crate::compact`]): the new
//!    checkpoint pair is returned in [`Compaction::append`] for the caller to
//!    append to the log, and the view continues after it; with a local
//!    summarizer ([`crate::summarize::Summarizer::is_local`]), the kept
//!    messages that would not fit beside the summary are summarized with the
//!    rest;
//! 5. **budget packing** ([`crate::budget`]);
//! 6. **emergency truncation** when the view still does not fit
//!    ([`crate::truncate`]).
//!
//! The result is validated ([`crate::validate`]); the report says what every
//! stage did. The pipeline never edits or shortens the log: it reads it and
//! returns a view plus what to append. It is pure and deterministic: the time
//! comes in as an argument.

use std::borrow::{Borrow, Cow};

use chrono::{DateTime, Utc};

use crate::budget::{BudgetConfig, LogSplit, Tail, ViewTokens, pack, split_log};
use crate::compact::{self, NoPlan, SummaryConfig, SummaryPlan, Trigger, TriggerDistance};
use crate::doom_loop::{self, DoomLoop, DoomLoopConfig};
use crate::message::{Message, Role};
use crate::prune::{self, PruneConfig, Pruned};
use crate::repair::{self, Repair};
use crate::session::Checkpoint;
use crate::summarize::{Summarizer, SummaryError};
use crate::tokens::{self, TokenCounter};
use crate::truncate::{self, TruncateConfig, Truncation};
use crate::validate::{self, Violation};

/// Which stages run, and with what settings.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PipelineConfig {
    /// The context budget.
    pub budget: BudgetConfig,
    /// Run repair (on by default; repair is what makes the view sendable).
    pub repair: bool,
    /// Doom-loop detection, or `None` to skip it.
    pub doom_loop: Option<DoomLoopConfig>,
    /// Pruning of large tool results, or `None` to skip it.
    pub prune: Option<PruneConfig>,
    /// Summarization, or `None` to skip it.
    pub summary: Option<SummaryConfig>,
    /// Emergency truncation, or `None` to skip it.
    pub truncate: Option<TruncateConfig>,
    /// Use the aggressive pruning thresholds (after a context-length error).
    pub aggressive: bool,
    /// Summarize now, whatever the triggers say (`/summarize`).
    pub force_summary: bool,
}

impl Default for PipelineConfig {
    fn default() -> Self {
        PipelineConfig {
            budget: BudgetConfig::default(),
            repair: true,
            doom_loop: Some(DoomLoopConfig::default()),
            prune: Some(PruneConfig::default()),
            summary: Some(SummaryConfig::default()),
            truncate: Some(TruncateConfig::default()),
            aggressive: false,
            force_summary: false,
        }
    }
}

impl PipelineConfig {
    /// Only repair and budget packing: what `--no-compact` means.
    pub fn repair_only(budget: BudgetConfig) -> Self {
        PipelineConfig {
            budget,
            repair: true,
            doom_loop: None,
            prune: None,
            summary: None,
            truncate: None,
            aggressive: false,
            force_summary: false,
        }
    }
}

/// What happened at the summarization stage.
#[derive(Clone, Debug, PartialEq)]
pub enum SummaryOutcome {
    /// The stage is off, or no summarizer was given.
    Skipped,
    /// No summary was needed or possible, and why.
    NotDone(NoPlan),
    /// A checkpoint was made.
    Summarized {
        /// What fired it.
        trigger: Trigger,
        /// How many messages it covers.
        covered: usize,
        /// How many summarization calls made it (more than one: multi-part).
        parts: usize,
        /// Messages too large to summarize, left out of it.
        oversized: Vec<String>,
    },
    /// The summarizer failed: the full history was kept.
    Failed {
        /// What fired it.
        trigger: Trigger,
        /// Why it failed.
        error: String,
    },
}

/// How full the context is, and how close each summarization trigger is:
/// what `/context` shows.
#[derive(Clone, Debug, PartialEq)]
pub struct ContextUsage {
    /// The model's window.
    pub context_limit: u32,
    /// Tokens kept for the answer.
    pub response_reserve: u32,
    /// Tokens of the tool definitions.
    pub tool_definitions: u32,
    /// Tokens per part of the view.
    pub view: ViewTokens,
    /// Messages in the view.
    pub messages_in_view: usize,
    /// Messages since the last summary (before this compaction).
    pub messages_since_summary: usize,
    /// Tokens of the history since the last summary, with system prompt and
    /// summary (before this compaction).
    pub tokens_since_summary: u64,
    /// How close each trigger is.
    pub triggers: Vec<TriggerDistance>,
}

/// What every stage did.
#[derive(Clone, Debug, PartialEq)]
pub struct PipelineReport {
    /// Repairs, in order.
    pub repairs: Vec<Repair>,
    /// Doom loops warned about.
    pub doom_loops: Vec<DoomLoop>,
    /// Pruned tool results.
    pub pruned: Vec<Pruned>,
    /// The summarization stage.
    pub summary: SummaryOutcome,
    /// Whether the summary was cut in the view to its share of the budget.
    pub summary_cut: bool,
    /// Emergency truncation steps.
    pub truncations: Vec<Truncation>,
    /// Context use.
    pub usage: ContextUsage,
    /// Provider rules the view still breaks (empty unless repair is off).
    pub violations: Vec<Violation>,
    /// How long each step took, in order; empty unless the caller gave a
    /// clock ([`compact_timed`]).
    pub step_times: Vec<StepTime>,
}

/// How long one step of the pipeline took.
#[derive(Clone, Debug, PartialEq)]
pub struct StepTime {
    /// `read` (splitting the log at its checkpoint and reading the messages
    /// a view can reach), `repair`, `doom_loops`, `prune`, `summary`,
    /// `pack`, `view` (truncation, counting, validation).
    pub step: &'static str,
    /// Milliseconds.
    pub ms: f64,
}

/// Marks the steps of a run against a caller's clock (core reads none).
struct Steps<'a> {
    clock: Option<&'a dyn Fn() -> f64>,
    last: f64,
    times: Vec<StepTime>,
}

impl<'a> Steps<'a> {
    fn start(clock: Option<&'a dyn Fn() -> f64>) -> Self {
        Steps {
            clock,
            last: clock.map_or(0.0, |c| c()),
            times: Vec::new(),
        }
    }

    /// Ends `step` now.
    fn mark(&mut self, step: &'static str) {
        if let Some(clock) = self.clock {
            let now = clock();
            self.times.push(StepTime {
                step,
                ms: (now - self.last).max(0.0),
            });
            self.last = now;
        }
    }
}

/// The outcome of compaction.
#[derive(Clone, Debug, PartialEq)]
pub struct Compaction {
    /// The messages to send, in order.
    pub view: Vec<Message>,
    /// New entries to append to the log (a checkpoint pair), possibly empty.
    pub append: Vec<Message>,
    /// The checkpoint to record in the session header, if one was made.
    pub checkpoint: Option<Checkpoint>,
    /// What every stage did.
    pub report: PipelineReport,
}

/// Runs the pipeline over `log`, whose latest checkpoint is `checkpoint`.
///
/// `summarizer` may be `None` (no summaries). If it fails, the full history is
/// kept and the failure is in the report.
pub fn compact(
    log: &[Message],
    checkpoint: Option<&Checkpoint>,
    config: &PipelineConfig,
    counter: &dyn TokenCounter,
    summarizer: Option<&dyn Summarizer>,
    now: DateTime<Utc>,
) -> Compaction {
    compact_timed(log, checkpoint, config, counter, summarizer, now, None)
}

/// [`compact()`], timing each step with `clock` when one is given
/// (milliseconds from any start, never going back): the report's
/// [`step_times`](PipelineReport::step_times) say where the time went.
/// Core reads no clock of its own; the caller's may be `Instant`.
pub fn compact_timed(
    log: &[Message],
    checkpoint: Option<&Checkpoint>,
    config: &PipelineConfig,
    counter: &dyn TokenCounter,
    summarizer: Option<&dyn Summarizer>,
    now: DateTime<Utc>,
    clock: Option<&dyn Fn() -> f64>,
) -> Compaction {
    Run::whole(log, checkpoint, config, counter, clock)
        .compact(summarizer, now, true)
        .into_compaction()
        .expect("a view is made when asked for")
}

/// [`compact()`] of a log the caller no longer needs: the messages that
/// reach the view unchanged move into it rather than being copied, which
/// saves copying (and later freeing) most of a history that fits.
///
/// ```
/// use agent_host_core::budget::BudgetConfig;
/// use agent_host_core::pipeline::{compact, compact_owned, PipelineConfig};
/// use agent_host_core::{HeuristicCounter, Message};
///
/// let log = vec![Message::system("Be brief."), Message::user("hi"), Message::assistant("hello")];
/// let config = PipelineConfig::repair_only(BudgetConfig::default());
/// let (counter, now) = (HeuristicCounter::default(), chrono::DateTime::UNIX_EPOCH);
/// let borrowed = compact(&log, None, &config, &counter, None, now);
/// assert_eq!(compact_owned(log, None, &config, &counter, None, now), borrowed);
/// ```
pub fn compact_owned(
    mut log: Vec<Message>,
    checkpoint: Option<&Checkpoint>,
    config: &PipelineConfig,
    counter: &dyn TokenCounter,
    summarizer: Option<&dyn Summarizer>,
    now: DateTime<Utc>,
) -> Compaction {
    let outcome =
        Run::whole(&log, checkpoint, config, counter, None).compact(summarizer, now, false);
    let view = match (outcome.view, outcome.unmade) {
        (Some(view), _) => view,
        (None, Some(unmade)) => {
            let mut view = unmade.system;
            view.reserve(unmade.summary.len() + log.len() - unmade.from);
            view.extend(unmade.summary);
            view.extend(log.drain(unmade.from..));
            view
        }
        (None, None) => unreachable!("a view not made is described"),
    };
    Compaction {
        view,
        append: outcome.append,
        checkpoint: outcome.checkpoint,
        report: outcome.report,
    }
}

/// A pipeline run over a log of which `hidden` messages since the
/// checkpoint are not given: they lie before the messages `log` holds after
/// its system prompt and checkpoint pair ([`crate::window::LogWindow`] keeps
/// such a log). They only count towards the number of messages since the
/// checkpoint, which is right when the pipeline stops reading before them
/// (the caller makes sure of it) and no summary is made (it would cover
/// them).
pub(crate) struct Run<'a> {
    pub log: &'a [Message],
    pub hidden: usize,
    pub checkpoint: Option<&'a Checkpoint>,
    pub config: &'a PipelineConfig,
    pub counter: &'a dyn TokenCounter,
    /// Times the steps when given.
    pub clock: Option<&'a dyn Fn() -> f64>,
}

/// What a [`Run`] made: a compaction whose view is `None` when it was not
/// asked for and could be counted without making it; `unmade` then says
/// what it would be.
pub(crate) struct Outcome {
    pub view: Option<Vec<Message>>,
    pub unmade: Option<UnmadeView>,
    pub append: Vec<Message>,
    pub checkpoint: Option<Checkpoint>,
    pub report: PipelineReport,
}

/// A view a [`Run`] counted without making it: its system prompt and
/// checkpoint pair as made, then the log's messages from `from` on, as they
/// are.
pub(crate) struct UnmadeView {
    pub system: Vec<Message>,
    pub summary: Vec<Message>,
    pub from: usize,
}

impl Outcome {
    /// The compaction, when the view was made.
    pub fn into_compaction(self) -> Option<Compaction> {
        Some(Compaction {
            view: self.view?,
            append: self.append,
            checkpoint: self.checkpoint,
            report: self.report,
        })
    }
}

impl<'a> Run<'a> {
    /// A run over the whole log (none of it hidden).
    fn whole(
        log: &'a [Message],
        checkpoint: Option<&'a Checkpoint>,
        config: &'a PipelineConfig,
        counter: &'a dyn TokenCounter,
        clock: Option<&'a dyn Fn() -> f64>,
    ) -> Self {
        Run {
            log,
            hidden: 0,
            checkpoint,
            config,
            counter,
            clock,
        }
    }

    /// [`compact`]; the view made only when `want_view` or it cannot be
    /// counted from the log (the stages changed it, or it must be
    /// truncated).
    pub fn compact(
        &self,
        summarizer: Option<&dyn Summarizer>,
        now: DateTime<Utc>,
        want_view: bool,
    ) -> Outcome {
        let Run {
            log,
            hidden,
            checkpoint,
            config,
            counter,
            clock,
        } = *self;
        let mut steps = Steps::start(clock);
        let split = split_log(log, checkpoint);
        let mut system: Vec<Message> = log[..split.system_end].to_vec();
        // The system prompt is sent too: what its messages may not carry (a
        // stray `tool_call_id`, reasoning, tool calls) goes as elsewhere.
        let mut system_repairs = Vec::new();
        if config.repair && !repair::is_repaired(&system) {
            (system, system_repairs) = repair::repair(system);
        }
        let mut summary: Vec<Message> = split
            .summary
            .map_or_else(Vec::new, |(b, s)| vec![log[b].clone(), log[s].clone()]);
        let tokens_of = |ms: &[Message]| tokens::total(ms, counter);
        let fixed_tokens = tokens_of(&system) + tokens_of(&summary);
        let available = u64::from(config.budget.available().max(1));

        // The messages since the checkpoint, read from the end only as far as a
        // threshold can depend on: a turn costs what the new messages cost, not
        // what the whole log costs.
        let tail = history_tail(log, &split, config, counter);
        debug_assert!(
            hidden == 0 || (tail.stopped && summarizer.is_none()),
            "hidden messages the pipeline would have read"
        );
        let messages_since_summary = tail.since_checkpoint + hidden;
        let tokens_since_summary = fixed_tokens + tail.tokens;
        // A summary needs every message since the checkpoint; otherwise only the
        // window can reach the view.
        let summarizing = summarizer.is_some()
            && config.summary.as_ref().is_some_and(|sc| {
                config.force_summary
                    || sc
                        .trigger(
                            messages_since_summary,
                            tokens_since_summary,
                            config.budget.context_limit,
                        )
                        .is_some()
            });
        let from = if summarizing { split.start } else { tail.start };
        let usage = tokens_since_summary as f64 / available as f64;
        let prune_config = config.prune.as_ref().map(|c| {
            if config.aggressive {
                c.aggressive()
            } else {
                c.clone()
            }
        });
        // With no summary to make, history that no stage would change is not
        // copied: the view takes the messages it packs straight from the log.
        let read = &log[from..];
        let unchanged = (summarizer.is_none() || config.summary.is_none())
            && read
                .iter()
                .enumerate()
                .all(|(k, m)| split.is_candidate(from + k, m))
            && (!config.repair || repair::is_repaired(read))
            && config
                .doom_loop
                .as_ref()
                .is_none_or(|c| doom_loop::detect(read, c).is_empty())
            && prune_config
                .as_ref()
                .is_none_or(|c| !prune::would_prune(read, usage, c));

        let mut repairs = if unchanged {
            std::mem::take(&mut system_repairs)
        } else {
            Vec::new()
        };
        let mut doom_loops = Vec::new();
        let mut pruned = Vec::new();
        let mut append = Vec::new();
        let mut new_checkpoint = None;
        let mut summary_outcome = SummaryOutcome::Skipped;
        steps.mark("read");
        let (messages, loaded): (Cow<'_, [Message]>, usize) = if unchanged {
            (Cow::Borrowed(read), read.len())
        } else {
            let mut messages: Vec<Message> = Vec::with_capacity(read.len());
            messages.extend(
                (from..log.len())
                    .filter(|&i| split.is_candidate(i, &log[i]))
                    .map(|i| log[i].clone()),
            );
            let loaded = messages.len();
            if config.repair {
                let repaired;
                (repaired, repairs) = repair::repair(messages);
                messages = repaired;
            }
            repairs.splice(0..0, system_repairs.drain(..));
            steps.mark("repair");
            if let Some(c) = &config.doom_loop {
                doom_loops = doom_loop::inject_warnings(&mut messages, c);
            }
            steps.mark("doom_loops");
            if let Some(c) = &prune_config {
                pruned = prune::prune(&mut messages, usage, c);
            }
            steps.mark("prune");
            summary_outcome = match (&config.summary, summarizer) {
                (Some(sc), Some(summarizer)) => {
                    let total = fixed_tokens + tokens_of(&messages);
                    let limit = config.budget.context_limit;
                    let forced = config.force_summary;
                    let planned = compact::plan_counted(
                        &messages,
                        messages_since_summary,
                        total,
                        limit,
                        sc,
                        counter,
                        forced,
                    )
                    .or_else(|reason| {
                        overflow_plan(reason, &messages, total, &config.budget, sc, counter)
                    })
                    .and_then(|plan| match unusable_id(&messages) {
                        Some(id) => Err(NoPlan::UnusableIds { id }),
                        None if summarizer.reads_whole_spans() => Ok(plan.whole()),
                        None => Ok(plan),
                    })
                    .and_then(|plan| {
                        let covers = covered_log_ids(log, &messages, plan.span);
                        if covers.is_empty() {
                            // Only messages a stage made: nothing of the log to cover.
                            return Err(NoPlan::NothingSummarizable {
                                trigger: plan.trigger,
                            });
                        }
                        Ok((plan, covers))
                    });
                    match planned {
                        Err(reason) => SummaryOutcome::NotDone(reason),
                        Ok((mut plan, mut covers)) => {
                            let previous = summary.last().map(|m| m.content.as_str());
                            let room = summary_room(&system, &config.budget, counter);
                            let summarize_plan = |plan: &SummaryPlan| {
                                compact::summarize(
                                    &messages,
                                    plan,
                                    previous,
                                    summarizer,
                                    sc.max_words,
                                    Some(room),
                                    counter,
                                )
                                .and_then(|text| {
                                    not_longer(text, &messages[..plan.span], previous, counter)
                                })
                            };
                            let mut summarized = summarize_plan(&plan);
                            // The kept turns and the new summary can take more
                            // than the budget (a long agent run's last files
                            // and listings): packing would leave the oldest
                            // kept messages out of the view with nothing said
                            // of them, so the summary takes them in instead.
                            // Its text grows with them; a few rounds settle it.
                            // Only a local summarizer is asked again: a
                            // model's call costs money and time.
                            let rounds = if summarizer.is_local() { FIT_ROUNDS } else { 0 };
                            for _ in 0..rounds {
                                let Ok(text) = &summarized else { break };
                                let (pair, _) =
                                    compact::checkpoint(&messages, &plan, text.clone(), now);
                                let kept = kept_room(&system, &pair, &config.budget, counter);
                                let wider = plan.clone().fit_kept(
                                    &messages,
                                    kept,
                                    config.budget.min_recent_messages,
                                    config.budget.context_limit,
                                    sc,
                                    counter,
                                );
                                if wider.span == plan.span {
                                    break;
                                }
                                plan = if summarizer.reads_whole_spans() {
                                    wider.whole()
                                } else {
                                    wider
                                };
                                covers = covered_log_ids(log, &messages, plan.span);
                                summarized = summarize_plan(&plan);
                            }
                            match summarized {
                                Err(e) => SummaryOutcome::Failed {
                                    trigger: plan.trigger,
                                    error: e.to_string(),
                                },
                                Ok(text) => {
                                    let (pair, mut cp) =
                                        compact::checkpoint(&messages, &plan, text, now);
                                    cp.covers = covers;
                                    let outcome = SummaryOutcome::Summarized {
                                        trigger: plan.trigger.clone(),
                                        covered: cp.covers.len(),
                                        parts: plan.parts.len(),
                                        oversized: plan
                                            .oversized
                                            .iter()
                                            .map(|&i| messages[i].id.clone())
                                            .collect(),
                                    };
                                    messages.drain(..plan.span);
                                    summary = pair.clone();
                                    append = pair;
                                    new_checkpoint = Some(cp);
                                    outcome
                                }
                            }
                        }
                    }
                }
                _ => SummaryOutcome::Skipped,
            };
            steps.mark("summary");
            (Cow::Owned(messages), loaded)
        };

        // The summary takes at most its share of what the system prompt leaves.
        let summary_cut = cap_summary(&mut summary, &system, &config.budget, counter);

        // Pack newest to oldest; what does not fit leaves the view (not the log).
        let packed_out = {
            let system_refs: Vec<&Message> = system.iter().collect();
            let summary_refs: Vec<&Message> = summary.iter().collect();
            let candidate_refs: Vec<&Message> = messages.iter().collect();
            pack(
                system_refs,
                summary_refs,
                &candidate_refs,
                &config.budget,
                counter,
            )
            .tokens
            .left_out
        };
        steps.mark("pack");
        // Messages before the window never reached the view either.
        let left_out = packed_out
            + if summarizing {
                0
            } else {
                messages_since_summary.saturating_sub(loaded)
            };
        // Counted from the log when no view is asked for and none needs cutting
        // down: the view is then the log's messages as they are.
        let counted: Option<Vec<&Message>> = match &messages {
            Cow::Borrowed(read) if !want_view => {
                let refs: Vec<&Message> = system
                    .iter()
                    .chain(&summary)
                    .chain(&read[packed_out..])
                    .collect();
                let total: u64 = refs.iter().map(|m| u64::from(m.tokens(counter))).sum();
                let fits =
                    config.truncate.is_none() || total <= u64::from(config.budget.available());
                fits.then_some(refs)
            }
            _ => None,
        };
        let mut unmade = None;
        let (view, truncations, view_tokens, messages_in_view, violations) = match counted {
            Some(refs) => {
                let counted = (
                    None,
                    Vec::new(),
                    view_tokens(&refs, &config.budget, counter, left_out),
                    refs.len(),
                    validate::validate_refs(&refs),
                );
                unmade = Some(UnmadeView {
                    system,
                    summary,
                    from: from + packed_out,
                });
                counted
            }
            None => {
                let (system_len, summary_len) = (system.len(), summary.len());
                let mut view = system;
                view.reserve(summary.len() + messages.len() - packed_out);
                view.append(&mut summary);
                match messages {
                    // The packed messages move once, straight into the view.
                    Cow::Owned(mut messages) => view.extend(messages.drain(packed_out..)),
                    Cow::Borrowed(read) => view.extend_from_slice(&read[packed_out..]),
                }
                let truncations = match &config.truncate {
                    Some(c) => {
                        let protected = config
                            .budget
                            .min_recent_messages
                            .min(view.len() - system_len - summary_len);
                        truncate::truncate(
                            &mut view,
                            config.budget.available(),
                            protected,
                            c,
                            counter,
                        )
                    }
                    None => Vec::new(),
                };
                let tokens = view_tokens(&view, &config.budget, counter, left_out);
                let violations = validate::validate(&view);
                let len = view.len();
                (Some(view), truncations, tokens, len, violations)
            }
        };
        steps.mark("view");
        let usage = ContextUsage {
            context_limit: config.budget.context_limit,
            response_reserve: config.budget.response_reserve,
            tool_definitions: config.budget.tool_definition_tokens,
            view: view_tokens,
            messages_in_view,
            messages_since_summary,
            tokens_since_summary,
            triggers: config.summary.as_ref().map_or_else(Vec::new, |sc| {
                sc.distances(
                    messages_since_summary,
                    tokens_since_summary,
                    config.budget.context_limit,
                )
            }),
        };
        Outcome {
            view,
            unmade,
            append,
            checkpoint: new_checkpoint,
            report: PipelineReport {
                repairs,
                doom_loops,
                pruned,
                summary: summary_outcome,
                summary_cut,
                truncations,
                usage,
                violations,
                step_times: steps.times,
            },
        }
    }
}

/// Tokens a boundary note takes at most, as `checkpoint` writes it, beyond
/// the message overhead (its count, dates and left-out ids aside).
const BOUNDARY_TOKENS: u64 = 48;

/// When no trigger fired but the history is larger than the budget, a plan
/// anyway: packing would leave the oldest messages out of the view, and
/// without a summary what they said would be gone from it. (The window
/// trigger compares the history with a share of the whole window, 80% by
/// default, while the budget is the window less the response reserve: an
/// 8,000-token window with a 2,000-token reserve left messages out of
/// histories of 6,000 to 6,400 tokens with no summary.) The plan's trigger is
/// the window share the budget is. Only with the window trigger on.
fn overflow_plan(
    reason: NoPlan,
    messages: &[Message],
    total: u64,
    budget: &BudgetConfig,
    config: &SummaryConfig,
    counter: &dyn TokenCounter,
) -> Result<SummaryPlan, NoPlan> {
    let available = u64::from(budget.available());
    if reason != NoPlan::NotTriggered || config.window_fraction.is_none() || total <= available {
        return Err(reason);
    }
    let limit = budget.context_limit;
    let trigger = Trigger::WindowFraction {
        tokens: total,
        threshold: available,
        fraction: available as f64 / f64::from(limit.max(1)),
    };
    let retag = |reason: NoPlan| match reason {
        NoPlan::TooFewMessages { count, .. } => NoPlan::TooFewMessages {
            trigger: trigger.clone(),
            count,
        },
        NoPlan::NothingBeforeKeptTurns { .. } => NoPlan::NothingBeforeKeptTurns {
            trigger: trigger.clone(),
        },
        NoPlan::NothingSummarizable { .. } => NoPlan::NothingSummarizable {
            trigger: trigger.clone(),
        },
        other => other,
    };
    let plan = compact::plan(messages, total, limit, config, counter, true).map_err(retag)?;
    Ok(SummaryPlan {
        trigger: trigger.clone(),
        ..plan
    })
}

/// The tokens the text of a new summary may take so that the checkpoint pair
/// (the boundary note and the summary) fits the summary's share of the budget
/// as [`cap_summary`] counts it.
fn summary_room(system: &[Message], budget: &BudgetConfig, counter: &dyn TokenCounter) -> u32 {
    let (_, cap) = summary_cap(system, budget, counter);
    let overhead = u64::from(counter.message_overhead());
    let room = cap.saturating_sub(BOUNDARY_TOKENS + 2 * overhead + 16);
    u32::try_from(room).unwrap_or(u32::MAX)
}

/// How many times a summary is widened to take in the kept messages that
/// would not fit beside it.
const FIT_ROUNDS: usize = 3;

/// The tokens the messages kept after `summary` (a new checkpoint pair) may
/// take so that packing leaves none of them out: what the system prompt and
/// the summary leave of the budget, the summary counted as [`cap_summary`]
/// leaves it in the view (at most its share).
fn kept_room(
    system: &[Message],
    summary: &[Message],
    budget: &BudgetConfig,
    counter: &dyn TokenCounter,
) -> u64 {
    let (after_system, cap) = summary_cap(system, budget, counter);
    after_system.saturating_sub(tokens::total(summary, counter).min(cap))
}

/// What the budget leaves after the system prompt, and the summary's share
/// of that (its cap in the view).
fn summary_cap(
    system: &[Message],
    budget: &BudgetConfig,
    counter: &dyn TokenCounter,
) -> (u64, u64) {
    let after_system = u64::from(budget.available()).saturating_sub(tokens::total(system, counter));
    let cap = (after_system as f64 * budget.summary_share) as u64;
    (after_system, cap)
}

/// Cuts the summary message of the view (never the log's) to its share of
/// the budget; returns whether it was cut.
fn cap_summary(
    summary: &mut [Message],
    system: &[Message],
    budget: &BudgetConfig,
    counter: &dyn TokenCounter,
) -> bool {
    let (_, cap) = summary_cap(system, budget, counter);
    let total = tokens::total(summary, counter);
    let Some(text) = summary.last_mut() else {
        return false;
    };
    if total <= cap {
        return false;
    }
    let others = total - u64::from(text.tokens(counter));
    let room = cap
        .saturating_sub(others)
        .saturating_sub(u64::from(counter.message_overhead()) + 16);
    // Four characters a token, as the default estimate counts Latin text.
    let keep = usize::try_from(room * 4).unwrap_or(usize::MAX);
    let content = text.text();
    let cut: String = content.chars().take(keep).collect();
    text.set_text(format!(
        "{cut}\n[... summary cut to fit the context budget]"
    ));
    true
}

/// The first empty or repeated id among `messages`, if any.
/// `text`, when it is shorter than what its checkpoint replaces (the span's
/// messages and the previous summary): a summary that saves nothing is not
/// stored, and the history stays as it was.
fn not_longer(
    text: String,
    span: &[Message],
    previous: Option<&str>,
    counter: &dyn TokenCounter,
) -> Result<String, SummaryError> {
    let replaced =
        tokens::total(span, counter) + previous.map_or(0, |p| u64::from(counter.count_text(p)));
    let summary = u64::from(counter.count_text(&text));
    if summary >= replaced {
        return Err(SummaryError::Failed(format!(
            "the summary ({summary} tokens) is not shorter than the {replaced} tokens it would \
             replace, so it was not stored"
        )));
    }
    Ok(text)
}

fn unusable_id(messages: &[Message]) -> Option<String> {
    let mut seen = std::collections::HashSet::new();
    messages
        .iter()
        .find(|m| m.id.is_empty() || !seen.insert(m.id.as_str()))
        .map(|m| m.id.clone())
}

/// The ids a checkpoint over `messages[..span]` covers, in log order: the
/// messages that come from the log (not ones a stage made) and stand in it
/// before every kept message, so that the view can start after the last of
/// them without losing a kept one. A result that repair moved next to its
/// covered call, but that the log holds after a kept message, stays uncovered.
fn covered_log_ids(log: &[Message], messages: &[Message], span: usize) -> Vec<String> {
    let wanted: std::collections::HashSet<&str> = messages.iter().map(|m| m.id.as_str()).collect();
    let position: std::collections::HashMap<&str, usize> = log
        .iter()
        .enumerate()
        .rev()
        .filter(|(_, m)| wanted.contains(m.id.as_str()))
        .take(messages.len())
        .map(|(i, m)| (m.id.as_str(), i))
        .collect();
    let kept_from = messages[span..]
        .iter()
        .filter_map(|m| position.get(m.id.as_str()))
        .min()
        .copied()
        .unwrap_or(log.len());
    let mut covered: Vec<(usize, &str)> = messages[..span]
        .iter()
        .filter_map(|m| position.get(m.id.as_str()).map(|&i| (i, m.id.as_str())))
        .filter(|&(i, _)| i < kept_from)
        .collect();
    covered.sort_unstable();
    covered.into_iter().map(|(_, id)| id.to_owned()).collect()
}

/// The messages since the checkpoint that the pipeline reads of `log`
/// (split as `split`), from the end back as far as [`token_cap`] asks,
/// the system prompt and summary counted in.
pub(crate) fn history_tail(
    log: &[Message],
    split: &LogSplit,
    config: &PipelineConfig,
    counter: &dyn TokenCounter,
) -> Tail {
    let tokens = |m: &Message| u64::from(m.tokens(counter));
    let fixed = log[..split.system_end].iter().map(tokens).sum::<u64>()
        + split
            .summary
            .map_or(0, |(b, s)| tokens(&log[b]) + tokens(&log[s]));
    let available = u64::from(config.budget.available().max(1));
    let cap = token_cap(config, available);
    split.tail(log, cap.saturating_sub(fixed), 0, counter)
}

/// The most tokens of history any decision needs to see: beyond this, every
/// trigger has fired and no more messages can fit the view.
fn token_cap(config: &PipelineConfig, available: u64) -> u64 {
    let mut cap = available.saturating_mul(2);
    if let Some(sc) = &config.summary {
        cap = cap.max(sc.max_tokens.unwrap_or(0));
        if let Some(f) = sc.window_fraction {
            cap = cap.max((f64::from(config.budget.context_limit) * f) as u64);
        }
    }
    cap.saturating_add(1)
}

/// Tokens per part of a finished view.
fn view_tokens<M: Borrow<Message>>(
    view: &[M],
    budget: &BudgetConfig,
    counter: &dyn TokenCounter,
    left_out: usize,
) -> ViewTokens {
    let mut t = ViewTokens {
        available: budget.available(),
        left_out,
        ..ViewTokens::default()
    };
    let mut in_system = true;
    for m in view {
        let m: &Message = m.borrow();
        let n = m.tokens(counter);
        if in_system && m.role == Role::System && !m.summary {
            t.system = t.system.saturating_add(n);
            continue;
        }
        in_system = false;
        if m.summary {
            t.summary = t.summary.saturating_add(n);
        } else {
            t.recent = t.recent.saturating_add(n);
        }
    }
    t.summary_cap = (f64::from(t.available.saturating_sub(t.system)) * budget.summary_share) as u32;
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summarize::{SummaryError, SummaryRequest};
    use crate::tokens::HeuristicCounter;
    use chrono::TimeZone;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2025, 6, 1, 12, 0, 0).unwrap()
    }

    fn session(turns: usize) -> Vec<Message> {
        let mut log = vec![Message::system("You are helpful.").with_id("sys")];
        for t in 0..turns {
            log.push(Message::user(format!("question {t}")).with_id(format!("u{t}")));
            let mut call = Message::assistant("").with_id(format!("a{t}"));
            call.push_tool_call(
                format!("c{t}"),
                "read",
                format!("{{\"path\":\"/src/f{t}.rs\"}}"),
            );
            log.push(call);
            log.push(
                Message::tool_result(format!("c{t}"), "read", "fn main() {}")
                    .with_id(format!("r{t}")),
            );
            log.push(Message::assistant(format!("answer {t}")).with_id(format!("b{t}")));
        }
        log
    }

    struct Fixed(Result<String, SummaryError>);
    impl Summarizer for Fixed {
        fn summarize(&self, _: &SummaryRequest<'_>) -> Result<String, SummaryError> {
            self.0.clone()
        }
    }

    /// A fixed summary that counts its calls, local (like the extractive
    /// summarizer) or not (like a model, here one reading whole spans).
    struct Counted {
        local: bool,
        calls: std::cell::Cell<usize>,
    }
    impl Summarizer for Counted {
        fn summarize(&self, _: &SummaryRequest<'_>) -> Result<String, SummaryError> {
            self.calls.set(self.calls.get() + 1);
            Ok("## Current State\nall good".into())
        }
        fn is_local(&self) -> bool {
            self.local
        }
        // One call a summary, whatever its span (so that calls count rounds).
        fn reads_whole_spans(&self) -> bool {
            true
        }
    }

    #[test]
    fn a_small_session_passes_through_unchanged() {
        let log = session(2);
        let out = compact(
            &log,
            None,
            &PipelineConfig::default(),
            &HeuristicCounter::default(),
            None,
            now(),
        );
        assert_eq!(out.view, log);
        assert!(out.append.is_empty() && out.checkpoint.is_none());
        assert_eq!(out.report.summary, SummaryOutcome::Skipped);
        assert!(out.report.violations.is_empty());
        assert_eq!(out.report.usage.messages_since_summary, 8);
    }

    #[test]
    fn a_trigger_makes_a_checkpoint_and_the_view_continues_after_it() {
        let log = session(10); // 41 messages: over the 30-message trigger
        let summarizer = Fixed(Ok("## Current State\nall good".into()));
        let out = compact(
            &log,
            None,
            &PipelineConfig::default(),
            &HeuristicCounter::default(),
            Some(&summarizer),
            now(),
        );
        let SummaryOutcome::Summarized { covered, parts, .. } = &out.report.summary else {
            panic!("{:?}", out.report.summary);
        };
        assert_eq!((*covered, *parts), (24, 1));
        let cp = out.checkpoint.clone().unwrap();
        assert_eq!(out.append.len(), 2);
        let ids: Vec<&str> = out.view.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(
            &ids[..4],
            ["sys", cp.boundary_id.as_str(), cp.summary_id.as_str(), "u6"]
        );
        assert!(out.report.violations.is_empty());

        // The next turn, on the log with the checkpoint appended, starts after it.
        let mut log2 = log.clone();
        log2.extend(out.append.clone());
        log2.push(Message::user("next").with_id("u10"));
        let next = compact(
            &log2,
            Some(&cp),
            &PipelineConfig::default(),
            &HeuristicCounter::default(),
            Some(&summarizer),
            now(),
        );
        assert_eq!(next.report.usage.messages_since_summary, 17);
        assert!(matches!(
            next.report.summary,
            SummaryOutcome::NotDone(NoPlan::NotTriggered)
        ));
        assert_eq!(next.view[2].id, cp.summary_id);
        assert_eq!(next.view.last().unwrap().id, "u10");
    }

    /// A long agent run inside one user turn, whose last four exchanges
    /// (each a file read of about 1,000 tokens) take more than a
    /// 4,000-token window leaves them beside a summary.
    fn long_run() -> (Vec<Message>, PipelineConfig) {
        let mut log = vec![
            Message::system("You are helpful.").with_id("sys"),
            Message::user("fix it").with_id("u0"),
        ];
        for t in 0..8 {
            let mut call = Message::assistant("").with_id(format!("a{t}"));
            call.push_tool_call(
                format!("c{t}"),
                "read",
                format!("{{\"path\":\"/src/f{t}.rs\"}}"),
            );
            log.push(call);
            log.push(
                Message::tool_result(format!("c{t}"), "read", "x".repeat(4_000))
                    .with_id(format!("r{t}")),
            );
        }
        let config = PipelineConfig {
            budget: BudgetConfig {
                context_limit: 4_000,
                response_reserve: 0,
                min_recent_messages: 2,
                ..BudgetConfig::default()
            },
            doom_loop: None,
            prune: None,
            ..PipelineConfig::default()
        };
        (log, config)
    }

    /// [`long_run`] compacted with a [`Counted`] summarizer, local or not:
    /// the log, the compaction, the messages summarized, the calls.
    fn compact_long_run(local: bool) -> (Vec<Message>, Compaction, usize, usize) {
        let (log, config) = long_run();
        let summarizer = Counted {
            local,
            calls: 0.into(),
        };
        let counter = HeuristicCounter::default();
        let out = compact(&log, None, &config, &counter, Some(&summarizer), now());
        let SummaryOutcome::Summarized { covered, .. } = out.report.summary else {
            panic!("{:?}", out.report.summary);
        };
        (log, out, covered, summarizer.calls.get())
    }

    // Regression (the Codex CLI trajectory of `extractive_styles`): a long
    // agent run inside one user turn keeps its last four exchanges out of the
    // summary; when they took more than the budget left them, packing left
    // the oldest of them out of the view with nothing said of them (a file
    // read: its path, its command, its numbers gone). A local summarizer
    // summarizes them too.
    #[test]
    fn kept_exchanges_that_do_not_fit_are_summarized_not_dropped() {
        let (log, out, covered, calls) = compact_long_run(true);
        // Before: the four exchanges a4..r7 kept, a4 and r4 left out.
        assert!(covered > 9, "covered {covered}");
        assert_eq!(out.report.usage.view.left_out, 0);
        let kept: Vec<&str> = out.view[3..].iter().map(|m| m.id.as_str()).collect();
        assert_eq!(kept.len() + covered, log.len() - 1, "{kept:?}");
        assert_eq!(kept.last(), Some(&"r7"));
        assert!(out.report.violations.is_empty());
        assert!(calls > 1);
    }

    // A model is asked once a compaction: what does not fit beside its
    // summary is left out by packing, and the report counts it.
    #[test]
    fn a_model_summarizer_is_asked_once_and_what_does_not_fit_is_counted() {
        let (_, out, covered, calls) = compact_long_run(false);
        assert_eq!(calls, 1);
        assert_eq!(covered, 9);
        assert!(out.report.usage.view.left_out > 0);
        assert_eq!(out.view.last().map(|m| m.id.as_str()), Some("r7"));
    }

    #[test]
    fn a_timed_run_says_where_the_time_went_and_changes_nothing_else() {
        let log = session(10);
        let summarizer = Fixed(Ok("## Current State\nall good".into()));
        let config = PipelineConfig::default();
        let counter = HeuristicCounter::default();
        let untimed = compact(&log, None, &config, &counter, Some(&summarizer), now());
        assert!(untimed.report.step_times.is_empty());
        // A clock that moves 1.5 ms each time it is read.
        let ticks = std::cell::Cell::new(0.0);
        let clock = || {
            ticks.set(ticks.get() + 1.5);
            ticks.get()
        };
        let timed = compact_timed(
            &log,
            None,
            &config,
            &counter,
            Some(&summarizer),
            now(),
            Some(&clock),
        );
        let steps: Vec<&str> = timed.report.step_times.iter().map(|t| t.step).collect();
        assert_eq!(
            steps,
            [
                "read",
                "repair",
                "doom_loops",
                "prune",
                "summary",
                "pack",
                "view"
            ]
        );
        assert!(timed.report.step_times.iter().all(|t| t.ms == 1.5));
        let mut without = timed.report.clone();
        without.step_times.clear();
        assert_eq!(without, untimed.report);
        assert_eq!(timed.view, untimed.view);

        // A log no stage changes is read, packed and made a view.
        let small = session(2);
        let timed = compact_timed(&small, None, &config, &counter, None, now(), Some(&clock));
        let steps: Vec<&str> = timed.report.step_times.iter().map(|t| t.step).collect();
        assert_eq!(steps, ["read", "pack", "view"]);
    }

    #[test]
    fn a_long_session_is_read_only_as_far_as_the_budget_needs_but_counted_whole() {
        let log = session(500); // 2,001 messages
        let config = PipelineConfig {
            budget: BudgetConfig::for_window(2_000),
            summary: None,
            ..PipelineConfig::default()
        };
        let out = compact(
            &log,
            None,
            &config,
            &HeuristicCounter::default(),
            None,
            now(),
        );
        assert_eq!(out.report.usage.messages_since_summary, 2_000);
        let in_view = out.view.len() - 1;
        assert_eq!(out.report.usage.view.left_out + in_view, 2_000);
        assert!(out.report.usage.view.total() <= config.budget.available());
    }

    #[test]
    fn a_checkpoint_covers_only_log_messages_before_every_kept_one() {
        // Regression (review): a synthetic interrupted result, or a late result
        // that repair moved, became the last covered id, and the next view
        // then lost the checkpoint or a kept user message.
        let mut log = session(10);
        // Turn 5's result comes after the user's next message.
        let r5 = log.remove(23);
        assert_eq!(r5.id, "r5");
        log.insert(25, r5);
        // Turn 4's call never got its result.
        log.remove(19);
        let summarizer = Fixed(Ok("summary".into()));
        let config = PipelineConfig::default();
        let counter = HeuristicCounter::default();
        let out = compact(&log, None, &config, &counter, Some(&summarizer), now());
        let cp = out.checkpoint.clone().expect("a checkpoint");
        assert!(
            cp.covers.iter().all(|id| log.iter().any(|m| &m.id == id)),
            "{:?}",
            cp.covers
        );
        assert!(!cp.covers.contains(&"r5".to_owned()));
        let mut next = log.clone();
        next.extend(out.append);
        let again = compact(&next, Some(&cp), &config, &counter, None, now());
        let ids: Vec<&str> = again.view.iter().map(|m| m.id.as_str()).collect();
        assert!(ids.contains(&"u6"), "{ids:?}");
        assert_eq!(again.report.usage.messages_since_summary, 17, "{ids:?}");
        assert!(again.report.violations.is_empty());
    }

    #[test]
    fn empty_or_repeated_ids_block_summaries_not_the_view() {
        let mut log = session(10);
        log[5].id.clear();
        let summarizer = Fixed(Ok("summary".into()));
        let out = compact(
            &log,
            None,
            &PipelineConfig::default(),
            &HeuristicCounter::default(),
            Some(&summarizer),
            now(),
        );
        assert_eq!(
            out.report.summary,
            SummaryOutcome::NotDone(NoPlan::UnusableIds { id: String::new() })
        );
        assert_eq!(out.view.len(), log.len());
    }

    #[test]
    fn a_summary_larger_than_its_share_is_cut_in_the_view() {
        let mut log = session(10);
        // Results large enough that a 5,000-token summary still saves room.
        for m in log.iter_mut().filter(|m| m.role == Role::Tool) {
            m.content = "let x = 1;\n".repeat(400);
        }
        let long = "word ".repeat(4_000); // about 5,000 tokens
        let summarizer = Fixed(Ok(long));
        let config = PipelineConfig {
            budget: BudgetConfig::for_window(10_000),
            ..PipelineConfig::default()
        };
        let counter = HeuristicCounter::default();
        let out = compact(&log, None, &config, &counter, Some(&summarizer), now());
        assert!(out.report.summary_cut);
        let usage = &out.report.usage.view;
        assert!(usage.summary <= usage.summary_cap, "{usage:?}");
        // The log gets the whole summary.
        assert!(out.append[1].content.len() >= 20_000);
    }

    #[test]
    fn a_failing_summarizer_keeps_the_full_history() {
        let log = session(10);
        let summarizer = Fixed(Err(SummaryError::Failed("model unreachable".into())));
        let out = compact(
            &log,
            None,
            &PipelineConfig::default(),
            &HeuristicCounter::default(),
            Some(&summarizer),
            now(),
        );
        assert!(
            matches!(&out.report.summary, SummaryOutcome::Failed { error, .. } if error.contains("model unreachable"))
        );
        assert_eq!(out.view, log);
        assert!(out.append.is_empty());
    }

    #[test]
    fn a_summary_no_shorter_than_what_it_replaces_is_not_stored() {
        let log = session(10);
        let replaced: u64 = log[..30]
            .iter()
            .map(|m| u64::from(m.tokens(&HeuristicCounter::default())))
            .sum();
        let summarizer = Fixed(Ok("word ".repeat(replaced as usize * 2)));
        let out = compact(
            &log,
            None,
            &PipelineConfig::default(),
            &HeuristicCounter::default(),
            Some(&summarizer),
            now(),
        );
        assert!(
            matches!(&out.report.summary, SummaryOutcome::Failed { error, .. }
                if error.contains("not shorter than") && error.contains("not stored")),
            "{:?}",
            out.report.summary
        );
        assert_eq!(out.view, log);
        assert!(out.append.is_empty() && out.checkpoint.is_none());
    }

    #[test]
    fn an_interrupted_run_is_repaired_in_the_view_only() {
        let mut log = session(1);
        let mut call = Message::assistant("").with_id("crash");
        call.push_tool_call("cx", "deploy", "{}");
        log.push(call);
        let out = compact(
            &log,
            None,
            &PipelineConfig::repair_only(BudgetConfig::default()),
            &HeuristicCounter::default(),
            None,
            now(),
        );
        assert_eq!(out.report.repairs.len(), 1);
        assert_eq!(out.view.len(), log.len() + 1);
        assert!(out.report.violations.is_empty());
    }

    #[test]
    fn an_oversized_view_is_truncated_to_the_budget() {
        let mut log = session(3);
        log[3] = Message::tool_result("c0", "read", "z".repeat(40_000)).with_id("r0");
        let config = PipelineConfig {
            budget: BudgetConfig {
                context_limit: 3_000,
                response_reserve: 0,
                min_recent_messages: 20,
                ..BudgetConfig::default()
            },
            ..PipelineConfig::default()
        };
        let out = compact(
            &log,
            None,
            &config,
            &HeuristicCounter::default(),
            None,
            now(),
        );
        assert!(!out.report.truncations.is_empty());
        assert!(
            out.report.usage.view.total() <= 3_000,
            "{:?}",
            out.report.usage.view
        );
        assert!(out.report.violations.is_empty());
    }
}
