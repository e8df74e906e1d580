//! Properties of the context engine over generated histories:
//! - after every stage the validator finds no violation;
//! - the packed view never exceeds the budget except by the
//!   `min_recent_messages` rule;
//! - repair is idempotent;
//! - checkpoints never lose a message id from the log;
//! - a [`LogWindow`] kept over appends reports what the whole log does;
//! - the checks that let the pipeline skip copying the history (repair,
//!   pruning would change nothing) say what the stages do, and skipping
//!   gives what running them gives;
//! - a log given away (`compact_owned`) compacts as a borrowed one does.

use agent_host_core::budget::{BudgetConfig, build_view};
use agent_host_core::compact::SummaryConfig;
use agent_host_core::pipeline::{PipelineConfig, SummaryOutcome, compact, compact_owned};
use agent_host_core::prune::{PruneConfig, prune, would_prune};
use agent_host_core::repair::{is_repaired, repair};
use agent_host_core::summarize::{Summarizer, SummaryError, SummaryRequest};
use agent_host_core::truncate::{TruncateConfig, truncate};
use agent_host_core::validate::validate;
use agent_host_core::window::LogWindow;
use agent_host_core::{HeuristicCounter, Message, Reasoning, Role};
use chrono::{TimeZone, Utc};
use proptest::prelude::*;
use std::sync::Arc;

/// One step of an assistant: text, or calls with their results of given sizes.
#[derive(Clone, Debug)]
enum Step {
    Text(usize),
    Calls(Vec<usize>),
}

fn turn() -> impl Strategy<Value = (usize, Vec<Step>)> {
    let step = prop_oneof![
        (1usize..2_000).prop_map(Step::Text),
        proptest::collection::vec(prop_oneof![1usize..500, 1usize..80_000], 1..3)
            .prop_map(Step::Calls),
    ];
    (1usize..1_000, proptest::collection::vec(step, 0..4))
}

/// A well-formed history: system prompt, then turns of a user message and
/// assistant steps, every call answered right after it.
fn history() -> impl Strategy<Value = Vec<Message>> {
    proptest::collection::vec(turn(), 0..14).prop_map(|turns| {
        let mut out = vec![Message::system("You are an agent.").with_id("sys")];
        let mut n = 0;
        let mut id = |prefix: &str| {
            n += 1;
            format!("{prefix}{n}")
        };
        for (user, steps) in turns {
            out.push(Message::user("u".repeat(user)).with_id(id("u")));
            for step in steps {
                match step {
                    Step::Text(len) => {
                        out.push(Message::assistant("a".repeat(len)).with_id(id("a")))
                    }
                    Step::Calls(results) => {
                        let mut call = Message::assistant("").with_id(id("a"));
                        let calls: Vec<String> = results.iter().map(|_| id("c")).collect();
                        for c in &calls {
                            call.push_tool_call(c.clone(), "read", "{\"path\":\"/x\"}");
                        }
                        out.push(call);
                        for (c, len) in calls.iter().zip(results) {
                            out.push(
                                Message::tool_result(c.clone(), "read", "r".repeat(len))
                                    .with_id(id("r")),
                            );
                        }
                    }
                }
            }
        }
        out
    })
}

/// A history broken the ways real logs break: messages lost, duplicated or
/// moved, or carrying what their role may not (a call id, reasoning, a
/// call id twice).
fn broken_history() -> impl Strategy<Value = Vec<Message>> {
    (
        history(),
        proptest::collection::vec(
            (
                0usize..6,
                any::<prop::sample::Index>(),
                any::<prop::sample::Index>(),
            ),
            0..6,
        ),
    )
        .prop_map(|(mut h, edits)| {
            for (kind, a, b) in edits {
                if h.len() < 2 {
                    break;
                }
                let (i, j) = (a.index(h.len()), b.index(h.len()));
                match kind {
                    0 => {
                        h.remove(i);
                    }
                    1 => {
                        let copy = h[i].clone().with_id(format!("{}-dup", h[i].id));
                        h.insert(j, copy);
                    }
                    // (Not the system prompt, which the pipeline passes on
                    // as it is.)
                    3 => h[i.max(1)].tool_call_id = Some(format!("stray-{j}")),
                    4 => {
                        h[i.max(1)].reasoning = Some(Reasoning {
                            text: "thinking".into(),
                            ..Reasoning::default()
                        })
                    }
                    5 => {
                        if let Some(first) = h[i].tool_calls.first().cloned() {
                            h[i].tool_calls.push(first);
                        }
                    }
                    _ => {
                        let m = h.remove(i);
                        h.insert(j.min(h.len()), m);
                    }
                }
            }
            h
        })
}

