//! Hooks: what the server tells the world when a session is created, saved,
//! deleted or about to be compacted.
//!
//! Two kinds, both fed from the same place after the write they report is
//! durable, and neither able to block or undo that write:
//!
//! - **Webhooks**: a JSON `POST` to a URL, signed with HMAC-SHA256 over
//!   `"{timestamp}.{body}"` (header `X-Agent-Host-Signature: t=TIMESTAMP,v1=HEX`),
//!   with a delivery id that stays the same across retries
//!   (`X-Agent-Host-Delivery`) so a receiver can drop a repeat. Each
//!   webhook has its own queue and worker; a failed delivery is retried
//!   with exponential backoff, and a delivery that never succeeds, or does
//!   not fit in the queue, is a `hook_failed` event.
//! - **In-process hooks** ([`SessionHook`]): WebAssembly components of the
//!   `session-hook` world (`wit/hooks/`), run in the same sandbox and under
//!   the same limits as processors ([`ComponentHook`]), on the blocking pool.

use std::sync::Arc;
use std::time::Duration;

use agent_host_api::SessionView;
use agent_host_core::Message;
use chrono::Utc;
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use uuid::Uuid;

use crate::events::Bus;
use crate::metrics::Metrics;

/// The events hooks receive (the runtime's, shared with hook components).
pub use agent_host_runtime::HookKind;

/// One event for the hooks: the session as the API shows it (for webhooks),
/// and the event as hook components receive it.
#[derive(Clone, Debug)]
pub struct HookEvent {
    /// The session, as it is after the event (before it, for a delete).
    pub session: SessionView,
    /// What happened: its kind, the messages concerned (saved, or about to
    /// be covered), the request's channel and the time.
    pub event: agent_host_runtime::HookEvent,
}

impl HookEvent {
    /// An event of `kind` about `session`, happening now.
    pub fn new(
        kind: HookKind,
        session: SessionView,
        messages: Vec<Message>,
        channel: Option<String>,
    ) -> Self {
        let mut event = agent_host_runtime::HookEvent::new(kind, session.id, &session.agent);
        event.key.clone_from(&session.key);
        event.messages = messages;
        event.channel = channel;
        HookEvent { session, event }
    }
}

/// A webhook's configuration.
#[derive(Clone)]
pub struct WebhookConfig {
    /// Where to POST.
    pub url: reqwest::Url,
    /// The HMAC key.
    pub secret: Vec<u8>,
    /// Attempts per delivery (the first and the retries).
    pub attempts: u32,
    /// The wait before the first retry; each next one doubles it.
    pub backoff: Duration,
    /// How long one attempt may take.
    pub timeout: Duration,
    /// Deliveries that may wait in the queue; past that they are dropped
    /// (and reported), never waited for.
    pub queue: usize,
}

impl std::fmt::Debug for WebhookConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookConfig")
            .field("url", &self.url.as_str())
            .field("secret", &"<hidden>")
            .field("attempts", &self.attempts)
            .finish_non_exhaustive()
    }
}

impl WebhookConfig {
    /// A webhook to `url` signed with `secret`, with the default retries
    /// (6 attempts from 250 ms, 10 s each, 10,000 queued).
    pub fn new(url: reqwest::Url, secret: impl Into<Vec<u8>>) -> Self {
        WebhookConfig {
            url,
            secret: secret.into(),
            attempts: 6,
            backoff: Duration::from_millis(250),
            timeout: Duration::from_secs(10),
            queue: 10_000,
        }
    }
}

/// The signature header's value for `body` at `timestamp` (Unix seconds).
pub fn signature(secret: &[u8], timestamp: i64, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes a key of any length");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    let digest = mac.finalize().into_bytes();
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("t={timestamp},v1={hex}")
}

struct Delivery {
    id: Uuid,
    kind: HookKind,
    session: Uuid,
    body: Arc<Vec<u8>>,
}

/// An in-process hook with its queue: calls run on the blocking pool, at
/// most [`HOOK_WORKERS`] at a time, so that a slow or spinning hook can
/// never take the threads appends need.
struct QueuedHook {
    hook: WasmHook,
    queue: mpsc::Sender<Arc<HookEvent>>,
}

/// Concurrent calls of one in-process hook.
pub const HOOK_WORKERS: usize = 2;

/// Events one in-process hook may have waiting; past that they are dropped
/// and reported.
pub const HOOK_QUEUE: usize = 10_000;

struct Webhook {
    name: String,
    queue: mpsc::Sender<Delivery>,
}

/// A hook called in-process on the blocking pool: a WebAssembly hook
/// component, or anything else an embedder plugs in.
pub trait SessionHook: Send + Sync + std::fmt::Debug {
    /// Its name, in metrics and `hook_failed` events.
    fn name(&self) -> &str;
    /// Handles one event; an error is reported, never retried.
    fn call(&self, event: &HookEvent) -> Result<(), String>;
}

