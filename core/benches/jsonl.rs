//! Parsing the native JSONL log: typed messages against `serde_json::Value`.
//!
//! The input is the real corpus (`../shared/corpus`, or `AGENT_HOST_CORPUS`)
//! converted to native lines; without it, a synthetic history of the same
//! shape. The baseline parses the same bytes, line by line, into
//! `serde_json::Value`.
//!
//! Run: `cargo bench -p agent-host-core --bench jsonl`

// criterion's macros generate undocumented items.
#![allow(missing_docs)]

use std::hint::black_box;
use std::path::PathBuf;

use agent_host_core::Message;
use agent_host_core::format::{self, Format, jsonl};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

fn corpus_dir() -> PathBuf {
    std::env::var_os("AGENT_HOST_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/corpus"))
}

/// The corpus as native JSONL, or a synthetic stand-in.
fn input() -> (String, &'static str) {
    let dir = corpus_dir();
    let mut messages: Vec<Message> = Vec::new();
    if let Ok(tau) =
        std::fs::read_to_string(dir.join("tau-bench-gpt4o-airline/gpt-4o-airline.json"))
    {
        let runs: Vec<serde_json::Value> = serde_json::from_str(&tau).expect("tau-bench JSON");
        for run in runs {
            messages.extend(
                format::openai::from_value(run["traj"].clone()).expect("tau-bench imports"),
            );
        }
        for entry in std::fs::read_dir(dir.join("claude-code-sessions-ccv"))
            .into_iter()
            .flatten()
        {
            let path = entry.expect("corpus entry").path();
            if path.extension().is_some_and(|e| e == "jsonl") {
                let text = std::fs::read_to_string(&path).expect("corpus file");
                messages.extend(
                    format::parse(Format::ClaudeCode, &text)
                        .expect("imports")
                        .messages,
                );
            }
        }
        return (jsonl::to_string(&messages), "corpus");
    }
    for i in 0..20_000 {
        let mut m = Message::assistant(format!(
            "Step {i}: checking the reservation {i:06} for the user."
        ))
        .with_id(format!("m{i}"));
        m.push_tool_call(
            format!("call_{i}"),
            "get_reservation_details",
            format!("{{\"reservation_id\":\"{i:06}\"}}"),
        );
        messages.push(m);
        messages.push(Message::tool_result(
            format!("call_{i}"),
            "get_reservation_details",
            "{\"status\":\"ok\"}".repeat(20),
        ));
    }
    (jsonl::to_string(&messages), "synthetic")
}

fn bench(c: &mut Criterion) {
    let (text, source) = input();
    let lines = text.lines().count();
    eprintln!(
        "jsonl bench input: {source}, {} bytes, {lines} lines",
        text.len()
    );
    let mut group = c.benchmark_group("jsonl_parse");
    group.throughput(Throughput::Bytes(text.len() as u64));
    group.sample_size(20);
    group.bench_function("serde_json_value_baseline", |b| {
        b.iter(|| {
            let values: Vec<serde_json::Value> = black_box(&text)
                .lines()
                .map(|l| serde_json::from_str(l).expect("valid JSON"))
                .collect();
            values
        })
    });
    group.bench_function("typed_messages", |b| {
        b.iter(|| jsonl::parse(black_box(&text)).expect("valid log"))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
