//! The file store's promises about what lies beneath its root. Nothing there
//! is followed: a link, a FIFO or a linked session folder planted in a store
//! (the default store is `.agent-host/` in the working folder, which a
//! cloned repository can ship) never makes the store read or write a file
//! outside it, nor hang; such a file is refused with an error that names it.
//! And a clear cut short at any point leaves the session as it was or
//! cleared, never old checkpoints over an emptied log.
//!
//! Regression (issue: the file store followed symlinks; `run --session` and
//! `chat` overwrote bytes of a file outside the store through links planted
//! for a session's log and state record).
#![cfg(unix)]

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, symlink};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::Duration;

use agent_host_core::{Checkpoint, Message};
use agent_host_store::testing::{CRASH_AT_POINT, TestClock, keyed, turn};
use agent_host_store::{
    FileStore, NewSession, PageRequest, SessionFiles, SessionRef, SessionStore, StoreError,
    TailStart,
};
use chrono::{TimeZone, Utc};
use tempfile::TempDir;

/// What a planted file outside the store holds; it must never change.
const PRECIOUS: &[u8] = b"precious bytes outside the store\n";

/// A store in a fresh folder with the session `chat` of agent `default`:
/// two turns, a checkpoint, and a malformed line (so its sidecar exists).
fn store_with_session() -> (TempDir, FileStore, SessionRef, SessionFiles) {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::open(dir.path().join("store")).unwrap();
    let session = store.create(&keyed("chat")).unwrap().reference();
    store.append(&session, &turn(0, 0)).unwrap();
    store.write_checkpoint(&session, &checkpoint(1)).unwrap();
    store.append(&session, &turn(0, 1)).unwrap();
    let files = store.files(&session).unwrap();
    append_raw(&files.log, b"not a message\n");
    store.load(&session).unwrap();
    assert!(files.sidecar.exists());
    (dir, store, session, files)
}

fn checkpoint(n: u32) -> Checkpoint {
    Checkpoint {
        usage: None,
        boundary_id: format!("b{n}"),
        summary_id: format!("s{n}"),
        covers: vec!["w0-t0-m0".into(), "w0-t0-m1".into()],
        created: Utc.with_ymd_and_hms(2025, 6, 1, 12, 0, 0).unwrap(),
    }
}

fn append_raw(path: &Path, bytes: &[u8]) {
    let mut file = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    file.write_all(bytes).unwrap();
}

/// A file outside the store holding [`PRECIOUS`].
fn outside_file(dir: &Path) -> PathBuf {
    let path = dir.join("outside.txt");
    std::fs::write(&path, PRECIOUS).unwrap();
    path
}

/// `path` (outside the store) still holds [`PRECIOUS`], and only that.
#[track_caller]
fn assert_untouched(path: &Path, context: &str) {
    let bytes = std::fs::read(path).unwrap();
    assert!(
        bytes == PRECIOUS,
        "{context}: the file outside the store changed: {} bytes now, {} before",
        bytes.len(),
        PRECIOUS.len()
    );
}

/// Puts a link to `target` in place of `path`, atomically.
fn plant_link(path: &Path, target: &Path) {
    let tmp = path.with_extension("planting");
    symlink(target, &tmp).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// Every file under `dir` (links not followed) and its bytes.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            out.extend(snapshot(&entry.path()));
        } else if kind.is_file() {
            out.insert(entry.path(), std::fs::read(entry.path()).unwrap());
        }
    }
    out
}

/// `result` is a refusal of `rel` (from the store's root) as `found`.
#[track_caller]
fn assert_refused<T: std::fmt::Debug>(result: agent_host_store::Result<T>, rel: &str, found: &str) {
    match result {
        Err(StoreError::Refused {
            path, found: what, ..
        }) if path == Path::new(rel) && what.contains(found) => {}
        other => panic!("expected {rel} refused as {found}, got {other:?}"),
    }
}

