//! The host services processors ask for (contract 0.2.0), served by the
//! engine: `summarize` by the configured provider, `count-tokens` by the
//! session's token counter, `read-memory` by the session's long-term
//! memory, kept to the run's user and agent.
//!
//! The runtime has checked each call's grant and budget before it gets
//! here ([`agent_host_runtime::HostServices`]); this does the work within
//! the caps the runtime resolved. Whatever it answers reaches the guest:
//! the provider's errors are redacted of its API key, and the guest is
//! never told the endpoint or the key. Calls block on the provider through
//! a tokio runtime handle, from the blocking thread the processors run on,
//! as the LLM summarizer does.

use std::sync::Arc;
use std::time::Duration;

use agent_host_core::memory::Filter;
use agent_host_core::{Message, TokenCounter};
use agent_host_provider::{ChatRequest, Provider, StreamEvent};
use agent_host_runtime::{
    HostServices, MAX_MEMORY_FACTS, MemoryFact, ServiceAnswer, ServiceError, ServiceRequest,
};
use agent_host_store::memory::MemoryStore;
use tokio::runtime::Handle;

use crate::llm_summarizer::SUMMARY_TEMPERATURE;

/// The engine's host services; see the [module documentation](self).
///
/// ```no_run
/// use std::sync::Arc;
/// use agent_host_core::HeuristicCounter;
/// use agent_host_engine::EngineServices;
///
/// fn services(handle: tokio::runtime::Handle) -> EngineServices {
///     EngineServices::new(handle, Arc::new(HeuristicCounter::default()))
///     // ... .with_provider(provider).with_memory(store, "alice", "default")
/// }
/// ```
pub struct EngineServices {
    handle: Handle,
    counter: Arc<dyn TokenCounter>,
    provider: Option<Provider>,
    memory: Option<(Arc<MemoryStore>, Filter)>,
}

impl std::fmt::Debug for EngineServices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineServices")
            .field("provider", &self.provider)
            .field("memory", &self.memory.as_ref().map(|(_, filter)| filter))
            .finish_non_exhaustive()
    }
}

impl EngineServices {
    /// Services counting tokens with `counter`, with no model and no
    /// memory (those calls fail, saying what to configure). `handle` is the
    /// multi-thread runtime the provider's calls are driven on.
    pub fn new(handle: Handle, counter: Arc<dyn TokenCounter>) -> Self {
        EngineServices {
            handle,
            counter,
            provider: None,
            memory: None,
        }
    }

    /// `summarize` asks `provider`.
    pub fn with_provider(mut self, provider: Provider) -> Self {
        self.provider = Some(provider);
        self
    }

    /// `read-memory` reads `store`, only the facts of `user` with `agent`.
    pub fn with_memory(
        mut self,
        store: Arc<MemoryStore>,
        user: impl Into<String>,
        agent: impl Into<String>,
    ) -> Self {
        self.memory = Some((store, Filter::user(user).agent(agent)));
        self
    }

    fn summarize(
        &self,
        prompt: &str,
        text: &str,
        max_tokens: u32,
        timeout_ms: u64,
    ) -> Result<ServiceAnswer, ServiceError> {
        let Some(provider) = &self.provider else {
            return Err(ServiceError::Failed(
                "no model is configured for this run ([provider] in agent-host.toml, or \
                 --provider and --model)"
                    .into(),
            ));
        };
        let messages = vec![Message::system(prompt), Message::user(text)];
        let estimate: u64 = messages
            .iter()
            .map(|m| u64::from(self.counter.count_message(m)))
            .sum();
        let chat = ChatRequest {
            messages,
            max_tokens: Some(max_tokens.max(1)),
            temperature: Some(SUMMARY_TEMPERATURE),
            no_tools: true,
            stream: Some(false),
            tools: Vec::new(),
        };
        let mut ignore = |_: StreamEvent| {};
        let timeout = Duration::from_millis(timeout_ms);
        let reply = self.handle.block_on(async {
            tokio::time::timeout(timeout, provider.complete(&chat, &mut ignore)).await
        });
        let reply = match reply {
            Err(_) => {
                return Err(ServiceError::Failed(format!(
                    "the model did not answer within {timeout_ms} ms"
                )));
            }
            Ok(Err(e)) => {
                return Err(ServiceError::Failed(
                    provider.redact(&format!("the model failed: {e}")),
                ));
            }
            Ok(Ok(reply)) => reply,
        };
        let summary = provider.redact(reply.message.text().trim());
        if summary.is_empty() {
            return Err(ServiceError::Failed(format!(
                "the model answered with no text (stop reason: {})",
                reply.stop_reason.as_deref().unwrap_or("none given")
            )));
        }
        let (input_tokens, output_tokens) = match &reply.message.usage {
            Some(u) => (u.input_tokens, u.output_tokens),
            None => (estimate, u64::from(self.counter.count_text(&summary))),
        };
        Ok(ServiceAnswer::Summary {
            text: summary,
            input_tokens,
            output_tokens,
            model: reply
                .message
                .model
                .clone()
                .or_else(|| Some(provider.settings().model.clone())),
        })
    }

