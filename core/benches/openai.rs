//! Reading OpenAI Chat Completions documents: the typed reader against the
//! generic route (`serde_json::Value`, then messages), on the same bytes.
//!
//! The input is the 200 tau-bench conversations of the real corpus
//! (`../shared/corpus`, or `AGENT_HOST_CORPUS`), each an indented JSON
//! document as a file holds it; without the corpus, synthetic conversations
//! of the same shape. Benchmarks, each over every document:
//! - `serde_json_value`: the generic parse alone (no messages made);
//! - `via_value`: the generic parse, then `openai::from_value` (the route
//!   every OpenAI file took before the typed reader);
//! - `typed`: `openai::parse`, straight from the bytes to messages;
//! - `detected`: `format::parse_detected`, what loading a file costs
//!   (detection, the limits' counts, the reader, the per-message size check).
//!
//! Run: `cargo bench -p agent-host-core --bench openai`

// criterion's macros generate undocumented items.
#![allow(missing_docs)]

use std::hint::black_box;
use std::path::PathBuf;

use agent_host_core::format::{self, openai};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::{Value, json};

fn corpus_dir() -> PathBuf {
    std::env::var_os("AGENT_HOST_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/corpus"))
}

/// The documents, and where they came from.
fn input() -> (Vec<String>, &'static str) {
    let path = corpus_dir().join("tau-bench-gpt4o-airline/gpt-4o-airline.json");
    if let Ok(tau) = std::fs::read_to_string(path) {
        let runs: Vec<Value> = serde_json::from_str(&tau).expect("tau-bench JSON");
        let docs = runs
            .iter()
            .map(|run| serde_json::to_string_pretty(&run["traj"]).expect("serializes"))
            .collect();
        return (docs, "corpus");
    }
    let docs = (0..200)
        .map(|n| {
            let mut traj = vec![json!({"role": "system", "content": "You are an airline agent."})];
            for i in 0..12 {
                traj.push(json!({"role": "user", "content": format!("Reservation {n}-{i}?")}));
                traj.push(json!({"role": "assistant", "content": null, "tool_calls": [
                    {"id": format!("call_{i}"), "type": "function",
                     "function": {"name": "get_reservation_details",
                                  "arguments": format!("{{\"reservation_id\": \"{n:03}{i:03}\"}}")}}]}));
                traj.push(json!({"role": "tool", "tool_call_id": format!("call_{i}"),
                    "name": "get_reservation_details", "content": "{\"status\": \"ok\"}".repeat(40)}));
            }
            serde_json::to_string_pretty(&traj).expect("serializes")
        })
        .collect();
    (docs, "synthetic")
}

fn bench(c: &mut Criterion) {
    let (docs, source) = input();
    let bytes: usize = docs.iter().map(String::len).sum();
    eprintln!(
        "openai bench input: {source}, {} documents, {bytes} bytes",
        docs.len()
    );
    // The two routes read the same messages.
    for doc in &docs {
        let via = openai::from_value(serde_json::from_str(doc).unwrap()).unwrap();
        assert_eq!(openai::parse(doc).unwrap(), via);
    }
    let mut group = c.benchmark_group("openai_parse");
    group.throughput(Throughput::Bytes(bytes as u64));
    group.sample_size(20);
    group.bench_function("serde_json_value", |b| {
        b.iter(|| {
            for doc in &docs {
                black_box(serde_json::from_str::<Value>(black_box(doc)).expect("valid JSON"));
            }
        })
    });
    group.bench_function("via_value", |b| {
        b.iter(|| {
            for doc in &docs {
                let value = serde_json::from_str(black_box(doc)).expect("valid JSON");
                black_box(openai::from_value(value).expect("reads"));
            }
        })
    });
    group.bench_function("typed", |b| {
        b.iter(|| {
            for doc in &docs {
                black_box(openai::parse(black_box(doc)).expect("reads"));
            }
        })
    });
    group.bench_function("detected", |b| {
        b.iter(|| {
            for doc in &docs {
                black_box(format::parse_detected(black_box(doc)).expect("reads"));
            }
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
