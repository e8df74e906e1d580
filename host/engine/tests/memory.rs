//! Long-term memory in the engine: the flush before a summary is stored,
//! and recall placed after the newest message of the view (never among the
//! cached messages before it, never stored).

use std::sync::{Arc, Mutex};

use agent_host_core::Message;
use agent_host_core::memory::{Fact, Filter, Scope};
use agent_host_engine::{Engine, EngineConfig, EngineEvent, MemoryConfig, TurnRequest};
use agent_host_provider::{ProviderKind, ProviderSettings};
use agent_host_store::memory::MemoryStore;
use agent_host_store::{FileStore, NewSession, SessionRef, SessionStore};
use agent_host_testkit::model_server::{LlmServer, Wire};
use serde_json::Value;

/// A fact stated only in messages about to be summarized is in memory
/// before the summary is stored; messages the summary does not cover are
/// not flushed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_flush_saves_what_a_summary_covers_before_the_summary_is_stored() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn SessionStore> = Arc::new(FileStore::open(dir.path()).unwrap());
    let memory = Arc::new(MemoryStore::open(&dir.path().to_string_lossy()).unwrap());
    let session = SessionRef::key("default", "s");
    let meta = store
        .create(&NewSession::new("default").with_key("s"))
        .unwrap();
    let mut log = vec![
        Message::user("My email is ada@example.org, please remember it.").with_id("m0"),
        Message::assistant("Noted, I will use that address from now on.").with_id("m1"),
    ];
    for i in 1..=6 {
        log.push(
            Message::user(format!("Question number {i} about the weather report."))
                .with_id(format!("u{i}")),
        );
        log.push(
            Message::assistant(format!("Answer number {i} about the weather report."))
                .with_id(format!("a{i}")),
        );
    }
    log.push(Message::user("I live in Porto these days.").with_id("last"));
    store.append(&meta.reference(), &log).unwrap();

    let config = EngineConfig {
        memory: Some(MemoryConfig::new(memory.clone(), "ada")),
        ..EngineConfig::default()
    };
    let engine = Engine::new(config, store.clone(), &|_: &str| None).unwrap();
    // What the store and memory held when the flush reported.
    let seen: Arc<Mutex<Vec<(usize, bool)>>> = Arc::default();
    let (sink, at_flush, memory_at_flush) = (seen.clone(), store.clone(), memory.clone());
    let observer = Arc::new(move |e: &EngineEvent| {
        if let EngineEvent::MemoryFlushed { facts, .. } = e {
            let checkpoints = at_flush
                .load(&SessionRef::key("default", "s"))
                .unwrap()
                .meta
                .checkpoints
                .len();
            let found = memory_at_flush
                .search("email", &Filter::user("ada"), 5, false)
                .unwrap()
                .iter()
                .any(|h| h.fact.value.as_deref() == Some("ada@example.org"));
            assert!(*facts > 0);
            sink.lock().unwrap().push((checkpoints, found));
        }
    });
    let prepared = engine.summarize(&session, observer).await.unwrap();
    let covered = prepared
        .compaction
        .checkpoint
        .as_ref()
        .expect("a checkpoint")
        .covers
        .clone();
    assert!(covered.contains(&"m0".to_owned()) && !covered.contains(&"last".to_owned()));
    assert_eq!(
        *seen.lock().unwrap(),
        [(0, true)],
        "flushed once, before the checkpoint was stored"
    );
    assert_eq!(store.load(&session).unwrap().meta.checkpoints.len(), 1);
    let email = &memory
        .search("email", &Filter::user("ada"), 5, false)
        .unwrap()[0]
        .fact;
    assert_eq!(email.value.as_deref(), Some("ada@example.org"));
    assert_eq!(email.source.message.as_deref(), Some("m0"));
    assert_eq!(
        email.source.session.as_deref(),
        Some(meta.id.to_string().as_str())
    );
    // Exactly the covered messages: the message the summary keeps is not flushed.
    assert!(
        memory
            .search("Porto", &Filter::user("ada"), 5, true)
            .unwrap()
            .is_empty()
    );
}

fn provider(server: &LlmServer) -> ProviderSettings {
    let mut provider = ProviderSettings::new(ProviderKind::OpenAi, "test-model");
    provider.base_url = server.base_url();
    provider.api_key_env = None;
    provider.max_retries = 0;
    provider
}

