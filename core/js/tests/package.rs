//! The npm package `agent-host-core` as a user gets it: built and packed by
//! `build.sh`, installed from the tarball into an empty folder with `npm
//! install`, then
//!
//! - run by `node --test` (`test/differential.test.mjs`) over every history
//!   of the corpus and a few broken ones, its results compared with the
//!   native core's on the same inputs (written here, straight from
//!   `agent-host-core`, not through this crate): loading with detection and
//!   as a named format,
//!   validation, repair, every writable format, Markdown, four queries, and the
//!   compaction pipeline at five budgets (report, checkpoint, view, append).
//!   Twice: through the default entry, and through the entry for edge
//!   runtimes (`agent-host-core/instantiate`) given the compiled core module
//!   in a Node.js that refuses to compile WebAssembly from bytes, as
//!   Cloudflare Workers and Vercel Edge do (`test/edge.mjs`);
//! - the edge entry on its own (`test/instantiate.test.mjs`: what it takes and
//!   refuses), and in Cloudflare's runtime itself: `workerd test` (workerd
//!   pinned by `toolchain.sh`) runs a Worker (`test/workerd/worker.js`) that
//!   imports the package's files and its core modules as Wasm modules, and
//!   the pipeline's result there must equal the native core's;
//! - type-checked: `test/types.mts` and `test/instantiate-types.mts`, a
//!   TypeScript user's programs, compile against the package's `index.d.ts`
//!   and `instantiate.d.ts` with the toolchain's pinned `tsc` (`--strict`),
//!   and a wrong type does not;
//! - imported as an ES module by a page served on localhost to headless
//!   Chromium, which runs the pipeline on a corpus history; the page's
//!   result must equal the native core's.
//!
//! Skipped with a `SKIPPED:` line when Node.js (or, for the browser,
//! Chromium; for workerd, a workerd binary for this platform) is missing or
//! `AGENT_HOST_SKIP_LANGS` names `jscore`; under CI (`CI` set) those are
//! failures instead.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::Duration;

use agent_host_core::budget::BudgetConfig;
use agent_host_core::extractive::ExtractiveSummarizer;
use agent_host_core::format::{self, Format, FormatError, Limits};
use agent_host_core::pipeline::{self, Compaction, PipelineConfig, SummaryOutcome};
use agent_host_core::query::{self, Query};
use agent_host_core::repair::repair;
use agent_host_core::validate::validate;
use agent_host_core::{ErrorKind, HeuristicCounter, Message, Role, TokenCounter, export};
use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};

/// The time the pipelines run at (a summary checkpoint's stamp).
const NOW: &str = "2025-06-01T09:00:00Z";

fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty())
}

/// Whether this test is to be skipped here; says why when it is.
fn skipped(test: &str) -> bool {
    if ci() {
        return false;
    }
    let skip = std::env::var("AGENT_HOST_SKIP_LANGS").unwrap_or_default();
    if skip
        .split(|c: char| c == ',' || c.is_whitespace())
        .any(|l| l.eq_ignore_ascii_case("jscore"))
    {
        eprintln!("SKIPPED: {test} (AGENT_HOST_SKIP_LANGS names jscore)");
        return true;
    }
    if Command::new("node").arg("--version").output().is_err()
        || Command::new("npm").arg("--version").output().is_err()
    {
        eprintln!("SKIPPED: {test} (Node.js 20+ and npm are needed: apt-get install nodejs npm)");
        return true;
    }
    false
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs `command`; its output, or a panic with everything it printed.
fn run(command: &mut Command, what: &str) -> Output {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot start {command:?}: {e}"));
    assert!(
        output.status.success(),
        "{what} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        output.status,
        text(&output.stdout),
        text(&output.stderr)
    );
    output
}

/// The folder the packed tarball was installed into (`node_modules/agent-host-core`
/// in it), built and installed once per test run.
fn installed() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let base = Path::new(env!("CARGO_TARGET_TMPDIR")).join("core-js");
        let _ = std::fs::remove_dir_all(&base);
        let packed = base.join("packed");
        let user = base.join("user");
        std::fs::create_dir_all(&user).unwrap();
        let built = run(
            Command::new("bash")
                .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("build.sh"))
                .arg(&packed),
            "core/js/build.sh",
        );
        let tarball = text(&built.stdout)
            .lines()
            .last()
            .unwrap_or_default()
            .to_owned();
        assert!(
            tarball.ends_with(".tgz") && Path::new(&tarball).is_file(),
            "build.sh named no tarball: {tarball:?}"
        );
        // As the README says: `npm install` of the tarball into an empty folder.
        run(
            Command::new("npm")
                .args(["install", "--no-audit", "--no-fund", "--prefer-offline"])
                .arg(&tarball)
                .current_dir(&user),
            "npm install of the packed tarball",
        );
        assert!(user.join("node_modules/agent-host-core/index.js").is_file());
        // Shared by the tests that run in parallel: copied once, here.
        copy_test_file(&user, "edge.mjs");
        user
    })
}

