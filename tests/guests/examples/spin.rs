//! Spins forever.
wit_bindgen::generate!({ path: "../../wit/v0.1.0", world: "history-processor" });

use agent_host::history::types::{Description, Error, Item, Message, RunContext};
use exports::agent_host::history::processor::Guest;

struct Guest_;

impl Guest for Guest_ {
    fn describe() -> Description {
        Description {
            name: "spin".into(),
            version: "1.0.0".into(),
            summary: "Spins forever.".into(),
            config_schema: None,
            config_example: None,
            reorders: false,
        }
    }

    #[allow(unused_variables, unreachable_code)]
    fn process(ctx: RunContext, history: Vec<Message>) -> Result<Vec<Item>, Error> {
        let mut x: u64 = 0;
        loop {
            x = std::hint::black_box(x.wrapping_add(1));
        }
    }
}

export!(Guest_);
