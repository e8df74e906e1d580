//! The file store against the floor of what it does, measured in the same run:
//! loading a 100 MB session against reading the file and parsing each line
//! into a `serde_json::Value`; a durable append of one turn against a raw
//! `write_all` + `sync_data` of the same bytes on an `O_APPEND` file in the
//! same folder; listing 10,000 sessions against reading and parsing their
//! metadata files.
//!
//! `cargo bench -p agent-host --bench store`
//!
//! The sessions live in a temporary folder under the system's temporary
//! directory (its file system decides what `fdatasync` costs). The 100 MB log
//! is the corpus (`../shared/corpus`, or `AGENT_HOST_CORPUS`) repeated, with
//! unique ids; synthetic coding turns when the corpus is absent.
#![allow(missing_docs)]

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::time::Duration;

use agent_host_core::Message;
use agent_host_core::format::jsonl;
use agent_host_store::{FileStore, NewSession, PageRequest, SessionStore};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

#[path = "../../../tests/integration/util.rs"]
#[allow(dead_code)]
mod util;

/// The size of the loaded session.
const SESSION_BYTES: usize = 100 << 20;
/// How many sessions listing walks.
const SESSIONS: usize = 10_000;

/// Messages to repeat into the big session: the corpus, or synthetic turns.
fn source_messages() -> Vec<Message> {
    let corpus: Vec<Message> = util::corpus_histories()
        .into_iter()
        .flat_map(|(_, messages)| messages)
        .collect();
    if !corpus.is_empty() {
        return corpus;
    }
    (0..1000).flat_map(|n| turn(n, 1000)).collect()
}

/// One synthetic turn: a request, a tool call, a file read, about `pad` bytes each.
fn turn(n: usize, pad: usize) -> Vec<Message> {
    let call = format!("call-{n}");
    let mut assistant = Message::assistant(format!("Reading the file. {}", "a".repeat(pad)))
        .with_id(format!("t{n}-a"));
    assistant.push_tool_call(&call, "read_file", r#"{"path":"src/main.rs"}"#);
    vec![
        Message::user(format!("Fix the build, step {n}. {}", "u".repeat(pad)))
            .with_id(format!("t{n}-u")),
        assistant,
        Message::tool_result(&call, "read_file", "fn main() {}\n".repeat(pad / 13))
            .with_id(format!("t{n}-r")),
    ]
}

fn bench_load(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let store = FileStore::open(dir.path()).expect("the store opens");
    let session = store
        .create(&NewSession::new("bench").with_key("big"))
        .expect("a session")
        .reference();
    let source = source_messages();
    let (mut written, mut n) = (0, 0);
    while written < SESSION_BYTES {
        let batch: Vec<Message> = source
            .iter()
            .map(|m| {
                n += 1;
                m.clone().with_id(format!("m{n}"))
            })
            .collect();
        store.append(&session, &batch).expect("an append");
        written = fs::metadata(store.files(&session).unwrap().log)
            .unwrap()
            .len() as usize;
    }
    let log = store.files(&session).unwrap().log;
    let messages = store
        .load(&session)
        .expect("the session loads")
        .messages
        .len();
    eprintln!("load: {written} bytes, {messages} messages");

    let mut group = c.benchmark_group("load_100mb");
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(8));
    group.throughput(Throughput::Bytes(written as u64));
    group.bench_function("baseline_read_lines_value", |b| {
        b.iter(|| {
            let text = fs::read_to_string(&log).unwrap();
            let mut count = 0;
            for line in text.lines() {
                let value: serde_json::Value = serde_json::from_str(line).unwrap();
                std::hint::black_box(&value);
                count += 1;
            }
            assert_eq!(count, messages);
        });
    });
    group.bench_function("file_store_load", |b| {
        b.iter(|| {
            let history = store.load(&session).unwrap();
            assert_eq!(history.messages.len(), messages);
            history
        });
    });
    group.finish();
}

