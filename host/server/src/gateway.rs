//! The gateway: OpenAI Chat Completions (`POST /v1/chat/completions`),
//! Anthropic Messages (`POST /v1/messages`) and OpenAI Responses (`POST
//! /v1/responses`, see `gateway/responses.rs`) in front of the configured
//! upstreams, so that an agent gets sessions, compaction and sandboxed
//! processors by changing its `base_url`.
//!
//! A request goes through these steps:
//!
//! 0. **Its upstream** is the one its `model` picks ([`Upstream`]: by name,
//!    by prefix, else the default; the engine's provider when none are
//!    configured). A Chat Completions or Messages request in front of an
//!    upstream of the other wire is translated (`gateway/crossed.rs`), as a
//!    Responses one always is (`gateway/responses.rs`).
//! 1. **Its session** is found, in this order: the `x-session-id` header
//!    (or `x-agent-host-session`), the body's `prompt_cache_key`, its
//!    `user` (Anthropic: `metadata.user_id`), the Responses ids (the
//!    session `previous_response_id` was answered in, or the
//!    `conversation`), and last a fingerprint of its leading messages (the
//!    system prompt and the first user message), so a client that resends
//!    its whole history stays in one session.
//! 2. **Its messages are reconciled** with the stored log
//!    ([`agent_host_core::reconcile`]): the ones not stored yet are
//!    appended; a client that rewrote or rewound its history goes to a
//!    branch (the key `KEY~FINGERPRINT`), never onto a log it no longer has.
//!    A Responses request that continues a response or a conversation sends
//!    only what is new: all of it is appended.
//! 3. **The view is prepared** as for a turn: the pipeline fits the window
//!    (budget, pruning, a summary checkpoint, truncation), then the
//!    processors run in the sandbox: those of the chain the request asks
//!    for (`x-agent-host-chain`, else `default`) that run on its route and
//!    for its model (`gateway/chains.rs`).
//! 4. **The request goes upstream** as the client wrote it, its messages
//!    replaced by the view (and the model kept), less what only another
//!    upstream can read (signed or encrypted reasoning, compaction items,
//!    marked with the upstream that made them; the record's `notes` say
//!    what was left out). The answer comes back as
//!    the upstream sent it (a stream piece by piece), and is stored when it
//!    ended whole: a client that hangs up drops the upstream request and
//!    stores no half answer. An upstream error is passed on with its status
//!    and (capped) body.
//!
//! Response headers say what happened (`x-agent-host-session`,
//! `x-agent-host-tokens-before`/`-after`, `x-agent-host-summary`,
//! `x-agent-host-processors`, `x-agent-host-request`), and the request's
//! record (what each stage did) is at
//! `GET /v1/sessions/{id}/requests/{n}`; the newest [`KEPT_RECORDS`] of a
//! session are kept, in memory and in the store ([`crate::records`]), the
//! newest [`KEPT_DIFFS`] with a bounded
//! diff of the messages each stage kept, dropped, replaced and inserted
//! (the dashboard's request page shows them).

use std::sync::Arc;

use agent_host_api::PipelineReport;
use agent_host_core::format::{anthropic, openai};
use agent_host_core::reconcile::fingerprint;
use agent_host_core::{ErrorKind, Message, Role, Usage};
use agent_host_engine::trace::StageReport;
use agent_host_engine::{Exchange, ExchangeOptions, Prepared, Ready, SummarizerChoice};
use agent_host_provider::{ProviderError, ProviderKind, Relay, Relayed};
use agent_host_runtime::ProcessorReport;
use agent_host_store::{NewSession, SessionRef};
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use uuid::Uuid;

use crate::error::ApiError;
use crate::index::Change;
use crate::{Shared, observe};

/// How many request records are kept per session (the newest).
pub const KEPT_RECORDS: usize = 100;

/// How many of a session's newest records keep their stages' diffs (each
/// bounded by core's `DiffLimits`); older records keep the rest.
pub const KEPT_DIFFS: usize = 20;

/// The channel the gateway's messages are stored with.
pub const CHANNEL: &str = "gateway";

/// The longest session id a client may give, in bytes.
const MAX_SESSION_NAME: usize = 512;

/// How many times a request may branch before it is refused (a branch
/// whose history parts again branches once more).
const MAX_BRANCHES: usize = 4;

/// The headers of a client passed upstream.
const FORWARDED_HEADERS: [&str; 2] = ["anthropic-beta", "anthropic-version"];

pub(crate) mod chains;
pub(crate) mod crossed;
pub(crate) mod memory;
pub(crate) mod responses;
pub(crate) mod summary;

pub use chains::{CHAIN_HEADER, DEFAULT_CHAIN, GatewayProcessor};
pub use memory::MemoryCall;

pub(crate) fn router() -> Router<Shared> {
    Router::new()
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/messages", post(messages))
        .route("/v1/responses", post(responses_route))
        .route("/v1/models", get(models))
        .route("/v1/sessions/{session}/requests", get(list_records))
        .route("/v1/sessions/{session}/requests/{n}", get(record))
}

/// The wire a client speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Wire {
    /// OpenAI Chat Completions.
    ChatCompletions,
    /// Anthropic Messages.
    AnthropicMessages,
    /// OpenAI Responses, translated to the upstream's wire.
    Responses,
}

impl Wire {
    /// The upstream wire this one is relayed to as it is (to the other it
    /// is translated); `None` when it is translated to either.
    fn provider(self) -> Option<ProviderKind> {
        match self {
            Wire::ChatCompletions => Some(ProviderKind::OpenAi),
            Wire::AnthropicMessages => Some(ProviderKind::Anthropic),
            Wire::Responses => None,
        }
    }

    /// An error in the shape this wire's SDKs read.
    fn error(self, status: StatusCode, kind: &str, message: &str) -> Response {
        let body = match self {
            Wire::ChatCompletions | Wire::Responses => json!({
                "error": {"message": message, "type": kind, "param": null, "code": null}
            }),
            Wire::AnthropicMessages => json!({
                "type": "error", "error": {"type": kind, "message": message}
            }),
        };
        (status, Json(body)).into_response()
    }

    fn api_error(self, e: &ApiError) -> Response {
        let status = e.status();
        let kind = match (self, status.as_u16()) {
            (_, 400 | 413 | 422) => "invalid_request_error",
            (_, 401) => "authentication_error",
            (_, 403) => "permission_error",
            (_, 404) => "not_found_error",
            (Wire::AnthropicMessages, 429) => "rate_limit_error",
            (Wire::ChatCompletions | Wire::Responses, 409) => "conflict",
            (Wire::ChatCompletions | Wire::Responses, 429) => "rate_limit_exceeded",
            (Wire::AnthropicMessages, _) => "api_error",
            (Wire::ChatCompletions | Wire::Responses, _) => "server_error",
        };
        self.error(status, kind, &e.message)
    }
}

/// What a request did, kept for `GET /v1/sessions/{id}/requests/{n}`
/// (in memory and in the store, see [`crate::records`]).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RequestRecord {
    /// Its number in the session, from 1.
    pub n: u64,
    /// When it arrived.
    pub at: DateTime<Utc>,
    /// The wire the client spoke.
    pub wire: Wire,
    /// The model asked for.
    pub model: Option<String>,
    /// Whether the answer was streamed.
    pub stream: bool,
    /// How the session was found: `header`, `prompt_cache_key`, `user`,
    /// `previous_response_id`, `conversation`, `fingerprint`.
    pub identified_by: String,
    /// The session key.
    pub key: String,
    /// The session this one branched from, when the client's history
    /// parted from the stored log.
    pub branched_from: Option<String>,
    /// How many messages the client sent.
    pub client_messages: usize,
    /// How many of them the log held already.
    pub known: usize,
    /// The ids of the ones stored by this request.
    pub appended: Vec<String>,
    /// Estimated tokens of the log since the last summary, before the pipeline.
    pub tokens_before: u64,
    /// Estimated tokens of the view sent.
    pub tokens_after: u64,
    /// The ids of the messages sent upstream, in order.
    pub sent: Vec<String>,
    /// What the pipeline did.
    pub pipeline: PipelineReport,
    /// What each processor did (kept, dropped, replaced, inserted ids).
    pub processors: Vec<ProcessorReport>,
    /// Each stage in order (the pipeline, then every processor) with its
    /// time, outcome and a bounded diff of the messages; kept for the
    /// newest [`KEPT_DIFFS`] records of a session, emptied on older ones.
    pub stages: Vec<StageReport>,
    /// Whether `stages` was emptied (the record is older than the newest
    /// [`KEPT_DIFFS`]).
    pub stages_forgotten: bool,
    /// The upstream's status, once it answered.
    pub upstream_status: Option<u16>,
    /// The usage the upstream reported.
    pub usage: Option<Usage>,
    /// The stored answer's id.
    pub reply: Option<String>,
    /// How it ended: `stored`, `upstream_error`, `unreadable_answer`,
    /// `client_disconnected`, `in_progress`.
    pub outcome: String,
    /// What went wrong, when something did.
    pub error: Option<String>,
    /// The upstream the request went to (see [`Upstream`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream: Option<String>,
    /// What the gateway left out of the request, and why (content only
    /// another upstream can read).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The processor chain the request ran (see [`GatewayProcessor`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain: Option<String>,
    /// The id of the Responses answer this request was given (a Responses
    /// client's), once it is stored: the newest one is what
    /// `previous_response_id` must name, after a restart too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<String>,
    /// The calls to the memory tools the gateway ran for the model before
    /// the answer the client got (`serve --memory-tools`), in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub memory_calls: Vec<memory::MemoryCall>,
}

