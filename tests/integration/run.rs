//! `agent-host run` end to end: the real binary, real guests, real files.

use std::path::Path;

use agent_host_test_artifacts as guests;
use serde_json::Value;

use crate::util::{run, stderr, stdout};

fn openai_sample() -> String {
    let out = run(
        &["convert", "-", "--to", "openai"],
        agent_host_engine::transcript::SAMPLE,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    stdout(&out)
}

fn report(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("a report")).expect("JSON")
}

#[test]
fn a_chain_runs_and_the_report_says_what_each_processor_did() {
    let dir = tempfile::tempdir().unwrap();
    let report_path = dir.path().join("report.json");
    let cache = dir.path().join("cache");
    let out = run(
        &[
            "run",
            "--input",
            "-",
            "--processor",
            guests::EDITS,
            "--processor-config",
            r#"{"drop": [11]}"#,
            "--processor",
            guests::PANIC,
            "--report",
            report_path.to_str().unwrap(),
            "--cache-dir",
            cache.to_str().unwrap(),
        ],
        agent_host_engine::transcript::SAMPLE,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let written: Vec<Value> = serde_json::from_str(&stdout(&out)).expect("OpenAI messages");
    assert_eq!(written.len(), 11);
    assert!(
        stderr(&out).contains("edits 1.0.0: kept 11, dropped 1"),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("panic: failed, its input kept"),
        "{}",
        stderr(&out)
    );
    let r = report(&report_path);
    assert_eq!(r["input"]["messages"], 12);
    assert_eq!(r["output"]["messages"], 11);
    let p = &r["processors"];
    assert_eq!(p[0]["name"], "edits");
    assert_eq!(p[0]["outcome"], "applied");
    assert_eq!(p[0]["dropped"], serde_json::json!(["m11"]));
    assert_eq!(p[0]["hash"].as_str().unwrap().len(), 64);
    assert_eq!(p[1]["outcome"], "failed");
    assert!(
        p[1]["error"].as_str().unwrap().contains("trapped"),
        "{}",
        p[1]
    );
    // Each stage in order, with what it did to the messages (the
    // dashboard's `/reports` shows them).
    let stages = r["stages"].as_array().expect("stages");
    let names: Vec<&str> = stages.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["pipeline", "edits", "panic"]);
    let edits = &stages[1]["diff"];
    assert_eq!(
        (edits["before"].as_u64(), edits["dropped"].as_u64()),
        (Some(12), Some(1))
    );
    let dropped = edits["changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["change"] == "dropped")
        .expect("the dropped message listed");
    assert_eq!(dropped["message"]["id"], "m11");
    assert!(!dropped["message"]["text"].as_str().unwrap().is_empty());
    assert_eq!(stages[2]["outcome"], "failed");
    assert_eq!(
        stages[2]["diff"]["kept"], 11,
        "a failed processor's input stands"
    );
}

#[test]
fn a_processor_failure_under_fail_exits_3_and_writes_no_history() {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("out.json");
    let out = run(
        &[
            "run",
            "--input",
            "-",
            "--no-cache",
            "--processor",
            guests::SPIN,
            "--on-failure",
            "fail",
            "--deadline-ms",
            "50",
            "--output",
            output.to_str().unwrap(),
        ],
        &openai_sample(),
    );
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("ran past its deadline of 50 ms"),
        "{}",
        stderr(&out)
    );
    assert!(!output.exists());
}

