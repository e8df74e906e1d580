//! `summarize-history`: replaces the older part of a history with a summary
//! written by the session's model.
//!
//! Everything before the last `keep_turns` turns (a turn starts at a user
//! message that is not synthetic), system messages aside, is sent to the
//! model through the host service `summarize`, and replaced by a checkpoint
//! pair, both messages flagged synthetic and summary: a user message saying
//! what was summarized, and the assistant's summary. The cut moves back
//! rather than separate a tool call from its results, so the output is
//! always a valid history. A previous summary in the older part is carried
//! into the new one.
//!
//! The processor never talks to the model itself and never sees a key: the
//! host does, and only when the user granted it `summarize`
//! (`--allow-summarize`, or `allow_summarize = true` in its
//! `[[processors]]` entry), within its budget. When the service is denied,
//! over budget or fails, the history is left as it is and the reason is
//! logged (the run report also lists the call).
//!
//! Configuration (defaults):
//!
//! - `keep_turns` (4): the newest turns kept as they are, at least 1;
//! - `min_messages` (6): summarize only when the older part has at least
//!   this many messages;
//! - `trigger_tokens` (0, off): summarize only when the whole history is at
//!   least this many tokens (the host's estimate);
//! - `max_words` (400): the summary's length, told to the model;
//! - `max_tokens` (0: the host's cap) and `timeout_ms` (0: the host's cap):
//!   the call's caps, which the host lowers to the processor's budget;
//! - `instructions`: the prompt, replacing the built-in one (`{max_words}`
//!   in it is replaced by `max_words`).
//!
//! ```sh
//! agent-host run --input chat.json \
//!     --processor target/processors/summarize-history.wasm \
//!     --processor-config '{"keep_turns": 2}' --allow-summarize
//! ```

use agent_host_guest::{
    Error, History, Message, MessageFlags, Processor, Result, Role, SummaryCaps, export_processor,
};
use serde::Deserialize;

/// The configuration.
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// The newest turns kept as they are (at least 1).
    pub keep_turns: usize,
    /// The fewest messages worth a summary.
    pub min_messages: usize,
    /// Summarize only a history of at least this many tokens (0: always).
    pub trigger_tokens: u64,
    /// The summary's length in words, told to the model.
    pub max_words: u32,
    /// The most tokens the summary may take (0: the host's cap).
    pub max_tokens: u32,
    /// The most time the call may take, in milliseconds (0: the host's cap).
    pub timeout_ms: u32,
    /// The prompt, replacing the built-in one.
    pub instructions: Option<String>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            keep_turns: 4,
            min_messages: 6,
            trigger_tokens: 0,
            max_words: 400,
            max_tokens: 0,
            timeout_ms: 0,
            instructions: None,
        }
    }
}

/// The built-in prompt: the structured summary the host's own summarizer
/// asks for, shorter.
const INSTRUCTIONS: &str = "\
You summarize the earlier part of a conversation between a user and an AI agent so that the \
agent can continue without it. Write Markdown with these headings: Files Modified, Key \
Decisions, Important Values (paths, URLs, identifiers, commands, numbers, copied verbatim in \
backticks), Current State, Pending Tasks. Facts only from the conversation; carry forward the \
facts of a previous summary unless the conversation changed them. Write only the summary, \
under {max_words} words.";

/// Characters of one message quoted to the model; the middle of a longer
/// one is elided.
const QUOTE_CHARS: usize = 4_000;

/// The processor.
pub struct SummarizeHistory;

impl Processor for SummarizeHistory {
    type Config = Config;
    const CONFIG_EXAMPLE: Option<&'static str> =
        Some(r#"{"keep_turns": 4, "min_messages": 6, "max_words": 400}"#);
    const CONFIG_SCHEMA: Option<&'static str> = Some(
        r#"{"type":"object","properties":{"keep_turns":{"type":"integer","minimum":1,"default":4},"min_messages":{"type":"integer","minimum":1,"default":6},"trigger_tokens":{"type":"integer","minimum":0,"default":0},"max_words":{"type":"integer","minimum":1,"default":400},"max_tokens":{"type":"integer","minimum":0,"default":0},"timeout_ms":{"type":"integer","minimum":0,"default":0},"instructions":{"type":"string"}},"additionalProperties":false}"#,
    );

