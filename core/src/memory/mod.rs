//! Long-term memory: facts about entities that outlive a session, with
//! where they came from and while they held.
//!
//! A [`Fact`] says something about an entity (a person, a project, the
//! user), in a [`Scope`] (user, agent and, optionally, session), with its
//! [`Provenance`] (the session and message it came from), when it was
//! recorded and from when it held. A fact may fill a single-valued
//! *attribute* of its entity (`name`, `lives in`, `likes: coffee`): a newer
//! fact giving the same attribute another value invalidates the older one,
//! which stays queryable (`invalid_at`, `invalidated_by`).
//!
//! [`Memory`] is the collection with its ranked full-text index
//! ([`index::Index`], BM25). It changes only through [`Change`]s, which a
//! store writes to its log before applying them, so that replaying the log
//! rebuilds the same memory: `plan_*` methods say what an operation would
//! change (validating it first), [`Memory::apply`] applies one change.
//! [`extract`] is the offline extractor; [`recall`] chooses what of memory
//! goes into a turn's view.
//!
//! Pure, like the rest of the crate: ids and times come from the caller.
//!
//! ```
//! use agent_host_core::memory::{Filter, Memory, Scope, extract::{extract, Utterance}};
//! use chrono::{TimeZone, Utc};
//!
//! let at = Utc.with_ymd_and_hms(2026, 3, 1, 9, 0, 0).unwrap();
//! let scope = Scope::new("alice", "assistant");
//! let mut memory = Memory::new();
//! let said = Utterance::new("user", "m1", "I live in Lisbon. My editor is Helix.", at);
//! for fact in extract(&scope, Some("s1"), &said, at) {
//!     for change in memory.plan_add(fact)?.changes {
//!         memory.apply(change)?;
//!     }
//! }
//! let later = Utterance::new("user", "m9", "I moved to Porto last week.", at + chrono::Duration::days(30));
//! for fact in extract(&scope, Some("s2"), &later, at + chrono::Duration::days(30)) {
//!     for change in memory.plan_add(fact)?.changes {
//!         memory.apply(change)?;
//!     }
//! }
//! let filter = Filter::user("alice");
//! let hits = memory.search("where does the user live", &filter, 5, false);
//! assert!(hits[0].fact.text.contains("Porto"));
//! // The older fact is invalidated, not lost.
//! let all = memory.search("where does the user live", &filter, 5, true);
//! assert!(all.iter().any(|h| h.fact.text.contains("Lisbon") && h.fact.invalid_at.is_some()));
//! # Ok::<(), agent_host_core::memory::MemoryError>(())
//! ```

pub mod extract;
pub mod index;
pub mod model;
pub mod recall;
pub mod terms;

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::ErrorKind;
use index::Index;

/// The longest user, agent, session, entity, attribute or id, in bytes.
pub const MAX_NAME_BYTES: usize = 256;
/// The longest fact text or value, in bytes.
pub const MAX_TEXT_BYTES: usize = 16 * 1024;
/// The most mentions a fact carries.
pub const MAX_MENTIONS: usize = 64;
/// Facts matching a query whose entity is named in the query score this
/// many times higher.
pub const ENTITY_BOOST: f32 = 1.5;
/// The weight of a fact's context (the words it was said after) in the
/// index, against 1 for its own words.
pub const CONTEXT_WEIGHT: f32 = 1.0;
/// The weight of the message a fact's message answered, in the index.
pub const REPLY_WEIGHT: f32 = 0.5;
/// Facts that carry a date score this many times higher for a query that
/// starts with `when`.
pub const DATE_BOOST: f32 = 1.5;

/// Whose memory a fact is in: a user's, with one agent, optionally recorded
/// in one session.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Scope {
    /// The user the memory belongs to.
    pub user: String,
    /// The agent that remembers.
    pub agent: String,
    /// The session the fact was recorded in, when it is kept to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
}

impl Scope {
    /// A user's memory with one agent, across sessions.
    pub fn new(user: impl Into<String>, agent: impl Into<String>) -> Self {
        Scope {
            user: user.into(),
            agent: agent.into(),
            session: None,
        }
    }

    /// The same scope kept to one session.
    pub fn in_session(mut self, session: impl Into<String>) -> Self {
        self.session = Some(session.into());
        self
    }
}

/// Where a fact came from.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provenance {
    /// The session of the message it was extracted from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// The message it was extracted from (none for a fact given directly).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// What sort of fact the extractor (or a caller) says this is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FactKind {
    /// A name (`my name is ...`).
    Name,
    /// A like or dislike.
    Preference,
    /// Something decided.
    Decision,
    /// Another single-valued attribute (`my email is ...`, `I live in ...`).
    Attribute,
    /// A file or folder path.
    Path,
    /// An identifier: an email, a URL, an issue or ticket, a version, a hash.
    Identifier,
    /// Something dated.
    Date,
    /// Any other explicit statement.
    Statement,
}

