//! `agent-host processor check`: a processor over built-in histories of
//! awkward shapes, one verdict per case.
//!
//! Every case is input the host accepts: the runtime does not validate a
//! processor's input, but it validates the answer, so a history that broke
//! the provider rules (an orphan result, an unanswered call) would make even
//! a processor that keeps everything "fail". The cases are awkward instead:
//! empty, one message, ten thousand, a 5 MiB tool result, parallel and
//! reused call ids, unicode, empty texts, media, reasoning, a summary
//! checkpoint, heavy metadata.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use agent_host_core::{MediaRef, Message, Part, Reasoning, Role, Usage};
use chrono::{DateTime, Utc};
use clap::Args;
use serde::Serialize;
use serde_json::json;

use super::{CacheArgs, SandboxArgs, load};
use crate::commands::run::ProcessorFailed;
use agent_host_runtime::{Cause, RunInfo};

/// The options of `agent-host processor check`.
#[derive(Debug, Args)]
#[command(after_help = "\
Exit codes: 0 when every case passes, 3 when any fails (or the processor cannot be loaded).

Examples:
  agent-host processor check target/processors/keep-last-turns.wasm
  agent-host processor check redact.wasm --processor-config '{\"patterns\":[\"sk-\"]}' --json")]
pub struct CheckArgs {
    /// The processor component, or a Rust processor crate's folder (built first).
    #[arg(value_name = "FILE.wasm|CRATE")]
    file: PathBuf,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    sandbox: SandboxArgs,
    #[command(flatten)]
    cache: CacheArgs,
}

/// One built-in history.
struct Case {
    name: &'static str,
    messages: Vec<Message>,
}

/// What became of one case.
#[derive(Debug, Serialize)]
#[serde(rename_all = "snake_case")]
enum Verdict {
    /// The answer was applied.
    Ok,
    /// The processor failed (trap, deadline, limit, its own error).
    Failed,
    /// The answer could not be used or broke the provider rules.
    InvalidOutput,
}

/// The result of one case, as printed.
#[derive(Debug, Serialize)]
struct CaseResult {
    case: &'static str,
    verdict: Verdict,
    /// Why it failed, typed.
    cause: Option<Cause>,
    /// Why it failed, in one line.
    error: Option<String>,
    /// The wall-clock time of the whole run (conversion, call, checks), ms.
    ms: f64,
    /// The call alone (instantiation and call), ms.
    call_ms: f64,
    messages_in: usize,
    /// `None` when it failed: the input stands.
    messages_out: Option<usize>,
    tokens_in: u64,
    tokens_out: Option<u64>,
}

/// Runs `agent-host processor check`.
pub(super) fn run(args: &CheckArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let loaded = load(&args.file, &args.cache, args.sandbox.options())?;
    let p = loaded.processor();
    if !args.json {
        writeln!(out, "checking {}", super::identity(p))?;
        writeln!(
            out,
            "{:<22} {:<15} {:>9} {:>9} {:>16} {:>20}",
            "case", "result", "ms", "call ms", "messages", "tokens"
        )?;
    }
    let info = RunInfo::default();
    let mut results = Vec::new();
    for case in cases() {
        let n = case.messages.len();
        let started = Instant::now();
        let outcome = loaded
            .runtime()
            .run(std::slice::from_ref(p), &info, case.messages);
        let ms = super::ms(started.elapsed());
        let report = outcome.reports.first();
        let cause = outcome.failure.map(|f| f.cause);
        let verdict = match &cause {
            None => Verdict::Ok,
            Some(Cause::Invalid(_) | Cause::BadAnswer(_)) => Verdict::InvalidOutput,
            Some(_) => Verdict::Failed,
        };
        let ok = cause.is_none();
        let r = CaseResult {
            case: case.name,
            verdict,
            ms,
            call_ms: report.map_or(0.0, |r| r.time_ms),
            messages_in: n,
            messages_out: ok.then_some(outcome.messages.len()),
            tokens_in: report.map_or(0, |r| r.tokens_before),
            tokens_out: report.filter(|_| ok).map(|r| r.tokens_after),
            error: cause.as_ref().map(super::cause_line),
            cause,
        };
        if !args.json {
            print_row(out, &r)?;
            // A slow case shows up as it finishes, not at the end.
            out.flush()?;
        }
        results.push(r);
    }

    let failed: Vec<&str> = results
        .iter()
        .filter(|r| r.cause.is_some())
        .map(|r| r.case)
        .collect();
    let summary = if failed.is_empty() {
        format!("all {} cases passed", results.len())
    } else {
        format!(
            "{} of {} cases failed: {}",
            failed.len(),
            results.len(),
            failed.join(", ")
        )
    };
    if args.json {
        let report = json!({
            "processor": {
                "name": p.name(),
                "version": p.description().version,
                "sha256": p.hash(),
                "file": args.file.display().to_string(),
                "load_ms": super::ms(p.load_time()),
                "compile": p.compile(),
            },
            "cases": results,
            "passed": results.len() - failed.len(),
            "failed": failed,
        });
        writeln!(out, "{}", agent_host_core::format::to_pretty(&report)?)?;
    } else {
        writeln!(out, "{summary}")?;
    }
    if failed.is_empty() {
        Ok(())
    } else {
        out.flush()?;
        Err(ProcessorFailed(format!("{} ({}): {summary}", p.name(), args.file.display())).into())
    }
}

