//! The file store: one append-only JSONL log per session, its metadata beside it.
//!
//! ```text
//! <root>/sessions/<agent>/<name>.jsonl          one message per line, only ever appended
//! <root>/sessions/<agent>/<name>.meta.json      SessionMeta, replaced atomically
//! <root>/sessions/<agent>/<name>.meta.json.bak  the last metadata written with fsync
//! <root>/sessions/<agent>/<name>.state          count and `updated`, 64 bytes overwritten in place
//! <root>/sessions/<agent>/<name>.jsonl.corrupt  bytes quarantined from the log, with their offsets
//! <root>/sessions/<agent>/<name>_media/         the session's media files
//! ```
//!
//! `<agent>` is the agent's name and `<name>` the session's key, both through
//! [`names::file_name`](super::names::file_name); a session without a key is
//! named by its id. The whole key is kept in the metadata, and every use of a
//! file checks that its metadata names the session asked for, so a clash is
//! an error, never a merge.
//! Files are created `0600` and folders `0700`.
//!
//! **Durability.** An append serializes the call's messages into one buffer,
//! writes it with one `write_all` on an `O_APPEND` file and `fdatasync`s
//! before returning; a failed write is cut back off. A process killed in the
//! middle of that write can leave the first whole lines of its (never
//! acknowledged) turn, and a torn last line, which the next open moves to the
//! sidecar: messages are always whole, an acknowledged turn is always
//! complete, but an interrupted turn is not rolled back (there is no turn
//! commit marker in the log; SQLite's transactions do roll back). Metadata is replaced by
//! writing a temporary file in the same folder, `fsync`, `rename` over, and
//! `fsync` of the folder; that synced file also becomes `<name>.meta.json.bak`
//! (a hard link, or a synced copy where links are refused; the store never
//! writes a metadata file in place, so the link stays the synced version).
//!
//! An append does not touch the metadata file. Its count and `updated` go to
//! `<name>.state`, a fixed-size record (magic, version, the session's id, the
//! count, `updated`, and a SHA-256-based checksum over the rest) that the
//! append overwrites in place with one `pwrite` at offset 0 and no `fsync`:
//! creating or renaming a file per append would make the log's `fdatasync`
//! carry a new inode in its journal commit, which costs as much again as the
//! write itself. The record is created (and synced) with the session, and
//! every synced metadata write rewrites it, synced, before the metadata (so
//! a clear's count of 0 is never undone by an older record). Reading a
//! session (get, list, load) reads the metadata and the record: a record
//! whose checksum holds and that names the session gives the count and, when
//! newer, `updated`. The log is the truth: a record lost in a crash leaves an
//! older count, and one torn or garbled (checksum wrong, another session's
//! id) is ignored; either way the next load reconciles the count from the log
//! and rewrites the record, with a warning. A reader without the lock that
//! meets a record mid-write reads it again; should it still not check, that
//! reader falls back to the metadata's count.
//!
//! Metadata is thus only ever written synced, and a crash cannot leave it
//! damaged where `fsync` is honoured. Should a file system or disk still
//! leave it empty, NUL-filled or cut at a page boundary, it is read from the
//! backup (with a warning; a load then writes it back, synced), so the key,
//! title and checkpoints are never lost. Metadata damaged in any other way (by hand) is
//! an error, as before: a person should see it, not have it papered over.
//!
//! **Recovery.** A record is committed when its newline is on disk. A log that
//! does not end in a newline (a torn write, or NUL bytes a file system left)
//! has that tail copied to the sidecar with its offset and cut off, before
//! any append and on load, so an append never glues onto a broken tail. A
//! malformed line elsewhere is reported with its line number, copied to the
//! sidecar once, and skipped; the log itself is never rewritten. Clearing a
//! session truncates its log to zero under the exclusive lock (a writer in
//! another process holds the same inode, so its next `O_APPEND` write lands
//! at the new end instead of in a file swapped out from under it).
//!
//! **Tail reads.** [`SessionStore::load_tail`] reads the log's leading
//! system lines from its start and its lines from the end back, in 64 KiB
//! blocks, until the start point; the count comes from the state record, not
//! from the log. Whatever a load would repair first (a torn tail, a state
//! record that is missing or does not check, metadata read from the backup,
//! a malformed line among those read that the sidecar does not hold yet, a
//! count the lines read contradict) makes it a load, sliced: the repair and
//! its warnings are the load's.
//!
//! **Concurrency.** Within the process, a read-write lock per session:
//! readers in parallel, one writer. Across processes, `flock` on the log:
//! shared to read, exclusive to append, repair or change metadata. After
//! taking it, the store checks that the path still names the file it locked
//! (a delete or a re-create in another process may have replaced it) and
//! opens again if not, so no write ever lands in a deleted file.
//!
//! Deleting removes the metadata first (from then on the session does not
//! exist), then the log, state record, sidecar and media. A crash in
//! between leaves a log without metadata, invisible to listing; creating a
//! session with the same key adopts it (the log is the truth) and reports it.

use std::collections::HashMap;
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use agent_host_core::format::jsonl;
use agent_host_core::{Checkpoint, Message};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use uuid::Uuid;

