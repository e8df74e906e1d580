//! Prefix stability through the gateway: real conversations replayed turn
//! by turn into a 16,000-token window; how often the prompt sent upstream
//! starts with the previous turn's prompt (what a provider's prompt cache
//! needs), and how many compactions broke it.
//!
//! `cargo bench -p agent-host-server --bench prefix` replays the corpus'
//! airline agent (tau-bench; its conversations chained into one session per
//! `BENCH_SESSION_TURNS` answers, 200 by default, as a long-running agent
//! would hold them) through the gateway in front of the loopback model
//! server, which answers each request with the conversation's own next
//! answer. A turn counts as stable when the upstream's `messages` of the
//! previous request are a prefix of this request's. With summaries by the
//! model, it also counts the summary requests and those that start with
//! the previous turn's prompt (what the provider's cache serves).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use agent_host_core::budget::BudgetConfig;
use agent_host_core::format::openai;
use agent_host_core::pipeline::PipelineConfig;
use agent_host_core::{Message, Role};
use agent_host_engine::{Engine, EngineConfig, SummarizerChoice};
use agent_host_provider::{ProviderKind, ProviderSettings};
use agent_host_server::{Server, ServerConfig};
use agent_host_store::{FileStore, SessionStore};
use agent_host_testkit::model_server::{Answer, LlmServer, Scripted, Wire};
use serde_json::{Value, json};

