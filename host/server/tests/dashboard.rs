//! The dashboard in a real headless browser: Debian's `chromium`, driven
//! through `chromedriver` (WebDriver) by fantoccini, against the server on
//! a loopback port. Each step saves a screenshot under
//! `target/tmp/dashboard/` (`.ci/run` lists them).
//!
//! Skipped with a message when chromium or chromedriver is missing, unless
//! `CI` is set (then it fails: CI installs them).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use agent_host_core::pipeline::PipelineConfig;
use agent_host_engine::{Engine, EngineConfig};
use agent_host_provider::{ProviderKind, ProviderSettings};
use agent_host_runtime::ProcessorOptions;
use agent_host_server::{Scope, Server, ServerConfig, Tokens};
use agent_host_store::{FileStore, SessionStore};
use agent_host_testkit::model_server::{Answer, LlmServer, Scripted, Wire};
use fantoccini::elements::Element;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const CHROMIUM: &str = "/usr/bin/chromium";
const TOKEN: &str = "dashboard-writer-token-0123456789";
const ADMIN: &str = "dashboard-admin-token-0123456789";

/// chromedriver on a free port, killed when dropped.
struct Driver {
    child: Child,
    port: u16,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The browser, or `None` (with a message) where it is not installed.
async fn browser() -> Option<(Driver, Client)> {
    if !std::path::Path::new(CHROMEDRIVER).exists() || !std::path::Path::new(CHROMIUM).exists() {
        let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty());
        assert!(!ci, "CI must install chromium and chromium-driver");
        eprintln!(
            "SKIPPED: {CHROMIUM} or {CHROMEDRIVER} is missing (apt-get install chromium chromium-driver)"
        );
        return None;
    }
    let port = free_port();
    let child = Command::new(CHROMEDRIVER)
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromedriver starts");
    let driver = Driver { child, port };
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({
            "binary": CHROMIUM,
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,900"]
        }),
    );
    let url = format!("http://127.0.0.1:{}", driver.port);
    let mut last = None;
    for _ in 0..100 {
        match ClientBuilder::rustls()
            .expect("a TLS setup")
            .capabilities(caps.clone())
            .connect(&url)
            .await
        {
            Ok(client) => return Some((driver, client)),
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("chromedriver did not answer: {last:?}");
}

async fn shot(client: &Client, name: &str) {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("dashboard");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}.png"));
    std::fs::write(&path, client.screenshot().await.unwrap()).unwrap();
    eprintln!("screenshot: {}", path.display());
}

/// The server with a writer token, on a loopback port; its base URL.
async fn server(dir: &std::path::Path) -> String {
    let store: Arc<dyn SessionStore> = Arc::new(FileStore::open(dir).unwrap());
    let engine = Engine::new(EngineConfig::default(), store, &|_: &str| None).unwrap();
    let mut tokens = Tokens::none();
    tokens.add(TOKEN, Scope::Write).unwrap();
    tokens.add(ADMIN, Scope::Admin).unwrap();
    let config = ServerConfig {
        tokens,
        ..ServerConfig::default()
    };
    let server = Server::new(engine, config).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(server.serve(listener, std::future::pending()));
    base
}

async fn post(http: &reqwest::Client, url: String, body: Value) -> Value {
    let reply = http
        .post(url)
        .bearer_auth(TOKEN)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert!(reply.status().is_success(), "{}", reply.status());
    reply.json().await.unwrap()
}

/// The element `css` finds, waiting up to 60 s for it to appear (a debug
/// build on a loaded 2-core machine renders a long session slowly: 30 s
/// once ran out on a rename while the workspace's other tests ran).
async fn wait_for(client: &Client, locator: Locator<'_>) -> Element {
    client
        .wait()
        .at_most(Duration::from_secs(60))
        .for_element(locator)
        .await
        .unwrap_or_else(|e| panic!("{locator:?} did not appear: {e}"))
}

async fn type_in(client: &Client, css: &str, text: &str) {
    let field = wait_for(client, Locator::Css(css)).await;
    field.clear().await.unwrap();
    field.send_keys(text).await.unwrap();
}

async fn click(client: &Client, css: &str) {
    wait_for(client, Locator::Css(css))
        .await
        .click()
        .await
        .unwrap();
}

