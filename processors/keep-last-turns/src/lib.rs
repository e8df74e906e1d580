//! `keep-last-turns`: keeps the last N turns of a history.
//!
//! A turn starts at a user message that is not synthetic. Everything before
//! the last `turns` turns is dropped except system messages and summary
//! checkpoints. The cut moves back rather than separate a tool call from its
//! results, so the output is always a valid history.
//!
//! Configuration: `{"turns": N}`, N at least 1, default 4.
//!
//! ```sh
//! agent-host run --processor target/processors/keep-last-turns.wasm \
//!     --processor-config '{"turns": 2}'
//! ```

use agent_host_guest::{Error, History, Processor, Result, export_processor};
use serde::Deserialize;

/// The configuration.
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// How many of the most recent turns to keep (at least 1).
    pub turns: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config { turns: 4 }
    }
}

/// The processor.
pub struct KeepLastTurns;

impl Processor for KeepLastTurns {
    type Config = Config;
    const CONFIG_EXAMPLE: Option<&'static str> = Some(r#"{"turns": 4}"#);
    const CONFIG_SCHEMA: Option<&'static str> = Some(
        r#"{"type":"object","properties":{"turns":{"type":"integer","minimum":1,"default":4}},"additionalProperties":false}"#,
    );

    fn process(history: &mut History, config: Config) -> Result<()> {
        if config.turns == 0 {
            return Err(Error::bad_config(
                "`turns` must be at least 1 (0 would drop the whole conversation)",
            ));
        }
        history.keep_last_turns(config.turns);
        Ok(())
    }
}

export_processor!(KeepLastTurns);

#[cfg(test)]
mod tests {
    use super::*;
    use agent_host_guest::{Message, Role, testing};

    #[test]
    fn keeps_the_last_turns() {
        let h = vec![
            Message::new(Role::System, "rules"),
            Message::new(Role::User, "one"),
            Message::new(Role::Assistant, "1"),
            Message::new(Role::User, "two"),
            Message::new(Role::Assistant, "2"),
        ];
        let out = testing::run::<KeepLastTurns>(r#"{"turns": 1}"#, h).unwrap();
        let texts: Vec<_> = out.iter().map(|m| m.content.as_str()).collect();
        assert_eq!(texts, ["rules", "two", "2"]);
    }

    #[test]
    fn zero_turns_is_a_configuration_error() {
        let e = testing::run::<KeepLastTurns>(r#"{"turns": 0}"#, vec![]).unwrap_err();
        assert!(matches!(e, Error::BadConfig(_)), "{e}");
    }
}
