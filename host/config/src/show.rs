//! `agent-host config show`: every effective key, its value and its origin.
//!
//! The text form is itself a valid `agent-host.toml` (origins are comments),
//! so a user can start a file from it; the JSON form is for scripts.

use serde_json::{Map, Value, json};

use super::{Origin, Settings};
use agent_host_provider::ProviderSettings;

use crate::file::Named;

/// One effective value.
struct Entry {
    /// The TOML table it belongs to (`context.pruning`, `processors`).
    section: &'static str,
    /// Which `[[processors]]` entry, for the array's tables.
    index: Option<usize>,
    /// Its key within the table.
    name: &'static str,
    /// Its value; `None` when it is unset (the provider's temperature).
    value: Option<toml::Value>,
    /// What `None` means, for the text form.
    unset: &'static str,
}

impl Entry {
    fn new(section: &'static str, name: &'static str, value: impl Into<toml::Value>) -> Self {
        Entry {
            section,
            index: None,
            name,
            value: Some(value.into()),
            unset: "",
        }
    }

    /// The dotted key [`Settings::origin`] knows it by.
    fn key(&self) -> String {
        match self.index {
            Some(i) => format!("{}[{i}].{}", self.section, self.name),
            None => format!("{}.{}", self.section, self.name),
        }
    }
}

/// A whole number as TOML (whose integers are `i64`).
fn int(n: impl TryInto<i64>) -> toml::Value {
    toml::Value::Integer(n.try_into().unwrap_or(i64::MAX))
}

/// A trigger: its number, or `"off"`.
fn switch(v: Option<impl Into<toml::Value>>) -> toml::Value {
    v.map_or_else(|| toml::Value::from(super::file::OFF), Into::into)
}

/// JSON as TOML: tool definitions and processor configurations came from
/// TOML, so the conversion only fails for JSON given some other way (a
/// `null`); that is shown as JSON text.
fn from_json(v: &Value) -> toml::Value {
    toml::Value::try_from(v).unwrap_or_else(|_| toml::Value::String(v.to_string()))
}