use super::idle_cutoff;
use super::names::file_name;
use super::records::{self, Finding, FindingKind, SidecarIndex};
use super::{
    History, NewSession, Opened, PageRequest, Result, SessionMeta, SessionPage, SessionRef,
    SessionStore, StoreError, StoreWarning, Tail, TailStart, error_chain, page_of,
};

mod files;
mod meta;
mod tail;

use files::*;
use meta::*;

/// The version of the metadata file's layout.
const META_VERSION: u32 = 1;

/// How often to reopen a log that is replaced while we wait for its lock.
const OPEN_ATTEMPTS: usize = 64;

/// The clock a store reads `now` from.
type Clock = Arc<dyn Fn() -> DateTime<Utc> + Send + Sync>;

/// The file store; see the module docs for the layout and the guarantees.
pub struct FileStore {
    root: PathBuf,
    sessions: PathBuf,
    clock: Clock,
    /// One lock per session log, by path.
    locks: Mutex<HashMap<PathBuf, Arc<RwLock<()>>>>,
    /// Where each session id seen so far lives.
    ids: Mutex<HashMap<Uuid, Location>>,
}

impl fmt::Debug for FileStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileStore")
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

/// The files of one session, for tools and tests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionFiles {
    /// The JSONL log.
    pub log: PathBuf,
    /// The metadata.
    pub meta: PathBuf,
    /// The metadata's backup, a file of its own.
    pub backup: PathBuf,
    /// The state record: the count and `updated` that appends refresh.
    pub state: PathBuf,
    /// The sidecar of quarantined bytes (may not exist).
    pub sidecar: PathBuf,
    /// The media folder (may not exist).
    pub media: PathBuf,
}

/// Where a session's files are: its agent's folder and its file name.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Location {
    dir: PathBuf,
    name: String,
}

impl Location {
    fn log(&self) -> PathBuf {
        self.dir.join(format!("{}.jsonl", self.name))
    }
    fn meta(&self) -> PathBuf {
        self.dir.join(format!("{}.meta.json", self.name))
    }
    fn backup(&self) -> PathBuf {
        self.dir.join(format!("{}.meta.json.bak", self.name))
    }
    fn sidecar(&self) -> PathBuf {
        self.dir.join(format!("{}.jsonl.corrupt", self.name))
    }
    fn state(&self) -> PathBuf {
        self.dir.join(format!("{}.state", self.name))
    }
    fn media(&self) -> PathBuf {
        self.dir.join(format!("{}_media", self.name))
    }
    fn files(&self) -> SessionFiles {
        SessionFiles {
            log: self.log(),
            meta: self.meta(),
            backup: self.backup(),
            state: self.state(),
            sidecar: self.sidecar(),
            media: self.media(),
        }
    }
}

/// A session found on disk: where, and its metadata.
type Located = (Location, SessionMeta);

/// The metadata file: the session's metadata, a layout version, and any field
/// a newer version wrote (kept when this one rewrites the file).
#[derive(Clone, Debug, Serialize, Deserialize)]
struct MetaFile {
    version: u32,
    #[serde(flatten)]
    meta: SessionMeta,
    #[serde(flatten)]
    extra: Map<String, Value>,
    /// Read from the backup, the metadata file being damaged.
    #[serde(skip)]
    from_backup: bool,
    /// What the state record said, when it was not used.
    #[serde(skip)]
    state: StateNote,
}

/// How the state record was found, when it could not be used.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
enum StateNote {
    /// Read and used (or not read yet).
    #[default]
    Used,
    /// There is none (a session from before the record).
    Missing,
    /// Damaged or stale: why, for a person.
    Bad(String),
}

/// A session locked for writing: its location, its log (exclusively
/// `flock`ed) and its metadata as read under the lock.
struct Held<'a> {
    loc: &'a Location,
    log: File,
    meta: MetaFile,
    ctx: &'a str,
}

/// How to lock a log.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Access {
    /// Shared `flock`, read-only.
    Read,
    /// Exclusive `flock`, appending; `create` makes the file when missing.
    Write { create: bool },
}

impl FileStore {
    /// Opens (creating when missing) the store under `root`.
    pub fn open(root: impl AsRef<Path>) -> Result<Self> {
        let root = root.as_ref().to_path_buf();
        let sessions = root.join("sessions");
        create_private_dir(&sessions)
            .map_err(|e| io_error("cannot create the store folder", &sessions, e))?;
        Ok(FileStore {
            root,
            sessions,
            clock: Arc::new(Utc::now),
            locks: Mutex::default(),
            ids: Mutex::default(),
        })
    }