/// The histories of the corpus: each tau-bench conversation (OpenAI
/// messages) and each Claude Code session, by name; then a few broken ones.
fn cases() -> Vec<(String, String)> {
    let mut cases = Vec::new();
    if let Some(dir) = agent_host_testkit::corpus_dir() {
        let tau = dir.join("tau-bench-gpt4o-airline/gpt-4o-airline.json");
        let tau: Value = serde_json::from_str(&std::fs::read_to_string(&tau).unwrap()).unwrap();
        for (i, run) in tau.as_array().expect("a list of runs").iter().enumerate() {
            cases.push((format!("tau-bench #{i}"), run["traj"].to_string()));
        }
        let ccv = dir.join("claude-code-sessions-ccv");
        let mut sessions: Vec<PathBuf> = std::fs::read_dir(&ccv)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
            .collect();
        sessions.sort();
        for path in sessions {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            cases.push((
                format!("claude-code {name}"),
                std::fs::read_to_string(&path).unwrap(),
            ));
        }
        assert!(
            cases.len() > 200,
            "the corpus has fewer histories than it should"
        );
    }
    let broken = [
        ("not JSON", "this is not a transcript"),
        ("an empty list", "[]"),
        (
            "a tool call never answered",
            r#"[{"role":"user","content":"list the files"},
                {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]}]"#,
        ),
        (
            "a result without its call",
            r#"[{"role":"user","content":"hi"},{"role":"tool","tool_call_id":"c9","name":"ls","content":"a b"}]"#,
        ),
        (
            "a JSONL log with a bad line",
            "{\"type\":\"user\",\"content\":\"hi\"}\n{\"type\":\"assistant\",\"content\":5}\n{\"type\":\"assistant\",\"content\":\"hello\"}\n",
        ),
    ];
    cases.extend(broken.iter().map(|(n, t)| (n.to_string(), t.to_string())));
    cases
}

/// The pipelines each history runs through: the default budget, smaller
/// ones that make the summary and truncation fire, and repair and packing
/// alone. The same objects are the package's `PipelineOptions`.
fn pipelines() -> Value {
    json!([
        {"compact": true},
        {"contextLimit": 8000, "compact": true},
        {"contextLimit": 2000, "compact": true},
        {"contextLimit": 2000, "compact": false},
        {"contextLimit": 4000, "responseReserve": 500, "minRecentMessages": 2, "compact": true}
    ])
}

/// The queries each history answers: by text, role and count; by a time
/// relative to `now`; and one refused (a duration without `now`).
fn queries() -> Value {
    json!([
        {"contains": "the", "roles": ["assistant", "user"], "agents": [], "limit": 5, "includeForwarded": false},
        {"since": "400d", "now": NOW, "roles": [], "agents": [], "includeForwarded": false},
        {"until": "2025-01-01", "roles": ["tool"], "agents": [], "includeForwarded": false},
        {"since": "2h", "roles": [], "agents": [], "includeForwarded": false}
    ])
}