fn main() {
    let Some(corpus) = agent_host_testkit::corpus_dir() else {
        eprintln!("no corpus: put ../shared/corpus beside the checkout or set AGENT_HOST_CORPUS");
        return;
    };
    let per_session: usize = std::env::var("BENCH_SESSION_TURNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let text = std::fs::read_to_string(corpus.join("tau-bench-gpt4o-airline/gpt-4o-airline.json"))
        .unwrap();
    let runs: Vec<Value> = serde_json::from_str(&text).unwrap();
    // Sessions of `per_session` answers each, from the conversations in order.
    let mut sessions: Vec<Vec<Message>> = vec![Vec::new()];
    for run in runs {
        let messages = openai::from_value(run["traj"].clone()).unwrap();
        let current = sessions.last_mut().unwrap();
        let skip = usize::from(!current.is_empty() && messages[0].role == Role::System);
        current.extend(messages.into_iter().skip(skip).filter(|m| {
            m.role != Role::Assistant || !m.text().trim().is_empty() || !m.tool_calls.is_empty()
        }));
        if current.iter().filter(|m| m.role == Role::Assistant).count() >= per_session {
            sessions.push(Vec::new());
        }
    }
    sessions.retain(|s| !s.is_empty());

    // `cargo bench --bench prefix -- model` runs the cases whose name holds
    // `model`.
    let only = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    println!(
        "# prefix stability through the gateway: {} sessions of up to {per_session} answers, 16,000-token window",
        sessions.len()
    );
    for (name, max_messages, summarizer) in [
        (
            "default triggers (30 messages, 80% of the window)",
            Some(30),
            SummarizerChoice::Extractive,
        ),
        (
            "the window trigger alone (80%)",
            None,
            SummarizerChoice::Extractive,
        ),
        (
            "the window trigger alone, summaries by the model",
            None,
            SummarizerChoice::Llm,
        ),
    ] {
        if only.as_deref().is_some_and(|only| !name.contains(only)) {
            continue;
        }
        let mut pipeline = PipelineConfig::default();
        pipeline.budget = BudgetConfig {
            context_limit: 16_000,
            response_reserve: 1_000,
            ..pipeline.budget
        };
        if let Some(summary) = pipeline.summary.as_mut() {
            summary.max_messages = max_messages;
        }
        let line = runtime.block_on(replay(&sessions, pipeline, summarizer));
        println!("{name}: {line}");
    }
}

/// The summary the loopback model writes when asked for one.
const SUMMARY: &str = "## Files Modified\n- none\n## Key Decisions\n- none\n## Important Values\n- none\n## Current State\nServing customers.\n## Pending Tasks\n- none";

/// Whether `body` asks for a summary (the summarizer's headings in its
/// last message, or its instructions as the system prompt).
fn asks_for_summary(body: &Value) -> bool {
    let messages = body["messages"].as_array();
    let last = messages
        .and_then(|m| m.last())
        .map(|m| m["content"].to_string());
    let first = messages
        .and_then(|m| m.first())
        .map(|m| m["content"].to_string());
    last.is_some_and(|t| t.contains("## Files Modified"))
        || first.is_some_and(|t| t.contains("You summarize the earlier part"))
}

/// Replays `sessions` through a gateway with `pipeline`, summaries written
/// by `summarizer`; the line to print.
async fn replay(
    sessions: &[Vec<Message>],
    pipeline: PipelineConfig,
    summarizer: SummarizerChoice,
) -> String {
    {
        let upstream = LlmServer::start(Wire::OpenAi);
        let answers: Vec<Answer> = sessions
            .iter()
            .flatten()
            .filter(|m| m.role == Role::Assistant)
            .map(|m| {
                let mut answer = Answer::text(m.text().as_ref());
                for call in &m.tool_calls {
                    answer = answer.with_tool_call(&call.id, &call.name, &call.arguments);
                }
                answer
            })
            .collect();
        let next = Arc::new(AtomicUsize::new(0));
        let counter = next.clone();
        upstream.respond_with(move |request| {
            if asks_for_summary(&request.body) {
                return Scripted::Answer(Answer::text(SUMMARY));
            }
            Scripted::Answer(answers[counter.fetch_add(1, Ordering::SeqCst)].clone())
        });
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn SessionStore> = Arc::new(FileStore::open(dir.path()).unwrap());
        let mut provider = ProviderSettings::new(ProviderKind::OpenAi, "m");
        provider.base_url = upstream.base_url();
        provider.api_key_env = None;
        let engine = Engine::new(
            EngineConfig {
                provider: Some(provider),
                pipeline,
                summarizer,
                ..EngineConfig::default()
            },
            store,
            &|_: &str| None,
        )
        .unwrap();
        let server = Server::new(engine, ServerConfig::default()).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(server.serve(listener, std::future::pending()));

        let http = reqwest::Client::new();
        let (mut turns, mut stable, mut compactions) = (0usize, 0usize, 0usize);
        let mut after_compaction = 0usize;
        // Summary requests, those that start with the previous turn's
        // prompt, and the share of each one's messages (in bytes of JSON)
        // that prefix covers.
        let (mut summaries, mut reusing, mut covered) = (0usize, 0usize, Vec::new());
        let mut seen = 0usize;
        let mut reasons = std::collections::BTreeMap::new();
        for (s, conversation) in sessions.iter().enumerate() {
            let mut previous: Option<Vec<Value>> = None;
            for (i, m) in conversation.iter().enumerate() {
                if m.role != Role::Assistant {
                    continue;
                }
                let history = openai::to_values(&conversation[..i]).unwrap();
                let reply = http
                    .post(format!("{base}/v1/chat/completions"))
                    .header("x-session-id", format!("prefix-{s}"))
                    .json(&json!({"model": "m", "messages": history}))
                    .send()
                    .await
                    .unwrap();
                assert!(
                    reply.status().is_success(),
                    "{}",
                    reply.text().await.unwrap()
                );
                let compacted = reply.headers()["x-agent-host-summary"] == "created";
                let n = reply.headers()["x-agent-host-request"]
                    .to_str()
                    .unwrap()
                    .to_owned();
                reply.bytes().await.unwrap();
                if compacted && summarizer == SummarizerChoice::Llm {
                    // Why a summary did or did not reuse the last request.
                    let record: Value = http
                        .get(format!("{base}/v1/sessions/prefix-{s}/requests/{n}"))
                        .send()
                        .await
                        .unwrap()
                        .json()
                        .await
                        .unwrap();
                    let why = record["notes"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .find(|n| n.starts_with("the summary request"))
                        .map(|n| match n.split_once("conversation: ") {
                            Some((_, why)) => why.chars().take(60).collect(),
                            None => "reused".to_owned(),
                        })
                        .unwrap_or_else(|| "no note".to_owned());
                    *reasons.entry(why).or_insert(0usize) += 1;
                }
                let mut requests = upstream.requests();
                for asked in requests[seen..]
                    .iter()
                    .filter(|r| asks_for_summary(&r.body))
                {
                    summaries += 1;
                    let messages = asked.body["messages"].as_array().unwrap();
                    if let Some(before) = &previous
                        && messages.len() > before.len()
                        && messages[..before.len()] == before[..]
                    {
                        reusing += 1;
                        let size = |m: &[Value]| serde_json::to_vec(m).unwrap().len();
                        covered.push(size(before) as f64 / size(messages) as f64);
                    }
                }
                seen = requests.len();
                let sent = requests.pop().unwrap().body["messages"]
                    .as_array()
                    .unwrap()
                    .clone();
                if let Some(before) = &previous {
                    turns += 1;
                    if sent.len() >= before.len() && sent[..before.len()] == before[..] {
                        stable += 1;
                    } else if compacted {
                        after_compaction += 1;
                    }
                }
                compactions += usize::from(compacted);
                previous = Some(sent);
            }
        }
        let between = turns - after_compaction;
        covered.sort_by(f64::total_cmp);
        let median = covered.get(covered.len() / 2).copied().unwrap_or(0.0);
        format!(
            "turns compared: {turns}; prompt starts with the previous prompt: {stable} ({:.1}%); \
             of the turns without a compaction: {stable} of {between} ({:.1}%); compactions: {compactions}; \
             summary requests to the model: {summaries}, starting with the previous turn's prompt: {reusing}, \
             which covers a median {:.1}% of their messages' bytes",
            100.0 * stable as f64 / turns.max(1) as f64,
            100.0 * stable as f64 / between.max(1) as f64,
            100.0 * median,
        ) + &if reasons.is_empty() {
            String::new()
        } else {
            format!("; compactions by what the summary did: {reasons:?}")
        }
    }
}
