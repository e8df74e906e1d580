//! The session stores through the binary's crate: the file store's own
//! promises (the contract every backend keeps, with its crash suite, runs in
//! `host/store/tests/contract.rs`):
//! the leftovers of a crash, hostile keys, permissions, and several
//! processes appending to one session at once.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use agent_host_core::{Checkpoint, Message};
use agent_host_store::names::file_name;
use agent_host_store::{
    DEFAULT_AGENT, FileStore, MAX_PAGE_LIMIT, NewSession, PageRequest, SessionRef, SessionStore,
    StoreError,
};

use agent_host_store::testing::{
    TestClock, assert_whole_turns, hostile_keys, keyed, turn, turn_of,
};

fn open(dir: &Path, clock: &TestClock) -> FileStore {
    FileStore::open(dir.join("store"))
        .expect("the store opens")
        .with_clock(clock.source())
}

/// A fresh file store with one session holding `turns` turns of writer 0.
fn store_with(turns: usize) -> (tempfile::TempDir, FileStore, SessionRef, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), &TestClock::new());
    let session = store.create(&keyed("chat")).unwrap().reference();
    for n in 0..turns {
        store.append(&session, &turn(0, n)).unwrap();
    }
    let log = store.files(&session).unwrap().log;
    (dir, store, session, log)
}

fn append_raw(path: &Path, bytes: &[u8]) {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    file.write_all(bytes).unwrap();
}

fn all_turns(n: usize) -> Vec<Message> {
    (0..n).flat_map(|t| turn(0, t)).collect()
}

#[test]
fn layout_and_file_names() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), &TestClock::new());
    let session = store
        .create(&NewSession::new("my agent").with_key("telegram:123456"))
        .unwrap()
        .reference();
    store.append(&session, &turn(0, 0)).unwrap();
    let files = store.files(&session).unwrap();
    let agent_dir = dir
        .path()
        .join("store/sessions")
        .join(file_name("my agent"));
    assert!(file_name("my agent").starts_with("my_agent+"));
    let name = file_name("telegram:123456");
    assert_eq!(name, "telegram_123456+8fdd794b795199df");
    assert_eq!(files.log, agent_dir.join(format!("{name}.jsonl")));
    assert_eq!(files.meta, agent_dir.join(format!("{name}.meta.json")));
    assert_eq!(
        files.sidecar,
        agent_dir.join(format!("{name}.jsonl.corrupt"))
    );
    assert_eq!(files.media, agent_dir.join(format!("{name}_media")));
    assert_eq!(files.state, agent_dir.join(format!("{name}.state")));
    assert_eq!(std::fs::metadata(&files.state).unwrap().len(), 64);
    assert_eq!(store.media_dir(&session).unwrap(), files.media);
    assert!(files.media.is_dir());

    // One message per line, in core's native format.
    let log = std::fs::read_to_string(&files.log).unwrap();
    assert_eq!(log, agent_host_core::format::jsonl::to_string(&turn(0, 0)));
    // The whole key, in readable metadata.
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&files.meta).unwrap()).unwrap();
    assert_eq!(meta["key"], "telegram:123456");
    assert_eq!(meta["agent"], "my agent");
    // The count appends refresh is in the state record, not the metadata.
    assert_eq!(meta["message_count"], 0);
    assert_eq!(store.get(&session).unwrap().unwrap().message_count, 3);
    assert_eq!(meta["version"], 1);

    // An anonymous session is named by its id.
    let anonymous = store.create(&NewSession::new("my agent")).unwrap();
    let files = store.files(&anonymous.reference()).unwrap();
    assert_eq!(files.log, agent_dir.join(format!("{}.jsonl", anonymous.id)));
    // And is found by id from a fresh store (another process, a restart).
    let reopened = open(dir.path(), &TestClock::new());
    assert_eq!(
        reopened.get(&anonymous.reference()).unwrap(),
        Some(anonymous)
    );
    assert_eq!(reopened.load(&session).unwrap().messages, turn(0, 0));
}

#[test]
fn hostile_keys_and_agents_stay_under_the_root() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), &TestClock::new());
    let sessions = dir.path().join("store/sessions");
    let mut logs = HashSet::new();
    let agents = ["..", "../..", "/", "CON", "a/b", "default"];
    for agent in agents {
        for key in hostile_keys() {
            let session = store
                .create(&NewSession::new(agent).with_key(key.clone()))
                .unwrap()
                .reference();
            store.append(&session, &turn(0, 0)).unwrap();
            store.media_dir(&session).unwrap();
            let files = store.files(&session).unwrap();
            // Directly inside the agent's folder, which is directly inside sessions/.
            let agent_dir = files.log.parent().unwrap();
            assert_eq!(agent_dir.parent().unwrap(), sessions, "{agent:?} {key:?}");
            assert_eq!(files.meta.parent().unwrap(), agent_dir);
            assert_eq!(files.media.parent().unwrap(), agent_dir);
            let name = files.log.file_name().unwrap().to_str().unwrap();
            assert!(name.len() < 200, "{key:?}: {name}");
            assert!(!name.starts_with('.'), "{key:?}: {name}");
            assert!(
                logs.insert(files.log.clone()),
                "{agent:?} {key:?} shares a file"
            );
        }
    }
    // Nothing was written anywhere but under the store's sessions folder.
    let mut top: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    top.sort();
    assert_eq!(top, ["store"]);
    let agent_dirs = std::fs::read_dir(&sessions).unwrap().count();
    assert_eq!(agent_dirs, agents.len());
    let listed = store.list(&PageRequest::first(MAX_PAGE_LIMIT)).unwrap();
    assert_eq!(listed.total, agents.len() * hostile_keys().len());
}

