//! Processors in JavaScript: the JavaScript port of `redact-secrets`, built by
//! its own `build.sh` (rolldown and componentize-qjs, from
//! `guest-sdk/js/toolchain.sh`: contract 0.1.0; and with `--backend
//! spidermonkey`, componentize-js: contract 0.2.0), run in the real host and
//! compared message by message with the Rust standard processor over the
//! corpus; and a project
//! made by `agent-host processor new --lang js`, which must pass its own test
//! under Node and build into a component the host runs.
//!
//! Set `AGENT_HOST_SKIP_LANGS=js` to skip these on a machine without Node.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use agent_host_core::Message;
use agent_host_core::message::{Part, Reasoning};
use agent_host_runtime::{
    Cause, FailurePolicy, Limits, Outcome, Processor, ProcessorOptions, RunInfo,
};

use crate::langs;
use crate::util::{corpus_histories, standard_processor};

/// The JavaScript redact-secrets component, built once per test run by its
/// build script into the test's target folder.
fn js_redact_secrets() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("js-redact-secrets.wasm");
        langs::build_example("js", &out)
    })
}

/// Limits for the comparison: a QuickJS component needs more time than the
/// default deadline on the largest corpus sessions under a debug host, and a
/// slow shared machine must not fail the comparison.
fn roomy() -> Limits {
    Limits {
        deadline: Duration::from_secs(10),
        memory_bytes: 256 << 20,
        ..Limits::default()
    }
}

fn load(path: &Path, config: &str, on_failure: FailurePolicy) -> Processor {
    langs::runtime()
        .load_file(
            path,
            ProcessorOptions {
                config: Some(config.to_owned()),
                limits: roomy(),
                on_failure,
                ..ProcessorOptions::default()
            },
        )
        .unwrap_or_else(|e| panic!("{} loads: {e:#}", path.display()))
}

/// Fake secrets of each kind, put together from pieces so that no scanner
/// takes this file for a leak.
fn secrets() -> Vec<String> {
    let pem = |nl: &str| {
        let label = ["RSA ", "PRIVATE", " KEY"].concat();
        let body = ["MIIEow", "IBAAKCAQEA7", "xYzAbC+/dEf=="].concat();
        format!("-----BEGIN {label}-----{nl}{body}{nl}{body}{nl}-----END {label}-----")
    };
    vec![
        ["sk-", "proj-", &"Xy7kP2".repeat(8), "_Qz9-Lm"].concat(),
        ["sk-", "ant-", "api03-", &"Ab9_c-D".repeat(13), "AA"].concat(),
        ["AKIA", "IOSFODNN7", "EXAMPLE"].concat(),
        [
            "aws_secret_access_key = ",
            "wJalrXUtnFEMI",
            "/K7MDENG/bPxRfiCY",
            "EXAMPLEKEY",
        ]
        .concat(),
        ["ghp_", &"A1b2C3d4E5".repeat(3), "f6G7h8"].concat(),
        [
            "github_",
            "pat_",
            "11ABCDEFG0",
            "abcdefghijkl_",
            &"Zz09".repeat(14),
        ]
        .concat(),
        [
            "xoxb",
            "-123456789012",
            "-1234567890123-",
            "AbCdEfGhIjKlMnOp",
        ]
        .concat(),
        [
            "https://hooks.slack.com/services/",
            "T0A1B2C3D",
            "/B0A1B2C3D/",
            "XyZ123abcDEF456ghiJKL789",
        ]
        .concat(),
        [
            "Authorization: Bearer ",
            "eyJhbGciOiJIUzI1NiJ9",
            ".eyJzdWIiOiIxMjM0In0",
            ".Sf1Kx-9aB_cD",
        ]
        .concat(),
        pem("\n"),
        pem("\\n"),
        ["postgres://app:", "s3cr3t-Pw", "@db.internal:5432/app"].concat(),
        ["jane.doe+x", "@", "example.co.uk"].concat(),
        "ticket ACME-7431 and acme_0123abcd9, PIN 12345".into(),
    ]
}

