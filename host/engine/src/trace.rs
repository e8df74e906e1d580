//! What each stage of a view's preparation did, in order: core's pipeline
//! (its steps, one line each), then every processor, each with its time,
//! its outcome, and a bounded diff of the messages it kept, dropped,
//! replaced and inserted (core's [`diff`](agent_host_core::diff)). The
//! gateway keeps them in its request records and `run --report` writes
//! them; the dashboard's request page shows them.

use agent_host_core::Message;
use agent_host_core::budget::is_system_prompt;
use agent_host_core::diff::{DiffLimits, ViewDiff, diff, diff_refs};
use agent_host_core::pipeline::{Compaction, StepTime, SummaryOutcome};
use agent_host_core::session::Checkpoint;
use agent_host_runtime::ProcessorReport;
use serde::{Deserialize, Serialize};

/// What kind of stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StageKind {
    /// Core's pipeline: repair, doom loops, pruning, summary, budget,
    /// truncation.
    Pipeline,
    /// A sandboxed processor.
    Processor,
}

/// One stage of a view's preparation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StageReport {
    /// `pipeline`, or the processor's name.
    pub name: String,
    /// Which kind of stage.
    pub kind: StageKind,
    /// The processor's version and the start of its hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Its wall-clock time, in milliseconds.
    pub time_ms: f64,
    /// The pipeline: `changed` or `unchanged`; a processor: `applied`,
    /// `repaired` or `failed`.
    pub outcome: String,
    /// Why it failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What it did, one line per step (the pipeline's stages in order; a
    /// processor's repairs and log lines).
    #[serde(default)]
    pub steps: Vec<String>,
    /// Where its time went, step by step (the pipeline's, when it was
    /// timed: core's [`StepTime`]s).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub step_times: Vec<StepTiming>,
    /// Its input against its output.
    pub diff: ViewDiff,
}

/// How long one step of a stage took.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepTiming {
    /// The step (`read`, `repair`, `doom_loops`, `prune`, `summary`,
    /// `pack`, `view`).
    pub step: String,
    /// Milliseconds.
    pub ms: f64,
}

/// A clock for [`agent_host_core::pipeline::compact_timed`]: milliseconds
/// since it was made.
pub fn step_clock() -> impl Fn() -> f64 {
    let started = std::time::Instant::now();
    move || started.elapsed().as_secs_f64() * 1000.0
}

/// At most this many lines of a stage's steps are kept.
const MAX_STEPS: usize = 100;
/// At most this many bytes of one step's line.
const MAX_STEP_BYTES: usize = 1_000;