/// What a query of [`queries`] gives natively (the last is refused, with
/// the package's message).
fn native_queries(messages: &[Message], now: DateTime<Utc>) -> Value {
    let by_text = Query {
        contains: Some("the".into()),
        roles: vec![Role::Assistant, Role::User],
        limit: Some(5),
        ..Query::default()
    };
    let recent = Query {
        since: Some(query::parse_time("400d", now).unwrap()),
        ..Query::default()
    };
    let old_results = Query {
        until: Some(query::parse_time("2025-01-01", now).unwrap()),
        roles: vec![Role::Tool],
        ..Query::default()
    };
    let mut answers: Vec<Value> = [by_text, recent, old_results]
        .iter()
        .map(|q| {
            let found: Vec<Message> = q.apply(messages).into_iter().cloned().collect();
            ok(jsonl(&found))
        })
        .collect();
    answers.push(err(
        ErrorKind::InvalidInput,
        "since `2h` is a duration before now: give the query's `now` too",
    ));
    Value::from(answers)
}

// --- The native side: core's results in the shapes the package gives. ---

fn kind_name(kind: ErrorKind) -> String {
    kind.as_str().replace('_', "-")
}

fn err(kind: ErrorKind, message: impl Into<String>) -> Value {
    json!({"err": {"kind": kind_name(kind), "message": message.into()}})
}

fn format_err(e: &FormatError) -> Value {
    err(e.kind(), e.to_string())
}

fn ok(value: impl Into<Value>) -> Value {
    json!({ "ok": value.into() })
}

/// An object without the fields that are `None` (jco leaves them undefined).
fn object(fields: Vec<(&str, Option<Value>)>) -> Value {
    Value::Object(
        fields
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k.to_owned(), v)))
            .collect::<Map<_, _>>(),
    )
}

fn violations(messages: &[Message]) -> Value {
    validate(messages)
        .iter()
        .map(|v| json!({"index": v.index(), "message": v.to_string()}))
        .collect()
}

fn jsonl(messages: &[Message]) -> String {
    format::write(Format::Jsonl, messages).expect("any history is written as JSONL")
}

fn config(options: &Value) -> Result<PipelineConfig, Value> {
    let mut budget = options["contextLimit"]
        .as_u64()
        .map_or_else(BudgetConfig::default, |l| {
            BudgetConfig::for_window(u32::try_from(l).unwrap())
        });
    if let Some(reserve) = options["responseReserve"].as_u64() {
        budget.response_reserve = u32::try_from(reserve).unwrap();
    }
    if let Some(n) = options["minRecentMessages"].as_u64() {
        budget.min_recent_messages = n as usize;
    }
    Ok(if options["compact"] == json!(true) {
        PipelineConfig {
            budget,
            ..PipelineConfig::default()
        }
    } else {
        PipelineConfig::repair_only(budget)
    })
}

