//! Host services end to end (issue 20): the standard `summarize-history`,
//! built by the README's command, run by `agent-host run` against the
//! loopback model server on both wires. Granted, the model writes the
//! summary that replaces the older turns; not granted or over budget, the
//! model is never asked and the history stands; the API key is in nothing
//! the processor receives, even when the server quotes it back.

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

use crate::langs;
use crate::llm_server::{Answer, LlmServer, Scripted, Wire};
use crate::util::{agent_host, standard_processor, stderr, stdout};

const KEY: &str = "sk-services-secret-4242";

/// A system prompt and five turns, a tool exchange in the second.
fn history(dir: &Path) -> PathBuf {
    let mut messages = vec![serde_json::json!({"role": "system", "content": "Be brief."})];
    for i in 0..5 {
        messages.push(serde_json::json!({"role": "user", "content": format!("question {i}")}));
        if i == 1 {
            messages.push(serde_json::json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "search", "arguments": "{\"q\":\"cats\"}"}}
            ]}));
            messages.push(
                serde_json::json!({"role": "tool", "tool_call_id": "call_1", "content": "three cats"}),
            );
        }
        messages.push(serde_json::json!({"role": "assistant", "content": format!("answer {i}")}));
    }
    let path = dir.join("history.json");
    std::fs::write(&path, serde_json::to_string(&messages).unwrap()).unwrap();
    path
}

/// `agent-host run` with summarize-history and `extra` flags after it,
/// against `server`; its output and report.
fn run(server: &LlmServer, extra: &[&str]) -> (Output, Value) {
    run_processor(&standard_processor("summarize-history"), server, extra)
}

/// [`run`] with `processor` (a port of summarize-history) in its place.
fn run_processor(processor: &Path, server: &LlmServer, extra: &[&str]) -> (Output, Value) {
    let dir = tempfile::tempdir().unwrap();
    let (output, report) = run_in(dir.path(), server, processor, extra);
    let report = std::fs::read_to_string(&report)
        .map(|t| serde_json::from_str(&t).unwrap())
        .unwrap_or(Value::Null);
    (output, report)
}

/// [`run_processor`] with its history and report in `dir`; its output and
/// the report's path.
fn run_in(dir: &Path, server: &LlmServer, processor: &Path, extra: &[&str]) -> (Output, PathBuf) {
    let input = history(dir);
    let report = dir.join("report.json");
    let kind = match server.wire() {
        Wire::OpenAi => "openai",
        Wire::Anthropic => "anthropic",
    };
    let output = agent_host()
        .arg("run")
        .arg("--input")
        .arg(&input)
        .args(["--no-compact", "--to", "jsonl", "--no-cache", "--report"])
        .arg(&report)
        .arg("--processor")
        .arg(processor)
        .args([
            "--processor-config",
            r#"{"keep_turns": 2, "min_messages": 2, "max_tokens": 300}"#,
        ])
        .args(extra)
        .args(["--provider", kind, "--model", "test-model", "--base-url"])
        .arg(server.base_url())
        .env("AGENT_HOST_API_KEY_ENV", "TEST_SERVICES_KEY")
        .env("TEST_SERVICES_KEY", KEY)
        .output()
        .unwrap();
    (output, report)
}

