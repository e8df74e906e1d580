//! The `/v1` handlers.

use std::convert::Infallible;

use agent_host_api::{
    AppendMessages, Appended, ContextReport, CreateSession, ErrorBody, Health, MessageList,
    PipelineReport, SessionList, SessionState, SessionView, SummarizeView, TurnBody, TurnView,
    UpdateSession,
};
use agent_host_core::format::{self, Format, jsonl};
use agent_host_core::query::{Query, parse_time};
use agent_host_core::{ErrorKind, Message, Role};
use agent_host_engine::{EngineEvent, TurnRequest};
use agent_host_provider::StreamEvent;
use agent_host_store::{NewSession, SessionRef, SessionStore};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use chrono::Utc;
use serde::Deserialize;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::body::{JsonBody, QueryArgs};
use crate::error::{ApiError, ApiResult};
use crate::index::{Change, PageQuery};
use crate::{ChannelScope, Shared, observe, record};

pub(crate) fn router() -> Router<Shared> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .route("/openapi.json", get(crate::openapi::document))
        .route("/v1/sessions", post(create_session).get(list_sessions))
        .route(
            "/v1/sessions/{session}",
            get(get_session)
                .patch(update_session)
                .delete(delete_session),
        )
        .route(
            "/v1/sessions/{session}/messages",
            post(append_messages).get(get_messages),
        )
        .route("/v1/sessions/{session}/context", get(context))
        .route("/v1/sessions/{session}/summarize", post(summarize))
        .route("/v1/sessions/{session}/turns", post(turn))
        .route("/v1/sessions/{session}/export", get(export))
        .route("/v1/events", get(events))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
}

async fn not_found(uri: axum::http::Uri) -> ApiError {
    ApiError::new(
        ErrorKind::NotFound,
        format!("no route {}; /openapi.json lists the API", uri.path()),
    )
}

async fn method_not_allowed(method: axum::http::Method, uri: axum::http::Uri) -> Response {
    let mut response = ApiError::new(
        ErrorKind::InvalidInput,
        format!(
            "{} does not take {method}; /openapi.json lists the API",
            uri.path()
        ),
    )
    .into_response();
    *response.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
    response
}

/// The longest `Idempotency-Key` taken, in bytes.
const MAX_IDEMPOTENCY_KEY: usize = 255;

/// The request's `Idempotency-Key` header, if it has one.
fn idempotency_key(headers: &HeaderMap) -> ApiResult<Option<String>> {
    let Some(value) = headers.get("idempotency-key") else {
        return Ok(None);
    };
    let key = value
        .to_str()
        .ok()
        .filter(|k| !k.is_empty() && k.len() <= MAX_IDEMPOTENCY_KEY)
        .ok_or_else(|| {
            ApiError::invalid(
                "idempotency-key",
                format!("the header must be 1 to {MAX_IDEMPOTENCY_KEY} visible ASCII characters"),
            )
        })?;
    Ok(Some(key.to_owned()))
}

/// Runs a blocking store call on the blocking pool.
pub(crate) async fn blocking<T: Send + 'static>(
    state: &Shared,
    f: impl FnOnce(&dyn SessionStore) -> Result<T, agent_host_store::StoreError> + Send + 'static,
) -> ApiResult<T> {
    let store = state.engine.store().clone();
    Ok(tokio::task::spawn_blocking(move || f(&*store)).await??)
}

/// `?agent=` for a session named by key.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct AgentArg {
    /// The agent a key belongs to (the server's default agent when absent).
    agent: Option<String>,
}

/// The session `name` (an id, or a key of `agent`) names: from the index,
/// else from the store (a session another process made).
pub(crate) async fn resolve(
    state: &Shared,
    name: &str,
    agent: Option<&str>,
) -> ApiResult<SessionView> {
    let reference = match Uuid::try_parse(name) {
        Ok(id) => {
            if let Some(view) = state.index.get(id) {
                return Ok(view);
            }
            SessionRef::Id(id)
        }
        Err(_) => {
            let agent = agent.unwrap_or(&state.engine.config().agent).to_owned();
            if let Some(view) = state
                .index
                .by_key(&agent, name)
                .and_then(|id| state.index.get(id))
            {
                return Ok(view);
            }
            SessionRef::key(agent, name)
        }
    };
    let asked = reference.clone();
    match blocking(state, move |store| store.get(&reference)).await? {
        Some(meta) => {
            let change = if meta.message_count == 0 {
                Change::Created
            } else {
                Change::Active
            };
            Ok(observe::recorded(state, &meta, change))
        }
        None => Err(ApiError::new(
            ErrorKind::NotFound,
            format!("no session {asked}; GET /v1/sessions lists them"),
        )),
    }
}

