//! Python processors: the SDK in `guest-sdk/python`, the port of
//! `redact-secrets` in `processors/python/redact-secrets`, and `processor new
//! --lang python`.
//!
//! The port is built once per test run by its own `build.sh` (componentize-py,
//! installed by `guest-sdk/python/toolchain.sh`) and must give, message by
//! message, the same output as the standard Rust `redact-secrets` over every
//! history of the corpus, with secrets planted in them, under several
//! configurations. Without the toolchain the tests fail and say how to
//! install it, unless `AGENT_HOST_SKIP_LANGS` names `python`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use agent_host_core::Message;
use agent_host_core::message::{Part, Reasoning};
use agent_host_runtime::{Limits, Outcome, Processor, ProcessorOptions, RunInfo, RunOutcome};

use crate::langs;
use crate::util::{corpus_histories, standard_processor};

/// The Python redact-secrets component, built once per test run by its
/// build script.
fn python_component() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let out = langs::root().join("target/lang-processors/python-redact-secrets.wasm");
        langs::build_example("python", &out)
    })
}

/// Limits for the interpreter: CPython starts in every call, and lifting a
/// long history into Python objects takes a while.
fn python_limits() -> Limits {
    Limits {
        deadline: Duration::from_secs(10),
        memory_bytes: 256 << 20,
        ..Limits::default()
    }
}

/// `path` loaded with `config`, once per test binary.
fn load(path: &Path, config: &str) -> &'static Processor {
    static LOADED: OnceLock<Mutex<HashMap<(PathBuf, String), &'static Processor>>> =
        OnceLock::new();
    let mut loaded = LOADED.get_or_init(Default::default).lock().unwrap();
    loaded
        .entry((path.to_owned(), config.to_owned()))
        .or_insert_with(|| {
            let p = langs::runtime()
                .load_file(
                    path,
                    ProcessorOptions {
                        config: Some(config.to_owned()),
                        limits: python_limits(),
                        ..ProcessorOptions::default()
                    },
                )
                .unwrap_or_else(|e| panic!("{} loads: {e:#}", path.display()));
            Box::leak(Box::new(p))
        })
}

fn run(p: &Processor, input: Vec<Message>) -> RunOutcome {
    langs::runtime().run(std::slice::from_ref(p), &RunInfo::default(), input)
}

/// Fake secrets and awkward text around them, put together from pieces so
/// that no scanner takes this file for a leak. Non-ASCII text sits right
/// next to secrets: the Rust processor counts bytes, the Python one code
/// points, and they must agree.
fn hard_cases() -> Vec<String> {
    let openai = ["sk-", "proj-", &"Xy7kP2".repeat(8), "_Qz9-Lm"].concat();
    let anthropic = ["sk-", "ant-", "api03-", &"Ab9_c-D".repeat(13), "AA"].concat();
    let aws_id = ["AKIA", "IOSFODNN7", "EXAMPLE"].concat();
    let aws_secret = ["wJalrXUtnFEMI", "/K7MDENG/bPxRfiCY", "EXAMPLEKEY"].concat();
    let github = ["ghp_", &"A1b2C3d4E5".repeat(3), "f6G7h8"].concat();
    let github_pat = [
        "github_",
        "pat_",
        "11ABCDEFG0",
        "abcdefghijkl_",
        &"Zz09".repeat(14),
    ]
    .concat();
    let slack = ["xoxb", "-123456789012", "-1234567890123-", "AbCdEfGh"].concat();
    let webhook = ["T0A1B2C3D", "/B0A1B2C3D/", "XyZ123abcDEF456ghiJKL789"].concat();
    let jwt = [
        "eyJhbGciOiJIUzI1NiJ9",
        ".eyJzdWIiOiIxMjM0In0",
        ".Sf1Kx-9aB_cD",
    ]
    .concat();
    let body = ["MIIEow", "IBAAKCAQEA7", "xYzAbC+/dEf=="].concat();
    let pem = |label: &str, nl: &str| {
        let (begin, end) = ("-----BEGIN ", "-----END ");
        format!(
            "{begin}{label}PRIVATE KEY-----{nl}{body}{nl}{body}{nl}{end}{label}PRIVATE KEY-----"
        )
    };
    let full = pem("RSA ", "\n");
    let cut = full[..full.find("-----END").unwrap()].to_owned();
    vec![
        format!("ключ → {openai} ← 鍵"),
        format!("«{anthropic}» and {openai}"),
        format!("🔑{aws_id}🔑 and ＡＫＩＡ{}", &aws_id[4..]),
        format!("aws_secret_access_key = {aws_secret}\" and ſecret_access_key = {aws_secret}"),
        format!("export SecretAccessKey:'{aws_secret}' é"),
        format!("token={github}; pat {github_pat} İstanbul"),
        format!("ü{github} and x{github} and -{github}"),
        format!("SLACK={slack} xapp-١٢٣٤٥٦٧٨٩٠١٢ {slack}é"),
        format!("https://hooks.slack.com/services/{webhook} ✓"),
        format!("Authorization: Bearer {jwt}\nbearer\t{openai}\nBEARER {github}\nbearerK {jwt}"),
        "postgres://app:hunter2@db.internal/app, smb://ü:pässwörd@höst/x".into(),
        "redis://:{password}@cache and mysql://root:pa:ss@localhost/db and ftp://bob:p@ss@w0rd@x"
            .into(),
        "write to jane.doe@example.org, ünï@exämple.com, →bob@example.com←, icon@2x.png".into(),
        format!("cat id:\n{}\n$ and {}", pem("", "\n"), pem("EC ", "\r\n")),
        format!("{{\"content\": \"{}\\n\"}}", pem("OPENSSH ", "\\n")),
        format!("{cut}… (truncated)"),
        format!("{}{github}", pem("", "\n")),
        "ticket ACME-7431 and ACME-١٢٣٤, café crème, naïve résumé".into(),
        "Ａ lookalike: ｓｋ-ＡＢＣ and sk‐dash and user１２３ abc123 xyz987".into(),
        "the bearer of bad news; Bearer ${TOKEN}; sk-spinner-container-wrapper-2024".into(),
        "\u{200d}\u{200b}sk-\u{301}".to_owned() + &openai,
        "sk-ab\u{a0}cd sk-x\u{1c}y\u{2028}z café123 naïve456 ǅ789 ok123".into(),
    ]
}

