//! The tools long-term memory offers a model (`memory_search`,
//! `memory_write`, `memory_recall`), run by the host, never by the model's
//! client: their definitions, in the OpenAI function format the providers
//! send, and their execution against the memory of a [`MemoryConfig`].
//!
//! A call's arguments are the model's words, so they are read as untrusted
//! input: a JSON object of known fields, each bounded. A call that cannot be
//! carried out is answered with `{"error": ...}` for the model to read; it
//! never fails the turn.

use agent_host_core::Message;
use agent_host_core::memory::{Fact, Filter, Scope};
use agent_host_core::reconcile::HOST_ONLY;
use agent_host_provider::ProviderError;
use agent_host_store::memory::MemoryStore;
use chrono::Utc;
use serde_json::{Value, json};

use crate::MemoryConfig;

/// Searches the user's memory.
pub const SEARCH: &str = "memory_search";
/// Records a fact.
pub const WRITE: &str = "memory_write";
/// Everything known about one entity.
pub const RECALL: &str = "memory_recall";

/// How many rounds of memory-tool calls one turn may make before the
/// model's answer is taken as it is.
pub const MAX_ROUNDS: usize = 4;

/// The most results a search or recall answers with.
const MAX_RESULTS: usize = 20;
/// The longest query, fact or entity name the tools take, in characters.
const MAX_QUERY_CHARS: usize = 1_000;
const MAX_FACT_CHARS: usize = 2_000;
const MAX_ENTITY_CHARS: usize = 200;
/// The largest arguments text a call may carry.
const MAX_ARGUMENTS_BYTES: usize = 16 * 1024;

/// Whether `name` is one of the memory tools.
pub fn is_memory_tool(name: &str) -> bool {
    matches!(name, SEARCH | WRITE | RECALL)
}

/// Whether `m` calls one of the memory tools.
pub fn calls_memory(m: &Message) -> bool {
    m.tool_calls.iter().any(|call| is_memory_tool(&call.name))
}

/// Marks `m` as a message its client never saw ([`HOST_ONLY`]): a round of
/// memory calls the host ran for the model, and their results.
pub fn mark_host_only(m: &mut Message) {
    m.metadata.insert(HOST_ONLY.into(), Value::Bool(true));
}

/// Runs a round of calls on tokio's blocking pool (the memory store's
/// reads and writes block): `asked` (an assistant message of `agent` in
/// `session`, when it is stored, that calls memory tools) gets a fresh id,
/// the agent and the time, and is marked host-only; then each of its calls
/// is answered: one to a memory tool is run against `memory`; any other
/// (one of the client's tools, in a reply that called both) is answered
/// with `{"error": not_run}`, for the model to call it again once it has
/// read the memory results. Returns `asked` and the results, in the calls'
/// order, each with a fresh id, the agent and the time, marked host-only
/// too.
pub async fn answer_round(
    memory: MemoryConfig,
    agent: String,
    session: Option<String>,
    mut asked: Message,
    not_run: &'static str,
) -> Result<(Message, Vec<Message>), ProviderError> {
    tokio::task::spawn_blocking(move || {
        let results = answer_blocking(&memory, &agent, session.as_deref(), &mut asked, not_run);
        (asked, results)
    })
    .await
    .map_err(|e| ProviderError::Malformed(format!("a memory tool failed: {e}")))
}

fn answer_blocking(
    memory: &MemoryConfig,
    agent: &str,
    session: Option<&str>,
    asked: &mut Message,
    not_run: &str,
) -> Vec<Message> {
    asked.id = crate::new_id();
    asked.agent = Some(agent.to_owned());
    asked.timestamp.get_or_insert_with(Utc::now);
    mark_host_only(asked);
    asked
        .tool_calls
        .iter()
        .map(|call| {
            let answer = if is_memory_tool(&call.name) {
                let site = CallSite {
                    agent,
                    session,
                    message: &asked.id,
                };
                run(memory, site, &call.name, &call.arguments)
            } else {
                json!({ "error": not_run }).to_string()
            };
            let mut result =
                Message::tool_result(&call.id, &call.name, answer).with_id(crate::new_id());
            result.agent = Some(agent.to_owned());
            result.timestamp = Some(Utc::now());
            mark_host_only(&mut result);
            result
        })
        .collect()
}

/// The error a result of [`answer_round`] or [`run`] reports, if any.
pub fn result_error(result: &Message) -> Option<String> {
    serde_json::from_str::<Value>(&result.content)
        .ok()?
        .get("error")?
        .as_str()
        .map(str::to_owned)
}

