//! Processors in C: the C port of redact-secrets, built by its own script
//! and run in the host, must give the Rust processor's output message by
//! message; `processor new --lang c` must make a project that passes its own
//! native test and builds into a component the host runs.
//!
//! The toolchain comes from `guest-sdk/c/toolchain.sh`. Without it these
//! tests fail and say so, unless `AGENT_HOST_SKIP_LANGS` names `c`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use agent_host_core::message::{Part, Reasoning};
use agent_host_core::{Message, Role};
use agent_host_runtime::{
    FailurePolicy, Limits, Outcome, Processor, ProcessorOptions, RunInfo, RunOutcome,
};

use crate::langs;
use crate::util::{agent_host, corpus_histories, standard_processor, stderr, stdout};

/// The C redact-secrets, built once per test run by its build script.
fn c_redact_secrets() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("lang-c/c-redact-secrets.wasm");
        langs::build_example("c", &out)
    })
}

fn load(path: &Path, config: &str, on_failure: FailurePolicy) -> Processor {
    langs::runtime()
        .load_file(
            path,
            ProcessorOptions {
                config: Some(config.to_owned()),
                limits: Limits {
                    deadline: Duration::from_secs(10),
                    memory_bytes: 256 << 20,
                    ..Limits::default()
                },
                on_failure,
                ..ProcessorOptions::default()
            },
        )
        .unwrap_or_else(|e| panic!("{} loads: {e:#}", path.display()))
}

fn run(p: &Processor, input: Vec<Message>) -> RunOutcome {
    langs::runtime().run(std::slice::from_ref(p), &RunInfo::default(), input)
}

/// Fake secrets of every kind, put together from pieces so that no scanner
/// takes this file for a leak; with an e-mail address and an `acme_` token
/// for the configurations that look for them.
fn secrets() -> String {
    let label = ["RSA ", "PRIVATE", " KEY"].concat();
    [
        format!("key {}", ["sk-", "proj-", &"Xy7kP2".repeat(8)].concat()),
        format!(
            "claude {}",
            ["sk-", "ant-", "api03-", &"Ab9_c-D".repeat(13)].concat()
        ),
        format!(
            "AWS_ACCESS_KEY_ID={}",
            ["AKIA", "IOSFODNN7", "EXAMPLE"].concat()
        ),
        format!(
            "aws_secret_access_key = {}",
            ["wJalrXUtnFEMI", "/K7MDENG/bPxRfiCY", "EXAMPLEKEY"].concat()
        ),
        format!(
            "token {}",
            ["ghp_", &"A1b2C3d4E5".repeat(3), "f6G7h8"].concat()
        ),
        format!(
            "https://hooks.slack.com/services/{}",
            ["T0000", "0000/B00000000/", &"X".repeat(24)].concat()
        ),
        ["xoxb", "-123456789012-", "1234567890123-AbCdEfGh"].concat(),
        format!(
            "curl -H 'Authorization: Bearer {}'",
            ["ey", "JhbGciOiJIUzI1NiJ9.", "eyJzdWIiOiIxMjM0NTY3ODkwIn0"].concat()
        ),
        "postgres://app:s3cr3t-Pa55@db.internal:5432/app".into(),
        format!(
            "-----BEGIN {label}-----\\nMIIEowIBAAKCAQEAx4ZV3i9gHqM3b1sJ\\n-----END {label}-----"
        ),
        "write to jane.doe@example.org or ops@corp.example.com".into(),
        "ticket acme_0123456789abcdef and PIN 4821".into(),
    ]
    .join("\n")
}

/// `history` with secrets planted: in every fifth message's content, in the
/// text parts and readable reasoning of every third, signed or not.
fn planted(history: &[Message]) -> Vec<Message> {
    let secrets = secrets();
    let mut h = history.to_vec();
    for (i, m) in h.iter_mut().enumerate() {
        if i % 5 == 1 {
            m.content = format!("{}\n{secrets}\n", m.content);
        }
        if i % 3 == 2 {
            for part in &mut m.parts {
                if let Part::Text { text } = part {
                    text.push_str(&secrets);
                }
            }
            if m.role == Role::Assistant {
                m.reasoning = Some(Reasoning {
                    text: format!("thinking about {secrets}"),
                    signature: (i % 2 == 0).then(|| "sig".into()),
                    redacted: i % 4 == 0,
                });
            }
        }
    }
    h
}

