//! The session server over real loopback HTTP (reqwest), measured as a
//! client sees it. A bench binary (not criterion: the figures are rates,
//! percentiles and memory, with their baselines measured in the same run).
//!
//! `cargo bench -p agent-host-server --bench server` prints:
//! - memory (RSS) per idle session held by the server, and after 10,000
//!   sessions were touched and released;
//! - the raw durable-write rate of the disk (write + fdatasync of a small
//!   record, one thread): the baseline of every append figure;
//! - appends per second (each acknowledged = fsynced) with 1, 16 and 256
//!   concurrent clients, on distinct sessions and on one session, in three
//!   ways: the file store's journal with the sessions' waiting appends
//!   handed to it in one call (as `agent-host serve` runs), the journal
//!   with a store call per session (before), and an `fdatasync` of the log
//!   per append (the baseline): every
//!   cell is the median of `BENCH_ROUNDS` rounds (3 by default) run one
//!   after the other (the raw rate too), and each ratio is of medians; the
//!   rounds' own figures are printed first, with the machine's load
//!   average, and the CPU time the process (clients and server) spent per
//!   append: what bounds the rate once the cores are busy;
//! - `GET /v1/sessions/{id}/context` latency p50/p99 on sessions of 1,000,
//!   10,000 and 100,000 messages (filled through the store, as another
//!   process would): 1,000 repeated reads, and 200 reads each right after
//!   an append through the server.
//!
//! `BENCH_SECONDS` sets each append run's length (default 3), `BENCH_ROUNDS`
//! the rounds, and `BENCH_ONLY` (a comma-separated list of `memory`,
//! `appends`, `context`) the parts run (all by default).

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use agent_host_core::Message;
use agent_host_engine::{Engine, EngineConfig};
use agent_host_server::{Server, ServerConfig};
use agent_host_store::{FileStore, NewSession, SessionRef, SessionStore};
use serde_json::json;

struct Running {
    base: String,
    store: Arc<dyn SessionStore>,
    stop: tokio::sync::oneshot::Sender<()>,
}

async fn start(dir: &std::path::Path, config: ServerConfig) -> Running {
    start_on(dir, config, true).await
}

/// A server on the file store under `dir`: with group commit across
/// sessions (as `agent-host serve` opens it), or syncing each append's log.
async fn start_on(dir: &std::path::Path, config: ServerConfig, group_commit: bool) -> Running {
    let files = FileStore::open(dir).unwrap();
    let files = if group_commit {
        files.with_group_commit().unwrap()
    } else {
        files
    };
    let store: Arc<dyn SessionStore> = Arc::new(files);
    let engine = Engine::new(EngineConfig::default(), store.clone(), &|_: &str| None).unwrap();
    let server = Server::new(engine, config).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(server.serve(listener, async {
        let _ = stopped.await;
    }));
    Running { base, store, stop }
}

/// Durable small writes per second on this disk, one thread.
fn raw_fsync_rate(dir: &std::path::Path, seconds: f64) -> f64 {
    let path = dir.join("fsync-probe");
    let mut file = std::fs::File::create(&path).unwrap();
    let record = [b'x'; 200];
    let started = Instant::now();
    let mut n = 0u64;
    while started.elapsed().as_secs_f64() < seconds {
        file.write_all(&record).unwrap();
        file.sync_data().unwrap();
        n += 1;
    }
    let rate = n as f64 / started.elapsed().as_secs_f64();
    let _ = std::fs::remove_file(path);
    rate
}

/// The CPU time this process has used (user and system), in seconds, from
/// `/proc/self/stat` (in ticks of USER_HZ, 100 a second); `None` elsewhere.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The fields after the command name (in parentheses): state is the
    // first, utime the 12th and stime the 13th.
    let fields: Vec<&str> = stat[stat.rfind(')')? + 2..].split(' ').collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

/// An append run: the rate, and the CPU time the whole process (clients
/// and server) spent per append, in microseconds.
#[derive(Clone, Copy)]
struct Rate {
    per_second: f64,
    cpu_us: Option<f64>,
}

