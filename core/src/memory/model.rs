//! Extraction by a model: the request that asks a model for the facts of
//! some messages, and the reading of its answer into [`Fact`]s.
//!
//! The answer is untrusted text. It is read as a JSON array of objects
//! (code fences and text around the array are ignored; one object a line
//! is read too), each `{"source", "entity", "kind", "text", "attribute",
//! "value"}`. An entry is kept only when its `source` is the id of one of
//! the messages asked about (a fact needs its provenance) and it passes
//! [`Fact::validate`]; at most [`MAX_FACTS`] are kept. Ids are derived from
//! the scope, the session, the source message and the text, so asking again
//! about the same messages yields the same ids for the same facts.

use std::fmt::Write as _;

use chrono::{DateTime, Utc};
use serde::Deserialize;

use super::extract::derived_fact_id;
use super::{Fact, FactKind, Provenance, Scope};
use crate::message::{Message, Role};

/// The most facts one answer yields.
pub const MAX_FACTS: usize = 64;
/// The most characters of one message the request quotes (the middle is
/// elided past it).
pub const QUOTE_CHARS: usize = 4_000;
/// The most bytes of an answer read.
pub const MAX_ANSWER_BYTES: usize = 256 * 1024;

/// The instructions of an extraction request.
pub const INSTRUCTIONS: &str = "You extract long-term memories from a conversation between \
a user and an assistant. Keep only durable, explicit facts worth remembering in later \
conversations: names, preferences (likes and dislikes), decisions, attributes (where someone \
lives or works, their email, their role), dated events, file paths and identifiers that were \
used. Skip greetings, questions, guesses and anything only the assistant supposed.

Answer with a JSON array and nothing else. Each element is an object:
{\"source\": the id of the message that states the fact (from the [id] before it),
 \"entity\": who or what the fact is about (\"{user}\" for the user, \"{agent}\" for the assistant, or a name),
 \"kind\": one of name, preference, decision, attribute, path, identifier, date, statement,
 \"text\": the fact as one short sentence in the third person,
 \"attribute\": for a single-valued attribute, its name (\"lives in\", \"email\"), else omit it,
 \"value\": that attribute's value, else omit it}
Answer [] when there is nothing worth remembering.";

/// The messages of a request for the facts of `messages`: the instructions
/// as a system message, then the conversation (user and assistant text,
/// each with its id) as one user message.
pub fn request(messages: &[Message], user: &str, agent: &str) -> Vec<Message> {
    let system = INSTRUCTIONS
        .replace("{user}", user)
        .replace("{agent}", agent);
    let mut material = String::from("<conversation>\n");
    for m in messages.iter().filter(|m| !m.synthetic && !m.summary) {
        let who = match m.role {
            Role::User => "user",
            Role::Assistant => "assistant",
            _ => continue,
        };
        let text = m.text();
        if text.trim().is_empty() {
            continue;
        }
        let _ = writeln!(material, "[{}] {who}: {}", m.id, quote(&text));
    }
    material.push_str("</conversation>\n");
    vec![Message::system(system), Message::user(material)]
}

/// `text` with its middle elided past [`QUOTE_CHARS`].
fn quote(text: &str) -> String {
    let count = text.chars().count();
    if count <= QUOTE_CHARS {
        return text.to_owned();
    }
    let head: String = text.chars().take(QUOTE_CHARS / 2).collect();
    let tail: String = text.chars().skip(count - QUOTE_CHARS / 2).collect();
    format!("{head} [...] {tail}")
}

/// One element of an answer, as a model may write it.
#[derive(Deserialize)]
struct Entry {
    #[serde(default)]
    source: Option<String>,
    #[serde(default)]
    entity: Option<String>,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    attribute: Option<String>,
    #[serde(default)]
    value: Option<serde_json::Value>,
}

/// What [`read_answer`] made of an answer.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Read {
    /// The facts, in the answer's order.
    pub facts: Vec<Fact>,
    /// Entries left out, and why (one line each, at most 20).
    pub skipped: Vec<String>,
}

