//! What both wire formats share: sending a request with a timeout and
//! retries, reading a plain or streamed answer, and turning error answers
//! into [`ProviderError`]s.
//!
//! A wire format ([`Wire`]) only says how to read a whole answer and how to
//! read a streamed one; everything about HTTP lives here, so both providers
//! retry, time out and report errors the same way.

use std::time::Duration;

use agent_host_core::Message;
use serde_json::Value;
use tracing::debug;

use super::sse;
use super::{ChatReply, Provider, ProviderError, StreamEvent};

/// The longest wait between two attempts, whatever the backoff or the
/// server's `Retry-After` say: a caller waiting longer is better served by
/// an error it can act on.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// How much of an error body that is not JSON is kept in the error.
const MAX_BODY_IN_ERROR: usize = 500;

/// The most redirects followed for one request (all within one origin).
const MAX_REDIRECTS: usize = 5;

/// The most bytes of an error answer read: any real error document fits;
/// the rest of a huge one is never read (a 1 GiB body once took 2.1 GB).
const MAX_ERROR_BODY: usize = 64 << 10;

/// The most bytes of an answer read, whole or streamed: far more than any
/// model writes in one reply, bounded so a server cannot fill the memory.
pub(super) const MAX_ANSWER_BYTES: usize = 64 << 20;

/// A wire format's answer, before the attempt count is known.
#[derive(Debug)]
pub(super) struct Reply {
    pub message: Message,
    pub stop_reason: Option<String>,
}

/// One wire format: how to read its answers.
pub(super) trait Wire {
    /// The name of the stream's end marker, for the error when it is missing.
    const END_MARKER: &'static str;
    /// Reads a streamed answer.
    type Decoder: StreamDecoder;
    /// Reads a whole (not streamed) answer; `Err` says what is missing or wrong.
    fn parse_reply(body: Value) -> Result<Reply, String>;
}

