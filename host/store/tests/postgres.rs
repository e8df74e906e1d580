//! The PostgreSQL store against a real server (started by the test
//! process; see `testing::postgres_server`): the shared contract and crash
//! suite, then what only this backend promises: idempotent appends, appends
//! from several instances to one session, migrations, and rows an attacker
//! wrote.

#![cfg(unix)]

use std::path::Path;
use std::sync::{Arc, Barrier};

use agent_host_core::Message;
use agent_host_store::testing::postgres_server::{self, TestServer, execute};
use agent_host_store::testing::{keyed, turn};
use agent_host_store::{PageRequest, PostgresStore, SessionRef, SessionStore, StoreError};

/// The URL of the store kept in `dir`: a fresh schema the first time,
/// written there, so that the crash test's children open the same one.
fn url_in(dir: &Path) -> String {
    let file = dir.join("postgres-url");
    if let Ok(url) = std::fs::read_to_string(&file) {
        return url;
    }
    let url = server().fresh_url();
    std::fs::write(&file, &url).expect("the URL is kept");
    url
}

fn server() -> &'static TestServer {
    postgres_server::server().expect("a PostgreSQL server")
}

fn available() -> bool {
    postgres_server::server().is_some()
}

/// The application name of the crash test's children's connections.
const CHILD: &str = "agent-host-crash-child";

/// The store in `dir`, its connections named [`CHILD`] in a crash child.
fn reopen(dir: &Path) -> PostgresStore {
    let mut url = url_in(dir);
    if std::env::var_os(agent_host_store::testing::CRASH_CHILD_DIR).is_some() {
        url.push_str(&format!("&application_name={CHILD}"));
    }
    PostgresStore::open(&url).expect("the database opens")
}

/// After a kill, waits until the server has ended the child's sessions: a
/// `COMMIT` the child sent before it died still lands (the server runs what
/// it received), and the checks that follow count on the writer being done.
fn child_sessions_ended(_: &dyn SessionStore, _: &SessionRef, _: &Path, context: &str) -> usize {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while postgres_server::count(
        &server().admin_url(),
        &format!("SELECT count(*) FROM pg_stat_activity WHERE application_name = '{CHILD}'"),
    ) > 0
    {
        assert!(
            std::time::Instant::now() < deadline,
            "{context}: the child's sessions linger"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    0
}

agent_host_store::store_contract_tests!(
    postgres,
    |dir, clock| Box::new(super::reopen(dir).with_clock(clock.source())),
    |dir| Box::new(super::reopen(dir)),
    after_kill = Some(super::child_sessions_ended),
    available = super::available,
);

fn fresh() -> Option<String> {
    available().then(|| server().fresh_url())
}

#[test]
fn a_retried_append_with_its_idempotency_key_appends_once() {
    let Some(url) = fresh() else { return };
    let store = PostgresStore::open(&url).unwrap();
    let session = store.create(&keyed("retry")).unwrap().reference();
    let first = store.append_once(&session, "req-1", &turn(0, 0)).unwrap();
    assert_eq!(first.message_count, 3);
    // The retry (the answer was lost): nothing more.
    let again = store.append_once(&session, "req-1", &turn(0, 0)).unwrap();
    assert_eq!(again.message_count, 3);
    // Another request, and the same key on another session, do append.
    store.append_once(&session, "req-2", &turn(0, 1)).unwrap();
    let other = store.create(&keyed("other")).unwrap().reference();
    store.append_once(&other, "req-1", &turn(1, 0)).unwrap();
    let history = store.load(&session).unwrap();
    let expected: Vec<Message> = turn(0, 0).into_iter().chain(turn(0, 1)).collect();
    assert_eq!(history.messages, expected);
    assert_eq!(store.load(&other).unwrap().messages, turn(1, 0));
    // A clear keeps the keys: an old request retried late is not replayed.
    store.clear(&session).unwrap();
    store.append_once(&session, "req-1", &turn(0, 0)).unwrap();
    assert!(store.load(&session).unwrap().messages.is_empty());
    // Bad keys are refused, saying why.
    let err = store.append_once(&session, "", &turn(0, 2)).unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::Invalid {
                what: "idempotency key",
                ..
            }
        ),
        "{err}"
    );
    let long = "k".repeat(256);
    assert!(store.append_once(&session, &long, &turn(0, 2)).is_err());
}

