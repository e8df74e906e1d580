//! Model providers: one chat request out, one assistant message back.
//!
//! Two wire formats cover the servers people run:
//!
//! - **OpenAI-compatible Chat Completions** ([`ProviderKind::OpenAi`]):
//!   OpenAI, Ollama, vLLM, the llama.cpp server, LM Studio, OpenRouter. The
//!   request is `POST {base_url}/chat/completions`.
//! - **Anthropic Messages** ([`ProviderKind::Anthropic`]): `POST
//!   {base_url}/v1/messages`, with the system prompt apart, content blocks
//!   and thinking blocks.
//!
//! Both stream (server-sent events) or not, pass tool calls through in both
//! directions, and put the usage the server reports on the reply with the
//! model's name. Requests time out; 429 and 5xx answers are retried with
//! backoff (honouring `Retry-After`); every error keeps the provider's own
//! message. A context-length error is its own [`ProviderError`] variant so
//! the caller can prune harder and retry once.
//!
//! The request body is built with core's format writers and a reply without
//! streaming is read with core's readers, so what is sent and stored is the
//! same model the rest of agent-host uses.

mod anthropic;
mod http;
mod openai;
mod relay;
mod responses;
mod sse;

pub use anthropic::tool_definition as anthropic_tool_definition;
pub use openai::request_messages as chat_request_messages;
pub use relay::{MAX_RELAYED_ERROR, Relay, RelayStream, Relayed};

use std::time::Duration;

use agent_host_core::Message;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tracing::warn;

/// Which wire format a provider speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// OpenAI-compatible Chat Completions.
    #[serde(rename = "openai")]
    OpenAi,
    /// Anthropic Messages.
    Anthropic,
}

impl ProviderKind {
    /// The name used in configuration and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::OpenAi => "openai",
            ProviderKind::Anthropic => "anthropic",
        }
    }

    /// The base URL used when none is configured.
    pub fn default_base_url(self) -> &'static str {
        match self {
            ProviderKind::OpenAi => "https://api.openai.com/v1",
            ProviderKind::Anthropic => "https://api.anthropic.com",
        }
    }

    /// The environment variable holding the API key when none is configured.
    pub fn default_api_key_env(self) -> &'static str {
        match self {
            ProviderKind::OpenAi => "OPENAI_API_KEY",
            ProviderKind::Anthropic => "ANTHROPIC_API_KEY",
        }
    }
}

impl std::fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for ProviderKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "openai" => Ok(ProviderKind::OpenAi),
            "anthropic" => Ok(ProviderKind::Anthropic),
            _ => Err(format!(
                "`{s}` is not a provider kind: use `openai` or `anthropic`"
            )),
        }
    }
}

/// Which request field carries the answer's token cap on the OpenAI wire.
///
/// Chat Completions servers take `max_tokens`; OpenAI's reasoning models
/// (o1, o3, o4, gpt-5) refuse it and want `max_completion_tokens`. The
/// Anthropic wire always sends `max_tokens`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MaxTokensField {
    /// `max_tokens`: what every compatible server takes.
    #[default]
    MaxTokens,
    /// `max_completion_tokens`: OpenAI's reasoning models.
    MaxCompletionTokens,
}

impl MaxTokensField {
    /// The field's name in the request body.
    pub fn as_str(self) -> &'static str {
        match self {
            MaxTokensField::MaxTokens => "max_tokens",
            MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
        }
    }
}

impl std::str::FromStr for MaxTokensField {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "max_tokens" => Ok(MaxTokensField::MaxTokens),
            "max_completion_tokens" => Ok(MaxTokensField::MaxCompletionTokens),
            _ => Err(format!(
                "`{s}` is not a token-cap field: use `max_tokens` or `max_completion_tokens`"
            )),
        }
    }
}

