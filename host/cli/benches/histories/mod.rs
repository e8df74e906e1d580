//! What the sandbox benches `standard` and `call` share: the histories
//! they run on (whole corpus conversations repeated and cut at 100, 1,000
//! and 10,000 messages) and each standard processor's configuration.

use agent_host_core::validate::validate;
use agent_host_core::{HeuristicCounter, Message};

#[path = "../../../../tests/integration/util.rs"]
#[allow(dead_code)]
pub mod util;

/// The configuration standard processor `name` is measured with.
pub fn config(name: &str) -> &'static str {
    match name {
        "keep-last-turns" => r#"{"turns": 4}"#,
        "token-budget" => r#"{"tokens": 32000}"#,
        "filter" => r#"{"contains": "error", "context": 1}"#,
        _ => "{}",
    }
}

/// The histories: 100, 1,000 and 10,000 messages of whole corpus
/// conversations (each cut at a turn start), with a fake API key in every
/// 50th tool result so that redaction has work to do.
pub fn histories() -> Vec<(String, Vec<Message>)> {
    let corpus = util::corpus_histories();
    let sources: Vec<Vec<Message>> = if corpus.is_empty() {
        eprintln!("no corpus: using the embedded sample only");
        vec![sample_messages()]
    } else {
        corpus.into_iter().map(|(_, h)| h).collect()
    };
    let mut synthetic: Vec<Message> = Vec::with_capacity(10_100);
    while synthetic.len() < 10_100 {
        for h in &sources {
            synthetic.extend(h.iter().cloned());
        }
    }
    let key = format!("sk-proj-{}", "Ab3dE5gH7jK9mN1pQ3sT5vW7yZ".repeat(2));
    for (i, m) in synthetic.iter_mut().enumerate() {
        m.id = format!("s{i}");
        if m.tool_call_id.is_some() && i % 50 == 0 {
            m.content.push_str(&format!("\nOPENAI_API_KEY={key}\n"));
        }
    }
    let counter = HeuristicCounter::default();
    let mut out = Vec::new();
    for size in [100, 1_000, 10_000] {
        // Whole conversations: cut at the last turn start at or before `size`.
        let cut = (0..=size)
            .rev()
            .find(|&i| synthetic[i].role == agent_host_core::Role::User)
            .unwrap_or(size);
        let history: Vec<Message> = synthetic[..cut].to_vec();
        for m in &history {
            m.tokens(&counter);
        }
        assert!(validate(&history).is_empty(), "the {size} history is valid");
        out.push((format!("{} msgs", history.len()), history));
    }
    out
}

/// The sample session the binary embeds (the engine's), as messages.
fn sample_messages() -> Vec<agent_host_core::Message> {
    let text = include_str!("../../../engine/src/sample.jsonl");
    agent_host_core::format::parse(agent_host_core::format::Format::Jsonl, text)
        .expect("the embedded sample is a valid native log")
        .messages
}
