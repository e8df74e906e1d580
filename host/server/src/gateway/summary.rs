//! Summaries in gateway exchanges that the provider's prompt cache serves.
//!
//! Where the configuration asks for a model's summaries
//! (`context.summarizer = "llm"`), a summary the pipeline asks for during a
//! gateway exchange goes to the request's own upstream and model, not to
//! the engine's provider: a provider caches prompts per model. And it
//! reuses the request the gateway sent last for the session: the same body
//! (model, tools, system prompt, the messages as they were sent, cache
//! breakpoints), not streamed, with one user message after it asking for
//! the summary of the span. Everything before that message is, byte for
//! byte, a prompt the provider has just read, so its cache serves it; the
//! classic request (the instructions as a system prompt, the span rendered
//! as text) shares nothing with the conversation and is read in full.
//!
//! The span comes whole (the summarizer [reads whole
//! spans](Summarizer::reads_whole_spans) when the reuse can work): the last
//! request carried it and fit the window, so one request summarizes it,
//! where the classic way needs a request per part of the span and merges.
//!
//! The classic requests still go (to the same upstream and model; the span
//! in parts as the pipeline would cut it, then merges) when the reuse
//! cannot work, and the request record's notes say why: no request was sent
//! for the session since the server started (or since it was last in
//! memory), the last one went to another upstream or model, the span holds
//! messages the last request did not carry, or the upstream refused the
//! request or answered without text.
//!
//! The reused request carries what the processors made of the messages
//! (`redact-secrets`' placeholders, not the secrets): the upstream reads
//! nothing it was not sent already. The classic request carries the span as
//! the log holds it, as the engine's summarizer does.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, PoisonError};

use agent_host_core::compact::{self, SummaryConfig, SummaryPlan, Trigger};
use agent_host_core::summarize::{Summarizer, SummaryError, SummaryRequest};
use agent_host_core::tokens::{HeuristicCounter, TokenCounter};
use agent_host_core::{Message, Role};
use agent_host_engine::llm_summarizer::instructions;
use agent_host_engine::{Calls, ExchangeSummarizer, LlmSummarizer};
use agent_host_provider::{Provider, ProviderKind, Relay, Relayed};
use axum::body::Bytes;
use serde_json::{Map, Value, json};
use tokio::runtime::Handle;

/// Characters of the span's last message quoted to tell the model where the
/// span ends.
const BOUNDARY_QUOTE: usize = 200;

/// The request the gateway sent upstream last for a session.
#[derive(Debug)]
pub(crate) struct SentPrompt {
    /// The upstream it went to.
    pub(crate) upstream: String,
    /// The model it asked for.
    pub(crate) model: String,
    /// The body as sent, in the upstream's wire.
    pub(crate) body: Bytes,
    /// The ids of the view's messages it carried, in order.
    pub(crate) sent: Vec<String>,
    /// The pipeline's estimate of those messages, in tokens.
    pub(crate) tokens: u32,
}

/// What a gateway summarizer did, for the request record.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) enum Reuse {
    /// No summary was asked for.
    #[default]
    Unasked,
    /// The summary request reused the last request (its messages).
    Reused(usize),
    /// The classic request went, for this reason.
    Classic(String),
}

/// The gateway's summarizer for one exchange; see the
/// [module documentation](self).
pub(crate) struct CachedSummarizer {
    provider: Provider,
    handle: Handle,
    /// The session's last request, when it went to this upstream and model.
    last: Result<Arc<SentPrompt>, String>,
    classic: LlmSummarizer,
    /// How the classic requests cut a span, and the window they fit in.
    parts: (SummaryConfig, u32),
    /// The reused requests' part of what was spent.
    reused: Mutex<Calls>,
    outcome: Mutex<Reuse>,
}

