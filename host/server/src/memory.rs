//! `/v1/memory`: long-term memory over HTTP (add a fact or extract facts
//! from messages, search, get, list, update, delete), in the memory the
//! server was given ([`ServerConfig::memory`](crate::ServerConfig::memory)).
//!
//! Every call names the user whose memory it works in (`user`, in the body
//! or the query); a fact of another user's is not found.

use std::sync::Arc;

use agent_host_api::ErrorBody;
use agent_host_api::memory::{
    MemoryAddResult, MemoryAdded, MemoryEdit, MemoryFact, MemoryHit, MemoryHits, MemoryList,
    NewMemory,
};
use agent_host_core::memory::{Fact, FactKind, Filter, Scope};
use agent_host_core::{ErrorKind, Message, Role};
use agent_host_store::memory::{MAX_PAGE, MemoryStore};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;

use crate::Shared;
use crate::body::{JsonBody, QueryArgs};
use crate::error::{ApiError, ApiResult};

/// The most messages one `POST /v1/memory` extracts from.
pub const MAX_MEMORY_MESSAGES: usize = 10_000;

pub(crate) fn router() -> Router<Shared> {
    Router::new()
        .route("/v1/memory", get(list_memory).post(add_memory))
        .route("/v1/memory/search", get(search_memory))
        .route(
            "/v1/memory/{id}",
            get(get_memory).patch(update_memory).delete(delete_memory),
        )
}

/// Runs `f` on the memory store on the blocking pool.
async fn with_memory<T: Send + 'static>(
    state: &Shared,
    f: impl FnOnce(&MemoryStore) -> Result<T, agent_host_store::StoreError> + Send + 'static,
) -> ApiResult<T> {
    let memory: Arc<MemoryStore> = state.config.memory.clone().ok_or_else(|| {
        ApiError::new(
            ErrorKind::Configuration,
            "this server keeps no long-term memory (it was started without one)",
        )
    })?;
    Ok(tokio::task::spawn_blocking(move || f(&memory)).await??)
}

/// `?user=&agent=`: whose memory.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct UserArgs {
    /// The user whose memory it is.
    user: String,
}

/// The filters of a list or search.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct ListArgs {
    /// The user whose memory it is.
    user: String,
    /// Only this agent's facts.
    agent: Option<String>,
    /// Only facts kept to this session.
    session: Option<String>,
    /// Only facts about (or naming) this entity: everything about it.
    entity: Option<String>,
    /// Start after this fact (the previous page's `next`).
    after: Option<String>,
    /// Facts per page, 1 to 1000 (default 100).
    limit: Option<usize>,
}

/// A search.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct SearchArgs {
    /// What to look for.
    q: String,
    /// The user whose memory it is.
    user: String,
    /// Only this agent's facts.
    agent: Option<String>,
    /// Only facts kept to this session.
    session: Option<String>,
    /// Only facts about (or naming) this entity.
    entity: Option<String>,
    /// How many facts, 1 to 1000 (default 10).
    limit: Option<usize>,
    /// Include facts newer ones invalidated (`true`).
    include_invalid: Option<bool>,
}

fn limit(field: &str, given: Option<usize>, default: usize) -> ApiResult<usize> {
    match given.unwrap_or(default) {
        n @ 1..=MAX_PAGE => Ok(n),
        n => Err(ApiError::invalid(
            field,
            format!("1 to {MAX_PAGE}, not {n}"),
        )),
    }
}

#[utoipa::path(post, path = "/v1/memory", tag = "memory", request_body = NewMemory,
    responses(
        (status = 201, description = "What was added (or found already known), in order", body = MemoryAddResult),
        (status = 400, description = "A bad body", body = ErrorBody),
        (status = 409, description = "The id is taken", body = ErrorBody)))]
pub(crate) async fn add_memory(
    State(state): State<Shared>,
    JsonBody(body): JsonBody<NewMemory>,
) -> ApiResult<(StatusCode, Json<MemoryAddResult>)> {
    let agent = body
        .agent
        .clone()
        .unwrap_or_else(|| state.engine.config().agent.clone());
    let mut scope = Scope::new(body.user.clone(), agent.clone());
    scope.session = body.session.clone();
    let added = match (body.text, body.messages.is_empty()) {
        (Some(_), false) => {
            return Err(ApiError::invalid(
                "body",
                "give `text` (a fact) or `messages` (to extract from), not both",
            ));
        }
        (None, true) => {
            return Err(ApiError::invalid(
                "body",
                "give `text` (a fact) or `messages` (to extract from)",
            ));
        }
        (Some(text), true) => {
            let user = body.user.clone();
            with_memory(&state, move |memory| {
                let now = memory.now();
                let mut fact = Fact::new(
                    MemoryStore::new_id(),
                    scope,
                    body.entity.unwrap_or(user),
                    text,
                    now,
                );
                if body.attribute.is_some() {
                    fact.kind = FactKind::Attribute;
                }
                fact.attribute = body.attribute;
                fact.value = body.value;
                fact.valid_from = body.valid_from.unwrap_or(now);
                fact.source.session = body.source_session;
                Ok(vec![memory.add(fact)?])
            })
            .await?
        }
        (None, false) => {
            if body.messages.len() > MAX_MEMORY_MESSAGES {
                return Err(ApiError::new(
                    ErrorKind::LimitExceeded,
                    format!(
                        "body.messages: {} messages, over the limit of {MAX_MEMORY_MESSAGES}",
                        body.messages.len()
                    ),
                ));
            }
            let mut messages = Vec::with_capacity(body.messages.len());
            for (i, m) in body.messages.into_iter().enumerate() {
                let role = match m.role.as_str() {
                    "user" => Role::User,
                    "assistant" => Role::Assistant,
                    "system" => Role::System,
                    "tool" => Role::Tool,
                    other => {
                        return Err(ApiError::invalid(
                            &format!("body.messages[{i}].role"),
                            format!("`user`, `assistant`, `system` or `tool`, not {other:?}"),
                        ));
                    }
                };
                let mut message =
                    Message::user(m.content).with_id(m.id.unwrap_or_else(|| format!("m{i}")));
                message.role = role;
                message.timestamp = m.timestamp;
                messages.push(message);
            }
            let user = body.user.clone();
            let source = body.source_session;
            with_memory(&state, move |memory| {
                memory.extract(&scope, source.as_deref(), &messages, &user, &agent)
            })
            .await?
        }
    };
    Ok((
        StatusCode::CREATED,
        Json(MemoryAddResult {
            added: added.iter().map(MemoryAdded::from).collect(),
        }),
    ))
}

