//! The turn engine: store -> pipeline -> processors -> validation -> budget
//! -> model, and the reply stored.
//!
//! One [`Engine`] serves a `run --message`, a whole `chat` session or a
//! `context` report. A turn ([`Engine::turn`]):
//!
//! 1. loads the session and its latest checkpoint;
//! 2. adds the user's message to the log (in memory);
//! 3. runs core's pipeline (repair, doom loops, pruning, a summary when a
//!    trigger fires, budget packing, emergency truncation) with the LLM
//!    summarizer (or the extractive one), then the processors in the
//!    sandbox, then validates the view;
//! 4. stores a new checkpoint pair, if one was made, before calling the
//!    model (a summary is costly: it is kept even when the model then fails)
//!    and emits a `context_compacted` event;
//! 5. sends the view; a context-length error runs the pipeline again in its
//!    aggressive pruning mode and retries once;
//! 6. appends the user's message and the reply in one durable write, so a
//!    failed turn leaves no question without its answer in the log.
//!
//! Without a provider the engine is offline: [`Engine::turn`] prepares the
//! view and returns it without storing anything, so what would be sent can
//! be printed. Heartbeat turns ([`Engine::heartbeat`]) neither load nor save
//! history.
//!
//! Model calls are async (reqwest); the engine owns a small tokio runtime
//! (one worker thread) and blocks on it, so callers and core's synchronous
//! summarizer trait stay synchronous.

use std::path::PathBuf;
use std::sync::Arc;

use agent_host_core::extractive::ExtractiveSummarizer;
use agent_host_core::pipeline::{self, Compaction, PipelineConfig, SummaryOutcome};
use agent_host_core::session::Checkpoint;
use agent_host_core::summarize::Summarizer;
use agent_host_core::validate::validate;
use agent_host_core::{HeuristicCounter, Message, TokenCounter};
use anyhow::{Context, Result, bail};
use chrono::{DateTime, Utc};

use crate::provider::{ChatRequest, Provider, ProviderError, ProviderSettings, StreamEvent};
use crate::runtime::{Processor, ProcessorOptions, ProcessorReport, RunInfo, Runtime};
use crate::store::{SessionMeta, SessionRef, SessionStore};
use crate::summarizer::{Calls, LlmSummarizer};

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
    /// Summarize when a trigger fires (otherwise only `/summarize` does).
    pub auto_summarize: bool,
    /// The model to talk to; `None` is offline.
    pub provider: Option<ProviderSettings>,
    /// Who writes summaries.
    pub summarizer: SummarizerChoice,
    /// Let the extractive summarizer stand in when the LLM summarizer fails.
    pub extractive_fallback: bool,
    /// The processors to run on every view, in order.
    pub processors: Vec<(PathBuf, ProcessorOptions)>,
    /// Where compiled processors are cached (`None`: no cache).
    pub cache_dir: Option<PathBuf>,
    /// The agent new messages are written for.
    pub agent: String,
    /// Print nothing on standard error (processor builds, the summary spinner).
    pub quiet: bool,
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
            cache_dir: crate::runtime::CompileCache::default_root(),
            agent: crate::store::DEFAULT_AGENT.to_owned(),
            quiet: true,
        }
    }
}

