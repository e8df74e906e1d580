//! The file store's group commit across sessions (`with_group_commit`):
//! appends from many threads to many sessions are all stored, and a journal
//! left by a process that is gone gives back, on the next open, whatever
//! its appends wrote to logs that a crash took back.
#![cfg(unix)]

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use agent_host_core::Message;
use agent_host_store::{FileStore, NewSession, SessionRef, SessionStore};
use tempfile::TempDir;

fn journals(root: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(root.join("journal")) else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = entries.map(|e| e.unwrap().path()).collect();
    found.sort();
    found
}

fn session(store: &FileStore, key: &str) -> SessionRef {
    store
        .get_or_create(&NewSession::new("default").with_key(key))
        .unwrap()
        .meta
        .reference()
}

fn texts(store: &FileStore, session: &SessionRef) -> Vec<String> {
    let history = store.load(session).unwrap();
    history.messages.into_iter().map(|m| m.content).collect()
}

/// What a machine crash does to a log whose last appends were not synced:
/// its length goes back (here to `len`), or its tail is zeros.
fn crash(store: &FileStore, session: &SessionRef, len: u64, zeros: bool) {
    let log = store.files(session).unwrap().log;
    let file = fs::OpenOptions::new().write(true).open(&log).unwrap();
    if zeros {
        let full = file.metadata().unwrap().len();
        std::os::unix::fs::FileExt::write_all_at(
            &file,
            &vec![0; usize::try_from(full - len).unwrap()],
            len,
        )
        .unwrap();
    } else {
        file.set_len(len).unwrap();
    }
}

/// The live journal of `root` copied under another name: a journal whose
/// process is gone (no one holds its lock).
fn orphan(root: &Path) -> PathBuf {
    let live = journals(root);
    assert_eq!(live.len(), 1, "{live:?}");
    let dead = root.join("journal").join("0-dead.wal");
    fs::copy(&live[0], &dead).unwrap();
    dead
}

