//! The turn engine: store -> pipeline -> processors -> validation -> budget
//! -> model, and the reply stored.
//!
//! One [`Engine`] serves every front end: a `run --message`, a whole `chat`
//! session, the HTTP server, the Python package. It is async, cheap to clone
//! (an `Arc` inside), `Send + Sync`, and never prints: what happens while it
//! works goes to an [`Observer`] as [`EngineEvent`]s, and failures are
//! typed [`EngineError`]s with a [`kind`](EngineError::kind) that each front
//! end maps once (an exit code, an HTTP status, an exception class).
//!
//! A turn ([`Engine::turn`]):
//!
//! 1. opens the session (creating a keyed one) and loads its log and latest
//!    checkpoint;
//! 2. adds the user's message to the log (in memory), with the request's
//!    channel and the session's agent;
//! 3. runs core's pipeline (repair, doom loops, pruning, a summary when a
//!    trigger fires, budget packing, emergency truncation) with the LLM
//!    summarizer (or the extractive one), then the processors in the
//!    sandbox, then validates the view;
//! 4. stores a new checkpoint pair, if one was made, before calling the
//!    model (a summary is costly: it is kept even when the model then fails)
//!    and reports [`EngineEvent::ContextCompacted`];
//! 5. sends the view; a context-length error runs the pipeline again in its
//!    aggressive pruning mode and retries once;
//! 6. appends the user's message and the reply in one durable write, so a
//!    failed turn leaves no question without its answer in the log.
//!
//! Without a provider the engine is offline: [`Engine::turn`] prepares the
//! view and returns it without storing anything. Heartbeat turns
//! ([`Engine::heartbeat`]) neither load nor save history.
//!
//! Blocking work (the store's durable writes, the pipeline, the sandboxed
//! processors) runs on tokio's blocking pool; model calls are plain async.
//! Core's summarizer trait is synchronous, so the LLM summarizer blocks on
//! the current runtime's handle from inside that blocking task: run the
//! engine on a multi-thread tokio runtime (a current-thread one cannot drive
//! the summary request while the pipeline waits for it).
//!
//! Dropping a turn's future cancels what has not started; a store write
//! already under way on the blocking pool still completes (a durable append
//! is never cut in half), so a turn dropped at its very end may be stored.
//!
//! What it deliberately leaves out: argument parsing, terminals, building
//! processor crates (a front end builds them; the engine loads components),
//! and reading configuration files (`agent-host-config` makes an
//! [`EngineConfig`]).
//!
//! ```no_run
//! use std::sync::Arc;
//! use agent_host_engine::{Engine, EngineConfig, Quiet, TurnRequest};
//! use agent_host_store::{FileStore, SessionRef};
//!
//! # async fn demo() -> Result<(), agent_host_engine::EngineError> {
//! let store = Arc::new(FileStore::open(".agent-host")?);
//! let engine = Engine::new(EngineConfig::default(), store, &|_: &str| None)?;
//! let request = TurnRequest::new(SessionRef::key("default", "work"), "Where were we?");
//! let outcome = engine.turn(request, Arc::new(Quiet)).await?;
//! println!("{} messages in the view", outcome.prepared.view.len());
//! # Ok(())
//! # }
//! ```

mod chain;
mod error;
mod events;
mod exchange;
pub mod llm_summarizer;
pub mod memory_tools;
pub mod replay;
pub mod services;
pub mod trace;
pub mod transcript;

use std::path::PathBuf;
use std::sync::Arc;

use agent_host_core::budget::is_system_prompt;
use agent_host_core::extractive::ExtractiveSummarizer;
use agent_host_core::pipeline::{self, Compaction, PipelineConfig, SummaryOutcome};
use agent_host_core::session::{Checkpoint, SummaryUsage};
use agent_host_core::summarize::Summarizer;
use agent_host_core::validate::validate;
use agent_host_core::window::LogWindow;
use agent_host_core::{HeuristicCounter, Message, TokenCounter};
use agent_host_provider::{ChatRequest, KeySource, Provider, ProviderError, ProviderSettings};
use agent_host_runtime::{ProcessorOptions, ProcessorReport, RunInfo};
use agent_host_store::{NewSession, SessionMeta, SessionRef, SessionStore, TailStart};
use chrono::{DateTime, Utc};

pub use chain::ProcessorChain;
pub use error::EngineError;
pub use events::{EngineEvent, Observer, Quiet};
pub use exchange::{Exchange, ExchangeOptions, MEMORY_SNAPSHOT, Ready};
pub use llm_summarizer::{Calls, LlmSummarizer};
pub use services::EngineServices;

/// A model summarizer a front end brings for one exchange, in place of
/// the engine's (where `context.summarizer` is `llm`): the gateway's, which
/// sends the summary request to the request's own upstream over the prompt
/// it sent last, so that the provider's prompt cache serves it.
pub trait ExchangeSummarizer: Summarizer + Send + Sync {
    /// The model that writes the summaries, for the checkpoint's record.
    fn model(&self) -> String;
    /// What it did so far: requests, tokens, and why a stand-in wrote the
    /// summary when one did.
    fn calls(&self) -> Calls;
}

/// An engine call's result.
pub type Result<T, E = EngineError> = std::result::Result<T, E>;

/// The channel a message is tagged with when the request names none.
pub const DEFAULT_CHANNEL: &str = "api";

/// Which summarizer writes checkpoints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SummarizerChoice {
    /// The configured model (needs a provider).
    Llm,
    /// Core's extractive summarizer (no model).
    Extractive,
}

/// What an engine is made of (the effective configuration, resolved).
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// The pipeline's stages and thresholds.
    pub pipeline: PipelineConfig,
    /// Summarize when a trigger fires (otherwise only [`Engine::summarize`] does).
    pub auto_summarize: bool,
    /// The model to talk to; `None` is offline.
    pub provider: Option<ProviderSettings>,
    /// Who writes summaries.
    pub summarizer: SummarizerChoice,
    /// Let the extractive summarizer stand in when the LLM summarizer fails.
    pub extractive_fallback: bool,
    /// The processor components to run on every view, in order. Components
    /// only: a front end builds crate folders first.
    pub processors: Vec<(PathBuf, ProcessorOptions)>,
    /// Where compiled processors are cached (`None`, the default: no
    /// cache; front ends pass the user's cache folder).
    pub cache_dir: Option<PathBuf>,
    /// The agent new sessions belong to when a request names none.
    pub agent: String,
    /// Long-term memory: flushed before a summary covers messages, recalled
    /// into each turn's view (`None`: no memory).
    pub memory: Option<MemoryConfig>,
}

/// Long-term memory for an engine's turns.
///
/// Before a checkpoint is stored, the offline extractor runs over exactly
/// the messages it covers and what it finds is in memory first (a failure
/// stops the compaction: nothing is summarized away unsaved). Before each
/// turn is sent, up to `retrieval_limit` facts matching the user's message,
/// within `recall_tokens`, go into the view's volatile tail: one synthetic
/// message after the newest, never among the cached messages before it, and
/// never stored.
#[derive(Clone, Debug)]
pub struct MemoryConfig {
    /// Where the facts are.
    pub store: Arc<agent_host_store::memory::MemoryStore>,
    /// The user whose memory it is (and the entity the user's words are
    /// about).
    pub user: String,
    /// The most facts recalled per turn (default 10).
    pub retrieval_limit: usize,
    /// The most tokens recalled facts take (default 1,000).
    pub recall_tokens: u32,
    /// How facts are extracted (default: offline).
    pub extraction: Extraction,
    /// With [`Extraction::Model`], the model is asked for the facts of the
    /// exchanges since the last extraction once there are this many
    /// (default 5), and before a summary covers messages.
    pub extraction_threshold: usize,
    /// Whether a turn offers the model the memory tools
    /// ([`memory_tools`]: `memory_search`, `memory_write`, `memory_recall`)
    /// and runs the calls it makes to them (off by default).
    pub tools: bool,
}

