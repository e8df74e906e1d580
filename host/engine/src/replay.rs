//! Replaying a recorded run (`agent-host replay REPORT`): the same history
//! through the same pipeline and the same processors, under their recorded
//! context, configuration, grants, limits, clock (`now`) and host-service
//! answers, each answer checked byte for byte against its record.
//!
//! A report is a stranger's file: whoever wrote it chose every path, digest,
//! grant and limit in it. What a replay does with one:
//!
//! - it reads a history and components only as regular files (never a
//!   FIFO or a device), within the history limits and the component cap,
//!   and uses one only when its SHA-256 is the one the report records: a
//!   report can make the host read only bytes whose digest its author
//!   already had, and it cannot swap a component or a history for another;
//! - it grants no capability the user did not: a folder a recorded run was
//!   granted is granted again only when the user names it again
//!   (`allowed_dirs`, `--allow-dir`); clocks and random numbers, which read
//!   nothing of the user's, are granted as recorded;
//! - its limits are the recorded ones within ceilings ([`MAX_MEMORY_BYTES`],
//!   [`MAX_DEADLINE`], the runtime's defaults for answer sizes and logs): a
//!   report asking for more is refused, not obeyed;
//! - it runs at most [`MAX_PROCESSORS`] processors, and the report itself is
//!   read within a size cap by the front end.
//!
//! Nothing a replay reads is written anywhere; what it shows of an answer
//! is the edit summary of the record's own shape.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use agent_host_core::Message;
use agent_host_core::extractive::ExtractiveSummarizer;
use agent_host_core::format::{Format, Limits as HistoryLimits};
use agent_host_core::message::document_id_before;
use agent_host_core::pipeline::{self, PipelineConfig};
use agent_host_core::session::Checkpoint;
use agent_host_core::{HeuristicCounter, TokenCounter};
use agent_host_runtime::{
    AnswerRecord, EditDifference, HistoryDigest, Limits, Outcome, ProcessorOptions,
    ProcessorReport, RECORD_VERSION, RecordedContext, RecordedServices, RunOptions, RunRecord,
    Runtime, RuntimeConfig,
};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::EngineError;
use crate::transcript;

/// The most processors one replay runs.
pub const MAX_PROCESSORS: usize = 64;
/// The most linear memory a report may ask for a processor.
pub const MAX_MEMORY_BYTES: usize = 4 << 30;
/// The longest deadline a report may ask for a processor.
pub const MAX_DEADLINE: std::time::Duration = std::time::Duration::from_secs(60);

/// Where a recorded run's history came from, which says where a replay
/// finds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HistoryKind {
    /// A file, at `source`.
    File,
    /// Standard input: a replay needs the history given again.
    Stdin,
    /// The sample built into the binary.
    Sample,
    /// A stored session: a replay needs its log given as a file.
    Session,
}

/// The history a recorded run read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedHistory {
    /// Where it came from.
    pub kind: HistoryKind,
    /// Its path (a file), or what it was (`stdin`, `session KEY`, ...).
    pub source: String,
    /// The format it was read as.
    pub format: String,
    /// Its digest, as read (native JSONL; see the runtime's `record`).
    pub digest: HistoryDigest,
}

/// What a run report records of the run as a whole, for a replay: the
/// history, the pipeline that made the processors' input from it, and the
/// clock. Each processor's own record is in its report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecordedRun {
    /// The record's shape (the runtime's [`RECORD_VERSION`]).
    pub version: u32,
    /// The history read.
    pub history: RecordedHistory,
    /// The pipeline's settings.
    pub pipeline: PipelineConfig,
    /// The latest checkpoint of the history, when it was a session's.
    #[serde(default)]
    pub checkpoint: Option<Checkpoint>,
    /// The time of the run (the pipeline's and every processor's `now`).
    pub now: DateTime<Utc>,
    /// The pipeline's view: the first processor's input.
    pub view: HistoryDigest,
}

