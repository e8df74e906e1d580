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

use agent_host_engine::{Engine, EngineConfig};
use agent_host_server::{Scope, Server, ServerConfig, Tokens};
use agent_host_store::{FileStore, SessionStore};
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

/// The element `css` finds, waiting up to 15 s for it to appear.
async fn wait_for(client: &Client, locator: Locator<'_>) -> Element {
    client
        .wait()
        .at_most(Duration::from_secs(15))
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

async fn sign_in(client: &Client, token: &str) {
    type_in(client, "input[name=token]", token).await;
    click(client, "form[action='/login'] button").await;
}

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