#[test]
fn a_file_holding_another_key_is_a_clash_not_a_merge() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), &TestClock::new());
    let session = store.create(&keyed("a:b")).unwrap().reference();
    store.append(&session, &turn(0, 0)).unwrap();
    // Make the file of another key hold this session (as a hash collision would).
    let files = store.files(&session).unwrap();
    let stolen = files
        .meta
        .with_file_name(format!("{}.meta.json", file_name("victim")));
    std::fs::copy(&files.meta, &stolen).unwrap();
    let err = store.get_or_create(&keyed("victim")).unwrap_err();
    assert!(matches!(err, StoreError::NameClash { .. }), "{err}");
    assert!(err.to_string().contains("\"a:b\""), "{err}");
    let err = store
        .append(&SessionRef::key(DEFAULT_AGENT, "victim"), &turn(0, 1))
        .unwrap_err();
    assert!(matches!(err, StoreError::NameClash { .. }), "{err}");
    assert_eq!(store.load(&session).unwrap().messages, turn(0, 0));
}

#[test]
fn torn_tail_is_moved_aside_and_the_log_made_whole() {
    let (_dir, store, session, log) = store_with(2);
    let whole = std::fs::read(&log).unwrap();
    let tail = br#"{"type":"user","id":"w0-t2-m0","content":"half a li"#;
    append_raw(&log, tail);

    let history = store.load(&session).unwrap();
    assert_eq!(history.messages, all_turns(2));
    assert_eq!(history.warnings.len(), 1, "{:?}", history.warnings);
    let warning = &history.warnings[0];
    assert_eq!(warning.line, Some(7));
    assert_eq!(warning.offset, Some(whole.len() as u64));
    let shown = warning.to_string();
    assert!(shown.contains("chat.jsonl:7"), "{shown}");
    assert!(
        shown.contains("torn") && shown.contains(".corrupt"),
        "{shown}"
    );

    // The log is whole again; the tail is in the sidecar with its offset.
    assert_eq!(std::fs::read(&log).unwrap(), whole);
    let sidecar = std::fs::read(store.files(&session).unwrap().sidecar).unwrap();
    let (header, rest) = sidecar.split_at(sidecar.iter().position(|&b| b == b'\n').unwrap() + 1);
    let header: serde_json::Value = serde_json::from_slice(header).unwrap();
    assert_eq!(header["offset"], whole.len());
    assert_eq!(header["len"], tail.len());
    assert_eq!(header["line"], 7);
    assert_eq!(header["kind"], "torn-tail");
    assert_eq!(rest, [tail.as_slice(), b"\n"].concat());

    // Once is enough: the next load is clean and the sidecar unchanged.
    let again = store.load(&session).unwrap();
    assert!(again.warnings.is_empty(), "{:?}", again.warnings);
    store.append(&session, &turn(0, 2)).unwrap();
    assert_eq!(store.load(&session).unwrap().messages, all_turns(3));
    assert_eq!(
        std::fs::read(store.files(&session).unwrap().sidecar).unwrap(),
        sidecar
    );
}