    fn read_memory(&self, query: &str, limit: u32) -> Result<ServiceAnswer, ServiceError> {
        let Some((store, filter)) = &self.memory else {
            return Err(ServiceError::Failed(
                "no long-term memory is configured for this run (name its user: \
                 --memory-user USER, or `user` in [memory] of agent-host.toml)"
                    .into(),
            ));
        };
        let limit = limit.min(MAX_MEMORY_FACTS) as usize;
        let failed = |e: agent_host_store::StoreError| {
            ServiceError::Failed(format!("the memory could not be read: {e}"))
        };
        let facts = if query.trim().is_empty() {
            newest(store, filter, limit).map_err(failed)?
        } else {
            store
                .search(query, filter, limit, false)
                .map_err(failed)?
                .into_iter()
                .map(|found| found.fact)
                .collect()
        };
        Ok(ServiceAnswer::Memory {
            facts: facts
                .into_iter()
                .map(|f| MemoryFact {
                    id: f.id,
                    entity: f.entity,
                    text: f.text,
                    attribute: f.attribute,
                    value: f.value,
                    recorded: f.recorded_at,
                })
                .collect(),
        })
    }
}

/// The `limit` newest valid facts `filter` sees, newest first.
fn newest(
    store: &MemoryStore,
    filter: &Filter,
    limit: usize,
) -> agent_host_store::Result<Vec<agent_host_core::memory::Fact>> {
    let mut kept = std::collections::VecDeque::with_capacity(limit + 1);
    let mut after: Option<String> = None;
    loop {
        let page = store.list(filter, after.as_deref(), agent_host_store::memory::MAX_PAGE)?;
        let Some(last) = page.last() else { break };
        after = Some(last.id.clone());
        let full = page.len() == agent_host_store::memory::MAX_PAGE;
        for fact in page.into_iter().filter(|f| f.is_valid()) {
            kept.push_back(fact);
            if kept.len() > limit {
                kept.pop_front();
            }
        }
        if !full {
            break;
        }
    }
    Ok(kept.into_iter().rev().collect())
}

