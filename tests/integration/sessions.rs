//! `agent-host sessions` and `run --session` as a user runs them: each test
//! has its own folder as the working directory and the store, and never sees
//! the caller's `AGENT_HOST_STORE`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use agent_host_core::Message;
use agent_host_store::{FileStore, NewSession, PageRequest, SessionRef, SessionStore};
use chrono::{DateTime, TimeZone, Utc};
use serde_json::Value;

use crate::util::{agent_host, corpus, stderr, stdout};

/// Runs `agent-host` in `dir` with `args`, feeding `stdin` (a pipe, so never
/// a terminal), with no store variable unless `env` sets one.
fn cli_env(dir: &Path, env: Option<&str>, args: &[&str], stdin: &str) -> Output {
    let mut command = agent_host();
    command
        .args(args)
        .current_dir(dir)
        .env_remove("AGENT_HOST_STORE")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(spec) = env {
        command.env("AGENT_HOST_STORE", spec);
    }
    let mut child = command.spawn().expect("agent-host starts");
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(stdin.as_bytes())
        .expect("stdin accepts the input");
    child.wait_with_output().expect("agent-host finishes")
}

/// Runs `agent-host --store STORE ARGS` in `dir`, where STORE is `dir/store`.
fn cli(dir: &Path, args: &[&str]) -> Output {
    let store = dir.join("store");
    let mut all = vec!["--store", store.to_str().unwrap()];
    all.extend_from_slice(args);
    cli_env(dir, None, &all, "")
}

