//! Host services for contract 0.2.0 processors: a summary written by the
//! session's model, token counts with the session's tokenizer, and a read
//! of the session's long-term memory (`agent-host:history/services`).
//!
//! The runtime owns the rules, the embedder owns the work. Every call a
//! guest makes goes through one place, [`Meter::serve`]: the grant is
//! checked ([`Grants`]), then the budget ([`ServiceBudget`]: calls, model
//! tokens, time per run), then the embedder's [`HostServices`] is asked
//! with a [`ServiceRequest`] and answers with a [`ServiceAnswer`] or a
//! [`ServiceError`]; what it cost is charged, and the call is recorded in
//! the processor's report as a [`ServiceCall`]. A refusal is an answer the
//! guest reads (`service-error`), never a trap.
//!
//! The runtime cannot reach a model or a store (it depends on core only):
//! the engine implements [`HostServices`] over its provider, its token
//! counter and its memory store, scoped to the run's user and agent. The
//! request and answer types are serde types so that a run's answers can be
//! recorded and given again ([`RecordedServices`]) for a deterministic
//! replay.
//!
//! The time a service call takes is not the guest's: the call's deadline
//! moves later by as much, and the budget's `time` bounds the calls
//! instead.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_host_core::TokenCounter;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::Grants;

/// Service calls one processor may make in one run, all services together.
pub const DEFAULT_SERVICE_CALLS: u32 = 16;
/// Model tokens (read and written, as the provider reports them) the
/// `summarize` calls of one processor may spend in one run: a summary of a
/// long history in a few parts, not an open tab on the user's account.
pub const DEFAULT_MODEL_TOKENS: u64 = 64_000;
/// Tokens one summary may take, unless the processor asks for fewer.
pub const DEFAULT_ANSWER_TOKENS: u32 = 1_024;
/// Wall-clock time one processor's service calls may take in one run,
/// together: a model answering a long summary takes tens of seconds.
pub const DEFAULT_SERVICE_TIME: Duration = Duration::from_secs(120);
/// The most facts one `read-memory` call gives.
pub const MAX_MEMORY_FACTS: u32 = 100;
/// Service calls recorded in one report; more are counted, not recorded
/// (a guest asking for a denied service in a loop costs the host nothing
/// else).
pub(crate) const MAX_RECORDED_CALLS: usize = 1_000;
/// Tokens a summarize request costs beyond its prompt and text (the
/// message frames), in the estimate checked against the budget.
const REQUEST_FRAME_TOKENS: u64 = 16;

/// What one processor's service calls may spend in one run. Budgets are
/// per processor and per run: each call of the processor starts afresh.
///
/// "Cost" is counted in the model's tokens: agent-host knows no prices.
///
/// ```
/// use agent_host_runtime::ServiceBudget;
///
/// let budget = ServiceBudget { calls: 2, ..ServiceBudget::default() };
/// assert_eq!(budget.answer_tokens, 1_024);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceBudget {
    /// Service calls, all services together (default
    /// [`DEFAULT_SERVICE_CALLS`]). Denied calls spend none.
    pub calls: u32,
    /// Model tokens, read and written, over every `summarize` call
    /// (default [`DEFAULT_MODEL_TOKENS`]). A call whose estimate (its
    /// prompt and text, plus its answer cap) does not fit in what is left
    /// is refused before the model is asked; what the provider reports is
    /// charged afterwards.
    pub model_tokens: u64,
    /// Tokens one summary may take (default [`DEFAULT_ANSWER_TOKENS`]); a
    /// processor may ask for fewer.
    pub answer_tokens: u32,
    /// Wall-clock time in service calls, together (default
    /// [`DEFAULT_SERVICE_TIME`]); each call gets what is left as its
    /// timeout, or less if the processor asks.
    pub time: Duration,
}

impl Default for ServiceBudget {
    fn default() -> Self {
        ServiceBudget {
            calls: DEFAULT_SERVICE_CALLS,
            model_tokens: DEFAULT_MODEL_TOKENS,
            answer_tokens: DEFAULT_ANSWER_TOKENS,
            time: DEFAULT_SERVICE_TIME,
        }
    }
}

/// A host service, as grants and errors name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Service {
    /// `summarize`: the session's model writes a summary.
    Summarize,
    /// `count-tokens`: the session's tokenizer counts a text.
    CountTokens,
    /// `read-memory`: the session's long-term memory is searched.
    Memory,
}