#[test]
fn a_processor_that_cannot_load_exits_3_naming_the_import() {
    let out = run(
        &[
            "run",
            "--input",
            "-",
            "--no-cache",
            "--processor",
            guests::EVIL_IMPORT,
        ],
        &openai_sample(),
    );
    assert_eq!(out.status.code(), Some(3));
    assert!(
        stderr(&out).contains("imports `test:evil/exfiltrate`"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn an_interrupted_tool_call_is_repaired_and_reported() {
    let history = r#"[
        {"role": "user", "content": "deploy"},
        {"role": "assistant", "content": null,
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "deploy", "arguments": "{}"}}]}
    ]"#;
    let dir = tempfile::tempdir().unwrap();
    let report_path = dir.path().join("r.json");
    let out = run(
        &[
            "run",
            "--input",
            "-",
            "--no-compact",
            "--report",
            report_path.to_str().unwrap(),
        ],
        history,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("closed interrupted call c1"),
        "{}",
        stderr(&out)
    );
    let written: Vec<Value> = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(written[2]["role"], "tool");
    assert_eq!(written[2]["tool_call_id"], "c1");
    let r = report(&report_path);
    assert_eq!(r["pipeline"]["repairs"].as_array().unwrap().len(), 1);
}

#[test]
fn an_unknown_role_is_bad_input_naming_the_message() {
    let out = run(
        &["run", "--input", "-", "--format", "openai"],
        r#"[{"role": "robot", "content": "beep"}]"#,
    );
    assert_eq!(out.status.code(), Some(65), "{}", stderr(&out));
    assert!(stderr(&out).contains("robot"), "{}", stderr(&out));
}