/// A request record as the dashboard lists it.
#[derive(Clone, Debug)]
pub(crate) struct Brief {
    pub n: u64,
    pub at: DateTime<Utc>,
    pub wire: Wire,
    pub model: Option<String>,
    /// Tokens before the pipeline and sent.
    pub tokens: (u64, u64),
    /// Messages the client sent, and sent upstream.
    pub messages: (usize, usize),
    /// Messages dropped, replaced and inserted over every stage (`None`
    /// when the record no longer keeps its stages).
    pub changes: Option<(usize, usize, usize)>,
    pub outcome: String,
}

impl Brief {
    /// What the dashboard lists of `r`.
    pub(crate) fn of(r: &RequestRecord) -> Brief {
        let (mut dropped, mut replaced, mut inserted) = (0, 0, 0);
        for stage in &r.stages {
            dropped += stage.diff.dropped;
            replaced += stage.diff.replaced;
            inserted += stage.diff.inserted;
        }
        Brief {
            n: r.n,
            at: r.at,
            wire: r.wire,
            model: r.model.clone(),
            tokens: (r.tokens_before, r.tokens_after),
            messages: (r.client_messages, r.sent.len()),
            changes: (!r.stages_forgotten).then_some((dropped, replaced, inserted)),
            outcome: r.outcome.clone(),
        }
    }
}

impl Wire {
    /// Its name for people.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Wire::ChatCompletions => "Chat Completions",
            Wire::AnthropicMessages => "Anthropic Messages",
            Wire::Responses => "OpenAI Responses",
        }
    }
}

/// `POST /v1/chat/completions`: OpenAI Chat Completions through the gateway.
#[utoipa::path(post, path = "/v1/chat/completions", tag = "gateway",
    request_body(content = Object, content_type = "application/json",
        description = "An OpenAI Chat Completions request (`model`, `messages`, `tools`, `stream`, ...). Its session: the `x-session-id` (or `x-agent-host-session`) header, `prompt_cache_key`, `user`, else a fingerprint of its leading messages."),
    responses(
        (status = 200, description = "The upstream's answer as it sent it (JSON, or server-sent events with `stream`); headers `x-agent-host-session`, `x-agent-host-request` and the pipeline's `x-agent-host-*`", body = Object),
        (status = 400, description = "A bad request, in OpenAI's error shape", body = Object),
        (status = 502, description = "The upstream failed", body = Object)))]
pub(crate) async fn chat_completions(
    State(state): State<Shared>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    relay(state, Wire::ChatCompletions, headers, body).await
}

/// `POST /v1/messages`: Anthropic Messages through the gateway.
#[utoipa::path(post, path = "/v1/messages", tag = "gateway",
    request_body(content = Object, content_type = "application/json",
        description = "An Anthropic Messages request (`model`, `max_tokens`, `system`, `messages`, `tools`, `stream`, ...). Its session: the `x-session-id` header, `metadata.user_id`, else a fingerprint."),
    responses(
        (status = 200, description = "The upstream's answer as it sent it (JSON, or server-sent events with `stream`)", body = Object),
        (status = 400, description = "A bad request, in Anthropic's error shape", body = Object),
        (status = 502, description = "The upstream failed", body = Object)))]
pub(crate) async fn messages(
    State(state): State<Shared>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    relay(state, Wire::AnthropicMessages, headers, body).await
}

/// `POST /v1/responses`: OpenAI Responses through the gateway, translated
/// to the upstream's wire.
#[utoipa::path(post, path = "/v1/responses", tag = "gateway",
    request_body(content = Object, content_type = "application/json",
        description = "An OpenAI Responses request: `input` (a string or items: messages, `function_call`, `function_call_output`, `reasoning`), `instructions`, function `tools`, `previous_response_id` or `conversation` (which name the session the input is appended to), `stream`. Else its session: the `x-session-id` header, `prompt_cache_key`, `user`, a fingerprint."),
    responses(
        (status = 200, description = "A Responses object (`resp_...`, `output`, `usage`), or with `stream` its server-sent events (`response.created` ... `response.completed`)", body = Object),
        (status = 400, description = "A bad request, naming the field and the item's index", body = Object),
        (status = 409, description = "`previous_response_id` is not the newest response of its session", body = Object),
        (status = 502, description = "The upstream failed", body = Object)))]
pub(crate) async fn responses_route(
    State(state): State<Shared>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    relay(state, Wire::Responses, headers, body).await
}

/// One upstream the gateway may send a request to.
#[derive(Clone, Debug)]
pub struct Upstream {
    /// Its name: in request records, and on the content only it can read
    /// (reasoning signatures, encrypted reasoning, compaction items), which
    /// no other upstream is sent.
    pub name: String,
    /// The provider: its wire, base URL, key and default model.
    pub provider: agent_host_provider::Provider,
    /// The models it serves: a name, or a prefix ending in `*` (`gpt-*`).
    pub models: Vec<String>,
    /// Whether a request whose model no upstream lists goes here.
    pub default: bool,
    /// Whether it serves OpenAI Responses itself (`{base_url}/responses`):
    /// a Responses client's request then goes in that wire, untranslated
    /// (`gateway/responses.rs`).
    pub responses: bool,
}

/// The upstreams, and which one a model picks.
pub(crate) struct Upstreams {
    list: Vec<Upstream>,
}

/// The name of the upstream the engine's own provider makes when none is
/// configured.
pub const DEFAULT_UPSTREAM: &str = "default";

impl Upstreams {
    /// The configured upstreams, or the engine's provider as the one.
    pub(crate) fn new(
        engine: &agent_host_engine::Engine,
        configured: &[Upstream],
    ) -> anyhow::Result<Upstreams> {
        if configured.is_empty() {
            let list = engine
                .provider()
                .map(|provider| Upstream {
                    name: DEFAULT_UPSTREAM.to_owned(),
                    provider: provider.clone(),
                    models: Vec::new(),
                    default: true,
                    responses: false,
                })
                .into_iter()
                .collect();
            return Ok(Upstreams { list });
        }
        let mut names = std::collections::HashSet::new();
        for upstream in configured {
            anyhow::ensure!(
                !upstream.name.is_empty(),
                "an upstream has an empty name; give each a name"
            );
            anyhow::ensure!(
                names.insert(upstream.name.as_str()),
                "two upstreams are named {:?}; each needs its own name",
                upstream.name
            );
        }
        let defaults: Vec<&str> = configured
            .iter()
            .filter(|u| u.default)
            .map(|u| u.name.as_str())
            .collect();
        anyhow::ensure!(
            defaults.len() <= 1,
            "upstreams {defaults:?} are each marked default; at most one may be"
        );
        Ok(Upstreams {
            list: configured.to_vec(),
        })
    }

    /// The upstream for `model`: the one listing it by name, else the one
    /// with the longest prefix of it, else the default; with a single
    /// upstream, that one.
    fn pick(&self, model: Option<&str>) -> Result<&Upstream, (StatusCode, String)> {
        match self.list.as_slice() {
            [] => {
                return Err((
                    StatusCode::SERVICE_UNAVAILABLE,
                    "the gateway has no upstream: configure [provider] (kind, base_url, model) or [[upstreams]] in agent-host.toml, or start `agent-host serve` with --provider and --model".to_owned(),
                ));
            }
            [one] => return Ok(one),
            _ => {}
        }
        if let Some(model) = model {
            if let Some(exact) = self
                .list
                .iter()
                .find(|u| u.models.iter().any(|m| m == model))
            {
                return Ok(exact);
            }
            let prefixed = self
                .list
                .iter()
                .filter_map(|u| {
                    let longest = u
                        .models
                        .iter()
                        .filter_map(|m| m.strip_suffix('*'))
                        .filter(|prefix| model.starts_with(prefix))
                        .map(str::len)
                        .max()?;
                    Some((longest, u))
                })
                .max_by_key(|(len, _)| *len);
            if let Some((_, upstream)) = prefixed {
                return Ok(upstream);
            }
        }
        if let Some(default) = self.list.iter().find(|u| u.default) {
            return Ok(default);
        }
        let served: Vec<String> = self
            .list
            .iter()
            .map(|u| format!("{} ({})", u.name, u.models.join(", ")))
            .collect();
        Err((
            StatusCode::BAD_REQUEST,
            match model {
                Some(model) => format!(
                    "no upstream serves the model {model:?}, and none is the default; the upstreams serve: {}",
                    served.join("; ")
                ),
                None => format!(
                    "the request names no `model`, and no upstream is the default; the upstreams serve: {}",
                    served.join("; ")
                ),
            },
        ))
    }

    /// Every model named (not prefixes), the upstreams' default models
    /// first.
    fn models(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for upstream in &self.list {
            let names = std::iter::once(upstream.provider.settings().model.as_str()).chain(
                upstream
                    .models
                    .iter()
                    .map(String::as_str)
                    .filter(|m| !m.ends_with('*')),
            );
            for name in names {
                if !out.iter().any(|o| o == name) {
                    out.push(name.to_owned());
                }
            }
        }
        out
    }
}

/// `GET /v1/models`: the configured models, in the shape of the wire the
/// client speaks (Anthropic's SDKs send `anthropic-version`).
#[utoipa::path(get, path = "/v1/models", tag = "gateway",
    responses((status = 200, description = "The models the upstreams serve: OpenAI's list shape, or Anthropic's with the `anthropic-version` header", body = Object)))]