impl Service {
    /// The command-line flag that grants it (`--allow-summarize`).
    pub fn flag(self) -> &'static str {
        match self {
            Service::Summarize => "--allow-summarize",
            Service::CountTokens => "--allow-count-tokens",
            Service::Memory => "--allow-memory",
        }
    }

    /// The key of a `[[processors]]` entry in `agent-host.toml` that grants it.
    pub fn config_key(self) -> &'static str {
        match self {
            Service::Summarize => "allow_summarize",
            Service::CountTokens => "allow_count_tokens",
            Service::Memory => "allow_memory",
        }
    }

    /// Its name in the contract (`summarize`, `count-tokens`, `read-memory`).
    pub fn name(self) -> &'static str {
        match self {
            Service::Summarize => "summarize",
            Service::CountTokens => "count-tokens",
            Service::Memory => "read-memory",
        }
    }

    fn granted(self, grants: &Grants) -> bool {
        match self {
            Service::Summarize => grants.summarize,
            Service::CountTokens => grants.count_tokens,
            Service::Memory => grants.memory,
        }
    }
}

/// One service call, as the runtime hands it to [`HostServices::call`]:
/// granted, within the budget, its caps resolved.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "service", rename_all = "snake_case")]
pub enum ServiceRequest {
    /// Have the model write `text` up as `prompt` says.
    Summarize {
        /// The instructions (sent as the system message).
        prompt: String,
        /// The material (sent as the user message).
        text: String,
        /// The most tokens the answer may take.
        max_tokens: u32,
        /// The most time the call may take, in milliseconds.
        timeout_ms: u64,
    },
    /// Count `text`'s tokens with the session's tokenizer.
    CountTokens {
        /// The text.
        text: String,
    },
    /// The facts of the run's memory that best match `query` (the newest
    /// when it is empty), at most `limit`.
    ReadMemory {
        /// What to search for.
        query: String,
        /// The most facts to give (at most [`MAX_MEMORY_FACTS`]).
        limit: u32,
    },
}

impl ServiceRequest {
    /// The service it asks for.
    pub fn service(&self) -> Service {
        match self {
            ServiceRequest::Summarize { .. } => Service::Summarize,
            ServiceRequest::CountTokens { .. } => Service::CountTokens,
            ServiceRequest::ReadMemory { .. } => Service::Memory,
        }
    }
}

/// A fact of long-term memory as a processor reads it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryFact {
    /// Its id.
    pub id: String,
    /// What it is about.
    pub entity: String,
    /// The fact, as a sentence.
    pub text: String,
    /// The single-valued attribute it fills, if any.
    pub attribute: Option<String>,
    /// The attribute's value.
    pub value: Option<String>,
    /// When it was recorded.
    pub recorded: DateTime<Utc>,
}

/// What a service answered.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "service", rename_all = "snake_case")]
pub enum ServiceAnswer {
    /// The summary and what it cost.
    Summary {
        /// The summary's text.
        text: String,
        /// Tokens the model read (as reported, or the host's estimate).
        input_tokens: u64,
        /// Tokens the model wrote.
        output_tokens: u64,
        /// The model that wrote it (for the report; the guest is not told).
        model: Option<String>,
    },
    /// The token count.
    Tokens {
        /// How many tokens.
        count: u32,
    },
    /// The facts found, best first.
    Memory {
        /// The facts.
        facts: Vec<MemoryFact>,
    },
}

impl ServiceAnswer {
    fn service(&self) -> Service {
        match self {
            ServiceAnswer::Summary { .. } => Service::Summarize,
            ServiceAnswer::Tokens { .. } => Service::CountTokens,
            ServiceAnswer::Memory { .. } => Service::Memory,
        }
    }

    /// The model tokens it cost.
    fn model_tokens(&self) -> u64 {
        match self {
            ServiceAnswer::Summary {
                input_tokens,
                output_tokens,
                ..
            } => input_tokens.saturating_add(*output_tokens),
            _ => 0,
        }
    }
}

/// Why a service call gave no answer: the contract's `service-error`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "error", content = "reason", rename_all = "snake_case")]
pub enum ServiceError {
    /// Not granted to the processor.
    #[error("denied: {0}")]
    Denied(String),
    /// Over the processor's budget for the run.
    #[error("over budget: {0}")]
    OverBudget(String),
    /// Tried, and failed.
    #[error("failed: {0}")]
    Failed(String),
}

