//! The on-disk compile cache: a component is compiled once per engine
//! configuration and loaded from its native code afterwards.
//!
//! Entries are named by the SHA-256 of the component and live in a folder
//! named by a fingerprint of the engine (wasmtime's version and every setting
//! that changes the generated code), so a new wasmtime or a changed setting
//! never loads an old artifact.
//!
//! # Trust
//!
//! Loading an entry runs its native code in the host, so the cache loads
//! only what it can show it wrote itself, for this component and this engine:
//!
//! - The root (created `0700` with any missing parent) and its engine
//!   folders must be folders, not symbolic links, owned by the current user
//!   and not writable by group or others; otherwise the cache is not used
//!   (components are compiled in memory, with a warning naming the folder
//!   and why). Entries and the key are opened without following links and
//!   checked on the opened descriptor, then read from it (see `folder`).
//! - The root holds a per-user key, [`KEY_FILE`] ([`CompileCache::key_path`]): 32 random bytes, `0600`,
//!   written once. An entry is [`MAGIC`], then a 32-byte HMAC-SHA256 tag
//!   under that key over the SHA-256 of the component's bytes, the engine's
//!   digest and the artifact, then the artifact (what
//!   `Component::serialize` wrote). The tag is checked, in constant time,
//!   before wasmtime sees a byte: an entry planted by someone without the
//!   key, edited, truncated, or copied from another component's or another
//!   engine's name is compiled again and replaced, never loaded.
//! - Entries are written under a fresh `0600` name in the same folder,
//!   synced, then renamed: a reader never sees half an entry.
//!
//! The key defends the entries, not the binary: whoever can write the cache
//! root as this user can also replace `agent-host` itself. Folders above the
//! root are not checked.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use anyhow::Result;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

// Elsewhere than Unix, ownership and modes cannot be checked the same way:
// the cache refuses to open and every component is compiled in memory.
#[cfg_attr(not(unix), path = "cache/folder_unsupported.rs")]
mod folder;

use folder::{Access, Folder, Refused};

/// The name of the per-user key in the cache root.
const KEY_FILE: &str = "cache.key";

/// The first bytes of an entry; the `1` is the format's version.
const MAGIC: &[u8; 8] = b"AHCWASM1";

/// The length of the key and of an entry's tag.
const KEY_LEN: usize = 32;

/// The largest entry read: artifacts of the largest components accepted
/// (32 MiB of wasm by default) stay well under it, and it bounds what a
/// corrupt entry can make the host allocate.
const MAX_ENTRY_BYTES: u64 = 1 << 30;

/// Where compiled components are kept.
#[derive(Clone)]
pub struct CompileCache {
    root: PathBuf,
    dir: PathBuf,
    /// The engine's folder name.
    fingerprint: String,
    /// The SHA-256 of everything about the engine that changes its code.
    engine: [u8; 32],
    /// The opened engine folder and the key, or `None` when the cache was
    /// refused; opened on the first load, then kept for the runtime's life.
    opened: Arc<OnceLock<Option<Opened>>>,
}

impl fmt::Debug for CompileCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompileCache")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

/// The engine folder, opened and checked, and the key of the cache root.
struct Opened {
    folder: Folder,
    key: [u8; KEY_LEN],
}

/// How a component was obtained.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CacheOutcome {
    /// Loaded from the cache.
    Hit,
    /// Compiled and written to the cache.
    Compiled,
    /// Compiled; there is no cache, it was refused, or writing to it failed
    /// (logged).
    CompiledUncached,
}

impl CompileCache {
    /// A cache under `root`, in a folder for this engine's configuration.
    /// Nothing is created or checked until the first load.
    pub fn new(root: &Path, engine: &Engine) -> Self {
        let engine = engine_digest(engine);
        let fingerprint = hex(&engine[..8]);
        CompileCache {
            root: root.to_owned(),
            dir: root.join(&fingerprint),
            fingerprint,
            engine,
            opened: Arc::new(OnceLock::new()),
        }
    }

