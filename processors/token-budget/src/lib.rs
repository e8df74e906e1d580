//! `token-budget`: keeps the newest messages that fit in a token budget.
//!
//! Costs are the host's estimates ([`Header::tokens`]): the processor reads
//! headers only, never a message's text. System messages are
//! always kept and paid for first; then whole exchanges (a message with the
//! tool results that answer it) are taken from the newest back, and the first
//! one that does not fit ends the walk: everything older goes, so the output
//! is a contiguous, recent stretch of the conversation with no tool call
//! separated from its results. The newest exchange is kept even when it alone
//! is over the budget (a model needs something to answer), with a warning in
//! the log.
//!
//! Configuration: `{"tokens": N}`, the budget; without it, the budget the host
//! computed for this call (the context window less the response reserve and
//! tool definitions).
//!
//! ```sh
//! agent-host run --processor target/processors/token-budget.wasm \
//!     --processor-config '{"tokens": 8000}'
//! ```

use agent_host_guest::{Error, Header, History, Processor, Result, Role, export_processor};
use serde::Deserialize;

/// The configuration.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// The budget in tokens; the host's budget for the call when absent.
    pub tokens: Option<u64>,
}

/// The processor.
pub struct TokenBudget;

impl Processor for TokenBudget {
    type Config = Config;
    const CONFIG_EXAMPLE: Option<&'static str> = Some(r#"{"tokens": 8000}"#);
    const CONFIG_SCHEMA: Option<&'static str> = Some(
        r#"{"type":"object","properties":{"tokens":{"type":"integer","minimum":1}},"additionalProperties":false}"#,
    );

    fn process(history: &mut History, config: Config) -> Result<()> {
        let budget = match config.tokens {
            Some(0) => return Err(Error::bad_config("`tokens` must be at least 1")),
            Some(n) => n,
            None => u64::from(history.context().budget),
        };
        let cut = fit(history.headers(), history.tool_callers(), budget);
        let mut dropped = 0;
        for i in 0..cut.start {
            if history.headers()[i].role != Role::System {
                history.drop(i);
                dropped += 1;
            }
        }
        if cut.over {
            agent_host_guest::warn!(
                "the newest exchange alone needs {} tokens, over the budget of {budget}; kept anyway",
                cut.used
            );
        }
        agent_host_guest::info!(
            "kept {} of {} messages, {} of {budget} tokens",
            history.len() - dropped,
            history.len(),
            cut.used
        );
        Ok(())
    }
}

/// Where the kept stretch starts and what it costs.
struct Cut {
    start: usize,
    used: u64,
    over: bool,
}

/// Finds the oldest index from which every non-system message fits.
fn fit(messages: &[Header], callers: &[Option<usize>], budget: u64) -> Cut {
    let system: u64 = messages
        .iter()
        .filter(|m| m.role == Role::System)
        .map(|m| u64::from(m.tokens))
        .sum();
    let mut used = system;
    let mut start = messages.len();
    let mut over = false;
    // Walk exchanges from the newest: an exchange ending at `end` starts at
    // the earliest caller of any result in it.
    while start > 0 {
        let end = start;
        let mut begin = end - 1;
        let mut i = end;
        while i > begin {
            i -= 1;
            if let Some(c) = callers[i] {
                begin = begin.min(c);
            }
        }
        let cost: u64 = messages[begin..end]
            .iter()
            .filter(|m| m.role != Role::System)
            .map(|m| u64::from(m.tokens))
            .sum();
        if used + cost > budget {
            if end == messages.len() {
                // The newest exchange is kept whatever it costs.
                used += cost;
                start = begin;
                over = true;
            }
            break;
        }
        used += cost;
        start = begin;
    }
    Cut { start, used, over }
}

export_processor!(TokenBudget);

#[cfg(test)]
mod tests {
    use super::*;
    use agent_host_guest::{Message, ToolCall, testing};

    fn m(role: Role, text: &str, tokens: u32) -> Message {
        let mut m = Message::new(role, text);
        m.tokens = tokens;
        m
    }

    fn run(config: &str, h: Vec<Message>) -> Vec<String> {
        testing::run::<TokenBudget>(config, h)
            .unwrap()
            .into_iter()
            .map(|m| m.content)
            .collect()
    }

    #[test]
    fn keeps_the_newest_that_fit_and_the_system_prompt() {
        let h = vec![
            m(Role::System, "sys", 10),
            m(Role::User, "u1", 50),
            m(Role::Assistant, "a1", 50),
            m(Role::User, "u2", 20),
            m(Role::Assistant, "a2", 20),
        ];
        assert_eq!(run(r#"{"tokens": 60}"#, h.clone()), ["sys", "u2", "a2"]);
        assert_eq!(run(r#"{"tokens": 1000}"#, h).len(), 5);
    }

    #[test]
    fn an_exchange_is_kept_or_dropped_whole() {
        let mut call = m(Role::Assistant, "call", 10);
        call.tool_calls.push(ToolCall::new("c1", "t", "{}"));
        let mut result = Message::tool_result("c1", "result");
        result.tokens = 40;
        let h = vec![
            m(Role::User, "u", 5),
            call,
            result,
            m(Role::Assistant, "done", 5),
        ];
        // 45 fits "done" and the result but not the call: the exchange goes.
        assert_eq!(run(r#"{"tokens": 45}"#, h.clone()), ["done"]);
        assert_eq!(run(r#"{"tokens": 55}"#, h), ["call", "result", "done"]);
    }

    #[test]
    fn the_newest_exchange_stays_even_over_budget() {
        let h = vec![m(Role::User, "old", 5), m(Role::User, "huge", 500)];
        assert_eq!(run(r#"{"tokens": 100}"#, h), ["huge"]);
    }

    #[test]
    fn the_default_budget_is_the_hosts() {
        let h = vec![m(Role::User, "a", 100_000), m(Role::User, "b", 100_000)];
        // testing::context gives a budget of 128,000.
        assert_eq!(run("{}", h), ["b"]);
    }

    #[test]
    fn bad_configurations_are_refused() {
        for config in [r#"{"tokens": 0}"#, r#"{"tokens": -5}"#, r#"{"budget": 5}"#] {
            let e = testing::run::<TokenBudget>(config, vec![]).unwrap_err();
            assert!(matches!(e, Error::BadConfig(_)), "{config}: {e}");
        }
    }

    #[test]
    fn an_empty_history_is_fine() {
        assert!(run("{}", vec![]).is_empty());
    }
}
