//! Real conversations against the loopback model server, through the binary:
//! `run --session --message`, `chat` driven by a script on standard input,
//! `context`, with summarization, pruning, retries and failures.

use std::io::Write;
use std::path::Path;
use std::process::{Output, Stdio};

use agent_host_config::TrustList;
use agent_host_store::{FileStore, SessionRef, SessionStore};
use serde_json::Value;

use crate::llm_server::{Answer, LlmServer, Recorded, Scripted, Wire};
use crate::util::{agent_host, stderr, stdout};

/// A folder with a store and a configuration pointing at `server`.
struct Setup {
    dir: tempfile::TempDir,
}

impl Setup {
    fn new(server: &LlmServer, wire: Wire, extra: &str) -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let kind = match wire {
            Wire::OpenAi => "openai",
            Wire::Anthropic => "anthropic",
        };
        let config = format!(
            "[provider]\nkind = \"{kind}\"\nbase_url = \"{}\"\nmodel = \"test-model\"\napi_key_env = \"TEST_LLM_KEY\"\nmax_retries = 2\n\n{extra}",
            server.base_url()
        );
        std::fs::write(dir.path().join("agent-host.toml"), config).unwrap();
        Setup { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn store(&self) -> FileStore {
        FileStore::open(self.path().join(".agent-host")).unwrap()
    }

    /// Runs `agent-host ARGS` in the folder (so its agent-host.toml and
    /// .agent-host/ are used), feeding `stdin`.
    fn run(&self, args: &[&str], stdin: &str) -> Output {
        // The folder's file names an endpoint and a key variable: the user
        // trusts it (as it is now) before running there.
        let user = self.path().join("user-config");
        let file = self.path().join("agent-host.toml");
        let mut trusted = TrustList::load(Some(&user.join("agent-host"))).unwrap();
        trusted.trust(&file, &std::fs::read_to_string(&file).unwrap());
        trusted.save(&user.join("agent-host")).unwrap();
        let mut child = agent_host()
            .args(args)
            .current_dir(self.path())
            .env("XDG_CONFIG_HOME", &user)
            .env("TEST_LLM_KEY", "sk-test-123")
            .env_remove("AGENT_HOST_STORE")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    }

    fn ok(&self, args: &[&str], stdin: &str) -> String {
        let output = self.run(args, stdin);
        assert!(
            output.status.success(),
            "agent-host {args:?} failed: {}\n{}",
            stderr(&output),
            stdout(&output)
        );
        stdout(&output)
    }
}

/// Whether a request is a summarization call (the summarizer's instructions).
fn is_summary(r: &Recorded) -> bool {
    r.body
        .to_string()
        .contains("You summarize the earlier part of a conversation")
}

/// The chat (non-summary) requests the server received.
fn chat_requests(server: &LlmServer) -> Vec<Recorded> {
    server
        .requests()
        .into_iter()
        .filter(|r| !is_summary(r))
        .collect()
}

/// Every text of a request body, joined (both wires).
fn request_text(r: &Recorded) -> String {
    r.body.to_string()
}

fn answer_summaries(server: &LlmServer) {
    server.respond_with(|r| {
        if is_summary(r) {
            Scripted::Answer(Answer::text(
                "## Files Modified\n- `src/main.rs`\n## Key Decisions\n- use SUMMARY-MARKER-42\n## Important Values\n- `port 8080`\n## Current State\nworking\n## Pending Tasks\n- none",
            ))
        } else {
            let n = r.body.to_string().matches("turn number").count();
            Scripted::Answer(Answer::text(&format!("answer to message {n}")))
        }
    });
}

const SMALL_TRIGGERS: &str = "[context]\nmax_messages_before_summary = 6\nmin_messages_to_summarize = 2\nkeep_last_turns = 1\n";

fn full_conversation(wire: Wire) {
    let server = LlmServer::start(wire);
    answer_summaries(&server);
    let setup = Setup::new(&server, wire, SMALL_TRIGGERS);
    for i in 1..=6 {
        let out = setup.ok(
            &[
                "run",
                "--session",
                "work",
                "--message",
                &format!("turn number {i}: remember value-{i}"),
            ],
            "",
        );
        assert!(out.contains("answer to message"), "turn {i}: {out}");
    }
    let store = setup.store();
    let session = SessionRef::key("default", "work");
    let meta = store
        .get(&session)
        .unwrap()
        .expect("the session was created");
    assert!(
        !meta.checkpoints.is_empty(),
        "six turns of two messages pass the 6-message trigger"
    );
    let history = store.load(&session).unwrap();
    let summary = history
        .messages
        .iter()
        .find(|m| m.summary && m.text().contains("SUMMARY-MARKER-42"))
        .expect("the LLM summary is stored in the log");
    assert!(summary.synthetic);
    let replies: Vec<_> = history
        .messages
        .iter()
        .filter(|m| m.role == agent_host_core::Role::Assistant && !m.summary)
        .collect();
    assert_eq!(replies.len(), 6, "every reply is stored");
    for reply in &replies {
        assert_eq!(reply.model.as_deref(), Some("test-model"));
        let usage = reply.usage.as_ref().expect("usage is stored");
        assert!(usage.input_tokens > 0 && usage.output_tokens > 0);
    }
    assert!(
        server.requests().iter().any(is_summary),
        "a summary request was made"
    );
    let summary_request = server.requests().into_iter().find(is_summary).unwrap();
    let temperature = summary_request.body["temperature"].as_f64().unwrap();
    assert!((temperature - 0.3).abs() < 1e-6, "{temperature}");
    // The last request was built from the checkpoint: it carries the summary
    // and not the first turns it covers.
    let last = chat_requests(&server).pop().unwrap();
    let text = request_text(&last);
    assert!(text.contains("SUMMARY-MARKER-42"), "{text}");
    assert!(!text.contains("value-1\""), "{text}");
    assert!(text.contains("value-6"), "{text}");
}

#[test]
fn a_conversation_over_openai_summarizes_and_builds_the_next_request_from_the_checkpoint() {
    full_conversation(Wire::OpenAi);
}

#[test]
fn a_conversation_over_anthropic_summarizes_and_builds_the_next_request_from_the_checkpoint() {
    full_conversation(Wire::Anthropic);
}

#[test]
fn a_context_length_error_prunes_aggressively_and_retries_once() {
    let server = LlmServer::start(Wire::OpenAi);
    let setup = Setup::new(&server, Wire::OpenAi, "");
    // A session with a large tool result, under the normal pruning size.
    let big = "line of tool output\n".repeat(1_500);
    let history = serde_json::json!([
        {"role": "user", "content": "read the log"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "read_log", "arguments": "{}"}}
        ]},
        {"role": "tool", "tool_call_id": "c1", "content": big},
        {"role": "assistant", "content": "The log is long."},
    ]);
    let file = setup.path().join("history.json");
    std::fs::write(&file, history.to_string()).unwrap();
    setup.ok(
        &[
            "sessions",
            "import",
            "--session",
            "big",
            file.to_str().unwrap(),
        ],
        "",
    );
    server.push(Scripted::ContextLength);
    server.push(Scripted::Answer(Answer::text("fits now")));
    let report = setup.path().join("report.json");
    let out = setup.ok(
        &[
            "run",
            "--session",
            "big",
            "--message",
            "what did it say?",
            "--report",
            report.to_str().unwrap(),
        ],
        "",
    );
    assert!(out.contains("fits now"), "{out}");
    let requests = chat_requests(&server);
    assert_eq!(
        requests.len(),
        2,
        "one retry after the context-length error"
    );
    let (first, second) = (request_text(&requests[0]), request_text(&requests[1]));
    assert!(
        first.len() > 25_000,
        "the first request carries the whole result"
    );
    assert!(
        second.len() < first.len() / 2,
        "the retry is pruned: {} -> {} bytes",
        first.len(),
        second.len()
    );
    let report: Value = serde_json::from_str(&std::fs::read_to_string(report).unwrap()).unwrap();
    assert!(report["aggressive_retry"].is_string(), "{report}");
    assert!(!report["pipeline"]["pruned"].as_array().unwrap().is_empty());
    // The log itself is never pruned.
    let stored = setup
        .store()
        .load(&SessionRef::key("default", "big"))
        .unwrap();
    assert!(stored.messages.iter().any(|m| m.text() == big));
}