#[utoipa::path(get, path = "/v1/memory", tag = "memory", params(ListArgs),
    responses(
        (status = 200, description = "Facts in the order recorded, valid or not", body = MemoryList),
        (status = 400, description = "A bad parameter", body = ErrorBody)))]
pub(crate) async fn list_memory(
    State(state): State<Shared>,
    QueryArgs(args): QueryArgs<ListArgs>,
) -> ApiResult<Json<MemoryList>> {
    let limit = limit("limit", args.limit, 100)?;
    let filter = Filter {
        user: args.user,
        agent: args.agent,
        session: args.session,
        entity: args.entity,
    };
    let facts = with_memory(&state, move |memory| {
        memory.list(&filter, args.after.as_deref(), limit)
    })
    .await?;
    let facts: Vec<MemoryFact> = facts.iter().map(MemoryFact::from).collect();
    let next = (facts.len() == limit)
        .then(|| facts.last().map(|f| f.id.clone()))
        .flatten();
    Ok(Json(MemoryList { facts, next }))
}

#[utoipa::path(get, path = "/v1/memory/search", tag = "memory", params(SearchArgs),
    responses(
        (status = 200, description = "The best matching facts, best first", body = MemoryHits),
        (status = 400, description = "A bad parameter", body = ErrorBody)))]
pub(crate) async fn search_memory(
    State(state): State<Shared>,
    QueryArgs(args): QueryArgs<SearchArgs>,
) -> ApiResult<Json<MemoryHits>> {
    let limit = limit("limit", args.limit, 10)?;
    if args.q.len() > 16 * 1024 {
        return Err(ApiError::new(ErrorKind::LimitExceeded, "q: over 16 KiB"));
    }
    let filter = Filter {
        user: args.user,
        agent: args.agent,
        session: args.session,
        entity: args.entity,
    };
    let include_invalid = args.include_invalid.unwrap_or(false);
    let found = with_memory(&state, move |memory| {
        memory.search(&args.q, &filter, limit, include_invalid)
    })
    .await?;
    Ok(Json(MemoryHits {
        hits: found
            .iter()
            .map(|f| MemoryHit {
                fact: MemoryFact::from(&f.fact),
                score: f.score,
            })
            .collect(),
    }))
}

#[utoipa::path(get, path = "/v1/memory/{id}", tag = "memory",
    params(("id" = String, Path, description = "The fact's id"), UserArgs),
    responses(
        (status = 200, description = "The fact, valid or not", body = MemoryFact),
        (status = 404, description = "No such fact in this user's memory", body = ErrorBody)))]
pub(crate) async fn get_memory(
    State(state): State<Shared>,
    Path(id): Path<String>,
    QueryArgs(args): QueryArgs<UserArgs>,
) -> ApiResult<Json<MemoryFact>> {
    let fact = with_memory(&state, move |memory| memory.get(&args.user, &id)).await?;
    Ok(Json(MemoryFact::from(&fact)))
}

#[utoipa::path(patch, path = "/v1/memory/{id}", tag = "memory", request_body = MemoryEdit,
    params(("id" = String, Path, description = "The fact's id"), UserArgs),
    responses(
        (status = 200, description = "The fact as edited", body = MemoryFact),
        (status = 400, description = "A bad body", body = ErrorBody),
        (status = 404, description = "No such fact in this user's memory", body = ErrorBody)))]
pub(crate) async fn update_memory(
    State(state): State<Shared>,
    Path(id): Path<String>,
    QueryArgs(args): QueryArgs<UserArgs>,
    JsonBody(edit): JsonBody<MemoryEdit>,
) -> ApiResult<Json<MemoryFact>> {
    let fact = with_memory(&state, move |memory| {
        memory.update(&args.user, &id, edit.into())
    })
    .await?;
    Ok(Json(MemoryFact::from(&fact)))
}

#[utoipa::path(delete, path = "/v1/memory/{id}", tag = "memory",
    params(("id" = String, Path, description = "The fact's id"), UserArgs),
    responses(
        (status = 204, description = "Forgotten"),
        (status = 404, description = "No such fact in this user's memory", body = ErrorBody)))]
pub(crate) async fn delete_memory(
    State(state): State<Shared>,
    Path(id): Path<String>,
    QueryArgs(args): QueryArgs<UserArgs>,
) -> ApiResult<StatusCode> {
    with_memory(&state, move |memory| memory.delete(&args.user, &id)).await?;
    Ok(StatusCode::NO_CONTENT)
}