impl Settings {
    fn entries(&self) -> Vec<Entry> {
        let c = &self.context;
        let p = &c.pruning;
        let mut entries = vec![
            Entry::new("context", "context_limit", c.context_limit),
            Entry::new("context", "response_reserve", c.response_reserve),
            Entry::new(
                "context",
                "tool_definition_tokens",
                c.tool_definition_tokens,
            ),
            Entry::new("context", "auto_summarize", c.auto_summarize),
            Entry::new(
                "context",
                "max_messages_before_summary",
                switch(c.max_messages_before_summary.map(int)),
            ),
            Entry::new(
                "context",
                "max_tokens_before_summary",
                switch(c.max_tokens_before_summary.map(int)),
            ),
            Entry::new(
                "context",
                "summarize_fraction",
                switch(c.summarize_fraction),
            ),
            Entry::new(
                "context",
                "min_messages_to_summarize",
                int(c.min_messages_to_summarize),
            ),
            Entry::new("context", "keep_last_turns", int(c.keep_last_turns)),
            Entry::new("context", "min_recent_messages", int(c.min_recent_messages)),
            Entry::new("context", "summary_share", c.summary_share),
            Entry::new("context", "summary_max_words", int(c.summary_max_words)),
            Entry::new("context", "summarizer", c.summarizer.as_str()),
            Entry::new("context", "extractive_fallback", c.extractive_fallback),
            Entry::new("context", "doom_loop_threshold", int(c.doom_loop_threshold)),
            Entry::new(
                "context",
                "max_tool_result_chars",
                int(c.max_tool_result_chars),
            ),
            Entry::new("context.pruning", "min_chars", int(p.min_chars)),
            Entry::new("context.pruning", "soft_ratio", p.soft_ratio),
            Entry::new("context.pruning", "hard_ratio", p.hard_ratio),
            Entry::new("context.pruning", "keep_chars", int(p.keep_chars)),
            Entry::new(
                "context.pruning",
                "protected_assistant_turns",
                int(p.protected_assistant_turns),
            ),
            Entry::new(
                "context.pruning",
                "excluded_tools",
                toml::Value::Array(p.excluded_tools.iter().map(|t| t.as_str().into()).collect()),
            ),
        ];
        if let Some(provider) = &self.provider {
            entries.extend(provider_entries(provider));
        }
        // A PostgreSQL URL's password is never shown.
        let store = agent_host_store::redact(&self.store);
        entries.push(Entry::new("store", "path", store.as_str()));
        let m = &self.memory;
        if let Some(user) = &m.user {
            entries.push(Entry::new("memory", "user", user.as_str()));
        }
        entries.extend([
            Entry::new("memory", "tools", m.tools),
            Entry::new("memory", "extraction", m.extraction.as_str()),
            Entry::new(
                "memory",
                "extraction_threshold",
                int(m.extraction_threshold),
            ),
            Entry::new("memory", "retrieval_limit", int(m.retrieval_limit)),
            Entry::new("memory", "recall_tokens", int(m.recall_tokens)),
        ]);
        for (i, processor) in self.processors.iter().enumerate() {
            let o = &processor.options;
            let config = o
                .config
                .as_deref()
                .and_then(|text| serde_json::from_str::<Value>(text).ok())
                .map(|v| from_json(&v));
            let dirs = o
                .grants
                .read_dirs
                .iter()
                .map(|d| d.display().to_string().into())
                .collect();
            let mut items =
                vec![
                    Entry::new("processors", "path", processor.path.display().to_string()),
                    Entry {
                        value: config,
                        unset: "the processor gets {}",
                        ..Entry::new("processors", "config", "")
                    },
                    Entry::new("processors", "on_failure", policy_name(o.on_failure)),
                    Entry::new("processors", "on_invalid", policy_name(o.on_invalid)),
                    Entry::new(
                        "processors",
                        "deadline_ms",
                        int(o.limits.deadline.as_millis()),
                    ),
                    Entry::new("processors", "memory_mib", int(o.limits.memory_bytes >> 20)),
                    Entry::new("processors", "allow_dirs", toml::Value::Array(dirs)),
                    Entry::new("processors", "allow_clocks", o.grants.clocks),
                    Entry::new("processors", "allow_random", o.grants.random),
                    Entry::new("processors", "allow_summarize", o.grants.summarize),
                    Entry::new("processors", "allow_count_tokens", o.grants.count_tokens),
                    Entry::new("processors", "allow_memory", o.grants.memory),
                    Entry::new("processors", "service_calls", int(o.limits.services.calls)),
                    Entry::new(
                        "processors",
                        "model_tokens",
                        int(o.limits.services.model_tokens),
                    ),
                    Entry::new(
                        "processors",
                        "answer_tokens",
                        int(o.limits.services.answer_tokens),
                    ),
                    Entry::new(
                        "processors",
                        "service_time_ms",
                        int(o.limits.services.time.as_millis()),
                    ),
                    Entry {
                        value: processor.routes.as_ref().map(|r| {
                            toml::Value::Array(r.iter().map(|r| r.as_str().into()).collect())
                        }),
                        unset: "every route",
                        ..Entry::new("processors", "routes", "")
                    },
                    Entry {
                        value: processor.models.as_ref().map(|m| {
                            toml::Value::Array(m.iter().map(|m| m.as_str().into()).collect())
                        }),
                        unset: "every model",
                        ..Entry::new("processors", "models", "")
                    },
                    Entry::new(
                        "processors",
                        "chains",
                        toml::Value::Array(
                            processor.chains.iter().map(|c| c.as_str().into()).collect(),
                        ),
                    ),
                ];
            for item in &mut items {
                item.index = Some(i);
            }
            entries.extend(items);
        }
        for (i, upstream) in self.upstreams.iter().enumerate() {
            let p = &upstream.provider;
            let mut items = vec![
                Entry::new("upstreams", "name", upstream.name.as_str()),
                Entry::new("upstreams", "kind", p.kind.name()),
                Entry::new(
                    "upstreams",
                    "models",
                    toml::Value::Array(upstream.models.iter().map(|m| m.as_str().into()).collect()),
                ),
                Entry::new("upstreams", "model", p.model.as_str()),
                Entry::new("upstreams", "base_url", p.base_url.as_str()),
                Entry::new(
                    "upstreams",
                    "api_key_env",
                    p.api_key_env.clone().unwrap_or_default(),
                ),
                Entry::new("upstreams", "default", upstream.default),
                Entry::new("upstreams", "responses", upstream.responses),
                Entry::new("upstreams", "max_tokens", int(p.max_tokens)),
                Entry::new("upstreams", "max_tokens_field", p.max_tokens_field.name()),
                Entry::new("upstreams", "timeout_secs", int(p.timeout.as_secs())),
            ];
            for item in &mut items {
                item.index = Some(i);
            }
            entries.extend(items);
        }
        entries
    }

