//! The language SDKs and the WIT contract, embedded in the binary when it is
//! built, so that `processor new --lang python|js|c` works from an installed
//! binary, far from any checkout: they are written once per version into
//! the tools folder, laid out as in the checkout (`guest-sdk/<lang>/`,
//! `wit/v0.2.0/`, the contract the SDKs build against, and `wit/v0.1.0/`,
//! which JavaScript's QuickJS backend still builds), which the SDKs'
//! scripts expect.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};

/// Every embedded file: its path in the checkout, its text, whether it is
/// executable.
const FILES: &[(&str, &str, bool)] = &[
    (
        "guest-sdk/c/agent_host_guest.c",
        include_str!("../../../guest-sdk/c/agent_host_guest.c"),
        false,
    ),
    (
        "guest-sdk/c/agent_host_guest.h",
        include_str!("../../../guest-sdk/c/agent_host_guest.h"),
        false,
    ),
    (
        "guest-sdk/c/agent_host_guest_native.c",
        include_str!("../../../guest-sdk/c/agent_host_guest_native.c"),
        false,
    ),
    (
        "guest-sdk/c/agent_host_guest_testing.h",
        include_str!("../../../guest-sdk/c/agent_host_guest_testing.h"),
        false,
    ),
    (
        "guest-sdk/c/agent_host_guest_wit.c",
        include_str!("../../../guest-sdk/c/agent_host_guest_wit.c"),
        false,
    ),
    (
        "guest-sdk/c/build-component.sh",
        include_str!("../../../guest-sdk/c/build-component.sh"),
        true,
    ),
    (
        "guest-sdk/c/toolchain.sh",
        include_str!("../../../guest-sdk/c/toolchain.sh"),
        true,
    ),
    (
        "guest-sdk/js/agent-host-guest.d.ts",
        include_str!("../../../guest-sdk/js/agent-host-guest.d.ts"),
        false,
    ),
    (
        "guest-sdk/js/agent-host-guest.js",
        include_str!("../../../guest-sdk/js/agent-host-guest.js"),
        false,
    ),
    (
        "guest-sdk/js/componentize.sh",
        include_str!("../../../guest-sdk/js/componentize.sh"),
        true,
    ),
    (
        "guest-sdk/js/package.json",
        include_str!("../../../guest-sdk/js/package.json"),
        false,
    ),
    (
        "guest-sdk/js/toolchain-spidermonkey/package-lock.json",
        include_str!("../../../guest-sdk/js/toolchain-spidermonkey/package-lock.json"),
        false,
    ),
    (
        "guest-sdk/js/toolchain-spidermonkey/package.json",
        include_str!("../../../guest-sdk/js/toolchain-spidermonkey/package.json"),
        false,
    ),
    (
        "guest-sdk/js/toolchain.sh",
        include_str!("../../../guest-sdk/js/toolchain.sh"),
        true,
    ),
    (
        "guest-sdk/js/toolchain/package-lock.json",
        include_str!("../../../guest-sdk/js/toolchain/package-lock.json"),
        false,
    ),
    (
        "guest-sdk/js/toolchain/package.json",
        include_str!("../../../guest-sdk/js/toolchain/package.json"),
        false,
    ),
    (
        "guest-sdk/python/agent_host_guest/__init__.py",
        include_str!("../../../guest-sdk/python/agent_host_guest/__init__.py"),
        false,
    ),
    (
        "guest-sdk/python/agent_host_guest/_native.py",
        include_str!("../../../guest-sdk/python/agent_host_guest/_native.py"),
        false,
    ),
    (
        "guest-sdk/python/agent_host_guest/component.py",
        include_str!("../../../guest-sdk/python/agent_host_guest/component.py"),
        false,
    ),
    (
        "guest-sdk/python/agent_host_guest/config.py",
        include_str!("../../../guest-sdk/python/agent_host_guest/config.py"),
        false,
    ),
    (
        "guest-sdk/python/agent_host_guest/errors.py",
        include_str!("../../../guest-sdk/python/agent_host_guest/errors.py"),
        false,
    ),
    (
        "guest-sdk/python/agent_host_guest/history.py",
        include_str!("../../../guest-sdk/python/agent_host_guest/history.py"),
        false,
    ),
    (
        "guest-sdk/python/agent_host_guest/host.py",
        include_str!("../../../guest-sdk/python/agent_host_guest/host.py"),
        false,
    ),
    (
        "guest-sdk/python/agent_host_guest/processor.py",
        include_str!("../../../guest-sdk/python/agent_host_guest/processor.py"),
        false,
    ),
    (
        "guest-sdk/python/agent_host_guest/selfcheck.py",
        include_str!("../../../guest-sdk/python/agent_host_guest/selfcheck.py"),
        false,
    ),
    (
        "guest-sdk/python/agent_host_guest/services.py",
        include_str!("../../../guest-sdk/python/agent_host_guest/services.py"),
        false,
    ),
    (
        "guest-sdk/python/agent_host_guest/testing.py",
        include_str!("../../../guest-sdk/python/agent_host_guest/testing.py"),
        false,
    ),
    (
        "guest-sdk/python/agent_host_guest/types.py",
        include_str!("../../../guest-sdk/python/agent_host_guest/types.py"),
        false,
    ),
    (
        "guest-sdk/python/componentize.sh",
        include_str!("../../../guest-sdk/python/componentize.sh"),
        true,
    ),
    (
        "guest-sdk/python/toolchain.sh",
        include_str!("../../../guest-sdk/python/toolchain.sh"),
        true,
    ),
    (
        "wit/v0.1.0/history.wit",
        include_str!("../../../wit/v0.1.0/history.wit"),
        false,
    ),
    (
        "wit/v0.2.0/history.wit",
        include_str!("../../../wit/v0.2.0/history.wit"),
        false,
    ),
];

