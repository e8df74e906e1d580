//! Reads the wall clock.
wit_bindgen::generate!({ path: "../../wit/v0.1.0", world: "history-processor" });

use agent_host::history::types::{Description, Error, Item, Message, RunContext};
use exports::agent_host::history::processor::Guest;

struct Guest_;

impl Guest for Guest_ {
    fn describe() -> Description {
        Description {
            name: "wasi-clock".into(),
            version: "1.0.0".into(),
            summary: "Reads the wall clock.".into(),
            config_schema: None,
            config_example: None,
            reorders: false,
        }
    }

    #[allow(unused_variables, unreachable_code)]
    fn process(ctx: RunContext, history: Vec<Message>) -> Result<Vec<Item>, Error> {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        Err(Error::Failed(format!("the time is {now}")))
    }
}

export!(Guest_);
