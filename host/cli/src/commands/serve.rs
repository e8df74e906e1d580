//! `agent-host serve`: the session server on the configured engine.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use agent_host_config::{Overrides, Settings};
use agent_host_runtime::ProcessorOptions;
use agent_host_server::{ChannelScope, Server, ServerConfig, Tokens, WebhookConfig};
use anyhow::{Context, Result, bail};

/// The environment variable holding the webhooks' signing secret.
pub const WEBHOOK_SECRET_ENV: &str = "AGENT_HOST_WEBHOOK_SECRET";

/// `agent-host serve`'s options.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// The address to listen on (`127.0.0.1:0` picks a free port). A non-loopback address
    /// needs --tokens or AGENT_HOST_API_TOKEN.
    #[arg(long, default_value = "127.0.0.1:8787", value_name = "HOST:PORT")]
    listen: String,
    /// A file of bearer tokens, one `SCOPES TOKEN` a line (`read`, `write`, `admin`); it must
    /// not be readable by other users. AGENT_HOST_API_TOKEN adds one admin token.
    #[arg(long, value_name = "FILE")]
    tokens: Option<PathBuf>,
    /// After how long without activity a session is idle and released from memory
    /// (`30m`, `2h`, `45s`).
    #[arg(long, default_value = "30m", value_name = "DURATION", value_parser = parse_duration)]
    idle_after: Duration,
    /// The largest request body, in bytes.
    #[arg(long, default_value_t = 16 * 1024 * 1024, value_name = "BYTES")]
    max_body: usize,
    /// An origin CORS allows (repeat for several); none by default (no CORS headers).
    #[arg(long = "cors-origin", value_name = "ORIGIN")]
    cors_origins: Vec<String>,
    /// How `(channel, chat)` maps to a session key: `per-channel` (`telegram:42`) or
    /// `collapsed` (`42`, one session across channels).
    #[arg(long, default_value = "per-channel", value_name = "SCOPE")]
    channel_scope: ChannelScope,
    /// A URL to POST session events to (repeat for several), signed with HMAC-SHA256 using
    /// the secret in AGENT_HOST_WEBHOOK_SECRET.
    #[arg(long = "webhook", value_name = "URL")]
    webhooks: Vec<reqwest::Url>,
    /// A hook component (world `agent-host:hooks/session-hook`) to call on session events,
    /// sandboxed like processors; repeat for several.
    #[arg(long = "hook", value_name = "FILE.wasm")]
    hooks: Vec<PathBuf>,
    /// A processor component (or Rust processor crate) to run on every turn's view; repeat
    /// for a chain. Given, it replaces the `[[processors]]` of the configuration.
    #[arg(long = "processor", short = 'p', value_name = "FILE.wasm|CRATE")]
    processors: Vec<PathBuf>,
    /// What the gateway (`/v1/chat/completions`, `/v1/messages`, `/v1/responses`) does with
    /// a request that names no session (no `x-session-id`, `prompt_cache_key`, `user`,
    /// `previous_response_id` or `conversation`): `fingerprint`
    /// finds its session by its system prompt and first message; `pass-through` fits and
    /// processes it and stores nothing.
    #[arg(
        long,
        default_value = "fingerprint",
        value_name = "fingerprint|pass-through"
    )]
    anonymous: agent_host_server::gateway::Anonymous,
    #[command(flatten)]
    memory: crate::commands::MemoryArgs,
    #[command(flatten)]
    overrides: Overrides,
}

impl ServeArgs {
    /// The configuration overrides given on the command line.
    pub fn overrides(&self) -> &Overrides {
        &self.overrides
    }
}

/// Loads the hook components into one sandbox runtime (the user's compile cache).
fn load_hooks(paths: &[PathBuf]) -> Result<Vec<agent_host_server::hooks::WasmHook>> {
    if paths.is_empty() {
        return Ok(Vec::new());
    }
    let runtime = agent_host_runtime::Runtime::new(agent_host_runtime::RuntimeConfig::default())?;
    paths
        .iter()
        .map(|path| {
            let hook = runtime
                .load_hook_file(path, agent_host_runtime::HookOptions::default())
                .with_context(|| format!("cannot load the hook {}", path.display()))?;
            let hook: agent_host_server::hooks::WasmHook =
                std::sync::Arc::new(agent_host_server::hooks::ComponentHook(hook));
            Ok(hook)
        })
        .collect()
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    agent_host_core::query::parse_duration(text)
        .map_err(|e| e.to_string())
        .and_then(|d| d.to_std().map_err(|e| e.to_string()))
}

