//! The gateway's request records: the newest [`KEPT_RECORDS`] of each
//! session, kept in memory for the pages that show them and in the store
//! (`SessionStore::put_request_record`), so they outlive a restart and are
//! seen by every instance sharing the store.
//!
//! Writes go to the store in order, on a thread of their own, behind a
//! bounded queue: a request never waits for its record to be written, and
//! when the store falls [`QUEUE`] writes behind, the newest are dropped
//! with a warning (a record is an account of a request, not the log). A
//! session's records are read from the store once, the first time this
//! server needs them (`Records::load`), before its next record is
//! numbered: numbers go on from the newest stored.

use std::collections::{HashMap, VecDeque};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use agent_host_core::error_kind::error_chain;
use agent_host_store::SessionStore;
use uuid::Uuid;

use crate::gateway::{Brief, KEPT_DIFFS, KEPT_RECORDS, RequestRecord};

/// How many record writes wait for the store before more are dropped.
pub const QUEUE: usize = 1024;

/// One record to write.
struct Write {
    session: Uuid,
    n: u64,
    body: String,
}

/// The newest records of each session this server has touched.
pub(crate) struct Records {
    sessions: Mutex<HashMap<Uuid, SessionRecords>>,
    store: Arc<dyn SessionStore>,
    writes: Mutex<Option<SyncSender<Write>>>,
    writer: Mutex<Option<JoinHandle<()>>>,
}

#[derive(Default)]
struct SessionRecords {
    next: u64,
    kept: VecDeque<RequestRecord>,
}

impl Records {
    /// Records kept in `store`, written by a thread this starts.
    pub(crate) fn new(store: Arc<dyn SessionStore>) -> std::io::Result<Records> {
        let (writes, queue) = std::sync::mpsc::sync_channel(QUEUE);
        let writer = std::thread::Builder::new()
            .name("agent-host-records".into())
            .spawn({
                let store = Arc::clone(&store);
                move || write_all(&*store, &queue)
            })?;
        Ok(Records {
            sessions: Mutex::default(),
            store,
            writes: Mutex::new(Some(writes)),
            writer: Mutex::new(Some(writer)),
        })
    }

    /// Reads `session`'s records from the store unless this server holds
    /// them already. A store that cannot be read leaves them unread, with
    /// a warning (numbers then go on from 1, and may replace older
    /// records).
    pub(crate) async fn load(&self, session: Uuid) {
        if self.lock().contains_key(&session) {
            return;
        }
        let store = Arc::clone(&self.store);
        let read = tokio::task::spawn_blocking(move || store.request_records(session)).await;
        let stored = match read {
            Ok(Ok(stored)) => stored,
            Ok(Err(e)) => {
                tracing::warn!(
                    "session {session}: its request records could not be read: {}",
                    error_chain(&e)
                );
                Vec::new()
            }
            Err(e) => {
                tracing::warn!("session {session}: reading its request records failed: {e}");
                Vec::new()
            }
        };
        let mut loaded = SessionRecords::default();
        for (n, body) in stored {
            loaded.next = loaded.next.max(n);
            match serde_json::from_str::<RequestRecord>(&body) {
                Ok(mut record) => {
                    // The store's number is the one the record is known by.
                    record.n = n;
                    loaded.kept.push_back(record);
                }
                Err(e) => tracing::warn!(
                    "session {session}: request record {n} in the store is not a record this server reads ({e}); left out"
                ),
            }
        }
        while loaded.kept.len() > KEPT_RECORDS {
            loaded.kept.pop_front();
        }
        let with_stages = loaded.kept.len().saturating_sub(KEPT_DIFFS);
        for older in loaded.kept.range_mut(..with_stages) {
            forget_stages(older);
        }
        // Another request may have read them meanwhile: the first stays.
        self.lock().entry(session).or_insert(loaded);
    }

    /// Keeps `record` as the session's next one (after [`Records::load`]);
    /// returns its number.
    pub(crate) fn add(&self, session: Uuid, mut record: RequestRecord) -> u64 {
        let mut stripped = None;
        let n = {
            let mut sessions = self.lock();
            let entry = sessions.entry(session).or_default();
            entry.next += 1;
            record.n = entry.next;
            if entry.kept.len() == KEPT_RECORDS {
                entry.kept.pop_front();
            }
            self.save(session, &record);
            entry.kept.push_back(record);
            if let Some(older) = forget_old_stages(&mut entry.kept) {
                stripped = Some(older);
            }
            entry.next
        };
        // The record that just lost its stages is written again without
        // them: the store keeps what the pages show.
        if let Some(older) = stripped {
            self.save(session, &older);
        }
        n
    }

    /// Changes record `n` of `session`, if it is still kept, and writes it
    /// again.
    pub(crate) fn update(&self, session: Uuid, n: u64, change: impl FnOnce(&mut RequestRecord)) {
        let mut sessions = self.lock();
        if let Some(record) = sessions
            .get_mut(&session)
            .and_then(|s| s.kept.iter_mut().find(|r| r.n == n))
        {
            change(record);
            self.save(session, record);
        }
    }