    fn process(history: &mut History, config: Config) -> Result<()> {
        // serde reads a struct from a JSON array too, field by field: a
        // configuration is an object.
        if history.context().config.trim_start().starts_with('[') {
            return Err(Error::bad_config(
                "the configuration must be a JSON object, not an array",
            ));
        }
        if config.keep_turns == 0 {
            return Err(Error::bad_config(
                "`keep_turns` must be at least 1 (0 would summarize the question being asked)",
            ));
        }
        if config.max_words == 0 {
            return Err(Error::bad_config("`max_words` must be at least 1"));
        }
        let total = u64::from(history.context().total_tokens);
        if total < config.trigger_tokens {
            agent_host_guest::debug!(
                "{total} tokens, under the trigger of {}; nothing summarized",
                config.trigger_tokens
            );
            return Ok(());
        }
        let Some(cut) = cut(history, config.keep_turns) else {
            return Ok(());
        };
        let span: Vec<usize> = (0..cut)
            .filter(|&i| history.header(i).role != Role::System)
            .collect();
        if span.len() < config.min_messages.max(1) {
            agent_host_guest::debug!(
                "{} older messages, fewer than {}; nothing summarized",
                span.len(),
                config.min_messages
            );
            return Ok(());
        }
        let material = material(history, &span);
        let prompt = config
            .instructions
            .as_deref()
            .unwrap_or(INSTRUCTIONS)
            .replace("{max_words}", &config.max_words.to_string());
        let caps = SummaryCaps {
            max_tokens: config.max_tokens,
            timeout_ms: config.timeout_ms,
        };
        let summary = match agent_host_guest::summarize(&prompt, &material, caps) {
            Ok(s) if !s.text.trim().is_empty() => s,
            Ok(_) => {
                agent_host_guest::warn!("the model wrote an empty summary; the history is kept");
                return Ok(());
            }
            Err(e) => {
                agent_host_guest::warn!("no summary ({e}); the history is kept");
                return Ok(());
            }
        };
        let first = span[0];
        for &i in &span {
            history.drop(i);
        }
        let mut boundary = Message::new(
            Role::User,
            format!(
                "[The {} earlier messages of this conversation were summarized.]",
                span.len()
            ),
        );
        boundary.flags = MessageFlags::SYNTHETIC | MessageFlags::SUMMARY;
        let mut answer = Message::new(Role::Assistant, summary.text.trim());
        answer.flags = MessageFlags::SYNTHETIC | MessageFlags::SUMMARY;
        answer.metadata = Some(format!(
            r#"{{"summary_of":{},"input_tokens":{},"output_tokens":{}}}"#,
            span.len(),
            summary.input_tokens,
            summary.output_tokens
        ));
        history.insert_before(first, boundary);
        history.insert_before(first, answer);
        agent_host_guest::info!(
            "summarized {} messages ({} model tokens read, {} written)",
            span.len(),
            summary.input_tokens,
            summary.output_tokens
        );
        Ok(())
    }
}

/// Where the kept turns start: the start of the last `turns` turns, moved
/// back so that no kept tool result answers a call before it. `None` when
/// there are no more than `turns` turns.
fn cut(history: &History, turns: usize) -> Option<usize> {
    let starts = history.turn_starts();
    if starts.len() <= turns {
        return None;
    }
    let mut cut = starts[starts.len() - turns];
    let callers = history.tool_callers();
    let mut checked = history.len();
    while cut < checked {
        let earliest = (cut..checked).filter_map(|i| callers[i]).min();
        checked = cut;
        if let Some(earliest) = earliest
            && earliest < cut
        {
            cut = earliest;
        }
    }
    Some(cut)
}

/// The messages at `span` as plain text for the model.
fn material(history: &History, span: &[usize]) -> String {
    let mut out = String::from("<conversation>\n");
    for &i in span {
        let m = &history.messages()[i];
        let who = if m.flags.contains(MessageFlags::SUMMARY) {
            "previous summary"
        } else {
            match m.role {
                Role::System => "system",
                Role::User => "user",
                Role::Assistant => "assistant",
                Role::Tool => "tool result",
            }
        };
        out.push('[');
        out.push_str(who);
        if let Some(tool) = &m.tool_name {
            out.push(' ');
            out.push_str(tool);
        }
        out.push_str("]\n");
        let text = text_of(m);
        if !text.is_empty() {
            out.push_str(&quote(&text));
            out.push('\n');
        }
        for call in &m.tool_calls {
            out.push_str(&format!(
                "-> calls {}({})\n",
                call.name,
                quote(&call.arguments)
            ));
        }
        out.push('\n');
    }
    out.push_str("</conversation>\n");
    out
}

/// A message's text: its content and its text parts.
fn text_of(m: &Message) -> String {
    let mut text = m.content.clone();
    for part in &m.parts {
        if let agent_host_guest::Part::Text(t) = part {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(t);
        }
    }
    text
}

/// `text`, its middle elided past [`QUOTE_CHARS`].
fn quote(text: &str) -> String {
    let count = text.chars().count();
    if count <= QUOTE_CHARS {
        return text.to_owned();
    }
    let head: String = text.chars().take(QUOTE_CHARS / 2).collect();
    let tail: String = text.chars().skip(count - QUOTE_CHARS / 2).collect();
    format!(
        "{head}\n[... {} characters elided ...]\n{tail}",
        count - QUOTE_CHARS
    )
}

export_processor!(SummarizeHistory);