fn print_row(out: &mut dyn Write, r: &CaseResult) -> std::io::Result<()> {
    let verdict = match r.verdict {
        Verdict::Ok => "ok",
        Verdict::Failed => "FAILED",
        Verdict::InvalidOutput => "INVALID OUTPUT",
    };
    let or_dash = |v: Option<String>| v.unwrap_or_else(|| "-".to_owned());
    writeln!(
        out,
        "{:<22} {:<15} {:>9.1} {:>9.1} {:>16} {:>20}",
        r.case,
        verdict,
        r.ms,
        r.call_ms,
        format!(
            "{} -> {}",
            r.messages_in,
            or_dash(r.messages_out.map(|n| n.to_string()))
        ),
        format!(
            "{} -> {}",
            r.tokens_in,
            or_dash(r.tokens_out.map(|n| n.to_string()))
        ),
    )?;
    if let Some(error) = &r.error {
        writeln!(out, "    {error}")?;
    }
    Ok(())
}

/// The built-in histories, in the order they are run.
fn cases() -> Vec<Case> {
    let case = |name, messages: Vec<Message>| Case {
        name,
        messages: with_ids(name, messages),
    };
    vec![
        case(
            "sample",
            agent_host_engine::transcript::sample().transcript.messages,
        ),
        case("empty", Vec::new()),
        case(
            "system-only",
            vec![Message::system("You are a careful agent.")],
        ),
        case("long-10k-messages", long(10_000)),
        case("huge-tool-result-5mib", huge_tool_result(5 << 20)),
        case("parallel-tool-calls", parallel_tool_calls()),
        case("odd-turn-order", odd_turn_order()),
        case("unicode", unicode()),
        case("empty-contents", empty_contents()),
        case("images-and-files", media()),
        case("reasoning", reasoning()),
        case("summary-checkpoint", checkpoint()),
        case("metadata-heavy", metadata_heavy()),
    ]
}

/// Gives every message without an id one unique within the case.
fn with_ids(case: &str, mut messages: Vec<Message>) -> Vec<Message> {
    for (i, m) in messages.iter_mut().enumerate() {
        if m.id.is_empty() {
            m.id = format!("{case}-{i:05}");
        }
    }
    messages
}

fn call(text: &str, calls: &[(&str, &str, &str)]) -> Message {
    let mut m = Message::assistant(text);
    for (id, name, arguments) in calls {
        m.push_tool_call(*id, *name, *arguments);
    }
    m
}

