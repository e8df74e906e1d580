//! `agent-host run`: a history through the core pipeline, then through
//! sandboxed processors, validated, written out with a provenance report.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use agent_host_core::extractive::ExtractiveSummarizer;
use agent_host_core::format::{self, Format};
use agent_host_core::pipeline::{self, Compaction, PipelineConfig, SummaryOutcome};
use agent_host_core::validate::validate;
use agent_host_core::{HeuristicCounter, tokens};
use anyhow::{Context, Result, bail};
use clap::{ArgAction, ArgMatches, Args};
use serde_json::{Value, json};

use agent_host_config::Settings;
use agent_host_engine::ProcessorChain;
use agent_host_engine::replay::HistoryKind;
use agent_host_engine::{trace, transcript};
use agent_host_runtime::{FailurePolicy, InvalidPolicy, ProcessorError, ProcessorOptions, RunInfo};

/// The options of `agent-host run`.
#[derive(Debug, Args)]
#[command(after_help = "\
Per-processor options (--processor-config, --allow-*, --on-failure, --on-invalid, --deadline-ms,
--memory-mib) apply to the --processor just before them.

Examples:
  agent-host run --input chat.json --processor keep-last-turns.wasm --processor-config '{\"turns\":2}'
  agent-host run --input - --context-limit 8000 --no-compact --report report.json < session.jsonl
  agent-host run --session telegram:123456 --context-limit 8000
  agent-host run --session work --message 'What did we decide about the cache?'
  echo 'Summarize the open tasks' | agent-host run --session work --message -")]
pub struct RunArgs {
    /// The history to read (`-` for standard input); the built-in sample session when neither
    /// this nor --session is given. With --output-dir: any number of files, folders (their
    /// files, not their subfolders) and glob patterns (`'logs/*.jsonl'`), each history run
    /// through the same processors in this one process.
    #[arg(long, short, value_name = "FILE|DIR|GLOB", num_args = 1.., action = ArgAction::Append)]
    input: Vec<PathBuf>,
    /// Batch mode: write each --input history's result to this folder, under its file name
    /// with the output format's extension; --report then writes one report for all of them.
    #[arg(long, value_name = "DIR", requires = "input", conflicts_with_all = ["output", "session"])]
    output_dir: Option<PathBuf>,
    /// Batch mode: how many histories run at once (default: the machine's cores). Each holds
    /// its own processor instances, so the processors' peak memory is up to this many times
    /// their --memory-mib. Deadlines are wall-clock time: jobs slow each other down, most of
    /// all past the number of cores, so a processor that must never be skipped wants
    /// --on-failure fail. Each history's lines, error and report entry keep the order of the
    /// inputs.
    #[arg(long, short = 'j', value_name = "N", requires = "output_dir",
          value_parser = clap::value_parser!(u16).range(1..))]
    jobs: Option<u16>,
    /// Its format; detected when not given.
    #[arg(
        long,
        value_name = "jsonl|openai|anthropic|responses|claude-code|codex|gemini-cli|pydantic-ai|langchain"
    )]
    format: Option<Format>,
    #[command(flatten)]
    limits: crate::commands::LimitArgs,
    /// Read the history of this stored session (its key within --agent, or its id) instead of
    /// --input (its latest checkpoint, if any, stands for what it summarises). Without
    /// --message nothing is appended: what the pipeline and processors make is a view for the
    /// model, not new conversation.
    #[arg(long, value_name = "KEY|ID", conflicts_with_all = ["input", "format"])]
    session: Option<String>,
    /// The agent the --session key belongs to.
    #[arg(long, value_name = "AGENT", default_value = agent_host_store::DEFAULT_AGENT, requires = "session")]
    agent: String,
    /// A processor component to run; repeat for a chain, run in order. A Rust processor
    /// crate's folder is built first (as by `agent-host processor build`).
    #[arg(long = "processor", short = 'p', value_name = "FILE.wasm|CRATE", action = ArgAction::Append)]
    processors: Vec<PathBuf>,
    /// Configuration (JSON) for the processor before it.
    #[arg(long = "processor-config", value_name = "JSON", action = ArgAction::Append)]
    processor_configs: Vec<String>,
    /// Let the processor before it read this directory (never write).
    #[arg(long = "allow-dir", value_name = "PATH", action = ArgAction::Append)]
    allow_dirs: Vec<PathBuf>,
    /// Let the processor before it read clocks (and sleep within its deadline).
    #[arg(long = "allow-clocks", action = ArgAction::Count)]
    allow_clocks: u8,
    /// Let the processor before it use random numbers.
    #[arg(long = "allow-random", action = ArgAction::Count)]
    allow_random: u8,
    /// Let the processor before it have the configured model write summaries (the host
    /// service `summarize`, contract 0.2.0). It spends your model tokens, within its
    /// --model-tokens; the processor never sees the key.
    #[arg(long = "allow-summarize", action = ArgAction::Count)]
    allow_summarize: u8,
    /// Let the processor before it count tokens with the session's tokenizer (`count-tokens`).
    #[arg(long = "allow-count-tokens", action = ArgAction::Count)]
    allow_count_tokens: u8,
    /// Let the processor before it read the long-term memory of the run's user and agent
    /// (`read-memory`; the user is --memory-user, or `user` in [memory] of agent-host.toml;
    /// the agent is --agent with --session, else `default`).
    #[arg(long = "allow-memory", action = ArgAction::Count)]
    allow_memory: u8,
    /// The model tokens (read and written) the host services of the processor before it may
    /// spend in one run (default 64000).
    #[arg(long = "model-tokens", value_name = "N", action = ArgAction::Append)]
    model_tokens: Vec<u64>,
    /// The host service calls the processor before it may make in one run (default 16).
    #[arg(long = "service-calls", value_name = "N", action = ArgAction::Append)]
    service_calls: Vec<u32>,
    /// What a failure of the processor before it does: skip it (keep its input) or fail the run.
    #[arg(long = "on-failure", value_name = "skip|fail", action = ArgAction::Append)]
    on_failure: Vec<FailurePolicy>,
    /// What an answer of the processor before it that breaks provider rules becomes.
    #[arg(long = "on-invalid", value_name = "reject|repair", action = ArgAction::Append)]
    on_invalid: Vec<InvalidPolicy>,
    /// The deadline of the processor before it, in milliseconds (default 250).
    #[arg(long = "deadline-ms", value_name = "MS", action = ArgAction::Append)]
    deadline_ms: Vec<u64>,
    /// The memory limit of the processor before it, in MiB (default 64).
    #[arg(long = "memory-mib", value_name = "MIB", action = ArgAction::Append)]
    memory_mib: Vec<usize>,
    /// Send this message as a new turn of --session to the configured model, print the reply
    /// (streamed) and store both; `-` reads it from standard input. Without a configured
    /// provider, prints the context that would be sent and stores nothing.
    #[arg(long, value_name = "TEXT", requires = "session")]
    message: Option<String>,
    /// Long-term memory: with --message, the turn recalls from and flushes into it, as in
    /// `chat`; in every run, it is what processors granted --allow-memory read. Kept beside
    /// the sessions of --store (what `agent-host memory add --user USER` writes to).
    #[command(flatten)]
    memory: crate::commands::MemoryArgs,
    #[command(flatten)]
    overrides: agent_host_config::Overrides,
    /// Only repair the history before the processors: no pruning, summary or truncation.
    #[arg(long)]
    no_compact: bool,
    /// Where to write the resulting history (standard output when not given).
    #[arg(long, short, value_name = "FILE")]
    output: Option<PathBuf>,
    /// The format to write: OpenAI chat messages unless given.
    #[arg(long, value_name = "openai|anthropic|jsonl")]
    to: Option<Format>,
    /// Write the history in the format it was read in.
    #[arg(long, conflicts_with = "to")]
    same_format: bool,
    /// Where to write the provenance report (JSON).
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    /// Where compiled processors are cached (default: the user cache folder).
    #[arg(long, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    /// Compile processors every time instead of caching them.
    #[arg(long, conflicts_with = "cache_dir")]
    no_cache: bool,
    /// Print nothing on standard error but errors.
    #[arg(long, short)]
    quiet: bool,
}

