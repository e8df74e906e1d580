//! `agent-host store migrate FROM TO` through the binary: a folder into
//! SQLite, SQLite into PostgreSQL (when the test server can run), each copy
//! counted and verified, a second run resuming with nothing to copy; and
//! bad stores refused with errors that say which and why.

use agent_host_core::Message;
use agent_host_store::testing::{keyed, turn};
use agent_host_store::{FileStore, SessionRef, SessionStore, SqliteStore};

use crate::util::{run, stderr, stdout};

/// Runs `store migrate from to`; returns the exit code, stdout, stderr.
fn migrate(from: &str, to: &str) -> (Option<i32>, String, String) {
    let out = run(&["store", "migrate", from, to], "");
    (out.status.code(), stdout(&out), stderr(&out))
}

/// Every session of `a` is in `b` with the same messages, key, title and
/// checkpoints.
fn same_sessions(a: &dyn SessionStore, b: &dyn SessionStore, ids: &[SessionRef]) {
    for id in ids {
        let (x, y) = (a.load(id).unwrap(), b.load(id).unwrap());
        assert_eq!(x.messages, y.messages, "{id:?}");
        assert_eq!((&x.meta.key, &x.meta.title), (&y.meta.key, &y.meta.title));
        assert_eq!(x.meta.checkpoints, y.meta.checkpoints);
    }
}

#[test]
fn store_migrate_copies_a_folder_into_sqlite_and_postgres_verified_and_resumable() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("files");
    let files = FileStore::open(&folder).unwrap();
    let mut ids = Vec::new();
    for (s, key) in ["telegram:1", "a/../b", "ünïcode key"].iter().enumerate() {
        let session = files
            .create(&keyed(key).with_title(format!("t{s}")))
            .unwrap()
            .reference();
        for n in 0..=s {
            files.append(&session, &turn(s, n)).unwrap();
        }
        ids.push(session);
    }
    let checkpoint = agent_host_core::Checkpoint {
        boundary_id: "w2-t0-m0".into(),
        summary_id: "w2-t0-m1".into(),
        covers: vec!["w2-t0-m0".into()],
        created: chrono::Utc::now(),
        usage: None,
    };
    files.write_checkpoint(&ids[2], &checkpoint).unwrap();
    // 1 + 2 + 3 turns of 3 messages.
    let summary = "3 sessions (18 messages)";

    let db = dir.path().join("s.db");
    let sqlite_spec = format!("sqlite:{}", db.display());
    let (code, out, err) = migrate(folder.to_str().unwrap(), &sqlite_spec);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out.matches("copied: ").count(), 3, "{out}");
    assert!(
        out.contains(&format!("{summary} in {sqlite_spec}: 3 copied, 0 copied again, 0 already there; every copy verified")),
        "{out}"
    );
    let sqlite = SqliteStore::open(&db).unwrap();
    same_sessions(&files, &sqlite, &ids);

    // Run again: every session is there already; nothing is copied.
    let (code, again, err) = migrate(folder.to_str().unwrap(), &sqlite_spec);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        again.contains("0 copied, 0 copied again, 3 already there"),
        "{again}"
    );
    // The digest of the copy is the same both times.
    let digest = |text: &str| text.rsplit("digest ").next().unwrap().trim().to_owned();
    assert_eq!(digest(&out), digest(&again));

    // On into PostgreSQL, when its test server can run here.
    let Some(pg) = agent_host_store::testing::postgres_server::server() else {
        return;
    };
    let url = pg.fresh_url();
    // An interrupted earlier run left one session short there.
    let postgres = agent_host_store::PostgresStore::open(&url).unwrap();
    let partial = sqlite.load(&ids[1]).unwrap();
    postgres
        .import(&partial.meta, &partial.messages[..2])
        .unwrap();
    let (code, out, err) = migrate(&sqlite_spec, &url);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("2 copied, 1 copied again, 0 already there"),
        "{out}"
    );
    assert_eq!(digest(&out), digest(&again));
    same_sessions(&files, &postgres, &ids);
    // A session added later to the source is copied by the next run alone.
    let later = sqlite.create(&keyed("later")).unwrap().reference();
    sqlite
        .append(&later, &[Message::user("hello").with_id("later-0")])
        .unwrap();
    let (code, out, err) = migrate(&sqlite_spec, &url);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("4 sessions (19 messages)")
            && out.contains("1 copied, 0 copied again, 3 already there"),
        "{out}"
    );
    assert_eq!(postgres.load(&later).unwrap().messages.len(), 1);
}

#[test]
fn store_migrate_refuses_bad_stores_saying_which_and_why() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("files");
    let files = FileStore::open(&folder).unwrap();
    files.create(&keyed("one")).unwrap();
    let folder = folder.to_str().unwrap();

    // No store where FROM points: said, and nothing created there.
    let missing = dir.path().join("nowhere");
    let (code, out, err) = migrate(missing.to_str().unwrap(), "sqlite:x.db");
    assert_eq!(code, Some(1), "{err}");
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains(&format!("there is no store at {}", missing.display())),
        "{err}"
    );
    assert!(!missing.exists());

    // A TO that is no store spec: a configuration error.
    let (code, _, err) = migrate(folder, "sqlite:");
    assert_eq!(code, Some(78), "{err}");
    assert!(err.contains("`sqlite:` needs a path"), "{err}");

    // A database that does not answer: named, its password hidden.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("postgres://agent:hunter2@127.0.0.1:{port}/agents?connect_timeout=2");
    let (code, _, err) = migrate(folder, &url);
    assert_ne!(code, Some(0), "{err}");
    assert!(err.contains(&format!("127.0.0.1:{port}")), "{err}");
    assert!(err.contains("PostgreSQL"), "{err}");
    assert!(!err.contains("hunter2"), "the password is shown: {err}");

    // Missing arguments: a usage error.
    let (code, _, err) = migrate_args(&["store", "migrate", folder]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("<TO>"), "{err}");
}

fn migrate_args(args: &[&str]) -> (Option<i32>, String, String) {
    let out = run(args, "");
    (out.status.code(), stdout(&out), stderr(&out))
}
