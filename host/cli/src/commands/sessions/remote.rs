//! `agent-host sessions --server URL ...`: the same commands against a
//! running `agent-host serve`, over its `/v1` API.

use std::io::Write;

use agent_host_api::{ErrorBody, SessionList, SessionView};
use agent_host_core::Message;
use agent_host_core::format::jsonl;
use anyhow::{Context, Result, anyhow, bail};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::{
    ConfirmArgs, ExportArgs, ListArgs, RenameArgs, SessionName, SessionsCommand, ShowArgs,
};
use crate::commands::block_on;
use crate::commands::run::UsageError;

/// A client of one server.
struct Remote {
    base: reqwest::Url,
    http: reqwest::Client,
    token: Option<String>,
}

impl Remote {
    fn new(base: &reqwest::Url) -> Result<Self> {
        Ok(Remote {
            base: base.clone(),
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()?,
            token: std::env::var(agent_host_server::auth::TOKEN_ENV).ok(),
        })
    }

    /// The URL of `path` (segments joined by `/`, each percent-encoded as
    /// one segment) with `query`.
    fn url(&self, path: &[&str], query: &[(&str, String)]) -> Result<reqwest::Url> {
        let mut url = self.base.clone();
        url.path_segments_mut()
            .map_err(|()| anyhow!("--server {}: not a URL with a path", self.base))?
            .pop_if_empty()
            .extend(path);
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        Ok(url)
    }

    /// Sends a request and reads the JSON answer, or the server's error.
    fn call<T: DeserializeOwned>(
        &self,
        method: reqwest::Method,
        url: reqwest::Url,
        body: Option<Value>,
    ) -> Result<T> {
        let text = self.call_text(method, url, body)?;
        serde_json::from_str(&text)
            .context("the server's answer is not what agent-host serve sends")
    }

    fn call_text(
        &self,
        method: reqwest::Method,
        url: reqwest::Url,
        body: Option<Value>,
    ) -> Result<String> {
        let mut request = self.http.request(method, url.clone());
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        block_on(async move {
            let reply = request
                .send()
                .await
                .with_context(|| format!("cannot reach {url}"))?;
            let status = reply.status();
            let text = reply.text().await?;
            if status.is_success() {
                return Ok(text);
            }
            match serde_json::from_str::<ErrorBody>(&text) {
                Ok(e) => Err(anyhow!(agent_host_server::ApiError::new(
                    e.error.kind,
                    format!("{} (HTTP {status})", e.error.message)
                ))),
                Err(_) => Err(anyhow!("{url}: HTTP {status}")),
            }
        })
    }

    /// The path of the session `name` (then `rest`), and its agent query.
    fn session_path<'a>(
        name: &'a SessionName,
        rest: Option<&'a str>,
    ) -> (Vec<&'a str>, Vec<(&'static str, String)>) {
        let mut path = vec!["v1", "sessions", name.session.as_str()];
        path.extend(rest);
        (path, vec![("agent", name.agent.clone())])
    }
}

/// Runs a sessions command against the server at `base`.
pub(super) fn run(
    command: SessionsCommand,
    base: &reqwest::Url,
    out: &mut dyn Write,
) -> Result<()> {
    let remote = Remote::new(base)?;
    match command {
        SessionsCommand::List(args) => list(&remote, &args, out),
        SessionsCommand::Show(args) => show(&remote, &args, out),
        SessionsCommand::Export(args) => export(&remote, &args, out),
        SessionsCommand::Rename(args) => rename(&remote, &args, out),
        SessionsCommand::Delete(args) => delete(&remote, &args, out),
        SessionsCommand::Clear(_)
        | SessionsCommand::Info(_)
        | SessionsCommand::Cleanup(_)
        | SessionsCommand::Import(_) => Err(UsageError(
            "this command works on a store, not over --server: give --store (or run it where the server's store is)".to_owned(),
        )
        .into()),
    }
}

fn list(remote: &Remote, args: &ListArgs, out: &mut dyn Write) -> Result<()> {
    let mut query = vec![("limit", args.per_page.to_string())];
    if let Some(agent) = &args.agent {
        query.push(("agent", agent.clone()));
    }
    // Pages are cursors on the server: walk to the one asked for.
    let mut page: SessionList = remote.call(
        reqwest::Method::GET,
        remote.url(&["v1", "sessions"], &query)?,
        None,
    )?;
    for _ in 1..args.page {
        let Some(cursor) = page.next_cursor.clone() else {
            page.sessions.clear();
            break;
        };
        let mut next = query.clone();
        next.push(("cursor", cursor));
        page = remote.call(
            reqwest::Method::GET,
            remote.url(&["v1", "sessions"], &next)?,
            None,
        )?;
    }
    if args.json {
        writeln!(
            out,
            "{}",
            agent_host_core::format::to_pretty(&page.sessions)?
        )?;
        return Ok(());
    }
    if page.sessions.is_empty() {
        writeln!(out, "no sessions on page {} of {}", args.page, remote.base)?;
        return Ok(());
    }
    writeln!(
        out,
        "{:<36}  {:<12} {:>8}  {:<9}  updated (UTC)",
        "session", "agent", "messages", "state"
    )?;
    for s in &page.sessions {
        writeln!(
            out,
            "{:<36}  {:<12} {:>8}  {:<9}  {}",
            name(s),
            super::shown(&s.agent),
            s.message_count,
            s.state.map_or("-", |st| st.as_str()),
            s.updated.format("%Y-%m-%d %H:%M:%S")
        )?;
    }
    if page.next_cursor.is_some() {
        writeln!(out, "more: --page {}", args.page + 1)?;
    }
    Ok(())
}

