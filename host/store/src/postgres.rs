//! The PostgreSQL store: every session in one database that several
//! `agent-host` instances share.
//!
//! ```text
//! agent_host_schema(version)                      one row per migration applied
//! agent_host_sessions(id UUID PRIMARY KEY, agent, key, title, worker_id,
//!          workspace_id, created, updated, message_count,
//!          checkpoints TEXT /* JSON */, UNIQUE(agent, key))
//! agent_host_messages(session_id REFERENCES agent_host_sessions ON DELETE CASCADE,
//!          seq, line TEXT, PRIMARY KEY(session_id, seq))
//! agent_host_appends(session_id, idempotency_key, first_seq, count, created)
//! ```
//!
//! Names (agent, key, title, worker, workspace) and idempotency keys are
//! `BYTEA` holding UTF-8: a key may hold any character, NUL included, which
//! `TEXT` refuses. As in SQLite, a message is its native JSONL line, so fields this version
//! does not know survive; `seq` counts from 0 within a session, without
//! gaps, and restarts after a clear. Session times are `timestamptz`
//! (microseconds): the store's clock is cut to microseconds, so what an
//! operation returns is what a later read returns.
//!
//! **Schema.** Created and migrated by the binary when it opens the
//! database ([`SCHEMA_VERSION`], one migration after another, under an
//! advisory lock so that instances starting together migrate once); a
//! database from a newer version is refused, not guessed at.
//!
//! **Appends.** One transaction: the session's row is locked (`SELECT ...
//! FOR UPDATE`), so appends to one session from any number of instances
//! take turns and each gets the next `seq`s; the lines, the count and
//! `updated` commit together. With an idempotency key
//! ([`SessionStore::append_once`]), the key commits with the lines, and a
//! retry that finds it appends nothing.
//!
//! **Connections.** A small pool ([`POOL_SIZE`]) of `tokio-postgres`
//! clients driven by a runtime the store owns: the trait is synchronous,
//! and each call hands its work to that runtime and waits on a channel, so
//! it is safe on tokio's blocking pool, on a plain thread, and (blocking the
//! thread, as file I/O would) inside async code; dropping the store never
//! panics. Each connection gets a `statement_timeout` ([`STATEMENT_TIMEOUT`],
//! unless the URL's `options` set one) and a connect timeout.
//!
//! **TLS.** `sslmode=prefer` (the default) or `require` in the URL: rustls
//! with the system's root certificates, plus those of the PEM file
//! `sslrootcert=PATH` names; the server's certificate and host name are
//! always verified. `sslmode=disable` for none.
//!
//! **Untrusted contents.** Whatever the database holds is read with bounds:
//! a line over [`MAX_LINE_BYTES`] is never transferred, and a line that is
//! not a message is skipped with a warning, as in the other stores.

use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use agent_host_core::format::jsonl;
use agent_host_core::{Checkpoint, Message};
use chrono::{DateTime, SubsecRound, Utc};
use futures_util::TryStreamExt;
use tokio::runtime::Runtime;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Config, GenericClient, IsolationLevel, Row};
use tokio_postgres_rustls::MakeRustlsConnect;
use uuid::Uuid;

use super::{
    History, NewSession, Notice, Opened, PageCursor, PageRequest, Result, SessionMeta, SessionPage,
    SessionRef, SessionStore, StoreError, StoreWarning, Tail, TailStart, TurnLock, add_channels,
    check_request_record, error_chain, idle_cutoff,
};

/// The schema version this build writes: the number of migrations.
pub const SCHEMA_VERSION: i32 = MIGRATIONS.len() as i32;

/// How many connections one store keeps open at most.
pub const POOL_SIZE: usize = 8;

/// The `statement_timeout` each connection gets, unless the URL's
/// `options` set one.
pub const STATEMENT_TIMEOUT: Duration = Duration::from_secs(30);

/// How long connecting may take, unless the URL sets `connect_timeout`.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a call waits for a free connection of the pool.
pub const CHECKOUT_TIMEOUT: Duration = Duration::from_secs(60);

/// The longest message line or checkpoint list read back.
pub const MAX_LINE_BYTES: i32 = 64 << 20;

/// The longest idempotency key.
pub const MAX_IDEMPOTENCY_KEY: usize = 255;

/// How many turn locks ([`SessionStore::turn_lock`]) one store holds at
/// once: each holds a connection of its own, outside the pool, so that
/// turns waiting for a lock never starve the writes of the turns holding one.
pub const MAX_TURN_LOCKS: usize = 64;

/// How long a turn waits for another instance's turn on the same session.
pub const TURN_LOCK_WAIT: Duration = Duration::from_secs(600);

/// The channel (per database) instances announce to and listen on.
pub const CHANNEL: &str = "agent_host_events";

/// How many announcements wait to be sent, or notices to be read, before
/// more are dropped (and readers told [`Notice::Lost`]).
const NOTICE_BACKLOG: usize = 4096;

/// The advisory lock migrations run under (`agenthos` in ASCII).
const MIGRATION_LOCK: i64 = 0x6167_656e_7468_6f73;

/// The migrations, in order: migration `n` (from 1) brings the schema to
/// version `n`.
const MIGRATIONS: [&str; 4] = [
    // 1: sessions and their messages.
    "
CREATE TABLE agent_host_sessions (
    id            UUID PRIMARY KEY,
    agent         BYTEA NOT NULL,
    key           BYTEA,
    title         BYTEA,
    worker_id     BYTEA,
    workspace_id  BYTEA,
    created       TIMESTAMPTZ NOT NULL,
    updated       TIMESTAMPTZ NOT NULL,
    message_count BIGINT NOT NULL DEFAULT 0,
    checkpoints   TEXT NOT NULL DEFAULT '[]',
    UNIQUE (agent, key)
);
CREATE INDEX agent_host_sessions_by_update ON agent_host_sessions (updated DESC, id);
CREATE INDEX agent_host_sessions_by_agent_update
    ON agent_host_sessions (agent, updated DESC, id);
CREATE TABLE agent_host_messages (
    session_id UUID NOT NULL REFERENCES agent_host_sessions (id) ON DELETE CASCADE,
    seq        BIGINT NOT NULL,
    line       TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
);
",
    // 2: idempotency keys of appends.
    "
CREATE TABLE agent_host_appends (
    session_id      UUID NOT NULL REFERENCES agent_host_sessions (id) ON DELETE CASCADE,
    idempotency_key BYTEA NOT NULL,
    first_seq       BIGINT NOT NULL,
    count           BIGINT NOT NULL,
    created         TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (session_id, idempotency_key)
);
",
    // 3: the channels a session was reached through; the gateway's request
    // records.
    "
ALTER TABLE agent_host_sessions ADD COLUMN channels TEXT NOT NULL DEFAULT '[]';
CREATE TABLE agent_host_request_records (
    session_id UUID NOT NULL REFERENCES agent_host_sessions (id) ON DELETE CASCADE,
    n          BIGINT NOT NULL,
    body       TEXT NOT NULL,
    PRIMARY KEY (session_id, n)
);
",
    // 4: long-term memory, as a log of changes (see `memory.rs`).
    "
CREATE TABLE agent_host_memory_changes (
    seq    BIGSERIAL PRIMARY KEY,
    change TEXT NOT NULL
);
",
];

/// The lock every writer of long-term memory holds (through the turn locks'
/// connections): writes are serialised across instances, so `seq` order is
/// commit order and a reader that has seen `seq` has seen all before it.
const MEMORY_LOCK: Uuid = Uuid::from_u128(0x6167_656e_742d_686f_7374_2d6d_656d_6f72);

/// The columns a [`SessionMeta`] is read from, in [`meta_of`]'s order; the
/// checkpoints only when within [`MAX_LINE_BYTES`].
const META_COLUMNS: &str = "id, agent, key, title, worker_id, workspace_id, created, updated, \
     message_count, CASE WHEN octet_length(checkpoints) <= 16777216 THEN checkpoints END, \
     CASE WHEN octet_length(channels) <= 65536 THEN channels END";

