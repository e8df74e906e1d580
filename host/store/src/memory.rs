//! Long-term memory beside the sessions: facts about entities, kept in the
//! same store as the sessions and scoped by user, agent and session.
//!
//! The memory is core's [`Memory`] (facts, validity, the BM25 index),
//! rebuilt by replaying a log of [`Change`]s that the store keeps:
//!
//! - a folder store: `<root>/memory/changes.jsonl`, append-only, under
//!   `flock` (see `file/memory_log.rs`);
//! - a SQLite store: the table `memory_changes(seq INTEGER PRIMARY KEY,
//!   change TEXT)` in the same database, written in `IMMEDIATE`
//!   transactions.
//!
//! PostgreSQL stores do not keep memory yet ([`MemoryStore::open`] says so).
//!
//! Every operation first reads what other processes appended since this one
//! last looked, so a CLI command and a server on one store see each other's
//! writes. A write plans its changes against the memory as it is under the
//! log's write lock, records them durably, and only then reports success;
//! should recording fail, the memory is read again from the log, so it never
//! holds a change the log does not.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use agent_host_core::Message;
use agent_host_core::memory::extract::extract_messages;
use agent_host_core::memory::recall::{Recall, recall};
use agent_host_core::memory::{Change, Fact, FactEdit, Filter, Memory, MemoryError, Scope};
use agent_host_core::tokens::TokenCounter;
use chrono::{DateTime, Utc};
use rusqlite::{Connection, params};

use crate::file::memory_log::MemoryLog;
use crate::open::{SQLITE_PREFIX, is_postgres};
use crate::sqlite::{backend, configure, create_private_file};
use crate::{Result, StoreError};

/// The longest line (one change) the memory log holds, in bytes.
pub const MAX_CHANGE_BYTES: usize = 1024 * 1024;
/// The most facts one list or search returns.
pub const MAX_PAGE: usize = 1000;

/// What adding a fact did.
#[derive(Clone, Debug, PartialEq)]
pub struct Added {
    /// The fact as stored, or the one that already says the same.
    pub fact: Fact,
    /// Whether it was already known (nothing was added).
    pub duplicate: bool,
    /// The facts it invalidated.
    pub invalidated: Vec<String>,
}

/// A fact found by a search.
#[derive(Clone, Debug, PartialEq)]
pub struct Found {
    /// The fact.
    pub fact: Fact,
    /// Its score.
    pub score: f32,
}

enum Log {
    File(MemoryLog),
    Sqlite { conn: Connection, path: PathBuf },
    Postgres(Box<crate::PostgresStore>),
}

struct State {
    memory: Memory,
    /// How far the log has been read: a byte offset or a `seq`.
    seen: u64,
    log: Log,
}

/// A store's long-term memory.
pub struct MemoryStore {
    state: Mutex<State>,
    clock: Arc<dyn Fn() -> DateTime<Utc> + Send + Sync>,
}

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStore").finish_non_exhaustive()
    }
}

const SQLITE_SCHEMA: &str = "CREATE TABLE IF NOT EXISTS memory_changes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    change TEXT NOT NULL
);";

