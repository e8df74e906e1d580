//! The file store's memory: one append-only log of memory changes.
//!
//! ```text
//! <root>/memory/changes.jsonl   one agent_host_core::memory::Change per line, only ever appended
//! ```
//!
//! A writer holds the log's exclusive `flock`, reads what other processes
//! appended since it last looked, plans its change against that, appends
//! the change's lines with one `write_all` and `fdatasync`s before
//! returning (a failed write is cut back off). Readers take the shared
//! lock. A torn last line (a writer killed mid-write) is skipped by readers
//! and cut off by the next writer, with a warning. A malformed line before
//! the end is an error naming the file and line: a person should see it.

use super::*;
use crate::memory::MAX_CHANGE_BYTES;
use agent_host_core::memory::Change;
use std::io::BufRead;

/// The folder beneath the root.
const FOLDER: &str = "memory";
/// The log's file name.
const LOG: &str = "changes.jsonl";

/// The memory log of a file store.
pub(crate) struct MemoryLog {
    folder: Folder,
    path: PathBuf,
}

/// The log opened under its lock.
pub(crate) struct Locked<'a> {
    log: &'a MemoryLog,
    file: File,
    exclusive: bool,
}

impl MemoryLog {
    /// Opens (creating when missing) the memory log beneath `root`.
    pub(crate) fn open(root: &Path) -> Result<Self> {
        let path = root.join(FOLDER).join(LOG);
        create_private_dir(root)
            .map_err(|e| io_error("cannot create the store folder", root, e))?;
        let folder = Folder::root(root)
            .and_then(|root| {
                root.create_folder(FOLDER)?;
                root.folder(FOLDER)
            })
            .map_err(|e| io_error("memory: cannot open the folder", &root.join(FOLDER), e))?;
        Ok(MemoryLog { folder, path })
    }

    /// The log's path, for messages.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Opens the log under its exclusive (`write`) or shared lock.
    pub(crate) fn lock(&self, write: bool) -> Result<Locked<'_>> {
        let file = self
            .folder
            .open(LOG, OpenAs::Append { create: true })
            .map_err(|e| io_error("memory: cannot open the log", &self.path, e))?;
        #[cfg(unix)]
        {
            use rustix::fs::{FlockOperation, flock};
            let how = if write {
                FlockOperation::LockExclusive
            } else {
                FlockOperation::LockShared
            };
            flock(&file, how)
                .map_err(|e| io_error("memory: cannot lock the log", &self.path, e.into()))?;
        }
        Ok(Locked {
            log: self,
            file,
            exclusive: write,
        })
    }
}

impl Locked<'_> {
    /// The changes after byte `offset`, and the offset after the last whole
    /// line.
    pub(crate) fn read_since(&mut self, offset: u64) -> Result<(Vec<Change>, u64)> {
        let path = &self.log.path;
        let len = self
            .file
            .metadata()
            .map_err(|e| io_error("memory: cannot read", path, e))?
            .len();
        if len < offset {
            return Err(StoreError::Backend {
                context: format!(
                    "memory: {} is shorter ({len} bytes) than when it was read ({offset}); it was cut or replaced by hand: restart to read it again",
                    path.display()
                ),
                source: "the memory log is append-only".into(),
            });
        }
        let mut reader = io::BufReader::new(&self.file);
        reader
            .seek(SeekFrom::Start(offset))
            .map_err(|e| io_error("memory: cannot read", path, e))?;
        let mut changes = Vec::new();
        let mut at = offset;
        let mut line = Vec::new();
        let mut number = 0usize;
        loop {
            line.clear();
            let read = (&mut reader)
                .take(MAX_CHANGE_BYTES as u64 + 1)
                .read_until(b'\n', &mut line)
                .map_err(|e| io_error("memory: cannot read", path, e))?;
            if read == 0 {
                break;
            }
            number += 1;
            if line.last() != Some(&b'\n') {
                if line.len() > MAX_CHANGE_BYTES {
                    return Err(StoreError::Backend {
                        context: format!(
                            "memory: {} at byte {at}: a line over {MAX_CHANGE_BYTES} bytes",
                            path.display()
                        ),
                        source: "no memory change is that long".into(),
                    });
                }
                // A torn last line: a writer died mid-append.
                if self.exclusive {
                    tracing::warn!(
                        "memory: cutting {} torn bytes off the end of {}",
                        line.len(),
                        path.display()
                    );
                    cut(&self.file, at).map_err(|e| io_error("memory: cannot repair", path, e))?;
                }
                break;
            }
            let change: Change = serde_json::from_slice(&line).map_err(|e| StoreError::Backend {
                context: format!(
                    "memory: {} at byte {at} (line {number} of those read): not a memory change; restore the file or move it aside",
                    path.display()
                ),
                source: Box::new(e),
            })?;
            changes.push(change);
            at += line.len() as u64;
        }
        Ok((changes, at))
    }

    /// Appends `changes` durably at the end (one write, then `fdatasync`)
    /// and returns the new end. Requires the exclusive lock.
    pub(crate) fn append(&mut self, changes: &[Change]) -> Result<u64> {
        debug_assert!(self.exclusive);
        let path = &self.log.path;
        let mut buffer = Vec::new();
        for change in changes {
            let start = buffer.len();
            serde_json::to_writer(&mut buffer, change).map_err(|e| StoreError::Backend {
                context: format!("memory: cannot encode a change for {}", path.display()),
                source: Box::new(e),
            })?;
            if buffer.len() - start > MAX_CHANGE_BYTES {
                // Facts are validated within limits far below this.
                return Err(StoreError::Backend {
                    context: format!(
                        "memory: a change of {} bytes for {}, over {MAX_CHANGE_BYTES}",
                        buffer.len() - start,
                        path.display()
                    ),
                    source: "a memory change over the line limit".into(),
                });
            }
            buffer.push(b'\n');
        }
        let before = self
            .file
            .metadata()
            .map_err(|e| io_error("memory: cannot append to", path, e))?
            .len();
        let written = self
            .file
            .write_all(&buffer)
            .and_then(|()| self.file.sync_data());
        if let Err(e) = written {
            let _ = cut(&self.file, before);
            return Err(io_error("memory: cannot append to", path, e));
        }
        Ok(before + buffer.len() as u64)
    }
}
