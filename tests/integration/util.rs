//! Helpers: running the CLI, temporary folders, the shared corpus.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

/// The `agent-host` binary built for this test run.
pub fn agent_host() -> Command {
    Command::new(env!("CARGO_BIN_EXE_agent-host"))
}

/// Runs `agent-host` with `args`, feeding `stdin`, and returns its output.
pub fn run(args: &[&str], stdin: &str) -> Output {
    let mut child = agent_host()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("agent-host starts");
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(stdin.as_bytes())
        .expect("stdin accepts the input");
    child.wait_with_output().expect("agent-host finishes")
}

/// Standard output as text.
pub fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).expect("UTF-8 stdout")
}

/// Standard error as text.
pub fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).expect("UTF-8 stderr")
}

/// The shared corpus of real transcripts, if this checkout has it beside it.
pub fn corpus() -> Option<PathBuf> {
    let dir = std::env::var_os("AGENT_HOST_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/corpus"));
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!(
            "SKIPPED: no corpus at {} (set AGENT_HOST_CORPUS)",
            dir.display()
        );
        None
    }
}