impl MemoryStore {
    /// The memory of the store `spec` names (as [`crate::open`] takes it),
    /// created when missing, read into memory.
    ///
    /// ```
    /// use agent_host_core::memory::{Fact, Filter, Scope};
    /// use agent_host_store::memory::MemoryStore;
    ///
    /// let dir = tempfile::tempdir()?;
    /// let spec = dir.path().join("store").to_string_lossy().into_owned();
    /// let memory = MemoryStore::open(&spec)?;
    /// let fact = Fact::new(MemoryStore::new_id(), Scope::new("alice", "default"), "alice",
    ///     "prefers dark roast coffee", chrono::Utc::now());
    /// memory.add(fact)?;
    /// // Another process (here: another handle) sees it.
    /// let again = MemoryStore::open(&spec)?;
    /// let hits = again.search("coffee", &Filter::user("alice"), 5, false)?;
    /// assert_eq!(hits[0].fact.text, "prefers dark roast coffee");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open(spec: &str) -> Result<MemoryStore> {
        let log = if is_postgres(spec) {
            Log::Postgres(Box::new(crate::PostgresStore::open(spec)?))
        } else if let Some(path) = spec.strip_prefix(SQLITE_PREFIX) {
            if path.is_empty() {
                return Err(StoreError::Invalid {
                    what: "store",
                    value: spec.to_owned(),
                    reason: "`sqlite:` needs a path, as in `sqlite:sessions.db`".into(),
                });
            }
            open_sqlite(Path::new(path))?
        } else if spec.is_empty() {
            return Err(StoreError::Invalid {
                what: "store",
                value: spec.to_owned(),
                reason: "it is empty; give a folder, or `sqlite:PATH` for a database".into(),
            });
        } else {
            Log::File(MemoryLog::open(Path::new(spec))?)
        };
        let store = MemoryStore {
            state: Mutex::new(State {
                memory: Memory::new(),
                seen: 0,
                log,
            }),
            clock: Arc::new(Utc::now),
        };
        store.read(|_| ())?;
        Ok(store)
    }

    /// Reads the time from `clock` instead of the system clock (for tests).
    pub fn with_clock(mut self, clock: impl Fn() -> DateTime<Utc> + Send + Sync + 'static) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// A fresh fact id (`m` and a UUID's 32 hex digits).
    pub fn new_id() -> String {
        format!("m{}", uuid::Uuid::new_v4().simple())
    }

    /// The current time by the store's clock.
    pub fn now(&self) -> DateTime<Utc> {
        (self.clock)()
    }

    /// Adds `fact` (see [`Memory::plan_add`]: a restatement adds nothing, a
    /// contradiction invalidates the older fact).
    pub fn add(&self, fact: Fact) -> Result<Added> {
        Ok(self.add_all(vec![fact])?.remove(0))
    }

    /// Adds `facts` in order, recorded with one durable write.
    pub fn add_all(&self, facts: Vec<Fact>) -> Result<Vec<Added>> {
        let mut added = Vec::with_capacity(facts.len());
        self.write(|memory| {
            let mut changes = Vec::new();
            for fact in facts {
                let id = fact.id.clone();
                let plan = match memory.plan_add(fact) {
                    Ok(plan) => plan,
                    Err(e) => return (changes, Some(e.into())),
                };
                let invalidated = plan
                    .changes
                    .iter()
                    .filter_map(|c| match c {
                        Change::Invalidate { id, .. } => Some(id.clone()),
                        _ => None,
                    })
                    .collect();
                for change in &plan.changes {
                    if let Err(e) = memory.apply(change.clone()) {
                        return (changes, Some(e.into()));
                    }
                    changes.push(change.clone());
                }
                let shown = plan.duplicate_of.as_deref().unwrap_or(&id);
                added.push(Added {
                    fact: memory.get(shown).cloned().expect("added or found"),
                    duplicate: plan.duplicate_of.is_some(),
                    invalidated,
                });
            }
            (changes, None)
        })?;
        Ok(added)
    }

    /// Runs the offline extractor over `messages` (from session `session`)
    /// and adds what it finds in `scope`: the user's words about `user`,
    /// the assistant's about `agent`.
    pub fn extract(
        &self,
        scope: &Scope,
        session: Option<&str>,
        messages: &[Message],
        user: &str,
        agent: &str,
    ) -> Result<Vec<Added>> {
        let facts = extract_messages(scope, session, messages, user, agent, self.now());
        if facts.is_empty() {
            return Ok(Vec::new());
        }
        self.add_all(facts)
    }

    /// The `limit` (at most [`MAX_PAGE`]) facts `filter` sees that best
    /// match `query`.
    pub fn search(
        &self,
        query: &str,
        filter: &Filter,
        limit: usize,
        include_invalid: bool,
    ) -> Result<Vec<Found>> {
        self.read(|memory| {
            memory
                .search(query, filter, limit.min(MAX_PAGE), include_invalid)
                .into_iter()
                .map(|h| Found {
                    fact: h.fact.clone(),
                    score: h.score,
                })
                .collect()
        })
    }

    /// What to recall for a turn (see [`recall`]).
    pub fn recall(
        &self,
        filter: &Filter,
        query: &str,
        limit: usize,
        budget: u32,
        counter: &dyn TokenCounter,
    ) -> Result<Recall> {
        self.read(|memory| recall(memory, filter, query, limit.min(MAX_PAGE), budget, counter))
    }

    /// The fact `id` of `user`'s memory.
    pub fn get(&self, user: &str, id: &str) -> Result<Fact> {
        self.read(|memory| owned(memory, user, id).cloned())?
    }

    /// The facts `filter` sees (valid or not), in the order recorded, after
    /// the fact `after`, at most `limit` (at most [`MAX_PAGE`]).
    pub fn list(&self, filter: &Filter, after: Option<&str>, limit: usize) -> Result<Vec<Fact>> {
        self.read(|memory| {
            Ok(memory
                .list(filter, after, limit.min(MAX_PAGE))?
                .into_iter()
                .cloned()
                .collect())
        })?
    }

    /// Edits fact `id` of `user`'s memory; returns it as edited.
    pub fn update(&self, user: &str, id: &str, edit: FactEdit) -> Result<Fact> {
        let at = self.now();
        self.write(|memory| {
            let planned =
                owned(memory, user, id).and_then(|_| Ok(memory.plan_update(id, edit, at)?));
            apply_planned(memory, planned)
        })?;
        self.get(user, id)
    }

    /// Forgets fact `id` of `user`'s memory.
    pub fn delete(&self, user: &str, id: &str) -> Result<()> {
        self.write(|memory| {
            let planned = owned(memory, user, id).and_then(|_| Ok(memory.plan_delete(id)?));
            apply_planned(memory, planned)
        })?;
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Catches up with the log, then reads.
    fn read<T>(&self, f: impl FnOnce(&Memory) -> T) -> Result<T> {
        let mut guard = self.lock();
        let State {
            memory: memory_,
            seen: seen_,
            log,
        } = &mut *guard;
        let name = log.name();
        let (changes, seen) = match log {
            Log::File(log) => log.lock(false)?.read_since(*seen_)?,
            Log::Sqlite { conn, path } => sqlite_since(conn, path, *seen_)?,
            Log::Postgres(db) => db.memory_since(*seen_)?,
        };
        catch_up(memory_, seen_, changes, seen, &name)?;
        Ok(f(memory_))
    }

    /// Under the log's write lock: catches up, lets `plan` apply its
    /// changes to the memory and return them (with the error that stopped
    /// it, if any), records them. On an error, nothing is recorded; a
    /// memory that took changes is read again from the log.
    fn write(
        &self,
        plan: impl FnOnce(&mut Memory) -> (Vec<Change>, Option<StoreError>),
    ) -> Result<()> {
        let mut guard = self.lock();
        let State {
            memory: memory_,
            seen: seen_,
            log,
        } = &mut *guard;
        let name = log.name();
        let outcome = match log {
            Log::File(log) => {
                let mut locked = log.lock(true)?;
                let (changes, seen) = locked.read_since(*seen_)?;
                catch_up(memory_, seen_, changes, seen, &name)?;
                match plan(memory_) {
                    (changes, None) if changes.is_empty() => Ok(None),
                    (changes, None) => locked.append(&changes).map(Some).map_err(|e| (e, true)),
                    (changes, Some(e)) => Err((e, !changes.is_empty())),
                }
            }
            Log::Sqlite { conn, path } => {
                let tx = conn
                    .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                    .map_err(|e| {
                        backend(format!("memory: cannot write to {}", path.display()), e)
                    })?;
                let (changes, seen) = sqlite_since(&tx, path, *seen_)?;
                catch_up(memory_, seen_, changes, seen, &name)?;
                match plan(memory_) {
                    (changes, None) if changes.is_empty() => Ok(None),
                    (changes, None) => sqlite_append(&tx, path, &changes)
                        .and_then(|last| {
                            tx.commit().map_err(|e| {
                                backend(format!("memory: cannot write to {}", path.display()), e)
                            })?;
                            Ok(Some(last))
                        })
                        .map_err(|e| (e, true)),
                    (changes, Some(e)) => Err((e, !changes.is_empty())),
                }
            }
            Log::Postgres(db) => {
                let _lock = db.memory_lock()?;
                let (changes, seen) = db.memory_since(*seen_)?;
                catch_up(memory_, seen_, changes, seen, &name)?;
                match plan(memory_) {
                    (changes, None) if changes.is_empty() => Ok(None),
                    (changes, None) => db.memory_append(&changes).map(Some).map_err(|e| (e, true)),
                    (changes, Some(e)) => Err((e, !changes.is_empty())),
                }
            }
        };
        match outcome {
            Ok(Some(seen)) => {
                *seen_ = seen;
                Ok(())
            }
            Ok(None) => Ok(()),
            Err((e, dirty)) => {
                if dirty {
                    // The memory holds changes the log does not: read it
                    // again from the log.
                    *memory_ = Memory::new();
                    *seen_ = 0;
                }
                Err(e)
            }
        }
    }
}

