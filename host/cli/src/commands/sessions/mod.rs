//! `agent-host sessions`: the stored sessions from the command line, and the
//! choice of store every command that touches sessions shares.
//!
//! The store is the global `--store SPEC` flag, else the `AGENT_HOST_STORE`
//! variable, else `.agent-host/` in the working directory ([`agent_host_config::store_spec`]);
//! `SPEC` is a folder (the file store) or `sqlite:PATH`
//! ([`agent_host_store::open`]). A session is named by its key within an agent
//! (`--agent`, default `default`) or by its id ([`SessionName`]).
//!
//! Commands that only read never create a store: `sessions list` in a folder
//! with no store says there are no sessions, and leaves no `.agent-host/`
//! behind.
//!
//! What is deliberately not here: the storage itself ([`agent_host_store`]), and
//! the queries and the Markdown rendering, which are core's
//! ([`agent_host_core::query`], [`agent_host_core::export`]).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::{self, BufRead, IsTerminal, Write};
use std::path::PathBuf;

use agent_host_core::format::{self, Format, Transcript};
use agent_host_core::pairing::ToolPairing;
use agent_host_core::query::{self, Query};
use agent_host_core::{HeuristicCounter, Message, Role, export};
use anyhow::{Context, Result, anyhow, bail};
use chrono::{DateTime, Utc};
use clap::{Args, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::commands::run::UsageError;
use agent_host_engine::transcript::{self, Loaded};
mod import;
mod info;
mod remote;

use agent_host_store::{
    self, DEFAULT_AGENT, History, MAX_PAGE_LIMIT, NewSession, PageRequest, SQLITE_PREFIX,
    SessionMeta, SessionRef, SessionStore,
};
use import::import;
use info::info;

/// Opens (creating when missing) the store `spec` names, with the spec in
/// the error.
pub fn open_store(spec: &str) -> Result<Box<dyn SessionStore>> {
    agent_host_store::open(spec).with_context(|| {
        format!(
            "cannot open the session store {}",
            agent_host_store::redact(spec)
        )
    })
}

/// Opens the store for a command that only reads: `None` when nothing is
/// stored at `spec` yet, so that reading never creates a store.
pub(crate) fn open_existing(spec: &str) -> Result<Option<Box<dyn SessionStore>>> {
    if agent_host_store::exists(spec) {
        open_store(spec).map(Some)
    } else {
        Ok(None)
    }
}

/// How the command line names a session: a key of an agent, or an id.
#[derive(Clone, Debug, Args)]
pub struct SessionName {
    /// The session: its key (within --agent) or its id.
    #[arg(value_name = "KEY|ID")]
    pub session: String,
    /// The agent the key belongs to.
    #[arg(long, value_name = "AGENT", default_value = DEFAULT_AGENT)]
    pub agent: String,
}

impl SessionName {
    /// The session this names in `store`: the session with this id when
    /// it parses as one and exists, else the agent's session with this key.
    /// An unknown session is an error naming it and the store.
    pub fn find(&self, store: Option<&dyn SessionStore>, spec: &str) -> Result<SessionMeta> {
        if let Some(store) = store {
            if let Ok(id) = Uuid::parse_str(&self.session)
                && let Some(meta) = store.get(&SessionRef::Id(id))?
            {
                return Ok(meta);
            }
            let by_key = SessionRef::key(self.agent.clone(), self.session.clone());
            if let Some(meta) = store.get(&by_key)? {
                return Ok(meta);
            }
        }
        Err(anyhow!(
            "no session {:?} (neither a key of agent {:?} nor a session id) in the store {spec}; \
             `agent-host sessions list` shows the stored ones",
            self.session,
            self.agent
        ))
    }
}

/// `agent-host sessions`: where the sessions are, and what to do.
#[derive(Debug, Args)]
pub struct SessionsArgs {
    /// Talk to a running `agent-host serve` at this URL instead of opening a store (list,
    /// show, export, rename, delete); a token comes from AGENT_HOST_API_TOKEN.
    #[arg(long, global = true, value_name = "URL")]
    server: Option<reqwest::Url>,
    #[command(subcommand)]
    command: SessionsCommand,
}

impl SessionsArgs {
    /// Runs the command, on the server when `--server` names one, else on
    /// the store `spec`.
    pub fn run(self, spec: &str, out: &mut dyn Write) -> Result<()> {
        match &self.server {
            Some(server) => remote::run(self.command, server, out),
            None => run(self.command, spec, out),
        }
    }
}

/// The `agent-host sessions` commands.
#[derive(Debug, Subcommand)]
pub enum SessionsCommand {
    /// List the stored sessions, most recently updated first.
    List(ListArgs),
    /// Show a session's messages, optionally filtered.
    Show(ShowArgs),
    /// Write a session as Markdown, for people to read.
    Export(ExportArgs),
    /// Set a session's title.
    Rename(RenameArgs),
    /// Delete a session and everything stored with it.
    Delete(ConfirmArgs),
    /// Remove every message and checkpoint of a session; its id, key and title stay.
    Clear(ConfirmArgs),
    /// Show a session's metadata, files, counts and token estimate.
    Info(InfoArgs),
    /// Delete the sessions idle for longer than a given age.
    Cleanup(CleanupArgs),
    /// Append a history file (any supported format) to a session, creating it when missing.
    Import(ImportArgs),
}

/// The options of `sessions list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only this agent's sessions.
    #[arg(long)]
    agent: Option<String>,
    /// Which page to show, from 1.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    page: u64,
    /// How many sessions a page holds (1 to 200).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=MAX_PAGE_LIMIT as u64))]
    per_page: u64,
    /// Print a JSON array, one object per session, for scripts.
    #[arg(long)]
    json: bool,
}