impl FactKind {
    /// The kind's name (`preference`).
    pub fn as_str(self) -> &'static str {
        match self {
            FactKind::Name => "name",
            FactKind::Preference => "preference",
            FactKind::Decision => "decision",
            FactKind::Attribute => "attribute",
            FactKind::Path => "path",
            FactKind::Identifier => "identifier",
            FactKind::Date => "date",
            FactKind::Statement => "statement",
        }
    }
}

/// A fact about an entity.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Fact {
    /// Unique within the memory.
    pub id: String,
    /// Whose memory it is in.
    pub scope: Scope,
    /// What it is about (`user`, `Caroline`, `project agent-host`).
    pub entity: String,
    /// What sort of fact it is.
    pub kind: FactKind,
    /// The fact, as a sentence.
    pub text: String,
    /// The single-valued attribute it fills, if any (`name`, `lives in`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attribute: Option<String>,
    /// The attribute's value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// Other entities it names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mentions: Vec<String>,
    /// The dates it speaks of, resolved (`2023-05-07`, `2023-05`, `2022`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dates: Vec<String>,
    /// What was said just before it in the same message (the sentence it
    /// may refer back to): searched, not shown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// What the message it came from answered (the other party's message
    /// before it, which a short reply such as `Yes, last week!` is about):
    /// searched at [`REPLY_WEIGHT`], not shown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<String>,
    /// Where it came from.
    #[serde(default)]
    pub source: Provenance,
    /// When memory recorded it.
    pub recorded_at: DateTime<Utc>,
    /// From when it holds (the time of the message that said it).
    pub valid_from: DateTime<Utc>,
    /// When a newer fact replaced it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invalid_at: Option<DateTime<Utc>>,
    /// The fact that replaced it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invalidated_by: Option<String>,
    /// When it was last edited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<DateTime<Utc>>,
}

impl Fact {
    /// A statement about `entity`, valid and recorded at `at`, without
    /// provenance; set the other fields as needed.
    pub fn new(
        id: impl Into<String>,
        scope: Scope,
        entity: impl Into<String>,
        text: impl Into<String>,
        at: DateTime<Utc>,
    ) -> Self {
        Fact {
            id: id.into(),
            scope,
            entity: entity.into(),
            kind: FactKind::Statement,
            text: text.into(),
            attribute: None,
            value: None,
            mentions: Vec::new(),
            dates: Vec::new(),
            context: None,
            reply_to: None,
            source: Provenance::default(),
            recorded_at: at,
            valid_from: at,
            invalid_at: None,
            invalidated_by: None,
            updated_at: None,
        }
    }

    /// Whether it still holds.
    pub fn is_valid(&self) -> bool {
        self.invalid_at.is_none()
    }

    /// Checks every field against the limits: what is wrong and where.
    pub fn validate(&self) -> Result<(), MemoryError> {
        name("id", &self.id)?;
        name("user", &self.scope.user)?;
        name("agent", &self.scope.agent)?;
        if let Some(session) = &self.scope.session {
            name("session", session)?;
        }
        name("entity", &self.entity)?;
        text("text", &self.text)?;
        if let Some(attribute) = &self.attribute {
            name("attribute", attribute)?;
        }
        if let Some(value) = &self.value {
            text("value", value)?;
        }
        if self.mentions.len() > MAX_MENTIONS || self.dates.len() > MAX_MENTIONS {
            return Err(MemoryError::Invalid {
                field: "mentions",
                reason: format!("at most {MAX_MENTIONS} mentions and {MAX_MENTIONS} dates"),
            });
        }
        for mention in self.mentions.iter().chain(&self.dates) {
            name("mentions", mention)?;
        }
        if let Some(context) = &self.context {
            text("context", context)?;
        }
        if let Some(reply_to) = &self.reply_to {
            text("reply_to", reply_to)?;
        }
        if let Some(session) = &self.source.session {
            name("source.session", session)?;
        }
        if let Some(message) = &self.source.message {
            name("source.message", message)?;
        }
        Ok(())
    }

    /// The fields the index holds for it, with their weights: entity, text,
    /// attribute, value, mentions and dates at full weight, the context (what
    /// it was said after) at [`CONTEXT_WEIGHT`].
    fn indexed_fields(&self) -> Vec<(&str, f32)> {
        let mut fields = vec![(self.entity.as_str(), 1.0), (self.text.as_str(), 1.0)];
        for piece in self
            .attribute
            .iter()
            .chain(&self.value)
            .chain(&self.mentions)
            .chain(&self.dates)
        {
            fields.push((piece.as_str(), 1.0));
        }
        if let Some(context) = &self.context {
            fields.push((context.as_str(), CONTEXT_WEIGHT));
        }
        if let Some(reply_to) = &self.reply_to {
            fields.push((reply_to.as_str(), REPLY_WEIGHT));
        }
        fields
    }
}