/// The session's key (escaped when it holds control characters or spaces),
/// else its id.
fn name(s: &SessionView) -> String {
    s.key
        .as_deref()
        .map_or_else(|| s.id.to_string(), |k| super::shown(k).into_owned())
}

fn show(remote: &Remote, args: &ShowArgs, out: &mut dyn Write) -> Result<()> {
    let (path, mut query) = Remote::session_path(&args.name, Some("messages"));
    if let Some(since) = &args.since {
        query.push(("since", since.clone()));
    }
    if let Some(contains) = &args.contains {
        query.push(("contains", contains.clone()));
    }
    if !args.role.is_empty() {
        let roles: Vec<&str> = args
            .role
            .iter()
            .map(|&r| agent_host_core::Role::from(r).as_str())
            .collect();
        query.push(("roles", roles.join(",")));
    }
    if let Some(limit) = args.limit {
        query.push(("limit", limit.to_string()));
    }
    if args.include_forwarded {
        query.push(("include_forwarded", "true".to_owned()));
    }
    let answer: Value = remote.call(reqwest::Method::GET, remote.url(&path, &query)?, None)?;
    let records = answer["messages"].as_array().cloned().unwrap_or_default();
    if args.json {
        writeln!(out, "{}", agent_host_core::format::to_pretty(&records)?)?;
        return Ok(());
    }
    let messages = records
        .iter()
        .enumerate()
        .map(|(i, r)| jsonl::parse_line(&r.to_string(), i + 1))
        .collect::<Result<Vec<Message>, _>>()
        .context("the server sent a message agent-host cannot read")?;
    writeln!(
        out,
        "session {}: {} shown",
        args.name.session,
        messages.len()
    )?;
    writeln!(out)?;
    let rows: Vec<(Option<usize>, &Message)> = messages.iter().map(|m| (None, m)).collect();
    super::message_table(out, &rows)
}

fn export(remote: &Remote, args: &ExportArgs, out: &mut dyn Write) -> Result<()> {
    let (path, mut query) = Remote::session_path(&args.name, Some("export"));
    query.push(("format", "markdown".to_owned()));
    let markdown = remote.call_text(reqwest::Method::GET, remote.url(&path, &query)?, None)?;
    match &args.output {
        Some(file) => std::fs::write(file, markdown)
            .with_context(|| format!("cannot write {}", file.display()))?,
        None => out.write_all(markdown.as_bytes())?,
    }
    Ok(())
}

fn rename(remote: &Remote, args: &RenameArgs, out: &mut dyn Write) -> Result<()> {
    let (path, query) = Remote::session_path(&args.name, None);
    let title = Some(args.title.as_str()).filter(|t| !t.is_empty());
    let view: SessionView = remote.call(
        reqwest::Method::PATCH,
        remote.url(&path, &query)?,
        Some(json!({ "title": title })),
    )?;
    match &view.title {
        Some(title) => writeln!(out, "session {}: title {title:?}", name(&view))?,
        None => writeln!(out, "session {}: title removed", name(&view))?,
    }
    Ok(())
}

fn delete(remote: &Remote, args: &ConfirmArgs, out: &mut dyn Write) -> Result<()> {
    let (path, query) = Remote::session_path(&args.name, None);
    let view: SessionView = remote.call(reqwest::Method::GET, remote.url(&path, &query)?, None)?;
    let what = format!(
        "delete session {} and its {} messages on {}",
        name(&view),
        view.message_count,
        remote.base
    );
    if !super::confirm(&what, args.yes, "delete")? {
        writeln!(out, "kept session {}", name(&view))?;
        return Ok(());
    }
    let gone: SessionView = remote.call(
        reqwest::Method::DELETE,
        remote.url(&["v1", "sessions", &view.id.to_string()], &[])?,
        None,
    )?;
    if gone.id != view.id {
        bail!("the server deleted another session than the one asked for");
    }
    writeln!(
        out,
        "deleted session {} ({} messages)",
        name(&gone),
        gone.message_count
    )?;
    Ok(())
}