/// Which of a session's files a case plants something in place of.
type FileOf = fn(&SessionFiles) -> &PathBuf;

/// Every operation on a session, in an order that ends with its deletion.
const OPERATIONS: [&str; 9] = [
    "get",
    "load",
    "load_tail",
    "append",
    "rename",
    "write_checkpoint",
    "media_dir",
    "clear",
    "delete",
];

/// Runs the operation `op` of [`OPERATIONS`] on `session`.
fn run(store: &FileStore, session: &SessionRef, op: &str) -> agent_host_store::Result<()> {
    fn ok<T>(result: agent_host_store::Result<T>) -> agent_host_store::Result<()> {
        result.map(|_| ())
    }
    match op {
        "get" => ok(store.get(session)),
        "load" => ok(store.load(session)),
        "load_tail" => ok(store.load_tail(session, TailStart::Newest(2))),
        "append" => ok(store.append(session, &turn(0, 9))),
        "rename" => ok(store.rename(session, Some("Renamed"))),
        "write_checkpoint" => ok(store.write_checkpoint(session, &checkpoint(2))),
        "media_dir" => ok(store.media_dir(session)),
        "clear" => ok(store.clear(session)),
        "delete" => ok(store.delete(session)),
        _ => unreachable!("{op}"),
    }
}

/// A link planted in place of each of a session's files: no operation
/// changes a byte of its target, and each operation that would read or
/// write that file fails naming it, relative to the store, as a link.
#[test]
fn links_planted_for_session_files_are_never_followed() {
    let all = OPERATIONS;
    // The file, and the operations that must refuse it: the others go on
    // without it (a backup or sidecar link is replaced or removed, itself).
    let log_ops = [
        "load",
        "load_tail",
        "append",
        "rename",
        "write_checkpoint",
        "clear",
        "delete",
    ];
    let cases: [(&str, FileOf, &[&str]); 5] = [
        ("chat.jsonl", |f| &f.log, &log_ops),
        ("chat.meta.json", |f| &f.meta, &all),
        ("chat.state", |f| &f.state, &all),
        ("chat.meta.json.bak", |f| &f.backup, &[]),
        ("chat.jsonl.corrupt", |f| &f.sidecar, &["load", "load_tail"]),
    ];
    for (name, file_of, refusing) in cases {
        let (dir, store, session, files) = store_with_session();
        let outside = outside_file(dir.path());
        plant_link(file_of(&files), &outside);
        let rel = format!("sessions/default/{name}");
        for op in OPERATIONS {
            let result = run(&store, &session, op);
            assert_untouched(&outside, &format!("{name}: {op}"));
            if refusing.contains(&op) {
                assert!(result.is_err(), "{name}: {op} went through");
                assert_refused(result, &rel, "symbolic link");
            } else {
                assert!(result.is_ok(), "{name}: {op}: {result:?}");
            }
        }
    }
}

/// The refusal says what, where and what to do.
#[test]
fn a_refusal_names_the_file_from_the_store_and_why() {
    let (dir, store, session, files) = store_with_session();
    plant_link(&files.log, &outside_file(dir.path()));
    let error = store.append(&session, &turn(0, 5)).unwrap_err();
    assert_eq!(error.kind(), agent_host_core::ErrorKind::Io);
    let message = error.to_string();
    for part in [
        "cannot open sessions/default/chat.jsonl",
        "a symbolic link, not a regular file",
        "never follows a link",
        &store.root().display().to_string(),
    ] {
        assert!(message.contains(part), "{part:?} not in {message:?}");
    }
}