/// Where API keys come from: the front end decides (the environment, a
/// keyring, a secrets file); this crate never reads the environment itself.
///
/// Any `Fn(&str) -> Option<String>` is a key source:
///
/// ```
/// use agent_host_provider::{KeySource, ProviderKind, ProviderSettings, Provider};
///
/// let keys = |name: &str| (name == "OPENAI_API_KEY").then(|| "sk-test".to_owned());
/// let provider = Provider::new(ProviderSettings::new(ProviderKind::OpenAi, "gpt-4o"), &keys)?;
/// assert_eq!(provider.settings().model, "gpt-4o");
/// # Ok::<(), agent_host_provider::ProviderError>(())
/// ```
pub trait KeySource: Send + Sync {
    /// The key stored under `name` (an environment variable's name, say),
    /// if any.
    fn key(&self, name: &str) -> Option<String>;
}

impl<F: Fn(&str) -> Option<String> + Send + Sync> KeySource for F {
    fn key(&self, name: &str) -> Option<String> {
        self(name)
    }
}

/// Everything needed to talk to one provider (the effective `[provider]`
/// settings, after flags, environment and file were merged).
#[derive(Clone, Debug, PartialEq)]
pub struct ProviderSettings {
    /// The wire format.
    pub kind: ProviderKind,
    /// The server, e.g. `https://api.openai.com/v1` or `http://localhost:11434/v1`.
    pub base_url: String,
    /// The model name sent with every request.
    pub model: String,
    /// The environment variable holding the API key; `None` sends no key
    /// (local servers).
    pub api_key_env: Option<String>,
    /// The most tokens the answer may take.
    pub max_tokens: u32,
    /// The request field that carries `max_tokens` (OpenAI wire only).
    pub max_tokens_field: MaxTokensField,
    /// Sampling temperature; `None` leaves the server's default.
    pub temperature: Option<f32>,
    /// Stream the answer (server-sent events).
    pub stream: bool,
    /// How long the provider may keep us waiting. A request without
    /// streaming must be answered whole within it; a streamed one must
    /// start (its status and headers) within it, and then no two pieces of
    /// the stream may be further apart, however long the whole answer takes.
    pub timeout: Duration,
    /// How long connecting may take.
    pub connect_timeout: Duration,
    /// How many times a 429 or 5xx answer (or a dropped connection) is retried.
    pub max_retries: u32,
    /// The first backoff; it doubles on each retry (with jitter), capped at 30 s.
    pub initial_backoff: Duration,
    /// Tool definitions sent with every request, in the OpenAI function
    /// format (`{"type":"function","function":{name, description, parameters}}`);
    /// the Anthropic provider converts them.
    pub tools: Vec<Value>,
}

impl ProviderSettings {
    /// Settings for `kind` and `model` with the defaults: its public base URL
    /// and key variable, 4,096 answer tokens, streaming, a 600 s timeout, 10 s
    /// to connect, 3 retries from 1 s.
    pub fn new(kind: ProviderKind, model: impl Into<String>) -> Self {
        ProviderSettings {
            kind,
            base_url: kind.default_base_url().to_owned(),
            model: model.into(),
            api_key_env: Some(kind.default_api_key_env().to_owned()),
            max_tokens: 4_096,
            max_tokens_field: MaxTokensField::MaxTokens,
            temperature: None,
            stream: true,
            timeout: Duration::from_secs(600),
            connect_timeout: Duration::from_secs(10),
            max_retries: 3,
            initial_backoff: Duration::from_secs(1),
            tools: Vec::new(),
        }
    }
}

/// One request: the messages to send (system messages included; the
/// Anthropic provider moves them to `system`) and per-call overrides.
#[derive(Clone, Debug, Default)]
pub struct ChatRequest {
    /// The view to send, in order.
    pub messages: Vec<Message>,
    /// Overrides [`ProviderSettings::max_tokens`] (the summarizer caps its answer).
    pub max_tokens: Option<u32>,
    /// Overrides [`ProviderSettings::temperature`].
    pub temperature: Option<f32>,
    /// Send no tool definitions (summarization calls).
    pub no_tools: bool,
    /// Tool definitions sent with this request after the configured ones
    /// (same format as [`ProviderSettings::tools`]): tools the engine runs
    /// itself, such as long-term memory's.
    pub tools: Vec<Value>,
    /// Overrides [`ProviderSettings::stream`].
    pub stream: Option<bool>,
}

