//! Reverses the history, and declares that it reorders.
wit_bindgen::generate!({ path: "../../wit/v0.1.0", world: "history-processor" });

use agent_host::history::types::{Description, Error, Item, Message, RunContext};
use exports::agent_host::history::processor::Guest;

struct Reverse;

impl Guest for Reverse {
    fn describe() -> Description {
        Description {
            name: "reverse".into(),
            version: "1.0.0".into(),
            summary: "Reverses the history.".into(),
            config_schema: None,
            config_example: None,
            reorders: true,
        }
    }

    fn process(_: RunContext, history: Vec<Message>) -> Result<Vec<Item>, Error> {
        Ok((0..history.len() as u32).rev().map(Item::Keep).collect())
    }
}

export!(Reverse);