pub(crate) async fn models(State(state): State<Shared>, headers: HeaderMap) -> Response {
    let models = state.upstreams.models();
    let anthropic = headers.contains_key("anthropic-version");
    let data: Vec<Value> = models
        .iter()
        .map(|id| {
            if anthropic {
                json!({"type": "model", "id": id, "display_name": id,
                       "created_at": "1970-01-01T00:00:00Z"})
            } else {
                json!({"id": id, "object": "model", "created": 0, "owned_by": "agent-host"})
            }
        })
        .collect();
    let body = if anthropic {
        json!({"data": data, "has_more": false, "first_id": models.first(), "last_id": models.last()})
    } else {
        json!({"object": "list", "data": data})
    };
    Json(body).into_response()
}

async fn list_records(
    State(state): State<Shared>,
    Path(session): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let id = crate::routes::resolve(&state, &session, None).await?.id;
    state.records.load(id).await;
    Ok(Json(json!({"requests": state.records.list(id)})))
}

async fn record(
    State(state): State<Shared>,
    Path((session, n)): Path<(String, String)>,
) -> Result<Json<RequestRecord>, ApiError> {
    let id = crate::routes::resolve(&state, &session, None).await?.id;
    let n: u64 = n
        .parse()
        .map_err(|_| ApiError::invalid("n", format!("{n:?} is not a request number")))?;
    state.records.load(id).await;
    state.records.get(id, n).map(Json).ok_or_else(|| {
        ApiError::new(
            ErrorKind::NotFound,
            format!(
                "session {id} has no request {n} (the newest {KEPT_RECORDS} of a session are kept)"
            ),
        )
    })
}

/// A request as the client sent it, read.
struct Asked {
    body: Map<String, Value>,
    messages: Vec<Message>,
    stream: bool,
    model: Option<String>,
    /// A Responses request's own fields.
    responses: Option<responses::Ask>,
}

fn read_request(wire: Wire, bytes: &[u8]) -> Result<Asked, String> {
    let body: Map<String, Value> = match serde_json::from_slice(bytes) {
        Ok(Value::Object(body)) => body,
        Ok(other) => {
            return Err(format!(
                "the body is {}, not a JSON object",
                agent_host_core::format::kind_of(&other)
            ));
        }
        Err(e) => return Err(format!("the body is not JSON: {e}")),
    };
    let stream = match body.get("stream") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err("`stream` must be true or false".to_owned()),
    };
    let model = match body.get("model") {
        None | Some(Value::Null) => None,
        Some(Value::String(m)) => Some(m.clone()),
        Some(_) => return Err("`model` must be a string".to_owned()),
    };
    if wire == Wire::Responses {
        let (messages, ask) = responses::read(&body)?;
        return Ok(Asked {
            body,
            messages,
            stream,
            model,
            responses: Some(ask),
        });
    }
    let messages = match (wire, body.get("messages")) {
        (_, None) => return Err("`messages` is missing".to_owned()),
        (Wire::Responses, Some(_)) => {
            return Err("a Responses request has `input`, not `messages`".to_owned());
        }
        (_, Some(m)) if !m.is_array() => return Err("`messages` must be an array".to_owned()),
        (Wire::ChatCompletions, Some(m)) => openai::from_value(m.clone()),
        (Wire::AnthropicMessages, Some(m)) => {
            let mut request = Map::new();
            if let Some(system) = body.get("system") {
                request.insert("system".into(), system.clone());
            }
            request.insert("messages".into(), m.clone());
            anthropic::from_value(Value::Object(request))
        }
    }
    .map_err(|e| format!("`messages`: {e}"))?;
    if messages.is_empty() {
        return Err("`messages` is empty".to_owned());
    }
    Ok(Asked {
        body,
        messages,
        stream,
        model,
        responses: None,
    })
}

/// What the gateway does with a request that names no session.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Anonymous {
    /// Its session is found by a fingerprint of its leading messages.
    #[default]
    Fingerprint,
    /// It is fitted and processed, and sent on; nothing is stored.
    PassThrough,
}

impl std::str::FromStr for Anonymous {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "fingerprint" => Ok(Anonymous::Fingerprint),
            "pass-through" => Ok(Anonymous::PassThrough),
            other => Err(format!(
                "unknown choice {other:?}; expected `fingerprint` or `pass-through`"
            )),
        }
    }
}

/// The session key a request names, and how it was found; `None` when it
/// names none and `anonymous` says to pass it through.
fn identify(
    wire: Wire,
    headers: &HeaderMap,
    asked: &Asked,
    anonymous: Anonymous,
) -> Result<Option<(String, &'static str)>, String> {
    let header = ["x-session-id", "x-agent-host-session"]
        .iter()
        .find_map(|name| headers.get(*name))
        .map(|v| {
            v.to_str()
                .map(str::to_owned)
                .map_err(|_| "the x-session-id header is not visible ASCII".to_owned())
        })
        .transpose()?;
    let field = |path: &[&str]| -> Option<String> {
        let mut at = asked.body.get(path[0])?;
        for key in &path[1..] {
            at = at.get(key)?;
        }
        at.as_str().filter(|s| !s.is_empty()).map(str::to_owned)
    };
    let (key, source) = if let Some(key) = header.filter(|k| !k.is_empty()) {
        (key, "header")
    } else if let Some(key) = field(&["prompt_cache_key"]) {
        (key, "prompt_cache_key")
    } else if let Some(key) = match wire {
        Wire::ChatCompletions | Wire::Responses => field(&["user"]),
        Wire::AnthropicMessages => field(&["metadata", "user_id"]),
    } {
        (key, "user")
    } else if let Some(session) = asked
        .responses
        .as_ref()
        .and_then(|a| a.previous.as_deref())
        .and_then(responses::session_of)
    {
        (session.to_string(), "previous_response_id")
    } else if let Some(conversation) = asked
        .responses
        .as_ref()
        .and_then(|a| a.conversation.clone())
    {
        (conversation, "conversation")
    } else if anonymous == Anonymous::Fingerprint {
        let leading = asked.responses.as_ref().and_then(|a| a.leading.clone());
        let key = match leading {
            // A Responses client's instructions are its system prompt.
            Some(leading) => {
                let mut messages = Vec::with_capacity(2);
                messages.push(leading);
                messages.extend(
                    asked
                        .messages
                        .iter()
                        .take_while(|m| m.role != Role::User)
                        .cloned(),
                );
                messages.extend(
                    asked
                        .messages
                        .iter()
                        .find(|m| m.role == Role::User)
                        .cloned(),
                );
                leading_fingerprint(&messages)
            }
            None => leading_fingerprint(&asked.messages),
        };
        (key, "fingerprint")
    } else {
        return Ok(None);
    };
    if key.len() > MAX_SESSION_NAME {
        return Err(format!(
            "the session name ({source}) is {} bytes long; at most {MAX_SESSION_NAME} are accepted",
            key.len()
        ));
    }
    Ok(Some((key, source)))
}

/// `fp-` and the fingerprint of the system prompt and the first user
/// message: what stays the same as a conversation grows.
fn leading_fingerprint(messages: &[Message]) -> String {
    let first_user = messages
        .iter()
        .position(|m| m.role == Role::User)
        .map_or(messages.len().min(1), |i| i + 1);
    format!("fp-{:016x}", fingerprint(&messages[..first_user]))
}

/// The branch a client whose history parts from `key`'s at message `at`
/// goes to: the same for every request of that client, as it shares the
/// history up to there.
fn branch_key(key: &str, messages: &[Message], at: usize) -> String {
    let upto = (at + 1).min(messages.len());
    let mark = if at >= messages.len() { "r" } else { "" };
    format!(
        "{key}~{mark}{:012x}",
        fingerprint(&messages[..upto]) & 0xffff_ffff_ffff
    )
}