#[test]
fn an_append_never_glues_onto_a_torn_tail() {
    // Regression guard: without the check before writing, the next record
    // would continue the torn line and both would be lost to the parser.
    let (_dir, store, session, log) = store_with(1);
    append_raw(&log, br#"{"type":"assistant","id":"torn","con"#);
    store.append(&session, &turn(0, 1)).unwrap();
    let history = store.load(&session).unwrap();
    assert_eq!(history.messages, all_turns(2));
    assert!(history.warnings.is_empty(), "{:?}", history.warnings);
    let sidecar = std::fs::read_to_string(store.files(&session).unwrap().sidecar).unwrap();
    assert!(
        sidecar.contains(r#"{"type":"assistant","id":"torn","con"#),
        "{sidecar}"
    );
}

#[test]
fn nul_filled_tail_is_cut() {
    let (_dir, store, session, log) = store_with(2);
    let whole = std::fs::read(&log).unwrap();
    append_raw(&log, &[0; 4096]);
    let history = store.load(&session).unwrap();
    assert_eq!(history.messages, all_turns(2));
    assert_eq!(history.warnings.len(), 1);
    assert!(
        history.warnings[0].detail.contains("4096 NUL bytes"),
        "{}",
        history.warnings[0]
    );
    assert_eq!(std::fs::read(&log).unwrap(), whole);
    store.append(&session, &turn(0, 2)).unwrap();
    assert_eq!(store.load(&session).unwrap().messages, all_turns(3));
}

#[test]
fn missing_newline_between_two_records_keeps_both() {
    let (_dir, store, session, log) = store_with(0);
    let text = agent_host_core::format::jsonl::to_string(&turn(0, 0));
    let glued = text.replacen('\n', "", 1);
    append_raw(&log, glued.as_bytes());
    let history = store.load(&session).unwrap();
    assert_eq!(history.messages, turn(0, 0));
    // The glued line, and the count the raw write left behind.
    assert_eq!(history.warnings.len(), 2, "{:?}", history.warnings);
    assert_eq!(history.warnings[0].line, Some(1));
    assert!(
        history.warnings[0].detail.contains("2 records on one line"),
        "{}",
        history.warnings[0]
    );
    // Nothing to quarantine, nothing rewritten; the count follows the log.
    assert!(!store.files(&session).unwrap().sidecar.exists());
    assert_eq!(std::fs::read_to_string(&log).unwrap(), glued);
    assert_eq!(history.meta.message_count, 3);
}

#[test]
fn malformed_middle_lines_are_reported_quarantined_once_and_skipped() {
    let (_dir, store, session, log) = store_with(1);
    append_raw(
        &log,
        b"{\"type\":\"user\",\"id\":\"bad\",\"content\":\"\xff\xfe\"}\n",
    );
    append_raw(&log, b"{\"type\":\"robot\",\"id\":\"r\"}\n");
    append_raw(
        &log,
        agent_host_core::format::jsonl::to_string(&turn(0, 1)).as_bytes(),
    );
    let before = std::fs::read(&log).unwrap();

    let history = store.load(&session).unwrap();
    assert_eq!(history.messages, all_turns(2));
    let lines: Vec<_> = history.warnings.iter().map(|w| w.line).collect();
    // The two bad lines, and the count the raw writes left behind.
    assert_eq!(lines, [Some(4), Some(5), None]);
    assert!(
        history.warnings[0].detail.contains("not UTF-8"),
        "{}",
        history.warnings[0]
    );
    let shown = history.warnings[1].to_string();
    assert!(
        shown.contains("chat.jsonl:5") && shown.contains("robot"),
        "{shown}"
    );
    assert!(
        shown.contains("skipped") && shown.contains(".corrupt"),
        "{shown}"
    );
    // The log is never rewritten; the lines are copied to the sidecar once.
    assert_eq!(std::fs::read(&log).unwrap(), before);
    let sidecar_path = store.files(&session).unwrap().sidecar;
    let sidecar = std::fs::read(&sidecar_path).unwrap();
    assert!(sidecar.windows(2).any(|w| w == b"\xff\xfe"));
    let again = store.load(&session).unwrap();
    assert_eq!(again.warnings, history.warnings[..2]);
    assert_eq!(std::fs::read(&sidecar_path).unwrap(), sidecar);
    // The count is the log's messages, reconciled on the first load.
    assert_eq!(store.get(&session).unwrap().unwrap().message_count, 6);
}

#[test]
fn a_large_message_round_trips() {
    // No line-length limit: one 8 MiB tool result in one line. (A 100 MB
    // line is `a_100_mb_line_loads`; a 100 MB session is the loading
    // benchmark's.)
    let (_dir, store, session, _log) = store_with(1);
    let big = Message::tool_result("call-0-0", "cat", "y".repeat(8 << 20)).with_id("big");
    store.append(&session, std::slice::from_ref(&big)).unwrap();
    let history = store.load(&session).unwrap();
    assert_eq!(history.messages.len(), 4);
    assert_eq!(history.messages[3], big);
}

#[test]
fn a_100_mb_line_is_reported_and_the_rest_loads() {
    // Bad input: one message of 100 MB in one line, written to the log by
    // something else. Every line is read within the default per-message
    // limits (64 MiB, 1,000,000 JSON values; issue 15, item 8), so the line
    // is reported with its number and the limit, never parsed, and stays in
    // the file; the other messages load, and appends go on.
    let (_dir, store, session, log) = store_with(1);
    let content = "y".repeat(100_000_000);
    let small = Message::user("@").with_id("huge");
    let line = agent_host_core::format::jsonl::to_string(std::slice::from_ref(&small));
    let (head, tail) = line.split_once('@').unwrap();
    let started = Instant::now();
    let mut bytes = Vec::with_capacity(line.len() + content.len());
    bytes.extend_from_slice(head.as_bytes());
    bytes.extend_from_slice(content.as_bytes());
    bytes.extend_from_slice(tail.as_bytes());
    append_raw(&log, &bytes);
    drop(bytes);
    let history = store.load(&session).unwrap();
    let took = started.elapsed();
    assert_eq!(history.messages.len(), 3);
    assert!(
        history
            .warnings
            .iter()
            .any(|w| w.line == Some(4) && w.detail.contains("the `message_mb` limit")),
        "{:?}",
        history.warnings
    );
    assert!(
        std::fs::metadata(&log).unwrap().len() > 100_000_000,
        "the line is kept"
    );
    store.append(&session, &turn(0, 1)).unwrap();
    assert_eq!(store.load(&session).unwrap().messages.len(), 6);
    eprintln!("a 100 MB line: written and loaded in {took:?}");
}

#[test]
fn a_message_the_store_could_not_read_back_is_not_appended() {
    let (_dir, store, session, log) = store_with(1);
    let before = std::fs::read(&log).unwrap();
    let zeros = serde_json::Value::Array(vec![serde_json::json!(0); 1_000_001]);
    let mut wide = Message::user("hi").with_id("wide");
    wide.metadata.insert("x".into(), zeros);
    let e = store
        .append(&session, &[Message::user("ok").with_id("fine"), wide])
        .unwrap_err();
    assert_eq!(e.kind(), agent_host_core::ErrorKind::LimitExceeded, "{e}");
    let shown = e.to_string();
    assert!(shown.contains("message 1 (id \"wide\")"), "{shown}");
    assert!(shown.contains("`message_values`"), "{shown}");
    assert_eq!(
        std::fs::read(&log).unwrap(),
        before,
        "nothing of the append was written"
    );
}

#[test]
fn unknown_fields_are_kept() {
    let (_dir, store, session, log) = store_with(0);
    append_raw(
        &log,
        b"{\"type\":\"user\",\"id\":\"u\",\"content\":\"hi\",\"future\":{\"v\":2}}\n",
    );
    let history = store.load(&session).unwrap();
    assert_eq!(
        history.messages[0].metadata["future"],
        serde_json::json!({"v": 2})
    );
    // Fields a newer version put in the metadata survive this one's rewrite.
    let meta_path = store.files(&session).unwrap().meta;
    let mut meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&meta_path).unwrap()).unwrap();
    meta["labels"] = serde_json::json!(["prod"]);
    std::fs::write(&meta_path, serde_json::to_vec(&meta).unwrap()).unwrap();
    store.rename(&session, Some("renamed")).unwrap();
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&meta_path).unwrap()).unwrap();
    assert_eq!(meta["labels"], serde_json::json!(["prod"]));
    assert_eq!(meta["title"], "renamed");
}

