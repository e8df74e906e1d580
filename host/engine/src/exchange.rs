//! Requests a client makes with its whole history (the gateway's): the
//! client's messages are reconciled with the stored log, the new ones
//! stored, and the view to send prepared as a turn's is.

use std::sync::Arc;

use agent_host_core::memory::recall::RECALL_METADATA_KEY;
use agent_host_core::reconcile::{Reconciled, reconcile};
use agent_host_core::{Message, Role};
use agent_host_store::{SessionMeta, SessionRef};
use chrono::Utc;

use crate::{
    Engine, EngineError, ExchangeSummarizer, Mode, Observer, Prepared, ProcessorChain, Result,
    agent_of, new_id,
};

/// The metadata key (`"memory_snapshot": true`) of a session's memory
/// snapshot: the facts long-term memory held for its first question, a
/// system message after the client's system prompt, in the prefix of every
/// view (see [`Engine::exchange`]).
pub const MEMORY_SNAPSHOT: &str = "memory_snapshot";

/// How [`Engine::exchange`] and [`Engine::exchange_appending`] prepare the
/// view.
#[derive(Clone, Default)]
pub struct ExchangeOptions {
    /// The processors to run (the engine's own chain when `None`).
    pub chain: Option<ProcessorChain>,
    /// Report what each stage did ([`Prepared::stages`]).
    pub trace: bool,
    /// Who writes a summary the pipeline asks for, when the configuration
    /// wants a model's (`context.summarizer = "llm"`); the engine's own
    /// model summarizer when `None`.
    pub summarizer: Option<Arc<dyn ExchangeSummarizer>>,
}

impl std::fmt::Debug for ExchangeOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExchangeOptions")
            .field("chain", &self.chain)
            .field("trace", &self.trace)
            .field("summarizer", &self.summarizer.as_ref().map(|s| s.model()))
            .finish()
    }
}

/// What [`Engine::exchange`] did.
#[derive(Debug)]
pub enum Exchange {
    /// The client's new messages are stored and the view is ready.
    Ready(Box<Ready>),
    /// The client's history parts from the stored log at its message `at`
    /// (it was rewritten or rewound): nothing was stored; the caller picks
    /// another session (a branch) and asks again.
    Diverged {
        /// The first of the client's messages the log does not hold there.
        at: usize,
    },
}

/// A prepared exchange.
#[derive(Debug)]
pub struct Ready {
    /// The session, after what was stored (the new messages unless they
    /// are pending, a checkpoint).
    pub meta: SessionMeta,
    /// The client's messages that were new, with the ids they are stored
    /// under, and the session's memory snapshot when it was taken now
    /// (host-only: the one message here the client did not send).
    pub appended: Vec<Message>,
    /// Whether `appended` is still to be stored: [`Engine::store_exchange`]
    /// writes it with the answer, in one write.
    pub pending: bool,
    /// How many of the client's messages the log held already.
    pub known: usize,
    /// The view to send, and what made it.
    pub prepared: Prepared,
}

impl Engine {
    /// Finds what is new in `client` (the whole history a client sent)
    /// against `session`'s log (a keyed session is created when missing),
    /// then prepares the view to send: the pipeline over the log and the new
    /// messages (a checkpoint it makes is stored) and the processors. New
    /// messages get fresh ids, the session's agent, `channel` and the time;
    /// they are stored now when the session is new or a checkpoint was
    /// made, else left [pending](Ready::pending) for
    /// [`Engine::store_exchange`] to write with the answer. `options` name
    /// the processors, whether [`Prepared::stages`] says what each stage
    /// did, and who writes a summary.
    pub async fn exchange(
        &self,
        session: SessionRef,
        client: Vec<Message>,
        channel: &str,
        options: ExchangeOptions,
        observer: Arc<dyn Observer>,
    ) -> Result<Exchange> {
        if client.is_empty() {
            return Err(EngineError::InvalidInput(
                "the request has no messages: there is nothing to send".to_owned(),
            ));
        }
        let loaded = self.load_or_new(session.clone()).await?;
        // After a checkpoint the log read for the view is its tail; the
        // client's history is compared with the whole of it.
        let whole = match &loaded.meta {
            Some(meta) if !meta.checkpoints.is_empty() => {
                let reference = meta.reference();
                Some(
                    self.blocking(move |inner| Ok(inner.store.load(&reference)?.messages))
                        .await?,
                )
            }
            _ => None,
        };
        let known = match reconcile(whole.as_deref().unwrap_or(&loaded.log), &client) {
            Reconciled::Continues { stored } => stored,
            Reconciled::Diverged { at } => {
                tracing::info!(
                    session = %session,
                    at,
                    "the client's history parts from the stored log at its message {at}"
                );
                return Ok(Exchange::Diverged { at });
            }
        };
        drop(whole);
        self.exchange_from(session, loaded, client, known, channel, options, observer)
            .await
    }