    /// The default root: `$AGENT_HOST_CACHE`, else `$XDG_CACHE_HOME/agent-host/components`,
    /// else `~/.cache/agent-host/components`; `None` when none can be found.
    pub fn default_root() -> Option<PathBuf> {
        if let Some(dir) = std::env::var_os("AGENT_HOST_CACHE").filter(|d| !d.is_empty()) {
            return Some(PathBuf::from(dir));
        }
        let base = std::env::var_os("XDG_CACHE_HOME")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME")
                    .filter(|d| !d.is_empty())
                    .map(|h| PathBuf::from(h).join(".cache"))
            })?;
        Some(base.join("agent-host").join("components"))
    }

    /// The folder holding this engine's entries.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The per-user key that signs the entries, in the cache root. Removing
    /// it makes every entry compile again.
    pub fn key_path(&self) -> PathBuf {
        self.root.join(KEY_FILE)
    }

    /// The engine folder and the key, opened once; `None` (warned once) when
    /// the cache cannot be trusted or set up.
    fn opened(&self) -> Option<&Opened> {
        self.opened
            .get_or_init(|| match self.open() {
                Ok(opened) => Some(opened),
                Err(why) => {
                    tracing::warn!(
                        root = %self.root.display(),
                        "not using the compile cache, compiling in memory: {why}"
                    );
                    None
                }
            })
            .as_ref()
    }

    fn open(&self) -> Result<Opened, String> {
        let root =
            Folder::open_root(&self.root).map_err(|e| format!("{}: {e}", self.root.display()))?;
        let key = read_or_create_key(&root)?;
        let folder = root
            .open_child(&self.fingerprint)
            .map_err(|e| format!("{}: {e}", self.dir.display()))?;
        Ok(Opened { folder, key })
    }

    /// Loads the component whose bytes hash to `sha256` from the cache, or
    /// calls `compile` (which compiles them for the cache's engine) and
    /// stores the result. An entry is loaded only if its
    /// tag is right (see the [module documentation](self)); any other entry
    /// is compiled again, removed if the user owns it and replaced.
    pub(crate) fn load_or_compile(
        &self,
        engine: &Engine,
        sha256: &[u8; 32],
        compile: impl FnOnce() -> Result<Component>,
    ) -> Result<(Component, CacheOutcome)> {
        let Some(opened) = self.opened() else {
            return Ok((compile()?, CacheOutcome::CompiledUncached));
        };
        let name = format!("{}.cwasm", hex(sha256));
        let entry = self.dir.join(&name);
        let may_store = match self.load(engine, opened, &name, sha256) {
            Ok(Some(component)) => return Ok((component, CacheOutcome::Hit)),
            Ok(None) => true,
            Err(why) => {
                tracing::warn!(
                    entry = %entry.display(),
                    "compile cache entry not loaded, compiling again: {why}"
                );
                self.discard(opened, &name)
            }
        };
        let component = compile()?;
        if !may_store {
            return Ok((component, CacheOutcome::CompiledUncached));
        }
        match self.store(opened, &name, sha256, &component) {
            Ok(()) => Ok((component, CacheOutcome::Compiled)),
            Err(e) => {
                tracing::warn!(entry = %entry.display(), "could not write the compile cache: {e:#}");
                Ok((component, CacheOutcome::CompiledUncached))
            }
        }
    }

    /// The entry `name`, if there is one and its tag is right; an error says
    /// why an entry that is there was not loaded.
    fn load(
        &self,
        engine: &Engine,
        opened: &Opened,
        name: &str,
        sha256: &[u8; 32],
    ) -> Result<Option<Component>, String> {
        let entry = match opened.folder.read(name, Access::Private, MAX_ENTRY_BYTES) {
            Ok(Some(entry)) => entry,
            Ok(None) => return Ok(None),
            Err(e) => return Err(e.to_string()),
        };
        let artifact = verify(&opened.key, sha256, &self.engine, &entry)?;
        deserialize(engine, artifact)
            .map(Some)
            .map_err(|e| format!("wasmtime refused it: {e:#}"))
    }

    /// Removes an entry that was not loaded, if the user owns it; `false`
    /// when it is left alone (someone else's), and must not be replaced.
    fn discard(&self, opened: &Opened, name: &str) -> bool {
        match opened.folder.remove_if_ours(name) {
            Ok(true) => true,
            Ok(false) => {
                tracing::warn!(
                    entry = %self.dir.join(name).display(),
                    "the compile cache entry belongs to another user: left alone, not replaced"
                );
                false
            }
            Err(e) => {
                tracing::warn!(
                    entry = %self.dir.join(name).display(),
                    "could not remove the compile cache entry: {e}"
                );
                // Renaming a new entry over it replaces it all the same.
                true
            }
        }
    }

    fn store(
        &self,
        opened: &Opened,
        name: &str,
        sha256: &[u8; 32],
        component: &Component,
    ) -> Result<()> {
        let artifact = component.serialize().map_err(anyhow::Error::from)?;
        let tag = tag(&opened.key, sha256, &self.engine, &artifact);
        opened.folder.write(name, &[MAGIC, &tag, &artifact])?;
        Ok(())
    }
}

