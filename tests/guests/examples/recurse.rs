//! Recurses without end.
wit_bindgen::generate!({ path: "../../wit/v0.1.0", world: "history-processor" });

use agent_host::history::types::{Description, Error, Item, Message, RunContext};
use exports::agent_host::history::processor::Guest;

struct Guest_;

impl Guest for Guest_ {
    fn describe() -> Description {
        Description {
            name: "recurse".into(),
            version: "1.0.0".into(),
            summary: "Recurses without end.".into(),
            config_schema: None,
            config_example: None,
            reorders: false,
        }
    }

    #[allow(unused_variables, unreachable_code)]
    fn process(ctx: RunContext, history: Vec<Message>) -> Result<Vec<Item>, Error> {
        #[allow(unconditional_recursion)]
        fn deeper(n: u64) -> u64 {
            std::hint::black_box(deeper(std::hint::black_box(n) + 1)) + 1
        }
        let _ = deeper(0);
        unreachable!()
    }
}

export!(Guest_);