/// How long-term memory extracts facts from messages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Extraction {
    /// Core's offline extractor (explicit facts, no model), at the flush
    /// before a summary.
    #[default]
    Offline,
    /// The engine's provider, asked with core's extraction request
    /// ([`agent_host_core::memory::model`]) every
    /// [`MemoryConfig::extraction_threshold`] exchanges (in the
    /// background, after the turn is stored) and at the flush; when the
    /// model fails or answers nothing readable, the offline extractor
    /// stands in (with a warning and [`EngineEvent::MemoryExtracted`]
    /// saying so). Exchanges not yet extracted when the process ends are
    /// covered by the flush before they are summarized.
    Model,
}

/// Exchanges between two extractions by the model, by default.
pub const DEFAULT_EXTRACTION_THRESHOLD: usize = 5;

/// The most messages kept waiting for the next extraction of a session
/// (older ones are left to the flush).
const MAX_PENDING_EXTRACTION: usize = 200;

impl MemoryConfig {
    /// `user`'s memory in `store`, with the default limits.
    pub fn new(store: Arc<agent_host_store::memory::MemoryStore>, user: impl Into<String>) -> Self {
        MemoryConfig {
            store,
            user: user.into(),
            retrieval_limit: agent_host_core::memory::recall::DEFAULT_RETRIEVAL_LIMIT,
            recall_tokens: agent_host_core::memory::recall::DEFAULT_RECALL_TOKENS,
            extraction: Extraction::Offline,
            extraction_threshold: DEFAULT_EXTRACTION_THRESHOLD,
            tools: false,
        }
    }

    /// What this memory recalls for `text` said to `agent`: its user's
    /// facts, within the retrieval limit and the token budget (blocking).
    fn recall(
        &self,
        agent: &str,
        text: &str,
        counter: &HeuristicCounter,
    ) -> Result<agent_host_core::memory::recall::Recall> {
        let filter = agent_host_core::memory::Filter::user(self.user.clone()).agent(agent);
        Ok(self.store.recall(
            &filter,
            text,
            self.retrieval_limit,
            self.recall_tokens,
            counter,
        )?)
    }
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            pipeline: PipelineConfig::default(),
            auto_summarize: true,
            provider: None,
            summarizer: SummarizerChoice::Extractive,
            extractive_fallback: false,
            processors: Vec::new(),
            cache_dir: None,
            agent: agent_host_store::DEFAULT_AGENT.to_owned(),
            memory: None,
        }
    }
}

/// How to prepare one view.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mode {
    /// Use the aggressive pruning thresholds (after a context-length error).
    pub aggressive: bool,
    /// Summarize whatever the triggers say (`/summarize`).
    pub force_summary: bool,
    /// Do not summarize, whatever the triggers say (the retry after a
    /// context-length error, when the first try's summary failed).
    pub no_summary: bool,
    /// Report what each stage did to the messages ([`Prepared::stages`]):
    /// it compares every stage's input with its output, so only a caller
    /// that shows it asks (the gateway's request records).
    pub trace: bool,
}

/// One turn asked of the engine.
#[derive(Clone, Debug)]
pub struct TurnRequest {
    /// The session (a keyed one is created when missing).
    pub session: SessionRef,
    /// The user's message.
    pub text: String,
    /// The channel the message came from (`cli`, `telegram`, `http`, ...);
    /// [`DEFAULT_CHANNEL`] when `None`.
    pub channel: Option<String>,
    /// The processors for this turn instead of the engine's chain.
    pub processors: Option<ProcessorChain>,
}

impl TurnRequest {
    /// A turn of `session` with `text`, on the default channel and the
    /// engine's processors.
    pub fn new(session: SessionRef, text: impl Into<String>) -> Self {
        TurnRequest {
            session,
            text: text.into(),
            channel: None,
            processors: None,
        }
    }

    /// The same request from `channel`.
    pub fn with_channel(mut self, channel: impl Into<String>) -> Self {
        self.channel = Some(channel.into());
        self
    }

    /// The same request with its own processor chain.
    pub fn with_processors(mut self, processors: ProcessorChain) -> Self {
        self.processors = Some(processors);
        self
    }
}

/// A view ready to send, and what made it.
#[derive(Debug)]
pub struct Prepared {
    /// The messages to send.
    pub view: Vec<Message>,
    /// What the pipeline did (its `view` is moved into [`Prepared::view`]).
    pub compaction: Compaction,
    /// One report per processor.
    pub processors: Vec<ProcessorReport>,
    /// What the LLM summarizer did, when it ran.
    pub summarizer: Option<Calls>,
    /// What each stage did, in order, when [`Mode::trace`] asked for it.
    pub stages: Vec<trace::StageReport>,
}

impl Prepared {
    /// Whether this preparation made a new checkpoint.
    pub fn compacted(&self) -> bool {
        self.compaction.checkpoint.is_some()
    }
}

/// What a turn did.
#[derive(Debug)]
pub struct TurnOutcome {
    /// The stored user message.
    pub user: Message,
    /// The model's reply, as stored; `None` offline.
    pub reply: Option<Message>,
    /// The view that was sent (the last one, after an aggressive retry).
    pub prepared: Prepared,
    /// The context-length error that made the engine prune aggressively and
    /// retry, if that happened.
    pub aggressive_retry: Option<String>,
    /// The view of the first try, when the provider refused it as too long:
    /// what that preparation did (a checkpoint it stored, say) still
    /// happened.
    pub first_attempt: Option<Prepared>,
    /// The session after the turn.
    pub session: Option<SessionMeta>,
    /// What long-term memory recalled into the view (placed after its
    /// newest message, not stored).
    pub recall: Option<agent_host_core::memory::recall::Recall>,
    /// The model's calls to the memory tools and their results, in order,
    /// stored between the user's message and the reply.
    pub memory_calls: Vec<Message>,
}

/// Appends `recall`'s message after the newest message of `view` (the
/// volatile tail; the messages before it, the cached prefix, are untouched).
fn place_recall(view: &mut Vec<Message>, recall: &agent_host_core::memory::recall::Recall) {
    agent_host_core::memory::recall::place(view, recall, format!("memory-recall-{}", view.len()));
}

/// Runs turns; see the [crate documentation](crate).
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

struct Inner {
    config: EngineConfig,
    store: Arc<dyn SessionStore>,
    provider: Option<Provider>,
    chain: ProcessorChain,
    counter: HeuristicCounter,
    /// Per session, the exchanges since the model last extracted facts
    /// from it ([`Extraction::Model`]).
    extraction: std::sync::Mutex<std::collections::HashMap<uuid::Uuid, Pending>>,
}

/// The messages of the exchanges waiting for a session's next extraction.
#[derive(Default)]
struct Pending {
    exchanges: usize,
    messages: Vec<Message>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("config", &self.inner.config)
            .field("processors", &self.inner.chain.len())
            .finish_non_exhaustive()
    }
}

/// The log a view is made from, and where it stands.
pub(crate) struct Loaded {
    meta: Option<SessionMeta>,
    log: Vec<Message>,
    checkpoint: Option<Checkpoint>,
}