/// Reads a streamed answer one server-sent event at a time.
pub(super) trait StreamDecoder: Default + Send {
    /// Takes one event; pieces of the answer go to `emit` as they arrive.
    fn event(
        &mut self,
        event: sse::Event,
        emit: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<(), StreamError>;
    /// Whether the stream's end marker arrived.
    fn is_done(&self) -> bool;
    /// The whole answer, once the stream is done.
    fn finish(self) -> Result<Reply, String>;
}

/// What can go wrong inside a stream.
pub(super) enum StreamError {
    /// The event is not what the wire format says.
    Malformed(String),
    /// The server reported an error inside the stream.
    Api(ApiError),
}

/// An error the server reported: its status and what its body said.
#[derive(Debug, Clone)]
pub(super) struct ApiError {
    /// The HTTP status (or the status an in-stream error stands for).
    pub status: u16,
    /// `error.type` (Anthropic and OpenAI both have one).
    pub kind: Option<String>,
    /// `error.code` (OpenAI: `context_length_exceeded`, `rate_limit_exceeded`).
    pub code: Option<String>,
    /// `error.message`, or the body text when it is not the usual JSON.
    pub message: String,
}

impl ApiError {
    /// Reads an error body: `{"error": {"message", "type", "code"}}` (both
    /// wires; Anthropic wraps it in `{"type": "error", ...}`), `{"error":
    /// "text"}` (Ollama and some proxies), or anything else, kept as text.
    pub(super) fn from_body(status: u16, body: &str) -> Self {
        let json: Option<Value> = serde_json::from_str(body).ok();
        let error = json.as_ref().and_then(|v| v.get("error"));
        let text = |key: &str| -> Option<String> {
            match error?.get(key)? {
                Value::String(s) => Some(s.clone()),
                Value::Number(n) => Some(n.to_string()),
                _ => None,
            }
        };
        let message = match error {
            Some(Value::String(s)) => Some(s.clone()),
            _ => text("message"),
        }
        .or_else(|| {
            json.as_ref()
                .and_then(|v| v.get("message").or_else(|| v.get("detail")))
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_else(|| truncate(body.trim(), MAX_BODY_IN_ERROR));
        ApiError {
            status,
            kind: text("type"),
            code: text("code"),
            message: if message.is_empty() {
                format!("HTTP {status} with an empty body")
            } else {
                message
            },
        }
    }

    /// Whether this is a "the prompt does not fit" error, from whichever
    /// server: the one place they are recognised.
    ///
    /// A name that says it outright (OpenAI's and Groq's
    /// `context_length_exceeded` code, llama.cpp's `exceed_context_size_error`
    /// type, LiteLLM's `ContextWindowExceededError` in its message) counts
    /// at any status; a phrase in the message (Anthropic's "prompt is too
    /// long", vLLM's and OpenRouter's "maximum context length", Ollama's
    /// "the input length exceeds the context length") only on a 400, 413 or
    /// 422, so that a server error which mentions the context is still
    /// retried as one.
    fn is_context_length(&self) -> bool {
        const NAMES: [&str; 4] = [
            "context_length_exceeded",
            "exceed_context_size_error",
            "contextwindowexceedederror",
            "context_window_exceeded",
        ];
        const PHRASES: [&str; 10] = [
            "context length",
            "context_length",
            "context window",
            "context size",
            "prompt is too long",
            "input is too long",
            "too many tokens",
            "exceed context limit",
            "exceeds the maximum number of tokens",
            "input token count",
        ];
        let lower = |s: Option<&str>| s.unwrap_or_default().to_ascii_lowercase();
        let (code, kind, message) = (
            lower(self.code.as_deref()),
            lower(self.kind.as_deref()),
            self.message.to_ascii_lowercase(),
        );
        let named = NAMES
            .iter()
            .any(|n| code == *n || kind == *n || message.contains(n));
        let said =
            matches!(self.status, 400 | 413 | 422) && PHRASES.iter().any(|p| message.contains(p));
        named || said
    }

    /// The error (or retry) this answer means.
    fn into_outcome(self, attempts: u32, retry_after: Option<Duration>) -> Outcome {
        let status = self.status;
        if self.is_context_length() {
            return Outcome::Fail(ProviderError::ContextLength {
                status,
                message: self.message,
            });
        }
        match status {
            401 | 403 => Outcome::Fail(ProviderError::Auth {
                status,
                message: self.message,
            }),
            // 408: the server gave up waiting for us; 529: Anthropic overloaded.
            408 | 429 | 500..=599 => Outcome::Retry {
                reason: format!("{status}: {}", self.message),
                retry_after,
                error: if status == 429 {
                    ProviderError::RateLimited {
                        attempts,
                        message: self.message,
                    }
                } else {
                    ProviderError::Status {
                        status,
                        attempts,
                        message: self.message,
                    }
                },
            },
            _ => Outcome::Fail(ProviderError::Status {
                status,
                attempts,
                message: self.message,
            }),
        }
    }
}

/// How one attempt ended, when it did not give an answer.
enum Outcome {
    /// Worth another attempt; `error` is what the caller gets when none is left.
    Retry {
        error: ProviderError,
        reason: String,
        retry_after: Option<Duration>,
    },
    /// Final.
    Fail(ProviderError),
}

/// The request of one exchange, ready to send as often as needed.
pub(super) struct HttpRequest {
    pub url: String,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
    pub stream: bool,
    /// For the debug log only.
    pub message_count: usize,
}

/// Sends `request` until it gives an answer, a final error, or the retries
/// run out.
pub(super) async fn exchange<W: Wire>(
    provider: &Provider,
    request: HttpRequest,
    on_event: &mut (dyn FnMut(StreamEvent) + Send),
) -> Result<ChatReply, ProviderError> {
    let settings = provider.settings();
    debug!(
        url = %request.url,
        model = %settings.model,
        messages = request.message_count,
        stream = request.stream,
        "provider request"
    );
    let mut attempt = 1;
    loop {
        let once = attempt_once::<W>(provider, &request, attempt, on_event);
        // A whole answer has the timeout in all; a stream has it for its
        // start and for each silence (in `send_and_read`), so that a long
        // answer arriving steadily is not cut.
        let result = if request.stream {
            once.await
        } else {
            tokio::time::timeout(settings.timeout, once)
                .await
                .unwrap_or_else(|_elapsed| {
                    Err(Outcome::Fail(timed_out(
                        &request,
                        settings.timeout,
                        attempt,
                    )))
                })
        };
        let outcome = match result {
            Ok(reply) => {
                debug!(
                    model = reply.message.model.as_deref().unwrap_or(""),
                    usage = ?reply.message.usage,
                    stop_reason = reply.stop_reason.as_deref().unwrap_or(""),
                    attempts = attempt,
                    "provider reply"
                );
                return Ok(ChatReply {
                    message: reply.message,
                    stop_reason: reply.stop_reason,
                    attempts: attempt,
                });
            }
            Err(outcome) => outcome,
        };
        match outcome {
            Outcome::Fail(error) => return Err(error),
            Outcome::Retry { error, .. } if attempt > settings.max_retries => return Err(error),
            Outcome::Retry {
                reason,
                retry_after,
                ..
            } => {
                let delay = backoff(settings.initial_backoff, attempt, retry_after);
                attempt += 1;
                // Debug only: the `Retry` event is what the user is shown,
                // and a warning too would report the retry twice.
                debug!(
                    url = %request.url,
                    attempt,
                    delay_ms = delay.as_millis() as u64,
                    %reason,
                    "provider request failed; retrying"
                );
                on_event(StreamEvent::Retry {
                    attempt,
                    delay,
                    reason,
                });
                tokio::time::sleep(delay).await;
            }
        }
    }
}

/// One HTTP attempt. A failure after a piece of the answer went to
/// `on_event` is never retried: the caller has shown it already.
async fn attempt_once<W: Wire>(
    provider: &Provider,
    request: &HttpRequest,
    attempt: u32,
    on_event: &mut (dyn FnMut(StreamEvent) + Send),
) -> Result<Reply, Outcome> {
    let mut emitted = false;
    let mut emit = |event: StreamEvent| {
        emitted = true;
        on_event(event);
    };
    let result = send_and_read::<W>(provider, request, attempt, &mut emit).await;
    match result {
        Err(Outcome::Retry { error, .. }) if emitted => Err(Outcome::Fail(error)),
        other => other,
    }
}

async fn send_and_read<W: Wire>(
    provider: &Provider,
    request: &HttpRequest,
    attempt: u32,
    emit: &mut (dyn FnMut(StreamEvent) + Send),
) -> Result<Reply, Outcome> {
    let connect = |e: reqwest::Error, what: &str| Outcome::Retry {
        reason: format!("{what}: {}", error_chain(&e)),
        retry_after: None,
        error: ProviderError::Connect {
            url: request.url.clone(),
            attempts: attempt,
            message: format!("{what}: {}", error_chain(&e)),
        },
    };
    let mut builder = provider
        .client
        .post(&request.url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(request.body.clone());
    for (name, value) in &request.headers {
        builder = builder.header(*name, value);
    }
    // For a stream, the longest wait for its start and for each piece.
    let idle = request.stream.then(|| provider.settings().timeout);
    let mut response = within(idle, request, attempt, builder.send())
        .await?
        .map_err(|e| {
            if e.is_redirect() {
                Outcome::Fail(redirect_error(&e, &request.url, attempt))
            } else {
                connect(e, "sending the request failed")
            }
        })?;
    let status = response.status().as_u16();
    debug!(url = %request.url, status, attempt, "provider response");
    if !response.status().is_success() {
        let retry_after = retry_after(response.headers());
        let (body, _cut) = within(
            idle,
            request,
            attempt,
            read_capped(&mut response, MAX_ERROR_BODY),
        )
        .await?
        .map_err(|e| connect(e, "reading the error answer failed"))?;
        let body = String::from_utf8_lossy(&body);
        return Err(ApiError::from_body(status, &body).into_outcome(attempt, retry_after));
    }
    let is_event_stream = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("text/event-stream"));
    // A server (or proxy) that ignores `stream` answers with one JSON body,
    // which reads the same as a request without streaming.
    if !(request.stream && is_event_stream) {
        let (body, cut) = within(
            idle,
            request,
            attempt,
            read_capped(&mut response, MAX_ANSWER_BYTES),
        )
        .await?
        .map_err(|e| connect(e, "reading the answer failed"))?;
        if cut {
            return Err(Outcome::Fail(too_large()));
        }
        let json: Value = serde_json::from_slice(&body).map_err(|e| {
            Outcome::Fail(ProviderError::Malformed(format!(
                "the answer is not JSON ({e}): {}",
                truncate(&String::from_utf8_lossy(&body), 200)
            )))
        })?;
        return W::parse_reply(json).map_err(|e| Outcome::Fail(ProviderError::Malformed(e)));
    }

    let mut parser = sse::Parser::default();
    let mut decoder = W::Decoder::default();
    let mut events = Vec::new();
    let mut seen = 0usize;
    let mut streamed = 0usize;
    let mut ended = false;
    while !decoder.is_done() && !ended {
        match within(idle, request, attempt, response.chunk()).await? {
            Ok(Some(bytes)) => {
                streamed = streamed.saturating_add(bytes.len());
                if streamed > MAX_ANSWER_BYTES {
                    return Err(Outcome::Fail(too_large()));
                }
                parser.feed(&bytes, &mut events)
            }
            Ok(None) => {
                parser.finish(&mut events);
                ended = true;
            }
            Err(e) => return Err(connect(e, "the connection dropped during the stream")),
        }
        for event in events.drain(..) {
            seen += 1;
            decoder.event(event, emit).map_err(|e| match e {
                StreamError::Malformed(m) => Outcome::Fail(ProviderError::Malformed(m)),
                StreamError::Api(api) => api.into_outcome(attempt, None),
            })?;
            if decoder.is_done() {
                break;
            }
        }
    }
    if !decoder.is_done() {
        // Retried only if nothing was shown yet (see `attempt_once`).
        return Err(Outcome::Retry {
            reason: "the stream ended early".into(),
            retry_after: None,
            error: ProviderError::Malformed(format!(
                "the stream ended without {} after {seen} event(s)",
                W::END_MARKER
            )),
        });
    }
    decoder
        .finish()
        .map_err(|e| Outcome::Fail(ProviderError::Malformed(e)))
}

/// The body of `response`, read up to `max` bytes; true when more was left
/// unread (the connection is then dropped, not drained).
pub(super) async fn read_capped(
    response: &mut reqwest::Response,
    max: usize,
) -> Result<(Vec<u8>, bool), reqwest::Error> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        let room = max - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            return Ok((body, true));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body, false))
}