/// `history` with the hard cases planted in it: appended to the content of
/// every fifth message that has one, to a text part, to readable reasoning
/// (signed, so the message loses it) and to a tool call's arguments.
fn planted(history: &[Message]) -> Vec<Message> {
    let cases = hard_cases();
    let mut next = cases.iter().cycle();
    let mut h = history.to_vec();
    for (i, m) in h.iter_mut().enumerate() {
        if !m.content.is_empty() && i % 5 == 0 {
            m.content.push('\n');
            m.content.push_str(next.next().unwrap());
        }
        if let Some(Part::Text { text }) =
            m.parts.iter_mut().find(|p| matches!(p, Part::Text { .. }))
            && i % 3 == 0
        {
            text.push_str(next.next().unwrap());
        }
        if let Some(r) = &mut m.reasoning
            && !r.redacted
        {
            r.text.push_str(next.next().unwrap());
        }
        if let Some(call) = m.tool_calls.first_mut()
            && let Ok(serde_json::Value::Object(mut args)) = serde_json::from_str(&call.arguments)
        {
            args.insert("note".into(), next.next().unwrap().clone().into());
            call.arguments = serde_json::Value::Object(args).to_string();
        }
    }
    // Also a message of only hard cases, one per text part, with unsigned
    // reasoning that is redacted in place.
    let mut all = Message::user(cases.join("\n")).with_id("planted-all");
    all.parts = cases
        .iter()
        .map(|t| Part::Text { text: t.clone() })
        .collect();
    let mut thinking = Message::assistant(cases.join(" ")).with_id("planted-thinking");
    thinking.reasoning = Some(Reasoning {
        text: cases.concat(),
        signature: None,
        redacted: false,
    });
    h.push(all);
    h.push(thinking);
    h
}