impl Engine {
    /// An engine over `store`: makes the provider (asking `keys` for its API
    /// key now) and loads every processor component of the configuration
    /// into one shared sandbox runtime.
    ///
    /// Loading compiles components (or reads them from the compile cache):
    /// call it at startup, or inside `spawn_blocking` from async code.
    pub fn new(
        config: EngineConfig,
        store: Arc<dyn SessionStore>,
        keys: &dyn KeySource,
    ) -> Result<Engine> {
        let provider = match &config.provider {
            Some(settings) => Some(Provider::new(settings.clone(), keys).map_err(|source| {
                EngineError::Provider {
                    context: format!("cannot set up the {} provider", settings.kind),
                    source,
                }
            })?),
            None => None,
        };
        if config.summarizer == SummarizerChoice::Llm && provider.is_none() {
            return Err(EngineError::Configuration(
                "the LLM summarizer needs a provider: configure [provider] (or --provider and --model), or set `context.summarizer = \"extractive\"`".to_owned(),
            ));
        }
        let chain = ProcessorChain::load(config.cache_dir.clone(), &config.processors)?;
        Ok(Engine {
            inner: Arc::new(Inner {
                config,
                store,
                provider,
                chain,
                counter: HeuristicCounter::default(),
                extraction: std::sync::Mutex::default(),
            }),
        })
    }

    /// The store sessions live in.
    pub fn store(&self) -> &Arc<dyn SessionStore> {
        &self.inner.store
    }

    /// The configured provider, if any.
    pub fn provider(&self) -> Option<&Provider> {
        self.inner.provider.as_ref()
    }

    /// The configuration the engine was made with.
    pub fn config(&self) -> &EngineConfig {
        &self.inner.config
    }

    /// The processors every turn runs unless its request names others.
    pub fn processors(&self) -> &ProcessorChain {
        &self.inner.chain
    }

    /// Loads processor components into the engine's sandbox runtime (one
    /// shared compile cache and epoch ticker), for [`TurnRequest::processors`].
    /// Blocking: compiles or reads the compile cache.
    pub fn load_processors(&self, chain: &[(PathBuf, ProcessorOptions)]) -> Result<ProcessorChain> {
        self.inner
            .chain
            .load_more(self.inner.config.cache_dir.clone(), chain)
    }

    /// The token counter used for budgets and reports.
    pub fn counter(&self) -> &dyn TokenCounter {
        &self.inner.counter
    }