/// One request, whole.
async fn relay(state: Shared, wire: Wire, headers: HeaderMap, bytes: Bytes) -> Response {
    let asked = match read_request(wire, &bytes) {
        Ok(asked) => asked,
        Err(e) => return wire.error(StatusCode::BAD_REQUEST, "invalid_request_error", &e),
    };
    let upstream = match state.upstreams.pick(asked.model.as_deref()) {
        Ok(upstream) => upstream.clone(),
        Err((status, e)) => {
            let kind = if status == StatusCode::BAD_REQUEST {
                "invalid_request_error"
            } else {
                "api_error"
            };
            return wire.error(status, kind, &e);
        }
    };
    let settings = upstream.provider.settings();
    if wire.provider().is_some_and(|own| own != settings.kind)
        && let Err(e) = crossed::check(wire, settings, &asked.body)
    {
        return wire.error(StatusCode::BAD_REQUEST, "invalid_request_error", &e);
    }
    if wire == Wire::Responses
        && !upstream.responses
        && let Err(e) = responses::check_translatable(&asked.body)
    {
        return wire.error(StatusCode::BAD_REQUEST, "invalid_request_error", &e);
    }
    let mut asked = asked;
    // What only this upstream can read is marked as its own, so it never
    // reaches another (see `without_foreign`).
    for m in &mut asked.messages {
        if responses::is_opaque(m) && !m.metadata.contains_key(ORIGIN_KEY) {
            m.metadata
                .insert(ORIGIN_KEY.into(), json!({ "upstream": upstream.name }));
        }
    }
    let identity = match identify(wire, &headers, &asked, state.config.anonymous) {
        Ok(found) => found,
        Err(e) => return wire.error(StatusCode::BAD_REQUEST, "invalid_request_error", &e),
    };
    // The processors run for the model the upstream is sent.
    let model = asked
        .model
        .clone()
        .unwrap_or_else(|| upstream.provider.settings().model.clone());
    let selected = match state
        .chains
        .select(&state.engine, &headers, wire, &model)
        .await
    {
        Ok(selected) => selected,
        Err((status, e)) => {
            let kind = if status == StatusCode::BAD_REQUEST {
                "invalid_request_error"
            } else {
                "api_error"
            };
            return wire.error(status, kind, &e);
        }
    };
    // A Responses request with `store: false` keeps nothing: one that
    // continues a stored response reads its session, any other is passed
    // through; its answer's id names no session, so it cannot be continued.
    let unstored = wire == Wire::Responses && asked.body.get("store") == Some(&Value::Bool(false));
    let outgoing = match identity {
        Some((key, by)) if unstored && matches!(by, "previous_response_id" | "conversation") => {
            continue_unstored(&state, wire, &headers, (asked, selected), &upstream, key).await
        }
        Some(_) if unstored => {
            pass_through(&state, wire, &headers, (asked, selected), &upstream).await
        }
        Some((key, identified_by)) => {
            let asked = (asked, selected);
            prepare(&state, wire, &headers, asked, &upstream, key, identified_by).await
        }
        None => pass_through(&state, wire, &headers, (asked, selected), &upstream).await,
    };
    match outgoing {
        Ok(outgoing) => send(state, upstream.provider, outgoing).await,
        Err(e) => wire.api_error(&e),
    }
}

/// The metadata key under which the gateway notes, on a message with
/// content only its provider can read, which upstream that is
/// (`{"upstream": NAME}`); the stored answers carry their response id
/// there too.
pub const ORIGIN_KEY: &str = "gateway";

/// `view` without what only another upstream than `upstream` can read
/// (reasoning signatures, encrypted reasoning, compaction items), and a
/// note for each message it was taken from.
fn without_foreign(view: Vec<Message>, upstream: &str) -> (Vec<Message>, Vec<String>) {
    let mut notes = Vec::new();
    let mut out = Vec::with_capacity(view.len());
    for m in view {
        let origin = m
            .metadata
            .get(ORIGIN_KEY)
            .and_then(|g| g.get("upstream"))
            .and_then(Value::as_str);
        let foreign = origin.is_some_and(|o| o != upstream);
        if !foreign || !responses::is_opaque(&m) {
            out.push(m);
            continue;
        }
        let origin = origin.unwrap_or_default().to_owned();
        let id = m.id.clone();
        match responses::without_opaque(m) {
            Some(kept) => {
                notes.push(format!(
                    "message {id}: its reasoning signature or encrypted content was made by the upstream {origin:?} and was not sent to {upstream:?}"
                ));
                out.push(kept);
            }
            None => notes.push(format!(
                "message {id}: a compaction item made by the upstream {origin:?} was not sent to {upstream:?}"
            )),
        }
    }
    (out, notes)
}

/// A request that names no session, with `--anonymous pass-through`: the
/// pipeline (without summaries, which would have nowhere to be kept) and
/// the processors run on its messages; nothing is stored.
async fn pass_through(
    state: &Shared,
    wire: Wire,
    headers: &HeaderMap,
    (asked, selected): (Asked, chains::Selected),
    upstream: &Upstream,
) -> Result<Outgoing, ApiError> {
    let mut messages = asked.messages.clone();
    if let Some(leading) = asked.responses.as_ref().and_then(|a| a.leading.clone()) {
        messages.insert(0, leading);
    }
    let prepared = state
        .engine
        .prepare_detached(
            messages,
            selected.chain.clone(),
            Arc::new(agent_host_engine::Quiet),
        )
        .await?;
    outgoing(
        state,
        wire,
        headers,
        (asked, selected.name, selected.note.into_iter().collect()),
        upstream,
        prepared,
        None,
    )
}

/// A conflict unless `previous` is the newest response of `session` (its
/// records read): continuing from an older one would silently carry the
/// newer turns along.
fn newest_or_conflict(state: &Shared, session: Uuid, previous: &str) -> Result<(), ApiError> {
    let newest = state
        .latest
        .get(session)
        .or_else(|| state.records.newest_response(session));
    match newest {
        Some(newest) if newest != previous => Err(ApiError::new(
            ErrorKind::Conflict,
            format!(
                "`previous_response_id` {previous} is not the newest response of its session ({newest} is); continuing from an older response is not supported: continue from the newest, or send the whole history without previous_response_id"
            ),
        )),
        _ => Ok(()),
    }
}

/// A Responses request with `store: false` that continues a stored
/// response (`previous_response_id`) or conversation (`key`): the view of
/// that session with the request's input after it; nothing is stored.
async fn continue_unstored(
    state: &Shared,
    wire: Wire,
    headers: &HeaderMap,
    (asked, selected): (Asked, chains::Selected),
    upstream: &Upstream,
    key: String,
) -> Result<Outgoing, ApiError> {
    let ask = asked.responses.clone().unwrap_or_default();
    let session = match &ask.previous {
        Some(previous) => {
            let id = responses::session_of(previous).ok_or_else(|| {
                ApiError::invalid(
                    "previous_response_id",
                    format!("no session holds the response {previous:?}"),
                )
            })?;
            state.records.load(id).await;
            newest_or_conflict(state, id, previous)?;
            SessionRef::Id(id)
        }
        None => SessionRef::Key {
            agent: state.engine.config().agent.clone(),
            key,
        },
    };
    let prepared = state
        .engine
        .prepare_continuing(
            session,
            ask.leading.clone(),
            asked.messages.clone(),
            selected.chain.clone(),
            Arc::new(agent_host_engine::Quiet),
        )
        .await
        .map_err(|e| match e.kind() {
            ErrorKind::NotFound => ApiError::invalid(
                "previous_response_id",
                format!("the request continues a session that does not exist: {e}"),
            ),
            _ => ApiError::from(e),
        })?;
    outgoing(
        state,
        wire,
        headers,
        (asked, selected.name, selected.note.into_iter().collect()),
        upstream,
        prepared,
        None,
    )
}

/// The session locks a request holds until its answer is stored or
/// dropped: one request of a session at a time, here and (with a shared
/// store) elsewhere.
type Locks = (
    tokio::sync::OwnedMutexGuard<()>,
    Option<agent_host_store::TurnLock>,
);

/// A request ready to go upstream.
pub(crate) struct Outgoing {
    wire: Wire,
    /// The session; `None` for a request passed through without one.
    session: Option<Uuid>,
    n: u64,
    body: Bytes,
    stream: bool,
    forwarded: Vec<(String, String)>,
    headers: Vec<(HeaderName, HeaderValue)>,
    /// The client's new messages, stored with the answer.
    pending: Vec<Message>,
    /// The upstream's name.
    upstream: String,
    /// For a Responses client: what its response object says before the
    /// answer (its id among it).
    response: Option<responses::Skeleton>,
    /// For a Chat Completions or Messages client in front of the other
    /// wire: what its answer says besides the upstream's.
    crossed: Option<crossed::Crossed>,
    /// A Responses client's request sent to an upstream that serves
    /// Responses itself: the answer goes back in that wire, its response
    /// object made this gateway's ([`responses::Adopter`]).
    native: bool,
    /// When the model is offered the memory tools: the rounds of calls the
    /// gateway runs before the answer the client gets.
    memory: Option<memory::Rounds>,
    /// The server, until [`persist`] takes over the record (see the `Drop`
    /// below).
    unfinished: Option<Shared>,
    _locks: Option<Locks>,
}

impl Drop for Outgoing {
    /// Dropped before its exchange ended: the client hung up while the
    /// upstream, or a round of memory calls, was still answering, and took
    /// the request's future with it. As for a stream it left: the client's
    /// new messages are stored, nothing of an answer, and the record says
    /// why rather than staying in progress; the session's locks go once
    /// that is written.
    fn drop(&mut self) {
        let Some(state) = self.unfinished.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let left = Outgoing {
            wire: self.wire,
            session: self.session,
            n: self.n,
            body: Bytes::new(),
            stream: self.stream,
            forwarded: Vec::new(),
            headers: Vec::new(),
            pending: std::mem::take(&mut self.pending),
            upstream: std::mem::take(&mut self.upstream),
            response: self.response.take(),
            crossed: None,
            native: self.native,
            memory: self.memory.take(),
            unfinished: None,
            _locks: self._locks.take(),
        };
        let ended = Ended::Failed {
            status: None,
            outcome: "client_disconnected",
            error: "the client hung up before the answer arrived; nothing of it was stored"
                .to_owned(),
        };
        runtime.spawn(persist(&state, left, ended));
    }
}

impl Outgoing {
    /// For a translated client: what turns the upstream's streamed events
    /// into its wire's.
    fn translator(&self) -> Option<Translator> {
        match (&self.response, &self.crossed) {
            (Some(skeleton), _) if self.native => {
                Some(Translator::Adopt(responses::Adopter::new(skeleton.clone())))
            }
            (Some(skeleton), _) => Some(Translator::Responses(responses::Streamer::new(
                skeleton.clone(),
            ))),
            (None, Some(crossed)) => {
                Some(Translator::Crossed(crossed::Streamer::new(crossed.clone())))
            }
            (None, None) => None,
        }
    }

