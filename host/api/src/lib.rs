//! The JSON shapes agent-host shows to the world: `--json` output, the
//! server's bodies (as it lands) and the language bindings all serialize
//! these, so one change here changes every front end alike and no front end
//! writes JSON by hand.
//!
//! Each shape is built from the library types it shows (`From` impls), and
//! is plain data: `Serialize + Deserialize`, no logic.
//!
//! What it deliberately leaves out: anything that reads or writes storage,
//! calls a model or runs a processor.
//!
//! ```
//! use agent_host_api::ErrorBody;
//! use agent_host_core::ErrorKind;
//!
//! let body = ErrorBody::new(ErrorKind::NotFound, "no session telegram:1");
//! assert_eq!(
//!     serde_json::to_string(&body).unwrap(),
//!     r#"{"error":{"kind":"not_found","message":"no session telegram:1"}}"#
//! );
//! ```

use agent_host_core::ErrorKind;
use agent_host_core::pipeline::Compaction;
use agent_host_store::SessionMeta;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

pub mod memory;
pub mod server;
pub use server::{
    AppendMessages, Appended, CreateSession, Health, MessageList, ServerEvent, SessionList,
    SessionState, SummarizeView, TurnBody, TurnView, UpdateSession,
};

/// A session as listed: identity, owner and size, without its messages.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SessionView {
    /// The session's id.
    pub id: Uuid,
    /// The caller's key, when it has one.
    pub key: Option<String>,
    /// Its title, when it has one.
    pub title: Option<String>,
    /// The agent it belongs to.
    pub agent: String,
    /// The worker serving it, when its creator named one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker_id: Option<String>,
    /// The workspace it belongs to, when its creator named one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_id: Option<String>,
    /// How many messages its log holds.
    pub message_count: u64,
    /// When it was created.
    pub created: DateTime<Utc>,
    /// When it last changed.
    pub updated: DateTime<Utc>,
    /// How many summary checkpoints it has.
    pub checkpoints: usize,
    /// Where it is in its lifecycle (the server's view; absent elsewhere).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<SessionState>,
    /// When it was last written or read by a turn (the server's view).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_activity: Option<DateTime<Utc>>,
    /// The channels it was created or written through, as the store keeps
    /// them (and the server has seen since), sorted; at most
    /// [`MAX_CHANNELS`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub channels: Vec<String>,
}

/// The most channels a [`SessionView`] lists: what a store keeps.
pub use agent_host_store::MAX_CHANNELS;

impl From<&SessionMeta> for SessionView {
    fn from(meta: &SessionMeta) -> Self {
        SessionView {
            id: meta.id,
            key: meta.key.clone(),
            title: meta.title.clone(),
            agent: meta.agent.clone(),
            worker_id: meta.worker_id.clone(),
            workspace_id: meta.workspace_id.clone(),
            message_count: meta.message_count,
            created: meta.created,
            updated: meta.updated,
            checkpoints: meta.checkpoints.len(),
            state: None,
            last_activity: None,
            channels: meta.channels.clone(),
        }
    }
}

/// How full a session's next view is, and how close each summarization
/// trigger is (`agent-host context --json`, `/context`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ContextReport {
    /// The session.
    pub session: ContextSession,
    /// The model's window, in tokens.
    pub context_limit: u32,
    /// Tokens kept free for the answer.
    pub response_reserve: u32,
    /// Tokens the tool definitions take.
    pub tool_definitions: u32,
    /// Tokens of the view, per zone.
    pub tokens: ViewTokens,
    /// Messages in the view.
    pub messages_in_view: usize,
    /// Messages left out of it.
    pub left_out: usize,
    /// Messages since the latest checkpoint.
    pub messages_since_summary: usize,
    /// Tokens since the latest checkpoint.
    pub tokens_since_summary: u64,
    /// Every summarization trigger and how close it is.
    pub triggers: Vec<TriggerView>,
    /// How many tool results pruning would trim.
    pub would_prune: usize,
    /// Repeated identical tool calls.
    pub doom_loops: Vec<DoomLoopView>,
    /// What the volatile tail holds: the facts long-term memory recalls for
    /// the newest user message, best first (empty without memory).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volatile_tail: Vec<String>,
}

/// The session a [`ContextReport`] is about.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ContextSession {
    /// The session's id.
    pub id: Uuid,
    /// The caller's key, when it has one.
    pub key: Option<String>,
    /// The agent it belongs to.
    pub agent: String,
    /// Its title, when it has one.
    pub title: Option<String>,
    /// How many messages its log holds.
    pub messages: u64,
    /// How many summary checkpoints it has.
    pub checkpoints: usize,
}

