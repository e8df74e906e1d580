//! Session stores: where conversations live between runs.
//!
//! [`SessionStore`] is the one interface every backend implements: the file
//! store ([`FileStore`], one JSONL log per session, the default) and SQLite
//! ([`SqliteStore`], WAL) and PostgreSQL ([`PostgresStore`], shared by
//! several instances), chosen by [`open`]. In the file store the log is append-only and is the
//! truth; the metadata beside it ([`SessionMeta`]) is what listing reads, and
//! may lag the log after a crash until the next load reconciles it.
//!
//! A session is named by its id or by its key within an agent
//! ([`SessionRef`]): the same chat (`telegram:123456`) talking to two agents
//! is two sessions.
//!
//! ```
//! use agent_host_core::Message;
//! use agent_host_store::{FileStore, NewSession, PageRequest, SessionStore};
//!
//! let dir = tempfile::tempdir()?;
//! let store = FileStore::open(dir.path())?;
//! let opened = store.get_or_create(&NewSession::new("default").with_key("telegram:123456"))?;
//! let session = opened.meta.reference();
//! let turn = [Message::user("hi").with_id("m1"), Message::assistant("hello").with_id("m2")];
//! store.append(&session, &turn)?;
//!
//! let history = store.load(&session)?;
//! assert_eq!(history.messages.len(), 2);
//! assert!(history.warnings.is_empty());
//! let page = store.list(&PageRequest::first(20))?;
//! assert_eq!(page.sessions[0].key.as_deref(), Some("telegram:123456"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! A turn reads the log's tail, not the whole log: [`SessionStore::load_tail`]
//! returns the leading system messages and the messages from a start point
//! on (the latest checkpoint's, or the newest `n`), at a cost that follows
//! the messages read, not the length of the session.
//!
//! What is deliberately not here: the CLI commands, export and the session
//! queries (those are core's, run over [`History::messages`]).

use std::fmt;
use std::io;
use std::path::PathBuf;
use std::time::Duration;

pub(crate) use agent_host_core::budget::is_system_prompt as leads;
use agent_host_core::{Checkpoint, Message, SessionHeader};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

pub mod file;
pub mod memory;
pub mod migrate;
pub mod names;
mod open;
pub mod postgres;
mod records;
pub mod sqlite;
mod tail;
#[cfg(feature = "testing")]
pub mod testing;

pub use file::{FileStore, SessionFiles};
pub use open::{
    DEFAULT_STORE, SQLITE_PREFIX, exists, is_postgres, open, open_for_concurrent_appends, redact,
};
pub use postgres::PostgresStore;
pub use sqlite::SqliteStore;
pub use tail::{Tail, TailStart};

/// The agent a session belongs to when the caller names none.
pub const DEFAULT_AGENT: &str = "default";

/// The largest page [`SessionStore::list`] returns.
pub const MAX_PAGE_LIMIT: usize = 200;

/// A store's result.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// How a caller names a session: by id, or by its key within an agent.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum SessionRef {
    /// The session's UUID.
    Id(Uuid),
    /// A caller-chosen key such as `telegram:123456`, unique within `agent`.
    Key {
        /// The agent the session belongs to.
        agent: String,
        /// The key.
        key: String,
    },
}

impl SessionRef {
    /// The session of `agent` with `key`.
    pub fn key(agent: impl Into<String>, key: impl Into<String>) -> Self {
        SessionRef::Key {
            agent: agent.into(),
            key: key.into(),
        }
    }

    /// Whether `meta` is the session this names.
    pub fn matches(&self, meta: &SessionMeta) -> bool {
        match self {
            SessionRef::Id(id) => meta.id == *id,
            SessionRef::Key { agent, key } => {
                meta.agent == *agent && meta.key.as_deref() == Some(key.as_str())
            }
        }
    }
}

impl From<Uuid> for SessionRef {
    fn from(id: Uuid) -> Self {
        SessionRef::Id(id)
    }
}

impl fmt::Display for SessionRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SessionRef::Id(id) => write!(f, "{id}"),
            SessionRef::Key { agent, key } => write!(f, "{key:?} of agent {agent:?}"),
        }
    }
}