async fn text_of(client: &Client, css: &str) -> String {
    wait_for(client, Locator::Css(css))
        .await
        .text()
        .await
        .unwrap()
}

async fn scroll_to(client: &Client, css: &str) {
    let element = wait_for(client, Locator::Css(css)).await;
    client
        .execute(
            "arguments[0].scrollIntoView()",
            vec![serde_json::to_value(&element).unwrap()],
        )
        .await
        .unwrap();
}

async fn sign_in(client: &Client, token: &str) {
    type_in(client, "input[name=token]", token).await;
    click(client, "form[action='/login'] button").await;
}

/// A 1x1 PNG.
const PIXEL: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

/// A coding session long enough to summarize.
fn turns(n: usize) -> Value {
    let mut messages =
        vec![json!({"role": "system", "content": "You are a careful coding agent."})];
    for i in 0..n {
        messages.push(json!({"role": "user", "content": format!("Step {i}: look at src/module_{i}.rs and tell me what it does.")}));
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": format!("call_{i}"), "type": "function", "function": {"name": "read_file", "arguments": format!("{{\"path\":\"src/module_{i}.rs\"}}")}}]}));
        messages.push(json!({"role": "tool", "tool_call_id": format!("call_{i}"), "content": format!("pub fn step_{i}() -> u32 {{ {i} }}\n").repeat(40)}));
        messages.push(json!({"role": "assistant", "content": format!("module_{i} defines step_{i}, which returns {i}.")}));
    }
    json!({"messages": messages, "format": "openai"})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_in_a_real_browser() {
    let Some((_driver, client)) = browser().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let base = server(dir.path()).await;
    let http = reqwest::Client::new();

    // Three sessions; one with a summary checkpoint.
    let mut ids = Vec::new();
    for key in ["alpha", "beta", "gamma"] {
        let body = json!({"key": key, "title": format!("Session {key}")});
        let made = post(&http, format!("{base}/v1/sessions"), body).await;
        ids.push(made["id"].as_str().unwrap().to_owned());
    }
    let (long, beta) = (&ids[0], &ids[1]);
    let messages = format!("{base}/v1/sessions/{long}/messages");
    post(&http, messages.clone(), turns(12)).await;
    let summary = post(
        &http,
        format!("{base}/v1/sessions/{long}/summarize"),
        json!({}),
    )
    .await;
    assert_eq!(summary["session"]["checkpoints"], 1, "{summary}");
    post(&http, messages.clone(), turns(2)).await;
    // Gamma's messages come through a channel, with images: one inline, one
    // on the web (not loaded), and hostile ones (never an `img`).
    let gamma = &ids[2];
    let pictures = json!({"channel": "telegram", "format": "openai", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "What is in these pictures?"},
        {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{PIXEL}")}},
        {"type": "image_url", "image_url": {"url": "https://images.example.com/cat.png"}},
        {"type": "image_url", "image_url": {"url": "data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9ImFsZXJ0KDEpIi8+"}},
        {"type": "image_url", "image_url": {"url": "javascript:alert(1)//\" onerror=\"alert(2)"}}
    ]}]});
    post(
        &http,
        format!("{base}/v1/sessions/{gamma}/messages"),
        pictures,
    )
    .await;

    // Without a token, a page asks to sign in; a wrong token is refused.
    client.goto(&format!("{base}/")).await.unwrap();
    assert_eq!(client.current_url().await.unwrap().path(), "/login");
    sign_in(&client, "not-the-token-at-all").await;
    assert!(
        text_of(&client, "[role=alert]")
            .await
            .contains("not one this server accepts")
    );
    sign_in(&client, TOKEN).await;

    // The list: every session, with context meters filled in.
    let text = text_of(&client, "#sessions table").await;
    for key in ["alpha", "beta", "gamma"] {
        assert!(text.contains(&format!("Session {key}")), "{text}");
    }
    wait_for(
        &client,
        Locator::XPath("//div[contains(@class,'meter')]//small[contains(., 'tokens')]"),
    )
    .await;
    shot(&client, "1-sessions").await;

    // Search narrows the list.
    type_in(&client, "input[name=q]", "gam").await;
    click(&client, "form.filters button.primary").await;
    let mut rows = 0;
    for _ in 0..100 {
        let url = client.current_url().await.unwrap();
        if url.query().is_some_and(|q| q.contains("q=gam")) {
            rows = client
                .find_all(Locator::Css("#sessions tbody tr"))
                .await
                .unwrap()
                .len();
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(rows, 1, "only gamma matches");

    // The channel filter: only gamma's messages came through telegram.
    client.goto(&format!("{base}/")).await.unwrap();
    let channels = text_of(&client, "#sessions tbody").await;
    assert!(channels.contains("telegram"), "{channels}");
    type_in(&client, "input[name=channel]", "telegram").await;
    click(&client, "form.filters button.primary").await;
    wait_for(&client, Locator::XPath("//p[contains(., '1 shown of')]")).await;
    let rows = client
        .find_all(Locator::Css("#sessions tbody tr"))
        .await
        .unwrap();
    assert_eq!(rows.len(), 1);
    assert!(rows[0].text().await.unwrap().contains("Session gamma"));
    shot(&client, "1b-channel-filter").await;

    // Gamma's images: the inline PNG as a thumbnail; the web one a link,
    // not loaded; the hostile ones neither.
    client
        .goto(&format!("{base}/sessions/{gamma}"))
        .await
        .unwrap();
    let images = client.find_all(Locator::Css("main img")).await.unwrap();
    assert_eq!(images.len(), 1, "only the PNG is an image");
    let src = images[0].attr("src").await.unwrap().unwrap();
    assert!(src.starts_with("data:image/png;base64,"), "{src}");
    let link = wait_for(
        &client,
        Locator::Css("a[href='https://images.example.com/cat.png']"),
    )
    .await;
    assert_eq!(
        link.attr("rel").await.unwrap().as_deref(),
        Some("noopener noreferrer nofollow")
    );
    let alerted = client
        .execute(
            "return document.querySelectorAll('[onerror],[onload]').length",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(alerted, json!(0), "no handler got into the page");
    scroll_to(&client, "#timeline").await;
    shot(&client, "1c-images").await;

    // A session: zones, the chart, the timeline with its summary marker.
    client
        .goto(&format!("{base}/sessions/{long}"))
        .await
        .unwrap();
    let zones = wait_for(&client, Locator::Css(".zones")).await;
    assert!(
        zones
            .attr("aria-label")
            .await
            .unwrap()
            .unwrap()
            .contains("tokens")
    );
    wait_for(&client, Locator::Css(".chart svg")).await;
    let marker = wait_for(&client, Locator::Css("li.checkpoint")).await;
    let marker_text = marker.text().await.unwrap();
    assert!(
        marker_text.contains("summarized into") && marker_text.contains("tokens freed"),
        "{marker_text}"
    );
    // Follow the marker: its summary opens.
    marker
        .find(Locator::Css("details > summary"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let opened = marker.find(Locator::Css("details .text")).await.unwrap();
    assert!(!opened.text().await.unwrap().trim().is_empty());
    shot(&client, "2-session").await;

    // Rename through the form.
    type_in(
        &client,
        "input[name=title]",
        "Renamed <b>in the browser</b>",
    )
    .await;
    click(&client, "form[action$='/rename'] button").await;
    let h1 = wait_for(&client, Locator::XPath("//h1[contains(., 'Renamed')]")).await;
    assert_eq!(
        h1.text().await.unwrap(),
        "Renamed <b>in the browser</b>",
        "escaped, not markup"
    );
    let meta: Value = http
        .get(format!("{base}/v1/sessions/{long}"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(meta["title"], "Renamed <b>in the browser</b>");

    // Without the script, the list draws the meters of the reports at hand
    // (this session's was made for its page), under a policy that runs no
    // script but its own.
    let plain = http
        .get(format!("{base}/"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    let policy = plain.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        policy.contains("script-src 'self'") && policy.contains("img-src 'self' data:"),
        "{policy}"
    );
    let html = plain.text().await.unwrap();
    assert!(
        html.contains("% of the compaction point</small>"),
        "no meter drawn: {html}"
    );

    // A new message arrives live, without a reload.
    wait_for(
        &client,
        Locator::XPath("//*[@id='live' and contains(., 'live')]"),
    )
    .await;
    let live = json!({"messages": [{"role": "user", "content": "A message that arrives live"}], "format": "openai"});
    post(&http, messages.clone(), live).await;
    wait_for(
        &client,
        Locator::XPath(
            "//ol[contains(@class,'timeline')]//div[contains(., 'A message that arrives live')]",
        ),
    )
    .await;
    shot(&client, "3-live").await;

    // Deleting needs the admin scope: a writer gets a page saying so.
    client
        .goto(&format!("{base}/sessions/{beta}/delete"))
        .await
        .unwrap();
    assert_eq!(text_of(&client, "h1").await, "Error 403");
    // Signed in as an admin, it asks first, then deletes.
    client.goto(&format!("{base}/")).await.unwrap();
    click(&client, "button[formaction='/logout']").await;
    wait_for(&client, Locator::Css("input[name=token]")).await;
    client
        .goto(&format!("{base}/sessions/{beta}/delete"))
        .await
        .unwrap();
    sign_in(&client, ADMIN).await;
    let question = wait_for(
        &client,
        Locator::XPath("//h1[contains(., 'Delete this session')]"),
    )
    .await;
    assert!(question.text().await.unwrap().ends_with('?'));
    shot(&client, "4-confirm-delete").await;
    click(&client, "form[action$='/delete'] button").await;
    wait_for(&client, Locator::Css("#sessions table")).await;
    let text = text_of(&client, "#sessions").await;
    assert!(
        !text.contains("Session beta") && text.contains("Session gamma"),
        "{text}"
    );
    let gone = http
        .get(format!("{base}/v1/sessions/{beta}"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(gone.status(), reqwest::StatusCode::NOT_FOUND);

    // The processors page.
    client.goto(&format!("{base}/processors")).await.unwrap();
    assert!(text_of(&client, "main").await.contains("Recent calls"));

    // Phone width.
    client.set_window_size(390, 844).await.unwrap();
    client.goto(&format!("{base}/")).await.unwrap();
    wait_for(&client, Locator::Css("#sessions table")).await;
    shot(&client, "5-phone").await;

    client.close().await.unwrap();
}

/// The gateway in front of the loopback model, with a small window (the
/// budget leaves the oldest messages out) and the `edits` test processor
/// (it replaces one message and inserts another); its base URL.
async fn gateway(dir: &std::path::Path, upstream: &LlmServer) -> String {
    let store: Arc<dyn SessionStore> = Arc::new(FileStore::open(dir).unwrap());
    let mut provider = ProviderSettings::new(ProviderKind::OpenAi, "test-model");
    provider.base_url = upstream.base_url();
    provider.api_key_env = None;
    let mut pipeline = PipelineConfig::default();
    pipeline.budget.context_limit = 3_000;
    pipeline.budget.response_reserve = 500;
    let edits = ProcessorOptions {
        config: Some(r#"{"replace": [[2, "Shortened by the processor."]], "insert": "A note from the processor."}"#.to_owned()),
        ..ProcessorOptions::default()
    };
    let config = EngineConfig {
        provider: Some(provider),
        auto_summarize: false,
        pipeline,
        processors: vec![(agent_host_test_artifacts::EDITS.into(), edits)],
        ..EngineConfig::default()
    };
    let engine =
        tokio::task::spawn_blocking(move || Engine::new(config, store, &|_: &str| None).unwrap())
            .await
            .unwrap();
    let server = Server::new(engine, ServerConfig::default()).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(server.serve(listener, std::future::pending()));
    base
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_diff_in_a_real_browser() {
    let Some((_driver, client)) = browser().await else {
        return;
    };
    let upstream = LlmServer::start(Wire::OpenAi);
    upstream.respond_with(|_| Scripted::Answer(Answer::text("Noted.")));
    let dir = tempfile::tempdir().unwrap();
    let base = gateway(dir.path(), &upstream).await;

    // A client that sends its whole history, longer than the window.
    let mut messages = vec![json!({"role": "system", "content": "You are a careful agent."})];
    for i in 0..30 {
        messages.push(json!({"role": "user", "content": format!("Step {i}: {}", "explain the build once more. ".repeat(12))}));
        messages.push(json!({"role": "assistant", "content": format!("Answer {i}: it compiles the crates in order.")}));
    }
    messages.push(json!({"role": "user", "content": "And now?"}));
    let reply = reqwest::Client::new()
        .post(format!("{base}/v1/chat/completions"))
        .header("x-session-id", "browser-diff")
        .json(&json!({"model": "test-model", "messages": messages}))
        .send()
        .await
        .unwrap();
    assert!(reply.status().is_success(), "{}", reply.status());
    let session = reply.headers()["x-agent-host-session"]
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(reply.headers()["x-agent-host-request"], "1");
    let sent = upstream.requests();
    assert!(sent[0].contains("Shortened by the processor."));

    // From the list to the session's requests, to the request.
    client
        .goto(&format!("{base}/?channel=gateway"))
        .await
        .unwrap();
    click(&client, "#sessions a[href$='#requests']").await;
    click(&client, "#requests a[href$='/requests/1']").await;
    wait_for(&client, Locator::XPath("//h1[contains(., 'Request #1')]")).await;
    assert!(
        client
            .current_url()
            .await
            .unwrap()
            .path()
            .ends_with(&format!("/sessions/{session}/requests/1"))
    );

    // Stage 1, the pipeline: the oldest messages dropped, struck out, their
    // text behind a disclosure.
    let pipeline = text_of(&client, "#stage-1 h3").await;
    assert!(
        pipeline.contains("pipeline") && pipeline.contains("changed"),
        "{pipeline}"
    );
    let dropped = wait_for(
        &client,
        Locator::XPath(
            "//li[@id='stage-1']//li[contains(@class,'dropped')]//details[.//span[@class='who' and .='user']]",
        ),
    )
    .await;
    dropped
        .find(Locator::Css("summary"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let struck = dropped.find(Locator::Css("del .text")).await.unwrap();
    assert!(struck.text().await.unwrap().contains("explain the build"));
    assert!(
        text_of(&client, "#stage-1 ul.steps")
            .await
            .contains("older messages left out")
    );
    // Where the pipeline's time went, step by step.
    let times = text_of(&client, "#stage-1 table.step-times").await;
    for step in ["read", "pack", "view"] {
        assert!(times.contains(step), "{times}");
    }

    // Stage 2, the processor: a message beside its replacement, and one
    // inserted.
    let processor = text_of(&client, "#stage-2 h3").await;
    assert!(processor.contains("applied"), "{processor}");
    let before = text_of(&client, "#stage-2 li.replaced .before del").await;
    let after = text_of(&client, "#stage-2 li.replaced .after ins").await;
    assert!(before.starts_with("Step 8: explain the build"), "{before}");
    assert_eq!(after, "Shortened by the processor.");
    assert!(
        text_of(&client, "#stage-2 li.inserted ins")
            .await
            .contains("A note from the processor.")
    );
    scroll_to(&client, "#stage-2").await;
    shot(&client, "6-request-diff").await;
    client.set_window_size(390, 844).await.unwrap();
    scroll_to(&client, "#stage-2 li.replaced").await;
    shot(&client, "7-request-diff-phone").await;

    // A `run --report` file, pasted into /reports, shows the same way.
    let report = json!({
        "input": {"source": "session.jsonl", "format": "jsonl", "messages": 3, "tokens": 40},
        "output": {"format": "openai", "messages": 2, "tokens": 20},
        "stages": [{
            "name": "pipeline", "kind": "pipeline", "time_ms": 0.4, "outcome": "changed", "steps": ["budget: 2 messages in the view"],
            "diff": {"before": 3, "after": 2, "kept": 2, "dropped": 1, "replaced": 0, "inserted": 0, "changes": [
                {"change": "dropped", "message": {"id": "m1", "role": "user", "text": "<script>alert(1)</script> the oldest", "chars": 37}},
                {"change": "kept", "count": 2, "first": "m2", "last": "m3"}]}
        }]
    });
    client.goto(&format!("{base}/reports")).await.unwrap();
    let area = wait_for(&client, Locator::Css("textarea[name=report]")).await;
    client
        .execute(
            "arguments[0].value = arguments[1]",
            vec![
                serde_json::to_value(&area).unwrap(),
                json!(report.to_string()),
            ],
        )
        .await
        .unwrap();
    click(&client, "form[action='/reports'] button").await;
    let dropped = wait_for(&client, Locator::Css("#stage-1 li.dropped summary")).await;
    assert!(
        dropped
            .text()
            .await
            .unwrap()
            .contains("<script>alert(1)</script>"),
        "shown as text"
    );
    client.close().await.unwrap();
}
