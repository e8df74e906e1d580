//! A component built against `agent-host:history@0.1.0` before contract
//! 0.2.0 existed keeps loading and gives the same output (issue 20): the
//! fixture is `keep-last-turns` as built at commit `fea003b`, never rebuilt.

use std::path::PathBuf;

use agent_host_core::Message;
use agent_host_runtime::{ProcessorOptions, RunInfo, Runtime, RuntimeConfig};

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/keep-last-turns-0.1.0.wasm")
}

/// A system prompt, three turns, a summary and a tool exchange.
fn history() -> Vec<Message> {
    let mut summary = Message::assistant("what came before").with_id("sum");
    summary.summary = true;
    let mut call = Message::assistant("").with_id("a2");
    call.push_tool_call("c1", "search", r#"{"q": "x"}"#);
    vec![
        Message::system("rules").with_id("s"),
        Message::user("one").with_id("u1"),
        summary,
        Message::user("two").with_id("u2"),
        call,
        Message::tool_result("c1", "search", "found").with_id("t1"),
        Message::assistant("three").with_id("a3"),
        Message::user("four").with_id("u3"),
        Message::assistant("done").with_id("a4"),
    ]
}

fn ids(messages: &[Message]) -> Vec<&str> {
    messages.iter().map(|m| m.id.as_str()).collect()
}

#[test]
fn a_0_1_0_component_built_before_0_2_0_runs_with_the_same_output() {
    let rt = Runtime::new(RuntimeConfig {
        cache_dir: None,
        ..RuntimeConfig::default()
    })
    .unwrap();
    let p = rt
        .load_file(
            &fixture(),
            ProcessorOptions {
                config: Some(r#"{"turns": 2}"#.into()),
                ..ProcessorOptions::default()
            },
        )
        .expect("the 0.1.0 fixture loads");
    assert_eq!(p.name(), "keep-last-turns");
    assert_eq!(p.contract(), "0.1.0");
    let input = history();
    let out = rt.run(std::slice::from_ref(&p), &RunInfo::default(), input.clone());
    assert!(out.failure.is_none(), "{:?}", out.failure);
    let report = &out.reports[0];
    assert!(report.error.is_none(), "{:?}", report.error);
    // The output of this component under the 0.1.0 host, recorded before
    // 0.2.0: the first turn goes, the system prompt and the summary stay.
    assert_eq!(
        ids(&out.messages),
        ["s", "sum", "u2", "a2", "t1", "a3", "u3", "a4"]
    );
    assert_eq!(report.dropped, ["u1"]);
    // Kept messages come back as they went in.
    for m in &out.messages {
        let before = input.iter().find(|i| i.id == m.id).unwrap();
        assert_eq!(m, before);
    }
    // A bad configuration is still refused by the component itself.
    let bad = rt
        .load_file(
            &fixture(),
            ProcessorOptions {
                config: Some(r#"{"turns": 0}"#.into()),
                ..ProcessorOptions::default()
            },
        )
        .unwrap();
    let out = rt.run(
        std::slice::from_ref(&bad),
        &RunInfo::default(),
        input.clone(),
    );
    assert_eq!(ids(&out.messages), ids(&input));
    let error = out.reports[0].error.as_deref().unwrap_or_default();
    assert!(error.contains("`turns` must be at least 1"), "{error}");
}
