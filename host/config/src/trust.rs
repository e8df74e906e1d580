//! Trust in configuration files found in the working directory.
//!
//! A cloned repository can ship an `agent-host.toml`. Most of what it says
//! is harmless (a context window, a summary threshold, a sandboxed
//! processor), but a few keys choose where requests go, which secret is
//! sent with them, where sessions are written, or which of the user's
//! folders a processor may read ([`sensitive_settings`]). Like direnv and
//! mise, agent-host honours those keys from a working-directory file only
//! once the user has trusted that file, by path *and* content:
//! `agent-host config trust` records the file's SHA-256 in the
//! [`TRUST_FILE`] of the user configuration folder, and any edit asks
//! again. A file named by `--config` or `AGENT_HOST_CONFIG`, or found in
//! the user configuration folder, was chosen by the user and needs no
//! trust.
//!
//! The trust list itself is refused (nothing in it is trusted) when it is
//! a symlink, not a regular file, not the user's own, or writable by
//! others: whoever can write it can trust anything.

use std::collections::BTreeMap;
use std::fmt;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::file::{Document, RawFile};
use crate::{ConfigError, Origin};

/// The trust list's name in the user configuration folder.
pub const TRUST_FILE: &str = "trusted.json";

/// The largest trust list read: far beyond any real one, small enough that
/// a planted huge file costs nothing.
const MAX_TRUST_FILE: u64 = 4 << 20;

/// The keys a configuration file sets that need trust, with their values
/// as written (paths unresolved): `provider.base_url`,
/// `provider.api_key_env`, `store.path`, `memory.user` (whose facts are
/// read into requests and written from answers), every
/// `processors[i].allow_dirs`, `processors[i].allow_summarize` (model spend)
/// and `processors[i].allow_memory` (the user's facts), and every `upstreams[i].base_url` and
/// `upstreams[i].api_key_env`.
pub(crate) fn sensitive_settings(raw: &RawFile) -> Vec<(String, String)> {
    let mut keys = Vec::new();
    if let Some(p) = &raw.provider {
        if let Some(url) = &p.base_url {
            keys.push(("provider.base_url".to_owned(), format!("{url:?}")));
        }
        if let Some(var) = &p.api_key_env {
            keys.push(("provider.api_key_env".to_owned(), format!("{var:?}")));
        }
    }
    if let Some(path) = &raw.store.path {
        keys.push(("store.path".to_owned(), format!("{path:?}")));
    }
    if let Some(user) = &raw.memory.user {
        keys.push(("memory.user".to_owned(), format!("{user:?}")));
    }
    for (i, u) in raw.upstreams.iter().enumerate() {
        if let Some(url) = &u.base_url {
            keys.push((format!("upstreams[{i}].base_url"), format!("{url:?}")));
        }
        if let Some(var) = &u.api_key_env {
            keys.push((format!("upstreams[{i}].api_key_env"), format!("{var:?}")));
        }
    }
    for (i, p) in raw.processors.iter().enumerate() {
        // A processor that may have the model write summaries spends the
        // user's tokens; one that may read memory reads the user's facts.
        if p.allow_summarize == Some(true) {
            keys.push((
                format!("processors[{i}].allow_summarize"),
                "true".to_owned(),
            ));
        }
        if p.allow_memory == Some(true) {
            keys.push((format!("processors[{i}].allow_memory"), "true".to_owned()));
        }
        if let Some(dirs) = &p.allow_dirs {
            let dirs: Vec<String> = dirs.iter().map(|d| format!("{:?}", d.display())).collect();
            keys.push((
                format!("processors[{i}].allow_dirs"),
                format!("[{}]", dirs.join(", ")),
            ));
        }
    }
    keys
}

/// What the trust check found for the file read.
#[derive(Clone, Debug, Default)]
pub(crate) struct TrustCheck {
    /// What the trust list says of the file, when it needed asking.
    pub state: Option<TrustState>,
    /// The keys needing trust the file sets and that are in force, with
    /// their values, when it is not trusted.
    pub untrusted: Vec<(String, String)>,
    /// The error refusing them, naming the file, the keys and the remedy.
    pub error: Option<ConfigError>,
}

