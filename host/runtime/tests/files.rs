//! What a component path may be: a regular file of bounded size. A FIFO, a
//! device or a folder is refused at once (issue 15, items 7 and 8: a FIFO
//! hung the host forever, `/dev/zero` was read without end).

#![cfg(unix)]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use agent_host_runtime::{HookOptions, ProcessorOptions, Runtime, RuntimeConfig};

fn runtime() -> Runtime {
    Runtime::new(RuntimeConfig {
        cache_dir: None,
        max_component_bytes: 1 << 20,
        ..RuntimeConfig::default()
    })
    .unwrap()
}

/// Loads `path` as a processor and as a hook on another thread, and
/// returns both errors; panics if either takes more than 10 seconds.
fn refused(path: &Path) -> [String; 2] {
    let path = path.to_owned();
    let (send, receive) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = runtime();
        let processor = rt.load_file(&path, ProcessorOptions::default()).map(drop);
        let hook = rt.load_hook_file(&path, HookOptions::default()).map(drop);
        let _ = send.send([processor, hook]);
    });
    let started = Instant::now();
    let results = receive
        .recv_timeout(Duration::from_secs(10))
        .expect("the load returns instead of hanging");
    assert!(started.elapsed() < Duration::from_secs(10));
    results.map(|r| format!("{:#}", r.expect_err("refused")))
}

#[test]
fn a_fifo_is_refused_without_hanging() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("processor.wasm");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    for e in refused(&fifo) {
        assert!(e.contains("not a regular file"), "{e}");
    }
}

#[test]
fn devices_and_folders_are_refused() {
    for e in refused(Path::new("/dev/zero")) {
        assert!(e.contains("not a regular file"), "{e}");
    }
    let dir = tempfile::tempdir().unwrap();
    for e in refused(dir.path()) {
        assert!(e.contains("is a folder"), "{e}");
    }
}

#[test]
fn a_file_over_the_size_limit_is_refused_before_it_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.wasm");
    let file = std::fs::File::create(&big).unwrap();
    file.set_len(8 << 30).unwrap(); // sparse: 8 GiB that take no disk
    for e in refused(&big) {
        assert!(e.contains("over the limit"), "{e}");
    }
}