/// A piece of a streamed answer, as it arrives.
#[derive(Clone, Debug, PartialEq)]
pub enum StreamEvent {
    /// Answer text.
    Text(String),
    /// Reasoning (thinking) text.
    Reasoning(String),
    /// A tool call started (its name); its arguments follow in the final message.
    ToolCall {
        /// The tool's name.
        name: String,
    },
    /// The request failed and is retried after `delay`.
    Retry {
        /// Which attempt is next (2 for the first retry).
        attempt: u32,
        /// How long the provider waits first.
        delay: Duration,
        /// Why (status and the provider's message).
        reason: String,
    },
}

/// The answer.
#[derive(Clone, Debug, PartialEq)]
pub struct ChatReply {
    /// The assistant message: text, reasoning, tool calls, with `usage` and
    /// `model` set when the server said them. Its id is empty: the caller
    /// names it.
    pub message: Message,
    /// Why the model stopped (`stop`, `length`, `tool_calls`, `end_turn`, ...),
    /// as the server said it.
    pub stop_reason: Option<String>,
    /// How many HTTP attempts it took (1 without retries).
    pub attempts: u32,
}

/// Why a request failed. Every variant keeps what the provider said.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ProviderError {
    /// The API key's environment variable is not set.
    #[error(
        "the {kind} provider needs an API key in the environment variable {var}, which is not set (set it, or set `api_key_env` in [provider] for a server without keys to \"\")"
    )]
    MissingKey {
        /// The provider.
        kind: ProviderKind,
        /// The variable.
        var: String,
    },
    /// The request does not fit the model's context window.
    #[error("the model's context window is too small for the request ({status}): {message}")]
    ContextLength {
        /// The HTTP status.
        status: u16,
        /// The provider's message.
        message: String,
    },
    /// The key was refused (401, 403).
    #[error("the provider refused the API key ({status}): {message}")]
    Auth {
        /// The HTTP status.
        status: u16,
        /// The provider's message.
        message: String,
    },
    /// Still rate limited (429) after every retry.
    #[error("rate limited after {attempts} attempts (429): {message}")]
    RateLimited {
        /// How many requests were made.
        attempts: u32,
        /// The provider's message.
        message: String,
    },
    /// Any other error status (after retries for 5xx).
    #[error("the provider answered {status} after {attempts} attempt(s): {message}")]
    Status {
        /// The HTTP status.
        status: u16,
        /// How many requests were made.
        attempts: u32,
        /// The provider's message.
        message: String,
    },
    /// No answer in time: a whole answer took longer than the timeout, or a
    /// stream did not start or went silent for longer than it.
    #[error("no answer from {url} within {seconds} s (after {attempts} attempt(s))")]
    Timeout {
        /// The endpoint.
        url: String,
        /// The timeout.
        seconds: u64,
        /// How many requests were made.
        attempts: u32,
    },
    /// The server could not be reached, or the connection dropped.
    #[error("cannot reach {url} (after {attempts} attempt(s)): {message}")]
    Connect {
        /// The endpoint.
        url: String,
        /// How many requests were made.
        attempts: u32,
        /// What failed.
        message: String,
    },
    /// The server redirected the request to another origin (scheme, host or
    /// port), which is never followed: the key and the conversation would
    /// go there.
    #[error(
        "the provider at {from} redirected the request to {to}, another origin; it was not followed, so neither the API key nor the conversation went there (if {to} is the server you mean, set it as `base_url`)"
    )]
    Redirect {
        /// The origin the request went to.
        from: String,
        /// The origin it was redirected to.
        to: String,
    },
    /// The answer is not what the wire format says it must be.
    #[error("the provider's answer is malformed: {0}")]
    Malformed(String),
    /// The request could not be written in the provider's format.
    #[error("cannot write the request: {0}")]
    Request(String),
}

impl ProviderError {
    /// What kind of failure this is, for the front ends to map.
    pub fn kind(&self) -> agent_host_core::ErrorKind {
        use agent_host_core::ErrorKind;
        match self {
            ProviderError::MissingKey { .. } | ProviderError::Redirect { .. } => {
                ErrorKind::Configuration
            }
            _ => ErrorKind::ProviderFailed,
        }
    }
}

/// A configured provider. Cheap to clone (one shared HTTP client).
#[derive(Clone)]
pub struct Provider {
    settings: ProviderSettings,
    client: reqwest::Client,
    api_key: Option<String>,
}