fn report(c: &Compaction) -> Value {
    let r = &c.report;
    let summary = match &r.summary {
        SummaryOutcome::Skipped => json!({"tag": "skipped"}),
        SummaryOutcome::NotDone(why) => json!({"tag": "not-done", "val": format!("{why:?}")}),
        SummaryOutcome::Summarized {
            trigger,
            covered,
            parts,
            oversized,
        } => json!({"tag": "summarized", "val": {
            "trigger": format!("{trigger:?}"), "covered": covered, "parts": parts, "oversized": oversized,
        }}),
        SummaryOutcome::Failed { trigger, error } => {
            json!({"tag": "failed", "val": {"trigger": format!("{trigger:?}"), "error": error}})
        }
    };
    let u = &r.usage;
    json!({
        "repairs": r.repairs.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "doomLoops": r.doom_loops.iter().map(|d| json!({"tool": d.tool, "count": d.count})).collect::<Vec<_>>(),
        "pruned": r.pruned.iter().map(|p| object(vec![
            ("id", Some(json!(p.id))),
            ("tool", p.tool.as_ref().map(|t| json!(t))),
            ("charsBefore", Some(json!(p.chars_before))),
            ("charsAfter", Some(json!(p.chars_after))),
            ("cleared", Some(json!(p.cleared))),
        ])).collect::<Vec<_>>(),
        "summary": summary,
        "summaryCut": r.summary_cut,
        "truncations": r.truncations.iter().map(|t| format!("{t:?}")).collect::<Vec<_>>(),
        "usage": {
            "contextLimit": u.context_limit,
            "responseReserve": u.response_reserve,
            "toolDefinitions": u.tool_definitions,
            "view": {
                "available": u.view.available,
                "system": u.view.system,
                "summary": u.view.summary,
                "summaryCap": u.view.summary_cap,
                "recent": u.view.recent,
                "total": u.view.total(),
                "leftOut": u.view.left_out,
            },
            "messagesInView": u.messages_in_view,
            "messagesSinceSummary": u.messages_since_summary,
            "tokensSinceSummary": u.tokens_since_summary,
            "triggers": u.triggers.iter().map(|t| json!({
                "name": t.name, "current": t.current, "limit": t.limit, "percent": t.percent,
            })).collect::<Vec<_>>(),
        },
        "violations": r.violations.iter()
            .map(|v| json!({"index": v.index(), "message": v.to_string()}))
            .collect::<Vec<_>>(),
    })
}

fn compaction(messages: &[Message], options: &Value, now: DateTime<Utc>) -> Value {
    if messages.is_empty() {
        return err(ErrorKind::InvalidInput, "the history holds no messages");
    }
    let config = match config(options) {
        Ok(c) => c,
        Err(e) => return e,
    };
    let summarizer = ExtractiveSummarizer::default();
    let counter = HeuristicCounter::default();
    let c = pipeline::compact(messages, None, &config, &counter, Some(&summarizer), now);
    let checkpoint = c.checkpoint.as_ref().map(|cp| {
        json!({
            "boundaryId": cp.boundary_id,
            "summaryId": cp.summary_id,
            "covers": cp.covers,
            "created": cp.created.to_rfc3339(),
        })
    });
    ok(object(vec![
        ("report", Some(report(&c))),
        ("checkpoint", checkpoint),
        ("view", Some(json!(jsonl(&c.view)))),
        ("append", Some(json!(jsonl(&c.append)))),
    ]))
}

/// What the native core gives for `text`, in the package's shapes.
fn native(text: &str) -> Value {
    let named = format::parse_within(Format::Jsonl, text, &Limits::default()).map_or_else(
        |e| format_err(&e),
        |t| ok(json!({"format": "jsonl", "len": t.messages.len()})),
    );
    let (format, transcript) = match format::parse_detected_within(text, &Limits::default()) {
        Ok(loaded) => loaded,
        Err(e) => return json!({ "named": named, "load": format_err(&e) }),
    };
    let messages = transcript.messages;
    let counter = HeuristicCounter::default();
    let counter: &dyn TokenCounter = &counter;
    let tokens: u64 = messages.iter().map(|m| u64::from(m.tokens(counter))).sum();
    let load = object(vec![
        ("format", Some(json!(format.name()))),
        ("len", Some(json!(messages.len()))),
        ("tokens", Some(json!(tokens))),
        (
            "roles",
            Some(messages.iter().map(|m| json!(m.role.as_str())).collect()),
        ),
        ("title", transcript.title.map(Value::from)),
        (
            "quarantined",
            Some(
                transcript
                    .quarantined
                    .iter()
                    .map(|q| json!(format!("line {}: {}", q.line, q.error)))
                    .collect(),
            ),
        ),
        ("violations", Some(violations(&messages))),
    ]);
    let (repaired, repairs) = repair(messages.clone());
    let dumps: Map<String, Value> = Format::ALL
        .iter()
        .filter(|f| f.is_writable())
        .map(|f| {
            let dumped = format::write(*f, &messages).map_or_else(|e| format_err(&e), ok);
            (f.name().to_owned(), dumped)
        })
        .collect();
    let now = DateTime::parse_from_rfc3339(NOW)
        .unwrap()
        .with_timezone(&Utc);
    let compact: Vec<Value> = pipelines()
        .as_array()
        .unwrap()
        .iter()
        .map(|options| compaction(&messages, options, now))
        .collect();
    json!({
        "named": named,
        "load": ok(load),
        "repair": {
            "repairs": repairs.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "violations": violations(&repaired),
            "jsonl": jsonl(&repaired),
        },
        "dumps": dumps,
        "markdown": export::to_markdown(&messages, Some("corpus")),
        "queries": native_queries(&messages, now),
        "compact": compact,
    })
}