fn name(field: &'static str, value: &str) -> Result<(), MemoryError> {
    if value.trim().is_empty() {
        return Err(MemoryError::Invalid {
            field,
            reason: "it is empty".into(),
        });
    }
    if value.len() > MAX_NAME_BYTES {
        return Err(MemoryError::Invalid {
            field,
            reason: format!("{} bytes, over the limit of {MAX_NAME_BYTES}", value.len()),
        });
    }
    if value.chars().any(char::is_control) {
        return Err(MemoryError::Invalid {
            field,
            reason: "it holds a control character".into(),
        });
    }
    Ok(())
}

fn text(field: &'static str, value: &str) -> Result<(), MemoryError> {
    if value.trim().is_empty() {
        return Err(MemoryError::Invalid {
            field,
            reason: "it is empty".into(),
        });
    }
    if value.len() > MAX_TEXT_BYTES {
        return Err(MemoryError::Invalid {
            field,
            reason: format!("{} bytes, over the limit of {MAX_TEXT_BYTES}", value.len()),
        });
    }
    Ok(())
}

/// An edit of a fact's content; `None` keeps a field as it is.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FactEdit {
    /// The new text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The new entity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entity: Option<String>,
    /// The new attribute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attribute: Option<String>,
    /// The new value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

/// One change to a memory: what a store's log records.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Change {
    /// A new fact.
    Add {
        /// The fact, with its validity as planned.
        fact: Box<Fact>,
    },
    /// A fact's content edited.
    Update {
        /// The fact.
        id: String,
        /// What changed.
        edit: FactEdit,
        /// When.
        at: DateTime<Utc>,
    },
    /// A fact replaced by a newer one.
    Invalidate {
        /// The older fact.
        id: String,
        /// The newer fact.
        by: String,
        /// From when the older one no longer holds.
        at: DateTime<Utc>,
    },
    /// A fact forgotten.
    Delete {
        /// The fact.
        id: String,
    },
}

/// What [`Memory::plan_add`] would do.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// The changes to record and apply, in order (none for a duplicate).
    pub changes: Vec<Change>,
    /// The fact that already says the same, when the new one adds nothing.
    pub duplicate_of: Option<String>,
}

/// A memory operation that cannot be done.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MemoryError {
    /// No fact has this id.
    #[error("no fact {0:?} in memory")]
    NotFound(String),
    /// Another fact has this id.
    #[error("memory already holds another fact with the id {0:?}")]
    Conflict(String),
    /// A field is missing, too long or malformed.
    #[error("fact {field}: {reason}")]
    Invalid {
        /// The field.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
}

impl MemoryError {
    /// What kind of failure this is, for the front ends to map.
    pub fn kind(&self) -> ErrorKind {
        match self {
            MemoryError::NotFound(_) => ErrorKind::NotFound,
            MemoryError::Conflict(_) => ErrorKind::Conflict,
            MemoryError::Invalid { .. } => ErrorKind::InvalidInput,
        }
    }
}

/// Which facts a query sees: one user's, optionally one agent's, one
/// session's, one entity's.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Filter {
    /// The user whose memory it is (always required: one user's memory is
    /// never shown to another).
    pub user: String,
    /// Only this agent's facts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Only facts recorded in this session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// Only facts about (or naming) this entity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entity: Option<String>,
}

impl Filter {
    /// Everything of one user's.
    pub fn user(user: impl Into<String>) -> Self {
        Filter {
            user: user.into(),
            ..Filter::default()
        }
    }

    /// Kept to one agent.
    pub fn agent(mut self, agent: impl Into<String>) -> Self {
        self.agent = Some(agent.into());
        self
    }

    /// Kept to one session.
    pub fn session(mut self, session: impl Into<String>) -> Self {
        self.session = Some(session.into());
        self
    }

    /// Kept to one entity.
    pub fn entity(mut self, entity: impl Into<String>) -> Self {
        self.entity = Some(entity.into());
        self
    }

    /// Whether `fact` is one this filter sees.
    pub fn matches(&self, fact: &Fact) -> bool {
        fact.scope.user == self.user
            && self.agent.as_ref().is_none_or(|a| *a == fact.scope.agent)
            && self
                .session
                .as_ref()
                .is_none_or(|s| fact.scope.session.as_ref() == Some(s))
            && self.entity.as_ref().is_none_or(|e| is_about(fact, e))
    }
}

/// Whether `fact` is about `entity` or names it (case-insensitive).
pub fn is_about(fact: &Fact, entity: &str) -> bool {
    let key = entity_key(entity);
    entity_key(&fact.entity) == key || fact.mentions.iter().any(|m| entity_key(m) == key)
}