fn sent(body: &Value) -> Vec<Value> {
    body["messages"].as_array().unwrap().clone()
}

/// Recalled facts go after the newest message of the request; the messages
/// before it are the same bytes with or without recall and turn after
/// turn; the recall message is never stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recall_goes_after_the_cached_prefix_and_is_not_stored() {
    let server = LlmServer::start(Wire::OpenAi);
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn SessionStore> = Arc::new(FileStore::open(dir.path()).unwrap());
    let memory = Arc::new(MemoryStore::open(&dir.path().to_string_lossy()).unwrap());
    let now = chrono::Utc::now();
    memory
        .add(Fact::new(
            "rex",
            Scope::new("ada", "default"),
            "ada",
            "has a dog named Rex",
            now,
        ))
        .unwrap();
    memory
        .add(Fact::new(
            "other",
            Scope::new("bob", "default"),
            "bob",
            "has a dog named Fido",
            now,
        ))
        .unwrap();
    let config = EngineConfig {
        provider: Some(provider(&server)),
        memory: Some(MemoryConfig::new(memory.clone(), "ada")),
        ..EngineConfig::default()
    };
    let engine = Engine::new(config, store.clone(), &|_: &str| None).unwrap();
    let session = SessionRef::key("default", "chat");
    let reported: Arc<Mutex<Vec<usize>>> = Arc::default();
    let sink = reported.clone();
    let observer = Arc::new(move |e: &EngineEvent| {
        if let EngineEvent::MemoryRecalled { recall, .. } = e {
            sink.lock().unwrap().push(recall.facts.len());
        }
    });
    let first = engine
        .turn(
            TurnRequest::new(session.clone(), "What is my dog called?"),
            observer.clone(),
        )
        .await
        .unwrap();
    let recall = first.recall.as_ref().unwrap();
    assert_eq!(
        recall
            .facts
            .iter()
            .map(|f| f.id.as_str())
            .collect::<Vec<_>>(),
        ["rex"],
        "ada's memory only"
    );
    assert!(recall.tokens > 0 && recall.tokens <= 1_000);
    let second = engine
        .turn(
            TurnRequest::new(session.clone(), "And what breed is the dog?"),
            observer,
        )
        .await
        .unwrap();
    assert!(second.recall.is_some());
    assert_eq!(*reported.lock().unwrap(), [1, 1]);

    let requests = server.requests();
    let (one, two) = (sent(&requests[0].body), sent(&requests[1].body));
    // The newest message of the log, then the recall.
    assert_eq!(one.len(), 2);
    assert_eq!(one[0]["content"], "What is my dog called?");
    assert!(
        one[1]["content"]
            .as_str()
            .unwrap()
            .contains("has a dog named Rex")
    );
    assert!(!one[1]["content"].as_str().unwrap().contains("Fido"));
    // Turn two's request starts with turn one's messages, unchanged: the
    // recall of turn one is not among them.
    assert_eq!(two[0], one[0]);
    assert_eq!(two[2]["content"], "And what breed is the dog?");
    assert!(two[3]["content"].as_str().unwrap().contains("Rex"));
    assert_eq!(two.len(), 4);
    // Never stored.
    let stored = store.load(&session).unwrap().messages;
    assert_eq!(stored.len(), 4);
    assert!(
        stored
            .iter()
            .all(|m| !m.text().contains("Relevant memories"))
    );
}