#[test]
fn the_npm_package_gives_the_native_cores_results_on_the_corpus() {
    let test = "the_npm_package_gives_the_native_cores_results_on_the_corpus";
    if skipped(test) {
        return;
    }
    let user = installed();
    let cases = cases();
    let expected: Vec<Value> = cases.iter().map(|(_, text)| native(text)).collect();
    let work = tempfile::tempdir().unwrap();
    let write = |name: &str, value: &Value| {
        let path = work.path().join(name);
        std::fs::write(&path, value.to_string()).unwrap();
        path
    };
    let case_list: Value = cases
        .iter()
        .map(|(name, text)| json!({"name": name, "text": text}))
        .collect();
    let cases_file = write("cases.json", &case_list);
    let expected_file = write("expected.json", &Value::from(expected));
    let plan = write(
        "plan.json",
        &json!({"now": NOW, "pipelines": pipelines(), "queries": queries()}),
    );
    // The test files sit beside the user's node_modules, so that they import
    // the package by name, as a user's program would.
    let script = copy_test_file(user, "differential.test.mjs");
    for entry in ["default", "instantiate"] {
        let ran = Command::new("node")
            .args(["--test", "--test-reporter=tap"])
            .arg(&script)
            .env("AGENT_HOST_CORE_CASES", &cases_file)
            .env("AGENT_HOST_CORE_EXPECTED", &expected_file)
            .env("AGENT_HOST_CORE_PLAN", &plan)
            .env("AGENT_HOST_CORE_ENTRY", entry)
            .current_dir(user)
            .output()
            .expect("node runs");
        let out = text(&ran.stdout);
        assert!(
            ran.status.success(),
            "the package's results through the {entry} entry differ from the native core's:\n{out}\n{}",
            text(&ran.stderr)
        );
        let passed = format!("# pass {}", cases.len() + 1);
        assert!(
            out.contains(&passed) && out.contains("# fail 0"),
            "node --test did not run every case through the {entry} entry ({passed} expected):\n{out}"
        );
    }
}

/// Copies `test/<name>` into the user's folder; its path there.
fn copy_test_file(user: &Path, name: &str) -> PathBuf {
    let to = user.join(name);
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("test")
            .join(name),
        &to,
    )
    .unwrap_or_else(|e| panic!("copying test/{name}: {e}"));
    to
}

#[test]
fn the_edge_entry_takes_a_compiled_module_and_refuses_bytes() {
    let test = "the_edge_entry_takes_a_compiled_module_and_refuses_bytes";
    if skipped(test) {
        return;
    }
    let user = installed();
    let script = copy_test_file(user, "instantiate.test.mjs");
    let ran = run(
        Command::new("node")
            .args(["--test", "--test-reporter=tap"])
            .arg(&script)
            .current_dir(user),
        "node --test instantiate.test.mjs",
    );
    let out = text(&ran.stdout);
    assert!(
        out.contains("# pass 5") && out.contains("# fail 0"),
        "node --test did not run the edge entry's five tests:\n{out}"
    );
}

/// The toolchain's pinned binary `name` (jco, tsc, workerd), beside jco.
fn toolchain_binary(name: &str) -> PathBuf {
    let toolchain = run(
        Command::new("bash").arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("toolchain.sh")),
        "core/js/toolchain.sh",
    );
    PathBuf::from(text(&toolchain.stdout).lines().last().unwrap_or_default()).with_file_name(name)
}