#[test]
fn a_turn_that_fails_stores_nothing_and_says_what_the_provider_said() {
    let server = LlmServer::start(Wire::OpenAi);
    let setup = Setup::new(&server, Wire::OpenAi, "");
    for _ in 0..3 {
        server.push(Scripted::ServerError);
    }
    let output = setup.run(&["run", "--session", "s", "--message", "hello"], "");
    assert_eq!(output.status.code(), Some(69), "the provider failed");
    let err = stderr(&output);
    assert!(err.contains("500"), "{err}");
    assert!(err.contains("the turn was not stored"), "{err}");
    assert!(err.contains("retrying"), "retries are announced: {err}");
    assert_eq!(server.requests().len(), 3, "the first try and two retries");
    // Regression (a failed first turn left an empty session): the session
    // is created only when a turn is stored.
    let meta = setup.store().get(&SessionRef::key("default", "s")).unwrap();
    assert!(meta.is_none(), "{meta:?}");
}

#[test]
fn rate_limits_are_retried_and_the_turn_succeeds() {
    let server = LlmServer::start(Wire::Anthropic);
    let setup = Setup::new(&server, Wire::Anthropic, "");
    server.push(Scripted::RateLimited);
    server.push(Scripted::Answer(Answer::text("after the wait")));
    let output = setup.run(&["run", "--session", "s", "--message", "hello"], "");
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).contains("after the wait"));
    assert!(stderr(&output).contains("retrying"));
    assert_eq!(server.requests().len(), 2);
}

