//! Running a processor natively, for its unit tests: the same code as in the
//! component, with the host's imports served locally (see
//! [`estimate_tokens`](crate::estimate_tokens)).
//!
//! The host does more than this: it checks the edits, validates the result
//! against the provider rules and gives new messages ids. Test those paths
//! through the real host (`agent-host run`); test your logic here.

use crate::{History, Message, Processor, Result, RunContext, Timestamp, Usage};

/// Runs processor `P` with the JSON configuration `config` over `messages`
/// and returns the history it produces. Messages whose `tokens` is 0 get the
/// host's estimate first, as the host would give them.
///
/// ```
/// use agent_host_guest::{History, Message, NoConfig, Processor, Result, Role, testing};
///
/// struct Nothing;
/// impl Processor for Nothing {
///     type Config = NoConfig;
///     fn process(_: &mut History, _: NoConfig) -> Result<()> { Ok(()) }
/// }
///
/// let out = testing::run::<Nothing>("{}", vec![Message::new(Role::User, "hi")])?;
/// assert_eq!(out.len(), 1);
/// assert!(out[0].tokens > 0);
/// # Ok::<(), agent_host_guest::Error>(())
/// ```
pub fn run<P: Processor>(config: &str, messages: Vec<Message>) -> Result<Vec<Message>> {
    run_in::<P>(context(config), messages)
}

/// [`run`] with a run context of your own: a fixed `now` for time windows,
/// a small `budget`, a session key. The configuration is `ctx.config`.
///
/// ```
/// use agent_host_guest::{History, NoConfig, Processor, Result, Timestamp, testing};
///
/// struct Clock;
/// impl Processor for Clock {
///     type Config = NoConfig;
///     fn process(history: &mut History, _: NoConfig) -> Result<()> {
///         assert_eq!(history.context().now.seconds, 1_700_000_000);
///         Ok(())
///     }
/// }
///
/// let mut ctx = testing::context("{}");
/// ctx.now = Timestamp { seconds: 1_700_000_000, nanoseconds: 0 };
/// testing::run_in::<Clock>(ctx, vec![])?;
/// # Ok::<(), agent_host_guest::Error>(())
/// ```
pub fn run_in<P: Processor>(
    mut ctx: RunContext,
    mut messages: Vec<Message>,
) -> Result<Vec<Message>> {
    for m in &mut messages {
        if m.tokens == 0 {
            m.tokens = crate::estimate_message_tokens(m);
        }
    }
    let config_value = crate::error::parse_config::<P::Config>(&ctx.config)?;
    ctx.total_tokens = messages.iter().map(|m| m.tokens).sum();
    let mut history = History::new(ctx, messages);
    P::process(&mut history, config_value)?;
    Ok(history.into_messages())
}

/// A run context for tests: a 128,000-token window, the budget as large, the
/// current time and `config` as the configuration text.
pub fn context(config: &str) -> RunContext {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    RunContext {
        session_key: None,
        agent: None,
        model: None,
        context_window: 128_000,
        budget: 128_000,
        total_tokens: 0,
        turn: 0,
        usage: Usage {
            input_tokens: 0,
            output_tokens: 0,
            cache_read_tokens: None,
            cache_write_tokens: None,
        },
        now: Timestamp {
            seconds: i64::try_from(now.as_secs()).unwrap_or(i64::MAX),
            nanoseconds: now.subsec_nanos(),
        },
        config: config.into(),
    }
}

/// Serves [`summarize`](crate::summarize) on this thread, natively, with
/// `summaries` (the prompt and the text to the summary's text, or an error),
/// until [`stop_serving_summaries`]: a processor that asks the host for
/// summaries can then be tested with [`run`].
///
/// ```
/// use agent_host_guest::{ServiceError, SummaryCaps, summarize, testing};
///
/// testing::serve_summaries(|_prompt, text| Ok(format!("{} bytes", text.len())));
/// assert_eq!(summarize("p", "abc", SummaryCaps::default())?.text, "3 bytes");
/// testing::serve_summaries(|_, _| Err(ServiceError::OverBudget("spent".into())));
/// assert!(summarize("p", "abc", SummaryCaps::default()).is_err());
/// testing::stop_serving_summaries();
/// # Ok::<(), ServiceError>(())
/// ```
pub fn serve_summaries(
    summaries: impl FnMut(&str, &str) -> std::result::Result<String, crate::ServiceError> + 'static,
) {
    let summaries: crate::services::Summaries = Box::new(summaries);
    crate::services::SUMMARIES.with(|s| *s.borrow_mut() = Some(summaries));
}

/// Stops what [`serve_summaries`] set: `summarize` fails again.
pub fn stop_serving_summaries() {
    crate::services::SUMMARIES.with(|s| *s.borrow_mut() = None);
}