/// The workerd config of the Worker `test/workerd/worker.js`: the package's
/// files the edge entry needs as modules named as the package exports them
/// (what a bundler would put in a Worker), the core modules as Wasm modules,
/// and, as plain data, the history and the core module's bytes.
const WORKERD_CONFIG: &str = r#"using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [ (name = "main", worker = .worker) ],
);

const worker :Workerd.Worker = (
  modules = [
    (name = "worker.js", esModule = embed "worker.js"),
    (name = "agent-host-core/instantiate", esModule = embed "node_modules/agent-host-core/instantiate.js"),
    (name = "agent-host-core/api.js", esModule = embed "node_modules/agent-host-core/api.js"),
    (name = "agent-host-core/dist/agent-host-core.instantiate.js",
     esModule = embed "node_modules/agent-host-core/dist/agent-host-core.instantiate.js"),
    (name = "agent-host-core/core.wasm", wasm = embed "node_modules/agent-host-core/dist/agent-host-core.core.wasm"),
    (name = "agent-host-core/core2.wasm", wasm = embed "node_modules/agent-host-core/dist/agent-host-core.core2.wasm"),
    (name = "agent-host-core/core3.wasm", wasm = embed "node_modules/agent-host-core/dist/agent-host-core.core3.wasm"),
    (name = "core-bytes", data = embed "node_modules/agent-host-core/dist/agent-host-core.core.wasm"),
    (name = "history.txt", text = embed "history.txt"),
  ],
  compatibilityDate = "2025-09-01",
);
"#;

#[test]
fn the_edge_entry_runs_the_pipeline_in_workerd() {
    let test = "the_edge_entry_runs_the_pipeline_in_workerd";
    if skipped(test) {
        return;
    }
    let Some(corpus) = agent_host_testkit::corpus_dir() else {
        return;
    };
    let workerd = toolchain_binary("workerd");
    // The npm package `workerd` brings its binary as an optional dependency
    // for a few platforms only.
    if !Command::new(&workerd)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        assert!(
            !ci(),
            "{} does not run: core/js/toolchain.sh must install workerd under CI",
            workerd.display()
        );
        eprintln!(
            "SKIPPED: {test} ({} does not run here: the npm package workerd has no binary for this platform, or toolchain.sh could not install it)",
            workerd.display()
        );
        return;
    }
    let user = installed();
    let history = std::fs::read_to_string(
        corpus.join("claude-code-sessions-ccv/5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"),
    )
    .unwrap();
    std::fs::write(user.join("history.txt"), &history).unwrap();
    std::fs::write(user.join("workerd.capnp"), WORKERD_CONFIG).unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("test/workerd/worker.js"),
        user.join("worker.js"),
    )
    .unwrap();
    let ran = run(
        Command::new(&workerd)
            .args(["test", "workerd.capnp"])
            .current_dir(user),
        "workerd test",
    );
    let out = format!("{}{}", text(&ran.stdout), text(&ran.stderr));
    let shown = out
        .lines()
        .find_map(|l| l.split_once("AGENT_HOST_RESULT ").map(|(_, json)| json))
        .unwrap_or_else(|| panic!("the Worker logged no result:\n{out}"));
    let mut got: Value = serde_json::from_str(shown).expect("the Worker logs JSON");
    // Workers compile no WebAssembly from bytes: the reason for the entry.
    let refused = got["refused"].take();
    assert!(
        refused
            .as_str()
            .is_some_and(|r| r.starts_with("CompileError")),
        "workerd compiled WebAssembly from bytes ({refused}): the test no longer shows an edge runtime's refusal"
    );
    assert_eq!(got["failure"].take(), json!("invalid-input"));
    let (format, transcript) = format::parse_detected(&history).unwrap();
    let now = DateTime::parse_from_rfc3339(NOW)
        .unwrap()
        .with_timezone(&Utc);
    let native = compaction(
        &transcript.messages,
        &json!({"contextLimit": 2000, "compact": true}),
        now,
    );
    let expected = json!({
        "format": format.name(),
        "report": native["ok"]["report"],
        "view": native["ok"]["view"],
        "failure": null,
        "refused": null,
    });
    assert_eq!(
        numbers_as_f64(got),
        numbers_as_f64(expected),
        "workerd's result differs from the native core's"
    );
}