/// The prefixes that select this backend in a store spec.
pub const URL_PREFIXES: [&str; 2] = ["postgres://", "postgresql://"];

/// The clock a store reads `now` from.
type Clock = Arc<dyn Fn() -> DateTime<Utc> + Send + Sync>;

/// The PostgreSQL store; see the module docs for the schema and the
/// guarantees.
pub struct PostgresStore {
    inner: Arc<Inner>,
    runtime: Option<Runtime>,
}

/// What the runtime's tasks share.
struct Inner {
    /// The URL with its password hidden, for messages.
    name: String,
    config: Config,
    tls: MakeRustlsConnect,
    statement_timeout: bool,
    idle: Mutex<Vec<Client>>,
    permits: Arc<Semaphore>,
    clock: Clock,
    /// Connections of turn locks not in use, and how many may be held.
    lock_idle: Mutex<Vec<Client>>,
    lock_permits: Arc<Semaphore>,
    /// The queue of announcements, its sender started on first use.
    announcer: std::sync::OnceLock<tokio::sync::mpsc::Sender<String>>,
}

impl fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresStore")
            .field("url", &self.inner.name)
            .finish_non_exhaustive()
    }
}

impl Drop for PostgresStore {
    fn drop(&mut self) {
        // Never blocks, so dropping the store inside async code is safe.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl PostgresStore {
    /// Connects to the database `url` names (`postgres://` or
    /// `postgresql://`), and brings its schema to [`SCHEMA_VERSION`].
    ///
    /// A malformed URL, an unreachable server, a refused login or a schema
    /// from a newer version is an error naming the URL, its password hidden.
    pub fn open(url: &str) -> Result<Self> {
        let name = crate::open::redact(url);
        let (config, roots) = parse_url(url, &name)?;
        let tls = tls_connector(roots.as_deref(), &name)?;
        let statement_timeout = !config
            .get_options()
            .is_some_and(|o| o.contains("statement_timeout"));
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("agent-host-postgres")
            .enable_all()
            .build()
            .map_err(|source| StoreError::Io {
                context: format!("cannot start the PostgreSQL client of {name}:"),
                path: "threads".into(),
                source,
            })?;
        let store = PostgresStore {
            inner: Arc::new(Inner {
                name,
                config,
                tls,
                statement_timeout,
                idle: Mutex::new(Vec::new()),
                permits: Arc::new(Semaphore::new(POOL_SIZE)),
                clock: Arc::new(Utc::now),
                lock_idle: Mutex::new(Vec::new()),
                lock_permits: Arc::new(Semaphore::new(MAX_TURN_LOCKS)),
                announcer: std::sync::OnceLock::new(),
            }),
            runtime: Some(runtime),
        };
        store.run(|db| async move { db.migrate().await })?;
        Ok(store)
    }

    /// Reads the time from `clock` instead of the system clock (for tests).
    pub fn with_clock(mut self, clock: impl Fn() -> DateTime<Utc> + Send + Sync + 'static) -> Self {
        // Only `open` holds the Arc so far: the clock can be swapped.
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.clock = Arc::new(clock);
        }
        self
    }

    /// The URL, its password hidden.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Runs `work` on the store's runtime and waits for its answer.
    fn run<T, F, Fut>(&self, work: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(Arc<Inner>) -> Fut,
        Fut: Future<Output = Result<T>> + Send + 'static,
    {
        let (send, answer) = std::sync::mpsc::sync_channel(1);
        let future = work(Arc::clone(&self.inner));
        let runtime = self
            .runtime
            .as_ref()
            .expect("the runtime lives as long as the store");
        runtime.spawn(async move {
            let _ = send.send(future.await);
        });
        answer.recv().map_err(|_| StoreError::Backend {
            context: format!(
                "the PostgreSQL store {}: an operation failed",
                self.inner.name
            ),
            source: "its task ended without an answer".into(),
        })?
    }

    /// Serialises messages as stored: their JSONL lines without the
    /// newline, each refused when the store could not read it back (see
    /// [`crate::storable`]).
    fn lines(session: &SessionRef, messages: &[Message]) -> Result<Vec<String>> {
        messages
            .iter()
            .enumerate()
            .map(|(i, message)| {
                let mut line = Vec::with_capacity(512);
                jsonl::write_line(message, &mut line);
                line.pop();
                crate::storable(session, i, message, &line)?;
                Ok(String::from_utf8(line).expect("serde_json writes UTF-8"))
            })
            .collect()
    }

    fn do_append(
        &self,
        session: &SessionRef,
        messages: &[Message],
        key: Option<&str>,
    ) -> Result<SessionMeta> {
        if let Some(key) = key
            && (key.is_empty() || key.len() > MAX_IDEMPOTENCY_KEY)
        {
            return Err(StoreError::Invalid {
                what: "idempotency key",
                value: key.chars().take(64).collect(),
                reason: format!("it must be 1 to {MAX_IDEMPOTENCY_KEY} bytes"),
            });
        }
        let lines = Self::lines(session, messages)?;
        let mut channels = Vec::new();
        add_channels(
            &mut channels,
            messages.iter().filter_map(|m| m.channel.as_deref()),
        );
        let session = session.clone();
        let key = key.map(str::to_owned);
        self.run(move |db| async move { db.append(session, lines, channels, key).await })
    }
}

impl Inner {
    fn now(&self) -> DateTime<Utc> {
        (self.clock)().trunc_subsecs(6)
    }

    /// A failure of `action` on `session`.
    fn fail(
        &self,
        session: &dyn fmt::Display,
        action: &str,
        e: tokio_postgres::Error,
    ) -> StoreError {
        StoreError::Backend {
            context: format!(
                "session {session}: {action} the PostgreSQL database {}",
                self.name
            ),
            source: Box::new(e),
        }
    }

    /// A failure of an operation on the whole store.
    fn fail_store(&self, action: &str, e: tokio_postgres::Error) -> StoreError {
        StoreError::Backend {
            context: format!("{action} the PostgreSQL database {}", self.name),
            source: Box::new(e),
        }
    }

    /// A connection of the pool, opened when none is idle.
    async fn client(self: &Arc<Self>) -> Result<Pooled> {
        let permit = tokio::time::timeout(
            CHECKOUT_TIMEOUT,
            Arc::clone(&self.permits).acquire_owned(),
        )
        .await
        .map_err(|_| StoreError::Backend {
            context: format!(
                "no connection to the PostgreSQL database {} was free within {CHECKOUT_TIMEOUT:?}",
                self.name
            ),
            source: format!("all {POOL_SIZE} are busy").into(),
        })?
        .expect("the semaphore is never closed");
        loop {
            let idle = self
                .idle
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .pop();
            match idle {
                Some(client) if !client.is_closed() => {
                    return Ok(Pooled {
                        client: Some(client),
                        inner: Arc::clone(self),
                        _permit: permit,
                    });
                }
                Some(_) => continue,
                None => break,
            }
        }
        let client = self.connect().await?;
        Ok(Pooled {
            client: Some(client),
            inner: Arc::clone(self),
            _permit: permit,
        })
    }