    /// The request to relay upstream.
    fn relay(&self) -> Relay {
        Relay {
            body: self.body.clone(),
            stream: self.stream,
            headers: self.forwarded.clone(),
            responses: self.native,
        }
    }
}

/// How a request's upstream body is written from a view.
#[derive(Clone)]
pub(crate) struct BodySpec {
    wire: Wire,
    settings: agent_host_provider::ProviderSettings,
    /// A Responses client's request, translated.
    responses: bool,
    /// A Responses client's request, to an upstream that serves Responses.
    native: bool,
    /// A Chat Completions or Messages client's, translated to the other wire.
    crossed: bool,
    stream: bool,
    /// The client named no model: the upstream's goes in.
    model_missing: bool,
}

/// The upstream's request: the client's `body` (its fields, less its
/// messages) with `view` as its messages, in the upstream's wire, and the
/// memory tools when `memory` offers them.
fn upstream_body(
    spec: &BodySpec,
    mut body: Map<String, Value>,
    view: &[Message],
    memory: Option<memory::Offer>,
) -> Result<Bytes, ApiError> {
    let settings = &spec.settings;
    let mut body = if spec.native {
        responses::native_body(&body, view).map_err(|e| ApiError::new(ErrorKind::Internal, e))?
    } else if spec.responses {
        responses::upstream_body(settings, &body, view, spec.stream)
            .map_err(|e| ApiError::new(ErrorKind::Internal, e))?
    } else if spec.crossed {
        crossed::upstream_body(spec.wire, settings, &body, view, spec.stream)
            .map_err(|e| ApiError::invalid("body", e))?
    } else {
        write_view(spec.wire, &mut body, view)?;
        body
    };
    if spec.model_missing {
        body.insert("model".into(), json!(settings.model));
    }
    if spec.stream && spec.wire == Wire::ChatCompletions && !spec.crossed && !spec.native {
        // The usage comes only when asked for; it is stored with the answer.
        let options = body.entry("stream_options").or_insert_with(|| json!({}));
        if let Some(options) = options.as_object_mut() {
            options.insert("include_usage".into(), json!(true));
        }
    }
    if let Some(offer) = memory {
        memory::add_tools(&mut body, settings.kind, offer);
    }
    serde_json::to_vec(&Value::Object(body))
        .map(Bytes::from)
        .map_err(|e| {
            ApiError::new(
                ErrorKind::Internal,
                format!("cannot write the request: {e}"),
            )
        })
}

/// What a request stored in a session holds.
struct Held {
    meta: agent_host_store::SessionMeta,
    appended: Vec<Message>,
    pending: bool,
    known: usize,
    key: String,
    identified_by: &'static str,
    branched_from: Option<String>,
    locks: Locks,
}

async fn prepare(
    state: &Shared,
    wire: Wire,
    headers: &HeaderMap,
    (asked, selected): (Asked, chains::Selected),
    upstream: &Upstream,
    key: String,
    identified_by: &'static str,
) -> Result<Outgoing, ApiError> {
    let agent = state.engine.config().agent.clone();
    let previous = asked.responses.as_ref().and_then(|a| a.previous.clone());
    let mut key = key;
    if identified_by == "previous_response_id" {
        // The response's session, by the id its response id holds.
        let unknown = || {
            ApiError::invalid(
                "previous_response_id",
                format!(
                    "no session holds the response {:?} (was it deleted?)",
                    previous.as_deref().unwrap_or_default()
                ),
            )
        };
        let id = Uuid::try_parse(&key).map_err(|_| unknown())?;
        let meta = crate::routes::blocking(state, move |store| store.get(&SessionRef::Id(id)))
            .await?
            .ok_or_else(unknown)?;
        key = meta.key.ok_or_else(|| {
            ApiError::invalid(
                "previous_response_id",
                format!("the session {id} of that response has no key, so the gateway cannot continue it"),
            )
        })?;
    }
    let mut branched_from = None;
    let (mut selected, mut sticky) = (selected, false);
    let model = asked
        .model
        .clone()
        .unwrap_or_else(|| upstream.provider.settings().model.clone());
    for _ in 0..=MAX_BRANCHES {
        let new = NewSession::new(agent.clone())
            .with_key(key.clone())
            .with_channel(CHANNEL);
        new.validate()
            .map_err(|e| ApiError::invalid("session", e.to_string()))?;
        let (meta, created) = crate::routes::blocking(state, move |store| {
            store.get_or_create(&new).map(|o| (o.meta, o.created))
        })
        .await?;
        let view = if created {
            observe::created(state, &meta, Some(CHANNEL.to_owned()))
        } else {
            match state.index.get(meta.id) {
                Some(view) => view,
                None => observe::recorded(state, &meta, Change::Created),
            }
        };
        // Its records are read before the next is numbered.
        state.records.load(meta.id).await;
        if !sticky {
            // The chain the session ran last, unless the request names one
            // (a branch keeps the chain of the session it parted from).
            sticky = true;
            let last = state.records.newest_chain(meta.id);
            selected = state
                .chains
                .for_session(&state.engine, selected, last, wire, &model)
                .await
                .map_err(|(status, e)| {
                    let kind = if status == StatusCode::BAD_REQUEST {
                        ErrorKind::InvalidInput
                    } else {
                        ErrorKind::Internal
                    };
                    ApiError::new(kind, e)
                })?;
        }
        let hot = state.hot.get(meta.id);
        let turn = Arc::clone(&hot.turn).lock_owned().await;
        let shared = crate::routes::shared_turn(state, meta.id).await?;
        if let Some(change) = state.index.touch(meta.id, Utc::now()) {
            observe::state_changed(state, &change);
        }
        if let Some(previous) = &previous {
            newest_or_conflict(state, meta.id, previous)?;
        }
        let observer = observe::observer(state, &view, Some(CHANNEL.to_owned()), None);
        // A model's summary goes to this request's upstream and model, over
        // the session's last request (`gateway/summary.rs`).
        let config = state.engine.config();
        let cached = (config.summarizer == SummarizerChoice::Llm).then(|| {
            Arc::new(summary::CachedSummarizer::new(
                upstream.provider.with_model(&model),
                &upstream.name,
                hot.last_prompt(),
                (
                    config.pipeline.budget.context_limit,
                    config.pipeline.summary.clone().unwrap_or_default(),
                ),
                config.extractive_fallback,
            ))
        });
        let options = ExchangeOptions {
            chain: selected.chain.clone(),
            trace: state.config.request_stages,
            summarizer: cached
                .clone()
                .map(|c| c as Arc<dyn agent_host_engine::ExchangeSummarizer>),
        };
        let exchange = match asked.responses.as_ref() {
            Some(ask) if ask.appends() => {
                state
                    .engine
                    .exchange_appending(
                        SessionRef::Id(meta.id),
                        ask.leading.clone(),
                        asked.messages.clone(),
                        CHANNEL,
                        options,
                        observer,
                    )
                    .await?
            }
            ask => {
                let mut messages = asked.messages.clone();
                if let Some(leading) = ask.and_then(|a| a.leading.clone()) {
                    messages.insert(0, leading);
                }
                state
                    .engine
                    .exchange(
                        SessionRef::Id(meta.id),
                        messages,
                        CHANNEL,
                        options,
                        observer,
                    )
                    .await?
            }
        };
        let ready = match exchange {
            Exchange::Ready(ready) => ready,
            Exchange::Diverged { at } => {
                drop((turn, shared));
                branched_from.get_or_insert_with(|| key.clone());
                key = branch_key(&key, &asked.messages, at);
                continue;
            }
        };
        if !ready.pending && !ready.appended.is_empty() {
            observe::saved(
                state,
                &ready.meta,
                ready.appended.clone(),
                Some(CHANNEL.to_owned()),
            );
        }
        let Ready {
            meta,
            appended,
            pending,
            known,
            prepared,
        } = *ready;
        let mut notes: Vec<String> = selected.note.into_iter().collect();
        notes.extend(cached.map(|c| c.outcome()).and_then(|outcome| match outcome {
            summary::Reuse::Unasked => None,
            summary::Reuse::Reused(n) => Some(format!(
                "the summary request reused the last request to {} ({n} messages) and asked after it, so the provider's prompt cache serves its prefix",
                upstream.name
            )),
            summary::Reuse::Classic(why) => Some(format!(
                "the summary request went to {} ({model}) as a request of its own, sharing no prefix with the conversation: {why}",
                upstream.name
            )),
        }));
        let held = Held {
            meta,
            appended,
            pending,
            known,
            key,
            identified_by,
            branched_from,
            locks: (turn, shared),
        };
        return outgoing(
            state,
            wire,
            headers,
            (asked, selected.name, notes),
            upstream,
            prepared,
            Some(held),
        );
    }
    Err(ApiError::new(
        ErrorKind::InvalidInput,
        format!(
            "the request's history parted from the stored one {MAX_BRANCHES} times over; give it its own session (x-session-id)"
        ),
    ))
}