/// Runs both processors with `config` over `input` and requires the same
/// answer: the same output messages, the same replaced ids and the same log.
/// Returns how many messages were replaced.
fn same_output(config: &str, source: &str, input: Vec<Message>) -> usize {
    let rust = run(
        load(&standard_processor("redact-secrets"), config),
        input.clone(),
    );
    let python = run(load(python_component(), config), input);
    let (r, p) = (&rust.reports[0], &python.reports[0]);
    assert_eq!(
        r.outcome,
        Outcome::Applied,
        "rust, {config} on {source}: {r:?}"
    );
    assert_eq!(
        p.outcome,
        Outcome::Applied,
        "python, {config} on {source}: {:?}",
        p.error
    );
    for (i, (a, b)) in rust.messages.iter().zip(&python.messages).enumerate() {
        assert_eq!(a, b, "{config} on {source}: message {i} differs");
    }
    assert_eq!(
        rust.messages.len(),
        python.messages.len(),
        "{config} on {source}"
    );
    assert_eq!(r.replaced, p.replaced, "{config} on {source}");
    let logs = |report: &agent_host_runtime::ProcessorReport| {
        report
            .logs
            .iter()
            .map(|l| l.text.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(logs(r), logs(p), "{config} on {source}");
    r.replaced.len()
}

/// The configurations compared: the default and one of each kind of change.
const CONFIGS: [&str; 6] = [
    "{}",
    r#"{"kinds": ["openai-key", "github-token", "url-password", "bearer-token"]}"#,
    r#"{"placeholder": "<{kind}>"}"#,
    r#"{"placeholder": "[REDACTED]", "emails": true}"#,
    r#"{"emails": true, "extra": [
        {"name": "acme-ticket", "pattern": "ACME-(?P<secret>[0-9]{4})"},
        {"name": "accent", "pattern": "é+"},
        {"name": "word-digits", "pattern": "\\b[a-z]+\\d{3}\\b"},
        {"name": "skany", "pattern": "sk-\\S+"}
    ]}"#,
    r#"{"kinds": ["private-key", "email"], "extra": [{"name": "tok", "pattern": "tok-?[0-9]+"}]}"#,
];

/// The port against the Rust processor: over every corpus history as it is
/// (nothing to redact) and with the hard cases planted, under the default
/// configuration; then under each other configuration over the planted
/// Claude Code sessions and every eighth tau-bench trajectory (each Python
/// call starts an interpreter: all of them under every configuration would
/// take minutes).
#[test]
fn python_redact_secrets_matches_the_rust_one_on_the_corpus() {
    if langs::skipped(
        "python",
        "python_redact_secrets_matches_the_rust_one_on_the_corpus",
    ) {
        return;
    }
    let histories = corpus_histories();
    assert!(!histories.is_empty(), "the corpus is needed for this test");
    let mut replaced = 0;
    for (source, history) in &histories {
        same_output("{}", source, history.clone());
        replaced += same_output("{}", source, planted(history));
    }
    // The comparison means something only if secrets were found.
    assert!(replaced >= histories.len(), "{{}}: {replaced} replaced");
    let some: Vec<&(String, Vec<Message>)> = histories
        .iter()
        .enumerate()
        .filter(|(i, (source, _))| i % 8 == 0 || !source.starts_with("tau-bench"))
        .map(|(_, h)| h)
        .collect();
    for config in &CONFIGS[1..] {
        let mut replaced = 0;
        for (source, history) in &some {
            replaced += same_output(config, source, planted(history));
        }
        assert!(replaced >= some.len(), "{config}: {replaced} replaced");
    }
}

/// Configurations the Rust processor refuses, the port refuses too.
#[test]
fn python_redact_secrets_refuses_what_the_rust_one_refuses() {
    if langs::skipped(
        "python",
        "python_redact_secrets_refuses_what_the_rust_one_refuses",
    ) {
        return;
    }
    let input = agent_host_engine::transcript::sample().transcript.messages;
    for config in [
        r#"{"no_such_key": 1}"#,
        "[1, 2]",
        r#"{"kinds": ["jwt"]}"#,
        r#"{"kinds": []}"#,
        r#"{"placeholder": ""}"#,
        r#"{"placeholder": "{kind} AKIAIOSFODNN7EXAMPLE"}"#,
        r#"{"extra": [{"name": "ticket", "pattern": "(TICKET-[0-9]+"}]}"#,
        r#"{"extra": [{"name": "ahead", "pattern": "x(?=y)"}]}"#,
        r#"{"extra": [{"name": "back", "pattern": "(x)\\1"}]}"#,
        r#"{"extra": [{"name": "empty", "pattern": "x*"}]}"#,
        r#"{"extra": [{"name": "email", "pattern": "x"}]}"#,
        r#"{"extra": [{"name": "x"}]}"#,
    ] {
        for path in [
            standard_processor("redact-secrets"),
            python_component().to_owned(),
        ] {
            let out = run(load(&path, config), input.clone());
            let report = &out.reports[0];
            assert_eq!(
                report.outcome,
                Outcome::Failed,
                "{}: {config}",
                path.display()
            );
            let error = report.error.as_deref().unwrap_or_default();
            assert!(
                error.contains("configuration"),
                "{}: {config}: {error}",
                path.display()
            );
            assert_eq!(out.messages, input);
        }
    }
}

