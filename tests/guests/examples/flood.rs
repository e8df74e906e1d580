//! Answers with far too much: `{"string": true}` a 100 MB message, else `{\"items\": N}` items (default 5 million).
wit_bindgen::generate!({ path: "../../wit/v0.1.0", world: "history-processor" });

use agent_host::history::types::{Description, Error, Item, Message, RunContext};
use exports::agent_host::history::processor::Guest;

struct Guest_;

impl Guest for Guest_ {
    fn describe() -> Description {
        Description {
            name: "flood".into(),
            version: "1.0.0".into(),
            summary: "Answers with far too much: `{\"string\": true}` a 100 MB message, else `{\"items\": N}` items (default 5 million).".into(),
            config_schema: None,
            config_example: None,
            reorders: false,
        }
    }

    #[allow(unused_variables, unreachable_code)]
    fn process(ctx: RunContext, history: Vec<Message>) -> Result<Vec<Item>, Error> {
        if ctx.config.contains("string") {
            let mut m = history.into_iter().next().expect("a message");
            m.content = "x".repeat(100 << 20);
            m.id = String::new();
            return Ok(vec![Item::Insert(m)]);
        }
        let n: u32 = ctx
            .config
            .split("\"items\":")
            .nth(1)
            .and_then(|rest| rest.trim_matches(|c: char| !c.is_ascii_digit()).parse().ok())
            .unwrap_or(5_000_000);
        Ok((0..n).map(|_| Item::Keep(0)).collect())
    }
}

export!(Guest_);
