//! Helpers: running the CLI, temporary folders, the shared corpus.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

/// The `agent-host` binary built for this test run, hermetic: no
/// configuration file of the user's, no configuration from the environment
/// of whoever runs the tests, no colour.
pub fn agent_host() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_agent-host"));
    let nowhere = std::env::temp_dir().join("agent-host-tests-no-user-config");
    command
        .env("XDG_CONFIG_HOME", &nowhere)
        .env("NO_COLOR", "1")
        .env_remove("RUST_LOG")
        .env_remove("CLICOLOR_FORCE");
    for var in [
        "AGENT_HOST_CONFIG",
        "AGENT_HOST_PROVIDER",
        "AGENT_HOST_MODEL",
        "AGENT_HOST_BASE_URL",
        "AGENT_HOST_API_KEY_ENV",
        "AGENT_HOST_CONTEXT_LIMIT",
    ] {
        command.env_remove(var);
    }
    command
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

/// The shared corpus of real transcripts, if this checkout has it beside it
/// (a failure under CI when it does not).
pub fn corpus() -> Option<PathBuf> {
    agent_host_testkit::corpus_dir()
}

/// The standard processors, in the order the issue lists them.
pub const STANDARD_PROCESSORS: [&str; 10] = [
    "keep-last-turns",
    "token-budget",
    "filter",
    "redact-secrets",
    "truncate-tool-results",
    "strip-media",
    "strip-reasoning",
    "dedupe-tool-results",
    "clear-tool-uses",
    "summarize-history",
];

/// The component of standard processor `name`, built once per test run by
/// the README's command: `agent-host processor build processors --out-dir
/// target/processors` (contract 0.2.0, the Rust SDK's default).
pub fn standard_processor(name: &str) -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| build_standard("target/processors", &[]))
        .join(format!("{name}.wasm"))
}

/// The component of standard processor `name` built against contract
/// 0.1.0 (`--features agent-host-guest/contract-0-1`), once per test run.
pub fn standard_processor_v0_1(name: &str) -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            build_standard(
                "target/processors-0.1.0",
                &["--features", "agent-host-guest/contract-0-1"],
            )
        })
        .join(format!("{name}.wasm"))
}

fn build_standard(out: &str, extra: &[&str]) -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = root.join(out);
    let output = agent_host()
        .args(["processor", "build", "--quiet", "--out-dir"])
        .arg(&out)
        .args(extra)
        .arg(root.join("processors"))
        // Its own target folder, whatever the host's build uses.
        .env_remove("CARGO_TARGET_DIR")
        .output()
        .expect("agent-host starts");
    assert!(
        output.status.success(),
        "building the standard processors failed:\n{}",
        stderr(&output)
    );
    out
}

/// Every history in the corpus: each tau-bench trajectory and each Claude
/// Code session, with a name for messages. Empty when there is no corpus.
pub fn corpus_histories() -> Vec<(String, Vec<agent_host_core::Message>)> {
    use agent_host_core::format::openai;
    let Some(dir) = corpus() else {
        return Vec::new();
    };
    let mut histories = Vec::new();
    let tau = dir.join("tau-bench-gpt4o-airline/gpt-4o-airline.json");
    let text = std::fs::read_to_string(&tau).expect("the tau-bench file");
    let runs: Vec<serde_json::Value> = serde_json::from_str(&text).expect("tau-bench JSON");
    for (i, run) in runs.into_iter().enumerate() {
        let messages = openai::from_value(run["traj"].clone()).expect("a tau-bench trajectory");
        histories.push((format!("tau-bench #{i}"), messages));
    }
    let mut sessions: Vec<PathBuf> = std::fs::read_dir(dir.join("claude-code-sessions-ccv"))
        .expect("the Claude Code sessions")
        .map(|e| e.expect("a folder entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    sessions.sort();
    for path in sessions {
        let loaded = agent_host_engine::transcript::load(&path, None, &Default::default())
            .expect("a Claude Code session");
        histories.push((path.display().to_string(), loaded.transcript.messages));
    }
    histories
}

/// Spawns `command`, an `agent-host serve` listening on a free loopback port,
/// with its standard output piped, and reads its first line, which must be
/// `listening on URL`; returns the child and the URL.
pub fn started_server(mut command: std::process::Command) -> (std::process::Child, String) {
    use std::io::BufRead;
    let mut child = command
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("agent-host serve starts");
    let mut first = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let first = first.trim_end();
    let base = first
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("the first line is `listening on URL`, not {first:?}"))
        .to_owned();
    (child, base)
}