/// The roles `sessions show --role` accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum RoleArg {
    System,
    User,
    Assistant,
    Tool,
}

impl From<RoleArg> for Role {
    fn from(role: RoleArg) -> Role {
        match role {
            RoleArg::System => Role::System,
            RoleArg::User => Role::User,
            RoleArg::Assistant => Role::Assistant,
            RoleArg::Tool => Role::Tool,
        }
    }
}

/// The options of `sessions show`.
#[derive(Debug, Args)]
pub struct ShowArgs {
    #[command(flatten)]
    name: SessionName,
    /// Only the most recent N matching messages.
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// Only messages at or after this time: a duration before now (`30m`, `2d`), an RFC 3339
    /// timestamp or a date. Messages without a timestamp do not match.
    #[arg(long, value_name = "TIME")]
    since: Option<String>,
    /// Only messages with this role; repeat for several.
    #[arg(long, value_name = "ROLE")]
    role: Vec<RoleArg>,
    /// Only messages containing this text (ignoring case), in their text, tool calls or tool name.
    #[arg(long, value_name = "TEXT")]
    contains: Option<String>,
    /// Also show messages forwarded from another session or agent (left out by default).
    #[arg(long)]
    include_forwarded: bool,
    /// Print a JSON array of the matching messages as native log records, for scripts.
    #[arg(long)]
    json: bool,
}

/// The options of `sessions export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    #[command(flatten)]
    name: SessionName,
    /// Where to write the Markdown (standard output when not given).
    #[arg(long, short, value_name = "FILE.md")]
    output: Option<PathBuf>,
}

/// The options of `sessions rename`.
#[derive(Debug, Args)]
pub struct RenameArgs {
    #[command(flatten)]
    name: SessionName,
    /// The new title; an empty one removes the title.
    title: String,
}

/// The options of `sessions delete` and `sessions clear`.
#[derive(Debug, Args)]
pub struct ConfirmArgs {
    #[command(flatten)]
    name: SessionName,
    /// Do not ask. Without it, the command asks on a terminal and refuses otherwise.
    #[arg(long, short)]
    yes: bool,
}

/// The options of `sessions info`.
#[derive(Debug, Args)]
pub struct InfoArgs {
    #[command(flatten)]
    name: SessionName,
    /// Print a JSON object, for scripts.
    #[arg(long)]
    json: bool,
}

/// The options of `sessions cleanup`.
#[derive(Debug, Args)]
pub struct CleanupArgs {
    /// Delete the sessions last updated longer ago than this (`30d`, `12h`, `2w`).
    #[arg(long, value_name = "AGE")]
    older_than: String,
    /// Only say which sessions would be deleted.
    #[arg(long)]
    dry_run: bool,
    /// Print a JSON array of the sessions deleted (or that would be), for scripts.
    #[arg(long)]
    json: bool,
}

