//! The contract every [`SessionStore`] backend keeps, and its crash suite,
//! as tests any backend runs with one macro call ([`store_contract_tests!`]).
//! Behind the `testing` feature: a backend's crate takes this crate as a
//! dev-dependency with `features = ["testing"]`.
//!
//! ```ignore
//! agent_host_store::store_contract_tests!(
//!     file,
//!     |dir, clock| Box::new(
//!         agent_host_store::FileStore::open(dir.join("store")).unwrap().with_clock(clock.source())
//!     ),
//!     |dir| Box::new(agent_host_store::FileStore::open(dir.join("store")).unwrap()),
//! );
//! ```
//!
//! The crash test runs the test binary again as a child that appends turns
//! until it is killed with SIGKILL (`AGENT_HOST_CRASH_KILLS` times, 50 by
//! default; `AGENT_HOST_CRASH_SEED` replays a run), and checks after each
//! kill that every acknowledged turn is there, whole, that only whole
//! messages are, that the count is right, and that appends go on.

#![allow(missing_docs)] // test helpers: their names say what they check

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use agent_host_core::{Checkpoint, Message};
use chrono::{DateTime, TimeZone, Utc};

pub use tempfile::{TempDir, tempdir};

#[cfg(unix)]
pub mod postgres_server;

use crate::{
    DEFAULT_AGENT, MAX_PAGE_LIMIT, NewSession, PageRequest, SessionRef, SessionStore, StoreError,
};

/// A clock the tests move by hand.
#[derive(Clone, Default)]
pub struct TestClock(Arc<AtomicI64>);

impl TestClock {
    pub fn new() -> Self {
        TestClock(Arc::new(AtomicI64::new(0)))
    }

    pub fn now(&self) -> DateTime<Utc> {
        let start = Utc.with_ymd_and_hms(2025, 6, 1, 12, 0, 0).unwrap();
        start + chrono::TimeDelta::seconds(self.0.load(Ordering::SeqCst))
    }

    pub fn advance(&self, seconds: i64) {
        self.0.fetch_add(seconds, Ordering::SeqCst);
    }

    /// The clock as a store takes it.
    pub fn source(&self) -> impl Fn() -> DateTime<Utc> + Send + Sync + 'static {
        let clock = self.clone();
        move || clock.now()
    }
}