impl RunArgs {
    /// The configuration overrides given on the command line.
    pub fn overrides(&self) -> &agent_host_config::Overrides {
        &self.overrides
    }
}

/// A processor under the `fail` policy failed, or could not be loaded.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ProcessorFailed(pub String);

/// The command line is inconsistent (clap's usage errors, exit code 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// Runs `agent-host run`. `matches` are the subcommand's own matches, used
/// to tie each per-processor option to the `--processor` before it;
/// `settings.store` is the store spec `--session` reads from (see
/// [`agent_host_config::store_spec`]).
pub fn run(
    args: RunArgs,
    matches: &ArgMatches,
    settings: &Settings,
    out: &mut dyn Write,
) -> Result<()> {
    let store = settings.store.as_str();
    let mut options = per_processor_options(&args, matches)?;
    let mut processor_paths = args.processors.clone();
    if processor_paths.is_empty() {
        // No --processor: the configured chain.
        (processor_paths, options) = settings.processor_options().into_iter().unzip();
    }
    if let Some(message) = &args.message {
        let chain = processor_paths.into_iter().zip(options).collect();
        return turn(&args, message, chain, settings, out);
    }
    let chain: Vec<_> = processor_paths.into_iter().zip(options).collect();
    if let Some(dir) = &args.output_dir {
        return batch(&args, dir, &chain, settings);
    }
    let mut checkpoint = None;
    let kind = match (&args.session, args.input.as_slice()) {
        (Some(_), _) => HistoryKind::Session,
        (None, [path]) if path == Path::new("-") => HistoryKind::Stdin,
        (None, []) => HistoryKind::Sample,
        (None, _) => HistoryKind::File,
    };
    let loaded = match (&args.session, args.input.as_slice()) {
        (Some(session), _) => {
            let name = crate::commands::sessions::SessionName {
                session: session.clone(),
                agent: args.agent.clone(),
            };
            let (loaded, meta) = crate::commands::sessions::load_for_run(store, &name)?;
            checkpoint = meta.checkpoints.last().cloned();
            loaded
        }
        (None, [path]) => transcript::load(path, args.format, &args.limits.limits())?,
        (None, []) => transcript::sample(),
        (None, _) => {
            return Err(UsageError(
                "several --input histories need --output-dir (one result a history)".into(),
            )
            .into());
        }
    };
    let processed = process(
        &args,
        settings,
        loaded,
        kind,
        checkpoint.as_ref(),
        &mut std::io::stderr(),
        &Shared::new(&chain),
    )?;
    if let Some(path) = &args.report {
        let text = agent_host_core::format::to_pretty(&processed.report)?;
        std::fs::write(path, text + "\n")
            .with_context(|| format!("cannot write the report to {}", path.display()))?;
    }
    let text = processed.result?;
    match &args.output {
        Some(path) => std::fs::write(path, text)
            .with_context(|| format!("cannot write {}", path.display()))?,
        None => out.write_all(text.as_bytes())?,
    }
    Ok(())
}