fn entity_key(entity: &str) -> String {
    entity
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

fn value_key(value: &str) -> String {
    crate::memory::terms::terms(value).join(" ")
}

/// A fact found by a search, with its score.
#[derive(Clone, Debug, PartialEq)]
pub struct Hit<'a> {
    /// The fact.
    pub fact: &'a Fact,
    /// Its BM25 score (times [`ENTITY_BOOST`] when the query names its
    /// entity, and [`DATE_BOOST`] when the query asks `when` and the fact
    /// carries a date).
    pub score: f32,
}

/// How [`Memory::search_with`] searches.
#[derive(Clone, Copy)]
enum Search {
    Fast,
    Exhaustive,
    /// One fact per source message.
    Distinct,
}

/// (user, agent, entity, attribute): the slot a single-valued fact fills.
type SlotKey = (String, String, String, String);

/// Facts, their index, and the slots single-valued facts fill.
#[derive(Debug, Default, Clone)]
pub struct Memory {
    /// By slot number; `None` once deleted.
    facts: Vec<Option<Fact>>,
    /// Each slot's index entry.
    entry_of: Vec<u32>,
    /// Each index entry's slot.
    slot_of: Vec<u32>,
    ids: HashMap<String, u32>,
    attributes: HashMap<SlotKey, Vec<u32>>,
    /// Slots by [`text_key`].
    texts: HashMap<u64, Vec<u32>>,
    index: Index,
    live: usize,
}

impl Memory {
    /// An empty memory.
    pub fn new() -> Self {
        Memory::default()
    }

    /// How many facts it holds (valid or not).
    pub fn len(&self) -> usize {
        self.live
    }

    /// Whether it holds no fact.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// The fact with this id.
    pub fn get(&self, id: &str) -> Option<&Fact> {
        self.ids
            .get(id)
            .and_then(|&slot| self.facts[slot as usize].as_ref())
    }

    /// What adding `fact` would change: the fact itself and the facts it
    /// invalidates, or nothing when a valid fact of the same scope and
    /// entity already says the same (same text, or same value of the same
    /// attribute). A fact older than the valid fact of its attribute is
    /// added already invalidated by it.
    pub fn plan_add(&self, mut fact: Fact) -> Result<Plan, MemoryError> {
        fact.validate()?;
        if let Some(existing) = self.get(&fact.id) {
            if same_content(existing, &fact) {
                return Ok(Plan {
                    changes: Vec::new(),
                    duplicate_of: Some(existing.id.clone()),
                });
            }
            return Err(MemoryError::Conflict(fact.id));
        }
        if let Some(same) = self.duplicate(&fact) {
            return Ok(Plan {
                changes: Vec::new(),
                duplicate_of: Some(same.id.clone()),
            });
        }
        let mut changes = Vec::new();
        let mut replaced_by: Option<&Fact> = None;
        for other in self.same_attribute(&fact) {
            if !other.is_valid() {
                continue;
            }
            if other.valid_from <= fact.valid_from {
                changes.push(Change::Invalidate {
                    id: other.id.clone(),
                    by: fact.id.clone(),
                    at: fact.valid_from,
                });
            } else if replaced_by.is_none_or(|r| other.valid_from < r.valid_from) {
                replaced_by = Some(other);
            }
        }
        if let Some(newer) = replaced_by {
            fact.invalid_at = Some(newer.valid_from);
            fact.invalidated_by = Some(newer.id.clone());
        }
        changes.insert(
            0,
            Change::Add {
                fact: Box::new(fact),
            },
        );
        Ok(Plan {
            changes,
            duplicate_of: None,
        })
    }

    /// What editing fact `id` would change: the edit, and the facts its new
    /// attribute value invalidates.
    pub fn plan_update(
        &self,
        id: &str,
        edit: FactEdit,
        at: DateTime<Utc>,
    ) -> Result<Vec<Change>, MemoryError> {
        let old = self
            .get(id)
            .ok_or_else(|| MemoryError::NotFound(id.to_owned()))?;
        let mut new = old.clone();
        apply_edit(&mut new, &edit);
        new.validate()?;
        let mut changes = vec![Change::Update {
            id: id.to_owned(),
            edit,
            at,
        }];
        if new.is_valid() {
            for other in self.same_attribute(&new) {
                if other.id != new.id && other.is_valid() && other.valid_from <= new.valid_from {
                    changes.push(Change::Invalidate {
                        id: other.id.clone(),
                        by: new.id.clone(),
                        at,
                    });
                }
            }
        }
        Ok(changes)
    }

    /// What forgetting fact `id` would change.
    pub fn plan_delete(&self, id: &str) -> Result<Vec<Change>, MemoryError> {
        self.get(id)
            .ok_or_else(|| MemoryError::NotFound(id.to_owned()))?;
        Ok(vec![Change::Delete { id: id.to_owned() }])
    }

