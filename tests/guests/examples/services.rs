//! Calls the host services its configuration names, in order, and logs
//! what each answered; keeps every message. `{"calls": ["summarize",
//! "count", "memory"], "repeat": 1, "max_tokens": 0, "timeout_ms": 0}`.
//! With `"insert": true` it inserts the last summary as a new message.
wit_bindgen::generate!({ path: "../../wit/v0.2.0", world: "history-processor" });

use agent_host::history::host::{Level, log};
use agent_host::history::services::{self, ServiceError, SummarizeCaps};
use agent_host::history::types::{
    Description, Error, History, Item, Message, MessageFlags, Role, RunContext,
};
use exports::agent_host::history::processor::Guest;

struct Services;

fn error(e: &ServiceError) -> String {
    match e {
        ServiceError::Denied(m) => format!("denied: {m}"),
        ServiceError::OverBudget(m) => format!("over-budget: {m}"),
        ServiceError::Failed(m) => format!("failed: {m}"),
    }
}

impl Guest for Services {
    fn describe() -> Description {
        Description {
            name: "services".into(),
            version: "1.0.0".into(),
            summary: "Calls host services and logs their answers.".into(),
            config_schema: None,
            config_example: None,
            reorders: false,
        }
    }

    fn process(ctx: RunContext, history: &History) -> Result<Vec<Item>, Error> {
        let config: serde_json::Value =
            serde_json::from_str(&ctx.config).map_err(|e| Error::BadConfig(e.to_string()))?;
        let calls: Vec<String> = config["calls"]
            .as_array()
            .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
            .unwrap_or_default();
        let repeat = config["repeat"].as_u64().unwrap_or(1);
        let caps = SummarizeCaps {
            max_tokens: config["max_tokens"].as_u64().unwrap_or(0) as u32,
            timeout_ms: config["timeout_ms"].as_u64().unwrap_or(0) as u32,
        };
        let n = history.len();
        let text: String = history.contents(0, n).join("\n");
        let mut summary = None;
        for _ in 0..repeat {
            for call in &calls {
                let line = match call.as_str() {
                    "summarize" => match services::summarize("Summarize this.", &text, caps) {
                        Ok(s) => {
                            let line = format!(
                                "summarize: ok {} in={} out={}",
                                s.text, s.input_tokens, s.output_tokens
                            );
                            summary = Some(s.text);
                            line
                        }
                        Err(e) => format!("summarize: {}", error(&e)),
                    },
                    "count" => match services::count_tokens(&text) {
                        Ok(n) => format!("count: ok {n}"),
                        Err(e) => format!("count: {}", error(&e)),
                    },
                    "memory" => match services::read_memory("", 10) {
                        Ok(facts) => {
                            let texts: Vec<String> = facts
                                .iter()
                                .map(|f| format!("{}={}", f.entity, f.text))
                                .collect();
                            format!("memory: ok {}", texts.join("; "))
                        }
                        Err(e) => format!("memory: {}", error(&e)),
                    },
                    other => format!("{other}: unknown"),
                };
                log(Level::Info, &line);
            }
        }
        let mut items: Vec<Item> = (0..n).map(Item::Keep).collect();
        if config["insert"].as_bool() == Some(true) {
            if let Some(text) = summary {
                items.push(Item::Insert(Message {
                    id: String::new(),
                    role: Role::User,
                    content: text,
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
            }
        }
        Ok(items)
    }
}

export!(Services);