/// One turn: a user message, an assistant tool call and its result, with ids
/// and sizes that depend on `who` and `n`, so that a mixed-up byte shows.
pub fn turn(who: usize, n: usize) -> Vec<Message> {
    let id = |k: usize| format!("w{who}-t{n}-m{k}");
    let pad = |k: usize| {
        let len = 200 + (who * 977 + n * 131 + k * 53) % 3000;
        format!("{} {}", id(k), "x".repeat(len))
    };
    let call = format!("call-{who}-{n}");
    let user = Message::user(pad(0)).with_id(id(0));
    let mut assistant = Message::assistant(pad(1)).with_id(id(1));
    assistant.push_tool_call(&call, "ls", r#"{"path":"/tmp"}"#);
    let result = Message::tool_result(&call, "ls", pad(2)).with_id(id(2));
    vec![user, assistant, result]
}

pub fn keyed(key: &str) -> NewSession {
    NewSession::new(DEFAULT_AGENT).with_key(key)
}

/// What every backend must do, whatever it stores in.
pub mod contract {
    use super::*;

    pub fn round_trip(store: &dyn SessionStore, clock: &TestClock) {
        let created = store
            .create(&NewSession::new("coder").with_title("Fix CI"))
            .unwrap();
        assert_eq!(created.message_count, 0);
        assert_eq!(
            (created.agent.as_str(), created.key.as_deref()),
            ("coder", None)
        );
        assert_eq!(created.created, clock.now());
        let session = created.reference();

        clock.advance(10);
        let mut first = vec![Message::system("Be terse.").with_id("s0")];
        first[0].timestamp = Some(clock.now());
        first.push(Message::user("List /tmp").with_id("u1"));
        store.append(&session, &first).unwrap();
        clock.advance(5);
        let mut second = turn(0, 1);
        second[1].model = Some("gpt-4o".into());
        second[1]
            .metadata
            .insert("trace".into(), serde_json::json!({"span": 3}));
        let meta = store.append(&session, &second).unwrap();
        assert_eq!(meta.message_count, 5);
        assert_eq!(meta.updated, clock.now());
        assert_eq!(meta.created, created.created);
        assert_eq!(meta.title.as_deref(), Some("Fix CI"));

        let history = store.load(&session).unwrap();
        let all: Vec<Message> = first.into_iter().chain(second).collect();
        assert_eq!(history.messages, all);
        assert!(history.warnings.is_empty(), "{:?}", history.warnings);
        assert_eq!(history.meta, meta);
        assert_eq!(store.get(&session).unwrap(), Some(meta.clone()));

        // An empty turn writes nothing.
        clock.advance(5);
        assert_eq!(store.append(&session, &[]).unwrap(), meta);
        assert_eq!(store.load(&session).unwrap().messages.len(), 5);
        // The header core works with says the same.
        assert_eq!(meta.header().agent.as_deref(), Some("coder"));
    }

    pub fn get_or_create_opens_what_exists(store: &dyn SessionStore, clock: &TestClock) {
        let new = keyed("telegram:123456").with_title("first title");
        let opened = store.get_or_create(&new).unwrap();
        assert!(opened.created);
        assert_eq!(opened.meta.key.as_deref(), Some("telegram:123456"));
        assert_eq!(opened.meta.title.as_deref(), Some("first title"));
        store.append(&opened.meta.reference(), &turn(0, 0)).unwrap();

        clock.advance(60);
        let again = store
            .get_or_create(&keyed("telegram:123456").with_title("ignored"))
            .unwrap();
        assert!(!again.created);
        assert_eq!(again.meta.id, opened.meta.id);
        assert_eq!(again.meta.title.as_deref(), Some("first title"));
        assert_eq!(again.meta.message_count, 3);

        // By key, by id: the same session.
        let by_key = SessionRef::key(DEFAULT_AGENT, "telegram:123456");
        assert_eq!(store.get(&by_key).unwrap().unwrap().id, opened.meta.id);
        assert_eq!(store.load(&by_key).unwrap().messages, turn(0, 0));

        // The same chat with another agent is another session.
        let other = store
            .get_or_create(&NewSession::new("reviewer").with_key("telegram:123456"))
            .unwrap();
        assert!(other.created);
        assert_ne!(other.meta.id, opened.meta.id);
        assert_eq!(store.load(&other.meta.reference()).unwrap().messages, []);

        // A key is taken once; create refuses it, and refuses empty names.
        assert!(matches!(
            store.create(&keyed("telegram:123456")),
            Err(StoreError::AlreadyExists(_))
        ));
        assert!(matches!(
            store.get_or_create(&NewSession::new(DEFAULT_AGENT)),
            Err(StoreError::Invalid { .. })
        ));
        assert!(matches!(
            store.create(&keyed("")),
            Err(StoreError::Invalid { .. })
        ));
        assert!(matches!(
            store.create(&NewSession::new("")),
            Err(StoreError::Invalid { .. })
        ));

        // Unknown sessions.
        let unknown = SessionRef::key(DEFAULT_AGENT, "telegram:999");
        assert_eq!(store.get(&unknown).unwrap(), None);
        assert_eq!(
            store
                .get(&SessionRef::Id(uuid::Uuid::from_u128(7)))
                .unwrap(),
            None
        );
        let err = store.load(&unknown).unwrap_err();
        assert!(matches!(err, StoreError::NotFound(_)), "{err}");
        assert!(err.to_string().contains("telegram:999"), "{err}");
        assert!(matches!(
            store.append(&unknown, &turn(0, 0)),
            Err(StoreError::NotFound(_))
        ));
    }

    pub fn paging_newest_first(store: &dyn SessionStore, clock: &TestClock) {
        let mut made = Vec::new();
        for i in 0..7 {
            clock.advance(1);
            let agent = if i % 2 == 0 { "even" } else { "odd" };
            made.push(
                store
                    .create(&NewSession::new(agent).with_key(format!("k{i}")))
                    .unwrap(),
            );
        }
        // An append moves a session to the front.
        clock.advance(1);
        store.append(&made[2].reference(), &turn(0, 0)).unwrap();
        let expected = ["k2", "k6", "k5", "k4", "k3", "k1", "k0"];

        let mut seen = Vec::new();
        for offset in [0, 3, 6] {
            let page = store
                .list(&PageRequest {
                    after: None,
                    offset,
                    limit: 3,
                    agent: None,
                })
                .unwrap();
            assert_eq!(page.total, 7);
            assert!(page.warnings.is_empty());
            seen.extend(page.sessions.into_iter().map(|m| m.key.unwrap()));
        }
        assert_eq!(seen, expected);
        let listed = store.list(&PageRequest::first(MAX_PAGE_LIMIT)).unwrap();
        assert_eq!(listed.sessions[0].message_count, 3);
        let beyond = PageRequest {
            after: None,
            offset: 7,
            ..PageRequest::first(5)
        };
        assert!(store.list(&beyond).unwrap().sessions.is_empty());

        let odd = store
            .list(&PageRequest {
                agent: Some("odd".into()),
                ..PageRequest::first(10)
            })
            .unwrap();
        assert_eq!(odd.total, 3);
        let keys: Vec<_> = odd
            .sessions
            .iter()
            .map(|m| m.key.as_deref().unwrap())
            .collect();
        assert_eq!(keys, ["k5", "k3", "k1"]);

        for limit in [0, MAX_PAGE_LIMIT + 1] {
            let err = store.list(&PageRequest::first(limit)).unwrap_err();
            assert!(matches!(err, StoreError::PageLimit { .. }), "{err}");
            assert!(err.to_string().contains("1 to 200"), "{err}");
        }

        // A scan is every session in one answer, in the same order as the pages.
        let all = store.scan().unwrap();
        assert_eq!(all.total, 7);
        let scanned: Vec<_> = all.sessions.into_iter().map(|m| m.key.unwrap()).collect();
        assert_eq!(scanned, expected);
    }

    pub fn paging_by_keyset(store: &dyn SessionStore, clock: &TestClock) {
        for i in 0..7 {
            clock.advance(1);
            let agent = if i % 2 == 0 { "even" } else { "odd" };
            store
                .create(&NewSession::new(agent).with_key(format!("k{i}")))
                .unwrap();
        }
        // Two sessions updated at the same instant: the tie is cut by id.
        store.create(&keyed("tie-a")).unwrap();
        store.create(&keyed("tie-b")).unwrap();
        let order: Vec<String> = store
            .scan()
            .unwrap()
            .sessions
            .into_iter()
            .map(|m| m.key.unwrap())
            .collect();
        assert_eq!(order.len(), 9);

        // Sessions created while paging go to the front: neither seen nor
        // shifting what follows, as an offset would.
        let mut seen = Vec::new();
        let mut page = store.list(&PageRequest::first(2)).unwrap();
        loop {
            assert!(page.sessions.len() <= 2);
            seen.extend(page.sessions.iter().map(|m| m.key.clone().unwrap()));
            let Some(next) = page.next else { break };
            clock.advance(1);
            store
                .create(&keyed(&format!("late{}", seen.len())))
                .unwrap();
            page = store.list(&PageRequest::after(next, 2)).unwrap();
            assert!(page.warnings.is_empty());
        }
        assert_eq!(seen, order);
        assert_eq!(page.total, 9 + 4, "the total counts every session");

        // With an agent filter, and an offset from the cursor.
        let odd = store
            .list(&PageRequest {
                agent: Some("odd".into()),
                ..PageRequest::first(1)
            })
            .unwrap();
        assert_eq!(odd.sessions[0].key.as_deref(), Some("k5"));
        let rest = store
            .list(&PageRequest {
                agent: Some("odd".into()),
                offset: 1,
                ..PageRequest::after(odd.next.unwrap(), 10)
            })
            .unwrap();
        let keys: Vec<_> = rest
            .sessions
            .iter()
            .map(|m| m.key.as_deref().unwrap())
            .collect();
        assert_eq!(keys, ["k1"]);
        assert_eq!((rest.total, rest.next), (3, None));
    }

    pub fn rename_sets_and_removes_the_title(store: &dyn SessionStore, clock: &TestClock) {
        let session = store.create(&keyed("slack:C1")).unwrap().reference();
        clock.advance(30);
        let renamed = store.rename(&session, Some("Deploy")).unwrap();
        assert_eq!(renamed.title.as_deref(), Some("Deploy"));
        assert_eq!(renamed.updated, clock.now());
        assert_eq!(
            store.get(&session).unwrap().unwrap().title.as_deref(),
            Some("Deploy")
        );
        assert_eq!(store.rename(&session, None).unwrap().title, None);
        assert!(matches!(
            store.rename(&SessionRef::key(DEFAULT_AGENT, "nope"), Some("x")),
            Err(StoreError::NotFound(_))
        ));
    }

    pub fn delete_removes_everything(store: &dyn SessionStore, _: &TestClock) {
        let kept = store.create(&keyed("kept")).unwrap();
        let gone = store.create(&keyed("gone")).unwrap();
        store.append(&gone.reference(), &turn(0, 0)).unwrap();
        let deleted = store.delete(&gone.reference()).unwrap();
        assert_eq!(deleted.id, gone.id);
        assert_eq!(store.get(&gone.reference()).unwrap(), None);
        assert_eq!(
            store.get(&SessionRef::key(DEFAULT_AGENT, "gone")).unwrap(),
            None
        );
        assert!(matches!(
            store.load(&gone.reference()),
            Err(StoreError::NotFound(_))
        ));
        assert!(matches!(
            store.append(&gone.reference(), &turn(0, 1)),
            Err(StoreError::NotFound(_))
        ));
        assert!(matches!(
            store.delete(&gone.reference()),
            Err(StoreError::NotFound(_))
        ));
        let listed = store.list(&PageRequest::first(10)).unwrap();
        assert_eq!(ids_of(&listed.sessions), [kept.id]);

        // The key is free again, for a new, empty session.
        let again = store.get_or_create(&keyed("gone")).unwrap();
        assert!(again.created);
        assert_ne!(again.meta.id, gone.id);
        assert!(
            store
                .load(&again.meta.reference())
                .unwrap()
                .messages
                .is_empty()
        );
    }

    pub fn clear_keeps_the_session(store: &dyn SessionStore, clock: &TestClock) {
        let created = store.create(&keyed("chat").with_title("Title")).unwrap();
        let session = created.reference();
        store.append(&session, &turn(0, 0)).unwrap();
        store
            .write_checkpoint(&session, &checkpoint(clock, "s"))
            .unwrap();
        clock.advance(1);
        let cleared = store.clear(&session).unwrap();
        assert_eq!(cleared.message_count, 0);
        assert!(cleared.checkpoints.is_empty());
        assert_eq!(
            (cleared.id, cleared.key.as_deref(), cleared.title.as_deref()),
            (created.id, Some("chat"), Some("Title"))
        );
        assert_eq!(cleared.updated, clock.now());
        assert!(store.load(&session).unwrap().messages.is_empty());
        store.append(&session, &turn(0, 1)).unwrap();
        let history = store.load(&session).unwrap();
        assert_eq!(history.messages, turn(0, 1));
        assert!(history.warnings.is_empty());
    }

    pub fn channels_are_kept(store: &dyn SessionStore, clock: &TestClock) {
        let created = store
            .create(&keyed("reach").with_channel("telegram"))
            .unwrap();
        assert_eq!(created.channels, ["telegram"]);
        let session = created.reference();
        let mut turn = turn(0, 0);
        turn[0].channel = Some("web".into());
        turn[1].channel = Some("telegram".into());
        clock.advance(1);
        let meta = store.append(&session, &turn).unwrap();
        assert_eq!(meta.channels, ["telegram", "web"]);
        assert_eq!(
            store.get(&session).unwrap().unwrap().channels,
            meta.channels
        );
        assert_eq!(store.load(&session).unwrap().meta.channels, meta.channels);
        let listed = store.list(&PageRequest::first(10)).unwrap();
        assert_eq!(listed.sessions[0].channels, meta.channels);

        // Bounded: at most MAX_CHANNELS names of at most MAX_CHANNEL_BYTES;
        // an empty one is no channel.
        let many: Vec<Message> = (0..crate::MAX_CHANNELS + 4)
            .map(|i| {
                let mut m = Message::user(format!("from channel {i}")).with_id(format!("c{i}"));
                m.channel = Some(format!("c{i:02}"));
                m
            })
            .chain(["", &"x".repeat(crate::MAX_CHANNEL_BYTES + 1)].map(|c| {
                let mut m = Message::user("odd channel").with_id(format!("odd{}", c.len()));
                m.channel = Some(c.to_owned());
                m
            }))
            .collect();
        let meta = store.append(&session, &many).unwrap();
        assert_eq!(meta.channels.len(), crate::MAX_CHANNELS);
        assert!(meta.channels.is_sorted());
        assert!(
            meta.channels
                .iter()
                .all(|c| !c.is_empty() && c.len() <= 256)
        );
        assert!(meta.channels.contains(&"telegram".to_owned()));
        assert_eq!(
            store.get(&session).unwrap().unwrap().channels,
            meta.channels
        );
        // A clear keeps them: they say where the session was reached.
        assert_eq!(store.clear(&session).unwrap().channels, meta.channels);

        // An import keeps the copied session's channels.
        let mut copied = store.get(&session).unwrap().unwrap();
        copied.id = uuid::Uuid::new_v4();
        copied.key = Some("copied".into());
        let imported = store.import(&copied, &[]).unwrap();
        assert_eq!(imported.channels, meta.channels);
        assert_eq!(
            store.get(&imported.reference()).unwrap().unwrap().channels,
            meta.channels
        );
    }

    pub fn request_records_are_kept(store: &dyn SessionStore, _: &TestClock) {
        let session = store.create(&keyed("gateway")).unwrap();
        let id = session.id;
        assert!(store.request_records(id).unwrap().is_empty());
        assert_eq!(store.request_record_count(id).unwrap(), 0);
        for n in 1..=5u64 {
            let body = format!(r#"{{"n": {n}, "outcome": "in_progress"}}"#);
            store.put_request_record(id, n, &body, 3).unwrap();
        }
        let numbers = |store: &dyn SessionStore| -> Vec<u64> {
            store
                .request_records(id)
                .unwrap()
                .into_iter()
                .map(|(n, _)| n)
                .collect()
        };
        assert_eq!(numbers(store), [3, 4, 5]);
        assert_eq!(store.request_record_count(id).unwrap(), 3);
        // The same number again replaces the record (a request that ended).
        store
            .put_request_record(id, 5, r#"{"n": 5, "outcome": "stored"}"#, 3)
            .unwrap();
        let records = store.request_records(id).unwrap();
        assert_eq!(
            records.last().unwrap().1,
            r#"{"n": 5, "outcome": "stored"}"#
        );
        assert_eq!(records.len(), 3);

        // What no store keeps is refused, saying what.
        let zero = store.put_request_record(id, 0, "{}", 3).unwrap_err();
        assert!(zero.to_string().contains("numbered from 1"), "{zero}");
        let big = "x".repeat(crate::MAX_REQUEST_RECORD_BYTES + 1);
        let big = store.put_request_record(id, 6, &big, 3).unwrap_err();
        assert!(big.to_string().contains("bytes"), "{big}");
        assert_eq!(numbers(store), [3, 4, 5]);
        let unknown = uuid::Uuid::new_v4();
        assert!(matches!(
            store.put_request_record(unknown, 1, "{}", 3),
            Err(StoreError::NotFound(_))
        ));
        assert!(store.request_records(unknown).unwrap().is_empty());
        assert_eq!(store.request_record_count(unknown).unwrap(), 0);

        // A clear keeps them; a delete removes them with the session.
        store.clear(&session.reference()).unwrap();
        assert_eq!(numbers(store), [3, 4, 5]);
        store.delete(&session.reference()).unwrap();
        assert!(store.request_records(id).unwrap().is_empty());
        assert!(matches!(
            store.put_request_record(id, 6, "{}", 3),
            Err(StoreError::NotFound(_))
        ));
        let again = store.create(&keyed("gateway")).unwrap();
        assert!(store.request_records(again.id).unwrap().is_empty());
    }

    pub fn cleanup_removes_idle_sessions_only(store: &dyn SessionStore, clock: &TestClock) {
        let old = store.create(&keyed("old")).unwrap();
        clock.advance(3600);
        let middle = store.create(&keyed("middle")).unwrap();
        clock.advance(3600);
        let fresh = store.create(&keyed("fresh")).unwrap();
        clock.advance(600);
        let now = clock.now();

        assert!(
            store
                .cleanup(Duration::from_secs(3 * 3600), now)
                .unwrap()
                .is_empty()
        );
        let removed = store.cleanup(Duration::from_secs(5400), now).unwrap();
        assert_eq!(ids_of(&removed), [old.id]);
        store.append(&middle.reference(), &turn(0, 0)).unwrap();
        // Idle exactly that long is not idle longer.
        assert!(
            store
                .cleanup(Duration::from_secs(600), clock.now())
                .unwrap()
                .is_empty()
        );
        clock.advance(1);
        let removed = store
            .cleanup(Duration::from_secs(600), clock.now())
            .unwrap();
        assert_eq!(ids_of(&removed), [fresh.id]);
        let listed = store.list(&PageRequest::first(10)).unwrap();
        assert_eq!(ids_of(&listed.sessions), [middle.id]);
        // An idle time beyond the calendar removes nothing.
        assert!(
            store
                .cleanup(Duration::MAX, clock.now())
                .unwrap()
                .is_empty()
        );
    }

    pub fn checkpoints_are_kept_in_order(store: &dyn SessionStore, clock: &TestClock) {
        let session = store.create(&keyed("long")).unwrap().reference();
        store.append(&session, &turn(0, 0)).unwrap();
        let first = checkpoint(clock, "1");
        store.write_checkpoint(&session, &first).unwrap();
        clock.advance(10);
        let second = checkpoint(clock, "2");
        let meta = store.write_checkpoint(&session, &second).unwrap();
        assert_eq!(meta.checkpoints, [first.clone(), second.clone()]);
        assert_eq!(meta.updated, clock.now());
        assert_eq!(meta.header().latest_checkpoint(), Some(&second));
        assert_eq!(
            store.get(&session).unwrap().unwrap().checkpoints,
            [first.clone(), second.clone()]
        );
        let history = store.load(&session).unwrap();
        assert_eq!(history.meta.checkpoints, [first, second]);
        assert_eq!(history.messages.len(), 3);
    }

    pub fn hostile_keys_round_trip(store: &dyn SessionStore, _: &TestClock) {
        let mut seen = HashSet::new();
        for (i, key) in super::hostile_keys().iter().enumerate() {
            let opened = store.get_or_create(&keyed(key)).unwrap();
            assert!(opened.created, "{key:?} found another session");
            assert!(seen.insert(opened.meta.id));
            let session = SessionRef::key(DEFAULT_AGENT, key.clone());
            store.append(&session, &turn(i, 0)).unwrap();
            let history = store.load(&session).unwrap();
            assert_eq!(history.meta.key.as_deref(), Some(key.as_str()));
            assert_eq!(history.messages, turn(i, 0), "{key:?}");
        }
        let listed = store.list(&PageRequest::first(MAX_PAGE_LIMIT)).unwrap();
        let keys: HashSet<_> = listed
            .sessions
            .into_iter()
            .map(|m| m.key.unwrap())
            .collect();
        assert_eq!(keys, super::hostile_keys().into_iter().collect());
    }

    pub fn get_or_create_races_make_one_session(store: &dyn SessionStore, _: &TestClock) {
        let opened: Vec<_> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| s.spawn(|| store.get_or_create(&keyed("race")).unwrap()))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(opened.iter().filter(|o| o.created).count(), 1);
        assert!(opened.iter().all(|o| o.meta.id == opened[0].meta.id));
    }

    pub fn threads_append_whole_turns(store: &dyn SessionStore, _: &TestClock) {
        let session = store.create(&keyed("busy")).unwrap().reference();
        std::thread::scope(|s| {
            for who in 0..4 {
                let session = &session;
                s.spawn(move || {
                    for n in 0..10 {
                        store.append(session, &turn(who, n)).unwrap();
                        if n % 3 == 0 {
                            let seen = store.load(session).unwrap();
                            assert!(seen.warnings.is_empty(), "{:?}", seen.warnings);
                        }
                    }
                });
            }
        });
        let history = store.load(&session).unwrap();
        assert_whole_turns(&history.messages, 4, 10);
        assert_eq!(history.meta.message_count, 120);
    }

    pub fn append_many_answers_each_item(store: &dyn SessionStore, _: &TestClock) {
        let a = store.create(&keyed("many-a")).unwrap().reference();
        let b = store.create(&keyed("many-b")).unwrap().reference();
        // A first append each (the file store then keeps the files open,
        // and batches go its journaled way).
        store.append(&a, &turn(0, 0)).unwrap();
        store.append(&b, &turn(1, 0)).unwrap();
        let missing = SessionRef::Id(uuid::Uuid::new_v4());
        let fresh = store.create(&keyed("many-fresh")).unwrap().reference();
        let (a1, b1, a2, f1) = (turn(0, 1), turn(1, 1), turn(0, 2), turn(2, 0));
        let results = store.append_many(&[
            (a.clone(), &a1),
            (b.clone(), &b1),
            (missing.clone(), &a1),
            (a.clone(), &a2),
            (b.clone(), &[]),
            (fresh.clone(), &f1),
        ]);
        assert_eq!(results.len(), 6, "one answer an item");
        let ok = |i: usize| {
            results[i]
                .as_ref()
                .unwrap_or_else(|e| panic!("item {i}: {e}"))
        };
        assert_eq!(ok(0).meta.message_count, 6);
        assert_eq!(ok(1).meta.message_count, 6);
        assert!(
            matches!(results[2], Err(StoreError::NotFound(_))),
            "{:?}",
            results[2]
        );
        // A session's second item follows its first.
        assert_eq!(ok(3).before, ok(0).meta.version());
        assert_eq!(ok(3).meta.message_count, 9);
        assert_eq!(ok(4).meta.message_count, 6, "an empty item appends nothing");
        assert_eq!(ok(5).meta.message_count, 3);
        let a_log = [turn(0, 0), a1, a2].concat();
        assert_eq!(store.load(&a).unwrap().messages, a_log);
        assert_eq!(store.load(&b).unwrap().messages, [turn(1, 0), b1].concat());
        assert_eq!(store.load(&fresh).unwrap().messages, f1);
        assert_eq!(store.get(&a).unwrap().unwrap().message_count, 9);
    }

    pub fn threads_append_many_whole_turns(store: &dyn SessionStore, _: &TestClock) {
        let sessions: Vec<SessionRef> = (0..3)
            .map(|i| {
                store
                    .create(&keyed(&format!("batch-{i}")))
                    .unwrap()
                    .reference()
            })
            .collect();
        std::thread::scope(|s| {
            for who in 0..4 {
                let sessions = &sessions;
                s.spawn(move || {
                    for n in 0..10 {
                        let turns: Vec<Vec<Message>> =
                            sessions.iter().map(|_| turn(who, n)).collect();
                        let items: Vec<(SessionRef, &[Message])> = sessions
                            .iter()
                            .cloned()
                            .zip(turns.iter().map(Vec::as_slice))
                            .collect();
                        for result in store.append_many(&items) {
                            result.unwrap();
                        }
                    }
                });
            }
        });
        for session in &sessions {
            let history = store.load(session).unwrap();
            assert!(history.warnings.is_empty(), "{:?}", history.warnings);
            assert_whole_turns(&history.messages, 4, 10);
            assert_eq!(history.meta.message_count, 120);
        }
    }

    pub fn tail_reads_match_load(store: &dyn SessionStore, _: &TestClock) {
        use crate::TailStart;
        let session = store.create(&keyed("tail")).unwrap().reference();
        let mut log = vec![Message::system("Be terse.").with_id("sys")];
        for n in 0..20 {
            log.extend(turn(0, n));
        }
        store.append(&session, &log[..31]).unwrap();
        store.append(&session, &log[31..]).unwrap();
        let whole = store.load(&session).unwrap().messages;
        assert_eq!(whole, log);
        for n in [0, 1, 5, 60, 61, 500] {
            let tail = store.load_tail(&session, TailStart::Newest(n)).unwrap();
            let kept = n.min(60);
            assert_eq!(tail.system, &log[..1], "Newest({n})");
            assert_eq!(tail.messages, &log[61 - kept..], "Newest({n})");
            assert_eq!(tail.skipped, (60 - kept) as u64, "Newest({n})");
            assert_eq!(tail.meta.message_count, 61);
        }
        let at = store
            .load_tail(&session, TailStart::AtId("w0-t12-m1".into()))
            .unwrap();
        assert!(at.found);
        assert_eq!(at.messages, &log[1 + 12 * 3 + 1..]);
        assert_eq!(at.skipped, 12 * 3 + 1);
        let unknown = store
            .load_tail(&session, TailStart::AtId("no-such-id".into()))
            .unwrap();
        assert!(!unknown.found);
        assert_eq!(unknown.into_log(), log, "an unknown start reads everything");
    }

    fn checkpoint(clock: &TestClock, tag: &str) -> Checkpoint {
        Checkpoint {
            usage: None,
            boundary_id: format!("b{tag}"),
            summary_id: format!("s{tag}"),
            covers: vec!["w0-t0-m0".into(), "w0-t0-m1".into()],
            created: clock.now(),
        }
    }

    fn ids_of(metas: &[crate::SessionMeta]) -> Vec<uuid::Uuid> {
        metas.iter().map(|m| m.id).collect()
    }
}

/// Checks that `messages` are `writers` × `turns` whole turns of [`turn`],
/// each writer's in order, interleaved only between turns.
pub fn assert_whole_turns(messages: &[Message], writers: usize, turns: usize) {
    assert_eq!(messages.len(), writers * turns * 3);
    let mut next = vec![0; writers];
    for chunk in messages.chunks(3) {
        let (who, _) = turn_of(&chunk[0].id);
        assert_eq!(
            chunk,
            turn(who, next[who]),
            "writer {who}, turn {}",
            next[who]
        );
        next[who] += 1;
    }
    assert!(next.iter().all(|&n| n == turns), "{next:?}");
}

/// Keys that try to leave the folder, hide, clash or break a file system.
pub fn hostile_keys() -> Vec<String> {
    let mut keys: Vec<String> = [
        "..",
        ".",
        "../../etc/passwd",
        "/etc/passwd",
        "a\\..\\b",
        "C:\\Windows\\win.ini",
        "nul\0byte",
        "bell\x07\n\r\t",
        " ",
        ".hidden",
        "trailing.",
        "trailing ",
        "CON",
        "con",
        "Con.txt",
        "AUX",
        "nul.tar.gz",
        "COM1",
        "lpt9.log",
        "telegram:123456",
        "telegram/123456",
        "telegram_123456",
        "Telegram_123456",
        "日本語",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    keys.push("k".repeat(100_000));
    keys.push(format!("{}x", "k".repeat(100_000)));
    keys
}

/// Which writer wrote a message of [`turn`], and in which turn.
pub fn turn_of(id: &str) -> (usize, usize) {
    let mut parts = id.split('-');
    let mut number = |prefix: char| {
        let part = parts.next().unwrap();
        part.strip_prefix(prefix).unwrap().parse().unwrap()
    };
    (number('w'), number('t'))
}

/// Opens a backend in a fresh folder, reading a test clock.
pub type Open = fn(&Path, &TestClock) -> Box<dyn SessionStore>;

/// Opens the same backend again in a folder (a child process of the crash
/// test opens the store its parent made).
pub type Reopen = fn(&Path) -> Box<dyn SessionStore>;

/// A backend's own checks after each kill of the crash test, before the
/// suite's: it gets the store, the session, the store's folder and a line
/// naming the round and seed for messages. It may load the session (the
/// file store checks that a torn tail reached its sidecar); it returns how
/// many warnings it saw.
pub type AfterKill = fn(&dyn SessionStore, &SessionRef, &Path, &str) -> usize;

/// How many times the crash test kills a writer, unless
/// `AGENT_HOST_CRASH_KILLS` says otherwise.
pub const CRASH_KILLS: usize = 50;

/// The environment variable that makes the test binary a crash child, and
/// names the folder of its store.
pub const CRASH_CHILD_DIR: &str = "AGENT_HOST_TEST_CRASH_DIR";

/// The environment variable naming the child's writer number.
pub const CRASH_CHILD_WRITER: &str = "AGENT_HOST_TEST_CRASH_WRITER";

/// The environment variable that makes the file store abort the process
/// at the `n`th crash point it reaches (counted from 1): the steps of a
/// metadata write and of a clear. A crash test runs a child with it set, for
/// each `n` in turn, and checks what the child left.
pub const CRASH_AT_POINT: &str = "AGENT_HOST_TEST_CRASH_AT_POINT";

/// Called by the file store at each of its crash points: aborts the process
/// at the one [`CRASH_AT_POINT`] names, and does nothing when it is unset.
pub(crate) fn crash_point() {
    use std::sync::OnceLock;
    use std::sync::atomic::AtomicUsize;
    static AT: OnceLock<Option<usize>> = OnceLock::new();
    static REACHED: AtomicUsize = AtomicUsize::new(0);
    let at = AT.get_or_init(|| {
        std::env::var(CRASH_AT_POINT).ok().map(|n| {
            n.parse()
                .expect("AGENT_HOST_TEST_CRASH_AT_POINT is a number")
        })
    });
    if let Some(at) = *at
        && REACHED.fetch_add(1, Ordering::SeqCst) + 1 == at
    {
        std::process::abort();
    }
}

/// A tiny PRNG (xorshift64*), enough to pick kill moments.
struct Prng(u64);

impl Prng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// What the crash test saw, for the backend's own checks.
#[derive(Debug, Default)]
pub struct CrashRun {
    /// Turns whose append returned, by (writer, turn).
    pub acknowledged: usize,
    /// Turns a kill left in part (their first messages only).
    pub partial_turns: usize,
    /// Warnings loads reported (a torn tail moved aside, a count
    /// reconciled).
    pub warnings: usize,
}

/// The crash test's parent: starts `child_test` (the full name of the
/// macro's child test, as the test binary filters it) again and again,
/// kills it at a random moment while it appends, and checks the store.
pub fn crash_parent(reopen: Reopen, child_test: &str, after_kill: Option<AfterKill>) -> CrashRun {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};

    let kills: usize = std::env::var("AGENT_HOST_CRASH_KILLS")
        .map(|n| n.parse().expect("AGENT_HOST_CRASH_KILLS is a number"))
        .unwrap_or(CRASH_KILLS);
    let seed: u64 = std::env::var("AGENT_HOST_CRASH_SEED").map_or_else(
        |_| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64 | 1)
        },
        |s| s.parse().expect("AGENT_HOST_CRASH_SEED is a number"),
    );
    eprintln!("{child_test}: {kills} kills, AGENT_HOST_CRASH_SEED={seed}");
    let mut rng = Prng(seed);
    let dir = tempdir().expect("a temporary folder");
    let exe = std::env::current_exe().expect("the test binary's path");
    let store = reopen(dir.path());
    let session = store
        .create(&keyed("crash"))
        .expect("a session")
        .reference();
    let mut acknowledged: Vec<(usize, usize)> = Vec::new();
    let mut run = CrashRun::default();

    for round in 0..kills {
        let writer = round + 1;
        let mut child = Command::new(&exe)
            .args([child_test, "--exact", "--ignored", "--nocapture"])
            .env(CRASH_CHILD_DIR, dir.path())
            .env(CRASH_CHILD_WRITER, writer.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the test binary starts again");
        let mut lines = BufReader::new(child.stdout.take().expect("a pipe")).lines();
        loop {
            let line = lines
                .next()
                .expect("the child says it is ready")
                .expect("a line");
            if line == "ready" {
                break;
            }
        }
        let delay = Duration::from_micros(rng.next() % 30_001);
        std::thread::sleep(delay);
        child.kill().expect("SIGKILL");
        child.wait().expect("the child ends");
        for line in lines {
            if let Some(n) = line.expect("a line").strip_prefix("acked ") {
                acknowledged.push((writer, n.parse().expect("a turn number")));
            }
        }

        let context = format!("round {round}, seed {seed}, killed after {delay:?}");
        if let Some(check) = after_kill {
            run.warnings += check(store.as_ref(), &session, dir.path(), &context);
        }
        let history = store
            .load(&session)
            .expect("the session loads after a kill");
        run.warnings += history.warnings.len();
        // Whole messages only; every acknowledged turn whole. A turn the
        // kill interrupted may have left its first messages (a backend
        // without a turn commit marker), never a later one alone.
        let mut stored = HashSet::new();
        let mut at = 0;
        run.partial_turns = 0;
        while at < history.messages.len() {
            let t = turn_of(&history.messages[at].id);
            let full = turn(t.0, t.1);
            let len = history.messages[at..]
                .iter()
                .take(3)
                .take_while(|m| turn_of(&m.id) == t)
                .count();
            assert_eq!(
                &history.messages[at..at + len],
                &full[..len],
                "{context}: turn {t:?} is not whole messages of itself, in order"
            );
            assert!(stored.insert(t), "{context}: turn {t:?} twice");
            if len < 3 {
                assert!(
                    !acknowledged.contains(&t),
                    "{context}: acknowledged turn {t:?} has only {len} messages"
                );
                run.partial_turns += 1;
            }
            at += len;
        }
        for t in &acknowledged {
            assert!(stored.contains(t), "{context}: lost turn {t:?}");
        }
        assert_eq!(
            history.meta.message_count,
            history.messages.len() as u64,
            "{context}"
        );
        let meta = store
            .append(&session, &turn(0, round))
            .expect("the session takes appends after a kill");
        assert_eq!(
            meta.message_count,
            history.messages.len() as u64 + 3,
            "{context}"
        );
        acknowledged.push((0, round));
    }
    run.acknowledged = acknowledged.len();
    run
}

/// The crash test's child: appends turns until killed, saying `acked N`
/// once the append of turn N returned. Does nothing unless started by
/// [`crash_parent`].
pub fn crash_child(reopen: Reopen) {
    use std::io::Write;
    let (Some(dir), Ok(writer)) = (
        std::env::var_os(CRASH_CHILD_DIR),
        std::env::var(CRASH_CHILD_WRITER),
    ) else {
        return;
    };
    let writer: usize = writer.parse().expect("a writer number");
    let store = reopen(Path::new(&dir));
    let session = SessionRef::key(DEFAULT_AGENT, "crash");
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready").expect("stdout");
    out.flush().expect("stdout");
    for n in 0.. {
        // Every other turn through `append_many` (the server's committer's
        // way: the file store's journaled batch).
        if n % 2 == 0 {
            store.append(&session, &turn(writer, n)).expect("an append");
        } else {
            let turn = turn(writer, n);
            let mut answers = store.append_many(&[(session.clone(), &turn)]);
            answers.pop().expect("an answer").expect("an append");
        }
        writeln!(out, "acked {n}").expect("stdout");
        out.flush().expect("stdout");
    }
}

/// The test path of `module` (from `module_path!()`) without the crate's
/// name, as a test binary's filter takes it.
pub fn test_path(module: &str, test: &str) -> String {
    let inner = module.split_once("::").map_or("", |(_, rest)| rest);
    if inner.is_empty() {
        test.to_owned()
    } else {
        format!("{inner}::{test}")
    }
}

/// Runs the whole contract, and the crash suite, against one backend.
///
/// `$open` makes a store in a fresh folder reading a [`TestClock`];
/// `$reopen` opens the same backend in a folder again (for the crash
/// test's child processes); `after_kill = f` adds the backend's own checks
/// after each kill (an [`AfterKill`]).
#[macro_export]
macro_rules! store_contract_tests {
    ($backend:ident, $open:expr, $reopen:expr $(,)?) => {
        $crate::store_contract_tests!($backend, $open, $reopen, after_kill = None);
    };
    ($backend:ident, $open:expr, $reopen:expr, after_kill = $after:expr $(,)?) => {
        $crate::store_contract_tests!($backend, $open, $reopen, after_kill = $after, available = || true);
    };
    ($backend:ident, $open:expr, $reopen:expr, available = $available:expr $(,)?) => {
        $crate::store_contract_tests!($backend, $open, $reopen, after_kill = None, available = $available);
    };
    ($backend:ident, $open:expr, $reopen:expr, after_kill = $after:expr, available = $available:expr $(,)?) => {
        mod $backend {
            use $crate::testing::{self, TestClock};

            /// Whether the backend can run here (a server a test needs may
            /// be missing; the check says why on stderr).
            fn available() -> bool {
                let available: fn() -> bool = $available;
                available()
            }

            fn open() -> (testing::TempDir, TestClock, Box<dyn $crate::SessionStore>) {
                let dir = testing::tempdir().expect("a temporary folder");
                let clock = TestClock::new();
                let open: $crate::testing::Open = $open;
                let store = open(dir.path(), &clock);
                (dir, clock, store)
            }

            $crate::store_contract_tests!(@each
                round_trip,
                get_or_create_opens_what_exists,
                paging_newest_first,
                paging_by_keyset,
                rename_sets_and_removes_the_title,
                delete_removes_everything,
                clear_keeps_the_session,
                channels_are_kept,
                request_records_are_kept,
                cleanup_removes_idle_sessions_only,
                checkpoints_are_kept_in_order,
                hostile_keys_round_trip,
                get_or_create_races_make_one_session,
                threads_append_whole_turns,
                append_many_answers_each_item,
                threads_append_many_whole_turns,
                tail_reads_match_load,
            );

            #[cfg(unix)]
            #[test]
            fn appends_survive_sigkill() {
                if !available() {
                    return;
                }
                let reopen: testing::Reopen = $reopen;
                let child = testing::test_path(module_path!(), "crash_child");
                let after: Option<testing::AfterKill> = $after;
                let run = testing::crash_parent(reopen, &child, after);
                eprintln!("{}: {run:?}", module_path!());
            }

            #[test]
            #[ignore = "a child process of appends_survive_sigkill"]
            fn crash_child() {
                let reopen: testing::Reopen = $reopen;
                testing::crash_child(reopen);
            }
        }
    };
    (@each $($test:ident),* $(,)?) => {
        $(
            #[test]
            fn $test() {
                if !available() {
                    return;
                }
                let (_dir, clock, store) = open();
                $crate::testing::contract::$test(&*store, &clock);
            }
        )*
    };
}
