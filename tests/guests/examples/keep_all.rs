//! Keeps every message, and logs how many it saw.
wit_bindgen::generate!({ path: "../../wit/v0.1.0", world: "history-processor" });

use agent_host::history::host::{Level, log};
use agent_host::history::types::{Description, Error, Item, Message, RunContext};
use exports::agent_host::history::processor::Guest;

struct KeepAll;

impl Guest for KeepAll {
    fn describe() -> Description {
        Description {
            name: "keep-all".into(),
            version: "1.0.0".into(),
            summary: "Keeps every message.".into(),
            config_schema: None,
            config_example: None,
            reorders: false,
        }
    }

    fn process(ctx: RunContext, history: Vec<Message>) -> Result<Vec<Item>, Error> {
        log(
            Level::Info,
            &format!("saw {} messages, {} tokens, turn {}", history.len(), ctx.total_tokens, ctx.turn),
        );
        let items = (0..history.len() as u32).map(Item::Keep).collect();
        // The instance is thrown away after this call: freeing the input
        // message by message would be wasted work.
        std::mem::forget(history);
        Ok(items)
    }
}

export!(KeepAll);