fn bench_append(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let store = FileStore::open(dir.path()).expect("the store opens");
    let session = store
        .create(&NewSession::new("bench").with_key("appends"))
        .expect("a session")
        .reference();
    let one_turn = turn(0, 1000);
    let mut bytes = Vec::new();
    for message in &one_turn {
        jsonl::write_line(message, &mut bytes);
    }
    eprintln!(
        "append: one turn of {} messages, {} bytes",
        one_turn.len(),
        bytes.len()
    );
    let log = store.files(&session).unwrap().log;
    let raw_path = log.with_file_name("raw.jsonl");
    let mut raw = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&raw_path)
        .expect("the raw file");

    let mut group = c.benchmark_group("append_one_turn");
    group.sample_size(30);
    group.warm_up_time(Duration::from_secs(2));
    group.measurement_time(Duration::from_secs(10));
    group.throughput(Throughput::Bytes(bytes.len() as u64));
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
}

/// Makes `SESSIONS` sessions the way the store lays them out: the metadata
/// of one real session, copied with new ids, keys and times, its backup
/// linked, and an empty log beside it. (Creating them through the store would
/// cost two `fsync`s each, minutes for nothing listing looks at.) They have
/// no `<name>.state` record, like sessions written before it: listing tries
/// to read one per session (a failed open here; a 64-byte read where a
/// record exists, which these figures leave out).
fn many_sessions(root: &Path) -> FileStore {
    let store = FileStore::open(root).expect("the store opens");
    let first = store
        .create(
            &NewSession::new("bench")
                .with_key("s0")
                .with_title("A session"),
        )
        .expect("a session");
    let files = store.files(&first.reference()).unwrap();
    let template: serde_json::Value =
        serde_json::from_slice(&fs::read(&files.meta).unwrap()).unwrap();
    let dir = files.meta.parent().unwrap();
    for i in 1..SESSIONS {
        let mut meta = template.clone();
        meta["id"] = uuid::Uuid::from_u128(i as u128 + 1).to_string().into();
        meta["key"] = format!("s{i}").into();
        meta["title"] = format!("Session number {i}").into();
        meta["message_count"] = (i % 500).into();
        let updated = first.updated + chrono::TimeDelta::seconds((i * 7919 % SESSIONS) as i64);
        meta["updated"] = serde_json::to_value(updated).unwrap();
        let path = dir.join(format!("s{i}.meta.json"));
        fs::write(&path, serde_json::to_vec_pretty(&meta).unwrap()).unwrap();
        fs::hard_link(&path, dir.join(format!("s{i}.meta.json.bak"))).unwrap();
        fs::write(dir.join(format!("s{i}.jsonl")), b"").unwrap();
    }
    store
}

fn bench_list(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let store = many_sessions(dir.path());
    let agent_dir = dir.path().join("sessions/bench");
    assert_eq!(store.list(&PageRequest::first(50)).unwrap().total, SESSIONS);

    let mut group = c.benchmark_group("list_10000");
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(5));
    group.bench_function("baseline_read_parse_metadata", |b| {
        b.iter(|| {
            let mut count = 0;
            for entry in fs::read_dir(&agent_dir).unwrap() {
                let path = entry.unwrap().path();
                if path.to_str().unwrap().ends_with(".meta.json") {
                    let value: serde_json::Value =
                        serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
                    std::hint::black_box(&value);
                    count += 1;
                }
            }
            assert_eq!(count, SESSIONS);
        });
    });
    group.bench_function("first_page_50", |b| {
        b.iter(|| {
            let page = store.list(&PageRequest::first(50)).unwrap();
            assert_eq!(page.sessions.len(), 50);
            page
        });
    });
    // Each page walks every metadata file: 51 walks an iteration.
    group.measurement_time(Duration::from_secs(40));
    group.bench_function("all_pages_200", |b| {
        b.iter(|| {
            let mut seen = 0;
            loop {
                let page = store
                    .list(&PageRequest {
                        after: None,
                        offset: seen,
                        limit: 200,
                        agent: None,
                    })
                    .unwrap();
                if page.sessions.is_empty() {
                    break;
                }
                seen += page.sessions.len();
            }
            assert_eq!(seen, SESSIONS);
        });
    });
    group.finish();
}

criterion_group!(benches, bench_load, bench_append, bench_list);
criterion_main!(benches);