/// The options of `sessions import`.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The history to import (`-` for standard input).
    file: PathBuf,
    /// The session to append to: its key within --agent (created when missing) or its id.
    #[arg(long, value_name = "KEY")]
    session: String,
    /// The agent the session belongs to.
    #[arg(long, value_name = "AGENT", default_value = DEFAULT_AGENT)]
    agent: String,
    /// The file's format; detected when not given.
    #[arg(
        long,
        value_name = "jsonl|openai|anthropic|responses|claude-code|codex|gemini-cli|pydantic-ai|langchain"
    )]
    format: Option<Format>,
    /// The title of a session this creates (the file's own title, when it has one, otherwise).
    #[arg(long)]
    title: Option<String>,
    #[command(flatten)]
    limits: crate::commands::LimitArgs,
}

/// Runs a `sessions` command against the store `spec` names, writing
/// results to `out`.
pub fn run(command: SessionsCommand, spec: &str, out: &mut dyn Write) -> Result<()> {
    match command {
        SessionsCommand::List(args) => list(&args, spec, out),
        SessionsCommand::Show(args) => show(&args, spec, out),
        SessionsCommand::Export(args) => export(&args, spec, out),
        SessionsCommand::Rename(args) => rename(&args, spec, out),
        SessionsCommand::Delete(args) => delete(&args, spec, out),
        SessionsCommand::Clear(args) => clear(&args, spec, out),
        SessionsCommand::Info(args) => info(&args, spec, out),
        SessionsCommand::Cleanup(args) => cleanup(&args, spec, out),
        SessionsCommand::Import(args) => import(&args, spec, out),
    }
}

/// Loads a stored session as a history for `agent-host run --session`: the
/// messages, read as the native format, and the session's metadata (for its
/// latest checkpoint).
pub fn load_for_run(spec: &str, name: &SessionName) -> Result<(Loaded, SessionMeta)> {
    let store = open_existing(spec)?;
    let meta = name.find(store.as_deref(), spec)?;
    let store = store.context("the store vanished")?;
    let history = load(store.as_ref(), &meta)?;
    let loaded = Loaded {
        source: format!("session {}", describe(&history.meta)),
        format: Format::Jsonl,
        transcript: Transcript {
            messages: history.messages,
            title: history.meta.title.clone(),
            ..Transcript::default()
        },
    };
    Ok((loaded, history.meta))
}

/// Loads a session. What was wrong with its log is reported by the store
/// (as `tracing` warnings, shown on standard error by default).
fn load(store: &dyn SessionStore, meta: &SessionMeta) -> Result<History> {
    store
        .load(&meta.reference())
        .with_context(|| format!("cannot load session {}", describe(meta)))
}

fn list(args: &ListArgs, spec: &str, out: &mut dyn Write) -> Result<()> {
    let per_page = usize::try_from(args.per_page)?;
    let offset = usize::try_from(args.page - 1)?.saturating_mul(per_page);
    let page = match open_existing(spec)? {
        Some(store) => store.list(&PageRequest {
            after: None,
            offset,
            limit: per_page,
            agent: args.agent.clone(),
        })?,
        None => agent_host_store::SessionPage::default(),
    };
    for warning in &page.warnings {
        eprintln!("warning: {warning}");
    }
    if args.json {
        let all: Vec<Value> = page.sessions.iter().map(session_json).collect();
        writeln!(out, "{}", agent_host_core::format::to_pretty(&all)?)?;
        return Ok(());
    }
    if page.total == 0 {
        writeln!(out, "no sessions in {}", agent_host_store::redact(spec))?;
        return Ok(());
    }
    let pages = page.total.div_ceil(per_page);
    if page.sessions.is_empty() {
        writeln!(
            out,
            "page {} is past the end: {} sessions make {pages} pages of {per_page}",
            args.page, page.total
        )?;
        return Ok(());
    }
    let names: Vec<String> = page.sessions.iter().map(shown_name).collect();
    let agents: Vec<String> = page
        .sessions
        .iter()
        .map(|m| shown(&m.agent).into_owned())
        .collect();
    let name_width = names
        .iter()
        .map(|n| n.chars().count())
        .max()
        .unwrap_or(0)
        .max("KEY|ID".len());
    let agent_width = agents
        .iter()
        .map(|a| a.chars().count())
        .max()
        .unwrap_or(0)
        .max("AGENT".len());
    writeln!(
        out,
        "{:<19}  {:>8}  {:<agent_width$}  {:<name_width$}  TITLE",
        "UPDATED (UTC)", "MESSAGES", "AGENT", "KEY|ID"
    )?;
    for ((meta, name), agent) in page.sessions.iter().zip(&names).zip(&agents) {
        let title = meta.title.as_deref().map(shown).unwrap_or_default();
        let line = format!(
            "{}  {:>8}  {agent:<agent_width$}  {name:<name_width$}  {title}",
            time(meta.updated),
            meta.message_count,
        );
        writeln!(out, "{}", line.trim_end())?;
    }
    let first = offset + 1;
    let last = offset + page.sessions.len();
    let mut footer = format!(
        "sessions {first} to {last} of {} (page {} of {pages})",
        page.total, args.page
    );
    if u64::try_from(pages)? > args.page {
        footer.push_str(&format!("; --page {} for more", args.page + 1));
    }
    writeln!(out, "{footer}")?;
    Ok(())
}