    /// Reads the time from `clock` instead of the system clock (for tests).
    pub fn with_clock(mut self, clock: impl Fn() -> DateTime<Utc> + Send + Sync + 'static) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// The store's root folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The files of a session.
    pub fn files(&self, session: &SessionRef) -> Result<SessionFiles> {
        let (loc, _) = self.find(session)?;
        Ok(loc.files())
    }

    /// The session's media folder, created (`0700`) when missing.
    pub fn media_dir(&self, session: &SessionRef) -> Result<PathBuf> {
        let (loc, _) = self.find(session)?;
        let media = loc.media();
        create_private_dir(&media)
            .map_err(|e| io_error(&format!("session {session}: cannot create"), &media, e))?;
        Ok(media)
    }

    fn now(&self) -> DateTime<Utc> {
        (self.clock)()
    }

    fn agent_dir(&self, agent: &str) -> PathBuf {
        self.sessions.join(file_name(agent))
    }

    fn lock_for(&self, loc: &Location) -> Arc<RwLock<()>> {
        let mut locks = self.locks.lock().unwrap_or_else(PoisonError::into_inner);
        locks.entry(loc.log()).or_default().clone()
    }

    fn remember(&self, id: Uuid, loc: &Location) {
        let mut ids = self.ids.lock().unwrap_or_else(PoisonError::into_inner);
        ids.insert(id, loc.clone());
    }

    fn remembered(&self, id: Uuid) -> Option<Location> {
        let ids = self.ids.lock().unwrap_or_else(PoisonError::into_inner);
        ids.get(&id).cloned()
    }

    fn forget(&self, id: Uuid) {
        let mut ids = self.ids.lock().unwrap_or_else(PoisonError::into_inner);
        ids.remove(&id);
    }

    /// Where `session` is and its metadata (read without a lock: metadata is
    /// replaced atomically), or `None` when it does not exist.
    fn locate(&self, session: &SessionRef) -> Result<Option<Located>> {
        let ctx = format!("session {session}");
        match session {
            SessionRef::Key { agent, key } => {
                let loc = Location {
                    dir: self.agent_dir(agent),
                    name: file_name(key),
                };
                let Some(file) = read_session(&loc, &ctx)? else {
                    return Ok(None);
                };
                check_identity(session, &loc, &file.meta)?;
                self.remember(file.meta.id, &loc);
                Ok(Some((loc, file.meta)))
            }
            &SessionRef::Id(id) => {
                // The cache, then the file an anonymous session would have in
                // each agent's folder, then a scan of all the metadata.
                if let Some(found) = self.located_at(self.remembered(id), id, &ctx)? {
                    return Ok(Some(found));
                }
                for dir in self.agent_dirs()? {
                    let loc = Location {
                        dir,
                        name: id.to_string(),
                    };
                    if let Some(found) = self.located_at(Some(loc), id, &ctx)? {
                        return Ok(Some(found));
                    }
                }
                self.walk(None)?;
                self.located_at(self.remembered(id), id, &ctx)
            }
        }
    }

    fn located_at(&self, loc: Option<Location>, id: Uuid, ctx: &str) -> Result<Option<Located>> {
        let Some(loc) = loc else { return Ok(None) };
        match read_session(&loc, ctx)? {
            Some(file) if file.meta.id == id => {
                self.remember(id, &loc);
                Ok(Some((loc, file.meta)))
            }
            _ => Ok(None),
        }
    }

    fn find(&self, session: &SessionRef) -> Result<Located> {
        self.locate(session)?
            .ok_or_else(|| StoreError::NotFound(session.clone()))
    }

    fn agent_dirs(&self) -> Result<Vec<PathBuf>> {
        let entries = fs::read_dir(&self.sessions)
            .map_err(|e| io_error("cannot read the store folder", &self.sessions, e))?;
        let mut dirs = Vec::new();
        for entry in entries {
            let entry =
                entry.map_err(|e| io_error("cannot read the store folder", &self.sessions, e))?;
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                dirs.push(entry.path());
            }
        }
        Ok(dirs)
    }

    /// Every session's metadata (of one agent, when given), reading nothing
    /// but metadata files; unreadable ones become warnings.
    fn walk(&self, agent: Option<&str>) -> Result<(Vec<Located>, Vec<StoreWarning>)> {
        let dirs = match agent {
            Some(agent) => vec![self.agent_dir(agent)],
            None => self.agent_dirs()?,
        };
        let mut found = Vec::new();
        let mut warnings = Vec::new();
        for dir in dirs {
            let entries = match fs::read_dir(&dir) {
                Ok(entries) => entries,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(io_error("cannot list sessions in", &dir, e)),
            };
            for entry in entries {
                let entry = entry.map_err(|e| io_error("cannot list sessions in", &dir, e))?;
                let file_name = entry.file_name();
                let Some(name) = file_name
                    .to_str()
                    .filter(|n| !n.starts_with('.'))
                    .and_then(|n| n.strip_suffix(".meta.json"))
                else {
                    continue;
                };
                let loc = Location {
                    dir: dir.clone(),
                    name: name.to_owned(),
                };
                match read_session(&loc, "listing sessions") {
                    Ok(Some(file)) => {
                        if agent.is_none_or(|a| a == file.meta.agent) {
                            self.remember(file.meta.id, &loc);
                            found.push((loc, file.meta));
                        }
                    }
                    // Deleted since the folder was read.
                    Ok(None) => {}
                    Err(e) => {
                        let warning = StoreWarning {
                            path: loc.meta(),
                            line: None,
                            offset: None,
                            detail: format!("not listed: {}", error_chain(&e)),
                        };
                        tracing::warn!("{warning}");
                        warnings.push(warning);
                    }
                }
            }
        }
        Ok((found, warnings))
    }

