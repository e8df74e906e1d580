//! Long-term memory's tools through the gateway (`serve --memory-user U
//! --memory-tools`): the model is offered `memory_search`, `memory_write`
//! and `memory_recall` beside the client's own tools, and the gateway runs
//! its calls to them, so any client gets memory without knowing of it.
//!
//! The client sees only an answer that calls no memory tool. An answer
//! that calls one is a round of the gateway's own: its memory calls are
//! run against the user's memory, any call to one of the client's tools in
//! the same answer is answered "not run" (the model calls it again once it
//! has read the memory results; the client never gets a call it would have
//! to pair with results it cannot see), and the model is asked again with
//! the round added, at most [`MAX_ROUNDS`] times; the last time it is told
//! to call no tool (`tool_choice` none). The rounds are stored with the
//! answer, between the client's new messages and it, each marked
//! host-only ([`agent_host_core::reconcile::HOST_ONLY`]): the client's next
//! request, which does not have them, still continues the log, and the
//! model reads them in every later view.
//!
//! A streamed request is read whole from the upstream round by round (a
//! round cannot be known to be the gateway's until its end), then the last
//! one is sent to the client as the upstream streamed it: with the memory
//! tools on, a stream arrives at the end of the answer, not token by token.

use agent_host_engine::MemoryConfig;
use agent_host_engine::memory_tools::{self, MAX_ROUNDS};
use agent_host_provider::{
    ChatReply, Provider, ProviderError, ProviderKind, Relayed, StreamEvent,
    anthropic_tool_definition,
};
use axum::body::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::{BodySpec, Message, Outgoing, upstream_body};
use crate::error::ApiError;

/// How the memory tools go in a request upstream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Offer {
    /// Offered beside the client's tools.
    Tools,
    /// Offered, with `tool_choice` none: the last request of a turn that
    /// made [`MAX_ROUNDS`] rounds.
    Last,
}

/// One memory call the gateway ran, as a request's record keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryCall {
    /// The tool (`memory_search`, `memory_write`, `memory_recall`).
    pub tool: String,
    /// What went wrong, as the model was told (`None`: it ran).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The memory rounds of one request.
pub(crate) struct Rounds {
    config: MemoryConfig,
    spec: BodySpec,
    /// The client's request without its history (`messages`, `input`: the
    /// view stands for them), written again with each round.
    client: Map<String, Value>,
    /// The view first sent (set by [`Rounds::sent`] once it went into the
    /// request's record).
    view: Vec<Message>,
    session: Uuid,
    /// The session's agent, whose the rounds' messages are.
    agent: String,
    /// The rounds' messages (the answers that called memory tools and the
    /// results), host-only, stored with the answer.
    pub(crate) made: Vec<Message>,
    /// Every call run, for the record.
    pub(crate) calls: Vec<MemoryCall>,
}

impl Rounds {
    /// The rounds of a request to `session` (of `agent`) whose client sent
    /// `client`; an error (a note for the record) when the client has a
    /// tool named as one of the memory tools, which then are not offered:
    /// its calls are the client's.
    pub(crate) fn offer(
        config: &MemoryConfig,
        spec: &BodySpec,
        client: &Map<String, Value>,
        (session, agent): (Uuid, &str),
    ) -> Result<Rounds, String> {
        let taken = client
            .get("tools")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|tool| {
                tool.pointer("/function/name")
                    .or_else(|| tool.get("name"))
                    .and_then(Value::as_str)
            })
            .find(|name| memory_tools::is_memory_tool(name));
        if let Some(name) = taken {
            return Err(format!(
                "the memory tools were not offered: the client has a tool named {name:?}"
            ));
        }
        Ok(Rounds {
            config: config.clone(),
            spec: spec.clone(),
            client: client
                .iter()
                .filter(|(key, _)| !matches!(key.as_str(), "messages" | "input"))
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect(),
            view: Vec::new(),
            session,
            agent: agent.to_owned(),
            made: Vec::new(),
            calls: Vec::new(),
        })
    }
}

impl Rounds {
    /// The view the first request sent, which each round's request extends.
    pub(crate) fn sent(&mut self, view: Vec<Message>) {
        self.view = view;
    }
}