/// The most histories one batch takes: a glob or folder that names more is
/// refused before anything is run.
const MAX_BATCH: usize = 100_000;

/// `run --input ... --output-dir DIR`: every history through the pipeline
/// and the same processors, loaded once (one runtime and compile cache for
/// the whole batch), `--jobs` of them at a time. A history that cannot be
/// read or run (or that hits a bug: a panic) is reported and the others go
/// on; the exit is an error when any failed. Nothing is written for a
/// failed history.
fn batch(
    args: &RunArgs,
    dir: &Path,
    chain: &[(PathBuf, ProcessorOptions)],
    settings: &Settings,
) -> Result<()> {
    let inputs = expand_inputs(&args.input)?;
    // Each result's name, checked before anything runs: two inputs must not
    // write one file.
    let mut names: std::collections::HashMap<String, &Path> = std::collections::HashMap::new();
    let mut planned = Vec::with_capacity(inputs.len());
    for input in &inputs {
        let stem = input
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .filter(|s| !s.is_empty())
            .with_context(|| format!("{}: no file name to name its result", input.display()))?;
        if let Some(other) = names.insert(stem.clone(), input) {
            return Err(UsageError(format!(
                "{} and {} would both write {}/{stem}.*: rename one, or run them apart",
                other.display(),
                input.display(),
                dir.display()
            ))
            .into());
        }
        planned.push((input, stem));
    }
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot make the output folder {}", dir.display()))?;
    let started = Instant::now();
    let shared = Shared::new(chain);
    let jobs = args
        .jobs
        .map(usize::from)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from))
        .clamp(1, planned.len().max(1));
    // One at a time, a history's lines go out as it runs; at once, they are
    // held until it and every history before it are done.
    let one = |input: &Path, stem: &str| -> Finished {
        let mut log = Vec::new();
        let mut stderr = std::io::stderr();
        let diag: &mut dyn Write = if jobs == 1 { &mut stderr } else { &mut log };
        let run = || {
            transcript::load(input, args.format, &args.limits.limits()).and_then(|loaded| {
                process(
                    args,
                    settings,
                    loaded,
                    HistoryKind::File,
                    None,
                    diag,
                    &shared,
                )
            })
        };
        // A bug in one history's run fails that history, not the batch.
        let outcome =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)).unwrap_or_else(|panic| {
                let what = panic
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "no message".into());
                Err(anyhow::anyhow!(
                    "{}: agent-host failed (a bug, please report it): {what}",
                    input.display()
                ))
            });
        let (report, error) = match outcome {
            Ok(processed) => {
                let ext = if processed.format.is_line_based() {
                    "jsonl"
                } else {
                    "json"
                };
                let path = dir.join(format!("{stem}.{ext}"));
                let result = processed.result.and_then(|text| {
                    std::fs::write(&path, text)
                        .with_context(|| format!("cannot write {}", path.display()))
                });
                let mut report = processed.report;
                report["output"]["path"] = json!(path.display().to_string());
                (report, result.err())
            }
            Err(e) => (
                json!({"input": {"source": input.display().to_string()}}),
                Some(e),
            ),
        };
        Finished { report, error, log }
    };
    let mut reports = Vec::with_capacity(planned.len());
    let (mut written, mut failed) = (0usize, 0usize);
    // Each history's lines and error are printed when it and every history
    // before it have finished: in the order of the inputs, whatever `jobs`.
    let mut emit = |(input, _): &(&PathBuf, String), done: Finished| {
        let Finished {
            mut report,
            error,
            log,
        } = done;
        let mut stderr = std::io::stderr().lock();
        let _ = stderr.write_all(&log);
        match error {
            Some(e) => {
                failed += 1;
                let why = format!("{e:#}");
                let shown = input.display().to_string();
                // Most errors name the file already.
                let _ = if why.contains(&shown) {
                    writeln!(stderr, "{}", crate::term::safe(&why))
                } else {
                    writeln!(
                        stderr,
                        "{}: {}",
                        crate::term::safe(&shown),
                        crate::term::safe(&why)
                    )
                };
                report["error"] = json!(why);
            }
            None => written += 1,
        }
        reports.push(report);
    };
    if jobs == 1 {
        for planned in &planned {
            let done = one(planned.0, &planned.1);
            emit(planned, done);
        }
    } else {
        let next = AtomicUsize::new(0);
        let (send, receive) = std::sync::mpsc::channel::<(usize, Finished)>();
        std::thread::scope(|scope| {
            for _ in 0..jobs {
                let (send, next, one, planned) = (send.clone(), &next, &one, &planned);
                scope.spawn(move || {
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some((input, stem)) = planned.get(i) else {
                            break;
                        };
                        if send.send((i, one(input, stem))).is_err() {
                            break;
                        }
                    }
                });
            }
            drop(send);
            // Finished out of order: held until the ones before it are in.
            let mut waiting = std::collections::BTreeMap::new();
            let mut due = 0;
            for (i, done) in receive {
                waiting.insert(i, done);
                while let Some(done) = waiting.remove(&due) {
                    emit(&planned[due], done);
                    due += 1;
                }
            }
        });
    }
    let elapsed = ms(started.elapsed());
    if let Some(path) = &args.report {
        let all = json!({
            "histories": reports,
            "written": written,
            "failed": failed,
            "elapsed_ms": elapsed,
        });
        std::fs::write(path, agent_host_core::format::to_pretty(&all)? + "\n")
            .with_context(|| format!("cannot write the report to {}", path.display()))?;
    }
    if !args.quiet {
        eprintln!(
            "batch: {} histories, {written} written to {}, {failed} failed, in {elapsed:.0} ms",
            reports.len(),
            crate::term::safe(&dir.display().to_string()),
        );
    }
    if failed > 0 {
        bail!(
            "{failed} of {} histories failed (each named above)",
            reports.len()
        );
    }
    Ok(())
}

