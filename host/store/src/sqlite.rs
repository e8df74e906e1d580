//! The SQLite store: every session in one database file.
//!
//! ```text
//! sessions(id TEXT PRIMARY KEY, agent, key, title, created, updated,
//!          message_count, checkpoints TEXT /* JSON */, worker_id,
//!          workspace_id, channels TEXT /* JSON */, UNIQUE(agent, key))
//! messages(session_id REFERENCES sessions ON DELETE CASCADE, seq, line TEXT,
//!          PRIMARY KEY(session_id, seq))          -- a rowid table
//! request_records(session_id REFERENCES sessions ON DELETE CASCADE, n,
//!          body TEXT, PRIMARY KEY(session_id, n)) -- a rowid table
//! ```
//!
//! A message is stored as its native JSONL line (core's
//! [`jsonl::write_line`], without the newline), so fields this version does
//! not know survive a round trip. Times are RFC 3339 in UTC with nine
//! fractional digits: fixed width, so text order is time order and listing
//! can sort in the database. `seq` counts from 0 within a session and
//! restarts after a clear. The schema's version is `PRAGMA user_version`
//! ([`SCHEMA_VERSION`]); a database from a newer version is refused, not
//! guessed at.
//!
//! **Layout.** `messages` and `request_records` are ordinary rowid tables
//! whose primary key is a separate unique index: their rows (a message is
//! about 600 bytes of JSON, a request record kilobytes) are too large for
//! `WITHOUT ROWID`, which versions 1 to 3 used, and which made a history's
//! database 1.7 times its lines and its import slower (issue 23). A new
//! database has 16 KiB pages ([`PAGE_SIZE`]). Opening a version 1 to 3
//! database migrates it in one `IMMEDIATE` transaction: the two tables are
//! rebuilt, their rows copied in key order, and a failure rolls back to the
//! old version whole. That costs about a second per 100 MB of history, once,
//! with the write lock held (other processes wait up to [`BUSY_TIMEOUT`]).
//! The old tables' pages are then free pages, which later writes reuse: the
//! file does not shrink (a 174 MB database of a 96 MB history becomes
//! 303 MB, 174 of them free) until a `VACUUM` (`sqlite3 PATH VACUUM`, about
//! as long again). An old database keeps its 4 KiB pages: the page size of a
//! WAL database changes only by a `VACUUM` outside WAL.
//!
//! **Tail reads.** [`SessionStore::load_tail`] walks the key
//! `(session_id, seq)`: forward over the leading system rows, then back from
//! the newest row to the start point, in one read transaction. The count is
//! the session row's (it commits with the messages); rows between the two
//! parts are counted from their `seq`s, which run without gaps.
//!
//! **Durability.** WAL journal with `synchronous=FULL`: each commit `fsync`s
//! the WAL before it returns, so an acknowledged append survives a power
//! loss or an OS crash, as the file store's `fdatasync` does. (`NORMAL` with
//! WAL would only survive a crash of the process: the WAL is synced at
//! checkpoints, and the last commits can be lost with the machine.) An append
//! is one `IMMEDIATE` transaction: its lines, the count and `updated` commit
//! together or not at all, so the metadata never lags the messages.
//!
//! **Concurrency.** One connection per store behind a mutex: threads take
//! turns. Several processes share the database through SQLite's locks: WAL
//! lets readers run beside the one writer, write transactions begin
//! `IMMEDIATE` (so two writers never deadlock upgrading a read lock), and a
//! [`BUSY_TIMEOUT`] makes a writer wait for another rather than fail. WAL
//! needs shared memory between the processes: keep the database on a local
//! file system, not a network share.

use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use agent_host_core::format::jsonl;
use agent_host_core::{Checkpoint, Message};
use chrono::{DateTime, SecondsFormat, Utc};
use rusqlite::{Connection, OptionalExtension, Row, Transaction, TransactionBehavior, params};
use uuid::Uuid;

use super::tail::start_in;
use super::{
    Appended, History, NewSession, Opened, PageCursor, PageRequest, Result, SessionMeta,
    SessionPage, SessionRef, SessionStore, StoreError, StoreWarning, Tail, TailStart, add_channels,
    check_request_record, error_chain, idle_cutoff, leads,
};

/// The schema version this build writes, kept in `PRAGMA user_version`.
pub const SCHEMA_VERSION: i64 = 4;

/// How long a write waits for another process's transaction to finish.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// The page size of a new database, in bytes. Messages are about 600 bytes
/// of JSON and request records kilobytes: on 16 KiB pages a leaf holds
/// dozens of lines rather than a handful, and a history is written in fewer,
/// larger pages (issue 23: importing 96 MB took 0.88 s on 16 KiB pages, 1.32 s
/// on 4 KiB). A database keeps the page size it was created with.
pub const PAGE_SIZE: u32 = 16 * 1024;

/// The schema of version 1 (version 2 adds [`SCHEMA_V2`], 3 [`SCHEMA_V3`],
/// and 4 rebuilds two tables with [`SCHEMA_V4`]).
const SCHEMA_V1: &str = "
CREATE TABLE sessions (
    id            TEXT PRIMARY KEY NOT NULL,
    agent         TEXT NOT NULL,
    key           TEXT,
    title         TEXT,
    created       TEXT NOT NULL,
    updated       TEXT NOT NULL,
    message_count INTEGER NOT NULL DEFAULT 0,
    checkpoints   TEXT NOT NULL DEFAULT '[]',
    UNIQUE (agent, key)
);
CREATE INDEX sessions_by_update ON sessions (updated DESC, id);
CREATE INDEX sessions_by_agent_update ON sessions (agent, updated DESC, id);
CREATE TABLE messages (
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq        INTEGER NOT NULL,
    line       TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;
";

/// What schema version 2 adds: who serves a session and where it belongs.
const SCHEMA_V2: &str = "
ALTER TABLE sessions ADD COLUMN worker_id TEXT;
ALTER TABLE sessions ADD COLUMN workspace_id TEXT;
";

/// What schema version 3 adds: the channels a session was reached through,
/// and the gateway's request records.
const SCHEMA_V3: &str = "
ALTER TABLE sessions ADD COLUMN channels TEXT NOT NULL DEFAULT '[]';
CREATE TABLE request_records (
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    n          INTEGER NOT NULL,
    body       TEXT NOT NULL,
    PRIMARY KEY (session_id, n)
) WITHOUT ROWID;
";

/// What schema version 4 changes: `messages` and `request_records` become
/// rowid tables (`WITHOUT ROWID` suits rows smaller than a twentieth of a
/// page; a message is about 600 bytes, a request record kilobytes), each
/// with its key `(session_id, seq)` or `(session_id, n)` as a unique index.
/// The rows are copied in key order, so a session's rows sit together and
/// their rowids follow their order. Rows of a session that no longer exists
/// (left by a deletion made by hand with foreign keys off) are not copied.
/// Run inside the migration's transaction: a failure leaves version 3 whole.
const SCHEMA_V4: &str = "
ALTER TABLE messages RENAME TO messages_v3;
ALTER TABLE request_records RENAME TO request_records_v3;
CREATE TABLE messages (
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq        INTEGER NOT NULL,
    line       TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
);
CREATE TABLE request_records (
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    n          INTEGER NOT NULL,
    body       TEXT NOT NULL,
    PRIMARY KEY (session_id, n)
);
INSERT INTO messages (session_id, seq, line)
    SELECT session_id, seq, line FROM messages_v3
    WHERE session_id IN (SELECT id FROM sessions)
    ORDER BY session_id, seq;
INSERT INTO request_records (session_id, n, body)
    SELECT session_id, n, body FROM request_records_v3
    WHERE session_id IN (SELECT id FROM sessions)
    ORDER BY session_id, n;
";

/// The end of [`SCHEMA_V4`], once the rows left behind are counted.
const SCHEMA_V4_DROP: &str = "
DROP TABLE messages_v3;
DROP TABLE request_records_v3;
";

/// The statements that read or write `messages` and `request_records`, each
/// served by the table's key (`tests::every_row_query_is_served_by_a_key`
/// checks their plans).
mod sql {
    /// The next `seq` of session `?1`.
    pub const NEXT_SEQ: &str =
        "SELECT COALESCE(MAX(seq) + 1, 0) FROM messages WHERE session_id = ?1";
    /// One message of session `?1`.
    pub const INSERT: &str = "INSERT INTO messages (session_id, seq, line) VALUES (?1, ?2, ?3)";
    /// Every message of session `?1`, in order.
    pub const ALL: &str = "SELECT seq, line FROM messages WHERE session_id = ?1 ORDER BY seq";
    /// The messages of session `?1` from `seq` `?2`, newest first.
    pub const NEWEST_FROM: &str =
        "SELECT seq, line FROM messages WHERE session_id = ?1 AND seq >= ?2
     ORDER BY seq DESC";
    /// Clears session `?1`.
    pub const CLEAR: &str = "DELETE FROM messages WHERE session_id = ?1";
    /// Stores request record `?2` of session `?1`.
    pub const PUT_RECORD: &str =
        "INSERT OR REPLACE INTO request_records (session_id, n, body) VALUES (?1, ?2, ?3)";
    /// Drops the request records of session `?1` up to `?2`.
    pub const DROP_RECORDS: &str = "DELETE FROM request_records WHERE session_id = ?1 AND n <= ?2";
    /// The newest `?3` request records of session `?1`, newest first, a body
    /// longer than `?2` bytes read as NULL.
    pub const RECORDS: &str = "SELECT n, CASE WHEN length(CAST(body AS BLOB)) <= ?2 THEN body END
     FROM request_records WHERE session_id = ?1 ORDER BY n DESC LIMIT ?3";
    /// How many request records session `?1` has.
    pub const COUNT_RECORDS: &str = "SELECT COUNT(*) FROM request_records WHERE session_id = ?1";
}

/// The columns a [`SessionMeta`] is read from, in [`meta_of`]'s order.
const META_COLUMNS: &str = "id, agent, key, title, created, updated, message_count, checkpoints, \
     worker_id, workspace_id, channels";

/// The clock a store reads `now` from.
type Clock = Arc<dyn Fn() -> DateTime<Utc> + Send + Sync>;

/// The SQLite store; see the module docs for the schema and the guarantees.
///
/// ```
/// use agent_host_core::Message;
/// use agent_host_store::{NewSession, SessionStore, SqliteStore};
///
/// let dir = tempfile::tempdir()?;
/// let store = SqliteStore::open(dir.path().join("sessions.db"))?;
/// let session = store.create(&NewSession::new("default").with_key("cli"))?.reference();
/// store.append(&session, &[Message::user("hi").with_id("m1")])?;
/// assert_eq!(store.load(&session)?.messages.len(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct SqliteStore {
    path: PathBuf,
    conn: Mutex<Connection>,
    clock: Clock,
}