/// What to create: the owning agent, an optional key and title.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewSession {
    /// The agent the session belongs to.
    pub agent: String,
    /// A key for get-or-create (`telegram:123456`); none for an anonymous session.
    pub key: Option<String>,
    /// A title, used only when the session is created.
    pub title: Option<String>,
    /// The worker serving the session, kept with it (set at creation).
    pub worker_id: Option<String>,
    /// The workspace the session belongs to, kept with it (set at creation).
    pub workspace_id: Option<String>,
    /// The channel it was created through, the first of
    /// [`SessionMeta::channels`].
    pub channel: Option<String>,
}

impl From<&SessionMeta> for NewSession {
    /// The names of a session as `meta` holds them (to create it again
    /// elsewhere: `import`).
    fn from(meta: &SessionMeta) -> Self {
        NewSession {
            agent: meta.agent.clone(),
            key: meta.key.clone(),
            title: meta.title.clone(),
            worker_id: meta.worker_id.clone(),
            workspace_id: meta.workspace_id.clone(),
            channel: None,
        }
    }
}

impl NewSession {
    /// A session of `agent`, with no key and no title.
    pub fn new(agent: impl Into<String>) -> Self {
        NewSession {
            agent: agent.into(),
            key: None,
            title: None,
            worker_id: None,
            workspace_id: None,
            channel: None,
        }
    }

    /// Sets the key, builder style.
    pub fn with_key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Sets the channel it is created through, builder style.
    pub fn with_channel(mut self, channel: impl Into<String>) -> Self {
        self.channel = Some(channel.into());
        self
    }

    /// Sets the title, builder style.
    pub fn with_title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// The reference to the session this would create, by key when it has one.
    pub fn reference(&self) -> Option<SessionRef> {
        self.key
            .as_ref()
            .map(|key| SessionRef::key(self.agent.clone(), key.clone()))
    }

    /// What `get_or_create` opens: the keyed reference, after
    /// [`NewSession::validate`]; an anonymous session has nothing to open.
    pub fn keyed_reference(&self) -> Result<SessionRef> {
        self.validate()?;
        self.reference().ok_or_else(|| StoreError::Invalid {
            what: "session key",
            value: String::new(),
            reason: "get-or-create needs a key; use create for an anonymous session".into(),
        })
    }

    /// Refuses what no backend can store: an empty agent or key.
    pub fn validate(&self) -> Result<()> {
        if self.agent.is_empty() {
            return Err(StoreError::Invalid {
                what: "agent name",
                value: String::new(),
                reason: "it is empty; name the agent, or use `default`".into(),
            });
        }
        if self.key.as_deref() == Some("") {
            return Err(StoreError::Invalid {
                what: "session key",
                value: String::new(),
                reason: "it is empty; give a key such as `telegram:123456`, or none".into(),
            });
        }
        Ok(())
    }
}

/// A session's version: every write changes it (an append the count and
/// `updated`, a clear the count and checkpoints, a checkpoint their number),
/// so a caller that keeps something derived from the log knows it is stale
/// when the version is not the one it was made from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionVersion {
    /// [`SessionMeta::message_count`].
    pub message_count: u64,
    /// [`SessionMeta::updated`].
    pub updated: DateTime<Utc>,
    /// How many checkpoints [`SessionMeta::checkpoints`] holds.
    pub checkpoints: usize,
}

/// What [`SessionStore::append_versioned`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Appended {
    /// The session's version just before the write, read under the lock the
    /// write held.
    pub before: SessionVersion,
    /// The metadata after it.
    pub meta: SessionMeta,
}

/// Everything a store knows about a session but its messages.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionMeta {
    /// The session's identity.
    pub id: Uuid,
    /// The caller's key, whole (the file store's file name may be a sanitised form).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// A human-readable title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The agent the session belongs to.
    pub agent: String,
    /// The worker serving the session, when the creator named one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker_id: Option<String>,
    /// The workspace the session belongs to, when the creator named one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_id: Option<String>,
    /// When the session was created.
    pub created: DateTime<Utc>,
    /// When a message was last appended or the metadata last changed.
    pub updated: DateTime<Utc>,
    /// How many messages the log holds (as of the last write or reconciling load).
    pub message_count: u64,
    /// Summary checkpoints, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checkpoints: Vec<Checkpoint>,
    /// The channels the session was created or written through (its
    /// creation's, and every appended message's `channel`), sorted, at most
    /// [`MAX_CHANNELS`] of at most [`MAX_CHANNEL_BYTES`] each: what a
    /// listing filters by, kept across restarts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub channels: Vec<String>,
}

