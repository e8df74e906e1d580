//! `agent-host serve`: the session server.
//!
//! An HTTP API under `/v1` over the [engine](agent_host_engine::Engine):
//! sessions (get-or-create, list with cursors, rename, delete), messages
//! (append in any supported format, query), context reports, summaries,
//! model turns (streamed as server-sent events when asked), exports, an
//! event stream, health and Prometheus metrics, and an OpenAPI document
//! generated from the code at `/openapi.json`.
//!
//! What it adds to the engine:
//! - an in-memory [index] of sessions with their lifecycle state
//!   (`created`, `active`, `idle`, `compacted`), so listing pages cost a page;
//! - [hot sessions](hot): turns on one session run one at a time; appends
//!   arriving together are written together (group commit); idle sessions
//!   are released from memory and reload on demand;
//! - with a store several instances share (PostgreSQL): the shared events
//!   of one instance reach every instance's `/v1/events`, each index
//!   follows the sessions the others create, change and delete, and a
//!   session's turns are serialised across instances by the store's turn
//!   lock;
//! - [hooks] (signed webhooks and WebAssembly components) that never
//!   block or undo a write;
//! - bearer-token [auth] with scopes, request size limits, and errors
//!   that are always `{error: {kind, message}}` with one status per kind.
//!
//! ```no_run
//! # async fn example(engine: agent_host_engine::Engine) -> anyhow::Result<()> {
//! use agent_host_server::{Server, ServerConfig};
//!
//! let server = Server::new(engine, ServerConfig::default())?;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! println!("listening on http://{}", listener.local_addr()?);
//! server.serve(listener, agent_host_server::shutdown_signal()).await?;
//! # Ok(()) }
//! ```
//!
//! On the same router: the [gateway] (`/v1/chat/completions`,
//! `/v1/messages`: an OpenAI- and Anthropic-compatible proxy in front of the
//! engine's provider) and the dashboard (`/`). What it deliberately leaves
//! out: the command line (the CLI parses flags and calls [`Server`]).

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use agent_host_core::format::jsonl;
use agent_host_core::{ErrorKind, Message};
use agent_host_engine::Engine;
use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use serde_json::value::RawValue;

pub mod auth;
mod body;
mod dashboard;
pub mod error;
pub mod events;
pub mod gateway;
pub mod hooks;
pub mod hot;
pub mod index;
mod memory;
pub mod metrics;
mod observe;
pub mod openapi;
mod peers;
pub mod records;
mod routes;

pub use auth::{Scope, Tokens};
pub use error::ApiError;
pub use hooks::{HookEvent, HookKind, SessionHook, WebhookConfig};

/// How `(channel, chat)` becomes a session key when a request gives no key.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ChannelScope {
    /// One session per chat across channels: the key is the chat
    /// (`alice` on Telegram and on Slack is one conversation).
    Collapsed,
    /// One session per channel and chat: the key is `channel:chat`.
    #[default]
    PerChannel,
}

impl std::str::FromStr for ChannelScope {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "collapsed" => Ok(ChannelScope::Collapsed),
            "per-channel" => Ok(ChannelScope::PerChannel),
            other => Err(format!(
                "unknown channel scope {other:?}; expected `collapsed` or `per-channel`"
            )),
        }
    }
}

/// How the server behaves.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// A session with no activity for this long is `idle`, and is released
    /// from memory (30 minutes by default).
    pub idle_after: Duration,
    /// How often idle sessions are looked for.
    pub sweep_every: Duration,
    /// The tokens accepted; none means no auth (allowed on loopback only).
    pub tokens: Tokens,
    /// The largest request body, in bytes.
    pub max_body: usize,
    /// Origins allowed by CORS; empty (the default) sends no CORS headers.
    pub cors_origins: Vec<String>,
    /// How `(channel, chat)` maps to a session key.
    pub channel_scope: ChannelScope,
    /// Webhooks to call on session events.
    pub webhooks: Vec<WebhookConfig>,
    /// In-process hooks (WebAssembly components) to call on session events.
    pub hooks: Vec<hooks::WasmHook>,
    /// How long shutdown waits for in-flight requests and hook deliveries.
    pub shutdown_grace: Duration,
    /// What the gateway does with a request that names no session.
    pub anonymous: gateway::Anonymous,
    /// Whether the gateway's request records keep what each stage did to
    /// the messages (a bounded diff per stage, for the dashboard's request
    /// page); on by default. Off spares each request the comparison of
    /// every stage's input with its output.
    pub request_stages: bool,
    /// Whether appends to different sessions are handed to the store
    /// together when it can make them durable with one write (the file
    /// store's journal; see `hot.rs`); on by default. Off, each session's
    /// appends are written by a call of their own (the benchmark's
    /// baseline).
    pub batch_appends: bool,
    /// The long-term memory `/v1/memory` serves (none: those routes say
    /// the server keeps none).
    pub memory: Option<Arc<agent_host_store::memory::MemoryStore>>,
    /// The gateway's upstreams, chosen by a request's `model`; none means
    /// the engine's provider, for every model.
    pub upstreams: Vec<gateway::Upstream>,
    /// The processors the gateway runs, each on its routes, for its
    /// models, in its chains (see [`gateway::GatewayProcessor`]); none
    /// means the engine's own chain, for every request.
    pub processors: Vec<gateway::GatewayProcessor>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            idle_after: Duration::from_secs(30 * 60),
            sweep_every: Duration::from_secs(30),
            tokens: Tokens::none(),
            max_body: 16 * 1024 * 1024,
            cors_origins: Vec::new(),
            channel_scope: ChannelScope::default(),
            webhooks: Vec::new(),
            hooks: Vec::new(),
            shutdown_grace: Duration::from_secs(10),
            anonymous: gateway::Anonymous::default(),
            request_stages: true,
            batch_appends: true,
            memory: None,
            upstreams: Vec::new(),
            processors: Vec::new(),
        }
    }
}