/// The three tools' definitions (OpenAI function format; the Anthropic
/// provider converts them).
pub fn definitions() -> Vec<Value> {
    let function = |name: &str, description: &str, parameters: Value| {
        json!({"type": "function", "function": {
            "name": name, "description": description, "parameters": parameters,
        }})
    };
    vec![
        function(
            SEARCH,
            "Search long-term memory (facts about the user and what they told you in earlier \
             conversations). Returns the best matches, newest knowledge first among equals.",
            json!({"type": "object", "properties": {
                "query": {"type": "string", "description": "What to look for, in a few words."},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_RESULTS,
                          "description": "How many facts at most (default 5)."},
            }, "required": ["query"]}),
        ),
        function(
            WRITE,
            "Remember a fact for later conversations: one short sentence. A newer fact that \
             contradicts an older one replaces it.",
            json!({"type": "object", "properties": {
                "text": {"type": "string", "description": "The fact, as one sentence."},
                "entity": {"type": "string",
                           "description": "Who or what it is about (default: the user)."},
            }, "required": ["text"]}),
        ),
        function(
            RECALL,
            "Everything long-term memory holds about one entity (a person, project or thing), \
             including facts that were replaced, marked as such.",
            json!({"type": "object", "properties": {
                "entity": {"type": "string", "description": "The entity's name."},
            }, "required": ["entity"]}),
        ),
    ]
}

/// Where a call is made: the agent, and the session and message whose
/// tool call it is (the provenance of a fact it writes).
#[derive(Clone, Copy, Debug)]
pub struct CallSite<'a> {
    /// The agent that remembers.
    pub agent: &'a str,
    /// The session the call was made in, if it is stored.
    pub session: Option<&'a str>,
    /// The assistant message that made the call.
    pub message: &'a str,
}

/// Runs the call `name(arguments)` against `memory` (blocking) and returns
/// the tool's answer, as JSON text, for the model.
pub fn run(memory: &MemoryConfig, site: CallSite<'_>, name: &str, arguments: &str) -> String {
    let answer = match call(&memory.store, &memory.user, site, name, arguments) {
        Ok(answer) => answer,
        Err(why) => json!({"error": why}),
    };
    answer.to_string()
}