#[test]
fn a_lagging_count_is_reconciled_from_the_log() {
    // As after a crash between the log's fdatasync and the metadata rename.
    let (_dir, store, session, log) = store_with(1);
    append_raw(
        &log,
        agent_host_core::format::jsonl::to_string(&turn(0, 1)).as_bytes(),
    );
    assert_eq!(store.get(&session).unwrap().unwrap().message_count, 3);
    let history = store.load(&session).unwrap();
    assert_eq!(history.meta.message_count, 6);
    assert!(
        history.warnings[0].detail.contains("counted 3"),
        "{:?}",
        history.warnings
    );
    assert_eq!(store.get(&session).unwrap().unwrap().message_count, 6);
    assert!(store.load(&session).unwrap().warnings.is_empty());
}

#[test]
fn a_log_without_metadata_is_adopted_not_lost() {
    // As after a crash in the middle of a delete, or metadata removed by hand.
    let (dir, store, session, _log) = store_with(2);
    std::fs::remove_file(store.files(&session).unwrap().meta).unwrap();
    let fresh = open(dir.path(), &TestClock::new());
    assert_eq!(fresh.get(&session).unwrap(), None);
    let opened = fresh.get_or_create(&keyed("chat")).unwrap();
    assert!(opened.created);
    assert_eq!(opened.meta.message_count, 6);
    assert_eq!(
        fresh.load(&opened.meta.reference()).unwrap().messages,
        all_turns(2)
    );
}

#[test]
fn unreadable_metadata_is_reported_by_listing() {
    let (_dir, store, session, _log) = store_with(0);
    store.create(&keyed("other")).unwrap();
    let meta = store.files(&session).unwrap().meta;
    std::fs::write(&meta, b"{\"id\": ").unwrap();
    let page = store.list(&PageRequest::first(10)).unwrap();
    assert_eq!(page.total, 1);
    assert_eq!(page.warnings.len(), 1);
    assert_eq!(page.warnings[0].path, meta);
    let err = store.get(&session).unwrap_err();
    assert!(matches!(err, StoreError::Metadata { .. }), "{err}");
    assert!(err.to_string().contains("chat.meta.json"), "{err}");
}

#[cfg(unix)]
#[test]
fn files_are_private_to_the_user() {
    use std::os::unix::fs::PermissionsExt;
    let (dir, store, session, log) = store_with(1);
    append_raw(&log, b"torn");
    store.load(&session).unwrap();
    let files = store.files(&session).unwrap();
    store.media_dir(&session).unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    for file in [&files.log, &files.meta, &files.state, &files.sidecar] {
        assert_eq!(mode(file), 0o600, "{}", file.display());
    }
    let store_root = dir.path().join("store");
    for folder in [
        store_root.clone(),
        store_root.join("sessions"),
        files.log.parent().unwrap().to_owned(),
        files.media,
    ] {
        assert_eq!(mode(&folder), 0o700, "{}", folder.display());
    }
}

/// The environment variable that turns the test binary into a child of
/// [`processes_append_whole_turns`]: `writer:N` or `reader`.
const CHILD_ROLE: &str = "AGENT_HOST_TEST_STORE_ROLE";
/// The folder the children share: the store is its `store/`.
const CHILD_DIR: &str = "AGENT_HOST_TEST_STORE_DIR";
const WRITERS: usize = 4;
const TURNS: usize = 30;

