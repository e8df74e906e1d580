//! `SessionStore::load_tail` in every backend (PostgreSQL when a server
//! can be started) and in the trait's default:
//! the tail always equals the same slice of a whole load, the pipeline sees
//! in it what it sees in the whole log, and a damaged log is treated as a
//! load treats it, with the part not read left unread.

use std::io::Write;
use std::path::Path;

use agent_host_core::budget::{BudgetConfig, build_view};
use agent_host_core::{Checkpoint, HeuristicCounter, Message, Role};
use agent_host_store::{
    FileStore, History, NewSession, PageRequest, SessionMeta, SessionPage, SessionRef,
    SessionStore, SqliteStore, StoreWarning, Tail, TailStart,
};
use chrono::{DateTime, Utc};
use proptest::prelude::*;
use tempfile::TempDir;

/// A store of each backend, and the trait's default over the file store.
fn backends(dir: &Path) -> Vec<(&'static str, Box<dyn SessionStore>)> {
    let mut all = every_file_backend(dir);
    #[cfg(unix)]
    if let Some(server) = agent_host_store::testing::postgres_server::server() {
        all.push((
            "postgres",
            Box::new(agent_host_store::PostgresStore::open(&server.fresh_url()).unwrap()),
        ));
    }
    all
}

fn every_file_backend(dir: &Path) -> Vec<(&'static str, Box<dyn SessionStore>)> {
    vec![
        (
            "file",
            Box::new(FileStore::open(dir.join("files")).unwrap()) as Box<dyn SessionStore>,
        ),
        (
            "sqlite",
            Box::new(SqliteStore::open(dir.join("sessions.db")).unwrap()),
        ),
        (
            "default",
            Box::new(ByDefault(FileStore::open(dir.join("default")).unwrap())),
        ),
    ]
}

/// A store that keeps the trait's default `load_tail`.
struct ByDefault<S>(S);

impl<S: SessionStore> SessionStore for ByDefault<S> {
    fn create(&self, new: &NewSession) -> agent_host_store::Result<SessionMeta> {
        self.0.create(new)
    }
    fn import(
        &self,
        meta: &SessionMeta,
        messages: &[Message],
    ) -> agent_host_store::Result<SessionMeta> {
        self.0.import(meta, messages)
    }
    fn get_or_create(
        &self,
        new: &NewSession,
    ) -> agent_host_store::Result<agent_host_store::Opened> {
        self.0.get_or_create(new)
    }
    fn get(&self, session: &SessionRef) -> agent_host_store::Result<Option<SessionMeta>> {
        self.0.get(session)
    }
    fn append(
        &self,
        session: &SessionRef,
        messages: &[Message],
    ) -> agent_host_store::Result<SessionMeta> {
        self.0.append(session, messages)
    }
    fn load(&self, session: &SessionRef) -> agent_host_store::Result<History> {
        self.0.load(session)
    }
    fn list(&self, page: &PageRequest) -> agent_host_store::Result<SessionPage> {
        self.0.list(page)
    }
    fn rename(
        &self,
        session: &SessionRef,
        title: Option<&str>,
    ) -> agent_host_store::Result<SessionMeta> {
        self.0.rename(session, title)
    }
    fn delete(&self, session: &SessionRef) -> agent_host_store::Result<SessionMeta> {
        self.0.delete(session)
    }
    fn clear(&self, session: &SessionRef) -> agent_host_store::Result<SessionMeta> {
        self.0.clear(session)
    }
    fn write_checkpoint(
        &self,
        session: &SessionRef,
        checkpoint: &Checkpoint,
    ) -> agent_host_store::Result<SessionMeta> {
        self.0.write_checkpoint(session, checkpoint)
    }
    fn cleanup(
        &self,
        idle: std::time::Duration,
        now: DateTime<Utc>,
    ) -> agent_host_store::Result<Vec<SessionMeta>> {
        self.0.cleanup(idle, now)
    }
    fn put_request_record(
        &self,
        session: uuid::Uuid,
        n: u64,
        body: &str,
        keep: usize,
    ) -> agent_host_store::Result<()> {
        self.0.put_request_record(session, n, body, keep)
    }
    fn request_records(&self, session: uuid::Uuid) -> agent_host_store::Result<Vec<(u64, String)>> {
        self.0.request_records(session)
    }
    fn request_record_count(&self, session: uuid::Uuid) -> agent_host_store::Result<usize> {
        self.0.request_record_count(session)
    }
}