    /// Applies one change (planned here, or replayed from a log).
    pub fn apply(&mut self, change: Change) -> Result<(), MemoryError> {
        match change {
            Change::Add { fact } => {
                let fact = *fact;
                fact.validate()?;
                if self.ids.contains_key(&fact.id) {
                    return Err(MemoryError::Conflict(fact.id));
                }
                let slot = u32::try_from(self.facts.len()).map_err(|_| MemoryError::Invalid {
                    field: "id",
                    reason: "memory holds 2^32 facts".into(),
                })?;
                let entry = self.index.add_fields(&fact.indexed_fields());
                debug_assert_eq!(entry as usize, self.slot_of.len());
                self.slot_of.push(slot);
                self.entry_of.push(entry);
                self.ids.insert(fact.id.clone(), slot);
                if let Some(key) = slot_key(&fact) {
                    self.attributes.entry(key).or_default().push(slot);
                }
                self.texts.entry(text_key(&fact)).or_default().push(slot);
                self.facts.push(Some(fact));
                self.live += 1;
            }
            Change::Update { id, edit, at } => {
                let slot = self.slot(&id)?;
                let mut fact = self.facts[slot as usize].take().expect("a live slot");
                let old_key = slot_key(&fact);
                let old_text = text_key(&fact);
                apply_edit(&mut fact, &edit);
                fact.updated_at = Some(at);
                if let Err(e) = fact.validate() {
                    let mut back = fact;
                    // Restore the untouched fact: an invalid edit changes nothing.
                    back.updated_at = None;
                    self.facts[slot as usize] = Some(back);
                    return Err(e);
                }
                self.index.remove(self.entry_of[slot as usize]);
                let entry = self.index.add_fields(&fact.indexed_fields());
                self.slot_of.push(slot);
                self.entry_of[slot as usize] = entry;
                self.unlist_text(old_text, slot);
                self.texts.entry(text_key(&fact)).or_default().push(slot);
                let new_key = slot_key(&fact);
                if old_key != new_key {
                    if let Some(key) = old_key
                        && let Some(list) = self.attributes.get_mut(&key)
                    {
                        list.retain(|&s| s != slot);
                    }
                    if let Some(key) = new_key {
                        self.attributes.entry(key).or_default().push(slot);
                    }
                }
                self.facts[slot as usize] = Some(fact);
            }
            Change::Invalidate { id, by, at } => {
                let slot = self.slot(&id)?;
                let fact = self.facts[slot as usize].as_mut().expect("a live slot");
                fact.invalid_at = Some(at);
                fact.invalidated_by = Some(by);
            }
            Change::Delete { id } => {
                let slot = self.slot(&id)?;
                let fact = self.facts[slot as usize].take().expect("a live slot");
                self.index.remove(self.entry_of[slot as usize]);
                self.ids.remove(&fact.id);
                self.unlist_text(text_key(&fact), slot);
                if let Some(key) = slot_key(&fact)
                    && let Some(list) = self.attributes.get_mut(&key)
                {
                    list.retain(|&s| s != slot);
                }
                self.live -= 1;
            }
        }
        Ok(())
    }