impl CachedSummarizer {
    /// A summarizer sending to `provider` (the request's upstream, asking
    /// for its model), reusing `last` (the session's last request) when it
    /// went to `upstream` and the same model. `context_limit` bounds a
    /// request and its answer; `config` says how the classic requests cut
    /// a span into parts; `fallback` lets the extractive summarizer stand
    /// in when the model fails.
    pub(crate) fn new(
        provider: Provider,
        upstream: &str,
        last: Option<Arc<SentPrompt>>,
        (context_limit, config): (u32, SummaryConfig),
        fallback: bool,
    ) -> CachedSummarizer {
        let model = provider.settings().model.clone();
        let last = match last {
            None => Err("no request was sent upstream for the session since it was loaded".into()),
            Some(last) if last.upstream != upstream || last.model != model => Err(format!(
                "the last request went to {} ({}), this one to {upstream} ({model})",
                last.upstream, last.model
            )),
            Some(last) => Ok(last),
        };
        let handle = Handle::current();
        let classic = LlmSummarizer::new(provider.clone(), handle.clone())
            .with_context_limit(context_limit)
            .with_fallback(fallback);
        CachedSummarizer {
            provider,
            handle,
            last,
            classic,
            parts: (config, context_limit),
            reused: Mutex::new(Calls::default()),
            outcome: Mutex::new(Reuse::Unasked),
        }
    }

    /// What it did: whether the summary reused the last request.
    pub(crate) fn outcome(&self) -> Reuse {
        self.outcome
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn settle(&self, outcome: Reuse) {
        *self.outcome.lock().unwrap_or_else(PoisonError::into_inner) = outcome;
    }

    /// The summary through the last request, or why it cannot be.
    fn reuse(&self, request: &SummaryRequest<'_>) -> Result<String, String> {
        let last = self.last.as_ref().map_err(Clone::clone)?;
        if !request.partials.is_empty() {
            return Err("the span was too long for one request and came in parts".into());
        }
        let Some(end) = request.messages.last() else {
            return Err("the span is empty".into());
        };
        // The span is what the last request carried, then what came after
        // it (its answer, the client's next messages): those go after the
        // last request's messages, before the ask.
        let sent: HashSet<&str> = last.sent.iter().map(String::as_str).collect();
        let carried = |m: &Message| sent.contains(m.id.as_str());
        let after = request
            .messages
            .iter()
            .position(|m| !carried(m))
            .unwrap_or(request.messages.len());
        let later = &request.messages[after..];
        if let Some(known) = later.iter().find(|m| carried(m)) {
            return Err(format!(
                "the span holds message {} that the last request carried after one it did not",
                known.id
            ));
        }
        if after == 0 {
            return Err("the last request carried none of the span".into());
        }
        let kind = self.provider.settings().kind;
        let whole = !later.is_empty() || last.sent.last().map(String::as_str) == Some(&end.id);
        let ask = ask(request.max_words, end, whole);
        // The pipeline's own measure of what the last request carried (its
        // JSON's bytes would count the wire's syntax as text), and what
        // goes after it.
        let counter = HeuristicCounter::default();
        let prompt_tokens = later
            .iter()
            .fold(last.tokens, |n, m| {
                n.saturating_add(counter.count_message(m))
            })
            .saturating_add(counter.count_text(&ask));
        let mut body: Map<String, Value> = serde_json::from_slice(&last.body)
            .map_err(|e| format!("the last request is not a JSON object: {e}"))?;
        let later = wire_messages(kind, later)?;
        if let Some(messages) = body.get_mut("messages").and_then(Value::as_array_mut) {
            messages.extend(later);
        }
        let max_tokens = self
            .classic
            .answer_tokens(request.max_words, prompt_tokens)
            .map_err(|e| e.to_string())?;
        summary_body(&mut body, kind, ask, max_tokens)?;
        let body = serde_json::to_vec(&Value::Object(body))
            .map_err(|e| format!("cannot write the request: {e}"))?;
        let relayed = self
            .handle
            .block_on(self.provider.relay(Relay {
                body: Bytes::from(body),
                stream: false,
                headers: Vec::new(),
                responses: false,
            }))
            .map_err(|e| e.to_string())?;
        let reply = match relayed {
            Relayed::Whole { reply, .. } => reply.map_err(|e| e.to_string())?,
            Relayed::Refused { status, body, .. } => {
                return Err(format!(
                    "the upstream refused it with status {status}: {}",
                    String::from_utf8_lossy(&body[..body.len().min(300)])
                ));
            }
            Relayed::Stream(_) => return Err("the upstream streamed an unasked stream".into()),
        };
        if let Ok(mut calls) = self.reused.lock() {
            calls.count(reply.message.usage.as_ref());
        }
        let text = reply.message.text().trim().to_owned();
        if text.is_empty() {
            return Err(format!(
                "the model answered with no text ({} tool calls, stop reason {})",
                reply.message.tool_calls.len(),
                reply.stop_reason.as_deref().unwrap_or("none given")
            ));
        }
        Ok(text)
    }
}

impl Summarizer for CachedSummarizer {
    fn summarize(&self, request: &SummaryRequest<'_>) -> Result<String, SummaryError> {
        match self.reuse(request) {
            Ok(text) => {
                let carried = self.last.as_ref().map_or(0, |l| l.sent.len());
                self.settle(Reuse::Reused(carried));
                Ok(text)
            }
            Err(why) => {
                tracing::info!(
                    "the summary request cannot reuse the last one ({why}); sending the classic ones"
                );
                self.settle(Reuse::Classic(why));
                self.classic_whole(request)
            }
        }
    }

