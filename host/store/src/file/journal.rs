//! Group commit across sessions: the file store's write-ahead journal
//! ([`FileStore::with_group_commit`]).
//!
//! Without it every append ends in an `fdatasync` of its session's log: on
//! a file system without a journal of its own that is two device writes
//! (the data, then the inode whose size grew), and appends to different
//! sessions cannot share them. With it, an append writes its lines to the
//! log without syncing them and adds a record of the same bytes to one
//! journal per process; whichever waiting append finds no write under way
//! writes every record added since in one `pwrite` and syncs it once, and
//! all of them are acknowledged together. The journal is a file of fixed
//! size filled with zeros when made, so its sync is one device write with
//! no inode to update.
//!
//! ```text
//! <root>/journal/<uuid>.wal   records: magic, epoch, kind, length, payload, checksum
//! ```
//!
//! **Checkpoints.** When the next group does not fit, the logs written since
//! the last checkpoint are synced, the epoch goes up, and the group is
//! written at the start after a marker of the new epoch: records of an older
//! epoch further on are never read again. A clear or delete in this process
//! makes a checkpoint first, so no record ever refers to a log emptied
//! after it.
//!
//! **Recovery.** Each process holds an exclusive `flock` on its journal
//! while it lives. Opening a store replays every journal whose lock is free
//! (its process is gone): for each record of the journal's current epoch,
//! in order, under the session's lock, the bytes are made present at their
//! offset of the session's log (appended when the log ends there, completed
//! when it ends within them with the same bytes, rewritten when what is
//! there is a torn or zeroed write of them), and the log is synced. A log
//! that is shorter than the record's offset, or holds other bytes there
//! followed by more, was cleared or replaced since, and is left as it is
//! (with a warning). Then the journal is removed. When the process was
//! killed but the machine kept running, every record is found present and
//! recovery only syncs the logs.
//!
//! Left to the user: a session cleared by *another* process, and appended
//! to again up to exactly the offset of a record this process journaled
//! before the clear, would get that record's lines back if the machine
//! crashed within the checkpoint interval.

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::folder::{Folder, OpenAs};

/// The journal's folder under the store's root.
pub(super) const FOLDER: &str = "journal";
/// A live journal's suffix; a journal being made is `.new` until it is
/// locked and filled.
const SUFFIX: &str = ".wal";
const NEW_SUFFIX: &str = ".new";
const MAGIC: &[u8; 4] = b"AHJ1";
/// Magic, epoch, kind, payload length.
const HEAD: usize = 4 + 8 + 1 + 4;
const CHECK: usize = 16;
/// Session id, log inode, log offset.
const APPEND_HEAD: usize = 16 + 8 + 8;
const KIND_MARKER: u8 = 0;
const KIND_APPEND: u8 = 1;

/// The journal's size: the most that is written between two checkpoints.
pub(super) const CAPACITY: u64 = 8 << 20;
/// An append larger than this is not journaled: its log is synced directly.
pub(super) const MAX_RECORD: usize = 1 << 20;

/// One append to journal: the bytes written to a session's log at an offset.
pub(super) struct Entry<'a> {
    pub session: Uuid,
    /// The log, to sync at the next checkpoint.
    pub log: &'a File,
    /// The log's device and inode, as the caller found them.
    pub file_id: (u64, u64),
    pub offset: u64,
    pub bytes: &'a [u8],
}

/// A record read back from a journal.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Record {
    pub session: Uuid,
    pub inode: u64,
    pub offset: u64,
    pub bytes: Vec<u8>,
}

/// A process's journal: records added by appends, written and synced in
/// groups.
pub(super) struct Journal {
    state: Mutex<State>,
    done: Condvar,
    /// Where the journal is, for errors.
    path: std::path::PathBuf,
    /// Its folder and name, to remove it when the store is dropped.
    dir: Folder,
    name: String,
}