/// The configurations compared: the default, then each setting.
const CONFIGS: [&str; 6] = [
    "{}",
    r#"{"emails": true}"#,
    r#"{"kinds": ["openai-key", "github-token", "url-password", "private-key"]}"#,
    r#"{"placeholder": "<{kind}>"}"#,
    r#"{"placeholder": "[REDACTED]", "emails": true}"#,
    // Patterns on which Rust's regex-lite and POSIX ERE agree (no `\b`, no
    // alternatives that overlap).
    r#"{"extra": [{"name": "acme-token", "pattern": "acme_[a-z0-9]{16}"},
                  {"name": "pin", "pattern": "PIN:? *(?P<secret>[0-9]{4,6})"}]}"#,
];

/// The corpus and, for each history, a copy with secrets planted.
fn inputs() -> Vec<(String, Vec<Message>)> {
    let mut inputs = Vec::new();
    for (source, history) in corpus_histories() {
        inputs.push((format!("{source} (planted)"), planted(&history)));
        inputs.push((source, history));
    }
    // A small history of its own, so that the comparison never runs on nothing.
    let mut own = vec![
        Message::user(secrets()).with_id("u1"),
        Message::assistant(format!("noted: {}", secrets())).with_id("a1"),
    ];
    own.push(Message::user("nothing here, ünïcödé ☃ 東京").with_id("u2"));
    inputs.push(("own".into(), own));
    inputs.push(("near misses".into(), near_misses()));
    inputs
}

/// Texts at the edges of each rule (too short, not mixed, glued to a word,
/// a placeholder already there, markers in prose, ...), alone and each
/// secret next to each of them with each separator: one message per text.
fn near_misses() -> Vec<Message> {
    let pem = ["-----BEGIN ", "EC PRIVATE", " KEY-----"].concat();
    let edges = [
        "task-sk-list and sk-learn, risk-assessment-for-the-year-2024".to_owned(),
        "sk-spinner-container-wrapper-2024 is a CSS class".into(),
        "sk-abcdefghijklmnopqrstuvwxyz0123456789 (no uppercase)".into(),
        "sk-ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 (no lowercase)".into(),
        ["sk-ant-", "Ab1Ab1Ab1Ab1Ab1"].concat(),
        ["AKIA", "IOSFODNN7EXAMPLE2 too long, xAKIA", "IOSFODNN7EXAMPLE glued"].concat(),
        "the bearer of bad news; Bearer YOUR_API_KEY_HERE; Bearer ${TOKEN}; bearer abcdefghijklmnop1".into(),
        "Bearer <token> and bearer: abc, BEARER\t1234567890abcdef==".into(),
        "xoxb-your-token-here, xapp-placeholder, xoxq-12345-67890".into(),
        "ghp_short, gh_pages_deploy_branch_name_is_long_enough, github_pat_tooShort".into(),
        "http://localhost:8080/path, https://example.com:443/a@b, ssh://git@github.com/org".into(),
        "postgres://app:${DB_PASSWORD}@db/app, redis://:{password}@cache, a://u:p@ss@x@h".into(),
        "https://user@host.example/path, mailto:someone, user@localhost, pkg@1.2.3, @@, x@-".into(),
        format!("it begins with {pem} as usual and {pem}\nshort\n"),
        format!("{pem}\r\nAAAABBBBCCCCDDDDEEEE\r\n(cut)"),
        "aws_secret_access_key = <your secret here>, SecretAccessKey: \"abc\"".into(),
        "postgres://app:[REDACTED:url-password]@db and [REDACTED:openai-key]".into(),
        "a@b.example.com2x, first.last+tag@sub.example.co.uk., icon@2x.png".into(),
        "hooks.slack.com/services/short and hooks.slack.com/other/AAAAAAAAAAAAAAAAAAAAAAAA".into(),
        "PIN 123, PIN:1234567, acme_0123456789abcdeX, acme_0123456789abcdef0".into(),
        "ünïcödé ☃ 東京 → sk-ünï".into(),
        String::new(),
    ];
    let secrets = secrets();
    let mut texts: Vec<String> = edges.to_vec();
    for secret in secrets.lines() {
        for edge in &edges {
            for sep in ["", " ", "-", "_", "@", ":", "/", "x"] {
                texts.push(format!("{secret}{sep}{edge}"));
                texts.push(format!("{edge}{sep}{secret}"));
            }
        }
    }
    texts
        .into_iter()
        .enumerate()
        .map(|(i, text)| Message::user(text).with_id(format!("edge-{i}")))
        .collect()
}