impl RecordedRun {
    /// The record of a run over `log` (read from `kind`/`source` as
    /// `format`), fitted by `pipeline` at `now` into `view`.
    pub fn new(
        history: (HistoryKind, &str, Format),
        log: &[Message],
        pipeline: &PipelineConfig,
        checkpoint: Option<&Checkpoint>,
        now: DateTime<Utc>,
        view: &[Message],
    ) -> RecordedRun {
        let (kind, source, format) = history;
        RecordedRun {
            version: RECORD_VERSION,
            history: RecordedHistory {
                kind,
                source: source.to_owned(),
                format: format.to_string(),
                digest: HistoryDigest::of(log),
            },
            pipeline: pipeline.clone(),
            checkpoint: checkpoint.cloned(),
            now,
            view: HistoryDigest::of(view),
        }
    }
}

/// A run report, as a replay reads it: the run's record and each
/// processor's report (other fields are ignored).
#[derive(Clone, Debug, Deserialize)]
pub struct ReplayReport {
    /// The run's record; absent from reports written without one.
    #[serde(default)]
    pub replay: Option<RecordedRun>,
    /// The processors' reports, in order.
    #[serde(default)]
    pub processors: Vec<ProcessorReport>,
}

/// What a replay is given beyond the report.
#[derive(Clone, Debug, Default)]
pub struct ReplayOptions {
    /// The history to read instead of the recorded one (required when it
    /// came from standard input or a session).
    pub history: Option<PathBuf>,
    /// The folders the user lets a replay grant again.
    pub allowed_dirs: Vec<PathBuf>,
    /// Where compiled components are cached.
    pub cache_dir: Option<PathBuf>,
    /// The limits on the history read.
    pub limits: HistoryLimits,
}

/// What a replay found.
#[derive(Clone, Debug, Serialize)]
pub struct ReplayOutcome {
    /// Where the history was read from.
    pub history: String,
    /// Its digest.
    pub history_sha256: String,
    /// What the pipeline made of it, against the record; `None` when it
    /// made the recorded view.
    pub pipeline: Option<Difference>,
    /// Each processor, in order.
    pub processors: Vec<ProcessorReplay>,
}

impl ReplayOutcome {
    /// Whether every stage gave its recorded answer.
    pub fn reproduced(&self) -> bool {
        self.pipeline.is_none()
            && self
                .processors
                .iter()
                .all(|p| matches!(p.verdict, Verdict::Same))
    }

    /// Whether every difference is in a processor whose record says it was
    /// not deterministic (a clock, randomness, a file, a denied call).
    pub fn differs_only_where_nondeterministic(&self) -> bool {
        self.pipeline.is_none()
            && self.processors.iter().all(|p| match p.verdict {
                Verdict::Differs(_) => !p.deterministic,
                _ => true,
            })
    }
}

/// One processor's replay.
#[derive(Clone, Debug, Serialize)]
pub struct ProcessorReplay {
    /// Its name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// The SHA-256 of its component.
    pub hash: String,
    /// Whether its recorded run was deterministic.
    pub deterministic: bool,
    /// The functions that made its recorded run nondeterministic, and those
    /// it was refused.
    pub nondeterministic: Vec<String>,
    /// Its answer's digest and size, as recorded.
    pub answer: Option<AnswerRecord>,
    /// What the replay found (`verdict`, and `differences` when it differs).
    #[serde(flatten)]
    pub verdict: Verdict,
}

/// What a processor's replay found.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "verdict", content = "differences", rename_all = "snake_case")]
pub enum Verdict {
    /// The same answer, byte for byte, and the same output.
    Same,
    /// Something differs: what, in the order checked.
    Differs(Vec<Difference>),
    /// Not run: a stage before it differed, so its input would too.
    NotRun,
}