#[test]
fn the_packages_types_check_with_typescript() {
    let test = "the_packages_types_check_with_typescript";
    if skipped(test) {
        return;
    }
    let user = installed();
    // The toolchain's pinned TypeScript (a dependency of jco), beside jco.
    let tsc = toolchain_binary("tsc");
    let check = |file: &str, libs: &str, source: &str| {
        std::fs::write(user.join(file), source).unwrap();
        Command::new(&tsc)
            .args([
                "--noEmit",
                "--strict",
                "--module",
                "nodenext",
                "--moduleResolution",
                "nodenext",
                "--target",
                "es2022",
                "--lib",
                libs,
                file,
            ])
            .current_dir(user)
            .output()
            .expect("tsc runs")
    };
    // The default entry needs no DOM types; the edge entry names
    // `WebAssembly.Module`, which a Worker's or a browser's project has.
    for (file, libs) in [
        ("types.mts", "es2022,esnext.disposable"),
        ("instantiate-types.mts", "es2022,esnext.disposable,dom"),
    ] {
        let source = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("test")
                .join(file),
        )
        .unwrap();
        let checked = check(file, libs, &source);
        assert!(
            checked.status.success(),
            "test/{file} does not compile against the package's types:\n{}{}",
            text(&checked.stdout),
            text(&checked.stderr)
        );
        // The types are real: a wrong one is refused.
        let history = if file == "types.mts" {
            "History"
        } else {
            "(await instantiate(modules)).History"
        };
        let wrong = check(
            file,
            libs,
            &format!("{source}\nexport const wrong: string = {history}.load(\"[]\").tokens();\n"),
        );
        assert!(
            !wrong.status.success() && text(&wrong.stdout).contains("bigint"),
            "test/{file}: a bigint taken for a string compiled: the package's types are missing or `any`:\n{}",
            text(&wrong.stdout)
        );
    }
}

// --- The browser. ---

const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const CHROMIUM: &str = "/usr/bin/chromium";

/// A page that imports the package's ESM entry as a browser does (no
/// bundler), runs the pipeline on the history at `/history.txt` and shows
/// the result as JSON in `#result` (or the failure in `#failure`).
const PAGE: &str = r#"<!doctype html>
<html><head><meta charset="utf-8"><title>agent-host-core</title></head>
<body>
<pre id="out"></pre>
<script type="module">
  const out = document.getElementById("out");
  try {
    const { History } = await import("/node_modules/agent-host-core/index.js");
    const text = await (await fetch("/history.txt")).text();
    const history = History.load(text);
    const c = history.compact({ contextLimit: 2000, compact: true, now: "2025-06-01T09:00:00Z" });
    const result = { format: history.format(), report: c.report, view: c.view.dump("jsonl") };
    out.textContent = JSON.stringify(result, (_, v) => (typeof v === "bigint" ? Number(v) : v));
    out.id = "result";
  } catch (e) {
    out.textContent = String(e && e.stack || e);
    out.id = "failure";
  }
</script>
</body></html>
"#;

/// Serves `root` and the page on a loopback port; its base URL.
async fn serve(root: PathBuf, history: String) -> String {
    use axum::http::{StatusCode, header};
    use axum::response::IntoResponse;

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let app = axum::Router::new()
        .route(
            "/",
            axum::routing::get(|| async { axum::response::Html(PAGE) }),
        )
        .route(
            "/history.txt",
            axum::routing::get(move || {
                let history = history.clone();
                async move { history }
            }),
        )
        .route(
            "/node_modules/{*path}",
            axum::routing::get(
                move |axum::extract::Path(path): axum::extract::Path<String>| {
                    let root = root.clone();
                    async move {
                        if path.split('/').any(|p| p == ".." || p.is_empty()) {
                            return StatusCode::NOT_FOUND.into_response();
                        }
                        let Ok(bytes) =
                            tokio::fs::read(root.join("node_modules").join(&path)).await
                        else {
                            return StatusCode::NOT_FOUND.into_response();
                        };
                        // `compileStreaming` needs the wasm type; modules a script type.
                        let kind = match path.rsplit('.').next() {
                            Some("js" | "mjs") => "text/javascript",
                            Some("wasm") => "application/wasm",
                            Some("json") => "application/json",
                            _ => "application/octet-stream",
                        };
                        ([(header::CONTENT_TYPE, kind)], bytes).into_response()
                    }
                },
            ),
        );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    base
}

