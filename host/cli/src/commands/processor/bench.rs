//! `agent-host processor bench`: the time of a processor's calls over one
//! history, after a warmup.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Instant;

use agent_host_core::format::Format;
use anyhow::bail;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use serde_json::json;

use super::{CacheArgs, SandboxArgs, load};
use crate::commands::run::ProcessorFailed;
use agent_host_runtime::RunInfo;

/// The options of `agent-host processor bench`.
#[derive(Debug, Args)]
#[command(after_help = "\
Each call is timed twice: the whole run (the history handed to the guest, the call, the answer
checked and applied) and the guest alone (a fresh instance and the call; the runtime does not
time instantiation apart from the call). The difference is the host's share.

Examples:
  agent-host processor bench target/processors/keep-last-turns.wasm
  agent-host processor bench filter.wasm --input chat.json --processor-config '{\"roles\":[\"user\"]}' \\
      --iterations 200 --json")]
pub struct BenchArgs {
    /// The processor component, or a Rust processor crate's folder (built first).
    #[arg(value_name = "FILE.wasm|CRATE")]
    file: PathBuf,
    /// The history to run it over (`-` for standard input); the built-in sample session when
    /// not given.
    #[arg(long, short, value_name = "FILE")]
    input: Option<PathBuf>,
    /// The history's format; detected when not given.
    #[arg(
        long,
        value_name = "jsonl|openai|anthropic|responses|claude-code|codex|gemini-cli|pydantic-ai|langchain",
        requires = "input"
    )]
    format: Option<Format>,
    #[command(flatten)]
    limits: crate::commands::LimitArgs,
    /// Timed calls.
    #[arg(long, short = 'n', value_name = "N", default_value_t = 50,
          value_parser = clap::value_parser!(u32).range(1..))]
    iterations: u32,
    /// Untimed calls before the timed ones.
    #[arg(long, value_name = "N", default_value_t = 5)]
    warmup: u32,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    sandbox: SandboxArgs,
    #[command(flatten)]
    cache: CacheArgs,
}

/// Statistics of a set of timings, in milliseconds.
#[derive(Debug, Serialize)]
struct Stats {
    count: usize,
    min: f64,
    median: f64,
    mean: f64,
    p95: f64,
    max: f64,
}

impl Stats {
    /// The statistics of `samples`; `None` when there are none.
    fn of(samples: &[f64]) -> Option<Self> {
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let last = *sorted.last()?;
        // The nearest rank: the smallest sample at or above 95% of them.
        let rank = (n * 95).div_ceil(100).max(1);
        let median = if n % 2 == 1 {
            sorted[n / 2]
        } else {
            (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
        };
        Some(Stats {
            count: n,
            min: sorted[0],
            median,
            mean: sorted.iter().sum::<f64>() / n as f64,
            p95: sorted[rank - 1],
            max: last,
        })
    }
}

/// Runs `agent-host processor bench`.
pub(super) fn run(args: &BenchArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let history = match &args.input {
        Some(path) => {
            agent_host_engine::transcript::load(path, args.format, &args.limits.limits())?
        }
        None => agent_host_engine::transcript::sample(),
    };
    let source = history.source;
    let messages = history.transcript.messages;
    if messages.is_empty() {
        bail!("{source} holds no messages: give a history with at least one message (--input)");
    }
    let loaded = load(&args.file, &args.cache, args.sandbox.options())?;
    let p = loaded.processor();
    let info = RunInfo::default();

    let total = u64::from(args.warmup) + u64::from(args.iterations);
    let bar = if std::io::stderr().is_terminal() {
        ProgressBar::new(total).with_style(
            ProgressStyle::with_template("{msg:>8} {wide_bar} {pos}/{len} calls, {eta} left")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        )
    } else {
        ProgressBar::hidden()
    };
    let mut run_ms = Vec::with_capacity(args.iterations as usize);
    let mut guest_ms = Vec::with_capacity(args.iterations as usize);
    let mut last = None;
    for i in 0..total {
        let warming = i < u64::from(args.warmup);
        bar.set_message(if warming { "warmup" } else { "timing" });
        let input = messages.clone();
        let started = Instant::now();
        let outcome = loaded.runtime().run(std::slice::from_ref(p), &info, input);
        let elapsed = started.elapsed();
        bar.inc(1);
        if let Some(failure) = outcome.failure {
            bar.abandon();
            return Err(ProcessorFailed(format!(
                "call {} of {total} over {source} failed: processor `{}` (sha256 {}) {}; \
                 `agent-host processor check` runs it over other shapes of history",
                i + 1,
                failure.name,
                &failure.hash[..12],
                super::cause_line(&failure.cause)
            ))
            .into());
        }
        let report = outcome.reports.into_iter().next();
        if !warming {
            run_ms.push(super::ms(elapsed));
            guest_ms.push(report.as_ref().map_or(0.0, |r| r.time_ms));
        }
        last = report.map(|r| (r, outcome.messages.len()));
    }
    bar.finish_and_clear();

    let (Some(run), Some(guest), Some((report, messages_out))) =
        (Stats::of(&run_ms), Stats::of(&guest_ms), last)
    else {
        bail!("no call was timed (--iterations must be at least 1)");
    };
    if args.json {
        let report = json!({
            "processor": {
                "name": p.name(),
                "version": p.description().version,
                "sha256": p.hash(),
                "file": args.file.display().to_string(),
            },
            "load": {
                "ms": super::ms(p.load_time()),
                "compile": p.compile(),
            },
            "input": {
                "source": source,
                "messages": messages.len(),
                "tokens": report.tokens_before,
            },
            "output": {
                "messages": messages_out,
                "tokens": report.tokens_after,
            },
            "warmup": args.warmup,
            "iterations": args.iterations,
            "run_ms": run,
            "guest_ms": guest,
            "peak_memory_bytes": report.peak_memory_bytes,
        });
        writeln!(out, "{}", agent_host_core::format::to_pretty(&report)?)?;
        return Ok(());
    }
    writeln!(out, "{}", super::identity(p))?;
    writeln!(
        out,
        "input    {source}: {} messages, {} tokens",
        messages.len(),
        report.tokens_before
    )?;
    writeln!(
        out,
        "output   {messages_out} messages, {} tokens; peak guest memory {:.1} MiB",
        report.tokens_after,
        report.peak_memory_bytes as f64 / f64::from(1 << 20)
    )?;
    writeln!(
        out,
        "{} timed calls after {} warmup calls, in ms:",
        args.iterations, args.warmup
    )?;
    writeln!(
        out,
        "{:<28} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "", "min", "median", "mean", "p95", "max"
    )?;
    for (label, s) in [
        ("per call (whole run)", &run),
        ("  guest (instance + call)", &guest),
    ] {
        writeln!(
            out,
            "{label:<28} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3}",
            s.min, s.median, s.mean, s.p95, s.max
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statistics_use_the_nearest_rank_and_the_middle() {
        let s = Stats::of(&[5.0, 1.0, 3.0, 2.0, 4.0]).unwrap();
        assert_eq!((s.min, s.median, s.mean, s.max), (1.0, 3.0, 3.0, 5.0));
        assert_eq!(s.p95, 5.0);
        let s = Stats::of(&[4.0, 1.0]).unwrap();
        assert_eq!(s.median, 2.5);
        let many: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(Stats::of(&many).unwrap().p95, 95.0);
        assert!(Stats::of(&[]).is_none());
    }
}
