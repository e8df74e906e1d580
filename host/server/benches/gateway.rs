//! The gateway's added latency: a Chat Completions request through the
//! gateway against the same request sent straight to the upstream, which
//! answers at once (an in-process axum server on loopback). A bench binary:
//! percentiles over real HTTP, the direct call measured in the same run as
//! the baseline, request by request.
//!
//! `cargo bench -p agent-host-server --bench gateway` measures sessions of
//! 50 and 5,000 messages, without processors and with one (the `keep_all`
//! test guest: a sandboxed call that changes nothing). Each timed request
//! is a session's next turn, as an agent sends it: its whole history, one
//! answer and one new question longer than the last; each session answers
//! a few timed requests, so that it stays near its size. `BENCH_REQUESTS`
//! sets the timed requests per case (200 by default), `BENCH_SIZES` the
//! session sizes (`50,5000`), and `BENCH_NO_PROCESSOR` leaves out the cases
//! with a processor. Each case runs with the request records' stage diffs
//! kept (the default) and off (`ServerConfig::request_stages`), to show
//! what they cost; `BENCH_NO_STAGES_OFF` leaves out the cases without.

use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_host_engine::{Engine, EngineConfig};
use agent_host_provider::{ProviderKind, ProviderSettings};
use agent_host_runtime::ProcessorOptions;
use agent_host_server::{Server, ServerConfig};
use agent_host_store::{FileStore, SessionStore};
use serde_json::{Value, json};

const ANSWER: &str = "Done.";

/// An upstream that answers every request at once with the same answer.
async fn instant_upstream() -> String {
    let answer = json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": ANSWER}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}
    });
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(move |_body: axum::body::Bytes| {
            let answer = answer.clone();
            async move { axum::Json(answer) }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    base
}

async fn gateway(
    upstream: &str,
    processor: Option<&str>,
    stages: bool,
) -> (String, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn SessionStore> = Arc::new(FileStore::open(dir.path()).unwrap());
    let mut provider = ProviderSettings::new(ProviderKind::OpenAi, "m");
    provider.base_url = upstream.to_owned();
    provider.api_key_env = None;
    let config = EngineConfig {
        provider: Some(provider),
        processors: processor
            .map(|p| vec![(p.into(), ProcessorOptions::default())])
            .unwrap_or_default(),
        ..EngineConfig::default()
    };
    let engine =
        tokio::task::spawn_blocking(move || Engine::new(config, store, &|_: &str| None).unwrap())
            .await
            .unwrap();
    let server = Server::new(
        engine,
        ServerConfig {
            request_stages: stages,
            ..ServerConfig::default()
        },
    )
    .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(server.serve(listener, std::future::pending()));
    (base, dir)
}

/// The first `n` messages of a coding conversation (user, assistant with a
/// tool call, a tool result of about 1 KB, assistant), as a client holds it.
fn history(n: usize) -> Vec<Value> {
    (0..n)
        .map(|i| match i % 4 {
            0 => json!({"role": "user", "content": format!("step {i}: read src/file_{i}.rs")}),
            1 => json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": format!("c{i}"), "type": "function",
                 "function": {"name": "read_file", "arguments": format!("{{\"path\":\"src/file_{i}.rs\"}}")}}]}),
            2 => json!({"role": "tool", "tool_call_id": format!("c{}", i - 1),
                        "content": format!("fn f{i}() {{}}\n").repeat(80)}),
            _ => json!({"role": "assistant", "content": format!("file_{i} defines f{i}.")}),
        })
        .collect()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Times `requests` turns through the gateway and the same bodies sent
/// straight upstream; (gateway, direct, added) sorted samples.
async fn case(
    http: &reqwest::Client,
    upstream: &str,
    base: &str,
    size: usize,
    requests: usize,
) -> (Vec<Duration>, Vec<Duration>, Vec<Duration>) {
    const PER_SESSION: usize = 4;
    let sessions = requests.div_ceil(PER_SESSION);
    let (mut through, mut direct, mut added) = (Vec::new(), Vec::new(), Vec::new());
    for s in 0..sessions {
        let session = format!("bench-{size}-{s}");
        // The session's history so far, ending with a question: stored by
        // the first request, untimed.
        let mut messages = history(size - 1);
        messages.push(json!({"role": "user", "content": "go on"}));
        let send = |url: String, messages: Vec<Value>, session: String| {
            let http = http.clone();
            async move {
                let started = Instant::now();
                let reply = http
                    .post(url)
                    .header("x-session-id", session)
                    .json(&json!({"model": "m", "messages": messages}))
                    .send()
                    .await
                    .unwrap();
                assert!(
                    reply.status().is_success(),
                    "{}",
                    reply.text().await.unwrap()
                );
                reply.bytes().await.unwrap();
                started.elapsed()
            }
        };
        send(
            format!("{base}/v1/chat/completions"),
            messages.clone(),
            session.clone(),
        )
        .await;
        for turn in 0..PER_SESSION {
            messages.push(json!({"role": "assistant", "content": ANSWER}));
            messages.push(json!({"role": "user", "content": format!("and then {turn}?")}));
            let g = send(
                format!("{base}/v1/chat/completions"),
                messages.clone(),
                session.clone(),
            )
            .await;
            let d = send(
                format!("{upstream}/chat/completions"),
                messages.clone(),
                session.clone(),
            )
            .await;
            through.push(g);
            direct.push(d);
            added.push(g.saturating_sub(d));
        }
    }
    for samples in [&mut through, &mut direct, &mut added] {
        samples.sort();
    }
    (through, direct, added)
}

fn main() {
    let requests: usize = std::env::var("BENCH_REQUESTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let sizes: Vec<usize> = std::env::var("BENCH_SIZES")
        .ok()
        .map(|v| v.split(',').filter_map(|s| s.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![50, 5_000]);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let upstream = instant_upstream().await;
        let http = reqwest::Client::new();
        println!(
            "# gateway added latency over loopback HTTP (2 cores), {requests} timed requests a case"
        );
        println!(
            "| session | processors | stage diffs | direct p50 / p99 (ms) | through the gateway p50 / p99 (ms) | added p50 / p99 (ms) |"
        );
        println!("|---|---|---|---:|---:|---:|");
        let keep_all = agent_host_test_artifacts::KEEP_ALL;
        let cases = [None, Some(keep_all)]
            .into_iter()
            .flat_map(|p| [(p, true), (p, false)]);
        for (processor, stages) in cases {
            if processor.is_some() && std::env::var_os("BENCH_NO_PROCESSOR").is_some() {
                continue;
            }
            if !stages && std::env::var_os("BENCH_NO_STAGES_OFF").is_some() {
                continue;
            }
            let (base, _dir) = gateway(&upstream, processor, stages).await;
            for size in sizes.iter().copied() {
                let (through, direct, added) = case(&http, &upstream, &base, size, requests).await;
                println!(
                    "| {size} messages | {} | {} | {:.2} / {:.2} | {:.2} / {:.2} | {:.2} / {:.2} |",
                    if processor.is_some() { "keep_all (sandboxed)" } else { "none" },
                    if stages { "kept" } else { "off" },
                    ms(percentile(&direct, 0.5)),
                    ms(percentile(&direct, 0.99)),
                    ms(percentile(&through, 0.5)),
                    ms(percentile(&through, 0.99)),
                    ms(percentile(&added, 0.5)),
                    ms(percentile(&added, 0.99)),
                );
            }
        }
    });
}
