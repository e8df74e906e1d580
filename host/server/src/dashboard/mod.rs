//! The dashboard: server-rendered pages over the same state the API serves.
//!
//! `GET /` lists the sessions (searchable, filterable, paged), `GET
//! /sessions/{id}` shows one: its facts, exactly what would be sent now split
//! into its zones, context use over its messages with compaction points
//! marked, its conversation as a timeline with summary checkpoints as
//! markers, and its requests through the gateway; `GET
//! /sessions/{id}/requests/{n}` shows one of them: each stage in order with
//! its time, outcome and a diff of the messages (a dropped one struck out
//! and folded, a replaced one beside its replacement). `/reports` shows a
//! `run --report` file the same way, and `/processors` the processors and
//! their recent calls. Every page reads with JavaScript off; a small embedded script
//! makes them live (they follow `GET /v1/events`) and fills the list's
//! context meters. No CDN, nothing fetched from elsewhere; everything a
//! history holds is escaped by the templates (maud).
//!
//! With tokens configured, a browser signs in at `/login` with a token: it
//! is kept in an `HttpOnly`, `SameSite=Strict` cookie that the server reads
//! as it reads a bearer header, so the scopes are the API's (`read` to look,
//! `write` to rename).

mod page;

use agent_host_api::{SessionState, SessionView, UpdateSession};
use agent_host_core::ErrorKind;
use agent_host_store::{SessionRef, TailStart};
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use maud::Markup;
use serde::Deserialize;
use uuid::Uuid;

use crate::Shared;
use crate::body::{JsonBody, QueryArgs};
use crate::error::ApiError;
use crate::index::PageQuery;

/// An error, shown as a page.
pub(crate) struct PageError(ApiError);

impl<E> From<E> for PageError
where
    ApiError: From<E>,
{
    fn from(e: E) -> Self {
        PageError(ApiError::from(e))
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let status = self.0.status();
        (status, page::error(status.as_u16(), &self.0.message)).into_response()
    }
}

type PageResult<T> = Result<T, PageError>;

/// Sessions a list page shows.
const PAGE: usize = 50;
/// Messages a session page shows (the newest; older ones page back).
const MESSAGES: usize = 100;
/// The cookie a signed-in browser keeps its token in.
pub(crate) const COOKIE: &str = "agent_host_token";

pub(crate) fn router() -> Router<Shared> {
    Router::new()
        .route("/", get(list))
        .route("/sessions/{id}", get(session))
        .route("/sessions/{id}/requests/{n}", get(request))
        .route("/sessions/{id}/rename", post(rename))
        .route("/sessions/{id}/summarize", post(summarize))
        .route("/sessions/{id}/clear", get(confirm_clear).post(clear))
        .route("/sessions/{id}/delete", get(confirm_delete).post(delete))
        .route("/processors", get(processors))
        .route("/reports", get(report_form).post(report))
        .route("/login", get(login_form).post(login))
        .route("/logout", post(logout))
        .route("/assets/dashboard.css", get(css))
        .route("/assets/dashboard.js", get(js))
        .layer(axum::middleware::map_response(guarded))
}

/// What a page may load: its own script and styles, images of its own or
/// inline (`data:` thumbnails), nothing else; it is never framed. Text in
/// a history that got past the templates' escaping would still run no
/// script and load nothing from elsewhere.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    style-src-attr 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; form-action 'self'; \
    base-uri 'none'; frame-ancestors 'none'";

async fn guarded(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

/// Whether `path` is a dashboard page (answered with a page that signs in,
/// not a JSON error, when a token is missing).
pub(crate) fn is_page(path: &str) -> bool {
    path == "/" || path == "/processors" || path == "/reports" || path.starts_with("/sessions/")
}

/// Whether `path` is a dashboard action that destroys data (clearing or
/// deleting a session): it needs the `admin` scope.
pub(crate) fn is_destructive(path: &str) -> bool {
    path.starts_with("/sessions/") && (path.ends_with("/clear") || path.ends_with("/delete"))
}

/// The processor calls the dashboard remembers (the newest, across
/// sessions), for the processors page.
#[derive(Default)]
pub(crate) struct RecentCalls {
    calls: std::sync::Mutex<std::collections::VecDeque<page::Call>>,
}

/// How many processor calls are remembered.
const RECENT_CALLS: usize = 200;

impl RecentCalls {
    /// Remembers one call of `session`.
    pub(crate) fn push(&self, session: Uuid, report: &agent_host_runtime::ProcessorReport) {
        let mut calls = self.calls.lock().expect("recent calls lock");
        if calls.len() == RECENT_CALLS {
            calls.pop_back();
        }
        calls.push_front(page::Call {
            at: chrono::Utc::now(),
            session,
            name: report.name.clone(),
            hash: report.hash.clone(),
            outcome: format!("{:?}", report.outcome).to_lowercase(),
            error: report.error.clone(),
            time_ms: report.time_ms,
            peak_memory_bytes: report.peak_memory_bytes,
            messages: (report.messages_before, report.messages_after),
        });
    }

    fn snapshot(&self) -> Vec<page::Call> {
        self.calls
            .lock()
            .expect("recent calls lock")
            .iter()
            .cloned()
            .collect()
    }
}

/// The token a signed-in browser's cookie holds, as the bearer header the
/// API reads.
pub(crate) fn bearer_from_cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| {
            let token: String = form_urlencoded::parse(format!("t={value}").as_bytes())
                .map(|(_, v)| v.into_owned())
                .next()
                .unwrap_or_default();
            format!("Bearer {token}")
        })
}