/// The error for an answer over [`MAX_ANSWER_BYTES`].
pub(super) fn too_large() -> ProviderError {
    ProviderError::Malformed(format!(
        "the answer is larger than {} MiB, more than any model writes in one reply; the rest \
         was not read",
        MAX_ANSWER_BYTES >> 20
    ))
}

/// `future`'s output, or a [`ProviderError::Timeout`] when `limit` passes
/// first (no limit: however long it takes).
async fn within<F: std::future::Future>(
    limit: Option<Duration>,
    request: &HttpRequest,
    attempt: u32,
    future: F,
) -> Result<F::Output, Outcome> {
    match limit {
        Some(limit) => tokio::time::timeout(limit, future)
            .await
            .map_err(|_elapsed| Outcome::Fail(timed_out(request, limit, attempt))),
        None => Ok(future.await),
    }
}

fn timed_out(request: &HttpRequest, limit: Duration, attempt: u32) -> ProviderError {
    ProviderError::Timeout {
        url: request.url.clone(),
        // Rounded up, so a sub-second timeout does not read "0 s".
        seconds: limit.as_secs() + u64::from(limit.subsec_nanos() > 0),
        attempts: attempt,
    }
}

/// The redirect policy of every provider's client: a redirect within the
/// base URL's origin (scheme, host and port) is followed, up to
/// [`MAX_REDIRECTS`] of them; one to another origin never is, so that the
/// key (which reqwest strips from `Authorization` only, not from
/// `x-api-key`) and the conversation (which a 307 or 308 sends again) stay
/// with the server they were meant for.
pub(super) fn redirect_policy() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let Some(first) = attempt.previous().first() else {
            return attempt.follow();
        };
        let (from, to) = (first.origin(), attempt.url().origin());
        if from != to {
            let error = CrossOrigin {
                from: from.ascii_serialization(),
                to: to.ascii_serialization(),
            };
            return attempt.error(error);
        }
        if attempt.previous().len() > MAX_REDIRECTS {
            let error = format!("more than {MAX_REDIRECTS} redirects");
            return attempt.error(error);
        }
        attempt.follow()
    })
}