fn message(role: Role, id: &str) -> Message {
    let text = format!("text of {id}");
    match role {
        Role::System => Message::system(text),
        Role::User => Message::user(text),
        Role::Assistant => Message::assistant(text),
        Role::Tool => Message::tool_result(format!("call-{id}"), "read", text),
    }
    .with_id(id)
}

fn ids(messages: &[Message]) -> Vec<&str> {
    messages.iter().map(|m| m.id.as_str()).collect()
}

/// A session of `store` holding `log`, appended `batch` messages at a time.
fn session_with(store: &dyn SessionStore, log: &[Message], batch: usize) -> SessionRef {
    let session = store
        .create(&NewSession::new("default").with_key("chat"))
        .unwrap()
        .reference();
    for turn in log.chunks(batch.max(1)) {
        store.append(&session, turn).unwrap();
    }
    session
}

/// What a tail of `log` from `from` is, worked out here from the definition:
/// the leading system messages (not summaries), then the suffix from the
/// start point, the gap between them, and whether the start was found.
fn expected(log: &[Message], from: &TailStart) -> (Vec<Message>, Vec<Message>, u64, bool) {
    let mut system_end = 0;
    while system_end < log.len() && log[system_end].role == Role::System && !log[system_end].summary
    {
        system_end += 1;
    }
    let after = &log[system_end..];
    let newest = |id: &str, before: usize| (0..before).rev().find(|&i| after[i].id == id);
    let start = match from {
        TailStart::Newest(n) => Some(after.len().saturating_sub(*n)),
        TailStart::AtId(id) => newest(id, after.len()),
        // As core's split_log: the newest boundary; the newest summary that
        // is not it; the newest covered id before both.
        TailStart::Covered {
            last,
            boundary,
            summary,
        } => newest(boundary, after.len()).and_then(|b| {
            let s = (0..after.len())
                .rev()
                .find(|&i| i != b && after[i].id == *summary)?;
            newest(last, b.min(s))
        }),
    };
    let (start, found) = start.map_or((0, false), |i| (i, true));
    (
        log[..system_end].to_vec(),
        after[start..].to_vec(),
        start as u64,
        found,
    )
}

fn assert_tail(what: &str, tail: &Tail, log: &[Message], from: &TailStart) {
    let (system, messages, skipped, found) = expected(log, from);
    assert_eq!(ids(&tail.system), ids(&system), "{what}: system");
    assert_eq!(tail.system, system, "{what}: system");
    assert_eq!(ids(&tail.messages), ids(&messages), "{what}: messages");
    assert_eq!(tail.messages, messages, "{what}: messages");
    assert_eq!(tail.skipped, skipped, "{what}: skipped");
    assert_eq!(tail.found, found, "{what}: found");
    assert_eq!(tail.meta.message_count, log.len() as u64, "{what}: count");
    assert!(tail.warnings.is_empty(), "{what}: {:?}", tail.warnings);
}

/// One message of a random log: its role, whether it is a summary, its id.
fn entry() -> impl Strategy<Value = (u8, bool, u8)> {
    (0u8..4, prop::bool::weighted(0.1), 0u8..48)
}