fn show(args: &ShowArgs, spec: &str, out: &mut dyn Write) -> Result<()> {
    let now = Utc::now();
    let since = args
        .since
        .as_deref()
        .map(|s| query::parse_time(s, now))
        .transpose()
        .map_err(|e| UsageError(format!("--since: {e}")))?;
    let query = Query {
        since,
        contains: args.contains.clone(),
        roles: args.role.iter().map(|&r| r.into()).collect(),
        include_forwarded: args.include_forwarded,
        ..Query::default()
    };
    let store = open_existing(spec)?;
    let meta = args.name.find(store.as_deref(), spec)?;
    let history = load(store.as_deref().context("the store vanished")?, &meta)?;
    // Core's query decides what matches; the indices are kept for display.
    let mut found: Vec<(usize, &Message)> = history
        .messages
        .iter()
        .enumerate()
        .filter(|(_, m)| query.matches(m))
        .collect();
    if let Some(limit) = args.limit
        && found.len() > limit
    {
        found.drain(..found.len() - limit);
    }
    if args.json {
        let records = found
            .iter()
            .map(|(_, m)| native_record(m))
            .collect::<Result<Vec<Value>>>()?;
        writeln!(out, "{}", agent_host_core::format::to_pretty(&records)?)?;
        return Ok(());
    }
    writeln!(
        out,
        "session {}: {} messages, {} shown",
        describe(&history.meta),
        history.messages.len(),
        found.len()
    )?;
    if let Some(title) = &history.meta.title {
        writeln!(out, "title: {}", shown(title))?;
    }
    writeln!(out)?;
    let rows: Vec<(Option<usize>, &Message)> =
        found.into_iter().map(|(i, m)| (Some(i), m)).collect();
    message_table(out, &rows)
}

/// The message table of `sessions show`: a line a message, led by its
/// position in the log when it is known.
pub(super) fn message_table(out: &mut dyn Write, rows: &[(Option<usize>, &Message)]) -> Result<()> {
    let numbered = rows.iter().any(|(i, _)| i.is_some());
    let number = |i: Option<usize>| match (numbered, i) {
        (false, _) => String::new(),
        (true, Some(i)) => format!("{i:>5}  "),
        (true, None) => format!("{:>5}  ", "-"),
    };
    let counter = HeuristicCounter::default();
    let head = if numbered {
        format!("{:>5}  ", "#")
    } else {
        String::new()
    };
    writeln!(
        out,
        "{head}{:<19}  {:<10} {:>7}  text",
        "time (UTC)", "role", "tokens"
    )?;
    for &(i, m) in rows {
        let at = m.timestamp.map(time).unwrap_or_else(|| "-".to_owned());
        writeln!(
            out,
            "{}{at:<19}  {:<10} {:>7}  {}",
            number(i),
            m.role.as_str(),
            m.tokens(&counter),
            crate::preview(m)
        )?;
    }
    Ok(())
}