/// Adds the memory tools to an upstream request `body` of the `kind`'s
/// wire, after the client's tools (so the cached prefix of the tools stays
/// the same from request to request).
pub(crate) fn add_tools(body: &mut Map<String, Value>, kind: ProviderKind, offer: Offer) {
    let tools = body.entry("tools").or_insert_with(|| json!([]));
    let Some(tools) = tools.as_array_mut() else {
        // A client's `tools` that is not a list goes up as it is, for the
        // upstream to refuse.
        return;
    };
    for tool in memory_tools::definitions() {
        tools.push(match kind {
            ProviderKind::OpenAi => tool,
            ProviderKind::Anthropic => match anthropic_tool_definition(&tool) {
                Ok(tool) => tool,
                Err(_) => continue,
            },
        });
    }
    if offer == Offer::Last {
        let none = match kind {
            ProviderKind::OpenAi => json!("none"),
            ProviderKind::Anthropic => json!({"type": "none"}),
        };
        body.insert("tool_choice".into(), none);
    }
}

/// The answer the client gets after the memory rounds.
pub(crate) enum Answered {
    /// As the upstream gave it (an error, a whole answer).
    Relayed(Relayed),
    /// A stream, read whole.
    Read(Read),
}

/// A streamed answer read whole from the upstream.
pub(crate) struct Read {
    /// Its pieces as they arrived, with what the decoder read of each.
    pub(crate) pieces: Vec<(Bytes, Vec<StreamEvent>)>,
    /// What the decoder read at the end.
    pub(crate) tail: Vec<StreamEvent>,
    /// How it ended.
    pub(crate) end: Result<ChatReply, ProviderError>,
    /// Whether an error broke the stream (`end` is that error).
    pub(crate) broke: bool,
}

/// Sends `out` upstream, running the rounds of memory calls of its model
/// (see the [module documentation](self)); the answer for the client.
pub(crate) async fn run(
    provider: &Provider,
    out: &mut Outgoing,
) -> Result<Answered, ProviderError> {
    let Some(mut rounds) = out.memory.take() else {
        return provider.relay(out.relay()).await.map(Answered::Relayed);
    };
    let answered = rounds_of(provider, out, &mut rounds).await;
    out.memory = Some(rounds);
    answered
}

async fn rounds_of(
    provider: &Provider,
    out: &mut Outgoing,
    rounds: &mut Rounds,
) -> Result<Answered, ProviderError> {
    for round in 0..=MAX_ROUNDS {
        let more = round < MAX_ROUNDS;
        let asked = match provider.relay(out.relay()).await? {
            Relayed::Whole {
                reply: Ok(reply), ..
            } if more && memory_tools::calls_memory(&reply.message) => reply.message,
            Relayed::Stream(mut stream) => {
                let mut pieces = Vec::new();
                let broke = loop {
                    match stream.next().await {
                        Some(Ok(bytes)) => pieces.push((bytes, stream.take_events())),
                        Some(Err(e)) => break Some(e),
                        None => break None,
                    }
                };
                let tail = stream.take_events();
                if let Some(e) = broke {
                    return Ok(Answered::Read(Read {
                        pieces,
                        tail,
                        end: Err(e),
                        broke: true,
                    }));
                }
                match stream.finish() {
                    Ok(reply) if more && memory_tools::calls_memory(&reply.message) => {
                        reply.message
                    }
                    end => {
                        return Ok(Answered::Read(Read {
                            pieces,
                            tail,
                            end,
                            broke: false,
                        }));
                    }
                }
            }
            other => return Ok(Answered::Relayed(other)),
        };
        let (asked, results) = memory_tools::answer_round(
            rounds.config.clone(),
            rounds.agent.clone(),
            Some(rounds.session.to_string()),
            asked,
            "not run: this answer also called memory tools, which ran first; call it again if \
             it is still needed",
        )
        .await?;
        for (call, result) in asked.tool_calls.iter().zip(&results) {
            if memory_tools::is_memory_tool(&call.name) {
                rounds.calls.push(MemoryCall {
                    tool: call.name.clone(),
                    error: memory_tools::result_error(result),
                });
            }
        }
        rounds.made.push(asked);
        rounds.made.extend(results);
        let mut view = rounds.view.clone();
        view.extend(rounds.made.iter().cloned());
        let offer = if round + 1 == MAX_ROUNDS {
            Offer::Last
        } else {
            Offer::Tools
        };
        out.body = upstream_body(&rounds.spec, rounds.client.clone(), &view, Some(offer))
            .map_err(|e: ApiError| ProviderError::Request(e.message))?;
    }
    unreachable!("the last round returns the answer whatever it calls")
}