fn log_of(systems: usize, entries: &[(u8, bool, u8)]) -> Vec<Message> {
    let mut log: Vec<Message> = (0..systems)
        .map(|i| message(Role::System, &format!("sys{i}")))
        .collect();
    for &(role, summary, id) in entries {
        let role = [Role::System, Role::User, Role::Assistant, Role::Tool][usize::from(role)];
        // Ids repeat now and then: the newest one is the start.
        let mut m = message(role, &format!("m{id}"));
        m.summary = summary;
        log.push(m);
    }
    log
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// For any log, appended in any batches, any start: `system ++ messages`
    /// is the leading system messages and a suffix of the whole load, and
    /// `skipped` is the gap between them, in every backend.
    #[test]
    fn the_tail_is_the_slice_of_the_whole_log(
        systems in 0usize..4,
        entries in prop::collection::vec(entry(), 0..60),
        batch in 1usize..9,
        newest in prop::collection::vec(0usize..70, 3),
        at in prop::collection::vec(0u8..56, 3),
        covered in prop::collection::vec((0u8..50, 0u8..50, 0u8..50), 3),
    ) {
        let log = log_of(systems, &entries);
        let dir = TempDir::new().unwrap();
        let mut starts: Vec<TailStart> = newest.into_iter().map(TailStart::Newest).collect();
        // Ids from 48 on are in no log.
        starts.extend(at.into_iter().map(|i| TailStart::AtId(format!("m{i}"))));
        starts.push(TailStart::AtId("sys0".into()));
        // Checkpoints over ids that recur: the start precedes the pair.
        starts.extend(covered.into_iter().map(|(last, boundary, summary)| TailStart::Covered {
            last: format!("m{last}"),
            boundary: format!("m{boundary}"),
            summary: format!("m{summary}"),
        }));
        for (name, store) in backends(dir.path()) {
            let session = session_with(store.as_ref(), &log, batch);
            prop_assert_eq!(&store.load(&session).unwrap().messages, &log);
            for from in &starts {
                let tail = store.load_tail(&session, from.clone()).unwrap();
                assert_tail(&format!("{name} {from:?}"), &tail, &log, from);
                let mut whole = tail.system.clone();
                whole.extend(tail.messages.iter().cloned());
                prop_assert_eq!(whole, tail.into_log());
            }
        }
    }
}

#[test]
fn sessions_with_and_without_a_system_prompt() {
    let turns: Vec<Message> = (0..20)
        .map(|i| message([Role::User, Role::Assistant][i % 2], &format!("m{i}")))
        .collect();
    let mut prompted = vec![
        message(Role::System, "prompt"),
        message(Role::System, "rules"),
    ];
    prompted.extend(turns.iter().cloned());
    for log in [turns, prompted] {
        let dir = TempDir::new().unwrap();
        for (name, store) in backends(dir.path()) {
            let session = session_with(store.as_ref(), &log, 3);
            let systems = log.iter().take_while(|m| m.role == Role::System).count();
            let what = format!("{name}, {systems} system messages");

            let tail = store.load_tail(&session, TailStart::Newest(4)).unwrap();
            assert_eq!(tail.system.len(), systems, "{what}");
            assert_eq!(ids(&tail.messages), ["m16", "m17", "m18", "m19"], "{what}");
            assert_eq!(tail.skipped, 16, "{what}");

            // More than the log holds: all of it, nothing skipped.
            let all = store.load_tail(&session, TailStart::Newest(1000)).unwrap();
            assert_eq!(all.messages, log[systems..], "{what}");
            assert_eq!((all.skipped, all.found), (0, true), "{what}");

            // None: the system prompt alone, everything else skipped.
            let none = store.load_tail(&session, TailStart::Newest(0)).unwrap();
            assert!(none.messages.is_empty(), "{what}");
            assert_eq!(none.skipped, 20, "{what}");
            assert_eq!(none.system.len(), systems, "{what}");

            // An id no message has: everything, as a load has it, and said.
            let unknown = store
                .load_tail(&session, TailStart::AtId("gone".into()))
                .unwrap();
            let history = store.load(&session).unwrap();
            assert_eq!(
                unknown.into_log(),
                history.messages,
                "{what}: an unknown id reads all"
            );
            let unknown = store
                .load_tail(&session, TailStart::AtId("gone".into()))
                .unwrap();
            assert!(!unknown.found && unknown.warnings.is_empty(), "{what}");
            assert_eq!(unknown.skipped, 0, "{what}");
        }
    }
}

