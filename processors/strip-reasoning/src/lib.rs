//! `strip-reasoning`: drops the reasoning (thinking) of assistant messages in
//! older turns and keeps it for the last N.
//!
//! Reasoning is what the model thought before it answered. Providers bill it
//! as input when it is sent back, and older turns rarely need it. A turn
//! starts at a user message that is not synthetic
//! ([`Message::starts_turn`](agent_host_guest::Message::starts_turn)); every
//! assistant message before the start of the last `keep_turns` turns loses
//! its reasoning, redacted reasoning included. Messages that carry no
//! reasoning, and every message of the kept turns, are left untouched.
//!
//! An assistant message that held nothing but its reasoning (no text, no
//! parts, no tool calls: some transcripts store a thinking block as a message
//! of its own) is dropped rather than sent on empty, which providers reject.
//!
//! Configuration:
//! - `keep_turns` (default 1): how many of the most recent turns keep their
//!   reasoning. With fewer turns than that, nothing changes. 0 strips every
//!   message, the current turn included; Anthropic's extended thinking
//!   rejects a tool-use loop whose last assistant message lost its thinking,
//!   so use 0 only for providers or transcripts where that does not apply.
//!
//! What it leaves out: reasoning is never summarised or moved; it belongs to
//! its message (see the WIT contract).
//!
//! ```sh
//! agent-host run --processor target/processors/strip-reasoning.wasm \
//!     --processor-config '{"keep_turns": 2}'
//! ```

use agent_host_guest::{History, Processor, Result, Role, export_processor};
use serde::Deserialize;

/// The configuration.
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// How many of the most recent turns keep their reasoning (0 strips all).
    pub keep_turns: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config { keep_turns: 1 }
    }
}

/// The processor.
pub struct StripReasoning;

impl Processor for StripReasoning {
    type Config = Config;
    const CONFIG_EXAMPLE: Option<&'static str> = Some(r#"{"keep_turns": 1}"#);
    const CONFIG_SCHEMA: Option<&'static str> = Some(
        r#"{"type":"object","properties":{"keep_turns":{"type":"integer","minimum":0,"default":1}},"additionalProperties":false}"#,
    );

    fn process(history: &mut History, config: Config) -> Result<()> {
        let cut = match config.keep_turns {
            0 => history.len(),
            n => {
                let starts = history.turn_starts();
                if starts.len() <= n {
                    agent_host_guest::info!(
                        "stripped no reasoning: {} turns, keeping {n}",
                        starts.len()
                    );
                    return Ok(());
                }
                starts[starts.len() - n]
            }
        };
        let (mut stripped, mut emptied) = (0, 0);
        for i in 0..cut {
            let m = &history.messages()[i];
            if m.role != Role::Assistant || m.reasoning.is_none() {
                continue;
            }
            let left_empty =
                m.content.trim().is_empty() && m.parts.is_empty() && m.tool_calls.is_empty();
            stripped += 1;
            if left_empty {
                history.drop(i);
                emptied += 1;
            } else {
                history.message_mut(i).reasoning = None;
            }
        }
        agent_host_guest::info!(
            "stripped reasoning from {stripped} {} before message {cut} \
             ({emptied} held nothing else and {} dropped)",
            agent_host_guest::plural(stripped, "message"),
            if emptied == 1 { "was" } else { "were" }
        );
        Ok(())
    }
}

export_processor!(StripReasoning);

#[cfg(test)]
mod tests {
    use super::*;
    use agent_host_guest::{Error, Message, Reasoning, ToolCall, testing};

    fn thinking(text: &str, thought: &str) -> Message {
        let mut m = Message::new(Role::Assistant, text).with_id(text);
        m.reasoning = Some(Reasoning {
            text: thought.into(),
            signature: Some("sig".into()),
            redacted: false,
        });
        m
    }

    fn user(text: &str) -> Message {
        Message::new(Role::User, text).with_id(text)
    }

    /// Which messages still have reasoning, by id, and which ids are left.
    fn shape(out: &[Message]) -> Vec<String> {
        out.iter()
            .map(|m| match m.reasoning {
                Some(_) => format!("{}+r", m.id),
                None => m.id.clone(),
            })
            .collect()
    }

    fn three_turns() -> Vec<Message> {
        vec![
            Message::new(Role::System, "rules").with_id("sys"),
            user("u1"),
            thinking("a1", "t1"),
            user("u2"),
            thinking("a2", "t2"),
            user("u3"),
            thinking("a3", "t3"),
        ]
    }