    async fn connect(&self) -> Result<Client> {
        let fail = |e| self.fail_store("cannot connect to", e);
        let (client, connection) = self.config.connect(self.tls.clone()).await.map_err(fail)?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!("a PostgreSQL connection ended: {}", error_chain(&e));
            }
        });
        if self.statement_timeout {
            client
                .batch_execute(&format!(
                    "SET statement_timeout = {}",
                    STATEMENT_TIMEOUT.as_millis()
                ))
                .await
                .map_err(fail)?;
        }
        Ok(client)
    }

    /// Sends the queued announcements in order, those waiting together in
    /// one statement; one that fails is logged and dropped (listeners
    /// compare nothing, so a gap is only a missed event).
    async fn announce(self: Arc<Self>, mut queue: tokio::sync::mpsc::Receiver<String>) {
        let mut batch = Vec::new();
        while queue.recv_many(&mut batch, 256).await > 0 {
            let payloads = std::mem::take(&mut batch);
            let sent = async {
                let client = self.client().await?;
                client
                    .execute(
                        "SELECT pg_notify($1, p) FROM
                         (SELECT p FROM unnest($2::text[]) WITH ORDINALITY AS t(p, n) ORDER BY n) AS s",
                        &[&CHANNEL, &payloads],
                    )
                    .await
                    .map_err(|e| self.fail_store("cannot announce to", e))
            };
            if let Err(e) = sent.await {
                tracing::warn!(
                    "{} events not announced: {}",
                    payloads.len(),
                    error_chain(&e)
                );
            }
        }
    }

    /// Listens on [`CHANNEL`] and forwards what arrives to `out` until it
    /// is dropped; a connection that ends is opened again, and `out` told
    /// [`Notice::Lost`].
    async fn listen(self: Arc<Self>, out: tokio::sync::mpsc::Sender<Notice>) {
        use tokio_postgres::AsyncMessage;
        let mut lost = false;
        let mut wait = Duration::from_millis(100);
        while !out.is_closed() {
            let connected = self.config.connect(self.tls.clone()).await;
            let (client, mut connection) = match connected {
                Ok(pair) => pair,
                Err(e) => {
                    tracing::warn!(
                        "cannot listen for other instances' events: {}; again in {wait:?}",
                        error_chain(&self.fail_store("cannot connect to", e))
                    );
                    lost = true;
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(5));
                    continue;
                }
            };
            let forward = out.clone();
            let reading = tokio::spawn(async move {
                let mut messages =
                    futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
                while let Some(message) = messages.try_next().await.transpose() {
                    let Ok(AsyncMessage::Notification(notice)) = message else {
                        if let Err(e) = message {
                            tracing::debug!("the listening connection ended: {}", error_chain(&e));
                            break;
                        }
                        continue;
                    };
                    if notice.channel() != CHANNEL
                        || notice.payload().len() > crate::MAX_NOTICE_BYTES
                    {
                        continue;
                    }
                    match forward.try_send(Notice::Message(notice.payload().to_owned())) {
                        Ok(()) => {}
                        // The follower is behind: this notice is dropped, and
                        // it is told so as soon as there is room (whether or
                        // not another notice ever comes: the last appends'
                        // notices were once dropped with nothing after them
                        // to say so). Notices that arrive meanwhile wait in
                        // the connection; the follower reads everything again.
                        Err(tokio::sync::mpsc::error::TrySendError::Full(_)) => {
                            if forward.send(Notice::Lost).await.is_err() {
                                break;
                            }
                        }
                        Err(tokio::sync::mpsc::error::TrySendError::Closed(_)) => break,
                    }
                }
            });
            if let Err(e) = client.batch_execute(&format!("LISTEN {CHANNEL}")).await {
                tracing::warn!(
                    "cannot listen for other instances' events: {}",
                    error_chain(&self.fail_store("cannot LISTEN in", e))
                );
                reading.abort();
                tokio::time::sleep(wait).await;
                continue;
            }
            wait = Duration::from_millis(100);
            if std::mem::take(&mut lost) {
                let _ = out.send(Notice::Lost).await;
            }
            let _ = reading.await;
            drop(client);
            lost = true;
        }
    }

    /// Waits for `session`'s advisory lock on a connection of its own.
    async fn lock_turn(self: Arc<Self>, session: Uuid) -> Result<HeldTurn> {
        let fail = |e| self.fail(&session, "cannot take the turn lock in", e);
        let permit = tokio::time::timeout(
            CHECKOUT_TIMEOUT,
            Arc::clone(&self.lock_permits).acquire_owned(),
        )
        .await
        .map_err(|_| StoreError::Backend {
            context: format!(
                "session {session}: no turn lock of the PostgreSQL database {} was free within {CHECKOUT_TIMEOUT:?}",
                self.name
            ),
            source: format!("all {MAX_TURN_LOCKS} are held").into(),
        })?
        .expect("the semaphore is never closed");
        let idle = loop {
            let idle = self
                .lock_idle
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .pop();
            match idle {
                Some(client) if client.is_closed() => continue,
                other => break other,
            }
        };
        let client = match idle {
            Some(client) => client,
            None => {
                let client = self.connect().await?;
                client
                    .batch_execute(&format!(
                        "SET statement_timeout = {}",
                        TURN_LOCK_WAIT.as_millis()
                    ))
                    .await
                    .map_err(fail)?;
                client
            }
        };
        let key = lock_key(session);
        client
            .execute("SELECT pg_advisory_lock($1)", &[&key])
            .await
            .map_err(fail)?;
        Ok(HeldTurn {
            client: Some(client),
            key,
            inner: Arc::clone(&self),
            permit: Some(permit),
            runtime: tokio::runtime::Handle::current(),
        })
    }

    /// Brings the schema to [`SCHEMA_VERSION`], or refuses a newer one.
    async fn migrate(self: Arc<Self>) -> Result<()> {
        let mut client = self.client().await?;
        let fail = |e| self.fail_store("cannot set up the schema of", e);
        let tx = client.transaction().await.map_err(fail)?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
            .await
            .map_err(fail)?;
        tx.batch_execute("CREATE TABLE IF NOT EXISTS agent_host_schema (version INTEGER NOT NULL)")
            .await
            .map_err(fail)?;
        let found: i32 = tx
            .query_one(
                "SELECT COALESCE(MAX(version), 0) FROM agent_host_schema",
                &[],
            )
            .await
            .and_then(|row| row.try_get(0))
            .map_err(fail)?;
        if found > SCHEMA_VERSION {
            return Err(StoreError::Backend {
                context: format!(
                    "the PostgreSQL database {} has schema version {found}, this agent-host knows up to {SCHEMA_VERSION}",
                    self.name
                ),
                source: "upgrade agent-host to open it".into(),
            });
        }
        for (version, migration) in (1..)
            .zip(MIGRATIONS)
            .skip(usize::try_from(found).unwrap_or(0))
        {
            tx.batch_execute(migration).await.map_err(fail)?;
            tx.execute(
                "INSERT INTO agent_host_schema (version) VALUES ($1)",
                &[&version],
            )
            .await
            .map_err(fail)?;
            tracing::info!("{}: schema migrated to version {version}", self.name);
        }
        tx.commit().await.map_err(fail)
    }

    /// The session `session` names, its row locked for update when `lock`.
    async fn find(
        &self,
        db: &impl GenericClient,
        session: &SessionRef,
        lock: bool,
    ) -> Result<Option<SessionMeta>> {
        let suffix = if lock { " FOR UPDATE" } else { "" };
        let fail = |e| self.fail(session, "cannot read", e);
        let row = match session {
            SessionRef::Id(id) => {
                db.query_opt(
                    &format!("SELECT {META_COLUMNS} FROM agent_host_sessions WHERE id = $1{suffix}"),
                    &[id],
                )
                .await
            }
            SessionRef::Key { agent, key } => {
                db.query_opt(
                    &format!(
                        "SELECT {META_COLUMNS} FROM agent_host_sessions WHERE agent = $1 AND key = $2{suffix}"
                    ),
                    &[&agent.as_bytes(), &key.as_bytes()],
                )
                .await
            }
        }
        .map_err(fail)?;
        row.map(|row| self.meta_of(&row)).transpose()
    }

    /// The session's row, locked against a delete (`FOR SHARE`), or
    /// [`StoreError::NotFound`].
    async fn find_shared(&self, db: &impl GenericClient, session: &SessionRef) -> Result<()> {
        let SessionRef::Id(id) = session else {
            return self.existing(db, session, false).await.map(drop);
        };
        let row = db
            .query_opt(
                "SELECT 1 FROM agent_host_sessions WHERE id = $1 FOR SHARE",
                &[id],
            )
            .await
            .map_err(|e| self.fail(session, "cannot read", e))?;
        row.map(drop)
            .ok_or_else(|| StoreError::NotFound(session.clone()))
    }

    async fn existing(
        &self,
        db: &impl GenericClient,
        session: &SessionRef,
        lock: bool,
    ) -> Result<SessionMeta> {
        self.find(db, session, lock)
            .await?
            .ok_or_else(|| StoreError::NotFound(session.clone()))
    }

    /// Reads the [`META_COLUMNS`] of `row`, treating them as untrusted.
    fn meta_of(&self, row: &Row) -> Result<SessionMeta> {
        let bad = |what: &str, e: &dyn std::error::Error| StoreError::Backend {
            context: format!(
                "the PostgreSQL database {} holds a session row with an invalid {what}",
                self.name
            ),
            source: e.to_string().into(),
        };
        let id: Uuid = row.try_get(0).map_err(|e| bad("id", &e))?;
        let text = |i: usize, what: &str| -> Result<Option<String>> {
            row.try_get::<_, Option<Vec<u8>>>(i)
                .map_err(|e| bad(what, &e))?
                .map(|bytes| String::from_utf8(bytes).map_err(|e| bad(what, &e)))
                .transpose()
        };
        let agent = text(1, "agent")?.unwrap_or_default();
        let created: DateTime<Utc> = row.try_get(6).map_err(|e| bad("creation time", &e))?;
        let updated: DateTime<Utc> = row.try_get(7).map_err(|e| bad("update time", &e))?;
        let count: i64 = row.try_get(8).map_err(|e| bad("message count", &e))?;
        let checkpoints = match row
            .try_get::<_, Option<String>>(9)
            .map_err(|e| bad("checkpoint list", &e))?
        {
            Some(json) => serde_json::from_str::<Vec<Checkpoint>>(&json).map_err(|source| {
                StoreError::Metadata {
                    context: format!("session {id}: the checkpoints"),
                    path: self.name.clone().into(),
                    source,
                }
            })?,
            None => {
                return Err(StoreError::Backend {
                    context: format!(
                        "session {id}: the checkpoints in the PostgreSQL database {} are over {MAX_LINE_BYTES} bytes",
                        self.name
                    ),
                    source: "refused unread".into(),
                });
            }
        };
        // Channels only label a session: a list the database holds badly
        // (or over 64 KiB) is read as none rather than hiding the session.
        let channels = row
            .try_get::<_, Option<String>>(10)
            .ok()
            .flatten()
            .and_then(|json| serde_json::from_str::<Vec<String>>(&json).ok())
            .unwrap_or_default();
        let mut meta = SessionMeta {
            id,
            key: text(2, "key")?,
            title: text(3, "title")?,
            agent,
            worker_id: text(4, "worker id")?,
            workspace_id: text(5, "workspace id")?,
            created,
            updated,
            message_count: u64::try_from(count).unwrap_or(0),
            checkpoints,
            channels,
        };
        meta.tidy_channels();
        Ok(meta)
    }

    /// Stores `meta`'s title, update time, count, checkpoints and channels.
    async fn update(
        &self,
        tx: &impl GenericClient,
        meta: &SessionMeta,
        action: &str,
    ) -> Result<()> {
        let checkpoints =
            serde_json::to_string(&meta.checkpoints).expect("checkpoints serialize to JSON");
        let count = i64::try_from(meta.message_count).unwrap_or(i64::MAX);
        let channels = serde_json::to_string(&meta.channels).expect("channels serialize to JSON");
        tx.execute(
            "UPDATE agent_host_sessions SET title = $2, updated = $3, message_count = $4,
             checkpoints = $5, channels = $6 WHERE id = $1",
            &[
                &meta.id,
                &meta.title.as_deref().map(str::as_bytes),
                &meta.updated,
                &count,
                &checkpoints,
                &channels,
            ],
        )
        .await
        .map_err(|e| self.fail(&meta.id, action, e))?;
        Ok(())
    }

    async fn insert(
        &self,
        db: &impl GenericClient,
        new: &NewSession,
        upsert: bool,
    ) -> Result<Option<SessionMeta>> {
        let now = self.now();
        let id = Uuid::new_v4();
        let mut channels = Vec::new();
        add_channels(&mut channels, new.channel.as_deref());
        let channels = serde_json::to_string(&channels).expect("channels serialize to JSON");
        let conflict = if upsert {
            "ON CONFLICT (agent, key) DO NOTHING"
        } else {
            ""
        };
        let row = db
            .query_opt(
                &format!(
                    "INSERT INTO agent_host_sessions
                     (id, agent, key, title, worker_id, workspace_id, created, updated, channels)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $7, $8) {conflict} RETURNING {META_COLUMNS}"
                ),
                &[
                    &id,
                    &new.agent.as_bytes(),
                    &bytes(&new.key),
                    &bytes(&new.title),
                    &bytes(&new.worker_id),
                    &bytes(&new.workspace_id),
                    &now,
                    &channels,
                ],
            )
            .await;
        match row {
            Ok(row) => row.map(|row| self.meta_of(&row)).transpose(),
            Err(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) => match new.reference() {
                Some(session) => Err(StoreError::AlreadyExists(session)),
                None => Err(self.fail(&describe_new(new), "cannot create the session in", e)),
            },
            Err(e) => Err(self.fail(&describe_new(new), "cannot create the session in", e)),
        }
    }

    async fn append(
        self: Arc<Self>,
        session: SessionRef,
        lines: Vec<String>,
        channels: Vec<String>,
        key: Option<String>,
    ) -> Result<SessionMeta> {
        let action = "cannot append to";
        let mut client = self.client().await?;
        let fail = |e| self.fail(&session, action, e);
        let tx = client.transaction().await.map_err(fail)?;
        // The row lock orders appends to one session across instances.
        let mut meta = self.existing(&tx, &session, true).await?;
        if let Some(key) = &key {
            let seen = tx
                .query_opt(
                    "SELECT 1 FROM agent_host_appends WHERE session_id = $1 AND idempotency_key = $2",
                    &[&meta.id, &key.as_bytes()],
                )
                .await
                .map_err(fail)?;
            if seen.is_some() {
                tx.commit().await.map_err(fail)?;
                return Ok(meta);
            }
        }
        if lines.is_empty() && key.is_none() {
            tx.commit().await.map_err(fail)?;
            return Ok(meta);
        }
        let next: i64 = tx
            .query_one(
                "SELECT COALESCE(MAX(seq) + 1, 0) FROM agent_host_messages WHERE session_id = $1",
                &[&meta.id],
            )
            .await
            .and_then(|row| row.try_get(0))
            .map_err(fail)?;
        let count = i64::try_from(lines.len()).unwrap_or(i64::MAX);
        if !lines.is_empty() {
            tx.execute(
                "INSERT INTO agent_host_messages (session_id, seq, line)
                 SELECT $1, $2 + t.n - 1, t.line FROM unnest($3::text[]) WITH ORDINALITY AS t(line, n)",
                &[&meta.id, &next, &lines],
            )
            .await
            .map_err(fail)?;
        }
        let now = self.now();
        if let Some(key) = &key {
            tx.execute(
                "INSERT INTO agent_host_appends (session_id, idempotency_key, first_seq, count, created)
                 VALUES ($1, $2, $3, $4, $5)",
                &[&meta.id, &key.as_bytes(), &next, &count, &now],
            )
            .await
            .map_err(fail)?;
        }
        if !lines.is_empty() {
            // The rows are the truth: `seq`s run without gaps from 0.
            meta.message_count = u64::try_from(next.saturating_add(count)).unwrap_or(0);
            meta.updated = meta.updated.max(now);
            add_channels(&mut meta.channels, channels.iter().map(String::as_str));
            self.update(&tx, &meta, action).await?;
        }
        tx.commit().await.map_err(fail)?;
        Ok(meta)
    }

    /// Parses a stored line (`None`: over the cap) of message `seq`; a line
    /// that is not a message is a warning, as `load` reports it.
    fn parse_row(
        &self,
        session: &SessionRef,
        seq: i64,
        line: Option<&str>,
        warnings: &mut Vec<StoreWarning>,
    ) -> Option<Message> {
        let line_no = usize::try_from(seq).unwrap_or(0).saturating_add(1);
        let parsed = match line {
            Some(line) => jsonl::parse_line(line, line_no).map_err(|e| e.to_string()),
            None => Err(format!("it is over {MAX_LINE_BYTES} bytes")),
        };
        match parsed {
            Ok(message) => Some(message),
            Err(e) => {
                warnings.push(StoreWarning {
                    path: self.name.clone().into(),
                    line: None,
                    offset: None,
                    detail: format!(
                        "session {session}: message {seq} is not a valid message ({e}); skipped"
                    ),
                });
                None
            }
        }
    }

    /// Sets `meta`'s count to the `rows` read, with a warning when the
    /// stored count differed.
    fn reconcile(
        &self,
        session: &SessionRef,
        meta: &mut SessionMeta,
        rows: u64,
        warnings: &mut Vec<StoreWarning>,
    ) {
        if meta.message_count != rows {
            warnings.push(StoreWarning {
                path: self.name.clone().into(),
                line: None,
                offset: None,
                detail: format!(
                    "session {session}: the metadata counts {} messages, the database holds {rows}",
                    meta.message_count
                ),
            });
            meta.message_count = rows;
        }
    }

    /// The tail of a session's log (see [`SessionStore::load_tail`]), in
    /// one snapshot: the leading system rows from the first `seq` up, then
    /// the rows from the newest back to the start point, both through
    /// portals fetched a batch at a time, so that the rows between are
    /// neither read nor sent.
    async fn load_tail(self: Arc<Self>, session: SessionRef, from: TailStart) -> Result<Tail> {
        let mut client = self.client().await?;
        let fail = |e| self.fail(&session, "cannot read", e);
        let tx = client
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await
            .map_err(fail)?;
        let mut meta = self.existing(&tx, &session, false).await?;
        let mut warnings = Vec::new();
        let read = |row: &Row| -> Result<(i64, Option<String>)> {
            Ok((row.try_get(0).map_err(fail)?, row.try_get(1).map_err(fail)?))
        };
        // The leading system rows, up to the first row of another message.
        let mut system = Vec::new();
        let mut head: Option<i64> = None;
        let mut head_rows: u64 = 0;
        let ascending = tx
            .bind(
                "SELECT seq, CASE WHEN octet_length(line) <= $2 THEN line END
                 FROM agent_host_messages WHERE session_id = $1 ORDER BY seq",
                &[&meta.id, &MAX_LINE_BYTES],
            )
            .await
            .map_err(fail)?;
        'head: loop {
            let rows = tx.query_portal(&ascending, 16).await.map_err(fail)?;
            if rows.is_empty() {
                break;
            }
            for row in &rows {
                let (seq, line) = read(row)?;
                match self.parse_row(&session, seq, line.as_deref(), &mut warnings) {
                    Some(message) if !crate::leads(&message) => {
                        head = Some(seq);
                        break 'head;
                    }
                    Some(message) => system.push(message),
                    None => {}
                }
                head_rows += 1;
            }
        }
        // From the newest row back to the start point, on the primary key.
        let mut newest: Vec<(i64, Message)> = Vec::new();
        let mut newest_warnings = Vec::new();
        let mut reached = true;
        let mut tail_rows: u64 = 0;
        if let Some(head) = head {
            let descending = tx
                .bind(
                    "SELECT seq, CASE WHEN octet_length(line) <= $3 THEN line END
                     FROM agent_host_messages WHERE session_id = $1 AND seq >= $2
                     ORDER BY seq DESC",
                    &[&meta.id, &head, &MAX_LINE_BYTES],
                )
                .await
                .map_err(fail)?;
            let batch = match &from {
                TailStart::Newest(n) => i32::try_from(n.saturating_add(1))
                    .unwrap_or(i32::MAX)
                    .min(1024),
                TailStart::AtId(_) | TailStart::Covered { .. } => 64,
            };
            let mut start = from.scan();
            'tail: loop {
                if start.found() {
                    reached = false;
                    break;
                }
                let rows = tx.query_portal(&descending, batch).await.map_err(fail)?;
                if rows.is_empty() {
                    break;
                }
                for row in &rows {
                    if start.found() {
                        reached = false;
                        break 'tail;
                    }
                    tail_rows += 1;
                    let (seq, line) = read(row)?;
                    if let Some(message) =
                        self.parse_row(&session, seq, line.as_deref(), &mut newest_warnings)
                    {
                        start.feed(&message);
                        newest.push((seq, message));
                    }
                }
            }
        }
        newest.reverse();
        newest_warnings.reverse();
        warnings.extend(newest_warnings);
        let (seqs, mut after): (Vec<i64>, Vec<Message>) = newest.into_iter().unzip();
        let (start, found) = crate::tail::start_in(&after, &from);
        let skipped = match (head, seqs.get(start)) {
            _ if reached => start as u64,
            (Some(head), Some(&first)) => u64::try_from(first - head).unwrap_or(0),
            // None of the rows after the system ones is wanted (`Newest(0)`).
            (Some(head), None) => {
                let end: i64 = tx
                    .query_one(
                        "SELECT COALESCE(MAX(seq) + 1, 0) FROM agent_host_messages WHERE session_id = $1",
                        &[&meta.id],
                    )
                    .await
                    .and_then(|row| row.try_get(0))
                    .map_err(fail)?;
                u64::try_from(end - head).unwrap_or(0)
            }
            (None, _) => 0,
        };
        tx.commit().await.map_err(fail)?;
        if reached {
            self.reconcile(&session, &mut meta, head_rows + tail_rows, &mut warnings);
        }
        Ok(Tail {
            meta,
            system,
            messages: after.split_off(start),
            skipped,
            found,
            warnings,
        })
    }

    /// The session and its rows (`None` for a line over the cap), read in
    /// one snapshot; parsed by the caller, off the runtime.
    async fn load(
        self: Arc<Self>,
        session: SessionRef,
    ) -> Result<(SessionMeta, Vec<(i64, Option<String>)>)> {
        let mut client = self.client().await?;
        let fail = |e| self.fail(&session, "cannot read", e);
        let tx = client
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await
            .map_err(fail)?;
        let meta = self.existing(&tx, &session, false).await?;
        let params: [&(dyn ToSql + Sync); 2] = [&meta.id, &MAX_LINE_BYTES];
        let rows = tx
            .query_raw(
                "SELECT seq, CASE WHEN octet_length(line) <= $2 THEN line END
                 FROM agent_host_messages WHERE session_id = $1 ORDER BY seq",
                params,
            )
            .await
            .map_err(fail)?;
        let mut rows = std::pin::pin!(rows);
        let mut lines = Vec::with_capacity(
            usize::try_from(meta.message_count)
                .unwrap_or(0)
                .min(1 << 20),
        );
        while let Some(row) = rows.try_next().await.map_err(fail)? {
            let seq: i64 = row.try_get(0).map_err(fail)?;
            let line: Option<String> = row.try_get(1).map_err(fail)?;
            lines.push((seq, line));
        }
        tx.commit().await.map_err(fail)?;
        Ok((meta, lines))
    }

    async fn select_page(self: Arc<Self>, page: PageRequest) -> Result<SessionPage> {
        let mut client = self.client().await?;
        let fail = |e| self.fail_store("cannot list the sessions of", e);
        let tx = client
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await
            .map_err(fail)?;
        let offset = i64::try_from(page.offset).unwrap_or(i64::MAX);
        let limit = i64::try_from(page.limit).unwrap_or(i64::MAX);
        let agent = page.agent.as_deref().map(str::as_bytes);
        let total = tx
            .query_one(
                "SELECT COUNT(*) FROM agent_host_sessions WHERE $1::bytea IS NULL OR agent = $1",
                &[&agent],
            )
            .await
            .map_err(fail)?;
        // A keyset: `updated <= t` is a range of the `(updated DESC, id)`
        // index, the rest cuts the ties.
        let (after_time, after_id) = match page.after {
            Some(PageCursor { updated, id }) => (Some(updated), Some(id)),
            None => (None, None),
        };
        let rows = tx
            .query(
                &format!(
                    "SELECT {META_COLUMNS} FROM agent_host_sessions
                     WHERE ($1::bytea IS NULL OR agent = $1)
                       AND ($2::timestamptz IS NULL
                            OR (updated <= $2 AND (updated < $2 OR id > $3::uuid)))
                     ORDER BY updated DESC, id LIMIT $4 OFFSET $5"
                ),
                &[&agent, &after_time, &after_id, &limit, &offset],
            )
            .await
            .map_err(fail)?;
        tx.commit().await.map_err(fail)?;
        let total: i64 = total.try_get(0).map_err(fail)?;
        // The last row's position, even when its other columns do not read.
        let next = match rows.last() {
            Some(row) if rows.len() >= page.limit => match (row.try_get(7), row.try_get(0)) {
                (Ok(updated), Ok(id)) => Some(PageCursor { updated, id }),
                _ => None,
            },
            _ => None,
        };
        let mut sessions = Vec::with_capacity(rows.len());
        let mut warnings = Vec::new();
        for row in rows {
            match self.meta_of(&row) {
                Ok(meta) => sessions.push(meta),
                Err(e) => warnings.push(StoreWarning {
                    path: self.name.clone().into(),
                    line: None,
                    offset: None,
                    detail: format!("{}; not listed", error_chain(&e)),
                }),
            }
        }
        Ok(SessionPage {
            sessions,
            total: usize::try_from(total).unwrap_or(0),
            warnings,
            next,
        })
    }

    /// Runs `change` on the session's locked metadata and stores the result.
    async fn modify(
        self: Arc<Self>,
        session: SessionRef,
        action: &'static str,
        change: impl FnOnce(&mut SessionMeta, DateTime<Utc>) + Send,
        clear: bool,
    ) -> Result<SessionMeta> {
        let mut client = self.client().await?;
        let fail = |e| self.fail(&session, action, e);
        let tx = client.transaction().await.map_err(fail)?;
        let mut meta = self.existing(&tx, &session, true).await?;
        if clear {
            tx.execute(
                "DELETE FROM agent_host_messages WHERE session_id = $1",
                &[&meta.id],
            )
            .await
            .map_err(fail)?;
        }
        change(&mut meta, self.now());
        self.update(&tx, &meta, action).await?;
        tx.commit().await.map_err(fail)?;
        Ok(meta)
    }
}

