//! Long-term memory in the file, SQLite and PostgreSQL stores: operations,
//! replay, invalidation, scoping, two handles on one store, a torn log.

use agent_host_core::Message;
use agent_host_core::memory::{Fact, FactEdit, FactKind, Filter, MemoryError, Scope};
use agent_host_store::StoreError;
use agent_host_store::memory::MemoryStore;
use chrono::{DateTime, Duration, TimeZone, Utc};

fn at(day: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 12, 0, 0).unwrap() + Duration::days(day)
}

/// A store of each backend: a folder, SQLite, and a fresh PostgreSQL
/// database when the test server runs here (it must under CI).
fn specs(dir: &std::path::Path) -> Vec<String> {
    let mut specs = vec![
        dir.join("files").to_string_lossy().into_owned(),
        format!("sqlite:{}", dir.join("db/sessions.db").display()),
    ];
    #[cfg(unix)]
    if let Some(server) = agent_host_store::testing::postgres_server::server() {
        specs.push(server.fresh_url());
    }
    specs
}

fn fact(id: &str, user: &str, text: &str, day: i64) -> Fact {
    Fact::new(id, Scope::new(user, "default"), user, text, at(day))
}

#[test]
fn operations_survive_reopening_in_both_backends() {
    let dir = tempfile::tempdir().unwrap();
    for spec in specs(dir.path()) {
        let store = MemoryStore::open(&spec).unwrap();
        let added = store
            .add(fact(
                "a",
                "alice",
                "keeps the deploy key in /etc/keys/deploy.pem",
                0,
            ))
            .unwrap();
        assert!(!added.duplicate);
        store
            .add(fact("b", "alice", "prefers dark roast coffee", 0))
            .unwrap();
        store.add(fact("c", "bob", "prefers green tea", 0)).unwrap();
        let again = store
            .add(fact("a2", "alice", "prefers  dark roast coffee", 1))
            .unwrap();
        assert!(again.duplicate, "{spec}: a restatement adds nothing");
        assert_eq!(again.fact.id, "b");
        let edited = store
            .update(
                "alice",
                "b",
                FactEdit {
                    text: Some("prefers light roast coffee".into()),
                    ..FactEdit::default()
                },
            )
            .unwrap();
        assert_eq!(edited.text, "prefers light roast coffee");
        store.delete("alice", "a").unwrap();
        drop(store);

        let store = MemoryStore::open(&spec).unwrap();
        let alice = Filter::user("alice");
        let hits = store.search("coffee roast", &alice, 10, false).unwrap();
        assert_eq!(hits.len(), 1, "{spec}");
        assert_eq!(hits[0].fact.text, "prefers light roast coffee");
        assert!(hits[0].fact.updated_at.is_some());
        assert!(
            store
                .search("deploy key", &alice, 10, true)
                .unwrap()
                .is_empty(),
            "{spec}: deleted"
        );
        assert_eq!(store.list(&alice, None, 100).unwrap().len(), 1);
        // Another user's fact is not found through alice.
        assert!(matches!(
            store.get("alice", "c"),
            Err(StoreError::Memory(MemoryError::NotFound(_)))
        ));
        assert!(matches!(
            store.delete("alice", "c"),
            Err(StoreError::Memory(MemoryError::NotFound(_)))
        ));
        assert_eq!(store.get("bob", "c").unwrap().text, "prefers green tea");
        assert_eq!(
            store
                .search("tea", &Filter::user("alice"), 10, false)
                .unwrap()
                .len(),
            0
        );
    }
}

#[test]
fn a_contradiction_invalidates_and_the_older_fact_stays_queryable_after_replay() {
    let dir = tempfile::tempdir().unwrap();
    for spec in specs(dir.path()) {
        let store = MemoryStore::open(&spec).unwrap();
        let said = |id: &str, text: &str, day: i64| {
            let mut m = Message::user(text).with_id(id);
            m.timestamp = Some(at(day));
            m
        };
        let scope = Scope::new("alice", "default");
        let first = store
            .extract(
                &scope,
                Some("s1"),
                &[said("m1", "I live in Lisbon. My editor is Helix.", 0)],
                "alice",
                "assistant",
            )
            .unwrap();
        assert_eq!(first.len(), 2, "{spec}: {first:?}");
        let later = store
            .extract(
                &scope,
                Some("s2"),
                &[said("m7", "I moved to Porto last week.", 30)],
                "alice",
                "assistant",
            )
            .unwrap();
        assert_eq!(later[0].invalidated, [first[0].fact.id.clone()]);
        // Extracting the same messages again adds nothing.
        let twice = store
            .extract(
                &scope,
                Some("s2"),
                &[said("m7", "I moved to Porto last week.", 30)],
                "alice",
                "assistant",
            )
            .unwrap();
        assert!(twice[0].duplicate);
        drop(store);
        let store = MemoryStore::open(&spec).unwrap();
        let filter = Filter::user("alice");
        let valid = store
            .search("where does alice live", &filter, 5, false)
            .unwrap();
        assert!(valid[0].fact.text.contains("Porto"), "{spec}: {valid:?}");
        assert!(valid.iter().all(|h| !h.fact.text.contains("Lisbon")));
        let old = store.get("alice", &first[0].fact.id).unwrap();
        assert_eq!(
            old.invalidated_by.as_deref(),
            Some(later[0].fact.id.as_str())
        );
        assert_eq!(old.invalid_at, Some(at(30)));
        assert_eq!(old.source.message.as_deref(), Some("m1"));
        assert_eq!(old.source.session.as_deref(), Some("s1"));
        let with_invalid = store.search("Lisbon", &filter, 5, true).unwrap();
        assert_eq!(with_invalid[0].fact.id, first[0].fact.id);
        let entity = store
            .list(&filter.clone().entity("alice"), None, 100)
            .unwrap();
        assert_eq!(entity.len(), 3);
        assert_eq!(
            entity
                .iter()
                .filter(|f| f.kind == FactKind::Attribute)
                .count(),
            3
        );
    }
}