/// The trust check of a file found in the working directory: only the keys
/// needing trust that it sets and that are in force (those no flag or
/// variable overrides) count. The list is read only when there is one.
pub(crate) fn check(
    doc: &Document,
    sources: &BTreeMap<String, Origin>,
    user_config_dir: Option<&Path>,
) -> Result<TrustCheck> {
    let keys: Vec<(String, String)> = sensitive_settings(&doc.raw)
        .into_iter()
        .filter(|(key, _)| matches!(sources.get(key), Some(Origin::File(_))))
        .collect();
    if keys.is_empty() {
        return Ok(TrustCheck::default());
    }
    let state = TrustList::load(user_config_dir)?.state(&doc.path, doc.text());
    if state == TrustState::Trusted {
        return Ok(TrustCheck {
            state: Some(state),
            ..TrustCheck::default()
        });
    }
    let names: Vec<&str> = keys.iter().map(|(k, _)| k.as_str()).collect();
    let (what, again) = match state {
        TrustState::Changed => ("changed since you trusted it", " again"),
        _ => ("is not trusted", ""),
    };
    let error = ConfigError {
        file: Some(doc.path.clone()),
        line: doc.line_of(&keys[0].0),
        key: Some(keys[0].0.clone()),
        message: format!(
            "this file in the working directory {what}, and it sets {}: keys that choose where \
             requests go, which secret is sent, where sessions are written, which of your \
             folders a processor reads, or whether a processor may spend model tokens or read \
             your memory are honoured from a project's file only once you trust \
             it. Review it (`agent-host config show` lists what it sets), then run \
             `agent-host config trust`{again}",
            names.join(", ")
        ),
    };
    Ok(TrustCheck {
        state: Some(state),
        untrusted: keys,
        error: Some(error),
    })
}

/// The hex SHA-256 of a configuration file's content.
pub(crate) fn content_hash(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// What the trust list says of one file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrustState {
    /// Trusted with exactly this content.
    Trusted,
    /// Trusted once, with another content: it changed since.
    Changed,
    /// Never trusted.
    Unknown,
}

impl fmt::Display for TrustState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TrustState::Trusted => "trusted",
            TrustState::Changed => "changed since it was trusted",
            TrustState::Unknown => "not trusted",
        })
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TrustFile {
    /// Canonical path -> SHA-256 of the content trusted.
    files: BTreeMap<PathBuf, String>,
}

/// The files the user trusts, as read from the [`TRUST_FILE`] in the user
/// configuration folder.
#[derive(Debug, Default)]
pub struct TrustList {
    file: TrustFile,
}

impl TrustList {
    /// Reads the trust list in `dir` (the user configuration folder); no
    /// folder or no list is an empty list. A list that is a symlink, not a
    /// regular file, not the user's own or writable by others is an error
    /// that says so: nothing in it can be believed.
    pub fn load(dir: Option<&Path>) -> Result<TrustList> {
        let Some(dir) = dir else {
            return Ok(TrustList::default());
        };
        let path = dir.join(TRUST_FILE);
        let refused = |why: String| -> anyhow::Error {
            ConfigError {
                file: Some(path.clone()),
                line: None,
                key: None,
                message: format!("the trust list {why}"),
            }
            .into()
        };
        // Whoever can write the folder can swap the list for their own.
        match std::fs::metadata(dir) {
            Ok(folder) => {
                if let Some(why) = unsafe_folder(&folder) {
                    return Err(refused(format!(
                        "{why}, so nothing in it is trusted: make the folder yours and writable \
                         only by you (chmod go-w {})",
                        dir.display()
                    )));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(TrustList::default());
            }
            Err(e) => {
                return Err(e).with_context(|| format!("cannot read the folder {}", dir.display()));
            }
        }
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(TrustList::default());
            }
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("cannot read the trust list {}", path.display()));
            }
        };
        if let Some(why) = unsafe_file(&meta) {
            return Err(refused(format!(
                "{why}, so nothing in it is trusted: remove it, or make it a regular file of \
                 yours that only you can write (chmod 600)"
            )));
        }
        let mut text = String::new();
        std::fs::File::open(&path)
            .and_then(|f| f.take(MAX_TRUST_FILE + 1).read_to_string(&mut text))
            .with_context(|| format!("cannot read the trust list {}", path.display()))?;
        if text.len() as u64 > MAX_TRUST_FILE {
            anyhow::bail!(
                "the trust list {} is larger than {} MiB: it is not one agent-host wrote",
                path.display(),
                MAX_TRUST_FILE >> 20
            );
        }
        let file: TrustFile = serde_json::from_str(&text).map_err(|e| ConfigError {
            file: Some(path.clone()),
            line: Some(e.line()),
            key: None,
            message: format!("the trust list is not valid: {e}"),
        })?;
        Ok(TrustList { file })
    }

    /// What the list says of the file at `path` whose content is `text`.
    pub fn state(&self, path: &Path, text: &str) -> TrustState {
        match self.file.files.get(&canonical(path)) {
            Some(hash) if *hash == content_hash(text) => TrustState::Trusted,
            Some(_) => TrustState::Changed,
            None => TrustState::Unknown,
        }
    }

    /// Trusts the file at `path` with content `text` (replacing what the
    /// list said of that path).
    pub fn trust(&mut self, path: &Path, text: &str) {
        self.file.files.insert(canonical(path), content_hash(text));
    }

    /// Forgets the file at `path`; false when it was not in the list.
    pub fn revoke(&mut self, path: &Path) -> bool {
        self.file.files.remove(&canonical(path)).is_some()
    }

    /// Writes the list to `dir` (created, only the user's, when missing),
    /// atomically: a crash leaves the old list or the new one.
    pub fn save(&self, dir: &Path) -> Result<()> {
        create_private_dir(dir)?;
        let path = dir.join(TRUST_FILE);
        let mut tmp = tempfile::NamedTempFile::new_in(dir)
            .with_context(|| format!("cannot write in {}", dir.display()))?;
        let text = serde_json::to_string_pretty(&self.file)?;
        tmp.write_all(text.as_bytes())
            .and_then(|()| tmp.write_all(b"\n"))
            .and_then(|()| tmp.as_file().sync_all())
            .with_context(|| format!("cannot write the trust list {}", path.display()))?;
        tmp.persist(&path)
            .with_context(|| format!("cannot write the trust list {}", path.display()))?;
        Ok(())
    }
}