async fn css() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        include_str!("dashboard.css"),
    )
}

async fn js() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        include_str!("dashboard.js"),
    )
}

/// The list page's query.
#[derive(Debug, Default, Deserialize)]
struct ListArgs {
    /// Text in the key, the title, the id or the agent.
    q: Option<String>,
    agent: Option<String>,
    state: Option<String>,
    channel: Option<String>,
    cursor: Option<String>,
}

async fn list(
    State(state): State<Shared>,
    QueryArgs(args): QueryArgs<ListArgs>,
) -> PageResult<Markup> {
    let empty = |s: Option<String>| s.filter(|s| !s.trim().is_empty());
    let wanted = match empty(args.state.clone()) {
        None => None,
        Some(text) => Some(
            text.parse::<SessionState>()
                .map_err(|e| ApiError::invalid("state", e))?,
        ),
    };
    let query = PageQuery {
        limit: PAGE,
        cursor: empty(args.cursor.clone()),
        agent: empty(args.agent.clone()),
        state: wanted,
        text: empty(args.q.clone()),
        channel: empty(args.channel.clone()),
    };
    let (sessions, next) = state.index.page(&query)?;
    let requests = state
        .records
        .counts(sessions.iter().map(|s| s.id).collect())
        .await;
    Ok(page::list(&page::ListView {
        sessions: &sessions,
        next: next.as_deref(),
        q: query.text.as_deref().unwrap_or(""),
        agent: query.agent.as_deref().unwrap_or(""),
        channel: query.channel.as_deref().unwrap_or(""),
        state: wanted,
        requests: &|id| requests.get(&id).copied().unwrap_or(0),
        report: &|id| state.hot.last_report(id),
        total: state.index.len(),
        signed_in: !state.config.tokens.is_empty(),
    }))
}

/// The session page's query.
#[derive(Debug, Default, Deserialize)]
struct SessionArgs {
    /// How many pages of messages back from the newest (0 = the newest).
    back: Option<usize>,
}

async fn session(
    State(state): State<Shared>,
    Path(id): Path<String>,
    QueryArgs(args): QueryArgs<SessionArgs>,
) -> PageResult<Markup> {
    let id = parse_id(&id)?;
    let view = find(&state, id).await?;
    let back = args.back.unwrap_or(0).min(100_000);
    let wanted = MESSAGES.saturating_mul(back + 1);
    let store = state.engine.store().clone();
    let tail = tokio::task::spawn_blocking(move || {
        store.load_tail(&SessionRef::Id(id), TailStart::Newest(wanted))
    })
    .await??;
    // The channels of the messages read, for the list's column and filter.
    state.index.add_channels(
        id,
        tail.system
            .iter()
            .chain(&tail.messages)
            .filter_map(|m| m.channel.as_deref()),
    );
    let view = state.index.get(id).unwrap_or(view);
    state.records.load(id).await;
    let report = crate::routes::context(
        State(state.clone()),
        Path(id.to_string()),
        QueryArgs(Default::default()),
    )
    .await
    .map(|json| json.0);
    // The newest `wanted` messages; this page is the first MESSAGES of them.
    let shown = tail.messages.len().min(MESSAGES);
    let earlier = tail.skipped > 0 || tail.messages.len() > MESSAGES;
    Ok(page::session(&page::SessionPage {
        view: &view,
        meta: &tail.meta,
        system: &tail.system,
        messages: &tail.messages[..shown],
        skipped: tail.skipped as usize + tail.messages.len() - shown,
        back,
        earlier,
        report: report.as_ref().ok(),
        report_error: report.as_ref().err().map(ToString::to_string),
        requests: &state.records.briefs(id),
    }))
}

