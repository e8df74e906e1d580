//! A real PostgreSQL server for tests: `initdb` into a temporary folder,
//! `postgres` on a random loopback port with its socket in that folder, one
//! server per test process ([`server`]), and a fresh schema per store. A
//! test that stops the database ([`TestServer::stop`], then
//! [`TestServer::start_again`] on the same folder and port) takes a server
//! of its own ([`own_server`]), so that the others' keeps running.
//!
//! `initdb` and `postgres` refuse to run as root: as root, both run as
//! `nobody` through `setpriv`, in a folder that user owns. The server gets
//! `SIGKILL` when the test process ends (`setpriv --pdeathsig`, from a
//! thread that lives as long as the server, so until the process ends for
//! the shared one); folders of servers whose process is gone are removed
//! when the next one starts.
//!
//! The binaries are looked for in `AGENT_HOST_PG_BIN`, then in
//! `/usr/lib/postgresql/*/bin` (the newest), then on `PATH`. When they are
//! absent, [`server`] says so on stderr and returns `None` (the test passes
//! without checking anything), unless `CI` is set: then it panics.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

/// The user the server runs as when the tests run as root (`nobody`).
const UNPRIVILEGED: u32 = 65534;

/// How long the server may take to accept connections, or to stop.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A running server.
#[derive(Debug)]
pub struct TestServer {
    /// Its loopback port.
    pub port: u16,
    /// Its folder (data and socket).
    pub dir: PathBuf,
    bin: PathBuf,
    schemas: AtomicUsize,
    /// The postmaster, `None` while stopped.
    postmaster: Mutex<Option<Postmaster>>,
    /// A server of a test's own: stopped and its folder removed when
    /// dropped (the shared one lives in a static, never dropped).
    own: bool,
}

/// A running `postgres`, started and waited for by a thread of its own:
/// its death signal is tied to that thread, which ends when it does.
#[derive(Debug)]
struct Postmaster {
    pid: rustix::process::Pid,
    ended: Receiver<std::io::Result<ExitStatus>>,
}

impl TestServer {
    /// The URL of the server's `postgres` database as the superuser.
    pub fn admin_url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// A URL whose connections work in a new, empty schema of their own,
    /// so that each test's store starts empty.
    pub fn fresh_url(&self) -> String {
        let n = self.schemas.fetch_add(1, Ordering::SeqCst);
        let schema = format!("t{}_{n}", std::process::id());
        execute(&self.admin_url(), &format!("CREATE SCHEMA {schema}"));
        format!(
            "postgres://postgres@127.0.0.1:{}/postgres?options=-c%20search_path%3D{schema}",
            self.port
        )
    }

    /// The server's log.
    pub fn log(&self) -> PathBuf {
        self.dir.join("server.log")
    }

    /// Stops the server as `pg_ctl stop -m fast` does (`SIGINT`: open
    /// transactions are rolled back, clients disconnected, the data made
    /// durable) and waits until it has exited. Nothing when stopped.
    pub fn stop(&self) {
        let mut postmaster = self
            .postmaster
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(running) = postmaster.take() {
            running.stop(&self.log());
        }
    }