#[test]
fn processes_append_whole_turns() {
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let roles = (0..WRITERS)
        .map(|w| format!("writer:{w}"))
        .chain(["reader".to_owned()]);
    let children: Vec<_> = roles
        .map(|role| {
            let child = Command::new(&exe)
                .args([
                    "store::process_child",
                    "--exact",
                    "--ignored",
                    "--nocapture",
                ])
                .env(CHILD_ROLE, &role)
                .env(CHILD_DIR, dir.path())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("the test binary starts again");
            (role, child)
        })
        .collect();
    for (role, child) in children {
        let output = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "{role} failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        // The child ran the test, not an empty filter.
        assert!(stdout.contains("1 passed"), "{role}: {stdout}");
        if let Some(line) = stdout.lines().find(|l| l.starts_with("reader:")) {
            eprintln!("{line}");
        }
    }
    let store = FileStore::open(dir.path().join("store")).unwrap();
    let session = SessionRef::key(DEFAULT_AGENT, "shared");
    // Every append counted under the lock: no update of the count was lost.
    let total = (WRITERS * TURNS * 3) as u64;
    assert_eq!(store.get(&session).unwrap().unwrap().message_count, total);
    let history = store.load(&session).unwrap();
    assert!(history.warnings.is_empty(), "{:?}", history.warnings);
    assert_whole_turns(&history.messages, WRITERS, TURNS);
    let switches = history
        .messages
        .windows(2)
        .filter(|w| turn_of(&w[0].id).0 != turn_of(&w[1].id).0)
        .count();
    eprintln!("writers took turns {switches} times");
    assert!(!store.files(&session).unwrap().sidecar.exists());
}

/// One process of [`processes_append_whole_turns`]; does nothing unless
/// started by it.
#[test]
#[ignore = "a child process of processes_append_whole_turns"]
fn process_child() {
    let (Ok(role), Some(dir)) = (std::env::var(CHILD_ROLE), std::env::var_os(CHILD_DIR)) else {
        return;
    };
    let dir = PathBuf::from(dir);
    // Start together: each child says it is ready and waits for the others.
    std::fs::write(dir.join(format!("ready-{}", role.replace(':', "-"))), b"").unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let ready = || {
        std::fs::read_dir(&dir)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with("ready-")
            })
            .count()
    };
    while ready() < WRITERS + 1 {
        assert!(
            Instant::now() < deadline,
            "the other children never started"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let store = FileStore::open(dir.join("store")).unwrap();
    // Every process races to create the session.
    let session = store
        .get_or_create(&keyed("shared"))
        .unwrap()
        .meta
        .reference();
    if let Some(who) = role.strip_prefix("writer:") {
        let who: usize = who.parse().unwrap();
        for n in 0..TURNS {
            store.append(&session, &turn(who, n)).unwrap();
        }
        return;
    }
    // The reader: every load sees whole turns only, never a torn tail.
    let total = WRITERS * TURNS * 3;
    let mut loads = 0;
    loop {
        let history = store.load(&session).unwrap();
        loads += 1;
        assert!(history.warnings.is_empty(), "{:?}", history.warnings);
        assert_eq!(history.messages.len() % 3, 0);
        for chunk in history.messages.chunks(3) {
            let (who, n) = turn_of(&chunk[0].id);
            assert_eq!(chunk, turn(who, n));
        }
        if history.messages.len() == total {
            break;
        }
        assert!(Instant::now() < deadline, "the writers never finished");
    }
    println!("reader: {loads} loads");
}

/// Metadata as an unsynced rename can leave it on a file system that does
/// not order data before renames, made by hand: each is read from the backup
/// the last synced write left, and a load writes it back.
/// Regression (the backup was a hard link to the metadata's inode, so
/// damage in place, a truncation, emptied both): the backup is a file of
/// its own, and the session survives its metadata being emptied in place.
#[test]
fn damage_in_place_does_not_reach_the_backup() {
    let clock = TestClock::new();
    let (dir, _, session, _log) = store_with(1);
    let store = open(dir.path(), &clock);
    store.rename(&session, Some("Kept title")).unwrap();
    let files = store.files(&session).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let inode = |p: &Path| std::fs::metadata(p).unwrap().ino();
        assert_ne!(inode(&files.meta), inode(&files.backup));
    }
    std::fs::OpenOptions::new()
        .write(true)
        .open(&files.meta)
        .unwrap()
        .set_len(0)
        .unwrap();
    assert!(std::fs::metadata(&files.backup).unwrap().len() > 0);
    let store = open(dir.path(), &clock);
    let meta = store.get(&session).unwrap().unwrap();
    assert_eq!(meta.title.as_deref(), Some("Kept title"));
    assert_eq!(store.load(&session).unwrap().messages.len(), 3);
}