/// A redirect to another origin, refused by [`redirect_policy`].
#[derive(Debug)]
struct CrossOrigin {
    from: String,
    to: String,
}

impl std::fmt::Display for CrossOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "a redirect from {} to {}", self.from, self.to)
    }
}

impl std::error::Error for CrossOrigin {}

/// The error of a refused redirect: never retried, since the server would
/// only redirect again.
pub(super) fn redirect_error(e: &reqwest::Error, url: &str, attempt: u32) -> ProviderError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(cause) = source {
        if let Some(CrossOrigin { from, to }) = cause.downcast_ref::<CrossOrigin>() {
            return ProviderError::Redirect {
                from: from.clone(),
                to: to.clone(),
            };
        }
        source = cause.source();
    }
    ProviderError::Connect {
        url: url.to_owned(),
        attempts: attempt,
        message: error_chain(e),
    }
}

/// The host of a plain `http://` base URL when it is not this machine
/// (`localhost`, 127.0.0.0/8, `::1`): the key and the conversation would
/// cross a network unencrypted.
pub(super) fn unencrypted_remote_host(base_url: &str) -> Option<String> {
    let url = reqwest::Url::parse(base_url).ok()?;
    if url.scheme() != "http" {
        return None;
    }
    let host = url.host_str()?;
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let loopback = match bare.parse::<std::net::IpAddr>() {
        Ok(ip) => ip.is_loopback(),
        Err(_) => {
            let name = bare.trim_end_matches('.').to_ascii_lowercase();
            name == "localhost" || name.ends_with(".localhost")
        }
    };
    (!loopback).then(|| host.to_owned())
}

