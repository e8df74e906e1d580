//! Folders beneath the store's root, held open: every file the store opens,
//! creates, renames or removes beneath the root is named by one component
//! relative to a folder handle, and no symbolic link there is ever followed.
//!
//! The root is the user's (`--store DIR`): links in its own path are
//! followed. Everything beneath it may come from elsewhere (the default
//! store is `.agent-host/` in the working folder, which a cloned repository
//! can ship), so on Unix each folder is opened with `openat(O_DIRECTORY |
//! O_NOFOLLOW)` from its parent's handle and each file with
//! `openat(O_NOFOLLOW | O_NONBLOCK)` from its folder's, then checked with
//! `fstat` to be a regular file (`O_NONBLOCK` keeps a FIFO from blocking
//! the open; a handle that writes is made blocking again once the check
//! passes). A link, FIFO, socket or device where the store keeps a file or
//! folder is a [`Refusal`]: an [`io::Error`] that
//! [`io_error`](super::files::io_error) turns into
//! [`StoreError::Refused`](crate::StoreError::Refused) naming the path from
//! the root and what was found there. Renames and removals (`renameat`,
//! `unlinkat`) never follow a link either: a link is replaced or removed
//! itself, its target untouched.
//!
//! Elsewhere the same checks are made on paths with `symlink_metadata`
//! before each use: they refuse what is planted beforehand, but a link
//! swapped in between the check and the use is not caught.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What the store keeps under a name: a regular file or a folder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    File,
    Folder,
}

impl Kind {
    fn describe(self) -> &'static str {
        match self {
            Kind::File => "a regular file",
            Kind::Folder => "a folder",
        }
    }
}

/// How to open a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum OpenAs {
    /// Read only.
    Read,
    /// Read and append (`O_APPEND`); `create` makes it (`0600`) when missing.
    Append { create: bool },
    /// Write in place, made (`0600`) when missing.
    Overwrite,
    /// Write in place a file that exists.
    Write,
    /// Write a file that must not exist yet (`0600`).
    CreateNew,
}

/// A name beneath the root holding something the store does not keep
/// there (a link, a FIFO, a device, a socket, or a file where a folder
/// belongs): not opened, not followed.
#[derive(Debug)]
pub(crate) struct Refusal {
    /// The store's root.
    pub root: Arc<Path>,
    /// The refused name's path from the root.
    pub path: PathBuf,
    /// What is there (`a symbolic link`).
    pub found: &'static str,
    /// What the store keeps there (`a regular file`).
    pub expected: &'static str,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} in the store {} is {}, not {}",
            self.path.display(),
            self.root.display(),
            self.found,
            self.expected
        )
    }
}

impl std::error::Error for Refusal {}

/// What a file or folder was at one moment: which one (device and inode),
/// its length, and when its content and its inode last changed. A file
/// replaced by a rename has another inode; one written in place, another
/// length or change time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Stamp {
    dev: u64,
    ino: u64,
    /// The length in bytes.
    pub len: u64,
    modified: (i64, i64),
    changed: (i64, i64),
}

impl Stamp {
    /// What the open `file` is now.
    #[cfg(unix)]
    pub fn of(file: &File) -> io::Result<Stamp> {
        Ok(Stamp::from(&rustix::fs::fstat(file)?))
    }

    /// The file's device and inode.
    #[cfg(unix)]
    pub fn file_id(&self) -> (u64, u64) {
        (self.dev, self.ino)
    }

    /// Whether both are the same file (whatever its content).
    pub fn same_file(&self, other: &Stamp) -> bool {
        self.dev == other.dev && self.ino == other.ino
    }
}

#[cfg(unix)]
impl From<&rustix::fs::Stat> for Stamp {
    #[allow(clippy::unnecessary_cast)] // the field types differ between platforms
    fn from(stat: &rustix::fs::Stat) -> Self {
        Stamp {
            dev: stat.st_dev as u64,
            ino: stat.st_ino as u64,
            len: u64::try_from(stat.st_size).unwrap_or(0),
            modified: (stat.st_mtime as i64, stat.st_mtime_nsec as i64),
            changed: (stat.st_ctime as i64, stat.st_ctime_nsec as i64),
        }
    }
}

/// An open folder beneath (or at) the store's root.
pub(super) struct Folder {
    #[cfg(unix)]
    fd: std::os::fd::OwnedFd,
    /// The store's root.
    root: Arc<Path>,
    /// This folder's path from the root (empty for the root).
    rel: PathBuf,
}

impl fmt::Debug for Folder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Folder")
            .field("root", &self.root)
            .field("rel", &self.rel)
            .finish_non_exhaustive()
    }
}