#[test]
fn metadata_left_damaged_by_a_crash_is_read_from_the_backup() {
    type Damage = fn(&[u8]) -> Vec<u8>;
    let cases: [(&str, Damage); 3] = [
        ("empty", |_| Vec::new()),
        ("NUL-filled", |good| vec![0; good.len()]),
        ("cut at a page boundary", |good| good[..4096].to_vec()),
    ];
    for (what, damage) in cases {
        let clock = TestClock::new();
        let (dir, _, session, _log) = store_with(0);
        let store = open(dir.path(), &clock);
        store.rename(&session, Some("Kept title")).unwrap();
        // Enough checkpoints that the metadata is more than a page long.
        let mut checkpoints = Vec::new();
        for i in 0..40 {
            let checkpoint = Checkpoint {
                usage: None,
                boundary_id: format!("boundary-{i}"),
                summary_id: format!("summary-{i}"),
                covers: (0..3).map(|k| format!("w0-t{i}-m{k}")).collect(),
                created: clock.now(),
            };
            store.write_checkpoint(&session, &checkpoint).unwrap();
            checkpoints.push(checkpoint);
        }
        // Appends after the last synced write: the backup's count lags.
        for n in 0..2 {
            store.append(&session, &turn(0, n)).unwrap();
        }
        let files = store.files(&session).unwrap();
        let good = std::fs::read(&files.meta).unwrap();
        assert!(good.len() > 4096, "{what}: {} bytes", good.len());
        // As a rename that reached the disk before its file's data would
        // leave it: a new file.
        let damaged = files.meta.with_extension("damaged");
        std::fs::write(&damaged, damage(&good)).unwrap();
        std::fs::rename(&damaged, &files.meta).unwrap();

        // A fresh process: listing, get and load all see the session whole.
        let store = open(dir.path(), &clock);
        let page = store.list(&PageRequest::first(10)).unwrap();
        assert!(page.warnings.is_empty(), "{what}: {:?}", page.warnings);
        assert_eq!(page.sessions.len(), 1, "{what}");
        let meta = store.get(&session).unwrap().unwrap();
        assert_eq!(meta.key.as_deref(), Some("chat"), "{what}");
        assert_eq!(meta.title.as_deref(), Some("Kept title"), "{what}");
        assert_eq!(meta.checkpoints, checkpoints, "{what}");
        assert_eq!(meta.message_count, 6, "{what}: the state record's count");

        let history = store.load(&session).unwrap();
        assert_eq!(history.messages, all_turns(2), "{what}");
        assert_eq!(history.meta.message_count, 6, "{what}");
        assert_eq!(history.meta.checkpoints, checkpoints, "{what}");
        let shown: Vec<String> = history.warnings.iter().map(|w| w.to_string()).collect();
        assert!(
            shown
                .iter()
                .any(|w| w.contains("restored from") && w.contains("chat.meta.json.bak")),
            "{what}: {shown:?}"
        );
        // Written back, synced: the next load is clean, and so is the file.
        assert!(store.load(&session).unwrap().warnings.is_empty(), "{what}");
        let fixed: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&files.meta).unwrap()).unwrap();
        assert_eq!(fixed["message_count"], 6, "{what}");
        assert_eq!(fixed["title"], "Kept title", "{what}");
        store.append(&session, &turn(0, 2)).unwrap();
        assert_eq!(store.load(&session).unwrap().messages, all_turns(3));
    }
}

#[test]
fn only_synced_metadata_writes_refresh_the_backup() {
    let (_dir, store, session, _log) = store_with(0);
    let files = store.files(&session).unwrap();
    let backup = PathBuf::from(format!("{}.bak", files.meta.display()));
    let read = |path: &Path| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
    };
    // Made by create, with the metadata.
    assert_eq!(read(&backup), read(&files.meta));
    // An append writes neither: its count goes to the state record.
    let before = std::fs::read(&files.meta).unwrap();
    store.append(&session, &turn(0, 0)).unwrap();
    assert_eq!(std::fs::read(&files.meta).unwrap(), before);
    assert_eq!(read(&backup)["message_count"], 0);
    assert_eq!(store.get(&session).unwrap().unwrap().message_count, 3);
    // A rename is synced, and refreshes both, with the record's count.
    store.rename(&session, Some("t")).unwrap();
    assert_eq!(read(&backup), read(&files.meta));
    assert_eq!(read(&files.meta)["message_count"], 3);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&backup).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    // Metadata broken by hand is still an error, not silently replaced.
    let good = std::fs::read(&files.meta).unwrap();
    std::fs::write(&files.meta, b"{\"id\": ").unwrap();
    assert!(matches!(
        store.get(&session),
        Err(StoreError::Metadata { .. })
    ));
    // Deleting (once the file is restored by hand) removes the backup too.
    std::fs::write(&files.meta, good).unwrap();
    store.delete(&session).unwrap();
    assert!(!backup.exists());
    assert!(!files.state.exists());
}