    /// Opens and `flock`s the log at `loc`, making sure the path still names
    /// the locked file; `None` when there is no log.
    fn open_log(&self, loc: &Location, access: Access, ctx: &str) -> Result<Option<File>> {
        let path = loc.log();
        for _ in 0..OPEN_ATTEMPTS {
            let mut options = OpenOptions::new();
            options.read(true);
            if let Access::Write { create } = access {
                options.append(true).create(create);
            }
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            let file = match options.open(&path) {
                Ok(file) => file,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(io_error(&format!("{ctx}: cannot open"), &path, e)),
            };
            let locked = match access {
                Access::Read => file.lock_shared(),
                Access::Write { .. } => file.lock(),
            };
            locked.map_err(|e| io_error(&format!("{ctx}: cannot lock"), &path, e))?;
            if is_same_file(&file, &path)
                .map_err(|e| io_error(&format!("{ctx}: cannot check"), &path, e))?
            {
                return Ok(Some(file));
            }
        }
        Err(io_error(
            &format!("{ctx}: another process keeps replacing"),
            &path,
            io::Error::other("the log changed under every attempt to lock it"),
        ))
    }

    /// Runs `f` with the session locked for writing, in this process and
    /// across processes, and its metadata read under the lock.
    fn exclusive<T>(
        &self,
        session: &SessionRef,
        f: impl FnOnce(&mut Held<'_>) -> Result<T>,
    ) -> Result<T> {
        let (loc, _) = self.find(session)?;
        self.exclusive_at(&loc, session, f)
    }

    fn exclusive_at<T>(
        &self,
        loc: &Location,
        session: &SessionRef,
        f: impl FnOnce(&mut Held<'_>) -> Result<T>,
    ) -> Result<T> {
        let ctx = format!("session {session}");
        let lock = self.lock_for(loc);
        let _guard = lock.write().unwrap_or_else(PoisonError::into_inner);
        let log = match self.open_log(loc, Access::Write { create: false }, &ctx)? {
            Some(log) => log,
            // Metadata without a log (removed by hand): an empty log is the truth.
            None if loc.meta().exists() => self
                .open_log(loc, Access::Write { create: true }, &ctx)?
                .ok_or_else(|| StoreError::NotFound(session.clone()))?,
            None => return Err(StoreError::NotFound(session.clone())),
        };
        let meta = read_session(loc, &ctx)?.ok_or_else(|| StoreError::NotFound(session.clone()))?;
        if !session.matches(&meta.meta) {
            check_identity(session, loc, &meta.meta)?;
            return Err(StoreError::NotFound(session.clone()));
        }
        f(&mut Held {
            loc,
            log,
            meta,
            ctx: &ctx,
        })
    }

    /// Replaces the metadata atomically and durably: the state record first
    /// (in place, synced), then the backup, then the metadata, each written
    /// whole to a temporary file, `fsync`ed and `rename`d over, and the
    /// folder `fsync`ed. The backup is a file of its own, never a link to the
    /// metadata's inode: damage to one (a truncation, a page a crash left
    /// unwritten) never reaches the other.
    fn write_meta(&self, loc: &Location, file: &MetaFile, ctx: &str) -> Result<()> {
        write_state(loc, &file.meta, true, ctx)?;
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let path = loc.meta();
        // A leading dot: never taken for a session, and no key makes one.
        let tmp = |what: &str| {
            loc.dir.join(format!(
                ".{}.{what}.{}-{}.tmp",
                loc.name,
                std::process::id(),
                COUNTER.fetch_add(1, Ordering::Relaxed)
            ))
        };
        let (tmp, backup_tmp) = (tmp("meta.json"), tmp("meta.json.bak"));
        let mut bytes = serde_json::to_vec_pretty(file).expect("metadata serializes");
        bytes.push(b'\n');
        let write_new = |target: &Path| -> io::Result<()> {
            let mut options = OpenOptions::new();
            options.write(true).create_new(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            let mut out = options.open(target)?;
            out.write_all(&bytes)?;
            out.sync_all()
        };
        let written = (|| {
            // The backup first: a crash between the renames leaves a
            // newer backup and an older, whole, metadata file.
            write_new(&backup_tmp)?;
            fs::rename(&backup_tmp, loc.backup())?;
            write_new(&tmp)?;
            fs::rename(&tmp, &path)
        })();
        if let Err(e) = written {
            let _ = fs::remove_file(&tmp);
            let _ = fs::remove_file(&backup_tmp);
            return Err(io_error(&format!("{ctx}: cannot write metadata"), &path, e));
        }
        sync_dir_of(&loc.dir, ctx)
    }

    /// Creates the session `new` at `loc` with `id`, or, when it exists and
    /// `open_existing`, opens it.
    fn create_at(
        &self,
        loc: &Location,
        new: &NewSession,
        id: Uuid,
        open_existing: bool,
    ) -> Result<Opened> {
        let session = new.reference().unwrap_or(SessionRef::Id(id));
        let ctx = format!("session {session}");
        if !loc.dir.is_dir() {
            create_private_dir(&loc.dir)
                .map_err(|e| io_error(&format!("{ctx}: cannot create"), &loc.dir, e))?;
            sync_dir_of(&self.sessions, &ctx)?;
        }
        let lock = self.lock_for(loc);
        let _guard = lock.write().unwrap_or_else(PoisonError::into_inner);
        let log = self
            .open_log(loc, Access::Write { create: true }, &ctx)?
            .ok_or_else(|| StoreError::NotFound(session.clone()))?;
        if let Some(existing) = read_session(loc, &ctx)? {
            check_identity(&session, loc, &existing.meta)?;
            if !session.matches(&existing.meta) {
                // An anonymous session's name is its fresh UUID: taken only
                // by a key that spells it.
                return Err(StoreError::NameClash {
                    session,
                    path: loc.meta(),
                    other: describe(&existing.meta),
                });
            }
            if !open_existing {
                return Err(StoreError::AlreadyExists(session));
            }
            return Ok(Opened {
                meta: existing.meta,
                created: false,
            });
        }
        // A log without metadata: an interrupted create (empty) or delete,
        // or metadata removed by hand. The log is the truth: adopt it.
        let mut message_count = 0;
        let len = log
            .metadata()
            .map_err(|e| io_error(&format!("{ctx}: cannot read"), &loc.log(), e))?
            .len();
        if len > 0 {
            let (messages, _) = self.inspect(loc, &log, true, &ctx)?;
            message_count = messages.len() as u64;
            tracing::warn!(
                "{}: a log without metadata holds {message_count} messages; adopted by {ctx}",
                loc.log().display()
            );
        }
        let now = self.now();
        let meta = SessionMeta {
            id,
            key: new.key.clone(),
            title: new.title.clone(),
            agent: new.agent.clone(),
            worker_id: new.worker_id.clone(),
            workspace_id: new.workspace_id.clone(),
            created: now,
            updated: now,
            message_count,
            checkpoints: Vec::new(),
        };
        let file = MetaFile {
            version: META_VERSION,
            meta,
            extra: Map::new(),
            from_backup: false,
            state: StateNote::Used,
        };
        self.write_meta(loc, &file, &ctx)?;
        self.remember(id, loc);
        Ok(Opened {
            meta: file.meta,
            created: true,
        })
    }

    /// Reads the log's messages and what was wrong with it. With `repair`
    /// (the exclusive lock held), a torn tail is quarantined and cut off, and
    /// malformed lines are copied to the sidecar.
    fn inspect(
        &self,
        loc: &Location,
        log: &File,
        repair: bool,
        ctx: &str,
    ) -> Result<(Vec<Message>, Vec<StoreWarning>)> {
        let bytes =
            read_all(log).map_err(|e| io_error(&format!("{ctx}: cannot read"), &loc.log(), e))?;
        let scan = records::scan(&bytes);
        if repair {
            self.quarantine(loc, &bytes, &scan.findings, ctx)?;
            if scan.torn() {
                cut(log, scan.whole_len as u64).map_err(|e| {
                    io_error(
                        &format!("{ctx}: cannot cut the torn tail of"),
                        &loc.log(),
                        e,
                    )
                })?;
            }
        }
        let warnings = scan.findings.iter().map(|f| warning_for(loc, f)).collect();
        Ok((scan.messages, warnings))
    }

    /// Copies the quarantined bytes of `findings` that the sidecar does not
    /// hold yet into it, durably.
    fn quarantine(
        &self,
        loc: &Location,
        log: &[u8],
        findings: &[Finding],
        ctx: &str,
    ) -> Result<()> {
        let path = loc.sidecar();
        let existing = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(io_error(&format!("{ctx}: cannot read"), &path, e)),
        };
        let index = SidecarIndex::parse(&existing);
        let now = self.now();
        let mut entries = Vec::new();
        for finding in findings
            .iter()
            .filter(|f| f.quarantined() && !index.holds(f, log))
        {
            records::write_entry(&mut entries, finding, log, now);
        }
        if entries.is_empty() {
            return Ok(());
        }
        let written = (|| {
            let mut options = OpenOptions::new();
            options.create(true).append(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            let mut out = options.open(&path)?;
            if index.whole_len < existing.len() {
                // A torn entry of our own: its bytes are still in the log.
                out.set_len(index.whole_len as u64)?;
            }
            out.write_all(&entries)?;
            out.sync_data()
        })();
        written.map_err(|e| io_error(&format!("{ctx}: cannot quarantine bytes to"), &path, e))?;
        if existing.is_empty() {
            sync_dir_of(&loc.dir, ctx)?;
        }
        Ok(())
    }

    /// Whether every quarantined finding is in the sidecar already.
    fn quarantined_already(
        &self,
        loc: &Location,
        findings: &[&Finding],
        log: &[u8],
        ctx: &str,
    ) -> Result<bool> {
        if findings.is_empty() {
            return Ok(true);
        }
        let path = loc.sidecar();
        let existing = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(io_error(&format!("{ctx}: cannot read"), &path, e)),
        };
        let index = SidecarIndex::parse(&existing);
        Ok(findings.iter().all(|f| index.holds(f, log)))
    }

    /// Makes sure the log ends in a newline before an append.
    fn mend_tail(&self, held: &mut Held<'_>) -> Result<()> {
        let path = held.loc.log();
        let ctx = held.ctx;
        let last =
            last_byte(&held.log).map_err(|e| io_error(&format!("{ctx}: cannot read"), &path, e))?;
        if matches!(last, None | Some(b'\n')) {
            return Ok(());
        }
        let bytes =
            read_all(&held.log).map_err(|e| io_error(&format!("{ctx}: cannot read"), &path, e))?;
        let Some(tail) = records::torn_tail(&bytes) else {
            return Ok(());
        };
        self.quarantine(held.loc, &bytes, std::slice::from_ref(&tail), ctx)?;
        cut(&held.log, tail.bytes.start as u64)
            .map_err(|e| io_error(&format!("{ctx}: cannot cut the torn tail of"), &path, e))?;
        tracing::warn!("{}", warning_for(held.loc, &tail));
        Ok(())
    }

    /// The load of `session` under a shared lock, or `None` when the log
    /// needs a repair (or its count a correction) first.
    fn load_shared(&self, loc: &Location, session: &SessionRef) -> Result<Option<History>> {
        let ctx = format!("session {session}");
        let Some(log) = self.open_log(loc, Access::Read, &ctx)? else {
            return Ok(None);
        };
        let Some(file) = read_session(loc, &ctx)? else {
            return Err(StoreError::NotFound(session.clone()));
        };
        if !session.matches(&file.meta) {
            return Err(StoreError::NotFound(session.clone()));
        }
        let bytes =
            read_all(&log).map_err(|e| io_error(&format!("{ctx}: cannot read"), &loc.log(), e))?;
        let scan = records::scan(&bytes);
        let to_quarantine: Vec<&Finding> =
            scan.findings.iter().filter(|f| f.quarantined()).collect();
        if scan.torn()
            || file.from_backup
            || matches!(file.state, StateNote::Bad(_))
            || scan.messages.len() as u64 != file.meta.message_count
            || !self.quarantined_already(loc, &to_quarantine, &bytes, &ctx)?
        {
            return Ok(None);
        }
        let warnings: Vec<StoreWarning> =
            scan.findings.iter().map(|f| warning_for(loc, f)).collect();
        for warning in &warnings {
            tracing::warn!("{warning}");
        }
        Ok(Some(History {
            meta: file.meta,
            messages: scan.messages,
            warnings,
        }))
    }

    /// The tail read of `session` under a shared lock, or `None` when the
    /// log needs a repair (or its count a correction) first.
    fn tail_shared(
        &self,
        loc: &Location,
        session: &SessionRef,
        from: &TailStart,
    ) -> Result<Option<Tail>> {
        let ctx = format!("session {session}");
        let Some(log) = self.open_log(loc, Access::Read, &ctx)? else {
            return Ok(None);
        };
        let Some(file) = read_session(loc, &ctx)? else {
            return Err(StoreError::NotFound(session.clone()));
        };
        if !session.matches(&file.meta) {
            return Err(StoreError::NotFound(session.clone()));
        }
        if file.from_backup || file.state != StateNote::Used {
            return Ok(None);
        }
        let path = loc.log();
        let read_error = |e| io_error(&format!("{ctx}: cannot read"), &path, e);
        let len = log.metadata().map_err(read_error)?.len();
        if !matches!(last_byte(&log).map_err(read_error)?, None | Some(b'\n')) {
            return Ok(None);
        }
        let read = tail::read(&log, len, from).map_err(read_error)?;
        let count = file.meta.message_count;
        let read_count = (read.system.len() + read.messages.len()) as u64;
        let skipped = match read.whole {
            Some((_, total)) if total != count => return Ok(None),
            Some((skipped, _)) => skipped,
            None if read_count > count => return Ok(None),
            None => count - read_count,
        };
        if !self.sidecar_holds(loc, &read.findings, &ctx)? {
            return Ok(None);
        }
        let warnings: Vec<StoreWarning> = read
            .findings
            .iter()
            .map(|(f, _)| warning_for(loc, f))
            .collect();
        for warning in &warnings {
            tracing::warn!("{warning}");
        }
        Ok(Some(Tail {
            meta: file.meta,
            system: read.system,
            messages: read.messages,
            skipped,
            found: read.found,
            warnings,
        }))
    }

    /// Whether the sidecar holds the bytes of every quarantined finding
    /// (each with its bytes).
    fn sidecar_holds(&self, loc: &Location, findings: &[tail::Found], ctx: &str) -> Result<bool> {
        let mut quarantined = findings.iter().filter(|(f, _)| f.quarantined()).peekable();
        if quarantined.peek().is_none() {
            return Ok(true);
        }
        let path = loc.sidecar();
        let existing = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(io_error(&format!("{ctx}: cannot read"), &path, e)),
        };
        let index = SidecarIndex::parse(&existing);
        Ok(quarantined.all(|(f, bytes)| index.holds_bytes(f.bytes.start as u64, bytes)))
    }

    /// Deletes the held session: metadata first, then the rest.
    fn remove_held(&self, held: &Held<'_>) -> Result<()> {
        let ctx = held.ctx;
        let meta = held.loc.meta();
        fs::remove_file(&meta).map_err(|e| io_error(&format!("{ctx}: cannot delete"), &meta, e))?;
        sync_dir_of(&held.loc.dir, ctx)?;
        self.forget(held.meta.meta.id);
        for path in [
            held.loc.log(),
            held.loc.state(),
            held.loc.sidecar(),
            held.loc.backup(),
        ] {
            remove_if_exists(&path)
                .map_err(|e| io_error(&format!("{ctx}: cannot delete"), &path, e))?;
        }
        let media = held.loc.media();
        remove_dir_if_exists(&media)
            .map_err(|e| io_error(&format!("{ctx}: cannot delete"), &media, e))?;
        sync_dir_of(&held.loc.dir, ctx)
    }
}

impl SessionStore for FileStore {
    fn create(&self, new: &NewSession) -> Result<SessionMeta> {
        new.validate()?;
        let id = Uuid::new_v4();
        let loc = Location {
            dir: self.agent_dir(&new.agent),
            name: new.key.as_deref().map_or_else(|| id.to_string(), file_name),
        };
        self.create_at(&loc, new, id, false)
            .map(|opened| opened.meta)
    }