/// A session as compaction leaves it: a system prompt, messages a summary
/// covers, messages it kept, the checkpoint pair, and newer turns.
fn compacted() -> (Vec<Message>, Checkpoint) {
    let turn = |i: usize| message([Role::User, Role::Assistant][i % 2], &format!("m{i}"));
    let mut log = vec![message(Role::System, "prompt")];
    log.extend((0..25).map(turn));
    let mut boundary = Message::user("[Earlier conversation summarized: 20 messages]")
        .with_id("checkpoint-m19-boundary");
    let mut summary = Message::assistant("They talked.").with_id("checkpoint-m19-summary");
    for m in [&mut boundary, &mut summary] {
        m.summary = true;
        m.synthetic = true;
    }
    log.push(boundary);
    log.push(summary);
    log.extend((25..40).map(turn));
    let checkpoint = Checkpoint {
        usage: None,
        boundary_id: "checkpoint-m19-boundary".into(),
        summary_id: "checkpoint-m19-summary".into(),
        covers: (0..20).map(|i| format!("m{i}")).collect(),
        created: DateTime::UNIX_EPOCH,
    };
    (log, checkpoint)
}

#[test]
fn a_tail_from_the_checkpoint_gives_the_pipeline_the_same_view() {
    let (log, checkpoint) = compacted();
    let view_ids = |log: &[Message]| -> Vec<String> {
        let budget = BudgetConfig {
            context_limit: 1_000_000,
            response_reserve: 0,
            ..BudgetConfig::default()
        };
        build_view(
            log,
            Some(&checkpoint),
            &budget,
            &HeuristicCounter::default(),
        )
        .messages()
        .map(|m| m.id.clone())
        .collect()
    };
    let whole_view = view_ids(&log);
    assert!(whole_view.contains(&"m20".to_owned()), "{whole_view:?}");
    let dir = TempDir::new().unwrap();
    for (name, store) in backends(dir.path()) {
        let session = session_with(store.as_ref(), &log, 5);
        store.write_checkpoint(&session, &checkpoint).unwrap();
        let meta = store.get(&session).unwrap().unwrap();
        let from = TailStart::since(meta.checkpoints.last().unwrap()).unwrap();
        let tail = store.load_tail(&session, from).unwrap();
        assert_eq!(tail.messages[0].id, "m19", "{name}");
        assert_eq!(tail.skipped, 19, "{name}: m0 to m18 are not read");
        assert_eq!(view_ids(&tail.into_log()), whole_view, "{name}");

        // From the boundary, the kept messages m20 to m24 would be lost:
        // why `since` starts at the last covered message.
        let from_boundary = store
            .load_tail(&session, TailStart::AtId(checkpoint.boundary_id.clone()))
            .unwrap();
        assert!(
            !view_ids(&from_boundary.into_log()).contains(&"m20".to_owned()),
            "{name}"
        );
    }
}

#[test]
fn a_later_message_reusing_the_last_covered_id_does_not_move_the_start() {
    let (mut log, checkpoint) = compacted();
    // A client appends a message whose id is the last covered one's: a tail
    // that started at it would leave out the summary and m20 to m39.
    log.push(message(Role::User, "m19"));
    log.push(message(Role::Assistant, "m40"));
    let budget = BudgetConfig {
        context_limit: 1_000_000,
        response_reserve: 0,
        ..BudgetConfig::default()
    };
    let counter = HeuristicCounter::default();
    let view_ids = |log: &[Message]| -> Vec<String> {
        build_view(log, Some(&checkpoint), &budget, &counter)
            .messages()
            .map(|m| m.id.clone())
            .collect()
    };
    let whole_view = view_ids(&log);
    assert!(
        whole_view.contains(&"checkpoint-m19-summary".to_owned()) && whole_view.len() == 25,
        "{whole_view:?}"
    );
    let dir = TempDir::new().unwrap();
    for (name, store) in backends(dir.path()) {
        let session = session_with(store.as_ref(), &log, 4);
        let from = TailStart::since(&checkpoint).unwrap();
        let tail = store.load_tail(&session, from).unwrap();
        assert!(tail.found, "{name}");
        assert_eq!(
            tail.skipped, 19,
            "{name}: the start is the m19 before the pair"
        );
        assert_eq!(view_ids(&tail.into_log()), whole_view, "{name}");
    }
}

