//! The session header: what identifies a conversation, apart from its messages.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// A summary checkpoint: the pair of summary messages that stands for a span of
/// the log in the view sent to the model.
///
/// Nothing is deleted from the log when a checkpoint is written; the
/// checkpoint records which message ids it covers so that the view can start
/// after them and a user can always find what was summarized.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The id of the synthetic user message that marks the boundary.
    pub boundary_id: String,
    /// The id of the assistant message that holds the summary.
    pub summary_id: String,
    /// The ids of the messages the summary covers, in log order.
    pub covers: Vec<String>,
    /// When the checkpoint was written.
    pub created: DateTime<Utc>,
    /// Who wrote the summary and what it cost; absent in checkpoints
    /// written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<SummaryUsage>,
}

/// Who wrote a checkpoint's summary, and what it cost.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SummaryUsage {
    /// The model that wrote it, or `extractive` (no model).
    pub model: String,
    /// Summarization requests sent (parts and merges); 0 for `extractive`.
    #[serde(default)]
    pub requests: u32,
    /// Input tokens the provider reported over those requests.
    #[serde(default)]
    pub input_tokens: u64,
    /// Output tokens the provider reported over those requests.
    #[serde(default)]
    pub output_tokens: u64,
}

/// Everything about a session but its messages.
///
/// ```
/// use agent_host_core::SessionHeader;
/// use chrono::{TimeZone, Utc};
/// use uuid::Uuid;
///
/// let now = Utc.with_ymd_and_hms(2025, 1, 2, 3, 4, 5).unwrap();
/// let header = SessionHeader::new(Uuid::nil(), now).with_key("telegram:123456");
/// assert_eq!(header.key.as_deref(), Some("telegram:123456"));
/// assert_eq!(header.created, header.updated);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionHeader {
    /// The session's identity (a UUID, made by the caller: core has no randomness).
    pub id: Uuid,
    /// A caller-chosen key such as `telegram:123456`, for get-or-create.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// A human-readable title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The agent the session belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// When the session was created.
    pub created: DateTime<Utc>,
    /// When a message was last appended or the header last changed.
    pub updated: DateTime<Utc>,
    /// Summary checkpoints, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checkpoints: Vec<Checkpoint>,
}

impl SessionHeader {
    /// A new, empty session created at `now`.
    pub fn new(id: Uuid, now: DateTime<Utc>) -> Self {
        SessionHeader {
            id,
            key: None,
            title: None,
            agent: None,
            created: now,
            updated: now,
            checkpoints: Vec::new(),
        }
    }

    /// Sets the key, builder style.
    pub fn with_key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// The latest checkpoint, the one the view starts after.
    pub fn latest_checkpoint(&self) -> Option<&Checkpoint> {
        self.checkpoints.last()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn header_round_trips_through_json() {
        let t = Utc.with_ymd_and_hms(2025, 5, 1, 12, 0, 0).unwrap();
        let mut header = SessionHeader::new(Uuid::from_u128(7), t).with_key("slack:C1");
        header.title = Some("Deploy".into());
        header.checkpoints.push(Checkpoint {
            usage: None,
            boundary_id: "b".into(),
            summary_id: "s".into(),
            covers: vec!["m1".into(), "m2".into()],
            created: t,
        });
        let json = serde_json::to_string(&header).unwrap();
        let back: SessionHeader = serde_json::from_str(&json).unwrap();
        assert_eq!(back, header);
        assert_eq!(back.latest_checkpoint().unwrap().covers.len(), 2);
    }
}
