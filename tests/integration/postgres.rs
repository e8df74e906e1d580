//! Two `agent-host serve` processes on one PostgreSQL database (a real
//! server the test process starts; see the store's
//! `testing::postgres_server`), clients appending to shared sessions
//! through both: one instance killed with SIGKILL mid-burst, then the
//! database itself stopped and started again mid-burst. Afterwards every
//! acknowledged message is stored exactly once, each client's in the order
//! it sent them; a message whose append failed may be missing or present,
//! never twice.

#![cfg(unix)]

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_host_store::testing::postgres_server;
use agent_host_store::{PostgresStore, SessionRef, SessionStore};
use serde_json::{Value, json};

use crate::util::agent_host;

/// The shared sessions the clients append to (client `c` to `c % SESSIONS`).
const SESSIONS: usize = 4;

/// An `agent-host serve --store postgres://...` process, killed when
/// dropped.
struct Instance {
    child: Child,
    base: String,
    log: PathBuf,
}

impl Instance {
    /// Starts the binary on a free loopback port; its stderr goes to
    /// `log`.
    fn start(url: &str, log: PathBuf) -> Instance {
        let mut child = agent_host()
            .args(["serve", "--listen", "127.0.0.1:0", "--store", url])
            .env_remove("AGENT_HOST_API_TOKEN")
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).expect("the instance's log"))
            .spawn()
            .expect("agent-host serve starts");
        let mut first = String::new();
        BufReader::new(child.stdout.take().expect("piped stdout"))
            .read_line(&mut first)
            .expect("the first line");
        let base = first
            .trim_end()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| {
                panic!(
                    "the first line is `listening on URL`, not {first:?}; stderr: {}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                )
            })
            .to_owned();
        Instance { child, base, log }
    }

    /// The end of what the instance wrote to stderr, for failure messages.
    fn stderr(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What became of one append.
#[derive(Clone, Debug)]
enum Outcome {
    /// 2xx: the message is stored.
    Acked,
    /// An error status with its JSON body, or a transport error; how long
    /// the answer took.
    Failed {
        status: Option<u16>,
        body: Value,
        took: Duration,
    },
}

/// One client's appends, in the order it sent them: the message id, the
/// instance it went to, what became of it.
type Sent = Vec<(String, usize, Outcome)>;

/// Appends one message `id` to `session` through `base`.
async fn append(http: &reqwest::Client, base: &str, session: usize, id: &str) -> Outcome {
    let started = Instant::now();
    let sent = http
        .post(format!("{base}/v1/sessions/shared-{session}/messages"))
        .json(&json!({"format": "jsonl", "messages": [{"type": "user", "id": id, "content": id}]}))
        .send()
        .await;
    match sent {
        Ok(reply) if reply.status().is_success() => Outcome::Acked,
        Ok(reply) => {
            let status = reply.status().as_u16();
            Outcome::Failed {
                status: Some(status),
                body: reply.json().await.unwrap_or(Value::Null),
                took: started.elapsed(),
            }
        }
        Err(e) => Outcome::Failed {
            status: None,
            body: Value::String(e.to_string()),
            took: started.elapsed(),
        },
    }
}

/// Creates the shared sessions through `base`.
async fn create_sessions(base: &str) {
    let http = reqwest::Client::new();
    for s in 0..SESSIONS {
        let reply = http
            .post(format!("{base}/v1/sessions"))
            .json(&json!({"key": format!("shared-{s}")}))
            .send()
            .await
            .expect("the instance answers");
        assert!(reply.status().is_success(), "{:?}", reply.text().await);
    }
}

/// Checks what the store holds against what the clients sent: every
/// acknowledged message exactly once, no message twice, no message nobody
/// sent, each client's in the order it sent them, the counts right.
fn check_stored(url: &str, clients: &[Sent]) {
    let store = PostgresStore::open(url).expect("the database opens");
    for s in 0..SESSIONS {
        let history = store
            .load(&SessionRef::key("default", format!("shared-{s}")))
            .expect("the session loads");
        assert!(history.warnings.is_empty(), "{:?}", history.warnings);
        assert_eq!(
            history.meta.message_count,
            history.messages.len() as u64,
            "shared-{s}: the count matches the rows"
        );
        let stored: Vec<&str> = history.messages.iter().map(|m| m.id.as_str()).collect();
        let mut position = HashMap::new();
        for (i, id) in stored.iter().enumerate() {
            assert!(
                position.insert(*id, i).is_none(),
                "shared-{s}: {id} is stored twice"
            );
        }
        let ours: Vec<&Sent> = clients
            .iter()
            .enumerate()
            .filter(|(c, _)| c % SESSIONS == s)
            .map(|(_, sent)| sent)
            .collect();
        let sent: HashSet<&str> = ours
            .iter()
            .flat_map(|sent| sent.iter().map(|(id, _, _)| id.as_str()))
            .collect();
        let strangers: Vec<_> = stored.iter().filter(|id| !sent.contains(*id)).collect();
        assert!(
            strangers.is_empty(),
            "shared-{s}: nobody sent {strangers:?}"
        );
        for sent in ours {
            let mut last = None;
            for (id, instance, outcome) in sent {
                let at = position.get(id.as_str()).copied();
                if matches!(outcome, Outcome::Acked) {
                    assert!(
                        at.is_some(),
                        "shared-{s}: {id}, acknowledged by instance {instance}, is lost"
                    );
                }
                if let Some(at) = at {
                    assert!(
                        last.is_none_or(|last| last < at),
                        "shared-{s}: {id} is stored before an earlier message of its client"
                    );
                    last = Some(at);
                }
            }
        }
    }
}

fn acked(sent: &Sent) -> usize {
    sent.iter()
        .filter(|(_, _, o)| matches!(o, Outcome::Acked))
        .count()
}

fn failures(sent: &Sent) -> Vec<&(String, usize, Outcome)> {
    sent.iter()
        .filter(|(_, _, o)| matches!(o, Outcome::Failed { .. }))
        .collect()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
}

/// Waits until `done` holds, failing with `what()` after `limit`.
fn wait_until(limit: Duration, what: impl Fn() -> String, done: impl Fn() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "{}", what());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// 16 clients over two instances, 30 appends each; one instance gets
/// SIGKILL mid-burst and its clients carry on through the other (as behind
/// a load balancer). Nothing acknowledged is lost or doubled, and the
/// survivor serves every request after the kill.
#[test]
fn killing_one_instance_mid_burst_loses_nothing_acknowledged() {
    const CLIENTS: usize = 16;
    const APPENDS: usize = 30;
    let Some(pg) = postgres_server::server() else {
        return;
    };
    let url = pg.fresh_url();
    let dir = tempfile::tempdir().unwrap();
    let mut a = Instance::start(&url, dir.path().join("a.log"));
    let b = Instance::start(&url, dir.path().join("b.log"));
    let bases = [a.base.clone(), b.base.clone()];
    let rt = runtime();
    rt.block_on(create_sessions(&b.base));

    let total = Arc::new(AtomicUsize::new(0));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let (bases, total) = (bases.clone(), Arc::clone(&total));
            rt.spawn(async move {
                let http = reqwest::Client::new();
                let mut instance = c % 2;
                let mut sent = Sent::new();
                for n in 0..APPENDS {
                    let id = format!("c{c}-{n}");
                    let outcome = append(&http, &bases[instance], c % SESSIONS, &id).await;
                    sent.push((id, instance, outcome.clone()));
                    match outcome {
                        Outcome::Acked => {
                            total.fetch_add(1, Ordering::SeqCst);
                        }
                        // The instance is gone: on to the other one.
                        Outcome::Failed { .. } => instance = 1 - instance,
                    }
                }
                sent
            })
        })
        .collect();
    wait_until(
        Duration::from_secs(60),
        || "the burst made no progress".into(),
        || total.load(Ordering::SeqCst) >= CLIENTS * APPENDS / 4,
    );
    a.child.kill().unwrap(); // SIGKILL
    a.child.wait().unwrap();
    let at_kill = total.load(Ordering::SeqCst);
    let sent: Vec<Sent> = clients
        .into_iter()
        .map(|client| rt.block_on(client).expect("a client"))
        .collect();
    assert!(
        at_kill < CLIENTS * APPENDS / 2,
        "the kill came mid-burst ({at_kill} acknowledged then)"
    );
    for (c, sent) in sent.iter().enumerate() {
        let failed = failures(sent);
        if c % 2 == 1 {
            // B's clients never noticed.
            assert!(
                failed.is_empty(),
                "client {c} of the survivor: {failed:?}; B's stderr: {}",
                b.stderr()
            );
        } else {
            // A's clients lost one request each, the one under way or the
            // next (it may be stored or not), and B took every later one.
            assert!(
                failed.len() == 1 && failed[0].1 == 0,
                "client {c} of the killed instance: {failed:?}"
            );
            assert_eq!(acked(sent), APPENDS - 1, "client {c}: {sent:?}");
        }
    }
    check_stored(&url, &sent);

    // The survivor's index follows what A wrote before it died.
    let store = PostgresStore::open(&url).unwrap();
    let http = reqwest::Client::new();
    for s in 0..SESSIONS {
        let stored = store
            .get(&SessionRef::key("default", format!("shared-{s}")))
            .unwrap()
            .unwrap()
            .message_count;
        let view: Value = rt.block_on(async {
            http.get(format!("{}/v1/sessions/shared-{s}", b.base))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap()
        });
        assert_eq!(view["message_count"], stored, "B's view of shared-{s}");
    }
}