    /// Like [`Engine::exchange`], for a client that sends only what is new
    /// (an OpenAI Responses client continuing from its previous response):
    /// every message of `new` is appended to `session`'s log, after
    /// `leading` (the client's system instructions) unless the log holds a
    /// system message of the same text already. Nothing is reconciled, so
    /// the answer is always [`Exchange::Ready`].
    #[allow(clippy::too_many_arguments)]
    pub async fn exchange_appending(
        &self,
        session: SessionRef,
        leading: Option<Message>,
        new: Vec<Message>,
        channel: &str,
        options: ExchangeOptions,
        observer: Arc<dyn Observer>,
    ) -> Result<Exchange> {
        if new.is_empty() {
            return Err(EngineError::InvalidInput(
                "the request has no new messages: there is nothing to send".to_owned(),
            ));
        }
        let loaded = self.load_or_new(session.clone()).await?;
        let mut client = Vec::with_capacity(new.len() + 1);
        client.extend(unless_logged(&loaded.log, leading));
        client.extend(new);
        self.exchange_from(session, loaded, client, 0, channel, options, observer)
            .await
    }

    /// The rest of an exchange once the client's first `known` messages
    /// are found in the log.
    #[allow(clippy::too_many_arguments)]
    async fn exchange_from(
        &self,
        session: SessionRef,
        loaded: crate::Loaded,
        mut client: Vec<Message>,
        known: usize,
        channel: &str,
        options: ExchangeOptions,
        observer: Arc<dyn Observer>,
    ) -> Result<Exchange> {
        let now = Utc::now();
        let agent = agent_of(Some(&session), loaded.meta.as_ref(), &self.inner.config);
        let mut appended = client.split_off(known);
        for m in &mut appended {
            m.id = new_id();
            m.agent.get_or_insert_with(|| agent.clone());
            m.channel.get_or_insert_with(|| channel.to_owned());
            m.timestamp.get_or_insert(now);
        }
        // A session's memory snapshot, taken with its first messages and
        // stored with them (marked host-only, so `appended` may hold it),
        // frozen in its prefix.
        if loaded.log.is_empty()
            && let Some(snapshot) = self.memory_snapshot(&agent, &appended, now).await?
        {
            let at = appended
                .iter()
                .take_while(|m| m.role == Role::System)
                .count();
            appended.insert(at, snapshot);
        }
        let mut log = loaded.log;
        log.extend(appended.iter().cloned());
        let mut checkpoint = loaded.checkpoint;
        let info = self.run_info(loaded.meta.as_ref(), Some(&session), now);
        let chain = options.chain.unwrap_or_else(|| self.inner.chain.clone());
        let (mut log, mut prepared) = self
            .prepare_writing(
                log,
                checkpoint.clone(),
                Mode {
                    trace: options.trace,
                    ..Mode::default()
                },
                info,
                (chain, options.summarizer),
                observer.clone(),
            )
            .await?;
        // Long-term memory: what it holds for the client's newest question,
        // less what the snapshot has, in the view's volatile tail.
        if let Some(question) = log
            .iter()
            .rev()
            .find(|m| m.role == Role::User && !m.synthetic)
            .map(|m| m.text().to_string())
        {
            let known = snapshot_facts(&log);
            self.recall(
                &session,
                &agent,
                &question,
                known,
                &mut prepared,
                &*observer,
            )
            .await?;
        }
        // The new messages wait for the answer, to be stored with it in one
        // write, unless the session does not exist yet or a checkpoint goes
        // into the log after them now.
        let pending = match loaded.meta {
            Some(meta) if !prepared.compacted() => Some(meta),
            _ => None,
        };
        let meta = match pending.clone() {
            Some(meta) => meta,
            None => {
                let (target, batch) = (session.clone(), appended.clone());
                let meta = self
                    .blocking(move |inner| {
                        let meta = inner.open(&target)?;
                        if batch.is_empty() {
                            return Ok(meta);
                        }
                        Ok(inner.store.append(&meta.reference(), &batch)?)
                    })
                    .await?;
                let reference = meta.reference();
                self.keep_checkpoint(
                    &reference,
                    &mut log,
                    &mut checkpoint,
                    &prepared,
                    false,
                    &*observer,
                )
                .await?;
                if prepared.compacted() {
                    self.blocking(move |inner| crate::existing(inner.store.as_ref(), &reference))
                        .await?
                } else {
                    meta
                }
            }
        };
        Ok(Exchange::Ready(Box::new(Ready {
            meta,
            pending: pending.is_some() && !appended.is_empty(),
            appended,
            known,
            prepared,
        })))
    }