impl Folder {
    /// Opens the store's root as the user gave it (links in it followed).
    pub fn root(root: &Path) -> io::Result<Folder> {
        let root: Arc<Path> = Arc::from(root);
        #[cfg(unix)]
        {
            use rustix::fs::{Mode, OFlags};
            let fd = rustix::fs::open(
                &*root,
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )?;
            Ok(Folder {
                fd,
                root,
                rel: PathBuf::new(),
            })
        }
        #[cfg(not(unix))]
        {
            if !std::fs::metadata(&root)?.is_dir() {
                return Err(io::Error::new(
                    io::ErrorKind::NotADirectory,
                    "the store's root is not a folder",
                ));
            }
            Ok(Folder {
                root,
                rel: PathBuf::new(),
            })
        }
    }

    /// The path from the root of `name` in this folder.
    pub fn rel(&self, name: impl AsRef<OsStr>) -> PathBuf {
        self.rel.join(name.as_ref())
    }

    /// Opens the folder `name` in this one, never through a link.
    pub fn folder(&self, name: impl AsRef<OsStr>) -> io::Result<Folder> {
        let name = checked(name.as_ref())?;
        #[cfg(unix)]
        {
            use rustix::fs::{Mode, OFlags};
            let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            match rustix::fs::openat(&self.fd, name, flags, Mode::empty()) {
                Ok(fd) => Ok(Folder {
                    fd,
                    root: self.root.clone(),
                    rel: self.rel(name),
                }),
                Err(e) => Err(self.refusal_or(name, Kind::Folder, e.into())),
            }
        }
        #[cfg(not(unix))]
        {
            self.check_kind(name, Kind::Folder)?;
            Ok(Folder {
                root: self.root.clone(),
                rel: self.rel(name),
            })
        }
    }

    /// Creates the folder `name` (`0700`) in this one; `false` when
    /// something by that name exists already (what, [`Folder::folder`]
    /// checks).
    pub fn create_folder(&self, name: impl AsRef<OsStr>) -> io::Result<bool> {
        let name = checked(name.as_ref())?;
        #[cfg(unix)]
        let made =
            rustix::fs::mkdirat(&self.fd, name, rustix::fs::Mode::RWXU).map_err(io::Error::from);
        #[cfg(not(unix))]
        let made = std::fs::create_dir(self.path(name));
        match made {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Opens the regular file `name` in this folder, never through a link;
    /// anything else by that name is a [`Refusal`].
    pub fn open(&self, name: impl AsRef<OsStr>, how: OpenAs) -> io::Result<File> {
        self.open_sized(name, how).map(|(file, _)| file)
    }

    /// [`Folder::open`], with the file's length when it was opened.
    fn open_sized(&self, name: impl AsRef<OsStr>, how: OpenAs) -> io::Result<(File, u64)> {
        let name = checked(name.as_ref())?;
        #[cfg(unix)]
        {
            use rustix::fs::{FileType, Mode, OFlags};
            let access = match how {
                OpenAs::Read => OFlags::RDONLY,
                OpenAs::Append { create: false } => OFlags::RDWR | OFlags::APPEND,
                OpenAs::Append { create: true } => OFlags::RDWR | OFlags::APPEND | OFlags::CREATE,
                OpenAs::Overwrite => OFlags::WRONLY | OFlags::CREATE,
                OpenAs::Write => OFlags::WRONLY,
                OpenAs::CreateNew => OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL,
            };
            let flags =
                access | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
            let fd = rustix::fs::openat(&self.fd, name, flags, Mode::RUSR | Mode::WUSR)
                .map_err(|e| self.refusal_or(name, Kind::File, e.into()))?;
            let stat = rustix::fs::fstat(&fd)?;
            let found = FileType::from_raw_mode(stat.st_mode);
            if found != FileType::RegularFile {
                return Err(self.refusal(name, describe(found), Kind::File));
            }
            // Only the open had to not block. A regular file ignores
            // `O_NONBLOCK`; a handle that writes is made blocking again all
            // the same (one `fcntl`), one that only reads is left as it is.
            if how != OpenAs::Read {
                rustix::fs::fcntl_setfl(&fd, flags & OFlags::APPEND)?;
            }
            Ok((File::from(fd), u64::try_from(stat.st_size).unwrap_or(0)))
        }
        #[cfg(not(unix))]
        {
            if how != OpenAs::CreateNew {
                match self.check_kind(name, Kind::File) {
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {
                        if matches!(
                            how,
                            OpenAs::Read | OpenAs::Append { create: false } | OpenAs::Write
                        ) {
                            return Err(e);
                        }
                    }
                    other => other?,
                }
            }
            let mut options = std::fs::OpenOptions::new();
            match how {
                OpenAs::Read => options.read(true),
                OpenAs::Append { create } => options.read(true).append(true).create(create),
                OpenAs::Overwrite => options.write(true).create(true),
                OpenAs::Write => options.write(true),
                OpenAs::CreateNew => options.write(true).create_new(true),
            };
            let file = options.open(self.path(name))?;
            let len = file.metadata()?.len();
            Ok((file, len))
        }
    }

    /// The bytes of the regular file `name`.
    pub fn read(&self, name: impl AsRef<OsStr>) -> io::Result<Vec<u8>> {
        let (file, len) = self.open_sized(name, OpenAs::Read)?;
        // Sized from the open's `fstat`: no second one for a size hint.
        let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0).saturating_add(1));
        (&file).take(u64::MAX).read_to_end(&mut bytes)?;
        Ok(bytes)
    }

