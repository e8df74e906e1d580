//! The native half of `core/js/bench.sh`: the Rust core on the corpus's
//! histories, the same operations `bench.mjs` times through the npm package
//! (load with detection; the pipeline at an 8,000-token budget; writing the
//! view as OpenAI messages; all three in a row). Prints one JSON object:
//! each operation's median time for one pass over every history, in ms.
//!
//!   cargo bench -p agent-host-core-js --bench native -- CORPUS_DIR

use std::path::PathBuf;
use std::time::Instant;

use agent_host_core::budget::BudgetConfig;
use agent_host_core::extractive::ExtractiveSummarizer;
use agent_host_core::format::{self, Format};
use agent_host_core::pipeline::{self, PipelineConfig};
use agent_host_core::{HeuristicCounter, Message};
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

/// Every history of the corpus as text: each tau-bench conversation, each
/// Claude Code session (the differential test's cases).
fn histories(dir: &std::path::Path) -> Vec<String> {
    let tau = std::fs::read_to_string(dir.join("tau-bench-gpt4o-airline/gpt-4o-airline.json"))
        .expect("the tau-bench file");
    let tau: Value = serde_json::from_str(&tau).expect("tau-bench is JSON");
    let mut texts: Vec<String> = tau
        .as_array()
        .expect("a list of runs")
        .iter()
        .map(|run| run["traj"].to_string())
        .collect();
    let mut sessions: Vec<PathBuf> = std::fs::read_dir(dir.join("claude-code-sessions-ccv"))
        .expect("the Claude Code sessions")
        .map(|e| e.expect("a folder entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    sessions.sort();
    texts.extend(
        sessions
            .iter()
            .map(|p| std::fs::read_to_string(p).expect("a session")),
    );
    texts
}

/// The median of `runs` passes of `pass`, in milliseconds.
fn median_ms(runs: usize, mut pass: impl FnMut()) -> f64 {
    pass(); // warm-up
    let mut times: Vec<f64> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            pass();
            start.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

fn main() {
    let dir = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with("--"))
        .map(PathBuf::from)
        .expect("usage: native CORPUS_DIR");
    let texts = histories(&dir);
    let now: DateTime<Utc> = "2025-06-01T09:00:00Z".parse().expect("a time");
    let config = PipelineConfig {
        budget: BudgetConfig::for_window(8000),
        ..PipelineConfig::default()
    };
    let counter = HeuristicCounter::default();
    let summarizer = ExtractiveSummarizer::default();
    let load = |t: &str| -> Vec<Message> {
        format::parse_detected(t)
            .expect("a corpus history reads")
            .1
            .messages
    };
    let compact =
        |m: &[Message]| pipeline::compact(m, None, &config, &counter, Some(&summarizer), now).view;
    let loaded: Vec<Vec<Message>> = texts.iter().map(|t| load(t)).collect();
    let views: Vec<Vec<Message>> = loaded.iter().map(|m| compact(m)).collect();
    let runs = 15;
    let result = json!({
        "histories": texts.len(),
        "bytes": texts.iter().map(String::len).sum::<usize>(),
        "load": median_ms(runs, || for t in &texts { std::hint::black_box(load(t)); }),
        "compact": median_ms(runs, || for m in &loaded { std::hint::black_box(compact(m)); }),
        "dump": median_ms(runs, || for v in &views {
            std::hint::black_box(format::write(Format::OpenAi, v).expect("written"));
        }),
        "all": median_ms(runs, || for t in &texts {
            let view = compact(&load(t));
            std::hint::black_box(format::write(Format::OpenAi, &view).expect("written"));
        }),
    });
    println!("{result}");
}