/// The largest request record a store keeps, in bytes
/// ([`SessionStore::put_request_record`]).
pub const MAX_REQUEST_RECORD_BYTES: usize = 4 << 20;

/// The most request records [`SessionStore::request_records`] returns (the
/// newest).
pub const MAX_REQUEST_RECORDS_READ: usize = 1000;

/// The most bytes of request records [`SessionStore::request_records`]
/// reads; older records past it are left out.
pub const MAX_REQUEST_RECORDS_READ_BYTES: usize = 64 << 20;

/// Refuses a request record no store keeps: one over
/// [`MAX_REQUEST_RECORD_BYTES`], or numbered 0.
pub(crate) fn check_request_record(session: Uuid, n: u64, body: &str) -> Result<()> {
    if n == 0 {
        return Err(StoreError::Invalid {
            what: "request record number",
            value: "0".into(),
            reason: format!("session {session}: records are numbered from 1"),
        });
    }
    if body.len() > MAX_REQUEST_RECORD_BYTES {
        return Err(StoreError::Invalid {
            what: "request record",
            value: format!("{n}"),
            reason: format!(
                "session {session}: it is {} bytes, over the {MAX_REQUEST_RECORD_BYTES} a store keeps",
                body.len()
            ),
        });
    }
    Ok(())
}

/// The most channels a session keeps in [`SessionMeta::channels`]; later
/// ones are not recorded.
pub const MAX_CHANNELS: usize = 16;

/// The longest channel name [`SessionMeta::channels`] keeps, in bytes;
/// longer ones are not recorded.
pub const MAX_CHANNEL_BYTES: usize = 256;

/// Adds `channels` to the sorted list `to` within [`MAX_CHANNELS`] and
/// [`MAX_CHANNEL_BYTES`]; whether it changed.
pub fn add_channels<'a>(to: &mut Vec<String>, channels: impl IntoIterator<Item = &'a str>) -> bool {
    let mut changed = false;
    for channel in channels {
        if channel.is_empty() || channel.len() > MAX_CHANNEL_BYTES {
            continue;
        }
        if let Err(at) = to.binary_search_by(|c| c.as_str().cmp(channel)) {
            if to.len() >= MAX_CHANNELS {
                continue;
            }
            to.insert(at, channel.to_owned());
            changed = true;
        }
    }
    changed
}

impl SessionMeta {
    /// Adds the channels of `messages` to [`SessionMeta::channels`];
    /// whether it changed.
    pub fn add_channels_of(&mut self, messages: &[Message]) -> bool {
        add_channels(
            &mut self.channels,
            messages.iter().filter_map(|m| m.channel.as_deref()),
        )
    }

    /// Whether [`SessionMeta::add_channels_of`] would add a channel of
    /// `messages` (read only: the appends' fast path asks it).
    pub fn lacks_channels_of(&self, messages: &[Message]) -> bool {
        self.channels.len() < MAX_CHANNELS
            && messages
                .iter()
                .filter_map(|m| m.channel.as_deref())
                .any(|c| {
                    !c.is_empty()
                        && c.len() <= MAX_CHANNEL_BYTES
                        && !self.channels.iter().any(|k| k == c)
                })
    }

    /// Makes [`SessionMeta::channels`] what [`add_channels`] keeps, from
    /// whatever a store held (sorted, unique, bounded).
    pub fn tidy_channels(&mut self) {
        let held = std::mem::take(&mut self.channels);
        add_channels(&mut self.channels, held.iter().map(String::as_str));
    }

    /// The reference to this session, by id.
    pub fn reference(&self) -> SessionRef {
        SessionRef::Id(self.id)
    }

    /// What this metadata says of the log: two reads with one version saw
    /// the same log, unless a writer changed it within one tick of the
    /// store's clock.
    pub fn version(&self) -> SessionVersion {
        SessionVersion {
            message_count: self.message_count,
            updated: self.updated,
            checkpoints: self.checkpoints.len(),
        }
    }

    /// Core's view of the session, for the pipeline and export.
    pub fn header(&self) -> SessionHeader {
        SessionHeader {
            id: self.id,
            key: self.key.clone(),
            title: self.title.clone(),
            agent: Some(self.agent.clone()),
            created: self.created,
            updated: self.updated,
            checkpoints: self.checkpoints.clone(),
        }
    }
}