/// The folder the embedded SDKs go to: `$AGENT_HOST_TOOLS/sdk/<version>-<digest>`
/// (the tools folder defaults to `~/.cache/agent-host/tools`, as the
/// toolchain scripts'), written once and reused.
pub(crate) fn extracted_root() -> Result<PathBuf> {
    let tools = match std::env::var_os("AGENT_HOST_TOOLS") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => {
            let cache = std::env::var_os("XDG_CACHE_HOME")
                .filter(|d| !d.is_empty())
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
                .context(
                    "cannot find a cache folder for the language SDKs: set AGENT_HOST_TOOLS",
                )?;
            cache.join("agent-host/tools")
        }
    };
    let root = tools
        .join("sdk")
        .join(format!("{}-{}", env!("CARGO_PKG_VERSION"), &digest()[..16]));
    if !root.join(".complete").is_file() {
        extract(&root)?;
    }
    Ok(root)
}

/// A digest of every embedded file, so that a changed SDK gets a folder of
/// its own.
fn digest() -> String {
    let mut hash = Sha256::new();
    for (path, text, executable) in FILES {
        hash.update(path.as_bytes());
        hash.update([0, u8::from(*executable)]);
        hash.update(text.as_bytes());
        hash.update([0]);
    }
    format!("{:x}", hash.finalize())
}

/// Writes every file into a new folder beside `root`, then renames it into
/// place, so a reader never sees half an SDK (a racing writer's finished
/// copy wins; the files are the same).
fn extract(root: &Path) -> Result<()> {
    let parent = root.parent().context("the SDK folder has a parent")?;
    std::fs::create_dir_all(parent)
        .with_context(|| format!("cannot create {}", parent.display()))?;
    let work = tempfile::Builder::new()
        .prefix(".sdk-")
        .tempdir_in(parent)
        .with_context(|| format!("cannot create a folder in {}", parent.display()))?;
    for (path, text, executable) in FILES {
        let target = work.path().join(path);
        if let Some(dir) = target.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        std::fs::write(&target, text)
            .with_context(|| format!("cannot write {}", target.display()))?;
        #[cfg(unix)]
        if *executable {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o755))
                .with_context(|| format!("cannot make {} executable", target.display()))?;
        }
    }
    std::fs::write(work.path().join(".complete"), digest())
        .context("cannot mark the SDK folder complete")?;
    let work = work.keep();
    match std::fs::rename(&work, root) {
        Ok(()) => Ok(()),
        Err(_) if root.join(".complete").is_file() => {
            let _ = std::fs::remove_dir_all(&work);
            Ok(())
        }
        Err(e) => Err(e).with_context(|| format!("cannot move the SDKs into {}", root.display())),
    }
}