    fn get_or_create(&self, new: &NewSession) -> Result<Opened> {
        let session = new.keyed_reference()?;
        if let Some((_, meta)) = self.locate(&session)? {
            return Ok(Opened {
                meta,
                created: false,
            });
        }
        let loc = Location {
            dir: self.agent_dir(&new.agent),
            name: file_name(new.key.as_deref().unwrap_or_default()),
        };
        self.create_at(&loc, new, Uuid::new_v4(), true)
    }

    fn get(&self, session: &SessionRef) -> Result<Option<SessionMeta>> {
        Ok(self.locate(session)?.map(|(_, meta)| meta))
    }

    fn append(&self, session: &SessionRef, messages: &[Message]) -> Result<SessionMeta> {
        let mut buf = Vec::with_capacity(messages.len() * 512);
        for message in messages {
            jsonl::write_line(message, &mut buf);
        }
        self.exclusive(session, |held| {
            if messages.is_empty() {
                return Ok(held.meta.meta.clone());
            }
            self.mend_tail(held)?;
            let path = held.loc.log();
            let ctx = held.ctx;
            let before = held
                .log
                .metadata()
                .map_err(|e| io_error(&format!("{ctx}: cannot read"), &path, e))?
                .len();
            let written = (&held.log)
                .write_all(&buf)
                .and_then(|()| held.log.sync_data());
            if let Err(e) = written {
                // Never leave half a turn for the next append to glue onto.
                let _ = cut(&held.log, before);
                return Err(io_error(&format!("{ctx}: cannot append to"), &path, e));
            }
            let meta = &mut held.meta.meta;
            meta.message_count += messages.len() as u64;
            meta.updated = meta.updated.max(self.now());
            // The messages are durable: a failed refresh only delays the
            // count, which the next load reconciles from the log.
            if let Err(e) = write_state(held.loc, meta, false, ctx) {
                tracing::warn!("{}", error_chain(&e));
            }
            Ok(held.meta.meta.clone())
        })
    }

