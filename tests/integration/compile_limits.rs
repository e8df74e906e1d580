//! Compiling a component is bounded: by size before it starts, by time and
//! memory while it runs (in a child process of `agent-host`).
//!
//! Regression tests for security hardening item 6: compilation was outside
//! every limit (a 210 KB component took 23-58 s and 1.3 GiB to compile, a
//! 317 KB one 120 s and 2.7 GiB), and components up to 64 MiB were accepted.

use std::process::Output;
use std::time::{Duration, Instant};

use crate::util::{agent_host, stderr};

/// `n` in unsigned LEB128.
fn leb(mut n: usize) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return out;
        }
        out.push(byte | 0x80);
    }
}

/// A section: its id, its length, its contents.
fn section(id: u8, contents: &[u8]) -> Vec<u8> {
    [&[id][..], &leb(contents.len()), contents].concat()
}

/// A component holding one core module of `functions` functions, each of
/// which pushes `depth` constants and adds them up: every constant stays
/// live until the adds, so the register allocator works hard. One function
/// of depth 1,000,000 (3 MB) took 10 s and 740 MB to compile here; it
/// exports nothing, so once compiled it is refused anyway.
fn slow_to_compile(functions: usize, depth: usize) -> Vec<u8> {
    let mut body = vec![0x00]; // no locals
    for _ in 0..depth {
        body.extend_from_slice(&[0x41, 0x01]); // i32.const 1
    }
    body.extend(std::iter::repeat_n(0x6a, depth - 1)); // i32.add
    body.extend_from_slice(&[0x1a, 0x0b]); // drop, end
    let body = [leb(body.len()), body].concat();

    let types = [leb(1), vec![0x60, 0x00, 0x00]].concat(); // () -> ()
    let funcs = [leb(functions), vec![0x00; functions]].concat();
    let code = [leb(functions), body.repeat(functions)].concat();
    let module = [
        b"\0asm\x01\0\0\0".to_vec(),
        section(1, &types),
        section(3, &funcs),
        section(10, &code),
    ]
    .concat();
    [b"\0asm\x0d\0\x01\0".to_vec(), section(1, &module)].concat()
}

/// Runs `agent-host run` with `component` as its processor and `env` set,
/// and returns its output and how long it took.
fn load(component: &[u8], env: &[(&str, &str)]) -> (Output, Duration) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("component.wasm");
    std::fs::write(&path, component).unwrap();
    let input = dir.path().join("history.json");
    std::fs::write(&input, agent_host_engine::transcript::SAMPLE).unwrap();
    let mut command = agent_host();
    command
        .args(["run", "--input"])
        .arg(&input)
        .arg("--processor")
        .arg(&path)
        .arg("--cache-dir")
        .arg(dir.path().join("cache"));
    for (name, value) in env {
        command.env(name, value);
    }
    let start = Instant::now();
    let output = command.output().expect("agent-host runs");
    (output, start.elapsed())
}

#[test]
fn a_component_slow_to_compile_is_stopped_at_the_compile_time_limit() {
    // About 10 s to compile without a limit.
    let component = slow_to_compile(1, 1_000_000);
    let (out, took) = load(&component, &[("AGENT_HOST_COMPILE_TIMEOUT", "1")]);
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("took longer than the limit of 1 s for compiling a component"),
        "{err}"
    );
    assert!(err.contains("component.wasm"), "names the component: {err}");
    assert!(err.contains("AGENT_HOST_COMPILE_TIMEOUT"), "{err}");
    // Stopped at 1 s; the rest is the process starting on a busy machine.
    assert!(took < Duration::from_secs(15), "took {took:?}");
}

#[test]
fn a_component_hungry_to_compile_is_stopped_at_the_compile_memory_limit() {
    // About 740 MB to compile without a limit.
    let component = slow_to_compile(1, 1_000_000);
    let (out, took) = load(
        &component,
        &[
            ("AGENT_HOST_COMPILE_MEMORY_MB", "300"),
            ("AGENT_HOST_COMPILE_TIMEOUT", "120"),
        ],
    );
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("ran out of the 300 MiB of memory allowed for compiling a component"),
        "{err}"
    );
    assert!(err.contains("AGENT_HOST_COMPILE_MEMORY_MB"), "{err}");
    assert!(took < Duration::from_secs(60), "took {took:?}");
}

#[test]
fn an_oversized_component_is_refused_by_default_naming_the_cap_and_how_to_raise_it() {
    // A valid component header and one custom section: 33 MiB, over the
    // default cap of 32 MiB (and under the 64 MiB accepted before).
    let payload = [&leb(4)[..], b"junk", &vec![0u8; 33 << 20]].concat();
    let component = [b"\0asm\x0d\0\x01\0".to_vec(), section(0, &payload)].concat();
    let (out, _) = load(&component, &[]);
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("over the limit of 32.0 MiB for a component"),
        "{err}"
    );
    assert!(err.contains("AGENT_HOST_MAX_COMPONENT_MB"), "{err}");

    // Raised, the size is no longer what refuses it (it exports nothing).
    let (out, _) = load(&component, &[("AGENT_HOST_MAX_COMPONENT_MB", "64")]);
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert!(!err.contains("over the limit"), "{err}");
    assert!(err.contains("does not export"), "{err}");
}

#[test]
fn compiles_go_through_the_limited_child_and_cached_components_skip_it() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let run = |env: &[(&str, &str)]| {
        let mut command = agent_host();
        command
            .args(["run", "--input", "-", "--processor"])
            .arg(agent_host_test_artifacts::EDITS)
            .arg("--cache-dir")
            .arg(&cache)
            .stdin(std::process::Stdio::piped());
        for (name, value) in env {
            command.env(name, value);
        }
        let mut child = command
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::io::Write::write_all(
            &mut child.stdin.take().unwrap(),
            agent_host_engine::transcript::SAMPLE.as_bytes(),
        )
        .unwrap();
        child.wait_with_output().unwrap()
    };
    // 1 MiB of address space cannot compile anything: the compile is in the
    // limited child, not in `agent-host` itself.
    let starved = [("AGENT_HOST_COMPILE_MEMORY_MB", "1")];
    let out = run(&starved);
    assert!(!out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("ran out of the 1 MiB of memory allowed"),
        "{}",
        stderr(&out)
    );
    // Compiled under the default limits, it is cached...
    let out = run(&[]);
    assert!(out.status.success(), "{}", stderr(&out));
    // ...and loaded from the cache without compiling, so no limit applies.
    let out = run(&starved);
    assert!(out.status.success(), "{}", stderr(&out));
}