/// The component describes itself as `redact-secrets`, imports nothing but
/// the agent-host interface (WASI is stubbed out at build time), and passes
/// every case of `agent-host processor check` given a deadline for an
/// interpreter.
#[test]
fn python_redact_secrets_is_a_well_behaved_component() {
    if langs::skipped(
        "python",
        "python_redact_secrets_is_a_well_behaved_component",
    ) {
        return;
    }
    let p = load(python_component(), "{}");
    let d = p.description();
    assert_eq!(d.name, "redact-secrets");
    assert_eq!(d.version, "0.1.0");
    // The SDK builds contract 0.2.0: the history stays in the host.
    assert_eq!(p.contract(), "0.2.0");
    assert!(!d.reorders);
    let rust = load(&standard_processor("redact-secrets"), "{}");
    assert_eq!(d.summary, rust.description().summary);
    assert_eq!(d.config_schema, rust.description().config_schema);
    assert!(!p.uses_wasi(), "imports WASI: {:?}", p.imports());
    for import in p.imports() {
        assert!(
            import.name.starts_with("agent-host:history/"),
            "{}",
            import.name
        );
    }
    let example = d.config_example.clone().expect("an example configuration");
    let out = run(
        load(python_component(), &example),
        agent_host_engine::transcript::sample().transcript.messages,
    );
    assert_eq!(out.reports[0].outcome, Outcome::Applied);

    // The runtime above compiled it into this cache already.
    let cache = langs::runtime_and_cache().1.path().display().to_string();
    let file = python_component().display().to_string();
    let check = crate::util::run(
        &[
            "processor",
            "check",
            &file,
            "--deadline-ms",
            "5000",
            "--cache-dir",
            &cache,
        ],
        "",
    );
    let text = crate::util::stdout(&check);
    assert!(
        check.status.success(),
        "{text}{}",
        crate::util::stderr(&check)
    );
    assert!(
        text.contains("long-10k-messages") && text.contains("huge-tool-result"),
        "{text}"
    );
}

/// The SDK's and the examples' own tests pass natively.
#[test]
fn python_native_tests_pass() {
    if langs::skipped("python", "python_native_tests_pass") {
        return;
    }
    for (dir, args) in [
        (
            "guest-sdk/python",
            &["-m", "unittest", "discover", "-s", "tests"][..],
        ),
        ("processors/python/redact-secrets", &["-m", "unittest"][..]),
        (
            "processors/python/summarize-history",
            &["-m", "unittest"][..],
        ),
    ] {
        let mut python = Command::new("python3");
        python
            .args(["-B"])
            .args(args)
            .current_dir(langs::root().join(dir));
        langs::script(
            "python",
            &mut python,
            &format!("python3 -m unittest in {dir}"),
        );
    }
}

/// `processor new --lang python` makes a project whose own test passes, whose
/// build script builds, and whose component runs in the host.
#[test]
fn processor_new_python_builds_and_runs() {
    if langs::skipped("python", "processor_new_python_builds_and_runs") {
        return;
    }
    let (_tmp, dir, next) = langs::new_project("python", "drop-short");
    assert!(
        next.contains("python3 -m unittest") && next.contains("build.sh"),
        "{next}"
    );

    let mut test = Command::new("python3");
    test.args(["-B", "-m", "unittest"]).current_dir(&dir);
    langs::script("python", &mut test, "the new project's own test");

    let wasm = dir.join("drop-short.wasm");
    let mut build = Command::new("bash");
    build
        .arg(dir.join("build.sh"))
        .arg("-o")
        .arg(&wasm)
        .current_dir(&dir);
    langs::script("python", &mut build, "the new project's build.sh");

    let p = load(&wasm, "{}");
    assert_eq!(p.description().name, "drop-short");
    assert_eq!(p.contract(), "0.2.0");
    assert!(!p.uses_wasi());
    let input = agent_host_engine::transcript::sample().transcript.messages;
    let outcome = run(p, input.clone());
    assert_eq!(
        outcome.reports[0].outcome,
        Outcome::Applied,
        "{:?}",
        outcome.reports[0].error
    );
    assert!(outcome.messages.len() <= input.len());
    // Its configuration is checked, and errors name the key.
    let bad = run(load(&wasm, r#"{"min_chars": "many"}"#), input);
    let error = bad.reports[0].error.as_deref().unwrap_or_default();
    assert!(error.contains("`min_chars`"), "{error}");
}