/// The facts `answer` (a model's answer to [`request`] about `messages`)
/// states, in `scope`, from session `session`, recorded at `recorded_at`;
/// an error when it holds no JSON array or objects at all.
pub fn read_answer(
    answer: &str,
    scope: &Scope,
    session: Option<&str>,
    messages: &[Message],
    recorded_at: DateTime<Utc>,
) -> Result<Read, String> {
    if answer.len() > MAX_ANSWER_BYTES {
        return Err(format!(
            "the answer is {} bytes, over the {MAX_ANSWER_BYTES} read",
            answer.len()
        ));
    }
    let entries = entries_of(answer).ok_or_else(|| {
        let start: String = answer.chars().take(120).collect();
        format!("the answer holds no JSON array of facts: {start:?}")
    })?;
    let mut read = Read::default();
    let mut skip = |why: String| {
        if read_skipped_room(&read.skipped) {
            read.skipped.push(why);
        }
    };
    let mut facts = Vec::new();
    for (i, value) in entries.into_iter().enumerate() {
        if facts.len() >= MAX_FACTS {
            skip(format!("entries after {MAX_FACTS} facts left out"));
            break;
        }
        let Ok(entry) = serde_json::from_value::<Entry>(value) else {
            skip(format!("entry {i}: not an object of a fact"));
            continue;
        };
        let Some(source) = entry
            .source
            .as_deref()
            .and_then(|s| messages.iter().find(|m| m.id == s.trim()))
        else {
            skip(format!(
                "entry {i}: its source is none of the messages asked about"
            ));
            continue;
        };
        let text = entry.text.as_deref().map(str::trim).unwrap_or_default();
        let entity = entry.entity.as_deref().map(str::trim).unwrap_or_default();
        if text.is_empty() || entity.is_empty() {
            skip(format!("entry {i}: no text or no entity"));
            continue;
        }
        let id = model_fact_id(scope, session, &source.id, text);
        let mut fact = Fact::new(id, scope.clone(), entity, text, recorded_at);
        fact.kind = entry
            .kind
            .and_then(|k| serde_json::from_value::<FactKind>(k.trim().to_lowercase().into()).ok())
            .unwrap_or(FactKind::Statement);
        let value = match entry.value {
            Some(serde_json::Value::String(s)) => Some(s),
            Some(serde_json::Value::Null) | None => None,
            Some(other) => Some(other.to_string()),
        };
        if let (Some(attribute), Some(value)) = (entry.attribute, value) {
            fact.attribute = Some(attribute.trim().to_lowercase());
            fact.value = Some(value.trim().to_owned());
        }
        fact.source = Provenance {
            session: session.map(str::to_owned),
            message: Some(source.id.clone()),
        };
        fact.valid_from = source.timestamp.unwrap_or(recorded_at);
        match fact.validate() {
            Ok(()) => facts.push(fact),
            Err(e) => skip(format!("entry {i}: {e}")),
        }
    }
    read.facts = facts;
    Ok(read)
}

fn read_skipped_room(skipped: &[String]) -> bool {
    skipped.len() < 20
}

/// The entries of an answer: the first JSON array in it, else one JSON
/// object a line; `None` when there are neither.
fn entries_of(answer: &str) -> Option<Vec<serde_json::Value>> {
    if let Some(start) = answer.find('[') {
        let mut stream =
            serde_json::Deserializer::from_str(&answer[start..]).into_iter::<serde_json::Value>();
        if let Some(Ok(serde_json::Value::Array(items))) = stream.next() {
            return Some(items);
        }
    }
    let objects: Vec<serde_json::Value> = answer
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line.trim()).ok())
        .filter(serde_json::Value::is_object)
        .collect();
    (!objects.is_empty()).then_some(objects)
}

