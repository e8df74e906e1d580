//! Reads the host's environment.
wit_bindgen::generate!({ path: "../../wit/v0.1.0", world: "history-processor" });

use agent_host::history::types::{Description, Error, Item, Message, RunContext};
use exports::agent_host::history::processor::Guest;

struct Guest_;

impl Guest for Guest_ {
    fn describe() -> Description {
        Description {
            name: "wasi-env".into(),
            version: "1.0.0".into(),
            summary: "Reads the host's environment.".into(),
            config_schema: None,
            config_example: None,
            reorders: false,
        }
    }

    #[allow(unused_variables, unreachable_code)]
    fn process(ctx: RunContext, history: Vec<Message>) -> Result<Vec<Item>, Error> {
        match std::env::var("AGENT_HOST_SECRET") {
            Ok(v) => Err(Error::Failed(format!("leaked AGENT_HOST_SECRET={v}"))),
            Err(_) => Err(Error::Failed(format!("environment is empty: {} variables, {} arguments", std::env::vars().count(), std::env::args().count()))),
        }
    }
}

export!(Guest_);
