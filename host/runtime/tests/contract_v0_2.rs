//! Contract 0.2.0 (issue 20): the standard processors built against it
//! (the default of the Rust SDK) run beside the 0.1.0 fixture in the same
//! host, and give the same output on the same history.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use agent_host_core::Message;
use agent_host_runtime::{ProcessorOptions, RunInfo, Runtime, RuntimeConfig};

/// Standard processor `name` built for contract 0.2.0 (the SDK's default),
/// or for 0.1.0 with `agent-host-guest/contract-0-1`, once per test run.
fn built(name: &str, v0_1: bool) -> PathBuf {
    static BUILT: OnceLock<[PathBuf; 2]> = OnceLock::new();
    let dirs = BUILT.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let out = root.join("target/contract-test");
        [false, true].map(|old| {
            let dir = out.join(if old { "0.1.0" } else { "0.2.0" });
            agent_host_tools::build(&agent_host_tools::BuildOptions {
                path: root.join("processors"),
                out_dir: Some(dir.clone()),
                packages: vec!["keep-last-turns".into(), "token-budget".into()],
                debug: false,
                quiet: true,
                single: false,
                features: if old {
                    vec!["agent-host-guest/contract-0-1".into()]
                } else {
                    Vec::new()
                },
            })
            .expect("the processors build");
            dir
        })
    });
    dirs[usize::from(v0_1)].join(format!("{name}.wasm"))
}

fn runtime() -> Runtime {
    Runtime::new(RuntimeConfig {
        cache_dir: None,
        ..RuntimeConfig::default()
    })
    .unwrap()
}

/// A system prompt, turns, a summary, tool exchanges (one split across a
/// turn start), metadata and reasoning, with token estimates that differ.
fn history() -> Vec<Message> {
    let mut summary = Message::assistant("what came before").with_id("sum");
    summary.summary = true;
    let mut call = Message::assistant("").with_id("a2");
    call.push_tool_call("c1", "search", r#"{"q": "x"}"#);
    call.push_tool_call("c2", "read", r#"{"path": "/etc"}"#);
    let mut late = Message::assistant("").with_id("a5");
    late.push_tool_call("c3", "search", "{}");
    let mut with_meta = Message::user("three ".repeat(200)).with_id("u3");
    with_meta
        .metadata
        .insert("k".into(), serde_json::json!({"deep": [1, 2]}));
    vec![
        Message::system("rules").with_id("s"),
        Message::user("one").with_id("u1"),
        summary,
        Message::user("two").with_id("u2"),
        call,
        Message::tool_result("c1", "search", "found ".repeat(500)).with_id("t1"),
        Message::tool_result("c2", "read", "text").with_id("t2"),
        Message::assistant("three").with_id("a3"),
        with_meta,
        late,
        Message::tool_result("c3", "search", "late").with_id("t3"),
        Message::user("four").with_id("u4"),
        Message::assistant("done").with_id("a4"),
    ]
}

fn ids(messages: &[Message]) -> Vec<&str> {
    messages.iter().map(|m| m.id.as_str()).collect()
}

/// Runs `path` with `config` over the history; the output and the report's
/// log lines.
fn run(rt: &Runtime, path: &Path, config: &str, contract: &str) -> (Vec<Message>, Vec<String>) {
    let p = rt
        .load_file(
            path,
            ProcessorOptions {
                config: Some(config.into()),
                ..ProcessorOptions::default()
            },
        )
        .unwrap_or_else(|e| panic!("{} loads: {e:#}", path.display()));
    assert_eq!(p.contract(), contract, "{}", path.display());
    let out = rt.run(std::slice::from_ref(&p), &RunInfo::default(), history());
    let report = &out.reports[0];
    assert!(
        report.error.is_none(),
        "{}: {:?}",
        path.display(),
        report.error
    );
    let logs = report.logs.iter().map(|l| l.text.clone()).collect();
    (out.messages, logs)
}

#[test]
fn keep_last_turns_under_0_2_0_gives_the_0_1_0_fixtures_output() {
    let rt = runtime();
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/keep-last-turns-0.1.0.wasm");
    for turns in 1..=4 {
        let config = format!(r#"{{"turns": {turns}}}"#);
        let (old, _) = run(&rt, &fixture, &config, "0.1.0");
        let (new, _) = run(&rt, &built("keep-last-turns", false), &config, "0.2.0");
        let (rebuilt, _) = run(&rt, &built("keep-last-turns", true), &config, "0.1.0");
        assert_eq!(new, old, "turns {turns}");
        assert_eq!(rebuilt, old, "turns {turns}");
    }
    let (two, _) = run(
        &rt,
        &built("keep-last-turns", false),
        r#"{"turns": 2}"#,
        "0.2.0",
    );
    assert_eq!(ids(&two), ["s", "sum", "u3", "a5", "t3", "u4", "a4"]);
}

#[test]
fn token_budget_reads_the_same_costs_under_both_contracts() {
    let rt = runtime();
    for tokens in [40, 200, 600, 2_000, 100_000] {
        let config = format!(r#"{{"tokens": {tokens}}}"#);
        let (old, old_logs) = run(&rt, &built("token-budget", true), &config, "0.1.0");
        let (new, new_logs) = run(&rt, &built("token-budget", false), &config, "0.2.0");
        assert_eq!(ids(&new), ids(&old), "tokens {tokens}");
        assert_eq!(new, old, "tokens {tokens}");
        assert_eq!(new_logs, old_logs, "tokens {tokens}");
    }
}

#[test]
fn a_0_2_0_refusal_of_its_configuration_is_typed() {
    let rt = runtime();
    let p = rt
        .load_file(
            &built("keep-last-turns", false),
            ProcessorOptions {
                config: Some(r#"{"turns": 0}"#.into()),
                ..ProcessorOptions::default()
            },
        )
        .unwrap();
    let input = history();
    let out = rt.run(std::slice::from_ref(&p), &RunInfo::default(), input.clone());
    assert_eq!(out.messages, input, "the input comes back whole");
    let error = out.reports[0].error.as_deref().unwrap_or_default();
    assert!(
        error.contains("rejected its configuration")
            && error.contains("`turns` must be at least 1"),
        "{error}"
    );
}