/// The embedder's side of the host services: what the runtime asks once a
/// call is granted and within its budget. Implemented by the engine over
/// its provider, token counter and memory store (the runtime reaches none
/// of them); by [`RecordedServices`] to give a recorded run's answers
/// again; by [`NoServices`] where nothing is offered.
///
/// `call` runs on the thread that runs the processor (a blocking thread):
/// block on the model there, within the request's `timeout_ms`. Whatever
/// it answers reaches the guest, so it must hold no secret (an API key in
/// a provider's error message is the embedder's to redact).
pub trait HostServices: Send + Sync {
    /// Serves `request` for the processor named `processor`.
    fn call(
        &self,
        processor: &str,
        request: &ServiceRequest,
    ) -> Result<ServiceAnswer, ServiceError>;
}

/// A host that offers no services: every granted call fails, saying so.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoServices;

impl HostServices for NoServices {
    fn call(&self, _: &str, request: &ServiceRequest) -> Result<ServiceAnswer, ServiceError> {
        Err(ServiceError::Failed(format!(
            "this host offers no `{}` service to processors",
            request.service().name()
        )))
    }
}

/// How a recorded call ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServiceResult {
    /// The service answered.
    Answer(ServiceAnswer),
    /// It gave no answer, and why.
    Error(ServiceError),
}

/// One service call a processor made, in its report: what it asked, what
/// it got, whether the embedder was asked at all (a denied or over-budget
/// call is refused by the runtime alone), and how long it took.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceCall {
    /// The request, with the caps the runtime resolved.
    pub request: ServiceRequest,
    /// Whether [`HostServices::call`] was asked (false: refused by the
    /// runtime for its grant or budget).
    pub served: bool,
    /// What the guest got.
    pub result: ServiceResult,
    /// Wall-clock time of the call, in microseconds.
    pub time_us: u64,
}

impl ServiceCall {
    /// Whether `other` is the same call: the same request (its timeout
    /// aside, which follows the time left), refused or served alike, with
    /// the same result. Its duration is not compared.
    pub fn same_call(&self, other: &ServiceCall) -> bool {
        same_request(&self.request, &other.request)
            && self.served == other.served
            && self.result == other.result
    }
}

/// What one processor's service calls came to in a run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceUsage {
    /// Calls made, every outcome counted.
    pub calls: u32,
    /// Calls refused because the service was not granted.
    pub denied: u32,
    /// Calls refused as over the budget.
    pub over_budget: u32,
    /// Calls that failed in the service.
    pub failed: u32,
    /// Model tokens spent (read and written).
    pub model_tokens: u64,
    /// Time spent in service calls, in microseconds.
    pub time_us: u64,
    /// Calls made but not recorded in the report (over its cap).
    pub unrecorded: u32,
}

impl ServiceUsage {
    /// Whether no call was made.
    pub fn is_none(&self) -> bool {
        self.calls == 0
    }
}

/// One call's service meter: the grants, what is left of the budget, the
/// embedder, and the record of every call. Lives in the call's store.
pub(crate) struct Meter {
    services: Arc<dyn HostServices>,
    grants: Grants,
    budget: ServiceBudget,
    counter: Arc<dyn TokenCounter>,
    processor: String,
    /// Calls that spent the budget (served ones).
    spent_calls: u32,
    spent_time: Duration,
    pub(crate) calls: Vec<ServiceCall>,
    pub(crate) usage: ServiceUsage,
}

impl Meter {
    pub(crate) fn new(
        services: Arc<dyn HostServices>,
        grants: &Grants,
        budget: &ServiceBudget,
        counter: Arc<dyn TokenCounter>,
        processor: &str,
    ) -> Meter {
        Meter {
            services,
            grants: grants.clone(),
            budget: budget.clone(),
            counter,
            processor: processor.to_owned(),
            spent_calls: 0,
            spent_time: Duration::ZERO,
            calls: Vec::new(),
            usage: ServiceUsage::default(),
        }
    }

