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
//! `fsync` of the folder; the same bytes, written and synced the same way
//! just before, are `<name>.meta.json.bak`: a file of its own, never a hard
//! link to the metadata's inode, so damage to one never reaches the other.
//!
//! **Group commit** ([`FileStore::with_group_commit`], what `agent-host
//! serve` opens): an append's lines go to its log unsynced and, as a record,
//! to this process's journal (`<root>/journal/<uuid>.wal`); one write and
//! `fdatasync` of the journal acknowledges every append waiting at that
//! moment, whatever their sessions. The logs are synced when the journal
//! wraps and before a clear or delete; a journal whose process is gone is
//! replayed by the next open. See `file/journal.rs`. With it,
//! [`SessionStore::append_many`] takes several sessions' appends in one
//! call: each is written to its log under its session's lock (taken in one
//! order by every caller), all are journaled as one group, and the locks
//! are let go once it is durable: what the server's commit threads call,
//! with no thread waiting per append.
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
//! **Kept files.** An append leaves the session's folder, log and state
//! record open, with the metadata as it wrote it (for up to `MAX_KEPT`
//! sessions, fewer under a low limit on open files; the oldest are closed
//! first). The next append to that session takes the log's `flock` on the
//! kept handle and checks with one `fstatat` each that the folder, the log
//! (and its length), the metadata file (inode, length and times) and the
//! state record are still the ones it left: then no one wrote in between, in
//! this process or another, and it writes, syncs and refreshes the record
//! without opening or reading anything. Any difference (another writer's
//! append, a clear, a rename, a repair, a file replaced or removed), and it
//! goes the whole way below. Every other write, and every whole-way append,
//! drops the kept files first. The `flock` is released after each append, as
//! before: a kept log never blocks another process.
//!
//! **Recovery.** A record is committed when its newline is on disk. A log that
//! does not end in a newline (a torn write, or NUL bytes a file system left)
//! has that tail copied to the sidecar with its offset and cut off, before
//! any append and on load, so an append never glues onto a broken tail. A
//! malformed line elsewhere is reported with its line number, copied to the
//! sidecar once, and skipped; the log itself is never rewritten.
//!
//! **Clearing.** Under the exclusive lock, the cleared metadata (no
//! checkpoints, a count of 0) is written first, marked `"clearing": true`:
//! that durable write is the clear's commit point. Then the log is truncated
//! to zero (a writer in another process holds the same inode, so its next
//! `O_APPEND` write lands at the new end instead of in a file swapped out
//! from under it), the sidecar and media are removed, and the metadata is
//! written again without the mark. Metadata that carries the mark reads as
//! the cleared session (its state record, still the old count, is not
//! used), and the next writer or load finishes the clear before anything
//! else. So a crash at any point leaves the session as it was or cleared:
//! never old checkpoints over an emptied log, nor old messages back.
//!
//! **Links.** The root is the user's and links in its path are followed;
//! nothing beneath it is. Every file and folder beneath the root is opened,
//! created, renamed and removed by one name relative to an open folder
//! handle, without following a link (`openat` with `O_NOFOLLOW`), and files
//! are opened `O_NONBLOCK` and checked to be regular files before use: a
//! symbolic link, FIFO, socket or device where the store keeps a file or
//! folder is [`StoreError::Refused`], naming it from the root. Listing passes
//! over an agent folder that is not a folder, and reports metadata it
//! refuses as a warning. A link is never followed, so its target is never
//! read or written; a rename or removal replaces or removes the link itself.
//! See `file/folder.rs`.
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

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::fs::{self, File};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock, TryLockError};
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
    Appended, History, NewSession, Opened, PageRequest, Result, SessionMeta, SessionPage,
    SessionRef, SessionStore, SessionVersion, StoreError, StoreWarning, Tail, TailStart,
    add_channels, check_request_record, error_chain, page_of,
};

mod files;
mod folder;
#[cfg(unix)]
mod journal;
pub(crate) mod memory_log;
mod meta;
mod tail;

use files::*;
pub(crate) use folder::Refusal;
use folder::{Folder, Kind, OpenAs, Stamp};
use meta::*;

/// The version of the metadata file's layout.
const META_VERSION: u32 = 1;

/// How often to reopen a log that is replaced while we wait for its lock.
const OPEN_ATTEMPTS: usize = 64;

/// The clock a store reads `now` from.
type Clock = Arc<dyn Fn() -> DateTime<Utc> + Send + Sync>;

/// The most sessions that keep their files open between appends, however
/// many files the process may open (see [`kept_limit`]).
const MAX_KEPT: usize = 1024;

/// An append written to a kept log, not durable yet: what
/// [`FileStore::finish_kept`] needs once it is.
#[cfg(unix)]
struct KeptWrite {
    /// The session's version before the write.
    before: SessionVersion,
    /// Where the write began in the log.
    end: u64,
    /// How many messages it holds.
    count: u64,
}

/// An append's lines, each checked as the store takes it.
fn encode_lines(session: &SessionRef, messages: &[Message]) -> Result<Vec<u8>> {
    let mut buf = Vec::with_capacity(messages.len() * 512);
    for (i, message) in messages.iter().enumerate() {
        let start = buf.len();
        jsonl::write_line(message, &mut buf);
        crate::storable(session, i, message, &buf[start..buf.len() - 1])?;
    }
    Ok(buf)
}

/// One session's lock in this process (readers share it, a writer holds it
/// alone), with the files its last append kept open.
#[derive(Default)]
struct Slot {
    open: Option<Box<OpenLog>>,
    /// Whether the session is in [`FileStore::kept`] (once at most).
    listed: bool,
}

/// What an append keeps open for the next append to the same session: the
/// session's folder, log and state record, its metadata as the append left
/// it, and what those files were then. The next append takes the log's
/// `flock` and checks, with one `fstatat` each, that the folder, the log
/// (and its length), the metadata file (and its times) and the state record
/// are still those: then nobody wrote in between, in this process or
/// another, and the metadata needs no reading. Anything else, and it goes
/// the whole way (open, lock, read, repair).
struct OpenLog {
    loc: Location,
    dir: Folder,
    log: File,
    state: File,
    meta: MetaFile,
    folder_stamp: Stamp,
    /// The log, with its length after the last append.
    log_stamp: Stamp,
    meta_stamp: Stamp,
    state_stamp: Stamp,
    /// The names of the log, metadata and state record in the folder.
    names: [String; 3],
}

/// The file store; see the module docs for the layout and the guarantees.
pub struct FileStore {
    root: PathBuf,
    sessions: PathBuf,
    /// The `sessions` folder, held open: every session's folder is opened
    /// from it, never through a link.
    sessions_dir: Folder,
    clock: Clock,
    /// One lock per session log, by path.
    locks: Mutex<HashMap<PathBuf, Arc<RwLock<Slot>>>>,
    /// The logs whose slot is listed as keeping files open, oldest first;
    /// past `max_kept` of them the oldest are closed.
    kept: Mutex<VecDeque<PathBuf>>,
    /// How many sessions may keep their files open.
    max_kept: usize,
    /// The lock of each session id whose files were kept, for the next
    /// append by id to find them with no path to build.
    kept_ids: Mutex<HashMap<Uuid, Arc<RwLock<Slot>>>>,
    /// Where each session id seen so far lives.
    ids: Mutex<HashMap<Uuid, Location>>,
    /// Group commit across sessions, when asked for
    /// ([`FileStore::with_group_commit`]).
    #[cfg(unix)]
    journal: Option<journal::Journal>,
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

/// Where a session's files are: its agent's folder (its path, and its name
/// in `sessions/`) and its file name.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Location {
    dir: PathBuf,
    folder: String,
    name: String,
}

/// The suffixes of a session's files after its name.
const LOG: &str = ".jsonl";
const META: &str = ".meta.json";
const BACKUP: &str = ".meta.json.bak";
const SIDECAR: &str = ".jsonl.corrupt";
const STATE: &str = ".state";
const MEDIA: &str = "_media";
const REQUESTS: &str = "_requests";

