//! The LLM summarizer: core's [`Summarizer`] trait served by a model.
//!
//! Core decides when to summarize and what span (see
//! [`agent_host_core::compact`]); this writes the text, with the seeds'
//! structured prompt: five headings (Files Modified, Key Decisions, Important
//! Values kept verbatim, Current State, Pending Tasks), under the word cap,
//! temperature 0.3. The answer may take at most 4,096 tokens, the provider's
//! configured `max_tokens`, twice the word cap plus a frame, and what the
//! context window leaves after the request (a request that leaves no room is
//! refused, not sent). A span too large for one call comes as several
//! requests, one per part, then merges of the partial summaries, each within
//! a part's budget; that split is core's.
//!
//! A failure is a [`SummaryError`]: the pipeline then keeps the full history
//! and reports it. The extractive summarizer stands in only when
//! [`LlmSummarizer::with_fallback`] asked for it, and the report says so.
//!
//! The trait is synchronous (core has no async runtime); each call blocks on
//! the provider through a tokio runtime handle. Call it from a thread that
//! is not itself driving that runtime: the engine runs the pipeline inside
//! `spawn_blocking`. Progress goes to the engine's [`Observer`], never to a
//! terminal.

use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use agent_host_core::extractive::ExtractiveSummarizer;
use agent_host_core::summarize::{Summarizer, SummaryError, SummaryRequest};
use agent_host_core::tokens::{HeuristicCounter, TokenCounter};
use agent_host_core::{Message, Role};
use agent_host_provider::{ChatRequest, Provider, StreamEvent};
use tokio::runtime::Handle;

use crate::{EngineEvent, Observer};

/// The temperature of summarization calls: low, so facts are copied rather
/// than paraphrased, yet not greedy decoding (which loops on long spans).
pub const SUMMARY_TEMPERATURE: f32 = 0.3;

/// The most tokens one summary answer may take.
pub const SUMMARY_MAX_TOKENS: u32 = 4_096;

/// Answer tokens allowed per word of the word cap: English prose runs about
/// 1.3 tokens a word, and the verbatim paths, commands and numbers a summary
/// keeps run higher.
const TOKENS_PER_WORD: u32 = 2;

/// Answer tokens for the headings and bullets beyond the words.
const ANSWER_FRAME_TOKENS: u32 = 128;

/// The fewest answer tokens worth asking for: a request that leaves less
/// room than this in the window is refused rather than sent.
const MIN_ANSWER_TOKENS: u32 = 256;

/// Characters of one tool result or message quoted to the summarizer; the
/// rest is elided in the middle (its ends carry what errors and outputs say).
const QUOTE_CHARS: usize = 20_000;

const INSTRUCTIONS: &str = "\
You summarize the earlier part of a conversation between a user and an AI agent so the agent can \
continue the work without it. Write the summary in Markdown with exactly these five headings, in \
this order, each present even when empty (write `- none`):

## Files Modified
Every file created, edited or deleted, one per bullet, with its path exactly as written.

## Key Decisions
Decisions taken and why, one per bullet.

## Important Values
Values the agent will need again, copied verbatim in backticks: file paths, URLs, identifiers, \
commands, error messages, numbers with units, configuration keys. Never paraphrase or shorten these.

## Current State
Where the work stands at the end of the span, in two or three sentences.

## Pending Tasks
What the user asked for that is not done yet, and open items, one per bullet.

Rules: write only the summary, no preamble; stay under {max_words} words; facts only from the \
conversation; if a previous summary is given, carry its facts forward unless the conversation \
shows they changed.";

/// Summarizes with a model; see the [module documentation](self).
pub struct LlmSummarizer {
    provider: Provider,
    handle: Handle,
    fallback: bool,
    context_limit: Option<u32>,
    calls: Mutex<Calls>,
    observer: Option<Arc<dyn Observer>>,
}

impl std::fmt::Debug for LlmSummarizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmSummarizer")
            .field("provider", &self.provider)
            .field("fallback", &self.fallback)
            .field("calls", &self.calls)
            .finish_non_exhaustive()
    }
}