    /// Serves one call: the grant, the budget, the embedder, the charge,
    /// the record. `request` carries the caps the guest asked for (0: the
    /// budget's); the recorded request carries the resolved ones. Returns
    /// the answer and the time the call took.
    pub(crate) fn serve(
        &mut self,
        request: ServiceRequest,
    ) -> (Result<ServiceAnswer, ServiceError>, Duration) {
        let started = Instant::now();
        let (request, checked) = self.check(request);
        let served = checked.is_ok();
        let result = checked.and_then(|()| {
            let answer = self.services.call(&self.processor, &request)?;
            if answer.service() != request.service() {
                return Err(ServiceError::Failed(format!(
                    "the host answered a `{}` request with a `{}` answer",
                    request.service().name(),
                    answer.service().name()
                )));
            }
            Ok(answer)
        });
        let elapsed = started.elapsed();
        self.charge(served, &result, elapsed);
        if self.calls.len() < MAX_RECORDED_CALLS {
            self.calls.push(ServiceCall {
                request,
                served,
                result: match &result {
                    Ok(a) => ServiceResult::Answer(a.clone()),
                    Err(e) => ServiceResult::Error(e.clone()),
                },
                time_us: u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX),
            });
        } else {
            self.usage.unrecorded = self.usage.unrecorded.saturating_add(1);
        }
        (result, elapsed)
    }

    /// The grant and the budget; the request with its caps resolved.
    fn check(&self, request: ServiceRequest) -> (ServiceRequest, Result<(), ServiceError>) {
        let service = request.service();
        if !service.granted(&self.grants) {
            return (
                request,
                Err(ServiceError::Denied(format!(
                    "`{}` is not granted to this processor; grant it with {} after its \
                     --processor, or `{} = true` in its [[processors]] entry",
                    service.name(),
                    service.flag(),
                    service.config_key()
                ))),
            );
        }
        let b = &self.budget;
        if self.spent_calls >= b.calls {
            return (
                request,
                Err(ServiceError::OverBudget(format!(
                    "the processor has made its {} service calls for this run",
                    b.calls
                ))),
            );
        }
        let time_left = b.time.saturating_sub(self.spent_time);
        if time_left.is_zero() {
            return (
                request,
                Err(ServiceError::OverBudget(format!(
                    "the processor's service calls have taken their {} ms for this run",
                    b.time.as_millis()
                ))),
            );
        }
        match request {
            ServiceRequest::Summarize {
                prompt,
                text,
                max_tokens,
                timeout_ms,
            } => {
                let max_tokens = match max_tokens {
                    0 => b.answer_tokens,
                    asked => asked.min(b.answer_tokens),
                };
                let left_ms = u64::try_from(time_left.as_millis()).unwrap_or(u64::MAX);
                let timeout_ms = match timeout_ms {
                    0 => left_ms,
                    asked => asked.min(left_ms),
                };
                let tokens_left = b.model_tokens.saturating_sub(self.usage.model_tokens);
                let estimate = u64::from(self.counter.count_text(&prompt))
                    + u64::from(self.counter.count_text(&text))
                    + REQUEST_FRAME_TOKENS
                    + u64::from(max_tokens);
                let check = if estimate > tokens_left {
                    Err(ServiceError::OverBudget(format!(
                        "the request would take about {estimate} model tokens (its text and a \
                         {max_tokens}-token answer) and {tokens_left} of the processor's \
                         {} are left for this run",
                        b.model_tokens
                    )))
                } else {
                    Ok(())
                };
                (
                    ServiceRequest::Summarize {
                        prompt,
                        text,
                        max_tokens,
                        timeout_ms,
                    },
                    check,
                )
            }
            ServiceRequest::ReadMemory { query, limit } => (
                ServiceRequest::ReadMemory {
                    query,
                    limit: limit.min(MAX_MEMORY_FACTS),
                },
                Ok(()),
            ),
            r @ ServiceRequest::CountTokens { .. } => (r, Ok(())),
        }
    }

    fn charge(
        &mut self,
        served: bool,
        result: &Result<ServiceAnswer, ServiceError>,
        elapsed: Duration,
    ) {
        let u = &mut self.usage;
        u.calls = u.calls.saturating_add(1);
        u.time_us = u
            .time_us
            .saturating_add(u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX));
        match result {
            Ok(answer) => u.model_tokens = u.model_tokens.saturating_add(answer.model_tokens()),
            Err(ServiceError::Denied(_)) => u.denied = u.denied.saturating_add(1),
            Err(ServiceError::OverBudget(_)) => u.over_budget = u.over_budget.saturating_add(1),
            Err(ServiceError::Failed(_)) => u.failed = u.failed.saturating_add(1),
        }
        if served {
            self.spent_calls = self.spent_calls.saturating_add(1);
            self.spent_time = self.spent_time.saturating_add(elapsed);
        }
    }
}