/// Like [`cli`], and the command must succeed; returns its standard output.
fn ok(dir: &Path, args: &[&str]) -> String {
    let output = cli(dir, args);
    assert!(
        output.status.success(),
        "agent-host {args:?} failed ({:?}):\n{}",
        output.status.code(),
        stderr(&output)
    );
    stdout(&output)
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// The embedded sample session written to `dir/sample.jsonl`.
fn sample_file(dir: &Path) -> PathBuf {
    let path = dir.join("sample.jsonl");
    std::fs::write(&path, agent_host_engine::transcript::SAMPLE).unwrap();
    path
}

/// Imports the sample as session `key` of the default agent.
fn import_sample(dir: &Path, key: &str) {
    let file = sample_file(dir);
    let text = ok(
        dir,
        &[
            "sessions",
            "import",
            file.to_str().unwrap(),
            "--session",
            key,
        ],
    );
    assert!(text.starts_with("imported 12 messages"), "{text}");
}

fn sample_messages() -> Vec<Message> {
    agent_host_engine::transcript::sample().transcript.messages
}

/// The keys `sessions list --json` shows, in order.
fn listed_keys(dir: &Path, extra: &[&str]) -> Vec<String> {
    let mut args = vec!["sessions", "list", "--json"];
    args.extend_from_slice(extra);
    json(&ok(dir, &args))
        .as_array()
        .expect("an array")
        .iter()
        .map(|s| s["key"].as_str().unwrap_or("").to_owned())
        .collect()
}

#[test]
fn import_keeps_every_message_of_a_corpus_session_and_a_jsonl_file() {
    let dir = tempfile::tempdir().unwrap();
    let sample = sample_file(dir.path());
    let text = ok(
        dir.path(),
        &[
            "sessions",
            "import",
            sample.to_str().unwrap(),
            "--session",
            "telegram:123456",
            "--title",
            "The sample",
        ],
    );
    assert!(
        text.contains("imported 12 messages") && text.contains("(jsonl)"),
        "{text}"
    );
    let store = FileStore::open(dir.path().join("store")).unwrap();
    let history = store
        .load(&SessionRef::key("default", "telegram:123456"))
        .unwrap();
    assert_eq!(history.messages, sample_messages());
    assert_eq!(history.meta.title.as_deref(), Some("The sample"));

    // The same file again adds nothing: messages the session holds (by id)
    // are not appended twice.
    let text = ok(
        dir.path(),
        &[
            "sessions",
            "import",
            sample.to_str().unwrap(),
            "--session",
            "telegram:123456",
        ],
    );
    assert!(text.starts_with("nothing new: the 12 messages"), "{text}");
    let again = store
        .load(&SessionRef::key("default", "telegram:123456"))
        .unwrap();
    assert_eq!(again.messages, sample_messages());
    // A log that grew since adds only what is new.
    let mut grown = agent_host_engine::transcript::SAMPLE.to_owned();
    grown.push_str("{\"type\":\"user\",\"id\":\"later\",\"content\":\"one more thing\"}\n");
    let grown_file = dir.path().join("grown.jsonl");
    std::fs::write(&grown_file, grown).unwrap();
    let text = ok(
        dir.path(),
        &[
            "sessions",
            "import",
            grown_file.to_str().unwrap(),
            "--session",
            "telegram:123456",
        ],
    );
    assert!(
        text.starts_with("imported 1 messages") && text.contains("(12 were in it already)"),
        "{text}"
    );

    let Some(corpus) = corpus() else { return };
    let claude = corpus.join("claude-code-sessions-ccv/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl");
    let expected = agent_host_engine::transcript::load(&claude, None, &Default::default()).unwrap();
    let n = expected.transcript.messages.len();
    let text = ok(
        dir.path(),
        &[
            "sessions",
            "import",
            claude.to_str().unwrap(),
            "--session",
            "claude",
            "--agent",
            "coder",
            "--format",
            "claude-code",
        ],
    );
    assert!(
        text.starts_with(&format!("imported {n} messages")),
        "{text}"
    );
    assert!(text.contains("(claude-code)"), "{text}");
    let stored = store.load(&SessionRef::key("coder", "claude")).unwrap();
    assert!(stored.warnings.is_empty(), "{:?}", stored.warnings);
    assert_eq!(stored.messages, expected.transcript.messages);
    assert_eq!(stored.meta.message_count, n as u64);
}

/// The store of `dir` with session `key` of the default agent holding
/// `messages`, as an earlier version left it.
fn session_holding(dir: &Path, key: &str, messages: &[Message]) -> (FileStore, SessionRef) {
    let store = FileStore::open(dir.join("store")).unwrap();
    let session = store
        .get_or_create(&NewSession::new("default").with_key(key))
        .unwrap()
        .meta
        .reference();
    store.append(&session, messages).unwrap();
    (store, session)
}

/// A document imported by a version whose derived ids hashed with FNV-1a is
/// recognised after the change to XXH3: importing it again adds nothing, and
/// the document grown by one message adds that one.
#[test]
fn a_document_imported_with_the_earlier_ids_is_not_imported_again() {
    use agent_host_core::message::{derived_id, document_id};

    let dir = tempfile::tempdir().unwrap();
    let texts = ["Find the bug", "It is in parse.rs, line 12", "Fix it"];
    let roles = ["user", "assistant", "user"];
    let document = |n: usize| {
        let messages: Vec<Value> = (0..n)
            .map(|i| serde_json::json!({"role": roles[i], "content": texts[i]}))
            .collect();
        Value::Array(messages).to_string()
    };
    // The session as the earlier version left it: the first two messages,
    // with their ids in the earlier form.
    let held: Vec<Message> = [Message::user(texts[0]), Message::assistant(texts[1])]
        .into_iter()
        .enumerate()
        .map(|(i, mut m)| {
            m.id = derived_id("openai", i, texts[i]);
            assert_ne!(m.id, document_id("openai", i, texts[i]));
            m
        })
        .collect();
    let (store, session) = session_holding(dir.path(), "earlier", &held);

    let file = dir.path().join("chat.json");
    let import = |document: String| {
        std::fs::write(&file, document).unwrap();
        let file = file.to_str().unwrap();
        ok(
            dir.path(),
            &["sessions", "import", file, "--session", "earlier"],
        )
    };
    let text = import(document(2));
    assert!(text.starts_with("nothing new: the 2 messages"), "{text}");
    let text = import(document(3));
    assert!(text.starts_with("imported 1 message"), "{text}");
    let stored = store.load(&session).unwrap().messages;
    let ids: Vec<&str> = stored.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            held[0].id.as_str(),
            held[1].id.as_str(),
            document_id("openai", 2, texts[2]).as_str()
        ]
    );
    // Another text at a held place is another message.
    let text = import(document(3).replace(texts[1], "It is in lex.rs"));
    assert!(text.starts_with("imported 1 message"), "{text}");
    let last = store.load(&session).unwrap().messages.pop().unwrap();
    assert_eq!(last.id, document_id("openai", 1, "It is in lex.rs"));
}