/// The files `inputs` name: a file as it is, a folder's regular files (not
/// its subfolders, sorted), a glob pattern's matches (sorted); each file
/// once, in the order given. A name that is none of these, or a pattern
/// that matches nothing, is an error that names it.
fn expand_inputs(inputs: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut add = |path: PathBuf, files: &mut Vec<PathBuf>| -> Result<()> {
        if seen.insert(path.clone()) {
            if files.len() == MAX_BATCH {
                bail!("more than {MAX_BATCH} histories in one batch; split it");
            }
            files.push(path);
        }
        Ok(())
    };
    for input in inputs {
        if input == Path::new("-") {
            return Err(UsageError("--output-dir reads files, not standard input".into()).into());
        }
        match std::fs::metadata(input) {
            Ok(meta) if meta.is_dir() => {
                let mut found = Vec::new();
                for entry in std::fs::read_dir(input)
                    .with_context(|| format!("cannot list {}", input.display()))?
                {
                    let entry =
                        entry.with_context(|| format!("cannot list {}", input.display()))?;
                    // Links are followed as the user's own paths are; only
                    // regular files are histories.
                    if std::fs::metadata(entry.path()).is_ok_and(|m| m.is_file()) {
                        found.push(entry.path());
                    }
                }
                found.sort();
                if found.is_empty() {
                    bail!("{} holds no files", input.display());
                }
                for path in found {
                    add(path, &mut files)?;
                }
            }
            Ok(_) => add(input.clone(), &mut files)?,
            Err(e) => {
                let pattern = input.to_string_lossy();
                if !pattern.contains(['*', '?', '[']) {
                    return Err(e).with_context(|| format!("cannot read {}", input.display()));
                }
                let matches = glob::glob(&pattern)
                    .with_context(|| format!("--input {pattern}: not a valid glob pattern"))?;
                let mut found = Vec::new();
                for path in matches {
                    let path = path.with_context(|| format!("--input {pattern}"))?;
                    if path.is_file() {
                        found.push(path);
                    }
                }
                if found.is_empty() {
                    bail!("--input {pattern} matches no file");
                }
                found.sort();
                for path in found {
                    add(path, &mut files)?;
                }
            }
        }
    }
    Ok(files)
}

/// One history run: its report, and the text to write or why there is none
/// (a processor under `fail` failed).
struct Processed {
    report: Value,
    result: Result<String>,
    /// The output format, for the file name in batch mode.
    format: Format,
}

/// One history of a batch, run: its report, what failed, and the lines it
/// would have printed (held so that histories run at once do not mix them).
struct Finished {
    report: Value,
    error: Option<anyhow::Error>,
    log: Vec<u8>,
}