#[test]
fn a_small_context_limit_compacts_before_the_processors() {
    let dir = tempfile::tempdir().unwrap();
    let report_path = dir.path().join("r.json");
    let out = run(
        &[
            "run",
            "--input",
            "-",
            "--context-limit",
            "400",
            "--no-cache",
            "--processor",
            guests::KEEP_ALL,
            "--report",
            report_path.to_str().unwrap(),
            "--same-format",
        ],
        agent_host_engine::transcript::SAMPLE,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let r = report(&report_path);
    let view = &r["pipeline"]["view"];
    let budget = 400 - view["response_reserve"].as_u64().unwrap();
    assert!(view["tokens"].as_u64().unwrap() <= budget, "{r}");
    assert!(r["output"]["messages"].as_u64().unwrap() < 12, "{r}");
    assert_eq!(
        r["output"]["format"], "jsonl",
        "--same-format writes the input's format"
    );
    assert_eq!(
        r["processors"][0]["messages_before"],
        r["output"]["messages"]
    );
}

#[test]
fn an_option_before_any_processor_is_a_usage_error() {
    let out = run(
        &[
            "run",
            "--input",
            "-",
            "--allow-clocks",
            "--processor",
            guests::KEEP_ALL,
        ],
        "[]",
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--allow-clocks must follow the --processor"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_processor_configured_twice_is_a_usage_error_and_an_empty_history_is_refused() {
    let out = run(
        &[
            "run",
            "--processor",
            guests::KEEP_ALL,
            "--processor-config",
            "{}",
            "--processor-config",
            "{}",
        ],
        "",
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--processor-config is given twice"),
        "{}",
        stderr(&out)
    );

    let out = run(&["run", "--input", "-", "--format", "openai"], "[]");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("stdin holds no messages"),
        "{}",
        stderr(&out)
    );
}

/// Batch mode: a folder and a glob pattern of histories in several formats
/// through one processor chain, each result written under its name, the same
/// as running it alone; a history that cannot be read is named and the others
/// are still written; the one report counts them.
#[test]
fn a_batch_runs_every_history_and_names_the_ones_that_fail() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = dir.path().join("in");
    std::fs::create_dir(&inputs).unwrap();
    let sample = agent_host_engine::transcript::SAMPLE;
    std::fs::write(inputs.join("native.jsonl"), sample).unwrap();
    std::fs::write(inputs.join("chat.json"), openai_sample()).unwrap();
    std::fs::write(inputs.join("broken.json"), "{ not a history").unwrap();
    let more = dir.path().join("more");
    std::fs::create_dir(&more).unwrap();
    std::fs::write(more.join("again.jsonl"), sample).unwrap();
    std::fs::write(more.join("notes.txt"), "not matched by the pattern").unwrap();
    let (out_dir, report_path, cache) = (
        dir.path().join("out"),
        dir.path().join("report.json"),
        dir.path().join("cache"),
    );
    let chain = [
        "--processor",
        guests::EDITS,
        "--processor-config",
        r#"{"drop": [11]}"#,
        "--cache-dir",
        cache.to_str().unwrap(),
    ];
    let pattern = more.join("*.jsonl");
    let mut args = vec![
        "run",
        "--input",
        inputs.to_str().unwrap(),
        pattern.to_str().unwrap(),
        "--output-dir",
        out_dir.to_str().unwrap(),
        "--report",
        report_path.to_str().unwrap(),
    ];
    args.extend(chain);
    let out = run(&args, "");
    assert!(!out.status.success(), "a failed history fails the batch");
    let err = stderr(&out);
    assert!(err.contains("broken.json"), "{err}");
    assert!(err.contains("1 of 4 histories failed"), "{err}");
    let mut written: Vec<String> = std::fs::read_dir(&out_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    written.sort();
    assert_eq!(written, ["again.json", "chat.json", "native.json"]);
    // Each result is what a run of that history alone writes.
    for (input, name) in [
        (inputs.join("native.jsonl"), "native.json"),
        (inputs.join("chat.json"), "chat.json"),
    ] {
        let mut alone = vec!["run", "--input", input.to_str().unwrap()];
        alone.extend(chain);
        let single = run(&alone, "");
        assert!(single.status.success(), "{}", stderr(&single));
        assert_eq!(
            std::fs::read_to_string(out_dir.join(name)).unwrap(),
            stdout(&single),
            "{name}"
        );
    }
    let r = report(&report_path);
    assert_eq!(
        (r["written"].as_u64(), r["failed"].as_u64()),
        (Some(3), Some(1))
    );
    let histories = r["histories"].as_array().unwrap();
    assert_eq!(histories.len(), 4);
    let broken = histories
        .iter()
        .find(|h| {
            h["input"]["source"]
                .as_str()
                .unwrap()
                .ends_with("broken.json")
        })
        .unwrap();
    assert!(broken["error"].as_str().unwrap().contains("broken.json"));
    assert!(
        histories
            .iter()
            .filter(|h| h.get("error").is_none())
            .all(|h| h["processors"][0]["dropped"].as_array().unwrap().len() == 1),
        "every history went through the processor"
    );
}

/// A batch runs its histories at once (`--jobs`), yet writes, prints and
/// reports exactly what one at a time does, in the order of the inputs; a
/// history that fails in the middle stays in its place.
#[test]
fn a_batch_run_at_once_matches_one_run_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = dir.path().join("in");
    std::fs::create_dir(&inputs).unwrap();
    let lines: Vec<&str> = agent_host_engine::transcript::SAMPLE.lines().collect();
    // Histories of different lengths, so that their lines differ, and they
    // finish in another order than they start.
    for (name, n) in [("c", 3), ("d", 9), ("e", 5), ("f", 10), ("g", 12), ("h", 4)] {
        let n = n.min(lines.len());
        std::fs::write(
            inputs.join(format!("{name}.jsonl")),
            lines[..n].join("\n") + "\n",
        )
        .unwrap();
    }
    std::fs::write(inputs.join("b.json"), "{ not a history").unwrap();
    // The first history is much the longest: run at once, it finishes last.
    let long: Vec<Value> = (0..20_000)
        .map(|i| {
            let role = if i % 2 == 0 { "user" } else { "assistant" };
            serde_json::json!({"role": role, "content": format!("turn {i} of a long history")})
        })
        .collect();
    std::fs::write(inputs.join("a.json"), Value::Array(long).to_string()).unwrap();
    let cache = dir.path().join("cache");
    let batch = |jobs: &str| {
        let (out_dir, report_path) = (
            dir.path().join(format!("out-{jobs}")),
            dir.path().join(format!("report-{jobs}.json")),
        );
        let out = run(
            &[
                "run",
                "--input",
                inputs.to_str().unwrap(),
                "--output-dir",
                out_dir.to_str().unwrap(),
                "--jobs",
                jobs,
                "--report",
                report_path.to_str().unwrap(),
                "--processor",
                guests::EDITS,
                "--processor-config",
                r#"{"drop": [1]}"#,
                "--cache-dir",
                cache.to_str().unwrap(),
            ],
            "",
        );
        assert!(!out.status.success(), "b.json fails the batch");
        // The lines, without the times they took and the output folder.
        let printed: Vec<String> = stderr(&out)
            .replace(out_dir.to_str().unwrap(), "OUT")
            .lines()
            .map(|l| match l.rfind(" in ") {
                Some(at) if l.ends_with(" ms") => l[..at].to_owned(),
                _ => l.to_owned(),
            })
            .collect();
        let report = report(&report_path);
        let sources: Vec<String> = report["histories"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["input"]["source"].as_str().unwrap().to_owned())
            .collect();
        let mut written = std::collections::BTreeMap::new();
        for entry in std::fs::read_dir(&out_dir).unwrap() {
            let entry = entry.unwrap();
            written.insert(
                entry.file_name().to_string_lossy().into_owned(),
                std::fs::read(entry.path()).unwrap(),
            );
        }
        (printed, sources, written)
    };
    let (printed, sources, written) = batch("1");
    let names: Vec<&str> = sources
        .iter()
        .map(|s| s.rsplit('/').next().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "a.json", "b.json", "c.jsonl", "d.jsonl", "e.jsonl", "f.jsonl", "g.jsonl", "h.jsonl"
        ]
    );
    assert_eq!(written.len(), 7, "{:?}", written.keys());
    assert!(
        printed
            .iter()
            .filter(|l| l.starts_with("pipeline:"))
            .count()
            == 7,
        "{printed:#?}"
    );
    let at_once = batch("4");
    assert_eq!(at_once.1, sources, "the report keeps the inputs' order");
    assert_eq!(at_once.0, printed, "the lines keep the inputs' order");
    assert!(at_once.2 == written, "the same results");

    let out = run(
        &[
            "run",
            "--input",
            inputs.to_str().unwrap(),
            "--output-dir",
            "x",
            "--jobs",
            "0",
        ],
        "",
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--jobs"), "{}", stderr(&out));
}