struct State {
    file: Arc<File>,
    epoch: u64,
    /// Where the next group goes.
    end: u64,
    /// Payloads of records added and not written yet, with their sequence
    /// numbers (encoded with the epoch of the group that writes them).
    pending: VecDeque<(u64, Vec<u8>)>,
    /// The sequence number of the last record added.
    added: u64,
    /// Every record up to this one is durable.
    durable: u64,
    /// A group is being written (by the append that found none under way).
    writing: bool,
    /// Logs with journaled writes not synced yet, by inode.
    dirty: HashMap<(u64, u64), File>,
    /// A write or sync of the journal failed: nothing more can be
    /// acknowledged through it (after a failed `fdatasync` the kernel's
    /// page state says nothing reliable).
    broken: Option<String>,
}

impl Journal {
    /// Makes this process's journal in `dir` (the store's `journal/`):
    /// created under a temporary name, locked, filled with zeros and
    /// synced, then renamed, so recovery never takes a journal being made
    /// for a dead one.
    pub(super) fn create(dir: Folder) -> io::Result<Journal> {
        let id = Uuid::new_v4();
        let new = format!("{id}{NEW_SUFFIX}");
        let file = dir.open(&new, OpenAs::CreateNew)?;
        file.lock()?;
        let zeros = vec![0u8; 1 << 20];
        let mut at = 0;
        while at < CAPACITY {
            file.write_all_at(&zeros, at)?;
            at += zeros.len() as u64;
        }
        let marker = encode(1, KIND_MARKER, &[]);
        file.write_all_at(&marker, 0)?;
        file.sync_all()?;
        let name = format!("{id}{SUFFIX}");
        dir.rename(&new, &name)?;
        dir.sync()?;
        Ok(Journal {
            state: Mutex::new(State {
                file: Arc::new(file),
                epoch: 1,
                end: marker.len() as u64,
                pending: VecDeque::new(),
                added: 0,
                durable: 0,
                writing: false,
                dirty: HashMap::new(),
                broken: None,
            }),
            done: Condvar::new(),
            path: dir.rel(&name),
            dir,
            name,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds `entry` and returns once it is durable, with every record added
    /// before it: by writing the group itself when no write is under way,
    /// else by waiting for the one that is.
    pub(super) fn commit(&self, entry: Entry<'_>) -> io::Result<()> {
        self.commit_all(std::slice::from_ref(&entry))
    }

    /// Adds `entries`, in order, and returns once they are all durable: the
    /// appends of several sessions acknowledged by one group (usually one
    /// `fdatasync`). Nothing is added when one of their logs cannot be
    /// kept for the next checkpoint.
    pub(super) fn commit_all(&self, entries: &[Entry<'_>]) -> io::Result<()> {
        let payloads: Vec<Vec<u8>> = entries
            .iter()
            .map(|entry| append_payload(entry, entry.file_id.1))
            .collect();
        let mut st = self.lock();
        if let Some(why) = &st.broken {
            return Err(io::Error::other(why.clone()));
        }
        for entry in entries {
            if let std::collections::hash_map::Entry::Vacant(slot) = st.dirty.entry(entry.file_id) {
                slot.insert(entry.log.try_clone()?);
            }
        }
        for payload in payloads {
            st.added += 1;
            let seq = st.added;
            st.pending.push_back((seq, payload));
        }
        let mine = st.added;
        loop {
            if st.durable >= mine {
                return Ok(());
            }
            if let Some(why) = &st.broken {
                return Err(io::Error::other(why.clone()));
            }
            if st.writing {
                st = self.done.wait(st).unwrap_or_else(PoisonError::into_inner);
            } else {
                st = self.write_group(st, false);
            }
        }
    }

    /// Syncs every log written through the journal and starts a new epoch:
    /// afterwards no record refers to a write before now. Called before a
    /// clear or delete.
    pub(super) fn checkpoint(&self) -> io::Result<()> {
        let mut st = self.lock();
        loop {
            if let Some(why) = &st.broken {
                return Err(io::Error::other(why.clone()));
            }
            if !st.writing {
                break;
            }
            st = self.done.wait(st).unwrap_or_else(PoisonError::into_inner);
        }
        let st = self.write_group(st, true);
        match &st.broken {
            Some(why) => Err(io::Error::other(why.clone())),
            None => Ok(()),
        }
    }

    /// Writes the pending records that fit as one group, at the end or,
    /// after a checkpoint, at the start behind a new epoch's marker, and
    /// syncs it. The lock is released while writing.
    fn write_group<'a>(
        &'a self,
        mut st: MutexGuard<'a, State>,
        force_checkpoint: bool,
    ) -> MutexGuard<'a, State> {
        st.writing = true;
        // What fits in the journal, and whether it fits after the end.
        let room = CAPACITY as usize - (HEAD + CHECK);
        let (mut size, mut taken) = (0, 0);
        for (_, payload) in &st.pending {
            if size + HEAD + payload.len() + CHECK > room {
                break;
            }
            size += HEAD + payload.len() + CHECK;
            taken += 1;
        }
        let checkpoint = force_checkpoint || st.end + size as u64 > CAPACITY;
        let epoch = if checkpoint { st.epoch + 1 } else { st.epoch };
        let mut group = Vec::with_capacity(size);
        let mut upto = st.durable;
        for (seq, payload) in st.pending.drain(..taken) {
            group.extend_from_slice(&encode(epoch, KIND_APPEND, &payload));
            upto = seq;
        }
        let dirty = if checkpoint {
            std::mem::take(&mut st.dirty)
        } else {
            HashMap::new()
        };
        let (file, end) = (st.file.clone(), st.end);
        drop(st);
        let written = (|| -> io::Result<u64> {
            if checkpoint {
                // The logs first: once they are synced, no record before
                // the new marker is needed.
                for log in dirty.values() {
                    log.sync_data()?;
                }
                let mut bytes = encode(epoch, KIND_MARKER, &[]);
                bytes.extend_from_slice(&group);
                file.write_all_at(&bytes, 0)?;
                file.sync_data()?;
                Ok(bytes.len() as u64)
            } else {
                file.write_all_at(&group, end)?;
                file.sync_data()?;
                Ok(end + group.len() as u64)
            }
        })();
        let mut st = self.lock();
        st.writing = false;
        match written {
            Ok(end) => {
                st.epoch = epoch;
                st.end = end;
                st.durable = st.durable.max(upto);
            }
            Err(e) => {
                let why = format!("the journal {} failed: {e}", self.path.display());
                tracing::error!("{why}");
                st.broken = Some(why);
            }
        }
        self.done.notify_all();
        st
    }
}

impl Drop for Journal {
    /// A store dropped in good order syncs its logs and removes its
    /// journal: nothing is left to replay.
    fn drop(&mut self) {
        match self.checkpoint() {
            Ok(()) => {
                if let Err(e) = self.dir.remove_file(&self.name) {
                    tracing::warn!("{}: cannot remove the journal: {e}", self.path.display());
                }
            }
            Err(e) => tracing::warn!(
                "{}: kept for the next open to replay: {e}",
                self.path.display()
            ),
        }
    }
}

fn check(bytes: &[u8]) -> [u8; CHECK] {
    let digest = Sha256::digest(bytes);
    let mut out = [0; CHECK];
    out.copy_from_slice(&digest[..CHECK]);
    out
}

fn encode(epoch: u64, kind: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEAD + payload.len() + CHECK);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&epoch.to_le_bytes());
    out.push(kind);
    let len = u32::try_from(payload.len()).expect("records are at most MAX_RECORD");
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(payload);
    let sum = check(&out);
    out.extend_from_slice(&sum);
    out
}