/// What the summarizer did, for the run report.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Calls {
    /// Summarization requests sent (parts and merges).
    pub requests: u32,
    /// Input tokens the provider reported over all requests.
    pub input_tokens: u64,
    /// Output tokens the provider reported over all requests.
    pub output_tokens: u64,
    /// Why the model failed, when the extractive summarizer stood in.
    pub fell_back: Option<String>,
}

impl Calls {
    /// Counts one more request, and the usage its answer reported.
    pub fn count(&mut self, usage: Option<&agent_host_core::Usage>) {
        self.requests = self.requests.saturating_add(1);
        if let Some(usage) = usage {
            self.input_tokens = self.input_tokens.saturating_add(usage.input_tokens);
            self.output_tokens = self.output_tokens.saturating_add(usage.output_tokens);
        }
    }
}

impl LlmSummarizer {
    /// A summarizer calling `provider`, blocking on `handle` (the runtime
    /// the provider's client was made in). The runtime must drive its I/O
    /// on its own threads (a multi-thread runtime): a current-thread
    /// runtime's handle cannot, and the call would never finish.
    pub fn new(provider: Provider, handle: Handle) -> Self {
        LlmSummarizer {
            provider,
            handle,
            fallback: false,
            context_limit: None,
            calls: Mutex::new(Calls::default()),
            observer: None,
        }
    }

