//! The core pipeline on the real transcripts of the corpus, each fitted to an
//! 8,000-token window (issue 23, "Speed against the Python peers").
//!
//! - `pipeline_8k`: `pipeline::compact` (repair, doom loop, pruning, the
//!   extractive summary, packing, truncation, validation) over every history,
//!   parsed beforehand and cloned outside the timing with their token counts
//!   cold, as a freshly read history has them;
//! - `end_to_end_8k`: the same from the files' text: parse, compact, write the
//!   view (as OpenAI messages for the tau-bench runs, native JSONL for the
//!   Claude Code sessions, which are import-only); each log is read for the
//!   run alone, so it is given away (`pipeline::compact_owned`, which moves
//!   what reaches the view unchanged instead of copying it), as in every
//!   `end_to_end` bench;
//! - `parse`: the parse alone, the floor of `end_to_end_8k`;
//! - `tau_parse`, `tau_end_to_end_8k`: the same over the 200 tau-bench runs
//!   only, the inputs `benches/peers/trim_messages.py` gives langchain-core
//!   (`benches/peers/run.sh` runs both in one go);
//! - `tau_trim_end_to_end_8k`: the peer's work, like for like: parse, repair
//!   and pack (`PipelineConfig::repair_only`: no doom loops, pruning,
//!   summary or truncation), and the view written as compact JSON, as the
//!   peer's `json.dumps` writes it (`tau_end_to_end_8k` writes it indented,
//!   as `format::write` does);
//! - `summarize_long_whole`: the conversations of more than 30 messages,
//!   each summarized whole at 600 words.
//!
//! The throughput is over the histories' bytes as read from disk.
//!
//! Skipped, saying so, when the corpus is not beside this checkout (set
//! `AGENT_HOST_CORPUS`).
//!
//! Run: `cargo bench -p agent-host-core --bench corpus`

// criterion's macros generate undocumented items.
#![allow(missing_docs)]

use std::hint::black_box;
use std::path::PathBuf;

use agent_host_core::budget::BudgetConfig;
use agent_host_core::extractive::ExtractiveSummarizer;
use agent_host_core::format::{self, Format, openai};
use agent_host_core::pipeline::{PipelineConfig, compact, compact_owned};
use agent_host_core::summarize::{DEFAULT_MAX_WORDS, Summarizer, SummaryRequest};
use agent_host_core::{HeuristicCounter, Message};
use chrono::{TimeZone, Utc};
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use serde_json::Value;

/// The window every history is fitted to.
const WINDOW: u32 = 8_000;

/// A history as read from disk: its format and its text.
struct Input {
    format: Format,
    text: String,
}

fn corpus_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("AGENT_HOST_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/corpus"));
    dir.is_dir().then_some(dir)
}