#[test]
fn a_failed_summary_keeps_the_full_history_unless_the_fallback_is_configured() {
    for fallback in [false, true] {
        let server = LlmServer::start(Wire::OpenAi);
        server.respond_with(|r| {
            if is_summary(r) {
                Scripted::Status {
                    status: 400,
                    body: r#"{"error":{"message":"summaries are refused here","type":"invalid_request_error"}}"#.into(),
                    retry_after: None,
                }
            } else {
                Scripted::Answer(Answer::text("ok"))
            }
        });
        let extra = format!("{SMALL_TRIGGERS}extractive_fallback = {fallback}\n");
        let setup = Setup::new(&server, Wire::OpenAi, &extra);
        let mut last = String::new();
        for i in 1..=5 {
            last = setup.ok(
                &[
                    "run",
                    "--session",
                    "s",
                    "--message",
                    &format!("message {i}"),
                ],
                "",
            );
        }
        let meta = setup
            .store()
            .get(&SessionRef::key("default", "s"))
            .unwrap()
            .unwrap();
        assert!(meta.message_count >= 10, "{meta:?}");
        if fallback {
            assert!(
                !meta.checkpoints.is_empty(),
                "the extractive summary stood in"
            );
        } else {
            assert!(
                meta.checkpoints.is_empty(),
                "no checkpoint without a summary"
            );
            assert!(
                last.contains("summary failed, full history kept")
                    && last.contains("summaries are refused here"),
                "{last}"
            );
            // Every message is still sent.
            let request = chat_requests(&server).pop().unwrap();
            assert!(request_text(&request).contains("message 1"));
        }
    }
}

#[test]
fn without_a_provider_run_prints_the_context_and_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let output = agent_host()
        .args(["run", "--session", "k", "--message", "hello there"])
        .current_dir(dir.path())
        .env_remove("AGENT_HOST_STORE")
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let view: Value = serde_json::from_slice(&output.stdout).unwrap();
    let last = view.as_array().unwrap().last().unwrap();
    assert_eq!(last["content"], "hello there");
    assert!(stderr(&output).contains("offline"));
    assert!(
        !dir.path().join(".agent-host").exists(),
        "an offline turn creates no store and no session"
    );
}