    /// Tells `observer` when each request starts and ends (a summary of a
    /// long span takes a while: a terminal shows a spinner, a server an
    /// event).
    pub fn with_observer(mut self, observer: Arc<dyn Observer>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// The model's context window, in tokens: a request and its answer
    /// must fit in it. Without it only the answer caps apply.
    pub fn with_context_limit(mut self, context_limit: u32) -> Self {
        self.context_limit = Some(context_limit);
        self
    }

    /// The answer tokens to ask for: the least of [`SUMMARY_MAX_TOKENS`],
    /// the provider's configured `max_tokens`, what the word cap needs, and
    /// what the window leaves after the request's `prompt_tokens`.
    pub fn answer_tokens(&self, max_words: usize, prompt_tokens: u32) -> Result<u32, SummaryError> {
        let words = u32::try_from(max_words).unwrap_or(u32::MAX);
        let for_words = words
            .saturating_mul(TOKENS_PER_WORD)
            .saturating_add(ANSWER_FRAME_TOKENS);
        let mut tokens = SUMMARY_MAX_TOKENS
            .min(self.provider.settings().max_tokens.max(1))
            .min(for_words);
        if let Some(limit) = self.context_limit {
            let room = limit.saturating_sub(prompt_tokens);
            if room < MIN_ANSWER_TOKENS.min(tokens) {
                return Err(SummaryError::Failed(format!(
                    "the summary request takes about {prompt_tokens} tokens and leaves no room \
                     for an answer in the {limit}-token context window (context.context_limit)"
                )));
            }
            tokens = tokens.min(room);
        }
        Ok(tokens)
    }

    /// Whether the extractive summarizer stands in when the model fails
    /// (off by default: a silent swap would hide a broken provider).
    pub fn with_fallback(mut self, fallback: bool) -> Self {
        self.fallback = fallback;
        self
    }

    /// What the summarizer did so far.
    pub fn calls(&self) -> Calls {
        self.calls.lock().map(|c| c.clone()).unwrap_or_default()
    }

    fn ask(&self, request: &SummaryRequest<'_>) -> Result<String, SummaryError> {
        if let Some(observer) = &self.observer {
            observer.event(&EngineEvent::SummaryStarted {
                messages: request.messages.len(),
                partials: request.partials.len(),
                model: self.provider.settings().model.clone(),
            });
        }
        let answer = self.ask_model(request);
        if let Some(observer) = &self.observer {
            observer.event(&EngineEvent::SummaryFinished {
                error: answer.as_ref().err().map(ToString::to_string),
            });
        }
        answer
    }

    fn ask_model(&self, request: &SummaryRequest<'_>) -> Result<String, SummaryError> {
        let messages = prompt(request);
        let counter = HeuristicCounter::default();
        let prompt_tokens = messages
            .iter()
            .fold(0u32, |n, m| n.saturating_add(counter.count_message(m)));
        let max_tokens = self.answer_tokens(request.max_words, prompt_tokens)?;
        let chat = ChatRequest {
            messages,
            max_tokens: Some(max_tokens),
            temperature: Some(SUMMARY_TEMPERATURE),
            no_tools: true,
            stream: Some(false),
            tools: Vec::new(),
        };
        let mut ignore = |_: StreamEvent| {};
        let reply = self
            .handle
            .block_on(self.provider.complete(&chat, &mut ignore))
            .map_err(|e| SummaryError::Failed(e.to_string()))?;
        if let Ok(mut calls) = self.calls.lock() {
            calls.count(reply.message.usage.as_ref());
        }
        let text = reply.message.text().trim().to_owned();
        if text.is_empty() {
            return Err(SummaryError::Failed(format!(
                "the model ({}) answered the summary request with no text (stop reason: {})",
                self.provider.settings().model,
                reply.stop_reason.as_deref().unwrap_or("none given")
            )));
        }
        if reply.stop_reason.as_deref() == Some("length")
            || reply.stop_reason.as_deref() == Some("max_tokens")
        {
            tracing::warn!(
                "the summary reached its {max_tokens}-token answer cap and may be cut short"
            );
        }
        Ok(text)
    }
}

impl Summarizer for LlmSummarizer {
    fn summarize(&self, request: &SummaryRequest<'_>) -> Result<String, SummaryError> {
        match self.ask(request) {
            Ok(text) => Ok(text),
            Err(error) if self.fallback => {
                tracing::warn!("{error}; the extractive summarizer stands in, as configured");
                if let Ok(mut calls) = self.calls.lock() {
                    calls.fell_back = Some(error.to_string());
                }
                ExtractiveSummarizer::default().summarize(request)
            }
            Err(error) => Err(error),
        }
    }
}

/// What a summary request asks for: the five headings, what goes under
/// each, and the rules, for a summary of at most `max_words` words.
pub fn instructions(max_words: usize) -> String {
    INSTRUCTIONS.replace("{max_words}", &max_words.to_string())
}

/// The messages of one summarization request: the instructions as a system
/// message, then one user message holding the material.
pub fn prompt(request: &SummaryRequest<'_>) -> Vec<Message> {
    let system = instructions(request.max_words);
    let mut material = String::new();
    if let Some(previous) = request.previous {
        let _ = write!(
            material,
            "<previous-summary>\n{previous}\n</previous-summary>\n\n"
        );
    }
    if request.messages.is_empty() && !request.partials.is_empty() {
        let _ = writeln!(
            material,
            "The conversation was too long for one pass, so its {} parts were summarized one by \
             one. Merge these partial summaries, oldest first, into one summary with the same \
             five headings: keep every file and verbatim value, drop what later parts superseded.\n",
            request.partials.len()
        );
        for (i, part) in request.partials.iter().enumerate() {
            let _ = write!(material, "<part n=\"{}\">\n{part}\n</part>\n\n", i + 1);
        }
    } else {
        material.push_str("Summarize this conversation:\n\n<conversation>\n");
        for m in request.messages {
            render(m, &mut material);
        }
        material.push_str("</conversation>\n");
    }
    vec![Message::system(system), Message::user(material)]
}

/// One message as plain text for the summarizer.
fn render(m: &Message, out: &mut String) {
    let who = match m.role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool result",
    };
    let _ = write!(out, "[{who}");
    if let Some(name) = &m.tool_name {
        let _ = write!(out, " {name}");
    }
    if m.is_error {
        out.push_str(", error");
    }
    out.push_str("]\n");
    let text = m.text();
    if !text.is_empty() {
        out.push_str(&quote(&text));
        out.push('\n');
    }
    for call in &m.tool_calls {
        let _ = writeln!(out, "-> calls {}({})", call.name, quote(&call.arguments));
    }
    out.push('\n');
}