/// A `claude -p` stream-json log (no uuids, so every id is derived)
/// imported by a version that hashed ids with FNV-1a is recognised: a
/// record's second tool result (`:1` after its id) and a streamed turn,
/// whose id hashes its first piece only, included.
#[test]
fn a_claude_code_log_imported_with_the_earlier_ids_is_not_imported_again() {
    use agent_host_core::format::{Format, parse};
    use agent_host_core::message::{derived_id, document_id, document_id_before};

    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("stream.jsonl");
    std::fs::write(
        &log,
        r#"{"type":"system","subtype":"init","cwd":"/w","session_id":"s1","tools":["Bash"],"model":"claude-sonnet-4-5"}
{"type":"assistant","message":{"id":"msg_1","role":"assistant","content":[{"type":"text","text":"Checking both."}]},"parent_tool_use_id":null,"session_id":"s1"}
{"type":"assistant","message":{"id":"msg_1","role":"assistant","content":[{"type":"text","text":"Listing them now."},{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls a"}},{"type":"tool_use","id":"toolu_2","name":"Bash","input":{"command":"ls b"}}]},"parent_tool_use_id":null,"session_id":"s1"}
{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_1","type":"tool_result","content":"a.txt"},{"tool_use_id":"toolu_2","type":"tool_result","content":"b.txt"}]},"parent_tool_use_id":null,"session_id":"s1"}
{"type":"assistant","message":{"id":"msg_2","role":"assistant","content":[{"type":"text","text":"Two files."}]},"parent_tool_use_id":null,"session_id":"s1"}
"#,
    )
    .unwrap();
    let read = parse(Format::ClaudeCode, &std::fs::read_to_string(&log).unwrap())
        .unwrap()
        .messages;
    // The session as the earlier version left it: every id in its FNV-1a
    // form. The streamed turn's id hashed its first piece (line 2).
    assert_eq!(read.len(), 4);
    assert_eq!(read[0].id, document_id("claude-code", 2, "Checking both."));
    assert_ne!(read[0].text(), "Checking both.");
    assert!(read[2].id.ends_with(":1"), "{}", read[2].id);
    let held: Vec<Message> = read
        .iter()
        .cloned()
        .enumerate()
        .map(|(i, mut m)| {
            m.id = if i == 0 {
                derived_id("claude-code", 2, "Checking both.")
            } else {
                document_id_before(&m.id, &m.text()).expect("a derived id")
            };
            m
        })
        .collect();
    let (store, session) = session_holding(dir.path(), "cc", &held);

    let file = log.to_str().unwrap();
    let text = ok(dir.path(), &["sessions", "import", file, "--session", "cc"]);
    assert!(text.starts_with("nothing new: the 4 messages"), "{text}");
    assert_eq!(store.load(&session).unwrap().messages.len(), 4);
}

/// A Codex CLI rollout (the shape Codex 0.5x writes) imports, detected, with
/// its tool calls paired; twice, it adds nothing; named as Claude Code, it
/// is refused naming Codex rather than imported as nothing.
#[test]
fn a_codex_rollout_imports_once_and_is_not_mistaken_for_claude_code() {
    let dir = tempfile::tempdir().unwrap();
    let rollout = dir
        .path()
        .join("rollout-2025-10-29T00-59-38-019a2d7a.jsonl");
    std::fs::write(
        &rollout,
        r#"{"timestamp":"2025-10-29T00:59:38.317Z","type":"session_meta","payload":{"id":"019a2d7a","cwd":"/w","cli_version":"0.50.0"}}
{"timestamp":"2025-10-29T00:59:38.320Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"List the files"}]}}
{"timestamp":"2025-10-29T00:59:38.322Z","type":"turn_context","payload":{"cwd":"/w","model":"gpt-5-codex"}}
{"timestamp":"2025-10-29T00:59:40.200Z","type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{\"command\":[\"ls\"]}","call_id":"call_A1"}}
{"timestamp":"2025-10-29T00:59:41.000Z","type":"response_item","payload":{"type":"function_call_output","call_id":"call_A1","output":"a.txt\nb.txt"}}
{"timestamp":"2025-10-29T00:59:42.000Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"a.txt and b.txt"}]}}
"#,
    )
    .unwrap();
    let file = rollout.to_str().unwrap();
    let text = ok(dir.path(), &["sessions", "import", file, "--session", "cx"]);
    assert!(
        text.starts_with("imported 4 messages") && text.contains("(codex)"),
        "{text}"
    );
    let text = ok(dir.path(), &["sessions", "import", file, "--session", "cx"]);
    assert!(text.starts_with("nothing new: the 4 messages"), "{text}");
    let store = FileStore::open(dir.path().join("store")).unwrap();
    let history = store.load(&SessionRef::key("default", "cx")).unwrap();
    assert_eq!(history.messages[1].tool_calls[0].name, "shell");
    assert_eq!(history.messages[2].tool_name.as_deref(), Some("shell"));

    let output = cli(
        dir.path(),
        &[
            "sessions",
            "import",
            file,
            "--session",
            "cc",
            "--format",
            "claude-code",
        ],
    );
    assert_eq!(output.status.code(), Some(65), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("--format codex"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn import_of_bad_input_exits_65_and_creates_no_session() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, r#"[{"role": "robot", "content": "x"}]"#).unwrap();
    let output = cli(
        dir.path(),
        &[
            "sessions",
            "import",
            bad.to_str().unwrap(),
            "--session",
            "k",
        ],
    );
    assert_eq!(output.status.code(), Some(65), "{}", stderr(&output));
    assert!(stderr(&output).contains("unknown role `robot`"));
    assert!(listed_keys(dir.path(), &[]).is_empty());
}

#[test]
fn list_pages_newest_first_in_text_and_json() {
    let dir = tempfile::tempdir().unwrap();
    for key in ["s1", "s2", "s3", "s4", "s5"] {
        import_sample(dir.path(), key);
    }
    assert_eq!(listed_keys(dir.path(), &[]), ["s5", "s4", "s3", "s2", "s1"]);
    assert_eq!(
        listed_keys(dir.path(), &["--per-page", "2", "--page", "2"]),
        ["s3", "s2"]
    );
    assert_eq!(
        listed_keys(dir.path(), &["--per-page", "2", "--page", "3"]),
        ["s1"]
    );
    assert!(listed_keys(dir.path(), &["--per-page", "2", "--page", "4"]).is_empty());

    let first = &json(&ok(dir.path(), &["sessions", "list", "--json"]))[0];
    for field in [
        "id",
        "key",
        "title",
        "agent",
        "message_count",
        "created",
        "updated",
    ] {
        assert!(first.get(field).is_some(), "no {field} in {first}");
    }
    assert_eq!(first["message_count"], 12);
    assert_eq!(first["agent"], "default");

    let text = ok(dir.path(), &["sessions", "list", "--per-page", "2"]);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("UPDATED (UTC)"), "{text}");
    assert!(
        lines[1].contains(" s5") && lines[1].contains("12"),
        "{text}"
    );
    assert!(lines[2].contains(" s4"), "{text}");
    assert_eq!(
        lines[3],
        "sessions 1 to 2 of 5 (page 1 of 3); --page 2 for more"
    );

    for bad in ["0", "201"] {
        let output = cli(dir.path(), &["sessions", "list", "--per-page", bad]);
        assert_eq!(output.status.code(), Some(2), "--per-page {bad}");
    }
    assert_eq!(
        cli(dir.path(), &["sessions", "list", "--page", "0"])
            .status
            .code(),
        Some(2)
    );
}

#[test]
fn list_filters_by_agent() {
    let dir = tempfile::tempdir().unwrap();
    let sample = sample_file(dir.path());
    let file = sample.to_str().unwrap();
    ok(dir.path(), &["sessions", "import", file, "--session", "a"]);
    ok(
        dir.path(),
        &[
            "sessions",
            "import",
            file,
            "--session",
            "b",
            "--agent",
            "coder",
        ],
    );
    assert_eq!(listed_keys(dir.path(), &["--agent", "coder"]), ["b"]);
    assert_eq!(listed_keys(dir.path(), &["--agent", "default"]), ["a"]);
    // The same key names another session under another agent.
    let output = cli(dir.path(), &["sessions", "show", "b"]);
    assert_eq!(output.status.code(), Some(1));
    ok(dir.path(), &["sessions", "show", "b", "--agent", "coder"]);
}

/// The ids of the records `sessions show --json` prints.
fn shown_ids(dir: &Path, filters: &[&str]) -> Vec<String> {
    let mut args = vec!["sessions", "show", "k", "--json"];
    args.extend_from_slice(filters);
    json(&ok(dir, &args))
        .as_array()
        .expect("an array")
        .iter()
        .map(|r| r["id"].as_str().expect("an id").to_owned())
        .collect()
}

#[test]
fn show_filters_with_the_core_queries() {
    let dir = tempfile::tempdir().unwrap();
    import_sample(dir.path(), "k");
    let all: Vec<String> = sample_messages().into_iter().map(|m| m.id).collect();
    assert_eq!(shown_ids(dir.path(), &[]), all);
    assert_eq!(shown_ids(dir.path(), &["--limit", "2"]), all[10..]);
    assert_eq!(
        shown_ids(dir.path(), &["--role", "system", "--role", "user"]),
        ["m00", "m01", "m11"].map(String::from)
    );
    let pytest = shown_ids(dir.path(), &["--contains", "PYTEST"]);
    assert!(!pytest.is_empty() && pytest.len() < all.len(), "{pytest:?}");
    assert!(pytest.contains(&"m02".to_owned()), "{pytest:?}");
    // The sample's last message is at 09:01:30 (or later): a time bound cuts the start.
    let later = shown_ids(dir.path(), &["--since", "2025-06-02T09:00:30Z"]);
    assert!(!later.is_empty() && later.len() < all.len(), "{later:?}");
    assert!(!later.contains(&"m00".to_owned()));
    // Nothing in the sample is from the last two days.
    assert!(shown_ids(dir.path(), &["--since", "2d"]).is_empty());

    let text = ok(
        dir.path(),
        &["sessions", "show", "k", "--role", "tool", "--limit", "1"],
    );
    assert!(
        text.starts_with("session \"k\" of agent \"default\": 12 messages, 1 shown"),
        "{text}"
    );
    assert!(text.contains("tool"), "{text}");

    let bad = cli(
        dir.path(),
        &["sessions", "show", "k", "--since", "yesterday"],
    );
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        stderr(&bad).contains("invalid time `yesterday`"),
        "{}",
        stderr(&bad)
    );
}

#[test]
fn export_writes_markdown_titled_by_the_session() {
    let dir = tempfile::tempdir().unwrap();
    import_sample(dir.path(), "k");
    ok(
        dir.path(),
        &["sessions", "rename", "k", "Why the parser tests fail"],
    );
    let md = dir.path().join("k.md");
    ok(
        dir.path(),
        &["sessions", "export", "k", "-o", md.to_str().unwrap()],
    );
    let text = std::fs::read_to_string(&md).unwrap();
    assert_eq!(
        text,
        agent_host_core::export::to_markdown(&sample_messages(), Some("Why the parser tests fail"))
    );
    assert!(
        text.starts_with("# Why the parser tests fail\n\n### System"),
        "{text}"
    );
    // Without -o, to standard output.
    assert_eq!(ok(dir.path(), &["sessions", "export", "k"]), text);
}

#[test]
fn rename_and_info_by_key_and_by_id() {
    let dir = tempfile::tempdir().unwrap();
    import_sample(dir.path(), "k");
    let text = ok(dir.path(), &["sessions", "rename", "k", "New title"]);
    assert!(text.contains("title New title"), "{text}");

    let info = json(&ok(dir.path(), &["sessions", "info", "k", "--json"]));
    assert_eq!(info["title"], "New title");
    assert_eq!(info["key"], "k");
    assert_eq!(info["message_count"], 12);
    assert_eq!(info["roles"]["tool"], 4);
    assert_eq!(info["tool_calls"]["calls"], 4);
    assert_eq!(info["tool_calls"]["answered"], 4);
    assert!(info["tokens"].as_u64().unwrap() > 100, "{info}");
    let log = PathBuf::from(info["files"]["log"]["path"].as_str().unwrap());
    assert!(
        log.starts_with(dir.path().join("store")),
        "{}",
        log.display()
    );
    assert_eq!(
        info["files"]["log"]["bytes"].as_u64(),
        Some(std::fs::metadata(&log).unwrap().len())
    );

    // The id names the same session.
    let id = info["id"].as_str().unwrap().to_owned();
    let by_id = json(&ok(dir.path(), &["sessions", "info", &id, "--json"]));
    assert_eq!(by_id["key"], "k");
    ok(dir.path(), &["sessions", "rename", &id, ""]);
    let text = ok(dir.path(), &["sessions", "info", "k"]);
    assert!(text.contains("title:       (none)"), "{text}");
    assert!(
        text.contains("messages:    12 (assistant 5, system 1, tool 4, user 2)"),
        "{text}"
    );
    assert!(text.contains("tokens:      about"), "{text}");
}

#[test]
fn delete_asks_for_yes_when_not_on_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    import_sample(dir.path(), "k");
    let refused = cli(dir.path(), &["sessions", "delete", "k"]);
    assert_eq!(refused.status.code(), Some(2));
    let err = stderr(&refused);
    assert!(err.contains("refusing to delete session \"k\""), "{err}");
    assert!(err.contains("--yes"), "{err}");
    assert_eq!(listed_keys(dir.path(), &[]), ["k"]);

    let text = ok(dir.path(), &["sessions", "delete", "k", "--yes"]);
    assert!(text.contains("deleted session \"k\""), "{text}");
    assert!(listed_keys(dir.path(), &[]).is_empty());

    // Gone: an error naming it and saying how to see what there is.
    let commands: [&[&str]; 5] = [
        &["sessions", "show", "k"],
        &["sessions", "export", "k"],
        &["sessions", "info", "k"],
        &["sessions", "rename", "k", "title"],
        &["sessions", "delete", "k", "--yes"],
    ];
    for args in commands {
        let output = cli(dir.path(), args);
        assert_eq!(output.status.code(), Some(1), "{args:?}");
        let err = stderr(&output);
        assert!(err.contains("no session \"k\""), "{args:?}: {err}");
        assert!(err.contains("agent-host sessions list"), "{args:?}: {err}");
    }
}

#[test]
fn clear_keeps_the_session_and_drops_its_messages() {
    let dir = tempfile::tempdir().unwrap();
    import_sample(dir.path(), "k");
    ok(dir.path(), &["sessions", "rename", "k", "Kept"]);
    let refused = cli(dir.path(), &["sessions", "clear", "k"]);
    assert_eq!(refused.status.code(), Some(2));
    assert_eq!(
        json(&ok(dir.path(), &["sessions", "info", "k", "--json"]))["message_count"],
        12
    );
    let text = ok(dir.path(), &["sessions", "clear", "k", "-y"]);
    assert!(text.contains("12 messages removed"), "{text}");
    let info = json(&ok(dir.path(), &["sessions", "info", "k", "--json"]));
    assert_eq!(info["message_count"], 0);
    assert_eq!(info["title"], "Kept");
    assert!(
        json(&ok(dir.path(), &["sessions", "show", "k", "--json"]))
            .as_array()
            .unwrap()
            .is_empty()
    );
}

#[test]
fn cleanup_deletes_only_sessions_idle_longer_than_the_age() {
    let dir = tempfile::tempdir().unwrap();
    // A session last written in 2020, through the store with a clock.
    let then: DateTime<Utc> = Utc.with_ymd_and_hms(2020, 1, 1, 0, 0, 0).unwrap();
    let old = FileStore::open(dir.path().join("store"))
        .unwrap()
        .with_clock(move || then);
    let opened = old
        .get_or_create(&NewSession::new("default").with_key("old"))
        .unwrap();
    old.append(
        &opened.meta.reference(),
        &[Message::user("hello").with_id("m1")],
    )
    .unwrap();
    drop(old);
    import_sample(dir.path(), "new");

    let dry = json(&ok(
        dir.path(),
        &[
            "sessions",
            "cleanup",
            "--older-than",
            "30d",
            "--dry-run",
            "--json",
        ],
    ));
    let keys: Vec<&str> = dry
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["old"]);
    assert_eq!(dry[0]["updated"], "2020-01-01T00:00:00Z");
    assert_eq!(listed_keys(dir.path(), &[]), ["new", "old"]);

    let text = ok(dir.path(), &["sessions", "cleanup", "--older-than", "30d"]);
    assert!(
        text.starts_with("deleted 1 sessions idle for more than 30d"),
        "{text}"
    );
    assert!(text.contains("\"old\""), "{text}");
    assert_eq!(listed_keys(dir.path(), &[]), ["new"]);
    let none = json(&ok(
        dir.path(),
        &["sessions", "cleanup", "--older-than", "30d", "--json"],
    ));
    assert!(none.as_array().unwrap().is_empty());

    let bad = cli(dir.path(), &["sessions", "cleanup", "--older-than", "30"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        stderr(&bad).contains("the unit is missing"),
        "{}",
        stderr(&bad)
    );
}

#[test]
fn hostile_keys_round_trip_through_the_cli_and_stay_in_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let long = "k".repeat(600);
    let keys = [
        "telegram:123456",
        "../../escape",
        "a/b\\c",
        "..",
        "CON",
        "nul.txt",
        "line\nbreak",
        "\u{1b}[31mred",
        " padded ",
        "日本語のキー",
        long.as_str(),
    ];
    for key in keys {
        import_sample(dir.path(), key);
    }
    let mut listed = listed_keys(dir.path(), &["--per-page", "200"]);
    listed.sort();
    let mut expected: Vec<String> = keys.iter().map(|k| (*k).to_owned()).collect();
    expected.sort();
    assert_eq!(listed, expected);
    for key in keys {
        let info = json(&ok(dir.path(), &["sessions", "info", key, "--json"]));
        assert_eq!(info["key"], key);
        assert_eq!(info["message_count"], 12);
        let log = PathBuf::from(info["files"]["log"]["path"].as_str().unwrap());
        assert!(
            log.starts_with(dir.path().join("store/sessions")),
            "{key:?}: {}",
            log.display()
        );
    }
    // The text listing keeps every session on one line.
    let text = ok(dir.path(), &["sessions", "list", "--per-page", "200"]);
    assert_eq!(text.lines().count(), keys.len() + 2, "{text}");
    assert!(text.contains(r#""line\nbreak""#), "{text}");
    assert!(!text.contains('\u{1b}'), "{text}");
    // Nothing was written beside the store.
    let mut beside: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    beside.sort();
    assert_eq!(beside, ["sample.jsonl", "store"]);
    for key in keys {
        ok(dir.path(), &["sessions", "delete", key, "--yes"]);
    }
    assert!(listed_keys(dir.path(), &[]).is_empty());
}

#[test]
fn the_store_flag_beats_the_variable_which_beats_the_default() {
    let dir = tempfile::tempdir().unwrap();
    let sample = sample_file(dir.path());
    let file = sample.to_str().unwrap();
    let d = dir.path();
    let listed = |env: Option<&str>, flag: Option<&str>| -> Vec<String> {
        let mut args = Vec::new();
        if let Some(flag) = flag {
            args.extend(["--store", flag]);
        }
        args.extend(["sessions", "list", "--json"]);
        let output = cli_env(d, env, &args, "");
        assert!(output.status.success(), "{}", stderr(&output));
        json(&stdout(&output))
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["key"].as_str().unwrap().to_owned())
            .collect()
    };

    // Reading creates nothing.
    assert!(listed(None, None).is_empty());
    assert!(!d.join(".agent-host").exists());

    let import = |env: Option<&str>, flag: Option<&str>, key: &str| {
        let mut args = vec!["sessions", "import", file, "--session", key];
        if let Some(flag) = flag {
            // The flag is global: it may follow the subcommand.
            args.extend(["--store", flag]);
        }
        let output = cli_env(d, env, &args, "");
        assert!(output.status.success(), "{}", stderr(&output));
    };
    import(None, None, "in-default");
    import(Some("from-env"), None, "in-env");
    import(Some("from-env"), Some("from-flag"), "in-flag");
    assert!(d.join(".agent-host/sessions").is_dir());
    assert!(d.join("from-env/sessions").is_dir());
    assert!(d.join("from-flag/sessions").is_dir());

    assert_eq!(listed(None, None), ["in-default"]);
    assert_eq!(listed(Some("from-env"), None), ["in-env"]);
    assert_eq!(listed(Some("from-env"), Some("from-flag")), ["in-flag"]);
    assert_eq!(listed(None, Some("from-env")), ["in-env"]);
    // An empty variable is no variable.
    assert_eq!(listed(Some(""), None), ["in-default"]);

    let empty = cli_env(d, None, &["--store", "", "sessions", "list"], "");
    assert_eq!(empty.status.code(), Some(2));
}

#[test]
fn run_reads_a_stored_session_and_appends_nothing() {
    let dir = tempfile::tempdir().unwrap();
    import_sample(dir.path(), "k");
    let from_file = agent_host_engine::transcript::SAMPLE;
    let direct = cli_env(
        dir.path(),
        None,
        &["run", "--input", "-", "--quiet"],
        from_file,
    );
    assert!(direct.status.success(), "{}", stderr(&direct));
    let stored = ok(dir.path(), &["run", "--session", "k", "--quiet"]);
    assert_eq!(stored, stdout(&direct));
    let id = json(&ok(dir.path(), &["sessions", "info", "k", "--json"]))["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        ok(dir.path(), &["run", "--session", &id, "--quiet"]),
        stored
    );

    let store = FileStore::open(dir.path().join("store")).unwrap();
    let page = store.list(&PageRequest::first(10)).unwrap();
    assert_eq!(page.sessions.len(), 1);
    assert_eq!(page.sessions[0].message_count, 12);

    let both = cli(dir.path(), &["run", "--session", "k", "--input", "x.json"]);
    assert_eq!(both.status.code(), Some(2));
    assert!(
        stderr(&both).contains("cannot be used with"),
        "{}",
        stderr(&both)
    );
    let unknown = cli(
        dir.path(),
        &["run", "--session", "nope", "--agent", "coder"],
    );
    assert_eq!(unknown.status.code(), Some(1));
    assert!(
        stderr(&unknown).contains("no session \"nope\" (neither a key of agent \"coder\""),
        "{}",
        stderr(&unknown)
    );
}

#[test]
fn the_commands_work_the_same_on_a_sqlite_store() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let db = d.join("sessions.db");
    let spec = format!("sqlite:{}", db.display());
    let sqlite = |args: &[&str]| -> String {
        let mut all = vec!["--store", spec.as_str()];
        all.extend_from_slice(args);
        let output = cli_env(d, None, &all, "");
        assert!(
            output.status.success(),
            "agent-host {all:?} failed:\n{}",
            stderr(&output)
        );
        stdout(&output)
    };
    // Reading creates no database.
    assert_eq!(sqlite(&["sessions", "list", "--json"]).trim(), "[]");
    assert!(!db.exists());

    let sample = sample_file(d);
    let text = sqlite(&[
        "sessions",
        "import",
        sample.to_str().unwrap(),
        "--session",
        "telegram:1",
    ]);
    assert!(text.starts_with("imported 12 messages"), "{text}");
    assert!(db.is_file());
    let list = json(&sqlite(&["sessions", "list", "--json"]));
    assert_eq!(list[0]["key"], "telegram:1");
    assert_eq!(list[0]["message_count"], 12);
    let ids: Vec<Value> = json(&sqlite(&[
        "sessions",
        "show",
        "telegram:1",
        "--json",
        "--role",
        "tool",
    ]))
    .as_array()
    .unwrap()
    .iter()
    .map(|r| r["id"].clone())
    .collect();
    assert_eq!(ids.len(), 4);
    sqlite(&["sessions", "rename", "telegram:1", "Chat"]);
    let info = json(&sqlite(&["sessions", "info", "telegram:1", "--json"]));
    assert_eq!(info["title"], "Chat");
    assert_eq!(info["files"]["database"]["path"], db.to_str().unwrap());
    assert_eq!(
        sqlite(&["run", "--session", "telegram:1", "--quiet", "--to", "jsonl"]),
        sqlite(&[
            "run",
            "--input",
            sample.to_str().unwrap(),
            "--quiet",
            "--to",
            "jsonl"
        ])
    );
    sqlite(&["sessions", "clear", "telegram:1", "--yes"]);
    assert_eq!(
        json(&sqlite(&["sessions", "info", "telegram:1", "--json"]))["message_count"],
        0
    );
    sqlite(&["sessions", "delete", "telegram:1", "--yes"]);
    assert_eq!(sqlite(&["sessions", "list", "--json"]).trim(), "[]");
}