impl From<&SessionMeta> for ContextSession {
    fn from(meta: &SessionMeta) -> Self {
        ContextSession {
            id: meta.id,
            key: meta.key.clone(),
            agent: meta.agent.clone(),
            title: meta.title.clone(),
            messages: meta.message_count,
            checkpoints: meta.checkpoints.len(),
        }
    }
}

/// Tokens of a view, per zone.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ViewTokens {
    /// The system prompt.
    pub system: u32,
    /// The checkpoint summary.
    pub summary: u32,
    /// What the summary may take at most.
    pub summary_cap: u32,
    /// The recent messages.
    pub recent: u32,
    /// The volatile tail after the newest message (what long-term memory
    /// recalls for it), never cached; 0 without memory.
    #[serde(default)]
    pub volatile: u32,
    /// All of it.
    pub total: u32,
    /// What the budget allows.
    pub available: u32,
    /// `total` as a percentage of the window.
    pub percent_of_window: f64,
}

/// One summarization trigger.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TriggerView {
    /// Its name (`messages`, `tokens`, `fraction`).
    pub name: String,
    /// Where the session stands.
    pub current: u64,
    /// Where it fires.
    pub limit: u64,
    /// `current` as a percentage of `limit`.
    pub percent: f64,
    /// Whether it fires on the next turn.
    pub fires: bool,
}

/// A tool called the same way several times in a row.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DoomLoopView {
    /// The tool.
    pub tool: String,
    /// How many identical calls in a row.
    pub count: usize,
}

impl ContextReport {
    /// The report of `meta`'s session from the pipeline's dry run `c`.
    pub fn new(meta: &SessionMeta, c: &Compaction) -> Self {
        Self::of_report(meta, &c.report)
    }

    /// The report of `meta`'s session from what the pipeline's dry run
    /// reported (all a context report shows of it).
    pub fn of_report(
        meta: &SessionMeta,
        report: &agent_host_core::pipeline::PipelineReport,
    ) -> Self {
        let u = &report.usage;
        let v = &u.view;
        ContextReport {
            session: ContextSession::from(meta),
            context_limit: u.context_limit,
            response_reserve: u.response_reserve,
            tool_definitions: u.tool_definitions,
            tokens: ViewTokens {
                system: v.system,
                summary: v.summary,
                summary_cap: v.summary_cap,
                recent: v.recent,
                volatile: 0,
                total: v.total(),
                available: v.available,
                percent_of_window: percent(u64::from(v.total()), u64::from(u.context_limit)),
            },
            messages_in_view: u.messages_in_view,
            left_out: v.left_out,
            messages_since_summary: u.messages_since_summary,
            tokens_since_summary: u.tokens_since_summary,
            triggers: u
                .triggers
                .iter()
                .map(|t| TriggerView {
                    name: t.name.to_owned(),
                    current: t.current,
                    limit: t.limit,
                    percent: t.percent,
                    fires: t.current >= t.limit,
                })
                .collect(),
            would_prune: report.pruned.len(),
            doom_loops: report
                .doom_loops
                .iter()
                .map(|d| DoomLoopView {
                    tool: d.tool.clone(),
                    count: d.count,
                })
                .collect(),
            volatile_tail: Vec::new(),
        }
    }

    /// Adds the volatile tail `recall` makes after the view: its tokens to
    /// the zone and the total, its facts to [`ContextReport::volatile_tail`].
    pub fn with_recall(mut self, recall: &agent_host_core::memory::recall::Recall) -> Self {
        if recall.facts.is_empty() {
            return self;
        }
        self.tokens.volatile = recall.tokens;
        self.tokens.total = self.tokens.total.saturating_add(recall.tokens);
        self.tokens.percent_of_window =
            percent(u64::from(self.tokens.total), u64::from(self.context_limit));
        self.volatile_tail = recall.facts.iter().map(|f| f.text.clone()).collect();
        self
    }
}

/// `part` as a percentage of `whole` (0 when `whole` is 0).
pub fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

/// An error as every front end reports it: `{"error": {"kind", "message"}}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorDetail,
}

/// What an [`ErrorBody`] holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorDetail {
    /// Its kind, as the library classified it (`not_found`, `invalid_input`,
    /// `unauthorized`, ...).
    #[cfg_attr(feature = "openapi", schema(value_type = String, example = "not_found"))]
    pub kind: ErrorKind,
    /// What was wrong, where, and what to do about it.
    pub message: String,
}

impl ErrorBody {
    /// An error body of `kind` saying `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        ErrorBody {
            error: ErrorDetail {
                kind,
                message: message.into(),
            },
        }
    }
}