/// The answers of a recorded run, given again in order: a deterministic
/// stand-in for the services a run had (the model, the tokenizer, the
/// memory), for replaying it. Each request must be the one recorded next
/// among those the embedder served; any other fails, saying so.
pub struct RecordedServices {
    calls: Mutex<VecDeque<ServiceCall>>,
}

impl RecordedServices {
    /// The recorded calls of one processor's report (those the runtime
    /// refused on its own are skipped: the runtime refuses them again).
    pub fn new(calls: impl IntoIterator<Item = ServiceCall>) -> Self {
        RecordedServices {
            calls: Mutex::new(calls.into_iter().filter(|c| c.served).collect()),
        }
    }

    /// How many recorded answers have not been given yet.
    pub fn remaining(&self) -> usize {
        self.calls.lock().map_or(0, |c| c.len())
    }
}

impl HostServices for RecordedServices {
    fn call(&self, _: &str, request: &ServiceRequest) -> Result<ServiceAnswer, ServiceError> {
        let mut calls = self
            .calls
            .lock()
            .map_err(|_| ServiceError::Failed("the recording is unusable".into()))?;
        match calls.front() {
            Some(next) if same_request(&next.request, request) => {
                let next = calls.pop_front().expect("looked at just now");
                match next.result {
                    ServiceResult::Answer(a) => Ok(a),
                    ServiceResult::Error(e) => Err(e),
                }
            }
            Some(next) => Err(ServiceError::Failed(format!(
                "the replayed run asked `{}` where the recording has `{}` next",
                request.service().name(),
                next.request.service().name()
            ))),
            None => Err(ServiceError::Failed(format!(
                "the replayed run asked `{}` after the recording's last call",
                request.service().name()
            ))),
        }
    }
}

