//! Relaying a client's own request (the gateway): the body goes upstream as
//! the client wrote it (with the messages the caller put in), and the answer
//! comes back as the upstream sent it, byte for byte, while a decoder reads
//! the same bytes into the reply to store.
//!
//! Unlike [`Provider::complete`], nothing is retried: the client made the
//! request and decides (the official SDKs retry on their own), and an
//! error answer is handed back with its status and (capped) body so the
//! client sees what the upstream said.

use std::time::Duration;

use agent_host_core::error_kind::error_chain;
use bytes::Bytes;
use serde_json::Value;

use super::http::{self, StreamDecoder, StreamError, Wire};
use super::{
    ChatReply, Provider, ProviderError, ProviderKind, StreamEvent, anthropic, openai, responses,
    sse,
};

/// The most bytes of an upstream's error answer handed back.
pub const MAX_RELAYED_ERROR: usize = 64 << 10;

/// A request to relay.
#[derive(Clone, Debug)]
pub struct Relay {
    /// The request body, in the provider's own wire format (shared, not
    /// copied: a caller keeps it to send again or to reuse).
    pub body: Bytes,
    /// Whether the body asks for a stream.
    pub stream: bool,
    /// Headers passed on from the client (`anthropic-beta`, say); the
    /// provider's own (`authorization`, `x-api-key`, `anthropic-version`
    /// unless given) are added.
    pub headers: Vec<(String, String)>,
    /// Whether the body is an OpenAI Responses request, for
    /// `{base_url}/responses` (an OpenAI-kind provider that serves it),
    /// rather than one in the provider's own wire.
    pub responses: bool,
}

/// What the upstream answered.
#[derive(Debug)]
pub enum Relayed {
    /// An error status: what it said, capped at [`MAX_RELAYED_ERROR`].
    Refused {
        /// The status.
        status: u16,
        /// Its content type, when it gave one.
        content_type: Option<String>,
        /// The body, cut at the cap.
        body: Bytes,
    },
    /// A whole answer.
    Whole {
        /// The body as it arrived.
        body: Bytes,
        /// The reply read from it (a body the wire cannot read is an
        /// error here, and still relayed as it is).
        reply: Result<ChatReply, ProviderError>,
    },
    /// A stream, to be read piece by piece.
    Stream(RelayStream),
}

/// A streamed answer: [`RelayStream::next`] gives the upstream's bytes as
/// they arrive and reads them into the reply [`RelayStream::finish`] gives.
pub struct RelayStream {
    response: reqwest::Response,
    parser: sse::Parser,
    decoder: AnyDecoder,
    events: Vec<sse::Event>,
    idle: Duration,
    url: String,
    streamed: usize,
    failed: Option<ProviderError>,
    ended: bool,
    /// What the decoder read so far and nobody took yet (see
    /// [`RelayStream::take_events`]).
    decoded: Vec<StreamEvent>,
}

impl std::fmt::Debug for RelayStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RelayStream")
            .field("url", &self.url)
            .field("streamed", &self.streamed)
            .finish_non_exhaustive()
    }
}

enum AnyDecoder {
    OpenAi(<openai::OpenAi as Wire>::Decoder),
    Anthropic(<anthropic::Anthropic as Wire>::Decoder),
    Responses(<responses::Responses as Wire>::Decoder),
}

impl AnyDecoder {
    fn event(&mut self, event: sse::Event, out: &mut Vec<StreamEvent>) -> Result<(), StreamError> {
        let mut keep = |e: StreamEvent| out.push(e);
        match self {
            AnyDecoder::OpenAi(d) => d.event(event, &mut keep),
            AnyDecoder::Anthropic(d) => d.event(event, &mut keep),
            AnyDecoder::Responses(d) => d.event(event, &mut keep),
        }
    }

    fn is_done(&self) -> bool {
        match self {
            AnyDecoder::OpenAi(d) => d.is_done(),
            AnyDecoder::Anthropic(d) => d.is_done(),
            AnyDecoder::Responses(d) => d.is_done(),
        }
    }