/// The answer of [`SessionStore::get_or_create`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Opened {
    /// The session.
    pub meta: SessionMeta,
    /// Whether this call created it.
    pub created: bool,
}

/// A session's messages, as loaded.
#[derive(Clone, Debug)]
pub struct History {
    /// The session's metadata, its count reconciled with the log.
    pub meta: SessionMeta,
    /// The messages, in log order.
    pub messages: Vec<Message>,
    /// What was wrong with the log and what was done about it (also logged).
    pub warnings: Vec<StoreWarning>,
}

/// Which page of sessions [`SessionStore::list`] returns.
///
/// Pages are asked for by offset, or by keyset: `after` a position a
/// previous page gave in [`SessionPage::next`], which costs the page rather
/// than the sessions skipped, and neither repeats nor misses a session when
/// others are created meanwhile (a session updated meanwhile moves to the
/// front, and a later page does not show it again).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageRequest {
    /// Only sessions after this position in the order, when given.
    pub after: Option<PageCursor>,
    /// How many sessions to skip (after `after`, when given), newest update first.
    pub offset: usize,
    /// How many to return, 1 to [`MAX_PAGE_LIMIT`].
    pub limit: usize,
    /// Only this agent's sessions, when given.
    pub agent: Option<String>,
}

impl PageRequest {
    /// The first `limit` sessions of every agent.
    pub fn first(limit: usize) -> Self {
        PageRequest {
            after: None,
            offset: 0,
            limit,
            agent: None,
        }
    }

    /// The page of `limit` sessions after `cursor` (a previous page's
    /// [`SessionPage::next`]), for the same agent filter.
    pub fn after(cursor: PageCursor, limit: usize) -> Self {
        PageRequest {
            after: Some(cursor),
            ..PageRequest::first(limit)
        }
    }

    /// Refuses a limit outside 1 to [`MAX_PAGE_LIMIT`].
    pub fn validate(&self) -> Result<()> {
        if (1..=MAX_PAGE_LIMIT).contains(&self.limit) {
            Ok(())
        } else {
            Err(StoreError::PageLimit { limit: self.limit })
        }
    }
}

/// A position in the order of [`SessionStore::list`] (newest update first,
/// ties by id): the last session of a page.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PageCursor {
    /// The session's update time.
    pub updated: DateTime<Utc>,
    /// Its id.
    pub id: Uuid,
}

impl PageCursor {
    /// The position of `meta`.
    pub fn of(meta: &SessionMeta) -> Self {
        PageCursor {
            updated: meta.updated,
            id: meta.id,
        }
    }

    /// Whether `meta` comes after this position in the listing order.
    pub fn precedes(&self, meta: &SessionMeta) -> bool {
        meta.updated < self.updated || (meta.updated == self.updated && meta.id > self.id)
    }
}

/// One page of sessions.
#[derive(Clone, Debug, Default)]
pub struct SessionPage {
    /// The sessions of the page, most recently updated first.
    pub sessions: Vec<SessionMeta>,
    /// How many sessions there are in all (for the request's agent filter).
    pub total: usize,
    /// Metadata that could not be read, and so is not listed.
    pub warnings: Vec<StoreWarning>,
    /// Where the next page starts ([`PageRequest::after`]), when this one is
    /// full; `None` when it is the last.
    pub next: Option<PageCursor>,
}

/// Something wrong with stored data that did not stop the operation:
/// a malformed line skipped, a torn tail moved aside, a count reconciled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreWarning {
    /// The file (or database) concerned.
    pub path: PathBuf,
    /// The 1-based line, when the problem is in a log line.
    pub line: Option<usize>,
    /// The byte offset in the file, when known.
    pub offset: Option<u64>,
    /// What was wrong and what was done.
    pub detail: String,
}