#[cfg(test)]
mod tests {
    use super::*;
    use agent_host_guest::{ServiceError, ToolCall, testing};
    use std::cell::RefCell;
    use std::rc::Rc;

    fn turns(n: usize) -> Vec<Message> {
        let mut h = vec![Message::new(Role::System, "rules")];
        for i in 0..n {
            h.push(Message::new(Role::User, format!("question {i}")));
            h.push(Message::new(Role::Assistant, format!("answer {i}")));
        }
        h
    }

    fn contents(out: &[Message]) -> Vec<&str> {
        out.iter().map(|m| m.content.as_str()).collect()
    }

    /// Serves summaries, keeping the material each was asked for.
    fn serve() -> Rc<RefCell<Vec<String>>> {
        let asked = Rc::new(RefCell::new(Vec::new()));
        let kept = asked.clone();
        testing::serve_summaries(move |_, text| {
            kept.borrow_mut().push(text.to_owned());
            Ok("THE SUMMARY".into())
        });
        asked
    }

    #[test]
    fn the_older_part_becomes_a_flagged_checkpoint_pair_and_the_newest_turns_stay() {
        let asked = serve();
        let out =
            testing::run::<SummarizeHistory>(r#"{"keep_turns": 2, "min_messages": 2}"#, turns(5))
                .unwrap();
        assert_eq!(
            contents(&out),
            [
                "rules",
                "[The 6 earlier messages of this conversation were summarized.]",
                "THE SUMMARY",
                "question 3",
                "answer 3",
                "question 4",
                "answer 4",
            ]
        );
        for m in &out[1..3] {
            assert!(
                m.flags
                    .contains(MessageFlags::SYNTHETIC | MessageFlags::SUMMARY)
            );
        }
        assert_eq!(out[1].role, Role::User);
        assert_eq!(out[2].role, Role::Assistant);
        let material = &asked.borrow()[0];
        assert!(material.contains("[user]\nquestion 0"), "{material}");
        assert!(material.contains("answer 2"), "{material}");
        assert!(!material.contains("question 3"), "{material}");
        assert!(!material.contains("rules"), "{material}");
    }

    #[test]
    fn a_tool_exchange_across_the_cut_stays_whole() {
        serve();
        let mut h = turns(3);
        // The call is in turn 2; its result comes after turn 3 starts.
        h.insert(
            5,
            Message::tool_calls(vec![ToolCall::new("c1", "search", "{}")]),
        );
        h.insert(7, Message::tool_result("c1", "found"));
        // rules, q0, a0, q1, a1, call, q2, result, a2
        let out =
            testing::run::<SummarizeHistory>(r#"{"keep_turns": 1, "min_messages": 1}"#, h).unwrap();
        let texts = contents(&out);
        // The cut moved back to the call: the call and its result are kept.
        assert_eq!(texts[3..], ["", "question 2", "found", "answer 2"]);
        assert_eq!(out[3].tool_calls.len(), 1);
    }

    #[test]
    fn a_refused_summary_leaves_the_history_as_it_was() {
        testing::serve_summaries(|_, _| Err(ServiceError::Denied("not granted".into())));
        let h = turns(6);
        let out = testing::run::<SummarizeHistory>("{}", h.clone()).unwrap();
        assert_eq!(contents(&out), contents(&h));
    }

    #[test]
    fn too_little_to_summarize_asks_nothing() {
        let asked = serve();
        let out = testing::run::<SummarizeHistory>(r#"{"keep_turns": 2}"#, turns(4)).unwrap();
        // 4 older messages, fewer than the 6 by default.
        assert_eq!(out.len(), 9);
        let out = testing::run::<SummarizeHistory>(
            r#"{"keep_turns": 2, "min_messages": 1, "trigger_tokens": 1000000}"#,
            turns(4),
        )
        .unwrap();
        assert_eq!(out.len(), 9);
        assert!(asked.borrow().is_empty());
    }

    #[test]
    fn a_previous_summary_is_carried_into_the_material() {
        let asked = serve();
        let mut h = turns(4);
        h[2].flags = MessageFlags::SYNTHETIC | MessageFlags::SUMMARY;
        testing::run::<SummarizeHistory>(r#"{"keep_turns": 1, "min_messages": 1}"#, h).unwrap();
        assert!(
            asked.borrow()[0].contains("[previous summary]\nanswer 0"),
            "{}",
            asked.borrow()[0]
        );
    }

    #[test]
    fn bad_configurations_are_refused() {
        for config in [
            r#"{"keep_turns": 0}"#,
            r#"{"max_words": 0}"#,
            r#"{"turns": 2}"#,
            "[1, 2]",
        ] {
            let e = testing::run::<SummarizeHistory>(config, vec![]).unwrap_err();
            assert!(matches!(e, Error::BadConfig(_)), "{config}: {e}");
        }
    }
}
