//! The contract every session store keeps, with its crash suite, run
//! against the file store and SQLite (`store_contract_tests!`, behind this
//! crate's `testing` feature), plus the file store's own checks after each
//! kill.

use std::path::Path;

use agent_host_store::{SessionRef, SessionStore};

agent_host_store::store_contract_tests!(
    file,
    |dir, clock| Box::new(
        agent_host_store::FileStore::open(dir.join("store"))
            .expect("the store opens")
            .with_clock(clock.source())
    ),
    |dir| Box::new(agent_host_store::FileStore::open(dir.join("store")).expect("the store opens")),
    after_kill = Some(super::torn_tails_reach_the_sidecar),
);

// The same contract and crash suite with group commit across sessions (the
// journal `agent-host serve` writes through); a plain open after each kill
// replays the killed process's journal.
agent_host_store::store_contract_tests!(
    file_group_commit,
    |dir, clock| Box::new(
        agent_host_store::FileStore::open(dir.join("store"))
            .and_then(agent_host_store::FileStore::with_group_commit)
            .expect("the store opens")
            .with_clock(clock.source())
    ),
    |dir| Box::new(agent_host_store::FileStore::open(dir.join("store")).expect("the store opens")),
    after_kill = Some(super::torn_tails_reach_the_sidecar),
);

agent_host_store::store_contract_tests!(
    sqlite,
    |dir, clock| Box::new(
        agent_host_store::SqliteStore::open(dir.join("sessions.db"))
            .expect("the database opens")
            .with_clock(clock.source())
    ),
    |dir| Box::new(
        agent_host_store::SqliteStore::open(dir.join("sessions.db")).expect("the database opens")
    ),
);

/// The file store's own checks after each kill of the contract's crash
/// test: a torn tail the kill left is moved to the sidecar, whole, from the
/// offset where the last complete record ends, and the log is cut there; any
/// other warning is a count that lagged the log (killed between the log's
/// `fdatasync` and the state record's refresh).
fn torn_tails_reach_the_sidecar(
    store: &dyn SessionStore,
    session: &SessionRef,
    dir: &Path,
    context: &str,
) -> usize {
    let files = agent_host_store::FileStore::open(dir.join("store"))
        .unwrap()
        .files(session)
        .unwrap();
    let raw = std::fs::read(&files.log).unwrap();
    let tail_start = raw.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let tail = &raw[tail_start..];
    let history = store.load(session).unwrap();
    for warning in &history.warnings {
        if warning.path == files.log {
            assert_eq!(
                warning.offset,
                Some(tail_start as u64),
                "{context}: {warning}"
            );
            assert!(!tail.is_empty(), "{context}: {warning}");
            let sidecar = std::fs::read(&files.sidecar).unwrap();
            assert!(
                sidecar.windows(tail.len()).any(|w| w == tail),
                "{context}: the torn tail is not in the sidecar"
            );
        } else {
            assert!(warning.detail.contains("counted"), "{context}: {warning}");
        }
    }
    assert_eq!(
        std::fs::read(&files.log).unwrap(),
        &raw[..tail_start],
        "{context}"
    );
    history.warnings.len()
}