/// The database stopped (`pg_ctl stop -m fast`) mid-burst and started
/// again: while it is down each request gets a quick 503 whose JSON error
/// names the database; once it is back both instances append again, and
/// the data holds every acknowledged message once, in order.
#[test]
fn the_database_restarted_mid_burst_gives_clear_errors_and_no_corruption() {
    const CLIENTS: usize = 8;
    // A server of this test's own: the others' keeps running.
    let Some(pg) = postgres_server::own_server() else {
        return;
    };
    let url = pg.fresh_url();
    let dir = tempfile::tempdir().unwrap();
    let a = Instance::start(&url, dir.path().join("a.log"));
    let b = Instance::start(&url, dir.path().join("b.log"));
    let bases = [a.base.clone(), b.base.clone()];
    let rt = runtime();
    rt.block_on(create_sessions(&a.base));

    let stop = Arc::new(AtomicBool::new(false));
    let log: Arc<Vec<Mutex<Sent>>> = Arc::new((0..CLIENTS).map(|_| Mutex::default()).collect());
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let (bases, stop, log) = (bases.clone(), Arc::clone(&stop), Arc::clone(&log));
            rt.spawn(async move {
                let http = reqwest::Client::builder()
                    .timeout(Duration::from_secs(60))
                    .build()
                    .unwrap();
                for n in 0.. {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let id = format!("c{c}-{n}");
                    let outcome = append(&http, &bases[c % 2], c % SESSIONS, &id).await;
                    let failed = matches!(outcome, Outcome::Failed { .. });
                    log[c].lock().unwrap().push((id, c % 2, outcome));
                    if failed {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
            })
        })
        .collect();
    let count = |c: usize, from: usize, acked: bool| {
        log[c].lock().unwrap()[from..]
            .iter()
            .filter(|(_, _, o)| matches!(o, Outcome::Acked) == acked)
            .count()
    };
    let lengths = || -> Vec<usize> { log.iter().map(|l| l.lock().unwrap().len()).collect() };
    let status = || format!("{:?} sent; A: {}; B: {}", lengths(), a.stderr(), b.stderr());
    wait_until(
        Duration::from_secs(60),
        || format!("the burst made no progress: {}", status()),
        || (0..CLIENTS).all(|c| count(c, 0, true) >= 10),
    );

    pg.stop();
    // Every client gets errors, not a hang.
    let down = lengths();
    wait_until(
        Duration::from_secs(20),
        || format!("no error while the database was down: {}", status()),
        || (0..CLIENTS).all(|c| count(c, down[c], false) >= 2),
    );
    // A request made now, while it is down: a 503 naming the database,
    // answered well within the connect timeout.
    let (port, http) = (pg.port, reqwest::Client::new());
    for base in &bases {
        let outcome = rt.block_on(append(&http, base, 0, "while-down"));
        let Outcome::Failed { status, body, took } = outcome else {
            panic!("{base} acknowledged an append with the database down");
        };
        assert_eq!(status, Some(503), "{body}");
        assert_eq!(body["error"]["kind"], "io", "{body}");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("cannot connect to the PostgreSQL database")
                && message.contains(&format!("127.0.0.1:{port}/")),
            "the error names the store: {message}"
        );
        assert!(took < Duration::from_secs(5), "answered in {took:?}");
    }
    // The clients' errors were all of that kind.
    for (c, sent) in log.iter().enumerate() {
        for (id, _, outcome) in sent.lock().unwrap()[down[c]..].iter() {
            if let Outcome::Failed { status, body, .. } = outcome {
                assert_eq!(*status, Some(503), "{id}: {body}");
                assert_eq!(body["error"]["kind"], "io", "{id}: {body}");
            }
        }
    }

    pg.start_again();
    let up = lengths();
    wait_until(
        Duration::from_secs(30),
        || format!("appends did not resume: {}", status()),
        || (0..CLIENTS).all(|c| count(c, up[c], true) >= 5),
    );
    stop.store(true, Ordering::SeqCst);
    for client in clients {
        rt.block_on(client).expect("a client");
    }
    let sent: Vec<Sent> = log.iter().map(|l| l.lock().unwrap().clone()).collect();
    // Nothing panicked: both instances still run.
    for instance in [&a, &b] {
        let health = rt.block_on(async {
            reqwest::get(format!("{}/healthz", instance.base))
                .await
                .map(|r| r.status())
        });
        assert!(
            health.is_ok_and(|s| s.is_success()),
            "{}",
            instance.stderr()
        );
    }
    check_stored(&url, &sent);
}
