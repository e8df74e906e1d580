//! One module per command group; each parses its own arguments (clap
//! derives), calls the libraries and renders the answer.

pub mod config;
pub mod context;
pub mod memory;
pub mod processor;
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

/// Runs an engine future to completion on the command line's async
/// runtime (a multi-thread one: the engine's blocking tasks block on its
/// handle while a summary is written).
pub fn block_on<F: Future>(future: F) -> F::Output {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("agent-host-io")
                .enable_all()
                .build()
                .expect("the async runtime starts")
        })
        .block_on(future)
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