/// A session folder that is a link to a folder outside holding a copy of
/// the session: never read, never written; listing passes over it.
#[test]
fn a_linked_session_folder_is_neither_read_nor_written() {
    let (dir, store, by_id, files) = store_with_session();
    let id = store.get(&by_id).unwrap().unwrap().id;
    let session = SessionRef::key("default", "chat");
    let agent_dir = files.log.parent().unwrap().to_path_buf();
    let outside = dir.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    let real = outside.join("default");
    std::fs::rename(&agent_dir, &real).unwrap();
    symlink(&real, &agent_dir).unwrap();
    let before = snapshot(&outside);

    let store = FileStore::open(dir.path().join("store")).unwrap();
    let rel = "sessions/default";
    assert_refused(store.get(&session), rel, "symbolic link");
    assert_refused(store.append(&session, &turn(0, 5)), rel, "symbolic link");
    assert_refused(store.get_or_create(&keyed("chat")), rel, "symbolic link");
    assert_refused(store.get_or_create(&keyed("new")), rel, "symbolic link");
    assert_refused(
        store.create(&NewSession::new("default")),
        rel,
        "symbolic link",
    );
    assert!(store.get(&SessionRef::Id(id)).unwrap().is_none());
    assert_eq!(store.list(&PageRequest::first(10)).unwrap().total, 0);
    let page = store
        .list(&PageRequest {
            agent: Some("default".into()),
            ..PageRequest::first(10)
        })
        .unwrap();
    assert_eq!(page.total, 0);
    assert!(
        page.warnings[0].detail.contains("symbolic link"),
        "{page:?}"
    );
    assert_eq!(store.scan().unwrap().total, 0);
    let far_future = Utc.with_ymd_and_hms(2200, 1, 1, 0, 0, 0).unwrap();
    assert!(
        store
            .cleanup(Duration::ZERO, far_future)
            .unwrap()
            .is_empty()
    );
    assert!(
        snapshot(&outside) == before,
        "the folder outside the store changed"
    );
}

/// The `sessions` folder itself a link: the store does not open.
#[test]
fn a_linked_sessions_folder_is_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::create_dir(dir.path().join("store")).unwrap();
    symlink(&outside, dir.path().join("store/sessions")).unwrap();
    assert_refused(
        FileStore::open(dir.path().join("store")),
        "sessions",
        "symbolic link",
    );
    assert!(std::fs::read_dir(&outside).unwrap().next().is_none());
}

/// A link swapped in for the log between two appends is refused; swapped
/// back, the session goes on with every acknowledged message.
#[test]
fn a_link_swapped_in_between_operations_is_refused() {
    let (dir, store, session, files) = store_with_session();
    let outside = outside_file(dir.path());
    let keep = dir.path().join("keep.jsonl");
    std::fs::hard_link(&files.log, &keep).unwrap();
    plant_link(&files.log, &outside);
    assert_refused(
        store.append(&session, &turn(0, 5)),
        "sessions/default/chat.jsonl",
        "symbolic link",
    );
    std::fs::rename(&keep, &files.log).unwrap();
    store.append(&session, &turn(0, 6)).unwrap();
    assert_eq!(store.load(&session).unwrap().messages.len(), 9);
    assert_untouched(&outside, "appends around a swap");
}

/// The log flipped between itself and a link to a file outside while
/// appends run: the link's target never gets a byte, and every append
/// that returned `Ok` is in the log.
#[test]
fn a_link_raced_in_during_appends_never_receives_a_byte() {
    let (dir, store, session, files) = store_with_session();
    let outside = outside_file(dir.path());
    let keep = dir.path().join("keep.jsonl");
    std::fs::hard_link(&files.log, &keep).unwrap();
    let before = store.load(&session).unwrap().messages.len();
    let done = Arc::new(AtomicBool::new(false));
    let flipper = {
        let (done, log, keep, outside) = (done.clone(), files.log.clone(), keep, outside.clone());
        std::thread::spawn(move || {
            let (link_tmp, real_tmp) = (log.with_extension("l"), log.with_extension("r"));
            let mut flips = 0;
            while !done.load(Ordering::SeqCst) {
                symlink(&outside, &link_tmp).unwrap();
                std::fs::rename(&link_tmp, &log).unwrap();
                std::thread::yield_now();
                std::fs::hard_link(&keep, &real_tmp).unwrap();
                std::fs::rename(&real_tmp, &log).unwrap();
                flips += 1;
            }
            flips
        })
    };
    let mut acknowledged = 0;
    for n in 0..300 {
        match store.append(&session, &turn(1, n)) {
            Ok(_) => acknowledged += 1,
            Err(StoreError::Refused { .. } | StoreError::Io { .. }) => {}
            Err(e) => panic!("{e}"),
        }
    }
    done.store(true, Ordering::SeqCst);
    let flips = flipper.join().unwrap();
    assert!(flips > 0);
    assert_untouched(&outside, "appends during flips");
    let messages = store.load(&session).unwrap().messages;
    assert_eq!(messages.len(), before + 3 * acknowledged);
    eprintln!("{acknowledged} of 300 appends acknowledged over {flips} flips");
}