    fn load(&self, session: &SessionRef) -> Result<History> {
        let (loc, _) = self.find(session)?;
        let lock = self.lock_for(&loc);
        {
            let _guard = lock.read().unwrap_or_else(PoisonError::into_inner);
            if let Some(history) = self.load_shared(&loc, session)? {
                return Ok(history);
            }
        }
        self.exclusive_at(&loc, session, |held| {
            let (messages, mut warnings) = self.inspect(held.loc, &held.log, true, held.ctx)?;
            let count = messages.len() as u64;
            let mut rewrite = held.meta.from_backup;
            if held.meta.from_backup {
                warnings.push(StoreWarning {
                    path: held.loc.meta(),
                    line: None,
                    offset: None,
                    detail: format!(
                        "left empty or cut short by a crash; restored from {}",
                        held.loc.backup().display()
                    ),
                });
                held.meta.from_backup = false;
            }
            if let StateNote::Bad(why) = &held.meta.state {
                warnings.push(StoreWarning {
                    path: held.loc.state(),
                    line: None,
                    offset: None,
                    detail: format!("{why}; ignored, the count taken from the log and rewritten"),
                });
                held.meta.state = StateNote::Used;
                rewrite = true;
            }
            if held.meta.meta.message_count != count {
                warnings.push(StoreWarning {
                    path: held.loc.meta(),
                    line: None,
                    offset: None,
                    detail: format!(
                        "the metadata counted {} messages, the log holds {count}; corrected",
                        held.meta.meta.message_count
                    ),
                });
                held.meta.meta.message_count = count;
                rewrite = true;
            }
            if rewrite {
                self.write_meta(held.loc, &held.meta, held.ctx)?;
            }
            for warning in &warnings {
                tracing::warn!("{warning}");
            }
            Ok(History {
                meta: held.meta.meta.clone(),
                messages,
                warnings,
            })
        })
    }

