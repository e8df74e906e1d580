//! The server's event bus: what `GET /v1/events` streams as server-sent
//! events, and what the dashboard will read.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use agent_host_api::ServerEvent;
use axum::response::sse::{Event, KeepAlive, Sse};
use chrono::Utc;
use futures_util::Stream;
use futures_util::StreamExt;
use serde_json::Value;
use tokio::sync::broadcast;
use tokio_stream::wrappers::BroadcastStream;
use tokio_stream::wrappers::errors::BroadcastStreamRecvError;
use uuid::Uuid;

/// How many events a slow listener may fall behind before it misses some.
const BACKLOG: usize = 4096;

/// Publishes events to every listener.
pub struct Bus {
    sender: broadcast::Sender<Arc<ServerEvent>>,
    seq: AtomicU64,
    closed: tokio::sync::watch::Sender<bool>,
}

impl Default for Bus {
    fn default() -> Self {
        Bus {
            sender: broadcast::channel(BACKLOG).0,
            seq: AtomicU64::new(0),
            closed: tokio::sync::watch::channel(false).0,
        }
    }
}

impl Bus {
    /// Whether anyone listens (else a publish is dropped).
    pub fn has_listeners(&self) -> bool {
        self.sender.receiver_count() > 0
    }

    /// Publishes `event` about `session` with `data`.
    pub fn publish(&self, event: &str, session: Option<Uuid>, data: Value) {
        let seq = self.seq.fetch_add(1, Ordering::Relaxed) + 1;
        tracing::debug!(event, ?session, seq, "event");
        // No listener is not an error.
        let _ = self.sender.send(Arc::new(ServerEvent {
            seq,
            event: event.to_owned(),
            session,
            at: Utc::now(),
            data,
        }));
    }

    /// Ends every listener's stream (at shutdown: an event stream never ends
    /// by itself, and graceful shutdown waits for open responses).
    pub fn close(&self) {
        self.closed.send_replace(true);
    }

    /// A listener's stream of events, only `session`'s when given.
    pub fn subscribe(
        &self,
        session: Option<Uuid>,
    ) -> Sse<impl Stream<Item = Result<Event, Infallible>> + use<>> {
        let stream = BroadcastStream::new(self.sender.subscribe()).filter_map(move |item| {
            let out = match item {
                Ok(event) if session.is_none() || event.session == session => {
                    Some(sse_event(&event))
                }
                Ok(_) => None,
                Err(BroadcastStreamRecvError::Lagged(missed)) => Some(
                    Event::default()
                        .event("lagged")
                        .data(format!("{{\"missed\":{missed}}}")),
                ),
            };
            std::future::ready(out.map(Ok))
        });
        let mut closed = self.closed.subscribe();
        let shutdown = async move {
            let _ = closed.wait_for(|closed| *closed).await;
        };
        Sse::new(stream.take_until(shutdown)).keep_alive(KeepAlive::default())
    }
}

/// An event as an SSE frame: `event:` its name, `id:` its sequence number,
/// `data:` the whole [`ServerEvent`] as JSON.
pub fn sse_event(event: &ServerEvent) -> Event {
    Event::default()
        .event(&event.event)
        .id(event.seq.to_string())
        .data(serde_json::to_string(event).expect("an event serializes"))
}
