//! The compile cache loads only entries it wrote itself, for this component
//! and this engine, from folders only the user controls.
//!
//! Regression tests for the compile-cache issue: a `.cwasm` planted in a
//! cache folder another user could write ran shellcode in the host, and an
//! entry swapped for another component's silently ran that component. Each
//! test plants what an attacker (or an accident) would, then checks what a
//! user would see: which component ran, and whether the cache was used.

#![cfg(unix)]

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};

use agent_host_core::Message;
use agent_host_runtime::{
    CacheOutcome, Processor, ProcessorOptions, RunInfo, Runtime, RuntimeConfig,
};
use agent_host_test_artifacts as guests;

fn runtime(root: &Path) -> Runtime {
    Runtime::new(RuntimeConfig {
        cache_dir: Some(root.to_owned()),
        ..RuntimeConfig::default()
    })
    .expect("the runtime starts")
}

fn load(rt: &Runtime, guest: &str) -> Processor {
    rt.load_file(Path::new(guest), ProcessorOptions::default())
        .expect("the guest loads")
}

/// The cache entry of a loaded processor.
fn entry(rt: &Runtime, p: &Processor) -> PathBuf {
    rt.cache()
        .expect("a cache")
        .dir()
        .join(format!("{}.cwasm", p.hash()))
}

/// Replaces `path` with `bytes` (a new file, as an attacker would write it).
fn plant(path: &Path, bytes: &[u8]) {
    let _ = fs::remove_file(path);
    fs::write(path, bytes).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o600)).unwrap();
}

fn chmod(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

/// The history after running `p` on three messages, as their texts.
fn run(rt: &Runtime, p: Processor) -> Vec<String> {
    let history = vec![
        Message::user("one"),
        Message::assistant("two"),
        Message::user("three"),
    ];
    let out = rt.run(&[p], &RunInfo::default(), history);
    assert!(out.failure.is_none(), "{:?}", out.failure);
    out.messages.iter().map(|m| m.content.clone()).collect()
}

/// Whether the current user is root, who may give files to other users.
fn is_root(dir: &Path) -> bool {
    fs::metadata(dir).unwrap().uid() == 0
}

#[test]
fn a_second_load_hits_and_every_file_is_private_to_the_user() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("a/b/components");
    let rt = runtime(&root);
    assert_eq!(
        load(&rt, guests::KEEP_ALL).compile(),
        CacheOutcome::Compiled
    );
    let p = load(&rt, guests::KEEP_ALL);
    assert_eq!(p.compile(), CacheOutcome::Hit);
    // Another runtime (another process, the same user) hits too: the key
    // is kept in the root.
    let again = load(&runtime(&root), guests::KEEP_ALL);
    assert_eq!(again.compile(), CacheOutcome::Hit);
    assert_eq!(run(&rt, again), ["one", "two", "three"]);

    let mode = |p: &Path| fs::symlink_metadata(p).unwrap().mode() & 0o777;
    for dir in [tmp.path().join("a"), tmp.path().join("a/b"), root.clone()] {
        assert_eq!(mode(&dir), 0o700, "{}", dir.display());
    }
    assert_eq!(mode(rt.cache().unwrap().dir()), 0o700);
    let key = rt.cache().unwrap().key_path();
    assert_eq!(mode(&key), 0o600);
    assert_eq!(fs::read(&key).unwrap().len(), 32);
    assert_eq!(mode(&entry(&rt, &p)), 0o600);
    // No temporary file is left behind.
    let names: Vec<_> = fs::read_dir(rt.cache().unwrap().dir())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
}

#[test]
fn an_entry_swapped_for_another_components_runs_the_right_component() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = runtime(tmp.path());
    let keep = load(&rt, guests::KEEP_ALL);
    let reverse = load(&rt, guests::REVERSE);
    // A valid artifact for the same engine, under the wrong name.
    plant(&entry(&rt, &keep), &fs::read(entry(&rt, &reverse)).unwrap());

    let p = load(&rt, guests::KEEP_ALL);
    assert_eq!(p.compile(), CacheOutcome::Compiled);
    assert_eq!(p.name(), "keep-all");
    assert_eq!(
        run(&rt, p),
        ["one", "two", "three"],
        "keep-all kept the order"
    );
    // The swapped entry was replaced by the right one.
    assert_eq!(load(&rt, guests::KEEP_ALL).compile(), CacheOutcome::Hit);
}

#[test]
fn a_planted_entry_is_compiled_again_never_loaded() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = runtime(tmp.path());
    let p = load(&rt, guests::KEEP_ALL);
    let path = entry(&rt, &p);

    // The real entry with a few bytes changed, as a patch to its code would
    // change them: here the text its `describe` returns, so that running
    // the planted code shows.
    let mut bytes = fs::read(&path).unwrap();
    let (real, planted) = (b"Keeps every message.", b"Planted by attacker!");
    let at = bytes
        .windows(real.len())
        .position(|w| w == real)
        .expect("the guest's summary is in its compiled data");
    bytes[at..at + real.len()].copy_from_slice(planted);
    plant(&path, &bytes);
    let p = load(&rt, guests::KEEP_ALL);
    assert_eq!(p.compile(), CacheOutcome::Compiled);
    assert_eq!(p.description().summary, "Keeps every message.");

    // Native-looking garbage: an ELF header and `int3` instructions.
    let mut shellcode = b"\x7fELF\x02\x01\x01".to_vec();
    shellcode.resize(8192, 0xcc);
    plant(&path, &shellcode);
    assert_eq!(
        load(&rt, guests::KEEP_ALL).compile(),
        CacheOutcome::Compiled
    );
    assert_eq!(load(&rt, guests::KEEP_ALL).compile(), CacheOutcome::Hit);
}