impl fmt::Display for StoreWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if let Some(offset) = self.offset {
            write!(f, " (byte {offset})")?;
        }
        write!(f, ": {}", self.detail)
    }
}

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// No session answers to the reference.
    #[error("no session {0}; `agent-host sessions list` shows the stored ones")]
    NotFound(SessionRef),
    /// [`SessionStore::create`] for a key that is taken.
    #[error("session {0} already exists; open it with get-or-create instead")]
    AlreadyExists(SessionRef),
    /// A name or value no backend can store.
    #[error("invalid {what} {value:?}: {reason}")]
    Invalid {
        /// What was invalid (`session key`, `agent name`).
        what: &'static str,
        /// The value given.
        value: String,
        /// Why, and what to do instead.
        reason: String,
    },
    /// A message larger than a log line may be: the store reads every line
    /// within the default per-message limits of
    /// [`agent_host_core::format::Limits`], so it writes none it could not
    /// read back.
    #[error("session {session}: message {index} (id {id:?}) cannot be stored: {detail}")]
    Oversized {
        /// The session appended to.
        session: SessionRef,
        /// The message's index in the append.
        index: usize,
        /// Its id.
        id: String,
        /// Which limit, and by how much.
        detail: String,
    },
    /// A page size outside 1 to [`MAX_PAGE_LIMIT`].
    #[error("a page holds 1 to {MAX_PAGE_LIMIT} sessions, not {limit}")]
    PageLimit {
        /// The limit asked for.
        limit: usize,
    },
    /// The file a key maps to holds another session (a hash collision, or a
    /// file put there by hand): refused rather than merged.
    #[error(
        "session {session}: {} belongs to {other}, not to this session; use another key or move that file",
        path.display()
    )]
    NameClash {
        /// The session asked for.
        session: SessionRef,
        /// The file that holds another session.
        path: PathBuf,
        /// The session it holds.
        other: String,
    },
    /// A file operation failed.
    #[error("{context} {}", path.display())]
    Io {
        /// The session and the action (`session X: cannot append to`).
        context: String,
        /// The file or folder.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// Something beneath the store's root where the store keeps a file or
    /// folder of its own is not one: a symbolic link, a FIFO, a socket or a
    /// device (planted, say, in a `.agent-host/` a cloned repository
    /// shipped). Never followed, read or written.
    #[error(
        "{context} {}: it is {found}, not {expected}; the store never follows a link or opens a special file beneath its root {}: remove it, or put the session's own file there",
        path.display(),
        root.display()
    )]
    Refused {
        /// The session and the action (`session X: cannot append to`).
        context: String,
        /// The store's root.
        root: PathBuf,
        /// The refused file or folder, relative to the root
        /// (`sessions/default/chat.jsonl`).
        path: PathBuf,
        /// What is there (`a symbolic link`).
        found: &'static str,
        /// What the store keeps there (`a regular file`).
        expected: &'static str,
    },
    /// Session metadata that cannot be read.
    #[error(
        "{context}: {} is not valid session metadata; restore it or delete the session's files",
        path.display()
    )]
    Metadata {
        /// The session, or the operation.
        context: String,
        /// The metadata file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
    /// A memory operation that cannot be done (an unknown fact, a taken
    /// id, a field out of bounds).
    #[error(transparent)]
    Memory(#[from] agent_host_core::memory::MemoryError),
    /// A failure inside another backend (a database), with its context.
    #[error("{context}")]
    Backend {
        /// The session and the action.
        context: String,
        /// The cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl StoreError {
    /// What kind of failure this is, for the front ends to map.
    pub fn kind(&self) -> agent_host_core::ErrorKind {
        use agent_host_core::ErrorKind;
        match self {
            StoreError::NotFound(_) => ErrorKind::NotFound,
            StoreError::AlreadyExists(_) | StoreError::NameClash { .. } => ErrorKind::Conflict,
            // A store spec is configuration; a key, an agent or a page size
            // is the request's.
            StoreError::Invalid { what: "store", .. } => ErrorKind::Configuration,
            StoreError::Invalid { .. } | StoreError::PageLimit { .. } => ErrorKind::InvalidInput,
            StoreError::Oversized { .. } => ErrorKind::LimitExceeded,
            StoreError::Memory(e) => e.kind(),
            StoreError::Io { .. }
            | StoreError::Refused { .. }
            | StoreError::Metadata { .. }
            | StoreError::Backend { .. } => ErrorKind::Io,
        }
    }
}

/// The longest payload [`SessionStore::announce`] takes (PostgreSQL's
/// `NOTIFY` takes under 8,000 bytes).
pub const MAX_NOTICE_BYTES: usize = 7900;

/// What [`SessionStore::notifications`] delivers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Notice {
    /// A payload some instance sharing the store announced (this one
    /// included), as it arrived: untrusted, at most [`MAX_NOTICE_BYTES`].
    Message(String),
    /// Notices may have been lost (the listening connection dropped and
    /// was opened again, or the reader fell behind): whatever the reader
    /// keeps from them should be read again from the store.
    Lost,
}

/// A session's turn lock across every process sharing the store, from
/// [`SessionStore::turn_lock`]; released when dropped (or when the process
/// holding it dies).
pub struct TurnLock {
    _held: Box<dyn Send + Sync>,
}

impl TurnLock {
    /// A lock released when `held` is dropped.
    pub fn new(held: impl Send + Sync + 'static) -> Self {
        TurnLock {
            _held: Box::new(held),
        }
    }
}

impl fmt::Debug for TurnLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TurnLock")
    }
}