/// The name of the request records' folder of session `id` at `loc`.
fn requests_folder(loc: &Location, id: Uuid) -> String {
    format!("{}{REQUESTS}-{id}", loc.name)
}

impl Location {
    /// The session's file with `suffix`, by its name in the agent's folder.
    fn file(&self, suffix: &str) -> String {
        format!("{}{suffix}", self.name)
    }
    fn path(&self, suffix: &str) -> PathBuf {
        self.dir.join(self.file(suffix))
    }
    fn log(&self) -> PathBuf {
        self.path(LOG)
    }
    fn meta(&self) -> PathBuf {
        self.path(META)
    }
    fn backup(&self) -> PathBuf {
        self.path(BACKUP)
    }
    fn sidecar(&self) -> PathBuf {
        self.path(SIDECAR)
    }
    fn state(&self) -> PathBuf {
        self.path(STATE)
    }
    fn media(&self) -> PathBuf {
        self.path(MEDIA)
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

/// Whether `log` holds only NUL bytes from `at` to `len`: what a crash
/// leaves where the file's size was made durable and its data was not.
#[cfg(unix)]
fn zeros_from(log: &File, at: u64, len: u64) -> io::Result<bool> {
    use std::os::unix::fs::FileExt;
    let mut block = vec![0u8; 64 << 10];
    let mut from = at;
    while from < len {
        let n = usize::try_from((len - from).min(block.len() as u64)).unwrap_or(block.len());
        log.read_exact_at(&mut block[..n], from)?;
        if block[..n].iter().any(|&b| b != 0) {
            return Ok(false);
        }
        from += n as u64;
    }
    Ok(true)
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
    /// A clear under way: this is the cleared session's metadata already;
    /// its log, sidecar and media are still to be emptied, by the clear or,
    /// should it crash first, by the next writer.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    clearing: bool,
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
    /// The session's folder.
    dir: Folder,
    log: File,
    meta: MetaFile,
    ctx: &'a str,
    /// Set by an append that left the log, metadata and state record
    /// consistent: its files are kept open for the next append.
    keep: bool,
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
    ///
    /// Links in `root` itself are followed (it is the user's); nothing
    /// beneath it is: see [`StoreError::Refused`].
    pub fn open(root: impl AsRef<Path>) -> Result<Self> {
        let root = root.as_ref().to_path_buf();
        let sessions = root.join("sessions");
        create_private_dir(&root)
            .map_err(|e| io_error("cannot create the store folder", &root, e))?;
        let sessions_dir = Folder::root(&root)
            .and_then(|root| {
                root.create_folder("sessions")?;
                root.folder("sessions")
            })
            .map_err(|e| io_error("cannot open the store folder", &sessions, e))?;
        Ok(FileStore {
            root,
            sessions,
            sessions_dir,
            clock: Arc::new(Utc::now),
            locks: Mutex::default(),
            kept: Mutex::default(),
            max_kept: kept_limit(),
            kept_ids: Mutex::default(),
            ids: Mutex::default(),
            #[cfg(unix)]
            journal: None,
        })
        .and_then(|store| {
            #[cfg(unix)]
            store.recover()?;
            Ok(store)
        })
    }

    /// Acknowledges appends by group commit across sessions: each append's
    /// lines go to its log unsynced and to this process's journal, and one
    /// write and `fdatasync` of the journal makes every append waiting at
    /// that moment durable, whatever their sessions (see `file/journal.rs`).
    /// For a process that appends to many sessions at once: the server.
    /// Elsewhere (not Unix) the store is returned as it is.
    ///
    /// A journal whose process is gone is replayed by the next
    /// [`FileStore::open`] of the same folder, in any process.
    pub fn with_group_commit(mut self) -> Result<Self> {
        #[cfg(unix)]
        {
            let path = self.root.join(journal::FOLDER);
            let made = Folder::root(&self.root)
                .and_then(|root| {
                    root.create_folder(journal::FOLDER)?;
                    root.folder(journal::FOLDER)
                })
                .and_then(journal::Journal::create);
            self.journal = Some(made.map_err(|e| io_error("cannot make the journal", &path, e))?);
        }
        Ok(self)
    }

    /// Makes the bytes just written at `offset` of `log` (the session
    /// `id`'s; `file_id` its device and inode) durable: through the journal
    /// when there is one and they fit a record, else by syncing the log.
    fn make_durable(
        &self,
        log: &File,
        file_id: (u64, u64),
        id: Uuid,
        offset: u64,
        bytes: &[u8],
    ) -> io::Result<()> {
        #[cfg(unix)]
        if let Some(journal) = &self.journal
            && bytes.len() <= journal::MAX_RECORD
        {
            return journal.commit(journal::Entry {
                session: id,
                log,
                file_id,
                offset,
                bytes,
            });
        }
        let _ = (file_id, id, offset, bytes);
        log.sync_data()
    }

    /// Before a log is emptied or removed: no journal record may refer to
    /// its bytes any more.
    fn journal_checkpoint(&self, ctx: &str) -> Result<()> {
        #[cfg(unix)]
        if let Some(journal) = &self.journal {
            journal.checkpoint().map_err(|e| {
                io_error(
                    &format!("{ctx}: cannot sync the journal"),
                    &self.root.join(journal::FOLDER),
                    e,
                )
            })?;
        }
        let _ = ctx;
        Ok(())
    }

    /// Replays the journals of processes that are gone (their lock is
    /// free), then removes them; see `file/journal.rs`. The records of every
    /// such journal are replayed together in log order per session (two
    /// processes may have appended to one session). What cannot be read or
    /// replayed is a warning and stays for the next open: a store folder
    /// with something strange in `journal/` still opens.
    #[cfg(unix)]
    fn recover(&self) -> Result<()> {
        let path = self.root.join(journal::FOLDER);
        let warn = |what: &str, e: &dyn std::fmt::Display| {
            tracing::warn!("{}: recovery: {what}: {e}", path.display());
        };
        let dir = match Folder::root(&self.root).and_then(|root| root.folder(journal::FOLDER)) {
            Ok(dir) => dir,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => {
                warn("cannot open the journal folder", &e);
                return Ok(());
            }
        };
        let entries = match dir.entries() {
            Ok(entries) => entries,
            Err(e) => {
                warn("cannot read the journal folder", &e);
                return Ok(());
            }
        };
        // Dead journals, held locked until they are removed.
        let mut dead = Vec::new();
        let mut records = Vec::new();
        for (name, kind) in entries {
            let Some(name) = name.to_str().filter(|n| journal::is_journal(n)) else {
                continue;
            };
            if kind != Some(Kind::File) {
                continue;
            }
            let opened = dir.open(name, OpenAs::Read).and_then(|file| {
                let len = file.metadata()?.len();
                Ok((file, len))
            });
            let (file, len) = match opened {
                Ok(opened) => opened,
                Err(e) => {
                    warn(&format!("cannot open {name}"), &e);
                    continue;
                }
            };
            match file.try_lock() {
                Ok(()) => {}
                // Its process is alive.
                Err(std::fs::TryLockError::WouldBlock) => continue,
                Err(std::fs::TryLockError::Error(e)) => {
                    warn(&format!("cannot lock {name}"), &e);
                    continue;
                }
            }
            if len > journal::CAPACITY {
                warn(
                    name,
                    &format!("{len} bytes, more than a journal holds; not replayed"),
                );
                continue;
            }
            if name.ends_with(".wal") {
                match read_all(&file) {
                    Ok(bytes) => records.extend(journal::read(&bytes)),
                    Err(e) => {
                        warn(&format!("cannot read {name}"), &e);
                        continue;
                    }
                }
            }
            dead.push((name.to_owned(), file));
        }
        records.sort_by_key(|r| (r.session, r.offset));
        let mut replayed = true;
        for record in &records {
            if let Err(e) = self.replay(record) {
                warn(
                    &format!(
                        "session {}: the journaled append at byte {}",
                        record.session, record.offset
                    ),
                    &error_chain(&e),
                );
                replayed = false;
            }
        }
        if replayed {
            for (name, _file) in &dead {
                if let Err(e) = dir.remove_file(name) {
                    warn(&format!("cannot remove {name}"), &e);
                }
            }
            if let Err(e) = dir.sync() {
                warn("cannot sync the journal folder", &e);
            }
        }
        Ok(())
    }

    /// Makes one journaled append present in its session's log, and
    /// durable; a log cleared or replaced since is left alone.
    #[cfg(unix)]
    fn replay(&self, record: &journal::Record) -> Result<()> {
        use std::os::unix::fs::{FileExt, MetadataExt};
        let session = SessionRef::Id(record.session);
        let Some((loc, _)) = self.locate(&session)? else {
            tracing::warn!(
                "recovery: session {session} is gone; its journaled append is not replayed"
            );
            return Ok(());
        };
        self.exclusive_at(&loc, &session, |held| {
            let (ctx, path) = (held.ctx, held.loc.log());
            let failed = |e| io_error(&format!("{ctx}: recovery"), &path, e);
            let meta = held.log.metadata().map_err(failed)?;
            let (at, n) = (record.offset, record.bytes.len() as u64);
            if meta.ino() != record.inode || meta.len() < at {
                tracing::warn!(
                    "{}: {ctx}: cleared or replaced since a journaled append at byte {at}; not replayed",
                    path.display()
                );
                return Ok(());
            }
            let have = usize::try_from(meta.len().min(at.saturating_add(n)) - at)
                .unwrap_or(usize::MAX);
            let mut found = vec![0; have];
            held.log.read_exact_at(&mut found, at).map_err(failed)?;
            if found == record.bytes[..have] {
                if have < record.bytes.len() {
                    (&held.log).write_all(&record.bytes[have..]).map_err(failed)?;
                }
            } else if meta.len() <= at.saturating_add(n) || zeros_from(&held.log, at, meta.len()).map_err(failed)? {
                // A torn write of these bytes, or blocks a crash left
                // unwritten (zeros to the end): written again.
                cut(&held.log, at).map_err(failed)?;
                (&held.log).write_all(&record.bytes).map_err(failed)?;
            } else {
                tracing::warn!(
                    "{}: {ctx}: other bytes than a journaled append's at byte {at}; not replayed",
                    path.display()
                );
                return Ok(());
            }
            held.log.sync_data().map_err(failed)
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
    /// A link or anything but a folder in its place is
    /// [`StoreError::Refused`].
    pub fn media_dir(&self, session: &SessionRef) -> Result<PathBuf> {
        let (loc, _) = self.find(session)?;
        let ctx = format!("session {session}");
        let dir = self.folder_of(&loc, &ctx)?;
        let media = loc.media();
        dir.create_folder(loc.file(MEDIA))
            .and_then(|_| dir.folder(loc.file(MEDIA)))
            .map_err(|e| io_error(&format!("{ctx}: cannot create"), &media, e))?;
        Ok(media)
    }

    fn now(&self) -> DateTime<Utc> {
        (self.clock)()
    }

    /// The request records' folder of session `id` at `loc`, `None` when
    /// it has none. A link or anything but a folder in its place is
    /// [`StoreError::Refused`].
    fn request_folder(&self, loc: &Location, id: Uuid, ctx: &str) -> Result<Option<Folder>> {
        let Some(dir) = self.open_folder(loc, ctx)? else {
            return Ok(None);
        };
        let name = requests_folder(loc, id);
        match dir.folder(&name) {
            Ok(records) => Ok(Some(records)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_error(
                &format!("{ctx}: cannot open"),
                &loc.dir.join(&name),
                e,
            )),
        }
    }

    /// Where the sessions of the agent whose folder is `folder` are.
    fn location(&self, folder: String, name: String) -> Location {
        Location {
            dir: self.sessions.join(&folder),
            folder,
            name,
        }
    }

    /// The folder of `loc`, opened from `sessions/` (never through a link);
    /// `None` when it does not exist.
    fn open_folder(&self, loc: &Location, ctx: &str) -> Result<Option<Folder>> {
        match self.sessions_dir.folder(&loc.folder) {
            Ok(dir) => Ok(Some(dir)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_error(&format!("{ctx}: cannot open"), &loc.dir, e)),
        }
    }

    /// The folder of `loc`, which exists.
    fn folder_of(&self, loc: &Location, ctx: &str) -> Result<Folder> {
        self.sessions_dir
            .folder(&loc.folder)
            .map_err(|e| io_error(&format!("{ctx}: cannot open"), &loc.dir, e))
    }

    fn lock_for(&self, loc: &Location) -> Arc<RwLock<Slot>> {
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
        let mut kept = self.kept_ids.lock().unwrap_or_else(PoisonError::into_inner);
        kept.remove(&id);
    }

    /// Where `session` is and its metadata (read without a lock: metadata is
    /// replaced atomically), or `None` when it does not exist.
    fn locate(&self, session: &SessionRef) -> Result<Option<Located>> {
        let ctx = format!("session {session}");
        match session {
            SessionRef::Key { agent, key } => {
                let loc = self.location(file_name(agent), file_name(key));
                let Some(dir) = self.open_folder(&loc, &ctx)? else {
                    return Ok(None);
                };
                let Some(file) = read_session(&dir, &loc, &ctx)? else {
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
                for folder in self.agent_folders()? {
                    let loc = self.location(folder, id.to_string());
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
        let Some(dir) = self.open_folder(&loc, ctx)? else {
            return Ok(None);
        };
        match read_session(&dir, &loc, ctx)? {
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

    /// The names of the agents' folders in `sessions/`: folders only, a
    /// link (or anything else) is passed over.
    fn agent_folders(&self) -> Result<Vec<String>> {
        let entries = self
            .sessions_dir
            .entries()
            .map_err(|e| io_error("cannot read the store folder", &self.sessions, e))?;
        Ok(entries
            .into_iter()
            .filter(|(_, kind)| *kind == Some(Kind::Folder))
            .filter_map(|(name, _)| name.into_string().ok())
            .collect())
    }

    /// Every session's metadata (of one agent, when given), reading nothing
    /// but metadata files; unreadable ones become warnings.
    fn walk(&self, agent: Option<&str>) -> Result<(Vec<Located>, Vec<StoreWarning>)> {
        let folders = match agent {
            Some(agent) => vec![file_name(agent)],
            None => self.agent_folders()?,
        };
        let mut found = Vec::new();
        let mut warnings = Vec::new();
        let mut not_listed = |path: PathBuf, e: &StoreError| {
            let warning = StoreWarning {
                path,
                line: None,
                offset: None,
                detail: format!("not listed: {}", error_chain(e)),
            };
            tracing::warn!("{warning}");
            warnings.push(warning);
        };
        for folder in folders {
            let at = self.location(folder, String::new());
            let listed = self.sessions_dir.folder(&at.folder).and_then(|dir| {
                let entries = dir.entries()?;
                Ok((dir, entries))
            });
            let (dir, entries) = match listed {
                Ok(listed) => listed,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => match io_error("cannot list sessions in", &at.dir, e) {
                    e @ StoreError::Refused { .. } => {
                        not_listed(at.dir, &e);
                        continue;
                    }
                    e => return Err(e),
                },
            };
            for (file_name, _) in entries {
                let Some(name) = file_name
                    .to_str()
                    .filter(|n| !n.starts_with('.'))
                    .and_then(|n| n.strip_suffix(META))
                else {
                    continue;
                };
                let loc = self.location(at.folder.clone(), name.to_owned());
                match read_session(&dir, &loc, "listing sessions") {
                    Ok(Some(file)) => {
                        if agent.is_none_or(|a| a == file.meta.agent) {
                            self.remember(file.meta.id, &loc);
                            found.push((loc, file.meta));
                        }
                    }
                    // Deleted since the folder was read.
                    Ok(None) => {}
                    Err(e) => not_listed(loc.meta(), &e),
                }
            }
        }
        Ok((found, warnings))
    }

    /// Opens and `flock`s the log at `loc` in `dir`, making sure its name
    /// still names the locked file; `None` when there is no log.
    fn open_log(
        &self,
        dir: &Folder,
        loc: &Location,
        access: Access,
        ctx: &str,
    ) -> Result<Option<File>> {
        let path = loc.log();
        let name = loc.file(LOG);
        let how = match access {
            Access::Read => OpenAs::Read,
            Access::Write { create } => OpenAs::Append { create },
        };
        for _ in 0..OPEN_ATTEMPTS {
            let file = match dir.open(&name, how) {
                Ok(file) => file,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(io_error(&format!("{ctx}: cannot open"), &path, e)),
            };
            let locked = match access {
                Access::Read => file.lock_shared(),
                Access::Write { .. } => file.lock(),
            };
            locked.map_err(|e| io_error(&format!("{ctx}: cannot lock"), &path, e))?;
            if dir
                .holds(&name, &file)
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
        let mut slot = lock.write().unwrap_or_else(PoisonError::into_inner);
        // Whatever this does, the next append looks at the files afresh.
        slot.open = None;
        let dir = self
            .open_folder(loc, &ctx)?
            .ok_or_else(|| StoreError::NotFound(session.clone()))?;
        let log = match self.open_log(&dir, loc, Access::Write { create: false }, &ctx)? {
            Some(log) => log,
            // Metadata without a log (removed by hand): an empty log is the truth.
            None if dir
                .exists(loc.file(META))
                .map_err(|e| io_error(&format!("{ctx}: cannot read"), &loc.meta(), e))? =>
            {
                self.open_log(&dir, loc, Access::Write { create: true }, &ctx)?
                    .ok_or_else(|| StoreError::NotFound(session.clone()))?
            }
            None => return Err(StoreError::NotFound(session.clone())),
        };
        let meta =
            read_session(&dir, loc, &ctx)?.ok_or_else(|| StoreError::NotFound(session.clone()))?;
        if !session.matches(&meta.meta) {
            check_identity(session, loc, &meta.meta)?;
            return Err(StoreError::NotFound(session.clone()));
        }
        let mut held = Held {
            loc,
            dir,
            log,
            meta,
            ctx: &ctx,
            keep: false,
        };
        if held.meta.clearing {
            // A clear that crashed after its metadata: finished first.
            self.finish_clear(&mut held)?;
        }
        let out = f(&mut held)?;
        if held.keep {
            self.keep(&lock, &mut slot, held);
        }
        Ok(out)
    }

    /// Keeps the files of `held`, which an append just wrote consistently,
    /// open in its `slot` for the next append (unless they cannot be
    /// stamped, or the store keeps none).
    fn keep(&self, lock: &Arc<RwLock<Slot>>, slot: &mut Slot, held: Held<'_>) {
        #[cfg(unix)]
        {
            let Held {
                loc,
                dir,
                log,
                meta,
                ..
            } = held;
            if self.max_kept == 0
                || meta.from_backup
                || meta.clearing
                || meta.state != StateNote::Used
            {
                return;
            }
            let open = (|| -> io::Result<Option<OpenLog>> {
                // Stamped under the lock: what this append left.
                let Some(meta_stamp) = dir.stamp(loc.file(META))? else {
                    return Ok(None);
                };
                let state = dir.open(loc.file(STATE), OpenAs::Write)?;
                let open = OpenLog {
                    loc: loc.clone(),
                    names: [loc.file(LOG), loc.file(META), loc.file(STATE)],
                    folder_stamp: dir.own_stamp()?,
                    log_stamp: Stamp::of(&log)?,
                    state_stamp: Stamp::of(&state)?,
                    meta_stamp,
                    dir,
                    log,
                    state,
                    meta,
                };
                // Held open, the log must not stay locked (dropped, the
                // close would have released it).
                open.log.unlock()?;
                Ok(Some(open))
            })();
            if let Ok(Some(open)) = open {
                let id = open.meta.meta.id;
                slot.open = Some(Box::new(open));
                self.kept_ids
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(id, lock.clone());
                if !std::mem::replace(&mut slot.listed, true) {
                    self.list(loc.log());
                }
            }
        }
        #[cfg(not(unix))]
        let _ = (lock, slot, held);
    }

    /// Lists `log` as keeping its files open, and closes those of the
    /// oldest listed sessions past the limit (a session in use is passed
    /// over: it is closed later).
    fn list(&self, log: PathBuf) {
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        kept.push_back(log);
        let mut turns = kept.len();
        while kept.len() > self.max_kept && turns > 0 {
            turns -= 1;
            let Some(oldest) = kept.pop_front() else {
                break;
            };
            let lock = {
                let locks = self.locks.lock().unwrap_or_else(PoisonError::into_inner);
                locks.get(&oldest).cloned()
            };
            let Some(lock) = lock else { continue };
            let mut slot = match lock.try_write() {
                Ok(slot) => slot,
                Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
                Err(TryLockError::WouldBlock) => {
                    kept.push_back(oldest);
                    continue;
                }
            };
            slot.open = None;
            slot.listed = false;
        }
    }

    /// The lock of `session` when its files may be kept open: that of the
    /// id's kept files, the one of the file name a key maps to.
    fn kept_lock(&self, session: &SessionRef) -> Option<Arc<RwLock<Slot>>> {
        match session {
            SessionRef::Id(id) => {
                let kept = self.kept_ids.lock().unwrap_or_else(PoisonError::into_inner);
                kept.get(id).cloned()
            }
            SessionRef::Key { agent, key } => {
                Some(self.lock_for(&self.location(file_name(agent), file_name(key))))
            }
        }
    }

    /// Appends `buf` (`count` messages) through the files the last append
    /// kept open, if nobody wrote since: `Ok(None)` when something changed
    /// (the caller drops them and goes the whole way). Takes the log's
    /// exclusive `flock`, which the caller releases.
    #[cfg(unix)]
    fn append_kept(
        &self,
        open: &mut OpenLog,
        session: &SessionRef,
        messages: &[Message],
        buf: &[u8],
    ) -> Result<Option<Appended>> {
        let Some(written) = self.write_kept(open, session, messages, buf)? else {
            return Ok(None);
        };
        let durable = self.make_durable(
            &open.log,
            open.log_stamp.file_id(),
            open.meta.meta.id,
            written.end,
            buf,
        );
        if let Err(e) = durable {
            // Never leave half a turn for the next append to glue onto.
            let _ = cut(&open.log, written.end);
            let path = open.loc.log();
            return Err(io_error(
                &format!("session {session}: cannot append to"),
                &path,
                e,
            ));
        }
        Ok(Some(self.finish_kept(open, written, buf.len())))
    }

    /// The first half of [`FileStore::append_kept`]: the checks, the lock
    /// and the write of `buf` to the log, not synced. `Ok(None)` when
    /// something changed.
    #[cfg(unix)]
    fn write_kept(
        &self,
        open: &mut OpenLog,
        session: &SessionRef,
        messages: &[Message],
        buf: &[u8],
    ) -> Result<Option<KeptWrite>> {
        if !session.matches(&open.meta.meta) || open.meta.meta.lacks_channels_of(messages) {
            return Ok(None);
        }
        // Made only for an error: an append that goes well formats nothing.
        let failed =
            |what: &str, path: &Path, e| io_error(&format!("session {session}: {what}"), path, e);
        open.log
            .lock()
            .map_err(|e| failed("cannot lock", &open.loc.log(), e))?;
        let unchanged = self
            .kept_unchanged(open)
            .map_err(|e| failed("cannot check", &open.loc.log(), e))?;
        if !unchanged {
            return Ok(None);
        }
        let end = open.log_stamp.len;
        if let Err(e) = (&open.log).write_all(buf) {
            let _ = cut(&open.log, end);
            return Err(failed("cannot append to", &open.loc.log(), e));
        }
        Ok(Some(KeptWrite {
            before: open.meta.meta.version(),
            end,
            count: messages.len() as u64,
        }))
    }

    /// The second half, once the write is durable: the kept metadata and
    /// the state record brought up to date.
    #[cfg(unix)]
    fn finish_kept(&self, open: &mut OpenLog, written: KeptWrite, len: usize) -> Appended {
        open.log_stamp.len = written.end + len as u64;
        let meta = &mut open.meta.meta;
        meta.message_count += written.count;
        meta.updated = meta.updated.max(self.now());
        // The messages are durable: a failed refresh only delays the count,
        // which the next load reconciles from the log.
        if let Err(e) = overwrite_state(&open.state, meta, false) {
            let path = open.loc.state();
            let e = io_error(
                &format!("session {}: cannot write the state record", meta.id),
                &path,
                e,
            );
            tracing::warn!("{}", error_chain(&e));
        }
        Appended {
            before: written.before,
            meta: meta.clone(),
        }
    }

    /// [`SessionStore::append_many`] through the journal: every item whose
    /// session keeps its files open is written to its log under its lock,
    /// all of them are journaled as one group, and the locks are released
    /// once it is durable. The other items (a session's first append, a new
    /// channel, a second item of one session, an append too large for a
    /// record, a log another process holds) go the single way after, in
    /// their order.
    #[cfg(unix)]
    fn append_journaled(
        &self,
        journal: &journal::Journal,
        items: &[(SessionRef, &[Message])],
    ) -> Vec<Result<Appended>> {
        let mut results: Vec<Option<Result<Appended>>> = items.iter().map(|_| None).collect();
        let mut lines = vec![Vec::new(); items.len()];
        let mut kept = Vec::new();
        for (i, (session, messages)) in items.iter().enumerate() {
            match encode_lines(session, messages) {
                Ok(buf) => {
                    if !messages.is_empty()
                        && buf.len() <= journal::MAX_RECORD
                        && let Some(lock) = self.kept_lock(session)
                    {
                        kept.push((i, lock));
                    }
                    lines[i] = buf;
                }
                Err(e) => results[i] = Some(Err(e)),
            }
        }
        // One order of taking locks for every caller (no two batches wait
        // on each other), and one write per session in a batch.
        kept.sort_by_key(|(i, lock)| (Arc::as_ptr(lock) as usize, *i));
        kept.dedup_by_key(|(_, lock)| Arc::as_ptr(lock) as usize);
        let mut held = Vec::with_capacity(kept.len());
        for (i, lock) in &kept {
            let mut slot = lock.write().unwrap_or_else(PoisonError::into_inner);
            let Some(open) = slot.open.as_deref_mut() else {
                continue;
            };
            // Another process may hold this log while it waits for one this
            // batch holds: a batch never waits for a log's `flock`; a busy
            // one goes the single way after, when this batch holds nothing.
            if open.log.try_lock().is_err() {
                continue;
            }
            let (session, messages) = &items[*i];
            match self.write_kept(open, session, messages, &lines[*i]) {
                Ok(Some(written)) => held.push((*i, slot, written)),
                Ok(None) => {
                    let _ = open.log.unlock();
                    slot.open = None;
                }
                Err(e) => {
                    let _ = open.log.unlock();
                    slot.open = None;
                    results[*i] = Some(Err(e));
                }
            }
        }
        if !held.is_empty() {
            let entries: Vec<journal::Entry<'_>> = held
                .iter()
                .map(|(i, slot, written)| {
                    let open = slot.open.as_deref().expect("a written slot stays open");
                    journal::Entry {
                        session: open.meta.meta.id,
                        log: &open.log,
                        file_id: open.log_stamp.file_id(),
                        offset: written.end,
                        bytes: &lines[*i],
                    }
                })
                .collect();
            let committed = journal.commit_all(&entries);
            drop(entries);
            for (i, mut slot, written) in held {
                let open = slot.open.as_deref_mut().expect("a written slot stays open");
                let result = match &committed {
                    Ok(()) => Ok(self.finish_kept(open, written, lines[i].len())),
                    Err(e) => {
                        // Never leave half a turn for the next append to
                        // glue onto.
                        let _ = cut(&open.log, written.end);
                        let path = open.loc.log();
                        let e = io::Error::new(e.kind(), e.to_string());
                        Err(io_error(
                            &format!("session {}: cannot append to", items[i].0),
                            &path,
                            e,
                        ))
                    }
                };
                if let Err(e) = open.log.unlock() {
                    // Closing the log releases it.
                    tracing::warn!(
                        "{}: session {}: cannot unlock: {e}; closed",
                        open.loc.log().display(),
                        items[i].0
                    );
                    slot.open = None;
                } else if result.is_err() {
                    slot.open = None;
                }
                results[i] = Some(result);
            }
        }
        items
            .iter()
            .zip(results)
            .map(|((session, messages), result)| {
                result.unwrap_or_else(|| self.append_versioned(session, messages))
            })
            .collect()
    }

    /// Whether the files `open` holds are still the session's, as its last
    /// append left them.
    #[cfg(unix)]
    fn kept_unchanged(&self, open: &OpenLog) -> io::Result<bool> {
        let same = |found: Option<Stamp>, kept: &Stamp| found.is_some_and(|s| s.same_file(kept));
        let [log, meta, state] = &open.names;
        Ok(same(
            self.sessions_dir.stamp(&open.loc.folder)?,
            &open.folder_stamp,
        ) && open
            .dir
            .stamp(log)?
            .is_some_and(|s| s.same_file(&open.log_stamp) && s.len == open.log_stamp.len)
            && open.dir.stamp(meta)? == Some(open.meta_stamp)
            && same(open.dir.stamp(state)?, &open.state_stamp))
    }

    /// Empties the held session's log, sidecar and media under its
    /// metadata marked `clearing` (durable already), then writes the
    /// metadata unmarked. A crash anywhere in here leaves the marked
    /// metadata, so the session reads as cleared and the next writer
    /// finishes the job: no old message, no old checkpoint comes back.
    fn finish_clear(&self, held: &mut Held<'_>) -> Result<()> {
        let ctx = held.ctx;
        let loc = held.loc;
        self.journal_checkpoint(ctx)?;
        cut(&held.log, 0).map_err(|e| io_error(&format!("{ctx}: cannot clear"), &loc.log(), e))?;
        crash_point();
        held.dir
            .remove_file_if_exists(loc.file(SIDECAR))
            .map_err(|e| io_error(&format!("{ctx}: cannot delete"), &loc.sidecar(), e))?;
        crash_point();
        held.dir
            .remove_tree_if_exists(loc.file(MEDIA))
            .map_err(|e| io_error(&format!("{ctx}: cannot delete"), &loc.media(), e))?;
        sync_dir(&held.dir, &loc.dir, ctx)?;
        crash_point();
        held.meta.clearing = false;
        self.write_meta(&held.dir, loc, &held.meta, ctx)
    }

    /// Replaces the metadata atomically and durably: the state record first
    /// (in place, synced), then the backup, then the metadata, each written
    /// whole to a temporary file, `fsync`ed and `rename`d over, and the
    /// folder `fsync`ed. The backup is a file of its own, never a link to the
    /// metadata's inode: damage to one (a truncation, a page a crash left
    /// unwritten) never reaches the other. Metadata marked `clearing` leaves
    /// the record alone: readers do not use it then, and the unmarked write
    /// that ends the clear rewrites it before the metadata.
    fn write_meta(&self, dir: &Folder, loc: &Location, file: &MetaFile, ctx: &str) -> Result<()> {
        if !file.clearing {
            write_state(dir, loc, &file.meta, true, ctx)?;
            crash_point();
        }
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let path = loc.meta();
        // A leading dot: never taken for a session, and no key makes one.
        let tmp = |what: &str| {
            format!(
                ".{}.{what}.{}-{}.tmp",
                loc.name,
                std::process::id(),
                COUNTER.fetch_add(1, Ordering::Relaxed)
            )
        };
        let (tmp, backup_tmp) = (tmp("meta.json"), tmp("meta.json.bak"));
        let mut bytes = serde_json::to_vec_pretty(file).expect("metadata serializes");
        bytes.push(b'\n');
        let write_new = |target: &str| -> io::Result<()> {
            let mut out = dir.open(target, OpenAs::CreateNew)?;
            out.write_all(&bytes)?;
            out.sync_all()
        };
        let written = (|| {
            // The backup first: a crash between the renames leaves a
            // newer backup and an older, whole, metadata file.
            write_new(&backup_tmp)?;
            dir.rename(&backup_tmp, loc.file(BACKUP))?;
            crash_point();
            write_new(&tmp)?;
            dir.rename(&tmp, loc.file(META))
        })();
        if let Err(e) = written {
            let _ = dir.remove_file(&tmp);
            let _ = dir.remove_file(&backup_tmp);
            return Err(io_error(&format!("{ctx}: cannot write metadata"), &path, e));
        }
        crash_point();
        sync_dir(dir, &loc.dir, ctx)
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
        let created = self
            .sessions_dir
            .create_folder(&loc.folder)
            .map_err(|e| io_error(&format!("{ctx}: cannot create"), &loc.dir, e))?;
        if created {
            sync_dir(&self.sessions_dir, &self.sessions, &ctx)?;
        }
        let dir = self.folder_of(loc, &ctx)?;
        let lock = self.lock_for(loc);
        let mut slot = lock.write().unwrap_or_else(PoisonError::into_inner);
        slot.open = None;
        let log = self
            .open_log(&dir, loc, Access::Write { create: true }, &ctx)?
            .ok_or_else(|| StoreError::NotFound(session.clone()))?;
        if let Some(existing) = read_session(&dir, loc, &ctx)? {
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
            let (messages, _) = self.inspect(&dir, loc, &log, true, &ctx)?;
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
            channels: Vec::new(),
        };
        let mut meta = meta;
        add_channels(&mut meta.channels, new.channel.as_deref());
        let file = MetaFile {
            version: META_VERSION,
            meta,
            extra: Map::new(),
            clearing: false,
            from_backup: false,
            state: StateNote::Used,
        };
        self.write_meta(&dir, loc, &file, &ctx)?;
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
        dir: &Folder,
        loc: &Location,
        log: &File,
        repair: bool,
        ctx: &str,
    ) -> Result<(Vec<Message>, Vec<StoreWarning>)> {
        let bytes =
            read_all(log).map_err(|e| io_error(&format!("{ctx}: cannot read"), &loc.log(), e))?;
        let scan = records::scan(&bytes);
        if repair {
            self.quarantine(dir, loc, &bytes, &scan.findings, ctx)?;
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
        dir: &Folder,
        loc: &Location,
        log: &[u8],
        findings: &[Finding],
        ctx: &str,
    ) -> Result<()> {
        let path = loc.sidecar();
        let existing = match dir.read(loc.file(SIDECAR)) {
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
            let mut out = dir.open(loc.file(SIDECAR), OpenAs::Append { create: true })?;
            if index.whole_len < existing.len() {
                // A torn entry of our own: its bytes are still in the log.
                out.set_len(index.whole_len as u64)?;
            }
            out.write_all(&entries)?;
            out.sync_data()
        })();
        written.map_err(|e| io_error(&format!("{ctx}: cannot quarantine bytes to"), &path, e))?;
        if existing.is_empty() {
            sync_dir(dir, &loc.dir, ctx)?;
        }
        Ok(())
    }

    /// Whether every quarantined finding is in the sidecar already.
    fn quarantined_already(
        &self,
        dir: &Folder,
        loc: &Location,
        findings: &[&Finding],
        log: &[u8],
        ctx: &str,
    ) -> Result<bool> {
        if findings.is_empty() {
            return Ok(true);
        }
        let path = loc.sidecar();
        let existing = match dir.read(loc.file(SIDECAR)) {
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
        self.quarantine(
            &held.dir,
            held.loc,
            &bytes,
            std::slice::from_ref(&tail),
            ctx,
        )?;
        cut(&held.log, tail.bytes.start as u64)
            .map_err(|e| io_error(&format!("{ctx}: cannot cut the torn tail of"), &path, e))?;
        tracing::warn!("{}", warning_for(held.loc, &tail));
        Ok(())
    }

    /// The load of `session` under a shared lock, or `None` when the log
    /// needs a repair (or its count a correction) first.
    fn load_shared(&self, loc: &Location, session: &SessionRef) -> Result<Option<History>> {
        let ctx = format!("session {session}");
        let Some(dir) = self.open_folder(loc, &ctx)? else {
            return Ok(None);
        };
        let Some(log) = self.open_log(&dir, loc, Access::Read, &ctx)? else {
            return Ok(None);
        };
        let Some(file) = read_session(&dir, loc, &ctx)? else {
            return Err(StoreError::NotFound(session.clone()));
        };
        if !session.matches(&file.meta) {
            return Err(StoreError::NotFound(session.clone()));
        }
        if file.clearing {
            return Ok(None);
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
            || !self.quarantined_already(&dir, loc, &to_quarantine, &bytes, &ctx)?
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
        let Some(dir) = self.open_folder(loc, &ctx)? else {
            return Ok(None);
        };
        let Some(log) = self.open_log(&dir, loc, Access::Read, &ctx)? else {
            return Ok(None);
        };
        let Some(file) = read_session(&dir, loc, &ctx)? else {
            return Err(StoreError::NotFound(session.clone()));
        };
        if !session.matches(&file.meta) {
            return Err(StoreError::NotFound(session.clone()));
        }
        if file.clearing || file.from_backup || file.state != StateNote::Used {
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
        if !self.sidecar_holds(&dir, loc, &read.findings, &ctx)? {
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
    fn sidecar_holds(
        &self,
        dir: &Folder,
        loc: &Location,
        findings: &[tail::Found],
        ctx: &str,
    ) -> Result<bool> {
        let mut quarantined = findings.iter().filter(|(f, _)| f.quarantined()).peekable();
        if quarantined.peek().is_none() {
            return Ok(true);
        }
        let path = loc.sidecar();
        let existing = match dir.read(loc.file(SIDECAR)) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(io_error(&format!("{ctx}: cannot read"), &path, e)),
        };
        let index = SidecarIndex::parse(&existing);
        Ok(quarantined.all(|(f, bytes)| index.holds_bytes(f.bytes.start as u64, bytes)))
    }

    /// Deletes the held session: metadata first, then the rest.
    /// Links among the files are removed, never followed.
    fn remove_held(&self, held: &Held<'_>) -> Result<()> {
        let (ctx, loc, dir) = (held.ctx, held.loc, &held.dir);
        self.journal_checkpoint(ctx)?;
        dir.remove_file(loc.file(META))
            .map_err(|e| io_error(&format!("{ctx}: cannot delete"), &loc.meta(), e))?;
        sync_dir(dir, &loc.dir, ctx)?;
        self.forget(held.meta.meta.id);
        for suffix in [LOG, STATE, SIDECAR, BACKUP] {
            dir.remove_file_if_exists(loc.file(suffix))
                .map_err(|e| io_error(&format!("{ctx}: cannot delete"), &loc.path(suffix), e))?;
        }
        dir.remove_tree_if_exists(loc.file(MEDIA))
            .map_err(|e| io_error(&format!("{ctx}: cannot delete"), &loc.media(), e))?;
        let requests = requests_folder(loc, held.meta.meta.id);
        dir.remove_tree_if_exists(&requests).map_err(|e| {
            io_error(
                &format!("{ctx}: cannot delete"),
                &loc.dir.join(&requests),
                e,
            )
        })?;
        sync_dir(dir, &loc.dir, ctx)
    }
}

impl SessionStore for FileStore {
    fn create(&self, new: &NewSession) -> Result<SessionMeta> {
        new.validate()?;
        let id = Uuid::new_v4();
        let loc = self.location(
            file_name(&new.agent),
            new.key.as_deref().map_or_else(|| id.to_string(), file_name),
        );
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
        let loc = self.location(
            file_name(&new.agent),
            file_name(new.key.as_deref().unwrap_or_default()),
        );
        self.create_at(&loc, new, Uuid::new_v4(), true)
    }

    fn get(&self, session: &SessionRef) -> Result<Option<SessionMeta>> {
        Ok(self.locate(session)?.map(|(_, meta)| meta))
    }

    /// In three steps: created (empty) with the id, the messages appended,
    /// then the times and checkpoints written with the metadata. A copier
    /// that is interrupted finds the session short, and copies it again.
    fn import(&self, meta: &SessionMeta, messages: &[Message]) -> Result<SessionMeta> {
        let new = NewSession::from(meta);
        new.validate()?;
        if self.locate(&meta.reference())?.is_some() {
            return Err(StoreError::AlreadyExists(meta.reference()));
        }
        let loc = self.location(
            file_name(&new.agent),
            new.key
                .as_deref()
                .map_or_else(|| meta.id.to_string(), file_name),
        );
        self.create_at(&loc, &new, meta.id, false)?;
        let session = meta.reference();
        self.append(&session, messages)?;
        self.exclusive(&session, |held| {
            let stored = &mut held.meta.meta;
            stored.created = meta.created;
            stored.updated = meta.updated;
            stored.checkpoints = meta.checkpoints.clone();
            add_channels(
                &mut stored.channels,
                meta.channels.iter().map(String::as_str),
            );
            self.write_meta(&held.dir, held.loc, &held.meta, held.ctx)?;
            Ok(held.meta.meta.clone())
        })
    }

    fn append(&self, session: &SessionRef, messages: &[Message]) -> Result<SessionMeta> {
        self.append_versioned(session, messages)
            .map(|appended| appended.meta)
    }

    /// Through the files the session's last append kept open when nothing
    /// changed since (see `OpenLog`), else the whole way: open, lock,
    /// read the metadata, mend a torn tail, write, sync, refresh the state
    /// record, and keep the files open for the next one.
    fn append_many(&self, items: &[(SessionRef, &[Message])]) -> Vec<Result<Appended>> {
        #[cfg(unix)]
        if let Some(journal) = &self.journal {
            return self.append_journaled(journal, items);
        }
        items
            .iter()
            .map(|(session, messages)| self.append_versioned(session, messages))
            .collect()
    }

    fn appends_together(&self) -> bool {
        #[cfg(unix)]
        return self.journal.is_some();
        #[cfg(not(unix))]
        false
    }

    fn append_versioned(&self, session: &SessionRef, messages: &[Message]) -> Result<Appended> {
        let buf = encode_lines(session, messages)?;
        #[cfg(unix)]
        if !messages.is_empty()
            && let Some(lock) = self.kept_lock(session)
        {
            let mut slot = lock.write().unwrap_or_else(PoisonError::into_inner);
            if let Some(open) = slot.open.as_deref_mut() {
                let appended = self.append_kept(open, session, messages, &buf);
                let unlocked = open.log.unlock();
                match appended {
                    Ok(Some(appended)) => {
                        if let Err(e) = unlocked {
                            // Closing the log releases it.
                            tracing::warn!(
                                "{}: session {session}: cannot unlock: {e}; closed",
                                open.loc.log().display()
                            );
                            slot.open = None;
                        }
                        return Ok(appended);
                    }
                    Ok(None) => slot.open = None,
                    Err(e) => {
                        slot.open = None;
                        return Err(e);
                    }
                }
            }
        }
        self.exclusive(session, |held| {
            let before = held.meta.meta.version();
            if messages.is_empty() {
                return Ok(Appended {
                    before,
                    meta: held.meta.meta.clone(),
                });
            }
            self.mend_tail(held)?;
            // A new channel is written with the metadata before the
            // messages: a failed append leaves it listed, never a message
            // whose channel the listing misses.
            if held.meta.meta.add_channels_of(messages) {
                self.write_meta(&held.dir, held.loc, &held.meta, held.ctx)?;
            }
            let path = held.loc.log();
            let ctx = held.ctx;
            let stat = held
                .log
                .metadata()
                .map_err(|e| io_error(&format!("{ctx}: cannot read"), &path, e))?;
            let end = stat.len();
            #[cfg(unix)]
            let file_id = {
                use std::os::unix::fs::MetadataExt;
                (stat.dev(), stat.ino())
            };
            #[cfg(not(unix))]
            let file_id = (0, 0);
            let id = held.meta.meta.id;
            let written = (&held.log)
                .write_all(&buf)
                .and_then(|()| self.make_durable(&held.log, file_id, id, end, &buf));
            if let Err(e) = written {
                // Never leave half a turn for the next append to glue onto.
                let _ = cut(&held.log, end);
                return Err(io_error(&format!("{ctx}: cannot append to"), &path, e));
            }
            let meta = &mut held.meta.meta;
            meta.message_count += messages.len() as u64;
            meta.updated = meta.updated.max(self.now());
            // The messages are durable: a failed refresh only delays the
            // count, which the next load reconciles from the log.
            match write_state(&held.dir, held.loc, meta, false, ctx) {
                Ok(()) => held.keep = true,
                Err(e) => tracing::warn!("{}", error_chain(&e)),
            }
            Ok(Appended {
                before,
                meta: held.meta.meta.clone(),
            })
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
            let (messages, mut warnings) =
                self.inspect(&held.dir, held.loc, &held.log, true, held.ctx)?;
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
                self.write_meta(&held.dir, held.loc, &held.meta, held.ctx)?;
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
        let (sessions, total, next) =
            page_of(found.into_iter().map(|(_, meta)| meta).collect(), page);
        Ok(SessionPage {
            sessions,
            total,
            warnings,
            next,
        })
    }

    fn scan(&self) -> Result<SessionPage> {
        let (found, warnings) = self.walk(None)?;
        let all: Vec<SessionMeta> = found.into_iter().map(|(_, meta)| meta).collect();
        let every = PageRequest::first(all.len());
        let (sessions, total, _) = page_of(all, &every);
        Ok(SessionPage {
            sessions,
            total,
            warnings,
            next: None,
        })
    }

    fn rename(&self, session: &SessionRef, title: Option<&str>) -> Result<SessionMeta> {
        self.exclusive(session, |held| {
            let meta = &mut held.meta.meta;
            meta.title = title.map(str::to_owned);
            meta.updated = meta.updated.max(self.now());
            self.write_meta(&held.dir, held.loc, &held.meta, held.ctx)?;
            Ok(held.meta.meta.clone())
        })
    }

    fn delete(&self, session: &SessionRef) -> Result<SessionMeta> {
        self.exclusive(session, |held| {
            self.remove_held(held)?;
            Ok(held.meta.meta.clone())
        })
    }

    /// The cleared metadata first, marked `clearing` (the commit point),
    /// then the log, sidecar and media emptied and the mark taken off; see
    /// [`FileStore`]'s docs.
    fn clear(&self, session: &SessionRef) -> Result<SessionMeta> {
        self.exclusive(session, |held| {
            let meta = &mut held.meta.meta;
            meta.message_count = 0;
            meta.checkpoints.clear();
            meta.updated = meta.updated.max(self.now());
            held.meta.clearing = true;
            self.write_meta(&held.dir, held.loc, &held.meta, held.ctx)?;
            crash_point();
            self.finish_clear(held)?;
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
            self.write_meta(&held.dir, held.loc, &held.meta, held.ctx)?;
            Ok(held.meta.meta.clone())
        })
    }

    /// Each record is `<n>.json` in the session's `<name>_requests-<id>`
    /// folder (named by the session's id too: a session made later with
    /// the same key never sees these), written under a temporary name and
    /// renamed over, never synced (a crash may lose the newest). It holds
    /// the session's lock shared, as reads do: a delete in this process
    /// waits for it, and the session's kept files stay open for its appends.
    fn put_request_record(&self, session: Uuid, n: u64, body: &str, keep: usize) -> Result<()> {
        check_request_record(session, n, body)?;
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let reference = SessionRef::Id(session);
        let (loc, _) = self.find(&reference)?;
        let lock = self.lock_for(&loc);
        let _shared = lock.read().unwrap_or_else(PoisonError::into_inner);
        let ctx = format!("session {session}");
        let dir = self.folder_of(&loc, &ctx)?;
        // Deleted while the lock was awaited: no records to keep.
        let meta = dir
            .exists(loc.file(META))
            .map_err(|e| io_error(&format!("{ctx}: cannot read"), &loc.meta(), e))?;
        if !meta {
            return Err(StoreError::NotFound(reference));
        }
        let name = requests_folder(&loc, session);
        let path = loc.dir.join(&name);
        let failed = |e| {
            io_error(
                &format!("{ctx}: cannot write a request record in"),
                &path,
                e,
            )
        };
        dir.create_folder(&name).map_err(failed)?;
        let records = dir.folder(&name).map_err(failed)?;
        let tmp = format!(
            ".{n}.{}-{}.tmp",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let written = records
            .open(&tmp, OpenAs::CreateNew)
            .and_then(|mut out| out.write_all(body.as_bytes()))
            .and_then(|()| records.rename(&tmp, format!("{n}.json")));
        if let Err(e) = written {
            let _ = records.remove_file(&tmp);
            return Err(failed(e));
        }
        if let Some(old) = n.checked_sub(keep as u64).filter(|&old| old > 0) {
            // Records are numbered one after another: the one that fell out
            // of the newest `keep` is the only one to remove (ones a smaller
            // `keep` left stay until the session is deleted; reads return
            // the newest).
            records
                .remove_file_if_exists(format!("{old}.json"))
                .map_err(failed)?;
        }
        Ok(())
    }

    fn request_records(&self, session: Uuid) -> Result<Vec<(u64, String)>> {
        let Some((loc, _)) = self.locate(&SessionRef::Id(session))? else {
            return Ok(Vec::new());
        };
        let ctx = format!("session {session}");
        let path = loc.dir.join(requests_folder(&loc, session));
        let Some(records) = self.request_folder(&loc, session, &ctx)? else {
            return Ok(Vec::new());
        };
        let mut found = Vec::new();
        let mut bytes_read = 0usize;
        // Newest first, within the bounds of a read; returned oldest first.
        for (n, name) in request_record_names(&records, &path, &ctx)?
            .into_iter()
            .rev()
        {
            if found.len() >= crate::MAX_REQUEST_RECORDS_READ
                || bytes_read >= crate::MAX_REQUEST_RECORDS_READ_BYTES
            {
                tracing::warn!(
                    "{}: {ctx}: more request records than a read returns; the older ones left out",
                    path.display()
                );
                break;
            }
            let read = records.open(&name, OpenAs::Read).and_then(|file| {
                let mut bytes = Vec::new();
                file.take(crate::MAX_REQUEST_RECORD_BYTES as u64 + 1)
                    .read_to_end(&mut bytes)?;
                Ok(bytes)
            });
            let why = match read {
                Ok(bytes) if bytes.len() > crate::MAX_REQUEST_RECORD_BYTES => {
                    format!("over {} bytes", crate::MAX_REQUEST_RECORD_BYTES)
                }
                Ok(bytes) => match String::from_utf8(bytes) {
                    Ok(body) if serde_json::from_str::<serde::de::IgnoredAny>(&body).is_ok() => {
                        bytes_read += body.len();
                        found.push((n, body));
                        continue;
                    }
                    _ => "not a JSON document".to_owned(),
                },
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => error_chain(&io_error(&format!("{ctx}: cannot read"), &path, e)),
            };
            tracing::warn!(
                "{}: {ctx}: request record {n} left out: {why}",
                path.join(&name).display()
            );
        }
        found.reverse();
        Ok(found)
    }

    fn request_record_count(&self, session: Uuid) -> Result<usize> {
        let Some((loc, _)) = self.locate(&SessionRef::Id(session))? else {
            return Ok(0);
        };
        let ctx = format!("session {session}");
        let path = loc.dir.join(requests_folder(&loc, session));
        match self.request_folder(&loc, session, &ctx)? {
            Some(records) => Ok(request_record_names(&records, &path, &ctx)?.len()),
            None => Ok(0),
        }
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

/// How many sessions may keep their three files open between appends: a
/// sixteenth of the process's limit on open files, from 16 to
/// [`MAX_KEPT`] (64 under the common limit of 1,024, so that sockets and
/// other sessions' reads keep most of it).
fn kept_limit() -> usize {
    #[cfg(unix)]
    {
        let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile)
            .current
            .unwrap_or(u64::MAX);
        usize::try_from(limit / 16)
            .unwrap_or(MAX_KEPT)
            .clamp(16, MAX_KEPT)
    }
    #[cfg(not(unix))]
    0
}

/// A point where a crash test may end the process (the `testing` feature's
/// [`crate::testing::CRASH_AT_POINT`]); nothing otherwise.
fn crash_point() {
    #[cfg(feature = "testing")]
    crate::testing::crash_point();
}

/// Fails with [`StoreError::NameClash`] when `meta` at `loc` belongs to a
/// session with another key (or agent) than the keyed `session`.
/// The request records in `records` (the regular files named `<n>.json`,
/// `n` from 1), oldest first, with their names; anything else there is
/// left alone.
fn request_record_names(records: &Folder, path: &Path, ctx: &str) -> Result<Vec<(u64, String)>> {
    let entries = records
        .entries()
        .map_err(|e| io_error(&format!("{ctx}: cannot list"), path, e))?;
    let mut names: Vec<(u64, String)> = entries
        .into_iter()
        .filter(|(_, kind)| matches!(kind, Some(Kind::File)))
        .filter_map(|(name, _)| {
            let name = name.into_string().ok()?;
            let digits = name.strip_suffix(".json")?;
            // Only the canonical spelling: `007.json` is no record's name.
            let n: u64 = digits
                .parse()
                .ok()
                .filter(|n: &u64| *n > 0 && n.to_string() == digits)?;
            Some((n, name))
        })
        .collect();
    names.sort_unstable();
    Ok(names)
}

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

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn is_kept(store: &FileStore, session: &SessionRef) -> bool {
        let (loc, _) = store.find(session).unwrap();
        let lock = store.lock_for(&loc);
        lock.read().unwrap().open.is_some()
    }

    fn kept_count(store: &FileStore) -> usize {
        let locks = store.locks.lock().unwrap();
        locks
            .values()
            .filter(|lock| lock.read().unwrap().open.is_some())
            .count()
    }

    /// An append keeps its session's files open and the next one goes
    /// through them; past the limit the oldest sessions' files are closed,
    /// and such a session's next append goes the whole way and keeps them
    /// again.
    #[test]
    fn no_more_sessions_than_the_limit_keep_their_files_open() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = FileStore::open(dir.path()).unwrap();
        store.max_kept = 3;
        let sessions: Vec<SessionRef> = (0..5)
            .map(|i| {
                let new = NewSession::new("default").with_key(format!("s{i}"));
                store.create(&new).unwrap().reference()
            })
            .collect();
        let hi = |n: usize| [Message::user("hi").with_id(format!("m{n}"))];
        for (n, session) in sessions.iter().enumerate() {
            store.append(session, &hi(n)).unwrap();
            assert!(is_kept(&store, session));
            assert!(kept_count(&store) <= 3);
        }
        assert!(!is_kept(&store, &sessions[0]) && !is_kept(&store, &sessions[1]));
        for (n, session) in sessions.iter().enumerate() {
            let meta = store.append(session, &hi(n + 10)).unwrap();
            assert_eq!(meta.message_count, 2);
            assert!(is_kept(&store, session));
            assert!(kept_count(&store) <= 3);
            assert_eq!(store.get(session).unwrap().unwrap().message_count, 2);
            assert_eq!(store.load(session).unwrap().messages.len(), 2);
        }
    }
}