/// Texts where the two scans could part: secrets glued to each other, to
/// placeholders and to non-ASCII text (accents, CJK, characters outside the
/// Basic Multilingual Plane, where UTF-8 bytes and UTF-16 units differ),
/// near misses, and template passwords.
fn awkward_texts() -> Vec<String> {
    let s = secrets();
    let mut texts = vec![
        format!("→{}← ünï@exämple.com é 😀😀 𝔘 {}", s[4], s[0]),
        format!("東京{}東京 {}😀{}", s[2], s[1], s[12]),
        format!("{}{}{}", s[9], s[4], s[2]),
        format!("[REDACTED:openai-key]{} and {}", s[0], s[11]),
        "postgres://app:${DB_PASSWORD}@db/app and redis://:{password}@cache".into(),
        "https://me:p@ss@w0rd@example.com/x mysql://root:pa:ss@localhost/db".into(),
        "task-sk-list, sk-spinner-container-wrapper-2024, AKIAIOSFODNN7EXAMPLE2".into(),
        "the bearer of bad news; Bearer YOUR_API_KEY_HERE; bearer\tabc".into(),
        "SecretAccessKey: wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY01".into(),
        "user@localhost, @types/node, pkg@1.2.3, @@, a@b.c, x@-, icon@2x.png".into(),
        "ſecret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY İbearer x".into(),
        format!("{}\u{2028}{}\r\n{}", s[8], s[6], s[7]),
        // An extra pattern whose `secret` is empty at the first emoji: the
        // search must go on after the whole character (a UTF-16 scan that
        // stepped into the surrogate pair would find the same match again).
        "😀😀x and 😀x".into(),
        // U+0130 lowercases to two UTF-16 units: the JavaScript scan then
        // looks for candidates in the text itself rather than its lowercase.
        format!("İstanbul: {} and {}", s[8], s[3]),
    ];
    texts.extend(s.iter().map(|x| format!("«{x}»")));
    texts
}

/// A history that holds every secret in every place a message has text:
/// content, text parts, readable and opaque reasoning, signed or not, and
/// tool-call arguments.
fn awkward_history() -> Vec<Message> {
    let mut history = vec![Message::system("You are careful.").with_id("sys")];
    for (i, text) in awkward_texts().into_iter().enumerate() {
        history.push(Message::user(text.clone()).with_id(format!("u{i}")));
        let mut answer = Message::assistant(format!("noted {i}")).with_id(format!("a{i}"));
        answer.reasoning = Some(Reasoning {
            text: text.clone(),
            signature: (i % 2 == 0).then(|| "sig".to_owned()),
            redacted: i % 3 == 0,
        });
        answer.push_tool_call(
            format!("c{i}"),
            "shell",
            serde_json::json!({ "cmd": text }).to_string(),
        );
        history.push(answer);
        let mut result =
            Message::tool_result(format!("c{i}"), "shell", "ok").with_id(format!("t{i}"));
        result.parts.push(Part::Text { text: text.clone() });
        history.push(result);
    }
    history.push(Message::assistant("done").with_id("end"));
    history
}

/// `history` with a secret appended to every fifth message's content, so the
/// redaction works inside real text.
fn planted(history: &[Message]) -> Vec<Message> {
    let s = secrets();
    let mut h = history.to_vec();
    for (i, m) in h.iter_mut().enumerate().filter(|(i, _)| i % 5 == 0) {
        m.content += &format!("\n{}", s[i / 5 % s.len()]);
    }
    h
}

/// The configurations compared: the default and one of each kind of change.
const CONFIGS: [&str; 6] = [
    "{}",
    r#"{"kinds": ["openai-key", "bearer-token", "url-password", "email"]}"#,
    r#"{"placeholder": "<{kind}>"}"#,
    r#"{"placeholder": "[REDACTED]", "emails": true}"#,
    r#"{"emails": true, "extra": [
        {"name": "acme-ticket", "pattern": "ACME-(?P<secret>[0-9]{4})"},
        {"name": "acme-token", "pattern": "acme_[a-z0-9]{8,}"},
        {"name": "pin", "pattern": "PIN:? *(?P<secret>[0-9]{4,6})\\b"},
        {"name": "unicode", "pattern": "é+|😀+"},
        {"name": "emoji-x", "pattern": "😀(?P<secret>x*)"},
        {"name": "shouting", "pattern": "(?i)tool_use_id"},
        {"name": "word", "pattern": "\\bhttps?://[^\\s/]+\\.example\\S*"}
    ]}"#,
    r#"{"kinds": [], "extra": [{"name": "digits", "pattern": "[0-9]{6,}"}]}"#,
];

/// The JavaScript port gives the Rust processor's output, message by message,
/// on every corpus history (as it is and with planted secrets) and on the
/// awkward history, under each configuration; both answers are applied as
/// they were, and the same messages are reported replaced.
#[test]
fn js_redact_secrets_matches_the_rust_processor() {
    if langs::skipped("js", module_path!()) {
        return;
    }
    let changed = compare_with_rust(js_redact_secrets(), &CONFIGS);
    // The comparison is only worth something if there was work to compare.
    assert!(changed > 1000, "only {changed} messages were redacted");
}