/// Runs one loaded history through the pipeline and the processors
/// (`shared` gives them, loaded by the first history that gets this far:
/// after the pipeline, so a bad history is reported before processors are
/// compiled), writing what it has to say to `diag`.
fn process(
    args: &RunArgs,
    settings: &Settings,
    loaded: transcript::Loaded,
    kind: HistoryKind,
    checkpoint: Option<&agent_host_core::Checkpoint>,
    diag: &mut dyn Write,
    shared: &Shared<'_>,
) -> Result<Processed> {
    let counter = HeuristicCounter::default();
    let source = loaded.source.clone();
    let input_format = loaded.format;
    let log = loaded.transcript.messages;
    if log.is_empty() {
        bail!("{source} holds no messages");
    }
    let input_tokens = tokens::total(&log, &counter);

    // The core pipeline: make the history fit.
    let configured = settings.pipeline_config();
    let budget = configured.budget.clone();
    let config = if args.no_compact {
        PipelineConfig::repair_only(budget.clone())
    } else {
        configured
    };
    let summarizer = ExtractiveSummarizer::default();
    let now = chrono::Utc::now();
    let pipeline_started = Instant::now();
    // With a report asked for, each step is timed too.
    let clock = trace::step_clock();
    let compaction = pipeline::compact_timed(
        &log,
        checkpoint,
        &config,
        &counter,
        Some(&summarizer),
        now,
        args.report.is_some().then_some(&clock as &dyn Fn() -> f64),
    );
    let pipeline_ms = ms(pipeline_started.elapsed());
    let pipeline_report = pipeline_json(&compaction);
    // What each stage did, for the report (the dashboard's `/reports` shows it).
    let mut stages = Vec::new();
    if args.report.is_some() {
        stages.push(trace::pipeline_stage(
            &log,
            checkpoint,
            &compaction,
            &compaction.view,
            pipeline_ms,
        ));
    }
    if !args.quiet {
        for repair in &compaction.report.repairs {
            let _ = writeln!(diag, "repaired: {}", crate::term::safe(&repair.to_string()));
        }
        let r = &compaction.report;
        let summary = match &r.summary {
            SummaryOutcome::Summarized { covered, .. } => format!("summarized {covered} messages"),
            SummaryOutcome::Failed { error, .. } => {
                format!("summary failed ({})", crate::term::safe(error))
            }
            _ => "no summary".to_owned(),
        };
        let _ = writeln!(
            diag,
            "pipeline: {} messages, {} tokens -> {} messages, {} tokens ({summary}, {} pruned, {} truncations)",
            log.len(),
            input_tokens,
            compaction.view.len(),
            r.usage.view.total(),
            r.pruned.len(),
            r.truncations.len(),
        );
    }
    let view = compaction.view;
    // What a replay needs of the run as a whole (`agent-host replay`).
    let recorded = args.report.is_some().then(|| {
        agent_host_engine::replay::RecordedRun::new(
            (kind, &source, input_format),
            &log,
            &config,
            checkpoint,
            now,
            &view,
        )
    });

    // The processors.
    let started = Instant::now();
    let mut reports = Vec::new();
    let mut failure = None;
    let mut messages = view;
    let chain = shared.chain(args)?;
    if let Some(runtime) = chain.runtime() {
        let info = RunInfo {
            context_window: budget.context_limit,
            budget: budget.available(),
            now,
            agent: args.session.is_some().then(|| args.agent.clone()),
            model: settings.provider.as_ref().map(|p| p.model.clone()),
            session_key: args.session.clone(),
        };
        let services = shared.services(args, settings, chain.processors())?;
        if args.report.is_some() {
            // One at a time, to see each one's input and output.
            // Each call recorded, for `agent-host replay`.
            let recording = agent_host_runtime::RunOptions { record: true };
            for p in chain.processors() {
                let before = messages.clone();
                let outcome = runtime.run_with(
                    std::slice::from_ref(p),
                    &info,
                    messages,
                    &recording,
                    services.clone(),
                );
                messages = outcome.messages;
                for report in &outcome.reports {
                    stages.push(trace::processor_stage(&before, &messages, report));
                }
                reports.extend(outcome.reports);
                if outcome.failure.is_some() {
                    failure = outcome.failure;
                    break;
                }
            }
        } else {
            let outcome = runtime.run_with_services(chain.processors(), &info, messages, services);
            messages = outcome.messages;
            reports = outcome.reports;
            failure = outcome.failure;
        }
    }
    let processors_ms = started.elapsed();

    if !args.quiet {
        for r in &reports {
            let _ = match &r.error {
                Some(e) => writeln!(
                    diag,
                    "{}: failed, its input kept: {}",
                    crate::term::safe(&r.name),
                    crate::term::safe(e)
                ),
                None => writeln!(
                    diag,
                    "{} {}: kept {}, dropped {}, replaced {}, inserted {}; {} -> {} tokens in {:.1} ms",
                    crate::term::safe(&r.name),
                    crate::term::safe(&r.version),
                    r.kept.len(),
                    r.dropped.len(),
                    r.replaced.len(),
                    r.inserted.len(),
                    r.tokens_before,
                    r.tokens_after,
                    r.time_ms
                ),
            };
        }
    }

    let output_format = if args.same_format {
        match input_format {
            // Import-only formats are read, not written: write native JSONL.
            f if !f.is_writable() => Format::Jsonl,
            f => f,
        }
    } else {
        args.to.unwrap_or(Format::OpenAi)
    };
    let violations = validate(&messages);
    let tokens = tokens::total(&messages, &counter);
    let report = json!({
        "input": {
            "source": source,
            "format": input_format.to_string(),
            "messages": log.len(),
            "tokens": input_tokens,
        },
        "pipeline": pipeline_report,
        "processors": reports,
        "processors_ms": ms(processors_ms),
        "stages": stages,
        "output": {
            "format": output_format.to_string(),
            "messages": messages.len(),
            "tokens": tokens,
            "violations": violations.iter().map(ToString::to_string).collect::<Vec<_>>(),
        },
        "failure": failure.as_ref().map(ToString::to_string),
        "replay": recorded,
    });
    let result = if let Some(error) = failure {
        Err(fail(error))
    } else if let Some(v) = violations.first() {
        // Every stage validates its own output, so this is a bug, not bad input.
        Err(anyhow::anyhow!(
            "the history breaks a provider rule after the run: {v}"
        ))
    } else {
        format::write(output_format, &messages)
            .with_context(|| format!("cannot write the result as {output_format}"))
    };
    Ok(Processed {
        report,
        result,
        format: output_format,
    })
}

