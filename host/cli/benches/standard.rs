//! Each standard processor in the sandbox (end to end: instantiate, hand the
//! history over, run, apply the edits, validate), built against contract
//! 0.2.0 (the history a resource read on demand) and against 0.1.0 (the
//! whole history copied in), next to the same Rust code run natively on the
//! same history in the same run, plus the cost of cloning the history
//! natively (the least any processor that receives a copy pays), on
//! histories of 100, 1,000 and 10,000 messages.
//!
//! `cargo bench -p agent-host --bench standard`
//!
//! The native baseline is the processor crate itself compiled for the host
//! and called through the SDK's native path (`agent_host_guest::testing`), on
//! messages converted to the SDK's types before the timing starts.
#![allow(missing_docs)]

use std::time::Duration;

use agent_host_core::{HeuristicCounter, Message, TokenCounter};
use agent_host_guest as guest;
use agent_host_runtime::{ProcessorOptions, RunInfo, Runtime, RuntimeConfig};
use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};

mod histories;

use histories::{config, histories, util};

/// A processor and its native twin (measured with [`config`]'s
/// configuration).
struct Case {
    name: &'static str,
    native: fn(&str, Vec<guest::Message>) -> guest::Result<Vec<guest::Message>>,
}

const CASES: [Case; 8] = [
    Case {
        name: "keep-last-turns",
        native: guest::testing::run::<keep_last_turns::KeepLastTurns>,
    },
    Case {
        name: "token-budget",
        native: guest::testing::run::<token_budget::TokenBudget>,
    },
    Case {
        name: "filter",
        native: guest::testing::run::<filter::Filter>,
    },
    Case {
        name: "redact-secrets",
        native: guest::testing::run::<redact_secrets::RedactSecrets>,
    },
    Case {
        name: "truncate-tool-results",
        native: guest::testing::run::<truncate_tool_results::TruncateToolResults>,
    },
    Case {
        name: "strip-media",
        native: guest::testing::run::<strip_media::StripMedia>,
    },
    Case {
        name: "strip-reasoning",
        native: guest::testing::run::<strip_reasoning::StripReasoning>,
    },
    Case {
        name: "dedupe-tool-results",
        native: guest::testing::run::<dedupe_tool_results::DedupeToolResults>,
    },
];

/// The SDK's view of a host message (what the guest receives).
fn to_guest(m: &Message, counter: &dyn TokenCounter) -> guest::Message {
    use agent_host_core::Role;
    use agent_host_core::message::{MediaRef, Part};
    let mut g = guest::Message::new(
        match m.role {
            Role::System => guest::Role::System,
            Role::User => guest::Role::User,
            Role::Assistant => guest::Role::Assistant,
            Role::Tool => guest::Role::Tool,
        },
        m.content.clone(),
    );
    g.id = m.id.clone();
    g.parts = m
        .parts
        .iter()
        .map(|p| match p {
            Part::Text { text } => guest::Part::Text(text.clone()),
            Part::Image { source, mime_type } => guest::Part::Image(guest::Image {
                source: match source {
                    MediaRef::Url(u) => guest::MediaSource::Url(u.clone()),
                    MediaRef::Path(p) => guest::MediaSource::Path(p.clone()),
                },
                mime_type: mime_type.clone(),
            }),
            Part::File {
                name,
                path,
                mime_type,
            } => guest::Part::File(guest::FileRef {
                name: name.clone(),
                path: path.clone(),
                mime_type: mime_type.clone(),
            }),
        })
        .collect();
    g.reasoning = m.reasoning.as_ref().map(|r| guest::Reasoning {
        text: r.text.clone(),
        signature: r.signature.clone(),
        redacted: r.redacted,
    });
    g.tool_calls = m
        .tool_calls
        .iter()
        .map(|c| guest::ToolCall::new(c.id.clone(), c.name.clone(), c.arguments.clone()))
        .collect();
    g.tool_call_id = m.tool_call_id.clone();
    g.tool_name = m.tool_name.clone();
    g.model = m.model.clone();
    g.agent = m.agent.clone();
    g.channel = m.channel.clone();
    g.timestamp = m.timestamp.map(|t| guest::Timestamp {
        seconds: t.timestamp(),
        nanoseconds: t.timestamp_subsec_nanos(),
    });
    let mut flags = guest::MessageFlags::empty();
    flags.set(guest::MessageFlags::SYNTHETIC, m.synthetic);
    flags.set(guest::MessageFlags::SUMMARY, m.summary);
    flags.set(guest::MessageFlags::ERROR, m.is_error);
    g.flags = flags;
    if !m.metadata.is_empty() {
        g.metadata = Some(serde_json::Value::Object(m.metadata.clone()).to_string());
    }
    g.tokens = m.tokens(counter);
    g
}