/// Whether two requests ask the same, the timeout aside (it depends on the
/// time the run had left).
fn same_request(a: &ServiceRequest, b: &ServiceRequest) -> bool {
    match (a, b) {
        (
            ServiceRequest::Summarize {
                prompt: p1,
                text: t1,
                max_tokens: m1,
                ..
            },
            ServiceRequest::Summarize {
                prompt: p2,
                text: t2,
                max_tokens: m2,
                ..
            },
        ) => p1 == p2 && t1 == t2 && m1 == m2,
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_host_core::HeuristicCounter;

    /// Answers every call and counts them.
    struct Echo(Mutex<u32>);

    impl HostServices for Echo {
        fn call(&self, _: &str, r: &ServiceRequest) -> Result<ServiceAnswer, ServiceError> {
            *self.0.lock().unwrap() += 1;
            Ok(match r {
                ServiceRequest::Summarize { text, .. } => ServiceAnswer::Summary {
                    text: format!("short: {}", text.len()),
                    input_tokens: 100,
                    output_tokens: 10,
                    model: Some("m".into()),
                },
                ServiceRequest::CountTokens { text } => ServiceAnswer::Tokens {
                    count: text.len() as u32,
                },
                ServiceRequest::ReadMemory { .. } => ServiceAnswer::Memory { facts: vec![] },
            })
        }
    }

    fn meter(grants: Grants, budget: ServiceBudget) -> (Meter, Arc<Echo>) {
        let echo = Arc::new(Echo(Mutex::new(0)));
        let m = Meter::new(
            echo.clone(),
            &grants,
            &budget,
            Arc::new(HeuristicCounter::default()),
            "p",
        );
        (m, echo)
    }

    fn all() -> Grants {
        Grants {
            summarize: true,
            count_tokens: true,
            memory: true,
            ..Grants::default()
        }
    }

    fn summarize(text: &str, max_tokens: u32) -> ServiceRequest {
        ServiceRequest::Summarize {
            prompt: "sum up".into(),
            text: text.into(),
            max_tokens,
            timeout_ms: 0,
        }
    }

    #[test]
    fn an_ungranted_service_is_denied_without_asking_the_host_or_spending_budget() {
        let (mut m, echo) = meter(
            Grants {
                count_tokens: true,
                ..Grants::default()
            },
            ServiceBudget {
                calls: 1,
                ..ServiceBudget::default()
            },
        );
        let (r, _) = m.serve(summarize("x", 0));
        match r {
            Err(ServiceError::Denied(why)) => assert!(why.contains("--allow-summarize"), "{why}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(*echo.0.lock().unwrap(), 0);
        // The one budgeted call is still there.
        let (r, _) = m.serve(ServiceRequest::CountTokens { text: "abc".into() });
        assert_eq!(r, Ok(ServiceAnswer::Tokens { count: 3 }));
        assert_eq!(m.usage.denied, 1);
        assert_eq!(m.usage.calls, 2);
        assert!(!m.calls[0].served && m.calls[1].served);
    }

    #[test]
    fn calls_over_the_budget_are_refused_and_counted() {
        let (mut m, echo) = meter(
            all(),
            ServiceBudget {
                calls: 2,
                ..ServiceBudget::default()
            },
        );
        for _ in 0..2 {
            assert!(
                m.serve(ServiceRequest::CountTokens { text: "a".into() })
                    .0
                    .is_ok()
            );
        }
        match m.serve(ServiceRequest::CountTokens { text: "a".into() }).0 {
            Err(ServiceError::OverBudget(why)) => assert!(why.contains("2 service calls"), "{why}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(*echo.0.lock().unwrap(), 2);
        assert_eq!(m.usage.over_budget, 1);
    }

    #[test]
    fn a_summary_whose_estimate_exceeds_the_tokens_left_is_refused_before_the_model() {
        let (mut m, echo) = meter(
            all(),
            ServiceBudget {
                model_tokens: 300,
                answer_tokens: 100,
                ..ServiceBudget::default()
            },
        );
        // The answer cap is lowered to the budget's.
        let (r, _) = m.serve(summarize("hello", 5_000));
        assert!(r.is_ok(), "{r:?}");
        match &m.calls[0].request {
            ServiceRequest::Summarize { max_tokens, .. } => assert_eq!(*max_tokens, 100),
            other => panic!("{other:?}"),
        }
        // 110 tokens were charged (as reported); 190 left, and a request of
        // about 100 + 16 + 100 tokens and more does not fit.
        assert_eq!(m.usage.model_tokens, 110);
        let (r, _) = m.serve(summarize(&"word ".repeat(400), 0));
        match r {
            Err(ServiceError::OverBudget(why)) => assert!(why.contains("190"), "{why}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(*echo.0.lock().unwrap(), 1);
    }

    #[test]
    fn the_time_budget_is_checked_and_caps_the_timeout() {
        let (mut m, _) = meter(
            all(),
            ServiceBudget {
                time: Duration::from_millis(40),
                ..ServiceBudget::default()
            },
        );
        let _ = m.serve(summarize("x", 0));
        match &m.calls[0].request {
            ServiceRequest::Summarize { timeout_ms, .. } => assert!(*timeout_ms <= 40),
            other => panic!("{other:?}"),
        }
        m.spent_time = Duration::from_millis(40);
        assert!(matches!(
            m.serve(ServiceRequest::CountTokens { text: "a".into() }).0,
            Err(ServiceError::OverBudget(_))
        ));
    }

    #[test]
    fn a_recording_answers_the_same_requests_in_order_and_nothing_else() {
        let (mut m, _) = meter(
            Grants {
                count_tokens: true,
                ..Grants::default()
            },
            ServiceBudget::default(),
        );
        let _ = m.serve(summarize("denied", 0));
        let _ = m.serve(ServiceRequest::CountTokens { text: "one".into() });
        let _ = m.serve(ServiceRequest::CountTokens {
            text: "three".into(),
        });
        let json = serde_json::to_string(&m.calls).unwrap();
        let calls: Vec<ServiceCall> = serde_json::from_str(&json).unwrap();
        let replay = RecordedServices::new(calls);
        assert_eq!(replay.remaining(), 2);
        let ask = |t: &str| replay.call("p", &ServiceRequest::CountTokens { text: t.into() });
        assert_eq!(ask("one"), Ok(ServiceAnswer::Tokens { count: 3 }));
        assert!(matches!(ask("other"), Err(ServiceError::Failed(_))));
        assert_eq!(ask("three"), Ok(ServiceAnswer::Tokens { count: 5 }));
        assert!(matches!(ask("three"), Err(ServiceError::Failed(_))));
    }

    #[test]
    fn requests_and_answers_have_a_stable_json_shape() {
        let r = ServiceRequest::ReadMemory {
            query: "coffee".into(),
            limit: 5,
        };
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            serde_json::json!({"service": "read_memory", "query": "coffee", "limit": 5})
        );
        let e = ServiceResult::Error(ServiceError::Denied("no".into()));
        assert_eq!(
            serde_json::to_value(&e).unwrap(),
            serde_json::json!({"error": {"error": "denied", "reason": "no"}})
        );
    }
}
