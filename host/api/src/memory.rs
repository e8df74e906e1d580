//! Long-term memory's shapes: a fact as shown, what adding, searching and
//! listing answer, and the bodies that add or edit facts.

use agent_host_core::memory::{Fact, FactEdit};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// A fact as shown.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MemoryFact {
    /// Its id.
    pub id: String,
    /// The user whose memory it is in.
    pub user: String,
    /// The agent that remembers it.
    pub agent: String,
    /// The session it is kept to, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// What it is about.
    pub entity: String,
    /// `name`, `preference`, `decision`, `attribute`, `path`, `identifier`,
    /// `date` or `statement`.
    pub kind: String,
    /// The fact.
    pub text: String,
    /// The single-valued attribute it fills.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attribute: Option<String>,
    /// The attribute's value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// Other entities it names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mentions: Vec<String>,
    /// The dates it speaks of (`2023-05-07`, `2023-05`, `2022`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dates: Vec<String>,
    /// The session it was extracted from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_session: Option<String>,
    /// The message it was extracted from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_message: Option<String>,
    /// When memory recorded it.
    pub recorded_at: DateTime<Utc>,
    /// From when it holds.
    pub valid_from: DateTime<Utc>,
    /// Whether it still holds.
    pub valid: bool,
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

impl From<&Fact> for MemoryFact {
    fn from(f: &Fact) -> Self {
        MemoryFact {
            id: f.id.clone(),
            user: f.scope.user.clone(),
            agent: f.scope.agent.clone(),
            session: f.scope.session.clone(),
            entity: f.entity.clone(),
            kind: f.kind.as_str().to_owned(),
            text: f.text.clone(),
            attribute: f.attribute.clone(),
            value: f.value.clone(),
            mentions: f.mentions.clone(),
            dates: f.dates.clone(),
            source_session: f.source.session.clone(),
            source_message: f.source.message.clone(),
            recorded_at: f.recorded_at,
            valid_from: f.valid_from,
            valid: f.is_valid(),
            invalid_at: f.invalid_at,
            invalidated_by: f.invalidated_by.clone(),
            updated_at: f.updated_at,
        }
    }
}

/// A fact added (or found already known).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MemoryAdded {
    /// The fact as stored, or the one that already said the same.
    pub fact: MemoryFact,
    /// Whether it was already known (nothing was added).
    pub duplicate: bool,
    /// The facts it invalidated.
    pub invalidated: Vec<String>,
}

impl From<&agent_host_store::memory::Added> for MemoryAdded {
    fn from(a: &agent_host_store::memory::Added) -> Self {
        MemoryAdded {
            fact: MemoryFact::from(&a.fact),
            duplicate: a.duplicate,
            invalidated: a.invalidated.clone(),
        }
    }
}

/// What `POST /v1/memory` answers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MemoryAddResult {
    /// Each fact given or extracted, in order.
    pub added: Vec<MemoryAdded>,
}

/// A fact found by a search.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MemoryHit {
    /// The fact.
    pub fact: MemoryFact,
    /// Its BM25 score.
    pub score: f32,
}

/// What a search answers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MemoryHits {
    /// Best first.
    pub hits: Vec<MemoryHit>,
}

/// A page of facts, in the order recorded.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MemoryList {
    /// The facts.
    pub facts: Vec<MemoryFact>,
    /// Pass as `after` for the next page; absent on the last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

/// One message to extract facts from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct MemoryMessage {
    /// Its id (the facts' provenance); derived from its place when absent.
    #[serde(default)]
    pub id: Option<String>,
    /// `user` or `assistant` (others are skipped).
    pub role: String,
    /// Its text.
    pub content: String,
    /// When it was said (now when absent).
    #[serde(default)]
    pub timestamp: Option<DateTime<Utc>>,
}

/// The body of `POST /v1/memory`: a fact (`text`, with `entity`), or
/// `messages` to extract facts from with the offline extractor.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NewMemory {
    /// The user whose memory it goes into.
    pub user: String,
    /// The agent (the server's default agent when absent).
    #[serde(default)]
    pub agent: Option<String>,
    /// Keep it to this session only.
    #[serde(default)]
    pub session: Option<String>,
    /// The session the messages (or the fact) came from.
    #[serde(default)]
    pub source_session: Option<String>,
    /// The fact's text.
    #[serde(default)]
    pub text: Option<String>,
    /// What it is about (the user when absent).
    #[serde(default)]
    pub entity: Option<String>,
    /// The attribute it fills (a later value of it invalidates this one).
    #[serde(default)]
    pub attribute: Option<String>,
    /// The attribute's value.
    #[serde(default)]
    pub value: Option<String>,
    /// From when it holds (now when absent).
    #[serde(default)]
    pub valid_from: Option<DateTime<Utc>>,
    /// Messages to extract facts from, instead of a fact.
    #[serde(default)]
    pub messages: Vec<MemoryMessage>,
}

/// The body of `PATCH /v1/memory/{id}`: the fields to change.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct MemoryEdit {
    /// The new text.
    #[serde(default)]
    pub text: Option<String>,
    /// The new entity.
    #[serde(default)]
    pub entity: Option<String>,
    /// The new attribute.
    #[serde(default)]
    pub attribute: Option<String>,
    /// The new value.
    #[serde(default)]
    pub value: Option<String>,
}

impl From<MemoryEdit> for FactEdit {
    fn from(e: MemoryEdit) -> Self {
        FactEdit {
            text: e.text,
            entity: e.entity,
            attribute: e.attribute,
            value: e.value,
        }
    }
}