/// An append's payload: session, inode, offset, bytes.
fn append_payload(entry: &Entry<'_>, inode: u64) -> Vec<u8> {
    let mut payload = Vec::with_capacity(APPEND_HEAD + entry.bytes.len());
    payload.extend_from_slice(entry.session.as_bytes());
    payload.extend_from_slice(&inode.to_le_bytes());
    payload.extend_from_slice(&entry.offset.to_le_bytes());
    payload.extend_from_slice(entry.bytes);
    payload
}

/// The records of a journal's current epoch, in the order they were
/// written: those after the first record (the epoch's marker, or an older
/// epoch's first record) while each is whole, checks, and has its epoch.
pub(super) fn read(bytes: &[u8]) -> Vec<Record> {
    let mut records = Vec::new();
    let mut at = 0;
    let mut epoch = None;
    while let Some((record_epoch, kind, payload, next)) = decode(bytes, at) {
        if *epoch.get_or_insert(record_epoch) != record_epoch {
            break;
        }
        if kind == KIND_APPEND && payload.len() >= APPEND_HEAD {
            let (head, data) = payload.split_at(APPEND_HEAD);
            records.push(Record {
                session: Uuid::from_slice(&head[..16]).expect("16 bytes"),
                inode: u64::from_le_bytes(head[16..24].try_into().expect("8 bytes")),
                offset: u64::from_le_bytes(head[24..32].try_into().expect("8 bytes")),
                bytes: data.to_vec(),
            });
        }
        at = next;
    }
    records
}