/// With extraction by the model, every `extraction_threshold` exchanges the
/// model is asked for the facts of the exchanges since the last time (in
/// the background, after the turn is stored); what it answers is kept with
/// its provenance. A model that answers garbage leaves the offline
/// extractor to stand in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_extracts_facts_every_few_exchanges() {
    let server = LlmServer::start(Wire::OpenAi);
    let garbage = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let answers_garbage = garbage.clone();
    server.respond_with(move |request| {
        let messages = request.body["messages"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let system = messages
            .first()
            .and_then(|m| m["content"].as_str())
            .unwrap_or_default();
        if !system.contains("long-term memories") {
            return agent_host_testkit::model_server::Answer::text("Noted.").into();
        }
        if answers_garbage.load(std::sync::atomic::Ordering::SeqCst) {
            return agent_host_testkit::model_server::Answer::text("I would rather not.").into();
        }
        // Answer about the first user message asked about, by its id.
        let material = messages[1]["content"].as_str().unwrap();
        let id = material
            .lines()
            .find(|l| l.contains("] user: "))
            .and_then(|l| l.strip_prefix('['))
            .and_then(|l| l.split(']').next())
            .unwrap()
            .to_owned();
        let facts = serde_json::json!([{
            "source": id, "entity": "ada", "kind": "attribute",
            "text": "Ada works at Globex.", "attribute": "works at", "value": "Globex"
        }]);
        agent_host_testkit::model_server::Answer::text(&facts.to_string()).into()
    });
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn SessionStore> = Arc::new(FileStore::open(dir.path()).unwrap());
    let memory = Arc::new(MemoryStore::open(&dir.path().to_string_lossy()).unwrap());
    let mut memory_config = MemoryConfig::new(memory.clone(), "ada");
    memory_config.extraction = agent_host_engine::Extraction::Model;
    memory_config.extraction_threshold = 2;
    let config = EngineConfig {
        provider: Some(provider(&server)),
        memory: Some(memory_config),
        ..EngineConfig::default()
    };
    let engine = Engine::new(config, store.clone(), &|_: &str| None).unwrap();
    let session = SessionRef::key("default", "work");
    let (send, mut extracted) = tokio::sync::mpsc::unbounded_channel();
    let observer = Arc::new(move |e: &EngineEvent| {
        if let EngineEvent::MemoryExtracted {
            facts,
            by,
            fell_back,
            ..
        } = e
        {
            let _ = send.send((*facts, by.clone(), fell_back.clone()));
        }
    });
    let say = |text: &'static str| {
        let (engine, session, observer) = (engine.clone(), session.clone(), observer.clone());
        async move {
            engine
                .turn(TurnRequest::new(session, text), observer)
                .await
                .unwrap()
        }
    };
    let first = say("I started at Globex this week.").await;
    say("Remind me to file the expense report.").await;
    let (facts, by, fell_back) =
        tokio::time::timeout(std::time::Duration::from_secs(30), extracted.recv())
            .await
            .expect("an extraction within 30 s")
            .unwrap();
    assert_eq!((facts, by.as_str(), fell_back), (1, "model", None));
    let found = memory
        .search("Globex", &Filter::user("ada"), 5, false)
        .unwrap();
    assert_eq!(found[0].fact.text, "Ada works at Globex.");
    assert_eq!(found[0].fact.attribute.as_deref(), Some("works at"));
    assert_eq!(
        found[0].fact.source.message.as_deref(),
        Some(first.user.id.as_str())
    );
    // One request for the two exchanges: four turns' worth of requests in
    // all would mean it asked after each.
    let asked = server
        .requests()
        .iter()
        .filter(|r| r.body.to_string().contains("long-term memories"))
        .count();
    assert_eq!(asked, 1);

    // The model answers garbage: the offline extractor stands in.
    garbage.store(true, std::sync::atomic::Ordering::SeqCst);
    say("My name is Ada Lovelace.").await;
    say("I prefer tea over coffee.").await;
    let (facts, by, fell_back) =
        tokio::time::timeout(std::time::Duration::from_secs(30), extracted.recv())
            .await
            .expect("an extraction within 30 s")
            .unwrap();
    assert_eq!(by, "offline");
    assert!(fell_back.unwrap().contains("no JSON array"));
    assert!(facts >= 1);
    let found = memory
        .search("tea", &Filter::user("ada"), 5, false)
        .unwrap();
    assert!(
        found.iter().any(|f| f.fact.text.contains("tea")),
        "{found:?}"
    );
}