/// The advisory lock key of a session's turns.
fn lock_key(session: Uuid) -> i64 {
    let (high, low) = session.as_u64_pair();
    (high ^ low) as i64
}

/// A held turn lock: unlocked (on the store's runtime) when dropped; when
/// the store is gone, its connection closes and the server releases it.
struct HeldTurn {
    client: Option<Client>,
    key: i64,
    inner: Arc<Inner>,
    permit: Option<OwnedSemaphorePermit>,
    runtime: tokio::runtime::Handle,
}

impl Drop for HeldTurn {
    fn drop(&mut self) {
        let (Some(client), Some(permit)) = (self.client.take(), self.permit.take()) else {
            return;
        };
        let (key, inner) = (self.key, Arc::clone(&self.inner));
        self.runtime.spawn(async move {
            match client
                .execute("SELECT pg_advisory_unlock($1)", &[&key])
                .await
            {
                Ok(_) => inner
                    .lock_idle
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(client),
                // Closing the connection releases the lock.
                Err(e) => tracing::debug!("a turn lock's connection dropped: {}", error_chain(&e)),
            }
            drop(permit);
        });
    }
}

/// A connection taken from the pool; back to it when dropped, unless closed.
struct Pooled {
    client: Option<Client>,
    inner: Arc<Inner>,
    _permit: OwnedSemaphorePermit,
}