/// The key in `root`, made (32 random bytes, `0600`) if there is none yet.
/// A key that is a link, someone else's, readable by others or of the wrong
/// length refuses the cache: someone else may have read or chosen it.
fn read_or_create_key(root: &Folder) -> Result<[u8; KEY_LEN], String> {
    let path = root.path().join(KEY_FILE);
    let wrong_length = |len| {
        format!(
            "the key {} is {len} bytes, not {KEY_LEN}; remove it to start a new key (every \
             entry is compiled again)",
            path.display()
        )
    };
    // Twice at most: when another process writes the key between our read
    // and our write, the second read finds it.
    for _ in 0..2 {
        match root.read(KEY_FILE, Access::Secret, KEY_LEN as u64) {
            Ok(Some(bytes)) => {
                return <[u8; KEY_LEN]>::try_from(bytes.as_slice())
                    .map_err(|_| wrong_length(bytes.len() as u64));
            }
            Ok(None) => {}
            Err(Refused::Size(len)) => return Err(wrong_length(len)),
            Err(e) => return Err(format!("the key {}: {e}", path.display())),
        }
        let mut key = [0u8; KEY_LEN];
        getrandom::fill(&mut key)
            .map_err(|e| format!("no random bytes for the key {}: {e}", path.display()))?;
        match root.create_new(KEY_FILE, &key) {
            Ok(true) => return Ok(key),
            Ok(false) => continue,
            Err(e) => return Err(format!("writing the key {}: {e}", path.display())),
        }
    }
    Err(format!("the key {} keeps changing", path.display()))
}

/// The tag of an entry: HMAC-SHA256 under `key` over a label, the SHA-256
/// of the component, the engine's digest and the artifact (fixed lengths
/// before the one variable field, so no two inputs run together).
fn tag(key: &[u8; KEY_LEN], sha256: &[u8; 32], engine: &[u8; 32], artifact: &[u8]) -> [u8; 32] {
    mac(key, sha256, engine, artifact)
        .finalize()
        .into_bytes()
        .into()
}

fn mac(key: &[u8; KEY_LEN], sha256: &[u8; 32], engine: &[u8; 32], artifact: &[u8]) -> Hmac<Sha256> {
    let mut mac =
        <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes keys of any length");
    mac.update(b"agent-host compile cache entry v1\0");
    mac.update(sha256);
    mac.update(engine);
    mac.update(artifact);
    mac
}

