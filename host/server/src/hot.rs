//! Sessions held in memory while they are in use: the lock that orders
//! their turns, the queue that groups their appends into one durable write
//! (group commit), and their context: the part of the log the context report
//! reads (core's [`LogWindow`]), brought up to date with the appends made
//! here, and the last report. A session is released once it is idle and
//! nobody holds it; the next request loads it again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use agent_host_api::ContextReport;
use agent_host_core::Message;
use agent_host_core::window::LogWindow;
use agent_host_engine::Engine;
use agent_host_store::{
    Appended, SessionMeta, SessionRef, SessionStore, SessionVersion, StoreError,
};
use chrono::Utc;
use tokio::sync::oneshot;
use uuid::Uuid;

use crate::error::{ApiError, ApiResult};
use crate::metrics::Metrics;

/// One session in memory.
pub struct HotSession {
    /// Held for the whole of a turn or a summary: two turns on one session
    /// run one after the other.
    pub turn: Arc<tokio::sync::Mutex<()>>,
    commit: Mutex<Batch>,
    /// The context window and its last report, once a report was asked
    /// for; one request at a time brings it up to date.
    context: tokio::sync::Mutex<Option<Context>>,
    /// What was appended here since the window was last brought up to date:
    /// the writer only queues it, and never waits for a report.
    appended: Mutex<Appends>,
    last_used: Mutex<std::time::Instant>,
    /// The gateway's last request upstream for this session, which the
    /// next summary reuses so that the provider's prompt cache serves it.
    last_prompt: Mutex<Option<Arc<crate::gateway::summary::SentPrompt>>>,
}

/// How many appended messages may wait for the window: past this, it is
/// dropped instead and the next report reads the log again (a session
/// appended to much more often than its report is read).
const MAX_QUEUED: usize = 4096;

/// The appends a window has yet to take, in commit order.
#[derive(Default)]
struct Appends {
    /// Whether a window wants them (one was loaded, and nothing overflowed).
    tracking: bool,
    /// Past [`MAX_QUEUED`] messages: the window is to be dropped.
    overflowed: bool,
    messages: usize,
    queued: Vec<Queued>,
}

/// One append, as the window takes it.
struct Queued {
    /// The session's version just before it, and after.
    before: SessionVersion,
    after: SessionVersion,
    messages: Vec<Message>,
}

/// A session's context window: the metadata it stands for, and the report
/// made of it, if any yet.
struct Context {
    meta: SessionMeta,
    window: LogWindow,
    report: Option<Arc<ContextReport>>,
}

impl Context {
    /// Takes the appends that follow on from its version, in order. Others
    /// (appends a reload had read already, or that followed a write it does
    /// not know) are passed over: its version then tells it is not the
    /// store's.
    fn take(&mut self, appends: Vec<Queued>) {
        for append in appends {
            if append.before == self.meta.version() {
                self.window.push(append.messages);
                self.meta.message_count = append.after.message_count;
                self.meta.updated = append.after.updated;
                self.report = None;
            }
        }
    }

