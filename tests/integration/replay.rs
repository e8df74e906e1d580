//! `agent-host replay`: a recorded run's processors run again and their
//! answers checked byte for byte; tampered reports, changed components and
//! nondeterministic guests are told apart by exit code and explanation.

use std::path::{Path, PathBuf};
use std::process::Output;

use agent_host_test_artifacts as guests;
use serde_json::Value;

use crate::util::{
    STANDARD_PROCESSORS, agent_host, corpus, run, standard_processor, stderr, stdout,
};

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("a report")).expect("JSON")
}

fn write_json(path: &Path, value: &Value) {
    std::fs::write(path, serde_json::to_string_pretty(value).unwrap()).unwrap();
}

/// Runs `agent-host` with `args` (paths given as they are) and no input.
fn cli(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Output {
    agent_host()
        .args(args.iter().map(|a| a.as_ref()))
        .output()
        .expect("agent-host runs")
}

fn code(out: &Output) -> i32 {
    out.status.code().expect("an exit code")
}

/// `agent-host run` of the sample (as a file in `dir`) through `processor`
/// with `flags` after it; returns the report's path.
fn recorded(dir: &Path, processor: &str, flags: &[&str]) -> PathBuf {
    let history = dir.join("history.jsonl");
    std::fs::write(&history, agent_host_engine::transcript::SAMPLE).unwrap();
    let report = dir.join("report.json");
    let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> =
        vec![&"run", &"--input", &history, &"--processor", &processor];
    for f in flags {
        args.push(f);
    }
    let cache = dir.join("cache");
    args.extend([
        &"--report" as &dyn AsRef<std::ffi::OsStr>,
        &report,
        &"--cache-dir",
        &cache,
        &"--output",
        &"/dev/null",
    ]);
    let out = cli(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    report
}

fn replay(dir: &Path, report: &Path, extra: &[&str]) -> Output {
    let cache = dir.join("cache");
    let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> =
        vec![&"replay", &report, &"--cache-dir", &cache];
    for e in extra {
        args.push(e);
    }
    cli(&args)
}

/// The record of the report's processor `i`.
fn record(report: &Value, i: usize) -> &Value {
    &report["processors"][i]["record"]
}

/// The Done-when of the issue: every standard processor, with its example
/// configuration, over every history of the corpus (each tau-bench
/// trajectory and each Claude Code session, through the default pipeline),
/// then `agent-host replay` of the batch's report: every answer the same.
#[test]
fn every_standard_processors_run_on_the_corpus_replays_byte_for_byte() {
    let Some(corpus_dir) = corpus() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let inputs = dir.path().join("inputs");
    std::fs::create_dir(&inputs).unwrap();
    let tau = corpus_dir.join("tau-bench-gpt4o-airline/gpt-4o-airline.json");
    let runs: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(&tau).unwrap()).unwrap();
    for (i, run) in runs.iter().enumerate() {
        write_json(&inputs.join(format!("tau-{i:03}.json")), &run["traj"]);
    }
    let mut sessions: Vec<PathBuf> = std::fs::read_dir(corpus_dir.join("claude-code-sessions-ccv"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    sessions.sort();
    assert!(!sessions.is_empty() && !runs.is_empty());
    let histories = runs.len() + sessions.len();
    let cache = dir.path().join("cache");
    for name in STANDARD_PROCESSORS {
        let component = standard_processor(name);
        let inspected = cli(&[&"processor", &"inspect", &component, &"--json"]);
        assert!(inspected.status.success(), "{}", stderr(&inspected));
        let description: Value = serde_json::from_slice(&inspected.stdout).unwrap();
        let example = &description["config_example"];
        assert!(example.is_object(), "{name} has an example: {description}");
        let example = example.to_string();
        let report = dir.path().join(format!("{name}.json"));
        let out_dir = dir.path().join(format!("{name}-out"));
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"run", &"--input", &inputs];
        for s in &sessions {
            args.push(s);
        }
        args.extend([
            &"--output-dir" as &dyn AsRef<std::ffi::OsStr>,
            &out_dir,
            &"--processor",
            &component,
            &"--processor-config",
            &example,
            &"--report",
            &report,
            &"--cache-dir",
            &cache,
            &"--quiet",
        ]);
        let out = cli(&args);
        assert!(out.status.success(), "{name}: {}", stderr(&out));
        let written = read_json(&report);
        let batch = written["histories"].as_array().unwrap();
        assert_eq!(batch.len(), histories, "{name}");
        for h in batch {
            let r = &h["processors"][0]["record"];
            assert_eq!(r["deterministic"], true, "{name}: {r}");
            assert_eq!(r["sources"]["calls"], serde_json::json!({}), "{name}");
            assert_eq!(r["config"], example.as_str(), "{name}");
            assert!(r["answer"]["sha256"].is_string(), "{name}: {r}");
        }

        let out = cli(&[&"replay", &report, &"--cache-dir", &cache]);
        assert!(
            out.status.success(),
            "{name}: {}\n{}",
            stdout(&out),
            stderr(&out)
        );
        let text = stdout(&out);
        assert_eq!(
            text.matches(": the same answer (sha256").count(),
            histories,
            "{name}: {text}"
        );
        assert!(
            text.contains(&format!(
                "replayed {histories} processor call(s): every answer is the same, byte for byte"
            )),
            "{name}: {text}"
        );
    }
}

#[test]
fn a_report_records_what_a_replay_needs() {
    let dir = tempfile::tempdir().unwrap();
    let component = standard_processor("keep-last-turns");
    let report = recorded(
        dir.path(),
        component.to_str().unwrap(),
        &["--processor-config", r#"{"turns": 1}"#],
    );
    let r = read_json(&report);
    // The history's digest is the SHA-256 of it as native JSONL.
    let jsonl = run(
        &["convert", "-", "--to", "jsonl"],
        agent_host_engine::transcript::SAMPLE,
    );
    assert!(jsonl.status.success());
    let digest = {
        use sha2::Digest;
        let d = sha2::Sha256::digest(&jsonl.stdout);
        d.iter().map(|b| format!("{b:02x}")).collect::<String>()
    };
    assert_eq!(r["replay"]["history"]["digest"]["sha256"], digest.as_str());
    assert_eq!(r["replay"]["history"]["kind"], "file");
    assert_eq!(r["replay"]["history"]["digest"]["messages"], 12);
    let rec = record(&r, 0);
    assert_eq!(rec["version"], 1);
    assert_eq!(rec["contract"], "0.2.0");
    assert_eq!(rec["config"], r#"{"turns": 1}"#);
    assert_eq!(rec["input"], r["replay"]["view"]);
    assert_eq!(rec["context"]["now"], r["replay"]["now"]);
    assert_eq!(rec["grants"]["clocks"], false);
    assert_eq!(rec["limits"]["memory_bytes"], 64 << 20);
    assert_eq!(rec["deterministic"], true);
    assert_eq!(rec["services"], serde_json::json!([]));
    assert_eq!(
        r["processors"][0]["hash"].as_str().unwrap().len(),
        64,
        "the component's SHA-256"
    );
    let edits = rec["answer"]["edits"].as_array().unwrap();
    assert!(
        edits
            .iter()
            .all(|e| e.as_str().unwrap().starts_with("keep ")),
        "keep-last-turns only keeps: {edits:?}"
    );
    assert_ne!(rec["output"], rec["input"], "it dropped the early turns");

    let out = replay(dir.path(), &report, &[]);
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    assert!(
        stdout(&out).contains("keep-last-turns 0.1.0 (sha256 "),
        "{}",
        stdout(&out)
    );
    assert!(stdout(&out).contains("; deterministic"), "{}", stdout(&out));

    let out = replay(dir.path(), &report, &["--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let found: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(found["pipeline"], Value::Null);
    assert_eq!(found["processors"][0]["verdict"], "same", "{found}");
    assert_eq!(found["processors"][0]["deterministic"], true);
}

#[test]
fn a_tampered_configuration_gives_another_answer_and_says_where() {
    let dir = tempfile::tempdir().unwrap();
    let component = standard_processor("keep-last-turns");
    let report = recorded(
        dir.path(),
        component.to_str().unwrap(),
        &["--processor-config", r#"{"turns": 2}"#],
    );
    let mut r = read_json(&report);
    r["processors"][0]["record"]["config"] = Value::from(r#"{"turns": 1}"#);
    write_json(&report, &r);
    let out = replay(dir.path(), &report, &[]);
    assert_eq!(code(&out), 4, "{}\n{}", stdout(&out), stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("ANOTHER ANSWER than recorded"), "{text}");
    assert!(
        text.contains("first differing edit (#1): recorded `keep "),
        "{text}"
    );
    assert!(text.contains("output: recorded sha256"), "{text}");
    assert!(
        stderr(&out).contains("1 of 1 processor call(s) gave another answer"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_tampered_answer_digest_is_a_difference() {
    let dir = tempfile::tempdir().unwrap();
    let component = standard_processor("filter");
    let report = recorded(dir.path(), component.to_str().unwrap(), &[]);
    let mut r = read_json(&report);
    r["processors"][0]["record"]["answer"]["sha256"] = Value::from("0".repeat(64));
    write_json(&report, &r);
    let out = replay(dir.path(), &report, &[]);
    assert_eq!(code(&out), 4, "{}\n{}", stdout(&out), stderr(&out));
    assert!(
        stdout(&out).contains("does not match its own edits"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn a_changed_or_missing_component_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let component = dir.path().join("p.wasm");
    std::fs::copy(standard_processor("strip-media"), &component).unwrap();
    let report = recorded(dir.path(), component.to_str().unwrap(), &[]);
    std::fs::copy(standard_processor("strip-reasoning"), &component).unwrap();
    let out = replay(dir.path(), &report, &[]);
    assert_eq!(code(&out), 65, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("has changed since the recorded run"),
        "{}",
        stderr(&out)
    );
    std::fs::remove_file(&component).unwrap();
    let out = replay(dir.path(), &report, &[]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("the component of processor `strip-media` is missing"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_changed_history_is_refused_and_another_path_can_be_given() {
    let dir = tempfile::tempdir().unwrap();
    let component = standard_processor("redact-secrets");
    let report = recorded(dir.path(), component.to_str().unwrap(), &[]);
    let history = dir.path().join("history.jsonl");
    let moved = dir.path().join("moved.jsonl");
    std::fs::rename(&history, &moved).unwrap();
    let out = replay(dir.path(), &report, &[]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("is missing"), "{}", stderr(&out));
    let out = replay(dir.path(), &report, &["--history", moved.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    // One message less: another history.
    let text = std::fs::read_to_string(&moved).unwrap();
    let shorter: Vec<&str> = text.lines().skip(1).collect();
    std::fs::write(&history, shorter.join("\n") + "\n").unwrap();
    let out = replay(dir.path(), &report, &[]);
    assert_eq!(code(&out), 65, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("is not the one the report records"),
        "{}",
        stderr(&out)
    );
}

/// A run recorded before documents' derived ids were hashed with XXH3 (its
/// history's digest and its processor's input hold the FNV-1a ids) replays
/// from the same document: the history is read again as that version read
/// it.
#[test]
fn a_report_recorded_with_the_earlier_document_ids_replays() {
    use agent_host_core::format::{self, Format};
    use agent_host_core::message::document_id_before;

    let dir = tempfile::tempdir().unwrap();
    let sample = agent_host_engine::transcript::sample().transcript.messages;
    let document = format::write(Format::OpenAi, &sample).unwrap();
    let doc = dir.path().join("chat.json");
    std::fs::write(&doc, &document).unwrap();
    // What that version read from the document: the same messages, each id
    // in its FNV-1a form; the run recorded over a native log of them.
    let mut earlier = format::parse(Format::OpenAi, &document).unwrap().messages;
    for m in &mut earlier {
        m.id = document_id_before(&m.id, &m.text()).expect("a derived id");
    }
    let history = dir.path().join("earlier.jsonl");
    std::fs::write(&history, format::write(Format::Jsonl, &earlier).unwrap()).unwrap();
    let (report, cache) = (dir.path().join("report.json"), dir.path().join("cache"));
    let component = standard_processor("keep-last-turns");
    let out = cli(&[
        &"run",
        &"--input",
        &history,
        &"--processor",
        &component,
        &"--processor-config",
        &r#"{"turns": 2}"#,
        &"--report",
        &report,
        &"--cache-dir",
        &cache,
        &"--output",
        &"/dev/null",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    // The report as that version wrote it for the document.
    let mut r = read_json(&report);
    r["replay"]["history"]["source"] = doc.to_str().unwrap().into();
    r["replay"]["history"]["format"] = "openai".into();
    write_json(&report, &r);

    let out = replay(dir.path(), &report, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    // The document changed is still another history.
    std::fs::write(&doc, document.replacen("Can you find out why?", "Why?", 1)).unwrap();
    let out = replay(dir.path(), &report, &[]);
    assert_eq!(code(&out), 65, "{}", stderr(&out));
}

#[test]
fn a_history_from_standard_input_must_be_given_again() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("r.json");
    let component = standard_processor("filter");
    let out = run(
        &[
            "run",
            "--input",
            "-",
            "--processor",
            component.to_str().unwrap(),
            "--report",
            report.to_str().unwrap(),
        ],
        agent_host_engine::transcript::SAMPLE,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let out = replay(dir.path(), &report, &[]);
    assert_eq!(code(&out), 65, "{}", stderr(&out));
    assert!(stderr(&out).contains("--history FILE"), "{}", stderr(&out));
    let history = dir.path().join("h.jsonl");
    std::fs::write(&history, agent_host_engine::transcript::SAMPLE).unwrap();
    let out = replay(
        dir.path(),
        &report,
        &["--history", history.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", stderr(&out));
}

/// A guest that reads the clock is recorded as not deterministic; with the
/// grant its answer changes, and the replay says the difference is where
/// the record said it would be (exit 5, not 4). Without the grant its call
/// is refused: also not deterministic, and its failure replays the same.
#[test]
fn a_clock_reading_guest_is_recorded_nondeterministic_and_replayed_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let report = recorded(dir.path(), guests::WASI_NOW, &["--allow-clocks"]);
    let r = read_json(&report);
    let rec = record(&r, 0);
    assert_eq!(rec["deterministic"], false, "{rec}");
    assert_eq!(rec["grants"]["clocks"], true);
    let nondeterministic = rec["sources"]["nondeterministic"].as_array().unwrap();
    assert!(
        nondeterministic.contains(&Value::from("wasi:clocks/wall-clock#now")),
        "{rec}"
    );
    // std seeds its HashMap through the insecure seed, which the host
    // answers with a fixed seed when random numbers are not granted: called,
    // counted, and not a source of nondeterminism.
    assert_eq!(
        rec["sources"]["calls"]["wasi:random/insecure-seed#insecure-seed"], 1,
        "{rec}"
    );
    assert!(
        !nondeterministic.contains(&Value::from("wasi:random/insecure-seed#insecure-seed")),
        "{rec}"
    );
    let out = replay(dir.path(), &report, &[]);
    assert_eq!(code(&out), 5, "{}\n{}", stdout(&out), stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("not deterministic: wasi:clocks/wall-clock#now"),
        "{text}"
    );
    assert!(text.contains("first differing edit"), "{text}");
    assert!(
        stderr(&out).contains("their recorded runs were not deterministic"),
        "{}",
        stderr(&out)
    );

    let dir = tempfile::tempdir().unwrap();
    let report = recorded(dir.path(), guests::WASI_NOW, &[]);
    let r = read_json(&report);
    let rec = record(&r, 0);
    assert_eq!(rec["deterministic"], false, "{rec}");
    assert_eq!(
        rec["sources"]["denied"],
        serde_json::json!(["wasi:clocks/wall-clock#now"])
    );
    assert_eq!(rec["answer"], Value::Null, "a refused call gives no answer");
    let out = replay(dir.path(), &report, &[]);
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    assert!(
        stdout(&out).contains("no answer, as recorded"),
        "{}",
        stdout(&out)
    );
}

/// A report cannot grant a folder: a replay repeats a folder grant only
/// when the user names the folder again.
#[test]
fn a_reports_folder_grant_needs_the_users_allow_dir() {
    let dir = tempfile::tempdir().unwrap();
    let granted = dir.path().join("granted");
    std::fs::create_dir(&granted).unwrap();
    let file = granted.join("note.txt");
    std::fs::write(&file, "hello").unwrap();
    let config = format!(
        r#"{{"read": "{}"}}"#,
        file.canonicalize().unwrap().display()
    );
    let report = recorded(
        dir.path(),
        guests::WASI_FS,
        &[
            "--processor-config",
            &config,
            "--allow-dir",
            granted.to_str().unwrap(),
        ],
    );
    let r = read_json(&report);
    assert_eq!(record(&r, 0)["deterministic"], false, "it read a file");
    let out = replay(dir.path(), &report, &[]);
    assert_eq!(code(&out), 65, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("a report cannot grant a folder"),
        "{}",
        stderr(&out)
    );
    let out = replay(
        dir.path(),
        &report,
        &["--allow-dir", granted.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    // The file changed: the answer does too, where the record said it might.
    std::fs::write(&file, "changed").unwrap();
    let out = replay(
        dir.path(),
        &report,
        &["--allow-dir", granted.to_str().unwrap()],
    );
    assert_eq!(code(&out), 5, "{}\n{}", stdout(&out), stderr(&out));
}

#[test]
fn a_bad_report_is_refused_with_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{not json").unwrap();
    let out = replay(dir.path(), &bad, &[]);
    assert_eq!(code(&out), 65, "{}", stderr(&out));
    assert!(stderr(&out).contains("is not JSON"), "{}", stderr(&out));

    let component = standard_processor("token-budget");
    let report = recorded(dir.path(), component.to_str().unwrap(), &[]);
    let good = read_json(&report);

    let mut r = good.clone();
    r.as_object_mut().unwrap().remove("replay");
    write_json(&report, &r);
    let out = replay(dir.path(), &report, &[]);
    assert_eq!(code(&out), 65);
    assert!(
        stderr(&out).contains("holds no replay record"),
        "{}",
        stderr(&out)
    );

    let mut r = good.clone();
    r["processors"][0]["record"]["limits"]["memory_bytes"] = Value::from(1u64 << 40);
    write_json(&report, &r);
    let out = replay(dir.path(), &report, &[]);
    assert_eq!(code(&out), 65);
    assert!(stderr(&out).contains("memory_bytes"), "{}", stderr(&out));

    let mut r = good;
    r["processors"][0]["record"]["version"] = Value::from(99);
    write_json(&report, &r);
    let out = replay(dir.path(), &report, &[]);
    assert_eq!(code(&out), 65);
    assert!(stderr(&out).contains("version 99"), "{}", stderr(&out));

    // A FIFO or a folder is not a report.
    let out = replay(dir.path(), dir.path(), &[]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("not a regular file"),
        "{}",
        stderr(&out)
    );
}