fn outgoing(
    state: &Shared,
    wire: Wire,
    headers: &HeaderMap,
    (asked, chain, more_notes): (Asked, String, Vec<String>),
    upstream: &Upstream,
    mut prepared: Prepared,
    held: Option<Held>,
) -> Result<Outgoing, ApiError> {
    let (view, mut notes) = without_foreign(std::mem::take(&mut prepared.view), &upstream.name);
    notes.extend(more_notes);
    prepared.view = view;
    let settings = upstream.provider.settings();
    // A Chat Completions or Messages client in front of the other wire.
    let crossed = wire
        .provider()
        .is_some_and(|own| own != settings.kind)
        .then(|| {
            let model = asked
                .model
                .clone()
                .unwrap_or_else(|| settings.model.clone());
            crossed::Crossed::new(wire, model, &asked.body)
        });
    let native = asked.responses.is_some() && upstream.responses;
    let spec = BodySpec {
        wire,
        settings: settings.clone(),
        responses: asked.responses.is_some(),
        native,
        crossed: crossed.is_some(),
        stream: asked.stream,
        model_missing: asked.model.is_none(),
    };
    // The model is offered the memory tools when the server's memory says
    // so, for a request stored in a session, whose client has no tool of
    // the same name; the gateway then runs its calls (`gateway/memory.rs`).
    let mut memory = match (&held, state.engine.config().memory.as_ref()) {
        (Some(_), Some(config)) if config.tools && native => {
            notes.push(
                "the memory tools are not offered to an upstream answering OpenAI Responses in its own wire"
                    .to_owned(),
            );
            None
        }
        (Some(held), Some(config)) if config.tools => {
            let site = (held.meta.id, held.meta.agent.as_str());
            match memory::Rounds::offer(config, &spec, &asked.body, site) {
                Ok(rounds) => Some(rounds),
                Err(note) => {
                    notes.push(note);
                    None
                }
            }
        }
        _ => None,
    };
    let body = upstream_body(
        &spec,
        asked.body,
        &prepared.view,
        memory.as_ref().map(|_| memory::Offer::Tools),
    )?;
    if let Some(held) = &held
        && state.engine.config().summarizer == SummarizerChoice::Llm
    {
        // What the session's next summary reuses (`gateway/summary.rs`).
        state
            .hot
            .get(held.meta.id)
            .set_last_prompt(summary::SentPrompt {
                upstream: upstream.name.clone(),
                model: asked
                    .model
                    .clone()
                    .unwrap_or_else(|| settings.model.clone()),
                body: body.clone(),
                sent: prepared.view.iter().map(|m| m.id.clone()).collect(),
                tokens: prepared.compaction.report.usage.view.total(),
            });
    }
    let response = asked.responses.as_ref().map(|ask| {
        let model = asked
            .model
            .clone()
            .unwrap_or_else(|| settings.model.clone());
        let id = responses::new_id(held.as_ref().map(|h| h.meta.id));
        responses::Skeleton::new(ask, model, id)
    });
    let Prepared {
        view,
        compaction,
        processors,
        stages,
        ..
    } = prepared;
    let usage = &compaction.report.usage;
    let tokens_before = usage.tokens_since_summary;
    let tokens_after = u64::from(usage.view.total());
    let pipeline = PipelineReport::from(&compaction);
    let summary = match &compaction.report.summary {
        agent_host_core::pipeline::SummaryOutcome::Summarized { .. } => "created",
        agent_host_core::pipeline::SummaryOutcome::Failed { .. } => "failed",
        _ => "none",
    };
    let processor_line = processors
        .iter()
        .map(|r| {
            let outcome = serde_json::to_value(r.outcome).unwrap_or_default();
            format!("{}={}", r.name, outcome.as_str().unwrap_or("unknown"))
        })
        .collect::<Vec<_>>()
        .join(",");
    let mut out_headers = vec![
        ("x-agent-host-tokens-before", tokens_before.to_string()),
        ("x-agent-host-tokens-after", tokens_after.to_string()),
        ("x-agent-host-summary", summary.to_owned()),
        ("x-agent-host-processors", processor_line),
        ("x-agent-host-chain", chain.clone()),
        ("x-agent-host-upstream", upstream.name.clone()),
    ];
    let (session, n, pending, locks) = match held {
        None => {
            out_headers.push(("x-agent-host-session-source", "none".to_owned()));
            (None, 0, Vec::new(), None)
        }
        Some(held) => {
            let record = RequestRecord {
                n: 0,
                at: Utc::now(),
                wire,
                model: asked.model,
                stream: asked.stream,
                identified_by: held.identified_by.to_owned(),
                key: held.key.clone(),
                branched_from: held.branched_from.clone(),
                client_messages: held.known
                    + held
                        .appended
                        .iter()
                        .filter(|m| !agent_host_core::reconcile::unseen_by_client(m))
                        .count(),
                known: held.known,
                appended: held.appended.iter().map(|m| m.id.clone()).collect(),
                tokens_before,
                tokens_after,
                sent: view.iter().map(|m| m.id.clone()).collect(),
                pipeline,
                processors,
                stages,
                stages_forgotten: false,
                upstream_status: None,
                usage: None,
                reply: None,
                outcome: "in_progress".to_owned(),
                error: None,
                upstream: Some(upstream.name.clone()),
                notes,
                chain: Some(chain),
                response: None,
                memory_calls: Vec::new(),
            };
            let n = state.records.add(held.meta.id, record);
            out_headers.extend([
                ("x-agent-host-session", held.meta.id.to_string()),
                ("x-agent-host-session-key", held.key),
                ("x-agent-host-session-source", held.identified_by.to_owned()),
                ("x-agent-host-request", n.to_string()),
            ]);
            if let Some(from) = held.branched_from {
                out_headers.push(("x-agent-host-branched-from", from));
            }
            let pending = if held.pending {
                held.appended
            } else {
                Vec::new()
            };
            (Some(held.meta.id), n, pending, Some(held.locks))
        }
    };
    if let Some(rounds) = memory.as_mut() {
        rounds.sent(view);
    }
    let forwarded = FORWARDED_HEADERS
        .iter()
        .filter(|_| crossed.is_none())
        .filter_map(|name| {
            let value = headers.get(*name)?.to_str().ok()?;
            Some(((*name).to_owned(), value.to_owned()))
        })
        .collect();
    Ok(Outgoing {
        wire,
        session,
        n,
        body,
        stream: asked.stream,
        forwarded,
        pending,
        upstream: upstream.name.clone(),
        response,
        crossed,
        native,
        memory,
        unfinished: Some(state.clone()),
        headers: out_headers
            .into_iter()
            .filter_map(|(name, value)| {
                // A key a client chose may hold what a header cannot.
                Some((
                    HeaderName::from_static(name),
                    HeaderValue::from_str(&value).ok()?,
                ))
            })
            .collect(),
        _locks: locks,
    })
}

/// Puts `view` into the request body in the wire's shape.
fn write_view(wire: Wire, body: &mut Map<String, Value>, view: &[Message]) -> Result<(), ApiError> {
    let written = |e: agent_host_core::format::FormatError| {
        ApiError::new(ErrorKind::Internal, format!("cannot write the view: {e}"))
    };
    match wire {
        Wire::ChatCompletions => {
            let messages = agent_host_provider::chat_request_messages(view).map_err(|e| {
                ApiError::new(ErrorKind::Internal, format!("cannot write the view: {e}"))
            })?;
            body.insert("messages".into(), Value::Array(messages));
        }
        Wire::Responses => {
            return Err(ApiError::new(
                ErrorKind::Internal,
                "a Responses request is translated, not written in place",
            ));
        }
        Wire::AnthropicMessages => {
            let Value::Object(mut request) = anthropic::to_request(view).map_err(written)? else {
                return Err(ApiError::new(
                    ErrorKind::Internal,
                    "core's Anthropic writer did not give an object",
                ));
            };
            body.remove("system");
            if let Some(system) = request.remove("system") {
                body.insert("system".into(), system);
            }
            if let Some(messages) = request.remove("messages") {
                body.insert("messages".into(), messages);
            }
            place_cache_breakpoints(body);
        }
    }
    Ok(())
}

/// The most `cache_control` breakpoints Anthropic takes in one request.
const MAX_BREAKPOINTS: usize = 4;

/// Marks where Anthropic may cache the prompt up to: the system prompt's
/// last block, the last message, and the user turn before it (so the
/// next request, one turn longer, reads what this one wrote), within the
/// four a request may hold with the client's own on its tools. The view is
/// written anew, so breakpoints a client put on its messages are replaced
/// by these.
fn place_cache_breakpoints(body: &mut Map<String, Value>) {
    let on_tools = body
        .get("tools")
        .and_then(Value::as_array)
        .map_or(0, |tools| {
            tools
                .iter()
                .filter(|t| t.get("cache_control").is_some())
                .count()
        });
    let mut room = MAX_BREAKPOINTS.saturating_sub(on_tools);
    if room > 0
        && let Some(system) = body.get_mut("system")
        && mark_last_block(system)
    {
        room -= 1;
    }
    let Some(Value::Array(messages)) = body.get_mut("messages") else {
        return;
    };
    let last = messages.len().checked_sub(1);
    let earlier_user = last.and_then(|last| {
        messages[..last]
            .iter()
            .rposition(|m| m.get("role").and_then(Value::as_str) == Some("user"))
    });
    for at in [last, earlier_user].into_iter().flatten() {
        if room == 0 {
            break;
        }
        if let Some(content) = messages[at].get_mut("content")
            && mark_last_block(content)
        {
            room -= 1;
        }
    }
}