/// Appends per second by `clients` concurrent clients, each on its own
/// session or all on one.
async fn append_rate(run: &Running, clients: usize, distinct: bool, seconds: f64) -> Rate {
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(clients)
        .build()
        .unwrap();
    let mut sessions = Vec::new();
    for c in 0..clients {
        let key = if distinct {
            format!("bench-{clients}-{c}")
        } else {
            format!("bench-{clients}-one")
        };
        if c == 0 || distinct {
            http.post(format!("{}/v1/sessions", run.base))
                .json(&json!({"key": key}))
                .send()
                .await
                .unwrap();
        }
        sessions.push(key);
    }
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let cpu = cpu_seconds();
    let started = Instant::now();
    let tasks: Vec<_> = sessions
        .into_iter()
        .map(|key| {
            let (http, base, done, stop) =
                (http.clone(), run.base.clone(), done.clone(), stop.clone());
            tokio::spawn(async move {
                let url = format!("{base}/v1/sessions/{key}/messages");
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
    let cpu = cpu.zip(cpu_seconds()).map(|(before, after)| after - before);
    for t in tasks {
        t.await.unwrap();
    }
    Rate {
        per_second: counted as f64 / elapsed,
        cpu_us: cpu.map(|cpu| cpu / counted.max(1) as f64 * 1e6),
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

/// Fills a session with `n` messages straight through the store.
fn fill(store: &dyn SessionStore, key: &str, n: usize) -> uuid::Uuid {
    let meta = store
        .get_or_create(&NewSession::new("default").with_key(key))
        .unwrap()
        .meta;
    let session = SessionRef::Id(meta.id);
    let mut i = 0;
    while i < n {
        let batch: Vec<Message> = (i..(i + 1000).min(n))
            .map(|j| {
                let m = if j % 2 == 0 {
                    Message::user(format!(
                        "question {j}: what about the next part of the plan?"
                    ))
                } else {
                    Message::assistant(format!("answer {j}: the next part is done, here is how."))
                };
                m.with_id(format!("m{j}"))
            })
            .collect();
        i += batch.len();
        store.append(&session, &batch).unwrap();
    }
    meta.id
}

/// p50 and p99 of `GET /context`, in ms: `reads` repeated reads, and
/// `cold` reads each after an append.
async fn context_latency(run: &Running, id: uuid::Uuid, reads: usize, cold: usize) -> [f64; 4] {
    let http = reqwest::Client::new();
    let url = format!("{}/v1/sessions/{id}/context", run.base);
    let get = || async {
        let t = Instant::now();
        let reply = http.get(&url).send().await.unwrap();
        assert!(reply.status().is_success());
        reply.bytes().await.unwrap();
        t.elapsed().as_secs_f64() * 1000.0
    };
    // The first read loads the session (its window of the log): not timed.
    get().await;
    let mut warm = Vec::with_capacity(reads);
    for _ in 0..reads {
        warm.push(get().await);
    }
    let mut first = Vec::with_capacity(cold);
    for i in 0..cold {
        let reply = http
            .post(format!("{}/v1/sessions/{id}/messages", run.base))
            .json(&json!({"messages": [{"role": "user", "content": format!("more {i}")}]}))
            .send()
            .await
            .unwrap();
        assert_eq!(reply.status(), reqwest::StatusCode::CREATED);
        first.push(get().await);
    }
    warm.sort_by(f64::total_cmp);
    first.sort_by(f64::total_cmp);
    [
        percentile(&warm, 0.5),
        percentile(&warm, 0.99),
        percentile(&first, 0.5),
        percentile(&first, 0.99),
    ]
}

/// The 1, 5 and 15 minute load averages of the machine (other processes
/// share its cores), or `?`.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|l| l.split(' ').take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| "?".to_owned())
}

/// The median of `values`.
fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    percentile(&sorted, 0.5)
}

fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else is taken.
    let seconds: f64 = std::env::var("BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3.0);
    let rounds: usize = std::env::var("BENCH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|&n| n >= 1)
        .unwrap_or(3);
    let only = std::env::var("BENCH_ONLY").ok();
    let runs = |part: &str| {
        only.as_deref()
            .is_none_or(|only| only.split(',').any(|p| p.trim() == part))
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    println!(
        "# session server over loopback HTTP ({cpus} cores), {seconds} s a run, {rounds} rounds"
    );
    runtime.block_on(async {
        // Memory first, while the process holds nothing else.
        // Memory: 10,000 sessions indexed, each touched (held in memory),
        // then released after the idle time.
        if runs("memory") {
            let mem_dir = tempfile::tempdir().unwrap();
            let run = start(
                mem_dir.path(),
                ServerConfig {
                    idle_after: Duration::from_secs(2),
                    sweep_every: Duration::from_millis(250),
                    ..ServerConfig::default()
                },
            )
            .await;
            let http = reqwest::Client::new();
            let before = rss_bytes();
            let n = 10_000;
            for i in 0..n {
                http.post(format!("{}/v1/sessions", run.base))
                    .json(&json!({"key": format!("idle-{i}")}))
                    .send()
                    .await
                    .unwrap();
                http.post(format!("{}/v1/sessions/idle-{i}/messages", run.base))
                    .json(&json!({"messages": [{"role": "user", "content": "hi"}]}))
                    .send()
                    .await
                    .unwrap();
            }
            let touched = rss_bytes();
            tokio::time::sleep(Duration::from_secs(3)).await;
            let metrics = http
                .get(format!("{}/metrics", run.base))
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap();
            let hot = metrics
                .lines()
                .find(|l| l.starts_with("agent_host_hot_sessions "))
                .unwrap_or("?")
                .to_owned();
            let released = rss_bytes();
            println!(
                "memory: RSS {:.1} MiB before; {:.1} MiB with {n} sessions touched ({:.0} bytes a session, index and hot state); {:.1} MiB after their release ({hot})",
                before as f64 / 1048576.0,
                touched as f64 / 1048576.0,
                touched.saturating_sub(before) as f64 / n as f64,
                released as f64 / 1048576.0,
            );
            let _ = run.stop.send(());
            println!();
        }
        let dir = tempfile::tempdir().unwrap();
        let run = start(&dir.path().join("store"), ServerConfig::default()).await;
        if runs("appends") {
            const CLIENTS: [usize; 3] = [1, 16, 256];
            // The store as `agent-host serve` opens it (group commit across
            // sessions), and the same store syncing each append's log: the
            // baseline, in the same run.
            // (name, the journal, appends of different sessions handed to
            // the store together)
            const MODES: [(&str, bool, bool); 3] = [
                ("group commit, sessions' appends in one store call (as `serve`)", true, true),
                ("group commit, a store call per session's appends (before)", true, false),
                ("fdatasync per append (baseline)", false, false),
            ];
            println!("load average before: {}", load_average());
            // Per round: the raw rate, then per mode (distinct, one) per client count.
            let mut fsync = Vec::new();
            let mut rates: Vec<Vec<[Vec<Rate>; 2]>> =
                vec![vec![[Vec::new(), Vec::new()]; CLIENTS.len()]; MODES.len()];
            for round in 1..=rounds {
                fsync.push(raw_fsync_rate(dir.path(), seconds));
                let mut line = format!("round {round}: raw {:.0}/s", fsync[round - 1]);
                for (m, &(_, group_commit, batch_appends)) in MODES.iter().enumerate() {
                    let mode_dir = tempfile::tempdir_in(dir.path()).unwrap();
                    let config = ServerConfig {
                        batch_appends,
                        ..ServerConfig::default()
                    };
                    let run = start_on(mode_dir.path(), config, group_commit).await;
                    line.push_str(match (group_commit, batch_appends) {
                        (true, true) => "; batched",
                        (true, false) => "; group",
                        _ => "; per append",
                    });
                    for (c, &clients) in CLIENTS.iter().enumerate() {
                        let d = append_rate(&run, clients, true, seconds).await;
                        let o = append_rate(&run, clients, false, seconds).await;
                        line.push_str(&format!(
                            " {clients}: {:.0} / {:.0}",
                            d.per_second, o.per_second
                        ));
                        rates[m][c][0].push(d);
                        rates[m][c][1].push(o);
                    }
                    let _ = run.stop.send(());
                }
                println!("{line}");
            }
            println!("load average after: {}", load_average());
            println!();
            println!("raw write+fdatasync, one thread: {:.0}/s (baseline)", median(&fsync));
            let rate = |runs: &[Rate]| median(&runs.iter().map(|r| r.per_second).collect::<Vec<_>>());
            let cpu = |runs: &[Rate]| {
                let cpu: Vec<f64> = runs.iter().filter_map(|r| r.cpu_us).collect();
                if cpu.is_empty() {
                    "?".to_owned()
                } else {
                    format!("{:.0} us", median(&cpu))
                }
            };
            for (m, (name, _, _)) in MODES.iter().enumerate() {
                println!();
                println!("{name}:");
                println!("| clients | distinct sessions: appends/s | x one client | CPU per append | one session: appends/s | x one client | CPU per append |");
                println!("|---:|---:|---:|---:|---:|---:|---:|");
                let single = [rate(&rates[m][0][0]), rate(&rates[m][0][1])];
                for (c, clients) in CLIENTS.iter().enumerate() {
                    let (d, o) = (rate(&rates[m][c][0]), rate(&rates[m][c][1]));
                    println!(
                        "| {clients} | {d:.0} | {:.1} | {} | {o:.0} | {:.1} | {} |",
                        d / single[0],
                        cpu(&rates[m][c][0]),
                        o / single[1],
                        cpu(&rates[m][c][1]),
                    );
                }
            }
            println!();
        }
        if runs("context") {
            println!("| session | repeated reads p50 / p99 (ms) | first read after an append p50 / p99 (ms) |");
            println!("|---|---:|---:|");
            for n in [1_000, 10_000, 100_000] {
                let store = run.store.clone();
                let id = tokio::task::spawn_blocking(move || fill(&*store, &format!("long-{n}"), n))
                    .await
                    .unwrap();
                let [wp50, wp99, cp50, cp99] = context_latency(&run, id, 1000, 200).await;
                println!("| {n} messages | {wp50:.2} / {wp99:.2} | {cp50:.2} / {cp99:.2} |");
            }
        }
        let _ = run.stop.send(());
    });
}