#[test]
fn appends_from_many_threads_to_many_sessions_are_all_stored() {
    let dir = TempDir::new().unwrap();
    let store = Arc::new(
        FileStore::open(dir.path())
            .unwrap()
            .with_group_commit()
            .unwrap(),
    );
    assert_eq!(journals(dir.path()).len(), 1, "one journal for the process");
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let store = store.clone();
            std::thread::spawn(move || {
                let session = session(&store, &format!("s{}", t % 4));
                for i in 0..50 {
                    store
                        .append(&session, &[Message::user(format!("t{t} m{i}"))])
                        .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    for s in 0..4 {
        let got = texts(
            &store,
            &SessionRef::Key {
                agent: "default".into(),
                key: format!("s{s}"),
            },
        );
        assert_eq!(got.len(), 100);
        for t in [s, s + 4] {
            let mine: Vec<&String> = got
                .iter()
                .filter(|m| m.starts_with(&format!("t{t} ")))
                .collect();
            let expected: Vec<String> = (0..50).map(|i| format!("t{t} m{i}")).collect();
            assert_eq!(
                mine,
                expected.iter().collect::<Vec<_>>(),
                "thread {t}: all, in order"
            );
        }
    }
    drop(store);
    assert!(
        journals(dir.path()).is_empty(),
        "a store dropped in order removes its journal"
    );
}

#[test]
fn a_dead_processs_journal_gives_back_what_a_crash_took_from_the_logs() {
    let dir = TempDir::new().unwrap();
    let store = FileStore::open(dir.path())
        .unwrap()
        .with_group_commit()
        .unwrap();
    let (a, b, c) = (
        session(&store, "a"),
        session(&store, "b"),
        session(&store, "c"),
    );
    for s in [&a, &b, &c] {
        store.append(s, &[Message::user("before")]).unwrap();
    }
    // Synced by the clear's checkpoint: from here on, only the journal.
    store.clear(&session(&store, "other")).unwrap();
    let lens: Vec<u64> = [&a, &b, &c]
        .iter()
        .map(|s| fs::metadata(store.files(s).unwrap().log).unwrap().len())
        .collect();
    for i in 0..3 {
        for s in [&a, &b, &c] {
            store
                .append(
                    s,
                    &[
                        Message::user(format!("turn {i}")),
                        Message::assistant(format!("answer {i}")),
                    ],
                )
                .unwrap();
        }
    }
    let whole: Vec<Vec<String>> = [&a, &b, &c].iter().map(|s| texts(&store, s)).collect();
    let dead = orphan(dir.path());
    // The crash: a's log lost its last appends, b's tail came back as
    // zeros, c's log lost half of its last line.
    crash(&store, &a, lens[0], false);
    crash(&store, &b, lens[1], true);
    let c_len = fs::metadata(store.files(&c).unwrap().log).unwrap().len();
    crash(&store, &c, c_len - 10, false);
    assert_ne!(texts(&store, &a), whole[0]);

    let reopened = FileStore::open(dir.path()).unwrap();
    for (s, want) in [&a, &b, &c].iter().zip(&whole) {
        assert_eq!(&texts(&reopened, s), want, "{s}");
    }
    assert!(!dead.exists(), "a replayed journal is removed");
    assert_eq!(journals(dir.path()).len(), 1, "the live one is left alone");
    // Replaying again changes nothing.
    let dead = orphan(dir.path());
    let again = FileStore::open(dir.path()).unwrap();
    for (s, want) in [&a, &b, &c].iter().zip(&whole) {
        assert_eq!(&texts(&again, s), want, "{s}");
    }
    assert!(!dead.exists());
}

#[test]
fn a_log_cleared_or_rewritten_since_is_left_as_it_is() {
    let dir = TempDir::new().unwrap();
    let store = FileStore::open(dir.path())
        .unwrap()
        .with_group_commit()
        .unwrap();
    let (a, b) = (session(&store, "a"), session(&store, "b"));
    store.append(&a, &[Message::user("a0")]).unwrap();
    store.append(&b, &[Message::user("b0")]).unwrap();
    // Synced by the clear's checkpoint; only a1 and b1 are in the journal.
    store.clear(&session(&store, "other")).unwrap();
    store.append(&a, &[Message::user("a1")]).unwrap();
    store.append(&b, &[Message::user("b1")]).unwrap();
    let dead = orphan(dir.path());
    // Since the journal was written: a was emptied by someone else, and b
    // holds other lines where the journaled one was.
    fs::write(store.files(&a).unwrap().log, b"").unwrap();
    let other =
        Message::user("someone else's line, longer than b0 and b1 were together").with_id("x");
    let mut line = Vec::new();
    agent_host_core::format::jsonl::write_line(&other, &mut line);
    fs::write(store.files(&b).unwrap().log, &line).unwrap();
    let reopened = FileStore::open(dir.path()).unwrap();
    assert!(texts(&reopened, &a).is_empty(), "a cleared log stays empty");
    assert_eq!(texts(&reopened, &b), vec![other.content]);
    assert!(!dead.exists());
}

#[test]
fn more_than_the_journal_holds_wraps_after_syncing_the_logs() {
    let dir = TempDir::new().unwrap();
    let store = FileStore::open(dir.path())
        .unwrap()
        .with_group_commit()
        .unwrap();
    let s = session(&store, "big");
    // 12 MiB through an 8 MiB journal, 200 KiB at a time.
    let text = "x".repeat(200 << 10);
    for _ in 0..60 {
        store.append(&s, &[Message::user(text.clone())]).unwrap();
    }
    let log_len = fs::metadata(store.files(&s).unwrap().log).unwrap().len();
    let dead = orphan(dir.path());
    let reopened = FileStore::open(dir.path()).unwrap();
    assert_eq!(texts(&reopened, &s).len(), 60);
    assert_eq!(
        fs::metadata(reopened.files(&s).unwrap().log).unwrap().len(),
        log_len,
        "only the epoch since the wrap is replayed, and it is all present"
    );
    assert!(!dead.exists());
}

#[test]
fn a_journal_being_made_by_a_process_that_died_is_removed() {
    let dir = TempDir::new().unwrap();
    drop(
        FileStore::open(dir.path())
            .unwrap()
            .with_group_commit()
            .unwrap(),
    );
    let half = dir.path().join("journal").join("1234.new");
    fs::write(&half, vec![0; 4096]).unwrap();
    let _store = FileStore::open(dir.path()).unwrap();
    assert!(!half.exists());
}

#[test]
fn two_dead_processes_appending_to_one_session_are_replayed_in_log_order() {
    let dir = TempDir::new().unwrap();
    let first = FileStore::open(dir.path())
        .unwrap()
        .with_group_commit()
        .unwrap();
    let s = session(&first, "shared");
    first.clear(&s).unwrap();
    let second = FileStore::open(dir.path())
        .unwrap()
        .with_group_commit()
        .unwrap();
    let live = journals(dir.path());
    assert_eq!(live.len(), 2);
    // Each process's journal holds every other turn.
    for i in 0..6 {
        let store = if i % 2 == 0 { &first } else { &second };
        store.append(&s, &[Message::user(format!("m{i}"))]).unwrap();
    }
    let whole = texts(&first, &s);
    for (n, journal) in live.iter().enumerate() {
        fs::copy(
            journal,
            dir.path().join("journal").join(format!("{n}-dead.wal")),
        )
        .unwrap();
    }
    crash(&first, &s, 0, false);
    let reopened = FileStore::open(dir.path()).unwrap();
    assert_eq!(texts(&reopened, &s), whole);
    assert_eq!(
        journals(dir.path()),
        live,
        "only the live journals are left"
    );
}

#[test]
fn a_strange_journal_folder_never_keeps_the_store_from_opening() {
    let dir = TempDir::new().unwrap();
    let store = FileStore::open(dir.path()).unwrap();
    let s = session(&store, "kept");
    store.append(&s, &[Message::user("m0")]).unwrap();
    drop(store);
    let journal = dir.path().join("journal");
    fs::create_dir_all(&journal).unwrap();
    // More than a journal holds, a link to a file outside, garbage, and a
    // folder with a journal's name: none is replayed, the store opens.
    fs::write(journal.join("big.wal"), vec![b'A'; 9 << 20]).unwrap();
    let outside = dir.path().join("outside");
    fs::write(&outside, b"not a journal").unwrap();
    std::os::unix::fs::symlink(&outside, journal.join("link.wal")).unwrap();
    fs::write(journal.join("garbage.wal"), b"AHJ1 not a record").unwrap();
    fs::create_dir(journal.join("folder.wal")).unwrap();
    let reopened = FileStore::open(dir.path()).unwrap();
    assert_eq!(texts(&reopened, &s), ["m0"]);
    assert!(journal.join("big.wal").exists(), "not read, not removed");
    assert_eq!(
        fs::read(&outside).unwrap(),
        b"not a journal",
        "the link's target untouched"
    );
    assert!(
        !journal.join("garbage.wal").exists(),
        "read (no records) and removed"
    );
}