    /// Runs a blocking store call on the blocking pool.
    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Inner) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || f(&inner)).await?
    }

    /// The session `name` stands for: the session with this id, which must
    /// exist (an id never becomes a key), else the key `name` of `agent`.
    pub async fn reference(&self, name: &str, agent: &str) -> Result<SessionRef> {
        match uuid::Uuid::parse_str(name) {
            Ok(id) => {
                let found = self
                    .blocking(move |inner| Ok(inner.store.get(&SessionRef::Id(id))?))
                    .await?;
                match found {
                    Some(_) => Ok(SessionRef::Id(id)),
                    None => Err(EngineError::NotFound(format!(
                        "there is no session with id {id}; `agent-host sessions list` (or /sessions) shows them"
                    ))),
                }
            }
            Err(_) => Ok(SessionRef::key(agent, name)),
        }
    }

    /// Opens the session `session` names, creating it when it is a key that
    /// has none yet.
    pub async fn open(&self, session: &SessionRef) -> Result<SessionMeta> {
        let session = session.clone();
        self.blocking(move |inner| inner.open(&session)).await
    }

    /// One turn; see the [crate documentation](crate). Streamed pieces of
    /// the answer, retries, summaries and processor reports go to
    /// `observer` as they happen.
    pub async fn turn(
        &self,
        request: TurnRequest,
        observer: Arc<dyn Observer>,
    ) -> Result<TurnOutcome> {
        if request.text.trim().is_empty() {
            return Err(EngineError::InvalidInput(
                "the message is empty: there is nothing to send".to_owned(),
            ));
        }
        let now = Utc::now();
        let chain = request
            .processors
            .clone()
            .unwrap_or_else(|| self.inner.chain.clone());
        let Some(provider) = self.inner.provider.clone() else {
            return self.offline_turn(request, chain, observer, now).await;
        };
        // A keyed session that does not exist yet is created only when the
        // turn is stored: a failed first turn leaves no empty session.
        let loaded = self.load_or_new(request.session.clone()).await?;
        let agent = agent_of(
            Some(&request.session),
            loaded.meta.as_ref(),
            &self.inner.config,
        );
        let session = loaded
            .meta
            .as_ref()
            .map_or_else(|| request.session.clone(), SessionMeta::reference);
        let user = user_message(&request.text, request.channel.as_deref(), &agent, now);
        let mut log = loaded.log;
        log.push(user.clone());
        let mut checkpoint = loaded.checkpoint;
        let info = self.run_info(loaded.meta.as_ref(), Some(&request.session), now);

        let (mut log, mut prepared) = self
            .prepare_blocking(
                log,
                checkpoint.clone(),
                Mode::default(),
                info.clone(),
                chain.clone(),
                observer.clone(),
            )
            .await?;
        self.keep_checkpoint(
            &session,
            &mut log,
            &mut checkpoint,
            &prepared,
            true,
            &*observer,
        )
        .await?;

        let recall = self
            .recall(
                &session,
                &agent,
                &request.text,
                Vec::new(),
                &mut prepared,
                &*observer,
            )
            .await?;
        let mut aggressive_retry = None;
        let mut first_attempt = None;
        // The text of the answer as it streams in, kept if the stream is cut.
        let mut arrived = String::new();
        let memory_tools = self
            .inner
            .config
            .memory
            .clone()
            .filter(|memory| memory.tools);
        let tools = if memory_tools.is_some() {
            memory_tools::definitions()
        } else {
            Vec::new()
        };
        let reply = match self
            .send_keeping(&provider, &prepared.view, &tools, &*observer, &mut arrived)
            .await
        {
            Err(ProviderError::ContextLength { message, .. }) => {
                tracing::warn!(
                    "the provider refused the context as too long ({message}); pruning aggressively and retrying once"
                );
                observer.event(&EngineEvent::AggressiveRetry {
                    message: message.clone(),
                });
                aggressive_retry = Some(message);
                // A summary that failed once is not paid for twice.
                let failed = matches!(
                    prepared.compaction.report.summary,
                    SummaryOutcome::Failed { .. }
                );
                let mode = Mode {
                    aggressive: true,
                    force_summary: false,
                    no_summary: failed,
                    trace: false,
                };
                let (back, retry) = self
                    .prepare_blocking(log, checkpoint.clone(), mode, info, chain, observer.clone())
                    .await?;
                log = back;
                first_attempt = Some(std::mem::replace(&mut prepared, retry));
                self.keep_checkpoint(
                    &session,
                    &mut log,
                    &mut checkpoint,
                    &prepared,
                    true,
                    &*observer,
                )
                .await?;
                if let Some(recall) = &recall {
                    place_recall(&mut prepared.view, recall);
                }
                self.send_keeping(&provider, &prepared.view, &tools, &*observer, &mut arrived)
                    .await
            }
            other => other,
        };
        // The model's calls to the memory tools are run here and it is asked
        // again, a few rounds at most; they are stored with the turn.
        let (mut memory_calls, mut unrun) = (Vec::new(), Vec::new());
        let reply = match (reply, &memory_tools) {
            (Ok(reply), Some(memory)) => {
                self.memory_rounds(
                    &provider,
                    memory,
                    &session,
                    &agent,
                    &prepared.view,
                    &tools,
                    reply,
                    &mut memory_calls,
                    &mut unrun,
                    &*observer,
                    &mut arrived,
                )
                .await
            }
            (reply, _) => reply,
        };
        let mut reply = match reply {
            Ok(reply) => reply,
            // An answer cut off after some text (a stream that broke or fell
            // silent) is kept with the question, marked incomplete: neither
            // the user's message nor what the model said is lost.
            Err(source) if !arrived.trim().is_empty() => {
                let partial = cut_answer(arrived, &agent, &source);
                let turn = [user, partial];
                let chars = turn[1].content.chars().count();
                let stored = self
                    .blocking(move |inner| {
                        let meta = inner.open(&session)?;
                        Ok(inner.store.append(&meta.reference(), &turn)?)
                    })
                    .await;
                let settings = provider.settings();
                let context = match stored {
                    Ok(_) => format!(
                        "the {} model {}'s answer was cut off after {chars} characters; the \
                         turn was stored with what arrived, marked incomplete",
                        settings.kind, settings.model
                    ),
                    Err(e) => {
                        tracing::warn!("the cut-off turn could not be stored: {e}");
                        format!(
                            "the {} model {}'s answer was cut off after {chars} characters; \
                             the turn was not stored ({e})",
                            settings.kind, settings.model
                        )
                    }
                };
                return Err(EngineError::Provider { context, source });
            }
            Err(source) => return Err(provider_error(&provider, "did not answer", source)),
        };
        if reply.text().trim().is_empty() && reply.tool_calls.is_empty() {
            // Stored, an empty answer would be sent back later, and some
            // providers (Anthropic) refuse an empty assistant message.
            return Err(provider_error(
                &provider,
                "answered with nothing",
                ProviderError::Malformed("an empty answer: no text and no tool calls".to_owned()),
            ));
        }
        reply.id = new_id();
        reply.agent = Some(agent.clone());
        if reply.timestamp.is_none() {
            reply.timestamp = Some(Utc::now());
        }
        let mut turn = Vec::with_capacity(memory_calls.len() + 2);
        turn.push(user.clone());
        turn.extend(memory_calls.iter().cloned());
        turn.push(reply.clone());
        turn.extend(unrun);
        let stored = self
            .blocking(move |inner| {
                let meta = inner.open(&session)?;
                Ok(inner.store.append(&meta.reference(), &turn)?)
            })
            .await?;
        self.exchange_stored(&stored, [user.clone(), reply.clone()], observer);
        Ok(TurnOutcome {
            user,
            reply: Some(reply),
            prepared,
            aggressive_retry,
            first_attempt,
            session: Some(stored),
            recall,
            memory_calls,
        })
    }

    /// The session's log when it exists; an empty log for a keyed session
    /// that does not exist yet (nothing is created); an unknown id is an
    /// error.
    async fn load_or_new(&self, session: SessionRef) -> Result<Loaded> {
        self.blocking(move |inner| match inner.store.get(&session)? {
            Some(meta) => inner.load(meta),
            None if matches!(session, SessionRef::Key { .. }) => Ok(Loaded {
                meta: None,
                log: Vec::new(),
                checkpoint: None,
            }),
            None => Err(EngineError::NotFound(format!(
                "there is no session {session}"
            ))),
        })
        .await
    }

    /// A turn without a provider: the view that would be sent, with nothing
    /// created or stored (a session that does not exist yet stays so).
    async fn offline_turn(
        &self,
        request: TurnRequest,
        chain: ProcessorChain,
        observer: Arc<dyn Observer>,
        now: DateTime<Utc>,
    ) -> Result<TurnOutcome> {
        let loaded = self.load_or_new(request.session.clone()).await?;
        let agent = agent_of(
            Some(&request.session),
            loaded.meta.as_ref(),
            &self.inner.config,
        );
        let user = user_message(&request.text, request.channel.as_deref(), &agent, now);
        let mut log = loaded.log;
        log.push(user.clone());
        let info = self.run_info(loaded.meta.as_ref(), Some(&request.session), now);
        let (_, prepared) = self
            .prepare_blocking(
                log,
                loaded.checkpoint,
                Mode::default(),
                info,
                chain,
                observer,
            )
            .await?;
        Ok(TurnOutcome {
            user,
            reply: None,
            prepared,
            aggressive_retry: None,
            first_attempt: None,
            session: loaded.meta,
            recall: None,
            memory_calls: Vec::new(),
        })
    }

    /// A turn with no history: the text alone (from `channel`) goes to the
    /// model, and nothing is loaded or stored.
    pub async fn heartbeat(
        &self,
        text: &str,
        channel: Option<&str>,
        observer: Arc<dyn Observer>,
    ) -> Result<TurnOutcome> {
        let now = Utc::now();
        let user = user_message(text, channel, &self.inner.config.agent, now);
        let info = self.run_info(None, None, now);
        let (_, prepared) = self
            .prepare_blocking(
                vec![user.clone()],
                None,
                Mode::default(),
                info,
                self.inner.chain.clone(),
                observer.clone(),
            )
            .await?;
        let reply = match &self.inner.provider {
            None => None,
            Some(provider) => Some(
                self.send(provider, &prepared.view, &*observer)
                    .await
                    .map_err(|source| EngineError::Provider {
                        context: "the heartbeat turn failed".to_owned(),
                        source,
                    })?,
            ),
        };
        Ok(TurnOutcome {
            user,
            reply,
            prepared,
            aggressive_retry: None,
            first_attempt: None,
            session: None,
            recall: None,
            memory_calls: Vec::new(),
        })
    }

    /// Summarizes `session` now, whatever the triggers say, and stores the
    /// checkpoint (`/summarize`).
    pub async fn summarize(
        &self,
        session: &SessionRef,
        observer: Arc<dyn Observer>,
    ) -> Result<Prepared> {
        let now = Utc::now();
        let session = session.clone();
        let loaded = self
            .blocking(move |inner| inner.load(existing(inner.store.as_ref(), &session)?))
            .await?;
        let meta = loaded
            .meta
            .clone()
            .ok_or_else(|| EngineError::Internal("a loaded session has no metadata".to_owned()))?;
        let log = loaded.log;
        let mut checkpoint = loaded.checkpoint;
        let info = self.run_info(Some(&meta), None, now);
        let mode = Mode {
            force_summary: true,
            ..Mode::default()
        };
        let (mut log, prepared) = self
            .prepare_blocking(
                log,
                checkpoint.clone(),
                mode,
                info,
                self.inner.chain.clone(),
                observer.clone(),
            )
            .await?;
        self.keep_checkpoint(
            &meta.reference(),
            &mut log,
            &mut checkpoint,
            &prepared,
            false,
            &*observer,
        )
        .await?;
        Ok(prepared)
    }

    /// The context report of `session`: what the next view holds and how
    /// close each summarization trigger is, without summarizing, storing or
    /// running processors.
    pub async fn context(&self, session: &SessionRef) -> Result<(SessionMeta, Compaction)> {
        let session = session.clone();
        self.blocking(move |inner| {
            context_report(inner.store.as_ref(), &session, &inner.context_config())
        })
        .await
    }

    /// The volatile tail the next view would end with: what long-term
    /// memory recalls for the session's newest user message (as a turn
    /// recalls for its own), `None` when the engine keeps no memory. It
    /// comes after the newest message, outside every cached prefix, and is
    /// never stored.
    pub async fn volatile_tail(
        &self,
        session: &SessionRef,
    ) -> Result<Option<agent_host_core::memory::recall::Recall>> {
        let Some(memory) = self.inner.config.memory.clone() else {
            return Ok(None);
        };
        let session = session.clone();
        self.blocking(move |inner| {
            let store = inner.store.as_ref();
            let meta = existing(store, &session)?;
            // The newest user message within the last turns read.
            let tail = store.load_tail(&meta.reference(), TailStart::Newest(VOLATILE_READ))?;
            let Some(text) = tail
                .messages
                .iter()
                .rev()
                .find(|m| m.role == agent_host_core::Role::User && !m.synthetic)
                .map(Message::text)
            else {
                return Ok(Some(agent_host_core::memory::recall::Recall::default()));
            };
            Ok(Some(memory.recall(&meta.agent, &text, &inner.counter)?))
        })
        .await
    }

    /// The part of `session`'s log its context report reads, to keep up to
    /// date as messages are appended (see core's [`LogWindow`]): its
    /// [`compact`](LogWindow::compact) is the report [`Engine::context`]
    /// makes, for the log as it is after those appends. Reads what
    /// [`Engine::context`] reads, with the metadata read with it.
    pub async fn context_window(&self, session: &SessionRef) -> Result<(SessionMeta, LogWindow)> {
        let session = session.clone();
        self.blocking(move |inner| {
            let store = inner.store.as_ref();
            let (meta, log) = read_log(store, &existing(store, &session)?)?;
            let window = LogWindow::new(
                log,
                meta.checkpoints.last().cloned(),
                inner.context_config(),
                Arc::new(HeuristicCounter::default()),
            );
            Ok((meta, window))
        })
        .await
    }

    /// Prepares a view on the blocking pool. The log moves there and back
    /// rather than being copied: a turn pays for it once.
    async fn prepare_blocking(
        &self,
        log: Vec<Message>,
        checkpoint: Option<Checkpoint>,
        mode: Mode,
        info: RunInfo,
        chain: ProcessorChain,
        observer: Arc<dyn Observer>,
    ) -> Result<(Vec<Message>, Prepared)> {
        self.prepare_writing(log, checkpoint, mode, info, (chain, None), observer)
            .await
    }

    /// [`Engine::prepare_blocking`], with `writer` writing the summary the
    /// pipeline asks for (instead of the engine's model summarizer).
    async fn prepare_writing(
        &self,
        log: Vec<Message>,
        checkpoint: Option<Checkpoint>,
        mode: Mode,
        info: RunInfo,
        (chain, writer): (ProcessorChain, Option<Arc<dyn ExchangeSummarizer>>),
        observer: Arc<dyn Observer>,
    ) -> Result<(Vec<Message>, Prepared)> {
        let handle = tokio::runtime::Handle::current();
        self.blocking(move |inner| {
            let prepared = inner.prepare(
                &log,
                checkpoint.as_ref(),
                mode,
                &info,
                &chain,
                observer,
                handle,
                writer,
            )?;
            Ok((log, prepared))
        })
        .await
    }

    /// What the host tells processors about this turn: `session` when it
    /// exists, else what the caller `asked` for (a key not created yet);
    /// neither for a heartbeat.
    fn run_info(
        &self,
        session: Option<&SessionMeta>,
        asked: Option<&SessionRef>,
        now: DateTime<Utc>,
    ) -> RunInfo {
        let config = &self.inner.config;
        let budget = &config.pipeline.budget;
        let asked_key = match asked {
            Some(SessionRef::Key { key, .. }) => Some(key.clone()),
            _ => None,
        };
        RunInfo {
            session_key: session.map_or(asked_key, |s| s.key.clone()),
            agent: Some(agent_of(asked, session, config)),
            model: self
                .inner
                .provider
                .as_ref()
                .map(|p| p.settings().model.clone()),
            context_window: budget.context_limit,
            budget: budget.available(),
            now,
        }
    }

    /// Recalls what long-term memory holds for `text` and places it after
    /// the newest message of `prepared`'s view; reported to `observer`.
    /// Facts whose ids are in `known` (the session's memory snapshot has
    /// them in its prefix) are left out.
    async fn recall(
        &self,
        session: &SessionRef,
        agent: &str,
        text: &str,
        known: Vec<String>,
        prepared: &mut Prepared,
        observer: &dyn Observer,
    ) -> Result<Option<agent_host_core::memory::recall::Recall>> {
        let Some(memory) = self.inner.config.memory.clone() else {
            return Ok(None);
        };
        let (agent, text) = (agent.to_owned(), text.to_owned());
        let recall = self
            .blocking(move |inner| {
                let mut recall = memory.recall(&agent, &text, &inner.counter)?;
                if !known.is_empty() {
                    recall.facts.retain(|f| !known.contains(&f.id));
                    recall.tokens = recall
                        .message("")
                        .map_or(0, |m| inner.counter.count_text(&m.content));
                }
                Ok(recall)
            })
            .await?;
        place_recall(&mut prepared.view, &recall);
        observer.event(&EngineEvent::MemoryRecalled {
            session: session.clone(),
            recall: recall.clone(),
        });
        Ok(Some(recall))
    }

    /// Extracts the facts of `messages` of `session` into memory, as
    /// [`MemoryConfig::extraction`] says (the model first, the offline
    /// extractor when it fails); how many new facts. Nothing without memory.
    async fn extract_facts(
        &self,
        session: &SessionRef,
        messages: Vec<Message>,
        observer: &dyn Observer,
    ) -> Result<usize> {
        let Some(memory) = self.inner.config.memory.clone() else {
            return Ok(0);
        };
        let target = session.clone();
        let meta = self.blocking(move |inner| inner.open(&target)).await?;
        let scope = agent_host_core::memory::Scope::new(memory.user.clone(), meta.agent.clone());
        let source = meta.id.to_string();
        let mut by_model = None;
        let mut fell_back = None;
        if memory.extraction == Extraction::Model {
            match self.ask_for_facts(&memory, &meta, &scope, &messages).await {
                Ok(facts) => by_model = Some(facts),
                Err(why) => {
                    tracing::warn!(
                        "session {session}: the model's extraction failed ({why}); the offline extractor stands in"
                    );
                    fell_back = Some(why);
                }
            }
        }
        let model = by_model.is_some();
        let added = self
            .blocking(move |_| {
                Ok(match by_model {
                    Some(facts) if facts.is_empty() => Vec::new(),
                    Some(facts) => memory.store.add_all(facts)?,
                    None => memory.store.extract(
                        &scope,
                        Some(&source),
                        &messages,
                        &memory.user,
                        &meta.agent,
                    )?,
                })
            })
            .await?;
        let facts = added.iter().filter(|a| !a.duplicate).count();
        observer.event(&EngineEvent::MemoryExtracted {
            session: session.clone(),
            facts,
            by: if model { "model" } else { "offline" }.to_owned(),
            fell_back,
        });
        Ok(facts)
    }

    /// The facts the provider reads in `messages`: core's extraction
    /// request, answered without streaming, read by core.
    async fn ask_for_facts(
        &self,
        memory: &MemoryConfig,
        meta: &SessionMeta,
        scope: &agent_host_core::memory::Scope,
        messages: &[Message],
    ) -> std::result::Result<Vec<agent_host_core::memory::Fact>, String> {
        use agent_host_core::memory::model;
        let provider = self
            .inner
            .provider
            .clone()
            .ok_or_else(|| "no provider is configured".to_owned())?;
        let chat = ChatRequest {
            messages: model::request(messages, &memory.user, &meta.agent),
            max_tokens: Some(EXTRACTION_ANSWER_TOKENS),
            temperature: Some(0.0),
            no_tools: true,
            stream: Some(false),
            tools: Vec::new(),
        };
        let mut ignore = |_: agent_host_provider::StreamEvent| {};
        let answer = provider
            .complete(&chat, &mut ignore)
            .await
            .map_err(|e| e.to_string())?;
        let read = model::read_answer(
            &answer.message.text(),
            scope,
            Some(&meta.id.to_string()),
            messages,
            Utc::now(),
        )?;
        for why in &read.skipped {
            tracing::debug!("session {}: extraction: {why}", meta.id);
        }
        Ok(read.facts)
    }

    /// Counts a stored exchange towards the session's next extraction by
    /// the model; at [`MemoryConfig::extraction_threshold`] exchanges, the
    /// extraction runs in the background.
    fn exchange_stored(&self, meta: &SessionMeta, turn: [Message; 2], observer: Arc<dyn Observer>) {
        let Some(memory) = &self.inner.config.memory else {
            return;
        };
        if memory.extraction != Extraction::Model {
            return;
        }
        let due = {
            let mut pending = self
                .inner
                .extraction
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let entry = pending.entry(meta.id).or_default();
            entry.exchanges += 1;
            entry.messages.extend(turn);
            let over = entry.messages.len().saturating_sub(MAX_PENDING_EXTRACTION);
            entry.messages.drain(..over);
            (entry.exchanges >= memory.extraction_threshold.max(1))
                .then(|| pending.remove(&meta.id))
                .flatten()
        };
        if let Some(due) = due {
            let (engine, session) = (self.clone(), meta.reference());
            tokio::spawn(async move {
                if let Err(e) = engine
                    .extract_facts(&session, due.messages, &*observer)
                    .await
                {
                    tracing::warn!("session {session}: extracting facts failed: {e}");
                }
            });
        }
    }

    /// Stores the checkpoint `prepared` made, if any: the pair goes to the
    /// log and the checkpoint to the metadata; `log` and `checkpoint` follow.
    /// `pending`: the log's last message is this turn's user message, not
    /// stored yet.
    async fn keep_checkpoint(
        &self,
        session: &SessionRef,
        log: &mut Vec<Message>,
        checkpoint: &mut Option<Checkpoint>,
        prepared: &Prepared,
        pending: bool,
        observer: &dyn Observer,
    ) -> Result<()> {
        let Some(new) = prepared.compaction.checkpoint.clone() else {
            return Ok(());
        };
        let covers: std::collections::HashSet<&str> =
            new.covers.iter().map(String::as_str).collect();
        let covered: Vec<Message> = log
            .iter()
            .filter(|m| covers.contains(m.id.as_str()))
            .cloned()
            .collect();
        observer.event(&EngineEvent::BeforeCompaction {
            session: session.clone(),
            messages: covered.clone(),
        });
        if self.inner.config.memory.is_some() {
            // The flush: what the summary is about to cover is in memory
            // before the summary is stored.
            let added = self.extract_facts(session, covered, observer).await?;
            observer.event(&EngineEvent::MemoryFlushed {
                session: session.clone(),
                facts: added,
            });
        }
        let pair = prepared.compaction.append.clone();
        let (target, written) = (session.clone(), new.clone());
        self.blocking(move |inner| {
            let target = inner.open(&target)?.reference();
            inner.store.append(&target, &pair)?;
            inner.store.write_checkpoint(&target, &written)?;
            Ok(())
        })
        .await?;
        // A pending user message (the log's last entry, stored with the
        // reply) comes after the pair, as it will in the store.
        let at = log.len() - usize::from(pending && !log.is_empty());
        log.splice(at..at, prepared.compaction.append.iter().cloned());
        *checkpoint = Some(new.clone());
        let calls = prepared.summarizer.as_ref();
        let summarizer = match calls {
            Some(c) if c.fell_back.is_none() => "llm",
            _ => "extractive",
        };
        let usage = &prepared.compaction.report.usage;
        tracing::info!(
            event = "context_compacted",
            session = %session,
            covered = new.covers.len(),
            summarizer,
            requests = calls.map_or(0, |c| c.requests),
            "context compacted: {} messages summarized into a checkpoint",
            new.covers.len()
        );
        observer.event(&EngineEvent::ContextCompacted {
            session: session.clone(),
            covered: new.covers.len(),
            tokens_before: usage.tokens_since_summary,
            tokens_after: u64::from(usage.view.total()),
            summarizer,
        });
        Ok(())
    }

    /// While the model's answer calls only memory tools (at most
    /// [`memory_tools::MAX_ROUNDS`] times): runs the calls, adds the call
    /// and its results to `calls` (and to what is sent) and asks again.
    /// Returns the answer that ends the turn: one with text, or with calls
    /// to other tools (the caller's to run). An answer that still calls only
    /// memory tools after the last round is returned with its calls
    /// answered, unrun, in `unrun` (stored after it, so no call is left
    /// without a result).
    #[allow(clippy::too_many_arguments)]
    async fn memory_rounds(
        &self,
        provider: &Provider,
        memory: &MemoryConfig,
        session: &SessionRef,
        agent: &str,
        view: &[Message],
        tools: &[serde_json::Value],
        mut reply: Message,
        calls: &mut Vec<Message>,
        unrun: &mut Vec<Message>,
        observer: &dyn Observer,
        arrived: &mut String,
    ) -> Result<Message, ProviderError> {
        let only_memory = |reply: &Message| {
            !reply.tool_calls.is_empty()
                && reply
                    .tool_calls
                    .iter()
                    .all(|call| memory_tools::is_memory_tool(&call.name))
        };
        for _ in 0..memory_tools::MAX_ROUNDS {
            if !only_memory(&reply) {
                break;
            }
            let session_id = match session {
                SessionRef::Id(id) => Some(id.to_string()),
                SessionRef::Key { .. } => None,
            };
            let results;
            (reply, results) = memory_tools::answer_round(
                memory.clone(),
                agent.to_owned(),
                session_id,
                reply,
                "not run: only memory tools are run here",
            )
            .await?;
            for (call, result) in reply.tool_calls.iter().zip(&results) {
                observer.event(&EngineEvent::MemoryTool {
                    session: session.clone(),
                    tool: call.name.clone(),
                    error: memory_tools::result_error(result),
                });
            }
            calls.push(reply);
            calls.extend(results);
            let mut asking = view.to_vec();
            asking.extend(calls.iter().cloned());
            reply = self
                .send_keeping(provider, &asking, tools, observer, arrived)
                .await?;
        }
        if only_memory(&reply) {
            let why = format!(
                "not run: this turn made {} rounds of memory calls, the most it may",
                memory_tools::MAX_ROUNDS
            );
            for call in &reply.tool_calls {
                let mut result = Message::tool_result(
                    &call.id,
                    &call.name,
                    serde_json::json!({"error": why}).to_string(),
                )
                .with_id(new_id());
                result.agent = Some(agent.to_owned());
                result.timestamp = Some(Utc::now());
                unrun.push(result);
            }
        }
        Ok(reply)
    }

    async fn send(
        &self,
        provider: &Provider,
        view: &[Message],
        observer: &dyn Observer,
    ) -> Result<Message, ProviderError> {
        self.send_keeping(provider, view, &[], observer, &mut String::new())
            .await
    }

    /// [`Engine::send`] with `tools` offered after the configured ones,
    /// keeping the answer's text in `arrived` as it streams in (a retried
    /// request starts it again).
    async fn send_keeping(
        &self,
        provider: &Provider,
        view: &[Message],
        tools: &[serde_json::Value],
        observer: &dyn Observer,
        arrived: &mut String,
    ) -> Result<Message, ProviderError> {
        use agent_host_provider::StreamEvent;
        arrived.clear();
        let request = ChatRequest {
            messages: view.to_vec(),
            tools: tools.to_vec(),
            ..ChatRequest::default()
        };
        let mut forward = |event: StreamEvent| {
            match &event {
                StreamEvent::Text(text) => arrived.push_str(text),
                StreamEvent::Retry { .. } => arrived.clear(),
                _ => {}
            }
            observer.event(&EngineEvent::Model(event));
        };
        provider
            .complete(&request, &mut forward)
            .await
            .map(|reply| reply.message)
    }
}

