//! Appends per second through the server over real loopback HTTP: one
//! instance on the file store (the baseline), one instance on PostgreSQL,
//! and two instances on one PostgreSQL database with the clients spread
//! over both, all in the same run. Starts its own PostgreSQL server (see
//! the store's `testing::postgres_server`).
//!
//! `cargo bench -p agent-host-server --bench shared` prints, for 16
//! concurrent clients each appending one message per request (each
//! acknowledged = durable): the rate with each client on its own session,
//! and with the 16 on 4 shared sessions. Every cell is the median of
//! `BENCH_ROUNDS` rounds (3 by default) of `BENCH_SECONDS` seconds (3 by
//! default), the setups taking turns within a round; ratios are of medians.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use agent_host_engine::{Engine, EngineConfig};
use agent_host_server::{Server, ServerConfig};
use agent_host_store::testing::postgres_server;
use agent_host_store::{FileStore, PostgresStore, SessionStore};
use serde_json::json;

/// The concurrent clients of every run.
const CLIENTS: usize = 16;

/// The shared sessions of the shared runs.
const SHARED: usize = 4;

/// A server on `127.0.0.1:0`; stopped when dropped.
struct Instance {
    base: String,
    _stop: tokio::sync::oneshot::Sender<()>,
}

async fn start(store: Arc<dyn SessionStore>) -> Instance {
    let engine = Engine::new(EngineConfig::default(), store, &|_: &str| None).unwrap();
    let server = Server::new(engine, ServerConfig::default()).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(server.serve(listener, async {
        let _ = stopped.await;
    }));
    Instance { base, _stop: stop }
}

/// Appends per second by [`CLIENTS`] clients, client `c` through
/// `instances[c % len]`, each on its own session or on one of [`SHARED`].
async fn append_rate(instances: &[Instance], round: usize, distinct: bool, seconds: f64) -> f64 {
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(CLIENTS)
        .build()
        .unwrap();
    let sessions = if distinct { CLIENTS } else { SHARED };
    let key = |s: usize| format!("bench-{round}-{distinct}-{s}");
    for s in 0..sessions {
        let reply = http
            .post(format!("{}/v1/sessions", instances[0].base))
            .json(&json!({"key": key(s)}))
            .send()
            .await
            .unwrap();
        assert!(reply.status().is_success());
    }
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let tasks: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let url = format!(
                "{}/v1/sessions/{}/messages",
                instances[c % instances.len()].base,
                key(c % sessions)
            );
            let (http, done, stop) = (http.clone(), done.clone(), stop.clone());
            tokio::spawn(async move {
                let body = json!({"messages": [{"role": "user", "content": "a message of a typical length, about twenty words, as a chat user would send to an agent"}]});
                while !stop.load(Ordering::Relaxed) {
                    let reply = http.post(&url).json(&body).send().await.unwrap();
                    assert_eq!(reply.status(), reqwest::StatusCode::CREATED);
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
    stop.store(true, Ordering::Relaxed);
    let counted = done.load(Ordering::Relaxed);
    let elapsed = started.elapsed().as_secs_f64();
    for t in tasks {
        t.await.unwrap();
    }
    counted as f64 / elapsed
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[sorted.len() / 2]
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|l| l.split(' ').take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| "?".to_owned())
}

fn main() {
    let Some(pg) = postgres_server::server() else {
        return;
    };
    let number = |name: &str, default: f64| {
        std::env::var(name)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(default)
    };
    let seconds = number("BENCH_SECONDS", 3.0);
    let rounds = number("BENCH_ROUNDS", 3.0) as usize;
    let url = pg.fresh_url();
    let dir = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let setups = [
        "file, 1 instance",
        "postgres, 1 instance",
        "postgres, 2 instances",
    ];
    // rates[setup][0]: own sessions, [1]: shared sessions.
    let mut rates = vec![[Vec::new(), Vec::new()]; setups.len()];
    runtime.block_on(async {
        let file = start(Arc::new(FileStore::open(dir.path()).unwrap())).await;
        let open = || -> Arc<dyn SessionStore> { Arc::new(PostgresStore::open(&url).unwrap()) };
        let one = start(open()).await;
        let two = [start(open()).await, start(open()).await];
        let instances: [&[Instance]; 3] = [
            std::slice::from_ref(&file),
            std::slice::from_ref(&one),
            &two,
        ];
        for round in 0..rounds {
            for (i, setup) in instances.iter().enumerate() {
                for distinct in [true, false] {
                    let rate = append_rate(setup, round, distinct, seconds).await;
                    println!(
                        "round {round}: {:<22} {:<18} {rate:>8.0} appends/s (load {})",
                        setups[i],
                        if distinct {
                            "own sessions"
                        } else {
                            "4 shared sessions"
                        },
                        load_average()
                    );
                    rates[i][usize::from(!distinct)].push(rate);
                }
            }
        }
    });
    println!(
        "\n| setup ({CLIENTS} clients, 1 message per append) | appends/s, own sessions | appends/s, {SHARED} shared sessions | vs file, own | vs file, shared |"
    );
    println!("|---|---|---|---|---|");
    let medians: Vec<[f64; 2]> = rates
        .iter()
        .map(|[own, shared]| [median(own), median(shared)])
        .collect();
    let [file_own, file_shared] = medians[0];
    for (setup, [own, shared]) in setups.iter().zip(&medians) {
        println!(
            "| {setup} | {own:.0} | {shared:.0} | {:.2} | {:.2} |",
            own / file_own,
            shared / file_shared
        );
    }
}