/// One difference between a recorded run and its replay.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "what", rename_all = "snake_case")]
pub enum Difference {
    /// The input differs (a history, a view, an earlier processor's output).
    Input {
        /// Recorded.
        recorded: HistoryDigest,
        /// Replayed.
        replayed: HistoryDigest,
    },
    /// A field of the run context differs.
    Context {
        /// The field.
        field: String,
        /// Recorded.
        recorded: String,
        /// Replayed.
        replayed: String,
    },
    /// The answers differ.
    Answer {
        /// The recorded answer's digest.
        recorded: String,
        /// The replayed answer's digest.
        replayed: String,
        /// Where the edit summaries first differ.
        first: EditDifference,
    },
    /// One run gave an answer and the other none, or they failed apart.
    Outcome {
        /// Recorded: the outcome and its error.
        recorded: String,
        /// Replayed.
        replayed: String,
    },
    /// The host-service calls differ in number (a call the record holds
    /// was not made; one it does not hold stops the call instead).
    Services {
        /// Calls recorded.
        recorded: usize,
        /// Calls the replay made.
        replayed: usize,
    },
    /// The histories after the answer differ.
    Output {
        /// Recorded.
        recorded: HistoryDigest,
        /// Replayed.
        replayed: HistoryDigest,
    },
}

/// Replays `report`. An error is a replay that could not be made (a bad
/// report, a missing or changed history or component, a refused grant or
/// limit); a made replay that found differences is an `Ok` whose
/// [`ReplayOutcome::reproduced`] is false.
pub fn replay(
    report: &ReplayReport,
    options: &ReplayOptions,
) -> Result<ReplayOutcome, EngineError> {
    let bad =
        |why: String| EngineError::InvalidInput(format!("the report cannot be replayed: {why}"));
    let run = report.replay.as_ref().ok_or_else(|| {
        bad("it holds no replay record (write one with `agent-host run --report FILE`; a batch or a turn's report holds none)".into())
    })?;
    if run.version != RECORD_VERSION {
        return Err(bad(format!(
            "its record is version {}, this agent-host reads version {RECORD_VERSION}",
            run.version
        )));
    }
    if report.processors.is_empty() {
        return Err(bad("it ran no processor".into()));
    }
    if report.processors.len() > MAX_PROCESSORS {
        return Err(bad(format!(
            "it lists {} processors, more than the {MAX_PROCESSORS} a replay runs",
            report.processors.len()
        )));
    }
    let mut planned = Vec::with_capacity(report.processors.len());
    for (i, p) in report.processors.iter().enumerate() {
        let record = p.record.as_deref().ok_or_else(|| {
            bad(format!(
                "processor #{} (`{}`) has no record of its call",
                i + 1,
                p.name
            ))
        })?;
        if record.version != RECORD_VERSION {
            return Err(bad(format!(
                "processor #{} (`{}`) has a record of version {}",
                i + 1,
                p.name,
                record.version
            )));
        }
        let options = processor_options(p, record, &options.allowed_dirs)?;
        planned.push((p, record, options));
    }

    let (mut log, shown) = read_history(&run.history, options)?;
    let mut digest = HistoryDigest::of(&log);
    if digest != run.history.digest {
        // A run recorded before documents' derived ids were hashed with
        // XXH3: the history read as that version read it.
        let earlier: Vec<Message> = log
            .iter()
            .map(|m| {
                let mut m = m.clone();
                if let Some(id) = document_id_before(&m.id, &m.text()) {
                    m.id = id;
                }
                m
            })
            .collect();
        if HistoryDigest::of(&earlier) == run.history.digest {
            (log, digest) = (earlier, run.history.digest.clone());
        }
    }
    if digest != run.history.digest {
        return Err(EngineError::InvalidInput(format!(
            "the history {shown} is not the one the report records: its SHA-256 is {} ({} messages), \
             the report's {} ({} messages); give the recorded history with --history",
            digest.sha256, digest.messages, run.history.digest.sha256, run.history.digest.messages
        )));
    }

    let counter = HeuristicCounter::default();
    let summarizer = ExtractiveSummarizer::default();
    let compaction = pipeline::compact(
        &log,
        run.checkpoint.as_ref(),
        &run.pipeline,
        &counter as &dyn TokenCounter,
        Some(&summarizer as &dyn agent_host_core::summarize::Summarizer),
        run.now,
    );
    let view = compaction.view;
    let view_digest = HistoryDigest::of(&view);
    let mut outcome = ReplayOutcome {
        history: shown,
        history_sha256: digest.sha256,
        pipeline: (view_digest != run.view).then(|| Difference::Input {
            recorded: run.view.clone(),
            replayed: view_digest,
        }),
        processors: Vec::with_capacity(planned.len()),
    };

    let runtime = Runtime::new(RuntimeConfig {
        cache_dir: options.cache_dir.clone(),
        ..RuntimeConfig::default()
    })
    .map_err(|e| EngineError::Internal(format!("cannot start the sandbox runtime: {e:#}")))?;
    let runtime = Arc::new(runtime);
    let mut messages = view;
    let mut stopped = outcome.pipeline.is_some();
    for (report, record, processor_options) in planned {
        let mut replayed = ProcessorReplay {
            name: report.name.clone(),
            version: report.version.clone(),
            hash: report.hash.clone(),
            deterministic: record.deterministic,
            nondeterministic: record
                .sources
                .nondeterministic
                .iter()
                .chain(&record.sources.denied)
                .cloned()
                .collect(),
            answer: record.answer.clone(),
            verdict: Verdict::NotRun,
        };
        if stopped {
            outcome.processors.push(replayed);
            continue;
        }
        let processor = load(&runtime, report, processor_options)?;
        // The host services answer as they did, from the record.
        let services = Arc::new(RecordedServices::new(record.services.clone()));
        let out = runtime.run_with(
            std::slice::from_ref(&processor),
            &record.context.run_info(),
            messages,
            &RunOptions { record: true },
            services,
        );
        messages = out.messages;
        let new_report = out.reports.into_iter().next();
        let differences = match &new_report {
            Some(r) => compare(report, record, r),
            None => vec![Difference::Outcome {
                recorded: outcome_text(report),
                replayed: "not called".into(),
            }],
        };
        if differences.is_empty() {
            replayed.verdict = Verdict::Same;
        } else {
            replayed.verdict = Verdict::Differs(differences);
            stopped = true;
        }
        outcome.processors.push(replayed);
    }
    Ok(outcome)
}