/// chromedriver, killed when dropped.
struct Driver(std::process::Child);

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_package_runs_the_pipeline_in_headless_chromium() {
    let test = "the_package_runs_the_pipeline_in_headless_chromium";
    if skipped(test) {
        return;
    }
    if !Path::new(CHROMEDRIVER).exists() || !Path::new(CHROMIUM).exists() {
        assert!(!ci(), "CI must install chromium and chromium-driver");
        eprintln!(
            "SKIPPED: {test} ({CHROMIUM} or {CHROMEDRIVER} is missing: apt-get install chromium chromium-driver)"
        );
        return;
    }
    let Some(corpus) = agent_host_testkit::corpus_dir() else {
        return;
    };
    let history = std::fs::read_to_string(
        corpus.join("claude-code-sessions-ccv/5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"),
    )
    .unwrap();
    // The native core's answer for the page's call.
    let (format, transcript) = format::parse_detected(&history).unwrap();
    let now = DateTime::parse_from_rfc3339(NOW)
        .unwrap()
        .with_timezone(&Utc);
    let native = compaction(
        &transcript.messages,
        &json!({"contextLimit": 2000, "compact": true}),
        now,
    );
    let expected = json!({
        "format": format.name(),
        "report": native["ok"]["report"],
        "view": native["ok"]["view"],
    });

    let user = tokio::task::spawn_blocking(|| installed().to_path_buf())
        .await
        .unwrap();
    let base = serve(user, history).await;

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let _driver = Driver(
        Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("chromedriver starts"),
    );
    let mut caps = Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({
            "binary": CHROMIUM,
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
        }),
    );
    let mut client = None;
    for _ in 0..100 {
        if let Ok(c) = fantoccini::ClientBuilder::rustls()
            .expect("a TLS setup")
            .capabilities(caps.clone())
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
        {
            client = Some(c);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let client = client.expect("chromedriver answers");
    client.goto(&format!("{base}/")).await.unwrap();
    let done = client
        .wait()
        .at_most(Duration::from_secs(60))
        .for_element(fantoccini::Locator::Css("#result, #failure"))
        .await
        .expect("the page finishes");
    let id = done.attr("id").await.unwrap().unwrap_or_default();
    // The text as the page set it (WebDriver's visible text would fold
    // some whitespace).
    let shown = client
        .execute(
            "return document.getElementById(arguments[0]).textContent",
            vec![json!(id)],
        )
        .await
        .unwrap();
    client.close().await.unwrap();
    let shown = shown.as_str().unwrap_or_default().to_owned();
    assert_eq!(id, "result", "the page failed:\n{shown}");
    let got: Value = serde_json::from_str(&shown).expect("the page shows JSON");
    assert_eq!(
        numbers_as_f64(got),
        numbers_as_f64(expected),
        "the browser's result differs from the native core's"
    );
}

/// `value` with every number a float: JavaScript writes `50` for Rust's
/// `50.0`, and serde_json's numbers of the two kinds are never equal.
fn numbers_as_f64(value: Value) -> Value {
    match value {
        Value::Number(n) => json!(n.as_f64().expect("a finite number")),
        Value::Array(items) => Value::Array(items.into_iter().map(numbers_as_f64).collect()),
        Value::Object(fields) => Value::Object(
            fields
                .into_iter()
                .map(|(k, v)| (k, numbers_as_f64(v)))
                .collect(),
        ),
        other => other,
    }
}
