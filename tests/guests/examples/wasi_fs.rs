//! Reads the file named by its config (`{"read": PATH}`), then tries to write next to it.
wit_bindgen::generate!({ path: "../../wit/v0.1.0", world: "history-processor" });

use agent_host::history::types::{Description, Error, Item, Message, RunContext};
use exports::agent_host::history::processor::Guest;

struct Guest_;

impl Guest for Guest_ {
    fn describe() -> Description {
        Description {
            name: "wasi-fs".into(),
            version: "1.0.0".into(),
            summary: "Reads the file named by its config (`{\"read\": PATH}`), then tries to write next to it.".into(),
            config_schema: None,
            config_example: None,
            reorders: false,
        }
    }

    #[allow(unused_variables, unreachable_code)]
    fn process(ctx: RunContext, history: Vec<Message>) -> Result<Vec<Item>, Error> {
        let path = ctx.config.split('"').nth(3).unwrap_or("/etc/passwd").to_owned();
        let text = std::fs::read_to_string(&path)
            .map_err(|e| Error::Failed(format!("cannot read {path}: {e}")))?;
        let written = std::fs::write(format!("{path}.written"), "x").is_ok();
        println!("read {} bytes, write {}", text.len(), if written { "succeeded" } else { "refused" });
        let mut m = history.into_iter().next().expect("a message");
        m.content = format!("read: {text}; write: {written}");
        m.id = String::new();
        Ok(vec![Item::Insert(m)])
    }
}

export!(Guest_);
