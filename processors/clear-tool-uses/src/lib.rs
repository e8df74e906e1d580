//! `clear-tool-uses`: clears the results of older tool calls once the
//! history grows past a trigger, keeping the most recent ones, with the
//! knobs of Anthropic's `clear_tool_uses` context edit, for any model.
//!
//! A cleared result keeps its message (and its `tool_call_id`, so the call
//! and its result stay a valid pair); its text becomes the placeholder and
//! its parts go. With `clear_tool_inputs`, the call's arguments become `{}`
//! as well. Results are cleared oldest first, all of those older than the
//! last `keep` tool uses, except those of `exclude_tools`; a result already
//! holding the placeholder is left as it is.
//!
//! Configuration (every field optional):
//! - `trigger`: when to clear, `{"type": "input_tokens", "value": N}` (the
//!   history's estimated tokens reach N; default 100,000) or
//!   `{"type": "tool_uses", "value": N}` (more than N tool results).
//! - `keep`: `{"type": "tool_uses", "value": N}`, the most recent tool uses
//!   whose results stay (default 3).
//! - `clear_at_least`: `{"type": "input_tokens", "value": N}`: clear only if
//!   that frees at least N tokens, else change nothing (a cleared prefix
//!   costs the provider's prompt cache; default 0).
//! - `exclude_tools`: names of tools whose results are never cleared.
//! - `clear_tool_inputs` (default false): clear the calls' arguments too.
//! - `placeholder` (default `[tool result cleared to save context]`).
//!
//! ```sh
//! agent-host run --processor target/processors/clear-tool-uses.wasm \
//!     --processor-config '{"trigger": {"type": "input_tokens", "value": 30000},
//!                          "keep": {"type": "tool_uses", "value": 2}}'
//! ```

use agent_host_guest::{History, Processor, Result, Role, estimate_tokens, export_processor};
use serde::Deserialize;

/// A count with its unit, as Anthropic writes them.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(tag = "type", content = "value", rename_all = "snake_case")]
pub enum Amount {
    /// Estimated tokens of the history.
    InputTokens(u64),
    /// Tool uses (results).
    ToolUses(u64),
}

/// The configuration.
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// When to clear.
    pub trigger: Amount,
    /// How many of the most recent tool uses keep their results.
    pub keep: Amount,
    /// The least a clearing must free, in tokens.
    pub clear_at_least: Option<Amount>,
    /// Tools whose results are never cleared.
    pub exclude_tools: Vec<String>,
    /// Clear the calls' arguments too.
    pub clear_tool_inputs: bool,
    /// What a cleared result says.
    pub placeholder: String,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            trigger: Amount::InputTokens(100_000),
            keep: Amount::ToolUses(3),
            clear_at_least: None,
            exclude_tools: Vec::new(),
            clear_tool_inputs: false,
            placeholder: "[tool result cleared to save context]".to_owned(),
        }
    }
}

/// The processor.
pub struct ClearToolUses;

