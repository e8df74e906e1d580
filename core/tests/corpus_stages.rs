//! Every stage of the context engine on every real conversation of
//! `../shared/corpus`, at several window sizes: no violation, ever.
//!
//! Skipped, saying so, when the corpus is not beside this checkout.

mod common;

use agent_host_core::budget::{BudgetConfig, build_view};
use agent_host_core::extractive::ExtractiveSummarizer;
use agent_host_core::pipeline::{PipelineConfig, SummaryOutcome, compact};
use agent_host_core::prune::{PruneConfig, prune};
use agent_host_core::repair::repair;
use agent_host_core::truncate::{TruncateConfig, truncate};
use agent_host_core::validate::validate;
use agent_host_core::{HeuristicCounter, Message};
use chrono::{TimeZone, Utc};

fn corpus() -> Option<Vec<(String, Vec<Message>)>> {
    common::corpus_dir().map(|dir| common::conversations(&dir))
}

#[test]
fn every_stage_on_every_conversation_keeps_the_provider_rules() {
    let Some(conversations) = corpus() else {
        return;
    };
    let counter = HeuristicCounter::default();
    let summarizer = ExtractiveSummarizer::default();
    let now = Utc.with_ymd_and_hms(2025, 9, 4, 0, 0, 0).unwrap();
    let (mut checkpoints, mut truncated_views) = (0, 0);
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
                    panic!("{name}: the extractive summarizer failed: {error}");
                }
                checkpoints += usize::from(out.checkpoint.is_some());
                truncated_views += usize::from(!out.report.truncations.is_empty());
                assert!(
                    out.report.usage.view.total() <= budget.available()
                        || out.report.usage.view.recent > 0,
                    "{name} at {limit}: {:?}",
                    out.report.usage.view
                );
            }
        }
    }
    eprintln!(
        "{} conversations x 3 windows x 2 modes: {checkpoints} checkpoints, {truncated_views} views truncated, 0 violations",
        conversations.len()
    );
    assert!(checkpoints > 200, "summaries were made: {checkpoints}");
}
