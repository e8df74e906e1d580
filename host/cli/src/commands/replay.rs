//! `agent-host replay REPORT`: a recorded run's processors run again on the
//! same history, under their recorded context, configuration, grants,
//! limits and clock, each answer checked byte for byte against its record.
//! The work is the engine's (`agent_host_engine::replay`); this renders it.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::Args;

use agent_host_engine::replay::{
    self, Difference, ReplayOptions, ReplayOutcome, ReplayReport, Verdict,
};

use crate::term::safe;

/// The largest report a replay reads.
pub const MAX_REPORT_BYTES: u64 = 64 << 20;

/// The options of `agent-host replay`.
#[derive(Debug, Args)]
#[command(after_help = "\
Exit codes: 0 every answer is the same, byte for byte; 4 an answer differs; 5 only answers of
processors whose recorded run was not deterministic (a clock, randomness, a file, a denied
call) differ; 65 the report, the history or a component is not what the report records (a
changed SHA-256, a refused grant or limit); 1 a history or component is missing.

A report is treated as a stranger's file: a component or history it names is used only when
its SHA-256 is the recorded one, a folder grant is repeated only with --allow-dir, and limits
over the replay's ceilings are refused.

Examples:
  agent-host run --input chat.jsonl --processor target/processors/filter.wasm --report run.json
  agent-host replay run.json
  agent-host replay run.json --history moved/chat.jsonl")]
pub struct ReplayArgs {
    /// The report `agent-host run --report` wrote.
    #[arg(value_name = "REPORT")]
    report: PathBuf,
    /// The history the run read, when the report's cannot be read again (standard input, a
    /// session, a file since moved); its SHA-256 must be the recorded one.
    #[arg(long, value_name = "FILE")]
    history: Option<PathBuf>,
    /// Grant again a folder the recorded run granted (a report cannot grant one by itself).
    #[arg(long = "allow-dir", value_name = "PATH")]
    allow_dirs: Vec<PathBuf>,
    /// Print what the replay found as JSON.
    #[arg(long)]
    json: bool,
    /// Where compiled processors are cached (default: the user cache folder).
    #[arg(long, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    /// Compile processors every time instead of caching them.
    #[arg(long, conflicts_with = "cache_dir")]
    no_cache: bool,
    #[command(flatten)]
    limits: crate::commands::LimitArgs,
}

/// A replay that was made and found an answer that differs from its record.
#[derive(Debug)]
pub struct ReplayDiffers {
    /// Whether every difference is in a processor whose recorded run was not
    /// deterministic.
    pub only_nondeterministic: bool,
    message: String,
}

impl std::fmt::Display for ReplayDiffers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ReplayDiffers {}