/// Whether a file of the checkout's SDK folders stays out of the embedded
/// copy: templates (embedded apart), the SDKs' own tests and notes.
#[cfg(test)]
fn left_out(path: &str) -> bool {
    let parts: Vec<&str> = path.split('/').collect();
    let name = parts.last().copied().unwrap_or_default();
    parts
        .iter()
        .any(|p| matches!(*p, "template" | "tests" | "test" | "node_modules"))
        || matches!(
            name,
            ".gitignore" | "README.md" | "test_sdk.c" | "test_conformance.c"
        )
        || path == "guest-sdk/c/test.sh"
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file the SDKs' scripts and projects use is embedded: the list
    /// is the checkout's folders less what [`left_out`] says. (Regression:
    /// the C SDK's native build files were missing, so a C project made by
    /// an installed binary could not run its own test.)
    #[test]
    fn every_sdk_file_is_embedded() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut on_disk = Vec::new();
        let mut stack: Vec<PathBuf> = [
            "guest-sdk/python",
            "guest-sdk/js",
            "guest-sdk/c",
            "wit/v0.1.0",
            "wit/v0.2.0",
        ]
        .iter()
        .map(|d| root.join(d))
        .collect();
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                let relative = path
                    .strip_prefix(&root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                if left_out(&relative) || relative.contains("__pycache__") {
                    continue;
                }
                if path.is_dir() {
                    stack.push(path);
                } else {
                    on_disk.push(relative);
                }
            }
        }
        let mut embedded: Vec<String> = FILES.iter().map(|(p, _, _)| (*p).to_owned()).collect();
        on_disk.sort();
        embedded.sort();
        assert_eq!(embedded, on_disk);
    }

    #[test]
    fn the_sdks_extract_complete_and_runnable() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("sdk");
        extract(&root).unwrap();
        for lang in ["python", "js", "c"] {
            assert!(
                root.join("guest-sdk")
                    .join(lang)
                    .join("toolchain.sh")
                    .is_file(),
                "{lang}"
            );
        }
        assert!(root.join("wit/v0.1.0/history.wit").is_file());
        assert!(root.join("wit/v0.2.0/history.wit").is_file());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(root.join("guest-sdk/python/toolchain.sh"))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o111, 0o111, "scripts stay executable");
        }
        // A second extraction finds the first complete and leaves it.
        extract(&root).unwrap();
    }
}

#[cfg(test)]
mod projects {
    /// A project made from the embedded SDKs (as an installed binary makes
    /// it) points at the extracted copy, which holds what its scripts run.
    #[test]
    fn projects_use_the_extracted_sdk() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("sdk");
        super::extract(&root).unwrap();
        let root = root.canonicalize().unwrap();
        type Scaffold = fn(&str, &std::path::Path, &std::path::Path) -> anyhow::Result<String>;
        let langs: [(&str, Scaffold); 3] = [
            ("python", crate::lang_python::scaffold),
            ("js", crate::lang_js::scaffold),
            ("c", crate::lang_c::scaffold),
        ];
        for (lang, scaffold) in langs {
            let project = dir.path().join(format!("p-{lang}"));
            scaffold("tidy-up", &project, &root).unwrap();
            let mut mentions = false;
            for entry in std::fs::read_dir(&project).unwrap() {
                let path = entry.unwrap().path();
                if path.is_file() {
                    let text = std::fs::read_to_string(&path).unwrap_or_default();
                    mentions |=
                        text.contains(&*root.join("guest-sdk").join(lang).to_string_lossy());
                }
            }
            assert!(mentions, "{lang}: the project names the extracted SDK");
        }
    }
}