    /// Stores the end of an exchange in one write: the client's `pending`
    /// messages (see [`Ready::pending`]; empty when they are stored
    /// already), the messages the caller `made` on the way to the answer
    /// (the gateway's rounds of memory-tool calls and their results, with
    /// their own ids, marked host-only), and the answer relayed for them, if
    /// one arrived whole. The answer gets a fresh id, and the session's
    /// agent and the time when it has none. Returns the stored answer and
    /// the session.
    pub async fn store_exchange(
        &self,
        session: &SessionRef,
        pending: Vec<Message>,
        made: Vec<Message>,
        reply: Option<Message>,
        channel: &str,
    ) -> Result<(Option<Message>, SessionMeta)> {
        let reply = reply.map(|mut reply| {
            reply.id = new_id();
            reply.timestamp.get_or_insert_with(Utc::now);
            reply.channel.get_or_insert_with(|| channel.to_owned());
            reply
        });
        let made = made.into_iter().map(|mut m| {
            m.channel.get_or_insert_with(|| channel.to_owned());
            m
        });
        let session = session.clone();
        let mut batch = pending;
        batch.extend(made);
        self.blocking(move |inner| {
            let meta = crate::existing(inner.store.as_ref(), &session)?;
            let mut batch = batch;
            if let Some(mut reply) = reply.clone() {
                reply.agent.get_or_insert_with(|| meta.agent.clone());
                batch.push(reply);
            }
            if batch.is_empty() {
                return Ok((None, meta));
            }
            let meta = inner.store.append(&meta.reference(), &batch)?;
            Ok((batch.pop().filter(|_| reply.is_some()), meta))
        })
        .await
    }

    /// The memory snapshot of a session `client` (its first messages) opens
    /// for `agent`: the facts long-term memory recalls for the client's first
    /// question, as a system message marked host-only (its client never
    /// sends it back; [`agent_host_core::reconcile`] skips it) and
    /// [`MEMORY_SNAPSHOT`], stored after the client's system prompt. It
    /// stays the same for the session's life, in the view's immutable
    /// prefix, so prompt caches keep hitting; what memory holds for later
    /// questions goes in each view's volatile tail. `None` without memory,
    /// a question, or facts for it.
    async fn memory_snapshot(
        &self,
        agent: &str,
        client: &[Message],
        now: chrono::DateTime<Utc>,
    ) -> Result<Option<Message>> {
        let Some(memory) = self.inner.config.memory.clone() else {
            return Ok(None);
        };
        let Some(question) = client
            .iter()
            .find(|m| m.role == Role::User && !m.synthetic)
            .map(|m| m.text().to_string())
        else {
            return Ok(None);
        };
        let name = agent.to_owned();
        let recall = self
            .blocking(move |inner| memory.recall(&name, &question, &inner.counter))
            .await?;
        let Some(mut snapshot) = recall.message(new_id()) else {
            return Ok(None);
        };
        snapshot.role = Role::System;
        snapshot.agent = Some(agent.to_owned());
        snapshot.timestamp = Some(now);
        crate::memory_tools::mark_host_only(&mut snapshot);
        snapshot
            .metadata
            .insert(MEMORY_SNAPSHOT.into(), serde_json::Value::Bool(true));
        Ok(Some(snapshot))
    }

