//! Tool-call pairing on hostile histories: every pass must be linear.
//!
//! Histories of N = 1,000, 10,000 and 100,000 tool calls (see `shape`):
//!
//! - `parallel`: one assistant message makes N calls and N small results
//!   answer them, newest first (at N = 100,000, 18 MB as JSON lines: the
//!   shape of the 150,000-call answer of the hardening report);
//! - `unanswered`: one assistant message makes N calls that nothing answers;
//! - `turns`: N turns of one call and its result;
//! - `loops`: N/3 runs of three identical calls, each a doom loop;
//! - `parallel_loops`: the same runs, all made by one assistant message.
//!
//! Groups: `validate`, `repair` (the input is cloned inside the timing, so
//! `clone` is the floor to read it against) and `doom_loop` (warnings
//! injected into a clone). Linear means time(100,000) / time(1,000) near 100;
//! a quadratic pass shows near 10,000.
//!
//! Run: `cargo bench -p agent-host-core --bench pairing`

// criterion's macros generate undocumented items.
#![allow(missing_docs)]

use std::hint::black_box;

use agent_host_core::Message;
use agent_host_core::doom_loop::{DoomLoopConfig, inject_warnings};
use agent_host_core::repair::repair;
use agent_host_core::validate::validate;
use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};

const SIZES: [usize; 3] = [1_000, 10_000, 100_000];

/// A tool result of about 40 bytes of text.
fn result(call: usize) -> Message {
    Message::tool_result(
        format!("call_{call}"),
        "read",
        format!("ok: line {call:08} of the listing"),
    )
    .with_id(format!("r{call}"))
}

/// The history of one hostile shape with `n` calls.
fn shape(name: &str, n: usize) -> Vec<Message> {
    let mut log = vec![Message::user("go").with_id("u")];
    match name {
        "parallel" | "unanswered" => {
            let mut call = Message::assistant("").with_id("a");
            for i in 0..n {
                call.push_tool_call(format!("call_{i}"), "read", "{}");
            }
            log.push(call);
            if name == "parallel" {
                log.extend((0..n).rev().map(result));
            }
            log.push(Message::user("and?").with_id("u2"));
        }
        "turns" => {
            for i in 0..n {
                let mut call = Message::assistant("").with_id(format!("a{i}"));
                call.push_tool_call(format!("call_{i}"), "read", format!("{{\"n\":{i}}}"));
                log.push(call);
                log.push(result(i));
            }
        }
        "loops" => {
            for i in 0..n {
                if i % 3 == 0 {
                    log.push(Message::user("again").with_id(format!("u{i}")));
                }
                let mut call = Message::assistant("").with_id(format!("a{i}"));
                call.push_tool_call(format!("call_{i}"), "ls", "{}");
                log.push(call);
                log.push(result(i));
            }
        }
        "parallel_loops" => {
            let mut call = Message::assistant("").with_id("a");
            for i in 0..n {
                call.push_tool_call(format!("call_{i}"), format!("tool_{}", i / 3), "{}");
            }
            log.push(call);
            log.extend((0..n).map(result));
        }
        _ => unreachable!("unknown shape {name}"),
    }
    log
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("validate");
    group.sample_size(10);
    for name in ["parallel", "unanswered", "turns"] {
        for n in SIZES {
            let history = shape(name, n);
            group.bench_with_input(BenchmarkId::new(name, n), &history, |b, h| {
                b.iter(|| black_box(validate(h)));
            });
        }
    }
    group.finish();

    let mut group = c.benchmark_group("repair");
    group.sample_size(10);
    for name in ["parallel", "unanswered", "turns"] {
        for n in SIZES {
            let history = shape(name, n);
            group.bench_with_input(BenchmarkId::new(name, n), &history, |b, h| {
                b.iter_batched(
                    || (),
                    |()| black_box(repair(h.clone())),
                    BatchSize::SmallInput,
                );
            });
        }
    }
    for n in SIZES {
        let history = shape("parallel", n);
        group.bench_with_input(BenchmarkId::new("clone", n), &history, |b, h| {
            b.iter(|| black_box(h.clone()));
        });
    }
    group.finish();

    let mut group = c.benchmark_group("doom_loop");
    group.sample_size(10);
    let config = DoomLoopConfig::default();
    for name in ["loops", "parallel_loops"] {
        for n in SIZES {
            let history = shape(name, n);
            group.bench_with_input(BenchmarkId::new(name, n), &history, |b, h| {
                b.iter(|| {
                    let mut h = h.clone();
                    black_box(inject_warnings(&mut h, &config))
                });
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