    /// Starts the server again, on the same folder and port, after
    /// [`TestServer::stop`]; returns once it accepts connections. Nothing
    /// when running.
    pub fn start_again(&self) {
        let mut postmaster = self
            .postmaster
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if postmaster.is_none() {
            let running = run(&self.bin, &self.dir, self.port).unwrap_or_else(|| {
                panic!(
                    "the PostgreSQL test server did not start again on port {}; see {}",
                    self.port,
                    self.log().display()
                )
            });
            *postmaster = Some(running);
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if self.own {
            self.stop();
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

impl Postmaster {
    fn stop(self, log: &Path) {
        use rustix::process::{Signal, kill_process};
        if kill_process(self.pid, Signal::INT).is_err() {
            return; // gone already
        }
        match self.ended.recv_timeout(START_TIMEOUT) {
            Ok(_) | Err(RecvTimeoutError::Disconnected) => {}
            Err(RecvTimeoutError::Timeout) => {
                let _ = kill_process(self.pid, Signal::KILL);
                panic!(
                    "the PostgreSQL test server did not stop within {START_TIMEOUT:?}; see {}",
                    log.display()
                );
            }
        }
    }
}

/// Runs `sql` (one or more statements) on `url`, without TLS; panics on an
/// error.
pub fn execute(url: &str, sql: &str) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .unwrap_or_else(|e| panic!("cannot connect to {url}: {e}"));
        tokio::spawn(connection);
        client
            .batch_execute(sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e:?}"));
    });
}

/// The first column of the first row `sql` answers on `url`, as a number.
pub fn count(url: &str, sql: &str) -> i64 {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .unwrap_or_else(|e| panic!("cannot connect to {url}: {e}"));
        tokio::spawn(connection);
        client
            .query_one(sql, &[])
            .await
            .and_then(|row| row.try_get(0))
            .unwrap_or_else(|e| panic!("{sql}: {e:?}"))
    })
}

/// The test process's server, started on first use; `None` when the
/// PostgreSQL binaries are absent and `CI` is unset. Never stop it: the
/// other tests of the process share it.
pub fn server() -> Option<&'static TestServer> {
    static SERVER: OnceLock<Option<TestServer>> = OnceLock::new();
    SERVER
        .get_or_init(|| Some(init(&found_binaries()?, false)))
        .as_ref()
}

/// A server of the caller's own, in its own folder on its own port, for a
/// test that stops and starts it; stopped and its folder removed when
/// dropped. `None` when the PostgreSQL binaries are absent and `CI` is
/// unset.
pub fn own_server() -> Option<TestServer> {
    Some(init(&found_binaries()?, true))
}

/// The binaries' folder; `None` (said on stderr) when absent, unless `CI`
/// is set: then it panics.
fn found_binaries() -> Option<PathBuf> {
    let bin = binaries();
    if bin.is_none() {
        if std::env::var_os("CI").is_some() {
            panic!(
                "CI is set and no PostgreSQL binaries were found (AGENT_HOST_PG_BIN, /usr/lib/postgresql/*/bin, PATH): install postgresql"
            );
        }
        eprintln!(
            "SKIPPED: no PostgreSQL binaries (initdb, postgres) in AGENT_HOST_PG_BIN, /usr/lib/postgresql/*/bin or PATH; install postgresql to run the PostgreSQL tests"
        );
    }
    bin
}

/// The folder holding `initdb`, `postgres` and `pg_isready`.
fn binaries() -> Option<PathBuf> {
    let has = |dir: &Path| dir.join("initdb").is_file() && dir.join("postgres").is_file();
    if let Some(dir) = std::env::var_os("AGENT_HOST_PG_BIN") {
        return Some(PathBuf::from(dir)).filter(|d| has(d));
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse().ok()?;
            Some((version, entry.path().join("bin")))
        })
        .filter(|(_, bin)| has(bin))
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return Some(bin);
    }
    std::env::split_paths(&std::env::var_os("PATH")?).find(|d| has(d))
}

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// A command for `program` run as the unprivileged user when we are root,
/// killed when the calling thread ends when `tied`.
fn unprivileged(program: &Path, tied: bool) -> Command {
    let setpriv = Path::new("/usr/bin/setpriv");
    if !setpriv.exists() {
        assert!(
            !is_root(),
            "running PostgreSQL as root needs setpriv (util-linux)"
        );
        return Command::new(program);
    }
    let mut command = Command::new(setpriv);
    if is_root() {
        command.args([
            format!("--reuid={UNPRIVILEGED}"),
            format!("--regid={UNPRIVILEGED}"),
            "--clear-groups".into(),
        ]);
    }
    if tied {
        command.arg("--pdeathsig=KILL");
    }
    command.arg("--").arg(program);
    command
}