    /// The report of the window, made once per version.
    fn report(&mut self) -> Arc<ContextReport> {
        let (meta, window) = (&self.meta, &self.window);
        self.report
            .get_or_insert_with(|| {
                Arc::new(ContextReport::of_report(meta, &window.report(Utc::now())))
            })
            .clone()
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
            turn: Arc::new(tokio::sync::Mutex::new(())),
            commit: Mutex::new(Batch::default()),
            context: tokio::sync::Mutex::new(None),
            appended: Mutex::new(Appends::default()),
            last_used: Mutex::new(std::time::Instant::now()),
            last_prompt: Mutex::new(None),
        }
    }

    /// The gateway's last request upstream for this session, while the
    /// session is in memory.
    pub(crate) fn last_prompt(&self) -> Option<Arc<crate::gateway::summary::SentPrompt>> {
        self.last_prompt
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Remembers `prompt` as the gateway's last request for this session.
    pub(crate) fn set_last_prompt(&self, prompt: crate::gateway::summary::SentPrompt) {
        *self
            .last_prompt
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(Arc::new(prompt));
    }

    /// The context report of the session `id`: what the engine's
    /// [`context`](Engine::context) reports for the log the store holds
    /// now, made from the window kept here. The window takes the appends
    /// made here since the last report; when its version is still not the
    /// store's (another process wrote, or a turn, a summary or a rename went
    /// through the engine), it is read again.
    pub async fn context_report(
        self: &Arc<Self>,
        engine: &Engine,
        metrics: &Metrics,
        id: Uuid,
    ) -> ApiResult<Arc<ContextReport>> {
        let mut slot = self.context.lock().await;
        let (hot, store, current) = (self.clone(), engine.store().clone(), slot.take());
        // One trip to the blocking pool: the store's version, the appends
        // since the last report, and the report when the window is there.
        let up_to_date =
            tokio::task::spawn_blocking(move || hot.bring_up_to_date(&*store, id, current))
                .await??;
        if let Some((context, report)) = up_to_date {
            *slot = Some(context);
            return Ok(report);
        }
        // None yet, or behind the store: read from the store.
        self.appended.lock().expect("appends lock").tracking = true;
        let (meta, window) = engine.context_window(&SessionRef::Id(id)).await?;
        metrics.context_load();
        let mut context = Context {
            meta,
            window,
            report: None,
        };
        let hot = self.clone();
        let (context, report) = tokio::task::spawn_blocking(move || {
            // Appends made while it was read, that follow on from it.
            if let Some(appends) = hot.take_appends() {
                context.take(appends);
            }
            let report = context.report();
            (context, report)
        })
        .await?;
        *slot = Some(context);
        Ok(report)
    }

    /// `current` with the appends made since it was last brought up to
    /// date, and its report, if it is then at the store's version; `None`
    /// when there is none, or it is behind (a write it did not see).
    /// Blocking: it reads the store's metadata.
    fn bring_up_to_date(
        &self,
        store: &dyn SessionStore,
        id: Uuid,
        current: Option<Context>,
    ) -> ApiResult<Option<(Context, Arc<ContextReport>)>> {
        let stored = stored_version(store, id)?;
        let appends = self.take_appends();
        let (Some(mut context), Some(appends)) = (current, appends) else {
            return Ok(None);
        };
        context.take(appends);
        let version = context.meta.version();
        // Appends acknowledged after the version was read are in the window
        // already: the store says whether that is where it stands now.
        if version != stored && version != stored_version(store, id)? {
            return Ok(None);
        }
        let report = context.report();
        Ok(Some((context, report)))
    }

    /// The appends queued for the window, or `None` when they overflowed
    /// (the window is to be read again, and queueing restarts then).
    fn take_appends(&self) -> Option<Vec<Queued>> {
        let mut appends = self.appended.lock().expect("appends lock");
        appends.messages = 0;
        if std::mem::take(&mut appends.overflowed) {
            appends.queued.clear();
            return None;
        }
        Some(std::mem::take(&mut appends.queued))
    }

    /// Queues an append for the window, if one wants it.
    fn queue(&self, before: SessionVersion, after: SessionVersion, messages: Vec<Message>) {
        let mut appends = self.appended.lock().expect("appends lock");
        if !appends.tracking {
            return;
        }
        appends.messages += messages.len();
        if appends.messages > MAX_QUEUED {
            appends.tracking = false;
            appends.overflowed = true;
            appends.queued = Vec::new();
            return;
        }
        appends.queued.push(Queued {
            before,
            after,
            messages,
        });
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
            self.write_in_pool(store, session).await;
        }
        done.await.unwrap_or_else(|_| {
            Err(StoreError::Backend {
                context: format!("session {session}: the append was not carried out"),
                source: "the writer stopped".into(),
            })
        })
    }

    /// Writes the waiting appends until none is left, on the blocking pool.
    async fn write_in_pool(self: &Arc<Self>, store: &Arc<dyn SessionStore>, session: Uuid) {
        let (hot, store) = (Arc::clone(self), Arc::clone(store));
        let writer = tokio::task::spawn_blocking(move || hot.write_batches(&*store, session));
        if writer.await.is_err() {
            // The writer panicked: whatever it held got no answer and sees
            // its channel closed.
            self.commit.lock().expect("commit lock").writing = false;
        }
    }

    /// Every append waiting, as one list of messages in the order they
    /// arrived and their requests' acknowledgements; `None`, and the
    /// session let go (its next append leads again), when none is waiting.
    fn take_waiting(&self) -> Option<(Vec<Message>, Vec<Ack>)> {
        let waiting = {
            let mut batch = self.commit.lock().expect("commit lock");
            if batch.waiting.is_empty() {
                batch.writing = false;
                return None;
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
        Some((all, acks))
    }

    fn write_batches(&self, store: &dyn SessionStore, session: Uuid) {
        while let Some((all, acks)) = self.take_waiting() {
            let result = store.append_versioned(&SessionRef::Id(session), &all).map(
                |Appended { before, meta }| {
                    self.queue(before, meta.version(), all);
                    meta
                },
            );
            answer(acks, result);
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
    /// The writer of appends across sessions, for a store that appends
    /// several sessions together; started by the first append.
    committer: Mutex<Committing>,
}

/// The committer's state: not started yet, running, or finished (the
/// server is stopping: appends go the per-session way).
#[derive(Default)]
struct Committing {
    running: Option<Committer>,
    finished: bool,
}

/// Threads of their own that take every append waiting, whatever its
/// session, and hand them to the store in one call
/// ([`SessionStore::append_many`]): the file store's journal makes them
/// durable with one `fdatasync`. A request only queues its append and
/// waits for its answer: no blocking-pool thread per append, no thread
/// parked per append in the journal. While one thread waits for its
/// batch's sync, the next takes what arrived meanwhile and writes it, so
/// the journal's next group is ready when the sync ends.
struct Committer {
    jobs: std::sync::mpsc::Sender<Job>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

/// A session whose waiting appends (its [`Batch`]) are for the committer
/// to write: one at a time per session, so a session's appends that arrive
/// while one is written are written together by the next.
struct Job {
    hot: Arc<HotSession>,
    session: Uuid,
}

/// The most sessions one store call carries; the rest wait for the next.
const MAX_JOBS: usize = 512;

/// How many batches may be under way at once (one syncing, the others
/// written and waiting for the next group).
const COMMIT_THREADS: usize = 4;

impl Committer {
    fn start(store: Arc<dyn SessionStore>) -> std::io::Result<Committer> {
        let (jobs, waiting) = std::sync::mpsc::channel::<Job>();
        let waiting = Arc::new(Mutex::new(waiting));
        let mut threads = Vec::with_capacity(COMMIT_THREADS);
        for n in 0..COMMIT_THREADS {
            let (store, waiting) = (Arc::clone(&store), Arc::clone(&waiting));
            let thread = std::thread::Builder::new()
                .name(format!("agent-host-commit-{n}"))
                .spawn(move || {
                    loop {
                        let batch = {
                            let waiting = waiting.lock().unwrap_or_else(PoisonError::into_inner);
                            let Ok(first) = waiting.recv() else {
                                return;
                            };
                            let mut batch = vec![first];
                            batch.extend(waiting.try_iter().take(MAX_JOBS - 1));
                            batch
                        };
                        commit(&*store, batch);
                    }
                })?;
            threads.push(thread);
        }
        Ok(Committer { jobs, threads })
    }
}

/// One session's appends in a batch, in the order they arrived.
struct Group {
    hot: Arc<HotSession>,
    session: Uuid,
    messages: Vec<Message>,
    acks: Vec<Ack>,
}

/// Writes the waiting appends of `jobs`' sessions in one store call, each
/// session's requests together in the order they arrived, each answered
/// with its session's result; then, while those sessions have more waiting
/// (arrived during the write), writes them too. A session with nothing
/// waiting is let go (its next append leads again).
fn commit(store: &dyn SessionStore, mut jobs: Vec<Job>) {
    loop {
        let mut groups = Vec::with_capacity(jobs.len());
        for Job { hot, session } in jobs {
            let Some((messages, acks)) = hot.take_waiting() else {
                continue;
            };
            groups.push(Group {
                hot,
                session,
                messages,
                acks,
            });
        }
        if groups.is_empty() {
            return;
        }
        let items: Vec<(SessionRef, &[Message])> = groups
            .iter()
            .map(|g| (SessionRef::Id(g.session), g.messages.as_slice()))
            .collect();
        let results =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| store.append_many(&items)));
        drop(items);
        let results = match results {
            Ok(results) if results.len() == groups.len() => results,
            _ => {
                tracing::error!("the store's append of {} sessions failed", groups.len());
                let failed = || {
                    Err(StoreError::Backend {
                        context: "the append was not carried out".into(),
                        source: "the store's writer failed".into(),
                    })
                };
                groups.iter().map(|_| failed()).collect()
            }
        };
        jobs = Vec::with_capacity(groups.len());
        for (group, result) in groups.into_iter().zip(results) {
            let Group {
                hot,
                session,
                messages,
                acks,
            } = group;
            let result = result.map(|Appended { before, meta }| {
                hot.queue(before, meta.version(), messages);
                meta
            });
            answer(acks, result);
            jobs.push(Job { hot, session });
        }
    }
}

/// Sends `result` to every request of a group: the last gets it, the others
/// copies that keep what they act on.
fn answer(mut acks: Vec<Ack>, result: Result<SessionMeta, StoreError>) {
    let last = acks.pop();
    for ack in acks {
        let _ = ack.send(copy(&result));
    }
    if let Some(ack) = last {
        let _ = ack.send(result);
    }
}

impl HotSessions {
    /// Appends `messages` to the session `id` (held as `hot`) durably, as
    /// one whole, and returns the metadata after the write that carried
    /// them. With a store that appends several sessions together, through
    /// the committer (group commit across sessions); else grouped with the
    /// session's other waiting appends ([`HotSession::append`]).
    pub async fn append(
        &self,
        hot: &Arc<HotSession>,
        store: &Arc<dyn SessionStore>,
        id: Uuid,
        messages: Vec<Message>,
    ) -> Result<SessionMeta, StoreError> {
        if !store.appends_together() {
            return hot.append(store, id, messages).await;
        }
        let (ack, done) = oneshot::channel();
        let lead = {
            let mut batch = hot.commit.lock().expect("commit lock");
            batch.waiting.push((messages, ack));
            !std::mem::replace(&mut batch.writing, true)
        };
        if lead {
            let job = Job {
                hot: Arc::clone(hot),
                session: id,
            };
            if self.queue_commit(store, job).is_err() {
                // No committer (the server is stopping): this request
                // writes, as a session's appends are written without one.
                hot.write_in_pool(store, id).await;
            }
        }
        done.await.unwrap_or_else(|_| {
            Err(StoreError::Backend {
                context: format!("session {id}: the append was not carried out"),
                source: "the writer stopped".into(),
            })
        })
    }

    /// Hands `job` to the committer, started if it is not running; gives
    /// it back once the committer is finished or cannot start.
    fn queue_commit(&self, store: &Arc<dyn SessionStore>, job: Job) -> Result<(), Job> {
        let mut committing = self.committer.lock().expect("committer lock");
        if committing.finished {
            return Err(job);
        }
        let job = match &committing.running {
            Some(committer) => match committer.jobs.send(job) {
                Ok(()) => return Ok(()),
                // Its thread is gone: start another.
                Err(std::sync::mpsc::SendError(job)) => job,
            },
            None => job,
        };
        match Committer::start(Arc::clone(store)) {
            Ok(committer) => {
                let sent = committer.jobs.send(job).map_err(|e| e.0);
                committing.running = Some(committer);
                sent
            }
            Err(e) => {
                tracing::warn!("cannot start the commit threads: {e}; appending per session");
                Err(job)
            }
        }
    }

    /// Stops the committer once every append handed to it is written (the
    /// server is stopping: later appends go the per-session way), so that
    /// it lets go of the store.
    pub fn finish(&self) {
        let running = {
            let mut committing = self.committer.lock().expect("committer lock");
            committing.finished = true;
            committing.running.take()
        };
        if let Some(Committer { jobs, threads }) = running {
            drop(jobs);
            for thread in threads {
                if thread.join().is_err() {
                    tracing::error!("a commit thread panicked");
                }
            }
        }
    }

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

    /// The last context report made of `id` while it is in memory, unless
    /// it is being brought up to date; loads and waits for nothing (appends
    /// since may not be in it yet).
    pub fn last_report(&self, id: Uuid) -> Option<Arc<ContextReport>> {
        let hot = self
            .sessions
            .lock()
            .expect("hot sessions lock")
            .get(&id)
            .cloned()?;
        let context = hot.context.try_lock().ok()?;
        context.as_ref()?.report.clone()
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

/// The version of the session `id` in `store` (blocking).
fn stored_version(store: &dyn SessionStore, id: Uuid) -> ApiResult<SessionVersion> {
    let meta = store.get(&SessionRef::Id(id))?;
    meta.map(|m| m.version()).ok_or_else(|| {
        ApiError::new(
            agent_host_core::ErrorKind::NotFound,
            format!("session {id} was deleted"),
        )
    })
}