#[test]
fn a_garbled_state_record_is_detected_and_reconciled() {
    let clock = TestClock::new();
    let (dir, _, session, _log) = store_with(0);
    let store = open(dir.path(), &clock);
    for n in 0..2 {
        clock.advance(60);
        store.append(&session, &turn(0, n)).unwrap();
    }
    let files = store.files(&session).unwrap();
    let good = std::fs::read(&files.state).unwrap();
    let fresh = || open(dir.path(), &clock);
    assert_eq!(fresh().get(&session).unwrap().unwrap().message_count, 6);
    assert_eq!(
        fresh().get(&session).unwrap().unwrap().updated,
        clock.now(),
        "the record's time, newer than the metadata's"
    );

    type Damage = fn(&[u8]) -> Vec<u8>;
    let cases: [(&str, Damage, &str); 4] = [
        (
            "a flipped count bit",
            |good| {
                let mut bad = good.to_vec();
                bad[32] ^= 0x10;
                bad
            },
            "checksum",
        ),
        ("torn", |good| good[..20].to_vec(), "not 64"),
        ("NUL-filled", |good| vec![0; good.len()], "checksum"),
        ("empty", |_| Vec::new(), "not 64"),
    ];
    for (what, damage, says) in cases {
        std::fs::write(&files.state, damage(&good)).unwrap();
        let store = fresh();
        // Not trusted: the metadata's count stands until a load (0 until the
        // first load rewrote it).
        let meta: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&files.meta).unwrap()).unwrap();
        assert_eq!(
            serde_json::json!(store.get(&session).unwrap().unwrap().message_count),
            meta["message_count"],
            "{what}"
        );
        let history = store.load(&session).unwrap();
        assert_eq!(history.messages, all_turns(2), "{what}");
        assert_eq!(history.meta.message_count, 6, "{what}");
        let shown: Vec<String> = history.warnings.iter().map(|w| w.to_string()).collect();
        assert!(
            shown
                .iter()
                .any(|w| w.contains("chat.state") && w.contains(says)),
            "{what}: {shown:?}"
        );
        // Rewritten whole: the next load is clean, and get counts right.
        assert_eq!(std::fs::metadata(&files.state).unwrap().len(), 64);
        assert!(store.load(&session).unwrap().warnings.is_empty(), "{what}");
        assert_eq!(fresh().get(&session).unwrap().unwrap().message_count, 6);
    }

    // A record another session left behind (a delete cut short) is ignored.
    let other = store.create(&keyed("other")).unwrap();
    store.append(&other.reference(), &turn(1, 0)).unwrap();
    let foreign = std::fs::read(store.files(&other.reference()).unwrap().state).unwrap();
    std::fs::write(&files.state, foreign).unwrap();
    let history = fresh().load(&session).unwrap();
    assert_eq!(history.meta.message_count, 6);
    assert!(
        history
            .warnings
            .iter()
            .any(|w| w.to_string().contains("another session")),
        "{:?}",
        history.warnings
    );

    // A session from before the record has none: appends make it.
    std::fs::remove_file(&files.state).unwrap();
    assert_eq!(fresh().get(&session).unwrap().unwrap().message_count, 6);
    store.append(&session, &turn(0, 2)).unwrap();
    assert_eq!(fresh().get(&session).unwrap().unwrap().message_count, 9);
    assert!(fresh().load(&session).unwrap().warnings.is_empty());

    // Clearing sets the record to 0 too.
    store.clear(&session).unwrap();
    assert_eq!(fresh().get(&session).unwrap().unwrap().message_count, 0);
    assert!(fresh().load(&session).unwrap().warnings.is_empty());
}

/// The SQLite store's own promises: what it says about files that are not
/// its databases, what survives closing it, and several processes writing
/// one database.
mod sqlite_store {
    use super::*;
    use agent_host_store::{self, SqliteStore};

    /// An error and its causes, as the CLI prints them (`{:#}`).
    fn chain(error: &dyn std::error::Error) -> String {
        let mut text = error.to_string();
        let mut source = error.source();
        while let Some(cause) = source {
            text = format!("{text}: {cause}");
            source = cause.source();
        }
        text
    }

