//! The standard processors, built by the README's command and run in the real
//! host: over every history of the corpus, on edge cases, and with bad
//! configurations.

use std::path::Path;

use agent_host::core::{Message, Role};
use agent_host::runtime::{Cause, Outcome, ProcessorOptions, RunInfo, RunOutcome};

use crate::runtime::{runtime, sample};
use crate::util::{STANDARD_PROCESSORS, corpus_histories, standard_processor};

/// The size budget of a standard processor.
const MAX_BYTES: u64 = 300 * 1024;

fn load(name: &str, config: Option<&str>) -> agent_host::runtime::Processor {
    let path = standard_processor(name);
    runtime()
        .load_file(
            &path,
            ProcessorOptions {
                config: config.map(str::to_owned),
                ..ProcessorOptions::default()
            },
        )
        .unwrap_or_else(|e| panic!("{name} loads: {e:#}"))
}

/// Runs processor `name` with `config` over `input`.
pub fn run(name: &str, config: &str, input: Vec<Message>) -> RunOutcome {
    let p = load(name, Some(config));
    runtime().run(std::slice::from_ref(&p), &RunInfo::default(), input)
}

/// Runs and requires the edits to have been applied as they were (valid
/// without repair).
pub fn applied(name: &str, config: &str, input: Vec<Message>) -> Vec<Message> {
    let out = run(name, config, input);
    let report = &out.reports[0];
    assert_eq!(
        report.outcome,
        Outcome::Applied,
        "{name} {config}: {report:?}"
    );
    out.messages
}

/// The cause of a failed call, after checking the input stood.
pub fn failed(name: &str, config: &str, input: Vec<Message>) -> Cause {
    let p = load(name, Some(config));
    let out = runtime().run(std::slice::from_ref(&p), &RunInfo::default(), input.clone());
    assert_eq!(out.messages, input, "{name}: the input must stand");
    assert_eq!(out.reports[0].outcome, Outcome::Failed);
    out.failure.expect("a failed call").cause
}

pub fn texts(messages: &[Message]) -> Vec<String> {
    messages.iter().map(|m| m.text().into_owned()).collect()
}

#[test]
fn standard_processors_import_nothing_but_the_agent_host_interface() {
    for name in STANDARD_PROCESSORS {
        let path = standard_processor(name);
        let bytes = std::fs::metadata(&path).unwrap().len();
        assert!(
            bytes < MAX_BYTES,
            "{name} is {bytes} bytes, over {MAX_BYTES}"
        );
        let p = load(name, None);
        assert!(!p.uses_wasi(), "{name} imports WASI");
        for import in p.imports() {
            assert!(
                import.name.starts_with("agent-host:history/"),
                "{name} imports {}",
                import.name
            );
        }
        let d = p.description();
        assert_eq!(d.name, name);
        assert_eq!(d.version, "0.1.0");
        assert!(!d.summary.is_empty(), "{name} has a summary");
        assert!(!d.reorders, "{name} never reorders");
    }
}

#[test]
fn standard_processors_accept_their_example_and_refuse_an_unknown_key() {
    for name in STANDARD_PROCESSORS {
        let example = load(name, None)
            .description()
            .config_example
            .clone()
            .unwrap_or_else(|| panic!("{name} has an example configuration"));
        applied(name, &example, sample());
        applied(name, "{}", sample());
        match failed(name, r#"{"no_such_key": 1}"#, sample()) {
            Cause::BadConfig(m) => assert!(m.contains("no_such_key"), "{name}: {m}"),
            other => panic!("{name}: {other:?}"),
        }
        match failed(name, "[1, 2]", sample()) {
            Cause::BadConfig(_) => {}
            other => panic!("{name}: {other:?}"),
        }
    }
}

/// Every processor, with its example configuration, over every real history:
/// the answer is applied as it is (the host's validator found nothing to
/// repair), and nothing is ever lost that the processor did not mean to drop.
#[test]
fn standard_processors_keep_real_histories_valid() {
    let histories = corpus_histories();
    for name in STANDARD_PROCESSORS {
        let p = load(name, None);
        let example = p.description().config_example.clone().unwrap();
        let p = load(name, Some(&example));
        for (source, history) in &histories {
            let out = runtime().run(
                std::slice::from_ref(&p),
                &RunInfo::default(),
                history.clone(),
            );
            let report = &out.reports[0];
            assert_eq!(
                report.outcome,
                Outcome::Applied,
                "{name} on {source}: {:?}",
                report.error
            );
            assert!(out.messages.len() <= history.len() + report.inserted.len());
        }
    }
}

#[test]
fn empty_histories_stay_empty() {
    for name in STANDARD_PROCESSORS {
        assert!(applied(name, "{}", Vec::new()).is_empty(), "{name}");
    }
}

mod keep_last_turns {
    use super::*;