impl HostServices for EngineServices {
    fn call(
        &self,
        processor: &str,
        request: &ServiceRequest,
    ) -> Result<ServiceAnswer, ServiceError> {
        tracing::debug!(
            processor,
            service = request.service().name(),
            "host service call"
        );
        match request {
            ServiceRequest::Summarize {
                prompt,
                text,
                max_tokens,
                timeout_ms,
            } => self.summarize(prompt, text, *max_tokens, *timeout_ms),
            ServiceRequest::CountTokens { text } => Ok(ServiceAnswer::Tokens {
                count: self.counter.count_text(text),
            }),
            ServiceRequest::ReadMemory { query, limit } => self.read_memory(query, *limit),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_host_core::HeuristicCounter;
    use agent_host_core::memory::{Fact, Scope};
    use agent_host_provider::{ProviderKind, ProviderSettings};
    use agent_host_testkit::model_server::{Answer, LlmServer, Scripted, Wire};

    fn memory() -> (tempfile::TempDir, Arc<MemoryStore>) {
        let dir = tempfile::tempdir().unwrap();
        let spec = dir.path().join("store").to_string_lossy().into_owned();
        let store = Arc::new(MemoryStore::open(&spec).unwrap());
        let now = chrono::Utc::now();
        for (user, agent, text) in [
            ("alice", "default", "alice likes green tea"),
            ("alice", "other", "alice's other agent knows the tea order"),
            ("bob", "default", "bob likes black tea"),
            ("alice", "default", "alice lives in Lisbon"),
        ] {
            store
                .add(Fact::new(
                    MemoryStore::new_id(),
                    Scope::new(user, agent),
                    user,
                    text,
                    now,
                ))
                .unwrap();
        }
        (dir, store)
    }

    fn services(rt: &tokio::runtime::Runtime) -> EngineServices {
        EngineServices::new(rt.handle().clone(), Arc::new(HeuristicCounter::default()))
    }

    fn texts(answer: ServiceAnswer) -> Vec<String> {
        match answer {
            ServiceAnswer::Memory { facts } => facts.into_iter().map(|f| f.text).collect(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn memory_reads_only_the_runs_user_and_agent() {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let (_dir, store) = memory();
        let alice = services(&rt).with_memory(store.clone(), "alice", "default");
        let read = |s: &EngineServices, q: &str| {
            texts(
                s.call(
                    "p",
                    &ServiceRequest::ReadMemory {
                        query: q.into(),
                        limit: 10,
                    },
                )
                .unwrap(),
            )
        };
        let found = read(&alice, "tea");
        assert_eq!(found, ["alice likes green tea"]);
        // The newest first, without a query.
        assert_eq!(
            read(&alice, ""),
            ["alice lives in Lisbon", "alice likes green tea"]
        );
        let bob = services(&rt).with_memory(store, "bob", "default");
        assert_eq!(read(&bob, "tea"), ["bob likes black tea"]);
        assert_eq!(read(&bob, "Lisbon"), Vec::<String>::new());
        // No memory configured: a failure that says what to configure.
        match services(&rt).call(
            "p",
            &ServiceRequest::ReadMemory {
                query: String::new(),
                limit: 1,
            },
        ) {
            Err(ServiceError::Failed(why)) => assert!(why.contains("[memory]"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    fn provider(server: &LlmServer, key: &str) -> Provider {
        let mut settings = ProviderSettings::new(
            match server.wire() {
                Wire::OpenAi => ProviderKind::OpenAi,
                Wire::Anthropic => ProviderKind::Anthropic,
            },
            "test-model",
        );
        settings.base_url = server.base_url();
        settings.max_retries = 0;
        Provider::with_api_key(settings, Some(key.into())).unwrap()
    }

    fn summarize(timeout_ms: u64) -> ServiceRequest {
        ServiceRequest::Summarize {
            prompt: "Summarize in one line.".into(),
            text: "a long conversation".into(),
            max_tokens: 77,
            timeout_ms,
        }
    }

    #[test]
    fn summaries_come_from_the_provider_on_both_wires_with_its_usage() {
        let rt = tokio::runtime::Runtime::new().unwrap();
        for wire in [Wire::OpenAi, Wire::Anthropic] {
            let server = LlmServer::start(wire);
            server.push(Scripted::Answer(
                Answer::text("the short of it").with_usage(120, 9),
            ));
            let s = services(&rt).with_provider(provider(&server, "sk-key"));
            let answer = s.call("p", &summarize(10_000)).unwrap();
            assert_eq!(
                answer,
                ServiceAnswer::Summary {
                    text: "the short of it".into(),
                    input_tokens: 120,
                    output_tokens: 9,
                    model: Some("test-model".into()),
                },
                "{wire:?}"
            );
            let asked = &server.requests()[0];
            assert!(asked.contains("Summarize in one line."), "{wire:?}");
            assert!(asked.contains("a long conversation"), "{wire:?}");
            assert!(asked.contains("77"), "{wire:?}");
        }
    }

    #[test]
    fn a_refused_key_is_redacted_from_what_the_guest_reads() {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let server = LlmServer::start(Wire::OpenAi);
        let key = "sk-very-secret-0123456789";
        // A server quoting the key it refused, as some do.
        server.push(Scripted::Status {
            status: 401,
            body: format!(r#"{{"error": {{"message": "Incorrect API key provided: {key}"}}}}"#),
            retry_after: None,
        });
        let s = services(&rt).with_provider(provider(&server, key));
        match s.call("p", &summarize(10_000)) {
            Err(ServiceError::Failed(why)) => {
                assert!(!why.contains(key), "{why}");
                assert!(why.contains("[redacted]"), "{why}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_model_slower_than_the_timeout_fails_the_call() {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let server = LlmServer::start(Wire::OpenAi);
        server.push(Scripted::Hang(Duration::from_secs(5)));
        let s = services(&rt).with_provider(provider(&server, "k"));
        let started = std::time::Instant::now();
        match s.call("p", &summarize(200)) {
            Err(ServiceError::Failed(why)) => assert!(why.contains("200 ms"), "{why}"),
            other => panic!("{other:?}"),
        }
        assert!(started.elapsed() < Duration::from_secs(3));
    }
}
