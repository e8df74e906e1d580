//! The host services a processor may ask for (contract 0.2.0): a summary
//! written by the session's model, token counts with the session's
//! tokenizer, and a read of the session's long-term memory.
//!
//! Each is closed unless the user grants it to the processor
//! (`--allow-summarize`, `--allow-count-tokens`, `--allow-memory`, or
//! `allow_summarize = true` ... in its `[[processors]]` entry), and each
//! call spends the processor's budget for the run. A call that is not
//! granted or over the budget is a [`ServiceError`], never a trap: handle
//! it, usually by leaving the history as it is.
//!
//! The host calls the model: the processor never sees a key or an
//! endpoint. Built against contract 0.1.0 (`contract-0-1`), every call is
//! [`ServiceError::Denied`]. Natively (an author's tests), `summarize`
//! answers with what [`crate::testing::serve_summaries`] set (else it
//! fails), `count_tokens` with the host's default estimate, and
//! `read_memory` with no facts.

use std::fmt;

use crate::Timestamp;

/// Why a host service gave no answer.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServiceError {
    /// The user has not granted the service to this processor; the text
    /// names the grant.
    Denied(String),
    /// The call would go over the processor's budget for the run.
    OverBudget(String),
    /// The service was tried and failed (the model timed out, none is
    /// configured, ...).
    Failed(String),
}

impl fmt::Display for ServiceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServiceError::Denied(m) => write!(f, "denied: {m}"),
            ServiceError::OverBudget(m) => write!(f, "over budget: {m}"),
            ServiceError::Failed(m) => write!(f, "failed: {m}"),
        }
    }
}

impl std::error::Error for ServiceError {}

/// What a processor asks of one [`summarize`] call; the host lowers each
/// cap to what the budget leaves. 0 (the default) is the host's cap.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SummaryCaps {
    /// The most tokens the summary may take.
    pub max_tokens: u32,
    /// The most time the call may take, in milliseconds.
    pub timeout_ms: u32,
}

/// A summary the model wrote, and what it cost.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Summary {
    /// Its text.
    pub text: String,
    /// Tokens the model read.
    pub input_tokens: u64,
    /// Tokens the model wrote.
    pub output_tokens: u64,
}

/// A fact of the session's long-term memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fact {
    /// Its id.
    pub id: String,
    /// What it is about.
    pub entity: String,
    /// The fact, as a sentence.
    pub text: String,
    /// The single-valued attribute it fills.
    pub attribute: Option<String>,
    /// The attribute's value.
    pub value: Option<String>,
    /// When it was recorded.
    pub recorded: Timestamp,
}

/// Has the session's model write `text` up as `prompt` (the instructions)
/// asks, within `caps`. Blocks while the model answers; the time is not
/// counted against the processor's deadline. Needs the `summarize` grant.
///
/// ```
/// use agent_host_guest::{ServiceError, SummaryCaps, summarize};
///
/// match summarize("Summarize in one line.", "a long story", SummaryCaps::default()) {
///     Ok(summary) => println!("{}", summary.text),
///     // Not granted, over budget, or no model: keep the history as it is.
///     Err(e) => println!("no summary: {e}"),
/// }
/// ```
pub fn summarize(prompt: &str, text: &str, caps: SummaryCaps) -> Result<Summary, ServiceError> {
    imp::summarize(prompt, text, caps)
}

/// The number of tokens `text` takes with the session's tokenizer. Needs
/// the `count-tokens` grant ([`estimate_tokens`](crate::estimate_tokens)
/// needs none, and is the host's quick estimate).
pub fn count_tokens(text: &str) -> Result<u32, ServiceError> {
    imp::count_tokens(text)
}

/// The facts of the session's long-term memory that best match `query`
/// (the newest for an empty one), at most `limit` (the host caps it): the
/// run's user's facts with the run's agent only. Needs the `memory` grant.
pub fn read_memory(query: &str, limit: u32) -> Result<Vec<Fact>, ServiceError> {
    imp::read_memory(query, limit)
}