/// Batch mode refuses before running anything: two inputs that would write
/// one result, a pattern that matches nothing, several inputs without
/// --output-dir.
#[test]
fn a_batch_that_cannot_be_written_is_refused_first() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir(&a).unwrap();
    std::fs::create_dir(&b).unwrap();
    let sample = agent_host_engine::transcript::SAMPLE;
    std::fs::write(a.join("same.jsonl"), sample).unwrap();
    std::fs::write(b.join("same.json"), openai_sample()).unwrap();
    let out_dir = dir.path().join("out");
    let out = run(
        &[
            "run",
            "--input",
            a.to_str().unwrap(),
            b.to_str().unwrap(),
            "--output-dir",
            out_dir.to_str().unwrap(),
        ],
        "",
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("would both write"),
        "{}",
        stderr(&out)
    );
    assert!(!out_dir.exists(), "nothing was written");

    let nothing = dir.path().join("*.none");
    let out = run(
        &[
            "run",
            "--input",
            nothing.to_str().unwrap(),
            "--output-dir",
            out_dir.to_str().unwrap(),
        ],
        "",
    );
    assert!(!out.status.success());
    assert!(stderr(&out).contains("matches no file"), "{}", stderr(&out));

    let out = run(
        &[
            "run",
            "--input",
            a.join("same.jsonl").to_str().unwrap(),
            b.join("same.json").to_str().unwrap(),
        ],
        "",
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("need --output-dir"),
        "{}",
        stderr(&out)
    );
}
