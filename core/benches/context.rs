//! The context engine on long sessions.
//!
//! - `build_view/100000`: the view of a 100,000-message session with cached
//!   token counts (target: under 2 ms), next to 1,000 messages.
//! - `turn/{1000,100000}`: one more turn through the whole pipeline (repair,
//!   doom loop, pruning, summarization check, packing, truncation,
//!   validation) on a session in steady state, i.e. with a checkpoint covering
//!   all but its last 20 messages (target: 100,000 / 1,000 under 2).
//! - `turn_no_summary/{1000,10000,100000}`: the same with summarization off
//!   and no checkpoint, where the pipeline must still only read the tail (at
//!   most twice the budget): flat once a session is longer than that.
//! - `clone_window_baseline`: cloning the 20 newest messages natively, the
//!   floor for a turn.
//!
//! Run: `cargo bench -p agent-host-core --bench context`

// criterion's macros generate undocumented items.
#![allow(missing_docs)]

use std::hint::black_box;

use agent_host_core::budget::{BudgetConfig, build_view};
use agent_host_core::extractive::ExtractiveSummarizer;
use agent_host_core::pipeline::{PipelineConfig, compact};
use agent_host_core::session::Checkpoint;
use agent_host_core::{HeuristicCounter, Message, TokenCounter};
use chrono::{TimeZone, Utc};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};

/// A coding session of `n` messages: turns of user, tool call, result, answer.
fn session(n: usize) -> Vec<Message> {
    let mut log =
        vec![Message::system("You are a careful coding agent. ".repeat(20)).with_id("sys")];
    let mut t = 0;
    while log.len() < n {
        log.push(
            Message::user(format!(
                "Please look at src/module_{t}.rs and fix the failing test {t}."
            ))
            .with_id(format!("u{t}")),
        );
        let mut call = Message::assistant("Reading the file first.").with_id(format!("a{t}"));
        call.push_tool_call(
            format!("c{t}"),
            "read_file",
            format!("{{\"path\":\"src/module_{t}.rs\"}}"),
        );
        log.push(call);
        log.push(
            Message::tool_result(
                format!("c{t}"),
                "read_file",
                "fn main() { println!(\"hello\"); }\n".repeat(30),
            )
            .with_id(format!("r{t}")),
        );
        log.push(
            Message::assistant(
                format!("Fixed test {t}: the assertion compared the wrong field. ").repeat(3),
            )
            .with_id(format!("b{t}")),
        );
        t += 1;
    }
    log.truncate(n);
    log
}

/// The session with a checkpoint covering all but its last `tail` messages.
fn with_checkpoint(mut log: Vec<Message>, tail: usize) -> (Vec<Message>, Checkpoint) {
    // Cover up to a turn start so that the tail begins with a user message.
    let mut cut = log.len() - tail;
    while log[cut].role != agent_host_core::Role::User {
        cut -= 1;
    }
    let covers: Vec<String> = log[1..cut].iter().map(|m| m.id.clone()).collect();
    let mut boundary = Message::user("[Earlier conversation summarized]").with_id("cp-b");
    let mut summary =
        Message::assistant("## Current State\nTests fixed up to here.").with_id("cp-s");
    boundary.summary = true;
    summary.summary = true;
    log.push(boundary);
    log.push(summary);
    let cp = Checkpoint {
        usage: None,
        boundary_id: "cp-b".into(),
        summary_id: "cp-s".into(),
        covers,
        created: Utc.timestamp_opt(0, 0).unwrap(),
    };
    log.push(Message::user("And the next one?").with_id("new"));
    (log, cp)
}

fn warm(log: &[Message], counter: &dyn TokenCounter) {
    for m in log {
        m.tokens(counter);
    }
}

fn bench(c: &mut Criterion) {
    let counter = HeuristicCounter::default();
    let budget = BudgetConfig::default();
    let now = Utc.with_ymd_and_hms(2025, 6, 1, 0, 0, 0).unwrap();
    let summarizer = ExtractiveSummarizer::default();

    let mut group = c.benchmark_group("build_view");
    for n in [1_000, 10_000, 100_000] {
        let log = session(n);
        warm(&log, &counter);
        group.bench_with_input(BenchmarkId::from_parameter(n), &log, |b, log| {
            b.iter(|| build_view(black_box(log), None, &budget, &counter).len())
        });
    }
    group.finish();

    let mut group = c.benchmark_group("turn");
    let config = PipelineConfig::default();
    for n in [1_000, 100_000] {
        let (log, cp) = with_checkpoint(session(n), 20);
        warm(&log, &counter);
        group.bench_with_input(BenchmarkId::from_parameter(n), &log, |b, log| {
            b.iter(|| {
                compact(
                    black_box(log),
                    Some(&cp),
                    &config,
                    &counter,
                    Some(&summarizer),
                    now,
                )
                .view
                .len()
            })
        });
    }
    group.finish();

    let mut group = c.benchmark_group("turn_no_summary");
    let config = PipelineConfig {
        summary: None,
        ..PipelineConfig::default()
    };
    for n in [1_000, 10_000, 100_000] {
        let log = session(n);
        warm(&log, &counter);
        group.bench_with_input(BenchmarkId::from_parameter(n), &log, |b, log| {
            b.iter(|| {
                compact(black_box(log), None, &config, &counter, None, now)
                    .view
                    .len()
            })
        });
    }
    group.finish();

    let log = session(1_000);
    c.bench_function("clone_window_baseline", |b| {
        b.iter(|| black_box(&log)[log.len() - 20..].to_vec())
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