/// Puts a breakpoint on the last block of `content` that may hold one (a
/// string becomes one text block); false when none may.
fn mark_last_block(content: &mut Value) -> bool {
    if let Value::String(text) = content {
        if text.is_empty() {
            return false;
        }
        *content = json!([{"type": "text", "text": std::mem::take(text)}]);
    }
    let Value::Array(blocks) = content else {
        return false;
    };
    let markable = blocks.iter_mut().rev().find(|b| {
        let kind = b.get("type").and_then(Value::as_str);
        let empty_text = kind == Some("text") && b.get("text").and_then(Value::as_str) == Some("");
        let thinking = matches!(kind, Some("thinking" | "redacted_thinking"));
        !thinking && !empty_text
    });
    match markable.and_then(Value::as_object_mut) {
        Some(block) => {
            block.insert("cache_control".into(), json!({"type": "ephemeral"}));
            true
        }
        None => false,
    }
}

/// How an exchange ended, for [`persist`].
enum Ended {
    /// An answer arrived whole.
    Answer(Box<agent_host_provider::ChatReply>),
    /// No answer to store.
    Failed {
        status: Option<u16>,
        outcome: &'static str,
        error: String,
    },
}

/// Sends the request upstream (with the memory rounds, when the model is
/// offered the memory tools) and answers the client.
async fn send(
    state: Shared,
    provider: agent_host_provider::Provider,
    mut out: Outgoing,
) -> Response {
    let wire = out.wire;
    let mut headers = out.headers.clone();
    let answered = memory::run(&provider, &mut out).await;
    if let Some(rounds) = &out.memory
        && !rounds.calls.is_empty()
    {
        headers.push((
            HeaderName::from_static("x-agent-host-memory-calls"),
            HeaderValue::from(rounds.calls.len()),
        ));
    }
    let relayed = match answered {
        Ok(memory::Answered::Relayed(relayed)) => relayed,
        Ok(memory::Answered::Read(read)) => return send_read(state, out, read, &headers),
        Err(e) => {
            let message = e.to_string();
            let status = match e {
                ProviderError::Timeout { .. } => StatusCode::GATEWAY_TIMEOUT,
                _ => StatusCode::BAD_GATEWAY,
            };
            let ended = Ended::Failed {
                status: None,
                outcome: "upstream_error",
                error: message.clone(),
            };
            persist(&state, out, ended).await;
            return with_headers(wire.error(status, "api_error", &message), &headers);
        }
    };
    match relayed {
        Relayed::Refused {
            status,
            content_type,
            body,
        } => {
            let ended = Ended::Failed {
                status: Some(status),
                outcome: "upstream_error",
                error: String::from_utf8_lossy(&body).into_owned(),
            };
            let translated = out.response.is_some() && !out.native;
            let crossed = out.crossed.is_some();
            persist(&state, out, ended).await;
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
            if translated {
                let body = responses::error_body(&body);
                return with_headers((status, Json(body)).into_response(), &headers);
            }
            if crossed {
                let body = crossed::error_body(wire, &body);
                return with_headers((status, Json(body)).into_response(), &headers);
            }
            let mut response = Response::new(Body::from(body));
            *response.status_mut() = status;
            if let Some(value) = content_type.and_then(|c| HeaderValue::from_str(&c).ok()) {
                response.headers_mut().insert(header::CONTENT_TYPE, value);
            }
            with_headers(response, &headers)
        }
        Relayed::Whole { body, reply } => {
            // A Responses upstream's own whole answer goes back as it came,
            // its response object made this gateway's.
            let native = out.native && (!out.stream || reply.is_err());
            let body = match &out.response {
                Some(skeleton) if native => responses::adopted(skeleton, &body),
                _ => body,
            };
            if !native && let Some(skeleton) = out.response.clone() {
                let translation = Translation::Responses(skeleton);
                return translate_whole(state, out, translation, body, reply, headers).await;
            }
            if let Some(crossed) = out.crossed.clone() {
                let translation = Translation::Crossed(crossed);
                return translate_whole(state, out, translation, body, reply, headers).await;
            }
            let ended = match reply {
                Ok(reply) => Ended::Answer(Box::new(reply)),
                Err(e) => Ended::Failed {
                    status: Some(200),
                    outcome: "unreadable_answer",
                    error: e.to_string(),
                },
            };
            // The client has its answer before it is stored: the session
            // stays locked until it is, so the client's next request finds
            // it; and a client that resends its history after a crash in
            // between brings it back.
            tokio::spawn(persist(&state, out, ended));
            let mut response = Response::new(Body::from(body));
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            with_headers(response, &headers)
        }
        Relayed::Stream(upstream) => {
            let translate = out.translator();
            let pieces = futures_util::stream::unfold(
                Pipe {
                    state,
                    out: Some(out),
                    upstream: Some(upstream),
                    translate,
                },
                |mut pipe| async move {
                    loop {
                        let upstream = pipe.upstream.as_mut()?;
                        match upstream.next().await {
                            Some(Ok(bytes)) => {
                                let Some(translate) = pipe.translate.as_mut() else {
                                    return Some((Ok::<_, std::io::Error>(bytes), pipe));
                                };
                                let events = upstream.take_events();
                                let out = translate.feed(&bytes, events);
                                if !out.is_empty() {
                                    return Some((Ok(out), pipe));
                                }
                            }
                            Some(Err(e)) => {
                                let error = e.to_string();
                                let ended = Ended::Failed {
                                    status: Some(200),
                                    outcome: "upstream_error",
                                    error: error.clone(),
                                };
                                pipe.end(ended).await;
                                return match pipe.translate.as_mut() {
                                    Some(translate) => Some((Ok(translate.fail(&error)), pipe)),
                                    None => Some((Err(std::io::Error::other(error)), pipe)),
                                };
                            }
                            None => {
                                let events = upstream.take_events();
                                let ended = pipe.ended();
                                let last = pipe.translate.as_mut().map(|translate| {
                                    let mut last = translate.feed(&[], events).to_vec();
                                    last.extend_from_slice(&match &ended {
                                        Ended::Answer(reply) => translate.finish(reply),
                                        Ended::Failed { error, .. } => translate.fail(error),
                                    });
                                    Bytes::from(last)
                                });
                                pipe.end(ended).await;
                                return last.map(|last| (Ok(last), pipe));
                            }
                        }
                    }
                },
            );
            with_headers(event_stream(Body::from_stream(pieces)), &headers)
        }
    }
}

/// A streamed answer the memory rounds read whole, to the client: the
/// upstream's bytes as they came (or, for a translated client, its wire's
/// events), then stored as a stream that ended is.
fn send_read(
    state: Shared,
    out: Outgoing,
    read: memory::Read,
    headers: &[(HeaderName, HeaderValue)],
) -> Response {
    let memory::Read {
        pieces,
        tail,
        end,
        broke,
    } = read;
    let ended = match end {
        Ok(reply) => Ended::Answer(Box::new(reply)),
        Err(e) => Ended::Failed {
            status: Some(200),
            outcome: if broke {
                "upstream_error"
            } else {
                "unreadable_answer"
            },
            error: e.to_string(),
        },
    };
    let body = match out.translator() {
        Some(mut translate) => {
            let mut all = Vec::new();
            for (bytes, events) in pieces {
                all.extend_from_slice(&translate.feed(&bytes, events));
            }
            all.extend_from_slice(&translate.feed(&[], tail));
            all.extend_from_slice(&match &ended {
                Ended::Answer(reply) => translate.finish(reply),
                Ended::Failed { error, .. } => translate.fail(error),
            });
            Body::from(all)
        }
        None => {
            // As a relayed stream that broke: the bytes that came, then
            // the connection cut.
            let cut = match &ended {
                Ended::Failed { error, .. } if broke => Some(error.clone()),
                _ => None,
            };
            let pieces = pieces
                .into_iter()
                .map(|(bytes, _)| Ok(bytes))
                .chain(cut.map(|e| Err(std::io::Error::other(e))));
            Body::from_stream(futures_util::stream::iter(pieces))
        }
    };
    tokio::spawn(persist(&state, out, ended));
    with_headers(event_stream(body), headers)
}

/// What a translated answer is made into.
enum Translation {
    /// A Responses client's response object.
    Responses(responses::Skeleton),
    /// A Chat Completions or Messages client's answer from the other wire.
    Crossed(crossed::Crossed),
}

/// A translated stream on its way.
enum Translator {
    Responses(responses::Streamer),
    Crossed(crossed::Streamer),
    /// A Responses upstream's own events, the response objects adopted.
    Adopt(responses::Adopter),
}

impl Translator {
    /// The client's bytes for a piece of the upstream's stream: `bytes` as
    /// they came, read into `events`.
    fn feed(&mut self, bytes: &[u8], events: Vec<agent_host_provider::StreamEvent>) -> Bytes {
        match self {
            Translator::Responses(s) => s.feed(events),
            Translator::Crossed(s) => s.feed(events),
            Translator::Adopt(a) => a.feed(bytes),
        }
    }

    fn finish(&mut self, reply: &agent_host_provider::ChatReply) -> Bytes {
        match self {
            Translator::Responses(s) => s.finish(reply),
            Translator::Crossed(s) => s.finish(reply),
            Translator::Adopt(a) => a.finish(),
        }
    }

    fn fail(&mut self, message: &str) -> Bytes {
        match self {
            Translator::Responses(s) => s.fail(message),
            Translator::Crossed(s) => s.fail(message),
            Translator::Adopt(a) => a.fail(message),
        }
    }
}