/// `initdb` into a new folder, then a server on a free port.
fn init(bin: &Path, own: bool) -> TestServer {
    static SERVERS: AtomicUsize = AtomicUsize::new(0);
    let base = std::env::temp_dir();
    remove_stale(&base);
    let n = SERVERS.fetch_add(1, Ordering::SeqCst);
    let dir = base.join(format!("agent-host-pg-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).expect("the server's folder");
    if is_root() {
        std::os::unix::fs::chown(&dir, Some(UNPRIVILEGED), Some(UNPRIVILEGED))
            .expect("the server's folder given to nobody");
    }
    let out = unprivileged(&bin.join("initdb"), false)
        .current_dir(&dir)
        .args(["-D".as_ref(), dir.join("data").as_os_str()])
        .args([
            "-U",
            "postgres",
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
        ])
        .output()
        .expect("initdb runs");
    assert!(
        out.status.success(),
        "initdb failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    for _ in 0..5 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        if let Some(postmaster) = run(bin, &dir, port) {
            return TestServer {
                port,
                dir,
                bin: bin.to_owned(),
                schemas: AtomicUsize::new(0),
                postmaster: Mutex::new(Some(postmaster)),
                own,
            };
        }
    }
    panic!(
        "the PostgreSQL test server did not start; see {}",
        dir.join("server.log").display()
    );
}

/// Starts `postgres` on `dir`'s data from a thread that waits for it (its
/// death signal is tied to that thread), and waits until it answers;
/// `None` when it exits first (the port was taken).
fn run(bin: &Path, dir: &Path, port: u16) -> Option<Postmaster> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("server.log"))
        .expect("the server's log");
    let mut command = unprivileged(&bin.join("postgres"), true);
    command
        .current_dir(dir)
        .arg("-D")
        .arg(dir.join("data"))
        .args(["-p", &port.to_string(), "-k"])
        .arg(dir)
        .args([
            "-c",
            "listen_addresses=127.0.0.1",
            "-c",
            "max_connections=200",
            // Dynamic shared memory in files under the data folder rather
            // than in /dev/shm: a server killed with its test process
            // (SIGKILL, no cleanup) leaves its segments where
            // `remove_stale` removes them, not in memory for good.
            "-c",
            "dynamic_shared_memory_type=mmap",
        ])
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("the log"))
        .stderr(log);
    let (started, pid) = std::sync::mpsc::channel();
    let (exited, ended) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name(format!("postgres-{port}"))
        .spawn(move || match command.spawn() {
            Ok(mut child) => {
                let _ = started.send(Ok(child.id()));
                let _ = exited.send(child.wait());
            }
            Err(e) => {
                let _ = started.send(Err(e));
            }
        })
        .expect("a thread");
    let pid = pid
        .recv()
        .expect("the thread answers")
        .expect("postgres starts");
    let postmaster = Postmaster {
        pid: rustix::process::Pid::from_raw(pid as i32).expect("a process id"),
        ended,
    };
    let deadline = Instant::now() + START_TIMEOUT;
    while Instant::now() < deadline {
        match postmaster.ended.try_recv() {
            Err(std::sync::mpsc::TryRecvError::Empty) => {}
            _ => return None, // the port was taken meanwhile: try another
        }
        let ready = Command::new(bin.join("pg_isready"))
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &port.to_string(),
                "-U",
                "postgres",
                "-q",
            ])
            .status()
            .is_ok_and(|s| s.success());
        if ready {
            return Some(postmaster);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = rustix::process::kill_process(postmaster.pid, rustix::process::Signal::KILL);
    None
}

/// Removes the folders of test servers whose process is gone.
fn remove_stale(base: &Path) {
    for entry in std::fs::read_dir(base).into_iter().flatten().flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("agent-host-pg-"))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}