#[test]
fn two_handles_on_one_store_see_each_others_writes() {
    let dir = tempfile::tempdir().unwrap();
    for spec in specs(dir.path()) {
        let one = MemoryStore::open(&spec).unwrap();
        let two = MemoryStore::open(&spec).unwrap();
        one.add(fact("x", "u", "the staging cluster is in Frankfurt", 0))
            .unwrap();
        assert_eq!(
            two.get("u", "x").unwrap().text,
            "the staging cluster is in Frankfurt"
        );
        two.delete("u", "x").unwrap();
        assert!(
            one.search("staging", &Filter::user("u"), 5, true)
                .unwrap()
                .is_empty(),
            "{spec}"
        );
        // An id taken through the other handle is a conflict, and nothing is written.
        one.add(fact("y", "u", "one thing", 0)).unwrap();
        let taken = two.add(fact("y", "u", "another thing", 0));
        assert!(
            matches!(taken, Err(StoreError::Memory(MemoryError::Conflict(_)))),
            "{taken:?}"
        );
        assert_eq!(
            MemoryStore::open(&spec)
                .unwrap()
                .list(&Filter::user("u"), None, 10)
                .unwrap()
                .len(),
            1
        );
    }
}

#[test]
fn a_torn_last_line_is_skipped_then_cut_and_a_bad_line_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("files").to_string_lossy().into_owned();
    let store = MemoryStore::open(&spec).unwrap();
    store.add(fact("a", "u", "first fact here", 0)).unwrap();
    drop(store);
    let log = dir.path().join("files/memory/changes.jsonl");
    let whole = std::fs::read(&log).unwrap();
    let mut torn = whole.clone();
    torn.extend_from_slice(b"{\"op\":\"add\",\"fact\":{\"id\":\"b");
    std::fs::write(&log, &torn).unwrap();
    let store = MemoryStore::open(&spec).unwrap();
    assert_eq!(store.list(&Filter::user("u"), None, 10).unwrap().len(), 1);
    store.add(fact("c", "u", "second fact here", 1)).unwrap();
    let after = std::fs::read(&log).unwrap();
    assert!(
        after.starts_with(&whole),
        "the torn bytes were cut before the append"
    );
    assert!(
        !String::from_utf8_lossy(&after).contains("\"id\":\"b"),
        "no torn bytes left"
    );
    drop(store);
    let reopened = MemoryStore::open(&spec).unwrap();
    let ids: Vec<String> = reopened
        .list(&Filter::user("u"), None, 10)
        .unwrap()
        .into_iter()
        .map(|f| f.id)
        .collect();
    assert_eq!(ids, ["a", "c"]);
    // A damaged line before the end is an error naming the file.
    let mut bad = b"not json\n".to_vec();
    bad.extend_from_slice(&std::fs::read(&log).unwrap());
    std::fs::write(&log, bad).unwrap();
    let error = MemoryStore::open(&spec).unwrap_err().to_string();
    assert!(
        error.contains("changes.jsonl") && error.contains("byte 0"),
        "{error}"
    );
}

#[test]
fn an_unreachable_postgres_store_is_named_without_its_password() {
    // Nothing listens on port 1.
    let error = MemoryStore::open("postgres://app:secret@127.0.0.1:1/agents?connect_timeout=2")
        .unwrap_err();
    let text = agent_host_core::error_kind::error_chain(&error);
    assert!(
        text.contains("127.0.0.1:1") && !text.contains("secret"),
        "{text}"
    );
}

/// Two handles on one PostgreSQL database write at once from threads: every
/// fact is kept once, and each handle reads the other's.
#[cfg(unix)]
#[test]
fn concurrent_writers_on_postgres_serialise() {
    let Some(server) = agent_host_store::testing::postgres_server::server() else {
        return;
    };
    let url = server.fresh_url();
    let handles: Vec<MemoryStore> = (0..2).map(|_| MemoryStore::open(&url).unwrap()).collect();
    std::thread::scope(|scope| {
        for (h, store) in handles.iter().enumerate() {
            scope.spawn(move || {
                for i in 0..20 {
                    let id = format!("f{h}-{i}");
                    let text = format!("writer {h} noted item number {i}");
                    store.add(fact(&id, "u", &text, 0)).unwrap();
                }
            });
        }
    });
    for store in &handles {
        let listed = store.list(&Filter::user("u"), None, 100).unwrap();
        assert_eq!(listed.len(), 40);
    }
}

#[cfg(unix)]
#[test]
fn a_link_in_place_of_the_memory_folder_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("store");
    std::fs::create_dir_all(&root).unwrap();
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, root.join("memory")).unwrap();
    let error = MemoryStore::open(&root.to_string_lossy()).unwrap_err();
    assert!(matches!(error, StoreError::Refused { .. }), "{error:?}");
    assert!(std::fs::read_dir(&elsewhere).unwrap().next().is_none());
}