/// A FIFO planted in place of a session's files: every operation returns
/// (refusing it), none waits for a writer that never comes.
#[test]
fn a_fifo_planted_as_a_session_file_does_not_hang() {
    let cases: [(&str, FileOf); 4] = [
        ("chat.jsonl", |f| &f.log),
        ("chat.meta.json", |f| &f.meta),
        ("chat.state", |f| &f.state),
        ("chat.jsonl.corrupt", |f| &f.sidecar),
    ];
    for (name, file_of) in cases {
        let (dir, store, session, files) = store_with_session();
        let path = file_of(&files);
        std::fs::remove_file(path).unwrap();
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            path,
            rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR,
        )
        .unwrap();
        let (sent, received) = mpsc::channel();
        std::thread::spawn(move || {
            let results: Vec<_> = OPERATIONS
                .iter()
                .map(|op| (op, run(&store, &session, op).map_err(|e| e.to_string())))
                .collect();
            let listed = store
                .list(&PageRequest::first(10))
                .map(|p| p.warnings.len());
            let _ = sent.send((results, listed.map_err(|e| e.to_string())));
            drop(dir);
        });
        let (results, listed) = received
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("{name}: an operation hangs on a FIFO"));
        let refused = results
            .iter()
            .filter(|(_, r)| r.as_ref().is_err_and(|e| e.contains("a FIFO")))
            .count();
        assert!(refused > 0, "{name}: {results:?}");
        assert!(listed.is_ok(), "{name}: {listed:?}");
    }
}

/// Regression (the backup was a hard link to the metadata's inode, so a
/// truncation in place emptied both): after every kind of metadata write
/// the two are files of their own.
#[test]
fn the_backup_is_never_the_metadata_inode() {
    let (_dir, store, session, files) = store_with_session();
    let check = |after: &str| {
        let (meta, backup) = (
            std::fs::symlink_metadata(&files.meta).unwrap(),
            std::fs::symlink_metadata(&files.backup).unwrap(),
        );
        assert!(meta.is_file() && backup.is_file(), "{after}");
        assert_ne!(meta.ino(), backup.ino(), "{after}");
        assert_eq!((meta.nlink(), backup.nlink()), (1, 1), "{after}");
    };
    check("create");
    store.rename(&session, Some("T")).unwrap();
    check("rename");
    store.write_checkpoint(&session, &checkpoint(3)).unwrap();
    check("checkpoint");
    store.clear(&session).unwrap();
    check("clear");
}

/// What a session looked like after a clear was cut short.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    /// Every message and checkpoint as before the clear.
    Old,
    /// No message, no checkpoint.
    Cleared,
}