/// Refuses message `index` of an append to `session` when its stored line
/// (`line`, without its newline) is over the per-message limits every line
/// of a log is read back with ([`agent_host_core::format::jsonl::parse_line`]).
pub fn storable(session: &SessionRef, index: usize, message: &Message, line: &[u8]) -> Result<()> {
    use agent_host_core::format::{Format, Limits, Meter};
    let text = std::str::from_utf8(line).expect("serde_json writes UTF-8");
    Meter::new(Limits::default())
        .message(Format::Jsonl, text)
        .map_err(|e| StoreError::Oversized {
            session: session.clone(),
            index,
            id: message.id.clone(),
            detail: e.detail,
        })
}

/// A place sessions are kept.
///
/// Every method takes `&self` and the trait is object-safe, so one
/// `Arc<dyn SessionStore>` serves every thread; a backend does its own
/// locking. Methods block: async callers use `spawn_blocking`. Times come
/// from the store's clock (injectable, for tests), except where a method takes
/// `now`.
pub trait SessionStore: Send + Sync {
    /// Creates a session with a fresh UUID (v4). A key already taken within
    /// the agent is [`StoreError::AlreadyExists`].
    fn create(&self, new: &NewSession) -> Result<SessionMeta>;

    /// Opens the session with `new`'s key (which it must have), creating it
    /// when there is none. Safe against concurrent callers, in this process
    /// and others: exactly one of them creates it.
    fn get_or_create(&self, new: &NewSession) -> Result<Opened>;

    /// The session's metadata, or `None` when there is no such session.
    fn get(&self, session: &SessionRef) -> Result<Option<SessionMeta>>;

    /// Appends one turn's messages, all in one durable write: when this
    /// returns `Ok`, they survive a crash; concurrent appends interleave
    /// whole calls only. Message ids are written as given. Returns the
    /// updated metadata.
    fn append(&self, session: &SessionRef, messages: &[Message]) -> Result<SessionMeta>;

    /// Appends as [`SessionStore::append`] does, once per `idempotency_key`:
    /// a retry with a key the session already took appends nothing and
    /// returns the session as it is. The key commits with the messages.
    ///
    /// Only stores that keep keys implement it (PostgreSQL); the default
    /// refuses with [`StoreError::Invalid`].
    fn append_once(
        &self,
        session: &SessionRef,
        idempotency_key: &str,
        messages: &[Message],
    ) -> Result<SessionMeta> {
        let _ = (session, messages);
        Err(StoreError::Invalid {
            what: "idempotency key",
            value: idempotency_key.to_owned(),
            reason: "this store does not keep idempotency keys; use a postgres:// store".into(),
        })
    }

    /// Stores a whole session as another store held it: the same id,
    /// names, times, checkpoints and messages (what `agent-host store
    /// migrate` copies with). A taken id or key is
    /// [`StoreError::AlreadyExists`]. The session may be visible, in part,
    /// before this returns (the file store writes it in steps); a copier
    /// verifies it after.
    fn import(&self, meta: &SessionMeta, messages: &[Message]) -> Result<SessionMeta>;