#[utoipa::path(get, path = "/healthz", tag = "server",
    responses((status = 200, description = "The server is up", body = Health)))]
pub(crate) async fn healthz(State(state): State<Shared>) -> Json<Health> {
    Json(Health {
        status: "ok".to_owned(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        sessions: state.index.len(),
    })
}

#[utoipa::path(get, path = "/metrics", tag = "server",
    responses((status = 200, description = "Prometheus text exposition", content_type = "text/plain")))]
pub(crate) async fn metrics(State(state): State<Shared>) -> Response {
    state.metrics.sessions(state.index.len(), state.hot.len());
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics.render(),
    )
        .into_response()
}

/// The key a create request asks for: its own, else one made of
/// `(channel, chat)` by the server's channel scope.
fn key_of(body: &CreateSession, scope: ChannelScope) -> ApiResult<Option<String>> {
    if let Some(key) = &body.key {
        return Ok(Some(key.clone()));
    }
    match (&body.channel, &body.chat) {
        (_, None) => Ok(None),
        (None, Some(_)) if scope == ChannelScope::PerChannel => Err(ApiError::invalid(
            "body.channel",
            "a `chat` needs its `channel` when sessions are per channel",
        )),
        (_, Some(chat)) if scope == ChannelScope::Collapsed => Ok(Some(chat.clone())),
        (Some(channel), Some(chat)) => Ok(Some(format!("{channel}:{chat}"))),
        (None, Some(chat)) => Ok(Some(chat.clone())),
    }
}

#[utoipa::path(post, path = "/v1/sessions", tag = "sessions", request_body = CreateSession,
    responses(
        (status = 201, description = "Created", body = SessionView),
        (status = 200, description = "A session with this key exists", body = SessionView),
        (status = 400, description = "A bad field", body = ErrorBody)))]
pub(crate) async fn create_session(
    State(state): State<Shared>,
    JsonBody(body): JsonBody<CreateSession>,
) -> ApiResult<(StatusCode, Json<SessionView>)> {
    for (field, value, max) in [
        ("body.key", &body.key, MAX_NAME),
        ("body.agent", &body.agent, MAX_NAME),
        ("body.worker_id", &body.worker_id, MAX_NAME),
        ("body.workspace_id", &body.workspace_id, MAX_NAME),
        ("body.channel", &body.channel, MAX_NAME),
        ("body.chat", &body.chat, MAX_NAME),
        ("body.title", &body.title, MAX_TITLE),
    ] {
        check_length(field, value.as_deref(), max)?;
    }
    let key = key_of(&body, state.config.channel_scope)?;
    let mut new = NewSession::new(
        body.agent
            .clone()
            .unwrap_or_else(|| state.engine.config().agent.clone()),
    );
    new.key = key;
    new.title = body.title.clone();
    new.worker_id = body.worker_id.clone();
    new.workspace_id = body.workspace_id.clone();
    new.channel = body.channel.clone();
    new.validate().map_err(|e| field_error(&e, &body))?;
    let keyed = new.key.is_some();
    let (meta, made) = blocking(&state, move |store| {
        if keyed {
            store.get_or_create(&new).map(|o| (o.meta, o.created))
        } else {
            store.create(&new).map(|m| (m, true))
        }
    })
    .await?;
    if made {
        let view = observe::created(&state, &meta, body.channel);
        Ok((StatusCode::CREATED, Json(view)))
    } else {
        let view = match state.index.get(meta.id) {
            Some(view) => view,
            None => observe::recorded(&state, &meta, Change::Created),
        };
        Ok((StatusCode::OK, Json(view)))
    }
}

/// The longest key, agent, worker, workspace, channel or chat, in bytes:
/// every one of them is held in the index and shown in every listing.
const MAX_NAME: usize = 512;
/// The longest title, in bytes.
const MAX_TITLE: usize = 4096;