/// The options a recorded call ran under, checked against what a report
/// may ask: its folders must be among `allowed_dirs`, its limits under the
/// ceilings.
fn processor_options(
    report: &ProcessorReport,
    record: &RunRecord,
    allowed_dirs: &[PathBuf],
) -> Result<ProcessorOptions, EngineError> {
    let refuse = |why: String| {
        EngineError::InvalidInput(format!(
            "the report cannot be replayed: processor `{}` {why}",
            report.name
        ))
    };
    let allowed: Vec<PathBuf> = allowed_dirs
        .iter()
        .filter_map(|d| d.canonicalize().ok())
        .collect();
    for dir in &record.grants.read_dirs {
        let granted = dir
            .canonicalize()
            .is_ok_and(|canonical| allowed.contains(&canonical));
        if !granted {
            return Err(refuse(format!(
                "was granted a read of the folder {} in the recorded run, and a report cannot grant \
                 a folder: add --allow-dir {} to replay it, if you trust the report and the component",
                dir.display(),
                dir.display()
            )));
        }
    }
    check_limits(&record.limits).map_err(refuse)?;
    // The configuration is passed as the exact text recorded; the runtime
    // refuses one that is not JSON, as it would have at the run.
    Ok(ProcessorOptions {
        config: Some(record.config.clone()),
        limits: record.limits.clone(),
        grants: record.grants.clone(),
        on_failure: record.on_failure,
        on_invalid: record.on_invalid,
    })
}

