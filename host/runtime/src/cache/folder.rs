//! A folder private to the current user, used through its descriptor: the
//! compile cache's root, its engine folders, its key and its entries.
//!
//! A folder or file is opened without following a symbolic link
//! (`O_NOFOLLOW`), then checked on the opened descriptor (`fstat`): of the
//! expected type, owned by the effective user, not writable by group or
//! others (a secret: not readable either). What is read is read from that
//! same descriptor, and names inside a folder are resolved from the folder's
//! descriptor (`openat`), so nothing can be swapped between the check and
//! the use. Files are written under a fresh name in the same folder (created
//! `0600` with `O_EXCL`), synced, then renamed (or linked) into place.
//!
//! Folders above the cache root are not checked: they are looked up once,
//! when the root is opened, and everything after that goes through the
//! root's descriptor.

use std::fmt;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;

/// Why a folder or a file of the cache is not used.
#[derive(Debug)]
pub(crate) enum Refused {
    /// It is a symbolic link; links are never followed.
    Symlink,
    /// It is not of the expected kind (a folder, a regular file).
    Kind(&'static str),
    /// It is larger than anything the cache writes.
    Size(u64),
    /// Another user owns it.
    Owner(u32),
    /// Its permissions let group or others write it (or read it, for a secret).
    Mode(u32),
    /// It could not be opened, created, checked or read.
    Io(io::Error),
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refused::Symlink => f.write_str("it is a symbolic link, which the cache never follows"),
            Refused::Kind(kind) => write!(f, "it is not {kind}"),
            Refused::Size(len) => write!(f, "it is {len} bytes, more than the cache writes"),
            Refused::Owner(uid) => write!(
                f,
                "it is owned by uid {uid}, not by the current user (uid {})",
                euid()
            ),
            Refused::Mode(mode) => write!(
                f,
                "its permissions ({:03o}) let other users change it; `chmod go-rwx` it or remove it",
                mode & 0o777
            ),
            Refused::Io(e) => write!(f, "{e}"),
        }
    }
}

impl From<io::Error> for Refused {
    fn from(e: io::Error) -> Self {
        Refused::Io(e)
    }
}

impl From<Errno> for Refused {
    fn from(e: Errno) -> Self {
        Refused::Io(e.into())
    }
}

/// Who may touch a file: shared files (folders, entries) must not be
/// writable by group or others; a secret must not be readable either.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    Private,
    Secret,
}

/// The checks made on an opened descriptor's owner and mode, apart from the
/// system call so that they can be tested for any owner.
pub(crate) fn check_owner_and_mode(
    uid: u32,
    mode: u32,
    euid: u32,
    access: Access,
) -> Result<(), Refused> {
    if uid != euid {
        return Err(Refused::Owner(uid));
    }
    let forbidden = match access {
        Access::Private => 0o022,
        Access::Secret => 0o077,
    };
    if mode & forbidden != 0 {
        return Err(Refused::Mode(mode));
    }
    Ok(())
}

fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// `O_NOFOLLOW` refuses a link with `ELOOP` (Linux, macOS) or `EMLINK`
/// (FreeBSD); `O_DIRECTORY` on a link to a folder may say `ENOTDIR` first.
fn is_link_refusal(e: Errno) -> bool {
    e == Errno::LOOP || e == Errno::MLINK
}

/// An opened folder private to the current user.
pub(crate) struct Folder {
    /// The folder's descriptor; every name inside is resolved from it.
    fd: File,
    path: PathBuf,
}

impl fmt::Debug for Folder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Folder").field("path", &self.path).finish()
    }
}