impl Log {
    fn name(&self) -> String {
        match self {
            Log::File(log) => log.path().display().to_string(),
            Log::Sqlite { path, .. } => format!("{} (memory_changes)", path.display()),
            Log::Postgres(db) => format!("{} (agent_host_memory_changes)", db.name()),
        }
    }
}

/// Applies planned changes, returning them (or the error).
fn apply_planned(
    memory: &mut Memory,
    planned: Result<Vec<Change>>,
) -> (Vec<Change>, Option<StoreError>) {
    let changes = match planned {
        Ok(changes) => changes,
        Err(e) => return (Vec::new(), Some(e)),
    };
    let mut applied = Vec::with_capacity(changes.len());
    for change in changes {
        if let Err(e) = memory.apply(change.clone()) {
            return (applied, Some(e.into()));
        }
        applied.push(change);
    }
    (applied, None)
}

/// Applies what the log gained since it was last read; on an error the
/// memory is emptied, to be read again whole next time.
fn catch_up(
    memory: &mut Memory,
    read_to: &mut u64,
    changes: Vec<Change>,
    seen: u64,
    log: &str,
) -> Result<()> {
    for change in changes {
        memory.apply(change).map_err(|e| {
            *memory = Memory::new();
            *read_to = 0;
            StoreError::Backend {
                context: format!(
                    "memory: {log} holds a change that does not apply; restore it or move it aside"
                ),
                source: Box::new(e),
            }
        })?;
    }
    *read_to = seen;
    Ok(())
}