/// Refuses limits over the ceilings a report may ask for.
fn check_limits(limits: &Limits) -> Result<(), String> {
    let defaults = Limits::default();
    let checks = [
        ("memory_bytes", limits.memory_bytes, MAX_MEMORY_BYTES),
        (
            "deadline (ms)",
            usize::try_from(limits.deadline.as_millis()).unwrap_or(usize::MAX),
            usize::try_from(MAX_DEADLINE.as_millis()).unwrap_or(usize::MAX),
        ),
        (
            "table_elements",
            limits.table_elements,
            defaults.table_elements.saturating_mul(10),
        ),
        (
            "instances",
            limits.instances,
            defaults.instances.saturating_mul(10),
        ),
        ("max_items", limits.max_items, defaults.max_items),
        (
            "max_output_bytes",
            limits.max_output_bytes,
            defaults.max_output_bytes,
        ),
        (
            "max_log_lines",
            limits.max_log_lines,
            defaults.max_log_lines.saturating_mul(10),
        ),
    ];
    for (name, value, ceiling) in checks {
        if value > ceiling {
            return Err(format!(
                "asks for a {name} of {value}, over the {ceiling} a replayed report may ask for"
            ));
        }
    }
    Ok(())
}

/// Reads the history a replay runs: `options.history`, else the recorded
/// one (a file, or the sample); returns it and where it came from.
fn read_history(
    recorded: &RecordedHistory,
    options: &ReplayOptions,
) -> Result<(Vec<Message>, String), EngineError> {
    let format: Option<Format> = recorded.format.parse().ok();
    let path: PathBuf = match (&options.history, recorded.kind) {
        (Some(path), _) => path.clone(),
        (None, HistoryKind::Sample) => {
            let loaded = transcript::sample();
            return Ok((loaded.transcript.messages, loaded.source));
        }
        (None, HistoryKind::File) => PathBuf::from(&recorded.source),
        (None, HistoryKind::Stdin | HistoryKind::Session) => {
            return Err(EngineError::InvalidInput(format!(
                "the recorded run read its history from {}: give that history with --history FILE",
                recorded.source
            )));
        }
    };
    if path == Path::new("-") {
        return Err(EngineError::InvalidInput(
            "a replay reads its history from a file, not standard input".into(),
        ));
    }
    match std::fs::metadata(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(EngineError::NotFound(format!(
                "the history {} is missing (the report records it there); give it with --history FILE",
                path.display()
            )));
        }
        _ => {}
    }
    let loaded = transcript::load(&path, format, &options.limits)
        .map_err(|e| EngineError::InvalidInput(format!("{e:#}")))?;
    Ok((loaded.transcript.messages, loaded.source))
}

/// Loads the component a report names, refusing it when it is missing or
/// is not the recorded one.
fn load(
    runtime: &Runtime,
    report: &ProcessorReport,
    options: ProcessorOptions,
) -> Result<agent_host_runtime::Processor, EngineError> {
    let path = Path::new(&report.source);
    if std::fs::symlink_metadata(path).is_err() {
        return Err(EngineError::NotFound(format!(
            "the component of processor `{}` is missing: nothing at {} (sha256 {})",
            report.name, report.source, report.hash
        )));
    }
    let bytes = runtime
        .read_processor_file(path)
        .map_err(|e| EngineError::InvalidInput(format!("{e:#}")))?;
    let hash = agent_host_runtime::sha256_hex(&bytes);
    if hash != report.hash {
        return Err(EngineError::InvalidInput(format!(
            "the component of processor `{}` at {} has changed since the recorded run: its SHA-256 \
             is {hash}, the report's {}; a replay checks only the component that ran",
            report.name, report.source, report.hash
        )));
    }
    runtime
        .load(&report.source, &bytes, options)
        .map_err(|e| EngineError::ProcessorLoad {
            path: path.to_owned(),
            message: format!("{e:#}"),
        })
}

/// The recorded outcome of a call, for a difference.
fn outcome_text(report: &ProcessorReport) -> String {
    let outcome = match report.outcome {
        Outcome::Applied => "applied",
        Outcome::Repaired => "repaired",
        Outcome::Failed => "failed",
    };
    match &report.error {
        Some(e) => format!("{outcome}: {e}"),
        None => outcome.to_owned(),
    }
}