/// The port built with the SpiderMonkey backend, which builds contract
/// 0.2.0 (the history stays in the host; the SDK reads the headers, and the
/// messages on first read): the same output as the Rust processor.
#[test]
fn js_redact_secrets_on_spidermonkey_speaks_0_2_0_and_matches_the_rust_processor() {
    if langs::skipped("js", module_path!()) {
        return;
    }
    let path = js_redact_secrets_spidermonkey();
    let p = load(path, "{}", FailurePolicy::Fail);
    assert_eq!(p.contract(), "0.2.0");
    assert!(!p.uses_wasi(), "imports WASI: {:?}", p.imports());
    let changed = compare_with_rust(path, &CONFIGS[..2]);
    assert!(changed > 500, "only {changed} messages were redacted");
}

/// The JavaScript redact-secrets component built with `--backend
/// spidermonkey` (its toolchain installed first, with `--spidermonkey`).
fn js_redact_secrets_spidermonkey() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        langs::script(
            "js",
            Command::new("bash")
                .arg(langs::root().join("guest-sdk/js/toolchain.sh"))
                .arg("--spidermonkey"),
            "guest-sdk/js/toolchain.sh --spidermonkey",
        );
        let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("js-sm-redact-secrets.wasm");
        langs::script(
            "js",
            Command::new("bash")
                .arg(langs::root().join("processors/js/redact-secrets/build.sh"))
                .arg("-o")
                .arg(&out)
                .args(["--backend", "spidermonkey"]),
            "processors/js/redact-secrets/build.sh --backend spidermonkey",
        );
        out
    })
}

/// Runs the JavaScript component at `js_path` and the Rust processor under
/// each of `configs` over every corpus history (as it is and with planted
/// secrets) and the awkward history, requiring the same output message by
/// message and the same replaced messages; returns how many were replaced.
fn compare_with_rust(js_path: &Path, configs: &[&str]) -> usize {
    let rust_path = standard_processor("redact-secrets");
    let mut histories: Vec<(String, Vec<Message>)> = corpus_histories();
    assert!(
        !histories.is_empty(),
        "the comparison needs the corpus (set AGENT_HOST_CORPUS)"
    );
    let planted: Vec<(String, Vec<Message>)> = histories
        .iter()
        .map(|(name, h)| (format!("{name} (planted)"), planted(h)))
        .collect();
    histories.extend(planted);
    histories.push(("awkward".into(), awkward_history()));

    let mut changed = 0;
    for config in configs {
        let js = load(js_path, config, FailurePolicy::Fail);
        let rust = load(&rust_path, config, FailurePolicy::Fail);
        for (name, history) in &histories {
            let want = langs::runtime().run(
                std::slice::from_ref(&rust),
                &RunInfo::default(),
                history.clone(),
            );
            let got = langs::runtime().run(
                std::slice::from_ref(&js),
                &RunInfo::default(),
                history.clone(),
            );
            let (w, g) = (&want.reports[0], &got.reports[0]);
            assert_eq!(w.outcome, Outcome::Applied, "rust, {name}, {config}: {w:?}");
            assert_eq!(g.outcome, Outcome::Applied, "js, {name}, {config}: {g:?}");
            assert_eq!(
                got.messages.len(),
                want.messages.len(),
                "{name}, {config}: message count"
            );
            for (i, (g, w)) in got.messages.iter().zip(&want.messages).enumerate() {
                assert_eq!(g, w, "{name}, {config}: message {i} differs");
            }
            let ids = |r: &agent_host_runtime::ProcessorReport| {
                r.replaced.iter().map(|m| m.id.clone()).collect::<Vec<_>>()
            };
            assert_eq!(ids(g), ids(w), "{name}, {config}: replaced messages");
            changed += w.replaced.len();
        }
    }
    changed
}