/// Starts the server and runs until Ctrl-C or SIGTERM. The first line on
/// `out` is `listening on http://HOST:PORT`.
pub fn run(args: ServeArgs, settings: &Settings, out: &mut dyn Write) -> Result<()> {
    let mut tokens = match &args.tokens {
        Some(path) => Tokens::read_file(path).map_err(anyhow::Error::msg)?,
        None => Tokens::none(),
    };
    if let Ok(token) = std::env::var(agent_host_server::auth::TOKEN_ENV) {
        tokens
            .add(&token, agent_host_server::Scope::Admin)
            .map_err(|e| anyhow::anyhow!("{}: {e}", agent_host_server::auth::TOKEN_ENV))?;
    }
    let webhooks = if args.webhooks.is_empty() {
        Vec::new()
    } else {
        let secret = std::env::var(WEBHOOK_SECRET_ENV).map_err(|_| {
            anyhow::anyhow!(
                "--webhook needs a signing secret: set {WEBHOOK_SECRET_ENV} (receivers check the X-Agent-Host-Signature header with it)"
            )
        })?;
        if secret.len() < 16 {
            bail!("{WEBHOOK_SECRET_ENV} must hold at least 16 characters");
        }
        args.webhooks
            .iter()
            .map(|url| WebhookConfig::new(url.clone(), secret.as_bytes()))
            .collect()
    };
    let config = ServerConfig {
        idle_after: args.idle_after,
        sweep_every: (args.idle_after / 4)
            .clamp(Duration::from_millis(100), Duration::from_secs(30)),
        tokens,
        max_body: args.max_body,
        cors_origins: args.cors_origins.clone(),
        channel_scope: args.channel_scope,
        webhooks,
        hooks: load_hooks(&args.hooks)?,
        anonymous: args.anonymous,
        // Long-term memory beside the sessions, in the same store.
        memory: Some(crate::commands::open_memory(&settings.store)?),
        upstreams: settings
            .upstreams
            .iter()
            .map(|u| {
                let provider = agent_host_provider::Provider::new(
                    u.provider.clone(),
                    &agent_host_config::env_keys,
                )
                .with_context(|| format!("the upstream {:?}", u.name))?;
                Ok(agent_host_server::gateway::Upstream {
                    name: u.name.clone(),
                    provider,
                    models: u.models.clone(),
                    default: u.default,
                    responses: u.responses,
                })
            })
            .collect::<Result<_>>()?,
        processors: if args.processors.is_empty() {
            gateway_processors(settings)?
        } else {
            Vec::new()
        },
        ..ServerConfig::default()
    };
    let processors = (!args.processors.is_empty()).then(|| {
        args.processors
            .iter()
            .map(|p| (p.clone(), ProcessorOptions::default()))
            .collect()
    });
    // Many clients append at once: a folder store groups their syncs.
    let store =
        agent_host_store::open_for_concurrent_appends(&settings.store).with_context(|| {
            format!(
                "cannot open the session store {}",
                agent_host_store::redact(&settings.store)
            )
        })?;
    let mut engine_config = settings.engine_config(processors);
    engine_config.cache_dir = agent_host_runtime::CompileCache::default_root();
    let memory = config.memory.clone();
    engine_config.memory = args.memory.config(
        &settings.memory,
        || memory.context("the server keeps no memory"),
        engine_config.provider.is_some(),
    )?;
    let engine = crate::engine_over(engine_config, store, false)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .thread_name("agent-host-server")
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(&args.listen)
            .await
            .with_context(|| format!("cannot listen on {}", args.listen))?;
        let addr = listener.local_addr()?;
        agent_host_server::check_exposure(addr, &config)?;
        let server = Server::new(engine, config)?;
        writeln!(out, "listening on http://{addr}")?;
        out.flush()?;
        server
            .serve(listener, agent_host_server::shutdown_signal())
            .await
    })
}

/// The configured processors as the gateway runs them, each on its routes,
/// for its models, in its chains; none when every one is in the default
/// chain everywhere (the gateway then runs the engine's own chain, loaded
/// once).
fn gateway_processors(
    settings: &Settings,
) -> Result<Vec<agent_host_server::gateway::GatewayProcessor>> {
    use agent_host_config::{DEFAULT_CHAIN, ProcessorRoute};
    use agent_host_server::gateway::{GatewayProcessor, Wire};
    let everywhere = settings
        .processors
        .iter()
        .all(|p| p.routes.is_none() && p.models.is_none() && p.chains == [DEFAULT_CHAIN]);
    if everywhere {
        return Ok(Vec::new());
    }
    settings
        .processors
        .iter()
        .map(|p| {
            let routes = p.routes.as_ref().map(|routes| {
                routes
                    .iter()
                    .filter_map(|r| match r {
                        ProcessorRoute::ChatCompletions => Some(Wire::ChatCompletions),
                        ProcessorRoute::Messages => Some(Wire::AnthropicMessages),
                        ProcessorRoute::Responses => Some(Wire::Responses),
                        ProcessorRoute::Turns => None,
                    })
                    .collect()
            });
            Ok(GatewayProcessor {
                path: crate::commands::run::component_of(&p.path, false)?,
                options: p.options.clone(),
                routes,
                models: p.models.clone(),
                chains: p.chains.clone(),
            })
        })
        .collect()
}