/// What `store` shows of the session `chat`: whole old state or whole
/// cleared state, the same through `get`, `list`, `load_tail` and `load`,
/// and the same again after the load (which may finish the clear).
fn seen(store: &FileStore, session: &SessionRef, old: &[Message], context: &str) -> Seen {
    let meta = store.get(session).unwrap().unwrap();
    let seen = if meta.checkpoints.is_empty() {
        Seen::Cleared
    } else {
        Seen::Old
    };
    let (count, checkpoints) = match seen {
        Seen::Old => (old.len(), 1),
        Seen::Cleared => (0, 0),
    };
    assert_eq!(meta.checkpoints.len(), checkpoints, "{context}");
    assert_eq!(meta.message_count, count as u64, "{context}: {seen:?}");
    let listed = store.list(&PageRequest::first(10)).unwrap();
    assert_eq!(
        listed.sessions[0].checkpoints.len(),
        checkpoints,
        "{context}"
    );
    assert_eq!(listed.sessions[0].message_count, count as u64, "{context}");
    let tail = store.load_tail(session, TailStart::Newest(100)).unwrap();
    assert_eq!(tail.messages.len(), count, "{context}: {seen:?}");
    assert_eq!(tail.meta.checkpoints.len(), checkpoints, "{context}");
    let history = store.load(session).unwrap();
    assert_eq!(&history.messages[..], &old[..count], "{context}: {seen:?}");
    assert_eq!(history.meta.checkpoints.len(), checkpoints, "{context}");
    let again = store.get(session).unwrap().unwrap();
    assert_eq!(again.checkpoints.len(), checkpoints, "{context}");
    assert_eq!(again.message_count, count as u64, "{context}");
    seen
}