impl Processor for ClearToolUses {
    type Config = Config;
    const CONFIG_EXAMPLE: Option<&'static str> = Some(
        r#"{"trigger": {"type": "input_tokens", "value": 100000}, "keep": {"type": "tool_uses", "value": 3}, "exclude_tools": [], "clear_tool_inputs": false}"#,
    );
    const CONFIG_SCHEMA: Option<&'static str> = Some(
        r#"{"type":"object","properties":{"trigger":{"type":"object","properties":{"type":{"enum":["input_tokens","tool_uses"]},"value":{"type":"integer","minimum":0}},"required":["type","value"]},"keep":{"type":"object","properties":{"type":{"const":"tool_uses"},"value":{"type":"integer","minimum":0}},"required":["type","value"]},"clear_at_least":{"type":"object","properties":{"type":{"const":"input_tokens"},"value":{"type":"integer","minimum":0}},"required":["type","value"]},"exclude_tools":{"type":"array","items":{"type":"string"}},"clear_tool_inputs":{"type":"boolean","default":false},"placeholder":{"type":"string"}},"additionalProperties":false}"#,
    );

    fn process(history: &mut History, config: Config) -> Result<()> {
        let Amount::ToolUses(keep) = config.keep else {
            return Err(agent_host_guest::Error::bad_config(
                "`keep` counts tool uses: {\"type\": \"tool_uses\", \"value\": N}",
            ));
        };
        let at_least = match config.clear_at_least {
            None => 0,
            Some(Amount::InputTokens(n)) => n,
            Some(Amount::ToolUses(_)) => {
                return Err(agent_host_guest::Error::bad_config(
                    "`clear_at_least` counts tokens: {\"type\": \"input_tokens\", \"value\": N}",
                ));
            }
        };
        let messages = history.messages();
        let total: u64 = messages.iter().map(|m| u64::from(m.tokens)).sum();
        let results = messages.iter().filter(|m| m.role == Role::Tool).count() as u64;
        let fired = match config.trigger {
            Amount::InputTokens(n) => total >= n,
            Amount::ToolUses(n) => results > n,
        };
        if !fired {
            agent_host_guest::info!(
                "cleared nothing: {total} tokens and {results} tool results are under the trigger"
            );
            return Ok(());
        }
        let keep_from =
            history.last_tool_results_start(usize::try_from(keep).unwrap_or(usize::MAX));
        let names = history.tool_names();
        let callers = history.tool_callers().to_vec();
        let placeholder_tokens = u64::from(estimate_tokens(&config.placeholder));
        // What would be cleared: (result index, tokens freed).
        let mut chosen = Vec::new();
        let mut freed = 0u64;
        for (i, m) in messages.iter().enumerate().take(keep_from) {
            if m.role != Role::Tool
                || names[i].is_some_and(|n| config.exclude_tools.iter().any(|x| x == n))
                || (m.content == config.placeholder && m.parts.is_empty())
            {
                continue;
            }
            let text: u64 = m.texts().map(|t| u64::from(estimate_tokens(t))).sum();
            let mut gain = text.saturating_sub(placeholder_tokens);
            if config.clear_tool_inputs
                && let Some(call) = callers[i]
                && let Some(id) = &m.tool_call_id
                && let Some(c) = messages[call].tool_calls.iter().find(|c| &c.id == id)
            {
                gain += u64::from(estimate_tokens(&c.arguments)).saturating_sub(1);
            }
            freed += gain;
            chosen.push(i);
        }
        if chosen.is_empty() || freed < at_least {
            agent_host_guest::info!(
                "cleared nothing: {} older tool results would free {freed} tokens, fewer than clear_at_least ({at_least})",
                chosen.len()
            );
            return Ok(());
        }
        let mut inputs = 0;
        for &i in &chosen {
            let call_id = history.messages()[i].tool_call_id.clone();
            let result = history.message_mut(i);
            result.content.clone_from(&config.placeholder);
            result.parts.clear();
            if config.clear_tool_inputs
                && let Some(call) = callers[i]
                && let Some(id) = call_id
            {
                let caller = history.message_mut(call);
                for c in caller.tool_calls.iter_mut().filter(|c| c.id == id) {
                    if c.arguments != "{}" {
                        c.arguments = "{}".to_owned();
                        inputs += 1;
                    }
                }
            }
        }
        agent_host_guest::info!(
            "cleared {} {} (and {inputs} call {}), about {freed} tokens, keeping the last {keep}",
            chosen.len(),
            agent_host_guest::plural(chosen.len(), "tool result"),
            if inputs == 1 { "input" } else { "inputs" }
        );
        Ok(())
    }
}

export_processor!(ClearToolUses);

#[cfg(test)]
mod tests {
    use super::*;
    use agent_host_guest::{Message, ToolCall, testing};

    /// `n` tool exchanges, each result `size` characters.
    fn exchanges(n: usize, size: usize) -> Vec<Message> {
        let mut out = vec![Message::new(Role::User, "work").with_id("u")];
        for i in 0..n {
            let tool = if i == 0 { "memory" } else { "read" };
            out.push(
                Message::tool_calls(vec![ToolCall::new(
                    format!("c{i}"),
                    tool,
                    format!("{{\"path\": \"file_{i}.rs\"}}"),
                )])
                .with_id(format!("a{i}")),
            );
            out.push(
                Message::tool_result(format!("c{i}"), "x".repeat(size))
                    .with_tool_name(tool)
                    .with_id(format!("t{i}")),
            );
        }
        out
    }