    /// [`append`](SessionStore::append), also saying what version the
    /// session had just before the write. The file store and SQLite read it
    /// under the lock (in the transaction) the write holds, so no other
    /// write falls between the two: a caller that keeps something derived
    /// from the log (a server's context window) and knows which version it
    /// was made from can tell that only these messages were added.
    ///
    /// The default reads the metadata, then appends: another writer can come
    /// between, and the two versions then differ by more than this append.
    ///
    /// ```
    /// use agent_host_core::Message;
    /// use agent_host_store::{FileStore, NewSession, SessionStore};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = FileStore::open(dir.path())?;
    /// let meta = store.create(&NewSession::new("default"))?;
    /// let appended = store.append_versioned(&meta.reference(), &[Message::user("hi").with_id("m1")])?;
    /// assert_eq!(appended.before, meta.version());
    /// assert_eq!(appended.meta.message_count, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn append_versioned(&self, session: &SessionRef, messages: &[Message]) -> Result<Appended> {
        let before = self
            .get(session)?
            .ok_or_else(|| StoreError::NotFound(session.clone()))?
            .version();
        let meta = self.append(session, messages)?;
        Ok(Appended { before, meta })
    }

    /// [`append_versioned`](SessionStore::append_versioned) for several
    /// sessions at once, answered item by item in the order given. Items of
    /// one session are appended in their order; each succeeds or fails
    /// alone. A store that says [`SessionStore::appends_together`] makes
    /// the whole call durable with one write where it can (the file store's
    /// journal: one `fdatasync` for every session in it); the default
    /// appends one item after another.
    fn append_many(&self, items: &[(SessionRef, &[Message])]) -> Vec<Result<Appended>> {
        items
            .iter()
            .map(|(session, messages)| self.append_versioned(session, messages))
            .collect()
    }

    /// Whether [`append_many`](SessionStore::append_many) costs less than
    /// its items appended one by one, so that a caller with appends to many
    /// sessions waiting should hand them over together (the file store
    /// with group commit). When `false`, concurrent single appends are the
    /// better way (a database serves them in parallel).
    fn appends_together(&self) -> bool {
        false
    }

    /// Loads every message. A malformed line is skipped and reported in
    /// [`History::warnings`], never silently dropped.
    fn load(&self, session: &SessionRef) -> Result<History>;

    /// What a turn needs of a session's log without reading all of it: the
    /// leading system messages (the log's first messages while their role is
    /// system), then the messages from `from` on. See [`Tail`] for what each
    /// field holds and [`TailStart`] for what to pass.
    ///
    /// Always equal to [`Tail::of_history`] of [`SessionStore::load`] for the
    /// same log, but for the count in [`Tail::meta`], which a backend may take
    /// from its metadata rather than reconcile (see there), and
    /// [`Tail::skipped`], derived from that count. A malformed line
    /// among the messages read is skipped and reported as `load` reports it;
    /// damage in the part not read is not looked for.
    ///
    /// The default loads everything; the file store and SQLite override it
    /// with reads that cost what the messages returned cost.
    ///
    /// ```
    /// use agent_host_core::Message;
    /// use agent_host_store::{FileStore, NewSession, SessionStore, TailStart};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = FileStore::open(dir.path())?;
    /// let session = store.create(&NewSession::new("default"))?.reference();
    /// let mut log = vec![Message::system("Be brief.").with_id("s")];
    /// log.extend((0..10).map(|i| Message::user(format!("q{i}")).with_id(format!("m{i}"))));
    /// store.append(&session, &log)?;
    ///
    /// let tail = store.load_tail(&session, TailStart::Newest(3))?;
    /// assert_eq!(tail.system[0].id, "s");
    /// let ids: Vec<&str> = tail.messages.iter().map(|m| m.id.as_str()).collect();
    /// assert_eq!(ids, ["m7", "m8", "m9"]);
    /// assert_eq!(tail.skipped, 7);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn load_tail(&self, session: &SessionRef, from: TailStart) -> Result<Tail> {
        Ok(Tail::of_history(self.load(session)?, &from))
    }

    /// A page of sessions, most recently updated first, from metadata only.
    fn list(&self, page: &PageRequest) -> Result<SessionPage>;

    /// Every session's metadata in one pass, newest update first: what a
    /// server builds its in-memory index from at startup, instead of paging
    /// through [`SessionStore::list`] (one walk a page). The default pages
    /// through `list`; the backends override it with one walk or one query.
    fn scan(&self) -> Result<SessionPage> {
        let mut all = SessionPage::default();
        loop {
            let page = self.list(&PageRequest {
                after: None,
                offset: all.sessions.len(),
                limit: MAX_PAGE_LIMIT,
                agent: None,
            })?;
            let done = page.sessions.len() < MAX_PAGE_LIMIT;
            all.total = page.total;
            all.sessions.extend(page.sessions);
            all.warnings.extend(page.warnings);
            if done {
                return Ok(all);
            }
        }
    }

    /// Sets the title (`None` removes it).
    fn rename(&self, session: &SessionRef, title: Option<&str>) -> Result<SessionMeta>;

    /// Deletes the session and everything stored with it; returns what it was.
    fn delete(&self, session: &SessionRef) -> Result<SessionMeta>;

    /// Removes every message and checkpoint; the session (id, key, title) stays.
    fn clear(&self, session: &SessionRef) -> Result<SessionMeta>;

    /// Records a summary checkpoint (after the latest one).
    fn write_checkpoint(
        &self,
        session: &SessionRef,
        checkpoint: &Checkpoint,
    ) -> Result<SessionMeta>;

    /// Deletes every session last updated more than `idle` before `now`;
    /// returns the deleted ones.
    fn cleanup(&self, idle: Duration, now: DateTime<Utc>) -> Result<Vec<SessionMeta>>;

    /// Keeps `body` (a JSON document of at most [`MAX_REQUEST_RECORD_BYTES`],
    /// the gateway's account of one request) as request record `n` of
    /// `session`, replacing a record with that number, then forgets the
    /// session's records numbered `n - keep` and below. Records are not the
    /// log: they are written without a sync of their own (a crash may lose
    /// the newest), a clear keeps them, a delete removes them. A session
    /// that does not exist is [`StoreError::NotFound`].
    fn put_request_record(&self, session: Uuid, n: u64, body: &str, keep: usize) -> Result<()>;

    /// The request records of `session`, oldest first, as numbers and JSON
    /// bodies: the newest, within [`MAX_REQUEST_RECORDS_READ`] and
    /// [`MAX_REQUEST_RECORDS_READ_BYTES`]; one the store cannot read
    /// (damaged, too large, not JSON) is left out with a warning. None for a
    /// session that does not exist.
    fn request_records(&self, session: Uuid) -> Result<Vec<(u64, String)>>;

    /// How many request records `session` keeps (none for a session that
    /// does not exist), without reading them.
    fn request_record_count(&self, session: Uuid) -> Result<usize>;

    /// Sends `payload` (at most [`MAX_NOTICE_BYTES`]) to the
    /// [`notifications`](SessionStore::notifications) of every instance
    /// sharing the store, in the order announced; never blocks on the
    /// network, and is best effort (an instance that misses some is told
    /// [`Notice::Lost`]). The default, for a store no other process
    /// follows, does nothing.
    fn announce(&self, payload: &str) -> Result<()> {
        let _ = payload;
        Ok(())
    }

    /// The announcements of every instance sharing the store, this one's
    /// included, for as long as the receiver is kept; `None` (the default)
    /// when the store has none (the file store, SQLite).
    fn notifications(&self) -> Option<tokio::sync::mpsc::Receiver<Notice>> {
        None
    }

    /// Holds `session`'s turn lock across every process sharing the store,
    /// waiting for it: the caller runs a turn while it keeps the answer.
    /// `None` (the default) when the store has no such lock (a process's
    /// own locks are then all there is).
    fn turn_lock(&self, session: Uuid) -> Result<Option<TurnLock>> {
        let _ = session;
        Ok(None)
    }
}