/// The shared state of every request.
pub(crate) struct AppState {
    pub engine: Engine,
    pub index: index::Index,
    pub hot: hot::HotSessions,
    pub bus: Arc<events::Bus>,
    pub metrics: Arc<metrics::Metrics>,
    pub hooks: hooks::Hooks,
    pub config: ServerConfig,
    pub recent_calls: dashboard::RecentCalls,
    pub records: records::Records,
    /// The newest Responses answer of each session.
    pub latest: gateway::responses::Latest,
    /// Where the gateway sends a request, by its model.
    pub upstreams: gateway::Upstreams,
    /// Which processors a gateway request runs.
    pub chains: gateway::chains::Chains,
    /// Whether other instances write to the store too (PostgreSQL): a
    /// session's page is then read from the store, not only the index.
    pub shared_store: bool,
}

pub(crate) type Shared = Arc<AppState>;

/// A session server over an engine; see the [crate documentation](crate).
pub struct Server {
    state: Shared,
}

impl Server {
    /// A server over `engine`: indexes every stored session (one scan of
    /// the store) and starts the webhook workers. Call it inside a tokio
    /// runtime.
    pub fn new(engine: Engine, config: ServerConfig) -> anyhow::Result<Server> {
        let scanned = engine.store().scan()?;
        for warning in &scanned.warnings {
            tracing::warn!("{warning}");
        }
        let upstreams = gateway::Upstreams::new(&engine, &config.upstreams)?;
        let chains = gateway::chains::Chains::new(&engine, config.processors.clone())?;
        let index = index::Index::new(scanned.sessions, config.idle_after, Utc::now());
        let bus = Arc::new(events::Bus::default());
        let metrics = Arc::new(metrics::Metrics::default());
        let hooks = hooks::Hooks::start(
            config.webhooks.clone(),
            config.hooks.clone(),
            bus.clone(),
            metrics.clone(),
        )?;
        let notices = engine.store().notifications();
        let records = records::Records::new(Arc::clone(engine.store()))?;
        if notices.is_some() {
            bus.share(Arc::clone(engine.store()));
        }
        let state = Arc::new(AppState {
            engine,
            index,
            hot: hot::HotSessions::default(),
            bus,
            metrics,
            hooks,
            config,
            recent_calls: dashboard::RecentCalls::default(),
            records,
            latest: gateway::responses::Latest::default(),
            upstreams,
            chains,
            shared_store: notices.is_some(),
        });
        if let Some(notices) = notices {
            tokio::spawn(peers::follow(Arc::downgrade(&state), notices));
        }
        Ok(Server { state })
    }

    /// The router: the API, its middleware (auth, limits, metrics, CORS)
    /// and JSON answers for unknown routes and methods.
    pub fn router(&self) -> Router {
        let state = self.state.clone();
        let mut api = gateway::router()
            .merge(routes::router())
            .merge(memory::router())
            .merge(dashboard::router());
        if !state.config.tokens.is_empty() {
            // Without tokens every request is let through (on loopback
            // only): no layer to pass.
            api = api.layer(axum::middleware::from_fn_with_state(
                state.clone(),
                authorize,
            ));
        }
        let mut router = api
            .layer(axum::extract::DefaultBodyLimit::max(state.config.max_body))
            .layer(axum::middleware::from_fn_with_state(state.clone(), measure))
            .with_state(state.clone());
        if !state.config.cors_origins.is_empty() {
            let origins: Vec<_> = state
                .config
                .cors_origins
                .iter()
                .filter_map(|o| o.parse().ok())
                .collect();
            router = router.layer(
                tower_http::cors::CorsLayer::new()
                    .allow_origin(origins)
                    .allow_methods(tower_http::cors::Any)
                    .allow_headers([
                        axum::http::header::AUTHORIZATION,
                        axum::http::header::CONTENT_TYPE,
                    ]),
            );
        }
        router
    }