/// Shows everything but the key, so that a provider in a log or an error
/// never leaks it.
impl std::fmt::Debug for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Provider")
            .field("settings", &self.settings)
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .finish_non_exhaustive()
    }
}

impl Provider {
    /// A provider from settings, asking `keys` for the API key named by
    /// [`ProviderSettings::api_key_env`] now.
    pub fn new(settings: ProviderSettings, keys: &dyn KeySource) -> Result<Self, ProviderError> {
        let api_key = match settings.api_key_env.as_deref() {
            None | Some("") => None,
            Some(var) => match keys.key(var) {
                Some(key) if !key.is_empty() => Some(key),
                _ => {
                    return Err(ProviderError::MissingKey {
                        kind: settings.kind,
                        var: var.to_owned(),
                    });
                }
            },
        };
        Self::with_api_key(settings, api_key)
    }

    /// A provider with the API key given rather than read from
    /// [`ProviderSettings::api_key_env`] (a key from a keyring or a secrets
    /// file, or a test); `None` sends no key.
    ///
    /// A redirect is followed only within the base URL's origin (see
    /// [`ProviderError::Redirect`]). A plain `http://` base URL on a host
    /// other than this machine is logged as a warning, once per provider:
    /// the key and the conversation cross the network unencrypted.
    pub fn with_api_key(
        settings: ProviderSettings,
        api_key: Option<String>,
    ) -> Result<Self, ProviderError> {
        if let Some(host) = http::unencrypted_remote_host(&settings.base_url) {
            warn!(
                base_url = %settings.base_url,
                "the provider's base_url is plain http:// on {host}, which is not this machine: {} travel unencrypted (use https://)",
                if api_key.is_some() { "the API key and the conversation" } else { "the conversation" }
            );
        }
        let client = reqwest::Client::builder()
            .connect_timeout(settings.connect_timeout)
            .redirect(http::redirect_policy())
            .user_agent(concat!("agent-host/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ProviderError::Request(format!("cannot build the HTTP client: {e}")))?;
        Ok(Provider {
            settings,
            client,
            api_key,
        })
    }

    /// The same provider (its client, base URL and key) asking for `model`
    /// instead of its configured one.
    pub fn with_model(&self, model: &str) -> Provider {
        let mut provider = self.clone();
        model.clone_into(&mut provider.settings.model);
        provider
    }

    /// The settings it was made with.
    pub fn settings(&self) -> &ProviderSettings {
        &self.settings
    }

    /// `text` with every occurrence of the API key replaced by
    /// `[redacted]`: for a message that leaves the host's trust (a server
    /// may quote the key it refused in its error body, and a sandboxed
    /// processor must never read it).
    ///
    /// ```
    /// use agent_host_provider::{Provider, ProviderKind, ProviderSettings};
    ///
    /// let settings = ProviderSettings::new(ProviderKind::OpenAi, "m");
    /// let p = Provider::with_api_key(settings, Some("sk-secret".into()))?;
    /// assert_eq!(p.redact("bad key sk-secret"), "bad key [redacted]");
    /// # Ok::<(), agent_host_provider::ProviderError>(())
    /// ```
    pub fn redact(&self, text: &str) -> String {
        match self.api_key.as_deref() {
            Some(key) if !key.is_empty() => text.replace(key, "[redacted]"),
            _ => text.to_owned(),
        }
    }

    /// Sends `request` and returns the answer; streamed pieces go to
    /// `on_event` as they arrive (and retries are announced there).
    pub async fn complete(
        &self,
        request: &ChatRequest,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<ChatReply, ProviderError> {
        match self.settings.kind {
            ProviderKind::OpenAi => openai::complete(self, request, on_event).await,
            ProviderKind::Anthropic => anthropic::complete(self, request, on_event).await,
        }
    }
}

/// A temperature as JSON: through its shortest decimal form, so that `0.7`
/// goes out as `0.7` and not as the `f32` widened to `0.699999988079071`.
fn temperature(t: f32) -> Value {
    t.to_string()
        .parse::<f64>()
        .ok()
        .and_then(serde_json::Number::from_f64)
        .map_or(Value::Null, Value::Number)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_output_never_shows_the_key() {
        let settings = ProviderSettings::new(ProviderKind::OpenAi, "m");
        let provider = Provider::with_api_key(settings, Some("sk-secret-123".into())).unwrap();
        let shown = format!("{provider:?}");
        assert!(!shown.contains("sk-secret-123"), "{shown}");
        assert!(shown.contains("<set>"), "{shown}");
    }

    /// The warnings logged while `f` runs on this thread.
    fn warnings(f: impl FnOnce()) -> Vec<String> {
        use std::sync::{Arc, Mutex};
        use tracing::field::{Field, Visit};

        #[derive(Default)]
        struct Text(String);
        impl Visit for Text {
            fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
                self.0.push_str(&format!("{}={value:?} ", field.name()));
            }
        }
        struct Capture(Arc<Mutex<Vec<String>>>);
        impl tracing::Subscriber for Capture {
            fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
                true
            }
            fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
                tracing::span::Id::from_u64(1)
            }
            fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
            fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
            fn event(&self, event: &tracing::Event<'_>) {
                if *event.metadata().level() <= tracing::Level::WARN {
                    let mut text = Text::default();
                    event.record(&mut text);
                    self.0.lock().unwrap().push(text.0);
                }
            }
            fn enter(&self, _: &tracing::span::Id) {}
            fn exit(&self, _: &tracing::span::Id) {}
        }
        let seen = Arc::new(Mutex::new(Vec::new()));
        tracing::subscriber::with_default(Capture(Arc::clone(&seen)), f);
        seen.lock().unwrap().clone()
    }