    fn cleared(out: &[Message]) -> Vec<&str> {
        out.iter()
            .filter(|m| m.content.starts_with("[tool result cleared"))
            .map(|m| m.id.as_str())
            .collect()
    }

    #[test]
    fn clears_all_but_the_last_kept_once_the_trigger_fires() {
        let config = r#"{"trigger": {"type": "tool_uses", "value": 3}, "keep": {"type": "tool_uses", "value": 2}}"#;
        let out = testing::run::<ClearToolUses>(config, exchanges(5, 400)).unwrap();
        assert_eq!(cleared(&out), ["t0", "t1", "t2"]);
        assert_eq!(out.len(), 11, "no message dropped");
        assert_eq!(out[2].tool_call_id.as_deref(), Some("c0"), "pairs stay");
        assert_eq!(out[1].tool_calls[0].arguments, "{\"path\": \"file_0.rs\"}");
    }

    #[test]
    fn under_the_trigger_nothing_changes() {
        let mut h = History::for_test(exchanges(3, 400));
        let config =
            serde_json::from_str(r#"{"trigger": {"type": "tool_uses", "value": 3}}"#).unwrap();
        ClearToolUses::process(&mut h, config).unwrap();
        assert!((0..h.len()).all(|i| !h.is_changed(i)));
    }

    #[test]
    fn excluded_tools_and_inputs() {
        let config = r#"{"trigger": {"type": "tool_uses", "value": 1}, "keep": {"type": "tool_uses", "value": 1},
                         "exclude_tools": ["memory"], "clear_tool_inputs": true}"#;
        let out = testing::run::<ClearToolUses>(config, exchanges(3, 400)).unwrap();
        assert_eq!(cleared(&out), ["t1"], "memory's result stays");
        assert_eq!(out[3].tool_calls[0].arguments, "{}");
        assert_eq!(out[1].tool_calls[0].arguments, "{\"path\": \"file_0.rs\"}");
        assert_eq!(out[5].tool_calls[0].arguments, "{\"path\": \"file_2.rs\"}");
    }

    #[test]
    fn clear_at_least_holds_back_a_clearing_that_frees_too_little() {
        let config = r#"{"trigger": {"type": "tool_uses", "value": 1}, "keep": {"type": "tool_uses", "value": 1},
                         "clear_at_least": {"type": "input_tokens", "value": 100000}}"#;
        let mut h = History::for_test(exchanges(4, 400));
        ClearToolUses::process(&mut h, serde_json::from_str(config).unwrap()).unwrap();
        assert!((0..h.len()).all(|i| !h.is_changed(i)));
    }

    #[test]
    fn the_token_trigger_reads_the_hosts_counts() {
        let mut history = exchanges(4, 400);
        for m in &mut history {
            m.tokens = 1_000;
        }
        let config = r#"{"trigger": {"type": "input_tokens", "value": 9000}, "keep": {"type": "tool_uses", "value": 1}}"#;
        let out = testing::run::<ClearToolUses>(config, history.clone()).unwrap();
        assert_eq!(cleared(&out), ["t0", "t1", "t2"]);
        let higher = r#"{"trigger": {"type": "input_tokens", "value": 9001}}"#;
        let out = testing::run::<ClearToolUses>(higher, history).unwrap();
        assert!(cleared(&out).is_empty());
    }

    #[test]
    fn bad_units_are_refused_by_name() {
        for (config, says) in [
            (
                r#"{"keep": {"type": "input_tokens", "value": 3}}"#,
                "`keep` counts tool uses",
            ),
            (
                r#"{"clear_at_least": {"type": "tool_uses", "value": 3}}"#,
                "`clear_at_least` counts tokens",
            ),
        ] {
            let e = testing::run::<ClearToolUses>(config, exchanges(2, 10)).unwrap_err();
            assert!(e.to_string().contains(says), "{e}");
        }
        assert!(testing::run::<ClearToolUses>(r#"{"keep": 3}"#, exchanges(2, 10)).is_err());
    }
}