impl fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// The page `page` asks for, its limit unchecked (`scan` asks for all).
    fn select_page(&self, page: &PageRequest) -> Result<SessionPage> {
        let mut conn = self.conn();
        let fail = |e| {
            backend(
                format!(
                    "cannot list the sessions of the SQLite database {}",
                    self.path.display()
                ),
                e,
            )
        };
        let tx = conn.transaction().map_err(fail)?;
        let offset = i64::try_from(page.offset).unwrap_or(i64::MAX);
        let limit = i64::try_from(page.limit).unwrap_or(i64::MAX);
        // The filters, as SQL and its parameters: the agent's, and the
        // keyset position (`updated` is stored so that text order is time
        // order, ids lower-case, so text order is id order).
        let mut filters: Vec<String> = Vec::new();
        let mut values: Vec<String> = Vec::new();
        if let Some(agent) = &page.agent {
            values.push(agent.clone());
            filters.push(format!("agent = ?{}", values.len()));
        }
        if let Some(after) = &page.after {
            values.push(time(after.updated));
            let t = values.len();
            values.push(after.id.to_string());
            filters.push(format!(
                "(updated < ?{t} OR (updated = ?{t} AND id > ?{}))",
                values.len()
            ));
        }
        let count_where = match &page.agent {
            Some(_) => " WHERE agent = ?1",
            None => "",
        };
        let page_where = if filters.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", filters.join(" AND "))
        };
        let total: i64 = tx
            .prepare_cached(&format!("SELECT COUNT(*) FROM sessions{count_where}"))
            .and_then(|mut s| {
                s.query_row(
                    rusqlite::params_from_iter(
                        values.iter().take(usize::from(page.agent.is_some())),
                    ),
                    |r| r.get(0),
                )
            })
            .map_err(fail)?;
        let n = values.len();
        let raws: Vec<RawMeta> = tx
            .prepare_cached(&format!(
                "SELECT {META_COLUMNS} FROM sessions{page_where}
                 ORDER BY updated DESC, id LIMIT ?{} OFFSET ?{}",
                n + 1,
                n + 2
            ))
            .and_then(|mut s| {
                let mut params: Vec<&dyn rusqlite::ToSql> =
                    values.iter().map(|v| v as &dyn rusqlite::ToSql).collect();
                params.push(&limit);
                params.push(&offset);
                s.query_map(params.as_slice(), RawMeta::of)?.collect()
            })
            .map_err(fail)?;
        let full = raws.len() >= page.limit;
        tx.commit().map_err(fail)?;
        let mut sessions = Vec::with_capacity(raws.len());
        let mut warnings = Vec::new();
        for raw in raws {
            let id = raw.id.clone();
            match raw.into_meta(&self.path, &id) {
                Ok(meta) => sessions.push(meta),
                Err(e) => warnings.push(StoreWarning {
                    path: self.path.clone(),
                    line: None,
                    offset: None,
                    detail: format!("{}; not listed", error_chain(&e)),
                }),
            }
        }
        let next = if full {
            sessions.last().map(PageCursor::of)
        } else {
            None
        };
        Ok(SessionPage {
            sessions,
            total: usize::try_from(total).unwrap_or(0),
            warnings,
            next,
        })
    }

    /// Opens (creating when missing, with its parent folders) the database
    /// at `path`, and brings its schema to [`SCHEMA_VERSION`].
    ///
    /// A file that is not a SQLite database, or one written by a newer
    /// version, is an error naming the path.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            create_private_dir(parent).map_err(|source| StoreError::Io {
                context: "cannot create the folder of the SQLite database".into(),
                path: parent.to_owned(),
                source,
            })?;
        }
        create_private_file(&path).map_err(|source| StoreError::Io {
            context: "cannot create the SQLite database".into(),
            path: path.clone(),
            source,
        })?;
        let conn = Connection::open(&path).map_err(|e| {
            backend(
                format!("cannot open the SQLite database {}", path.display()),
                e,
            )
        })?;
        configure(&conn, &path)?;
        migrate(&conn, &path)?;
        Ok(SqliteStore {
            path,
            conn: Mutex::new(conn),
            clock: Arc::new(Utc::now),
        })
    }

    /// Reads the time from `clock` instead of the system clock (for tests).
    pub fn with_clock(mut self, clock: impl Fn() -> DateTime<Utc> + Send + Sync + 'static) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn now(&self) -> DateTime<Utc> {
        (self.clock)()
    }

    fn conn(&self) -> MutexGuard<'_, Connection> {
        // A panic inside a transaction dropped it, which rolled it back.
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The error for a failed `action` (`cannot append to`) on `session`.
    fn fail(&self, session: &dyn fmt::Display, action: &str, e: rusqlite::Error) -> StoreError {
        backend(
            format!(
                "session {session}: {action} the SQLite database {}",
                self.path.display()
            ),
            e,
        )
    }

    /// Runs `body` in an `IMMEDIATE` transaction (the write lock taken up
    /// front), committing when it returns `Ok`.
    /// `fail` gives the error for a failure to begin or commit.
    fn write<T>(
        &self,
        fail: impl Fn(rusqlite::Error) -> StoreError,
        body: impl FnOnce(&Transaction<'_>) -> Result<T>,
    ) -> Result<T> {
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(&fail)?;
        let value = body(&tx)?;
        tx.commit().map_err(fail)?;
        Ok(value)
    }

    /// The session's metadata inside `tx`, or `None`.
    fn find(
        &self,
        tx: &Connection,
        session: &SessionRef,
        action: &str,
    ) -> Result<Option<SessionMeta>> {
        let fail = |e| self.fail(session, action, e);
        let raw = match session {
            SessionRef::Id(id) => tx
                .prepare_cached(&format!(
                    "SELECT {META_COLUMNS} FROM sessions WHERE id = ?1"
                ))
                .and_then(|mut s| s.query_row([id.to_string()], RawMeta::of).optional()),
            SessionRef::Key { agent, key } => tx
                .prepare_cached(&format!(
                    "SELECT {META_COLUMNS} FROM sessions WHERE agent = ?1 AND key = ?2"
                ))
                .and_then(|mut s| s.query_row([agent, key], RawMeta::of).optional()),
        }
        .map_err(fail)?;
        raw.map(|raw| raw.into_meta(&self.path, &session.to_string()))
            .transpose()
    }

    /// The session's metadata inside `tx`, or [`StoreError::NotFound`].
    fn existing(&self, tx: &Connection, session: &SessionRef, action: &str) -> Result<SessionMeta> {
        self.find(tx, session, action)?
            .ok_or_else(|| StoreError::NotFound(session.clone()))
    }

    /// Inserts a new session, inside a write transaction.
    fn insert(&self, tx: &Connection, new: &NewSession) -> Result<SessionMeta> {
        let now = self.now();
        let meta = SessionMeta {
            id: Uuid::new_v4(),
            key: new.key.clone(),
            title: new.title.clone(),
            agent: new.agent.clone(),
            worker_id: new.worker_id.clone(),
            workspace_id: new.workspace_id.clone(),
            created: now,
            updated: now,
            message_count: 0,
            checkpoints: Vec::new(),
            channels: Vec::new(),
        };
        let mut meta = meta;
        add_channels(&mut meta.channels, new.channel.as_deref());
        let channels = serde_json::to_string(&meta.channels).expect("channels serialize to JSON");
        let inserted = tx
            .prepare_cached(
                "INSERT INTO sessions (id, agent, key, title, created, updated, message_count, checkpoints, worker_id, workspace_id, channels)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, 0, '[]', ?7, ?8, ?9)",
            )
            .and_then(|mut s| {
                s.execute(params![
                    meta.id.to_string(),
                    meta.agent,
                    meta.key,
                    meta.title,
                    time(meta.created),
                    time(meta.updated),
                    meta.worker_id,
                    meta.workspace_id,
                    channels,
                ])
            });
        match inserted {
            Ok(_) => Ok(meta),
            Err(e) if is_constraint(&e) => match new.reference() {
                Some(session) => Err(StoreError::AlreadyExists(session)),
                None => Err(self.fail(&meta.id, "cannot create the session in", e)),
            },
            Err(e) => Err(self.fail(&describe_new(new), "cannot create the session in", e)),
        }
    }

    /// Reads a `(seq, line)` row: its seq and its message, or `None` and a
    /// warning when the line is not a valid message.
    fn read_row(
        &self,
        session: &SessionRef,
        row: &Row<'_>,
        warnings: &mut Vec<StoreWarning>,
    ) -> Result<(i64, Option<Message>)> {
        let fail = |e| self.fail(session, "cannot read", e);
        let seq: i64 = row.get(0).map_err(fail)?;
        let line_no = usize::try_from(seq).unwrap_or(0) + 1;
        let parsed = row
            .get_ref(1)
            .map_err(fail)?
            .as_str()
            .map_err(|e| e.to_string())
            .and_then(|line| jsonl::parse_line(line, line_no).map_err(|e| e.to_string()));
        match parsed {
            Ok(message) => Ok((seq, Some(message))),
            Err(e) => {
                warnings.push(StoreWarning {
                    path: self.path.clone(),
                    line: None,
                    offset: None,
                    detail: format!(
                        "session {session}: message {seq} is not a valid message ({e}); skipped"
                    ),
                });
                Ok((seq, None))
            }
        }
    }

    /// Sets `meta`'s count to the `rows` the database holds, with a warning
    /// when they differ. The count commits with the rows, so they differ
    /// only after an edit by hand; the rows are the truth.
    fn reconcile(
        &self,
        session: &SessionRef,
        meta: &mut SessionMeta,
        rows: u64,
        warnings: &mut Vec<StoreWarning>,
    ) {
        if meta.message_count != rows {
            warnings.push(StoreWarning {
                path: self.path.clone(),
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

    /// Stores `meta`'s title, times, count, checkpoints and channels, inside
    /// a write transaction.
    fn update(&self, tx: &Connection, meta: &SessionMeta, action: &str) -> Result<()> {
        let checkpoints =
            serde_json::to_string(&meta.checkpoints).expect("checkpoints serialize to JSON");
        let channels = serde_json::to_string(&meta.channels).expect("channels serialize to JSON");
        tx.prepare_cached(
            "UPDATE sessions SET title = ?2, updated = ?3, message_count = ?4, checkpoints = ?5,
             channels = ?6 WHERE id = ?1",
        )
        .and_then(|mut s| {
            s.execute(params![
                meta.id.to_string(),
                meta.title,
                time(meta.updated),
                i64::try_from(meta.message_count).unwrap_or(i64::MAX),
                checkpoints,
                channels,
            ])
        })
        .map_err(|e| self.fail(&meta.id, action, e))?;
        Ok(())
    }
}

impl SessionStore for SqliteStore {
    fn create(&self, new: &NewSession) -> Result<SessionMeta> {
        new.validate()?;
        let fail = |e| self.fail(&describe_new(new), "cannot create the session in", e);
        self.write(fail, |tx| {
            if let Some(session) = new.reference()
                && self.find(tx, &session, "cannot read")?.is_some()
            {
                return Err(StoreError::AlreadyExists(session));
            }
            self.insert(tx, new)
        })
    }

    fn get_or_create(&self, new: &NewSession) -> Result<Opened> {
        let session = new.keyed_reference()?;
        // Looked up and created under the write lock: one caller, in any
        // process, creates it.
        let fail = |e| self.fail(&session, "cannot create the session in", e);
        self.write(fail, |tx| {
            if let Some(meta) = self.find(tx, &session, "cannot read")? {
                return Ok(Opened {
                    meta,
                    created: false,
                });
            }
            Ok(Opened {
                meta: self.insert(tx, new)?,
                created: true,
            })
        })
    }

    fn get(&self, session: &SessionRef) -> Result<Option<SessionMeta>> {
        let conn = self.conn();
        self.find(&conn, session, "cannot read")
    }

    fn append(&self, session: &SessionRef, messages: &[Message]) -> Result<SessionMeta> {
        self.append_versioned(session, messages)
            .map(|appended| appended.meta)
    }

    fn append_versioned(&self, session: &SessionRef, messages: &[Message]) -> Result<Appended> {
        // Serialized before the lock is taken.
        let lines = lines_of(session, messages)?;
        let action = "cannot append to";
        self.write(
            |e| self.fail(session, action, e),
            |tx| {
                let mut meta = self.existing(tx, session, action)?;
                let before = meta.version();
                if lines.is_empty() {
                    return Ok(Appended { before, meta });
                }
                let id = meta.id.to_string();
                let fail = |e| self.fail(session, action, e);
                let next: i64 = tx
                    .prepare_cached(sql::NEXT_SEQ)
                    .and_then(|mut s| s.query_row([&id], |row| row.get(0)))
                    .map_err(fail)?;
                let mut insert = tx.prepare_cached(sql::INSERT).map_err(fail)?;
                for (seq, line) in (next..).zip(&lines) {
                    insert.execute(params![id, seq, line]).map_err(fail)?;
                }
                meta.message_count += lines.len() as u64;
                meta.updated = meta.updated.max(self.now());
                meta.add_channels_of(messages);
                self.update(tx, &meta, action)?;
                Ok(Appended { before, meta })
            },
        )
    }

    fn import(&self, meta: &SessionMeta, messages: &[Message]) -> Result<SessionMeta> {
        let new = NewSession::from(meta);
        new.validate()?;
        let session = meta.reference();
        let action = "cannot import into";
        let lines = lines_of(&session, messages)?;
        self.write(
            |e| self.fail(&session, action, e),
            |tx| {
                let fail = |e| self.fail(&session, action, e);
                let taken = match new.reference() {
                    Some(by_key) => self.find(tx, &by_key, "cannot read")?.map(|_| by_key),
                    None => None,
                };
                if let Some(taken) = taken.or_else(|| {
                    self.find(tx, &session, "cannot read").ok().flatten().map(|_| session.clone())
                }) {
                    return Err(StoreError::AlreadyExists(taken));
                }
                let mut meta = meta.clone();
                meta.message_count = lines.len() as u64;
                meta.tidy_channels();
                meta.add_channels_of(messages);
                let checkpoints = serde_json::to_string(&meta.checkpoints)
                    .expect("checkpoints serialize to JSON");
                let channels =
                    serde_json::to_string(&meta.channels).expect("channels serialize to JSON");
                tx.prepare_cached(
                    "INSERT INTO sessions (id, agent, key, title, created, updated, message_count, checkpoints, worker_id, workspace_id, channels)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                )
                .and_then(|mut s| {
                    s.execute(params![
                        meta.id.to_string(),
                        meta.agent,
                        meta.key,
                        meta.title,
                        time(meta.created),
                        time(meta.updated),
                        i64::try_from(meta.message_count).unwrap_or(i64::MAX),
                        checkpoints,
                        meta.worker_id,
                        meta.workspace_id,
                        channels,
                    ])
                })
                .map_err(fail)?;
                let mut insert = tx
                    .prepare_cached(sql::INSERT)
                    .map_err(fail)?;
                let id = meta.id.to_string();
                for (seq, line) in (0i64..).zip(&lines) {
                    insert.execute(params![id, seq, line]).map_err(fail)?;
                }
                Ok(meta)
            },
        )
    }

    fn load(&self, session: &SessionRef) -> Result<History> {
        let action = "cannot read";
        let mut conn = self.conn();
        let fail = |e| self.fail(session, action, e);
        // One read transaction: the metadata and the messages of one moment.
        let tx = conn.transaction().map_err(fail)?;
        let mut meta = self.existing(&tx, session, action)?;
        let mut messages = Vec::with_capacity(usize::try_from(meta.message_count).unwrap_or(0));
        let mut warnings = Vec::new();
        let mut rows: u64 = 0;
        {
            let mut select = tx.prepare_cached(sql::ALL).map_err(fail)?;
            let mut found = select.query([meta.id.to_string()]).map_err(fail)?;
            while let Some(row) = found.next().map_err(fail)? {
                rows += 1;
                if let (_, Some(message)) = self.read_row(session, row, &mut warnings)? {
                    messages.push(message);
                }
            }
        }
        tx.commit().map_err(fail)?;
        self.reconcile(session, &mut meta, rows, &mut warnings);
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
        let action = "cannot read";
        let mut conn = self.conn();
        let fail = |e| self.fail(session, action, e);
        let tx = conn.transaction().map_err(fail)?;
        let mut meta = self.existing(&tx, session, action)?;
        let id = meta.id.to_string();
        let mut warnings = Vec::new();
        // The leading system rows, up to the first row of another message.
        let mut system = Vec::new();
        let mut head: Option<i64> = None;
        let mut head_rows: u64 = 0;
        {
            let mut select = tx.prepare_cached(sql::ALL).map_err(fail)?;
            let mut rows = select.query([&id]).map_err(fail)?;
            while let Some(row) = rows.next().map_err(fail)? {
                match self.read_row(session, row, &mut warnings)? {
                    (seq, Some(message)) if !leads(&message) => {
                        head = Some(seq);
                        break;
                    }
                    (_, Some(message)) => system.push(message),
                    (_, None) => {}
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
            let mut select = tx.prepare_cached(sql::NEWEST_FROM).map_err(fail)?;
            let mut rows = select.query(params![id, head]).map_err(fail)?;
            let mut start = from.scan();
            loop {
                if start.found() {
                    reached = false;
                    break;
                }
                let Some(row) = rows.next().map_err(fail)? else {
                    break;
                };
                tail_rows += 1;
                if let (seq, Some(message)) = self.read_row(session, row, &mut newest_warnings)? {
                    start.feed(&message);
                    newest.push((seq, message));
                }
            }
        }
        newest.reverse();
        newest_warnings.reverse();
        warnings.extend(newest_warnings);
        let (seqs, mut after): (Vec<i64>, Vec<Message>) = newest.into_iter().unzip();
        let (start, found) = start_in(&after, &from);
        let skipped = match (head, seqs.get(start)) {
            _ if reached => start as u64,
            (Some(head), Some(&first)) => u64::try_from(first - head).unwrap_or(0),
            // None of the rows after the system ones is wanted (`Newest(0)`).
            (Some(head), None) => {
                let end: i64 = tx
                    .prepare_cached(sql::NEXT_SEQ)
                    .and_then(|mut s| s.query_row([&id], |row| row.get(0)))
                    .map_err(fail)?;
                u64::try_from(end - head).unwrap_or(0)
            }
            (None, _) => 0,
        };
        tx.commit().map_err(fail)?;
        if reached {
            self.reconcile(session, &mut meta, head_rows + tail_rows, &mut warnings);
        }
        for warning in &warnings {
            tracing::warn!("{warning}");
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

    fn list(&self, page: &PageRequest) -> Result<SessionPage> {
        page.validate()?;
        self.select_page(page)
    }

    fn scan(&self) -> Result<SessionPage> {
        self.select_page(&PageRequest::first(i64::MAX as usize))
    }

    fn rename(&self, session: &SessionRef, title: Option<&str>) -> Result<SessionMeta> {
        let action = "cannot rename in";
        self.write(
            |e| self.fail(session, action, e),
            |tx| {
                let mut meta = self.existing(tx, session, action)?;
                meta.title = title.map(str::to_owned);
                meta.updated = meta.updated.max(self.now());
                self.update(tx, &meta, action)?;
                Ok(meta)
            },
        )
    }

    fn delete(&self, session: &SessionRef) -> Result<SessionMeta> {
        let action = "cannot delete from";
        self.write(
            |e| self.fail(session, action, e),
            |tx| {
                let meta = self.existing(tx, session, action)?;
                delete_row(tx, &meta).map_err(|e| self.fail(session, action, e))?;
                Ok(meta)
            },
        )
    }

    fn clear(&self, session: &SessionRef) -> Result<SessionMeta> {
        let action = "cannot clear in";
        self.write(
            |e| self.fail(session, action, e),
            |tx| {
                let mut meta = self.existing(tx, session, action)?;
                tx.prepare_cached(sql::CLEAR)
                    .and_then(|mut s| s.execute([meta.id.to_string()]))
                    .map_err(|e| self.fail(session, action, e))?;
                meta.message_count = 0;
                meta.checkpoints.clear();
                meta.updated = meta.updated.max(self.now());
                self.update(tx, &meta, action)?;
                Ok(meta)
            },
        )
    }

    fn write_checkpoint(
        &self,
        session: &SessionRef,
        checkpoint: &Checkpoint,
    ) -> Result<SessionMeta> {
        let action = "cannot write a checkpoint to";
        self.write(
            |e| self.fail(session, action, e),
            |tx| {
                let mut meta = self.existing(tx, session, action)?;
                meta.checkpoints.push(checkpoint.clone());
                meta.updated = meta.updated.max(self.now());
                self.update(tx, &meta, action)?;
                Ok(meta)
            },
        )
    }

    fn put_request_record(&self, session: Uuid, n: u64, body: &str, keep: usize) -> Result<()> {
        check_request_record(session, n, body)?;
        let action = "cannot write a request record in";
        let reference = SessionRef::Id(session);
        let n = i64::try_from(n).unwrap_or(i64::MAX);
        let oldest_gone = n.saturating_sub(i64::try_from(keep).unwrap_or(i64::MAX));
        self.write(
            |e| self.fail(&reference, action, e),
            |tx| {
                let fail = |e| self.fail(&reference, action, e);
                self.existing(tx, &reference, action)?;
                let id = session.to_string();
                tx.prepare_cached(sql::PUT_RECORD)
                    .and_then(|mut s| s.execute(params![id, n, body]))
                    .map_err(fail)?;
                tx.prepare_cached(sql::DROP_RECORDS)
                    .and_then(|mut s| s.execute(params![id, oldest_gone]))
                    .map_err(fail)?;
                Ok(())
            },
        )
    }

    fn request_records(&self, session: Uuid) -> Result<Vec<(u64, String)>> {
        let reference = SessionRef::Id(session);
        let fail = |e| self.fail(&reference, "cannot read request records from", e);
        let conn = self.conn();
        let mut statement = conn.prepare_cached(sql::RECORDS).map_err(fail)?;
        let rows = statement
            .query_map(
                params![
                    session.to_string(),
                    crate::MAX_REQUEST_RECORD_BYTES as i64,
                    crate::MAX_REQUEST_RECORDS_READ as i64
                ],
                |row| {
                    Ok((
                        row.get::<_, i64>(0)?,
                        row.get_ref(1)?
                            .as_str_or_null()
                            .ok()
                            .flatten()
                            .map(str::to_owned),
                    ))
                },
            )
            .map_err(fail)?;
        let mut found = Vec::new();
        let mut bytes_read = 0usize;
        for row in rows {
            let (n, body) = row.map_err(fail)?;
            if bytes_read >= crate::MAX_REQUEST_RECORDS_READ_BYTES {
                tracing::warn!(
                    "{}: session {session}: more request records than a read returns; the older ones left out",
                    self.path.display()
                );
                break;
            }
            let readable =
                body.filter(|b| serde_json::from_str::<serde::de::IgnoredAny>(b).is_ok());
            match (u64::try_from(n).ok().filter(|&n| n > 0), readable) {
                (Some(n), Some(body)) => {
                    bytes_read += body.len();
                    found.push((n, body));
                }
                _ => tracing::warn!(
                    "{}: session {session}: request record {n} left out: not a JSON document within {} bytes, or badly numbered",
                    self.path.display(),
                    crate::MAX_REQUEST_RECORD_BYTES
                ),
            }
        }
        found.reverse();
        Ok(found)
    }

    fn request_record_count(&self, session: Uuid) -> Result<usize> {
        let reference = SessionRef::Id(session);
        let count: i64 = self
            .conn()
            .prepare_cached(sql::COUNT_RECORDS)
            .and_then(|mut s| s.query_row([session.to_string()], |row| row.get(0)))
            .map_err(|e| self.fail(&reference, "cannot read request records from", e))?;
        Ok(usize::try_from(count).unwrap_or(0))
    }

    fn cleanup(&self, idle: Duration, now: DateTime<Utc>) -> Result<Vec<SessionMeta>> {
        let Some(cutoff) = idle_cutoff(idle, now) else {
            return Ok(Vec::new());
        };
        let fail = |e| {
            backend(
                format!(
                    "cannot clean up the sessions idle since {cutoff} in the SQLite database {}",
                    self.path.display()
                ),
                e,
            )
        };
        self.write(fail, |tx| {
            let raws: Vec<RawMeta> = tx
                .prepare_cached(&format!(
                    "SELECT {META_COLUMNS} FROM sessions WHERE updated < ?1"
                ))
                .and_then(|mut s| s.query_map([time(cutoff)], RawMeta::of)?.collect())
                .map_err(fail)?;
            let mut deleted = Vec::with_capacity(raws.len());
            for raw in raws {
                let id = raw.id.clone();
                let meta = raw.into_meta(&self.path, &id)?;
                delete_row(tx, &meta).map_err(fail)?;
                deleted.push(meta);
            }
            Ok(deleted)
        })
    }
}

/// A `sessions` row as stored, before its text is parsed.
struct RawMeta {
    id: String,
    agent: String,
    key: Option<String>,
    title: Option<String>,
    created: String,
    updated: String,
    message_count: u64,
    checkpoints: String,
    worker_id: Option<String>,
    workspace_id: Option<String>,
    channels: String,
}

impl RawMeta {
    /// Reads the [`META_COLUMNS`] of `row`.
    fn of(row: &Row<'_>) -> rusqlite::Result<Self> {
        Ok(RawMeta {
            id: row.get(0)?,
            agent: row.get(1)?,
            key: row.get(2)?,
            title: row.get(3)?,
            created: row.get(4)?,
            updated: row.get(5)?,
            message_count: u64::try_from(row.get::<_, i64>(6)?).unwrap_or(0),
            checkpoints: row.get(7)?,
            worker_id: row.get(8)?,
            workspace_id: row.get(9)?,
            channels: row.get(10)?,
        })
    }

    /// Parses the id, times and checkpoints; `session` names it in errors.
    fn into_meta(self, path: &Path, session: &str) -> Result<SessionMeta> {
        let bad = |what: &str, value: &str, e: &dyn std::error::Error| StoreError::Backend {
            context: format!(
                "session {session}: the SQLite database {} holds an invalid {what} {value:?}",
                path.display()
            ),
            source: e.to_string().into(),
        };
        let id = Uuid::parse_str(&self.id).map_err(|e| bad("id", &self.id, &e))?;
        let parse_time = |what: &str, text: &str| {
            DateTime::parse_from_rfc3339(text)
                .map(|t| t.with_timezone(&Utc))
                .map_err(|e| bad(what, text, &e))
        };
        let created = parse_time("creation time", &self.created)?;
        let updated = parse_time("update time", &self.updated)?;
        let checkpoints =
            serde_json::from_str(&self.checkpoints).map_err(|source| StoreError::Metadata {
                context: format!("session {session}: the checkpoints"),
                path: path.to_owned(),
                source,
            })?;
        // Channels only label a session: a list the database holds badly
        // is read as none rather than hiding the session.
        let channels = serde_json::from_str(&self.channels).unwrap_or_else(|e| {
            tracing::warn!(
                "session {session}: the SQLite database {} holds channels that are not a list of names ({e}); read as none",
                path.display()
            );
            Vec::new()
        });
        let mut meta = SessionMeta {
            id,
            key: self.key,
            title: self.title,
            agent: self.agent,
            worker_id: self.worker_id,
            workspace_id: self.workspace_id,
            created,
            updated,
            message_count: self.message_count,
            checkpoints,
            channels,
        };
        meta.tidy_channels();
        Ok(meta)
    }
}

/// Sets the connection up: the page size of a new database ([`PAGE_SIZE`]),
/// WAL, full sync, foreign keys, the busy timeout.
pub(crate) fn configure(conn: &Connection, path: &Path) -> Result<()> {
    let fail = |e| {
        backend(
            format!(
                "cannot open the SQLite database {}; if it is not a SQLite database, move it aside or name another file",
                path.display()
            ),
            e,
        )
    };
    conn.busy_timeout(BUSY_TIMEOUT).map_err(fail)?;
    // Before anything writes the file: a database takes its page size when
    // its first page is written, which switching to WAL already does. On a
    // database that exists this changes nothing (it would only apply to a
    // `VACUUM` outside WAL).
    retry_busy(|| conn.pragma_update(None, "page_size", PAGE_SIZE)).map_err(fail)?;
    // The first statement that reads the file: a file that is not a
    // database fails here.
    let mode: String =
        retry_busy(|| conn.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0)))
            .map_err(fail)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StoreError::Backend {
            context: format!(
                "cannot open the SQLite database {}: it stays in journal mode {mode:?}, not WAL",
                path.display()
            ),
            source: "the file system may not support WAL's shared memory".into(),
        });
    }
    conn.execute_batch("PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;")
        .map_err(fail)?;
    Ok(())
}

/// Runs `step` again, for up to [`BUSY_TIMEOUT`], while SQLite says the
/// database is busy without waiting: processes opening a new database at
/// once race to write its first page and switch it to WAL, and SQLite
/// answers the loser at once rather than call the busy handler (which
/// could deadlock there).
fn retry_busy<T>(mut step: impl FnMut() -> rusqlite::Result<T>) -> rusqlite::Result<T> {
    let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
    loop {
        match step() {
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == rusqlite::ErrorCode::DatabaseBusy
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            done => return done,
        }
    }
}

/// Brings the schema to [`SCHEMA_VERSION`], under the write lock so that
/// processes opening a new database at once create it once.
fn migrate(conn: &Connection, path: &Path) -> Result<()> {
    let fail = |e| {
        backend(
            format!(
                "cannot set up the schema of the SQLite database {}",
                path.display()
            ),
            e,
        )
    };
    let version = |conn: &Connection| -> rusqlite::Result<i64> {
        conn.pragma_query_value(None, "user_version", |row| row.get(0))
    };
    if version(conn).map_err(fail)? == SCHEMA_VERSION {
        return Ok(());
    }
    conn.execute_batch("BEGIN IMMEDIATE").map_err(fail)?;
    let migrated = (|| {
        let found = version(conn).map_err(fail)?;
        match found {
            0..=3 => {
                // A new database takes the same steps as an old one: one
                // path to the schema, and every test of a new store runs
                // the rebuild (on empty tables, it costs nothing).
                if found == 0 {
                    conn.execute_batch(SCHEMA_V1).map_err(fail)?;
                }
                if found <= 1 {
                    conn.execute_batch(SCHEMA_V2).map_err(fail)?;
                }
                if found <= 2 {
                    conn.execute_batch(SCHEMA_V3).map_err(fail)?;
                }
                rebuild_v4(conn, path).map_err(fail)?;
                conn.pragma_update(None, "user_version", SCHEMA_VERSION)
                    .map_err(fail)?;
            }
            SCHEMA_VERSION => {}
            newer => {
                return Err(StoreError::Backend {
                    context: format!(
                        "the SQLite database {} has schema version {newer}, this agent-host knows up to {SCHEMA_VERSION}",
                        path.display()
                    ),
                    source: "upgrade agent-host to open it".into(),
                });
            }
        }
        conn.execute_batch("COMMIT").map_err(fail)
    })();
    if migrated.is_err() {
        let _ = conn.execute_batch("ROLLBACK");
    }
    migrated
}

/// Rebuilds `messages` and `request_records` as version 4's rowid tables
/// ([`SCHEMA_V4`]), inside the migration's transaction; rows left out for
/// want of their session are counted in a warning.
fn rebuild_v4(conn: &Connection, path: &Path) -> rusqlite::Result<()> {
    conn.execute_batch(SCHEMA_V4)?;
    let (messages, records): (i64, i64) = conn.query_row(
        "SELECT (SELECT COUNT(*) FROM messages_v3) - (SELECT COUNT(*) FROM messages),
                (SELECT COUNT(*) FROM request_records_v3) - (SELECT COUNT(*) FROM request_records)",
        [],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )?;
    if messages > 0 || records > 0 {
        tracing::warn!(
            "{}: schema version 4 leaves out {messages} messages and {records} request records of sessions the database no longer holds",
            path.display()
        );
    }
    conn.execute_batch(SCHEMA_V4_DROP)
}

/// Creates missing folders `0700`, as the file store does.
pub(crate) fn create_private_dir(path: &Path) -> io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(path)
}

/// Creates the database file `0600` when missing (an empty file is an empty
/// database); SQLite gives its `-wal` and `-shm` files the same mode.
pub(crate) fn create_private_file(path: &Path) -> io::Result<()> {
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(path) {
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => Err(e),
        _ => Ok(()),
    }
}

/// Deletes the session's row; its messages go with it (`ON DELETE CASCADE`).
fn delete_row(tx: &Connection, meta: &SessionMeta) -> rusqlite::Result<()> {
    tx.prepare_cached("DELETE FROM sessions WHERE id = ?1")
        .and_then(|mut s| s.execute([meta.id.to_string()]))
        .map(drop)
}

/// Messages as stored: their JSONL lines without the newline.
/// The messages as stored lines (without newlines), each refused when the
/// store could not read it back (see [`crate::storable`]).
fn lines_of(session: &SessionRef, messages: &[Message]) -> Result<Vec<String>> {
    messages
        .iter()
        .enumerate()
        .map(|(i, message)| {
            let mut line = Vec::with_capacity(512);
            jsonl::write_line(message, &mut line);
            line.pop(); // the newline
            crate::storable(session, i, message, &line)?;
            Ok(String::from_utf8(line).expect("serde_json writes UTF-8"))
        })
        .collect()
}

/// A time as stored: RFC 3339, UTC, nine fractional digits.
fn time(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Nanos, true)
}

fn describe_new(new: &NewSession) -> String {
    match &new.key {
        Some(key) => format!("{key:?} of agent {:?}", new.agent),
        None => format!("(new) of agent {:?}", new.agent),
    }
}

fn is_constraint(e: &rusqlite::Error) -> bool {
    e.sqlite_error_code() == Some(rusqlite::ErrorCode::ConstraintViolation)
}

pub(crate) fn backend(context: String, e: rusqlite::Error) -> StoreError {
    StoreError::Backend {
        context,
        source: Box::new(e),
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    #[test]
    fn a_version_1_database_is_migrated_and_keeps_its_sessions() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.db");
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(SCHEMA_V1).unwrap();
            conn.pragma_update(None, "user_version", 1).unwrap();
            conn.execute(
                "INSERT INTO sessions (id, agent, key, title, created, updated) VALUES (?1, 'default', 'k', NULL, ?2, ?2)",
                params![Uuid::from_u128(7).to_string(), time(Utc::now())],
            )
            .unwrap();
        }
        let store = SqliteStore::open(&path).unwrap();
        let old = store
            .get(&SessionRef::key("default", "k"))
            .unwrap()
            .unwrap();
        assert_eq!(old.id, Uuid::from_u128(7));
        assert_eq!(old.worker_id, None);
        let mut new = NewSession::new("default").with_key("w");
        new.worker_id = Some("worker-3".into());
        new.workspace_id = Some("acme".into());
        store.create(&new).unwrap();
        drop(store);
        let reopened = SqliteStore::open(&path).unwrap();
        let made = reopened
            .get(&SessionRef::key("default", "w"))
            .unwrap()
            .unwrap();
        assert_eq!(made.worker_id.as_deref(), Some("worker-3"));
        assert_eq!(made.workspace_id.as_deref(), Some("acme"));
        let conn = Connection::open(&path).unwrap();
        let version: i64 = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap();
        assert_eq!(version, SCHEMA_VERSION);
    }

    #[test]
    fn a_version_2_database_gains_channels_and_request_records() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v2.db");
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(SCHEMA_V1).unwrap();
            conn.execute_batch(SCHEMA_V2).unwrap();
            conn.pragma_update(None, "user_version", 2).unwrap();
            conn.execute(
                "INSERT INTO sessions (id, agent, key, title, created, updated) VALUES (?1, 'default', 'k', NULL, ?2, ?2)",
                params![Uuid::from_u128(9).to_string(), time(Utc::now())],
            )
            .unwrap();
        }
        let store = SqliteStore::open(&path).unwrap();
        let session = SessionRef::key("default", "k");
        assert!(store.get(&session).unwrap().unwrap().channels.is_empty());
        let mut message = Message::user("hi").with_id("m1");
        message.channel = Some("slack".into());
        assert_eq!(
            store.append(&session, &[message]).unwrap().channels,
            ["slack"]
        );
        store
            .put_request_record(Uuid::from_u128(9), 1, "{}", 10)
            .unwrap();
        assert_eq!(store.request_record_count(Uuid::from_u128(9)).unwrap(), 1);
        // A hand-edited list of channels is read as none, not as an error.
        store
            .conn()
            .execute("UPDATE sessions SET channels = 'not json'", [])
            .unwrap();
        assert!(store.get(&session).unwrap().unwrap().channels.is_empty());
    }

    /// A database of schema version 3 written by hand with that version's
    /// SQL: three sessions (one with checkpoints, two with request records,
    /// one empty), their messages inserted interleaved, and a message and a
    /// request record of a session deleted by hand with foreign keys off.
    /// Returns what each session holds.
    fn write_v3(path: &Path) -> Vec<V3Session> {
        let conn = Connection::open(path).unwrap();
        conn.execute_batch(SCHEMA_V1).unwrap();
        conn.execute_batch(SCHEMA_V2).unwrap();
        conn.execute_batch(SCHEMA_V3).unwrap();
        conn.pragma_update(None, "user_version", 3).unwrap();
        let created = Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5).unwrap();
        let sessions: Vec<V3Session> =
            [(1u128, 240usize, 2usize, 3u64), (2, 17, 0, 0), (3, 0, 0, 2)]
                .into_iter()
                .map(|(n, count, checkpoints, records)| {
                    let id = Uuid::from_u128(n);
                    V3Session {
                        id,
                        key: format!("k{n}"),
                        messages: (0..count)
                            .map(|i| {
                                let text =
                                    format!("session {n}, message {i}: {}", "words ".repeat(60));
                                let m = if i % 2 == 0 {
                                    Message::user(text)
                                } else {
                                    Message::assistant(text)
                                };
                                m.with_id(format!("s{n}-m{i}"))
                            })
                            .collect(),
                        checkpoints: (0..checkpoints)
                            .map(|c| Checkpoint {
                                boundary_id: format!("s{n}-b{c}"),
                                summary_id: format!("s{n}-s{c}"),
                                covers: vec![format!("s{n}-m{c}")],
                                created,
                                usage: None,
                            })
                            .collect(),
                        records: (1..=records)
                            .map(|r| (r, format!("{{\"request\":{r},\"session\":{n}}}")))
                            .collect(),
                    }
                })
                .collect();
        for s in &sessions {
            conn.execute(
                "INSERT INTO sessions (id, agent, key, title, created, updated, message_count, checkpoints, channels)
                 VALUES (?1, 'default', ?2, 'old', ?3, ?3, ?4, ?5, '[\"slack\"]')",
                params![
                    s.id.to_string(),
                    s.key,
                    time(created),
                    s.messages.len() as i64,
                    serde_json::to_string(&s.checkpoints).unwrap(),
                ],
            )
            .unwrap();
            for (n, body) in &s.records {
                conn.execute(
                    "INSERT INTO request_records (session_id, n, body) VALUES (?1, ?2, ?3)",
                    params![s.id.to_string(), *n as i64, body],
                )
                .unwrap();
            }
        }
        // Interleaved, as appends to several sessions are.
        let lines: Vec<Vec<String>> = sessions
            .iter()
            .map(|s| lines_of(&SessionRef::Id(s.id), &s.messages).unwrap())
            .collect();
        let longest = lines.iter().map(Vec::len).max().unwrap();
        for seq in 0..longest {
            for (s, lines) in sessions.iter().zip(&lines) {
                if let Some(line) = lines.get(seq) {
                    conn.execute(
                        "INSERT INTO messages (session_id, seq, line) VALUES (?1, ?2, ?3)",
                        params![s.id.to_string(), seq as i64, line],
                    )
                    .unwrap();
                }
            }
        }
        // As the `sqlite3` shell leaves them by default (rusqlite's bundled
        // SQLite turns them on).
        conn.pragma_update(None, "foreign_keys", false).unwrap();
        let orphan = Uuid::from_u128(99).to_string();
        conn.execute(
            "INSERT INTO messages (session_id, seq, line) VALUES (?1, 0, '{\"role\":\"user\",\"content\":\"orphan\"}')",
            [&orphan],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO request_records (session_id, n, body) VALUES (?1, 1, '{}')",
            [&orphan],
        )
        .unwrap();
        sessions
    }

    struct V3Session {
        id: Uuid,
        key: String,
        messages: Vec<Message>,
        checkpoints: Vec<Checkpoint>,
        records: Vec<(u64, String)>,
    }

    /// Every row of both tables, in key order, as stored.
    fn dump(conn: &Connection) -> Vec<(String, i64, String)> {
        let mut rows = Vec::new();
        for sql in [
            "SELECT session_id, seq, line FROM messages ORDER BY session_id, seq",
            "SELECT session_id, n, body FROM request_records ORDER BY session_id, n",
        ] {
            let mut statement = conn.prepare(sql).unwrap();
            let found = statement
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .unwrap();
            rows.extend(found.map(Result::unwrap));
        }
        rows
    }

    fn user_version(conn: &Connection) -> i64 {
        conn.pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap()
    }

    /// Whether `table` has a rowid (a `WITHOUT ROWID` table has none).
    fn has_rowid(conn: &Connection, table: &str) -> bool {
        conn.prepare(&format!("SELECT rowid FROM {table} LIMIT 1"))
            .is_ok()
    }

    fn page_size(conn: &Connection) -> i64 {
        conn.pragma_query_value(None, "page_size", |r| r.get(0))
            .unwrap()
    }

    #[test]
    fn a_new_database_has_16_kib_pages_and_rowid_tables() {
        // Issue 23: `WITHOUT ROWID` tables of 600-byte rows on 4 KiB pages
        // made a history's database 1.7 times its lines, and its import slow.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("new.db");
        let store = SqliteStore::open(&path).unwrap();
        {
            let conn = store.conn();
            assert_eq!(page_size(&conn), i64::from(PAGE_SIZE));
            assert_eq!(user_version(&conn), 4);
            assert!(has_rowid(&conn, "messages"));
            assert!(has_rowid(&conn, "request_records"));
            // Nothing of the rebuild is left behind.
            let tables: Vec<String> = conn
                .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
                .unwrap()
                .query_map([], |r| r.get(0))
                .unwrap()
                .map(Result::unwrap)
                .collect();
            assert_eq!(tables, ["messages", "request_records", "sessions"]);
        }
        drop(store);
        // The database keeps its page size once WAL is checkpointed away.
        let conn = Connection::open(&path).unwrap();
        assert_eq!(page_size(&conn), i64::from(PAGE_SIZE));
        // The memory log may create the shared database first: the same pages.
        let shared = dir.path().join("shared.db");
        drop(crate::memory::MemoryStore::open(&format!("sqlite:{}", shared.display())).unwrap());
        let store = SqliteStore::open(&shared).unwrap();
        assert_eq!(page_size(&store.conn()), i64::from(PAGE_SIZE));
    }

    #[test]
    fn every_row_query_is_served_by_a_key() {
        // A rowid table is only as fast as its indexes: no statement on
        // messages or request records may scan a table or sort a session.
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path().join("plans.db")).unwrap();
        let conn = store.conn();
        for statement in [
            sql::NEXT_SEQ,
            sql::ALL,
            sql::NEWEST_FROM,
            sql::CLEAR,
            sql::DROP_RECORDS,
            sql::RECORDS,
            sql::COUNT_RECORDS,
            // What `ON DELETE CASCADE` runs when a session is deleted.
            "DELETE FROM request_records WHERE session_id = ?1",
        ] {
            let mut explain = conn
                .prepare(&format!("EXPLAIN QUERY PLAN {statement}"))
                .unwrap();
            let nulls = vec![rusqlite::types::Null; explain.parameter_count()];
            let plan: Vec<String> = explain
                .query_map(rusqlite::params_from_iter(nulls), |r| r.get(3))
                .unwrap()
                .map(Result::unwrap)
                .collect();
            assert!(!plan.is_empty(), "{statement}");
            for step in &plan {
                assert!(
                    step.starts_with("SEARCH ") && step.contains(" USING "),
                    "{statement}: {plan:?}"
                );
                assert!(!step.contains("TEMP B-TREE"), "{statement}: {plan:?}");
            }
        }
        // Each key is a unique index, which inserts check.
        for (table, key) in [
            ("messages", ["session_id", "seq"]),
            ("request_records", ["session_id", "n"]),
        ] {
            let unique: Vec<String> = conn
                .prepare(&format!("PRAGMA index_list({table})"))
                .unwrap()
                .query_map([], |r| Ok((r.get::<_, String>(1)?, r.get::<_, bool>(2)?)))
                .unwrap()
                .map(Result::unwrap)
                .filter_map(|(name, unique)| unique.then_some(name))
                .collect();
            let keys: Vec<Vec<String>> = unique
                .iter()
                .map(|index| {
                    conn.prepare(&format!("PRAGMA index_info({index})"))
                        .unwrap()
                        .query_map([], |r| r.get(2))
                        .unwrap()
                        .map(Result::unwrap)
                        .collect()
                })
                .collect();
            assert_eq!(keys, [key], "{table}");
        }
        drop(conn);
        let session = store.create(&NewSession::new("default")).unwrap();
        store
            .append(&session.reference(), &[Message::user("hi").with_id("m1")])
            .unwrap();
        let twice = store.conn().execute(
            "INSERT INTO messages (session_id, seq, line) VALUES (?1, 0, '{}')",
            [session.id.to_string()],
        );
        assert!(is_constraint(&twice.unwrap_err()));
    }

    #[test]
    fn a_version_3_database_is_rebuilt_with_every_row() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v3.db");
        let sessions = write_v3(&path);
        let store = SqliteStore::open(&path).unwrap();
        {
            let conn = store.conn();
            assert_eq!(user_version(&conn), 4);
            assert!(has_rowid(&conn, "messages"));
            assert!(has_rowid(&conn, "request_records"));
            // An old database keeps its pages (WAL forbids changing them).
            assert_eq!(page_size(&conn), 4096);
        }
        for s in &sessions {
            let session = SessionRef::Id(s.id);
            let history = store.load(&session).unwrap();
            assert!(history.warnings.is_empty(), "{:?}", history.warnings);
            assert_eq!(history.messages, s.messages, "session {}", s.key);
            assert_eq!(history.meta.message_count, s.messages.len() as u64);
            assert_eq!(history.meta.checkpoints, s.checkpoints);
            assert_eq!(history.meta.channels, ["slack"]);
            assert_eq!(
                store
                    .get(&SessionRef::key("default", &s.key))
                    .unwrap()
                    .unwrap()
                    .id,
                s.id
            );
            assert_eq!(store.request_records(s.id).unwrap(), s.records);
            let tail = store.load_tail(&session, TailStart::Newest(5)).unwrap();
            let newest = &s.messages[s.messages.len().saturating_sub(5)..];
            assert_eq!(tail.messages, newest);
        }
        // Appends go on from the copied rows.
        let big = SessionRef::Id(sessions[0].id);
        let more = Message::user("after the migration").with_id("after");
        assert_eq!(
            store
                .append(&big, std::slice::from_ref(&more))
                .unwrap()
                .message_count,
            241
        );
        assert_eq!(store.load(&big).unwrap().messages.last(), Some(&more));
        // The rows of the session deleted by hand were left out: a session
        // imported with its id starts clean (its seq 0 would collide).
        let orphan = Uuid::from_u128(99);
        let mut meta = store.get(&big).unwrap().unwrap();
        meta.id = orphan;
        meta.key = Some("back".into());
        meta.checkpoints.clear();
        store
            .import(&meta, &[Message::user("back").with_id("b0")])
            .unwrap();
        assert_eq!(
            store.load(&SessionRef::Id(orphan)).unwrap().messages.len(),
            1
        );
        assert!(store.request_records(orphan).unwrap().is_empty());
        // Deleting a session still takes its rows with it.
        store.delete(&big).unwrap();
        let conn = store.conn();
        for table in ["messages", "request_records"] {
            let left: i64 = conn
                .query_row(
                    &format!("SELECT COUNT(*) FROM {table} WHERE session_id = ?1"),
                    [sessions[0].id.to_string()],
                    |r| r.get(0),
                )
                .unwrap();
            assert_eq!(left, 0, "{table}");
        }
    }

    #[test]
    fn a_failed_rebuild_leaves_version_3_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v3.db");
        let sessions = write_v3(&path);
        let before = dump(&Connection::open(&path).unwrap());
        {
            // A disk that fills up while the rows are copied.
            let conn = Connection::open(&path).unwrap();
            configure(&conn, &path).unwrap();
            let pages: i64 = conn
                .pragma_query_value(None, "page_count", |r| r.get(0))
                .unwrap();
            conn.pragma_update(None, "max_page_count", pages + 8)
                .unwrap();
            let err = migrate(&conn, &path).unwrap_err();
            let shown = error_chain(&err);
            assert!(shown.contains("full"), "{shown}");
            assert!(shown.contains(&path.display().to_string()), "{shown}");
        }
        let conn = Connection::open(&path).unwrap();
        assert_eq!(user_version(&conn), 3);
        assert!(!has_rowid(&conn, "messages"));
        assert!(!has_rowid(&conn, "request_records"));
        assert_eq!(dump(&conn), before);
        drop(conn);
        // Room again: the next open migrates.
        let store = SqliteStore::open(&path).unwrap();
        for s in &sessions {
            assert_eq!(
                store.load(&SessionRef::Id(s.id)).unwrap().messages,
                s.messages
            );
        }
    }

    #[test]
    fn a_newer_database_is_refused_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("newer.db");
        write_v3(&path);
        let before = {
            let conn = Connection::open(&path).unwrap();
            conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
                .unwrap();
            dump(&conn)
        };
        let err = SqliteStore::open(&path).unwrap_err();
        let shown = error_chain(&err);
        assert!(
            shown.contains(&format!(
                "has schema version {}, this agent-host knows up to {SCHEMA_VERSION}",
                SCHEMA_VERSION + 1
            )),
            "{shown}"
        );
        assert!(shown.contains("upgrade agent-host"), "{shown}");
        let conn = Connection::open(&path).unwrap();
        assert_eq!(user_version(&conn), SCHEMA_VERSION + 1);
        assert_eq!(dump(&conn), before);
    }

    #[test]
    fn stored_times_sort_as_times_and_round_trip() {
        // Listing sorts the text in SQL: it must be fixed width.
        let times = [
            Utc.with_ymd_and_hms(999, 1, 1, 0, 0, 0).unwrap(),
            Utc.with_ymd_and_hms(2025, 6, 1, 12, 0, 0).unwrap(),
            Utc.with_ymd_and_hms(2025, 6, 1, 12, 0, 0).unwrap() + chrono::TimeDelta::nanoseconds(1),
            Utc.with_ymd_and_hms(2025, 6, 1, 12, 0, 0).unwrap()
                + chrono::TimeDelta::milliseconds(900),
            Utc.with_ymd_and_hms(2025, 6, 1, 12, 0, 1).unwrap(),
            Utc::now(),
        ];
        let texts: Vec<String> = times.iter().map(|&t| time(t)).collect();
        assert!(texts.windows(2).all(|w| w[0] < w[1]), "{texts:?}");
        assert!(texts.iter().all(|t| t.len() == texts[0].len()), "{texts:?}");
        for (t, text) in times.iter().zip(&texts) {
            let back = DateTime::parse_from_rfc3339(text)
                .unwrap()
                .with_timezone(&Utc);
            assert_eq!(back, *t);
        }
    }
}