    /// Issue: a plain http:// base URL on another machine sent the key and
    /// the conversation unencrypted without a word.
    #[test]
    fn plain_http_to_another_machine_is_warned_about_once() {
        let at = |base_url: &str| {
            let mut settings = ProviderSettings::new(ProviderKind::Anthropic, "m");
            settings.base_url = base_url.to_owned();
            warnings(|| {
                let provider = Provider::with_api_key(settings, Some("sk-x".into())).unwrap();
                let _copy = provider.clone();
            })
        };
        let remote = at("http://10.1.2.3:8080");
        assert_eq!(remote.len(), 1, "{remote:?}");
        assert!(remote[0].contains("10.1.2.3"), "{remote:?}");
        assert!(remote[0].contains("unencrypted"), "{remote:?}");
        assert!(!remote[0].contains("sk-x"), "{remote:?}");
        for quiet in [
            "http://127.0.0.1:8080",
            "http://localhost:8080",
            "http://[::1]:8080",
            "https://10.1.2.3",
        ] {
            assert_eq!(at(quiet), Vec::<String>::new(), "{quiet}");
        }
    }

    /// Issue: a retry was reported twice, once by the `Retry` event and
    /// once more by a warning the CLI shows too.
    #[test]
    fn a_retry_is_reported_by_its_event_and_not_by_a_warning() {
        // A port that was just free: nothing listens there, so the attempt
        // fails to connect and is retried.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut settings = ProviderSettings::new(ProviderKind::OpenAi, "m");
        settings.base_url = format!("http://127.0.0.1:{port}/v1");
        settings.max_retries = 1;
        settings.initial_backoff = Duration::from_millis(1);
        let provider = Provider::with_api_key(settings, None).unwrap();
        let request = ChatRequest {
            messages: vec![Message::user("hi")],
            ..ChatRequest::default()
        };
        let mut events = Vec::new();
        let logged = warnings(|| {
            let result = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(provider.complete(&request, &mut |e| events.push(e)));
            assert!(
                matches!(result, Err(ProviderError::Connect { attempts: 2, .. })),
                "{result:?}"
            );
        });
        let retries = events
            .iter()
            .filter(|e| matches!(e, StreamEvent::Retry { .. }))
            .count();
        assert_eq!(retries, 1, "{events:?}");
        assert_eq!(logged, Vec::<String>::new());
    }

    #[test]
    fn temperatures_go_out_as_written() {
        assert_eq!(temperature(0.7).to_string(), "0.7");
        assert_eq!(temperature(1.0).to_string(), "1.0");
    }
}