    fn finish(self) -> Result<http::Reply, String> {
        match self {
            AnyDecoder::OpenAi(d) => d.finish(),
            AnyDecoder::Anthropic(d) => d.finish(),
            AnyDecoder::Responses(d) => d.finish(),
        }
    }

    fn end_marker(&self) -> &'static str {
        match self {
            AnyDecoder::OpenAi(_) => openai::OpenAi::END_MARKER,
            AnyDecoder::Anthropic(_) => anthropic::Anthropic::END_MARKER,
            AnyDecoder::Responses(_) => responses::Responses::END_MARKER,
        }
    }
}

impl RelayStream {
    /// The next piece of the answer as the upstream sent it; `None` once it
    /// ended. An error ends the stream: the connection dropped, the
    /// upstream went silent for longer than the timeout, or it sent more
    /// than an answer may hold.
    pub async fn next(&mut self) -> Option<Result<Bytes, ProviderError>> {
        if self.ended {
            return None;
        }
        let chunk = match tokio::time::timeout(self.idle, self.response.chunk()).await {
            Err(_) => Err(ProviderError::Timeout {
                url: self.url.clone(),
                seconds: self.idle.as_secs(),
                attempts: 1,
            }),
            Ok(Err(e)) => Err(ProviderError::Connect {
                url: self.url.clone(),
                attempts: 1,
                message: format!("the connection dropped during the stream: {e}"),
            }),
            Ok(Ok(None)) => {
                self.parser.finish(&mut self.events);
                self.decode();
                self.ended = true;
                return None;
            }
            Ok(Ok(Some(bytes))) => {
                self.streamed = self.streamed.saturating_add(bytes.len());
                if self.streamed > http::MAX_ANSWER_BYTES {
                    Err(http::too_large())
                } else {
                    self.parser.feed(&bytes, &mut self.events);
                    self.decode();
                    Ok(bytes)
                }
            }
        };
        if chunk.is_err() {
            self.ended = true;
        }
        Some(chunk)
    }

    fn decode(&mut self) {
        for event in self.events.drain(..) {
            if self.failed.is_some() || self.decoder.is_done() {
                continue;
            }
            if let Err(e) = self.decoder.event(event, &mut self.decoded) {
                self.failed = Some(match e {
                    StreamError::Malformed(m) => ProviderError::Malformed(m),
                    StreamError::Api(api) => ProviderError::Status {
                        status: api.status,
                        attempts: 1,
                        message: api.message,
                    },
                });
            }
        }
    }

    /// The pieces of the answer read from the bytes [`RelayStream::next`]
    /// gave so far (text, reasoning, the start of a tool call), each once:
    /// for a caller that answers its client in another wire than the
    /// upstream's.
    pub fn take_events(&mut self) -> Vec<StreamEvent> {
        std::mem::take(&mut self.decoded)
    }

    /// Whether the answer's end marker went through: the client has the
    /// whole answer, whatever comes after it.
    pub fn is_done(&self) -> bool {
        self.failed.is_none() && self.decoder.is_done()
    }

    /// The reply put together from everything that went through: an error
    /// when the stream reported one, was malformed, or ended before its end
    /// marker (an answer cut off, which the caller must not store as whole).
    pub fn finish(self) -> Result<ChatReply, ProviderError> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        if !self.decoder.is_done() {
            return Err(ProviderError::Malformed(format!(
                "the stream ended without {}",
                self.decoder.end_marker()
            )));
        }
        let reply = self.decoder.finish().map_err(ProviderError::Malformed)?;
        Ok(ChatReply {
            message: http::stamp(reply.message),
            stop_reason: reply.stop_reason,
            attempts: 1,
        })
    }
}