#[test]
fn the_message_can_come_from_standard_input_and_tool_calls_are_stored() {
    let server = LlmServer::start(Wire::OpenAi);
    let setup = Setup::new(&server, Wire::OpenAi, "");
    server.push(Scripted::Answer(Answer {
        text: String::new(),
        reasoning: None,
        tool_calls: vec![(
            "call_7".into(),
            "read_file".into(),
            r#"{"path":"README.md"}"#.into(),
        )],
        input_tokens: 20,
        output_tokens: 8,
        model: "test-model".into(),
    }));
    let out = setup.ok(
        &["run", "--session", "t", "--message", "-"],
        "read the readme\n",
    );
    assert!(out.contains("read_file"), "{out}");
    let sent = &server.requests()[0];
    assert!(request_text(sent).contains("read the readme"));
    let history = setup
        .store()
        .load(&SessionRef::key("default", "t"))
        .unwrap();
    let reply = history.messages.last().unwrap();
    assert_eq!(reply.tool_calls[0].id, "call_7");
    // The next turn sends a history whose unanswered call was closed.
    server.push(Scripted::Answer(Answer::text("fine")));
    setup.ok(&["run", "--session", "t", "--message", "go on"], "");
    let next = &server.requests()[1];
    assert!(request_text(next).contains("call_7"));
}

#[test]
fn the_repl_runs_its_commands_from_a_script() {
    let server = LlmServer::start(Wire::OpenAi);
    answer_summaries(&server);
    let setup = Setup::new(&server, Wire::OpenAi, SMALL_TRIGGERS);
    let export = setup.path().join("out.md");
    let script = format!(
        "turn number 1 first question, long enough that its summary saves room: the parser \
         in src/parser.rs fails on nested lists with an index error at line 212 when the input \
         has three levels, and the fix must keep the old error messages for the CLI users\n\
         /tokens\n\
         turn number 2 second question\n\
         /history 2\n\
         /context\n\
         /rename Planning\n\
         /sessions\n\
         /export {}\n\
         /summarize\n\
         /session 00000000-0000-4000-8000-000000000000\n\
         /bogus\n\
         /new\n\
         /sessions\n\
         /session chat-a\n\
         /delete\n\
         /quit\n\
         this is never sent\n",
        export.display()
    );
    let output = setup.run(&["chat", "--session", "chat-a"], &script);
    // The script's bad lines make it fail (a usage error, the last one),
    // after every other line ran.
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(err.contains("unknown command /bogus"), "{err}");
    assert!(
        err.contains("there is no session with id 00000000-"),
        "{err}"
    );
    assert!(err.contains("2 line(s) of the chat script failed"), "{err}");
    let out = stdout(&output);
    assert!(out.contains("answer to message"), "{out}");
    assert!(out.contains("token display on"), "{out}");
    assert!(
        out.contains(" in, ") && out.contains(" out, test-model]"),
        "{out}"
    );
    assert!(
        out.contains("turn number 2 second question"),
        "/history: {out}"
    );
    assert!(out.contains("summarization triggers:"), "/context: {out}");
    assert!(out.contains("renamed to \"Planning\""), "{out}");
    assert!(
        out.contains("* chat-a"),
        "/sessions marks the current one: {out}"
    );
    assert!(out.contains("wrote 4 messages to"), "{out}");
    assert!(out.contains("summarized"), "/summarize: {out}");
    assert!(out.contains("new session"), "{out}");
    let deleted = out
        .find("deleted session \"chat-a\"")
        .expect("/delete reports");
    assert!(
        out[deleted..].contains("\nnew session "),
        "deleting the current session starts a new one: {out}"
    );
    assert!(
        !setup
            .store()
            .list(&agent_host_store::PageRequest::first(50))
            .unwrap()
            .sessions
            .iter()
            .any(|m| m.key.as_deref().is_some_and(|k| k.starts_with("00000000-"))),
        "an unknown id never becomes a key"
    );
    let md = std::fs::read_to_string(&export).unwrap();
    assert!(md.starts_with("# Planning"), "{md}");
    assert!(
        !chat_requests(&server)
            .iter()
            .any(|r| request_text(r).contains("never sent"))
    );
    assert!(
        setup
            .store()
            .get(&SessionRef::key("default", "chat-a"))
            .unwrap()
            .is_none()
    );
}