impl std::ops::Deref for Pooled {
    type Target = Client;
    fn deref(&self) -> &Client {
        self.client.as_ref().expect("a pooled client until dropped")
    }
}

impl std::ops::DerefMut for Pooled {
    fn deref_mut(&mut self) -> &mut Client {
        self.client.as_mut().expect("a pooled client until dropped")
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        if let Some(client) = self.client.take()
            && !client.is_closed()
        {
            self.inner
                .idle
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(client);
        }
    }
}

/// Long-term memory's log in the database (`memory.rs` keeps the rest).
impl PostgresStore {
    /// The memory changes after `seen`, in order, and the `seq` of the last.
    pub(crate) fn memory_since(
        &self,
        seen: u64,
    ) -> Result<(Vec<agent_host_core::memory::Change>, u64)> {
        self.run(move |db| async move {
            let client = db.client().await?;
            let fail = |e| StoreError::Backend {
                context: format!("memory: cannot read the PostgreSQL database {}", db.name),
                source: Box::new(e),
            };
            let max = i32::try_from(crate::memory::MAX_CHANGE_BYTES).unwrap_or(i32::MAX);
            let rows = client
                .query(
                    "SELECT seq, CASE WHEN octet_length(change) <= $2 THEN change END
                     FROM agent_host_memory_changes WHERE seq > $1 ORDER BY seq",
                    &[&i64::try_from(seen).unwrap_or(i64::MAX), &max],
                )
                .await
                .map_err(fail)?;
            let mut changes = Vec::with_capacity(rows.len());
            let mut last = seen;
            for row in rows {
                let seq: i64 = row.try_get(0).map_err(fail)?;
                let bad = |why: String| StoreError::Backend {
                    context: format!(
                        "memory: row {seq} of agent_host_memory_changes in {} is not a memory change",
                        db.name
                    ),
                    source: why.into(),
                };
                let text: Option<String> = row.try_get(1).map_err(fail)?;
                let text = text.ok_or_else(|| {
                    bad(format!("it is over {} bytes", crate::memory::MAX_CHANGE_BYTES))
                })?;
                changes.push(serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?);
                last = u64::try_from(seq).unwrap_or(0);
            }
            Ok((changes, last))
        })
    }