/// The wait before attempt `attempt + 1`: the server's `Retry-After` when it
/// gave one, else `initial` doubled per attempt, with ±20% jitter so that
/// many clients throttled together do not come back together. Capped at
/// [`MAX_BACKOFF`].
fn backoff(initial: Duration, attempt: u32, retry_after: Option<Duration>) -> Duration {
    if let Some(wait) = retry_after {
        return wait.min(MAX_BACKOFF);
    }
    let base = initial
        .saturating_mul(1u32 << (attempt - 1).min(20))
        .min(MAX_BACKOFF);
    base.mul_f64(0.8 + 0.4 * random_unit()).min(MAX_BACKOFF)
}

/// A random number in [0, 1), from the standard library's randomly seeded
/// hasher: jitter needs no better randomness than that.
fn random_unit() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(0);
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// `Retry-After` in seconds (OpenAI also sends `retry-after-ms`). The HTTP
/// date form is not used by model APIs and is ignored.
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let number = |name: &str| -> Option<f64> {
        headers
            .get(name)?
            .to_str()
            .ok()?
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|n| n.is_finite() && *n >= 0.0)
    };
    // `Retry-After` may also be an HTTP date (RFC 9110): wait until then.
    let date = || -> Option<f64> {
        let text = headers.get("retry-after")?.to_str().ok()?;
        let at = chrono::DateTime::parse_from_rfc2822(text.trim()).ok()?;
        let wait = at.with_timezone(&chrono::Utc) - chrono::Utc::now();
        Some(wait.num_milliseconds().max(0) as f64 / 1000.0)
    };
    number("retry-after-ms")
        .map(|ms| ms / 1000.0)
        .or_else(|| number("retry-after"))
        .or_else(date)
        .map(|s| Duration::from_secs_f64(s.min(MAX_BACKOFF.as_secs_f64())))
}