/// A clear killed at each of its crash points in turn (the metadata
/// written, the log cut, the sidecar and media removed, the metadata
/// rewritten): what is left reads as the old session or the cleared one,
/// never old checkpoints over an emptied log; once a point shows it
/// cleared every later one does; and old checkpoints never come back,
/// through loads, appends and reopening.
#[test]
fn a_clear_cut_short_anywhere_leaves_the_old_session_or_the_cleared_one() {
    let exe = std::env::current_exe().unwrap();
    let mut history = Vec::new();
    for at in 1..=64 {
        let (dir, store, session, files) = store_with_session();
        std::fs::write(store.media_dir(&session).unwrap().join("a.png"), b"png").unwrap();
        let old = store.load(&session).unwrap().messages;
        drop(store);
        let status = std::process::Command::new(&exe)
            .args(["clear_child", "--exact", "--ignored", "--nocapture"])
            .env(CRASH_AT_POINT, at.to_string())
            .env("AGENT_HOST_TEST_CLEAR_DIR", dir.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        let context = format!("crashed at point {at}");
        let store = FileStore::open(dir.path().join("store")).unwrap();
        let seen = seen(&store, &session, &old, &context);
        if seen == Seen::Cleared {
            assert!(
                !files.sidecar.exists() && !files.media.exists(),
                "{context}"
            );
        }
        history.push(seen);
        // What the next process does: append, reopen; old checkpoints never return.
        store.append(&session, &turn(2, 0)).unwrap();
        let store = FileStore::open(dir.path().join("store")).unwrap();
        let meta = store.get(&session).unwrap().unwrap();
        let expected = if seen == Seen::Cleared { 0 } else { 1 };
        assert_eq!(meta.checkpoints.len(), expected, "{context}");
        let kept = if seen == Seen::Cleared { 0 } else { old.len() };
        assert_eq!(
            store.load(&session).unwrap().messages.len(),
            kept + 3,
            "{context}"
        );
        if status.success() {
            assert_eq!(seen, Seen::Cleared, "{context}: the clear returned");
            break;
        }
    }
    let points = history.len() - 1;
    eprintln!("{points} crash points: {history:?}");
    assert!(points >= 4, "only {points} crash points: {history:?}");
    let first_cleared = history.iter().position(|s| *s == Seen::Cleared).unwrap();
    assert!(
        history[first_cleared..].iter().all(|s| *s == Seen::Cleared),
        "a crash after one that left the session cleared left it old: {history:?}"
    );
    assert!(history.contains(&Seen::Old), "{history:?}");
}

/// The child of the test above: clears `chat`, with the crash point its
/// environment names. Does nothing unless started by it.
#[test]
#[ignore = "a child process of a_clear_cut_short_anywhere_leaves_the_old_session_or_the_cleared_one"]
fn clear_child() {
    let Some(dir) = std::env::var_os("AGENT_HOST_TEST_CLEAR_DIR") else {
        return;
    };
    let store = FileStore::open(Path::new(&dir).join("store"))
        .unwrap()
        .with_clock(TestClock::new().source());
    store.clear(&SessionRef::key("default", "chat")).unwrap();
}

/// The ids of `messages`, in order.
fn ids(messages: &[Message]) -> Vec<&str> {
    messages.iter().map(|m| m.id.as_str()).collect()
}

/// Two stores on one folder stand for two processes. The first keeps its
/// files open between appends; whatever the second does in between (an
/// append, a rename, a checkpoint, a torn line, a clear, a delete), the
/// first's next append sees it: the version before its write is the
/// other's, the metadata it returns carries the change, and the log, the
/// count and the state record stay right.
#[test]
fn appends_through_kept_files_see_every_other_writer() {
    let dir = tempfile::tempdir().unwrap();
    let a = FileStore::open(dir.path().join("store")).unwrap();
    let b = FileStore::open(dir.path().join("store")).unwrap();
    let session = a.create(&keyed("chat")).unwrap().reference();
    let files = a.files(&session).unwrap();
    let mut expected: Vec<Message> = Vec::new();
    let append = |store: &FileStore, expected: &mut Vec<Message>, who: usize, n: usize| {
        let messages = turn(who, n);
        let appended = store.append_versioned(&session, &messages).unwrap();
        expected.extend(messages);
        appended
    };
    let first = append(&a, &mut expected, 0, 0);
    // (Else the other store would wait for the lock for ever.)
    assert_unlocked(&files.log, "after an append");
    let second = append(&a, &mut expected, 0, 1);
    assert_eq!(second.before, first.meta.version());
    let other = append(&b, &mut expected, 1, 0);
    let third = append(&a, &mut expected, 0, 2);
    assert_eq!(third.before, other.meta.version(), "the other append");
    assert_eq!(third.meta.message_count, 12);

    let renamed = b.rename(&session, Some("renamed")).unwrap();
    let fourth = append(&a, &mut expected, 0, 3);
    assert_eq!(fourth.before, renamed.version(), "the rename");
    assert_eq!(fourth.meta.title.as_deref(), Some("renamed"));

    let marked = b.write_checkpoint(&session, &checkpoint(1)).unwrap();
    let fifth = append(&a, &mut expected, 0, 4);
    assert_eq!(fifth.before, marked.version(), "the checkpoint");
    assert_eq!(fifth.meta.checkpoints, vec![checkpoint(1)]);

    // A writer killed half-way through a line: the next append moves it to
    // the sidecar before writing, never glues onto it.
    append_raw(&files.log, b"{\"type\":\"user\",\"id\":\"torn");
    let sixth = append(&a, &mut expected, 0, 5);
    assert_eq!(sixth.meta.message_count, 21);
    let history = b.load(&session).unwrap();
    assert_eq!(ids(&history.messages), ids(&expected));
    assert!(history.warnings.is_empty(), "{:?}", history.warnings);

    b.clear(&session).unwrap();
    expected.clear();
    let seventh = append(&a, &mut expected, 0, 6);
    assert_eq!(seventh.before.message_count, 0, "the clear");
    assert_eq!(seventh.meta.message_count, 3);
    assert!(seventh.meta.checkpoints.is_empty());
    let eighth = append(&a, &mut expected, 0, 7);
    assert_eq!(eighth.before, seventh.meta.version());
    let history = b.load(&session).unwrap();
    assert_eq!(ids(&history.messages), ids(&expected));
    assert!(history.warnings.is_empty(), "{:?}", history.warnings);
    // The state record (what `get` reads) has every append's count.
    assert_eq!(b.get(&session).unwrap().unwrap().message_count, 6);

    // Deleted and made again elsewhere: the first store appends to the new
    // session, never into the deleted files it had open.
    let by_key = SessionRef::key("default", "chat");
    a.append(&by_key, &turn(0, 8)).unwrap();
    b.delete(&session).unwrap();
    let again = b.create(&keyed("chat")).unwrap();
    assert!(matches!(
        a.append(&session, &turn(0, 9)),
        Err(StoreError::NotFound(_))
    ));
    let tenth = a.append(&by_key, &turn(0, 10)).unwrap();
    assert_eq!(tenth.id, again.id);
    assert_eq!(tenth.message_count, 3);
    assert_eq!(b.load(&by_key).unwrap().messages.len(), 3);
}

/// The log an append keeps open is not kept locked: another process can
/// take its exclusive lock as soon as the append returns.
#[test]
fn a_kept_log_is_not_left_locked() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::open(dir.path().join("store")).unwrap();
    let session = store.create(&keyed("chat")).unwrap().reference();
    let log = store.files(&session).unwrap().log;
    for n in 0..3 {
        store.append(&session, &turn(0, n)).unwrap();
        assert_unlocked(&log, &format!("after append {n}"));
    }
}