    #[test]
    fn keeps_the_last_turns_of_a_real_session() {
        for (source, history) in corpus_histories() {
            let out = applied("keep-last-turns", r#"{"turns": 2}"#, history.clone());
            let starts = |h: &[Message]| {
                h.iter()
                    .filter(|m| m.role == Role::User && !m.synthetic)
                    .count()
            };
            let kept = starts(&out);
            assert_eq!(kept, starts(&history).min(2), "{source}");
            // What is kept is the end of the history, system messages aside.
            let tail: Vec<&Message> = out.iter().filter(|m| m.role != Role::System).collect();
            let end = &history[history.len() - tail.len()..];
            assert!(
                tail.iter().zip(end).all(|(a, b)| *a == b),
                "{source}: the newest messages"
            );
        }
    }

    #[test]
    fn zero_turns_is_refused() {
        let cause = failed("keep-last-turns", r#"{"turns": 0}"#, sample());
        assert!(matches!(cause, Cause::BadConfig(m) if m.contains("at least 1")));
    }

    #[test]
    fn a_negative_count_names_the_problem() {
        let cause = failed("keep-last-turns", r#"{"turns": -1}"#, sample());
        assert!(
            matches!(&cause, Cause::BadConfig(m) if m.contains("invalid value: integer `-1`")),
            "{cause:?}"
        );
    }
}

mod token_budget {
    use super::*;
    use agent_host::core::TokenCounter;

    fn tokens(messages: &[Message]) -> u64 {
        let counter = agent_host::core::HeuristicCounter::default();
        messages
            .iter()
            .map(|m| u64::from(counter.count_message(m)))
            .sum()
    }

    #[test]
    fn real_histories_fit_the_budget() {
        for (source, history) in corpus_histories() {
            for budget in [2_000u64, 10_000] {
                let config = format!(r#"{{"tokens": {budget}}}"#);
                let out = applied("token-budget", &config, history.clone());
                let used = tokens(&out);
                // Over only when the newest exchange alone is.
                assert!(
                    used <= budget || out.len() <= 3,
                    "{source}: {used} > {budget} with {} messages",
                    out.len()
                );
                assert_eq!(out.last(), history.last(), "{source}: the newest stays");
            }
        }
    }

    #[test]
    fn without_a_budget_the_hosts_is_used() {
        // The sample is far below the default budget: nothing goes.
        assert_eq!(applied("token-budget", "{}", sample()), sample());
    }

    #[test]
    fn a_zero_budget_is_refused() {
        let cause = failed("token-budget", r#"{"tokens": 0}"#, sample());
        assert!(matches!(cause, Cause::BadConfig(_)), "{cause:?}");
    }
}

#[test]
fn the_build_command_writes_every_standard_processor() {
    for name in STANDARD_PROCESSORS {
        let path = standard_processor(name);
        assert!(Path::new(&path).is_file(), "{}", path.display());
    }
}

/// `agent-host processor new` makes a crate that passes its own tests and
/// builds into a component the host runs.
#[test]
fn a_new_processor_builds_and_passes_its_own_test() {
    use crate::util::{agent_host, stderr, stdout};
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("drop-words");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    // Shared across runs, so only the first compiles the SDK.
    let target = root.join("target/scaffold");

    let new = agent_host()
        .args(["processor", "new", "drop-words", "--path"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(new.status.success(), "{}", stderr(&new));
    assert!(stdout(&new).contains("cargo test"), "it says what next");

    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let test = std::process::Command::new(cargo)
        .arg("test")
        .arg("--quiet")
        .current_dir(&dir)
        .env("CARGO_TARGET_DIR", &target)
        .env_remove("RUSTFLAGS")
        .output()
        .unwrap();
    assert!(
        test.status.success(),
        "the new crate's tests: {}{}",
        stdout(&test),
        stderr(&test)
    );
    assert!(stdout(&test).contains("2 passed"), "{}", stdout(&test));

    let out = tmp.path().join("out");
    let build = agent_host()
        .args(["processor", "build", "--quiet", "--out-dir"])
        .arg(&out)
        .arg(&dir)
        .env("CARGO_TARGET_DIR", &target)
        .env_remove("RUSTFLAGS")
        .output()
        .unwrap();
    assert!(build.status.success(), "{}", stderr(&build));
    let p = runtime()
        .load_file(
            &out.join("drop-words.wasm"),
            ProcessorOptions {
                config: Some(r#"{"words": ["fixed"]}"#.into()),
                ..ProcessorOptions::default()
            },
        )
        .unwrap();
    assert!(!p.uses_wasi());
    let input = sample();
    let out = runtime().run(std::slice::from_ref(&p), &RunInfo::default(), input.clone());
    assert_eq!(
        out.reports[0].outcome,
        Outcome::Applied,
        "{:?}",
        out.reports[0]
    );
    assert!(out.messages.len() < input.len(), "it dropped something");
    assert!(
        texts(&out.messages)
            .iter()
            .all(|t| !t.to_lowercase().contains("fixed"))
    );

    // Refused: a name that is not a crate name, and a folder that is taken.
    let bad = agent_host()
        .args(["processor", "new", "../evil"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        stderr(&bad).contains("not a processor name"),
        "{}",
        stderr(&bad)
    );
    let taken = agent_host()
        .args(["processor", "new", "drop-words", "--path"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(stderr(&taken).contains("not empty"), "{}", stderr(&taken));
}

#[test]
fn building_a_folder_without_a_crate_says_what_to_do() {
    let tmp = tempfile::tempdir().unwrap();
    let out = crate::util::agent_host()
        .args(["processor", "build"])
        .arg(tmp.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = crate::util::stderr(&out);
    assert!(
        err.contains("no Cargo.toml") && err.contains("processor new"),
        "{err}"
    );
}