#[test]
fn heartbeat_turns_neither_load_nor_save_history() {
    let server = LlmServer::start(Wire::Anthropic);
    let setup = Setup::new(&server, Wire::Anthropic, "");
    setup.ok(
        &["run", "--session", "beat", "--message", "stored turn"],
        "",
    );
    let out = setup.ok(&["chat", "--no-history"], "ping one\nping two\n");
    assert_eq!(out.matches("reply").count(), 2, "{out}");
    let requests = server.requests();
    let last = request_text(requests.last().unwrap());
    assert!(last.contains("ping two") && !last.contains("ping one"));
    assert!(!last.contains("stored turn"));
    let history = setup
        .store()
        .load(&SessionRef::key("default", "beat"))
        .unwrap();
    assert_eq!(history.messages.len(), 2, "only the stored turn's pair");
}

#[test]
fn the_context_command_reports_usage_and_trigger_distances() {
    let server = LlmServer::start(Wire::OpenAi);
    let setup = Setup::new(&server, Wire::OpenAi, SMALL_TRIGGERS);
    setup.ok(&["run", "--session", "c", "--message", "hello"], "");
    let text = setup.ok(&["context", "--session", "c"], "");
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("messages"))
        .unwrap_or_else(|| panic!("no messages trigger line: {text}"));
    assert!(line.contains("2 / 6"), "{line}");
    let json: Value =
        serde_json::from_str(&setup.ok(&["context", "--session", "c", "--json"], "")).unwrap();
    let trigger = &json["triggers"][0];
    assert_eq!(trigger["name"], "messages");
    assert_eq!(trigger["current"], 2);
    assert_eq!(trigger["limit"], 6);
    assert_eq!(json["session"]["messages"], 2);
    let missing = setup.run(&["context", "--session", "nope"], "");
    assert!(!missing.status.success());
    assert!(stderr(&missing).contains("no session \"nope\""));
}

#[test]
fn a_span_too_long_for_one_call_is_summarized_in_parts_then_merged() {
    let server = LlmServer::start(Wire::OpenAi);
    answer_summaries(&server);
    let setup = Setup::new(
        &server,
        Wire::OpenAi,
        "[context]\ncontext_limit = 3000\nkeep_last_turns = 1\n",
    );
    // Twelve messages of about 400 tokens: 4,800 tokens, where one call
    // takes at most half the window (1,500).
    let history: Vec<Value> = (0..12)
        .map(|i| {
            let role = if i % 2 == 0 { "user" } else { "assistant" };
            serde_json::json!({"role": role, "content": format!("message {i}: {}", "words and more words ".repeat(80))})
        })
        .collect();
    let file = setup.path().join("long.json");
    std::fs::write(&file, Value::Array(history).to_string()).unwrap();
    setup.ok(
        &[
            "sessions",
            "import",
            "--session",
            "long",
            file.to_str().unwrap(),
        ],
        "",
    );
    let out = setup.ok(&["run", "--session", "long", "--message", "and now?"], "");
    assert!(out.contains("context compacted"), "{out}");
    let summaries: Vec<Recorded> = server.requests().into_iter().filter(is_summary).collect();
    assert!(
        summaries.len() >= 3,
        "at least two parts and a merge: {} requests",
        summaries.len()
    );
    let merge = summaries.last().unwrap();
    assert!(request_text(merge).contains("Merge these partial summaries"));
    assert!(request_text(merge).contains("<part n=\\\"2\\\">"));
    let meta = setup
        .store()
        .get(&SessionRef::key("default", "long"))
        .unwrap()
        .unwrap();
    assert_eq!(meta.checkpoints.len(), 1);
}