impl Provider {
    /// Sends a client's request body upstream as it is: to
    /// `{base_url}/chat/completions` or `{base_url}/v1/messages` by the
    /// provider's kind, with the provider's key. Nothing is retried (the
    /// client decides); an error answer comes back as [`Relayed::Refused`]
    /// with its status and capped body; a stream is read through
    /// [`RelayStream`], which gives the upstream's bytes as they arrive.
    pub async fn relay(&self, relay: Relay) -> Result<Relayed, ProviderError> {
        let settings = self.settings();
        let url = match settings.kind {
            ProviderKind::OpenAi if relay.responses => {
                format!("{}/responses", settings.base_url.trim_end_matches('/'))
            }
            ProviderKind::OpenAi => format!(
                "{}/chat/completions",
                settings.base_url.trim_end_matches('/')
            ),
            ProviderKind::Anthropic if relay.responses => {
                return Err(ProviderError::Request(
                    "an Anthropic upstream serves no OpenAI Responses requests".to_owned(),
                ));
            }
            ProviderKind::Anthropic => anthropic::messages_url(&settings.base_url),
        };
        let mut builder = self
            .client
            .post(&url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(relay.body);
        let mut has_version = false;
        for (name, value) in &relay.headers {
            has_version |= name.eq_ignore_ascii_case("anthropic-version");
            builder = builder.header(name.as_str(), value.as_str());
        }
        match (settings.kind, &self.api_key) {
            (ProviderKind::OpenAi, Some(key)) => {
                builder = builder.header("authorization", format!("Bearer {key}"));
            }
            (ProviderKind::Anthropic, key) => {
                if !has_version {
                    builder = builder.header("anthropic-version", anthropic::API_VERSION);
                }
                if let Some(key) = key {
                    builder = builder.header("x-api-key", key);
                }
            }
            (ProviderKind::OpenAi, None) => {}
        }
        let timeout = settings.timeout;
        let timed_out = || ProviderError::Timeout {
            url: url.clone(),
            seconds: timeout.as_secs(),
            attempts: 1,
        };
        let connect = |e: reqwest::Error, what: &str| ProviderError::Connect {
            url: url.clone(),
            attempts: 1,
            message: format!("{what}: {}", error_chain(&e)),
        };
        let mut response = tokio::time::timeout(timeout, builder.send())
            .await
            .map_err(|_| timed_out())?
            .map_err(|e| {
                if e.is_redirect() {
                    http::redirect_error(&e, &url, 1)
                } else {
                    connect(e, "sending the request failed")
                }
            })?;
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        if !response.status().is_success() {
            let (body, _cut) =
                tokio::time::timeout(timeout, http::read_capped(&mut response, MAX_RELAYED_ERROR))
                    .await
                    .map_err(|_| timed_out())?
                    .map_err(|e| connect(e, "reading the error answer failed"))?;
            return Ok(Relayed::Refused {
                status,
                content_type,
                body: Bytes::from(body),
            });
        }
        let is_event_stream = content_type
            .as_deref()
            .is_some_and(|v| v.trim_start().starts_with("text/event-stream"));
        if relay.stream && is_event_stream {
            return Ok(Relayed::Stream(RelayStream {
                response,
                parser: sse::Parser::default(),
                decoder: match settings.kind {
                    _ if relay.responses => AnyDecoder::Responses(Default::default()),
                    ProviderKind::OpenAi => AnyDecoder::OpenAi(Default::default()),
                    ProviderKind::Anthropic => AnyDecoder::Anthropic(Default::default()),
                },
                events: Vec::new(),
                idle: timeout,
                url,
                streamed: 0,
                failed: None,
                ended: false,
                decoded: Vec::new(),
            }));
        }
        let (body, cut) = tokio::time::timeout(
            timeout,
            http::read_capped(&mut response, http::MAX_ANSWER_BYTES),
        )
        .await
        .map_err(|_| timed_out())?
        .map_err(|e| connect(e, "reading the answer failed"))?;
        if cut {
            return Err(http::too_large());
        }
        let reply = serde_json::from_slice::<Value>(&body)
            .map_err(|e| ProviderError::Malformed(format!("the answer is not JSON: {e}")))
            .and_then(|json| {
                match settings.kind {
                    _ if relay.responses => responses::Responses::parse_reply(json),
                    ProviderKind::OpenAi => openai::OpenAi::parse_reply(json),
                    ProviderKind::Anthropic => anthropic::Anthropic::parse_reply(json),
                }
                .map_err(ProviderError::Malformed)
            })
            .map(|reply| ChatReply {
                message: http::stamp(reply.message),
                stop_reason: reply.stop_reason,
                attempts: 1,
            });
        Ok(Relayed::Whole {
            body: Bytes::from(body),
            reply,
        })
    }
}