    fn load_tail(&self, session: &SessionRef, from: TailStart) -> Result<Tail> {
        let (loc, _) = self.find(session)?;
        let lock = self.lock_for(&loc);
        {
            let _guard = lock.read().unwrap_or_else(PoisonError::into_inner);
            if let Some(tail) = self.tail_shared(&loc, session, &from)? {
                return Ok(tail);
            }
        }
        // A repair first: the load's, with its warnings.
        Ok(Tail::of_history(self.load(session)?, &from))
    }

    fn list(&self, page: &PageRequest) -> Result<SessionPage> {
        page.validate()?;
        let (found, warnings) = self.walk(page.agent.as_deref())?;
        let (sessions, total) = page_of(found.into_iter().map(|(_, meta)| meta).collect(), page);
        Ok(SessionPage {
            sessions,
            total,
            warnings,
        })
    }

    fn scan(&self) -> Result<SessionPage> {
        let (found, warnings) = self.walk(None)?;
        let all: Vec<SessionMeta> = found.into_iter().map(|(_, meta)| meta).collect();
        let every = PageRequest {
            offset: 0,
            limit: all.len(),
            agent: None,
        };
        let (sessions, total) = page_of(all, &every);
        Ok(SessionPage {
            sessions,
            total,
            warnings,
        })
    }