    /// The `limit` facts `filter` sees that best match `query`, best first;
    /// invalidated facts only with `include_invalid`.
    pub fn search(
        &self,
        query: &str,
        filter: &Filter,
        limit: usize,
        include_invalid: bool,
    ) -> Vec<Hit<'_>> {
        self.search_with(query, filter, limit, include_invalid, Search::Fast)
    }

    /// [`Memory::search`] scoring every posting of every query term: the
    /// same facts and scores, slower; the reference the bench measures the
    /// search against.
    pub fn search_exhaustive(
        &self,
        query: &str,
        filter: &Filter,
        limit: usize,
        include_invalid: bool,
    ) -> Vec<Hit<'_>> {
        self.search_with(query, filter, limit, include_invalid, Search::Exhaustive)
    }

    /// [`Memory::search`] keeping only the best fact of each source message
    /// (facts without one each count alone): the `limit` best messages'
    /// facts, so that the sentences of one message do not fill every place.
    pub fn search_distinct(
        &self,
        query: &str,
        filter: &Filter,
        limit: usize,
        include_invalid: bool,
    ) -> Vec<Hit<'_>> {
        self.search_with(query, filter, limit, include_invalid, Search::Distinct)
    }

    fn search_with(
        &self,
        query: &str,
        filter: &Filter,
        limit: usize,
        include_invalid: bool,
        how: Search,
    ) -> Vec<Hit<'_>> {
        let named: Vec<String> = query
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .collect();
        let asks_when = named.first().is_some_and(|w| w == "when");
        let accept = |entry: u32| {
            let fact = self.facts[self.slot_of[entry as usize] as usize].as_ref()?;
            if !(include_invalid || fact.is_valid()) || !filter.matches(fact) {
                return None;
            }
            let first = fact.entity.split_whitespace().next().unwrap_or("");
            let boosted = named.iter().any(|w| w.eq_ignore_ascii_case(first));
            let date = if asks_when && !fact.dates.is_empty() {
                DATE_BOOST
            } else {
                1.0
            };
            let boost = if boosted { ENTITY_BOOST * date } else { date };
            Some((boost, fact.source.message.as_deref()))
        };
        // The most any fact's score is raised: the tighter, the more the
        // search can skip.
        let most = ENTITY_BOOST * if asks_when { DATE_BOOST } else { 1.0 };
        let scored = match how {
            Search::Fast => self
                .index
                .search(query, limit, most, |e| accept(e).map(|a| a.0)),
            Search::Exhaustive => self
                .index
                .search_exhaustive(query, limit, most, |e| accept(e).map(|a| a.0)),
            Search::Distinct => self.index.search_grouped(query, limit, most, accept),
        };
        scored
            .into_iter()
            .filter_map(|s| {
                let fact = self.facts[self.slot_of[s.entry as usize] as usize].as_ref()?;
                Some(Hit {
                    fact,
                    score: s.score,
                })
            })
            .collect()
    }

    /// Every fact `filter` sees (valid or not), in the order recorded,
    /// starting after the fact `after`, at most `limit`.
    pub fn list(
        &self,
        filter: &Filter,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<&Fact>, MemoryError> {
        let start = match after {
            Some(id) => self.slot(id)? as usize + 1,
            None => 0,
        };
        Ok(self.facts[start.min(self.facts.len())..]
            .iter()
            .flatten()
            .filter(|f| filter.matches(f))
            .take(limit)
            .collect())
    }

    fn unlist_text(&mut self, key: u64, slot: u32) {
        if let Some(list) = self.texts.get_mut(&key) {
            list.retain(|&s| s != slot);
            if list.is_empty() {
                self.texts.remove(&key);
            }
        }
    }

    fn slot(&self, id: &str) -> Result<u32, MemoryError> {
        self.ids
            .get(id)
            .copied()
            .ok_or_else(|| MemoryError::NotFound(id.to_owned()))
    }

    fn same_attribute(&self, fact: &Fact) -> impl Iterator<Item = &Fact> {
        slot_key(fact)
            .and_then(|key| self.attributes.get(&key))
            .into_iter()
            .flatten()
            .filter_map(|&slot| self.facts[slot as usize].as_ref())
            .filter(move |other| {
                other.scope.session == fact.scope.session
                    && value_key(other.value.as_deref().unwrap_or(""))
                        != value_key(fact.value.as_deref().unwrap_or(""))
            })
    }

    /// A valid fact of the same scope and entity saying the same.
    fn duplicate(&self, fact: &Fact) -> Option<&Fact> {
        if let Some(key) = slot_key(fact) {
            let value = value_key(fact.value.as_deref().unwrap_or(""));
            let same = self
                .attributes
                .get(&key)
                .into_iter()
                .flatten()
                .find_map(|&slot| {
                    let other = self.facts[slot as usize].as_ref()?;
                    (other.is_valid()
                        && other.scope == fact.scope
                        && value_key(other.value.as_deref().unwrap_or("")) == value)
                        .then_some(other)
                });
            if same.is_some() {
                return same;
            }
        }
        self.texts
            .get(&text_key(fact))
            .into_iter()
            .flatten()
            .filter_map(|&slot| self.facts[slot as usize].as_ref())
            .find(|other| other.is_valid() && same_content(other, fact))
    }
}

/// A hash of a fact's scope, entity and words, for finding restatements.
fn text_key(fact: &Fact) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    fact.scope.hash(&mut hasher);
    entity_key(&fact.entity).hash(&mut hasher);
    for word in fact.text.split_whitespace() {
        word.hash(&mut hasher);
    }
    hasher.finish()
}

fn same_content(a: &Fact, b: &Fact) -> bool {
    a.scope == b.scope
        && entity_key(&a.entity) == entity_key(&b.entity)
        && a.text.split_whitespace().eq(b.text.split_whitespace())
}

fn slot_key(fact: &Fact) -> Option<SlotKey> {
    let attribute = fact.attribute.as_ref()?;
    Some((
        fact.scope.user.clone(),
        fact.scope.agent.clone(),
        entity_key(&fact.entity),
        // Inflections meet: `likes: green tea mornings` fills the slot of
        // `likes: green tea morning`.
        value_key(attribute),
    ))
}

