//! Turning what happens into events, hooks and metrics, in one place.

use std::sync::Arc;

use agent_host_api::SessionView;
use agent_host_core::Message;
use agent_host_engine::{EngineEvent, Observer};
use agent_host_store::SessionMeta;
use chrono::Utc;
use serde_json::json;
use tokio::sync::mpsc;
use uuid::Uuid;

use crate::hooks::{HookEvent, HookKind};
use crate::index::{Change, StateChange};
use crate::{AppState, Shared};

/// Publishes a state change.
pub(crate) fn state_changed(state: &AppState, change: &StateChange) {
    state.bus.publish(
        "state_changed",
        Some(change.id),
        json!({"from": change.from, "to": change.to}),
    );
}

/// Records a write in the index, and publishes the state change it made.
pub(crate) fn recorded(state: &AppState, meta: &SessionMeta, change: Change) -> SessionView {
    if let Some(changed) = state.index.record(meta, change, Utc::now()) {
        state_changed(state, &changed);
    }
    state
        .index
        .get(meta.id)
        .unwrap_or_else(|| SessionView::from(meta))
}

/// A new session: index, event, hook.
pub(crate) fn created(
    state: &AppState,
    meta: &SessionMeta,
    channel: Option<String>,
) -> SessionView {
    recorded(state, meta, Change::Created);
    state.index.add_channels(meta.id, channel.as_deref());
    let view = state
        .index
        .get(meta.id)
        .unwrap_or_else(|| SessionView::from(meta));
    state.bus.publish(
        "session_created",
        Some(meta.id),
        serde_json::to_value(&view).unwrap_or_default(),
    );
    state.hooks.fire(HookEvent::new(
        HookKind::SessionCreate,
        view.clone(),
        Vec::new(),
        channel,
    ));
    view
}

/// Messages stored: index, event, hook.
pub(crate) fn saved(
    state: &AppState,
    meta: &SessionMeta,
    messages: Vec<Message>,
    channel: Option<String>,
) -> SessionView {
    let mut view = recorded(state, meta, Change::Active);
    let channels = || {
        channel
            .as_deref()
            .into_iter()
            .chain(messages.iter().filter_map(|m| m.channel.as_deref()))
    };
    // The index is written again only for a channel it does not list yet.
    if view.channels.len() < agent_host_api::MAX_CHANNELS
        && channels().any(|c| !view.channels.iter().any(|v| v == c))
    {
        state.index.add_channels(meta.id, channels());
        view = state.index.get(meta.id).unwrap_or(view);
    }
    state.metrics.append(messages.len());
    // Built only for a listener or a hook: an append is the hot path.
    if state.bus.has_listeners() {
        let ids: Vec<&str> = messages.iter().map(|m| m.id.as_str()).collect();
        state.bus.publish(
            "session_saved",
            Some(meta.id),
            json!({"ids": ids, "message_count": meta.message_count}),
        );
    }
    if !state.hooks.is_empty() {
        state.hooks.fire(HookEvent::new(
            HookKind::SessionSave,
            view.clone(),
            messages,
            channel,
        ));
    }
    view
}

/// A session cleared of its messages: index, event.
pub(crate) fn cleared(state: &AppState, meta: &SessionMeta) {
    recorded(state, meta, Change::Created);
    state.bus.publish(
        "session_saved",
        Some(meta.id),
        json!({"cleared": true, "message_count": meta.message_count}),
    );
}

/// A session deleted: index, memory, event, hook.
pub(crate) fn deleted(state: &AppState, meta: &SessionMeta) {
    let view = state
        .index
        .forget(meta.id)
        .unwrap_or_else(|| SessionView::from(meta));
    state.hot.remove(meta.id);
    state.records.forget(meta.id);
    state.latest.forget(meta.id);
    state.bus.publish(
        "session_deleted",
        Some(meta.id),
        json!({"key": meta.key, "agent": meta.agent}),
    );
    state.hooks.fire(HookEvent::new(
        HookKind::SessionDelete,
        view,
        Vec::new(),
        None,
    ));
}

/// What a turn's or a summary's engine events become: events and metrics
/// for everyone, and the raw events for a streaming answer.
pub(crate) struct EngineObserver {
    pub state: Shared,
    pub session: Uuid,
    pub view: SessionView,
    pub channel: Option<String>,
    pub stream: Option<mpsc::UnboundedSender<EngineEvent>>,
}

impl Observer for EngineObserver {
    fn event(&self, event: &EngineEvent) {
        let state = &self.state;
        match event {
            EngineEvent::BeforeCompaction { messages, .. } => {
                state.hooks.fire(HookEvent::new(
                    HookKind::BeforeCompaction,
                    self.view.clone(),
                    messages.clone(),
                    self.channel.clone(),
                ));
            }
            EngineEvent::ContextCompacted {
                covered,
                tokens_before,
                tokens_after,
                summarizer,
                ..
            } => {
                state.metrics.compaction();
                state.bus.publish(
                    "context_compacted",
                    Some(self.session),
                    json!({
                        "covered": covered,
                        "tokens_before": tokens_before,
                        "tokens_after": tokens_after,
                        "summarizer": summarizer,
                    }),
                );
            }
            EngineEvent::Processor(report) => {
                state.recent_calls.push(self.session, report);
                let failed = report.error.is_some();
                state.metrics.processor(&report.name, failed);
                state.bus.publish(
                    "processor_report",
                    Some(self.session),
                    serde_json::to_value(report.as_ref()).unwrap_or_default(),
                );
            }
            _ => {}
        }
        if let Some(stream) = &self.stream {
            let _ = stream.send(event.clone());
        }
    }
}

/// An observer for `session`, as an `Arc`.
pub(crate) fn observer(
    state: &Shared,
    view: &SessionView,
    channel: Option<String>,
    stream: Option<mpsc::UnboundedSender<EngineEvent>>,
) -> Arc<EngineObserver> {
    Arc::new(EngineObserver {
        state: state.clone(),
        session: view.id,
        view: view.clone(),
        channel,
        stream,
    })
}
