//! The standard processors, built by the README's command and run in the real
//! host: over every history of the corpus, on edge cases, and with bad
//! configurations.

use std::path::Path;

use agent_host_core::{Message, Role};
use agent_host_runtime::{Cause, FailurePolicy, Outcome, ProcessorOptions, RunInfo, RunOutcome};

use crate::runtime::{runtime, sample};
use crate::util::{
    STANDARD_PROCESSORS, corpus_histories, standard_processor, standard_processor_v0_1,
};

/// The size budget of a standard processor.
const MAX_BYTES: u64 = 300 * 1024;

fn load(name: &str, config: Option<&str>) -> agent_host_runtime::Processor {
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
    let p = runtime()
        .load_file(
            &standard_processor(name),
            ProcessorOptions {
                config: Some(config.to_owned()),
                on_failure: FailurePolicy::Fail,
                ..ProcessorOptions::default()
            },
        )
        .unwrap_or_else(|e| panic!("{name} loads: {e:#}"));
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
        // A processor that calls no host service does not import the
        // interface (wit-component leaves unused imports out), so it loads
        // on a host without it.
        let services = p
            .imports()
            .iter()
            .any(|i| i.name.starts_with("agent-host:history/services@"));
        assert_eq!(services, name == "summarize-history", "{name}");
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
            matches!(&cause, Cause::BadConfig(m) if m.starts_with("`turns`: invalid value: integer `-1`")),
            "{cause:?}"
        );
    }
}

mod token_budget {
    use super::*;
    use agent_host_core::TokenCounter;

    fn tokens(messages: &[Message]) -> u64 {
        let counter = agent_host_core::HeuristicCounter::default();
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
                // Over only when the newest exchange alone is: then that
                // exchange (a call and its results, or one message) is all
                // that is left besides system messages.
                if used > budget {
                    let kept: Vec<&Message> =
                        out.iter().filter(|m| m.role != Role::System).collect();
                    assert!(
                        kept.len() <= 1 + kept[0].tool_calls.len(),
                        "{source}: {used} > {budget} with {} messages",
                        kept.len()
                    );
                }
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
    let out = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let build = crate::util::agent_host()
        .args(["processor", "build", "--out-dir"])
        .arg(out.path())
        .arg(root.join("processors"))
        .env_remove("CARGO_TARGET_DIR")
        .output()
        .unwrap();
    assert!(build.status.success(), "{}", crate::util::stderr(&build));
    let said = crate::util::stdout(&build);
    for name in STANDARD_PROCESSORS {
        let path = out.path().join(format!("{name}.wasm"));
        assert!(said.contains(&format!("built {name} (")), "{said}");
        let meta = std::fs::metadata(&path).unwrap_or_else(|_| panic!("{}", path.display()));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(
                meta.permissions().mode() & 0o777,
                0o644,
                "{name} is readable"
            );
        }
        // The same bytes the tests load.
        assert_eq!(
            std::fs::read(&path).unwrap(),
            std::fs::read(standard_processor(name)).unwrap()
        );
    }
}