    /// Whole spans, while the last request can be reused: it carried the
    /// span and fit the window.
    fn reads_whole_spans(&self) -> bool {
        self.last.is_ok()
    }
}

impl CachedSummarizer {
    /// The classic requests for a span handed over whole: in parts, then
    /// merged, as the pipeline cuts a span for a model that cannot read
    /// it at once.
    fn classic_whole(&self, request: &SummaryRequest<'_>) -> Result<String, SummaryError> {
        if !self.reads_whole_spans() || !request.partials.is_empty() {
            return self.classic.summarize(request);
        }
        let (config, context_limit) = &self.parts;
        let counter = HeuristicCounter::default();
        let plan = SummaryPlan::of_span(
            request.messages,
            Trigger::Forced,
            *context_limit,
            config,
            &counter,
        );
        compact::summarize(
            request.messages,
            &plan,
            request.previous,
            &self.classic,
            request.max_words,
            None,
            &counter,
        )
    }
}

impl ExchangeSummarizer for CachedSummarizer {
    fn model(&self) -> String {
        self.provider.settings().model.clone()
    }

    fn calls(&self) -> Calls {
        let mut calls = self.classic.calls();
        let reused = self.reused.lock().map(|c| c.clone()).unwrap_or_default();
        calls.requests = calls.requests.saturating_add(reused.requests);
        calls.input_tokens = calls.input_tokens.saturating_add(reused.input_tokens);
        calls.output_tokens = calls.output_tokens.saturating_add(reused.output_tokens);
        calls
    }
}

/// The user message that asks for the summary of the conversation above,
/// up to `end` (the span's last message) unless the span is `whole`.
fn ask(max_words: usize, end: &Message, whole: bool) -> String {
    let mut ask = String::from(
        "Stop here: do not answer the conversation and do not call any tool. Instead, write a \
         summary of the conversation above so the agent can continue the work without it. \
         If the conversation begins with an earlier summary, carry its facts forward.\n\n",
    );
    if !whole {
        let who = match end.role {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool result",
        };
        let text = end.text();
        let quoted: String = text.chars().take(BOUNDARY_QUOTE).collect();
        let _ = write!(
            ask,
            "Summarize only up to and including this {who} message, which begins:\n\
             <span-end>\n{quoted}\n</span-end>\n\
             The messages after it stay in the conversation as they are: leave them out of \
             the summary.\n\n"
        );
    }
    ask.push_str(&instructions(max_words));
    ask
}

/// `messages` in the `kind` of wire's shape, for the end of a request's
/// `messages`.
fn wire_messages(kind: ProviderKind, messages: &[Message]) -> Result<Vec<Value>, String> {
    if messages.is_empty() {
        return Ok(Vec::new());
    }
    match kind {
        ProviderKind::OpenAi => agent_host_provider::chat_request_messages(messages)
            .map_err(|e| format!("cannot write the messages after the last request: {e}")),
        ProviderKind::Anthropic => {
            let request = agent_host_core::format::anthropic::to_request(messages)
                .map_err(|e| format!("cannot write the messages after the last request: {e}"))?;
            match request.get("messages") {
                Some(Value::Array(messages)) => Ok(messages.clone()),
                _ => Err("core's Anthropic writer gave no messages".into()),
            }
        }
    }
}

/// Makes `body` (the last request, in the upstream's `kind` of wire) the
/// summary request: not streamed, at most `max_tokens` answer tokens, the
/// answer in plain text, and `ask` as the last message.
fn summary_body(
    body: &mut Map<String, Value>,
    kind: ProviderKind,
    ask: String,
    max_tokens: u32,
) -> Result<(), String> {
    body.insert("stream".into(), json!(false));
    for field in ["stream_options", "response_format", "n"] {
        body.remove(field);
    }
    let cap = match kind {
        ProviderKind::OpenAi if body.contains_key("max_completion_tokens") => {
            "max_completion_tokens"
        }
        ProviderKind::OpenAi | ProviderKind::Anthropic => "max_tokens",
    };
    body.insert(cap.into(), json!(max_tokens));
    let messages = body
        .get_mut("messages")
        .and_then(Value::as_array_mut)
        .ok_or("the last request has no messages array")?;
    messages.push(json!({"role": "user", "content": ask}));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_request_keeps_the_prompt_and_asks_after_it() {
        let sent = json!({
            "model": "m",
            "stream": true,
            "stream_options": {"include_usage": true},
            "tools": [{"type": "function", "function": {"name": "grep"}}],
            "max_completion_tokens": 900,
            "response_format": {"type": "json_object"},
            "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}],
        });
        let mut body = sent.as_object().unwrap().clone();
        summary_body(&mut body, ProviderKind::OpenAi, "sum up".into(), 300).unwrap();
        assert_eq!(body["stream"], json!(false));
        assert!(!body.contains_key("stream_options") && !body.contains_key("response_format"));
        assert_eq!(body["max_completion_tokens"], json!(300));
        assert_eq!(body["tools"], sent["tools"]);
        let messages = body["messages"].as_array().unwrap();
        assert_eq!(messages[..2], sent["messages"].as_array().unwrap()[..]);
        assert_eq!(messages[2], json!({"role": "user", "content": "sum up"}));

        let mut anthropic =
            json!({"model": "c", "max_tokens": 4000, "system": "s", "messages": []})
                .as_object()
                .unwrap()
                .clone();
        summary_body(
            &mut anthropic,
            ProviderKind::Anthropic,
            "sum up".into(),
            500,
        )
        .unwrap();
        assert_eq!(anthropic["max_tokens"], json!(500));
        assert_eq!(anthropic["system"], json!("s"));

        let mut broken = json!({"model": "m"}).as_object().unwrap().clone();
        assert!(summary_body(&mut broken, ProviderKind::OpenAi, "x".into(), 1).is_err());
    }

    #[test]
    fn the_ask_names_where_the_span_ends_unless_it_is_the_whole_prompt() {
        let end = Message::assistant("Patched src/lib.rs; the tests pass.");
        let partial = ask(400, &end, false);
        assert!(
            partial.contains("assistant message, which begins:\n<span-end>\nPatched src/lib.rs")
        );
        assert!(partial.contains("under 400 words"));
        let whole = ask(400, &end, true);
        assert!(!whole.contains("<span-end>"));
        assert!(whole.contains("## Files Modified"));
    }
}