    /// Whether `name` in this folder is the open `file` (not a link to it,
    /// nor a file put in its place); `false` when there is nothing by that name.
    pub fn holds(&self, name: impl AsRef<OsStr>, file: &File) -> io::Result<bool> {
        let name = checked(name.as_ref())?;
        #[cfg(unix)]
        {
            use rustix::fs::AtFlags;
            let named = match rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(stat) => stat,
                Err(rustix::io::Errno::NOENT) => return Ok(false),
                Err(e) => return Err(e.into()),
            };
            let open = rustix::fs::fstat(file)?;
            Ok(open.st_dev == named.st_dev && open.st_ino == named.st_ino)
        }
        // Elsewhere an open file cannot be deleted or replaced.
        #[cfg(not(unix))]
        {
            let _ = file;
            self.exists(name)
        }
    }

    /// What `name` in this folder is now (not following a link), or `None`
    /// when there is nothing by that name.
    #[cfg(unix)]
    pub fn stamp(&self, name: impl AsRef<OsStr>) -> io::Result<Option<Stamp>> {
        let name = checked(name.as_ref())?;
        match rustix::fs::statat(&self.fd, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => Ok(Some(Stamp::from(&stat))),
            Err(rustix::io::Errno::NOENT) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// What this folder is.
    #[cfg(unix)]
    pub fn own_stamp(&self) -> io::Result<Stamp> {
        Ok(Stamp::from(&rustix::fs::fstat(&self.fd)?))
    }

    /// Whether anything (a link included, not followed) is named `name` here.
    pub fn exists(&self, name: impl AsRef<OsStr>) -> io::Result<bool> {
        match self.kind_of(checked(name.as_ref())?) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Renames `from` to `to`, both in this folder; a link at `to` is
    /// replaced, not followed.
    pub fn rename(&self, from: impl AsRef<OsStr>, to: impl AsRef<OsStr>) -> io::Result<()> {
        let (from, to) = (checked(from.as_ref())?, checked(to.as_ref())?);
        #[cfg(unix)]
        return Ok(rustix::fs::renameat(&self.fd, from, &self.fd, to)?);
        #[cfg(not(unix))]
        std::fs::rename(self.path(from), self.path(to))
    }

    /// Removes the file (or link, not followed) `name`.
    pub fn remove_file(&self, name: impl AsRef<OsStr>) -> io::Result<()> {
        let name = checked(name.as_ref())?;
        #[cfg(unix)]
        return Ok(rustix::fs::unlinkat(
            &self.fd,
            name,
            rustix::fs::AtFlags::empty(),
        )?);
        #[cfg(not(unix))]
        std::fs::remove_file(self.path(name))
    }

    /// Removes `name` when it exists.
    pub fn remove_file_if_exists(&self, name: impl AsRef<OsStr>) -> io::Result<()> {
        match self.remove_file(name) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// Removes `name` and, when it is a folder, everything in it, each
    /// entry relative to its folder's handle: a link is removed, never
    /// followed. Nothing by that name is not an error.
    pub fn remove_tree_if_exists(&self, name: impl AsRef<OsStr>) -> io::Result<()> {
        let name = checked(name.as_ref())?;
        match self.kind_of(name) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
            Ok(Some(Kind::Folder)) => {
                let inner = self.folder(name)?;
                for (entry, _) in inner.entries()? {
                    inner.remove_tree_if_exists(&entry)?;
                }
                #[cfg(unix)]
                return Ok(rustix::fs::unlinkat(
                    &self.fd,
                    name,
                    rustix::fs::AtFlags::REMOVEDIR,
                )?);
                #[cfg(not(unix))]
                std::fs::remove_dir(self.path(name))
            }
            Ok(_) => self.remove_file_if_exists(name),
        }
    }

    /// The names in this folder and what each is (`None`: neither a regular
    /// file nor a folder: a link, a FIFO, ...).
    pub fn entries(&self) -> io::Result<Vec<(OsString, Option<Kind>)>> {
        let mut out = Vec::new();
        #[cfg(unix)]
        {
            use rustix::fs::FileType;
            use std::os::unix::ffi::OsStrExt;
            for entry in rustix::fs::Dir::read_from(&self.fd)? {
                let entry = entry?;
                let name = OsStr::from_bytes(entry.file_name().to_bytes());
                if name == "." || name == ".." {
                    continue;
                }
                let kind = match entry.file_type() {
                    FileType::RegularFile => Some(Kind::File),
                    FileType::Directory => Some(Kind::Folder),
                    // A file system that does not say: ask.
                    FileType::Unknown => match self.kind_of(name) {
                        Ok(kind) => kind,
                        Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                        Err(e) => return Err(e),
                    },
                    _ => None,
                };
                out.push((name.to_owned(), kind));
            }
        }
        #[cfg(not(unix))]
        for entry in std::fs::read_dir(self.path(""))? {
            let entry = entry?;
            let kind = entry.file_type().ok().and_then(|t| {
                if t.is_file() {
                    Some(Kind::File)
                } else if t.is_dir() {
                    Some(Kind::Folder)
                } else {
                    None
                }
            });
            out.push((entry.file_name(), kind));
        }
        Ok(out)
    }

    /// Makes this folder's entries (a created, renamed or removed file) durable.
    pub fn sync(&self) -> io::Result<()> {
        #[cfg(unix)]
        rustix::fs::fsync(&self.fd)?;
        Ok(())
    }

    /// What `name` is, not following a link (`None`: neither a regular
    /// file nor a folder).
    fn kind_of(&self, name: &OsStr) -> io::Result<Option<Kind>> {
        #[cfg(unix)]
        {
            use rustix::fs::{AtFlags, FileType};
            let stat = rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW)?;
            Ok(match FileType::from_raw_mode(stat.st_mode) {
                FileType::RegularFile => Some(Kind::File),
                FileType::Directory => Some(Kind::Folder),
                _ => None,
            })
        }
        #[cfg(not(unix))]
        {
            let t = std::fs::symlink_metadata(self.path(name))?.file_type();
            Ok(if t.is_file() {
                Some(Kind::File)
            } else if t.is_dir() {
                Some(Kind::Folder)
            } else {
                None
            })
        }
    }

    /// The error for a failed open of `name`: a [`Refusal`] when `name` is
    /// not what the store keeps there (a link, say), else `error`.
    #[cfg(unix)]
    fn refusal_or(&self, name: &OsStr, expected: Kind, error: io::Error) -> io::Error {
        if error.kind() == io::ErrorKind::NotFound {
            return error;
        }
        let stat = rustix::fs::statat(&self.fd, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW);
        let Ok(stat) = stat else { return error };
        let found = rustix::fs::FileType::from_raw_mode(stat.st_mode);
        let is_expected = match expected {
            Kind::File => found == rustix::fs::FileType::RegularFile,
            Kind::Folder => found == rustix::fs::FileType::Directory,
        };
        if is_expected {
            error
        } else {
            self.refusal(name, describe(found), expected)
        }
    }

    /// Refuses `name` unless it is what the store keeps there.
    #[cfg(not(unix))]
    fn check_kind(&self, name: &OsStr, expected: Kind) -> io::Result<()> {
        let t = std::fs::symlink_metadata(self.path(name))?.file_type();
        let found = if t.is_file() {
            Kind::File.describe()
        } else if t.is_dir() {
            Kind::Folder.describe()
        } else if t.is_symlink() {
            "a symbolic link"
        } else {
            "a special file"
        };
        if found == expected.describe() {
            Ok(())
        } else {
            Err(self.refusal(name, found, expected))
        }
    }

    #[cfg(not(unix))]
    fn path(&self, name: impl AsRef<OsStr>) -> PathBuf {
        self.root.join(&self.rel).join(name.as_ref())
    }

    fn refusal(&self, name: &OsStr, found: &'static str, expected: Kind) -> io::Error {
        io::Error::other(Refusal {
            root: self.root.clone(),
            path: self.rel(name),
            found,
            expected: expected.describe(),
        })
    }
}

/// `name` when it is one component (no separator, not `.` or `..`): a
/// handle's names never walk a path.
fn checked(name: &OsStr) -> io::Result<&OsStr> {
    let bytes = name.as_encoded_bytes();
    if name.is_empty()
        || name == "."
        || name == ".."
        || bytes.contains(&b'/')
        || (cfg!(windows) && bytes.contains(&b'\\'))
    {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{name:?} is not a single file name"),
        ));
    }
    Ok(name)
}

#[cfg(unix)]
fn describe(found: rustix::fs::FileType) -> &'static str {
    use rustix::fs::FileType;
    match found {
        FileType::RegularFile => "a regular file",
        FileType::Directory => "a folder",
        FileType::Symlink => "a symbolic link",
        FileType::Fifo => "a FIFO (named pipe)",
        FileType::Socket => "a socket",
        FileType::CharacterDevice => "a character device",
        FileType::BlockDevice => "a block device",
        FileType::Unknown => "of an unknown type",
    }
}