    /// Every effective key as TOML, grouped by table, each line commented
    /// with its origin: `context_limit = 200000    # flag --context-limit`
    /// (`# file` for the file the first line names).
    ///
    /// The text is a valid `agent-host.toml`. No secret is in it: the API
    /// key's variable is named, never read.
    pub fn show(&self) -> String {
        let mut out = String::new();
        match (&self.file, self.found_by) {
            (Some(path), Some(by)) => {
                out.push_str(&format!(
                    "# configuration file: {} ({by})\n",
                    path.display()
                ));
            }
            _ => out.push_str("# no configuration file: defaults, environment and flags\n"),
        }
        if let Some(state) = self.trust() {
            if self.untrusted().is_empty() {
                out.push_str("# trusted: its endpoint, secret, store and folder keys apply\n");
            } else {
                out.push_str(&format!(
                    "# {state}: the keys marked NOT TRUSTED stop every other command until you \
                     run `agent-host config trust`\n"
                ));
            }
        }
        let entries = self.entries();
        let width = entries
            .iter()
            .filter_map(|e| {
                e.value
                    .as_ref()
                    .map(|v| e.name.len() + 3 + v.to_string().len())
            })
            .filter(|&w| w <= 48)
            .max()
            .unwrap_or(0);
        let mut table: Option<(&str, Option<usize>)> = None;
        for (at, e) in entries.iter().enumerate() {
            if table != Some((e.section, e.index)) {
                if at
                    == entries
                        .iter()
                        .position(|e| e.section == "store")
                        .unwrap_or(usize::MAX)
                    && self.provider.is_none()
                {
                    out.push_str(
                        "\n# [provider]: none configured (offline: no model; summaries are extractive)\n",
                    );
                }
                table = Some((e.section, e.index));
                if e.index.is_some() {
                    out.push_str(&format!("\n[[{}]]\n", e.section));
                } else {
                    out.push_str(&format!("\n[{}]\n", e.section));
                }
            }
            // The header names the file: its path on every line is noise.
            let key = e.key();
            let origin = match self.origin(&key) {
                Some(Origin::File(_)) if self.untrusted().iter().any(|(k, _)| *k == key) => {
                    "file, NOT TRUSTED".to_owned()
                }
                Some(Origin::File(_)) => "file".to_owned(),
                Some(origin) => origin.to_string(),
                None => Origin::Default.to_string(),
            };
            let line = match &e.value {
                Some(v) => format!("{} = {v}", e.name),
                None => format!("# {} is not set: {}", e.name, e.unset),
            };
            out.push_str(&format!("{line:<width$}  # {origin}\n"));
        }
        if self.processors.is_empty() {
            out.push_str("\n# [[processors]]: none\n");
        }
        out
    }

    /// Every effective key as JSON: `{"file": PATH|null, "values":
    /// {"context.context_limit": {"value": 128000, "origin": "default"},
    /// ...}}`, in the order of [`Settings::show`]; an unset value is `null`.
    pub fn show_json(&self) -> Value {
        let mut values = Map::new();
        for e in self.entries() {
            let key = e.key();
            let origin = self.origin(&key).unwrap_or(&Origin::Default).to_string();
            let value = e.value.as_ref().map_or(Value::Null, |v| {
                serde_json::to_value(v).unwrap_or(Value::Null)
            });
            values.insert(key, json!({ "value": value, "origin": origin }));
        }
        let untrusted: Vec<&str> = self.untrusted().iter().map(|(k, _)| k.as_str()).collect();
        json!({
            "file": self.file.as_ref().map(|p| p.display().to_string()),
            "trust": self.trust().map(|t| t.to_string()),
            "untrusted_keys": untrusted,
            "provider_configured": self.provider.is_some(),
            "values": values,
        })
    }
}

fn provider_entries(p: &ProviderSettings) -> Vec<Entry> {
    let temperature = p
        .temperature
        // Through its shortest text: 0.7f32 is 0.699999988 as an f64.
        .map(|t| toml::Value::Float(t.to_string().parse().unwrap_or(f64::from(t))));
    let tools = toml::Value::Array(p.tools.iter().map(from_json).collect());
    vec![
        Entry::new("provider", "kind", p.kind.as_str()),
        Entry::new("provider", "model", p.model.as_str()),
        Entry::new("provider", "base_url", p.base_url.as_str()),
        Entry::new(
            "provider",
            "api_key_env",
            p.api_key_env.as_deref().unwrap_or(""),
        ),
        Entry::new("provider", "max_tokens", p.max_tokens),
        Entry::new("provider", "max_tokens_field", p.max_tokens_field.as_str()),
        Entry {
            value: temperature,
            unset: "the server's default",
            ..Entry::new("provider", "temperature", 0.0)
        },
        Entry::new("provider", "stream", p.stream),
        Entry::new("provider", "timeout_secs", int(p.timeout.as_secs())),
        Entry::new(
            "provider",
            "connect_timeout_secs",
            int(p.connect_timeout.as_secs()),
        ),
        Entry::new("provider", "max_retries", p.max_retries),
        Entry::new("provider", "tools", tools),
    ]
}

/// A policy's name, as the file and the flags spell it.
fn policy_name(policy: impl Named) -> String {
    policy.name().to_owned()
}
