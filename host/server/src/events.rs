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

/// The events other instances sharing the store hear of (through
/// [`SessionStore::announce`](agent_host_store::SessionStore::announce)).
pub const SHARED_EVENTS: [&str; 5] = [
    "session_created",
    "session_saved",
    "session_deleted",
    "context_compacted",
    "state_changed",
];

/// What an instance announces of one of its events.
#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct Announced {
    /// The instance that published it.
    pub origin: Uuid,
    /// Its sequence number there (announcements of equal text would be
    /// merged by PostgreSQL).
    pub seq: u64,
    pub event: String,
    pub session: Option<Uuid>,
    /// `null` when it did not fit in an announcement.
    pub data: Value,
}

/// Publishes events to every listener.
pub struct Bus {
    sender: broadcast::Sender<Arc<ServerEvent>>,
    seq: AtomicU64,
    closed: tokio::sync::watch::Sender<bool>,
    /// This instance, in its announcements.
    pub(crate) origin: Uuid,
    /// The store shared with other instances, when it has notifications.
    shared: std::sync::OnceLock<Arc<dyn agent_host_store::SessionStore>>,
}

impl Default for Bus {
    fn default() -> Self {
        Bus {
            sender: broadcast::channel(BACKLOG).0,
            seq: AtomicU64::new(0),
            closed: tokio::sync::watch::channel(false).0,
            origin: Uuid::new_v4(),
            shared: std::sync::OnceLock::new(),
        }
    }
}

impl Bus {
    /// Whether anyone listens, here or (for a shared store) on another
    /// instance; else a publish is dropped and need not be built.
    pub fn has_listeners(&self) -> bool {
        self.sender.receiver_count() > 0 || self.shared.get().is_some()
    }

    /// Announces the [`SHARED_EVENTS`] published from now on to the other
    /// instances sharing `store`.
    pub(crate) fn share(&self, store: Arc<dyn agent_host_store::SessionStore>) {
        let _ = self.shared.set(store);
    }

    /// Publishes `event` about `session` with `data`, to this instance's
    /// listeners and, for the [`SHARED_EVENTS`], to the other instances'.
    pub fn publish(&self, event: &str, session: Option<Uuid>, data: Value) {
        if let Some(store) = self.shared.get()
            && SHARED_EVENTS.contains(&event)
        {
            let mut announced = Announced {
                origin: self.origin,
                seq: self.seq.load(Ordering::Relaxed) + 1,
                event: event.to_owned(),
                session,
                data: data.clone(),
            };
            let mut text = serde_json::to_string(&announced).expect("an event serializes");
            if text.len() > agent_host_store::MAX_NOTICE_BYTES {
                announced.data = Value::Null;
                text = serde_json::to_string(&announced).expect("an event serializes");
            }
            if let Err(e) = store.announce(&text) {
                tracing::warn!(
                    "event {event} not announced to other instances: {}",
                    agent_host_core::error_kind::error_chain(&e)
                );
            }
        }
        self.deliver(event, session, data);
    }

    /// Publishes `event` to this instance's listeners only (an event another
    /// instance announced).
    pub(crate) fn deliver(&self, event: &str, session: Option<Uuid>, data: Value) {
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