impl Inner {
    /// What a context report runs the pipeline with: the engine's, with no
    /// trigger when summaries are off (as `agent-host context` shows it).
    fn context_config(&self) -> PipelineConfig {
        let mut config = self.config.pipeline.clone();
        if !self.config.auto_summarize {
            config.summary = None;
        }
        config
    }

    fn open(&self, session: &SessionRef) -> Result<SessionMeta> {
        match session {
            SessionRef::Key { agent, key } => {
                let new = NewSession::new(agent.clone()).with_key(key.clone());
                Ok(self.store.get_or_create(&new)?.meta)
            }
            SessionRef::Id(id) => self
                .store
                .get(session)?
                .ok_or_else(|| EngineError::NotFound(format!("there is no session with id {id}"))),
        }
    }

    /// The log a turn needs of the session `meta` describes (see
    /// [`read_log`]), and its latest checkpoint.
    fn load(&self, meta: SessionMeta) -> Result<Loaded> {
        let (meta, log) = read_log(self.store.as_ref(), &meta)?;
        let checkpoint = meta.checkpoints.last().cloned();
        Ok(Loaded {
            meta: Some(meta),
            log,
            checkpoint,
        })
    }

    /// The host services the processors of a run over `info` may be
    /// granted: the engine's provider, its token counter, and its memory
    /// kept to its user and the run's agent.
    fn services(
        &self,
        info: &RunInfo,
        handle: tokio::runtime::Handle,
    ) -> Arc<dyn agent_host_runtime::HostServices> {
        let mut services = EngineServices::new(handle, Arc::new(self.counter));
        if let Some(provider) = &self.provider {
            services = services.with_provider(provider.clone());
        }
        if let Some(memory) = &self.config.memory {
            let agent = info
                .agent
                .clone()
                .unwrap_or_else(|| self.config.agent.clone());
            services = services.with_memory(Arc::clone(&memory.store), memory.user.clone(), agent);
        }
        Arc::new(services)
    }