/// Sorts sessions newest update first (ties by id, for a stable order) and
/// cuts out the requested page; returns it, the total and where the next
/// page starts.
pub(crate) fn page_of(
    mut all: Vec<SessionMeta>,
    page: &PageRequest,
) -> (Vec<SessionMeta>, usize, Option<PageCursor>) {
    all.sort_unstable_by(|a, b| b.updated.cmp(&a.updated).then(a.id.cmp(&b.id)));
    let total = all.len();
    let sessions: Vec<SessionMeta> = all
        .into_iter()
        .filter(|meta| page.after.is_none_or(|after| after.precedes(meta)))
        .skip(page.offset)
        .take(page.limit)
        .collect();
    let next = next_of(&sessions, page.limit);
    (sessions, total, next)
}

/// Where the page after `sessions` starts: after its last session, when
/// it is full.
pub(crate) fn next_of(sessions: &[SessionMeta], limit: usize) -> Option<PageCursor> {
    (sessions.len() >= limit)
        .then(|| sessions.last().map(PageCursor::of))
        .flatten()
}

/// An error and its causes on one line.
pub(crate) use agent_host_core::error_kind::error_chain;

/// The last `updated` time a session idle for longer than `idle` can have at
/// `now`; `None` when `idle` reaches before the calendar (nothing is that old).
pub(crate) fn idle_cutoff(idle: std::time::Duration, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    chrono::TimeDelta::from_std(idle)
        .ok()
        .and_then(|idle| now.checked_sub_signed(idle))
}