#[test]
fn with_v_the_context_compacted_event_is_logged_and_the_report_has_it() {
    let server = LlmServer::start(Wire::OpenAi);
    answer_summaries(&server);
    let setup = Setup::new(&server, Wire::OpenAi, SMALL_TRIGGERS);
    let report = setup.path().join("report.json");
    let mut logged = false;
    let mut reported = false;
    for i in 1..=5 {
        let output = setup.run(
            &[
                "-v",
                "run",
                "--session",
                "v",
                "--message",
                &format!("turn number {i}"),
                "--report",
                report.to_str().unwrap(),
            ],
            "",
        );
        assert!(output.status.success(), "{}", stderr(&output));
        logged |= stderr(&output).contains("context_compacted");
        let json: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
        reported |= json["pipeline"]["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["event"] == "context_compacted");
    }
    assert!(logged, "-v shows the context_compacted event");
    assert!(reported, "the run report has a context_compacted line");
}

#[test]
fn completions_are_printed_for_each_shell() {
    for shell in ["bash", "zsh", "fish"] {
        let output = agent_host().args(["completions", shell]).output().unwrap();
        assert!(output.status.success());
        let script = stdout(&output);
        assert!(script.contains("agent-host"), "{shell}");
        assert!(
            script.contains("chat") && script.contains("sessions"),
            "{shell}"
        );
    }
    let bad = agent_host()
        .args(["completions", "cmd.exe"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn a_wrong_configuration_exits_78_naming_the_file_and_key() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("agent-host.toml"),
        "[context]\ncontext_limt = 1000\n",
    )
    .unwrap();
    let output = agent_host()
        .args(["context", "--session", "x"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(78), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(
        err.contains("agent-host.toml:2") && err.contains("context_limt"),
        "{err}"
    );
}

#[test]
fn with_auto_summarize_off_no_turn_summarizes_but_summarize_still_does() {
    let server = LlmServer::start(Wire::OpenAi);
    answer_summaries(&server);
    let extra = format!("{SMALL_TRIGGERS}auto_summarize = false\n");
    let setup = Setup::new(&server, Wire::OpenAi, &extra);
    let mut script = String::new();
    for i in 1..=5 {
        script.push_str(&format!("turn number {i}\n"));
    }
    script.push_str("/summarize\n");
    let out = setup.ok(&["chat", "--session", "off"], &script);
    assert!(!out.contains("context compacted"), "{out}");
    assert!(out.contains("summarized"), "/summarize still works: {out}");
    let meta = setup
        .store()
        .get(&SessionRef::key("default", "off"))
        .unwrap()
        .unwrap();
    assert_eq!(meta.checkpoints.len(), 1);
}

#[test]
fn openai_reasoning_models_get_max_completion_tokens_when_configured() {
    let server = LlmServer::start(Wire::OpenAi);
    let setup = Setup::new(&server, Wire::OpenAi, "");
    let config = std::fs::read_to_string(setup.path().join("agent-host.toml")).unwrap();
    std::fs::write(
        setup.path().join("agent-host.toml"),
        config.replace(
            "max_retries = 2\n",
            "max_retries = 2\nmax_tokens_field = \"max_completion_tokens\"\nmax_tokens = 900\n",
        ),
    )
    .unwrap();
    setup.ok(&["run", "--session", "o", "--message", "hi"], "");
    let body = &server.requests()[0].body;
    assert_eq!(body["max_completion_tokens"], 900, "{body}");
    assert!(body.get("max_tokens").is_none(), "{body}");
    let shown = setup.ok(&["config", "show"], "");
    assert!(
        shown.contains("max_tokens_field = \"max_completion_tokens\""),
        "{shown}"
    );
}

#[test]
fn reasoning_is_stored_but_not_sent_back_on_the_openai_wire() {
    let server = LlmServer::start(Wire::OpenAi);
    let setup = Setup::new(&server, Wire::OpenAi, "");
    server.push(Scripted::Answer(
        Answer::text("42").with_reasoning("THOUGHT-MARKER: six times seven"),
    ));
    setup.ok(&["run", "--session", "r", "--message", "what is 6x7?"], "");
    let history = setup
        .store()
        .load(&SessionRef::key("default", "r"))
        .unwrap();
    let reply = history.messages.last().unwrap();
    assert!(
        reply
            .reasoning
            .as_ref()
            .is_some_and(|r| r.text.contains("THOUGHT-MARKER")),
        "the reasoning is stored"
    );
    setup.ok(&["run", "--session", "r", "--message", "and 7x8?"], "");
    let second = request_text(&server.requests()[1]);
    assert!(second.contains("what is 6x7?") && second.contains("42"));
    assert!(!second.contains("THOUGHT-MARKER"), "{second}");
}

#[test]
fn bad_turn_inputs_exit_with_their_codes() {
    let server = LlmServer::start(Wire::OpenAi);
    let setup = Setup::new(&server, Wire::OpenAi, "");
    let empty = setup.run(&["run", "--session", "e", "--message", "-"], "  \n");
    assert_eq!(empty.status.code(), Some(2), "{}", stderr(&empty));
    assert!(stderr(&empty).contains("the message is empty"));
    // The key's variable unset: a configuration problem.
    let mut command = agent_host();
    let no_key = command
        .args(["run", "--session", "k", "--message", "hi"])
        .current_dir(setup.path())
        // Trusted by the run above.
        .env("XDG_CONFIG_HOME", setup.path().join("user-config"))
        .env_remove("TEST_LLM_KEY")
        .output()
        .unwrap();
    assert_eq!(no_key.status.code(), Some(78), "{}", stderr(&no_key));
    assert!(stderr(&no_key).contains("TEST_LLM_KEY"));
    // A scripted chat whose turn fails exits with the provider's code.
    for _ in 0..3 {
        server.push(Scripted::ServerError);
    }
    let chat = setup.run(&["chat", "--session", "c"], "hello\n");
    assert_eq!(chat.status.code(), Some(69), "{}", stderr(&chat));
    assert!(!server.requests().is_empty());
}

#[test]
fn an_aggressive_retry_after_a_summary_keeps_the_checkpoint_and_says_so() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let server = LlmServer::start(Wire::OpenAi);
    let summarized = std::sync::Arc::new(AtomicBool::new(false));
    let refused = std::sync::Arc::new(AtomicBool::new(false));
    let (s, r) = (summarized.clone(), refused.clone());
    server.respond_with(move |req| {
        if is_summary(req) {
            s.store(true, Ordering::SeqCst);
            return Scripted::Answer(Answer::text("## Files Modified\n- none\nSUMMARY-MARKER-42"));
        }
        // The first chat request after a summary is refused as too long.
        if s.load(Ordering::SeqCst) && !r.swap(true, Ordering::SeqCst) {
            return Scripted::ContextLength;
        }
        Scripted::Answer(Answer::text("fine"))
    });
    let setup = Setup::new(&server, Wire::OpenAi, SMALL_TRIGGERS);
    let report = setup.path().join("report.json");
    let mut seen = String::new();
    for i in 1..=5 {
        seen = setup.ok(
            &[
                "run",
                "--session",
                "a",
                "--message",
                &format!("turn number {i}"),
                "--report",
                report.to_str().unwrap(),
            ],
            "",
        );
        if refused.load(Ordering::SeqCst) {
            break;
        }
    }
    assert!(
        refused.load(Ordering::SeqCst),
        "a summary happened, then a refusal"
    );
    assert!(seen.contains("pruned aggressively"), "{seen}");
    assert!(
        seen.contains("context compacted"),
        "the first try's checkpoint is reported: {seen}"
    );
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(
        json["first_attempt"]["events"][0]["event"], "context_compacted",
        "{json}"
    );
    let summaries = server.requests().into_iter().filter(is_summary).count();
    assert_eq!(summaries, 1, "the retry does not summarize again");
    let meta = setup
        .store()
        .get(&SessionRef::key("default", "a"))
        .unwrap()
        .unwrap();
    assert_eq!(meta.checkpoints.len(), 1);
}