/// With the memory tools on, the model is offered them on either wire; the
/// engine runs its calls against the user's memory and asks again with the
/// results; a fact it writes carries its provenance; the calls, their
/// results and the answer are stored with the turn, every call paired with
/// its result. A model that keeps calling them is stopped after the last
/// round, its last calls answered unrun.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_uses_the_memory_tools_in_a_turn() {
    use agent_host_testkit::model_server::Answer;
    for wire in [Wire::OpenAi, Wire::Anthropic] {
        let server = LlmServer::start(wire);
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn SessionStore> = Arc::new(FileStore::open(dir.path()).unwrap());
        let memory = Arc::new(MemoryStore::open(&dir.path().to_string_lossy()).unwrap());
        memory
            .add(Fact::new(
                "rex",
                Scope::new("ada", "default"),
                "ada",
                "Ada's dog is named Rex",
                chrono::Utc::now(),
            ))
            .unwrap();
        let mut provider = provider(&server);
        if wire == Wire::Anthropic {
            provider.kind = ProviderKind::Anthropic;
        }
        let mut config = MemoryConfig::new(memory.clone(), "ada");
        config.tools = true;
        let engine = Engine::new(
            EngineConfig {
                provider: Some(provider),
                memory: Some(config),
                ..EngineConfig::default()
            },
            store.clone(),
            &|_: &str| None,
        )
        .unwrap();
        server.push(
            Answer::tool_calls(&[("c1", "memory_search", r#"{"query": "dog named"}"#)]).into(),
        );
        server.push(
            Answer::tool_calls(&[(
                "c2",
                "memory_write",
                r#"{"text": "Ada's dog Rex is a beagle"}"#,
            )])
            .into(),
        );
        server.push(Answer::text("Your dog is Rex, a beagle.").into());
        type Calls = Vec<(String, Option<String>)>;
        let tools: Arc<Mutex<Calls>> = Arc::default();
        let sink = tools.clone();
        let observer = Arc::new(move |e: &EngineEvent| {
            if let EngineEvent::MemoryTool { tool, error, .. } = e {
                sink.lock().unwrap().push((tool.clone(), error.clone()));
            }
        });
        let session = SessionRef::key("default", "dog");
        let outcome = engine
            .turn(
                TurnRequest::new(session.clone(), "What is my dog called? He is a beagle."),
                observer.clone(),
            )
            .await
            .unwrap();
        assert_eq!(
            outcome.reply.as_ref().unwrap().text(),
            "Your dog is Rex, a beagle.",
            "{wire:?}"
        );
        assert_eq!(
            outcome.memory_calls.len(),
            4,
            "{wire:?}: two calls, two results"
        );
        assert_eq!(
            *tools.lock().unwrap(),
            [
                ("memory_search".to_owned(), None),
                ("memory_write".to_owned(), None)
            ]
        );
        let requests = server.requests();
        assert_eq!(requests.len(), 3, "{wire:?}");
        let offered: Vec<String> = requests[0].body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                t.pointer("/function/name")
                    .or_else(|| t.get("name"))
                    .and_then(Value::as_str)
                    .unwrap()
                    .to_owned()
            })
            .collect();
        assert_eq!(
            offered,
            ["memory_search", "memory_write", "memory_recall"],
            "{wire:?}"
        );
        // The second request carries the search's result: the fact.
        assert!(requests[1].contains("Ada's dog is named Rex"), "{wire:?}");
        assert!(requests[2].contains(r#"\"recorded\":true"#), "{wire:?}");
        // The written fact, with the call's message as its source.
        let written = memory
            .search("beagle", &Filter::user("ada"), 5, false)
            .unwrap();
        assert_eq!(written[0].fact.text, "Ada's dog Rex is a beagle");
        let call_id = &outcome.memory_calls[2].id;
        assert_eq!(
            written[0].fact.source.message.as_deref(),
            Some(call_id.as_str())
        );
        // Stored: question, call, result, call, result, answer.
        let stored = store.load(&session).unwrap().messages;
        assert_eq!(stored.len(), 6, "{wire:?}");
        assert!(agent_host_core::validate::validate(&stored).is_empty());
        assert_eq!(stored[2].tool_call_id.as_deref(), Some("c1"));

        // A model that only ever calls memory tools: four rounds run, the
        // fifth answer's call is answered unrun, and the turn ends.
        for n in 0..5 {
            server.push(
                Answer::tool_calls(&[(&format!("d{n}"), "memory_recall", r#"{"entity": "ada"}"#)])
                    .into(),
            );
        }
        let looping = engine
            .turn(
                TurnRequest::new(session.clone(), "Tell me everything."),
                observer,
            )
            .await
            .unwrap();
        assert_eq!(server.requests().len(), 3 + 5, "{wire:?}");
        assert_eq!(looping.memory_calls.len(), 8);
        let stored = store.load(&session).unwrap().messages;
        assert_eq!(stored.len(), 6 + 1 + 8 + 2, "{wire:?}");
        let last = stored.last().unwrap();
        assert_eq!(last.tool_call_id.as_deref(), Some("d4"));
        assert!(last.content.contains("not run"), "{}", last.content);
        assert!(agent_host_core::validate::validate(&stored).is_empty());
    }
}