/// A shared [`SessionHook`].
pub type WasmHook = Arc<dyn SessionHook>;

/// A hook component loaded by the runtime, as a [`SessionHook`].
#[derive(Debug)]
pub struct ComponentHook(pub agent_host_runtime::Hook);

impl SessionHook for ComponentHook {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn call(&self, event: &HookEvent) -> Result<(), String> {
        self.0
            .call(&event.event)
            .map(drop)
            .map_err(|e| crate::error::chain(&e))
    }
}

/// Every configured hook.
pub struct Hooks {
    webhooks: Vec<Webhook>,
    workers: std::sync::Mutex<Vec<JoinHandle<()>>>,
    wasm: Vec<QueuedHook>,
    bus: Arc<Bus>,
    metrics: Arc<Metrics>,
}

impl Hooks {
    /// Starts a worker per webhook (on the current runtime).
    pub fn start(
        webhooks: Vec<WebhookConfig>,
        wasm: Vec<WasmHook>,
        bus: Arc<Bus>,
        metrics: Arc<Metrics>,
    ) -> anyhow::Result<Hooks> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        let mut hooks = Vec::new();
        let mut workers = Vec::new();
        for config in webhooks {
            let (sender, receiver) = mpsc::channel(config.queue.max(1));
            let name = webhook_name(&config.url);
            workers.push(tokio::spawn(deliver_all(
                config,
                name.clone(),
                client.clone(),
                receiver,
                bus.clone(),
                metrics.clone(),
            )));
            hooks.push(Webhook {
                name,
                queue: sender,
            });
        }
        let mut queued = Vec::new();
        for hook in wasm {
            let (sender, receiver) = mpsc::channel::<Arc<HookEvent>>(HOOK_QUEUE);
            let receiver = Arc::new(tokio::sync::Mutex::new(receiver));
            for _ in 0..HOOK_WORKERS {
                workers.push(tokio::spawn(call_all(
                    hook.clone(),
                    receiver.clone(),
                    bus.clone(),
                    metrics.clone(),
                )));
            }
            queued.push(QueuedHook {
                hook,
                queue: sender,
            });
        }
        Ok(Hooks {
            webhooks: hooks,
            workers: std::sync::Mutex::new(workers),
            wasm: queued,
            bus,
            metrics,
        })
    }

    /// Whether any hook is configured.
    pub fn is_empty(&self) -> bool {
        self.webhooks.is_empty() && self.wasm.is_empty()
    }

    /// Hands `event` to every hook, without waiting for any of them.
    pub fn fire(&self, event: HookEvent) {
        if self.is_empty() {
            return;
        }
        let body = Arc::new(payload(&event).to_string().into_bytes());
        let session = event.session.id;
        for hook in &self.webhooks {
            let delivery = Delivery {
                id: Uuid::new_v4(),
                kind: event.event.kind,
                session,
                body: body.clone(),
            };
            if let Err(e) = hook.queue.try_send(delivery) {
                let why = match e {
                    mpsc::error::TrySendError::Full(_) => "its queue is full",
                    mpsc::error::TrySendError::Closed(_) => "the server is shutting down",
                };
                self.metrics.hook(&hook.name, "dropped");
                self.bus.publish(
                    "hook_failed",
                    Some(session),
                    json!({"hook": hook.name, "kind": event.event.kind.as_str(), "error": format!("not delivered: {why}")}),
                );
            }
        }
        if !self.wasm.is_empty() {
            let event = Arc::new(event);
            for hook in &self.wasm {
                if let Err(e) = hook.queue.try_send(event.clone()) {
                    let why = match e {
                        mpsc::error::TrySendError::Full(_) => "its queue is full",
                        mpsc::error::TrySendError::Closed(_) => "the server is shutting down",
                    };
                    self.metrics.hook(hook.hook.name(), "dropped");
                    self.bus.publish(
                        "hook_failed",
                        Some(session),
                        json!({"hook": hook.hook.name(), "kind": event.event.kind.as_str(), "error": format!("not called: {why}")}),
                    );
                }
            }
        }
    }

    /// Closes the queues and waits up to `grace` for what they hold to be
    /// delivered (at shutdown).
    pub async fn drain(self, grace: Duration) {
        let workers = std::mem::take(&mut *self.workers.lock().expect("workers lock"));
        drop(self.webhooks);
        drop(self.wasm);
        let all = futures_util::future::join_all(workers);
        if tokio::time::timeout(grace, all).await.is_err() {
            tracing::warn!("webhook deliveries still pending after {grace:?} were abandoned");
        }
    }
}

/// A webhook's name in metrics and events: its origin and path, never its query
/// (which may hold a secret).
fn webhook_name(url: &reqwest::Url) -> String {
    format!("{}{}", url.origin().ascii_serialization(), url.path())
}