fn call(
    store: &MemoryStore,
    user: &str,
    site: CallSite<'_>,
    name: &str,
    arguments: &str,
) -> Result<Value, String> {
    if arguments.len() > MAX_ARGUMENTS_BYTES {
        return Err(format!(
            "the arguments are {} bytes, over the limit of {MAX_ARGUMENTS_BYTES}",
            arguments.len()
        ));
    }
    let args: Value = if arguments.trim().is_empty() {
        json!({})
    } else {
        serde_json::from_str(arguments).map_err(|e| format!("the arguments are not JSON: {e}"))?
    };
    let Value::Object(args) = args else {
        return Err("the arguments are not a JSON object".to_owned());
    };
    let text = |field: &str, max: usize, required: bool| -> Result<Option<String>, String> {
        match args.get(field) {
            None | Some(Value::Null) if !required => Ok(None),
            None | Some(Value::Null) => Err(format!("`{field}` is required")),
            Some(Value::String(s)) if s.trim().is_empty() => Err(format!("`{field}` is empty")),
            Some(Value::String(s)) if s.chars().count() > max => {
                Err(format!("`{field}` is over {max} characters"))
            }
            Some(Value::String(s)) => Ok(Some(s.trim().to_owned())),
            Some(_) => Err(format!("`{field}` must be a string")),
        }
    };
    let filter = Filter::user(user).agent(site.agent);
    let failed = |e: agent_host_store::StoreError| format!("memory could not be read: {e}");
    match name {
        SEARCH => {
            let query = text("query", MAX_QUERY_CHARS, true)?.unwrap_or_default();
            let limit = match args.get("limit") {
                None | Some(Value::Null) => 5,
                Some(v) => v
                    .as_u64()
                    .filter(|n| (1..=MAX_RESULTS as u64).contains(n))
                    .ok_or_else(|| {
                        format!("`limit` must be a whole number from 1 to {MAX_RESULTS}")
                    })? as usize,
            };
            let found = store
                .search(&query, &filter, limit, false)
                .map_err(failed)?;
            let facts: Vec<Value> = found
                .iter()
                .map(|f| {
                    json!({"id": f.fact.id, "entity": f.fact.entity, "text": f.fact.text,
                           "since": f.fact.valid_from.to_rfc3339(), "score": f.score})
                })
                .collect();
            Ok(json!({"facts": facts}))
        }
        WRITE => {
            let fact_text = text("text", MAX_FACT_CHARS, true)?.unwrap_or_default();
            let entity =
                text("entity", MAX_ENTITY_CHARS, false)?.unwrap_or_else(|| user.to_owned());
            let now = store.now();
            let mut fact = Fact::new(
                MemoryStore::new_id(),
                Scope::new(user, site.agent),
                entity,
                fact_text,
                now,
            );
            fact.source.session = site.session.map(str::to_owned);
            fact.source.message = Some(site.message.to_owned());
            let added = store
                .add(fact)
                .map_err(|e| format!("the fact was not recorded: {e}"))?;
            Ok(json!({
                "id": added.fact.id,
                "recorded": !added.duplicate,
                "already_known": added.duplicate,
                "replaced": added.invalidated,
            }))
        }
        RECALL => {
            let entity = text("entity", MAX_ENTITY_CHARS, true)?.unwrap_or_default();
            let facts = store
                .list(&filter.entity(entity.clone()), None, MAX_RESULTS * 5)
                .map_err(failed)?;
            let facts: Vec<Value> = facts
                .iter()
                .rev()
                .take(MAX_RESULTS)
                .map(|f| {
                    json!({"id": f.id, "text": f.text, "since": f.valid_from.to_rfc3339(),
                           "replaced": f.invalid_at.is_some()})
                })
                .collect();
            Ok(json!({"entity": entity, "facts": facts}))
        }
        other => Err(format!("there is no memory tool {other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn memory() -> (tempfile::TempDir, MemoryConfig) {
        let dir = tempfile::tempdir().unwrap();
        let store = MemoryStore::open(&dir.path().to_string_lossy()).unwrap();
        (dir, MemoryConfig::new(Arc::new(store), "ana"))
    }

    const SITE: CallSite<'static> = CallSite {
        agent: "default",
        session: Some("s1"),
        message: "m9",
    };

    fn answer(memory: &MemoryConfig, name: &str, arguments: &str) -> Value {
        serde_json::from_str(&run(memory, SITE, name, arguments)).unwrap()
    }

    #[test]
    fn a_written_fact_is_found_recalled_and_replaced() {
        let (_dir, memory) = memory();
        let written = answer(
            &memory,
            WRITE,
            r#"{"text": "Ana's favourite editor is Helix"}"#,
        );
        assert_eq!(written["recorded"], true, "{written}");
        let id = written["id"].as_str().unwrap().to_owned();
        let fact = memory.store.get("ana", &id).unwrap();
        assert_eq!(fact.entity, "ana");
        assert_eq!(fact.source.session.as_deref(), Some("s1"));
        assert_eq!(fact.source.message.as_deref(), Some("m9"));

        let found = answer(&memory, SEARCH, r#"{"query": "favourite editor"}"#);
        assert_eq!(found["facts"][0]["id"], id.as_str(), "{found}");
        let again = answer(
            &memory,
            WRITE,
            r#"{"text": "Ana's favourite editor is Helix"}"#,
        );
        assert_eq!(again["already_known"], true, "{again}");

        let about = answer(
            &memory,
            WRITE,
            r#"{"text": "Project Kestrel ships in May", "entity": "Kestrel"}"#,
        );
        let recalled = answer(&memory, RECALL, r#"{"entity": "Kestrel"}"#);
        assert_eq!(recalled["facts"][0]["id"], about["id"], "{recalled}");
        assert_eq!(recalled["facts"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn bad_arguments_are_answered_not_carried_out() {
        let (_dir, memory) = memory();
        for (name, arguments, says) in [
            (SEARCH, "not json", "not JSON"),
            (SEARCH, "[1]", "not a JSON object"),
            (SEARCH, "{}", "`query` is required"),
            (SEARCH, r#"{"query": 7}"#, "must be a string"),
            (SEARCH, r#"{"query": "x", "limit": 0}"#, "from 1 to 20"),
            (SEARCH, r#"{"query": "x", "limit": 10000}"#, "from 1 to 20"),
            (WRITE, r#"{"text": "   "}"#, "`text` is empty"),
            (RECALL, "{}", "`entity` is required"),
            ("memory_forget", "{}", "no memory tool"),
        ] {
            let got = answer(&memory, name, arguments);
            let error = got["error"].as_str().unwrap_or_default();
            assert!(error.contains(says), "{name}({arguments}): {got}");
        }
        let long = format!(r#"{{"text": "{}"}}"#, "x".repeat(MAX_FACT_CHARS + 1));
        assert!(
            answer(&memory, WRITE, &long)["error"]
                .as_str()
                .unwrap()
                .contains("over")
        );
        let huge = format!(r#"{{"query": "{}"}}"#, "x".repeat(MAX_ARGUMENTS_BYTES));
        assert!(
            answer(&memory, SEARCH, &huge)["error"]
                .as_str()
                .unwrap()
                .contains("bytes")
        );
        assert!(
            memory
                .store
                .list(&Filter::user("ana"), None, 10)
                .unwrap()
                .is_empty(),
            "nothing was written"
        );
    }

    #[test]
    fn one_users_tools_never_see_anothers_memory() {
        let (_dir, memory) = memory();
        answer(&memory, WRITE, r#"{"text": "The launch code is 4242"}"#);
        let other = MemoryConfig::new(memory.store.clone(), "bo");
        let found = answer(&other, SEARCH, r#"{"query": "launch code"}"#);
        assert_eq!(found["facts"], json!([]), "{found}");
    }
}
