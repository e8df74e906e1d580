//! What one turn costs the engine as the session grows: an offline turn
//! (store -> pipeline -> validated view; no model, so only the engine's own
//! work is timed) and the context report, on a compacted session of 100
//! messages against one of 100,000, in the file and the SQLite store. The
//! session of 100 is the baseline, measured in the same run.
//!
//! `cargo bench -p agent-host-engine --bench turn`
//!
//! Both sessions look alike at their end: a system prompt, a checkpoint
//! whose pair follows the messages it covers, and the 40 messages since.
//! What differs is how much log lies before the checkpoint.
#![allow(missing_docs)]

use std::sync::Arc;

use agent_host_core::{Checkpoint, Message};
use agent_host_engine::{Engine, EngineConfig, Quiet, TurnRequest};
use agent_host_store::{FileStore, NewSession, SessionRef, SessionStore, SqliteStore};
use chrono::Utc;
use criterion::{Criterion, criterion_group, criterion_main};

/// Messages after the checkpoint's pair.
const RECENT: usize = 40;
/// Messages the checkpoint covers (those just before its pair).
const COVERED: usize = 40;

/// One turn of a coding agent: a question, a tool call, its result, an answer.
fn turn(n: usize) -> Vec<Message> {
    let call = format!("call-{n}");
    let mut assistant =
        Message::assistant(format!("Let me look at file {n}.")).with_id(format!("a{n}"));
    assistant.push_tool_call(&call, "read_file", format!(r#"{{"path":"src/m{n}.rs"}}"#));
    vec![
        Message::user(format!("What does module {n} do? {}", "word ".repeat(30)))
            .with_id(format!("u{n}")),
        assistant,
        Message::tool_result(&call, "read_file", "fn main() {}\n".repeat(20))
            .with_id(format!("r{n}")),
        Message::assistant(format!("Module {n} prints nothing. {}", "word ".repeat(20)))
            .with_id(format!("f{n}")),
    ]
}

/// A session of about `total` messages in `store`, compacted near its end.
fn session(store: &dyn SessionStore, key: &str, total: usize) -> SessionRef {
    let meta = store
        .get_or_create(&NewSession::new("default").with_key(key))
        .unwrap()
        .meta;
    let session = meta.reference();
    store
        .append(
            &session,
            &[Message::system("You are a coding agent.").with_id("sys")],
        )
        .unwrap();
    let before = total.saturating_sub(RECENT + 3);
    let mut written = 1;
    let mut n = 0;
    let mut batch = Vec::new();
    while written < before {
        batch.extend(turn(n));
        n += 1;
        written += 4;
        if batch.len() >= 2_000 {
            store.append(&session, &batch).unwrap();
            batch.clear();
        }
    }
    store.append(&session, &batch).unwrap();
    let covers: Vec<String> = {
        let ids: Vec<String> = (n.saturating_sub(COVERED / 4)..n)
            .flat_map(|k| turn(k).into_iter().map(|m| m.id))
            .collect();
        ids
    };
    let mut boundary = Message::user("[summary of earlier messages]").with_id("cp-b");
    boundary.synthetic = true;
    boundary.summary = true;
    let mut summary = Message::assistant("## Files Modified\n- none").with_id("cp-s");
    summary.synthetic = true;
    summary.summary = true;
    store.append(&session, &[boundary, summary]).unwrap();
    store
        .write_checkpoint(
            &session,
            &Checkpoint {
                usage: None,
                boundary_id: "cp-b".into(),
                summary_id: "cp-s".into(),
                covers,
                created: Utc::now(),
            },
        )
        .unwrap();
    let mut recent = Vec::new();
    for k in 0..RECENT / 4 {
        recent.extend(turn(n + k));
    }
    store.append(&session, &recent).unwrap();
    session
}

fn bench_turn(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let backends: Vec<(&str, Arc<dyn SessionStore>)> = vec![
        (
            "file",
            Arc::new(FileStore::open(dir.path().join("files")).unwrap()),
        ),
        (
            "sqlite",
            Arc::new(SqliteStore::open(dir.path().join("s.db")).unwrap()),
        ),
    ];
    let mut group = c.benchmark_group("turn");
    group.sample_size(20);
    for (backend, store) in backends {
        let engine = Engine::new(
            EngineConfig {
                cache_dir: None,
                ..EngineConfig::default()
            },
            store.clone(),
            &|_: &str| None,
        )
        .unwrap();
        for total in [100, 100_000] {
            let session = session(store.as_ref(), &format!("s{total}"), total);
            group.bench_function(format!("{backend}/offline turn/{total} messages"), |b| {
                b.iter(|| {
                    let request = TurnRequest::new(session.clone(), "And module 7?");
                    rt.block_on(engine.turn(request, Arc::new(Quiet))).unwrap()
                });
            });
            group.bench_function(format!("{backend}/context/{total} messages"), |b| {
                b.iter(|| rt.block_on(engine.context(&session)).unwrap());
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench_turn);
criterion_main!(benches);