/// Runs `agent-host replay`.
pub fn run(args: &ReplayArgs, out: &mut dyn Write) -> Result<()> {
    let value = read_report(&args.report)?;
    let shown = args.report.display().to_string();
    // A batch's report holds one run report per history.
    let runs: Vec<(String, serde_json::Value)> = match value.get("histories") {
        Some(serde_json::Value::Array(histories)) => {
            if args.history.is_some() {
                bail!(
                    "{shown} is a batch's report: --history names one history, so replay each without it"
                );
            }
            histories
                .iter()
                .enumerate()
                .map(|(i, h)| (format!("{shown} history #{}", i + 1), h.clone()))
                .collect()
        }
        _ => vec![(shown.clone(), value)],
    };
    let options = ReplayOptions {
        history: args.history.clone(),
        allowed_dirs: args.allow_dirs.clone(),
        cache_dir: crate::commands::run::cache_dir(args.cache_dir.as_deref(), args.no_cache),
        limits: args.limits.limits(),
    };
    let mut outcomes = Vec::with_capacity(runs.len());
    for (name, value) in runs {
        let report: ReplayReport = serde_json::from_value(value).map_err(|e| {
            anyhow::Error::new(agent_host_engine::EngineError::InvalidInput(format!(
                "{name} is not a run report agent-host can replay: {e}"
            )))
        })?;
        let outcome =
            replay::replay(&report, &options).with_context(|| format!("replaying {name}"))?;
        if !args.json {
            render(&name, &outcome, out)?;
        }
        outcomes.push(outcome);
    }
    if args.json {
        let text = if outcomes.len() == 1 {
            serde_json::to_string_pretty(&outcomes[0])?
        } else {
            serde_json::to_string_pretty(&outcomes)?
        };
        writeln!(out, "{text}")?;
    }
    let processors: usize = outcomes.iter().map(|o| o.processors.len()).sum();
    let differing: Vec<&replay::ProcessorReplay> = outcomes
        .iter()
        .flat_map(|o| &o.processors)
        .filter(|p| matches!(p.verdict, Verdict::Differs(_)))
        .collect();
    let pipelines = outcomes.iter().filter(|o| o.pipeline.is_some()).count();
    if differing.is_empty() && pipelines == 0 {
        if !args.json {
            writeln!(
                out,
                "replayed {processors} processor call(s): every answer is the same, byte for byte"
            )?;
        }
        return Ok(());
    }
    let only_nondeterministic = outcomes
        .iter()
        .all(ReplayOutcome::differs_only_where_nondeterministic);
    let mut message = if pipelines > 0 && differing.is_empty() {
        "the pipeline made another view of the history than the recorded run".to_owned()
    } else {
        format!(
            "{} of {processors} processor call(s) gave another answer than the recorded run: {}",
            differing.len(),
            differing
                .iter()
                .map(|p| format!("`{}`", safe(&p.name)))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    if only_nondeterministic {
        message.push_str(" (their recorded runs were not deterministic)");
    }
    Err(ReplayDiffers {
        only_nondeterministic,
        message,
    }
    .into())
}

/// Reads a report: a regular file of at most [`MAX_REPORT_BYTES`], JSON.
fn read_report(path: &Path) -> Result<serde_json::Value> {
    let shown = path.display();
    let meta =
        std::fs::metadata(path).with_context(|| format!("cannot read the report {shown}"))?;
    if !meta.is_file() {
        bail!("cannot read the report {shown}: it is not a regular file");
    }
    let file =
        std::fs::File::open(path).with_context(|| format!("cannot read the report {shown}"))?;
    let mut bytes = Vec::new();
    file.take(MAX_REPORT_BYTES + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read the report {shown}"))?;
    let invalid = |why: String| {
        anyhow::Error::new(agent_host_engine::EngineError::InvalidInput(format!(
            "the report {shown} {why}"
        )))
    };
    if bytes.len() as u64 > MAX_REPORT_BYTES {
        return Err(invalid(format!(
            "is over the {} MiB a replay reads",
            MAX_REPORT_BYTES >> 20
        )));
    }
    serde_json::from_slice(&bytes).map_err(|e| invalid(format!("is not JSON: {e}")))
}

fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

/// Writes what a replay found, one line a stage, a difference indented
/// under its stage.
fn render(name: &str, outcome: &ReplayOutcome, out: &mut dyn Write) -> Result<()> {
    writeln!(
        out,
        "replaying {}: history {} (sha256 {}), {} processor(s)",
        safe(name),
        safe(&outcome.history),
        short(&outcome.history_sha256),
        outcome.processors.len()
    )?;
    match &outcome.pipeline {
        None => writeln!(out, "  pipeline: the recorded view")?,
        Some(d) => {
            writeln!(out, "  pipeline: ANOTHER VIEW than the recorded run")?;
            explain(d, out)?;
        }
    }
    for p in &outcome.processors {
        let who = format!(
            "{} {} (sha256 {})",
            safe(&p.name),
            safe(&p.version),
            short(&p.hash)
        );
        let determinism = if p.deterministic {
            "deterministic".to_owned()
        } else {
            format!(
                "not deterministic: {}",
                safe(&p.nondeterministic.join(", "))
            )
        };
        match &p.verdict {
            Verdict::Same => {
                let answer = p.answer.as_ref().map_or_else(
                    || "no answer, as recorded".to_owned(),
                    |a| {
                        format!(
                            "the same answer (sha256 {}, {} items)",
                            short(&a.sha256),
                            a.items
                        )
                    },
                );
                writeln!(out, "  {who}: {answer}; {determinism}")?;
            }
            Verdict::Differs(differences) => {
                writeln!(out, "  {who}: ANOTHER ANSWER than recorded; {determinism}")?;
                for d in differences {
                    explain(d, out)?;
                }
            }
            Verdict::NotRun => writeln!(out, "  {who}: not run (an earlier stage differed)")?,
        }
    }
    Ok(())
}

/// One difference, as indented lines.
fn explain(d: &Difference, out: &mut dyn Write) -> Result<()> {
    match d {
        Difference::Input { recorded, replayed } => writeln!(
            out,
            "    input: recorded sha256 {} ({} messages), replayed sha256 {} ({} messages)",
            short(&recorded.sha256),
            recorded.messages,
            short(&replayed.sha256),
            replayed.messages
        )?,
        Difference::Context {
            field,
            recorded,
            replayed,
        } => writeln!(
            out,
            "    context {field}: recorded {}, replayed {}",
            safe(recorded),
            safe(replayed)
        )?,
        Difference::Answer {
            recorded,
            replayed,
            first,
        } => {
            writeln!(
                out,
                "    answer: recorded sha256 {}, replayed sha256 {}",
                short(recorded),
                short(replayed)
            )?;
            let edit = |e: &Option<String>| {
                e.as_deref().map_or_else(
                    || "(the answer ends)".to_owned(),
                    |e| format!("`{}`", safe(e)),
                )
            };
            if first.recorded.is_none() && first.replayed.is_none() {
                if first.beyond_summary {
                    writeln!(
                        out,
                        "    the edits differ past the first {} the record keeps",
                        first.index
                    )?;
                } else {
                    writeln!(
                        out,
                        "    every recorded edit is the same: the recorded digest does not match its own edits (was the report edited?)"
                    )?;
                }
            } else {
                writeln!(
                    out,
                    "    first differing edit (#{}): recorded {}, replayed {}",
                    first.index + 1,
                    edit(&first.recorded),
                    edit(&first.replayed)
                )?;
            }
        }
        Difference::Outcome { recorded, replayed } => writeln!(
            out,
            "    outcome: recorded {}, replayed {}",
            safe(recorded),
            safe(replayed)
        )?,
        Difference::Services { recorded, replayed } => writeln!(
            out,
            "    host services: {recorded} call(s) recorded, {replayed} made"
        )?,
        Difference::Output { recorded, replayed } => writeln!(
            out,
            "    output: recorded sha256 {} ({} messages), replayed sha256 {} ({} messages)",
            short(&recorded.sha256),
            recorded.messages,
            short(&replayed.sha256),
            replayed.messages
        )?,
    }
    Ok(())
}