    #[allow(clippy::too_many_arguments)]
    fn prepare(
        &self,
        log: &[Message],
        checkpoint: Option<&Checkpoint>,
        mode: Mode,
        info: &RunInfo,
        chain: &ProcessorChain,
        observer: Arc<dyn Observer>,
        handle: tokio::runtime::Handle,
        writer: Option<Arc<dyn ExchangeSummarizer>>,
    ) -> Result<Prepared> {
        let mut config = self.config.pipeline.clone();
        config.aggressive = mode.aggressive;
        config.force_summary = mode.force_summary;
        let summarize = (self.config.auto_summarize || mode.force_summary) && !mode.no_summary;
        // A front end's own model summarizer stands in for the engine's,
        // where the configuration asks for a model's summaries.
        let writer =
            writer.filter(|_| summarize && self.config.summarizer == SummarizerChoice::Llm);
        let llm = match (&self.provider, self.config.summarizer) {
            (Some(provider), SummarizerChoice::Llm) if summarize && writer.is_none() => Some(
                LlmSummarizer::new(provider.clone(), handle.clone())
                    .with_context_limit(config.budget.context_limit)
                    .with_fallback(self.config.extractive_fallback)
                    .with_observer(observer.clone()),
            ),
            _ => None,
        };
        let extractive = ExtractiveSummarizer::default();
        let summarizer: Option<&dyn Summarizer> = match (&writer, &llm, summarize) {
            (Some(writer), _, _) => Some(writer.as_ref()),
            (None, Some(llm), _) => Some(llm),
            (None, None, true) => Some(&extractive),
            (None, None, false) => None,
        };
        let started = std::time::Instant::now();
        // Traced, each step is timed too (the request page shows where the
        // time went); untraced, no clock is read.
        let clock = trace::step_clock();
        let mut compaction = pipeline::compact_timed(
            log,
            checkpoint,
            &config,
            &self.counter,
            summarizer,
            info.now,
            mode.trace.then_some(&clock as &dyn Fn() -> f64),
        );
        let pipeline_ms = started.elapsed().as_secs_f64() * 1000.0;
        let (summarizer, model) = match (&writer, llm) {
            (Some(writer), _) => (Some(writer.calls()), Some(writer.model())),
            (None, Some(llm)) => (
                Some(llm.calls()),
                self.provider.as_ref().map(|p| p.settings().model.clone()),
            ),
            (None, None) => (None, None),
        };
        if let Some(checkpoint) = &mut compaction.checkpoint {
            // The record says who wrote the summary and what it cost.
            checkpoint.usage = Some(match (&summarizer, model) {
                (Some(calls), Some(model)) if calls.fell_back.is_none() => SummaryUsage {
                    model,
                    requests: calls.requests,
                    input_tokens: calls.input_tokens,
                    output_tokens: calls.output_tokens,
                },
                (Some(calls), _) => SummaryUsage {
                    model: "extractive".to_owned(),
                    requests: calls.requests,
                    input_tokens: calls.input_tokens,
                    output_tokens: calls.output_tokens,
                },
                (None, _) => SummaryUsage {
                    model: "extractive".to_owned(),
                    ..SummaryUsage::default()
                },
            });
        }
        if let SummaryOutcome::Failed { trigger, error } = &compaction.report.summary {
            tracing::warn!(?trigger, "{error}; the full history is kept");
        }
        let mut view = std::mem::take(&mut compaction.view);
        let mut stages = Vec::new();
        if mode.trace {
            stages.push(trace::pipeline_stage(
                log,
                checkpoint,
                &compaction,
                &view,
                pipeline_ms,
            ));
        }
        let mut processors = Vec::new();
        if let Some(runtime) = chain.runtime() {
            let services = self.services(info, handle);
            let mut failure = None;
            if mode.trace {
                // One at a time, to see each one's input and output.
                for p in chain.processors() {
                    let before = view.clone();
                    let outcome = runtime.run_with_services(
                        std::slice::from_ref(p),
                        info,
                        view,
                        services.clone(),
                    );
                    view = outcome.messages;
                    for report in &outcome.reports {
                        stages.push(trace::processor_stage(&before, &view, report));
                    }
                    processors.extend(outcome.reports);
                    if outcome.failure.is_some() {
                        failure = outcome.failure;
                        break;
                    }
                }
            } else {
                let outcome = runtime.run_with_services(chain.processors(), info, view, services);
                view = outcome.messages;
                processors = outcome.reports;
                failure = outcome.failure;
            }
            for report in &processors {
                observer.event(&EngineEvent::Processor(Box::new(report.clone())));
            }
            if let Some(error) = failure {
                return Err(EngineError::Processor(error));
            }
        }
        if let Some(v) = validate(&view).first() {
            return Err(EngineError::Internal(format!(
                "the view breaks a provider rule after the pipeline and processors: {v}"
            )));
        }
        Ok(Prepared {
            view,
            compaction,
            processors,
            summarizer,
            stages,
        })
    }
}