/// `text`, with the middle elided past [`QUOTE_CHARS`].
fn quote(text: &str) -> String {
    let count = text.chars().count();
    if count <= QUOTE_CHARS {
        return text.to_owned();
    }
    let head: String = text.chars().take(QUOTE_CHARS / 2).collect();
    let tail: String = text.chars().skip(count - QUOTE_CHARS / 2).collect();
    format!(
        "{head}\n[... {} characters elided ...]\n{tail}",
        count - QUOTE_CHARS
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prompt_asks_for_the_five_headings_and_carries_the_previous_summary() {
        let mut call = Message::assistant("Editing.");
        call.push_tool_call("c1", "edit", r#"{"path":"src/a.rs"}"#);
        let messages = [Message::user("fix the build"), call];
        let request = SummaryRequest {
            messages: &messages,
            previous: Some("## Files Modified\n- `old.rs`"),
            partials: &[],
            max_words: 600,
        };
        let prompt = prompt(&request);
        assert_eq!(prompt.len(), 2);
        let system = prompt[0].text();
        for heading in [
            "## Files Modified",
            "## Key Decisions",
            "## Important Values",
            "## Current State",
            "## Pending Tasks",
        ] {
            assert!(system.contains(heading), "{heading} missing");
        }
        assert!(system.contains("under 600 words"));
        let material = prompt[1].text();
        assert!(material.contains("`old.rs`"));
        assert!(material.contains("[user]\nfix the build"));
        assert!(material.contains(r#"-> calls edit({"path":"src/a.rs"})"#));
    }

    #[test]
    fn a_merge_request_lists_the_parts_in_order() {
        let partials = ["first".to_owned(), "second".to_owned()];
        let request = SummaryRequest {
            messages: &[],
            previous: None,
            partials: &partials,
            max_words: 300,
        };
        let messages = prompt(&request);
        let material = messages[1].text();
        let first = material.find("<part n=\"1\">\nfirst").unwrap();
        let second = material.find("<part n=\"2\">\nsecond").unwrap();
        assert!(first < second);
        assert!(prompt(&request)[0].text().contains("under 300 words"));
    }

    fn summarizer(max_tokens: u32, context_limit: Option<u32>) -> LlmSummarizer {
        let mut settings = agent_host_provider::ProviderSettings::new(
            agent_host_provider::ProviderKind::OpenAi,
            "m",
        );
        settings.api_key_env = None;
        settings.max_tokens = max_tokens;
        let provider = Provider::new(settings, &|_: &str| None::<String>).unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let s = LlmSummarizer::new(provider, runtime.handle().clone());
        match context_limit {
            Some(limit) => s.with_context_limit(limit),
            None => s,
        }
    }

    #[test]
    fn the_answer_is_capped_by_max_tokens_the_word_cap_and_the_window() {
        // The user's max_tokens is below the summarizer's own cap: it holds.
        assert_eq!(summarizer(500, None).answer_tokens(600, 1_000), Ok(500));
        // The word cap: 100 words need far fewer than 4,096 tokens.
        assert_eq!(summarizer(8_192, None).answer_tokens(100, 1_000), Ok(328));
        assert_eq!(
            summarizer(8_192, None).answer_tokens(10_000, 1_000),
            Ok(SUMMARY_MAX_TOKENS)
        );
        // The window: what the request leaves, and a refusal when it leaves
        // too little (a 4,674-token merge under a 1,500-token limit).
        assert_eq!(
            summarizer(8_192, Some(1_500)).answer_tokens(600, 1_000),
            Ok(500)
        );
        let refused = summarizer(8_192, Some(1_500)).answer_tokens(600, 4_674);
        assert!(
            matches!(&refused, Err(SummaryError::Failed(m)) if m.contains("1500-token context window")),
            "{refused:?}"
        );
    }

    #[test]
    fn long_results_are_elided_in_the_middle() {
        let text = format!("{}{}", "a".repeat(QUOTE_CHARS), "z".repeat(100));
        let quoted = quote(&text);
        assert!(quoted.starts_with('a') && quoted.ends_with('z'));
        assert!(quoted.contains("[... 100 characters elided ...]"));
    }
}