#[cfg(all(target_arch = "wasm32", not(feature = "contract-0-1")))]
mod imp {
    use super::{Fact, ServiceError, Summary, SummaryCaps};
    use crate::bindings::agent_host::history::services as wit;

    fn error(e: wit::ServiceError) -> ServiceError {
        match e {
            wit::ServiceError::Denied(m) => ServiceError::Denied(m),
            wit::ServiceError::OverBudget(m) => ServiceError::OverBudget(m),
            wit::ServiceError::Failed(m) => ServiceError::Failed(m),
        }
    }

    pub(super) fn summarize(
        prompt: &str,
        text: &str,
        caps: SummaryCaps,
    ) -> Result<Summary, ServiceError> {
        let caps = wit::SummarizeCaps {
            max_tokens: caps.max_tokens,
            timeout_ms: caps.timeout_ms,
        };
        wit::summarize(prompt, text, caps)
            .map(|s| Summary {
                text: s.text,
                input_tokens: s.input_tokens,
                output_tokens: s.output_tokens,
            })
            .map_err(error)
    }

    pub(super) fn count_tokens(text: &str) -> Result<u32, ServiceError> {
        wit::count_tokens(text).map_err(error)
    }

    pub(super) fn read_memory(query: &str, limit: u32) -> Result<Vec<Fact>, ServiceError> {
        wit::read_memory(query, limit)
            .map(|facts| {
                facts
                    .into_iter()
                    .map(|f| Fact {
                        id: f.id,
                        entity: f.entity,
                        text: f.text,
                        attribute: f.attribute,
                        value: f.value,
                        recorded: f.recorded,
                    })
                    .collect()
            })
            .map_err(error)
    }
}

#[cfg(all(target_arch = "wasm32", feature = "contract-0-1"))]
mod imp {
    use super::{Fact, ServiceError, Summary, SummaryCaps};

    fn none() -> ServiceError {
        ServiceError::Denied("contract 0.1.0 has no host services; build against 0.2.0".into())
    }

    pub(super) fn summarize(_: &str, _: &str, _: SummaryCaps) -> Result<Summary, ServiceError> {
        Err(none())
    }

    pub(super) fn count_tokens(_: &str) -> Result<u32, ServiceError> {
        Err(none())
    }

    pub(super) fn read_memory(_: &str, _: u32) -> Result<Vec<Fact>, ServiceError> {
        Err(none())
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod imp {
    use std::cell::RefCell;

    use super::{Fact, ServiceError, Summary, SummaryCaps};

    /// What answers `summarize` natively: (prompt, text) to a summary's text.
    pub(crate) type Summaries = Box<dyn FnMut(&str, &str) -> Result<String, ServiceError>>;

    thread_local! {
        pub(crate) static SUMMARIES: RefCell<Option<Summaries>> = const { RefCell::new(None) };
    }

    pub(super) fn summarize(
        prompt: &str,
        text: &str,
        _: SummaryCaps,
    ) -> Result<Summary, ServiceError> {
        SUMMARIES.with(|s| match s.borrow_mut().as_mut() {
            Some(f) => f(prompt, text).map(|summary| Summary {
                input_tokens: u64::from(crate::estimate_tokens(prompt))
                    + u64::from(crate::estimate_tokens(text)),
                output_tokens: u64::from(crate::estimate_tokens(&summary)),
                text: summary,
            }),
            None => Err(ServiceError::Failed(
                "no summaries are served outside WebAssembly unless a test sets them \
                 (testing::serve_summaries)"
                    .into(),
            )),
        })
    }

    pub(super) fn count_tokens(text: &str) -> Result<u32, ServiceError> {
        Ok(crate::estimate_tokens(text))
    }

    pub(super) fn read_memory(_: &str, _: u32) -> Result<Vec<Fact>, ServiceError> {
        Ok(Vec::new())
    }
}

#[cfg(not(target_arch = "wasm32"))]
pub(crate) use imp::{SUMMARIES, Summaries};