/// The path a trust entry is recorded under: canonical when it exists, so
/// `./agent-host.toml` and its absolute path are the same file.
fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned())
}

#[cfg(unix)]
fn unsafe_file(meta: &std::fs::Metadata) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let kind = meta.file_type();
    if kind.is_symlink() {
        return Some("is a symbolic link".to_owned());
    }
    if !kind.is_file() {
        return Some("is not a regular file".to_owned());
    }
    let uid = rustix::process::getuid().as_raw();
    if meta.uid() != uid {
        return Some(format!(
            "belongs to user {}, not to you ({uid})",
            meta.uid()
        ));
    }
    if meta.mode() & 0o022 != 0 {
        return Some(format!(
            "can be written by others (mode {:o})",
            meta.mode() & 0o777
        ));
    }
    None
}

/// Why a folder holding the trust list cannot be believed, if it cannot:
/// another user owns it or may write in it.
#[cfg(unix)]
fn unsafe_folder(meta: &std::fs::Metadata) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let uid = rustix::process::getuid().as_raw();
    if meta.uid() != uid {
        return Some(format!(
            "is in a folder that belongs to user {}, not to you ({uid})",
            meta.uid()
        ));
    }
    (meta.mode() & 0o022 != 0).then(|| {
        format!(
            "is in a folder others can write in (mode {:o})",
            meta.mode() & 0o777
        )
    })
}

#[cfg(not(unix))]
fn unsafe_folder(_: &std::fs::Metadata) -> Option<String> {
    None
}

#[cfg(not(unix))]
fn unsafe_file(meta: &std::fs::Metadata) -> Option<String> {
    if meta.file_type().is_symlink() {
        return Some("is a symbolic link".to_owned());
    }
    (!meta.is_file()).then(|| "is not a regular file".to_owned())
}

fn create_private_dir(dir: &Path) -> Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder
        .create(dir)
        .with_context(|| format!("cannot create {}", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trusted_file_is_trusted_until_it_changes() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("agent-host.toml");
        std::fs::write(&file, "x").unwrap();
        let mut list = TrustList::default();
        assert_eq!(list.state(&file, "a = 1"), TrustState::Unknown);
        list.trust(&file, "a = 1");
        list.save(dir.path()).unwrap();

        let list = TrustList::load(Some(dir.path())).unwrap();
        assert_eq!(list.state(&file, "a = 1"), TrustState::Trusted);
        assert_eq!(list.state(&file, "a = 2"), TrustState::Changed);
        // The same content at another path is another file.
        let other = dir.path().join("other.toml");
        std::fs::write(&other, "x").unwrap();
        assert_eq!(list.state(&other, "a = 1"), TrustState::Unknown);
    }

    #[cfg(unix)]
    #[test]
    fn a_trust_list_others_can_write_or_a_link_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let mut list = TrustList::default();
        list.trust(&dir.path().join("agent-host.toml"), "a = 1");
        list.save(dir.path()).unwrap();
        let path = dir.path().join(TRUST_FILE);
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );

        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        let e = TrustList::load(Some(dir.path())).unwrap_err();
        assert!(
            format!("{e:#}").contains("can be written by others"),
            "{e:#}"
        );

        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = TrustList::load(Some(dir.path())).unwrap_err();
        assert!(
            format!("{e:#}").contains("folder others can write"),
            "{e:#}"
        );
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        TrustList::load(Some(dir.path())).unwrap();

        let elsewhere = tempfile::tempdir().unwrap();
        let real = elsewhere.path().join("list.json");
        std::fs::rename(&path, &real).unwrap();
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::os::unix::fs::symlink(&real, &path).unwrap();
        let e = TrustList::load(Some(dir.path())).unwrap_err();
        assert!(format!("{e:#}").contains("symbolic link"), "{e:#}");
    }

    #[test]
    fn a_malformed_trust_list_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(TRUST_FILE), "{\"files\": 3}").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(
                dir.path().join(TRUST_FILE),
                std::fs::Permissions::from_mode(0o600),
            )
            .unwrap();
        }
        let e = TrustList::load(Some(dir.path())).unwrap_err();
        assert!(format!("{e:#}").contains(TRUST_FILE), "{e:#}");
    }
}