impl EngineConfig {
    /// The engine the effective configuration describes; `processors`, when
    /// given (from the command line), replaces the configured chain.
    pub fn from_settings(
        settings: &crate::config::Settings,
        processors: Option<Vec<(PathBuf, ProcessorOptions)>>,
    ) -> Self {
        let summarizer = match settings.context.summarizer {
            crate::config::SummarizerKind::Llm => SummarizerChoice::Llm,
            crate::config::SummarizerKind::Extractive => SummarizerChoice::Extractive,
        };
        let mut pipeline = settings.pipeline_config();
        // Off only stops the triggers: `/summarize` still summarizes, with
        // the configured thresholds (the engine gives the pipeline no
        // summarizer unless a summary is forced).
        pipeline.summary = Some(settings.context.summary_config());
        EngineConfig {
            pipeline,
            auto_summarize: settings.context.auto_summarize,
            provider: settings.provider.clone(),
            summarizer,
            extractive_fallback: settings.context.extractive_fallback,
            processors: processors.unwrap_or_else(|| settings.processor_options()),
            ..EngineConfig::default()
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
}

/// Runs turns; see the [module documentation](self).
pub struct Engine {
    config: EngineConfig,
    store: Arc<dyn SessionStore>,
    provider: Option<Provider>,
    runtime: Option<Runtime>,
    processors: Vec<Processor>,
    rt: tokio::runtime::Runtime,
    counter: HeuristicCounter,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("config", &self.config)
            .field("processors", &self.processors.len())
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// An engine over `store`: makes the provider (reading its API key now)
    /// and loads (building, for crate folders) every processor.
    pub fn new(config: EngineConfig, store: Arc<dyn SessionStore>) -> Result<Engine> {
        // One worker thread drives the HTTP connections, so the summarizer
        // can block on a plain handle from inside core's synchronous
        // pipeline (a current-thread runtime's handle cannot drive I/O).
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("agent-host-io")
            .enable_all()
            .build()
            .context("cannot start the async runtime")?;
        let provider = match &config.provider {
            Some(settings) => {
                // reqwest's client must be built inside the runtime it runs on.
                let _guard = rt.enter();
                Some(Provider::new(settings.clone())?)
            }
            None => None,
        };
        if config.summarizer == SummarizerChoice::Llm && provider.is_none() {
            bail!(
                "the LLM summarizer needs a provider: configure [provider] (or --provider and --model), or set `context.summarizer = \"extractive\"`"
            );
        }
        let (runtime, processors) = match crate::run::load_chain(
            config.cache_dir.clone(),
            &config.processors,
            config.quiet,
        )? {
            Some((runtime, processors)) => (Some(runtime), processors),
            None => (None, Vec::new()),
        };
        Ok(Engine {
            config,
            store,
            provider,
            runtime,
            processors,
            rt,
            counter: HeuristicCounter::default(),
        })
    }

    /// The store sessions live in.
    pub fn store(&self) -> &dyn SessionStore {
        self.store.as_ref()
    }

    /// The configured provider, if any.
    pub fn provider(&self) -> Option<&Provider> {
        self.provider.as_ref()
    }

    /// The configuration the engine was made with.
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// The token counter used for budgets and reports.
    pub fn counter(&self) -> &dyn TokenCounter {
        &self.counter
    }

    /// Runs the pipeline over `log` (whose latest checkpoint is `checkpoint`),
    /// then the processors, and validates the view.
    pub fn prepare(
        &self,
        log: &[Message],
        checkpoint: Option<&Checkpoint>,
        mode: Mode,
        info: &RunInfo,
    ) -> Result<Prepared> {
        let mut config = self.config.pipeline.clone();
        config.aggressive = mode.aggressive;
        config.force_summary = mode.force_summary;
        let summarize = (self.config.auto_summarize || mode.force_summary) && !mode.no_summary;
        let llm = match (&self.provider, self.config.summarizer) {
            (Some(provider), SummarizerChoice::Llm) if summarize => Some(
                LlmSummarizer::new(provider.clone(), self.rt.handle().clone())
                    .with_fallback(self.config.extractive_fallback)
                    .with_progress(!self.config.quiet),
            ),
            _ => None,
        };
        let extractive = ExtractiveSummarizer::default();
        let summarizer: Option<&dyn Summarizer> = match (&llm, summarize) {
            (Some(llm), _) => Some(llm),
            (None, true) => Some(&extractive),
            (None, false) => None,
        };
        let mut compaction = pipeline::compact(
            log,
            checkpoint,
            &config,
            &self.counter,
            summarizer,
            info.now,
        );
        let summarizer = llm.map(|s| s.calls());
        if let SummaryOutcome::Failed { trigger, error } = &compaction.report.summary {
            tracing::warn!(?trigger, "{error}; the full history is kept");
        }
        let mut view = std::mem::take(&mut compaction.view);
        let mut processors = Vec::new();
        if let Some(runtime) = &self.runtime {
            let outcome = runtime.run(&self.processors, info, view);
            view = outcome.messages;
            processors = outcome.reports;
            if let Some(error) = outcome.failure {
                return Err(crate::run::fail(error));
            }
        }
        if let Some(v) = validate(&view).first() {
            bail!("the view breaks a provider rule after the pipeline and processors: {v}");
        }
        Ok(Prepared {
            view,
            compaction,
            processors,
            summarizer,
        })
    }

    /// What the host tells processors about this turn.
    fn run_info(&self, session: Option<&SessionMeta>, now: DateTime<Utc>) -> RunInfo {
        let budget = &self.config.pipeline.budget;
        RunInfo {
            session_key: session.and_then(|s| s.key.clone()),
            agent: Some(session.map_or_else(|| self.config.agent.clone(), |s| s.agent.clone())),
            model: self.provider.as_ref().map(|p| p.settings().model.clone()),
            context_window: budget.context_limit,
            budget: budget.available(),
            now,
        }
    }

    /// The session `name` stands for: the session with this id, which must
    /// exist (an id never becomes a key), else the key `name` of `agent`.
    pub fn reference(&self, name: &str, agent: &str) -> Result<SessionRef> {
        match uuid::Uuid::parse_str(name) {
            Ok(id) if self.store.get(&SessionRef::Id(id))?.is_some() => Ok(SessionRef::Id(id)),
            Ok(id) => bail!(
                "there is no session with id {id}; `agent-host sessions list` (or /sessions) shows them"
            ),
            Err(_) => Ok(SessionRef::key(agent, name)),
        }
    }

    /// Opens the session `session` names, creating it when it is a key that
    /// has none yet.
    pub fn open(&self, session: &SessionRef) -> Result<SessionMeta> {
        match session {
            SessionRef::Key { agent, key } => {
                let new = crate::store::NewSession::new(agent.clone()).with_key(key.clone());
                Ok(self.store.get_or_create(&new)?.meta)
            }
            SessionRef::Id(id) => self
                .store
                .get(session)?
                .with_context(|| format!("there is no session with id {id}")),
        }
    }

    /// One turn of `session` with the user's `text`; streamed pieces of the
    /// answer go to `on_event`. See the [module documentation](self).
    pub fn turn(
        &self,
        session: &SessionRef,
        text: &str,
        on_event: &mut dyn FnMut(StreamEvent),
    ) -> Result<TurnOutcome> {
        let now = Utc::now();
        let Some(provider) = &self.provider else {
            return self.offline_turn(session, text, now);
        };
        let meta = self.open(session)?;
        let session = meta.reference();
        let history = self.store.load(&session)?;
        let mut checkpoint = history.meta.checkpoints.last().cloned();
        let mut log = history.messages;
        let user = self.user_message(text, &meta.agent, now);
        log.push(user.clone());
        let info = self.run_info(Some(&meta), now);
        let mut prepared = self.prepare(&log, checkpoint.as_ref(), Mode::default(), &info)?;
        self.keep_checkpoint(&session, &mut log, &mut checkpoint, &prepared, true)?;

        let mut aggressive_retry = None;
        let mut first_attempt = None;
        let reply = match self.send(provider, &prepared.view, on_event) {
            Err(ProviderError::ContextLength { message, .. }) => {
                tracing::warn!(
                    "the provider refused the context as too long ({message}); pruning aggressively and retrying once"
                );
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
                };
                let retry = self.prepare(&log, checkpoint.as_ref(), mode, &info)?;
                first_attempt = Some(std::mem::replace(&mut prepared, retry));
                self.keep_checkpoint(&session, &mut log, &mut checkpoint, &prepared, true)?;
                self.send(provider, &prepared.view, on_event)
            }
            other => other,
        }
        .with_context(|| {
            format!(
                "the {} model {} did not answer; the turn was not stored",
                provider.settings().kind,
                provider.settings().model
            )
        })?;
        let mut reply = reply;
        reply.id = new_id();
        reply.agent = Some(meta.agent.clone());
        if reply.timestamp.is_none() {
            reply.timestamp = Some(Utc::now());
        }
        let stored = self
            .store
            .append(&session, &[user.clone(), reply.clone()])
            .context("cannot store the turn")?;
        Ok(TurnOutcome {
            user,
            reply: Some(reply),
            prepared,
            aggressive_retry,
            first_attempt,
            session: Some(stored),
        })
    }

    /// A turn without a provider: the view that would be sent, with nothing
    /// created or stored (a session that does not exist yet stays so).
    fn offline_turn(
        &self,
        session: &SessionRef,
        text: &str,
        now: DateTime<Utc>,
    ) -> Result<TurnOutcome> {
        let (meta, mut log, checkpoint) = match self.store.get(session)? {
            Some(meta) => {
                let history = self.store.load(&meta.reference())?;
                let checkpoint = history.meta.checkpoints.last().cloned();
                (Some(history.meta), history.messages, checkpoint)
            }
            None if matches!(session, SessionRef::Key { .. }) => (None, Vec::new(), None),
            None => bail!("there is no session {session}"),
        };
        let agent = match session {
            SessionRef::Key { agent, .. } => agent.clone(),
            SessionRef::Id(_) => self.config.agent.clone(),
        };
        let user = self.user_message(text, &agent, now);
        log.push(user.clone());
        let info = self.run_info(meta.as_ref(), now);
        let prepared = self.prepare(&log, checkpoint.as_ref(), Mode::default(), &info)?;
        Ok(TurnOutcome {
            user,
            reply: None,
            prepared,
            aggressive_retry: None,
            first_attempt: None,
            session: meta,
        })
    }

    /// A turn with no history: the text alone (after the system prompt of
    /// nothing) goes to the model, and nothing is loaded or stored.
    pub fn heartbeat(
        &self,
        text: &str,
        on_event: &mut dyn FnMut(StreamEvent),
    ) -> Result<TurnOutcome> {
        let now = Utc::now();
        let user = self.user_message(text, &self.config.agent, now);
        let log = vec![user.clone()];
        let info = self.run_info(None, now);
        let mode = Mode::default();
        let prepared = self.prepare(&log, None, mode, &info)?;
        let reply = match &self.provider {
            None => None,
            Some(provider) => Some(
                self.send(provider, &prepared.view, on_event)
                    .context("the heartbeat turn failed")?,
            ),
        };
        Ok(TurnOutcome {
            user,
            reply,
            prepared,
            aggressive_retry: None,
            first_attempt: None,
            session: None,
        })
    }

    /// Summarizes `session` now, whatever the triggers say, and stores the
    /// checkpoint (`/summarize`).
    pub fn summarize(&self, session: &SessionRef) -> Result<Prepared> {
        let now = Utc::now();
        let history = self.store.load(session)?;
        let meta = history.meta;
        let mut checkpoint = meta.checkpoints.last().cloned();
        let mut log = history.messages;
        let info = self.run_info(Some(&meta), now);
        let mode = Mode {
            force_summary: true,
            ..Mode::default()
        };
        let prepared = self.prepare(&log, checkpoint.as_ref(), mode, &info)?;
        self.keep_checkpoint(
            &meta.reference(),
            &mut log,
            &mut checkpoint,
            &prepared,
            false,
        )?;
        Ok(prepared)
    }

    /// The context report of `session`: what the next view holds and how
    /// close each summarization trigger is, without summarizing, storing or
    /// running processors.
    pub fn context(&self, session: &SessionRef) -> Result<(SessionMeta, Compaction)> {
        let mut config = self.config.pipeline.clone();
        if !self.config.auto_summarize {
            // As `agent-host context` shows it: no trigger fires.
            config.summary = None;
        }
        crate::context::compute(self.store.as_ref(), session, &config)
    }

    /// Stores the checkpoint `prepared` made, if any: the pair goes to the
    /// log and the checkpoint to the metadata; `log` and `checkpoint` follow.
    /// `pending`: the log's last message is this turn's user message, not
    /// stored yet.
    fn keep_checkpoint(
        &self,
        session: &SessionRef,
        log: &mut Vec<Message>,
        checkpoint: &mut Option<Checkpoint>,
        prepared: &Prepared,
        pending: bool,
    ) -> Result<()> {
        let Some(new) = &prepared.compaction.checkpoint else {
            return Ok(());
        };
        self.store
            .append(session, &prepared.compaction.append)
            .context("cannot store the summary checkpoint")?;
        self.store
            .write_checkpoint(session, new)
            .context("cannot record the summary checkpoint")?;
        // A pending user message (the log's last entry, stored with the
        // reply) comes after the pair, as it will in the store.
        let at = log.len() - usize::from(pending && !log.is_empty());
        log.splice(at..at, prepared.compaction.append.iter().cloned());
        *checkpoint = Some(new.clone());
        let calls = prepared.summarizer.as_ref();
        tracing::info!(
            event = "context_compacted",
            session = %session,
            covered = new.covers.len(),
            summarizer = match calls {
                Some(c) if c.fell_back.is_none() => "llm",
                _ => "extractive",
            },
            requests = calls.map_or(0, |c| c.requests),
            "context compacted: {} messages summarized into a checkpoint",
            new.covers.len()
        );
        Ok(())
    }

    fn send(
        &self,
        provider: &Provider,
        view: &[Message],
        on_event: &mut dyn FnMut(StreamEvent),
    ) -> Result<Message, ProviderError> {
        let request = ChatRequest {
            messages: view.to_vec(),
            ..ChatRequest::default()
        };
        self.rt
            .block_on(provider.complete(&request, on_event))
            .map(|reply| reply.message)
    }

    fn user_message(&self, text: &str, agent: &str, now: DateTime<Utc>) -> Message {
        let mut user = Message::user(text).with_id(new_id());
        user.timestamp = Some(now);
        user.agent = Some(agent.to_owned());
        user.channel = Some("cli".to_owned());
        user
    }
}

/// A fresh message id.
fn new_id() -> String {
    format!("msg-{}", uuid::Uuid::new_v4().simple())
}
