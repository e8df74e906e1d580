//! The command line as a user runs it.

use crate::util::{agent_host, corpus, run, stderr, stdout};

#[test]
fn inspect_without_input_shows_the_embedded_sample() {
    let output = run(&["inspect"], "");
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(
        text.starts_with("embedded sample (jsonl): 12 messages"),
        "{text}"
    );
    assert!(
        text.contains("tool calls: 4, answered: 4, unanswered: 0, orphan results: 0"),
        "{text}"
    );
    assert!(text.contains("-> bash("), "{text}");
}

#[test]
fn inspect_reports_unanswered_calls_of_an_interrupted_run() {
    let history = r#"[
      {"role": "user", "content": "deploy"},
      {"role": "assistant", "content": null, "tool_calls": [
        {"id": "call_9", "type": "function", "function": {"name": "deploy", "arguments": "{}"}}]}
    ]"#;
    let output = run(&["inspect", "-"], history);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(text.contains("stdin (openai): 2 messages"), "{text}");
    assert!(text.contains("unanswered call: call_9"), "{text}");
}

#[test]
fn bad_input_exits_65_naming_the_message_and_field() {
    let output = run(
        &["inspect", "-"],
        r#"[{"role": "user", "content": "hi"}, {"role": "robot", "content": "x"}]"#,
    );
    assert_eq!(output.status.code(), Some(65));
    let err = stderr(&output);
    assert!(err.contains("cannot read the history in stdin"), "{err}");
    assert!(
        err.contains("openai message 1, field `role`: unknown role `robot`"),
        "{err}"
    );
    assert!(stdout(&output).is_empty());
}

#[test]
fn a_history_over_a_limit_exits_65_naming_the_limit_and_how_to_raise_it() {
    // 2,000,000 zeros in one message: 4 MB of text that parsed whole took
    // about 150 MB (52 MB of it took 1.9 GB); refused before it is built.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("zeros.jsonl");
    let zeros = vec!["0"; 2_000_000].join(",");
    let line = format!("{{\"type\":\"user\",\"content\":\"hi\",\"x\":[{zeros}]}}\n");
    std::fs::write(&file, line).unwrap();
    let path = file.to_str().unwrap();
    for args in [
        &["inspect", path][..],
        &["convert", path, "--to", "openai"][..],
    ] {
        let output = run(args, "");
        assert_eq!(output.status.code(), Some(65), "{args:?}");
        let err = stderr(&output);
        assert!(
            err.contains("jsonl line 1: the message holds more than 1000000 JSON values (the `message_values` limit)"),
            "{err}"
        );
        assert!(err.contains("--limit message_values=N"), "{err}");
        assert!(stdout(&output).is_empty());
    }
    // The flag and the variable raise it.
    let output = run(&["inspect", path, "--limit", "message_values=3000000"], "");
    assert!(output.status.success(), "{}", stderr(&output));
    let output = agent_host()
        .args(["inspect", path])
        .env(
            "AGENT_HOST_LIMITS",
            "message_values=3000000, history_values=5000000",
        )
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    // A lower limit is a limit too; a bad one is a usage error naming the limits.
    let output = run(&["inspect", path, "--limit", "message_mb=1"], "");
    assert_eq!(output.status.code(), Some(65));
    assert!(
        stderr(&output).contains("the `message_mb` limit"),
        "{}",
        stderr(&output)
    );
    let output = run(&["inspect", path, "--limit", "message_gb=1"], "");
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("history_messages"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_missing_file_is_an_io_error_not_bad_input() {
    let output = run(&["inspect", "/nonexistent/history.json"], "");
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("cannot read the history from /nonexistent/history.json"));
}

#[test]
fn convert_writes_a_file_that_reads_back_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let jsonl = dir.path().join("sample.jsonl");
    let openai = dir.path().join("sample.json");
    std::fs::write(&jsonl, agent_host_engine::transcript::SAMPLE).unwrap();
    let output = run(
        &[
            "convert",
            jsonl.to_str().unwrap(),
            "--to",
            "openai",
            "-o",
            openai.to_str().unwrap(),
        ],
        "",
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let back = run(
        &["convert", openai.to_str().unwrap(), "--to", "anthropic"],
        "",
    );
    assert!(back.status.success(), "{}", stderr(&back));
    let request: serde_json::Value = serde_json::from_str(&stdout(&back)).unwrap();
    assert!(
        request["system"]
            .as_str()
            .unwrap()
            .starts_with("You are a careful coding agent")
    );
    // 11 non-system messages, 11 turns: each tool result is a user turn of its own.
    let turns = request["messages"].as_array().unwrap();
    assert_eq!(turns.len(), 11, "{request:#}");
    assert_eq!(turns[2]["content"][0]["tool_use_id"], "call_01");
    assert_eq!(turns[3]["content"][0]["type"], "thinking");
}

/// Interleaved thinking with server tools: to Anthropic, every block and
/// signature comes back; to OpenAI, what cannot go is named on standard
/// error, not dropped unsaid.
#[test]
fn convert_says_what_the_target_cannot_carry() {
    let request = r#"{"system": "Research.", "messages": [
        {"role": "user", "content": "Q3?"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "Search.", "signature": "sig-1"},
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "Q3"}},
            {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
            {"type": "thinking", "thinking": "Done.", "signature": "sig-2"},
            {"type": "text", "text": "Up 7%."}]}]}"#;
    let same = run(&["convert", "-", "--to", "anthropic"], request);
    assert!(same.status.success(), "{}", stderr(&same));
    assert!(!stderr(&same).contains("not carried"), "{}", stderr(&same));
    let back: serde_json::Value = serde_json::from_str(&stdout(&same)).unwrap();
    let original: serde_json::Value = serde_json::from_str(request).unwrap();
    assert_eq!(back, original);

    let openai = run(&["convert", "-", "--to", "openai"], request);
    assert!(openai.status.success(), "{}", stderr(&openai));
    let err = stderr(&openai);
    assert!(
        err.contains("not carried by openai: message 2: the thinking signature"),
        "{err}"
    );
    assert!(
        err.contains("Anthropic data kept verbatim (thinking, server_tool_use, web_search_tool_result, thinking)"),
        "{err}"
    );
}