/// What every history of a run or a batch shares, made by the first one that
/// needs it: the loaded processor chain (one runtime and compile cache) and
/// the host services (the chain is the same for every history, and the
/// services hold no state of a run: a batch opens the memory once). A chain
/// that fails to load is tried again by the next history, which fails alike.
struct Shared<'a> {
    chain: &'a [(PathBuf, ProcessorOptions)],
    loaded: Mutex<Option<ProcessorChain>>,
    services: Mutex<Option<std::sync::Arc<dyn agent_host_runtime::HostServices>>>,
}

impl<'a> Shared<'a> {
    fn new(chain: &'a [(PathBuf, ProcessorOptions)]) -> Self {
        Shared {
            chain,
            loaded: Mutex::new(None),
            services: Mutex::new(None),
        }
    }

    fn chain(&self, args: &RunArgs) -> Result<ProcessorChain> {
        let mut held = self.loaded.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(chain) = &*held {
            return Ok(chain.clone());
        }
        let cache = cache_dir(args.cache_dir.as_deref(), args.no_cache);
        let chain = load_chain(cache, self.chain, args.quiet)?;
        *held = Some(chain.clone());
        Ok(chain)
    }

    fn services(
        &self,
        args: &RunArgs,
        settings: &Settings,
        processors: &[agent_host_runtime::Processor],
    ) -> Result<std::sync::Arc<dyn agent_host_runtime::HostServices>> {
        let mut held = self.services.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(services) = &*held {
            return Ok(services.clone());
        }
        let services = host_services(args, settings, processors)?;
        *held = Some(services.clone());
        Ok(services)
    }
}

/// The host services `processors` may be granted in a run without a turn:
/// the configured provider (made only when a processor may summarize: a
/// missing key is then an error, since the user asked for the model), the
/// default token counter, and the memory of the run's user (`--memory-user`,
/// else `[memory]`'s) with the run's agent (opened only when a processor may
/// read it).
fn host_services(
    args: &RunArgs,
    settings: &Settings,
    processors: &[agent_host_runtime::Processor],
) -> Result<std::sync::Arc<dyn agent_host_runtime::HostServices>> {
    let wants = |f: fn(&agent_host_runtime::Grants) -> bool| {
        processors.iter().any(|p| f(&p.options().grants))
    };
    let handle = crate::commands::runtime_handle();
    let mut services = agent_host_engine::EngineServices::new(
        handle,
        std::sync::Arc::new(HeuristicCounter::default()),
    );
    if wants(|g| g.summarize)
        && let Some(provider) = &settings.provider
    {
        let provider =
            agent_host_provider::Provider::new(provider.clone(), &agent_host_config::env_keys)
                .context(
                    "a processor may summarize (--allow-summarize), which needs the provider",
                )?;
        services = services.with_provider(provider);
    }
    if wants(|g| g.memory)
        && let Some(user) = args.memory.user(&settings.memory)?
    {
        let memory = crate::commands::open_memory(&settings.store)?;
        services = services.with_memory(memory, user, args.agent.clone());
    }
    Ok(std::sync::Arc::new(services))
}