    /// Record `n` of `session`, if it is still kept.
    pub(crate) fn get(&self, session: Uuid, n: u64) -> Option<RequestRecord> {
        self.lock()
            .get(&session)
            .and_then(|s| s.kept.iter().find(|r| r.n == n).cloned())
    }

    /// The processor chain of `session`'s newest request record that names
    /// one (read by [`Records::load`] after a restart).
    pub(crate) fn newest_chain(&self, session: Uuid) -> Option<String> {
        self.lock()
            .get(&session)
            .and_then(|s| s.kept.iter().rev().find_map(|r| r.chain.clone()))
    }

    /// The id of the newest Responses answer `session`'s records hold (read
    /// by [`Records::load`] after a restart).
    pub(crate) fn newest_response(&self, session: Uuid) -> Option<String> {
        self.lock().get(&session).and_then(|s| {
            s.kept
                .iter()
                .rev()
                .find_map(|r| r.response.clone().filter(|_| r.outcome == "stored"))
        })
    }

    /// How many records each of `sessions` keeps: this server's count for
    /// the ones it has read, the store's for the others.
    pub(crate) async fn counts(&self, sessions: Vec<Uuid>) -> HashMap<Uuid, usize> {
        let mut counts = HashMap::with_capacity(sessions.len());
        let mut unread = Vec::new();
        {
            let held = self.lock();
            for id in sessions {
                match held.get(&id) {
                    Some(s) => {
                        counts.insert(id, s.kept.len());
                    }
                    None => unread.push(id),
                }
            }
        }
        if unread.is_empty() {
            return counts;
        }
        let store = Arc::clone(&self.store);
        let stored = tokio::task::spawn_blocking(move || {
            unread
                .into_iter()
                .map(|id| (id, store.request_record_count(id).unwrap_or(0)))
                .collect::<Vec<_>>()
        })
        .await
        .unwrap_or_default();
        counts.extend(stored);
        counts
    }

    /// What the dashboard lists of each record of `session`, newest first.
    pub(crate) fn briefs(&self, session: Uuid) -> Vec<Brief> {
        let sessions = self.lock();
        let Some(s) = sessions.get(&session) else {
            return Vec::new();
        };
        s.kept.iter().rev().map(Brief::of).collect()
    }

    /// The records of `session`, oldest first.
    pub(crate) fn list(&self, session: Uuid) -> Vec<RequestRecord> {
        self.lock()
            .get(&session)
            .map(|s| s.kept.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Forgets a deleted session's records (the store's went with it).
    pub(crate) fn forget(&self, session: Uuid) {
        self.lock().remove(&session);
    }

    /// Writes what waits, within `grace`, and stops the writer: the last
    /// step of a graceful shutdown.
    pub(crate) fn finish(&self, grace: Duration) {
        drop(
            self.writes
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
        let Some(writer) = self
            .writer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        else {
            return;
        };
        let deadline = std::time::Instant::now() + grace;
        while !writer.is_finished() {
            if std::time::Instant::now() >= deadline {
                tracing::warn!(
                    "request records still being written after {grace:?}; the rest are not"
                );
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = writer.join();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, SessionRecords>> {
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `record` for the store.
    fn save(&self, session: Uuid, record: &RequestRecord) {
        let body = match serde_json::to_string(record) {
            Ok(body) => body,
            Err(e) => {
                tracing::warn!("session {session}: request {} not kept: {e}", record.n);
                return;
            }
        };
        let writes = self.writes.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(writes) = writes.as_ref() else {
            return;
        };
        let write = Write {
            session,
            n: record.n,
            body,
        };
        match writes.try_send(write) {
            Ok(()) => {}
            Err(TrySendError::Full(w)) => tracing::warn!(
                "session {}: request {} not kept in the store: {QUEUE} writes wait already",
                w.session,
                w.n
            ),
            Err(TrySendError::Disconnected(_)) => {}
        }
    }
}

/// Empties the stages of the record that just fell out of the newest
/// [`KEPT_DIFFS`]; returns it (as it is now) when it had any.
fn forget_old_stages(kept: &mut VecDeque<RequestRecord>) -> Option<RequestRecord> {
    let older = kept
        .len()
        .checked_sub(KEPT_DIFFS + 1)
        .and_then(|at| kept.get_mut(at))?;
    forget_stages(older).then(|| older.clone())
}

/// Empties `record`'s stages; whether it had any.
fn forget_stages(record: &mut RequestRecord) -> bool {
    if record.stages.is_empty() {
        return false;
    }
    record.stages = Vec::new();
    record.stages_forgotten = true;
    true
}

/// The writer thread: every queued record, in order, until the queue closes.
fn write_all(store: &dyn SessionStore, queue: &Receiver<Write>) {
    while let Ok(write) = queue.recv() {
        if let Err(e) = store.put_request_record(write.session, write.n, &write.body, KEPT_RECORDS)
        {
            // A session deleted meanwhile has no records to keep.
            if !matches!(e, agent_host_store::StoreError::NotFound(_)) {
                tracing::warn!(
                    "session {}: request {} not kept in the store: {}",
                    write.session,
                    write.n,
                    error_chain(&e)
                );
            }
        }
    }
}