fn line(text: String) -> String {
    if text.len() <= MAX_STEP_BYTES {
        return text;
    }
    let mut end = MAX_STEP_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

fn capped(lines: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut out = Vec::new();
    let mut more = 0usize;
    for l in lines {
        if out.len() < MAX_STEPS {
            out.push(line(l));
        } else {
            more += 1;
        }
    }
    if more > 0 {
        out.push(format!("and {more} more"));
    }
    out
}

/// The pipeline's stage: `log` (whose latest checkpoint was `checkpoint`)
/// against `view`, the view it made, and what `compaction` reports.
/// Messages an earlier checkpoint covers are not its input: they were
/// summarized before, not by this run.
pub fn pipeline_stage(
    log: &[Message],
    checkpoint: Option<&Checkpoint>,
    compaction: &Compaction,
    view: &[Message],
    time_ms: f64,
) -> StageReport {
    let system_end = log.iter().take_while(|m| is_system_prompt(m)).count();
    let boundary = checkpoint
        .and_then(|c| log.iter().position(|m| m.id == c.boundary_id))
        .filter(|&b| b >= system_end)
        .unwrap_or(system_end);
    let input: Vec<&Message> = log[..system_end].iter().chain(&log[boundary..]).collect();
    let output: Vec<&Message> = view.iter().collect();
    let diff = diff_refs(&input, &output, &[], &DiffLimits::default());
    let r = &compaction.report;
    let mut steps = Vec::new();
    steps.extend(r.repairs.iter().map(|x| format!("repair: {x}")));
    steps.extend(r.doom_loops.iter().map(|d| {
        format!(
            "doom loop: {} called {} times in a row with the same arguments; a warning inserted",
            d.tool, d.count
        )
    }));
    steps.extend(r.pruned.iter().map(|p| {
        format!(
            "pruning: the result of {} ({}) {} from {} to {} characters",
            p.tool.as_deref().unwrap_or("a tool"),
            p.id,
            if p.cleared { "cleared" } else { "cut" },
            p.chars_before,
            p.chars_after
        )
    }));
    steps.push(match &r.summary {
        SummaryOutcome::Skipped => "summary: off".to_owned(),
        SummaryOutcome::NotDone(why) => format!("summary: not made ({why:?})"),
        SummaryOutcome::Summarized {
            trigger,
            covered,
            parts,
            ..
        } => format!(
            "summary: {covered} messages summarized in {parts} part(s), fired by {trigger:?}"
        ),
        SummaryOutcome::Failed { trigger, error } => {
            format!("summary: failed ({error}), fired by {trigger:?}; the full history kept")
        }
    });
    if r.summary_cut {
        steps.push("summary: cut in the view to its share of the budget".to_owned());
    }
    steps.push(format!(
        "budget: {} messages in the view, {} tokens of {} available; {} older messages left out",
        r.usage.messages_in_view,
        r.usage.view.total(),
        r.usage.view.available,
        r.usage.view.left_out
    ));
    steps.extend(r.truncations.iter().map(|t| format!("truncation: {t:?}")));
    let changed = diff.dropped + diff.replaced + diff.inserted > 0;
    StageReport {
        name: "pipeline".to_owned(),
        kind: StageKind::Pipeline,
        version: None,
        time_ms,
        outcome: if changed { "changed" } else { "unchanged" }.to_owned(),
        error: None,
        steps: capped(steps),
        step_times: r
            .step_times
            .iter()
            .map(|t: &StepTime| StepTiming {
                step: t.step.to_owned(),
                ms: t.ms,
            })
            .collect(),
        diff,
    }
}

/// A processor's stage: `before` against `after`, as its `report` tells.
pub fn processor_stage(
    before: &[Message],
    after: &[Message],
    report: &ProcessorReport,
) -> StageReport {
    let pairs: Vec<(String, String)> = report
        .replaced
        .iter()
        .map(|r| (r.id.clone(), r.by.clone()))
        .collect();
    let outcome = serde_json::to_value(report.outcome)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    let steps = report.repairs.iter().map(|r| format!("repair: {r}")).chain(
        report
            .logs
            .iter()
            .map(|l| format!("log {}: {}", l.level, l.text)),
    );
    StageReport {
        name: report.name.clone(),
        kind: StageKind::Processor,
        version: Some(format!(
            "{} {}",
            report.version,
            report.hash.get(..12).unwrap_or(&report.hash)
        )),
        time_ms: report.time_ms,
        outcome,
        error: report.error.clone(),
        steps: capped(steps),
        step_times: Vec::new(),
        diff: diff(before, after, &pairs, &DiffLimits::default()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_host_core::HeuristicCounter;
    use agent_host_core::budget::BudgetConfig;
    use agent_host_core::diff::Change;
    use agent_host_core::pipeline::{PipelineConfig, compact};

    #[test]
    fn the_pipeline_stage_shows_what_the_budget_left_out() {
        let mut log = vec![Message::system("Be brief.").with_id("sys")];
        for i in 0..40 {
            log.push(Message::user(format!("question {i} ").repeat(200)).with_id(format!("u{i}")));
            log.push(Message::assistant(format!("answer {i}")).with_id(format!("a{i}")));
        }
        let config = PipelineConfig::repair_only(BudgetConfig {
            context_limit: 4_000,
            response_reserve: 500,
            ..BudgetConfig::default()
        });
        let compaction = compact(
            &log,
            None,
            &config,
            &HeuristicCounter::default(),
            None,
            chrono::Utc::now(),
        );
        let stage = pipeline_stage(&log, None, &compaction, &compaction.view, 1.5);
        assert_eq!(stage.outcome, "changed");
        assert!(stage.diff.dropped > 0);
        assert_eq!(stage.diff.kept, compaction.view.len());
        assert!(matches!(&stage.diff.changes[0], Change::Kept { first, .. } if first == "sys"));
        assert!(
            stage.steps.iter().any(|s| s.starts_with("budget:")),
            "{:?}",
            stage.steps
        );
    }
}
