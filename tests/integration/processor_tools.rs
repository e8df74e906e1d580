//! `agent-host processor inspect`, `check` and `bench` through the real
//! binary, on the standard processors and on hostile test guests.

use std::path::Path;

use agent_host_test_artifacts as guests;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::util::{run, standard_processor, stderr, stdout};

/// Runs `agent-host processor ARGS` with its compile cache in `cache`.
fn processor(cache: &Path, args: &[&str]) -> std::process::Output {
    let mut all = vec!["processor"];
    all.extend_from_slice(args);
    all.extend(["--cache-dir", cache.to_str().expect("a UTF-8 path")]);
    run(&all, "")
}

fn json(output: &std::process::Output) -> Value {
    serde_json::from_str(&stdout(output))
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}", stdout(output)))
}

/// The tests run a debug build of the host, whose side of a call (lowering
/// 10,000 messages into the guest) is several times slower than a release
/// build's, and they run in parallel: a generous deadline keeps the verdicts
/// about the processor, not about the machine.
const DEADLINE_MS: &str = "5000";

#[test]
fn inspect_shows_the_description_contract_hash_and_imports() {
    let dir = tempfile::tempdir().unwrap();
    let path = standard_processor("keep-last-turns");
    let out = processor(dir.path(), &["inspect", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let bytes = std::fs::read(&path).unwrap();
    let sha = format!("{:x}", Sha256::digest(&bytes));
    assert!(text.starts_with("keep-last-turns 0.1.0\n"), "{text}");
    assert!(text.contains(&format!("sha256     {sha}")), "{text}");
    assert!(
        text.contains(&format!("size       {} bytes", bytes.len())),
        "{text}"
    );
    assert!(
        text.contains("contract   agent-host:history@0.2.0"),
        "{text}"
    );
    // Its example configuration, pretty-printed.
    assert!(
        text.contains("config example:\n  {\n    \"turns\""),
        "{text}"
    );
    assert!(
        text.contains("  agent-host:history/types@0.2.0\n"),
        "{text}"
    );
    assert!(
        text.contains("WASI imports: none (it needs no grant)"),
        "{text}"
    );
    assert!(
        text.contains("exports:\n  agent-host:history/processor@0.2.0"),
        "{text}"
    );
}

#[test]
fn inspect_says_which_grant_each_wasi_import_needs() {
    let dir = tempfile::tempdir().unwrap();
    let out = processor(dir.path(), &["inspect", guests::WASI_CLOCK]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let line = |prefix: &str| -> String {
        text.lines()
            .find(|l| l.trim_start().starts_with(prefix))
            .unwrap_or_else(|| panic!("no import {prefix}:\n{text}"))
            .to_owned()
    };
    assert!(
        line("wasi:clocks/wall-clock@").contains("needs --allow-clocks"),
        "{text}"
    );
    assert!(
        line("wasi:cli/stdout@").contains("captured into the report log"),
        "{text}"
    );
    assert!(!line("wasi:io/streams@").contains("needs"), "{text}");
    assert!(
        text.contains("to grant everything it imports: --allow-clocks\n"),
        "{text}"
    );

    let out = processor(dir.path(), &["inspect", guests::WASI_FS, "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report = json(&out);
    let imports = report["imports"].as_array().unwrap();
    let preopens = imports
        .iter()
        .find(|i| {
            i["name"]
                .as_str()
                .unwrap()
                .starts_with("wasi:filesystem/preopens@")
        })
        .expect("wasi-fs imports the preopens");
    assert_eq!(preopens["interface"], "wasi");
    assert_eq!(preopens["grant"], "--allow-dir");
    assert_eq!(
        report["grants"],
        serde_json::json!(["--allow-clocks", "--allow-dir PATH"])
    );
}

#[test]
fn inspect_json_is_one_object_and_the_second_load_hits_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let path = standard_processor("redact-secrets");
    let path = path.to_str().unwrap();
    let first = processor(dir.path(), &["inspect", path, "--json"]);
    assert!(first.status.success(), "{}", stderr(&first));
    let report = json(&first);
    assert_eq!(report["name"], "redact-secrets");
    assert_eq!(report["version"], "0.1.0");
    assert_eq!(
        report["contract"],
        serde_json::json!(["agent-host:history@0.2.0"])
    );
    assert_eq!(
        report["size_bytes"].as_u64(),
        Some(std::fs::metadata(path).unwrap().len())
    );
    assert_eq!(report["sha256"].as_str().unwrap().len(), 64);
    assert!(report["config_example"].is_object(), "{report}");
    assert!(
        report["imports"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["interface"] == "agent-host"),
        "{report}"
    );
    assert_eq!(report["load"]["compile"], "compiled");
    let second = json(&processor(dir.path(), &["inspect", path, "--json"]));
    assert_eq!(second["load"]["compile"], "hit");
}

#[test]
fn inspect_refuses_what_is_not_a_processor_saying_what_and_where() {
    let dir = tempfile::tempdir().unwrap();
    let text_file = dir.path().join("notes.wasm");
    std::fs::write(&text_file, "just text").unwrap();
    let out = processor(dir.path(), &["inspect", text_file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("notes.wasm"), "{err}");
    assert!(err.contains("not a WebAssembly component"), "{err}");
    assert!(stdout(&out).is_empty());

    let out = processor(dir.path(), &["inspect", guests::EVIL_IMPORT]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("imports `test:evil/exfiltrate`, which agent-host cannot grant"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn check_passes_well_behaved_standard_processors() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["keep-last-turns", "redact-secrets"] {
        let path = standard_processor(name);
        let out = processor(
            dir.path(),
            &[
                "check",
                path.to_str().unwrap(),
                "--deadline-ms",
                DEADLINE_MS,
            ],
        );
        assert_eq!(out.status.code(), Some(0), "{name}: {}", stderr(&out));
        let text = stdout(&out);
        assert!(text.contains("all 13 cases passed"), "{name}: {text}");
        for case in ["long-10k-messages", "huge-tool-result-5mib", "unicode"] {
            let row = text
                .lines()
                .find(|l| l.starts_with(case))
                .unwrap_or_else(|| panic!("{name}: no row for {case}:\n{text}"));
            assert!(row.contains(" ok "), "{name}: {row}");
        }
    }
}

#[test]
fn check_json_gives_every_case_with_its_counts() {
    let dir = tempfile::tempdir().unwrap();
    let path = standard_processor("keep-last-turns");
    let out = processor(
        dir.path(),
        &[
            "check",
            path.to_str().unwrap(),
            "--json",
            "--deadline-ms",
            DEADLINE_MS,
            "--processor-config",
            r#"{"turns": 1}"#,
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let report = json(&out);
    let cases = report["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 13);
    assert_eq!(report["passed"], 13);
    let long = cases
        .iter()
        .find(|c| c["case"] == "long-10k-messages")
        .unwrap();
    assert_eq!(long["verdict"], "ok");
    assert_eq!(long["messages_in"], 10_000);
    // One turn kept of 2,500: the system message and the last exchange.
    assert!(long["messages_out"].as_u64().unwrap() < 10, "{long}");
    assert!(long["ms"].as_f64().unwrap() >= long["call_ms"].as_f64().unwrap());
    let empty = cases.iter().find(|c| c["case"] == "empty").unwrap();
    assert_eq!(
        (&empty["messages_in"], &empty["messages_out"]),
        (&0.into(), &0.into())
    );
}

#[test]
fn check_fails_with_exit_3_naming_each_failing_case_and_its_cause() {
    let dir = tempfile::tempdir().unwrap();
    let out = processor(dir.path(), &["check", guests::PANIC]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("trapped: wasm `unreachable` instruction executed"),
        "{text}"
    );
    assert!(
        text.contains("13 of 13 cases failed: sample, empty, system-only"),
        "{text}"
    );
    assert!(
        stderr(&out).contains("13 of 13 cases failed"),
        "{}",
        stderr(&out)
    );

    let out = processor(dir.path(), &["check", guests::SPIN, "--deadline-ms", "20"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("ran past its deadline of 20 ms"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn check_tells_invalid_output_from_failure_case_by_case() {
    // `reverse` reverses the history: harmless without tool calls, an
    // orphaned result with them.
    let dir = tempfile::tempdir().unwrap();
    let out = processor(dir.path(), &["check", guests::REVERSE, "--json"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let report = json(&out);
    let verdict = |case: &str| {
        report["cases"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["case"] == case)
            .unwrap_or_else(|| panic!("no case {case}"))["verdict"]
            .clone()
    };
    assert_eq!(verdict("empty"), "ok");
    assert_eq!(verdict("odd-turn-order"), "ok");
    assert_eq!(verdict("parallel-tool-calls"), "invalid_output");
    let failed = report["failed"].as_array().unwrap();
    assert!(failed.contains(&"sample".into()), "{report}");
    assert!(!failed.contains(&"empty".into()), "{report}");
    let sample = &report["cases"][0];
    assert_eq!(sample["cause"]["kind"], "invalid");
    assert!(sample["messages_out"].is_null());
}

#[test]
fn bench_json_counts_every_timed_call_and_orders_its_statistics() {
    let dir = tempfile::tempdir().unwrap();
    let path = standard_processor("keep-last-turns");
    let out = processor(
        dir.path(),
        &[
            "bench",
            path.to_str().unwrap(),
            "--iterations",
            "7",
            "--warmup",
            "2",
            "--json",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let report = json(&out);
    assert_eq!(report["iterations"], 7);
    assert_eq!(report["input"]["messages"], 12);
    assert_eq!(report["input"]["source"], "embedded sample");
    for stats in ["run_ms", "guest_ms"] {
        let s = &report[stats];
        assert_eq!(s["count"], 7, "{stats}: {s}");
        let get = |k: &str| s[k].as_f64().unwrap();
        assert!(get("min") > 0.0, "{stats}: {s}");
        assert!(get("min") <= get("median"), "{stats}: {s}");
        assert!(get("median") <= get("p95"), "{stats}: {s}");
        assert!(get("p95") <= get("max"), "{stats}: {s}");
        assert!(
            get("min") <= get("mean") && get("mean") <= get("max"),
            "{stats}: {s}"
        );
    }
    // The guest's time is part of the whole run's.
    assert!(report["guest_ms"]["min"].as_f64() <= report["run_ms"]["min"].as_f64());
    assert!(report["load"]["ms"].as_f64().unwrap() > 0.0);
}

#[test]
fn bench_reads_its_input_from_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("chat.json");
    std::fs::write(
        &input,
        r#"[
          {"role": "system", "content": "Be brief."},
          {"role": "user", "content": "hi"},
          {"role": "assistant", "content": "hello"},
          {"role": "user", "content": "bye"}
        ]"#,
    )
    .unwrap();
    let path = standard_processor("keep-last-turns");
    let out = processor(
        dir.path(),
        &[
            "bench",
            path.to_str().unwrap(),
            "--input",
            input.to_str().unwrap(),
            "--processor-config",
            r#"{"turns": 1}"#,
            "--iterations",
            "3",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("chat.json: 4 messages"), "{text}");
    // One turn: the system message and the last user message.
    assert!(text.contains("output   2 messages"), "{text}");
    assert!(
        text.contains("3 timed calls after 5 warmup calls"),
        "{text}"
    );
    assert!(text.contains("per call (whole run)"), "{text}");
}

#[test]
fn bench_of_a_failing_processor_exits_3_with_the_cause() {
    let dir = tempfile::tempdir().unwrap();
    let out = processor(dir.path(), &["bench", guests::PANIC, "--iterations", "3"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("call 1 of 8 over embedded sample failed"),
        "{err}"
    );
    assert!(err.contains("processor `panic`"), "{err}");
    assert!(stdout(&out).is_empty());
}

#[test]
fn every_tool_has_help_with_an_example() {
    for tool in ["inspect", "check", "bench"] {
        let out = run(&["processor", tool, "--help"], "");
        assert!(out.status.success(), "{tool}: {}", stderr(&out));
        let text = stdout(&out);
        // An example line, not the usage line.
        assert!(
            text.contains(&format!("Examples:\n  agent-host processor {tool} ")),
            "{tool}: {text}"
        );
    }
}