fn check_length(field: &str, value: Option<&str>, max: usize) -> ApiResult<()> {
    match value {
        Some(v) if v.len() > max => Err(ApiError::invalid(
            field,
            format!("{} bytes long; at most {max} are accepted", v.len()),
        )),
        _ => Ok(()),
    }
}

/// A store's refusal of a new session, naming the body's field.
fn field_error(e: &agent_host_store::StoreError, body: &CreateSession) -> ApiError {
    let field = match e {
        agent_host_store::StoreError::Invalid {
            what: "agent name", ..
        } => "body.agent",
        _ if body.key.is_none() => "body.chat",
        _ => "body.key",
    };
    ApiError::invalid(field, crate::error::chain(e))
}

#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListArgs {
    /// Sessions per page, 1 to 200 (default 50).
    limit: Option<String>,
    /// The `next_cursor` of the previous page.
    cursor: Option<String>,
    /// Only this agent's sessions.
    agent: Option<String>,
    /// Only sessions in this state (`created`, `active`, `idle`, `compacted`).
    state: Option<String>,
    /// Only sessions with messages through this channel (as this server has
    /// seen them: written since it started, or read by the dashboard).
    channel: Option<String>,
}

#[utoipa::path(get, path = "/v1/sessions", tag = "sessions", params(ListArgs),
    responses(
        (status = 200, description = "A page, newest update first", body = SessionList),
        (status = 400, description = "A bad parameter", body = ErrorBody)))]
pub(crate) async fn list_sessions(
    State(state): State<Shared>,
    QueryArgs(args): QueryArgs<ListArgs>,
) -> ApiResult<Json<SessionList>> {
    let max = agent_host_store::MAX_PAGE_LIMIT;
    let limit = match args.limit.as_deref() {
        None => 50,
        Some(text) => text
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=max).contains(n))
            .ok_or_else(|| {
                ApiError::invalid("limit", format!("{text:?} is not a number from 1 to {max}"))
            })?,
    };
    let wanted = match args.state.as_deref() {
        None => None,
        Some(text) => Some(
            text.parse::<SessionState>()
                .map_err(|e| ApiError::invalid("state", e))?,
        ),
    };
    let (sessions, next_cursor) = state.index.page(&PageQuery {
        limit,
        cursor: args.cursor,
        agent: args.agent,
        state: wanted,
        text: None,
        channel: args.channel,
    })?;
    Ok(Json(SessionList {
        sessions,
        next_cursor,
    }))
}

#[utoipa::path(get, path = "/v1/sessions/{session}", tag = "sessions",
    params(("session" = String, Path, description = "The session's id, or its key"), AgentArg),
    responses(
        (status = 200, description = "The session", body = SessionView),
        (status = 404, description = "No such session", body = ErrorBody)))]
pub(crate) async fn get_session(
    State(state): State<Shared>,
    Path(name): Path<String>,
    QueryArgs(args): QueryArgs<AgentArg>,
) -> ApiResult<Json<SessionView>> {
    let view = resolve(&state, &name, args.agent.as_deref()).await?;
    if !state.shared_store {
        return Ok(Json(view));
    }
    // Another instance may have written last without a word (it died
    // between its commit and its announcement): the store says.
    let id = view.id;
    match blocking(&state, move |store| store.get(&SessionRef::Id(id))).await? {
        Some(meta) => {
            state.index.refresh(&meta);
            Ok(Json(state.index.get(id).unwrap_or(view)))
        }
        None => Err(ApiError::new(
            ErrorKind::NotFound,
            format!("no session {name}; GET /v1/sessions lists them"),
        )),
    }
}

#[utoipa::path(patch, path = "/v1/sessions/{session}", tag = "sessions", request_body = UpdateSession,
    params(("session" = String, Path, description = "The session's id, or its key"), AgentArg),
    responses(
        (status = 200, description = "The session after the change", body = SessionView),
        (status = 404, description = "No such session", body = ErrorBody)))]
