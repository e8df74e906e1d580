//! Where the compile cache cannot check who owns its files (not Unix): a
//! folder that never opens, so the cache is never used.

use std::fmt;
use std::io;
use std::path::Path;

/// Why the cache is not used.
#[derive(Debug)]
pub(crate) enum Refused {
    /// This system is not supported.
    Unsupported,
    /// Never made here; named so that the cache's code is the same on every
    /// system.
    #[allow(dead_code)]
    Size(u64),
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refused::Unsupported => f.write_str(
                "the compile cache checks who owns its files, which it can do only on Unix",
            ),
            Refused::Size(len) => write!(f, "it is {len} bytes"),
        }
    }
}

/// Who may touch a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    Private,
    Secret,
}

/// A folder that is never opened.
pub(crate) enum Folder {}

impl Folder {
    pub(crate) fn open_root(_: &Path) -> Result<Folder, Refused> {
        Err(Refused::Unsupported)
    }
    pub(crate) fn open_child(&self, _: &str) -> Result<Folder, Refused> {
        match *self {}
    }
    pub(crate) fn path(&self) -> &Path {
        match *self {}
    }
    pub(crate) fn read(&self, _: &str, _: Access, _: u64) -> Result<Option<Vec<u8>>, Refused> {
        match *self {}
    }
    pub(crate) fn write(&self, _: &str, _: &[&[u8]]) -> io::Result<()> {
        match *self {}
    }
    pub(crate) fn create_new(&self, _: &str, _: &[u8]) -> io::Result<bool> {
        match *self {}
    }
    pub(crate) fn remove_if_ours(&self, _: &str) -> io::Result<bool> {
        match *self {}
    }
}