/// `n` small messages in turns of four: a question, a call, its result, an answer.
fn long(n: usize) -> Vec<Message> {
    let mut out = vec![Message::system("You answer briefly.")];
    let mut turn = 0;
    while out.len() + 4 <= n {
        let id = format!("call_{turn}");
        out.push(Message::user(format!("question {turn}")));
        out.push(call("", &[(id.as_str(), "lookup", r#"{"q":1}"#)]));
        out.push(Message::tool_result(
            &id,
            "lookup",
            format!("result {turn}"),
        ));
        out.push(Message::assistant(format!("answer {turn}")));
        turn += 1;
    }
    while out.len() < n {
        out.push(Message::user(format!("one more {}", out.len())));
    }
    out
}

/// A tool result of about `bytes` bytes of log lines.
fn huge_tool_result(bytes: usize) -> Vec<Message> {
    let mut text = String::with_capacity(bytes + 64);
    let mut line = 0;
    while text.len() < bytes {
        text.push_str(&format!(
            "{line:08} INFO request served in 12 ms path=/api/v1/items?page={line}\n"
        ));
        line += 1;
    }
    vec![
        Message::system("You are a careful agent."),
        Message::user("Why is the service slow?"),
        call(
            "Reading the log.",
            &[("call_log", "read_file", r#"{"path":"/var/log/app.log"}"#)],
        ),
        Message::tool_result("call_log", "read_file", text),
        Message::assistant("Nothing stands out in the log."),
    ]
}

/// Three calls in one message answered in reverse order (one an error, one
/// with arguments that are not JSON), a block of 100 calls, and a call id
/// reused once its first call is answered.
fn parallel_tool_calls() -> Vec<Message> {
    let mut error = Message::tool_result("call_1", "read_file", "ENOENT: no such file");
    error.is_error = true;
    let many: Vec<(String, String)> = (0..100)
        .map(|i| (format!("batch_{i}"), format!(r#"{{"n":{i}}}"#)))
        .collect();
    let many_calls: Vec<(&str, &str, &str)> = many
        .iter()
        .map(|(id, args)| (id.as_str(), "stat", args.as_str()))
        .collect();
    let mut out = vec![
        Message::user("Read the three files."),
        call(
            "",
            &[
                ("call_1", "read_file", r#"{"path":"a.txt"}"#),
                ("call_2", "read_file", "{not json"),
                ("call_3", "read_file", ""),
            ],
        ),
        Message::tool_result("call_3", "read_file", "c"),
        Message::tool_result("call_2", "read_file", "b"),
        error,
        Message::user("Now stat a hundred files."),
        call("Statting.", &many_calls),
    ];
    out.extend(
        many.iter()
            .rev()
            .map(|(id, _)| Message::tool_result(id, "stat", "4096 bytes")),
    );
    out.extend([
        Message::user("Read a.txt again."),
        call("", &[("call_1", "read_file", r#"{"path":"a.txt"}"#)]),
        Message::tool_result("call_1", "read_file", "a"),
        Message::assistant("Done."),
    ]);
    out
}

/// No system message, the assistant first, two users in a row, two
/// assistants in a row.
fn odd_turn_order() -> Vec<Message> {
    vec![
        Message::assistant("Hello, I speak first."),
        Message::assistant("And again."),
        Message::user("ok"),
        Message::user("ok?"),
        Message::system("A system message late in the history."),
        Message::user("still there?"),
    ]
}

fn unicode() -> Vec<Message> {
    vec![
        Message::system("Réponds en français. 日本語も話せます。"),
        Message::user("👨‍👩‍👧‍👦 family, 🏳️‍🌈 flag, 🇺🇦 and skin tones 👋🏽"),
        Message::assistant("مرحبا بالعالم — שלום עולם — mixed RTL ‏and‎ LTR"),
        Message::user("Z̷a̴l̸g̵o̶ t̷e̸x̵t, combining a\u{0301}, a NUL \u{0} and a BOM \u{feff}"),
        call(
            "🔧",
            &[("call_ü", "lookup_ключ", r#"{"q":"\u00e9t\u00e9 ☃ 𝄞"}"#)],
        ),
        Message::tool_result(
            "call_ü",
            "lookup_ключ",
            "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 \u{10ffff} \u{200b}zero width",
        ),
        Message::assistant("\u{202e}reversed by an override\u{202c}"),
    ]
}

fn empty_contents() -> Vec<Message> {
    vec![
        Message::system(""),
        Message::user(""),
        call("", &[("call_empty", "", "")]),
        Message::tool_result("call_empty", "", ""),
        Message::assistant(""),
        Message::user(" \n\t "),
    ]
}

fn media() -> Vec<Message> {
    let mut user = Message::user("");
    user.parts = vec![
        Part::Text {
            text: "What is in these?".into(),
        },
        Part::Image {
            source: MediaRef::Url("data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==".into()),
            mime_type: Some("image/png".into()),
        },
        Part::Image {
            source: MediaRef::Path("media/screenshot.jpg".into()),
            mime_type: None,
        },
        Part::File {
            name: "report.pdf".into(),
            path: "/home/user/report.pdf".into(),
            mime_type: Some("application/pdf".into()),
        },
    ];
    let mut only_image = Message::user("");
    only_image.parts = vec![Part::Image {
        source: MediaRef::Url("https://example.com/cat.gif".into()),
        mime_type: Some("image/gif".into()),
    }];
    let mut answer = Message::assistant("");
    answer.parts = vec![
        Part::Text {
            text: "A one-pixel image,".into(),
        },
        Part::Text {
            text: "a screenshot and a PDF.".into(),
        },
    ];
    vec![user, answer, only_image, Message::assistant("A cat.")]
}

fn reasoning() -> Vec<Message> {
    let mut signed = Message::assistant("The answer is 4.");
    signed.reasoning = Some(Reasoning {
        text: "2 + 2 = 4, check: 4 - 2 = 2.".into(),
        signature: Some("EqQBCkgIARABGAIiQL2s8vJ0c2lnbmF0dXJl".into()),
        redacted: false,
    });
    let mut redacted = call("", &[("call_r", "calc", r#"{"x":"2+2"}"#)]);
    redacted.reasoning = Some(Reasoning {
        text: "RXJyb3I6IG9wYXF1ZSByZWRhY3RlZCB0aGlua2luZw==".into(),
        signature: None,
        redacted: true,
    });
    let mut empty = Message::assistant("");
    empty.reasoning = Some(Reasoning::default());
    vec![
        Message::user("What is 2 + 2?"),
        signed,
        Message::user("Check it with the calculator."),
        redacted,
        Message::tool_result("call_r", "calc", "4"),
        empty,
    ]
}

/// A summary checkpoint (its boundary and summary, synthetic) standing for
/// earlier messages, then the conversation after it.
fn checkpoint() -> Vec<Message> {
    let mut boundary = Message::user("[Earlier conversation summarized: 40 messages]")
        .with_id("checkpoint-m39-boundary");
    let mut summary = Message::assistant("## Current State\nThe parser accepts offsets.")
        .with_id("checkpoint-m39-summary");
    for m in [&mut boundary, &mut summary] {
        m.synthetic = true;
        m.summary = true;
    }
    vec![
        Message::system("You are a careful coding agent."),
        boundary,
        summary,
        Message::user("Now add a test."),
        Message::assistant("Added tests/test_offsets.py."),
    ]
}

fn metadata_heavy() -> Vec<Message> {
    let at = |s: i64| DateTime::<Utc>::from_timestamp(s, 0);
    let mut out = Vec::new();
    for (i, when) in [at(0), at(1_750_000_000), at(32_503_680_000), None]
        .into_iter()
        .enumerate()
    {
        let role = if i % 2 == 0 {
            Role::User
        } else {
            Role::Assistant
        };
        let mut m = Message::new(role, format!("message {i} with metadata"));
        m.timestamp = when;
        m.agent = Some(format!("agent-{i}"));
        m.channel = Some("telegram".into());
        m.model = (role == Role::Assistant).then(|| "gpt-4o-2024-08-06".into());
        m.usage = (role == Role::Assistant).then_some(Usage {
            input_tokens: u64::from(u32::MAX) + 1,
            output_tokens: 17,
            cache_read_tokens: Some(1024),
            cache_write_tokens: None,
        });
        m.synthetic = i == 3;
        let value = json!({
            "nested": {"deep": {"deeper": [1, 2.5, null, true, "x", {"k": []}]}},
            "unicode_ключ": "значение 🚀",
            "list": (0..200).collect::<Vec<_>>(),
            "empty": {},
            "quote\"key": "back\\slash",
        });
        if let serde_json::Value::Object(map) = value {
            m.metadata = map;
        }
        out.push(m);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_case_is_a_history_the_host_accepts() {
        for case in cases() {
            let violations = agent_host_core::validate::validate(&case.messages);
            assert!(violations.is_empty(), "{}: {violations:?}", case.name);
            let mut ids = std::collections::HashSet::new();
            for m in &case.messages {
                assert!(ids.insert(m.id.clone()), "{}: id {} twice", case.name, m.id);
            }
        }
    }

    #[test]
    fn the_large_cases_are_as_large_as_they_say() {
        let cases = cases();
        let get = |name: &str| cases.iter().find(|c| c.name == name).unwrap();
        assert_eq!(get("long-10k-messages").messages.len(), 10_000);
        let huge = &get("huge-tool-result-5mib").messages;
        assert!(huge.iter().any(|m| m.content.len() >= 5 << 20));
    }
}