/// Fact `id`, when it is in `user`'s memory (another user's fact is not
/// found, not forbidden: its existence is not told).
fn owned<'m>(memory: &'m Memory, user: &str, id: &str) -> Result<&'m Fact> {
    memory
        .get(id)
        .filter(|f| f.scope.user == user)
        .ok_or_else(|| StoreError::Memory(MemoryError::NotFound(id.to_owned())))
}

fn open_sqlite(path: &Path) -> Result<Log> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        crate::sqlite::create_private_dir(parent).map_err(|source| StoreError::Io {
            context: "cannot create the folder of the SQLite database".into(),
            path: parent.to_owned(),
            source,
        })?;
    }
    create_private_file(path).map_err(|source| StoreError::Io {
        context: "cannot create the SQLite database".into(),
        path: path.to_owned(),
        source,
    })?;
    let conn = Connection::open(path).map_err(|e| {
        backend(
            format!("cannot open the SQLite database {}", path.display()),
            e,
        )
    })?;
    configure(&conn, path)?;
    conn.execute_batch(SQLITE_SCHEMA).map_err(|e| {
        backend(
            format!("memory: cannot create its table in {}", path.display()),
            e,
        )
    })?;
    Ok(Log::Sqlite {
        conn,
        path: path.to_owned(),
    })
}

fn sqlite_since(conn: &Connection, path: &Path, seen: u64) -> Result<(Vec<Change>, u64)> {
    let fail = |e| backend(format!("memory: cannot read {}", path.display()), e);
    let mut statement = conn
        .prepare_cached("SELECT seq, change FROM memory_changes WHERE seq > ?1 ORDER BY seq")
        .map_err(fail)?;
    let mut rows = statement
        .query(params![i64::try_from(seen).unwrap_or(i64::MAX)])
        .map_err(fail)?;
    let mut changes = Vec::new();
    let mut last = seen;
    while let Some(row) = rows.next().map_err(fail)? {
        let seq: i64 = row.get(0).map_err(fail)?;
        let text: String = row.get(1).map_err(fail)?;
        if text.len() > MAX_CHANGE_BYTES {
            return Err(StoreError::Backend {
                context: format!(
                    "memory: {} row {seq}: over {MAX_CHANGE_BYTES} bytes",
                    path.display()
                ),
                source: "no memory change is that long".into(),
            });
        }
        let change = serde_json::from_str(&text).map_err(|e| StoreError::Backend {
            context: format!(
                "memory: {} row {seq} of memory_changes is not a memory change",
                path.display()
            ),
            source: Box::new(e),
        })?;
        changes.push(change);
        last = u64::try_from(seq).unwrap_or(0);
    }
    Ok((changes, last))
}

fn sqlite_append(conn: &Connection, path: &Path, changes: &[Change]) -> Result<u64> {
    let fail = |e| backend(format!("memory: cannot write to {}", path.display()), e);
    let mut statement = conn
        .prepare_cached("INSERT INTO memory_changes (change) VALUES (?1)")
        .map_err(fail)?;
    let mut last = 0;
    for change in changes {
        let text = serde_json::to_string(change).map_err(|e| StoreError::Backend {
            context: format!("memory: cannot encode a change for {}", path.display()),
            source: Box::new(e),
        })?;
        statement.execute(params![text]).map_err(fail)?;
        last = u64::try_from(conn.last_insert_rowid()).unwrap_or(0);
    }
    Ok(last)
}
