//! The redactor over the raw text of the corpus' histories (`../shared/corpus`
//! beside the checkout, or `AGENT_HOST_CORPUS`), natively: the default kinds,
//! and the default kinds with e-mail addresses. Each file is redacted whole,
//! 20 times; the median run is reported with its throughput.
//!
//! Run: `cargo bench -p redact-secrets --bench scan` (in `processors/`).

#![allow(missing_docs)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use redact_secrets::{Config, Redactor};

const RUNS: usize = 20;

fn corpus_texts() -> Option<Vec<String>> {
    let dir = std::env::var_os("AGENT_HOST_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus")
        });
    let mut files = Vec::new();
    for sub in std::fs::read_dir(&dir).ok()? {
        let sub = sub.ok()?.path();
        if sub.is_dir() {
            for file in std::fs::read_dir(&sub).ok()? {
                files.push(file.ok()?.path());
            }
        }
    }
    files.retain(|p| p.extension().is_some_and(|e| e == "json" || e == "jsonl"));
    files.sort();
    Some(
        files
            .iter()
            .filter_map(|p| std::fs::read_to_string(p).ok())
            .collect(),
    )
}

fn main() {
    let Some(texts) = corpus_texts() else {
        eprintln!("SKIPPED: no corpus beside this checkout (set AGENT_HOST_CORPUS)");
        return;
    };
    let bytes: usize = texts.iter().map(String::len).sum();
    for (name, config) in [
        ("default kinds", Config::default()),
        (
            "with e-mails",
            Config {
                emails: true,
                ..Config::default()
            },
        ),
    ] {
        let redactor = Redactor::new(&config).expect("the configuration is valid");
        let mut times: Vec<Duration> = Vec::with_capacity(RUNS);
        let mut changed = 0;
        for _ in 0..RUNS {
            let start = Instant::now();
            changed = texts
                .iter()
                .filter(|t| redactor.redact(std::hint::black_box(t)).is_some())
                .count();
            times.push(start.elapsed());
        }
        times.sort();
        let median = times[RUNS / 2];
        println!(
            "redact {name}: {} files, {bytes} bytes, {changed} changed: median {:.2} ms, {:.0} MiB/s (min {:.2} ms)",
            texts.len(),
            median.as_secs_f64() * 1e3,
            bytes as f64 / median.as_secs_f64() / 1_048_576.0,
            times[0].as_secs_f64() * 1e3,
        );
    }
}
