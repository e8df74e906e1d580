//! Other instances serving the same store: what they announce (through the
//! store's notifications, PostgreSQL's `LISTEN`) reaches this instance's
//! `/v1/events` listeners, and the sessions it names are read again into
//! the index. Announcements are untrusted: bounded by the store, parsed
//! into a fixed shape, limited to [`SHARED_EVENTS`], and whatever the index
//! keeps comes from the store, not from them.

use std::collections::HashSet;
use std::sync::{Arc, Weak};

use agent_host_store::{Notice, SessionRef};
use chrono::Utc;
use serde_json::Value;
use tokio::sync::mpsc::Receiver;

use crate::AppState;
use crate::events::{Announced, SHARED_EVENTS};
use crate::index::Change;

/// Follows `notices` until the server is gone.
pub(crate) async fn follow(state: Weak<AppState>, mut notices: Receiver<Notice>) {
    while let Some(notice) = notices.recv().await {
        let Some(state) = state.upgrade() else { return };
        match notice {
            Notice::Message(text) => heard(&state, &text).await,
            Notice::Lost => reindex(&state).await,
        }
    }
}

async fn heard(state: &Arc<AppState>, text: &str) {
    let announced: Announced = match serde_json::from_str(text) {
        Ok(announced) => announced,
        Err(e) => {
            tracing::debug!("an announcement that is not an event was ignored: {e}");
            return;
        }
    };
    if announced.origin == state.bus.origin || !SHARED_EVENTS.contains(&announced.event.as_str()) {
        return;
    }
    let mut data = announced.data;
    if let Some(id) = announced.session {
        let store = Arc::clone(state.engine.store());
        let read = tokio::task::spawn_blocking(move || store.get(&SessionRef::Id(id))).await;
        match read {
            // Reads of several announcements may finish out of order, and
            // this instance's own writes go on meanwhile: an older read than
            // the index holds is not recorded over it.
            Ok(Ok(Some(meta)))
                if state.index.get(id).is_some_and(|held| {
                    (meta.updated, meta.message_count) < (held.updated, held.message_count)
                }) => {}
            Ok(Ok(Some(meta))) => {
                match announced.event.as_str() {
                    "session_created" => state.index.record(&meta, Change::Created, Utc::now()),
                    "session_saved" => state.index.record(&meta, Change::Active, Utc::now()),
                    "context_compacted" => state.index.record(&meta, Change::Compacted, Utc::now()),
                    _ => {
                        state.index.refresh(&meta);
                        None
                    }
                };
                if data.is_null() && announced.event == "session_created" {
                    data = state
                        .index
                        .get(id)
                        .and_then(|view| serde_json::to_value(view).ok())
                        .unwrap_or(Value::Null);
                }
            }
            Ok(Ok(None)) => {
                state.index.forget(id);
            }
            Ok(Err(e)) => tracing::warn!(
                "session {id}, announced by another instance, could not be read: {}",
                agent_host_core::error_kind::error_chain(&e)
            ),
            Err(e) => tracing::warn!("reading session {id} stopped: {e}"),
        }
    }
    state.bus.deliver(&announced.event, announced.session, data);
}

/// Reads every session again (announcements were lost).
async fn reindex(state: &Arc<AppState>) {
    let store = Arc::clone(state.engine.store());
    match tokio::task::spawn_blocking(move || store.scan()).await {
        Ok(Ok(page)) => {
            let kept: HashSet<_> = page.sessions.iter().map(|m| m.id).collect();
            for meta in &page.sessions {
                state.index.refresh(meta);
            }
            let forgotten = state.index.retain(&kept);
            tracing::info!(
                sessions = kept.len(),
                forgotten,
                "announcements were lost: the index was read again"
            );
        }
        Ok(Err(e)) => tracing::warn!(
            "announcements were lost and the sessions could not be read again: {}",
            agent_host_core::error_kind::error_chain(&e)
        ),
        Err(e) => tracing::warn!("reading the sessions again stopped: {e}"),
    }
}
