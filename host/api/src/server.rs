//! The bodies of `agent-host serve`'s `/v1` API: what requests carry and
//! what answers hold. Messages travel as agent-host's native records (one
//! JSON object each, the lines of a JSONL log); a request may append them in
//! any supported format instead.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;
use uuid::Uuid;

use crate::{PipelineReport, SessionView};

/// Where a session is in its lifecycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum SessionState {
    /// Made, with no message yet.
    Created,
    /// Written to or turned recently.
    Active,
    /// Nothing happened to it for the server's idle time.
    Idle,
    /// A summary checkpoint was its latest change.
    Compacted,
}

impl SessionState {
    /// The state's name (`created`, `active`, `idle`, `compacted`).
    pub const fn as_str(self) -> &'static str {
        match self {
            SessionState::Created => "created",
            SessionState::Active => "active",
            SessionState::Idle => "idle",
            SessionState::Compacted => "compacted",
        }
    }
}

impl std::str::FromStr for SessionState {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [
            SessionState::Created,
            SessionState::Active,
            SessionState::Idle,
            SessionState::Compacted,
        ]
        .into_iter()
        .find(|state| state.as_str() == s)
        .ok_or_else(|| format!("unknown state {s:?}; expected created, active, idle or compacted"))
    }
}

/// `POST /v1/sessions`: get or create a session.
///
/// With a `key` (or a `chat`, which the server's channel scope turns into
/// one) an existing session answers 200; otherwise a new one is made (201).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CreateSession {
    /// The caller's key within the agent (`telegram:123456`).
    #[serde(default)]
    pub key: Option<String>,
    /// The agent the session belongs to (the server's default agent when absent).
    #[serde(default)]
    pub agent: Option<String>,
    /// The worker serving the session, kept with it.
    #[serde(default)]
    pub worker_id: Option<String>,
    /// The workspace the session belongs to, kept with it.
    #[serde(default)]
    pub workspace_id: Option<String>,
    /// A title for a new session.
    #[serde(default)]
    pub title: Option<String>,
    /// The channel the conversation comes from (`telegram`, `slack`, `http`).
    #[serde(default)]
    pub channel: Option<String>,
    /// The chat within the channel; with no `key`, the server's
    /// `channel_scope` makes the key from `channel` and `chat`.
    #[serde(default)]
    pub chat: Option<String>,
}

/// `PATCH /v1/sessions/{id}`: what to change.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct UpdateSession {
    /// The new title; `null` removes it; absent leaves it.
    #[serde(default, with = "double_option")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub title: Option<Option<String>>,
}

/// A page of sessions, newest update first.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SessionList {
    /// The sessions of this page.
    pub sessions: Vec<SessionView>,
    /// Pass as `cursor` for the next page; absent on the last page.
    pub next_cursor: Option<String>,
}

/// `POST /v1/sessions/{id}/messages`: messages to append, in one atomic write.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct AppendMessages {
    /// The messages: an array of native records or OpenAI chat messages, an
    /// Anthropic request (`{"system", "messages"}`), or one message object.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub messages: Value,
    /// Their format (`jsonl` for native records, `openai`, `anthropic`);
    /// detected when absent.
    #[serde(default)]
    pub format: Option<String>,
    /// The channel of messages that name none.
    #[serde(default)]
    pub channel: Option<String>,
}

/// What an append stored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Appended {
    /// The ids of the stored messages, in order (given ones kept, missing
    /// ones made).
    pub ids: Vec<String>,
    /// The session after the append.
    pub session: SessionView,
}

/// Messages of a session, as native records.
#[derive(Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MessageList {
    /// The matching messages, in log order.
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<Object>))]
    pub messages: Vec<Box<RawValue>>,
}

/// `POST /v1/sessions/{id}/turns`: one model turn.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct TurnBody {
    /// The user's message.
    pub text: String,
    /// The channel it came from (`api` when absent).
    #[serde(default)]
    pub channel: Option<String>,
    /// Answer with server-sent events as the turn goes (also chosen by
    /// `Accept: text/event-stream`).
    #[serde(default)]
    pub stream: bool,
}

/// What a turn did.
#[derive(Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TurnView {
    /// The user message: stored with the reply; a server with no provider
    /// stores nothing and answers with the report of the view it would send.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub user: Box<RawValue>,
    /// The model's stored reply; absent when the server has no provider.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub reply: Option<Box<RawValue>>,
    /// What the pipeline did to the view that was sent.
    pub pipeline: PipelineReport,
    /// The provider's context-length error that made the engine prune
    /// harder and retry, when that happened.
    pub aggressive_retry: Option<String>,
    /// The session after the turn (absent when nothing was stored).
    pub session: Option<SessionView>,
}

/// What `POST /v1/sessions/{id}/summarize` did.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SummarizeView {
    /// The pipeline's report, whose `summary` says whether a checkpoint was made.
    pub pipeline: PipelineReport,
    /// The session after it.
    pub session: SessionView,
}

/// One event of `GET /v1/events` (the SSE `data:`; the SSE `event:` is `event`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ServerEvent {
    /// A number that grows by one an event, per server process.
    pub seq: u64,
    /// `session_created`, `session_saved`, `session_deleted`,
    /// `context_compacted`, `processor_report`, `state_changed`, `hook_failed`.
    pub event: String,
    /// The session concerned.
    pub session: Option<Uuid>,
    /// When it happened.
    pub at: DateTime<Utc>,
    /// The event's details (see each event).
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub data: Value,
}

/// `GET /healthz`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Health {
    /// `ok`.
    pub status: String,
    /// The server's version.
    pub version: String,
    /// Sessions in the index.
    pub sessions: usize,
}

/// `Option<Option<T>>` that tells an absent field from `null`.
mod double_option {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<T: Serialize, S: Serializer>(
        value: &Option<Option<T>>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(inner) => inner.serialize(serializer),
            None => serializer.serialize_none(),
        }
    }

    pub fn deserialize<'de, T: Deserialize<'de>, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Option<T>>, D::Error> {
        Option::<T>::deserialize(deserializer).map(Some)
    }
}