/// The error and its causes, `: `-joined: reqwest's own message alone
/// ("error sending request") does not say what failed.
use agent_host_core::error_kind::error_chain;

/// `text` cut to at most `max` bytes on a character boundary, with `...`.
pub(super) fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &text[..end])
}

/// The reply's assistant message, stamped now, with no id (the caller names it).
pub(super) fn stamp(mut message: Message) -> Message {
    message.id.clear();
    message.timestamp = Some(chrono::Utc::now());
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_is_read_in_seconds_milliseconds_or_as_a_date() {
        use reqwest::header::{HeaderMap, HeaderValue};
        let with = |name: &'static str, value: &str| {
            let mut h = HeaderMap::new();
            h.insert(name, HeaderValue::from_str(value).unwrap());
            retry_after(&h)
        };
        assert_eq!(with("retry-after", "2"), Some(Duration::from_secs(2)));
        assert_eq!(
            with("retry-after-ms", "250"),
            Some(Duration::from_millis(250))
        );
        let soon = (chrono::Utc::now() + chrono::Duration::seconds(20)).to_rfc2822();
        let wait = with("retry-after", &soon.replace("+0000", "GMT")).unwrap();
        assert!((18..=20).contains(&wait.as_secs()), "{wait:?}");
        let past = with("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT");
        assert_eq!(past, Some(Duration::ZERO));
        assert_eq!(with("retry-after", "3600"), Some(MAX_BACKOFF));
        assert_eq!(with("retry-after", "soon"), None);
    }

    #[test]
    fn error_bodies_of_both_wires_give_their_message() {
        let openai = ApiError::from_body(
            400,
            r#"{"error":{"message":"bad","type":"invalid_request_error","param":null,"code":"context_length_exceeded"}}"#,
        );
        assert_eq!(openai.message, "bad");
        assert_eq!(openai.code.as_deref(), Some("context_length_exceeded"));
        let anthropic = ApiError::from_body(
            529,
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        );
        assert_eq!(anthropic.message, "Overloaded");
        assert_eq!(anthropic.kind.as_deref(), Some("overloaded_error"));
        let ollama = ApiError::from_body(404, r#"{"error":"model \"x\" not found"}"#);
        assert_eq!(ollama.message, "model \"x\" not found");
        let html = ApiError::from_body(502, &format!("<html>{}</html>", "x".repeat(900)));
        assert!(html.message.len() <= MAX_BODY_IN_ERROR + 3);
        assert!(html.message.starts_with("<html>"));
        assert_eq!(
            ApiError::from_body(503, "").message,
            "HTTP 503 with an empty body"
        );
    }

    /// Issue: context-overflow errors of llama.cpp and LiteLLM were not
    /// recognised, so the caller never pruned harder and retried. One test
    /// per server, each with the body that server really sends.
    fn context_length(status: u16, body: &str) -> bool {
        ApiError::from_body(status, body).is_context_length()
    }

    #[test]
    fn openai_context_length_exceeded_is_recognised() {
        assert!(context_length(
            400,
            r#"{"error":{"message":"This model's maximum context length is 8192 tokens. However, you requested 8334 tokens (338 in the messages, 7996 in the completion). Please reduce the length of the messages or completion.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#,
        ));
    }

    #[test]
    fn anthropic_prompt_is_too_long_is_recognised() {
        assert!(context_length(
            400,
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#,
        ));
        assert!(context_length(
            400,
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"input length and `max_tokens` exceed context limit: 179413 + 32768 > 200000, decrease input length or `max_tokens` and try again"}}"#,
        ));
    }

    #[test]
    fn llama_cpp_exceed_context_size_is_recognised() {
        assert!(context_length(
            400,
            r#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":5120,"n_ctx":4096}}"#,
        ));
        assert!(context_length(
            400,
            r#"{"error":{"code":400,"message":"request (4476 tokens) exceeds the available context size (4096 tokens)","type":"exceed_context_size_error","n_prompt_tokens":4476,"n_ctx":4096}}"#,
        ));
    }

    #[test]
    fn litellm_context_window_exceeded_is_recognised() {
        assert!(context_length(
            400,
            r#"{"error":{"message":"litellm.BadRequestError: litellm.ContextWindowExceededError: AnthropicError - {\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"prompt is too long: 200480 tokens > 200000 maximum\"}}\nReceived Model Group=anthropic/claude-3-5-sonnet-20241022\nAvailable Model Group Fallbacks=None","type":null,"param":null,"code":"400"}}"#,
        ));
        // The class name alone says it, whatever the status LiteLLM chose.
        assert!(context_length(
            500,
            r#"{"error":{"message":"litellm.ContextWindowExceededError: OpenAIException - Input tokens exceed the configured limit of 272000 tokens.","type":null,"param":null,"code":"500"}}"#,
        ));
    }

    #[test]
    fn vllm_maximum_context_length_is_recognised() {
        // Newer vLLM wraps the error; older vLLM sends its fields at the top.
        assert!(context_length(
            400,
            r#"{"error":{"message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}}"#,
        ));
        assert!(context_length(
            400,
            r#"{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}"#,
        ));
    }

    #[test]
    fn ollama_input_length_exceeds_the_context_length_is_recognised() {
        assert!(context_length(
            400,
            r#"{"error":"the input length exceeds the context length"}"#,
        ));
    }

    #[test]
    fn other_errors_are_not_context_length_errors() {
        assert!(!context_length(
            400,
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"messages: roles must alternate"}}"#,
        ));
        assert!(!context_length(
            404,
            r#"{"error":"model \"llama3\" not found, try pulling it first"}"#,
        ));
        // A 500 that mentions the context is a server error, not ours to prune.
        assert!(!context_length(
            500,
            r#"{"error":{"message":"context length oops"}}"#
        ));
    }

    #[test]
    fn only_rate_limits_timeouts_and_server_errors_are_retried() {
        let retried = |status| {
            matches!(
                ApiError::from_body(status, "{}").into_outcome(1, None),
                Outcome::Retry { .. }
            )
        };
        for status in [408, 429, 500, 502, 503, 529] {
            assert!(retried(status), "{status}");
        }
        for status in [400, 401, 403, 404, 413, 422] {
            assert!(!retried(status), "{status}");
        }
    }

    #[test]
    fn backoff_doubles_with_jitter_and_is_capped() {
        let initial = Duration::from_millis(100);
        for attempt in 1..=4 {
            let base = 100.0 * f64::from(1u32 << (attempt - 1));
            let delay = backoff(initial, attempt, None).as_secs_f64() * 1000.0;
            assert!(
                delay >= base * 0.8 - 1e-6 && delay <= base * 1.2 + 1e-6,
                "{attempt}: {delay}"
            );
        }
        let capped = backoff(initial, 40, None);
        assert!(capped <= MAX_BACKOFF && capped >= MAX_BACKOFF.mul_f64(0.8));
        assert_eq!(
            backoff(initial, 1, Some(Duration::from_secs(3))),
            Duration::from_secs(3)
        );
        assert_eq!(
            backoff(initial, 1, Some(Duration::from_secs(3600))),
            MAX_BACKOFF
        );
    }

    #[test]
    fn only_plain_http_to_another_machine_is_unencrypted() {
        for remote in [
            "http://10.0.0.5:8000/v1",
            "http://models.example.com/v1",
            "http://[2001:db8::1]:8080",
        ] {
            assert!(unencrypted_remote_host(remote).is_some(), "{remote}");
        }
        for local in [
            "http://127.0.0.1:11434/v1",
            "http://127.3.2.1/v1",
            "http://localhost:8080/v1",
            "http://LOCALHOST./v1",
            "http://[::1]:8080",
            "https://api.openai.com/v1",
            "https://10.0.0.5/v1",
        ] {
            assert_eq!(unencrypted_remote_host(local), None, "{local}");
        }
    }

    #[test]
    fn truncation_respects_character_boundaries() {
        assert_eq!(truncate("héllo", 2), "h...");
        assert_eq!(truncate("abc", 3), "abc");
    }
}