/// `run --session KEY --message TEXT`: one turn against the configured
/// provider, the reply printed as it streams in.
fn turn(
    args: &RunArgs,
    message: &str,
    processors: Vec<(PathBuf, agent_host_runtime::ProcessorOptions)>,
    settings: &Settings,
    out: &mut dyn Write,
) -> Result<()> {
    let text = if message == "-" {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
            .context("cannot read the message from standard input")?;
        text
    } else {
        message.to_owned()
    };
    if text.trim().is_empty() {
        return Err(UsageError("the message is empty".into()).into());
    }
    let session = args
        .session
        .as_deref()
        .context("--message needs --session")?;
    let mut config = settings.engine_config(Some(processors));
    config.agent = args.agent.clone();
    // The turn's memory, which also serves the processors' `read-memory`.
    config.memory = args.memory.config(
        &settings.memory,
        || crate::commands::open_memory(&settings.store),
        config.provider.is_some(),
    )?;
    config.cache_dir = cache_dir(args.cache_dir.as_deref(), args.no_cache);
    if args.no_compact {
        config.pipeline = PipelineConfig::repair_only(config.pipeline.budget.clone());
        config.auto_summarize = false;
    }
    // Offline, a turn only shows the context: a store that does not exist
    // yet is not created for it (an empty one stands in).
    let mut _empty = None;
    let store = match crate::commands::sessions::open_existing(&settings.store)? {
        Some(store) => store,
        None if config.provider.is_none() => {
            let dir = tempfile::tempdir().context("cannot make an empty session store")?;
            let store = crate::commands::sessions::open_store(&dir.path().to_string_lossy())?;
            _empty = Some(dir);
            store
        }
        None => crate::commands::sessions::open_store(&settings.store)?,
    };
    let engine = crate::engine_over(config, store, args.quiet)?;
    let reference = crate::commands::block_on(engine.reference(session, &args.agent))?;
    let color = crate::term::stdout();
    let request = agent_host_engine::TurnRequest::new(reference, text.trim_end_matches('\n'))
        .with_channel("cli");
    let (outcome, streamed) =
        crate::chat::stream_turn(out, color, args.quiet, move |observer| async move {
            engine.turn(request, observer).await
        })?;
    if outcome.reply.is_none() {
        // Offline: the context that would be sent, in the output format.
        if !args.quiet {
            eprintln!(
                "offline: no provider is configured; this is the context that would be sent (nothing was stored)"
            );
        }
        let format = args.to.unwrap_or(Format::OpenAi);
        let text = format::write(format, &outcome.prepared.view)
            .with_context(|| format!("cannot write the context as {format}"))?;
        match &args.output {
            Some(path) => std::fs::write(path, text)
                .with_context(|| format!("cannot write {}", path.display()))?,
            None => out.write_all(text.as_bytes())?,
        }
    } else {
        crate::chat::finish_turn(&outcome, streamed, false, color, out)?;
    }
    if let Some(path) = &args.report {
        let report = json!({
            "session": outcome.session.as_ref().map(|s| s.id),
            "pipeline": pipeline_json(&outcome.prepared.compaction),
            // The try the provider refused as too long, when there was one:
            // a checkpoint it made was stored.
            "first_attempt": outcome.first_attempt.as_ref().map(|p| pipeline_json(&p.compaction)),
            "processors": outcome.prepared.processors,
            "summarizer": outcome.prepared.summarizer.as_ref().map(|c| json!({
                "requests": c.requests,
                "input_tokens": c.input_tokens,
                "output_tokens": c.output_tokens,
                "fell_back": c.fell_back,
            })),
            "aggressive_retry": outcome.aggressive_retry,
            "reply": outcome.reply.as_ref().map(|r| json!({
                "id": r.id,
                "model": r.model,
                "usage": r.usage.as_ref().map(|u| json!({
                    "input_tokens": u.input_tokens,
                    "output_tokens": u.output_tokens,
                })),
                "tool_calls": r.tool_calls.len(),
            })),
        });
        std::fs::write(path, agent_host_core::format::to_pretty(&report)? + "\n")
            .with_context(|| format!("cannot write the report to {}", path.display()))?;
    }
    Ok(())
}

/// Where compiled processors are cached: `--cache-dir`, else the user cache
/// folder; none with `--no-cache`.
pub(crate) fn cache_dir(flag: Option<&Path>, no_cache: bool) -> Option<PathBuf> {
    if no_cache {
        None
    } else {
        flag.map(Path::to_owned)
            .or_else(agent_host_runtime::CompileCache::default_root)
    }
}

/// The processors of `chain` loaded in order into one sandbox runtime
/// (crate folders built first). A processor that cannot be loaded is a
/// [`ProcessorFailed`] naming it.
pub(crate) fn load_chain(
    cache_dir: Option<PathBuf>,
    chain: &[(PathBuf, agent_host_runtime::ProcessorOptions)],
    quiet: bool,
) -> Result<ProcessorChain> {
    let mut components = Vec::with_capacity(chain.len());
    for (path, options) in chain {
        components.push((component_of(path, quiet)?, options.clone()));
    }
    ProcessorChain::load(cache_dir, &components).map_err(|e| ProcessorFailed(e.to_string()).into())
}