#[test]
fn run_refuses_a_workspace_of_processors_before_building() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = crate::util::agent_host()
        .args(["run", "--processor"])
        .arg(root.join("processors"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let err = crate::util::stderr(&out);
    assert!(
        err.contains("holds 10 processors") && err.contains("give one crate"),
        "{err}"
    );
    assert!(!err.contains("Compiling"), "refused before building: {err}");
}

/// `agent-host processor new` makes a crate that passes its own tests and
/// builds into a component the host runs.
#[test]
fn a_new_processor_builds_and_passes_its_own_test() {
    use crate::util::{agent_host, stderr, stdout};
    let tmp = tempfile::tempdir().unwrap();
    // A name that is also one of the template's own items.
    let dir = tmp.path().join("config");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    // Shared across runs, so only the first compiles the SDK.
    let target = root.join("target/scaffold");

    let new = agent_host()
        .args(["processor", "new", "config", "--path"])
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
            &out.join("config.wasm"),
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

    // A crate that forgets `export_processor!` is refused at build time.
    let lib = dir.join("src/lib.rs");
    let text = std::fs::read_to_string(&lib).unwrap();
    let without: String = text
        .lines()
        .filter(|l| !l.starts_with("export_processor!"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_ne!(without, text, "the template exports its processor");
    std::fs::write(&lib, without).unwrap();
    let build = agent_host()
        .args(["processor", "build", "--quiet", "--out-dir"])
        .arg(tmp.path().join("out2"))
        .arg(&dir)
        .env("CARGO_TARGET_DIR", &target)
        .output()
        .unwrap();
    assert!(!build.status.success());
    assert!(
        stderr(&build).contains("config does not export a processor: add"),
        "{}",
        stderr(&build)
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
        .args(["processor", "new", "config", "--path"])
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

/// Issue 20: every standard processor built against contract 0.1.0 and
/// against 0.2.0 (the SDK's default) gives the same output and the same
/// report on every history of the corpus and the sample, in the same host.
#[test]
fn the_0_1_0_and_0_2_0_builds_agree_on_every_history() {
    let info = RunInfo::default();
    let histories: Vec<(String, Vec<Message>)> = corpus()
        .iter()
        .cloned()
        .chain(std::iter::once(("sample".to_owned(), sample())))
        .collect();
    for name in STANDARD_PROCESSORS {
        let options = ProcessorOptions::default;
        let new = runtime()
            .load_file(&standard_processor(name), options())
            .unwrap_or_else(|e| panic!("{name} loads: {e:#}"));
        let old = runtime()
            .load_file(&standard_processor_v0_1(name), options())
            .unwrap_or_else(|e| panic!("{name} (0.1.0) loads: {e:#}"));
        assert_eq!(new.contract(), "0.2.0", "{name}");
        assert_eq!(old.contract(), "0.1.0", "{name}");
        for (label, h) in &histories {
            let a = runtime().run(std::slice::from_ref(&new), &info, h.clone());
            let b = runtime().run(std::slice::from_ref(&old), &info, h.clone());
            assert_eq!(
                a.reports[0].outcome, b.reports[0].outcome,
                "{name} on {label}"
            );
            assert_eq!(a.reports[0].error, b.reports[0].error, "{name} on {label}");
            assert_eq!(
                a.reports[0].dropped, b.reports[0].dropped,
                "{name} on {label}"
            );
            assert!(
                a.messages == b.messages,
                "{name} on {label}: the outputs differ"
            );
        }
    }
}

/// The corpus, read once for the tests below.
fn corpus() -> &'static [(String, Vec<Message>)] {
    static CORPUS: std::sync::OnceLock<Vec<(String, Vec<Message>)>> = std::sync::OnceLock::new();
    CORPUS.get_or_init(corpus_histories)
}

/// The Claude Code sessions of the corpus.
fn sessions() -> impl Iterator<Item = &'static (String, Vec<Message>)> {
    corpus()
        .iter()
        .filter(|(source, _)| source.ends_with(".jsonl"))
}

/// Runs the loaded processor `p` over `input` at the run's time `now`, and
/// requires its answer to have been applied as it was.
fn applied_at(
    p: &agent_host_runtime::Processor,
    now: chrono::DateTime<chrono::Utc>,
    input: Vec<Message>,
) -> (Vec<Message>, agent_host_runtime::ProcessorReport) {
    let info = RunInfo {
        now,
        ..RunInfo::default()
    };
    let mut out = runtime().run(std::slice::from_ref(p), &info, input);
    let report = out.reports.remove(0);
    assert_eq!(report.outcome, Outcome::Applied, "{}: {report:?}", p.name());
    (out.messages, report)
}

/// [`applied_at`] now.
fn applied_by(
    p: &agent_host_runtime::Processor,
    input: Vec<Message>,
) -> (Vec<Message>, agent_host_runtime::ProcessorReport) {
    applied_at(p, chrono::Utc::now(), input)
}

fn ids(messages: &[Message]) -> Vec<&str> {
    messages.iter().map(|m| m.id.as_str()).collect()
}

/// The ids of the messages a report says were replaced, sorted.
fn replaced(report: &agent_host_runtime::ProcessorReport) -> Vec<&str> {
    let mut ids: Vec<&str> = report.replaced.iter().map(|r| r.id.as_str()).collect();
    ids.sort_unstable();
    ids
}

/// What a report's processor logged at the `info` level.
fn info(report: &agent_host_runtime::ProcessorReport) -> Vec<&str> {
    report
        .logs
        .iter()
        .filter(|l| l.level == "info")
        .map(|l| l.text.as_str())
        .collect()
}

/// The bad-configuration message of a call, or a panic naming what came
/// instead.
fn bad_config(name: &str, config: &str) -> String {
    match failed(name, config, sample()) {
        Cause::BadConfig(message) => message,
        other => panic!("{name} {config}: {other:?}"),
    }
}

mod filter {
    use super::*;
    use chrono::{DateTime, Duration, Utc};

    fn role_or_system(role: Role) -> impl Fn(&&Message) -> bool {
        move |m| m.role == role || m.role == Role::System
    }

    /// Filtering real histories by role leaves only those roles (and system
    /// messages); a tool exchange goes whole when only one of its sides
    /// matches, and stays whole when both do.
    #[test]
    fn by_role_on_real_histories() {
        let users = load("filter", Some(r#"{"roles": ["user"]}"#));
        let assistants = load("filter", Some(r#"{"roles": ["assistant"]}"#));
        let exchanges = load("filter", Some(r#"{"roles": ["assistant", "tool"]}"#));
        let mut stripped = 0;
        for (source, history) in corpus() {
            let (out, _) = applied_by(&users, history.clone());
            let expected: Vec<Message> = history
                .iter()
                .filter(role_or_system(Role::User))
                .cloned()
                .collect();
            assert_eq!(out, expected, "{source}: the user's words, unchanged");

            // Every call lost its result, so every call goes; what the
            // assistant said stays, and a message that only called tools
            // goes.
            let (out, report) = applied_by(&assistants, history.clone());
            let expected: Vec<Message> = history
                .iter()
                .filter(role_or_system(Role::Assistant))
                .filter(|m| {
                    !m.content.trim().is_empty() || !m.parts.is_empty() || m.reasoning.is_some()
                })
                .map(|m| {
                    let mut m = m.clone();
                    m.tool_calls.clear();
                    m
                })
                .collect();
            assert_eq!(out, expected, "{source}");
            stripped += report.replaced.len();

            let (out, report) = applied_by(&exchanges, history.clone());
            let expected: Vec<Message> = history
                .iter()
                .filter(|m| m.role != Role::User)
                .cloned()
                .collect();
            assert_eq!(out, expected, "{source}: every exchange, whole");
            assert!(report.replaced.is_empty(), "{source}: {report:?}");
        }
        if !corpus().is_empty() {
            assert!(stripped > 0, "some assistant message both spoke and called");
        }
    }

    /// `tools` keeps the calls of the listed tools with their results, and
    /// takes the other calls out of the messages it keeps.
    #[test]
    fn by_tool_on_real_histories() {
        let listed = ["get_reservation_details", "TodoWrite"];
        let p = load(
            "filter",
            Some(&serde_json::json!({ "tools": listed }).to_string()),
        );
        let mut results = 0;
        for (source, history) in corpus() {
            let (out, _) = applied_by(&p, history.clone());
            let calls = |h: &[Message]| -> Vec<String> {
                h.iter()
                    .flat_map(|m| &m.tool_calls)
                    .filter(|c| listed.contains(&c.name.as_str()))
                    .map(|c| c.id.clone())
                    .collect()
            };
            assert_eq!(calls(&out), calls(history), "{source}: every listed call");
            let answers: Vec<&Message> = history
                .iter()
                .filter(|m| m.role == Role::Tool)
                .filter(|m| listed.contains(&m.tool_name.as_deref().unwrap_or_default()))
                .collect();
            results += answers.len();
            for m in out.iter().filter(|m| m.role != Role::System) {
                match m.role {
                    Role::Tool => assert!(answers.contains(&m), "{source}: {}", m.id),
                    _ => assert!(
                        !m.tool_calls.is_empty()
                            && m.tool_calls
                                .iter()
                                .all(|c| listed.contains(&c.name.as_str())),
                        "{source}: {} calls {:?}",
                        m.id,
                        m.tool_calls
                    ),
                }
            }
            let kept = out.iter().filter(|m| m.role == Role::Tool).count();
            assert_eq!(kept, answers.len(), "{source}: every listed result");
        }
        if !corpus().is_empty() {
            assert!(results > 0, "the listed tools are used in the corpus");
        }
    }

    /// A window of time inside each real Claude Code session: what is kept
    /// lies inside it, and every message inside it stays unless its tool
    /// exchange reaches outside.
    #[test]
    fn a_time_window_on_real_sessions() {
        for (source, history) in sessions() {
            let times: Vec<DateTime<Utc>> = history
                .iter()
                .map(|m| m.timestamp.expect("timestamped"))
                .collect();
            let (since, until) = (times[history.len() / 4], times[history.len() * 3 / 4]);
            let config = serde_json::json!({
                "since": since.to_rfc3339(),
                "until": until.to_rfc3339(),
            });
            let (out, _) = applied_by(&load("filter", Some(&config.to_string())), history.clone());
            let inside = |m: &Message| m.timestamp.is_some_and(|t| since <= t && t < until);
            assert!(!out.is_empty(), "{source}");
            assert!(out.iter().all(inside), "{source}: {:?}", ids(&out));
            let calls_inside: Vec<&str> = history
                .iter()
                .filter(|m| inside(m))
                .flat_map(|m| &m.tool_calls)
                .map(|c| c.id.as_str())
                .collect();
            for m in history.iter().filter(|m| inside(m)) {
                let whole = match m.role {
                    Role::Tool => calls_inside.contains(&m.tool_call_id.as_deref().unwrap()),
                    _ => m.tool_calls.is_empty(),
                };
                if whole {
                    assert!(out.contains(m), "{source}: {} is inside", m.id);
                }
            }
        }
    }

    /// `at(m, minutes)`: `m` written that many minutes before `now`.
    fn at(mut m: Message, now: DateTime<Utc>, minutes: i64) -> Message {
        m.timestamp = Some(now - Duration::minutes(minutes));
        m
    }

    /// Durations count back from the run's time, which the host passes in,
    /// not from the clock: a session replayed a month later filters the
    /// same.
    #[test]
    fn durations_count_from_the_runs_time() {
        let now = Utc::now() - Duration::days(30);
        let history = vec![
            Message::system("rules").with_id("sys"),
            at(Message::user("old").with_id("3h"), now, 180),
            at(Message::assistant("older").with_id("90m"), now, 90),
            Message::user("no timestamp").with_id("none"),
            at(Message::user("recent").with_id("20m"), now, 20),
            at(Message::assistant("newest").with_id("5m"), now, 5),
        ];
        let window = |config: &str| {
            let (out, _) = applied_at(&load("filter", Some(config)), now, history.clone());
            ids(&out).join(" ")
        };
        assert_eq!(window(r#"{"since": "1h"}"#), "sys 20m 5m");
        assert_eq!(window(r#"{"until": "1h"}"#), "sys 3h 90m");
        assert_eq!(
            window(r#"{"since": "2h", "until": "0.25h"}"#),
            "sys 90m 20m"
        );
        assert_eq!(
            window(r#"{"since": "1w", "keep_system": false}"#),
            "3h 90m 20m 5m",
            "a message without a timestamp is outside every window"
        );
    }

    fn exchange() -> Vec<Message> {
        let mut calls = Message::assistant("Building and uploading.").with_id("calls");
        calls.push_tool_call("c1", "build", r#"{"target":"site"}"#);
        calls.push_tool_call("c2", "upload", r#"{"to":"s3://bucket"}"#);
        vec![
            Message::system("rules").with_id("sys"),
            Message::user("ship it").with_id("u"),
            calls,
            Message::tool_result("c1", "build", "built 12 pages").with_id("r1"),
            Message::tool_result("c2", "upload", "uploaded to production").with_id("r2"),
            Message::assistant("Shipped.").with_id("a"),
        ]
    }

    /// A call whose result is dropped leaves its message, which keeps its
    /// text and its other calls; a result whose call is dropped goes.
    #[test]
    fn dropping_one_side_of_an_exchange_drops_the_other() {
        let (out, report) = applied_by(
            &load("filter", Some(r#"{"tools": ["upload"]}"#)),
            exchange(),
        );
        assert_eq!(ids(&out), ["sys", "calls", "r2"]);
        assert_eq!(out[1].content, "Building and uploading.");
        let calls: Vec<&str> = out[1].tool_calls.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(calls, ["c2"], "the build call lost its result");
        assert_eq!(replaced(&report), ["calls"]);

        // The result matches, its neighbours come as context, but its call
        // is two messages away: the whole exchange goes.
        let near = load(
            "filter",
            Some(r#"{"contains": "PRODUCTION", "context": 1}"#),
        );
        let (out, report) = applied_by(&near, exchange());
        assert_eq!(ids(&out), ["sys", "a"]);
        assert_eq!(report.dropped, ["u", "calls", "r1", "r2"]);
        // Wide enough, the context brings the exchange back whole.
        let wide = load(
            "filter",
            Some(r#"{"contains": "production", "context": 2}"#),
        );
        let (out, _) = applied_by(&wide, exchange());
        let mut expected = exchange();
        expected.remove(1);
        assert_eq!(out, expected);
    }

    #[test]
    fn bad_configurations_name_the_key() {
        let m = bad_config("filter", r#"{"roles": ["user", "bot"]}"#);
        assert!(m.contains("`roles`") && m.contains("`bot`"), "{m}");
        let m = bad_config("filter", r#"{"since": "yesterday"}"#);
        assert!(m.contains("`since`"), "{m}");
        let m = bad_config("filter", r#"{"since": "1h", "until": "2h"}"#);
        assert!(m.contains("`since`") && m.contains("`until`"), "{m}");
        let m = bad_config("filter", r#"{"regex": "(unclosed"}"#);
        assert!(m.contains("`regex`"), "{m}");
        let m = bad_config("filter", r#"{"contains": "a", "regex": "b"}"#);
        assert!(m.contains("`contains`") && m.contains("`regex`"), "{m}");
    }
}

mod redact_secrets {
    use super::*;
    use agent_host_core::message::{Part, Reasoning};

    /// Fake secrets of each kind, put together from pieces so that no
    /// scanner takes this file for a leak.
    struct Fake {
        openai: String,
        aws: String,
        github: String,
        pem: String,
        jwt: String,
        password: String,
    }

    fn fake() -> Fake {
        let label = ["OPENSSH ", "PRIVATE", " KEY"].concat();
        Fake {
            openai: ["sk-", "proj-", &"Xy7".repeat(8)].concat(),
            aws: ["AK", "IA", "Q7W3E5R9T2Y4U6I8"].concat(),
            github: ["ghp", "_", &"aB1".repeat(12)].concat(),
            pem: format!(
                "-----BEGIN {label}-----\n{}\n{}\n-----END {label}-----",
                "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAAB",
                "AAAAMwAAAAtzc2gtZWQyNTUxOQAAACDx3vTqWm9JqZ8c"
            ),
            jwt: [
                "ey",
                "JhbGciOiJIUzI1NiJ9",
                ".",
                "eyJzdWIiOiIxMjM0NTY3ODkwIn0",
            ]
            .concat(),
            password: ["s3cr3t", "-Pa55"].concat(),
        }
    }

    /// `history` with fake secrets planted in five of its messages: a user's
    /// words, a tool's output, a call's arguments, a text part and the last
    /// assistant message (two there). With `redacted`, each secret is its
    /// placeholder instead: what the processor should give back. Also gives
    /// the ids of the planted messages.
    fn planted(history: &[Message], redacted: bool) -> (Vec<Message>, Vec<String>) {
        let f = fake();
        let secret = |value: &str, kind: &str| match redacted {
            true => format!("[REDACTED:{kind}]"),
            false => value.to_owned(),
        };
        let mut h = history.to_vec();
        let mut taken: Vec<usize> = Vec::new();
        let mut pick = |h: &[Message], pred: &dyn Fn(&Message) -> bool| {
            let i = (0..h.len())
                .find(|&i| !taken.contains(&i) && pred(&h[i]))
                .expect("a message to plant in");
            taken.push(i);
            i
        };

        let i = pick(&h, &|m| m.role == Role::User && !m.content.is_empty());
        h[i].content += &format!("\n\nmy key is {}", secret(&f.openai, "openai-key"));
        let i = pick(&h, &|m| m.role == Role::Tool && !m.content.is_empty());
        h[i].content += &format!("\nAWS_ACCESS_KEY_ID={}\n", secret(&f.aws, "aws-access-key"));
        let i = pick(&h, &|m| m.has_tool_calls());
        let call = &mut h[i].tool_calls[0];
        let mut arguments: serde_json::Value = serde_json::from_str(&call.arguments).unwrap();
        arguments["token"] = secret(&f.github, "github-token").into();
        call.arguments = arguments.to_string();
        let i = pick(&h, &|m| {
            m.parts.iter().any(|p| matches!(p, Part::Text { .. }))
        });
        let Some(Part::Text { text }) = h[i]
            .parts
            .iter_mut()
            .find(|p| matches!(p, Part::Text { .. }))
        else {
            unreachable!()
        };
        *text += &format!("\n{}\n", secret(&f.pem, "private-key"));
        let i = (0..h.len())
            .rev()
            .find(|&i| h[i].role == Role::Assistant && !taken.contains(&i))
            .expect("an assistant message");
        taken.push(i);
        h[i].content += &format!(
            "\ncurl -H 'Authorization: Bearer {}' postgres://app:{}@db.internal:5432/app",
            secret(&f.jwt, "bearer-token"),
            secret(&f.password, "url-password"),
        );
        let ids = taken.iter().map(|&i| h[i].id.clone()).collect();
        (h, ids)
    }

    /// Secrets planted in real sessions are replaced by their typed
    /// placeholders and nothing else changes; the report names exactly the
    /// planted messages and the log counts each kind. A second run finds
    /// nothing.
    #[test]
    fn planted_secrets_in_real_sessions() {
        let p = load("redact-secrets", None);
        for (source, history) in sessions() {
            let (input, mut planted_ids) = planted(history, false);
            let (expected, _) = planted(history, true);
            let (out, report) = applied_by(&p, input);
            assert_eq!(out, expected, "{source}");
            planted_ids.sort_unstable();
            assert_eq!(replaced(&report), planted_ids, "{source}");
            assert_eq!(
                info(&report),
                [
                    "redacted 6 secrets in 5 messages: private-key 1, openai-key 1, \
                     aws-access-key 1, github-token 1, bearer-token 1, url-password 1"
                ],
                "{source}"
            );

            let (again, report) = applied_by(&p, out);
            assert_eq!(again, expected, "{source}: a second run changes nothing");
            assert!(report.replaced.is_empty(), "{source}");
            let none = format!("no secrets found in {} messages", history.len());
            assert_eq!(info(&report), [none]);
        }
    }

    /// Real histories hold no secrets: nothing in them is taken for one.
    #[test]
    fn nothing_is_redacted_in_real_histories() {
        let p = load("redact-secrets", None);
        for (source, history) in corpus() {
            let (out, report) = applied_by(&p, history.clone());
            assert_eq!(&out, history, "{source}");
            assert!(
                report.replaced.is_empty(),
                "{source}: {:?}",
                report.replaced
            );
        }
    }

    /// Readable reasoning is redacted in place when unsigned and dropped when
    /// signed (a signed block cannot be edited), the provider's opaque
    /// reasoning is not touched; e-mails, an extra kind
    /// with a `secret` group and a custom placeholder work through the host.
    #[test]
    fn reasoning_emails_extra_kinds_and_placeholders() {
        let f = fake();
        let mut thinking = Message::assistant("Checking.").with_id("a");
        thinking.reasoning = Some(Reasoning {
            text: format!("the user pasted {}", f.openai),
            signature: Some("sig".into()),
            redacted: false,
        });
        let mut opaque = Message::assistant("Done.").with_id("b");
        opaque.reasoning = Some(Reasoning {
            text: format!("opaque {}", f.github),
            signature: None,
            redacted: true,
        });
        let mut unsigned = Message::assistant("Also checking.").with_id("c");
        unsigned.reasoning = Some(Reasoning {
            text: format!("again {}", f.openai),
            signature: None,
            redacted: false,
        });
        let mail = ["jane.doe", "@", "example.org"].concat();
        let user = Message::user(format!("ticket ACME-7431, write to {mail}")).with_id("u");
        let input = vec![user, thinking, opaque, unsigned];
        let config = r#"{"emails": true, "placeholder": "<{kind}>",
            "extra": [{"name": "acme-ticket", "pattern": "ACME-(?P<secret>[0-9]{4})"}]}"#;
        let (out, report) = applied_by(&load("redact-secrets", Some(config)), input.clone());
        assert_eq!(
            out[0].content,
            "ticket ACME-<acme-ticket>, write to <email>"
        );
        assert_eq!(
            out[1].reasoning, None,
            "signed reasoning with a secret goes"
        );
        assert_eq!(out[1].content, "Checking.");
        assert_eq!(out[2], input[2], "opaque reasoning is the provider's");
        let unsigned = out[3].reasoning.as_ref().unwrap();
        assert_eq!(unsigned.text, "again <openai-key>");
        assert_eq!(replaced(&report), ["a", "c", "u"]);
        assert_eq!(
            info(&report),
            [
                "redacted 4 secrets in 3 messages: openai-key 2, email 1, acme-ticket 1",
                "dropped the signed reasoning of 1 message: it held a secret and a signed \
                 block cannot be edited"
            ]
        );
    }

    #[test]
    fn bad_configurations_name_the_key() {
        let m = bad_config("redact-secrets", r#"{"kinds": ["jwt"]}"#);
        assert!(
            m.contains("`kinds`") && m.contains("\"jwt\"") && m.contains("openai-key"),
            "{m}"
        );
        let m = bad_config("redact-secrets", r#"{"placeholder": ""}"#);
        assert!(m.contains("`placeholder`"), "{m}");
        let leaky = serde_json::json!({ "placeholder": format!("{{kind}} {}", fake().aws) });
        let m = bad_config("redact-secrets", &leaky.to_string());
        assert!(
            m.contains("`placeholder`") && m.contains("as aws-access-key"),
            "{m}"
        );
        let m = bad_config(
            "redact-secrets",
            r#"{"extra": [{"name": "ticket", "pattern": "(TICKET-[0-9]+"}]}"#,
        );
        assert!(
            m.contains("\"ticket\"") && m.contains("not a valid regex"),
            "{m}"
        );
        let m = bad_config("redact-secrets", r#"{"kinds": []}"#);
        assert!(m.contains("`kinds` is empty"), "{m}");
    }
}

mod truncate_tool_results {
    use super::*;
    use agent_host_core::message::{MediaRef, Part};

    /// A message's text pieces (content, then text parts) run together: what
    /// the processor counts and cuts.
    fn pieces(m: &Message) -> String {
        let mut all = m.content.clone();
        for p in &m.parts {
            if let Part::Text { text } = p {
                all.push_str(text);
            }
        }
        all
    }

    /// The marker for `n` characters cut.
    fn marker(n: usize) -> String {
        format!(
            "\n[… {} characters cut by truncate-tool-results …]\n",
            agent_host_guest::group_thousands(n)
        )
    }

    /// Every long tool result of every real history is cut to the limit: it
    /// keeps the original's head and tail around a marker that counts what
    /// went, and nothing else of it changes. Shorter results and other
    /// messages are left as they are.
    #[test]
    fn real_results_are_cut_to_the_limit() {
        const LIMIT: usize = 1500;
        let p = load("truncate-tool-results", Some(r#"{"max_chars": 1500}"#));
        let mut cut_anywhere = 0;
        for (source, history) in corpus() {
            let (out, report) = applied_by(&p, history.clone());
            assert_eq!(out.len(), history.len(), "{source}");
            let (mut cut, mut removed) = (Vec::new(), 0);
            for (before, after) in history.iter().zip(&out) {
                let text = pieces(before);
                let chars = text.chars().count();
                if before.role != Role::Tool || chars <= LIMIT {
                    assert_eq!(after, before, "{source}: {} stays whole", before.id);
                    continue;
                }
                let new = pieces(after);
                let at = new.find("\n[… ").expect("a marker");
                let head = &new[..at];
                let rest = &new[at + 1..];
                let end = rest.find('\n').expect("the marker's end") + 1;
                let tail = &rest[end..];
                let gone = chars - head.chars().count() - tail.chars().count();
                assert_eq!(
                    &new[at..at + 1 + end],
                    marker(gone),
                    "{source}: {}",
                    before.id
                );
                assert!(text.starts_with(head) && text.ends_with(tail), "{source}");
                // 70% of the limit, less at most 100 characters to end on a line.
                assert!(
                    head.chars().count() >= LIMIT * 7 / 10 - 100,
                    "{source}: {head}"
                );
                assert!(new.chars().count() <= LIMIT, "{source}: {}", before.id);
                let mut same = after.clone();
                same.content.clone_from(&before.content);
                same.parts.clone_from(&before.parts);
                assert_eq!(&same, before, "{source}: only the text changes");
                cut.push(before.id.as_str());
                removed += gone;
            }
            cut.sort_unstable();
            assert_eq!(replaced(&report), cut, "{source}");
            let results = history.iter().filter(|m| m.role == Role::Tool).count();
            assert_eq!(
                info(&report),
                [format!(
                    "cut {} of {results} tool results, {} characters removed",
                    cut.len(),
                    agent_host_guest::group_thousands(removed)
                )],
                "{source}"
            );
            cut_anywhere += cut.len();
        }
        if !corpus().is_empty() {
            assert!(cut_anywhere > 0, "the corpus has long results");
        }
    }

    fn call(ids_and_tools: &[(&str, &str)]) -> Message {
        let mut m = Message::assistant("").with_id("call");
        for (id, tool) in ids_and_tools {
            m.push_tool_call(*id, *tool, "{}");
        }
        m
    }

    /// The limit counts characters, not bytes, and a cut never splits one:
    /// the head and tail are exactly the configured numbers of characters.
    #[test]
    fn multibyte_text_is_counted_and_cut_by_character() {
        let long: String = "aé日🎉".repeat(750);
        let short: String = "日".repeat(900);
        let input = vec![
            Message::user("go").with_id("u"),
            call(&[("c1", "cat"), ("c2", "cat")]),
            Message::tool_result("c1", "cat", long.clone()).with_id("long"),
            Message::tool_result("c2", "cat", short.clone()).with_id("short"),
        ];
        let p = load("truncate-tool-results", Some(r#"{"max_chars": 1000}"#));
        let (out, report) = applied_by(&p, input.clone());
        let chars: Vec<char> = long.chars().collect();
        let expected: String = chars[..700].iter().collect::<String>()
            + &marker(2050)
            + &chars[2750..].iter().collect::<String>();
        assert_eq!(out[2].content, expected);
        assert_eq!(
            out[3], input[3],
            "900 characters are within 1,000 (in 2,700 bytes)"
        );
        assert_eq!(replaced(&report), ["long"]);
    }

    /// A cut across the content and a text part keeps an image between
    /// them in place.
    #[test]
    fn a_cut_leaves_media_in_place() {
        let mut result = Message::tool_result("c1", "screenshot", "x".repeat(600)).with_id("r");
        let image = Part::Image {
            source: MediaRef::Path("media/shot.png".into()),
            mime_type: Some("image/png".into()),
        };
        result.parts = vec![
            image.clone(),
            Part::Text {
                text: "y".repeat(600),
            },
        ];
        let input = vec![
            Message::user("look").with_id("u"),
            call(&[("c1", "screenshot")]),
            result,
        ];
        let p = load("truncate-tool-results", Some(r#"{"max_chars": 500}"#));
        let (out, _) = applied_by(&p, input);
        assert_eq!(out[2].content, "x".repeat(350) + &marker(725));
        assert_eq!(
            out[2].parts,
            [
                image,
                Part::Text {
                    text: "y".repeat(125)
                }
            ]
        );
    }

    /// Per-tool limits (found by the call's name when the result has none),
    /// `null` for a tool never cut, and `keep_last`; user and assistant text
    /// is never cut.
    #[test]
    fn per_tool_limits_and_the_last_results() {
        let big = "line\n".repeat(1000);
        let mut unnamed = Message::tool_result("c1", "read", big.clone()).with_id("read");
        unnamed.tool_name = None;
        let input = vec![
            Message::user(big.clone()).with_id("u"),
            call(&[("c1", "read"), ("c2", "ls"), ("c3", "ls"), ("c4", "grep")]),
            unnamed,
            Message::tool_result("c2", "ls", big.clone()).with_id("ls"),
            Message::tool_result("c3", "ls", big.clone()).with_id("ls-again"),
            Message::tool_result("c4", "grep", big.clone()).with_id("grep"),
            Message::assistant(big.clone()).with_id("a"),
        ];
        let config = r#"{"max_chars": 1000, "tools": {"read": null, "ls": 3000}, "keep_last": 1}"#;
        let (out, report) = applied_by(&load("truncate-tool-results", Some(config)), input.clone());
        assert_eq!(replaced(&report), ["ls", "ls-again"]);
        for i in [0, 2, 5, 6] {
            assert_eq!(out[i], input[i], "{} stays whole", input[i].id);
        }
        for i in [3, 4] {
            let n = out[i].content.chars().count();
            assert!((2000..=3000).contains(&n), "ls has its own limit: {n}");
            assert!(out[i].content.starts_with("line\nline\n"));
        }
    }

    #[test]
    fn bad_configurations_name_the_key() {
        let m = bad_config(
            "truncate-tool-results",
            r#"{"max_chars": 100, "head": 80, "tail": 30}"#,
        );
        assert!(
            m.contains("`head` (80)")
                && m.contains("`tail` (30)")
                && m.contains("`max_chars` (100)"),
            "{m}"
        );
        let m = bad_config(
            "truncate-tool-results",
            r#"{"max_chars": null, "head": 10}"#,
        );
        assert!(m.contains("`head`") && m.contains("`max_chars`"), "{m}");
    }
}

mod strip_media {
    use super::*;
    use agent_host_core::message::{MediaRef, Part};

    fn image(source: MediaRef, mime: &str) -> Part {
        Part::Image {
            source,
            mime_type: Some(mime.into()),
        }
    }

    fn file(name: &str, mime: Option<&str>) -> Part {
        Part::File {
            name: name.into(),
            path: format!("media/{name}"),
            mime_type: mime.map(Into::into),
        }
    }

    fn text(text: &str) -> Part {
        Part::Text { text: text.into() }
    }

    /// Real sessions carry no media: they come back untouched. With a
    /// screenshot pasted into each user message, every one before the last
    /// `keep_last` messages becomes a reference in its place, and nothing
    /// else changes.
    #[test]
    fn screenshots_in_real_sessions() {
        const KEEP: usize = 8;
        let p = load("strip-media", Some(r#"{"keep_last": 8}"#));
        for (source, history) in corpus() {
            let (out, report) = applied_by(&p, history.clone());
            assert_eq!(&out, history, "{source}");
            assert!(report.replaced.is_empty(), "{source}");
        }
        let mut stripped = 0;
        for (source, history) in sessions() {
            let (mut input, mut expected) = (history.clone(), history.clone());
            let mut planted = Vec::new();
            let end = history.len() - KEEP;
            for (i, m) in input.iter_mut().enumerate() {
                if m.role != Role::User {
                    continue;
                }
                let shot = format!("media/shot-{i}.png");
                m.parts
                    .push(image(MediaRef::Path(shot.clone()), "image/png"));
                if i < end {
                    let reference = format!("[image: {shot} (image/png) removed]");
                    expected[i].parts.push(text(&reference));
                    planted.push(m.id.clone());
                } else {
                    expected[i] = m.clone();
                }
            }
            let (out, report) = applied_by(&p, input);
            assert_eq!(out, expected, "{source}");
            planted.sort_unstable();
            assert_eq!(replaced(&report), planted, "{source}");
            let n = planted.len();
            assert_eq!(
                info(&report),
                [format!("removed {n} media parts from {n} messages")]
            );
            stripped += n;
        }
        if sessions().next().is_some() {
            assert!(
                stripped > 0,
                "some screenshot is older than the last messages"
            );
        }
    }

    fn shared() -> Message {
        let long = format!("https://cdn.example.com/{}/shot.png", "a".repeat(200));
        let mut m = Message::user("").with_id("u");
        m.parts = vec![
            text("look at these"),
            image(
                MediaRef::Url("https://example.com/a.png".into()),
                "image/png",
            ),
            image(
                MediaRef::Url(format!("data:image/jpeg;base64,{}", "/9j/4AAQ".repeat(50))),
                "image/jpeg",
            ),
            image(MediaRef::Url(long), "image/png"),
            text("and these"),
            file("report.pdf", Some("application/pdf")),
            file("notes.md", None),
            file("data.json", Some("application/json")),
        ];
        m
    }

    /// Each removed part becomes a reference in its place: inline data is
    /// never copied into it, a long URL is shortened, text files stay.
    #[test]
    fn each_kind_of_part_and_what_replaces_it() {
        let (out, report) = applied_by(&load("strip-media", None), vec![shared()]);
        let long = format!(
            "[image: https://cdn.example.com/{}…{}/shot.png (image/png) removed]",
            "a".repeat(26),
            "a".repeat(40)
        );
        assert_eq!(
            out[0].parts,
            [
                text("look at these"),
                text("[image: https://example.com/a.png (image/png) removed]"),
                text("[image: inline data (image/jpeg) removed]"),
                text(&long),
                text("and these"),
                text("[file: report.pdf (application/pdf) removed]"),
                file("notes.md", None),
                file("data.json", Some("application/json")),
            ]
        );
        // (Whether it says "1 message" or "1 messages" is not the point.)
        assert!(
            info(&report)[0].starts_with("removed 4 media parts from 1 message"),
            "{:?}",
            report.logs
        );

        let (out, _) = applied_by(
            &load("strip-media", Some(r#"{"images": false, "files": "all"}"#)),
            vec![shared()],
        );
        assert_eq!(out[0].parts[1..4], shared().parts[1..4], "images stay");
        assert_eq!(out[0].parts[6], text("[file: notes.md removed]"));
        assert_eq!(
            out[0].parts[7],
            text("[file: data.json (application/json) removed]")
        );

        let (out, report) = applied_by(
            &load("strip-media", Some(r#"{"images": false, "files": "none"}"#)),
            vec![shared()],
        );
        assert_eq!(out, [shared()]);
        assert!(
            report.replaced.is_empty(),
            "an untouched message is kept, not replaced"
        );
    }

    #[test]
    fn bad_configurations_name_the_key() {
        let m = bad_config("strip-media", r#"{"files": "pdf"}"#);
        assert!(m.contains("`files`") && m.contains("\"pdf\""), "{m}");
    }
}

mod strip_reasoning {
    use super::*;
    use agent_host_core::message::Reasoning;

    fn thought(text: &str, redacted: bool) -> Option<Reasoning> {
        Some(Reasoning {
            text: text.into(),
            signature: Some("sig".into()),
            redacted,
        })
    }

    /// Where the last `n` turns start: a turn starts at a user message that
    /// is not synthetic. `None` when there are no more than `n` turns.
    fn last_turns(history: &[Message], n: usize) -> Option<usize> {
        let starts: Vec<usize> = (0..history.len())
            .filter(|&i| history[i].role == Role::User && !history[i].synthetic)
            .collect();
        (starts.len() > n).then(|| starts[starts.len() - n])
    }

    /// Real sessions, with reasoning given to every assistant message (every
    /// other one redacted, as providers send it): only the messages of the
    /// last `keep_turns` turns keep it, and nothing else changes.
    #[test]
    fn only_the_last_turns_keep_their_reasoning() {
        let mut stripped = 0;
        for keep in [1, 2] {
            let config = format!(r#"{{"keep_turns": {keep}}}"#);
            let p = load("strip-reasoning", Some(&config));
            for (source, history) in corpus() {
                let mut input = history.clone();
                for (i, m) in input.iter_mut().enumerate() {
                    if m.role == Role::Assistant {
                        m.reasoning = thought(&format!("thinking before {}", m.id), i % 2 == 0);
                    }
                }
                let (out, report) = applied_by(&p, input.clone());
                let cut = last_turns(history, keep).unwrap_or(0);
                let mut expected = input.clone();
                let mut changed = Vec::new();
                for m in &mut expected[..cut] {
                    if m.reasoning.take().is_some() {
                        changed.push(m.id.clone());
                    }
                }
                assert_eq!(out, expected, "{source}, keeping {keep}");
                assert!(
                    report.dropped.is_empty(),
                    "{source}: each also said or called"
                );
                changed.sort_unstable();
                assert_eq!(replaced(&report), changed, "{source}");
                stripped += changed.len();
            }
        }
        if !corpus().is_empty() {
            assert!(stripped > 0);
        }
    }

    /// Real histories without reasoning come back untouched.
    #[test]
    fn real_histories_without_reasoning_are_untouched() {
        let p = load("strip-reasoning", Some(r#"{"keep_turns": 0}"#));
        for (source, history) in corpus() {
            let (out, report) = applied_by(&p, history.clone());
            assert_eq!(&out, history, "{source}");
            assert!(report.replaced.is_empty(), "{source}");
        }
    }

    fn turns() -> Vec<Message> {
        let mut only_thought = Message::assistant("").with_id("thinking");
        only_thought.reasoning = thought("just a thought", false);
        let mut calls = Message::assistant("Reading.").with_id("calls");
        calls.reasoning = thought("read it", false);
        calls.push_tool_call("c1", "read", r#"{"path":"a"}"#);
        let mut note = Message::user("[the tool was retried]").with_id("note");
        note.synthetic = true;
        let mut after_note = Message::assistant("Read.").with_id("after-note");
        after_note.reasoning = thought("opaque", true);
        let mut last = Message::assistant("Done.").with_id("last");
        last.reasoning = thought("done", false);
        vec![
            Message::user("read a").with_id("u1"),
            only_thought,
            calls,
            Message::tool_result("c1", "read", "contents of a").with_id("r1"),
            note,
            after_note,
            Message::user("thanks").with_id("u2"),
            last,
        ]
    }

    /// A message that held only its reasoning goes; one that calls a tool
    /// keeps its call (the exchange stays valid); a synthetic user message
    /// starts no turn; 0 strips the current turn too.
    #[test]
    fn reasoning_only_messages_synthetic_turns_and_zero() {
        let (out, report) = applied_by(&load("strip-reasoning", None), turns());
        assert_eq!(
            ids(&out),
            ["u1", "calls", "r1", "note", "after-note", "u2", "last"]
        );
        assert_eq!(report.dropped, ["thinking"]);
        assert!(out[..6].iter().all(|m| m.reasoning.is_none()));
        assert_eq!(out[1].tool_calls, turns()[2].tool_calls);
        assert_eq!(out[6], turns()[7], "the last turn keeps its reasoning");

        // Two turns, not three: the note is the host's, not the user's.
        let (out, _) = applied_by(
            &load("strip-reasoning", Some(r#"{"keep_turns": 2}"#)),
            turns(),
        );
        assert_eq!(out, turns());

        let (out, _) = applied_by(
            &load("strip-reasoning", Some(r#"{"keep_turns": 0}"#)),
            turns(),
        );
        assert!(out.iter().all(|m| m.reasoning.is_none()));
        assert_eq!(out.len(), 7);
    }

    #[test]
    fn bad_configurations_name_the_key() {
        let m = bad_config("strip-reasoning", r#"{"keep_turn": 2}"#);
        assert!(
            m.contains("`keep_turn`") && m.contains("`keep_turns`"),
            "{m}"
        );
        let m = bad_config("strip-reasoning", r#"{"keep_turns": "all"}"#);
        assert!(m.contains("invalid type: string \"all\""), "{m}");
    }
}

mod dedupe_tool_results {
    use super::*;
    use agent_host_core::message::{MediaRef, Part};

    /// The parts of a reference: the call and message it names and the
    /// length it gives.
    fn reference(text: &str) -> Option<(&str, &str, &str)> {
        let rest = text.strip_prefix("[same result as the tool call ")?;
        let (call, rest) = rest.split_once(" (message ")?;
        let (message, rest) = rest.split_once("), ")?;
        let chars = rest.strip_suffix(" characters]")?;
        Some((call, message, chars))
    }

    /// On every real history, each replaced result refers to an earlier
    /// result of the same tool with the same text, which is kept whole; and
    /// every such repeat is replaced.
    #[test]
    fn repeats_in_real_histories_refer_to_the_first() {
        let p = load("dedupe-tool-results", None);
        let mut total = 0;
        for (source, history) in corpus() {
            let (out, report) = applied_by(&p, history.clone());
            assert_eq!(out.len(), history.len(), "{source}");
            let mut repeats = Vec::new();
            for (i, (before, after)) in history.iter().zip(&out).enumerate() {
                let text = before.text();
                let first = history[..i].iter().position(|m| {
                    m.role == Role::Tool && m.tool_name == before.tool_name && m.text() == text
                });
                // Only text is compared: a result with media is never a repeat.
                let repeat = before.role == Role::Tool
                    && before.parts.iter().all(|p| matches!(p, Part::Text { .. }))
                    && text.chars().count() >= 200;
                let Some(first) = first.filter(|_| repeat) else {
                    assert_eq!(after, before, "{source}: {} stays", before.id);
                    continue;
                };
                let (call, message, chars) = reference(&after.content)
                    .unwrap_or_else(|| panic!("{source}: {} is a reference", before.id));
                let original = &history[first];
                assert_eq!(message, original.id, "{source}: the first copy");
                assert_eq!(Some(call), original.tool_call_id.as_deref());
                assert_eq!(out[first], *original, "{source}: the first stays whole");
                assert_eq!(
                    chars,
                    agent_host_guest::group_thousands(text.chars().count())
                );
                assert!(after.parts.is_empty());
                assert_eq!(
                    after.tool_call_id, before.tool_call_id,
                    "the exchange holds"
                );
                repeats.push(before.id.as_str());
            }
            repeats.sort_unstable();
            assert_eq!(replaced(&report), repeats, "{source}");
            total += repeats.len();
        }
        if !corpus().is_empty() {
            assert!(total > 0, "the corpus repeats itself");
        }
    }

    fn listing(seed: u32) -> String {
        (0..40)
            .map(|i| format!("src/file-{seed}-{i}.rs\n"))
            .collect()
    }

    fn calls(tools: &[&str]) -> Message {
        let mut m = Message::assistant("").with_id("calls");
        for (i, tool) in tools.iter().enumerate() {
            m.push_tool_call(format!("c{i}"), *tool, "{}");
        }
        m
    }

    /// Same text from another tool is not a repeat unless `same_tool` is
    /// false; a result with an image is never one; `keep_last` leaves the
    /// newest alone.
    #[test]
    fn what_counts_as_the_same() {
        let text = listing(1);
        let mut with_image = Message::tool_result("c3", "ls", text.clone()).with_id("image");
        with_image.parts.push(Part::Image {
            source: MediaRef::Path("media/tree.png".into()),
            mime_type: None,
        });
        let input = vec![
            Message::user("list").with_id("u"),
            calls(&["ls", "find", "ls", "ls", "ls"]),
            Message::tool_result("c0", "ls", text.clone()).with_id("ls"),
            Message::tool_result("c1", "find", text.clone()).with_id("find"),
            Message::tool_result("c2", "ls", text.clone()).with_id("ls-again"),
            with_image,
            Message::tool_result("c4", "ls", text.clone()).with_id("ls-last"),
        ];
        let dedupe = |config: &str| {
            let (out, report) =
                applied_by(&load("dedupe-tool-results", Some(config)), input.clone());
            let refs: Vec<&str> = out
                .iter()
                .filter_map(|m| reference(&m.content).map(|(_, message, _)| message))
                .collect();
            assert_eq!(refs.len(), report.replaced.len());
            format!("{:?} -> {:?}", replaced(&report), refs)
        };
        assert_eq!(dedupe("{}"), r#"["ls-again", "ls-last"] -> ["ls", "ls"]"#);
        assert_eq!(
            dedupe(r#"{"same_tool": false}"#),
            r#"["find", "ls-again", "ls-last"] -> ["ls", "ls", "ls"]"#
        );
        assert_eq!(dedupe(r#"{"keep_last": 1}"#), r#"["ls-again"] -> ["ls"]"#);
    }

    /// `min_chars` counts characters, not bytes; and a result no longer than
    /// its reference is left as it is.
    #[test]
    fn short_results_stay() {
        let wide = "日".repeat(150);
        let input = vec![
            Message::user("again").with_id("u"),
            calls(&["echo", "echo", "echo", "echo"]),
            Message::tool_result("c0", "echo", wide.clone()).with_id("wide"),
            Message::tool_result("c1", "echo", wide.clone()).with_id("wide-again"),
            Message::tool_result("c2", "echo", "ok").with_id("ok"),
            Message::tool_result("c3", "echo", "ok").with_id("ok-again"),
        ];
        let (out, report) = applied_by(&load("dedupe-tool-results", None), input.clone());
        assert_eq!(out, input, "150 characters are under 200 (in 450 bytes)");
        assert!(report.replaced.is_empty());
        let any = load("dedupe-tool-results", Some(r#"{"min_chars": 0}"#));
        let (out, report) = applied_by(&any, input.clone());
        assert_eq!(
            replaced(&report),
            ["wide-again"],
            "not `ok`: shorter than a reference"
        );
        assert_eq!(out[5], input[5]);
    }

    #[test]
    fn bad_configurations_name_the_key() {
        let m = bad_config("dedupe-tool-results", r#"{"same_tools": false}"#);
        assert!(
            m.contains("`same_tools`") && m.contains("`same_tool`"),
            "{m}"
        );
        let m = bad_config("dedupe-tool-results", r#"{"min_chars": "200"}"#);
        assert!(m.contains("invalid type: string \"200\""), "{m}");
    }
}