fn messages(output: &Output) -> Vec<Value> {
    assert!(output.status.success(), "{}", stderr(output));
    stdout(output)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn contents(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// The first log line of the first processor in the report at `path`
/// (empty when it logged nothing).
fn first_log_line(path: &Path) -> String {
    let report: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    report["processors"][0]["logs"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Everything of the run a processor could have received or passed on:
/// its answers from the host, its logs, its output.
fn seen_by_the_guest(output: &Output, report: &Value) -> String {
    format!(
        "{}{}{}",
        stdout(output),
        report["processors"][0]["services"],
        report["processors"][0]["logs"]
    )
}

#[test]
fn summarize_history_replaces_the_older_turns_with_the_models_summary_on_both_wires() {
    for wire in [Wire::OpenAi, Wire::Anthropic] {
        let server = LlmServer::start(wire);
        server.require_key(KEY);
        server.push(
            Answer::text("## Current State\nThree cats were found.")
                .with_usage(321, 12)
                .into(),
        );
        let (output, report) = run(&server, &["--allow-summarize"]);
        let out = messages(&output);
        let texts = contents(&out);
        assert_eq!(
            texts,
            [
                "Be brief.",
                "[The 8 earlier messages of this conversation were summarized.]",
                "## Current State\nThree cats were found.",
                "question 3",
                "answer 3",
                "question 4",
                "answer 4",
            ],
            "{wire:?}"
        );
        for m in &out[1..3] {
            // JSONL marks a checkpoint message by its type.
            assert_eq!(m["type"], "summary", "{wire:?}: {m}");
            assert_eq!(m["synthetic"], true, "{wire:?}: {m}");
        }
        // The model was asked once, with the older turns and the tool
        // exchange, none of the kept ones.
        let requests = server.requests();
        assert_eq!(requests.len(), 1, "{wire:?}");
        let asked = requests[0].body.to_string();
        for said in [
            "You summarize the earlier part",
            "question 0",
            "three cats",
            "answer 2",
        ] {
            assert!(asked.contains(said), "{wire:?}: {said} in {asked}");
        }
        assert!(!asked.contains("question 3"), "{wire:?}");
        // The report says what was called and what it cost.
        let p = &report["processors"][0];
        assert_eq!(p["outcome"], "applied", "{wire:?}: {p}");
        let call = &p["services"][0];
        assert_eq!(call["served"], true, "{wire:?}");
        assert_eq!(call["request"]["service"], "summarize");
        assert_eq!(call["request"]["max_tokens"], 300);
        assert_eq!(call["result"]["answer"]["input_tokens"], 321);
        assert_eq!(p["service_usage"]["model_tokens"], 333);
        assert!(
            !seen_by_the_guest(&output, &report).contains(KEY),
            "{wire:?}"
        );
    }
}

#[test]
fn without_the_grant_or_over_the_budget_the_model_is_never_asked() {
    let server = LlmServer::start(Wire::OpenAi);
    for (extra, kind, says) in [
        (&[][..], "denied", "--allow-summarize"),
        (
            &["--allow-summarize", "--model-tokens", "100"][..],
            "over_budget",
            "model tokens",
        ),
        (
            &["--allow-count-tokens", "--allow-memory"][..],
            "denied",
            "--allow-summarize",
        ),
    ] {
        let (output, report) = run(&server, extra);
        let out = messages(&output);
        // The history stands: 1 system message and 12 of the turns.
        assert_eq!(out.len(), 13, "{extra:?}");
        let call = &report["processors"][0]["services"][0];
        assert_eq!(call["served"], false, "{extra:?}");
        assert_eq!(call["result"]["error"]["error"], kind, "{extra:?}: {call}");
        let reason = call["result"]["error"]["reason"].as_str().unwrap();
        assert!(reason.contains(says), "{extra:?}: {reason}");
        let logs = report["processors"][0]["logs"].to_string();
        assert!(logs.contains("no summary"), "{extra:?}: {logs}");
    }
    assert!(server.requests().is_empty());
}

#[test]
fn a_key_the_server_quotes_back_never_reaches_the_processor() {
    let server = LlmServer::start(Wire::OpenAi);
    server.push(Scripted::Status {
        status: 401,
        body: format!(
            r#"{{"error": {{"message": "Incorrect API key provided: {KEY}", "type": "invalid_request_error"}}}}"#
        ),
        retry_after: None,
    });
    let (output, report) = run(&server, &["--allow-summarize"]);
    assert_eq!(messages(&output).len(), 13);
    let call = &report["processors"][0]["services"][0];
    assert_eq!(call["served"], true);
    assert_eq!(call["result"]["error"]["error"], "failed", "{call}");
    let reason = call["result"]["error"]["reason"].as_str().unwrap();
    assert!(reason.contains("[redacted]"), "{reason}");
    assert!(!seen_by_the_guest(&output, &report).contains(KEY));
    assert!(!stderr(&output).contains(KEY), "{}", stderr(&output));
}

/// A turn (`run --session --message`): the engine serves the processors'
/// services from the same provider, before it sends the turn itself.
#[test]
fn a_turns_processors_are_served_by_the_engines_provider() {
    let server = LlmServer::start(Wire::OpenAi);
    server.require_key(KEY);
    server.push(Answer::text("a two-line summary").with_usage(50, 5).into());
    server.push(Answer::text("Hello back.").into());
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("agent-host.toml");
    std::fs::write(
        &config,
        format!(
            "[provider]\nkind = \"openai\"\nmodel = \"test-model\"\nbase_url = \"{}\"\napi_key_env = \"TEST_SERVICES_KEY\"\nstream = false\n",
            server.base_url()
        ),
    )
    .unwrap();
    let report = dir.path().join("report.json");
    let output = agent_host()
        .arg("--config")
        .arg(&config)
        .args([
            "run",
            "--session",
            "s1",
            "--message",
            "hi",
            "--no-cache",
            "--quiet",
        ])
        .arg("--store")
        .arg(dir.path().join("store"))
        .arg("--report")
        .arg(&report)
        .arg("--processor")
        .arg(agent_host_test_artifacts::SERVICES)
        .args([
            "--processor-config",
            r#"{"calls": ["summarize", "memory"]}"#,
            "--allow-summarize",
        ])
        .env("TEST_SERVICES_KEY", KEY)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("Hello back."),
        "{}",
        stdout(&output)
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert!(requests[0].contains("Summarize this."));
    assert!(!requests[1].contains("Summarize this."));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let p = &report["processors"][0];
    let logs = p["logs"].to_string();
    assert!(
        logs.contains("summarize: ok a two-line summary in=50 out=5"),
        "{logs}"
    );
    assert!(logs.contains("memory: denied:"), "{logs}");
    assert_eq!(p["service_usage"]["model_tokens"], 55);
    assert_eq!(p["service_usage"]["denied"], 1);
    assert!(!logs.contains(KEY) && !p["services"].to_string().contains(KEY));
}

/// `read-memory` gives the facts of the configured user with the run's
/// agent, never another user's (nor another agent's) from the same store.
#[test]
fn a_memory_read_sees_only_the_runs_user_and_agent() {
    use agent_host_core::memory::{Fact, Scope};
    use agent_host_store::memory::MemoryStore;

    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let memory = MemoryStore::open(&store.to_string_lossy()).unwrap();
    let now = chrono::Utc::now();
    for (user, agent, text) in [
        ("alice", "default", "alice likes green tea"),
        ("bob", "default", "bob likes black tea"),
        ("alice", "other", "alice told another agent her PIN"),
    ] {
        memory
            .add(Fact::new(
                MemoryStore::new_id(),
                Scope::new(user, agent),
                user,
                text,
                now,
            ))
            .unwrap();
    }
    drop(memory);
    let input = history(dir.path());
    let read = |user: &str| {
        let config = dir.path().join(format!("{user}.toml"));
        std::fs::write(&config, format!("[memory]\nuser = \"{user}\"\n")).unwrap();
        let report = dir.path().join(format!("{user}.json"));
        let output = agent_host()
            .arg("--config")
            .arg(&config)
            .arg("--store")
            .arg(&store)
            .args(["run", "--no-compact", "--no-cache", "--quiet", "--input"])
            .arg(&input)
            .arg("--report")
            .arg(&report)
            .arg("--processor")
            .arg(agent_host_test_artifacts::SERVICES)
            .args([
                "--processor-config",
                r#"{"calls": ["memory"]}"#,
                "--allow-memory",
            ])
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", stderr(&output));
        first_log_line(&report)
    };
    assert_eq!(read("alice"), "memory: ok alice=alice likes green tea");
    assert_eq!(read("bob"), "memory: ok bob=bob likes black tea");
    assert_eq!(read("carol"), "memory: ok ");
}

/// A recorded run of summarize-history replays with the model gone: the
/// summary comes from the record's service calls, and the answer is the
/// same byte for byte; a record whose summary was altered gives another
/// answer, and the replay says so.
#[test]
fn a_replay_answers_the_services_from_the_record() {
    let server = LlmServer::start(Wire::OpenAi);
    server.push(Answer::text("## Current State\nThree cats were found.").into());
    let dir = tempfile::tempdir().unwrap();
    let (output, report) = run_in(
        dir.path(),
        &server,
        &standard_processor("summarize-history"),
        &["--allow-summarize"],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    drop(server);
    let text = std::fs::read_to_string(&report).unwrap();
    let recorded: Value = serde_json::from_str(&text).unwrap();
    let calls = &recorded["processors"][0]["record"]["services"];
    assert_eq!(calls.as_array().map(Vec::len), Some(1), "{calls}");

    let replay = agent_host().arg("replay").arg(&report).output().unwrap();
    assert_eq!(
        replay.status.code(),
        Some(0),
        "{}{}",
        stdout(&replay),
        stderr(&replay)
    );

    let altered = text.replace("Three cats were found.", "Four dogs were found.");
    assert_ne!(altered, text);
    std::fs::write(&report, altered).unwrap();
    let replay = agent_host().arg("replay").arg(&report).output().unwrap();
    assert_eq!(
        replay.status.code(),
        Some(4),
        "{}{}",
        stdout(&replay),
        stderr(&replay)
    );
}

/// A turn (`run --session --message`) with `--memory-user`: a processor
/// granted memory reads the facts `agent-host memory add` wrote for that
/// user and the turn's agent, none of another user's or agent's. Without a
/// memory user the call fails and says how to name one.
///
/// Regression: `run --message` had no memory flags, and the engine it
/// builds was given no memory even with `[memory] user` in the
/// configuration, so every `read-memory` failed with "no long-term memory
/// is configured".
#[test]
fn a_turns_processor_reads_the_memory_that_memory_add_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    for (text, user, agent) in [
        ("lives in Porto", "alice", "work"),
        ("lives in Oslo", "bob", "work"),
        ("told another agent her PIN", "alice", "default"),
    ] {
        let output = agent_host()
            .arg("--store")
            .arg(&store)
            .args(["memory", "add", text, "--user", user, "--agent", agent])
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", stderr(&output));
    }
    let turn = |extra: &[&str]| {
        let report = dir.path().join("report.json");
        let output = agent_host()
            .arg("--store")
            .arg(&store)
            .args([
                "run",
                "--session",
                "s1",
                "--agent",
                "work",
                "--message",
                "where do I live?",
                "--no-cache",
                "--quiet",
                "--report",
            ])
            .arg(&report)
            .arg("--processor")
            .arg(agent_host_test_artifacts::SERVICES)
            .args([
                "--processor-config",
                r#"{"calls": ["memory"]}"#,
                "--allow-memory",
            ])
            .args(extra)
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", stderr(&output));
        first_log_line(&report)
    };
    assert_eq!(
        turn(&["--memory-user", "alice"]),
        "memory: ok alice=lives in Porto"
    );
    assert_eq!(
        turn(&["--memory-user", "bob"]),
        "memory: ok bob=lives in Oslo"
    );
    let unnamed = turn(&[]);
    assert!(
        unnamed.starts_with("memory: failed: no long-term memory")
            && unnamed.contains("--memory-user"),
        "{unnamed}"
    );
    // A run without a turn takes the flag too, with the default agent.
    let report = dir.path().join("input.json");
    let run_alice = |input: &Path, batch: &[&str]| {
        let output = agent_host()
            .arg("--store")
            .arg(&store)
            .args(["run", "--no-compact", "--no-cache", "--quiet", "--input"])
            .arg(input)
            .args(batch)
            .arg("--report")
            .arg(&report)
            .arg("--processor")
            .arg(agent_host_test_artifacts::SERVICES)
            .args([
                "--processor-config",
                r#"{"calls": ["memory"]}"#,
                "--allow-memory",
                "--memory-user",
                "alice",
            ])
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", stderr(&output));
    };
    run_alice(&history(dir.path()), &[]);
    assert_eq!(
        first_log_line(&report),
        "memory: ok alice=told another agent her PIN"
    );
    // A batch run at once shares one memory: every history reads it.
    let inputs = dir.path().join("batch");
    std::fs::create_dir(&inputs).unwrap();
    for i in 0..5 {
        std::fs::copy(history(dir.path()), inputs.join(format!("h{i}.json"))).unwrap();
    }
    let out_dir = dir.path().join("batch-out");
    run_alice(
        &inputs,
        &["--output-dir", out_dir.to_str().unwrap(), "--jobs", "3"],
    );
    let batch: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let lines: Vec<&str> = batch["histories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["processors"][0]["logs"][0]["text"].as_str().unwrap())
        .collect();
    assert_eq!(lines, ["memory: ok alice=told another agent her PIN"; 5]);
}

/// The port of summarize-history to `lang` (`processors/<lang>/summarize-history`),
/// built once per test run by its own build script (its toolchain installed
/// first: for JavaScript, the SpiderMonkey backend, as the services are
/// contract 0.2.0's).
fn port(lang: &'static str) -> PathBuf {
    use std::collections::BTreeMap;
    use std::process::Command;
    use std::sync::Mutex;

    static BUILT: Mutex<BTreeMap<&'static str, PathBuf>> = Mutex::new(BTreeMap::new());
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    built
        .entry(lang)
        .or_insert_with(|| {
            if lang == "js" {
                langs::script(
                    "js",
                    Command::new("bash")
                        .arg(langs::root().join("guest-sdk/js/toolchain.sh"))
                        .arg("--spidermonkey"),
                    "guest-sdk/js/toolchain.sh --spidermonkey",
                );
            }
            let out = Path::new(env!("CARGO_TARGET_TMPDIR"))
                .join(format!("services-ports/{lang}-summarize-history.wasm"));
            let build = format!("processors/{lang}/summarize-history/build.sh");
            let printed = langs::script(
                lang,
                Command::new("bash")
                    .arg(langs::root().join(&build))
                    .arg("-o")
                    .arg(&out),
                &build,
            );
            let last = printed.lines().last().unwrap_or_default().trim().to_owned();
            assert_eq!(
                Path::new(&last).canonicalize().ok(),
                out.canonicalize().ok(),
                "{build} prints the output path last: {printed}"
            );
            out
        })
        .clone()
}

/// What a run of a summarize-history shows of itself: its output messages,
/// what it asked the model (the request's body, when it asked), its service
/// calls as the report records them (but their times), and its log lines.
#[derive(Debug, PartialEq)]
struct Seen {
    messages: Vec<Value>,
    asked: Option<Value>,
    services: Value,
    logs: Vec<String>,
}

/// `processor` run through `agent-host run` with `extra` flags, against a
/// model that answers with a summary (padded with white space the
/// processor trims).
fn seen(processor: &Path, extra: &[&str]) -> Seen {
    let server = LlmServer::start(Wire::OpenAi);
    server.require_key(KEY);
    server.push(
        Answer::text("\n## Current State\nThree cats were found.\n\n")
            .with_usage(321, 12)
            .into(),
    );
    // Interpreters start in every call: CPython and SpiderMonkey need more
    // time and memory than the defaults, the Rust processor gets the same.
    let mut flags = vec!["--deadline-ms", "30000", "--memory-mib", "256"];
    flags.extend_from_slice(extra);
    let (output, report) = run_processor(processor, &server, &flags);
    let p = &report["processors"][0];
    assert_eq!(p["outcome"], "applied", "{}: {p}", processor.display());
    Seen {
        messages: messages(&output),
        asked: server.requests().first().map(|r| r.body.clone()),
        // Every field of the calls but how long each took.
        services: p["services"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|call| {
                let mut call = call.clone();
                call.as_object_mut().map(|c| c.remove("time_us"));
                call
            })
            .collect(),
        logs: p["logs"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|l| format!("{} {}", l["level"], l["text"].as_str().unwrap_or_default()))
            .collect(),
    }
}

/// The port to `lang` answers as the Rust summarize-history through the
/// real host: granted, the same checkpoint pair (text, flags, metadata with
/// the model's usage), the same request to the model, the same service call
/// and log; not granted or over the budget, the same typed refusal, which
/// the port catches, keeping the history and logging why.
fn port_answers_as_the_rust_processor(lang: &'static str) {
    let rust = standard_processor("summarize-history");
    let port = port(lang);
    let granted = seen(&port, &["--allow-summarize"]);
    assert_eq!(
        contents(&granted.messages)[1..3],
        [
            "[The 8 earlier messages of this conversation were summarized.]",
            "## Current State\nThree cats were found.",
        ],
        "{lang}: {granted:#?}"
    );
    assert_eq!(granted.messages[2]["type"], "summary", "{lang}");
    assert!(granted.asked.is_some(), "{lang}: the model was not asked");
    assert_eq!(
        granted,
        seen(&rust, &["--allow-summarize"]),
        "{lang}, granted"
    );

    for (extra, kind, says) in [
        (&[][..], "denied", "no summary (denied: "),
        (
            &["--allow-summarize", "--model-tokens", "100"][..],
            "over_budget",
            "no summary (over budget: ",
        ),
    ] {
        let refused = seen(&port, extra);
        assert_eq!(
            refused.messages.len(),
            13,
            "{lang}, {kind}: the history stands"
        );
        assert_eq!(refused.asked, None, "{lang}, {kind}: the model was asked");
        assert_eq!(
            refused.services[0]["result"]["error"]["error"], kind,
            "{lang}"
        );
        assert!(
            refused.logs.iter().any(|l| l.contains(says)),
            "{lang}, {kind}: {:?}",
            refused.logs
        );
        assert_eq!(refused, seen(&rust, extra), "{lang}, {kind}");
    }
}

#[test]
fn python_summarize_history_answers_as_the_rust_one_granted_or_refused() {
    if !langs::skipped("python", module_path!()) {
        port_answers_as_the_rust_processor("python");
    }
}

#[test]
fn js_summarize_history_answers_as_the_rust_one_granted_or_refused() {
    if !langs::skipped("js", module_path!()) {
        port_answers_as_the_rust_processor("js");
    }
}

#[test]
fn c_summarize_history_answers_as_the_rust_one_granted_or_refused() {
    if !langs::skipped("c", module_path!()) {
        port_answers_as_the_rust_processor("c");
    }
}