/// A processor's failure under its `fail` policy, as the error that exits 3.
pub(crate) fn fail(error: ProcessorError) -> anyhow::Error {
    ProcessorFailed(format!("{error} (its failure policy is `fail`)")).into()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The pipeline's report, as JSON for the run report.
fn pipeline_json(c: &Compaction) -> Value {
    serde_json::to_value(agent_host_api::PipelineReport::from(c))
        .expect("a pipeline report is plain data")
}

/// Ties every per-processor option to the `--processor` given just before it.
fn per_processor_options(args: &RunArgs, m: &ArgMatches) -> Result<Vec<ProcessorOptions>> {
    let starts: Vec<usize> = m
        .indices_of("processors")
        .map(Iterator::collect)
        .unwrap_or_default();
    let mut options = vec![ProcessorOptions::default(); starts.len()];
    // The processor an option at command-line index `at` belongs to.
    let owner = |flag: &str, at: usize| -> Result<usize> {
        match starts.iter().rposition(|&s| s < at) {
            Some(i) => Ok(i),
            None => Err(UsageError(format!(
                "--{flag} must follow the --processor it applies to"
            ))
            .into()),
        }
    };
    // Only what was typed: a flag's default value has an index too.
    let indices = |id: &str| -> Vec<usize> {
        if m.value_source(id) != Some(clap::parser::ValueSource::CommandLine) {
            return Vec::new();
        }
        m.indices_of(id).map(Iterator::collect).unwrap_or_default()
    };

    let mut seen = vec![false; starts.len()];
    for (at, config) in indices("processor_configs")
        .into_iter()
        .zip(&args.processor_configs)
    {
        let i = owner("processor-config", at)?;
        if std::mem::replace(&mut seen[i], true) {
            return Err(UsageError(format!(
                "--processor-config is given twice for {}",
                args.processors[i].display()
            ))
            .into());
        }
        options[i].config = Some(config.clone());
    }
    for (at, dir) in indices("allow_dirs").into_iter().zip(&args.allow_dirs) {
        let i = owner("allow-dir", at)?;
        options[i].grants.read_dirs.push(dir.clone());
    }
    for at in indices("allow_clocks") {
        options[owner("allow-clocks", at)?].grants.clocks = true;
    }
    for at in indices("allow_random") {
        options[owner("allow-random", at)?].grants.random = true;
    }
    for at in indices("allow_summarize") {
        options[owner("allow-summarize", at)?].grants.summarize = true;
    }
    for at in indices("allow_count_tokens") {
        options[owner("allow-count-tokens", at)?]
            .grants
            .count_tokens = true;
    }
    for at in indices("allow_memory") {
        options[owner("allow-memory", at)?].grants.memory = true;
    }
    for (at, n) in indices("model_tokens").into_iter().zip(&args.model_tokens) {
        options[owner("model-tokens", at)?]
            .limits
            .services
            .model_tokens = *n;
    }
    for (at, n) in indices("service_calls")
        .into_iter()
        .zip(&args.service_calls)
    {
        options[owner("service-calls", at)?].limits.services.calls = *n;
    }
    for (at, policy) in indices("on_failure").into_iter().zip(&args.on_failure) {
        options[owner("on-failure", at)?].on_failure = *policy;
    }
    for (at, policy) in indices("on_invalid").into_iter().zip(&args.on_invalid) {
        options[owner("on-invalid", at)?].on_invalid = *policy;
    }
    for (at, ms) in indices("deadline_ms").into_iter().zip(&args.deadline_ms) {
        options[owner("deadline-ms", at)?].limits.deadline = Duration::from_millis(*ms);
    }
    for (at, mib) in indices("memory_mib").into_iter().zip(&args.memory_mib) {
        options[owner("memory-mib", at)?].limits.memory_bytes = mib.saturating_mul(1 << 20);
    }
    Ok(options)
}

/// The component for `--processor PATH`: PATH itself, or what building the
/// Rust processor crate in folder PATH produces.
pub(crate) fn component_of(path: &Path, quiet: bool) -> anyhow::Result<PathBuf> {
    let is_crate = path.is_dir() || path.file_name().is_some_and(|n| n == "Cargo.toml");
    if !is_crate {
        return Ok(path.to_owned());
    }
    if !quiet {
        eprintln!("building the processor crate {}", path.display());
    }
    let built = crate::commands::processor::build(&crate::commands::processor::BuildOptions {
        path: path.to_owned(),
        out_dir: None,
        packages: Vec::new(),
        debug: false,
        quiet,
        single: true,
        features: Vec::new(),
    })
    .map_err(|e| {
        ProcessorFailed(format!(
            "cannot build the processor crate {}: {e:#}",
            path.display()
        ))
    })?;
    built
        .into_iter()
        .next()
        .map(|b| b.path)
        .context("the build wrote no component")
}