fn decode(bytes: &[u8], at: usize) -> Option<(u64, u8, &[u8], usize)> {
    let head = bytes.get(at..at.checked_add(HEAD)?)?;
    if &head[..4] != MAGIC {
        return None;
    }
    let epoch = u64::from_le_bytes(head[4..12].try_into().ok()?);
    let kind = head[12];
    let len = u32::from_le_bytes(head[13..17].try_into().ok()?) as usize;
    let end = at.checked_add(HEAD)?.checked_add(len)?;
    let sum = bytes.get(end..end.checked_add(CHECK)?)?;
    if check(&bytes[at..end]) != sum {
        return None;
    }
    Some((epoch, kind, &bytes[at + HEAD..end], end + CHECK))
}

/// Whether `name` in the journal folder is a journal (live or dead) or one
/// being made.
pub(super) fn is_journal(name: &str) -> bool {
    name.ends_with(SUFFIX) || name.ends_with(NEW_SUFFIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn append(epoch: u64, offset: u64, text: &str) -> Vec<u8> {
        let mut payload = Uuid::nil().as_bytes().to_vec();
        payload.extend_from_slice(&7u64.to_le_bytes());
        payload.extend_from_slice(&offset.to_le_bytes());
        payload.extend_from_slice(text.as_bytes());
        encode(epoch, KIND_APPEND, &payload)
    }

    #[test]
    fn only_whole_records_of_the_current_epoch_are_read() {
        let mut bytes = encode(3, KIND_MARKER, &[]);
        bytes.extend(append(3, 0, "one\n"));
        bytes.extend(append(3, 4, "two\n"));
        let whole = bytes.len();
        // An older epoch's records after the current ones are not read.
        bytes.extend(append(2, 8, "old\n"));
        let read_back = read(&bytes);
        assert_eq!(read_back.len(), 2);
        assert_eq!((read_back[1].offset, read_back[1].inode), (4, 7));
        assert_eq!(read_back[1].bytes, b"two\n");
        // A torn or altered record ends the journal.
        for cut in [whole - 1, whole - CHECK - 2] {
            assert_eq!(read(&bytes[..cut]).len(), 1, "cut at {cut}");
        }
        let mut altered = bytes.clone();
        altered[whole - CHECK - 2] ^= 1;
        assert_eq!(read(&altered).len(), 1);
    }

    proptest::proptest! {
        /// Whatever a journal file holds, reading it never panics, and
        /// never reads past it.
        #[test]
        fn any_bytes_read_without_panicking(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512)) {
            let _ = read(&bytes);
            let mut valid = encode(1, KIND_MARKER, &[]);
            valid.extend_from_slice(&bytes);
            let _ = read(&valid);
        }
    }
}