// The file store's damage handling.

fn file_store(dir: &Path) -> FileStore {
    FileStore::open(dir.join("store")).unwrap()
}

fn append_raw(path: &Path, bytes: &[u8]) {
    let mut file = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    file.write_all(bytes).unwrap();
}

fn numbered(range: std::ops::Range<usize>) -> Vec<Message> {
    range
        .map(|i| message([Role::User, Role::Assistant][i % 2], &format!("m{i}")))
        .collect()
}

/// A warning with the temporary folder taken out of it, to compare stores.
fn shown(warnings: &[StoreWarning], dir: &Path) -> Vec<String> {
    let dir = dir.display().to_string();
    warnings
        .iter()
        .map(|w| w.to_string().replace(&dir, "<dir>"))
        .collect()
}

/// A session of 10 messages whose log ends in a torn line.
fn torn(dir: &Path) -> (FileStore, SessionRef) {
    let store = file_store(dir);
    let session = session_with(&store, &numbered(0..10), 4);
    let log = store.files(&session).unwrap().log;
    append_raw(&log, br#"{"type":"user","id":"m10","con"#);
    (store, session)
}

#[test]
fn a_torn_tail_is_cut_and_reported_as_load_does() {
    let (loaded_dir, tailed_dir) = (TempDir::new().unwrap(), TempDir::new().unwrap());
    let (loaded, loaded_session) = torn(loaded_dir.path());
    let history = loaded.load(&loaded_session).unwrap();
    let (tailed, session) = torn(tailed_dir.path());
    let tail = tailed.load_tail(&session, TailStart::Newest(3)).unwrap();

    assert_eq!(ids(&tail.messages), ["m7", "m8", "m9"]);
    assert!(
        shown(&tail.warnings, tailed_dir.path())[0].contains("torn"),
        "{:?}",
        tail.warnings
    );
    assert_eq!(
        shown(&tail.warnings, tailed_dir.path()),
        shown(&history.warnings, loaded_dir.path())
    );
    // Cut and quarantined alike: the next tail read is clean.
    let tailed_files = tailed.files(&session).unwrap();
    let loaded_files = loaded.files(&loaded_session).unwrap();
    assert_eq!(
        std::fs::read(&tailed_files.log).unwrap(),
        std::fs::read(&loaded_files.log).unwrap()
    );
    assert!(
        std::fs::read(&tailed_files.sidecar)
            .unwrap()
            .ends_with(b"{\"type\":\"user\",\"id\":\"m10\",\"con\n")
    );
    let again = tailed.load_tail(&session, TailStart::Newest(3)).unwrap();
    assert!(again.warnings.is_empty(), "{:?}", again.warnings);
    assert_eq!(again.messages, tail.messages);
}

/// A log with damage at its start, in its middle and near its end, the
/// count reconciled and the bad lines quarantined by a first load.
fn damaged(dir: &Path) -> (FileStore, SessionRef) {
    let store = file_store(dir);
    let session = store
        .create(&NewSession::new("default").with_key("chat"))
        .unwrap()
        .reference();
    let log = store.files(&session).unwrap().log;
    store
        .append(&session, &[message(Role::System, "prompt")])
        .unwrap();
    // Line 2, among the system prompt: skipped, and the prompt goes on.
    append_raw(&log, b"{\"type\":\"system\",\"id\":\n");
    store
        .append(&session, &[message(Role::System, "rules")])
        .unwrap();
    store.append(&session, &numbered(0..500)).unwrap();
    // Line 504, in the middle: never read by a tail.
    append_raw(&log, b"{\"type\":\"robot\"}\n");
    store.append(&session, &numbered(500..995)).unwrap();
    // Near the end: a bad line, two glued records, a blank line, NUL
    // bytes before a record, and a record written by hand without an id.
    append_raw(&log, b"not json at all\n");
    let glued = format!(
        "{}{}\n\n\0\0\0{}",
        line_of(&message(Role::User, "g1")),
        line_of(&message(Role::Assistant, "g2")),
        line_of(&message(Role::User, "after-nul")),
    );
    append_raw(&log, glued.as_bytes());
    append_raw(&log, b"\n{\"type\":\"user\",\"content\":\"no id\"}\n");
    store.append(&session, &numbered(995..1000)).unwrap();
    let first = store.load(&session).unwrap();
    assert!(
        first
            .warnings
            .iter()
            .any(|w| w.detail.contains("corrected")),
        "{:?}",
        first.warnings
    );
    (store, session)
}

fn line_of(m: &Message) -> String {
    let mut out = Vec::new();
    agent_host_core::format::jsonl::write_line(m, &mut out);
    out.pop();
    String::from_utf8(out).unwrap()
}

#[test]
fn damage_among_the_lines_read_is_reported_as_load_reports_it() {
    let dir = TempDir::new().unwrap();
    let (store, session) = damaged(dir.path());
    let history = store.load(&session).unwrap();
    let count = history.messages.len() as u64;
    assert_eq!(history.meta.message_count, count);
    let whole = shown(&history.warnings, dir.path());
    assert_eq!(whole.len(), 5, "{whole:?}");
    for from in [TailStart::Newest(10), TailStart::AtId("m990".into())] {
        let tail = store.load_tail(&session, from.clone()).unwrap();
        let (system, messages, skipped, found) = expected(&history.messages, &from);
        assert_eq!(tail.system, system, "{from:?}");
        assert_eq!(ids(&tail.messages), ids(&messages), "{from:?}");
        assert_eq!(
            tail.messages, messages,
            "{from:?}: the derived id's line too"
        );
        assert_eq!((tail.skipped, tail.found), (skipped, found), "{from:?}");
        assert_eq!(tail.meta.message_count, count, "{from:?}");
        // All but the middle line's warning, with the same lines and offsets.
        let shown = shown(&tail.warnings, dir.path());
        let not_read: Vec<&String> = whole.iter().filter(|w| !shown.contains(w)).collect();
        assert_eq!(not_read.len(), 1, "{from:?}: {shown:?}");
        assert!(
            not_read[0].contains(":504 ") && not_read[0].contains("robot"),
            "{not_read:?}"
        );
    }
    assert!(
        history
            .messages
            .iter()
            .any(|m| m.id.starts_with("jsonl-01004-")),
        "the id-less record's id derives from its line"
    );
}

#[test]
fn damage_not_yet_quarantined_makes_the_tail_read_a_load() {
    let dir = TempDir::new().unwrap();
    let store = file_store(dir.path());
    let session = session_with(&store, &numbered(0..20), 5);
    let files = store.files(&session).unwrap();
    append_raw(&files.log, b"{\"broken\n");
    store.append(&session, &numbered(20..22)).unwrap();
    let tail = store.load_tail(&session, TailStart::Newest(5)).unwrap();
    assert_eq!(ids(&tail.messages), ["m17", "m18", "m19", "m20", "m21"]);
    let shown = shown(&tail.warnings, dir.path());
    assert_eq!(shown.len(), 1, "{shown:?}");
    assert!(shown[0].contains(":21 ") && shown[0].contains("copied to"));
    assert!(
        std::fs::read(&files.sidecar)
            .unwrap()
            .ends_with(b"{\"broken\n")
    );
    // Quarantined now: read from the end, reported the same.
    let again = store.load_tail(&session, TailStart::Newest(5)).unwrap();
    assert_eq!(again.warnings, tail.warnings);
}

#[test]
fn a_count_the_tail_cannot_trust_is_reconciled_by_a_load() {
    let dir = TempDir::new().unwrap();
    let store = file_store(dir.path());
    let session = session_with(&store, &numbered(0..30), 7);
    let files = store.files(&session).unwrap();
    // Lines no append counted, and no state record to count them.
    append_raw(
        &files.log,
        format!("{}\n", line_of(&message(Role::User, "x"))).as_bytes(),
    );
    std::fs::remove_file(&files.state).unwrap();
    let tail = store.load_tail(&session, TailStart::Newest(2)).unwrap();
    assert_eq!(ids(&tail.messages), ["m29", "x"]);
    assert_eq!(tail.meta.message_count, 31);
    assert_eq!(tail.skipped, 29);
    assert!(
        tail.warnings.iter().any(|w| w.detail.contains("corrected")),
        "{:?}",
        tail.warnings
    );
    // The record is back: the next tail read trusts it.
    let again = store.load_tail(&session, TailStart::Newest(2)).unwrap();
    assert_eq!(again.meta.message_count, 31);
    assert!(again.warnings.is_empty(), "{:?}", again.warnings);

    // A short log is read whole anyway: a count it contradicts is corrected.
    append_raw(
        &files.log,
        format!("{}\n", line_of(&message(Role::User, "y"))).as_bytes(),
    );
    let whole = store
        .load_tail(&session, TailStart::AtId("none".into()))
        .unwrap();
    assert_eq!(whole.meta.message_count, 32);
    assert!(
        whole
            .warnings
            .iter()
            .any(|w| w.detail.contains("corrected"))
    );
}

#[test]
fn a_malformed_row_among_those_read_is_reported_as_load_reports_it() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("sessions.db");
    let store = SqliteStore::open(&path).unwrap();
    let mut log = vec![message(Role::System, "prompt")];
    log.extend(numbered(0..200));
    let session = session_with(&store, &log, 50);
    let db = rusqlite::Connection::open(&path).unwrap();
    for seq in [100, 198] {
        db.execute("UPDATE messages SET line = 'garbage' WHERE seq = ?1", [seq])
            .unwrap();
    }
    let history = store.load(&session).unwrap();
    assert_eq!(history.warnings.len(), 2);
    let tail = store.load_tail(&session, TailStart::Newest(3)).unwrap();
    assert_eq!(ids(&tail.messages), ["m196", "m198", "m199"]);
    assert_eq!(tail.warnings, history.warnings[1..], "row 100 is not read");
    assert_eq!(tail.skipped, 196);
}