/// The JSON a webhook receives.
pub fn payload(event: &HookEvent) -> Value {
    let e = &event.event;
    let messages: Vec<_> = e.messages.iter().map(crate::record).collect();
    json!({
        "event": e.kind.as_str(),
        "at": e.at,
        "session": event.session,
        "channel": e.channel,
        "messages": messages,
    })
}

/// One worker of an in-process hook: takes the next event and calls the
/// hook with it on the blocking pool.
async fn call_all(
    hook: WasmHook,
    queue: Arc<tokio::sync::Mutex<mpsc::Receiver<Arc<HookEvent>>>>,
    bus: Arc<Bus>,
    metrics: Arc<Metrics>,
) {
    loop {
        let Some(event) = queue.lock().await.recv().await else {
            return;
        };
        let called = {
            let (hook, event) = (hook.clone(), event.clone());
            tokio::task::spawn_blocking(move || hook.call(&event)).await
        };
        let name = hook.name();
        match called {
            Ok(Ok(())) => metrics.hook(name, "delivered"),
            Ok(Err(error)) => {
                metrics.hook(name, "failed");
                bus.publish(
                    "hook_failed",
                    Some(event.session.id),
                    json!({"hook": name, "kind": event.event.kind.as_str(), "error": error}),
                );
            }
            Err(e) => {
                metrics.hook(name, "failed");
                bus.publish(
                    "hook_failed",
                    Some(event.session.id),
                    json!({"hook": name, "kind": event.event.kind.as_str(), "error": format!("the hook's call panicked: {e}")}),
                );
            }
        }
    }
}

async fn deliver_all(
    config: WebhookConfig,
    name: String,
    client: reqwest::Client,
    mut queue: mpsc::Receiver<Delivery>,
    bus: Arc<Bus>,
    metrics: Arc<Metrics>,
) {
    while let Some(delivery) = queue.recv().await {
        match deliver(&config, &client, &delivery).await {
            Ok(()) => metrics.hook(&name, "delivered"),
            Err(error) => {
                tracing::warn!(hook = %name, "webhook delivery failed: {error}");
                metrics.hook(&name, "failed");
                bus.publish(
                    "hook_failed",
                    Some(delivery.session),
                    json!({
                        "hook": name,
                        "kind": delivery.kind.as_str(),
                        "delivery": delivery.id,
                        "error": error,
                    }),
                );
            }
        }
    }
}

async fn deliver(
    config: &WebhookConfig,
    client: &reqwest::Client,
    delivery: &Delivery,
) -> Result<(), String> {
    let mut wait = config.backoff;
    let mut last = String::new();
    for attempt in 1..=config.attempts.max(1) {
        if attempt > 1 {
            tokio::time::sleep(wait).await;
            wait = wait.saturating_mul(2);
        }
        let timestamp = Utc::now().timestamp();
        let sent = client
            .post(config.url.clone())
            .timeout(config.timeout)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header("X-Agent-Host-Event", delivery.kind.as_str())
            .header("X-Agent-Host-Delivery", delivery.id.to_string())
            .header(
                "X-Agent-Host-Signature",
                signature(&config.secret, timestamp, &delivery.body),
            )
            .body(delivery.body.as_ref().clone())
            .send()
            .await;
        match sent {
            Ok(reply) if reply.status().is_success() => return Ok(()),
            Ok(reply) => last = format!("attempt {attempt}: HTTP {}", reply.status()),
            Err(e) => last = format!("attempt {attempt}: {}", crate::error::chain(&e)),
        }
    }
    Err(format!(
        "gave up after {} attempts; last: {last}",
        config.attempts
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_are_hmac_sha256_of_timestamp_and_body() {
        // RFC 4231 test case 2 checks the primitive; here the framing.
        let sig = signature(b"key", 1_700_000_000, b"{}");
        assert!(sig.starts_with("t=1700000000,v1="), "{sig}");
        assert_eq!(sig.len(), "t=1700000000,v1=".len() + 64);
        assert_ne!(sig, signature(b"other", 1_700_000_000, b"{}"));
        assert_ne!(sig, signature(b"key", 1_700_000_001, b"{}"));
        assert_ne!(sig, signature(b"key", 1_700_000_000, b"{ }"));
        let mut mac = Hmac::<Sha256>::new_from_slice(b"key").unwrap();
        mac.update(b"1700000000.{}");
        let hex: String = mac
            .finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert!(sig.ends_with(&hex));
    }

    #[test]
    fn webhook_names_leave_out_queries() {
        let url: reqwest::Url = "https://hooks.example/in?token=secret".parse().unwrap();
        assert_eq!(webhook_name(&url), "https://hooks.example/in");
    }
}