fn bench_standard(c: &mut Criterion) {
    let cache = tempfile::tempdir().unwrap();
    let rt = Runtime::new(RuntimeConfig {
        cache_dir: Some(cache.path().to_owned()),
        ..RuntimeConfig::default()
    })
    .expect("a runtime");
    let pooled = Runtime::new(RuntimeConfig {
        cache_dir: Some(cache.path().to_owned()),
        pooling: true,
        ..RuntimeConfig::default()
    })
    .expect("a pooling runtime");
    let counter = HeuristicCounter::default();
    let info = RunInfo::default();
    let histories = histories();

    for (label, history) in &histories {
        let n = history.len();
        let as_guest: Vec<guest::Message> = history.iter().map(|m| to_guest(m, &counter)).collect();
        let mut group = c.benchmark_group(format!("standard/{label}"));
        group.sample_size(10);
        group.warm_up_time(Duration::from_millis(500));
        group.measurement_time(Duration::from_secs(2));
        group.bench_function("native_clone", |b| b.iter(|| history.clone()));
        for case in &CASES {
            let mut options = ProcessorOptions {
                config: Some(config(case.name).into()),
                ..ProcessorOptions::default()
            };
            // Large histories in a noisy run: room to finish.
            options.limits.deadline = Duration::from_secs(10);
            options.limits.memory_bytes = 256 << 20;
            let v0_2 = util::standard_processor(case.name);
            let v0_1 = util::standard_processor_v0_1(case.name);
            let p = rt
                .load_file(&v0_2, options.clone())
                .expect("the processor loads");
            let p_pooled = pooled
                .load_file(&v0_2, options.clone())
                .expect("the processor loads");
            let old_pooled = pooled
                .load_file(&v0_1, options)
                .expect("the 0.1.0 build loads");
            assert_eq!(p.contract(), "0.2.0");
            assert_eq!(old_pooled.contract(), "0.1.0");
            // All three do the same thing.
            let wasm = rt.run(std::slice::from_ref(&p), &info, history.clone());
            assert!(
                wasm.reports[0].error.is_none(),
                "{}: {:?}",
                case.name,
                wasm.reports[0].error
            );
            let old = pooled.run(std::slice::from_ref(&old_pooled), &info, history.clone());
            assert_eq!(
                wasm.messages, old.messages,
                "{}: 0.2.0 and 0.1.0 agree",
                case.name
            );
            let native = (case.native)(config(case.name), as_guest.clone()).expect("native runs");
            assert_eq!(
                wasm.messages.len(),
                native.len(),
                "{} on {label}: the sandbox and native agree",
                case.name
            );
            eprintln!(
                "{} on {label}: {n} -> {} messages, {} replaced",
                case.name,
                native.len(),
                wasm.reports[0].replaced.len()
            );
            group.bench_with_input(BenchmarkId::new("v0_2", case.name), history, |b, h| {
                b.iter_batched(
                    || h.clone(),
                    |h| rt.run(std::slice::from_ref(&p), &info, h).messages,
                    BatchSize::LargeInput,
                )
            });
            group.bench_with_input(
                BenchmarkId::new("v0_2_pooling", case.name),
                history,
                |b, h| {
                    b.iter_batched(
                        || h.clone(),
                        |h| {
                            pooled
                                .run(std::slice::from_ref(&p_pooled), &info, h)
                                .messages
                        },
                        BatchSize::LargeInput,
                    )
                },
            );
            group.bench_with_input(
                BenchmarkId::new("v0_1_pooling", case.name),
                history,
                |b, h| {
                    b.iter_batched(
                        || h.clone(),
                        |h| {
                            pooled
                                .run(std::slice::from_ref(&old_pooled), &info, h)
                                .messages
                        },
                        BatchSize::LargeInput,
                    )
                },
            );
            group.bench_with_input(BenchmarkId::new("native", case.name), &as_guest, |b, h| {
                b.iter_batched(
                    || h.clone(),
                    |h| (case.native)(config(case.name), h).unwrap(),
                    BatchSize::LargeInput,
                )
            });
        }
        group.finish();
    }
}

criterion_group!(benches, bench_standard);
criterion_main!(benches);