/// The most tokens the model's answer to an extraction request may take.
const EXTRACTION_ANSWER_TOKENS: u32 = 2_000;

/// How many of the newest messages [`Engine::volatile_tail`] reads for the
/// newest user message.
const VOLATILE_READ: usize = 64;

/// The context report of `session` in `store` under `config`: core's
/// pipeline run without a summarizer or processors, so it changes nothing
/// and needs no model. Blocking (it reads the store).
pub fn context_report(
    store: &dyn SessionStore,
    session: &SessionRef,
    config: &PipelineConfig,
) -> Result<(SessionMeta, Compaction)> {
    let (meta, log) = read_log(store, &existing(store, session)?)?;
    let compaction = pipeline::compact(
        &log,
        meta.checkpoints.last(),
        config,
        &HeuristicCounter::default(),
        None,
        Utc::now(),
    );
    Ok((meta, compaction))
}

/// The part of a session's log the pipeline needs, with the session's
/// metadata as read with it: after a checkpoint, only the leading system
/// messages and the messages from the last one it covers on (a tail read,
/// whose cost follows the messages since the checkpoint, not the whole log);
/// without one, every message (a summary would need them all).
fn read_log(store: &dyn SessionStore, meta: &SessionMeta) -> Result<(SessionMeta, Vec<Message>)> {
    let session = meta.reference();
    if let Some(checkpoint) = meta.checkpoints.last()
        && let Some(from) = TailStart::since(checkpoint)
    {
        let tail = store.load_tail(&session, from)?;
        if tail_reads_as_the_log(&tail, checkpoint) {
            let agent_host_store::Tail {
                meta,
                mut system,
                messages,
                ..
            } = tail;
            system.extend(messages);
            return Ok((meta, system));
        }
    }
    let history = store.load(&session)?;
    Ok((history.meta, history.messages))
}