/// What the core pipeline did to a history (`run --report`'s `pipeline`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PipelineReport {
    /// The seeds' events, as lines of the report (`context_compacted`).
    pub events: Vec<PipelineEvent>,
    /// What repair changed, one line each.
    pub repairs: Vec<String>,
    /// Repeated identical tool calls.
    pub doom_loops: Vec<DoomLoopView>,
    /// Tool results pruned.
    pub pruned: Vec<PrunedView>,
    /// Whether a summary was made, and why or why not.
    pub summary: SummaryView,
    /// What emergency truncation did, one line each.
    pub truncations: Vec<String>,
    /// The size of the view made.
    pub view: ViewSize,
}

/// An event of the pipeline.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PipelineEvent {
    /// Its name (`context_compacted`).
    pub event: String,
    /// What fired it.
    pub trigger: String,
    /// How many messages the checkpoint covers.
    pub covered: usize,
    /// The checkpoint's boundary message.
    pub boundary_id: String,
    /// The checkpoint's summary message.
    pub summary_id: String,
}

/// A tool result pruning cut or cleared.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PrunedView {
    /// The message.
    pub id: String,
    /// The tool that answered.
    pub tool: Option<String>,
    /// Characters before.
    pub chars_before: usize,
    /// Characters after.
    pub chars_after: usize,
    /// Whether it was cleared rather than cut.
    pub cleared: bool,
}

/// The summary stage's outcome.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum SummaryView {
    /// The stage is off, or no summarizer was given.
    Skipped,
    /// No summary was needed or possible.
    NotDone {
        /// Why.
        why: String,
    },
    /// A checkpoint was made.
    Summarized {
        /// What fired it.
        trigger: String,
        /// How many messages it covers.
        covered: usize,
        /// How many summarization calls made it.
        parts: usize,
        /// Messages too large to summarize, left out of it.
        oversized: Vec<String>,
    },
    /// The summarizer failed; the full history was kept.
    Failed {
        /// What fired it.
        trigger: String,
        /// Why it failed.
        error: String,
    },
}

/// The size of a view.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ViewSize {
    /// Messages in it.
    pub messages: usize,
    /// Its tokens.
    pub tokens: u32,
    /// The model's window.
    pub context_limit: u32,
    /// Tokens kept free for the answer.
    pub response_reserve: u32,
}

impl From<&Compaction> for PipelineReport {
    fn from(c: &Compaction) -> Self {
        use agent_host_core::pipeline::SummaryOutcome;
        let r = &c.report;
        let summary = match &r.summary {
            SummaryOutcome::Skipped => SummaryView::Skipped,
            SummaryOutcome::NotDone(why) => SummaryView::NotDone {
                why: format!("{why:?}"),
            },
            SummaryOutcome::Summarized {
                trigger,
                covered,
                parts,
                oversized,
            } => SummaryView::Summarized {
                trigger: format!("{trigger:?}"),
                covered: *covered,
                parts: *parts,
                oversized: oversized.clone(),
            },
            SummaryOutcome::Failed { trigger, error } => SummaryView::Failed {
                trigger: format!("{trigger:?}"),
                error: error.clone(),
            },
        };
        let events = match (&r.summary, &c.checkpoint) {
            (
                SummaryOutcome::Summarized {
                    trigger, covered, ..
                },
                Some(cp),
            ) => vec![PipelineEvent {
                event: "context_compacted".to_owned(),
                trigger: format!("{trigger:?}"),
                covered: *covered,
                boundary_id: cp.boundary_id.clone(),
                summary_id: cp.summary_id.clone(),
            }],
            _ => Vec::new(),
        };
        PipelineReport {
            events,
            repairs: r.repairs.iter().map(ToString::to_string).collect(),
            doom_loops: r
                .doom_loops
                .iter()
                .map(|d| DoomLoopView {
                    tool: d.tool.clone(),
                    count: d.count,
                })
                .collect(),
            pruned: r
                .pruned
                .iter()
                .map(|p| PrunedView {
                    id: p.id.clone(),
                    tool: p.tool.clone(),
                    chars_before: p.chars_before,
                    chars_after: p.chars_after,
                    cleared: p.cleared,
                })
                .collect(),
            summary,
            truncations: r.truncations.iter().map(|t| format!("{t:?}")).collect(),
            view: ViewSize {
                messages: r.usage.messages_in_view,
                tokens: r.usage.view.total(),
                context_limit: r.usage.context_limit,
                response_reserve: r.usage.response_reserve,
            },
        }
    }
}