fn export(args: &ExportArgs, spec: &str, out: &mut dyn Write) -> Result<()> {
    let store = open_existing(spec)?;
    let meta = args.name.find(store.as_deref(), spec)?;
    let history = load(store.as_deref().context("the store vanished")?, &meta)?;
    let title = history
        .meta
        .title
        .clone()
        .or_else(|| history.meta.key.clone())
        .unwrap_or_else(|| history.meta.id.to_string());
    let markdown = export::to_markdown(&history.messages, Some(&title));
    match &args.output {
        Some(path) => {
            std::fs::write(path, markdown)
                .with_context(|| format!("cannot write {}", path.display()))?;
            eprintln!(
                "exported {} messages of session {} to {}",
                history.messages.len(),
                describe(&history.meta),
                path.display()
            );
        }
        None => out.write_all(markdown.as_bytes())?,
    }
    Ok(())
}

fn rename(args: &RenameArgs, spec: &str, out: &mut dyn Write) -> Result<()> {
    let store = open_existing(spec)?;
    let meta = args.name.find(store.as_deref(), spec)?;
    let store = store.context("the store vanished")?;
    let title = Some(args.title.as_str()).filter(|t| !t.is_empty());
    let meta = store
        .rename(&meta.reference(), title)
        .with_context(|| format!("cannot rename session {}", describe(&meta)))?;
    match &meta.title {
        Some(title) => writeln!(out, "session {}: title {}", describe(&meta), shown(title))?,
        None => writeln!(out, "session {}: title removed", describe(&meta))?,
    }
    Ok(())
}

fn delete(args: &ConfirmArgs, spec: &str, out: &mut dyn Write) -> Result<()> {
    let store = open_existing(spec)?;
    let meta = args.name.find(store.as_deref(), spec)?;
    let store = store.context("the store vanished")?;
    let what = format!(
        "delete session {} and its {} messages",
        describe(&meta),
        meta.message_count
    );
    if !confirm(&what, args.yes, "delete")? {
        writeln!(out, "kept session {}", describe(&meta))?;
        return Ok(());
    }
    let gone = store
        .delete(&meta.reference())
        .with_context(|| format!("cannot delete session {}", describe(&meta)))?;
    writeln!(
        out,
        "deleted session {} ({} messages)",
        describe(&gone),
        gone.message_count
    )?;
    Ok(())
}

fn clear(args: &ConfirmArgs, spec: &str, out: &mut dyn Write) -> Result<()> {
    let store = open_existing(spec)?;
    let meta = args.name.find(store.as_deref(), spec)?;
    let store = store.context("the store vanished")?;
    let what = format!(
        "remove the {} messages of session {}",
        meta.message_count,
        describe(&meta)
    );
    if !confirm(&what, args.yes, "clear")? {
        writeln!(out, "kept the messages of session {}", describe(&meta))?;
        return Ok(());
    }
    let cleared = store
        .clear(&meta.reference())
        .with_context(|| format!("cannot clear session {}", describe(&meta)))?;
    writeln!(
        out,
        "cleared session {} ({} messages removed)",
        describe(&cleared),
        meta.message_count
    )?;
    Ok(())
}

/// Asks on the terminal whether to go ahead, unless `yes`; refuses (a usage
/// error) when standard input is not a terminal to ask on.
fn confirm(what: &str, yes: bool, command: &str) -> Result<bool> {
    if yes {
        return Ok(true);
    }
    if !io::stdin().is_terminal() {
        return Err(UsageError(format!(
            "refusing to {what} without --yes: standard input is not a terminal to ask on; \
             run `agent-host sessions {command} ... --yes` to go ahead"
        ))
        .into());
    }
    eprint!("{what}? [y/N] ");
    io::stderr().flush()?;
    let mut answer = String::new();
    io::stdin()
        .lock()
        .read_line(&mut answer)
        .context("cannot read the answer")?;
    Ok(matches!(answer.trim().to_lowercase().as_str(), "y" | "yes"))
}