/// The C port gives what the Rust processor gives, message by message, over
/// every corpus history (as it is and with secrets planted) and every
/// configuration: the same output history, the same messages replaced.
#[test]
fn c_redact_secrets_matches_the_rust_processor() {
    if langs::skipped("c", "c_redact_secrets_matches_the_rust_processor") {
        return;
    }
    let inputs = inputs();
    let mut redacted = 0;
    for config in CONFIGS {
        let c = load(c_redact_secrets(), config, FailurePolicy::Fail);
        let rust = load(
            &standard_processor("redact-secrets"),
            config,
            FailurePolicy::Fail,
        );
        for (source, history) in &inputs {
            let want = run(&rust, history.clone());
            let got = run(&c, history.clone());
            assert_eq!(
                got.reports[0].outcome,
                Outcome::Applied,
                "{source} {config}: {:?}",
                got.reports[0].error
            );
            assert_eq!(
                want.reports[0].outcome,
                Outcome::Applied,
                "{source} {config}"
            );
            assert_eq!(got.messages.len(), want.messages.len(), "{source} {config}");
            for (i, (g, w)) in got.messages.iter().zip(&want.messages).enumerate() {
                assert_eq!(g, w, "{source}, config {config}: message {i} differs");
            }
            assert_eq!(
                got.reports[0].replaced, want.reports[0].replaced,
                "{source} {config}"
            );
            redacted += got.reports[0].replaced.len();
        }
    }
    assert!(
        redacted > 100,
        "the comparison saw secrets ({redacted} replacements)"
    );
}

/// What the host sees of the component: its name, no WASI, a small size.
#[test]
fn c_redact_secrets_describes_itself_and_imports_only_the_host() {
    if langs::skipped(
        "c",
        "c_redact_secrets_describes_itself_and_imports_only_the_host",
    ) {
        return;
    }
    let path = c_redact_secrets();
    let p = load(path, "{}", FailurePolicy::Skip);
    let d = p.description();
    assert_eq!(d.name, "redact-secrets");
    assert_eq!(d.version, "0.1.0");
    // The SDK builds contract 0.2.0: the history stays in the host.
    assert_eq!(p.contract(), "0.2.0");
    assert!(d.config_example.is_some() && d.config_schema.is_some());
    assert!(!p.uses_wasi(), "the C component imports WASI");
    for import in p.imports() {
        assert!(
            import.name.starts_with("agent-host:history/"),
            "imports {}",
            import.name
        );
    }
    // The example configuration works as it is.
    let example = d.config_example.clone().unwrap();
    let out = run(
        &load(path, &example, FailurePolicy::Fail),
        crate::runtime::sample(),
    );
    assert_eq!(out.reports[0].outcome, Outcome::Applied);
    let bytes = std::fs::metadata(path).unwrap().len();
    assert!(bytes < 300 * 1024, "{bytes} bytes");
}