    /// Appends `changes` in one transaction; the `seq` of the last.
    pub(crate) fn memory_append(&self, changes: &[agent_host_core::memory::Change]) -> Result<u64> {
        let texts = changes
            .iter()
            .map(serde_json::to_string)
            .collect::<std::result::Result<Vec<String>, _>>()
            .map_err(|e| StoreError::Backend {
                context: "memory: cannot encode a change".into(),
                source: Box::new(e),
            })?;
        self.run(move |db| async move {
            let mut client = db.client().await?;
            let fail = |e| StoreError::Backend {
                context: format!(
                    "memory: cannot write to the PostgreSQL database {}",
                    db.name
                ),
                source: Box::new(e),
            };
            let tx = client.transaction().await.map_err(fail)?;
            let mut last = 0;
            for text in &texts {
                let row = tx
                    .query_one(
                        "INSERT INTO agent_host_memory_changes (change) VALUES ($1) RETURNING seq",
                        &[text],
                    )
                    .await
                    .map_err(fail)?;
                last = row.try_get::<_, i64>(0).map_err(fail)?;
            }
            tx.commit().await.map_err(fail)?;
            Ok(u64::try_from(last).unwrap_or(0))
        })
    }

    /// Holds the memory's write lock (across every instance) until dropped.
    pub(crate) fn memory_lock(&self) -> Result<TurnLock> {
        let held = self.run(move |db| db.lock_turn(MEMORY_LOCK))?;
        Ok(TurnLock::new(held))
    }
}

impl SessionStore for PostgresStore {
    fn create(&self, new: &NewSession) -> Result<SessionMeta> {
        new.validate()?;
        let new = new.clone();
        self.run(move |db| async move {
            let client = db.client().await?;
            db.insert(&*client, &new, false)
                .await?
                .ok_or_else(|| StoreError::Backend {
                    context: format!("session {}: the insert returned no row", describe_new(&new)),
                    source: "unexpected answer of the database".into(),
                })
        })
    }

    fn get_or_create(&self, new: &NewSession) -> Result<Opened> {
        let session = new.keyed_reference()?;
        let new = new.clone();
        self.run(move |db| async move {
            let client = db.client().await?;
            // `ON CONFLICT DO NOTHING` waits for a concurrent creator, then
            // the lookup sees its session; a delete in between starts over.
            for _ in 0..8 {
                if let Some(meta) = db.insert(&*client, &new, true).await? {
                    return Ok(Opened {
                        meta,
                        created: true,
                    });
                }
                if let Some(meta) = db.find(&*client, &session, false).await? {
                    return Ok(Opened {
                        meta,
                        created: false,
                    });
                }
            }
            Err(StoreError::Backend {
                context: format!("session {session}: cannot create or open it in {}", db.name),
                source: "it was deleted again each time it was created".into(),
            })
        })
    }