    #[test]
    fn keeps_the_last_turn_by_default() {
        let out = testing::run::<StripReasoning>("{}", three_turns()).unwrap();
        assert_eq!(shape(&out), ["sys", "u1", "a1", "u2", "a2", "u3", "a3+r"]);
        assert_eq!(out[2].content, "a1", "the text stays");
    }

    #[test]
    fn keeps_the_last_n_turns() {
        let out = testing::run::<StripReasoning>(r#"{"keep_turns": 2}"#, three_turns()).unwrap();
        assert_eq!(shape(&out), ["sys", "u1", "a1", "u2", "a2+r", "u3", "a3+r"]);
    }

    #[test]
    fn zero_strips_every_turn() {
        let out = testing::run::<StripReasoning>(r#"{"keep_turns": 0}"#, three_turns()).unwrap();
        assert_eq!(shape(&out), ["sys", "u1", "a1", "u2", "a2", "u3", "a3"]);
    }

    #[test]
    fn fewer_turns_than_kept_changes_nothing() {
        let mut h = History::for_test(three_turns());
        StripReasoning::process(&mut h, Config { keep_turns: 3 }).unwrap();
        assert!((0..h.len()).all(|i| !h.is_changed(i) && h.is_kept(i)));
    }

    #[test]
    fn untouched_messages_are_not_replaced() {
        let mut h = History::for_test(vec![
            user("u1"),
            Message::new(Role::Assistant, "plain"),
            thinking("a1", "t1"),
            user("u2"),
            thinking("a2", "t2"),
        ]);
        StripReasoning::process(&mut h, Config::default()).unwrap();
        let changed: Vec<usize> = (0..h.len()).filter(|&i| h.is_changed(i)).collect();
        assert_eq!(changed, [2]);
    }

    #[test]
    fn a_message_left_empty_is_dropped() {
        // A thinking block stored as a message of its own, then the answer.
        let history = vec![
            user("u1"),
            thinking("", "just thinking").with_id("think"),
            Message::new(Role::Assistant, "answer").with_id("answer"),
            user("u2"),
        ];
        let out = testing::run::<StripReasoning>("{}", history).unwrap();
        assert_eq!(shape(&out), ["u1", "answer", "u2"]);
    }

    #[test]
    fn tool_calls_survive_and_keep_their_results() {
        let mut call = Message::tool_calls(vec![ToolCall::new("c1", "ls", "{}")]).with_id("call");
        call.reasoning = Some(Reasoning {
            text: String::new(),
            signature: None,
            redacted: true,
        });
        let history = vec![
            user("u1"),
            call,
            Message::tool_result("c1", "a b").with_id("result"),
            user("u2"),
        ];
        let out = testing::run::<StripReasoning>("{}", history).unwrap();
        assert_eq!(shape(&out), ["u1", "call", "result", "u2"]);
        assert_eq!(out[1].tool_calls.len(), 1);
    }

    #[test]
    fn synthetic_user_messages_do_not_start_turns() {
        let history = vec![
            user("u1"),
            thinking("a1", "t1"),
            Message::synthetic(Role::User, "continue").with_id("nudge"),
            thinking("a2", "t2"),
        ];
        let out = testing::run::<StripReasoning>("{}", history).unwrap();
        assert_eq!(shape(&out), ["u1", "a1+r", "nudge", "a2+r"]);
    }

    #[test]
    fn messages_before_the_first_turn_belong_to_it() {
        // As in `keep_last_turns`: with no more turns than kept, nothing changes.
        let history = vec![thinking("hello", "greet"), user("u1"), thinking("a1", "t1")];
        let out = testing::run::<StripReasoning>("{}", history.clone()).unwrap();
        assert_eq!(shape(&out), ["hello+r", "u1", "a1+r"]);
        let out = testing::run::<StripReasoning>(r#"{"keep_turns": 0}"#, history).unwrap();
        assert_eq!(shape(&out), ["hello", "u1", "a1"]);
    }

    #[test]
    fn empty_history() {
        assert!(
            testing::run::<StripReasoning>("{}", vec![])
                .unwrap()
                .is_empty()
        );
        let zero = testing::run::<StripReasoning>(r#"{"keep_turns": 0}"#, vec![]).unwrap();
        assert!(zero.is_empty());
    }

    #[test]
    fn bad_configurations_are_refused() {
        for config in [
            r#"{"keep_turns": -1}"#,
            r#"{"keep_turns": "1"}"#,
            r#"{"turns": 1}"#,
        ] {
            let e = testing::run::<StripReasoning>(config, vec![]).unwrap_err();
            assert!(matches!(e, Error::BadConfig(_)), "{config}: {e}");
        }
    }
}