    /// The view of `session`'s log with `new` after it (and `leading`, the
    /// client's system instructions, unless the log holds them), prepared
    /// as [`Engine::exchange_appending`] prepares it, but with nothing
    /// stored and no summary made: a request that continues a session
    /// without being kept (an OpenAI Responses request with `store: false`).
    /// A session that does not exist is [`EngineError::NotFound`].
    pub async fn prepare_continuing(
        &self,
        session: SessionRef,
        leading: Option<Message>,
        new: Vec<Message>,
        chain: Option<ProcessorChain>,
        observer: Arc<dyn Observer>,
    ) -> Result<Prepared> {
        if new.is_empty() {
            return Err(EngineError::InvalidInput(
                "the request has no new messages: there is nothing to send".to_owned(),
            ));
        }
        let loaded = self.load_or_new(session.clone()).await?;
        let Some(meta) = loaded.meta.as_ref() else {
            return Err(EngineError::NotFound(format!(
                "there is no session {session}"
            )));
        };
        let now = Utc::now();
        let agent = agent_of(Some(&session), Some(meta), &self.inner.config);
        let info = self.run_info(Some(meta), Some(&session), now);
        let mut log = loaded.log.clone();
        log.extend(unless_logged(&loaded.log, leading));
        log.extend(new.into_iter().map(|mut m| {
            m.id = new_id();
            m.agent.get_or_insert_with(|| agent.clone());
            m.timestamp.get_or_insert(now);
            m
        }));
        let mode = Mode {
            no_summary: true,
            ..Mode::default()
        };
        let chain = chain.unwrap_or_else(|| self.inner.chain.clone());
        let (_, prepared) = self
            .prepare_blocking(log, loaded.checkpoint, mode, info, chain, observer)
            .await?;
        Ok(prepared)
    }

    /// The view of `messages` with no session behind them (a request the
    /// gateway passes through): the pipeline without summaries, which would
    /// have nowhere to be kept, then the processors. Nothing is stored.
    pub async fn prepare_detached(
        &self,
        messages: Vec<Message>,
        chain: Option<ProcessorChain>,
        observer: Arc<dyn Observer>,
    ) -> Result<Prepared> {
        if messages.is_empty() {
            return Err(EngineError::InvalidInput(
                "the request has no messages: there is nothing to send".to_owned(),
            ));
        }
        let info = self.run_info(None, None, Utc::now());
        let mode = Mode {
            no_summary: true,
            ..Mode::default()
        };
        let chain = chain.unwrap_or_else(|| self.inner.chain.clone());
        let (_, prepared) = self
            .prepare_blocking(messages, None, mode, info, chain, observer)
            .await?;
        Ok(prepared)
    }
}

/// `leading` (a client's system instructions) unless `log` holds a system
/// message of the same text already (outside summaries).
fn unless_logged(log: &[Message], leading: Option<Message>) -> Option<Message> {
    let leading = leading?;
    let text = leading.text();
    let known = log
        .iter()
        .any(|m| m.role == leading.role && !m.summary && m.text() == text);
    (!known).then_some(leading)
}

/// The ids of the facts the memory snapshot in `log`'s system prompt holds.
fn snapshot_facts(log: &[Message]) -> Vec<String> {
    log.iter()
        .take_while(|m| agent_host_core::budget::is_system_prompt(m))
        .filter(|m| m.metadata.get(MEMORY_SNAPSHOT) == Some(&serde_json::Value::Bool(true)))
        .filter_map(|m| m.metadata.get(RECALL_METADATA_KEY)?.as_array().cloned())
        .flatten()
        .filter_map(|id| id.as_str().map(str::to_owned))
        .collect()
}
