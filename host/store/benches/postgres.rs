//! The PostgreSQL store against the file store, in the same run: appends
//! per second (one turn of 3 messages per append, one session) and `load`
//! of a 100,000-message session. Starts its own PostgreSQL server (see
//! `testing::postgres_server`): run as `cargo bench -p agent-host-store
//! --bench postgres`. `AGENT_HOST_BENCH_APPENDS` sets the number of appends
//! (500 by default).

use std::time::{Duration, Instant};

use agent_host_core::Message;
use agent_host_store::testing::postgres_server;
use agent_host_store::testing::{keyed, turn};
use agent_host_store::{FileStore, PostgresStore, SessionStore};

const LOADED: usize = 100_000;

fn main() {
    let Some(server) = postgres_server::server() else {
        return;
    };
    let appends: usize = std::env::var("AGENT_HOST_BENCH_APPENDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(500);
    let dir = tempfile::tempdir().expect("a temporary folder");
    let file = FileStore::open(dir.path().join("files")).expect("the file store");
    let postgres = PostgresStore::open(&server.fresh_url()).expect("the PostgreSQL store");
    let stores: [(&str, &dyn SessionStore); 2] = [("file", &file), ("postgres", &postgres)];

    println!(
        "| store | appends/s (1 turn, 3 messages, {appends} appends) | load of {LOADED} messages (best of 3) |"
    );
    println!("|---|---|---|");
    let mut results = Vec::new();
    for (name, store) in stores {
        let session = store
            .create(&keyed("appends"))
            .expect("a session")
            .reference();
        // Warm up (connections, files).
        store.append(&session, &turn(0, 0)).expect("an append");
        let started = Instant::now();
        for n in 1..=appends {
            store.append(&session, &turn(0, n)).expect("an append");
        }
        let per_second = appends as f64 / started.elapsed().as_secs_f64();

        let big = store.create(&keyed("big")).expect("a session").reference();
        for chunk in 0..LOADED / 1000 {
            let batch: Vec<Message> = (0..1000)
                .map(|i| {
                    let n = chunk * 1000 + i;
                    Message::user(format!("message {n} {}", "x".repeat(200 + n % 400)))
                        .with_id(format!("m{n}"))
                })
                .collect();
            store.append(&big, &batch).expect("an append");
        }
        let mut best = Duration::MAX;
        for _ in 0..3 {
            let started = Instant::now();
            let history = store.load(&big).expect("a load");
            best = best.min(started.elapsed());
            assert_eq!(history.messages.len(), LOADED);
        }
        println!(
            "| {name} | {per_second:.0} | {:.1} ms |",
            best.as_secs_f64() * 1e3
        );
        results.push((per_second, best));
    }
    let (file, postgres) = (results[0], results[1]);
    println!(
        "ratios (postgres / file): appends/s {:.2}, load time {:.2}",
        postgres.0 / file.0,
        postgres.1.as_secs_f64() / file.1.as_secs_f64()
    );
}