/// A summarizer that names the span it covered.
struct Names;
impl Summarizer for Names {
    fn summarize(&self, r: &SummaryRequest<'_>) -> Result<String, SummaryError> {
        let ids: Vec<&str> = r.messages.iter().map(|m| m.id.as_str()).collect();
        Ok(format!(
            "summary of {} messages; {} partials",
            ids.len(),
            r.partials.len()
        ))
    }
}

fn budget(limit: u32, min_recent: usize) -> BudgetConfig {
    BudgetConfig {
        context_limit: limit,
        response_reserve: limit / 10,
        min_recent_messages: min_recent,
        ..BudgetConfig::default()
    }
}

fn now() -> chrono::DateTime<Utc> {
    Utc.with_ymd_and_hms(2025, 6, 1, 0, 0, 0).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn repair_makes_any_history_valid_and_is_idempotent(h in broken_history()) {
        let (repaired, _) = repair(h);
        prop_assert_eq!(validate(&repaired), vec![]);
        let (again, changes) = repair(repaired.clone());
        prop_assert_eq!(again, repaired);
        prop_assert!(changes.is_empty(), "{:?}", changes);
    }

    #[test]
    fn every_stage_keeps_a_valid_history_valid(h in history(), usage in 0.0f64..1.0, limit in 500u32..50_000) {
        prop_assert_eq!(validate(&h), vec![]);
        let counter = HeuristicCounter::default();
        let mut pruned = h.clone();
        prune(&mut pruned, usage, &PruneConfig::default());
        prop_assert_eq!(validate(&pruned), vec![]);
        prune(&mut pruned, 1.0, &PruneConfig::default().aggressive());
        prop_assert_eq!(validate(&pruned), vec![]);
        let mut truncated = h.clone();
        truncate(&mut truncated, limit, 6, &TruncateConfig::default(), &counter);
        prop_assert_eq!(validate(&truncated), vec![]);
        let view: Vec<Message> = build_view(&h, None, &budget(limit, 6), &counter).to_messages();
        prop_assert_eq!(validate(&view), vec![]);
    }

    #[test]
    fn the_pipeline_view_is_valid_for_broken_histories(h in broken_history(), limit in 500u32..50_000, force in any::<bool>()) {
        let config = PipelineConfig {
            budget: budget(limit, 4),
            force_summary: force,
            ..PipelineConfig::default()
        };
        let out = compact(&h, None, &config, &HeuristicCounter::default(), Some(&Names), now());
        prop_assert_eq!(out.report.violations, vec![]);
        prop_assert_eq!(validate(&out.view), vec![]);
    }

    #[test]
    fn the_view_fits_the_budget_but_for_the_minimum_of_recent_messages(h in history(), limit in 200u32..30_000, min_recent in 0usize..8) {
        let counter = HeuristicCounter::default();
        let b = budget(limit, min_recent);
        let view = build_view(&h, None, &b, &counter);
        if view.tokens.over_budget() {
            // Over budget only while filling the minimum: without its oldest
            // exchange, the recent part would hold fewer than the minimum.
            let oldest = &view.recent[0];
            let first_unit_len = 1 + view.recent[1..].iter().take_while(|m| m.role == Role::Tool).count();
            prop_assert!(oldest.role != Role::Tool);
            prop_assert!(
                view.recent.len() - first_unit_len < min_recent
                    || view.tokens.system > b.available(),
                "{} recent, unit {}, tokens {:?}", view.recent.len(), first_unit_len, view.tokens
            );
        }
        let total: u32 = view.messages().map(|m| m.tokens(&counter)).sum();
        prop_assert_eq!(total, view.tokens.total());
    }

    #[test]
    fn checkpoints_never_lose_a_message_id(h in history(), limit in 2_000u32..60_000) {
        let counter = HeuristicCounter::default();
        let config = PipelineConfig {
            budget: budget(limit, 4),
            doom_loop: None,
            prune: None,
            summary: Some(SummaryConfig { max_messages: Some(10), ..SummaryConfig::default() }),
            truncate: None,
            ..PipelineConfig::default()
        };
        let out = compact(&h, None, &config, &counter, Some(&Names), now());
        let originals: Vec<&str> = h.iter().skip(1).map(|m| m.id.as_str()).collect();
        let covered: Vec<String> = out.checkpoint.as_ref().map_or_else(Vec::new, |cp| cp.covers.clone());
        if let SummaryOutcome::Summarized { covered: n, .. } = out.report.summary {
            prop_assert_eq!(n, covered.len());
            prop_assert_eq!(out.append.len(), 2);
            prop_assert!(out.append.iter().all(|m| m.summary));
        }
        // Every message after the system prompt is covered, left out of the
        // view by the budget (oldest first), or in the view, in log order.
        let recent: Vec<&str> = out.view.iter().filter(|m| m.role != Role::System && !m.summary).map(|m| m.id.as_str()).collect();
        let left_out = out.report.usage.view.left_out;
        let mut rebuilt: Vec<&str> = covered.iter().map(String::as_str).collect();
        rebuilt.extend(&originals[covered.len()..covered.len() + left_out]);
        rebuilt.extend(&recent);
        prop_assert_eq!(rebuilt, originals);
    }

    /// The window over a log (with system messages in its middle, and a
    /// checkpoint or not) gives the whole log's compaction after every
    /// append, whether or not it trimmed in between.
    #[test]
    fn a_window_reports_what_the_whole_log_does(
        h in broken_history(),
        systems in proptest::collection::vec(any::<prop::sample::Index>(), 0..3),
        checkpoint_at in proptest::option::of(any::<prop::sample::Index>()),
        cuts in proptest::collection::vec((any::<prop::sample::Index>(), any::<bool>()), 0..6),
        limit in 200u32..6_000,
        summary_tokens in proptest::option::of(100u64..8_000),
        repair in any::<bool>(),
    ) {
        let counter = HeuristicCounter::default();
        let mut h = h;
        for (n, at) in systems.iter().enumerate() {
            let i = at.index(h.len() + 1);
            h.insert(i, Message::system(format!("note {n}")).with_id(format!("s{n}")));
        }
        let config = PipelineConfig {
            budget: budget(limit, 2),
            // Without repair a view can break the rules: the report says so.
            repair,
            summary: summary_tokens.map(|t| SummaryConfig {
                max_tokens: Some(t),
                window_fraction: None,
                ..SummaryConfig::default()
            }),
            ..PipelineConfig::default()
        };
        // A checkpoint over a prefix, its pair appended after it as a turn
        // stores it.
        let mut log = h.clone();
        let mut checkpoint = None;
        let mut first = 0;
        if let Some(at) = checkpoint_at {
            let at = at.index(h.len() + 1);
            let summarizing = PipelineConfig { force_summary: true, ..config.clone() };
            let out = compact(&h[..at], None, &summarizing, &counter, Some(&Names), now());
            if let Some(cp) = out.checkpoint {
                log = h[..at].to_vec();
                log.extend(out.append);
                first = log.len();
                log.extend_from_slice(&h[at..]);
                checkpoint = Some(cp);
            }
        }
        // The window starts after the pair, and grows by the rest in pieces.
        let mut ends: Vec<usize> = cuts.iter().map(|(i, _)| first + i.index(log.len() - first + 1)).collect();
        ends.push(log.len());
        ends.sort_unstable();
        let start = ends[0];
        let mut window = LogWindow::new(log[..start].to_vec(), checkpoint.clone(), config.clone(), Arc::new(counter));
        let mut at = start;
        for (n, &end) in ends.iter().enumerate() {
            window.push(log[at..end].iter().cloned());
            at = end;
            if cuts.get(n).is_some_and(|(_, trim)| *trim) {
                window.trim();
            }
            let whole = compact(&log[..end], checkpoint.as_ref(), &config, &counter, None, now());
            // The report alone (its view counted, not made, when it can be).
            prop_assert_eq!(&window.report(now()), &whole.report, "after {} of {} messages", end, log.len());
            prop_assert_eq!(window.compact(now()), whole, "after {} of {} messages", end, log.len());
        }
    }

    #[test]
    fn is_repaired_says_whether_repair_changes_anything(h in broken_history(), valid in history()) {
        for h in [h, valid] {
            let (repaired, changes) = repair(h.clone());
            prop_assert_eq!(is_repaired(&h), repaired == h && changes.is_empty());
        }
    }

    #[test]
    fn would_prune_says_whether_prune_prunes(h in history(), usage in 0.0f64..1.2, aggressive in any::<bool>()) {
        let config = if aggressive { PruneConfig::default().aggressive() } else { PruneConfig::default() };
        let pruned = prune(&mut h.clone(), usage, &config);
        prop_assert_eq!(would_prune(&h, usage, &config), !pruned.is_empty());
    }

    /// Without a summarizer the pipeline skips copying a history no stage
    /// would change; with one (whose triggers never fire) it runs every
    /// stage on a copy. Both give the same view and report (but for the
    /// summary stage's outcome: skipped, or not needed).
    #[test]
    fn skipping_unchanged_stages_gives_what_running_them_gives(
        h in prop_oneof![history(), broken_history()],
        limit in 200u32..50_000,
        aggressive in any::<bool>(),
    ) {
        let counter = HeuristicCounter::default();
        let never = SummaryConfig {
            max_messages: None,
            max_tokens: None,
            window_fraction: None,
            ..SummaryConfig::default()
        };
        let config = PipelineConfig {
            budget: budget(limit, 3),
            summary: Some(never),
            aggressive,
            ..PipelineConfig::default()
        };
        let skipping = compact(&h, None, &config, &counter, None, now());
        let mut running = compact(&h, None, &config, &counter, Some(&Names), now());
        prop_assert!(matches!(running.report.summary, SummaryOutcome::NotDone(_)));
        running.report.summary = SummaryOutcome::Skipped;
        prop_assert_eq!(skipping, running);
    }

    /// Whichever way the view is made (moved from the log, copied, or made
    /// by the stages that changed it), a log given away gives what a
    /// borrowed one does: every stage on or off, with or without a
    /// summarizer, with truncation, at budgets from far too small to ample.
    #[test]
    fn a_log_given_away_compacts_as_a_borrowed_one(
        h in prop_oneof![history(), broken_history()],
        limit in 200u32..50_000,
        repair_only in any::<bool>(),
        summarize in any::<bool>(),
        truncate in any::<bool>(),
        system in any::<bool>(),
    ) {
        let counter = HeuristicCounter::default();
        let mut h = h;
        if system {
            h.insert(0, Message::system("You are a careful agent.".repeat(20)));
        }
        let mut config = if repair_only {
            PipelineConfig::repair_only(budget(limit, 3))
        } else {
            PipelineConfig { budget: budget(limit, 3), ..PipelineConfig::default() }
        };
        if !truncate {
            config.truncate = None;
        }
        let summarizer = summarize.then_some(&Names as &dyn Summarizer);
        let borrowed = compact(&h, None, &config, &counter, summarizer, now());
        let owned = compact_owned(h.clone(), None, &config, &counter, summarizer, now());
        prop_assert_eq!(&owned, &borrowed);
        // After a checkpoint: the pair appended to the log, what it covers
        // read no more; the next run with the summarizer, and without (the
        // view then moved from the log).
        let summarizing = PipelineConfig {
            summary: Some(SummaryConfig { max_messages: Some(6), ..SummaryConfig::default() }),
            force_summary: true,
            ..config.clone()
        };
        let first = compact(&h, None, &summarizing, &counter, Some(&Names), now());
        if let Some(checkpoint) = &first.checkpoint {
            let mut log = h;
            log.extend(first.append.iter().cloned());
            // Enough after the pair that a small budget's tail stops short
            // of it: the view is then moved from the log.
            log.extend((0..40).map(|i| {
                let text = format!("exchange {i} ").repeat(30);
                if i % 2 == 0 { Message::user(text) } else { Message::assistant(text) }
            }));
            for summarizer in [summarizer, None] {
                let borrowed = compact(&log, Some(checkpoint), &config, &counter, summarizer, now());
                let owned = compact_owned(log.clone(), Some(checkpoint), &config, &counter, summarizer, now());
                prop_assert_eq!(owned, borrowed);
            }
        }
    }
}
