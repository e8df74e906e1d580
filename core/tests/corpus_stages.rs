//! Every stage of the context engine on every real conversation of
//! `../shared/corpus`, at several window sizes: no violation, ever.
//!
//! Skipped, saying so, when the corpus is not beside this checkout (set
//! `AGENT_HOST_CORPUS` to point elsewhere); failed instead when `CI` is set.

mod common;

use agent_host_core::budget::{BudgetConfig, build_view};
use agent_host_core::extractive::ExtractiveSummarizer;
use agent_host_core::pipeline::{Compaction, PipelineConfig, SummaryOutcome, compact};
use agent_host_core::prune::{PruneConfig, prune};
use agent_host_core::repair::repair;
use agent_host_core::truncate::{TruncateConfig, Truncation, truncate};
use agent_host_core::validate::validate;
use agent_host_core::{HeuristicCounter, Message, Role};
use chrono::{TimeZone, Utc};

fn corpus() -> Option<Vec<(String, Vec<Message>)>> {
    common::corpus_dir().map(|dir| common::conversations(&dir))
}

/// Asserts that the view of `out` fits the budget, counted as the pipeline
/// counts it (with the same counter), or else that only
/// `min_recent_messages` put it over; says whether it is over budget.
///
/// Over budget, nothing but the protected messages is left of the history:
/// after the system prompt and the summary, the view holds exactly the last
/// `min_recent_messages` messages (all of them when there were fewer), plus
/// the call of the tool results they start with, if any, since a tool
/// exchange goes in or out whole.
fn assert_within_budget(
    out: &Compaction,
    budget: &BudgetConfig,
    counter: &HeuristicCounter,
    name: &str,
    limit: u32,
) -> bool {
    let usage = &out.report.usage.view;
    let tokens: u64 = out.view.iter().map(|m| u64::from(m.tokens(counter))).sum();
    // The budget as `budget` defines it: the window less the response reserve
    // and the tool definitions.
    let available = budget.context_limit - budget.response_reserve - budget.tool_definition_tokens;
    assert_eq!(
        (tokens, usage.available),
        (u64::from(usage.total()), available),
        "{name} at {limit}: the report counts the view it returns, against the budget"
    );
    if !usage.over_budget() {
        return false;
    }
    let recent: Vec<&Message> = out
        .view
        .iter()
        .skip_while(|m| m.role == Role::System && !m.summary)
        .filter(|m| !m.summary)
        .collect();
    let dropped: usize = out
        .report
        .truncations
        .iter()
        .map(|t| match t {
            Truncation::Dropped { ids } => ids.len(),
            _ => 0,
        })
        .sum();
    let protected = budget.min_recent_messages.min(recent.len() + dropped);
    // Tool results at the start of the protected tail keep their call.
    let mut kept = protected;
    while kept > 0 && kept < recent.len() && recent[recent.len() - kept].role == Role::Tool {
        kept += 1;
    }
    assert_eq!(
        recent.len(),
        kept,
        "{name} at {limit}: the view takes {tokens} tokens of {available} available, and \
         keeps {} recent messages where min_recent_messages protects {protected} ({kept} \
         with their first exchange whole; {dropped} dropped by truncation): {usage:?}",
        recent.len()
    );
    true
}

#[test]
fn every_stage_on_every_conversation_keeps_the_provider_rules() {
    let Some(conversations) = corpus() else {
        return;
    };
    let counter = HeuristicCounter::default();
    let summarizer = ExtractiveSummarizer::default();
    let now = Utc.with_ymd_and_hms(2025, 9, 4, 0, 0, 0).unwrap();
    let (mut checkpoints, mut truncated_views, mut over_budget) = (0, 0, 0);
    for (name, history) in &conversations {
        assert_eq!(validate(history), [], "{name}: the import itself");
        let (repaired, changes) = repair(history.clone());
        assert!(
            changes.is_empty(),
            "{name}: a valid import needs no repair: {changes:?}"
        );
        assert_eq!(validate(&repaired), [], "{name}: repair");
        let mut pruned = history.clone();
        prune(&mut pruned, 0.9, &PruneConfig::default().aggressive());
        assert_eq!(validate(&pruned), [], "{name}: prune");
        for limit in [4_000, 16_000, 128_000] {
            let budget = BudgetConfig::for_window(limit);
            let view = build_view(history, None, &budget, &counter).to_messages();
            assert_eq!(validate(&view), [], "{name} at {limit}: view");
            let mut cut = history.clone();
            truncate(
                &mut cut,
                budget.available(),
                6,
                &TruncateConfig::default(),
                &counter,
            );
            assert_eq!(validate(&cut), [], "{name} at {limit}: truncate");
            for force_summary in [false, true] {
                let config = PipelineConfig {
                    budget: budget.clone(),
                    force_summary,
                    ..PipelineConfig::default()
                };
                let out = compact(history, None, &config, &counter, Some(&summarizer), now);
                assert_eq!(out.report.violations, [], "{name} at {limit}: pipeline");
                if let SummaryOutcome::Failed { error, .. } = &out.report.summary {
                    // A forced summary of a short span may save nothing: it
                    // is then refused, and the history kept, by design.
                    if !error.contains("is not shorter than") {
                        panic!("{name}: the extractive summarizer failed: {error}");
                    }
                    assert!(out.checkpoint.is_none(), "{name}: {error}");
                }
                checkpoints += usize::from(out.checkpoint.is_some());
                truncated_views += usize::from(!out.report.truncations.is_empty());
                over_budget +=
                    usize::from(assert_within_budget(&out, &budget, &counter, name, limit));
            }
        }
    }
    eprintln!(
        "{} conversations x 3 windows x 2 modes: {checkpoints} checkpoints, {truncated_views} views truncated, \
         {over_budget} over budget with only the protected recent messages, 0 violations",
        conversations.len()
    );
    assert!(checkpoints > 200, "summaries were made: {checkpoints}");
}