/// A translated client's answer from an upstream's whole answer: the
/// object its wire reads, or its events when the client asked for a
/// stream.
async fn translate_whole(
    state: Shared,
    out: Outgoing,
    translation: Translation,
    body: Bytes,
    reply: Result<agent_host_provider::ChatReply, ProviderError>,
    headers: Vec<(HeaderName, HeaderValue)>,
) -> Response {
    let wire = out.wire;
    let stream = out.stream;
    match reply {
        Ok(reply) => {
            let response = match (translation, stream) {
                // An upstream that answered a stream whole.
                (Translation::Responses(skeleton), true) => event_stream(Body::from(
                    responses::Streamer::new(skeleton).finish(&reply),
                )),
                (Translation::Crossed(crossed), true) => {
                    event_stream(Body::from(crossed::Streamer::new(crossed).finish(&reply)))
                }
                (Translation::Responses(skeleton), false) => {
                    Json(responses::whole(&skeleton, &reply)).into_response()
                }
                (Translation::Crossed(crossed), false) => {
                    Json(crossed::whole(&crossed, &reply)).into_response()
                }
            };
            tokio::spawn(persist(&state, out, Ended::Answer(Box::new(reply))));
            with_headers(response, &headers)
        }
        Err(e) => {
            let message = format!(
                "the upstream's answer could not be read: {e} (it began: {})",
                shortened(String::from_utf8_lossy(&body).into_owned(), 512)
            );
            let ended = Ended::Failed {
                status: Some(200),
                outcome: "unreadable_answer",
                error: message.clone(),
            };
            persist(&state, out, ended).await;
            with_headers(
                wire.error(StatusCode::BAD_GATEWAY, "server_error", &message),
                &headers,
            )
        }
    }
}

/// A response of server-sent events.
fn event_stream(body: Body) -> Response {
    let mut response = Response::new(body);
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// A stream on its way to the client. Dropped unfinished when the client
/// hangs up, which drops the upstream request: the client's new messages
/// are stored, and the answer only if it had arrived whole (a client that
/// stops reading at the end marker has all of it).
struct Pipe {
    state: Shared,
    out: Option<Outgoing>,
    upstream: Option<agent_host_provider::RelayStream>,
    /// For a translated client: the upstream's answer as its wire's events.
    translate: Option<Translator>,
}

impl Pipe {
    /// How the stream ended, as far as it went.
    fn ended(&mut self) -> Ended {
        match self
            .upstream
            .take()
            .map(agent_host_provider::RelayStream::finish)
        {
            Some(Ok(reply)) => Ended::Answer(Box::new(reply)),
            Some(Err(e)) => Ended::Failed {
                status: Some(200),
                outcome: "unreadable_answer",
                error: e.to_string(),
            },
            None => Ended::Failed {
                status: Some(200),
                outcome: "upstream_error",
                error: "the stream ended".to_owned(),
            },
        }
    }

    async fn end(&mut self, ended: Ended) {
        self.upstream = None;
        if let Some(out) = self.out.take() {
            // Its own task: a client that hangs up once it has read the
            // end marker drops this stream, not the write.
            let _ = tokio::spawn(persist(&self.state, out, ended)).await;
        }
    }
}

impl Drop for Pipe {
    fn drop(&mut self) {
        let Some(out) = self.out.take() else { return };
        let ended = if self.upstream.as_ref().is_some_and(|u| u.is_done()) {
            self.ended()
        } else {
            Ended::Failed {
                status: Some(200),
                outcome: "client_disconnected",
                error: "the client hung up before the answer ended; nothing of it was stored"
                    .to_owned(),
            }
        };
        self.upstream = None;
        tokio::spawn(persist(&self.state, out, ended));
    }
}

fn with_headers(mut response: Response, headers: &[(HeaderName, HeaderValue)]) -> Response {
    for (name, value) in headers {
        response.headers_mut().insert(name.clone(), value.clone());
    }
    response
}

/// Stores the client's pending messages and the answer, if one arrived
/// whole, with the memory rounds that led to it, in one write; completes
/// the record; then lets the session go (`out` holds its locks).
fn persist(
    state: &Shared,
    out: Outgoing,
    ended: Ended,
) -> impl Future<Output = ()> + Send + 'static {
    let state = state.clone();
    async move {
        // The whole of it, its locks too, until the end. Regression: the
        // block named only some fields of `out`, so it captured only those
        // and the session's locks were dropped when the future was made,
        // before the answer was stored; a client's next request could
        // overtake the store (found by the Responses SDK test: its third
        // request saw the first response as the newest, now and then).
        let mut out = out;
        out.unfinished = None;
        // Passed through without a session: nothing to store or record.
        let Some(session) = out.session else { return };
        let (reply, status, failure) = match ended {
            Ended::Answer(reply)
                if reply.message.text().trim().is_empty()
                    && reply.message.tool_calls.is_empty() =>
            {
                let error = "an empty answer (no text and no tool calls) is not stored";
                (
                    None,
                    Some(200),
                    Some(("unreadable_answer", error.to_owned())),
                )
            }
            Ended::Answer(reply) => {
                let mut message = reply.message;
                let mut origin = Map::new();
                origin.insert("upstream".into(), json!(out.upstream));
                if let Some(response) = &out.response {
                    origin.insert("response_id".into(), json!(response.id));
                }
                message
                    .metadata
                    .insert(ORIGIN_KEY.into(), Value::Object(origin));
                (Some(message), Some(200), None)
            }
            Ended::Failed {
                status,
                outcome,
                error,
            } => (None, status, Some((outcome, error))),
        };
        let usage = reply.as_ref().and_then(|m| m.usage);
        let pending = std::mem::take(&mut out.pending);
        let memory_calls = out.memory.as_ref().map(|r| r.calls.clone());
        // The rounds go in only with the answer they led to: without it,
        // the client asks again and the model looks again.
        let made: Vec<Message> = match (&reply, out.memory.as_mut()) {
            (Some(_), Some(rounds)) => std::mem::take(&mut rounds.made)
                .into_iter()
                .map(|mut m| {
                    m.channel = Some(CHANNEL.to_owned());
                    m
                })
                .collect(),
            _ => Vec::new(),
        };
        let stored = state
            .engine
            .store_exchange(
                &SessionRef::Id(session),
                pending.clone(),
                made.clone(),
                reply,
                CHANNEL,
            )
            .await;
        let mut answered = None;
        let (reply_id, outcome, error) = match stored {
            Ok((reply, meta)) => {
                let mut messages = pending;
                messages.extend(made);
                messages.extend(reply.iter().cloned());
                if !messages.is_empty() {
                    observe::saved(&state, &meta, messages, Some(CHANNEL.to_owned()));
                }
                if failure.is_none()
                    && reply.is_some()
                    && let Some(response) = &out.response
                {
                    state.latest.set(session, response.id.clone());
                    answered = Some(response.id.clone());
                }
                match failure {
                    None => (reply.map(|m| m.id), "stored", None),
                    Some((outcome, error)) => (None, outcome, Some(error)),
                }
            }
            Err(e) => {
                tracing::warn!(
                    "the gateway could not store an exchange of session {}: {e}",
                    session
                );
                (None, "not_stored", Some(e.to_string()))
            }
        };
        state.records.update(session, out.n, |r| {
            r.upstream_status = status;
            r.usage = usage;
            r.reply = reply_id;
            r.response = answered;
            r.outcome = outcome.to_owned();
            r.error = error.map(|e| shortened(e, 2048));
            if let Some(calls) = memory_calls {
                r.memory_calls = calls;
            }
        });
    }
}

/// `text` cut to at most `max` bytes on a character boundary, marked.
fn shortened(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push_str(" [cut]");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marks(body: &Value) -> usize {
        body.to_string().matches("cache_control").count()
    }

    #[test]
    fn breakpoints_go_on_the_system_prompt_and_the_last_two_user_turns() {
        let mut body = json!({
            "system": "Be brief.",
            "messages": [
                {"role": "user", "content": "one"},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "hm", "signature": "s"},
                    {"type": "text", "text": "two"}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "x"}]},
            ]
        });
        place_cache_breakpoints(body.as_object_mut().unwrap());
        assert_eq!(marks(&body), 3, "{body}");
        assert_eq!(body["system"][0]["cache_control"]["type"], "ephemeral");
        assert_eq!(
            body["messages"][2]["content"][0]["cache_control"]["type"],
            "ephemeral"
        );
        assert_eq!(body["messages"][0]["content"][0]["text"], "one");
        assert!(body["messages"][0]["content"][0]["cache_control"].is_object());
        assert!(
            body["messages"][1]["content"][0]
                .get("cache_control")
                .is_none()
        );
    }

    #[test]
    fn the_clients_tool_breakpoints_leave_room_for_no_more_than_four() {
        let tool = json!({"name": "t", "input_schema": {}, "cache_control": {"type": "ephemeral"}});
        let mut body = json!({
            "tools": [tool, tool, tool],
            "system": [{"type": "text", "text": "Be brief."}],
            "messages": [{"role": "user", "content": "one"}, {"role": "user", "content": "two"}]
        });
        place_cache_breakpoints(body.as_object_mut().unwrap());
        assert_eq!(marks(&body), 4, "{body}");
        assert!(body["system"][0]["cache_control"].is_object());
        assert!(
            body["messages"][1]["content"].is_string(),
            "no room left: {body}"
        );
    }

    #[test]
    fn thinking_and_empty_blocks_are_never_marked() {
        let mut content = json!([{"type": "thinking", "thinking": "hm", "signature": "s"}]);
        assert!(!mark_last_block(&mut content));
        let mut empty = json!("");
        assert!(!mark_last_block(&mut empty));
        assert_eq!(empty, json!(""));
    }
}