async fn request(
    State(state): State<Shared>,
    Path((id, n)): Path<(String, String)>,
) -> PageResult<Markup> {
    let id = parse_id(&id)?;
    let view = find(&state, id).await?;
    let n: u64 = n
        .parse()
        .map_err(|_| ApiError::invalid("n", format!("{n:?} is not a request number")))?;
    state.records.load(id).await;
    let record = state.records.get(id, n).ok_or_else(|| {
        ApiError::new(
            ErrorKind::NotFound,
            format!(
                "session {id} has no request {n} (the newest {} of a session are kept)",
                crate::gateway::KEPT_RECORDS
            ),
        )
    })?;
    Ok(page::request(&view, &record))
}

/// The rename form.
#[derive(Debug, Deserialize)]
struct RenameForm {
    title: String,
}

async fn rename(
    State(state): State<Shared>,
    Path(id): Path<String>,
    body: Bytes,
) -> PageResult<Response> {
    let id = parse_id(&id)?;
    let form: RenameForm = serde_urlencoded::from_bytes(&body)
        .map_err(|e| ApiError::invalid("title", format!("the form is not readable: {e}")))?;
    let title = form.title.trim().to_owned();
    let update = UpdateSession {
        title: Some((!title.is_empty()).then_some(title)),
    };
    let _renamed = crate::routes::update_session(
        State(state),
        Path(id.to_string()),
        QueryArgs(Default::default()),
        JsonBody(update),
    )
    .await?;
    Ok(Redirect::to(&format!("/sessions/{id}")).into_response())
}

async fn summarize(State(state): State<Shared>, Path(id): Path<String>) -> PageResult<Response> {
    let id = parse_id(&id)?;
    let _summarized = crate::routes::summarize(
        State(state),
        Path(id.to_string()),
        QueryArgs(Default::default()),
    )
    .await?;
    Ok(Redirect::to(&format!("/sessions/{id}")).into_response())
}

async fn confirm_clear(State(state): State<Shared>, Path(id): Path<String>) -> PageResult<Markup> {
    let view = find(&state, parse_id(&id)?).await?;
    Ok(page::confirm(
        &view,
        "clear",
        "Clear this session?",
        "Every message and summary of this session will be removed; its id, key and title stay. This cannot be undone.",
    ))
}

async fn clear(State(state): State<Shared>, Path(id): Path<String>) -> PageResult<Response> {
    let id = parse_id(&id)?;
    // A session that does not exist is a 404, not a hot entry.
    find(&state, id).await?;
    let hot = state.hot.get(id);
    // No turn is half-way through the session while it is cleared.
    let _turn = hot.turn.lock().await;
    let _shared = crate::routes::shared_turn(&state, id).await?;
    let store = state.engine.store().clone();
    let meta = tokio::task::spawn_blocking(move || store.clear(&SessionRef::Id(id))).await??;
    crate::observe::cleared(&state, &meta);
    Ok(Redirect::to(&format!("/sessions/{id}")).into_response())
}

async fn confirm_delete(State(state): State<Shared>, Path(id): Path<String>) -> PageResult<Markup> {
    let view = find(&state, parse_id(&id)?).await?;
    Ok(page::confirm(
        &view,
        "delete",
        "Delete this session?",
        "The session and everything stored with it will be deleted. This cannot be undone.",
    ))
}

async fn delete(State(state): State<Shared>, Path(id): Path<String>) -> PageResult<Response> {
    let id = parse_id(&id)?;
    let _deleted = crate::routes::delete_session(
        State(state),
        Path(id.to_string()),
        QueryArgs(Default::default()),
    )
    .await?;
    Ok(Redirect::to("/").into_response())
}

async fn processors(State(state): State<Shared>) -> Markup {
    let chain = state.engine.processors();
    page::processors(chain.processors(), &state.recent_calls.snapshot())
}

async fn report_form() -> Markup {
    page::report_form(None)
}

/// The report form: a `run --report` file's text.
#[derive(Debug, Deserialize)]
struct ReportForm {
    report: String,
}

/// What the page reads of a `run --report` file.
#[derive(Debug, Deserialize)]
pub(super) struct RunReport {
    #[serde(default)]
    pub input: serde_json::Value,
    #[serde(default)]
    pub output: serde_json::Value,
    pub stages: Option<Vec<agent_host_engine::trace::StageReport>>,
    #[serde(default)]
    pub failure: Option<String>,
}

/// `POST /reports`: shows a `run --report` file (nothing is kept).
async fn report(body: Bytes) -> Response {
    let refused = |message: String| {
        (StatusCode::BAD_REQUEST, page::report_form(Some(&message))).into_response()
    };
    let form: ReportForm = match serde_urlencoded::from_bytes(&body) {
        Ok(form) => form,
        Err(e) => return refused(format!("The form is not readable: {e}.")),
    };
    let read: RunReport = match serde_path_to_error::deserialize(
        &mut serde_json::Deserializer::from_str(&form.report),
    ) {
        Ok(read) => read,
        Err(e) => {
            return refused(format!(
                "That is not a report of `agent-host run --report`: at {}: {}.",
                e.path(),
                e.inner()
            ));
        }
    };
    if read.stages.is_none() {
        return refused(
            "That report has no stages: it was written by an older agent-host; run it again with this one.".to_owned(),
        );
    }
    page::run_report(&read).into_response()
}

