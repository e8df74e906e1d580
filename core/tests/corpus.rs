//! The real transcripts in `../shared/corpus` import with nothing lost.
//!
//! Skipped, saying so, when the corpus is not beside this checkout (set
//! `AGENT_HOST_CORPUS` to point elsewhere); failed instead when `CI` is set.

mod common;

use std::collections::HashSet;
use std::path::PathBuf;

use agent_host_core::format::{self, Format, anthropic, claude_code, jsonl, openai};
use agent_host_core::pairing::ToolPairing;
use agent_host_core::validate::validate;
use agent_host_core::{Message, Role};
use serde_json::Value;

fn corpus() -> Option<PathBuf> {
    common::corpus_dir()
}

/// Messages compared without their derived ids, and with tool arguments in
/// compact JSON (Anthropic carries them as objects, so their spacing is not kept).
fn normalized(messages: &[Message]) -> Vec<Message> {
    let mut messages: Vec<Message> = messages.iter().cloned().map(|m| m.with_id("")).collect();
    for call in messages.iter_mut().flat_map(|m| m.tool_calls.iter_mut()) {
        let value: Value = serde_json::from_str(&call.arguments).unwrap();
        call.arguments = value.to_string();
    }
    messages
}

/// Equal lists, or a panic naming the first message that differs (the full
/// lists are too long to read in a failure).
fn assert_same(actual: &[Message], expected: &[Message], what: &str) {
    for (n, (a, e)) in actual.iter().zip(expected).enumerate() {
        assert_eq!(a, e, "{what}: message {n} differs");
    }
    assert_eq!(actual.len(), expected.len(), "{what}: message count");
}

#[test]
fn every_tau_bench_conversation_imports_and_round_trips() {
    let Some(dir) = corpus() else { return };
    let path = dir.join("tau-bench-gpt4o-airline/gpt-4o-airline.json");
    let runs: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(runs.len(), 200);
    let (mut messages, mut calls, mut answered) = (0, 0, 0);
    for (i, run) in runs.iter().enumerate() {
        let traj = &run["traj"];
        let history =
            openai::from_value(traj.clone()).unwrap_or_else(|e| panic!("conversation {i}: {e}"));
        assert_eq!(
            history.len(),
            traj.as_array().unwrap().len(),
            "conversation {i}"
        );
        let pairing = ToolPairing::of(&history);
        assert!(pairing.is_complete(), "conversation {i}: {pairing:?}");
        messages += history.len();
        calls += pairing.calls;
        answered += pairing.answered;

        // Read from a file's text, the typed route (detection included) gives
        // what the generic one gives.
        let text = serde_json::to_string_pretty(traj).unwrap();
        let (detected, typed) = format::parse_detected(&text).unwrap();
        assert_eq!(detected, Format::OpenAi, "conversation {i}");
        assert_eq!(typed.messages, history, "conversation {i}");

        // OpenAI out gives back the very same JSON.
        assert_eq!(
            &Value::Array(openai::to_values(&history).unwrap()),
            traj,
            "conversation {i}"
        );
        // The native log is the identity.
        assert_eq!(
            jsonl::parse(&jsonl::to_string(&history)).unwrap(),
            history,
            "conversation {i}"
        );
        // Through Anthropic and back, the same messages (ids are derived anew).
        let via = anthropic::from_value(anthropic::to_request(&history).unwrap()).unwrap();
        let mut expected = normalized(&history);
        // Anthropic keeps no participant names or other OpenAI-only fields.
        for m in &mut expected {
            m.metadata.remove(openai::EXTRA_KEY);
        }
        assert_same(
            &normalized(&via),
            &expected,
            &format!("conversation {i} via anthropic"),
        );
    }
    assert_eq!((messages, calls, answered), (5308, 1164, 1164));
}

#[test]
fn every_claude_code_session_imports_with_nothing_lost() {
    let Some(dir) = corpus() else { return };
    // (file, records, main thread: messages, assistant turns, tool calls;
    //  subagent sidechains: count, messages, tool calls)
    let expected = [
        (
            "1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl",
            29,
            (21, 7, 12),
            (0, 0, 0),
        ),
        (
            "5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl",
            53,
            (25, 10, 13),
            (2, 20, 8),
        ),
        (
            "fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl",
            438,
            (23, 9, 11),
            (5, 322, 156),
        ),
    ];
    for (file, records, (messages, turns, calls), (sidechains, side_messages, side_calls)) in
        expected
    {
        let text =
            std::fs::read_to_string(dir.join("claude-code-sessions-ccv").join(file)).unwrap();
        assert_eq!(Format::detect(&text).unwrap(), Format::ClaudeCode, "{file}");
        let t = format::parse(Format::ClaudeCode, &text).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(t.messages.len(), messages, "{file}");
        assert!(t.skipped.is_empty(), "{file}: {:?}", t.skipped);
        assert!(t.quarantined.is_empty(), "{file}: {:?}", t.quarantined);
        assert!(
            t.branches.is_empty(),
            "{file}: no rewinds in these sessions"
        );
        let assistant = t
            .messages
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .count();
        assert_eq!(assistant, turns, "{file}");
        let pairing = ToolPairing::of(&t.messages);
        assert_eq!((pairing.calls, pairing.answered), (calls, calls), "{file}");
        assert!(pairing.is_complete(), "{file}: {pairing:?}");
        // Each thread is a valid conversation of its own.
        assert_eq!(validate(&t.messages), [], "{file}: main thread");
        assert_eq!(t.sidechains.len(), sidechains, "{file}");
        let (mut n, mut c) = (0, 0);
        for (k, side) in t.sidechains.iter().enumerate() {
            let pairing = ToolPairing::of(side);
            assert!(pairing.is_complete(), "{file}: sidechain {k}: {pairing:?}");
            assert_eq!(validate(side), [], "{file}: sidechain {k}");
            n += side.len();
            c += pairing.calls;
        }
        assert_eq!((n, c), (side_messages, side_calls), "{file}");

        // Every record of the file is accounted for: a message's id, a merged
        // streamed piece, or the title.
        let mut seen: HashSet<String> = HashSet::new();
        for m in t.messages.iter().chain(t.sidechains.iter().flatten()) {
            seen.insert(m.id.split(':').next().unwrap().to_owned());
            if let Some(Value::Array(merged)) =
                m.metadata[claude_code::EXTRA_KEY].get("merged_uuids")
            {
                seen.extend(merged.iter().map(|u| u.as_str().unwrap().to_owned()));
            }
        }
        let mut summaries = 0;
        for line in text.lines() {
            let record: Value = serde_json::from_str(line).unwrap();
            match record["uuid"].as_str() {
                Some(uuid) => assert!(seen.contains(uuid), "{file}: record {uuid} lost"),
                None => {
                    assert_eq!(record["type"], "summary");
                    summaries += 1;
                }
            }
        }
        assert_eq!(seen.len() + summaries, records, "{file}");
        assert_eq!(t.title.is_some(), summaries > 0, "{file}");
        // The native log keeps all of it.
        assert_eq!(
            jsonl::parse(&jsonl::to_string(&t.messages)).unwrap(),
            t.messages,
            "{file}"
        );
    }
}