#[test]
fn a_truncated_entry_or_another_key_compiles_again() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = runtime(tmp.path());
    let p = load(&rt, guests::KEEP_ALL);
    let path = entry(&rt, &p);
    let whole = fs::read(&path).unwrap();
    for len in [0, 20, 60, whole.len() / 2, whole.len() - 1] {
        plant(&path, &whole[..len]);
        let p = load(&rt, guests::KEEP_ALL);
        assert_eq!(p.compile(), CacheOutcome::Compiled, "cut to {len} bytes");
        assert_eq!(run(&rt, p), ["one", "two", "three"]);
    }

    // Another key (as another user's would be): every entry is refused,
    // then written again under the new key.
    let key = rt.cache().unwrap().key_path();
    plant(&key, &[7u8; 32]);
    let rt = runtime(tmp.path());
    assert_eq!(
        load(&rt, guests::KEEP_ALL).compile(),
        CacheOutcome::Compiled
    );
    assert_eq!(load(&rt, guests::KEEP_ALL).compile(), CacheOutcome::Hit);

    // A key of the wrong length, or one others may read, is not used: the
    // cache is off and the component still loads.
    plant(&key, b"short");
    let p = load(&runtime(tmp.path()), guests::KEEP_ALL);
    assert_eq!(p.compile(), CacheOutcome::CompiledUncached);
    plant(&key, &[7u8; 32]);
    chmod(&key, 0o644);
    let p = load(&runtime(tmp.path()), guests::KEEP_ALL);
    assert_eq!(p.compile(), CacheOutcome::CompiledUncached);
}

#[test]
fn links_are_never_followed_for_an_entry_or_the_root() {
    let tmp = tempfile::tempdir().unwrap();
    let real = tmp.path().join("real");
    let rt = runtime(&real);
    let p = load(&rt, guests::KEEP_ALL);
    let path = entry(&rt, &p);

    // The entry is a link to a copy of the right entry, elsewhere.
    let elsewhere = tmp.path().join("elsewhere.cwasm");
    fs::rename(&path, &elsewhere).unwrap();
    symlink(&elsewhere, &path).unwrap();
    assert_eq!(
        load(&rt, guests::KEEP_ALL).compile(),
        CacheOutcome::Compiled
    );
    assert!(
        fs::symlink_metadata(&path).unwrap().is_file(),
        "the link was replaced"
    );
    assert!(
        fs::symlink_metadata(&elsewhere).unwrap().is_file(),
        "its target was left alone"
    );

    // The root is a link to a cache that holds the right entry.
    let link = tmp.path().join("link");
    symlink(&real, &link).unwrap();
    let linked = runtime(&link);
    assert_eq!(
        load(&linked, guests::KEEP_ALL).compile(),
        CacheOutcome::CompiledUncached
    );
    // With a trailing slash too, which `O_NOFOLLOW` alone would follow.
    let slash = PathBuf::from(format!("{}/", link.display()));
    let p = load(&runtime(&slash), guests::KEEP_ALL);
    assert_eq!(p.compile(), CacheOutcome::CompiledUncached);

    // The engine folder is a link to the real one.
    let other = tmp.path().join("other");
    let rt = runtime(&other);
    fs::create_dir(&other).unwrap();
    chmod(&other, 0o700);
    symlink(
        real.join(rt.cache().unwrap().dir().file_name().unwrap()),
        rt.cache().unwrap().dir(),
    )
    .unwrap();
    fs::copy(real.join("cache.key"), other.join("cache.key")).unwrap();
    assert_eq!(
        load(&rt, guests::KEEP_ALL).compile(),
        CacheOutcome::CompiledUncached
    );
}

#[test]
fn folders_or_entries_others_may_write_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let rt = runtime(&root);
    let p = load(&rt, guests::KEEP_ALL);
    let path = entry(&rt, &p);

    // An entry others may write is not loaded; it is the user's, so it is
    // replaced by a private one.
    chmod(&path, 0o666);
    assert_eq!(
        load(&rt, guests::KEEP_ALL).compile(),
        CacheOutcome::Compiled
    );
    assert_eq!(fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
    assert_eq!(load(&rt, guests::KEEP_ALL).compile(), CacheOutcome::Hit);

    // A root or an engine folder the group may write: the cache is off.
    chmod(&root, 0o770);
    assert_eq!(
        load(&runtime(&root), guests::KEEP_ALL).compile(),
        CacheOutcome::CompiledUncached
    );
    chmod(&root, 0o700);
    chmod(rt.cache().unwrap().dir(), 0o777);
    assert_eq!(
        load(&runtime(&root), guests::KEEP_ALL).compile(),
        CacheOutcome::CompiledUncached
    );
    chmod(rt.cache().unwrap().dir(), 0o700);
    assert_eq!(
        load(&runtime(&root), guests::KEEP_ALL).compile(),
        CacheOutcome::Hit
    );

    // Only root can give a file to another user; the owner check itself is
    // also tested, for any user, in the crate's unit tests.
    if !is_root(tmp.path()) {
        eprintln!("not root: the ownership cases are skipped");
        return;
    }
    std::os::unix::fs::chown(&path, Some(1), None).unwrap();
    assert_eq!(
        load(&rt, guests::KEEP_ALL).compile(),
        CacheOutcome::CompiledUncached
    );
    assert_eq!(
        fs::metadata(&path).unwrap().uid(),
        1,
        "another user's entry is left alone"
    );
    fs::remove_file(&path).unwrap();
    std::os::unix::fs::chown(&root, Some(1), None).unwrap();
    assert_eq!(
        load(&runtime(&root), guests::KEEP_ALL).compile(),
        CacheOutcome::CompiledUncached
    );
}