/// Whether core's `split_log` finds in the tail what it finds in the whole
/// log: the checkpoint's pair is there, and no system message that the log
/// has after other messages would be taken for the system prompt (the
/// tail's first message follows messages it does not hold).
fn tail_reads_as_the_log(tail: &agent_host_store::Tail, checkpoint: &Checkpoint) -> bool {
    let has = |id: &str| tail.messages.iter().any(|m| m.id == id);
    let first_is_system = tail.messages.first().is_some_and(is_system_prompt);
    tail.found
        && has(&checkpoint.boundary_id)
        && has(&checkpoint.summary_id)
        && !(tail.skipped > 0 && first_is_system)
}

/// The session `session` names, which must exist.
fn existing(store: &dyn SessionStore, session: &SessionRef) -> Result<SessionMeta> {
    store
        .get(session)?
        .ok_or_else(|| EngineError::Store(agent_host_store::StoreError::NotFound(session.clone())))
}

/// The metadata key marking an answer that was cut off; its value is why.
pub const INCOMPLETE_KEY: &str = "incomplete";

/// What arrived of an answer cut off by `error`, as the assistant message
/// stored for it.
fn cut_answer(text: String, agent: &str, error: &ProviderError) -> Message {
    let mut m = Message::assistant(text);
    m.id = new_id();
    m.agent = Some(agent.to_owned());
    m.timestamp = Some(Utc::now());
    m.metadata.insert(
        INCOMPLETE_KEY.to_owned(),
        serde_json::Value::String(agent_host_core::error_kind::error_chain(error)),
    );
    m
}

/// The provider's failure, saying which model did `what` and that the turn
/// was not stored.
fn provider_error(provider: &Provider, what: &str, source: ProviderError) -> EngineError {
    let settings = provider.settings();
    EngineError::Provider {
        context: format!(
            "the {} model {} {what}; the turn was not stored",
            settings.kind, settings.model
        ),
        source,
    }
}

/// The agent a turn is for: the session's, else the one its key names,
/// else the engine's.
fn agent_of(
    asked: Option<&SessionRef>,
    session: Option<&SessionMeta>,
    config: &EngineConfig,
) -> String {
    match (session, asked) {
        (Some(meta), _) => meta.agent.clone(),
        (None, Some(SessionRef::Key { agent, .. })) => agent.clone(),
        (None, _) => config.agent.clone(),
    }
}

/// The user's message of a turn, stamped with the time, the session's agent
/// and the request's channel.
fn user_message(text: &str, channel: Option<&str>, agent: &str, now: DateTime<Utc>) -> Message {
    let mut user = Message::user(text).with_id(new_id());
    user.timestamp = Some(now);
    user.agent = Some(agent.to_owned());
    user.channel = Some(channel.unwrap_or(DEFAULT_CHANNEL).to_owned());
    user
}

/// A fresh message id.
fn new_id() -> String {
    format!("msg-{}", uuid::Uuid::new_v4().simple())
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_host_core::budget::BudgetConfig;
    use agent_host_store::FileStore;

    /// Regression (a heartbeat turn passed itself off as the session key
    /// `heartbeat`): processors are told of no session for a heartbeat, the
    /// asked key for a session not created yet, the stored key otherwise.
    #[test]
    fn processors_are_told_the_session_they_run_for() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn SessionStore> = Arc::new(FileStore::open(dir.path()).unwrap());
        let engine = Engine::new(EngineConfig::default(), store.clone(), &|_: &str| None).unwrap();
        let now = Utc::now();
        let heartbeat = engine.run_info(None, None, now);
        assert_eq!(heartbeat.session_key, None);
        assert_eq!(heartbeat.agent.as_deref(), Some("default"));
        let asked = SessionRef::key("coder", "telegram:1");
        let new = engine.run_info(None, Some(&asked), now);
        assert_eq!(new.session_key.as_deref(), Some("telegram:1"));
        assert_eq!(new.agent.as_deref(), Some("coder"));
        let meta = store
            .create(&NewSession::new("coder").with_key("telegram:2"))
            .unwrap();
        let stored = engine.run_info(Some(&meta), Some(&meta.reference()), now);
        assert_eq!(stored.session_key.as_deref(), Some("telegram:2"));
    }

    /// A tiny deterministic PRNG (xorshift64*).
    struct Prng(u64);

    impl Prng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
        }
    }

    /// The view and usage the pipeline makes from what `read_log` reads are
    /// the ones it makes from the whole log, over random compacted logs with
    /// system messages in the middle, kept messages before the checkpoint's
    /// pair, and tight budgets. (Regression guard for the tail read: a
    /// mid-log system message where the tail starts would have been taken
    /// for the system prompt.)
    #[test]
    fn the_tail_read_gives_the_whole_log_s_view() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileStore::open(dir.path()).unwrap();
        let now = "2026-01-01T00:00:00Z".parse::<DateTime<Utc>>().unwrap();
        let mut rng = Prng(0x9e37_79b9_7f4a_7c15);
        let mut tails = 0;
        for case in 0..150 {
            let session = store
                .create(&NewSession::new("default").with_key(format!("c{case}")))
                .unwrap()
                .reference();
            let mut log = Vec::new();
            if rng.below(4) > 0 {
                log.push(Message::system("Be terse.").with_id(format!("sys{case}")));
            }
            let n = 20 + rng.below(40) as usize;
            let mut body = Vec::new();
            for i in 0..n {
                let words = "word ".repeat(1 + rng.below(120) as usize);
                let id = format!("m{case}-{i}");
                body.push(match rng.below(10) {
                    0 => Message::system(format!("note {i}: {words}")).with_id(id),
                    1..=4 => Message::user(format!("ask {i}: {words}")).with_id(id),
                    _ => Message::assistant(format!("say {i}: {words}")).with_id(id),
                });
            }
            let covered = 1 + rng.below(n as u64 - 2) as usize;
            let kept = covered + rng.below((n - covered) as u64) as usize;
            let mut boundary =
                Message::user("[earlier messages summarized]").with_id(format!("b{case}"));
            boundary.synthetic = true;
            boundary.summary = true;
            let mut summary =
                Message::assistant("## Current State\nfine").with_id(format!("s{case}"));
            summary.synthetic = true;
            summary.summary = true;
            log.extend(body[..kept].iter().cloned());
            log.push(boundary);
            log.push(summary);
            log.extend(body[kept..].iter().cloned());
            store.append(&session, &log).unwrap();
            let checkpoint = Checkpoint {
                usage: None,
                boundary_id: format!("b{case}"),
                summary_id: format!("s{case}"),
                covers: body[..covered].iter().map(|m| m.id.clone()).collect(),
                created: now,
            };
            let meta = store.write_checkpoint(&session, &checkpoint).unwrap();

            let (_, read) = read_log(&store, &meta).unwrap();
            tails += usize::from(read.len() < log.len());
            let config = PipelineConfig {
                budget: BudgetConfig {
                    context_limit: 600 + rng.below(3_000) as u32,
                    response_reserve: 100,
                    ..BudgetConfig::default()
                },
                summary: None,
                ..PipelineConfig::default()
            };
            let counter = HeuristicCounter::default();
            let whole = pipeline::compact(&log, Some(&checkpoint), &config, &counter, None, now);
            let part = pipeline::compact(&read, Some(&checkpoint), &config, &counter, None, now);
            assert_eq!(part.view, whole.view, "case {case}");
            assert_eq!(part.report.usage, whole.report.usage, "case {case}");
        }
        assert!(
            tails > 50,
            "most cases read a tail, not the whole log: {tails}"
        );
    }
}
