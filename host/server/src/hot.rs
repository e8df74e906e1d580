//! Sessions held in memory while they are in use: the lock that orders
//! their turns, the queue that groups their appends into one durable write
//! (group commit), and their cached context report. A session is released
//! once it is idle and nobody holds it; the next request loads it again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_host_api::ContextReport;
use agent_host_core::Message;
use agent_host_store::{SessionMeta, SessionRef, SessionStore, StoreError};
use tokio::sync::oneshot;
use uuid::Uuid;

/// One session in memory.
pub struct HotSession {
    /// Held for the whole of a turn or a summary: two turns on one session
    /// run one after the other.
    pub turn: tokio::sync::Mutex<()>,
    commit: Mutex<Batch>,
    /// The last context report and the metadata it was made for.
    pub context: Mutex<Option<(Fingerprint, Arc<ContextReport>)>>,
    last_used: Mutex<std::time::Instant>,
}

/// What a context report depends on: when the metadata changes, it is stale.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fingerprint {
    updated: chrono::DateTime<chrono::Utc>,
    messages: u64,
    checkpoints: usize,
}

impl Fingerprint {
    /// The fingerprint of `meta`.
    pub fn of(meta: &SessionMeta) -> Self {
        Fingerprint {
            updated: meta.updated,
            messages: meta.message_count,
            checkpoints: meta.checkpoints.len(),
        }
    }
}

type Ack = oneshot::Sender<Result<SessionMeta, StoreError>>;

#[derive(Default)]
struct Batch {
    waiting: Vec<(Vec<Message>, Ack)>,
    writing: bool,
}

impl HotSession {
    fn new() -> Self {
        HotSession {
            turn: tokio::sync::Mutex::new(()),
            commit: Mutex::new(Batch::default()),
            context: Mutex::new(None),
            last_used: Mutex::new(std::time::Instant::now()),
        }
    }

    /// Appends `messages` durably, as one whole: requests that arrive while
    /// a write is under way are written together by the next write, in the
    /// order they arrived, with one fsync for all of them. Returns the
    /// metadata after the write that carried them.
    pub async fn append(
        self: &Arc<Self>,
        store: &Arc<dyn SessionStore>,
        session: Uuid,
        messages: Vec<Message>,
    ) -> Result<SessionMeta, StoreError> {
        let (ack, done) = oneshot::channel();
        let lead = {
            let mut batch = self.commit.lock().expect("commit lock");
            batch.waiting.push((messages, ack));
            !std::mem::replace(&mut batch.writing, true)
        };
        if lead {
            // This request writes until the queue is empty; the others wait
            // for their acknowledgement.
            let (hot, store) = (Arc::clone(self), Arc::clone(store));
            let writer = tokio::task::spawn_blocking(move || hot.write_batches(&*store, session));
            if writer.await.is_err() {
                // The writer panicked: whatever it held got no answer and
                // sees its channel closed below.
                self.commit.lock().expect("commit lock").writing = false;
            }
        }
        done.await.unwrap_or_else(|_| {
            Err(StoreError::Backend {
                context: format!("session {session}: the append was not carried out"),
                source: "the writer stopped".into(),
            })
        })
    }

    fn write_batches(&self, store: &dyn SessionStore, session: Uuid) {
        loop {
            let waiting = {
                let mut batch = self.commit.lock().expect("commit lock");
                if batch.waiting.is_empty() {
                    batch.writing = false;
                    return;
                }
                std::mem::take(&mut batch.waiting)
            };
            let total: usize = waiting.iter().map(|(m, _)| m.len()).sum();
            let mut all = Vec::with_capacity(total);
            let mut acks = Vec::with_capacity(waiting.len());
            for (messages, ack) in waiting {
                all.extend(messages);
                acks.push(ack);
            }
            let result = store.append(&SessionRef::Id(session), &all);
            // The last request gets the result itself, the others copies
            // that keep what they act on.
            let mut acks = acks;
            let last = acks.pop();
            for ack in acks {
                let _ = ack.send(copy(&result));
            }
            if let Some(ack) = last {
                let _ = ack.send(result);
            }
        }
    }

    fn touch(&self) {
        *self.last_used.lock().expect("last-used lock") = std::time::Instant::now();
    }
}

/// A copy of a store result: the metadata, or an error of the same kind
/// with the same message.
fn copy(result: &Result<SessionMeta, StoreError>) -> Result<SessionMeta, StoreError> {
    match result {
        Ok(meta) => Ok(meta.clone()),
        Err(StoreError::NotFound(session)) => Err(StoreError::NotFound(session.clone())),
        Err(e) => Err(StoreError::Backend {
            context: crate::error::chain(e),
            source: Box::new(SameFailure(e.kind())),
        }),
    }
}

/// The failure of a group write, shared by every request it carried (the
/// original error is not `Clone`); keeps its kind.
#[derive(Debug)]
struct SameFailure(agent_host_core::ErrorKind);

impl std::fmt::Display for SameFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} failure of a grouped write", self.0)
    }
}

impl std::error::Error for SameFailure {}

/// The sessions in memory.
#[derive(Default)]
pub struct HotSessions {
    sessions: Mutex<HashMap<Uuid, Arc<HotSession>>>,
}

impl HotSessions {
    /// The session `id`, loaded into memory if it was not.
    pub fn get(&self, id: Uuid) -> Arc<HotSession> {
        let hot = Arc::clone(
            self.sessions
                .lock()
                .expect("hot sessions lock")
                .entry(id)
                .or_insert_with(|| Arc::new(HotSession::new())),
        );
        hot.touch();
        hot
    }

    /// Forgets `id` (deleted).
    pub fn remove(&self, id: Uuid) {
        self.sessions.lock().expect("hot sessions lock").remove(&id);
    }

    /// How many sessions are held.
    pub fn len(&self) -> usize {
        self.sessions.lock().expect("hot sessions lock").len()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Releases sessions unused for `idle` that nobody holds; returns how many.
    pub fn release_idle(&self, idle: Duration) -> usize {
        let mut sessions = self.sessions.lock().expect("hot sessions lock");
        let before = sessions.len();
        sessions.retain(|_, hot| {
            let unused = hot.last_used.lock().expect("last-used lock").elapsed() >= idle;
            // Held elsewhere: a request is using it (its turn lock or queue).
            let held = Arc::strong_count(hot) > 1;
            held || !unused
        });
        before - sessions.len()
    }
}