/// Bad configurations fail the call with a message that names the key.
#[test]
fn c_redact_secrets_refuses_bad_configurations() {
    if langs::skipped("c", "c_redact_secrets_refuses_bad_configurations") {
        return;
    }
    let cases = [
        (r#"{"no_such_key": 1}"#, "unknown field `no_such_key`"),
        (r#"{"emails": "yes"}"#, "`emails`: expected a boolean"),
        (r#"{"kinds": ["jwt"]}"#, "unknown kind \"jwt\" in `kinds`"),
        (r#"{"placeholder": ""}"#, "`placeholder` is empty"),
        (
            r#"{"extra": [{"name": "t", "pattern": "(x"}]}"#,
            "\"t\" is not a valid regex",
        ),
        (r#"{"extra": [{"name": "t"}]}"#, "missing field `pattern`"),
        ("[1, 2]", "expected a JSON object"),
    ];
    for (config, want) in cases {
        let p = load(c_redact_secrets(), config, FailurePolicy::Fail);
        let input = crate::runtime::sample();
        let out = run(&p, input.clone());
        assert_eq!(out.messages, input, "{config}: the input stands");
        let error = out.reports[0].error.clone().unwrap_or_default();
        assert!(error.contains(want), "{config}: {error}");
    }
}

/// `agent-host processor check` runs the component over its awkward
/// histories (empty, 10,000 messages, a 5 MiB tool result, unicode, ...).
#[test]
fn c_redact_secrets_passes_processor_check() {
    if langs::skipped("c", "c_redact_secrets_passes_processor_check") {
        return;
    }
    let output = agent_host()
        .args(["processor", "check"])
        .arg(c_redact_secrets())
        .args(["--deadline-ms", "5000"])
        .output()
        .expect("agent-host starts");
    assert!(
        output.status.success(),
        "{}\n{}",
        stdout(&output),
        stderr(&output)
    );
}

/// `processor new --lang c` makes a project whose own native test passes and
/// whose build script makes a component the host runs.
#[test]
fn processor_new_lang_c_builds_and_passes_its_own_test() {
    if langs::skipped("c", "processor_new_lang_c_builds_and_passes_its_own_test") {
        return;
    }
    let (_dir, project, printed) = langs::new_project("c", "tidy-up");
    assert!(printed.contains("./test.sh"), "{printed}");

    langs::script(
        "c",
        Command::new("bash").arg("test.sh").current_dir(&project),
        "the new project's test.sh",
    );
    let wasm = project.join("tidy-up.wasm");
    let printed = langs::script(
        "c",
        Command::new("bash")
            .args(["build.sh", "-o"])
            .arg(&wasm)
            .current_dir(&project),
        "the new project's build.sh",
    );
    assert_eq!(printed.lines().last(), wasm.to_str());

    let p = load(&wasm, "{}", FailurePolicy::Fail);
    assert_eq!(p.description().name, "tidy-up");
    assert_eq!(p.contract(), "0.2.0");
    assert!(!p.uses_wasi());
    let input = vec![
        Message::user("hello").with_id("u1"),
        Message::assistant("").with_id("a1"),
        Message::user("again").with_id("u2"),
    ];
    let out = run(&p, input);
    assert_eq!(
        out.reports[0].outcome,
        Outcome::Applied,
        "{:?}",
        out.reports[0].error
    );
    // The template drops messages with no text.
    let ids: Vec<&str> = out.messages.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["u1", "u2"]);
    assert_eq!(out.reports[0].logs[0].text, "dropped 1 of 3 messages");
}

#[test]
fn c_sdk_and_redact_secrets_native_tests_pass() {
    if langs::skipped("c", "c_sdk_and_redact_secrets_native_tests_pass") {
        return;
    }
    let printed = langs::script(
        "c",
        Command::new("bash").arg(langs::root().join("processors/c/redact-secrets/test.sh")),
        "processors/c/redact-secrets/test.sh",
    );
    assert!(!printed.is_empty(), "the native test says what it ran");
    let printed = langs::script(
        "c",
        Command::new("bash").arg(langs::root().join("processors/c/summarize-history/test.sh")),
        "processors/c/summarize-history/test.sh",
    );
    assert!(
        printed.contains("summarize-history (C): all checks passed"),
        "the native test ran: {printed}"
    );
    // The SDK's own tests: keep_last_turns and settle_tool_exchanges, with
    // the property that no drop pattern leaves a call or a result unpaired.
    let printed = langs::script(
        "c",
        Command::new("bash").arg(langs::root().join("guest-sdk/c/test.sh")),
        "guest-sdk/c/test.sh",
    );
    assert!(
        printed.contains("C SDK: all checks passed"),
        "the SDK's native test ran: {printed}"
    );
}
