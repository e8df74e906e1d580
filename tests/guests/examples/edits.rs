//! Makes the edits its configuration asks for, good and bad:
//! `{"drop": [i], "replace": [[i, "text"]], "insert": "text", "out_of_range": true,
//!   "duplicate": true, "reverse": true, "bad_metadata": true, "fail": "why",
//!   "new_id": "id", "echo": true}`. `echo` replaces every message by an
//!   unchanged copy of itself. Unknown keys are a configuration error.
wit_bindgen::generate!({ path: "../../wit/v0.1.0", world: "history-processor" });

use agent_host::history::types::{
    Description, Error, Item, Message, MessageFlags, Replacement, Role, RunContext,
};
use exports::agent_host::history::processor::Guest;
use serde_json::Value;

struct Edits;

const KEYS: &[&str] = &[
    "drop", "replace", "insert", "out_of_range", "duplicate", "reverse", "bad_metadata", "fail",
    "new_id", "echo",
];

fn message(role: Role, text: &str) -> Message {
    Message {
        id: String::new(),
        role,
        content: text.into(),
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
    }
}

impl Guest for Edits {
    fn describe() -> Description {
        Description {
            name: "edits".into(),
            version: "1.0.0".into(),
            summary: "Makes the edits its configuration asks for.".into(),
            config_schema: None,
            config_example: Some(r#"{"drop": [0]}"#.into()),
            reorders: false,
        }
    }

    fn process(ctx: RunContext, history: Vec<Message>) -> Result<Vec<Item>, Error> {
        let config: Value = serde_json::from_str(&ctx.config)
            .map_err(|e| Error::BadConfig(format!("not JSON: {e}")))?;
        let Value::Object(config) = config else {
            return Err(Error::BadConfig("expected a JSON object".into()));
        };
        if let Some(k) = config.keys().find(|k| !KEYS.contains(&k.as_str())) {
            return Err(Error::BadConfig(format!("unknown key `{k}`")));
        }
        if let Some(why) = config.get("fail").and_then(Value::as_str) {
            return Err(Error::Failed(why.into()));
        }
        let drop: Vec<u64> = config
            .get("drop")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_u64).collect())
            .unwrap_or_default();
        let replace: Vec<(u64, String)> = config
            .get("replace")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|p| Some((p.get(0)?.as_u64()?, p.get(1)?.as_str()?.to_owned())))
                    .collect()
            })
            .unwrap_or_default();
        if config.get("echo").and_then(Value::as_bool) == Some(true) {
            return Ok(history
                .into_iter()
                .enumerate()
                .map(|(i, message)| Item::Replace(Replacement { index: i as u32, message }))
                .collect());
        }
        let mut items = Vec::new();
        let mut history = history;
        for (i, m) in history.drain(..).enumerate() {
            let i64 = i as u64;
            if drop.contains(&i64) {
                continue;
            }
            if let Some((_, text)) = replace.iter().find(|(j, _)| *j == i64) {
                let mut m = m;
                m.content = text.clone();
                m.parts.clear();
                m.id = String::new();
                items.push(Item::Replace(Replacement { index: i as u32, message: m }));
            } else {
                items.push(Item::Keep(i as u32));
            }
        }
        if config.get("reverse").and_then(Value::as_bool) == Some(true) {
            items.reverse();
        }
        if config.get("duplicate").and_then(Value::as_bool) == Some(true) {
            items.push(Item::Keep(0));
        }
        if config.get("out_of_range").and_then(Value::as_bool) == Some(true) {
            items.push(Item::Keep(items.len() as u32 + 1000));
        }
        if let Some(text) = config.get("insert").and_then(Value::as_str) {
            let mut m = message(Role::Assistant, text);
            if let Some(id) = config.get("new_id").and_then(Value::as_str) {
                m.id = id.into();
            }
            items.push(Item::Insert(m));
        }
        if config.get("bad_metadata").and_then(Value::as_bool) == Some(true) {
            let mut m = message(Role::User, "x");
            m.metadata = Some("[1, 2]".into());
            items.push(Item::Insert(m));
        }
        Ok(items)
    }
}

export!(Edits);