/// `/login?next=PATH`.
#[derive(Debug, Default, Deserialize)]
struct LoginArgs {
    next: Option<String>,
}

async fn login_form(QueryArgs(args): QueryArgs<LoginArgs>) -> Markup {
    page::login(&safe_next(args.next.as_deref()), None)
}

/// The sign-in form.
#[derive(Debug, Deserialize)]
struct LoginForm {
    token: String,
    next: Option<String>,
}

async fn login(State(state): State<Shared>, body: Bytes) -> Response {
    let Ok(form) = serde_urlencoded::from_bytes::<LoginForm>(&body) else {
        return (
            StatusCode::BAD_REQUEST,
            page::login("/", Some("The form is not readable.")),
        )
            .into_response();
    };
    let next = safe_next(form.next.as_deref());
    let token = form.token.trim();
    if state.config.tokens.is_empty() {
        return Redirect::to(&next).into_response();
    }
    if state
        .config
        .tokens
        .scope_of(Some(&format!("Bearer {token}")))
        .is_err()
    {
        return (
            StatusCode::UNAUTHORIZED,
            page::login(&next, Some("That token is not one this server accepts.")),
        )
            .into_response();
    }
    let value: String = form_urlencoded::byte_serialize(token.as_bytes()).collect();
    let cookie = format!("{COOKIE}={value}; Path=/; HttpOnly; SameSite=Strict");
    ([(header::SET_COOKIE, cookie)], Redirect::to(&next)).into_response()
}

async fn logout() -> Response {
    let cookie = format!("{COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0");
    ([(header::SET_COOKIE, cookie)], Redirect::to("/login")).into_response()
}

/// Where to go after signing in: a path of this server, never another site.
fn safe_next(next: Option<&str>) -> String {
    match next {
        Some(n) if n.starts_with('/') && !n.starts_with("//") && !n.contains('\\') => n.to_owned(),
        _ => "/".to_owned(),
    }
}

fn parse_id(text: &str) -> Result<Uuid, ApiError> {
    Uuid::try_parse(text)
        .map_err(|_| ApiError::invalid("id", format!("{text:?} is not a session id")))
}

/// The session `id`, from the index or the store.
async fn find(state: &Shared, id: Uuid) -> Result<SessionView, ApiError> {
    if let Some(view) = state.index.get(id) {
        return Ok(view);
    }
    let store = state.engine.store().clone();
    let meta = tokio::task::spawn_blocking(move || store.get(&SessionRef::Id(id))).await??;
    match meta {
        Some(meta) => Ok(SessionView::from(&meta)),
        None => Err(ApiError::new(
            ErrorKind::NotFound,
            format!("there is no session {id}"),
        )),
    }
}

/// An auth error on a page, as a page.
pub(crate) fn refused(e: ApiError) -> Response {
    PageError(e).into_response()
}

/// A sign-in page instead of a JSON error, for a page asked without a token.
pub(crate) fn sign_in(path_and_query: &str) -> Response {
    let next: String = form_urlencoded::byte_serialize(path_and_query.as_bytes()).collect();
    Redirect::to(&format!("/login?next={next}")).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_host_core::Message;
    use agent_host_core::budget::BudgetConfig;
    use agent_host_core::pipeline::{PipelineConfig, compact};

    #[test]
    fn a_run_report_reads_back_with_its_stages() {
        let mut log = vec![Message::system("Be brief.").with_id("sys")];
        for i in 0..30 {
            log.push(Message::user("question ".repeat(100)).with_id(format!("u{i}")));
            log.push(Message::assistant("answer").with_id(format!("a{i}")));
        }
        let config = PipelineConfig::repair_only(BudgetConfig {
            context_limit: 2_000,
            response_reserve: 200,
            ..BudgetConfig::default()
        });
        let compaction = compact(
            &log,
            None,
            &config,
            &agent_host_core::HeuristicCounter::default(),
            None,
            chrono::Utc::now(),
        );
        let stage = agent_host_engine::trace::pipeline_stage(
            &log,
            None,
            &compaction,
            &compaction.view,
            0.5,
        );
        let written = serde_json::json!({
            "input": {"source": "x.jsonl", "messages": log.len()},
            "stages": [stage.clone()],
        });
        let read: RunReport = serde_json::from_value(written).unwrap();
        let stages = read.stages.unwrap();
        assert_eq!(stages, [stage]);
        let html = page::run_report(&RunReport {
            stages: Some(stages),
            ..read
        })
        .into_string();
        assert!(html.contains("earlier messages dropped"), "{html}");
    }
}