    fn get(&self, session: &SessionRef) -> Result<Option<SessionMeta>> {
        let session = session.clone();
        self.run(move |db| async move {
            let client = db.client().await?;
            db.find(&*client, &session, false).await
        })
    }

    fn append(&self, session: &SessionRef, messages: &[Message]) -> Result<SessionMeta> {
        self.do_append(session, messages, None)
    }

    fn append_once(
        &self,
        session: &SessionRef,
        idempotency_key: &str,
        messages: &[Message],
    ) -> Result<SessionMeta> {
        self.do_append(session, messages, Some(idempotency_key))
    }

    fn import(&self, meta: &SessionMeta, messages: &[Message]) -> Result<SessionMeta> {
        let new = NewSession::from(meta);
        new.validate()?;
        let lines = Self::lines(&meta.reference(), messages)?;
        let mut meta = meta.clone();
        meta.message_count = lines.len() as u64;
        meta.tidy_channels();
        meta.add_channels_of(messages);
        self.run(move |db| async move {
            let session = meta.reference();
            let action = "cannot import into";
            let mut client = db.client().await?;
            let fail = |e| db.fail(&session, action, e);
            let tx = client.transaction().await.map_err(fail)?;
            let checkpoints =
                serde_json::to_string(&meta.checkpoints).expect("checkpoints serialize to JSON");
            let count = i64::try_from(meta.message_count).unwrap_or(i64::MAX);
            let channels =
                serde_json::to_string(&meta.channels).expect("channels serialize to JSON");
            let inserted = tx
                .execute(
                    "INSERT INTO agent_host_sessions (id, agent, key, title, worker_id, workspace_id,
                     created, updated, message_count, checkpoints, channels)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
                    &[
                        &meta.id,
                        &meta.agent.as_bytes(),
                        &bytes(&meta.key),
                        &bytes(&meta.title),
                        &bytes(&meta.worker_id),
                        &bytes(&meta.workspace_id),
                        &meta.created,
                        &meta.updated,
                        &count,
                        &checkpoints,
                        &channels,
                    ],
                )
                .await;
            match inserted {
                Err(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) => {
                    return Err(StoreError::AlreadyExists(
                        new.reference().unwrap_or(session.clone()),
                    ));
                }
                other => other.map_err(fail)?,
            };
            tx.execute(
                "INSERT INTO agent_host_messages (session_id, seq, line)
                 SELECT $1, t.n - 1, t.line FROM unnest($2::text[]) WITH ORDINALITY AS t(line, n)",
                &[&meta.id, &lines],
            )
            .await
            .map_err(fail)?;
            tx.commit().await.map_err(fail)?;
            // Times as stored (microseconds).
            meta.created = meta.created.trunc_subsecs(6);
            meta.updated = meta.updated.trunc_subsecs(6);
            Ok(meta)
        })
    }

    fn load(&self, session: &SessionRef) -> Result<History> {
        let owned = session.clone();
        let (mut meta, rows) = self.run(move |db| db.load(owned))?;
        let mut messages = Vec::with_capacity(rows.len());
        let mut warnings = Vec::new();
        let total = rows.len() as u64;
        for (seq, line) in rows {
            if let Some(message) =
                self.inner
                    .parse_row(session, seq, line.as_deref(), &mut warnings)
            {
                messages.push(message);
            }
        }
        self.inner
            .reconcile(session, &mut meta, total, &mut warnings);
        for warning in &warnings {
            tracing::warn!("{warning}");
        }
        Ok(History {
            meta,
            messages,
            warnings,
        })
    }

    fn load_tail(&self, session: &SessionRef, from: TailStart) -> Result<Tail> {
        let session = session.clone();
        let tail = self.run(move |db| db.load_tail(session, from))?;
        for warning in &tail.warnings {
            tracing::warn!("{warning}");
        }
        Ok(tail)
    }

    fn announce(&self, payload: &str) -> Result<()> {
        if payload.len() > crate::MAX_NOTICE_BYTES {
            return Err(StoreError::Invalid {
                what: "announcement",
                value: payload.chars().take(64).collect(),
                reason: format!(
                    "it is {} bytes; at most {} fit",
                    payload.len(),
                    crate::MAX_NOTICE_BYTES
                ),
            });
        }
        let queue = self.inner.announcer.get_or_init(|| {
            let (send, receive) = tokio::sync::mpsc::channel(NOTICE_BACKLOG);
            self.runtime
                .as_ref()
                .expect("the runtime lives as long as the store")
                .spawn(Arc::clone(&self.inner).announce(receive));
            send
        });
        queue
            .try_send(payload.to_owned())
            .map_err(|e| StoreError::Backend {
                context: format!("cannot announce an event to {}", self.inner.name),
                source: format!("{NOTICE_BACKLOG} announcements are waiting to be sent ({e})")
                    .into(),
            })
    }

    fn notifications(&self) -> Option<tokio::sync::mpsc::Receiver<Notice>> {
        let (send, receive) = tokio::sync::mpsc::channel(NOTICE_BACKLOG);
        self.runtime
            .as_ref()
            .expect("the runtime lives as long as the store")
            .spawn(Arc::clone(&self.inner).listen(send));
        Some(receive)
    }

    fn turn_lock(&self, session: Uuid) -> Result<Option<TurnLock>> {
        let held = self.run(move |db| db.lock_turn(session))?;
        Ok(Some(TurnLock::new(held)))
    }

    fn list(&self, page: &PageRequest) -> Result<SessionPage> {
        page.validate()?;
        let page = page.clone();
        self.run(move |db| db.select_page(page))
    }

    fn scan(&self) -> Result<SessionPage> {
        self.run(move |db| db.select_page(PageRequest::first(i64::MAX as usize)))
    }

    fn rename(&self, session: &SessionRef, title: Option<&str>) -> Result<SessionMeta> {
        let session = session.clone();
        let title = title.map(str::to_owned);
        self.run(move |db| {
            db.modify(
                session,
                "cannot rename in",
                move |meta, now| {
                    meta.title = title;
                    meta.updated = meta.updated.max(now);
                },
                false,
            )
        })
    }

    fn delete(&self, session: &SessionRef) -> Result<SessionMeta> {
        let session = session.clone();
        self.run(move |db| async move {
            let client = db.client().await?;
            let fail = |e| db.fail(&session, "cannot delete from", e);
            let row = match &session {
                SessionRef::Id(id) => {
                    client
                        .query_opt(
                            &format!("DELETE FROM agent_host_sessions WHERE id = $1 RETURNING {META_COLUMNS}"),
                            &[id],
                        )
                        .await
                }
                SessionRef::Key { agent, key } => {
                    client
                        .query_opt(
                            &format!(
                                "DELETE FROM agent_host_sessions WHERE agent = $1 AND key = $2 RETURNING {META_COLUMNS}"
                            ),
                            &[&agent.as_bytes(), &key.as_bytes()],
                        )
                        .await
                }
            }
            .map_err(fail)?;
            match row {
                Some(row) => db.meta_of(&row),
                None => Err(StoreError::NotFound(session.clone())),
            }
        })
    }

    fn clear(&self, session: &SessionRef) -> Result<SessionMeta> {
        let session = session.clone();
        self.run(move |db| {
            db.modify(
                session,
                "cannot clear in",
                |meta, now| {
                    meta.message_count = 0;
                    meta.checkpoints.clear();
                    meta.updated = meta.updated.max(now);
                },
                true,
            )
        })
    }

    fn write_checkpoint(
        &self,
        session: &SessionRef,
        checkpoint: &Checkpoint,
    ) -> Result<SessionMeta> {
        let session = session.clone();
        let checkpoint = checkpoint.clone();
        self.run(move |db| {
            db.modify(
                session,
                "cannot write a checkpoint to",
                move |meta, now| {
                    meta.checkpoints.push(checkpoint);
                    meta.updated = meta.updated.max(now);
                },
                false,
            )
        })
    }

    fn put_request_record(&self, session: Uuid, n: u64, body: &str, keep: usize) -> Result<()> {
        check_request_record(session, n, body)?;
        let body = body.to_owned();
        let n = i64::try_from(n).unwrap_or(i64::MAX);
        let oldest_gone = n.saturating_sub(i64::try_from(keep).unwrap_or(i64::MAX));
        self.run(move |db| async move {
            let reference = SessionRef::Id(session);
            let action = "cannot write a request record in";
            let mut client = db.client().await?;
            let fail = |e| db.fail(&reference, action, e);
            let tx = client.transaction().await.map_err(fail)?;
            // The session's row, shared: a delete waits, or went first.
            db.find_shared(&tx, &reference).await?;
            tx.execute(
                "INSERT INTO agent_host_request_records (session_id, n, body) VALUES ($1, $2, $3)
                 ON CONFLICT (session_id, n) DO UPDATE SET body = EXCLUDED.body",
                &[&session, &n, &body],
            )
            .await
            .map_err(fail)?;
            tx.execute(
                "DELETE FROM agent_host_request_records WHERE session_id = $1 AND n <= $2",
                &[&session, &oldest_gone],
            )
            .await
            .map_err(fail)?;
            tx.commit().await.map_err(fail)
        })
    }

    fn request_records(&self, session: Uuid) -> Result<Vec<(u64, String)>> {
        self.run(move |db| async move {
            let reference = SessionRef::Id(session);
            let client = db.client().await?;
            // `octet_length` is an `integer`.
            let max_bytes = i32::try_from(crate::MAX_REQUEST_RECORD_BYTES).unwrap_or(i32::MAX);
            let max_rows = i64::try_from(crate::MAX_REQUEST_RECORDS_READ).unwrap_or(i64::MAX);
            let rows = client
                .query(
                    "SELECT n, CASE WHEN octet_length(body) <= $2 THEN body END
                     FROM agent_host_request_records WHERE session_id = $1
                     ORDER BY n DESC LIMIT $3",
                    &[&session, &max_bytes, &max_rows],
                )
                .await
                .map_err(|e| db.fail(&reference, "cannot read request records from", e))?;
            let mut found = Vec::new();
            let mut bytes_read = 0usize;
            for row in rows {
                if bytes_read >= crate::MAX_REQUEST_RECORDS_READ_BYTES {
                    tracing::warn!(
                        "{}: session {session}: more request records than a read returns; the older ones left out",
                        db.name
                    );
                    break;
                }
                let n = row.try_get::<_, i64>(0).ok();
                let body = row
                    .try_get::<_, Option<String>>(1)
                    .ok()
                    .flatten()
                    .filter(|b| serde_json::from_str::<serde::de::IgnoredAny>(b).is_ok());
                match (n.and_then(|n| u64::try_from(n).ok()).filter(|&n| n > 0), body) {
                    (Some(n), Some(body)) => {
                        bytes_read += body.len();
                        found.push((n, body));
                    }
                    _ => tracing::warn!(
                        "{}: session {session}: request record {n:?} left out: not a JSON document within {} bytes, or badly numbered",
                        db.name,
                        crate::MAX_REQUEST_RECORD_BYTES
                    ),
                }
            }
            found.reverse();
            Ok(found)
        })
    }

    fn request_record_count(&self, session: Uuid) -> Result<usize> {
        self.run(move |db| async move {
            let client = db.client().await?;
            let count: i64 = client
                .query_one(
                    "SELECT COUNT(*) FROM agent_host_request_records WHERE session_id = $1",
                    &[&session],
                )
                .await
                .and_then(|row| row.try_get(0))
                .map_err(|e| {
                    db.fail(
                        &SessionRef::Id(session),
                        "cannot read request records from",
                        e,
                    )
                })?;
            Ok(usize::try_from(count).unwrap_or(0))
        })
    }

    fn cleanup(&self, idle: Duration, now: DateTime<Utc>) -> Result<Vec<SessionMeta>> {
        let Some(cutoff) = idle_cutoff(idle, now) else {
            return Ok(Vec::new());
        };
        // Stored times are whole microseconds: `updated < cutoff` is
        // `updated < cutoff rounded up to a microsecond`.
        let floor = cutoff.trunc_subsecs(6);
        let cutoff = if floor == cutoff {
            cutoff
        } else {
            floor + chrono::TimeDelta::microseconds(1)
        };
        self.run(move |db| async move {
            let client = db.client().await?;
            let rows = client
                .query(
                    &format!(
                        "DELETE FROM agent_host_sessions WHERE updated < $1 RETURNING {META_COLUMNS}"
                    ),
                    &[&cutoff],
                )
                .await
                .map_err(|e| db.fail_store(&format!("cannot clean up the sessions idle since {cutoff} in"), e))?;
            let mut deleted = Vec::with_capacity(rows.len());
            for row in rows {
                // Deleted already; a row that does not read is still gone.
                match db.meta_of(&row) {
                    Ok(meta) => deleted.push(meta),
                    Err(e) => tracing::warn!("{}", error_chain(&e)),
                }
            }
            Ok(deleted)
        })
    }
}