/// The artifact in `entry`, if its tag is right for this key, component and
/// engine; the comparison takes the same time wherever the tags differ.
fn verify<'e>(
    key: &[u8; KEY_LEN],
    sha256: &[u8; 32],
    engine: &[u8; 32],
    entry: &'e [u8],
) -> Result<&'e [u8], String> {
    let rest = entry
        .strip_prefix(MAGIC.as_slice())
        .ok_or("it is not an agent-host cache entry (no header; older format or garbage)")?;
    if rest.len() < KEY_LEN {
        return Err(format!("it is truncated ({} bytes)", entry.len()));
    }
    let (tag, artifact) = rest.split_at(KEY_LEN);
    mac(key, sha256, engine, artifact)
        .verify_slice(tag)
        .map_err(|_| {
            "its tag is wrong: it was written for another component or engine, under another              key, or changed since"
                .to_owned()
        })?;
    Ok(artifact)
}

#[allow(unsafe_code)]
fn deserialize(engine: &Engine, artifact: &[u8]) -> Result<Component> {
    // SAFETY: `Component::deserialize` trusts `artifact` to be native code
    // that wasmtime wrote for this engine. `verify` has checked its tag, an
    // HMAC under a key only this user can read, over these very bytes (read
    // once, into memory, from a descriptor checked to be the user's own
    // regular file), this component's hash and this engine's digest: the
    // bytes are what `store` serialized for this component on this engine.
    // wasmtime also checks the header, its version and the engine's settings.
    unsafe { Component::deserialize(engine, artifact) }.map_err(anyhow::Error::from)
}

/// Feeds `std::hash::Hash` output into SHA-256, so that wasmtime's
/// compatibility hash gives the same key in every process.
struct ShaHasher(Sha256);

impl Hasher for ShaHasher {
    fn finish(&self) -> u64 {
        unreachable!("only the digest is read")
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

/// The SHA-256 of everything about `engine` that changes the code it
/// generates; its first 8 bytes, in hex, name the engine's folder.
fn engine_digest(engine: &Engine) -> [u8; 32] {
    let mut h = ShaHasher(Sha256::new());
    h.write(b"wasmtime ");
    h.write(wasmtime_version().as_bytes());
    engine.precompile_compatibility_hash().hash(&mut h);
    h.0.finalize().into()
}

fn wasmtime_version() -> &'static str {
    // wasmtime is pinned exactly in the workspace manifest.
    "48.0.8"
}

/// The SHA-256 of `bytes`.
pub(crate) fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// `bytes` in lowercase hex.
pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(key: &[u8; 32], sha256: &[u8; 32], engine: &[u8; 32], artifact: &[u8]) -> Vec<u8> {
        let tag = tag(key, sha256, engine, artifact);
        [MAGIC.as_slice(), &tag, artifact].concat()
    }

    #[test]
    fn an_entry_verifies_only_for_its_key_component_engine_and_bytes() {
        let (key, sha, engine) = ([1u8; 32], [2u8; 32], [3u8; 32]);
        let good = entry(&key, &sha, &engine, b"native code");
        assert_eq!(verify(&key, &sha, &engine, &good).unwrap(), b"native code");
        assert!(
            verify(&[9; 32], &sha, &engine, &good).is_err(),
            "another key"
        );
        assert!(
            verify(&key, &[9; 32], &engine, &good).is_err(),
            "another component"
        );
        assert!(
            verify(&key, &sha, &[9; 32], &good).is_err(),
            "another engine"
        );
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 1;
            assert!(
                verify(&key, &sha, &engine, &bad).is_err(),
                "byte {i} changed"
            );
        }
        for len in 0..good.len() {
            assert!(
                verify(&key, &sha, &engine, &good[..len]).is_err(),
                "cut to {len}"
            );
        }
        let mut longer = good.clone();
        longer.push(0);
        assert!(
            verify(&key, &sha, &engine, &longer).is_err(),
            "a byte added"
        );
    }
}