    /// Serves on `listener` until `shutdown` completes; then stops taking
    /// connections, lets in-flight requests finish (every acknowledged
    /// append is already durable) and gives hooks `shutdown_grace` to
    /// deliver what they hold.
    pub async fn serve(
        self,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        check_exposure(listener.local_addr()?, &self.state.config)?;
        let sweeper = tokio::spawn(sweep(self.state.clone()));
        let app = self.router();
        let bus = self.state.bus.clone();
        let shutdown = async move {
            shutdown.await;
            bus.close();
        };
        axum::serve(listener, app.into_make_service())
            .with_graceful_shutdown(shutdown)
            .await?;
        sweeper.abort();
        let grace = self.state.config.shutdown_grace;
        let records = Arc::clone(&self.state);
        tokio::task::spawn_blocking(move || {
            records.hot.finish();
            records.records.finish(grace)
        })
        .await?;
        match Arc::try_unwrap(self.state) {
            Ok(state) => state.hooks.drain(grace).await,
            Err(_) => tracing::debug!("requests still hold the state; hooks not drained"),
        }
        Ok(())
    }
}

/// A message as its native record.
pub(crate) fn record(m: &Message) -> Box<RawValue> {
    let mut line = Vec::new();
    jsonl::write_line(m, &mut line);
    while line.last() == Some(&b'\n') {
        line.pop();
    }
    let text = String::from_utf8(line).expect("a record is UTF-8");
    RawValue::from_string(text).expect("a record is JSON")
}

/// Refuses to serve a non-loopback address without tokens.
pub fn check_exposure(addr: SocketAddr, config: &ServerConfig) -> anyhow::Result<()> {
    if !addr.ip().is_loopback() && config.tokens.is_empty() {
        anyhow::bail!(ApiError::new(
            ErrorKind::Configuration,
            format!(
                "refusing to listen on {addr} without auth: anyone who can reach it could read and write every session; give --tokens FILE or set {}, or listen on 127.0.0.1",
                auth::TOKEN_ENV
            ),
        ));
    }
    Ok(())
}

/// Completes on Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(e) => {
                tracing::warn!("cannot listen for SIGTERM: {e}");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
    tracing::info!("shutting down: finishing in-flight requests");
}

async fn authorize(State(state): State<Shared>, request: Request, next: Next) -> Response {
    if let Some(needed) = auth::needed(request.method(), request.uri().path()) {
        // A bearer header, or the cookie of a browser signed in to the
        // dashboard (`SameSite=Strict`: never sent by another site's page).
        let cookie = dashboard::bearer_from_cookie(request.headers());
        // Anthropic's SDKs send their key as `x-api-key`: the gateway's
        // clients sign in with a token there too.
        let api_key = request
            .headers()
            .get("x-api-key")
            .and_then(|v| v.to_str().ok())
            .map(|key| format!("Bearer {key}"));
        let header = request
            .headers()
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .or(cookie.as_deref())
            .or(api_key.as_deref());
        let needed = if dashboard::is_destructive(request.uri().path()) {
            needed.max(auth::Scope::Admin)
        } else {
            needed
        };
        if let Err(e) = state.config.tokens.check(header, needed) {
            let path = request.uri().path();
            if dashboard::is_page(path) {
                if header.is_none() && request.method() == axum::http::Method::GET {
                    let asked = request.uri().path_and_query().map_or(path, |p| p.as_str());
                    return dashboard::sign_in(asked);
                }
                return dashboard::refused(e);
            }
            return e.into_response();
        }
    }
    next.run(request).await
}

async fn measure(State(state): State<Shared>, request: Request, next: Next) -> Response {
    let started = std::time::Instant::now();
    let method = request.method().to_string();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
    let response = next.run(request).await;
    state.metrics.request(
        &method,
        &route,
        response.status().as_u16(),
        started.elapsed().as_secs_f64(),
    );
    response
}

/// Marks idle sessions and releases them from memory, every `sweep_every`.
async fn sweep(state: Shared) {
    let mut tick = tokio::time::interval(state.config.sweep_every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        for change in state.index.sweep(state.config.idle_after, Utc::now()) {
            observe::state_changed(&state, &change);
        }
        let released = state.hot.release_idle(state.config.idle_after);
        if released > 0 {
            tracing::debug!(released, "idle sessions released from memory");
        }
    }
}