fn cleanup(args: &CleanupArgs, spec: &str, out: &mut dyn Write) -> Result<()> {
    let age = query::parse_duration(&args.older_than)
        .map_err(|e| UsageError(format!("--older-than: {e}")))?;
    let idle = age
        .to_std()
        .map_err(|_| UsageError(format!("--older-than: {} is out of range", args.older_than)))?;
    let now = Utc::now();
    let chosen: Vec<SessionMeta> = match open_existing(spec)? {
        None => Vec::new(),
        Some(store) if args.dry_run => {
            let cutoff = now - age;
            all_sessions(store.as_ref())?
                .into_iter()
                .filter(|m| m.updated < cutoff)
                .collect()
        }
        Some(store) => store.cleanup(idle, now).with_context(|| {
            format!(
                "cannot clean up the store {}",
                agent_host_store::redact(spec)
            )
        })?,
    };
    if args.json {
        let all: Vec<Value> = chosen.iter().map(session_json).collect();
        writeln!(out, "{}", agent_host_core::format::to_pretty(&all)?)?;
        return Ok(());
    }
    let verb = if args.dry_run {
        "would delete"
    } else {
        "deleted"
    };
    writeln!(
        out,
        "{verb} {} sessions idle for more than {}",
        chosen.len(),
        args.older_than.trim()
    )?;
    for meta in &chosen {
        writeln!(
            out,
            "  {} (updated {} UTC, {} messages)",
            describe(meta),
            time(meta.updated),
            meta.message_count
        )?;
    }
    Ok(())
}

/// Every session of the store, page by page.
fn all_sessions(store: &dyn SessionStore) -> Result<Vec<SessionMeta>> {
    let mut all = Vec::new();
    loop {
        let page = store.list(&PageRequest {
            after: None,
            offset: all.len(),
            limit: MAX_PAGE_LIMIT,
            agent: None,
        })?;
        let done = page.sessions.is_empty() || all.len() + page.sessions.len() >= page.total;
        all.extend(page.sessions);
        if done {
            return Ok(all);
        }
    }
}

/// A session for messages: its key and agent, or its id.
pub(crate) fn describe(meta: &SessionMeta) -> String {
    match &meta.key {
        Some(key) => format!("{key:?} of agent {:?}", meta.agent),
        None => meta.id.to_string(),
    }
}

/// The name a user types for a session in the listing: its key, or its id.
pub(crate) fn shown_name(meta: &SessionMeta) -> String {
    match &meta.key {
        Some(key) => shown(key).into_owned(),
        None => meta.id.to_string(),
    }
}

/// `text` as it is when it prints safely on one line, quoted and escaped
/// otherwise (hostile keys hold newlines and escape sequences).
fn shown(text: &str) -> Cow<'_, str> {
    let plain = !text.is_empty()
        && !text.starts_with('"')
        && text
            .chars()
            .all(|c| c == ' ' || !(c.is_control() || c.is_whitespace()));
    if plain {
        Cow::Borrowed(text)
    } else {
        Cow::Owned(format!("{text:?}"))
    }
}

/// A time for a table: UTC, to the second.
fn time(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S").to_string()
}

/// A session's metadata as JSON, for `--json`.
pub(crate) fn session_json(meta: &SessionMeta) -> Value {
    serde_json::to_value(agent_host_api::SessionView::from(meta))
        .expect("a session view is plain data")
}

/// A message as its native log record.
fn native_record(m: &Message) -> Result<Value> {
    let line = format::write(Format::Jsonl, std::slice::from_ref(m))
        .context("cannot write a message as a native record")?;
    Ok(serde_json::from_str(line.trim_end())?)
}

#[cfg(test)]
mod tests {
    use super::import::batches;
    use super::*;

    fn roles(batches: &[&[Message]]) -> Vec<String> {
        batches
            .iter()
            .map(|b| b.iter().map(|m| &m.role.as_str()[..1]).collect())
            .collect()
    }

    #[test]
    fn batches_hold_whole_turns() {
        let u = || Message::user("u");
        let a = || Message::assistant("a");
        let history = [u(), a(), a(), u(), a(), u(), a(), a(), a(), a(), u()];
        assert_eq!(roles(&batches(&history, 3)), ["uaa", "ua", "uaaaa", "u"]);
        assert_eq!(roles(&batches(&history, 6)), ["uaaua", "uaaaau"]);
        assert_eq!(roles(&batches(&history, 100)), ["uaauauaaaau"]);
        assert!(batches(&[], 3).is_empty());
    }

    #[test]
    fn hostile_names_print_on_one_line() {
        assert_eq!(shown("telegram:1"), "telegram:1");
        assert_eq!(shown("a b"), "a b");
        assert_eq!(shown("a\nb"), "\"a\\nb\"");
        assert_eq!(shown("\u{1b}[31m"), "\"\\u{1b}[31m\"");
        assert_eq!(shown(""), "\"\"");
    }
}
