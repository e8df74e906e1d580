//! One module per command group; each parses its own arguments (clap
//! derives), calls the libraries and renders the answer.

pub mod config;
pub mod context;
pub mod memory;
pub mod processor;
pub mod replay;
pub mod run;
pub mod serve;
pub mod sessions;
pub mod store;

use std::future::Future;
use std::sync::OnceLock;

use agent_host_core::format::{Limit, Limits};

/// `--limit`: the size limits on a history a command reads.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct LimitArgs {
    /// Set a limit on the history read, in its unit: history_mb (default 256), message_mb (64),
    /// history_values (4000000 JSON values), message_values (1000000), history_messages
    /// (500000). Repeat it, or list NAME=N pairs separated by commas (also in
    /// AGENT_HOST_LIMITS).
    #[arg(
        long = "limit",
        value_name = "NAME=N",
        env = "AGENT_HOST_LIMITS",
        value_delimiter = ',',
        value_parser = Limit::assignment
    )]
    limit: Vec<(Limit, u64)>,
}

impl LimitArgs {
    /// The defaults with what was set.
    pub fn limits(&self) -> Limits {
        let mut limits = Limits::default();
        for &(limit, value) in &self.limit {
            limits.set(limit, value);
        }
        limits
    }
}

/// Long-term memory for the turns of `serve`, `chat` and `run --message`:
/// whose memory, how its facts are extracted, and whether the model gets
/// the memory tools. Whose memory it is also scopes the `read-memory` host
/// service of processors granted it (`--allow-memory`), in every `run`.
#[derive(Clone, Debug, clap::Args)]
pub struct MemoryArgs {
    /// Whose long-term memory turns recall from and flush into (the store's memory, as
    /// `agent-host memory` and `/v1/memory` serve it): recalled facts go in each view's
    /// volatile tail, after the newest message; processors granted --allow-memory read its
    /// facts. None: turns and views use no memory [config: memory.user].
    #[arg(long, value_name = "USER")]
    pub memory_user: Option<String>,
    /// How facts are extracted: `offline` (explicit facts, at the flush before a summary)
    /// or `model` (the configured provider, every --extraction-threshold exchanges and at
    /// the flush; offline when it fails) [config: memory.extraction; default: offline].
    #[arg(long, value_name = "offline|model")]
    pub memory_extraction: Option<agent_host_config::MemoryExtraction>,
    /// Exchanges between two extractions by the model [config:
    /// memory.extraction_threshold; default: 5].
    #[arg(long, value_name = "N")]
    pub extraction_threshold: Option<usize>,
    /// Offer the model the memory tools (`memory_search`, `memory_write`,
    /// `memory_recall`) in every turn; agent-host runs the calls it makes and asks again
    /// (at most 4 rounds a turn), and stores them with the turn [config: memory.tools].
    #[arg(long)]
    pub memory_tools: bool,
}

impl MemoryArgs {
    /// Whose memory it is: `--memory-user`, else `user` in the file's
    /// `[memory]` (`file`); none when neither names one. A bad name given
    /// as the flag is refused with what a name must be.
    pub fn user(&self, file: &agent_host_config::MemorySettings) -> anyhow::Result<Option<String>> {
        match &self.memory_user {
            Some(user) if !agent_host_config::valid_memory_user(user) => {
                anyhow::bail!("--memory-user must name a user in 1 to 256 bytes, not {user:?}")
            }
            Some(user) => Ok(Some(user.clone())),
            None => Ok(file.user.clone()),
        }
    }

    /// The memory configuration these flags and the file's `[memory]`
    /// (`file`) ask for, a flag outranking the file, over the memory `open`
    /// gives (called only when a user is named); `has_provider` says whether
    /// a model is configured. A bad user name or threshold, the memory tools
    /// or model extraction without a user, or model extraction without a
    /// model, is refused with what to do.
    pub fn config(
        &self,
        file: &agent_host_config::MemorySettings,
        open: impl FnOnce() -> anyhow::Result<std::sync::Arc<agent_host_store::memory::MemoryStore>>,
        has_provider: bool,
    ) -> anyhow::Result<Option<agent_host_engine::MemoryConfig>> {
        use agent_host_config::MemoryExtraction;
        let mut settings = file.clone();
        settings.user = self.user(file)?;
        if let Some(extraction) = self.memory_extraction {
            settings.extraction = extraction;
        }
        if let Some(threshold) = self.extraction_threshold {
            if threshold == 0 {
                anyhow::bail!("--extraction-threshold must be at least 1");
            }
            settings.extraction_threshold = threshold;
        }
        settings.tools |= self.memory_tools;
        let no_user =
            "name whose memory it is: --memory-user USER, or `user` in [memory] of agent-host.toml";
        if settings.extraction == MemoryExtraction::Model {
            if settings.user.is_none() {
                anyhow::bail!("model extraction of memory facts needs a user: {no_user}");
            }
            if !has_provider {
                anyhow::bail!(
                    "model extraction of memory facts needs a provider (--provider and --model, or [provider] in agent-host.toml)"
                );
            }
        }
        if settings.tools && settings.user.is_none() {
            anyhow::bail!("the memory tools need a user: {no_user}");
        }
        if settings.user.is_none() {
            return Ok(None);
        }
        Ok(settings.engine_config(open()?))
    }
}

/// The long-term memory kept beside the sessions of the store `spec`.
pub fn open_memory(
    spec: &str,
) -> anyhow::Result<std::sync::Arc<agent_host_store::memory::MemoryStore>> {
    use anyhow::Context;
    let memory = agent_host_store::memory::MemoryStore::open(spec).with_context(|| {
        format!(
            "cannot open the memory of the store {}",
            agent_host_store::redact(spec)
        )
    })?;
    Ok(std::sync::Arc::new(memory))
}

/// Runs an engine future to completion on the command line's async
/// runtime (a multi-thread one: the engine's blocking tasks block on its
/// handle while a summary is written).
pub fn block_on<F: Future>(future: F) -> F::Output {
    runtime().block_on(future)
}

/// The command line's async runtime.
fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("agent-host-io")
            .enable_all()
            .build()
            .expect("the async runtime starts")
    })
}

/// A handle on the command line's async runtime, for library code that
/// blocks on it from this thread (the host services of `run`).
pub(crate) fn runtime_handle() -> tokio::runtime::Handle {
    runtime().handle().clone()
}

/// Runs the engine call `start` makes, handing every event it reports to
/// `on_event` on this thread as it arrives (so `on_event` may write to the
/// command's output), and returns the call's result once every event
/// before it was handled.
pub fn with_events<T, F: Future<Output = T>>(
    start: impl FnOnce(std::sync::Arc<dyn agent_host_engine::Observer>) -> F,
    on_event: &mut dyn FnMut(agent_host_engine::EngineEvent),
) -> T {
    use agent_host_engine::{EngineEvent, Observer};

    struct Forward(tokio::sync::mpsc::UnboundedSender<EngineEvent>);
    impl Observer for Forward {
        fn event(&self, event: &EngineEvent) {
            // The receiver lives until the call's result is in.
            let _ = self.0.send(event.clone());
        }
    }

    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let call = start(std::sync::Arc::new(Forward(tx)));
    block_on(async move {
        let mut call = std::pin::pin!(call);
        let result = loop {
            tokio::select! {
                biased;
                Some(event) = rx.recv() => on_event(event),
                result = &mut call => break result,
            }
        };
        while let Ok(event) = rx.try_recv() {
            on_event(event);
        }
        result
    })
}