pub(crate) async fn update_session(
    State(state): State<Shared>,
    Path(name): Path<String>,
    QueryArgs(args): QueryArgs<AgentArg>,
    JsonBody(body): JsonBody<UpdateSession>,
) -> ApiResult<Json<SessionView>> {
    let view = resolve(&state, &name, args.agent.as_deref()).await?;
    let Some(title) = body.title else {
        return Ok(Json(view));
    };
    check_length("body.title", title.as_deref(), MAX_TITLE)?;
    let id = view.id;
    let meta = blocking(&state, move |store| {
        store.rename(&SessionRef::Id(id), title.as_deref())
    })
    .await?;
    let view = observe::recorded(&state, &meta, last_change(&view));
    state
        .bus
        .publish("session_updated", Some(id), json!({"title": view.title}));
    Ok(Json(view))
}

/// The change a session's state stands for, to keep it across a rename.
fn last_change(view: &SessionView) -> Change {
    match view.state {
        Some(SessionState::Created) => Change::Created,
        Some(SessionState::Compacted) => Change::Compacted,
        _ if view.message_count == 0 => Change::Created,
        _ => Change::Active,
    }
}

#[utoipa::path(delete, path = "/v1/sessions/{session}", tag = "sessions",
    params(("session" = String, Path, description = "The session's id, or its key"), AgentArg),
    responses(
        (status = 200, description = "The deleted session", body = SessionView),
        (status = 404, description = "No such session", body = ErrorBody)))]
pub(crate) async fn delete_session(
    State(state): State<Shared>,
    Path(name): Path<String>,
    QueryArgs(args): QueryArgs<AgentArg>,
) -> ApiResult<Json<SessionView>> {
    let view = resolve(&state, &name, args.agent.as_deref()).await?;
    let hot = state.hot.get(view.id);
    // No turn is half-way through the session while it goes.
    let _turn = hot.turn.lock().await;
    let _shared = shared_turn(&state, view.id).await?;
    let id = view.id;
    let meta = blocking(&state, move |store| store.delete(&SessionRef::Id(id))).await?;
    observe::deleted(&state, &meta);
    Ok(Json(SessionView::from(&meta)))
}

/// The messages of an append request, ready to store: ids made where
/// missing (and refused when repeated), timestamps and channels filled in.
fn messages_of(body: AppendMessages, session: &SessionView) -> ApiResult<Vec<Message>> {
    let AppendMessages {
        messages,
        format,
        channel,
    } = body;
    let format = match format.as_deref() {
        None => None,
        Some(name) => Some(
            name.parse::<Format>()
                .map_err(|e| ApiError::invalid("body.format", e))?,
        ),
    };
    // One message object stands for a list of one.
    let single = messages
        .as_object()
        .is_some_and(|o| o.contains_key("role") && !o.contains_key("messages"));
    let document = if single {
        Value::Array(vec![messages])
    } else {
        messages
    };
    let mut parsed = match format {
        Some(Format::Jsonl) => {
            let Value::Array(records) = document else {
                return Err(ApiError::invalid(
                    "body.messages",
                    "native records (format `jsonl`) come as an array of objects",
                ));
            };
            let mut out = Vec::with_capacity(records.len());
            for (i, record) in records.iter().enumerate() {
                let line = record.to_string();
                let message = jsonl::parse_line(&line, i + 1).map_err(|e| {
                    ApiError::invalid(&format!("body.messages[{i}]"), crate::error::chain(&e))
                })?;
                out.push(message);
            }
            out
        }
        Some(format @ (Format::ClaudeCode | Format::Codex)) => {
            return Err(ApiError::invalid(
                "body.format",
                format!(
                    "{format} transcripts are files; import them with `agent-host sessions import`"
                ),
            ));
        }
        Some(format) => format::parse(format, &document.to_string())?.messages,
        None => format::parse_detected_value(document)?.1.messages,
    };
    if parsed.is_empty() {
        return Err(ApiError::invalid("body.messages", "nothing to append"));
    }
    let now = Utc::now();
    // OpenAI and Anthropic messages carry no ids: their parsers derive them
    // from position and text, which would repeat across requests.
    let native = format == Some(Format::Jsonl);
    let mut seen = std::collections::HashSet::new();
    for (i, m) in parsed.iter_mut().enumerate() {
        if m.id.is_empty() || !native {
            m.id = Uuid::new_v4().to_string();
        }
        if !seen.insert(m.id.clone()) {
            return Err(ApiError::invalid(
                &format!("body.messages[{i}].id"),
                format!("{:?} is given twice in this request", m.id),
            ));
        }
        if m.timestamp.is_none() {
            m.timestamp = Some(now);
        }
        if m.channel.is_none() {
            m.channel.clone_from(&channel);
        }
        if m.agent.is_none() && m.role == Role::Assistant {
            m.agent = Some(session.agent.clone());
        }
    }
    Ok(parsed)
}