    #[test]
    fn a_file_that_is_not_sqlite_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notes.db");
        let junk = b"these are my notes, not a database\n".repeat(200);
        std::fs::write(&path, &junk).unwrap();
        let err = agent_host_store::open(&format!("sqlite:{}", path.display()))
            .err()
            .expect("junk is not opened");
        assert!(matches!(err, StoreError::Backend { .. }), "{err}");
        let shown = chain(&err);
        assert!(shown.contains(&path.display().to_string()), "{shown}");
        assert!(shown.contains("not a database"), "{shown}");
        assert!(shown.contains("move it aside"), "{shown}");
        // The file is left as it was.
        assert_eq!(std::fs::read(&path).unwrap(), junk);
    }

    #[test]
    fn a_newer_schema_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sessions.db");
        drop(SqliteStore::open(&path).unwrap());
        // `PRAGMA user_version` is the big-endian u32 at byte 60 of the
        // header; the last connection's close checkpointed the WAL into it.
        let mut bytes = std::fs::read(&path).unwrap();
        let version = u32::try_from(agent_host_store::sqlite::SCHEMA_VERSION).unwrap();
        assert_eq!(bytes[60..64], version.to_be_bytes());
        bytes[60..64].copy_from_slice(&99u32.to_be_bytes());
        std::fs::write(&path, bytes).unwrap();
        let err = SqliteStore::open(&path).unwrap_err();
        let shown = chain(&err);
        assert!(shown.contains("schema version 99"), "{shown}");
        assert!(shown.contains(&path.display().to_string()), "{shown}");
    }

    #[test]
    fn sessions_survive_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nested/folders/sessions.db");
        let spec = format!("sqlite:{}", path.display());
        let session = {
            let store = agent_host_store::open(&spec).unwrap();
            let session = store.create(&keyed("kept")).unwrap().reference();
            store.append(&session, &turn(0, 0)).unwrap();
            let mut with_extra = Message::user("from the future").with_id("f1");
            with_extra
                .metadata
                .insert("future".into(), serde_json::json!({"v": 2}));
            store.append(&session, &[with_extra]).unwrap();
            session
        };
        assert!(path.is_file());
        let store = agent_host_store::open(&spec).unwrap();
        let history = store.load(&session).unwrap();
        assert_eq!(history.messages[..3], turn(0, 0));
        assert_eq!(
            history.messages[3].metadata["future"],
            serde_json::json!({"v": 2})
        );
        assert_eq!(history.meta.message_count, 4);
        assert!(history.warnings.is_empty(), "{:?}", history.warnings);
    }

    #[test]
    fn open_picks_the_backend_from_the_spec() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("a/b/store");
        let files = agent_host_store::open(&folder.display().to_string()).unwrap();
        files.create(&keyed("x")).unwrap();
        assert!(folder.join("sessions").is_dir());
        assert!(!folder.join("sessions.db").exists());

        let db = dir.path().join("c/sessions.db");
        let sqlite = agent_host_store::open(&format!("sqlite:{}", db.display())).unwrap();
        sqlite.create(&keyed("y")).unwrap();
        assert!(db.is_file());
        // Each sees only its own sessions.
        assert_eq!(files.list(&PageRequest::first(10)).unwrap().total, 1);
        assert_eq!(sqlite.list(&PageRequest::first(10)).unwrap().total, 1);

        for spec in ["", "sqlite:"] {
            let err = agent_host_store::open(spec)
                .err()
                .expect("an empty spec is refused");
            assert!(matches!(err, StoreError::Invalid { .. }), "{err}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn the_database_is_private_to_the_user() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("new");
        let store = SqliteStore::open(folder.join("sessions.db")).unwrap();
        let session = store.create(&keyed("private")).unwrap().reference();
        store.append(&session, &turn(0, 0)).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&folder), 0o700);
        for name in ["sessions.db", "sessions.db-wal", "sessions.db-shm"] {
            assert_eq!(mode(&folder.join(name)), 0o600, "{name}");
        }
    }

    /// Tells a child of [`processes_share_one_database`] its writer number.
    const SQLITE_ROLE: &str = "AGENT_HOST_TEST_SQLITE_ROLE";
    /// The database the children share.
    const SQLITE_DB: &str = "AGENT_HOST_TEST_SQLITE_DB";

    #[test]
    fn processes_share_one_database() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("sessions.db");
        let exe = std::env::current_exe().unwrap();
        let children: Vec<_> = (0..WRITERS)
            .map(|who| {
                Command::new(&exe)
                    .args([
                        "store::sqlite_store::sqlite_child",
                        "--exact",
                        "--ignored",
                        "--nocapture",
                    ])
                    .env(SQLITE_ROLE, who.to_string())
                    .env(SQLITE_DB, &db)
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .expect("the test binary starts again")
            })
            .collect();
        for (who, child) in children.into_iter().enumerate() {
            let output = child.wait_with_output().unwrap();
            let stdout = String::from_utf8_lossy(&output.stdout);
            assert!(
                output.status.success(),
                "writer {who} failed:\n{stdout}\n{}",
                String::from_utf8_lossy(&output.stderr)
            );
            assert!(stdout.contains("1 passed"), "writer {who}: {stdout}");
        }
        let store = SqliteStore::open(&db).unwrap();
        // The children raced to create the database and the session: one of each.
        let listed = store.list(&PageRequest::first(10)).unwrap();
        assert_eq!(listed.total, 1);
        let history = store
            .load(&SessionRef::key(DEFAULT_AGENT, "shared"))
            .unwrap();
        assert!(history.warnings.is_empty(), "{:?}", history.warnings);
        assert_eq!(history.meta.message_count, (WRITERS * TURNS * 3) as u64);
        assert_whole_turns(&history.messages, WRITERS, TURNS);
    }

    /// One writer of [`processes_share_one_database`]; does nothing unless
    /// started by it.
    #[test]
    #[ignore = "a child process of processes_share_one_database"]
    fn sqlite_child() {
        let (Ok(who), Some(db)) = (std::env::var(SQLITE_ROLE), std::env::var_os(SQLITE_DB)) else {
            return;
        };
        let who: usize = who.parse().unwrap();
        let db = PathBuf::from(db);
        // Start together, so that the children race to create the database
        // (its WAL mode and schema) as well as the session.
        let dir = db.parent().unwrap();
        std::fs::write(dir.join(format!("ready-{who}")), b"").unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        let ready = || {
            std::fs::read_dir(dir)
                .unwrap()
                .filter(|e| {
                    let name = e.as_ref().unwrap().file_name();
                    name.to_string_lossy().starts_with("ready-")
                })
                .count()
        };
        while ready() < WRITERS {
            assert!(
                Instant::now() < deadline,
                "the other children never started"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        let store = SqliteStore::open(&db).unwrap();
        let session = store
            .get_or_create(&keyed("shared"))
            .unwrap()
            .meta
            .reference();
        for n in 0..TURNS {
            store.append(&session, &turn(who, n)).unwrap();
            if n % 10 == 0 {
                let seen = store.load(&session).unwrap();
                assert_eq!(seen.messages.len() % 3, 0);
            }
        }
    }
}