/// A Claude Code log with one unreadable line and a rewind: read, the bad
/// line and the abandoned branch named, not fatal and not mixed in.
#[test]
fn inspect_names_an_unreadable_line_and_a_rewound_branch() {
    let log = r#"{"type":"user","uuid":"u1","parentUuid":null,"sessionId":"s","message":{"role":"user","content":"fix the bug"}}
{"type":"assistant","uuid":"u2","parentUuid":"u1","sessionId":"s","message":{"id":"m1","role":"assistant","content":[{"type":"text","text":"Deleting the tests."}]}}
{"type":"user","uuid":"u3","parentUuid":"u1","sessionId":"s","message":{"role":"user","content":[{"type":"hologram"}]}}
{"type":"user","uuid":"u4","parentUuid":"u1","sessionId":"s","message":{"role":"user","content":"keep the tests"}}
{"type":"assistant","uuid":"u5","parentUuid":"u4","sessionId":"s","message":{"id":"m2","role":"assistant","content":[{"type":"text","text":"Patched."}]}}
"#;
    let output = run(&["inspect", "-"], log);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(
        text.starts_with("stdin (claude-code): 3 messages"),
        "{text}"
    );
    assert!(
        text.contains("abandoned branches (rewinds): 1 (1 messages, not shown)"),
        "{text}"
    );
    assert!(
        text.contains("unreadable record, left out: claude-code line 3, block 0, field `type`"),
        "{text}"
    );
    assert!(!text.contains("Deleting the tests."), "{text}");
}

#[test]
fn convert_refuses_to_write_claude_code() {
    let output = run(&["convert", "-", "--to", "claude-code"], "[]");
    assert_eq!(output.status.code(), Some(65));
    assert!(stderr(&output).contains("import-only"));
}

#[test]
fn inspect_reads_a_real_claude_code_session() {
    let Some(dir) = corpus() else { return };
    let path = dir.join("claude-code-sessions-ccv/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl");
    let output = run(&["inspect", path.to_str().unwrap()], "");
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(text.contains("(claude-code): "), "{text}");
    // The main thread; the subagents' conversations are counted apart.
    assert!(
        text.contains("tool calls: 11, answered: 11, unanswered: 0, orphan results: 0"),
        "{text}"
    );
    assert!(
        text.contains("subagent sidechains: 5 (322 messages"),
        "{text}"
    );
}

#[test]
fn a_closed_pipe_is_not_an_error() {
    use std::process::Stdio;
    let mut child = crate::util::agent_host()
        .args(["inspect"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
}

/// A store spec that names no store is a configuration error (exit 78) that
/// says what to write instead; a session key no store can hold is bad input
/// (exit 65).
#[test]
fn a_bad_store_spec_and_a_bad_key_have_their_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    let output = agent_host()
        .current_dir(dir.path())
        .args(["chat", "--store", "sqlite:"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(78), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("`sqlite:` needs a path"),
        "{}",
        stderr(&output)
    );

    let output = agent_host()
        .current_dir(dir.path())
        .args(["chat", "--agent", ""])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(65), "{}", stderr(&output));
    assert!(stderr(&output).contains("agent"), "{}", stderr(&output));
}

/// What `inspect` shows of a stranger's history (text, tool names, call
/// ids, titles) reaches the terminal with its escape sequences escaped.
#[test]
fn inspect_escapes_what_a_history_controls() {
    let history = r#"[{"role":"user","content":"\u001b[2Jhello\u0007"},
        {"role":"assistant","content":"ok","tool_calls":[{"id":"c\u001b[31m","type":"function",
         "function":{"name":"x\u001b]0;t\u0007","arguments":"{}"}}]},
        {"role":"tool","tool_call_id":"orphan\u001b[5m","content":"r"}]"#;
    let output = run(&["inspect", "-"], history);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(
        !text.contains('\u{1b}') && !text.contains('\u{7}'),
        "{text:?}"
    );
    assert!(text.contains("unanswered call: c\\u{1b}[31m"), "{text}");
    let claude =
        "{\"type\":\"summary\",\"summary\":\"\\u001b]0;owned\\u0007\",\"leafUuid\":\"l\"}\n";
    let output = run(&["inspect", "-"], claude);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(!stdout(&output).contains('\u{1b}'), "{:?}", stdout(&output));
}

/// An error that quotes a stranger's history shows its escape sequences
/// escaped: the terminal is never told to clear itself or retitle its window
/// (issue 15, item 10).
#[test]
fn errors_quoting_a_history_escape_control_characters() {
    let out = crate::util::run(
        &["inspect", "-"],
        "[{\"role\": \"\\u001b[2J\\u001b]0;owned\\u0007evil\", \"content\": \"x\"}]",
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(65), "{stderr}");
    assert!(
        !stderr.contains('\u{1b}') && !stderr.contains('\u{7}'),
        "{stderr:?}"
    );
    assert!(stderr.contains("\\u{1b}[2J"), "{stderr}");
}