#[utoipa::path(post, path = "/v1/sessions/{session}/messages", tag = "messages",
    request_body = AppendMessages,
    params(("session" = String, Path, description = "The session's id, or its key"), AgentArg),
    responses(
        (status = 201, description = "Stored durably, as one write", body = Appended),
        (status = 400, description = "A bad message, named by its place", body = ErrorBody),
        (status = 404, description = "No such session", body = ErrorBody),
        (status = 413, description = "Larger than the request limit", body = ErrorBody)))]
pub(crate) async fn append_messages(
    State(state): State<Shared>,
    Path(name): Path<String>,
    QueryArgs(args): QueryArgs<AgentArg>,
    headers: HeaderMap,
    JsonBody(body): JsonBody<AppendMessages>,
) -> ApiResult<(StatusCode, Json<Appended>)> {
    let key = idempotency_key(&headers)?;
    let view = resolve(&state, &name, args.agent.as_deref()).await?;
    let channel = body.channel.clone();
    let messages = messages_of(body, &view)?;
    let ids: Vec<String> = messages.iter().map(|m| m.id.clone()).collect();
    let meta = match key {
        // A retried request with the same key appends nothing (the store
        // commits the key with the messages); not grouped with others.
        Some(key) => {
            let (id, batch) = (view.id, messages.clone());
            blocking(&state, move |store| {
                store.append_once(&SessionRef::Id(id), &key, &batch)
            })
            .await?
        }
        None => {
            let (hot, store) = (state.hot.get(view.id), state.engine.store());
            if state.config.batch_appends {
                state
                    .hot
                    .append(&hot, store, view.id, messages.clone())
                    .await?
            } else {
                hot.append(store, view.id, messages.clone()).await?
            }
        }
    };
    let session = observe::saved(&state, &meta, messages, channel);
    Ok((StatusCode::CREATED, Json(Appended { ids, session })))
}

#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(crate) struct MessagesArgs {
    /// Only messages at or after this time: RFC 3339, `YYYY-MM-DD`, or a
    /// duration before now (`30m`, `1.5h`, `2d`, `1w`).
    since: Option<String>,
    /// Only messages before this time (same forms as `since`).
    until: Option<String>,
    /// Only messages containing this text (ignoring case).
    contains: Option<String>,
    /// Only these roles, comma-separated (`user,assistant`).
    roles: Option<String>,
    /// Only messages of these agents, comma-separated.
    agents: Option<String>,
    /// Only the most recent this many matches.
    limit: Option<String>,
    /// Also messages forwarded from elsewhere (`true`/`false`).
    include_forwarded: Option<String>,
    /// The agent a key belongs to.
    agent: Option<String>,
}

fn query_of(args: &MessagesArgs) -> ApiResult<Query> {
    let now = Utc::now();
    let time = |field: &str, text: &Option<String>| -> ApiResult<_> {
        text.as_deref()
            .map(|t| parse_time(t, now).map_err(|e| ApiError::invalid(field, e)))
            .transpose()
    };
    let list = |text: &Option<String>| -> Vec<String> {
        text.as_deref()
            .map(|t| {
                t.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    };
    let roles = list(&args.roles)
        .iter()
        .map(|r| match r.as_str() {
            "system" => Ok(Role::System),
            "user" => Ok(Role::User),
            "assistant" => Ok(Role::Assistant),
            "tool" => Ok(Role::Tool),
            other => Err(ApiError::invalid(
                "roles",
                format!("unknown role {other:?}; expected system, user, assistant or tool"),
            )),
        })
        .collect::<ApiResult<Vec<_>>>()?;
    let limit = args
        .limit
        .as_deref()
        .map(|t| {
            t.parse::<usize>().ok().filter(|n| *n >= 1).ok_or_else(|| {
                ApiError::invalid("limit", format!("{t:?} is not a number of 1 or more"))
            })
        })
        .transpose()?;
    let include_forwarded = match args.include_forwarded.as_deref() {
        None | Some("false") => false,
        Some("true") => true,
        Some(other) => {
            return Err(ApiError::invalid(
                "include_forwarded",
                format!("{other:?} is not `true` or `false`"),
            ));
        }
    };
    Ok(Query {
        since: time("since", &args.since)?,
        until: time("until", &args.until)?,
        contains: args.contains.clone(),
        roles,
        agents: list(&args.agents),
        limit,
        include_forwarded,
    })
}

#[utoipa::path(get, path = "/v1/sessions/{session}/messages", tag = "messages",
    params(("session" = String, Path, description = "The session's id, or its key"), MessagesArgs),
    responses(
        (status = 200, description = "Matching messages, in log order", body = MessageList),
        (status = 400, description = "A bad parameter", body = ErrorBody),
        (status = 404, description = "No such session", body = ErrorBody)))]
