//! The file store's metadata: the `.meta.json` file (atomic replace, with a
//! backup read when a crash left it damaged) and the 64-byte checksummed
//! `.state` record that appends refresh in place.

use super::*;

/// File systems write a file back page by page.
pub(super) const PAGE: usize = 4096;

/// Reads the metadata file of `loc` in `dir`; `None` when there is none.
/// Metadata as an unsynced rename can leave it after a crash (empty, NUL
/// bytes, or cut off at a page boundary) is read from the backup instead,
/// with a warning.
pub(super) fn read_meta(dir: &Folder, loc: &Location, ctx: &str) -> Result<Option<MetaFile>> {
    let path = loc.meta();
    let bytes = match dir.read(loc.file(META)) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_error(&format!("{ctx}: cannot read"), &path, e)),
    };
    let source = match serde_json::from_slice::<MetaFile>(&bytes) {
        Ok(mut file) => {
            // Whatever the file lists, the store keeps its channels bounded.
            file.meta.tidy_channels();
            return Ok(Some(file));
        }
        Err(source) => source,
    };
    let crashed = bytes.contains(&0) || (source.is_eof() && bytes.len() % PAGE == 0);
    let restored = crashed
        .then(|| dir.read(loc.file(BACKUP)).ok())
        .flatten()
        .and_then(|bytes| serde_json::from_slice::<MetaFile>(&bytes).ok());
    let Some(mut file) = restored else {
        return Err(StoreError::Metadata {
            context: ctx.to_owned(),
            path,
            source,
        });
    };
    tracing::warn!(
        "{}: {ctx}: the metadata was left damaged by a crash ({source}); read from {}",
        path.display(),
        loc.backup().display()
    );
    file.from_backup = true;
    file.meta.tidy_channels();
    Ok(Some(file))
}

/// The state record's size, magic and layout version.
pub(super) const STATE_LEN: usize = 64;
pub(super) const STATE_MAGIC: &[u8; 8] = b"AHSTATE\0";
pub(super) const STATE_VERSION: u32 = 1;

/// The state record: `magic[8] version:u32 pad[4] id[16] count:u64
/// secs:i64 nanos:u32 pad[4] zero[4] checksum[8]`, little-endian; the
/// checksum is the first 8 bytes of the SHA-256 of the 56 bytes before it.
pub(super) fn encode_state(meta: &SessionMeta) -> [u8; STATE_LEN] {
    let mut out = [0u8; STATE_LEN];
    out[0..8].copy_from_slice(STATE_MAGIC);
    out[8..12].copy_from_slice(&STATE_VERSION.to_le_bytes());
    out[16..32].copy_from_slice(meta.id.as_bytes());
    out[32..40].copy_from_slice(&meta.message_count.to_le_bytes());
    out[40..48].copy_from_slice(&meta.updated.timestamp().to_le_bytes());
    out[48..52].copy_from_slice(&meta.updated.timestamp_subsec_nanos().to_le_bytes());
    let sum = state_checksum(&out[..56]);
    out[56..64].copy_from_slice(&sum);
    out
}

pub(super) fn state_checksum(bytes: &[u8]) -> [u8; 8] {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(bytes);
    let mut sum = [0u8; 8];
    sum.copy_from_slice(&digest[..8]);
    sum
}

/// The count and `updated` of a state record, or why it cannot be used.
pub(super) fn decode_state(
    bytes: &[u8],
    id: Uuid,
) -> std::result::Result<(u64, DateTime<Utc>), String> {
    let u64_at = |i: usize| u64::from_le_bytes(bytes[i..i + 8].try_into().expect("8 bytes"));
    if bytes.len() != STATE_LEN {
        return Err(format!(
            "the state record is {} bytes, not {STATE_LEN} (torn or damaged)",
            bytes.len()
        ));
    }
    if state_checksum(&bytes[..56]) != bytes[56..64] || &bytes[0..8] != STATE_MAGIC {
        return Err("the state record is damaged (its checksum does not match)".into());
    }
    let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
    if version != STATE_VERSION {
        return Err(format!("the state record has an unknown version {version}"));
    }
    if bytes[16..32] != *id.as_bytes() {
        return Err("the state record belongs to another session (left by a delete)".into());
    }
    let secs = u64_at(40).cast_signed();
    let nanos = u32::from_le_bytes(bytes[48..52].try_into().expect("4 bytes"));
    let updated = DateTime::from_timestamp(secs, nanos)
        .ok_or_else(|| "the state record's time is out of range".to_owned())?;
    Ok((u64_at(32), updated))
}

/// Reads a session's metadata and merges its state record: the record's
/// count, and its `updated` when newer, when it is whole and names the
/// session; otherwise the note says why not. Metadata a clear marked is
/// the cleared session's whole: its record (the count before) is not read.
pub(super) fn read_session(dir: &Folder, loc: &Location, ctx: &str) -> Result<Option<MetaFile>> {
    let Some(mut file) = read_meta(dir, loc, ctx)? else {
        return Ok(None);
    };
    if file.clearing {
        return Ok(Some(file));
    }
    let path = loc.state();
    // A reader without the lock can meet an append's write half done: a
    // record that does not check is read once more before it is judged.
    let read = || dir.read(loc.file(STATE));
    let read = read().and_then(|bytes| {
        if decode_state(&bytes, file.meta.id).is_ok() {
            Ok(bytes)
        } else {
            read()
        }
    });
    file.state = match read {
        Ok(bytes) => match decode_state(&bytes, file.meta.id) {
            Ok((count, updated)) => {
                file.meta.message_count = count;
                file.meta.updated = file.meta.updated.max(updated);
                StateNote::Used
            }
            Err(why) => {
                tracing::warn!("{}: {ctx}: {why}", path.display());
                StateNote::Bad(why)
            }
        },
        Err(e) if e.kind() == io::ErrorKind::NotFound => StateNote::Missing,
        Err(e) => return Err(io_error(&format!("{ctx}: cannot read"), &path, e)),
    };
    Ok(Some(file))
}

/// Overwrites the state record in place with one write at offset 0 (creating
/// it when missing), `fdatasync`ed when `durable`.
pub(super) fn write_state(
    dir: &Folder,
    loc: &Location,
    meta: &SessionMeta,
    durable: bool,
    ctx: &str,
) -> Result<()> {
    let written = dir
        .open(loc.file(STATE), OpenAs::Overwrite)
        .and_then(|out| overwrite_state(&out, meta, durable));
    written.map_err(|e| {
        io_error(
            &format!("{ctx}: cannot write the state record"),
            &loc.state(),
            e,
        )
    })
}

/// Overwrites the open state record `out` with one write at offset 0,
/// `fdatasync`ed when `durable`.
pub(super) fn overwrite_state(out: &File, meta: &SessionMeta, durable: bool) -> io::Result<()> {
    let record = encode_state(meta);
    #[cfg(unix)]
    std::os::unix::fs::FileExt::write_all_at(out, &record, 0)?;
    #[cfg(not(unix))]
    {
        let mut out = out;
        out.seek(SeekFrom::Start(0))?;
        out.write_all(&record)?;
    }
    if durable {
        out.sync_data()?;
    }
    Ok(())
}