/// The component describes itself as `redact-secrets`, needs no WASI, logs
/// what the Rust processor logs, and refuses bad configurations naming the key.
#[test]
fn js_redact_secrets_describes_itself_logs_and_refuses_bad_configs() {
    if langs::skipped("js", module_path!()) {
        return;
    }
    let path = js_redact_secrets();
    let p = load(path, "{}", FailurePolicy::Fail);
    let description = p.description();
    assert_eq!(description.name, "redact-secrets");
    assert_eq!(description.version, "0.1.0");
    // Still contract 0.1.0: componentize-qjs never drops the borrowed
    // history handle a 0.2.0 `process` receives (guest-sdk/js/componentize.sh).
    assert_eq!(p.contract(), "0.1.0");
    assert!(description.config_example.is_some());
    assert!(!p.uses_wasi(), "the QuickJS build imports no WASI");

    let input = awkward_history();
    let out = langs::runtime().run(std::slice::from_ref(&p), &RunInfo::default(), input.clone());
    let logs: Vec<&str> = out.reports[0]
        .logs
        .iter()
        .map(|l| l.text.as_str())
        .collect();
    assert_eq!(logs.len(), 2, "{logs:?}");
    assert!(logs[0].starts_with("redacted "), "{logs:?}");
    assert!(
        logs[1].starts_with("dropped the signed reasoning of "),
        "{logs:?}"
    );

    for (config, want) in [
        (r#"{"kinds": ["jwt"]}"#, "unknown kind \"jwt\" in `kinds`"),
        (r#"{"emails": "yes"}"#, "`emails`: expected a boolean"),
        (r#"{"email": true}"#, "unknown field `email`"),
        (r#"{"placeholder": ""}"#, "`placeholder` is empty"),
        (
            r#"{"extra": [{"name": "t", "pattern": "(TICKET"}]}"#,
            "extra pattern \"t\" is not a valid regex",
        ),
    ] {
        let p = load(path, config, FailurePolicy::Fail);
        let out =
            langs::runtime().run(std::slice::from_ref(&p), &RunInfo::default(), input.clone());
        assert_eq!(out.messages, input, "{config}: the input stands");
        match out.failure.map(|f| f.cause) {
            Some(Cause::BadConfig(m)) => assert!(m.contains(want), "{config}: {m}"),
            other => panic!("{config}: {other:?}"),
        }
    }
}

/// The SDK's tests and the processor's own (the Rust processor's unit cases,
/// ported) pass under Node, with the SDK's stand-in for the host.
#[test]
fn js_sdk_and_processor_tests_pass_under_node() {
    if langs::skipped("js", module_path!()) {
        return;
    }
    langs::script(
        "js",
        Command::new("node")
            .args(["--test", "test/"])
            .current_dir(langs::root().join("guest-sdk/js")),
        "node --test test/ in guest-sdk/js",
    );
    // The processors' tests import the SDK by name: run them in a copy with
    // the SDK linked beside it, so the source tree gets no node_modules.
    for name in ["redact-secrets", "summarize-history"] {
        let copy = tempfile::tempdir().unwrap();
        let processor = langs::root().join("processors/js").join(name);
        for part in ["package.json", "src", "test"] {
            let status = Command::new("cp")
                .arg("-R")
                .arg(processor.join(part))
                .arg(copy.path())
                .status()
                .unwrap();
            assert!(status.success(), "cannot copy {name}/{part}");
        }
        std::fs::create_dir(copy.path().join("node_modules")).unwrap();
        std::os::unix::fs::symlink(
            langs::root().join("guest-sdk/js"),
            copy.path().join("node_modules/agent-host-guest"),
        )
        .unwrap();
        langs::script(
            "js",
            Command::new("node").arg("--test").current_dir(copy.path()),
            &format!("node --test in processors/js/{name}"),
        );
    }
}

/// `processor new --lang js` makes a project that passes its own test under
/// Node, builds with its script, and runs in the host: it drops error
/// results as its template says, and refuses a misspelt key.
#[test]
fn a_new_js_processor_tests_builds_and_runs() {
    if langs::skipped("js", module_path!()) {
        return;
    }
    let (_dir, project, _) = langs::new_project("js", "tidy-up");

    langs::script(
        "js",
        Command::new("npm")
            .args(["install", "--offline", "--no-audit", "--no-fund"])
            .current_dir(&project),
        "npm install in the new project",
    );
    langs::script(
        "js",
        Command::new("npm").arg("test").current_dir(&project),
        "npm test in the new project",
    );
    let printed = langs::script(
        "js",
        Command::new("bash").arg("build.sh").current_dir(&project),
        "build.sh in the new project",
    );
    let wasm = PathBuf::from(printed.lines().last().expect("a path").trim());
    let wasm = if wasm.is_absolute() {
        wasm
    } else {
        project.join(wasm)
    };

    let p = load(&wasm, "{}", FailurePolicy::Fail);
    assert_eq!(p.name(), "tidy-up");
    assert!(!p.uses_wasi());
    let mut failed = Message::tool_result("c1", "shell", "boom").with_id("t1");
    failed.is_error = true;
    let mut call = Message::assistant("").with_id("a1");
    call.push_tool_call("c1", "shell", "{}");
    let input = vec![
        Message::user("hi").with_id("u1"),
        call,
        failed,
        Message::assistant("sorry").with_id("a2"),
    ];
    let out = langs::runtime().run(std::slice::from_ref(&p), &RunInfo::default(), input);
    assert_eq!(
        out.reports[0].outcome,
        Outcome::Applied,
        "{:?}",
        out.reports[0]
    );
    let ids: Vec<&str> = out.messages.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["u1", "a2"], "the error result and its call go");

    let p = load(&wasm, r#"{"dropErrors": true}"#, FailurePolicy::Fail);
    let out = langs::runtime().run(std::slice::from_ref(&p), &RunInfo::default(), vec![]);
    match out.failure.map(|f| f.cause) {
        Some(Cause::BadConfig(m)) => assert!(m.contains("unknown field `dropErrors`"), "{m}"),
        other => panic!("{other:?}"),
    }
}