pub(crate) async fn get_messages(
    State(state): State<Shared>,
    Path(name): Path<String>,
    QueryArgs(args): QueryArgs<MessagesArgs>,
) -> ApiResult<Json<MessageList>> {
    let query = query_of(&args)?;
    let view = resolve(&state, &name, args.agent.as_deref()).await?;
    let id = view.id;
    let history = blocking(&state, move |store| store.load(&SessionRef::Id(id))).await?;
    let messages = query
        .apply(&history.messages)
        .into_iter()
        .map(record)
        .collect();
    Ok(Json(MessageList { messages }))
}

#[utoipa::path(get, path = "/v1/sessions/{session}/context", tag = "context",
    params(("session" = String, Path, description = "The session's id, or its key"), AgentArg),
    responses(
        (status = 200, description = "What the next view holds and how close each trigger is", body = ContextReport),
        (status = 404, description = "No such session", body = ErrorBody)))]
pub(crate) async fn context(
    State(state): State<Shared>,
    Path(name): Path<String>,
    QueryArgs(args): QueryArgs<AgentArg>,
) -> ApiResult<Json<ContextReport>> {
    let view = resolve(&state, &name, args.agent.as_deref()).await?;
    let hot = state.hot.get(view.id);
    let report = hot
        .context_report(&state.engine, &state.metrics, view.id)
        .await?;
    let report = report.as_ref().clone();
    // The volatile tail: what memory recalls for the newest user message.
    Ok(Json(
        match state.engine.volatile_tail(&SessionRef::Id(view.id)).await? {
            Some(recall) => report.with_recall(&recall),
            None => report,
        },
    ))
}

#[utoipa::path(post, path = "/v1/sessions/{session}/summarize", tag = "context",
    params(("session" = String, Path, description = "The session's id, or its key"), AgentArg),
    responses(
        (status = 200, description = "What the summary did", body = SummarizeView),
        (status = 404, description = "No such session", body = ErrorBody)))]
pub(crate) async fn summarize(
    State(state): State<Shared>,
    Path(name): Path<String>,
    QueryArgs(args): QueryArgs<AgentArg>,
) -> ApiResult<Json<SummarizeView>> {
    let view = resolve(&state, &name, args.agent.as_deref()).await?;
    let hot = state.hot.get(view.id);
    let _turn = hot.turn.lock().await;
    let _shared = shared_turn(&state, view.id).await?;
    let observer = observe::observer(&state, &view, None, None);
    let prepared = state
        .engine
        .summarize(&SessionRef::Id(view.id), observer)
        .await?;
    let id = view.id;
    let meta = blocking(&state, move |store| store.get(&SessionRef::Id(id)))
        .await?
        .ok_or_else(|| ApiError::new(ErrorKind::NotFound, format!("session {id} was deleted")))?;
    let change = if prepared.compacted() {
        Change::Compacted
    } else {
        last_change(&view)
    };
    let session = observe::recorded(&state, &meta, change);
    Ok(Json(SummarizeView {
        pipeline: PipelineReport::from(&prepared.compaction),
        session,
    }))
}

#[utoipa::path(post, path = "/v1/sessions/{session}/turns", tag = "turns", request_body = TurnBody,
    params(("session" = String, Path, description = "The session's id, or its key"), AgentArg),
    responses(
        (status = 200, description = "The turn (JSON), or its events (text/event-stream: `text`, `reasoning`, `tool_call`, `retry`, `summary_started`, `summary_finished`, `context_compacted`, `processor_report`, `aggressive_retry`, then `done` with the turn or `error`)", body = TurnView),
        (status = 400, description = "An empty message", body = ErrorBody),
        (status = 502, description = "The model failed", body = ErrorBody)))]
