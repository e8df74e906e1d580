//! What the file store's per-call path work costs: a durable append of one
//! turn against a raw `write_all` + `fdatasync` of the same bytes in the same
//! folder (the floor), and the calls that never sync, where opening files
//! is most of the cost: `get` (metadata and state record), a tail read of
//! a small session, and a page of 50 from 500 sessions.
//!
//! `cargo bench -p agent-host-store --bench ops`
//!
//! Everything lives in a temporary folder under the system's temporary
//! directory (its file system decides what `fdatasync` costs).
#![allow(missing_docs)]

use std::fs::OpenOptions;
use std::io::Write;
use std::time::Duration;

use agent_host_core::Message;
use agent_host_core::format::jsonl;
use agent_host_store::{FileStore, NewSession, PageRequest, SessionStore, TailStart};
use criterion::{Criterion, criterion_group, criterion_main};

/// How many sessions the listing walks.
const SESSIONS: usize = 500;

fn turn(n: usize) -> Vec<Message> {
    let text = format!("turn {n}: {}", "lorem ipsum dolor sit amet ".repeat(20));
    vec![
        Message::user(text.clone()).with_id(format!("u{n}")),
        Message::assistant(text).with_id(format!("a{n}")),
    ]
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let store = FileStore::open(dir.path().join("store")).expect("the store opens");
    let session = store
        .create(&NewSession::new("bench").with_key("appends"))
        .expect("a session")
        .reference();
    let one_turn = turn(0);
    let mut bytes = Vec::new();
    for message in &one_turn {
        jsonl::write_line(message, &mut bytes);
    }
    let raw_path = dir.path().join("store/sessions/bench/raw.jsonl.bak");
    let mut raw = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&raw_path)
        .expect("the raw file");

    let mut group = c.benchmark_group("append_one_turn");
    group.sample_size(30);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(5));
    group.bench_function("baseline_write_fdatasync", |b| {
        b.iter(|| {
            raw.write_all(&bytes).unwrap();
            raw.sync_data().unwrap();
        });
    });
    group.bench_function("file_store_append", |b| {
        b.iter(|| store.append(&session, &one_turn).unwrap());
    });
    group.finish();

    let small = store
        .create(&NewSession::new("bench").with_key("small"))
        .expect("a session")
        .reference();
    let messages: Vec<Message> = (0..50).flat_map(turn).collect();
    store.append(&small, &messages).expect("the append");
    for n in 0..SESSIONS {
        store
            .create(&NewSession::new("many").with_key(format!("s{n}")))
            .expect("a session");
    }

    let mut group = c.benchmark_group("unsynced");
    group.sample_size(30);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(3));
    group.bench_function("get", |b| {
        b.iter(|| store.get(&small).unwrap().expect("the session"));
    });
    group.bench_function("load_tail(Newest(20)) of 100", |b| {
        b.iter(|| store.load_tail(&small, TailStart::Newest(20)).unwrap());
    });
    group.bench_function(format!("list 50 of {SESSIONS}"), |b| {
        let page = PageRequest {
            after: None,
            offset: 0,
            limit: 50,
            agent: Some("many".into()),
        };
        b.iter(|| store.list(&page).unwrap());
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