/// A stable id: `m` and 32 hex digits over the scope, the session, the
/// source message and the text (with its length, as the other pieces).
fn model_fact_id(scope: &Scope, session: Option<&str>, message: &str, text: &str) -> String {
    let mut tail = (text.len() as u64).to_le_bytes().to_vec();
    tail.extend_from_slice(text.as_bytes());
    derived_fact_id('m', scope, session, message, &tail)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 3, 1, 9, 0, 0).unwrap()
    }

    fn messages() -> Vec<Message> {
        vec![
            Message::user("I moved to Porto last month, and I prefer tea.").with_id("u1"),
            Message::assistant("Noted: Porto, and tea.").with_id("a1"),
        ]
    }

    #[test]
    fn the_request_quotes_each_message_with_its_id() {
        let request = request(&messages(), "alice", "coder");
        assert_eq!(request.len(), 2);
        assert!(request[0].text().contains("\"alice\" for the user"));
        let material = request[1].text();
        assert!(
            material.contains("[u1] user: I moved to Porto"),
            "{material}"
        );
        assert!(material.contains("[a1] assistant: Noted"), "{material}");
    }

    #[test]
    fn an_answer_becomes_facts_with_provenance_and_stable_ids() {
        let scope = Scope::new("alice", "coder");
        let answer = "Here you are:\n```json\n[\n {\"source\": \"u1\", \"entity\": \"alice\", \
            \"kind\": \"attribute\", \"text\": \"Alice lives in Porto.\", \"attribute\": \
            \"Lives in\", \"value\": \"Porto\"},\n {\"source\": \"u1\", \"entity\": \"alice\", \
            \"kind\": \"Preference\", \"text\": \"Alice prefers tea.\"},\n {\"source\": \"x9\", \
            \"entity\": \"alice\", \"text\": \"made up\"},\n {\"source\": \"a1\", \"text\": \
            \"no entity\"},\n 42\n]\n```";
        let read = read_answer(answer, &scope, Some("s1"), &messages(), at()).unwrap();
        assert_eq!(read.facts.len(), 2, "{read:?}");
        let lives = &read.facts[0];
        assert_eq!(lives.kind, FactKind::Attribute);
        assert_eq!(lives.attribute.as_deref(), Some("lives in"));
        assert_eq!(lives.value.as_deref(), Some("Porto"));
        assert_eq!(lives.source.message.as_deref(), Some("u1"));
        assert_eq!(lives.source.session.as_deref(), Some("s1"));
        assert_eq!(read.facts[1].kind, FactKind::Preference);
        assert_eq!(read.skipped.len(), 3, "{:?}", read.skipped);
        assert!(read.skipped[0].contains("source"), "{:?}", read.skipped);
        // The same answer again: the same ids.
        let again = read_answer(answer, &scope, Some("s1"), &messages(), at()).unwrap();
        assert_eq!(again.facts[0].id, lives.id);
        assert_ne!(read.facts[0].id, read.facts[1].id);
    }

    #[test]
    fn lines_of_objects_are_read_and_garbage_is_an_error() {
        let scope = Scope::new("alice", "coder");
        let lines = "{\"source\": \"u1\", \"entity\": \"alice\", \"text\": \"Alice prefers tea.\"}\nnot json\n";
        let read = read_answer(lines, &scope, None, &messages(), at()).unwrap();
        assert_eq!(read.facts.len(), 1);
        assert_eq!(read.facts[0].kind, FactKind::Statement);
        let error =
            read_answer("I cannot help with that.", &scope, None, &messages(), at()).unwrap_err();
        assert!(error.contains("no JSON array"), "{error}");
        assert_eq!(
            read_answer("[]", &scope, None, &messages(), at()).unwrap(),
            Read::default()
        );
        let huge = "[".repeat(MAX_ANSWER_BYTES + 1);
        assert!(read_answer(&huge, &scope, None, &messages(), at()).is_err());
    }

    #[test]
    fn no_more_than_the_cap_is_kept() {
        let scope = Scope::new("alice", "coder");
        let many: Vec<String> = (0..MAX_FACTS + 10)
            .map(|i| {
                format!(
                    "{{\"source\": \"u1\", \"entity\": \"alice\", \"text\": \"fact number {i}\"}}"
                )
            })
            .collect();
        let answer = format!("[{}]", many.join(","));
        let read = read_answer(&answer, &scope, None, &messages(), at()).unwrap();
        assert_eq!(read.facts.len(), MAX_FACTS);
        assert!(read.skipped.iter().any(|s| s.contains("left out")));
    }
}