/// Fails unless the log at `path` can be locked exclusively right now.
fn assert_unlocked(path: &Path, context: &str) {
    let other = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    other
        .try_lock()
        .unwrap_or_else(|e| panic!("{context}: the log stayed locked: {e}"));
}

#[test]
fn request_records_planted_in_the_store_are_read_with_care() {
    let (dir, store, session, files) = store_with_session();
    let id = store.get(&session).unwrap().unwrap().id;
    store.put_request_record(id, 1, r#"{"n": 1}"#, 10).unwrap();
    store.put_request_record(id, 2, r#"{"n": 2}"#, 10).unwrap();
    let folder = files.media.with_file_name(format!("chat_requests-{id}"));
    assert!(folder.join("1.json").is_file(), "{}", folder.display());

    // What no record is: garbage, a name that is no number's spelling, a
    // folder, a record over the limit, a link to a file outside the store.
    std::fs::write(folder.join("3.json"), b"{not json").unwrap();
    std::fs::write(folder.join("007.json"), br#"{"n": 7}"#).unwrap();
    std::fs::write(folder.join("notes.txt"), b"hello").unwrap();
    std::fs::create_dir(folder.join("4.json")).unwrap();
    let big = format!(
        "\"{}\"",
        "x".repeat(agent_host_store::MAX_REQUEST_RECORD_BYTES)
    );
    std::fs::write(folder.join("5.json"), big).unwrap();
    let outside = outside_file(dir.path());
    symlink(&outside, folder.join("6.json")).unwrap();
    let records = store.request_records(id).unwrap();
    assert_eq!(
        records,
        [(1, r#"{"n": 1}"#.to_owned()), (2, r#"{"n": 2}"#.to_owned())]
    );
    // Counted: the regular files named as records (the damaged ones too,
    // which a read leaves out).
    assert_eq!(store.request_record_count(id).unwrap(), 4);
    assert_untouched(&outside, "reading request records");

    // The folder itself swapped for a link: refused, nothing outside read
    // or written.
    let away = dir.path().join("away");
    std::fs::create_dir(&away).unwrap();
    std::fs::remove_dir_all(&folder).unwrap();
    symlink(&away, &folder).unwrap();
    let rel = format!("sessions/default/chat_requests-{id}");
    assert_refused(store.put_request_record(id, 7, "{}", 10), &rel, "link");
    assert_refused(store.request_records(id), &rel, "link");
    assert!(std::fs::read_dir(&away).unwrap().next().is_none());

    // A delete takes the records with the session, and a session made
    // again with the same key has none of them.
    std::fs::remove_file(&folder).unwrap();
    store.put_request_record(id, 8, "{}", 10).unwrap();
    store.delete(&session).unwrap();
    assert!(!folder.exists());
    let again = store.create(&keyed("chat")).unwrap();
    assert!(store.request_records(again.id).unwrap().is_empty());
}
