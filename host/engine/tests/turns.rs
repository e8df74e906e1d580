//! The engine as an embedder uses it: async, on a multi-thread runtime,
//! several turns at once, against a real (loopback) model server.

use std::sync::{Arc, Mutex};

use agent_host_core::Role;
use agent_host_engine::{
    DEFAULT_CHANNEL, Engine, EngineConfig, EngineError, EngineEvent, Quiet, TurnRequest,
};
use agent_host_provider::{ProviderKind, ProviderSettings, StreamEvent};
use agent_host_store::{FileStore, SessionRef, SessionStore};
use agent_host_testkit::model_server::{LlmServer, Wire};

fn engine(server: &LlmServer, store: Arc<dyn SessionStore>) -> Engine {
    let mut provider = ProviderSettings::new(ProviderKind::OpenAi, "test-model");
    provider.base_url = server.base_url();
    provider.api_key_env = None;
    provider.max_retries = 0;
    let config = EngineConfig {
        provider: Some(provider),
        cache_dir: None,
        ..EngineConfig::default()
    };
    Engine::new(config, store, &|_: &str| None).expect("an engine")
}

/// Two turns on two sessions run at once inside one multi-thread runtime,
/// with no `spawn_blocking` here: each stores its question and its answer,
/// tagged with its channel, and neither sees the other's messages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_concurrent_turns_on_two_sessions() {
    let server = LlmServer::start(Wire::OpenAi);
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn SessionStore> = Arc::new(FileStore::open(dir.path()).unwrap());
    let engine = engine(&server, store.clone());

    let a =
        TurnRequest::new(SessionRef::key("default", "a"), "question a").with_channel("telegram");
    let b = TurnRequest::new(SessionRef::key("default", "b"), "question b");
    let (ea, eb) = (engine.clone(), engine.clone());
    // Spawned tasks must be Send: this is what a server does with a turn.
    let ta = tokio::spawn(async move { ea.turn(a, Arc::new(Quiet)).await });
    let tb = tokio::spawn(async move { eb.turn(b, Arc::new(Quiet)).await });
    let (ra, rb) = (ta.await.unwrap().unwrap(), tb.await.unwrap().unwrap());
    assert!(ra.reply.is_some() && rb.reply.is_some());

    for (key, question, channel) in [
        ("a", "question a", "telegram"),
        ("b", "question b", DEFAULT_CHANNEL),
    ] {
        let history = store.load(&SessionRef::key("default", key)).unwrap();
        let roles: Vec<Role> = history.messages.iter().map(|m| m.role).collect();
        assert_eq!(roles, [Role::User, Role::Assistant], "session {key}");
        assert_eq!(history.messages[0].text(), question);
        assert_eq!(history.messages[0].channel.as_deref(), Some(channel));
    }
    assert_eq!(server.requests().len(), 2);
}

/// Streamed text reaches the observer, and a failed model call is a typed
/// provider error that stores nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_stream_and_failures_are_typed() {
    let server = LlmServer::start(Wire::OpenAi);
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn SessionStore> = Arc::new(FileStore::open(dir.path()).unwrap());
    let engine = engine(&server, store.clone());

    let seen = Arc::new(Mutex::new(String::new()));
    let sink = seen.clone();
    let observer = Arc::new(move |e: &EngineEvent| {
        if let EngineEvent::Model(StreamEvent::Text(t)) = e {
            sink.lock().unwrap().push_str(t);
        }
    });
    let session = SessionRef::key("default", "s");
    let outcome = engine
        .turn(TurnRequest::new(session.clone(), "hello"), observer)
        .await
        .unwrap();
    let reply = outcome.reply.unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        reply.text(),
        "the streamed text is the reply"
    );

    drop(server); // nothing listens any more
    let err = engine
        .turn(TurnRequest::new(session.clone(), "again"), Arc::new(Quiet))
        .await
        .unwrap_err();
    assert!(matches!(err, EngineError::Provider { .. }), "{err:?}");
    assert_eq!(err.kind(), agent_host_core::ErrorKind::ProviderFailed);
    assert_eq!(
        store.load(&session).unwrap().messages.len(),
        2,
        "the failed turn stored nothing"
    );

    let err = engine
        .turn(TurnRequest::new(session, "  "), Arc::new(Quiet))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), agent_host_core::ErrorKind::InvalidInput);
}

/// A first turn that fails creates no session, and an empty answer is
/// refused rather than stored (it would be sent back later, and Anthropic
/// refuses an empty assistant message); the user's next turn works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_or_empty_turns_store_nothing() {
    use agent_host_testkit::model_server::{Answer, Scripted};

    let server = LlmServer::start(Wire::OpenAi);
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn SessionStore> = Arc::new(FileStore::open(dir.path()).unwrap());
    let engine = engine(&server, store.clone());
    let session = SessionRef::key("default", "first");

    server.push(Scripted::ServerError);
    let err = engine
        .turn(TurnRequest::new(session.clone(), "hello"), Arc::new(Quiet))
        .await
        .unwrap_err();
    assert_eq!(
        err.kind(),
        agent_host_core::ErrorKind::ProviderFailed,
        "{err}"
    );
    assert!(
        store.get(&session).unwrap().is_none(),
        "a failed first turn made a session"
    );

    server.push(Answer::text("").into());
    let err = engine
        .turn(TurnRequest::new(session.clone(), "hello"), Arc::new(Quiet))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("answered with nothing"), "{err}");
    assert!(store.get(&session).unwrap().is_none());

    let outcome = engine
        .turn(TurnRequest::new(session.clone(), "hello"), Arc::new(Quiet))
        .await
        .unwrap();
    assert!(!outcome.reply.unwrap().text().is_empty());
    assert_eq!(store.load(&session).unwrap().messages.len(), 2);
}

/// Issue 15, item 13: an answer cut off halfway keeps the user's message
/// and what arrived, marked incomplete; before, the whole turn was lost.
#[tokio::test(flavor = "multi_thread")]
async fn a_cut_off_answer_keeps_the_question_and_what_arrived() {
    use agent_host_testkit::model_server::{Answer, Scripted};

    let server = LlmServer::start(Wire::OpenAi);
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn SessionStore> = Arc::new(FileStore::open(dir.path()).unwrap());
    let engine = engine(&server, store.clone());
    let session = SessionRef::key("default", "cut");
    let long: String = (0..200).map(|i| format!("word{i} ")).collect();

    server.push(Scripted::CutOff(Answer::text(&long)));
    let err = engine
        .turn(
            TurnRequest::new(session.clone(), "tell me a story"),
            Arc::new(Quiet),
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), agent_host_core::ErrorKind::ProviderFailed);
    let shown = err.to_string();
    assert!(shown.contains("was cut off after"), "{shown}");
    assert!(shown.contains("marked incomplete"), "{shown}");
    let log = store.load(&session).unwrap().messages;
    assert_eq!(log.len(), 2, "{log:?}");
    assert_eq!(log[0].content, "tell me a story");
    let partial = &log[1];
    assert!(!partial.content.is_empty() && partial.content.len() < long.len());
    assert!(long.starts_with(&partial.content), "{:?}", partial.content);
    assert!(
        partial
            .metadata
            .contains_key(agent_host_engine::INCOMPLETE_KEY),
        "{:?}",
        partial.metadata
    );

    // A failure before any text stores nothing, as before.
    server.push(Scripted::ServerError);
    engine
        .turn(TurnRequest::new(session.clone(), "again"), Arc::new(Quiet))
        .await
        .unwrap_err();
    assert_eq!(store.load(&session).unwrap().messages.len(), 2);
}
