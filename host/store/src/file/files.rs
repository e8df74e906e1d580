//! File-system helpers of the file store: whole reads, cuts, folder syncs,
//! the root's creation, and I/O errors with their context.

use super::*;

pub(super) fn read_all(file: &File) -> io::Result<Vec<u8>> {
    let mut reader = file;
    let len = reader.metadata()?.len();
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    reader.seek(SeekFrom::Start(0))?;
    reader.read_to_end(&mut bytes)?;
    Ok(bytes)
}

pub(super) fn last_byte(file: &File) -> io::Result<Option<u8>> {
    let mut reader = file;
    if reader.metadata()?.len() == 0 {
        return Ok(None);
    }
    let mut byte = [0];
    reader.seek(SeekFrom::End(-1))?;
    reader.read_exact(&mut byte)?;
    Ok(Some(byte[0]))
}

/// Truncates the log to `len` bytes, durably.
pub(super) fn cut(file: &File, len: u64) -> io::Result<()> {
    file.set_len(len)?;
    file.sync_data()
}

/// Creates the store's root (`0700`) with its parents, as the user named it.
pub(super) fn create_private_dir(path: &Path) -> io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(path)
}

/// Makes the entries of `dir` (at `path`) durable: a created, renamed or
/// removed file.
pub(super) fn sync_dir(dir: &Folder, path: &Path, ctx: &str) -> Result<()> {
    dir.sync()
        .map_err(|e| io_error(&format!("{ctx}: cannot sync the folder"), path, e))
}

/// The store's error for a failed `source`: [`StoreError::Refused`] when it
/// is a [`Refusal`] (something beneath the root the store does not open),
/// else [`StoreError::Io`] with the context and path.
pub(super) fn io_error(context: &str, path: &Path, source: io::Error) -> StoreError {
    if let Some(refusal) = source.get_ref().and_then(|e| e.downcast_ref::<Refusal>()) {
        return StoreError::Refused {
            context: context.to_owned(),
            root: refusal.root.to_path_buf(),
            path: refusal.path.clone(),
            found: refusal.found,
            expected: refusal.expected,
        };
    }
    StoreError::Io {
        context: context.to_owned(),
        path: path.to_owned(),
        source,
    }
}