/// The same for PostgreSQL: a row an attacker wrote among those read is a
/// warning, one outside them is not read; a row over the line cap is
/// never transferred.
#[cfg(unix)]
#[test]
fn a_malformed_postgres_row_among_those_read_is_reported_as_load_reports_it() {
    use agent_host_store::testing::postgres_server;
    let Some(server) = postgres_server::server() else {
        return;
    };
    let url = server.fresh_url();
    let store = agent_host_store::PostgresStore::open(&url).unwrap();
    let mut log = vec![message(Role::System, "prompt")];
    log.extend(numbered(0..200));
    let session = session_with(&store, &log, 50);
    postgres_server::execute(
        &url,
        "UPDATE agent_host_messages SET line = 'garbage' WHERE seq IN (100, 198)",
    );
    let history = store.load(&session).unwrap();
    assert_eq!(history.warnings.len(), 2);
    let tail = store.load_tail(&session, TailStart::Newest(3)).unwrap();
    assert_eq!(ids(&tail.messages), ["m196", "m198", "m199"]);
    assert_eq!(tail.warnings, history.warnings[1..], "row 100 is not read");
    assert_eq!(tail.skipped, 196);
    // A count the rows contradict is reconciled when the tail reads them all.
    postgres_server::execute(&url, "UPDATE agent_host_sessions SET message_count = 7");
    let all = store.load_tail(&session, TailStart::Newest(1000)).unwrap();
    assert_eq!(all.meta.message_count, 201);
    assert!(all.warnings.iter().any(|w| w.detail.contains("counts 7")));
}