#[test]
fn concurrent_retries_from_two_instances_append_once() {
    let Some(url) = fresh() else { return };
    let stores = [
        Arc::new(PostgresStore::open(&url).unwrap()),
        Arc::new(PostgresStore::open(&url).unwrap()),
    ];
    let session = stores[0].create(&keyed("race")).unwrap().reference();
    let barrier = Arc::new(Barrier::new(8));
    let threads: Vec<_> = (0..8)
        .map(|i| {
            let store = Arc::clone(&stores[i % 2]);
            let (session, barrier) = (session.clone(), Arc::clone(&barrier));
            std::thread::spawn(move || {
                barrier.wait();
                for n in 0..10 {
                    store
                        .append_once(&session, &format!("req-{n}"), &turn(0, n))
                        .unwrap();
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    let history = stores[1].load(&session).unwrap();
    let expected: Vec<Message> = (0..10).flat_map(|n| turn(0, n)).collect();
    assert_eq!(history.messages.len(), 30);
    let mut got = history.messages.clone();
    got.sort_by(|a, b| a.id.cmp(&b.id));
    let mut want = expected;
    want.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(got, want);
    assert_eq!(history.meta.message_count, 30);
}

#[test]
fn two_instances_appending_to_one_session_keep_every_turn_once_in_order() {
    let Some(url) = fresh() else { return };
    // Two stores with their own pools: two servers sharing one database.
    let stores = [
        Arc::new(PostgresStore::open(&url).unwrap()),
        Arc::new(PostgresStore::open(&url).unwrap()),
    ];
    let opened = stores[0].get_or_create(&keyed("shared")).unwrap();
    assert!(!stores[1].get_or_create(&keyed("shared")).unwrap().created);
    let session = opened.meta.reference();
    const WRITERS: usize = 6;
    const TURNS: usize = 25;
    let barrier = Arc::new(Barrier::new(WRITERS));
    let threads: Vec<_> = (0..WRITERS)
        .map(|writer| {
            let store = Arc::clone(&stores[writer % 2]);
            let (session, barrier) = (session.clone(), Arc::clone(&barrier));
            std::thread::spawn(move || {
                barrier.wait();
                for n in 0..TURNS {
                    store.append(&session, &turn(writer + 1, n)).unwrap();
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    let history = stores[1].load(&session).unwrap();
    assert!(history.warnings.is_empty(), "{:?}", history.warnings);
    assert_eq!(history.messages.len(), WRITERS * TURNS * 3);
    assert_eq!(history.meta.message_count, (WRITERS * TURNS * 3) as u64);
    // Whole turns, each once, each writer's in the order it wrote them.
    let mut next = [0usize; WRITERS + 1];
    for chunk in history.messages.chunks(3) {
        let who: usize = chunk[0].id[1..chunk[0].id.find('-').unwrap()]
            .parse()
            .unwrap();
        assert_eq!(chunk, turn(who, next[who]).as_slice());
        next[who] += 1;
    }
    assert!(next[1..].iter().all(|&n| n == TURNS), "{next:?}");
}

#[test]
fn a_newer_schema_is_refused_and_an_older_one_migrated() {
    let Some(url) = fresh() else { return };
    let store = PostgresStore::open(&url).unwrap();
    let kept = store.create(&keyed("kept")).unwrap();
    drop(store);
    // Back to version 1: without the idempotency keys' table, the
    // channels and the request records.
    execute(
        &url,
        "DROP TABLE agent_host_appends; DROP TABLE agent_host_request_records;
         DROP TABLE agent_host_memory_changes;
         ALTER TABLE agent_host_sessions DROP COLUMN channels;
         DELETE FROM agent_host_schema WHERE version >= 2",
    );
    let store = PostgresStore::open(&url).unwrap();
    assert_eq!(store.get(&kept.reference()).unwrap().unwrap().id, kept.id);
    let mut turn = turn(0, 0);
    turn[0].channel = Some("web".into());
    let meta = store.append_once(&kept.reference(), "k", &turn).unwrap();
    assert_eq!(meta.channels, ["web"]);
    store.put_request_record(kept.id, 1, "{}", 10).unwrap();
    drop(store);

    execute(&url, "INSERT INTO agent_host_schema (version) VALUES (99)");
    let err = PostgresStore::open(&url).unwrap_err();
    let text = agent_host_core::error_kind::error_chain(&err);
    assert!(text.contains("schema version 99"), "{text}");
    assert!(text.contains("knows up to 4"), "{text}");
    assert!(text.contains("upgrade agent-host"), "{text}");
    assert!(
        text.contains(&format!("127.0.0.1:{}", server().port)),
        "{text}"
    );
}

#[test]
fn rows_an_attacker_wrote_are_skipped_with_warnings_not_panics() {
    let Some(url) = fresh() else { return };
    let store = PostgresStore::open(&url).unwrap();
    let session = store.create(&keyed("hostile")).unwrap();
    store.append(&session.reference(), &turn(0, 0)).unwrap();
    let id = session.id;
    execute(
        &url,
        &format!(
            "INSERT INTO agent_host_messages VALUES ('{id}', 3, 'not json');
             INSERT INTO agent_host_messages VALUES ('{id}', 4, repeat('x', 68000000));
             INSERT INTO agent_host_messages VALUES ('{id}', 5, '{{\"role\": \"nobody\"}}');
             UPDATE agent_host_sessions SET message_count = -5 WHERE id = '{id}';"
        ),
    );
    let history = store.load(&session.reference()).unwrap();
    assert_eq!(history.messages, turn(0, 0));
    let details: Vec<String> = history.warnings.iter().map(|w| w.to_string()).collect();
    assert_eq!(details.len(), 4, "{details:#?}");
    assert!(details[1].contains("over 67108864 bytes"), "{details:#?}");
    assert!(
        details[3].contains("counts 0 messages, the database holds 6"),
        "{details:#?}"
    );
    // Appends go on after the rows it found.
    let meta = store.append(&session.reference(), &turn(0, 1)).unwrap();
    assert_eq!(meta.message_count, 9);
    let history = store.load(&session.reference()).unwrap();
    assert_eq!(history.messages.len(), 6);
    assert_eq!(history.warnings.len(), 3);

    // A session whose checkpoints do not read: listed as a warning.
    let bad = store.create(&keyed("bad")).unwrap();
    execute(
        &url,
        &format!(
            "UPDATE agent_host_sessions SET checkpoints = '[{{' WHERE id = '{}'",
            bad.id
        ),
    );
    let page = store.list(&PageRequest::first(10)).unwrap();
    assert_eq!(page.sessions.len(), 1);
    assert_eq!(page.warnings.len(), 1, "{:?}", page.warnings);
    assert!(store.get(&bad.reference()).is_err());
}

#[test]
fn the_store_works_and_drops_inside_async_code() {
    // The engine calls stores on tokio's blocking pool, the server may
    // call them from a task: neither may panic, nor may dropping the store.
    let Some(url) = fresh() else { return };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let store: Arc<dyn SessionStore> = Arc::new(PostgresStore::open(&url).unwrap());
        let on_pool = Arc::clone(&store);
        let session = tokio::task::spawn_blocking(move || {
            let session = on_pool.create(&keyed("async")).unwrap().reference();
            on_pool.append(&session, &turn(0, 0)).unwrap();
            session
        })
        .await
        .unwrap();
        assert_eq!(store.load(&session).unwrap().messages.len(), 3);
        assert!(
            store
                .get(&SessionRef::key("default", "none"))
                .unwrap()
                .is_none()
        );
        drop(store);
    });
}

#[test]
fn migrate_copies_file_to_sqlite_to_postgres_to_file_verified_and_resumable() {
    use agent_host_store::{FileStore, NewSession, SqliteStore, migrate};
    let Some(url) = fresh() else { return };
    let dir = tempfile::tempdir().unwrap();
    let files = FileStore::open(dir.path().join("files")).unwrap();
    let mut made = Vec::new();
    for (i, key) in ["telegram:1", "a/../b", "nul\0byte"].iter().enumerate() {
        let session = files
            .create(&keyed(key).with_title(format!("t{i}")))
            .unwrap();
        for n in 0..=i {
            files.append(&session.reference(), &turn(i, n)).unwrap();
        }
        made.push(session.reference());
    }
    let anonymous = files.create(&NewSession::new("coder")).unwrap().reference();
    files.append(&anonymous, &turn(9, 0)).unwrap();
    let checkpoint = agent_host_core::Checkpoint {
        boundary_id: "b".into(),
        summary_id: "s".into(),
        covers: vec!["w9-t0-m0".into()],
        created: chrono::Utc::now(),
        usage: None,
    };
    files.write_checkpoint(&anonymous, &checkpoint).unwrap();

    let sqlite = SqliteStore::open(dir.path().join("s.db")).unwrap();
    let postgres = PostgresStore::open(&url).unwrap();
    let back = FileStore::open(dir.path().join("back")).unwrap();
    // An interrupted earlier run left one session short in PostgreSQL.
    let first = files.load(&made[2]).unwrap();
    postgres.import(&first.meta, &first.messages[..2]).unwrap();

    let mut reports = Vec::new();
    for (from, to) in [
        (&files as &dyn SessionStore, &sqlite as &dyn SessionStore),
        (&sqlite, &postgres),
        (&postgres, &back),
    ] {
        let mut seen = 0;
        let report = migrate::copy_all(from, to, &mut |_| seen += 1).unwrap();
        assert_eq!(seen, 4);
        assert_eq!((report.sessions, report.messages), (4, 21));
        assert!(report.warnings.is_empty(), "{:?}", report.warnings);
        reports.push(report);
    }
    assert_eq!(
        (reports[0].copied, reports[1].copied, reports[1].recopied),
        (4, 3, 1)
    );
    assert!(reports.iter().all(|r| r.digest == reports[0].digest));
    // Every session, with its id, key, title and checkpoints, made the trip.
    for session in made.iter().chain([&anonymous]) {
        let (a, b) = (files.load(session).unwrap(), back.load(session).unwrap());
        assert_eq!(a.messages, b.messages);
        assert_eq!((&a.meta.key, &a.meta.title), (&b.meta.key, &b.meta.title));
        assert_eq!(a.meta.checkpoints, b.meta.checkpoints);
        assert_eq!(
            a.meta.created.timestamp_micros(),
            b.meta.created.timestamp_micros()
        );
    }
    // Run again: resumed, nothing copied, all verified.
    let again = migrate::copy_all(&files, &sqlite, &mut |_| {}).unwrap();
    assert_eq!((again.copied, again.already_there), (0, 4));
    // Another session with a taken key is never overwritten.
    let clash = FileStore::open(dir.path().join("clash")).unwrap();
    clash.create(&keyed("telegram:1")).unwrap();
    let err = migrate::copy_all(&clash, &sqlite, &mut |_| {}).unwrap_err();
    assert!(err.to_string().contains("holds another session"), "{err}");
}

#[test]
fn announcements_reach_every_instance_in_order() {
    let Some(url) = fresh() else { return };
    let (a, b) = (
        PostgresStore::open(&url).unwrap(),
        PostgresStore::open(&url).unwrap(),
    );
    let mut heard = b.notifications().expect("PostgreSQL has notifications");
    let mut own = a.notifications().unwrap();
    // The listeners are up once an announcement made after them arrives.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let first = loop {
        a.announce("hello").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        if let Ok(notice) = heard.try_recv() {
            break notice;
        }
        assert!(std::time::Instant::now() < deadline, "no notice arrived");
    };
    assert_eq!(first, agent_host_store::Notice::Message("hello".into()));
    while heard.try_recv().is_ok() {}
    for n in 0..50 {
        a.announce(&format!("n{n}")).unwrap();
    }
    let got: Vec<_> = (0..50).map(|_| heard.blocking_recv().unwrap()).collect();
    let want: Vec<_> = (0..50)
        .map(|n| agent_host_store::Notice::Message(format!("n{n}")))
        .collect();
    assert_eq!(got, want);
    // The announcer hears itself too.
    assert!(own.blocking_recv().is_some());
    // Over the cap is refused, saying so.
    let err = a.announce(&"x".repeat(8000)).unwrap_err();
    assert!(err.to_string().contains("at most 7900"), "{err}");
}

/// A listener whose reader falls behind drops what does not fit and is
/// told so as soon as there is room, even when nothing is announced after
/// (it once waited for another notice to say so: the last appends of a
/// burst were missed for good).
#[test]
fn a_reader_that_falls_behind_is_told_lost_without_a_later_notice() {
    let Some(url) = fresh() else { return };
    let (a, b) = (
        PostgresStore::open(&url).unwrap(),
        PostgresStore::open(&url).unwrap(),
    );
    let mut heard = b.notifications().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        a.announce("ready").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        if heard.try_recv().is_ok() {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no notice arrived");
    }
    while heard.try_recv().is_ok() {}
    // More than the reader's backlog, unread, then nothing more; the
    // announcer's own queue is as long, so this goes in a few rounds.
    let burst = 4096 + 100;
    let mut sent = 0;
    while sent < burst {
        match a.announce(&format!("n{sent}")) {
            Ok(()) => sent += 1,
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
        }
    }
    std::thread::sleep(std::time::Duration::from_secs(2));
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut messages = 0;
    loop {
        match heard.try_recv() {
            Ok(agent_host_store::Notice::Lost) => break,
            Ok(agent_host_store::Notice::Message(_)) => messages += 1,
            Err(_) => {
                assert!(
                    std::time::Instant::now() < until,
                    "{messages} of {burst} notices read and never told of the rest"
                );
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        }
    }
    assert!(messages < burst, "{messages} of {burst} before Lost");
}

#[test]
fn a_turn_lock_excludes_other_instances_until_dropped() {
    let Some(url) = fresh() else { return };
    let a = PostgresStore::open(&url).unwrap();
    let b = Arc::new(PostgresStore::open(&url).unwrap());
    let id = uuid::Uuid::new_v4();
    let held = a.turn_lock(id).unwrap().expect("PostgreSQL has turn locks");
    // Another session's lock is free.
    drop(b.turn_lock(uuid::Uuid::new_v4()).unwrap());
    let (sent, taken) = std::sync::mpsc::channel();
    let waiter = {
        let b = Arc::clone(&b);
        std::thread::spawn(move || {
            let lock = b.turn_lock(id).unwrap();
            sent.send(std::time::Instant::now()).unwrap();
            drop(lock);
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(taken.try_recv().is_err(), "the lock was taken while held");
    let released = std::time::Instant::now();
    drop(held);
    let at = taken
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("taken once released");
    assert!(at >= released);
    waiter.join().unwrap();
    // Dropping a store that holds a lock releases it (its connection closes).
    let c = PostgresStore::open(&url).unwrap();
    let _kept = c.turn_lock(id).unwrap();
    drop(c);
    drop(b.turn_lock(id).unwrap());
}

#[test]
fn tls_verifies_the_server_against_sslrootcert_and_refuses_a_stranger() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    // A server of this test's own: it is restarted with TLS on.
    let Some(pg) = postgres_server::own_server() else {
        return;
    };
    let names = vec!["127.0.0.1".to_owned()];
    let server = rcgen::generate_simple_self_signed(names.clone()).unwrap();
    let stranger = rcgen::generate_simple_self_signed(names).unwrap();
    // The key as PostgreSQL wants it: its user's, nobody else may read it.
    let owner = std::fs::metadata(&pg.dir).unwrap();
    let (cert, key) = (pg.dir.join("server.crt"), pg.dir.join("server.key"));
    std::fs::write(&cert, server.cert.pem()).unwrap();
    std::fs::write(&key, server.signing_key.serialize_pem()).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    for file in [&cert, &key] {
        std::os::unix::fs::chown(file, Some(owner.uid()), Some(owner.gid())).unwrap();
    }
    for setting in [
        format!("ALTER SYSTEM SET ssl_cert_file = '{}'", cert.display()),
        format!("ALTER SYSTEM SET ssl_key_file = '{}'", key.display()),
        "ALTER SYSTEM SET ssl = on".to_owned(),
    ] {
        execute(&pg.admin_url(), &setting);
    }
    pg.stop();
    pg.start_again();

    let roots = tempfile::tempdir().unwrap();
    let (right, wrong) = (
        roots.path().join("right.pem"),
        roots.path().join("wrong.pem"),
    );
    std::fs::write(&right, server.cert.pem()).unwrap();
    std::fs::write(&wrong, stranger.cert.pem()).unwrap();
    let base = format!("postgres://postgres@127.0.0.1:{}/postgres", pg.port);
    let url = |query: &str| format!("{base}?application_name=agent-host-tls&{query}");

    // The server's own certificate as the root: connected over TLS.
    let store = PostgresStore::open(&url(&format!(
        "sslmode=require&sslrootcert={}",
        right.display()
    )))
    .expect("TLS with the right root connects");
    let session = store.create(&keyed("tls")).unwrap().reference();
    store.append(&session, &turn(0, 0)).unwrap();
    assert_eq!(store.load(&session).unwrap().messages, turn(0, 0));
    let encrypted = postgres_server::count(
        &pg.admin_url(),
        "SELECT count(*) FROM pg_stat_ssl JOIN pg_stat_activity USING (pid)
         WHERE application_name = 'agent-host-tls' AND ssl",
    );
    assert!(encrypted >= 1, "the store's connections use TLS");

    // Another certificate as the root, or none but the system's: refused,
    // saying where and why (`require` verifies, unlike libpq's).
    for query in [
        format!("sslmode=require&sslrootcert={}", wrong.display()),
        "sslmode=require".to_owned(),
    ] {
        let err = PostgresStore::open(&url(&query)).unwrap_err();
        let text = agent_host_core::error_kind::error_chain(&err);
        assert!(
            text.contains(&format!("127.0.0.1:{}", pg.port)),
            "{query}: {text}"
        );
        // UnknownIssuer, or BadSignature for the stranger (rcgen gives both
        // certificates one subject).
        assert!(
            text.contains("TLS handshake: invalid peer certificate"),
            "{query}: {text}"
        );
    }
    // A root file that is not there: said before connecting.
    let missing = roots.path().join("missing.pem");
    let err = PostgresStore::open(&url(&format!(
        "sslmode=require&sslrootcert={}",
        missing.display()
    )))
    .unwrap_err();
    assert!(
        err.to_string().contains("is not a readable PEM file"),
        "{err}"
    );
}