pub(crate) async fn turn(
    State(state): State<Shared>,
    Path(name): Path<String>,
    QueryArgs(args): QueryArgs<AgentArg>,
    headers: HeaderMap,
    JsonBody(body): JsonBody<TurnBody>,
) -> ApiResult<Response> {
    if body.text.trim().is_empty() {
        return Err(ApiError::invalid("body.text", "the message is empty"));
    }
    let view = resolve(&state, &name, args.agent.as_deref()).await?;
    let wants_stream = body.stream
        || headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains("text/event-stream"));
    if !wants_stream {
        let outcome = run_turn(state, view, body, None).await?;
        return Ok(Json(outcome).into_response());
    }
    // The turn runs to its end whether or not the client stays: what it
    // stores is the same either way.
    let (frames, receive) = tokio::sync::mpsc::channel::<Event>(256);
    let (events, mut engine_events) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let turn = tokio::spawn(run_turn(state, view, body, Some(events)));
        // Ends when the turn drops its observer.
        while let Some(event) = engine_events.recv().await {
            if let Some(frame) = stream_frame(&event) {
                let _ = frames.send(frame).await;
            }
        }
        let last = match turn.await {
            Ok(Ok(turn)) => Event::default()
                .event("done")
                .data(serde_json::to_string(&turn).expect("a turn serializes")),
            Ok(Err(e)) => error_frame(e.kind, &e.message),
            Err(e) => error_frame(
                ErrorKind::Internal,
                &format!("the turn stopped without an answer: {e}"),
            ),
        };
        let _ = frames.send(last).await;
    });
    let stream = futures_util::StreamExt::map(
        tokio_stream::wrappers::ReceiverStream::new(receive),
        Ok::<_, Infallible>,
    );
    Ok(Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response())
}

fn error_frame(kind: ErrorKind, message: &str) -> Event {
    Event::default()
        .event("error")
        .data(serde_json::to_string(&ErrorBody::new(kind, message)).expect("an error serializes"))
}

/// An engine event as an SSE frame of a streamed turn.
fn stream_frame(event: &EngineEvent) -> Option<Event> {
    let (name, data) = match event {
        EngineEvent::Model(StreamEvent::Text(text)) => ("text", json!({"text": text})),
        EngineEvent::Model(StreamEvent::Reasoning(text)) => ("reasoning", json!({"text": text})),
        EngineEvent::Model(StreamEvent::ToolCall { name }) => ("tool_call", json!({"name": name})),
        EngineEvent::Model(StreamEvent::Retry {
            attempt,
            delay,
            reason,
        }) => (
            "retry",
            json!({"attempt": attempt, "delay_ms": delay.as_millis() as u64, "reason": reason}),
        ),
        EngineEvent::SummaryStarted {
            messages,
            partials,
            model,
        } => (
            "summary_started",
            json!({"messages": messages, "partials": partials, "model": model}),
        ),
        EngineEvent::SummaryFinished { error } => ("summary_finished", json!({"error": error})),
        EngineEvent::ContextCompacted {
            covered,
            tokens_before,
            tokens_after,
            summarizer,
            ..
        } => (
            "context_compacted",
            json!({"covered": covered, "tokens_before": tokens_before, "tokens_after": tokens_after, "summarizer": summarizer}),
        ),
        EngineEvent::Processor(report) => (
            "processor_report",
            serde_json::to_value(report.as_ref()).unwrap_or_default(),
        ),
        EngineEvent::AggressiveRetry { message } => {
            ("aggressive_retry", json!({"message": message}))
        }
        _ => return None,
    };
    Some(Event::default().event(name).data(data.to_string()))
}

/// The session's turn lock across the instances sharing the store (none
/// for a store only this process uses), taken after the in-process one.
pub(crate) async fn shared_turn(
    state: &Shared,
    id: uuid::Uuid,
) -> ApiResult<Option<agent_host_store::TurnLock>> {
    blocking(state, move |store| store.turn_lock(id)).await
}