/// What differs between a recorded call and its replay, in the order a
/// reader wants it: the input, the context, the answer, the outcome, the
/// output.
fn compare(
    recorded: &ProcessorReport,
    record: &RunRecord,
    replayed: &ProcessorReport,
) -> Vec<Difference> {
    let mut out = Vec::new();
    let Some(new) = replayed.record.as_deref() else {
        return vec![Difference::Outcome {
            recorded: outcome_text(recorded),
            replayed: "no record was made".into(),
        }];
    };
    if new.input != record.input {
        out.push(Difference::Input {
            recorded: record.input.clone(),
            replayed: new.input.clone(),
        });
    }
    out.extend(context_differences(&record.context, &new.context));
    if let (Some(a), Some(b)) = (&record.answer, &new.answer)
        && let Some(first) = a.first_difference(b)
    {
        out.push(Difference::Answer {
            recorded: a.sha256.clone(),
            replayed: b.sha256.clone(),
            first,
        });
    }
    let (was, now) = (outcome_text(recorded), outcome_text(replayed));
    if was != now || record.answer.is_some() != new.answer.is_some() {
        out.push(Difference::Outcome {
            recorded: was,
            replayed: now,
        });
    }
    let same_calls = new.services.len() == record.services.len()
        && new
            .services
            .iter()
            .zip(&record.services)
            .all(|(a, b)| a.same_call(b));
    if !same_calls {
        out.push(Difference::Services {
            recorded: record.services.len(),
            replayed: new.services.len(),
        });
    }
    if new.output != record.output {
        out.push(Difference::Output {
            recorded: record.output.clone(),
            replayed: new.output.clone(),
        });
    }
    out
}

fn context_differences(a: &RecordedContext, b: &RecordedContext) -> Vec<Difference> {
    let fields: [(&str, String, String); 9] = [
        (
            "session_key",
            format!("{:?}", a.session_key),
            format!("{:?}", b.session_key),
        ),
        ("agent", format!("{:?}", a.agent), format!("{:?}", b.agent)),
        ("model", format!("{:?}", a.model), format!("{:?}", b.model)),
        (
            "context_window",
            a.context_window.to_string(),
            b.context_window.to_string(),
        ),
        ("budget", a.budget.to_string(), b.budget.to_string()),
        (
            "total_tokens",
            a.total_tokens.to_string(),
            b.total_tokens.to_string(),
        ),
        ("turn", a.turn.to_string(), b.turn.to_string()),
        ("usage", format!("{:?}", a.usage), format!("{:?}", b.usage)),
        ("now", a.now.to_rfc3339(), b.now.to_rfc3339()),
    ];
    fields
        .into_iter()
        .filter(|(_, x, y)| x != y)
        .map(|(field, recorded, replayed)| Difference::Context {
            field: field.to_owned(),
            recorded,
            replayed,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_over_a_ceiling_are_refused_by_name() {
        assert!(check_limits(&Limits::default()).is_ok());
        let greedy = Limits {
            memory_bytes: MAX_MEMORY_BYTES + 1,
            ..Limits::default()
        };
        let why = check_limits(&greedy).unwrap_err();
        assert!(why.contains("memory_bytes"), "{why}");
        let slow = Limits {
            deadline: std::time::Duration::from_secs(3600),
            ..Limits::default()
        };
        assert!(check_limits(&slow).unwrap_err().contains("deadline"));
    }

    #[test]
    fn a_context_difference_names_the_field() {
        let a = RecordedContext {
            session_key: None,
            agent: None,
            model: None,
            context_window: 8000,
            budget: 6000,
            total_tokens: 10,
            turn: 1,
            usage: agent_host_core::Usage::default(),
            now: DateTime::from_timestamp(1_700_000_000, 0).unwrap(),
        };
        assert!(context_differences(&a, &a).is_empty());
        let b = RecordedContext {
            budget: 5000,
            ..a.clone()
        };
        assert_eq!(
            context_differences(&a, &b),
            [Difference::Context {
                field: "budget".into(),
                recorded: "6000".into(),
                replayed: "5000".into()
            }]
        );
    }
}