/// The 200 tau-bench runs, each as its own OpenAI document, and the three
/// Claude Code sessions.
fn inputs(dir: &std::path::Path) -> Vec<Input> {
    let tau = std::fs::read_to_string(dir.join("tau-bench-gpt4o-airline/gpt-4o-airline.json"))
        .expect("the tau-bench file");
    let runs: Vec<Value> = serde_json::from_str(&tau).expect("tau-bench JSON");
    let mut out: Vec<Input> = runs
        .iter()
        .map(|run| Input {
            format: Format::OpenAi,
            text: run["traj"].to_string(),
        })
        .collect();
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir.join("claude-code-sessions-ccv"))
        .expect("the Claude Code folder")
        .map(|entry| entry.expect("a folder entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    files.sort();
    for path in files {
        out.push(Input {
            format: Format::ClaudeCode,
            text: std::fs::read_to_string(&path).expect("a Claude Code session"),
        });
    }
    out
}

fn written_format(read: Format) -> Format {
    match read {
        Format::ClaudeCode => Format::Jsonl,
        other => other,
    }
}

/// An input's messages, read as the benches time it.
fn read(input: &Input) -> Vec<Message> {
    format::parse(input.format, black_box(&input.text))
        .expect("parses")
        .messages
}

fn bench(c: &mut Criterion) {
    let Some(dir) = corpus_dir() else {
        eprintln!("SKIPPED: no corpus beside this checkout (set AGENT_HOST_CORPUS)");
        return;
    };
    let inputs = inputs(&dir);
    let bytes: usize = inputs.iter().map(|i| i.text.len()).sum();
    let histories: Vec<Vec<Message>> = inputs
        .iter()
        .map(|i| {
            format::parse(i.format, &i.text)
                .expect("a corpus history parses")
                .messages
        })
        .collect();
    let messages: usize = histories.iter().map(Vec::len).sum();
    eprintln!(
        "corpus: {} histories, {bytes} bytes, {messages} messages",
        inputs.len()
    );
    let counter = HeuristicCounter::default();
    let summarizer = ExtractiveSummarizer::default();
    let config = PipelineConfig {
        budget: BudgetConfig::for_window(WINDOW),
        ..PipelineConfig::default()
    };
    let now = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();

    let mut group = c.benchmark_group("corpus");
    group.sample_size(10);
    group.throughput(Throughput::Bytes(bytes as u64));
    group.bench_function("parse", |b| {
        b.iter(|| inputs.iter().map(|i| read(i).len()).sum::<usize>())
    });
    group.bench_function("pipeline_8k", |b| {
        b.iter_batched(
            || histories.clone(),
            |histories| {
                histories
                    .iter()
                    .map(|log| {
                        compact(log, None, &config, &counter, Some(&summarizer), now)
                            .view
                            .len()
                    })
                    .sum::<usize>()
            },
            BatchSize::LargeInput,
        )
    });
    group.bench_function("end_to_end_8k", |b| {
        b.iter(|| {
            inputs
                .iter()
                .map(|i| {
                    let log = read(i);
                    let view =
                        compact_owned(log, None, &config, &counter, Some(&summarizer), now).view;
                    format::write(written_format(i.format), &view)
                        .expect("writes")
                        .len()
                })
                .sum::<usize>()
        })
    });
    group.finish();

    // The tau-bench runs alone: the inputs `benches/peers/trim_messages.py`
    // gives langchain-core's `trim_messages` (`benches/peers/run.sh` runs both).
    let tau: Vec<&Input> = inputs
        .iter()
        .filter(|i| i.format == Format::OpenAi)
        .collect();
    let tau_bytes: usize = tau.iter().map(|i| i.text.len()).sum();
    let mut group = c.benchmark_group("corpus");
    group.sample_size(10);
    group.throughput(Throughput::Bytes(tau_bytes as u64));
    group.bench_function("tau_parse", |b| {
        b.iter(|| tau.iter().map(|i| read(i).len()).sum::<usize>())
    });
    // Like for like with the peer: repair and packing only (what
    // `trim_messages` does), the view written compact, as `json.dumps` writes
    // it (with no spaces after `,` and `:`, which `json.dumps` adds).
    let trim = PipelineConfig::repair_only(BudgetConfig::for_window(WINDOW));
    group.bench_function("tau_trim_end_to_end_8k", |b| {
        b.iter(|| {
            tau.iter()
                .map(|i| {
                    let log = read(i);
                    let view = compact_owned(log, None, &trim, &counter, None, now).view;
                    openai::write_compact(&view).expect("writes").len()
                })
                .sum::<usize>()
        })
    });
    group.bench_function("tau_end_to_end_8k", |b| {
        b.iter(|| {
            tau.iter()
                .map(|i| {
                    let log = read(i);
                    let view =
                        compact_owned(log, None, &config, &counter, Some(&summarizer), now).view;
                    format::write(i.format, &view).expect("writes").len()
                })
                .sum::<usize>()
        })
    });
    group.finish();

    // The long conversations whole, each summarized in one call: the most
    // facts for the summary to choose from.
    let long: Vec<&Vec<Message>> = histories.iter().filter(|h| h.len() > 30).collect();
    let long_bytes: usize = inputs
        .iter()
        .zip(&histories)
        .filter(|(_, h)| h.len() > 30)
        .map(|(i, _)| i.text.len())
        .sum();
    let mut group = c.benchmark_group("corpus");
    group.sample_size(10);
    group.throughput(Throughput::Bytes(long_bytes as u64));
    group.bench_function("summarize_long_whole", |b| {
        b.iter(|| {
            long.iter()
                .map(|messages| {
                    summarizer
                        .summarize(&SummaryRequest {
                            messages,
                            previous: None,
                            partials: &[],
                            max_words: DEFAULT_MAX_WORDS,
                        })
                        .expect("summarizes")
                        .len()
                })
                .sum::<usize>()
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