/// One turn, under the session's turn lock.
async fn run_turn(
    state: Shared,
    view: SessionView,
    body: TurnBody,
    stream: Option<tokio::sync::mpsc::UnboundedSender<EngineEvent>>,
) -> ApiResult<TurnView> {
    let hot = state.hot.get(view.id);
    let _turn = hot.turn.lock().await;
    let _shared = shared_turn(&state, view.id).await?;
    if let Some(change) = state.index.touch(view.id, Utc::now()) {
        observe::state_changed(&state, &change);
    }
    let channel = body
        .channel
        .clone()
        .unwrap_or_else(|| agent_host_engine::DEFAULT_CHANNEL.to_owned());
    let observer = observe::observer(&state, &view, Some(channel.clone()), stream);
    let request =
        TurnRequest::new(SessionRef::Id(view.id), body.text).with_channel(channel.clone());
    let outcome = state.engine.turn(request, observer).await?;
    let session = outcome.session.as_ref().map(|meta| match &outcome.reply {
        // The question and the answer were stored together (after any
        // checkpoint the turn made: the answer is the latest change).
        Some(reply) => observe::saved(
            &state,
            meta,
            vec![outcome.user.clone(), reply.clone()],
            Some(channel.clone()),
        ),
        // Offline: nothing was stored.
        None => observe::recorded(&state, meta, last_change(&view)),
    });
    Ok(TurnView {
        user: record(&outcome.user),
        reply: outcome.reply.as_ref().map(record),
        pipeline: PipelineReport::from(&outcome.prepared.compaction),
        aggressive_retry: outcome.aggressive_retry,
        session,
    })
}

#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(crate) struct ExportArgs {
    /// `markdown`, `openai`, `anthropic` or `jsonl` (default `jsonl`).
    format: Option<String>,
    /// The agent a key belongs to.
    agent: Option<String>,
}

#[utoipa::path(get, path = "/v1/sessions/{session}/export", tag = "sessions",
    params(("session" = String, Path, description = "The session's id, or its key"), ExportArgs),
    responses(
        (status = 200, description = "The whole session in the format asked for"),
        (status = 400, description = "An unknown format", body = ErrorBody),
        (status = 404, description = "No such session", body = ErrorBody)))]
pub(crate) async fn export(
    State(state): State<Shared>,
    Path(name): Path<String>,
    QueryArgs(args): QueryArgs<ExportArgs>,
) -> ApiResult<Response> {
    let wanted = args.format.as_deref().unwrap_or("jsonl");
    let format = match wanted {
        "markdown" => None,
        "jsonl" => Some(Format::Jsonl),
        "openai" => Some(Format::OpenAi),
        "anthropic" => Some(Format::Anthropic),
        other => {
            return Err(ApiError::invalid(
                "format",
                format!("unknown format {other:?}; expected markdown, openai, anthropic or jsonl"),
            ));
        }
    };
    let view = resolve(&state, &name, args.agent.as_deref()).await?;
    let id = view.id;
    let history = blocking(&state, move |store| store.load(&SessionRef::Id(id))).await?;
    let (text, content_type) = match format {
        None => (
            agent_host_core::export::to_markdown(&history.messages, view.title.as_deref()),
            "text/markdown; charset=utf-8",
        ),
        Some(Format::Jsonl) => (
            format::write(Format::Jsonl, &history.messages)?,
            "application/x-ndjson",
        ),
        Some(format) => (
            format::write(format, &history.messages)?,
            "application/json",
        ),
    };
    Ok(([(header::CONTENT_TYPE, content_type)], text).into_response())
}

#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(crate) struct EventsArgs {
    /// Only this session's events (its id).
    session: Option<String>,
}

#[utoipa::path(get, path = "/v1/events", tag = "events", params(EventsArgs),
    responses((status = 200, description = "Server-sent events: `session_created`, `session_saved`, `session_updated`, `session_deleted`, `context_compacted`, `processor_report`, `state_changed`, `hook_failed` (and `lagged` when a slow listener missed some); each `data:` is a ServerEvent", content_type = "text/event-stream", body = agent_host_api::ServerEvent)))]
pub(crate) async fn events(
    State(state): State<Shared>,
    QueryArgs(args): QueryArgs<EventsArgs>,
) -> ApiResult<Response> {
    let session = match args.session.as_deref() {
        None => None,
        Some(text) => Some(Uuid::try_parse(text).map_err(|_| {
            ApiError::invalid("session", format!("{text:?} is not a session id (a UUID)"))
        })?),
    };
    Ok(state.bus.subscribe(session).into_response())
}
