//! Recall: the memories placed in a turn's view, and where.
//!
//! The view a model sees has an immutable, cached prefix (system prompt,
//! summary, the log) and a volatile tail after the last cache breakpoint.
//! Recalled memories change from turn to turn, so they go in the tail: one
//! synthetic user message after the newest message of the view, never
//! before or among the messages a provider caches. Next turn, the message
//! is gone and the prefix up to the new turn is the same bytes as before.
//!
//! [`recall`] picks up to `limit` facts for a query within a token budget;
//! [`place`] appends its message to a view and says where it went.

use serde::{Deserialize, Serialize};

use super::{Filter, Memory};
use crate::message::Message;
use crate::tokens::TokenCounter;

/// The default number of memories recalled per turn.
pub const DEFAULT_RETRIEVAL_LIMIT: usize = 10;
/// The default token budget of recalled memories.
pub const DEFAULT_RECALL_TOKENS: u32 = 1_000;
/// The metadata key marking the recall message (`{"memory_recall": [ids]}`).
pub const RECALL_METADATA_KEY: &str = "memory_recall";

/// One recalled fact, as reported.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Recalled {
    /// The fact's id.
    pub id: String,
    /// Its entity.
    pub entity: String,
    /// Its text.
    pub text: String,
    /// Its score.
    pub score: f32,
    /// Tokens its line takes.
    pub tokens: u32,
}

/// What [`recall`] chose.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Recall {
    /// The facts, best first.
    pub facts: Vec<Recalled>,
    /// Tokens of the message that carries them.
    pub tokens: u32,
    /// Facts that matched but did not fit the budget.
    pub left_out: usize,
}

impl Recall {
    /// The synthetic message carrying the facts, or `None` when there are
    /// none.
    pub fn message(&self, id: impl Into<String>) -> Option<Message> {
        if self.facts.is_empty() {
            return None;
        }
        let mut message = Message::user(render(&self.facts)).with_id(id);
        message.synthetic = true;
        message.metadata.insert(
            RECALL_METADATA_KEY.into(),
            serde_json::Value::Array(
                self.facts
                    .iter()
                    .map(|f| serde_json::Value::String(f.id.clone()))
                    .collect(),
            ),
        );
        Some(message)
    }
}

const HEADER: &str = "Relevant memories (from earlier conversations; they may be out of date):";

fn line(entity: &str, text: &str) -> String {
    format!("- {entity}: {text}")
}

fn render(facts: &[Recalled]) -> String {
    let mut out = HEADER.to_owned();
    for fact in facts {
        out.push('\n');
        out.push_str(&line(&fact.entity, &fact.text));
    }
    out
}

/// Up to `limit` valid facts `filter` sees that match `query`, best first and
/// at most one per source message ([`Memory::search_distinct`]), whose
/// message takes at most `budget` tokens (by `counter`).
pub fn recall(
    memory: &Memory,
    filter: &Filter,
    query: &str,
    limit: usize,
    budget: u32,
    counter: &dyn TokenCounter,
) -> Recall {
    let hits = memory.search_distinct(query, filter, limit, false);
    let mut recall = Recall::default();
    let mut used = counter.count_text(HEADER);
    for hit in hits {
        let tokens = counter.count_text(&line(&hit.fact.entity, &hit.fact.text)) + 1;
        if used.saturating_add(tokens) > budget {
            recall.left_out += 1;
            continue;
        }
        used += tokens;
        recall.facts.push(Recalled {
            id: hit.fact.id.clone(),
            entity: hit.fact.entity.clone(),
            text: hit.fact.text.clone(),
            score: hit.score,
            tokens,
        });
    }
    if !recall.facts.is_empty() {
        recall.tokens = used;
    }
    recall
}

/// Appends `recall`'s message (id `id`) after the newest message of `view`
/// and returns its index; the messages before it are left untouched, so the
/// cached prefix is the same with or without recall. `None` when nothing was
/// recalled.
pub fn place(view: &mut Vec<Message>, recall: &Recall, id: impl Into<String>) -> Option<usize> {
    let message = recall.message(id)?;
    view.push(message);
    Some(view.len() - 1)
}

/// Whether `message` is a recall message [`place`] added (to be left out
/// of what is stored).
pub fn is_recall(message: &Message) -> bool {
    message.synthetic && message.metadata.contains_key(RECALL_METADATA_KEY)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::{Change, Fact, Scope};
    use crate::tokens::HeuristicCounter;
    use chrono::{TimeZone, Utc};

    fn memory() -> Memory {
        let at = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
        let mut memory = Memory::new();
        for (i, text) in [
            "prefers tabs over spaces in Rust code",
            "deploys with the staging key on fridays",
            "has a dog named Rex who likes the beach",
        ]
        .iter()
        .enumerate()
        {
            let fact = Fact::new(format!("f{i}"), Scope::new("u", "a"), "user", *text, at);
            memory
                .apply(Change::Add {
                    fact: Box::new(fact),
                })
                .unwrap();
        }
        memory
    }

    #[test]
    fn recall_is_placed_after_the_cached_prefix() {
        let memory = memory();
        let counter = HeuristicCounter::default();
        let view: Vec<Message> = vec![
            Message::system("You are helpful.").with_id("sys"),
            Message::user("hello").with_id("m1"),
            Message::assistant("hi").with_id("m2"),
            Message::user("What is my dog called?").with_id("m3"),
        ];
        let recall = recall(
            &memory,
            &Filter::user("u"),
            "What is my dog called?",
            10,
            500,
            &counter,
        );
        assert_eq!(recall.facts.len(), 1);
        assert_eq!(recall.facts[0].id, "f2");
        let mut with_recall = view.clone();
        let at = place(&mut with_recall, &recall, "recall-1").unwrap();
        assert_eq!(at, view.len(), "after the newest message");
        assert_eq!(with_recall[..at], view[..], "the prefix is untouched");
        assert!(is_recall(&with_recall[at]));
        assert!(with_recall[at].content.contains("dog named Rex"));
        assert!(!view.iter().any(is_recall));
    }

    #[test]
    fn recall_keeps_to_its_budget_and_limit() {
        let memory = memory();
        let counter = HeuristicCounter::default();
        let everything = recall(
            &memory,
            &Filter::user("u"),
            "tabs staging dog",
            10,
            10_000,
            &counter,
        );
        assert_eq!(everything.facts.len(), 3);
        let limited = recall(
            &memory,
            &Filter::user("u"),
            "tabs staging dog",
            2,
            10_000,
            &counter,
        );
        assert_eq!(limited.facts.len(), 2);
        let message_tokens = |r: &Recall| counter.count_text(&r.message("x").unwrap().content);
        let budget = everything.tokens - everything.facts[2].tokens;
        let cut = recall(
            &memory,
            &Filter::user("u"),
            "tabs staging dog",
            10,
            budget,
            &counter,
        );
        assert_eq!((cut.facts.len(), cut.left_out), (2, 1));
        assert!(cut.tokens <= budget);
        assert!(message_tokens(&cut) <= cut.tokens);
        let none = recall(
            &memory,
            &Filter::user("someone else"),
            "tabs staging dog",
            10,
            10_000,
            &counter,
        );
        assert!(none.facts.is_empty() && none.message("x").is_none());
    }
}