/// Parses the URL into the client's configuration, taking out what
/// `tokio-postgres` does not know (`sslrootcert`), with defaults for the
/// connect timeout and the application name.
fn parse_url(url: &str, name: &str) -> Result<(Config, Option<String>)> {
    let invalid = |reason: String| StoreError::Invalid {
        what: "store",
        value: name.to_owned(),
        reason,
    };
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (url, None),
    };
    let mut roots = None;
    let mut kept = Vec::new();
    for pair in query.into_iter().flat_map(|q| q.split('&')) {
        match pair.split_once('=') {
            Some(("sslrootcert", path)) => roots = Some(percent_decode(path)),
            _ => kept.push(pair),
        }
    }
    let url = if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    let mut config: Config = url.parse().map_err(|e: tokio_postgres::Error| {
        invalid(format!(
            "it is not a PostgreSQL URL such as postgres://USER:PASSWORD@HOST:5432/DATABASE ({e})"
        ))
    })?;
    if config.get_hosts().is_empty() {
        return Err(invalid(
            "it names no host; write postgres://USER@HOST/DATABASE".into(),
        ));
    }
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    if config.get_application_name().is_none() {
        config.application_name("agent-host");
    }
    Ok((config, roots))
}

/// Decodes `%XX` escapes (a path in a URL).
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && let (Some(h), Some(l)) = (
                bytes.get(i + 1).and_then(|&b| hex(b)),
                bytes.get(i + 2).and_then(|&b| hex(b)),
            )
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// rustls with the system's roots and those of `extra` (a PEM file).
fn tls_connector(extra: Option<&str>, name: &str) -> Result<MakeRustlsConnect> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    let native = rustls_native_certs::load_native_certs();
    for error in &native.errors {
        tracing::debug!("a system root certificate did not load: {error}");
    }
    roots.add_parsable_certificates(native.certs);
    if let Some(path) = extra {
        let certs = CertificateDer::pem_file_iter(path)
            .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
            .map_err(|e| StoreError::Invalid {
                what: "store",
                value: name.to_owned(),
                reason: format!(
                    "its sslrootcert {path} is not a readable PEM file of certificates ({e})"
                ),
            })?;
        for cert in certs {
            roots.add(cert).map_err(|e| StoreError::Invalid {
                what: "store",
                value: name.to_owned(),
                reason: format!("its sslrootcert {path} holds a certificate rustls refuses ({e})"),
            })?;
        }
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| StoreError::Backend {
            context: format!("cannot set up TLS for {name}"),
            source: Box::new(e),
        })?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}

/// An optional name as stored.
fn bytes(text: &Option<String>) -> Option<&[u8]> {
    text.as_deref().map(str::as_bytes)
}

fn describe_new(new: &NewSession) -> String {
    match &new.key {
        Some(key) => format!("{key:?} of agent {:?}", new.agent),
        None => format!("(new) of agent {:?}", new.agent),
    }
}