fn apply_edit(fact: &mut Fact, edit: &FactEdit) {
    if let Some(text) = &edit.text {
        fact.text = text.clone();
    }
    if let Some(entity) = &edit.entity {
        fact.entity = entity.clone();
    }
    if let Some(attribute) = &edit.attribute {
        fact.attribute = Some(attribute.clone());
    }
    if let Some(value) = &edit.value {
        fact.value = Some(value.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn day(d: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 1, d, 12, 0, 0).unwrap()
    }

    fn fact(
        id: &str,
        user: &str,
        text: &str,
        attribute: Option<(&str, &str)>,
        at: DateTime<Utc>,
    ) -> Fact {
        let mut fact = Fact::new(id, Scope::new(user, "agent"), "user", text, at);
        if let Some((a, v)) = attribute {
            fact.kind = FactKind::Attribute;
            fact.attribute = Some(a.into());
            fact.value = Some(v.into());
        }
        fact
    }

    fn add(memory: &mut Memory, fact: Fact) -> Plan {
        let plan = memory.plan_add(fact).unwrap();
        for change in plan.changes.clone() {
            memory.apply(change).unwrap();
        }
        plan
    }

    #[test]
    fn a_reply_is_found_by_what_it_answered_and_messages_share_no_places() {
        use extract::{Utterance, extract};
        let scope = Scope::new("u", "agent");
        let mut memory = Memory::new();
        let asked = "Did you finally go to that pottery class you signed up for?";
        let turns = [
            Utterance::new("Caroline", "t1", asked, day(1)),
            Utterance::new(
                "Melanie",
                "t2",
                "Yes, I went last week! It was great fun.",
                day(1),
            )
            .replying_to(asked),
            Utterance::new(
                "Melanie",
                "t3",
                "The beach near our house is lovely. Kids build sandcastles on the beach.",
                day(2),
            ),
            Utterance::new(
                "Caroline",
                "t4",
                "We drove with friends and family from the city to a beach in May.",
                day(3),
            ),
        ];
        for said in &turns {
            for fact in extract(&scope, Some("s1"), said, said.at) {
                add(&mut memory, fact);
            }
        }
        let filter = Filter::user("u");
        // The answer says nothing of pottery; what it answered does.
        let hits = memory.search("When did Melanie go to pottery class?", &filter, 1, false);
        assert_eq!(hits[0].fact.source.message.as_deref(), Some("t2"));
        assert!(hits[0].fact.reply_to.as_deref() == Some(asked));
        // The sentences of t3 take two of the three places; one per message
        // leaves room for t4.
        let messages = |hits: &[Hit<'_>]| {
            let mut m: Vec<String> = hits
                .iter()
                .map(|h| h.fact.source.message.clone().unwrap())
                .collect();
            m.sort();
            m
        };
        let all = memory.search("beach", &filter, 3, false);
        assert_eq!(messages(&all), ["t3", "t3", "t4"]);
        let all = memory.search("beach", &filter, 2, false);
        assert_eq!(messages(&all), ["t3", "t3"]);
        let distinct = memory.search_distinct("beach", &filter, 2, false);
        assert_eq!(messages(&distinct), ["t3", "t4"]);
    }

    #[test]
    fn a_newer_contradicting_fact_invalidates_the_older_which_stays_queryable() {
        let mut memory = Memory::new();
        add(
            &mut memory,
            fact(
                "a",
                "u",
                "lives in Lisbon",
                Some(("lives in", "Lisbon")),
                day(1),
            ),
        );
        let plan = add(
            &mut memory,
            fact(
                "b",
                "u",
                "lives in Porto",
                Some(("lives in", "Porto")),
                day(5),
            ),
        );
        assert_eq!(plan.changes.len(), 2, "{plan:?}");
        let old = memory.get("a").unwrap();
        assert_eq!(
            (old.invalid_at, old.invalidated_by.as_deref()),
            (Some(day(5)), Some("b"))
        );
        assert!(memory.get("b").unwrap().is_valid());
        let filter = Filter::user("u");
        let valid = memory.search("lives", &filter, 10, false);
        assert_eq!(
            valid.iter().map(|h| h.fact.id.as_str()).collect::<Vec<_>>(),
            ["b"]
        );
        assert_eq!(memory.search("Lisbon", &filter, 10, true)[0].fact.id, "a");
        // A fact older than the valid one arrives late: added, already invalid.
        add(
            &mut memory,
            fact(
                "c",
                "u",
                "lives in Braga",
                Some(("lives in", "Braga")),
                day(3),
            ),
        );
        let late = memory.get("c").unwrap();
        assert_eq!(late.invalidated_by.as_deref(), Some("b"));
        assert!(memory.get("b").unwrap().is_valid());
        // The same value again adds nothing.
        let again = add(
            &mut memory,
            fact(
                "d",
                "u",
                "I live in Porto now",
                Some(("lives in", "porto")),
                day(9),
            ),
        );
        assert_eq!(again.duplicate_of.as_deref(), Some("b"));
        assert!(memory.get("d").is_none());
    }

    #[test]
    fn scopes_keep_users_agents_and_sessions_apart() {
        let mut memory = Memory::new();
        add(
            &mut memory,
            fact(
                "alice",
                "alice",
                "the staging password rotates weekly",
                None,
                day(1),
            ),
        );
        add(
            &mut memory,
            fact(
                "bob",
                "bob",
                "the staging password rotates weekly",
                None,
                day(1),
            ),
        );
        let mut other_agent = fact(
            "alice2",
            "alice",
            "the staging server is in Frankfurt",
            None,
            day(1),
        );
        other_agent.scope.agent = "ops".into();
        add(&mut memory, other_agent);
        let mut in_session = fact(
            "alice3",
            "alice",
            "staging is down for this session",
            None,
            day(1),
        );
        in_session.scope.session = Some("s9".into());
        add(&mut memory, in_session);
        let ids = |filter: &Filter| {
            let mut ids: Vec<String> = memory
                .search("staging", filter, 10, false)
                .iter()
                .map(|h| h.fact.id.clone())
                .collect();
            ids.sort();
            ids
        };
        assert_eq!(ids(&Filter::user("alice")), ["alice", "alice2", "alice3"]);
        assert_eq!(ids(&Filter::user("bob")), ["bob"]);
        assert_eq!(ids(&Filter::user("alice").agent("ops")), ["alice2"]);
        assert_eq!(ids(&Filter::user("alice").session("s9")), ["alice3"]);
        assert!(ids(&Filter::user("carol")).is_empty());
        // A contradiction in one user's memory never touches another's.
        add(
            &mut memory,
            fact("x", "alice", "x", Some(("editor", "vim")), day(1)),
        );
        add(
            &mut memory,
            fact("y", "bob", "y", Some(("editor", "emacs")), day(2)),
        );
        assert!(memory.get("x").unwrap().is_valid());
    }

    #[test]
    fn update_delete_list_and_entity() {
        let mut memory = Memory::new();
        let mut about_rex = fact("r", "u", "has a dog", None, day(1));
        about_rex.mentions = vec!["Rex".into()];
        add(&mut memory, about_rex);
        add(
            &mut memory,
            fact("e", "u", "e", Some(("editor", "vim")), day(1)),
        );
        add(
            &mut memory,
            fact("e2", "u", "e2", Some(("shell", "zsh")), day(2)),
        );
        // Editing e2 into the editor slot invalidates e.
        let changes = memory
            .plan_update(
                "e2",
                FactEdit {
                    attribute: Some("editor".into()),
                    value: Some("helix".into()),
                    ..FactEdit::default()
                },
                day(3),
            )
            .unwrap();
        for change in changes {
            memory.apply(change).unwrap();
        }
        assert_eq!(
            memory.get("e").unwrap().invalidated_by.as_deref(),
            Some("e2")
        );
        assert_eq!(memory.get("e2").unwrap().updated_at, Some(day(3)));
        let edit = FactEdit {
            text: Some("has a dog called Rex".into()),
            ..FactEdit::default()
        };
        for change in memory.plan_update("r", edit, day(4)).unwrap() {
            memory.apply(change).unwrap();
        }
        assert_eq!(
            memory.search("called", &Filter::user("u"), 5, false)[0]
                .fact
                .id,
            "r"
        );
        assert_eq!(
            memory
                .list(&Filter::user("u").entity("rex"), None, 10)
                .unwrap()
                .len(),
            1
        );
        let page = memory.list(&Filter::user("u"), Some("r"), 1).unwrap();
        assert_eq!(page[0].id, "e");
        for change in memory.plan_delete("r").unwrap() {
            memory.apply(change).unwrap();
        }
        assert!(memory.get("r").is_none());
        assert!(memory.search("dog", &Filter::user("u"), 5, true).is_empty());
        assert_eq!(memory.len(), 2);
        assert_eq!(
            memory.plan_delete("r"),
            Err(MemoryError::NotFound("r".into()))
        );
        let bad = FactEdit {
            text: Some(String::new()),
            ..FactEdit::default()
        };
        assert!(matches!(
            memory.plan_update("e", bad, day(5)),
            Err(MemoryError::Invalid { field: "text", .. })
        ));
    }

    #[test]
    fn hostile_facts_are_refused_with_the_field() {
        let memory = Memory::new();
        let mut long = fact("l", "u", "x", None, day(1));
        long.text = "x".repeat(MAX_TEXT_BYTES + 1);
        assert!(matches!(
            memory.plan_add(long),
            Err(MemoryError::Invalid { field: "text", .. })
        ));
        let control = fact("c\n", "u", "x", None, day(1));
        assert!(matches!(
            memory.plan_add(control),
            Err(MemoryError::Invalid { field: "id", .. })
        ));
        let no_user = fact("n", "", "x", None, day(1));
        assert!(matches!(
            memory.plan_add(no_user),
            Err(MemoryError::Invalid { field: "user", .. })
        ));
        let mut memory = Memory::new();
        add(&mut memory, fact("same", "u", "one thing", None, day(1)));
        assert_eq!(
            memory.plan_add(fact("same", "u", "another thing", None, day(1))),
            Err(MemoryError::Conflict("same".into()))
        );
    }
}
