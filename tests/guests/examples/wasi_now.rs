//! Keeps every message and inserts a note of the wall clock's time, in
//! nanoseconds: an answer that differs from run to run. Reads the clock
//! through std (`wasi:clocks/wall-clock`) and builds a `HashMap`, whose
//! hasher std seeds through WASI (`wasi:random/insecure-seed`).
wit_bindgen::generate!({ path: "../../wit/v0.1.0", world: "history-processor" });

use agent_host::history::types::{
    Description, Error, Item, Message, MessageFlags, Role, RunContext,
};
use exports::agent_host::history::processor::Guest;

struct Now;

impl Guest for Now {
    fn describe() -> Description {
        Description {
            name: "wasi-now".into(),
            version: "1.0.0".into(),
            summary: "Inserts a note of the time.".into(),
            config_schema: None,
            config_example: None,
            reorders: false,
        }
    }

    fn process(_ctx: RunContext, history: Vec<Message>) -> Result<Vec<Item>, Error> {
        let mut ids = std::collections::HashMap::new();
        for m in &history {
            ids.insert(m.id.clone(), m.content.len());
        }
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let mut items: Vec<Item> = (0..history.len() as u32).map(Item::Keep).collect();
        items.push(Item::Insert(Message {
            id: format!("now-{nanos}"),
            role: Role::User,
            content: format!("the time is {nanos} ns; {} distinct ids", ids.len()),
            parts: Vec::new(),
            reasoning: None,
            tool_calls: Vec::new(),
            tool_call_id: None,
            tool_name: None,
            usage: None,
            model: None,
            timestamp: None,
            agent: None,
            channel: None,
            flags: MessageFlags::SYNTHETIC,
            metadata: None,
            tokens: 0,
        }));
        Ok(items)
    }
}

export!(Now);