impl Folder {
    /// Opens the folder at `path`, creating it and any missing parent
    /// `0700`; refuses it if it is a symbolic link, not a folder, someone
    /// else's, or writable by group or others.
    pub(crate) fn open_root(path: &Path) -> Result<Folder, Refused> {
        // Without a trailing slash, which would make `O_NOFOLLOW` follow a link.
        let path: PathBuf = path.components().collect();
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.file_type().is_symlink() => return Err(Refused::Symlink),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(&path)?;
            }
            Err(e) => return Err(e.into()),
        }
        // The check above only explains; this open is what holds.
        let fd =
            rustix::fs::open(&path, dir_flags(), Mode::empty()).map_err(|e| explain(&path, e))?;
        Folder::checked(fd, path)
    }

    /// Opens the folder `name` inside this one, creating it `0700` if
    /// missing, with the same checks as [`Folder::open_root`].
    pub(crate) fn open_child(&self, name: &str) -> Result<Folder, Refused> {
        match rustix::fs::mkdirat(&self.fd, name, Mode::RWXU) {
            Ok(()) => {}
            Err(e) if e == Errno::EXIST => {}
            Err(e) => return Err(e.into()),
        }
        let path = self.path.join(name);
        let fd = rustix::fs::openat(&self.fd, name, dir_flags(), Mode::empty())
            .map_err(|e| explain(&path, e))?;
        Folder::checked(fd, path)
    }

    /// `fd` as a folder, if it is one the user owns and only the user may change.
    fn checked(fd: OwnedFd, path: PathBuf) -> Result<Folder, Refused> {
        let fd = File::from(fd);
        let meta = fd.metadata()?;
        if !meta.file_type().is_dir() {
            return Err(Refused::Kind("a folder"));
        }
        check_owner_and_mode(meta.uid(), meta.mode(), euid(), Access::Private)?;
        Ok(Folder { fd, path })
    }

    /// The folder's path, for messages.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Reads the regular file `name`, or `None` when there is none; at most
    /// `max` bytes, else it is refused. The file must be the user's and pass
    /// `access`.
    pub(crate) fn read(
        &self,
        name: &str,
        access: Access,
        max: u64,
    ) -> Result<Option<Vec<u8>>, Refused> {
        let flags =
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY;
        let fd = match rustix::fs::openat(&self.fd, name, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(e) if e == Errno::NOENT => return Ok(None),
            Err(e) if is_link_refusal(e) => return Err(Refused::Symlink),
            Err(e) => return Err(e.into()),
        };
        let file = File::from(fd);
        let meta = file.metadata()?;
        if !meta.file_type().is_file() {
            return Err(Refused::Kind("a regular file"));
        }
        check_owner_and_mode(meta.uid(), meta.mode(), euid(), access)?;
        if meta.len() > max {
            return Err(Refused::Size(meta.len()));
        }
        let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
        file.take(max + 1).read_to_end(&mut bytes)?;
        if bytes.len() as u64 > max {
            return Err(Refused::Size(bytes.len() as u64));
        }
        Ok(Some(bytes))
    }

    /// Writes `parts`, one after the other, as the file `name`, replacing
    /// any file or link of that name at once: a reader sees the old file or
    /// the whole new one. The file is `0600`.
    pub(crate) fn write(&self, name: &str, parts: &[&[u8]]) -> io::Result<()> {
        let tmp = self.write_temporary(name, parts)?;
        let renamed = rustix::fs::renameat(&self.fd, &tmp, &self.fd, name);
        if renamed.is_err() {
            let _ = rustix::fs::unlinkat(&self.fd, &tmp, AtFlags::empty());
        }
        Ok(renamed?)
    }

    /// Writes `bytes` as the file `name` unless there is one already: then
    /// returns `false` and leaves it alone. A reader sees no file or the
    /// whole file. The file is `0600`.
    pub(crate) fn create_new(&self, name: &str, bytes: &[u8]) -> io::Result<bool> {
        let tmp = self.write_temporary(name, &[bytes])?;
        // `linkat` never follows the new name and fails if it exists, even
        // as a dangling link; without `AT_SYMLINK_FOLLOW`, nor the old one.
        let linked = rustix::fs::linkat(&self.fd, &tmp, &self.fd, name, AtFlags::empty());
        let _ = rustix::fs::unlinkat(&self.fd, &tmp, AtFlags::empty());
        match linked {
            Ok(()) => {
                rustix::fs::fsync(&self.fd)?;
                Ok(true)
            }
            Err(e) if e == Errno::EXIST => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Removes `name` (never what a link points to) if it is the current
    /// user's; `false` when it belongs to someone else and was left alone.
    pub(crate) fn remove_if_ours(&self, name: &str) -> io::Result<bool> {
        let stat = match rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => stat,
            Err(e) if e == Errno::NOENT => return Ok(true),
            Err(e) => return Err(e.into()),
        };
        if stat.st_uid != euid() {
            return Ok(false);
        }
        match rustix::fs::unlinkat(&self.fd, name, AtFlags::empty()) {
            Ok(()) => Ok(true),
            Err(e) if e == Errno::NOENT => Ok(true),
            Err(e) => Err(e.into()),
        }
    }

    /// Writes `parts` to a new `0600` file beside `name`, synced; returns
    /// its name.
    fn write_temporary(&self, name: &str, parts: &[&[u8]]) -> io::Result<String> {
        let mut salt = [0u8; 8];
        getrandom::fill(&mut salt).map_err(io::Error::other)?;
        let tmp = format!(".{name}.{}.tmp", super::hex(&salt));
        let flags = OFlags::WRONLY
            | OFlags::CREATE
            | OFlags::EXCL
            | OFlags::NOFOLLOW
            | OFlags::CLOEXEC
            | OFlags::NOCTTY;
        let fd = rustix::fs::openat(&self.fd, &tmp, flags, Mode::RUSR | Mode::WUSR)?;
        let mut file = File::from(fd);
        let written = parts
            .iter()
            .try_for_each(|p| file.write_all(p))
            .and_then(|()| file.sync_all());
        if let Err(e) = written {
            let _ = rustix::fs::unlinkat(&self.fd, &tmp, AtFlags::empty());
            return Err(e);
        }
        Ok(tmp)
    }
}

fn dir_flags() -> OFlags {
    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

/// Why the folder `path` could not be opened. With `O_DIRECTORY`, Linux
/// answers `ENOTDIR` for a link before `O_NOFOLLOW`'s `ELOOP`: look (only to
/// word the message) at what is there.
fn explain(path: &Path, e: Errno) -> Refused {
    if is_link_refusal(e) {
        return Refused::Symlink;
    }
    if e == Errno::NOTDIR {
        return match std::fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_symlink() => Refused::Symlink,
            _ => Refused::Kind("a folder"),
        };
    }
    e.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn another_owner_or_write_access_for_others_is_refused() {
        assert!(check_owner_and_mode(1000, 0o700, 1000, Access::Private).is_ok());
        assert!(check_owner_and_mode(1000, 0o755, 1000, Access::Private).is_ok());
        assert!(matches!(
            check_owner_and_mode(0, 0o700, 1000, Access::Private),
            Err(Refused::Owner(0))
        ));
        assert!(matches!(
            check_owner_and_mode(1000, 0o770, 1000, Access::Private),
            Err(Refused::Mode(_))
        ));
        assert!(matches!(
            check_owner_and_mode(1000, 0o702, 1000, Access::Private),
            Err(Refused::Mode(_))
        ));
        // A secret may not even be read by others.
        assert!(check_owner_and_mode(1000, 0o600, 1000, Access::Secret).is_ok());
        assert!(matches!(
            check_owner_and_mode(1000, 0o640, 1000, Access::Secret),
            Err(Refused::Mode(_))
        ));
    }
}