    fn rename(&self, session: &SessionRef, title: Option<&str>) -> Result<SessionMeta> {
        self.exclusive(session, |held| {
            let meta = &mut held.meta.meta;
            meta.title = title.map(str::to_owned);
            meta.updated = meta.updated.max(self.now());
            self.write_meta(held.loc, &held.meta, held.ctx)?;
            Ok(held.meta.meta.clone())
        })
    }

    fn delete(&self, session: &SessionRef) -> Result<SessionMeta> {
        self.exclusive(session, |held| {
            self.remove_held(held)?;
            Ok(held.meta.meta.clone())
        })
    }

    fn clear(&self, session: &SessionRef) -> Result<SessionMeta> {
        self.exclusive(session, |held| {
            let ctx = held.ctx;
            cut(&held.log, 0)
                .map_err(|e| io_error(&format!("{ctx}: cannot clear"), &held.loc.log(), e))?;
            let sidecar = held.loc.sidecar();
            remove_if_exists(&sidecar)
                .map_err(|e| io_error(&format!("{ctx}: cannot delete"), &sidecar, e))?;
            let media = held.loc.media();
            remove_dir_if_exists(&media)
                .map_err(|e| io_error(&format!("{ctx}: cannot delete"), &media, e))?;
            let meta = &mut held.meta.meta;
            meta.message_count = 0;
            meta.checkpoints.clear();
            meta.updated = meta.updated.max(self.now());
            self.write_meta(held.loc, &held.meta, ctx)?;
            Ok(held.meta.meta.clone())
        })
    }

    fn write_checkpoint(
        &self,
        session: &SessionRef,
        checkpoint: &Checkpoint,
    ) -> Result<SessionMeta> {
        self.exclusive(session, |held| {
            let meta = &mut held.meta.meta;
            meta.checkpoints.push(checkpoint.clone());
            meta.updated = meta.updated.max(self.now());
            self.write_meta(held.loc, &held.meta, held.ctx)?;
            Ok(held.meta.meta.clone())
        })
    }

    fn cleanup(&self, idle: Duration, now: DateTime<Utc>) -> Result<Vec<SessionMeta>> {
        let Some(cutoff) = idle_cutoff(idle, now) else {
            return Ok(Vec::new());
        };
        let (found, _) = self.walk(None)?;
        let mut deleted = Vec::new();
        for (loc, meta) in found {
            if meta.updated >= cutoff {
                continue;
            }
            let session = meta.reference();
            // Checked again under the lock: another process may have appended.
            let removed = self.exclusive_at(&loc, &session, |held| {
                if held.meta.meta.updated >= cutoff {
                    return Ok(None);
                }
                self.remove_held(held)?;
                Ok(Some(held.meta.meta.clone()))
            });
            match removed {
                Ok(Some(meta)) => deleted.push(meta),
                Ok(None) | Err(StoreError::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(deleted)
    }
}

/// Fails with [`StoreError::NameClash`] when `meta` at `loc` belongs to a
/// session with another key (or agent) than the keyed `session`.
fn check_identity(session: &SessionRef, loc: &Location, meta: &SessionMeta) -> Result<()> {
    if let SessionRef::Key { .. } = session
        && !session.matches(meta)
    {
        return Err(StoreError::NameClash {
            session: session.clone(),
            path: loc.meta(),
            other: describe(meta),
        });
    }
    Ok(())
}

fn describe(meta: &SessionMeta) -> String {
    match &meta.key {
        Some(key) => format!("session {} ({key:?} of agent {:?})", meta.id, meta.agent),
        None => format!("session {} of agent {:?}", meta.id, meta.agent),
    }
}

fn warning_for(loc: &Location, finding: &Finding) -> StoreWarning {
    let sidecar = loc.sidecar();
    let action = match finding.kind {
        FindingKind::TornTail => format!("; moved to {} and cut from the log", sidecar.display()),
        FindingKind::BadLine => format!("; skipped, and copied to {}", sidecar.display()),
        FindingKind::JunkPrefix => format!("; those bytes are copied to {}", sidecar.display()),
        FindingKind::Glued => String::new(),
    };
    StoreWarning {
        path: loc.log(),
        line: Some(finding.line),
        offset: Some(finding.bytes.start as u64),
        detail: format!("{}{action}", finding.detail),
    }
}
