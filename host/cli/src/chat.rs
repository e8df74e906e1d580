//! `agent-host chat`: an interactive conversation with the configured model,
//! stored as a session, with the seeds' slash commands.
//!
//! On a terminal the prompt has line editing and a history (rustyline, kept
//! in the user's state folder); otherwise commands and messages are read line
//! by line from standard input, so a script can drive the REPL. Every line
//! that does not start with `/` is a turn ([`Engine::turn`]); `/help` lists
//! the commands.

use std::future::Future;
use std::io::{self, BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;

use agent_host_core::export;
use agent_host_engine::{Engine, EngineError, EngineEvent, Observer, TurnOutcome, TurnRequest};
use agent_host_provider::StreamEvent;
use agent_host_store::{NewSession, PageRequest, SessionMeta};
use anyhow::{Context, Result, anyhow, bail};
use clap::Args;

use crate::commands::sessions::{describe, shown_name};
use crate::term::{self, paint};

/// The options of `agent-host chat`.
#[derive(Debug, Args)]
#[command(after_help = "\
In the REPL, type a message, or one of:
  /sessions  /session ID  /new  /delete [ID]  /rename TITLE  /export FILE.md
  /history [N]  /context  /summarize  /tokens  /help  /quit

Examples:
  agent-host chat --session work            # resume (or start) the session with key `work`
  agent-host chat --new                     # a new session
  printf 'hello\\n/context\\n' | agent-host chat --session demo   # scripted")]
pub struct ChatArgs {
    /// The session to resume (its key within --agent, created when new, or its id). Default:
    /// the agent's most recently updated session, or a new one.
    #[arg(long, value_name = "KEY|ID", conflicts_with = "new")]
    pub session: Option<String>,
    /// Start a new session.
    #[arg(long)]
    pub new: bool,
    /// The agent whose sessions these are.
    #[arg(long, value_name = "AGENT", default_value = agent_host_store::DEFAULT_AGENT)]
    pub agent: String,
    /// Heartbeat turns: each message goes to the model alone; no history is loaded or saved.
    #[arg(long, conflicts_with_all = ["session", "new"])]
    pub no_history: bool,
    /// Show the tokens of every answer (toggle with /tokens).
    #[arg(long)]
    pub tokens: bool,
}

/// Where lines come from: an editor on a terminal, plain lines otherwise.
enum Input {
    Editor {
        editor: Box<rustyline::DefaultEditor>,
        history: Option<PathBuf>,
    },
    Lines(Box<dyn BufRead>),
}

impl Input {
    /// `remember`: keep the typed lines in the history file (not for
    /// heartbeat turns, whose point is to leave nothing behind).
    fn open(remember: bool) -> Input {
        if io::stdin().is_terminal()
            && let Ok(mut editor) = rustyline::DefaultEditor::new()
        {
            let history = history_file().filter(|_| remember);
            if let Some(path) = &history {
                // No history yet is the normal first run.
                let _ = editor.load_history(path);
            }
            return Input::Editor {
                editor: Box::new(editor),
                history,
            };
        }
        Input::Lines(Box::new(io::BufReader::new(io::stdin())))
    }

    fn interactive(&self) -> bool {
        matches!(self, Input::Editor { .. })
    }

    /// The next line, or `None` at the end of input (Ctrl-D).
    fn read(&mut self, prompt: &str) -> Result<Option<String>> {
        match self {
            Input::Editor { editor, .. } => loop {
                match editor.readline(prompt) {
                    Ok(line) => {
                        if !line.trim().is_empty() {
                            let _ = editor.add_history_entry(line.as_str());
                        }
                        return Ok(Some(line));
                    }
                    // Ctrl-C clears the line, as in a shell.
                    Err(rustyline::error::ReadlineError::Interrupted) => continue,
                    Err(rustyline::error::ReadlineError::Eof) => return Ok(None),
                    Err(e) => return Err(anyhow!("cannot read the terminal: {e}")),
                }
            },
            Input::Lines(reader) => {
                let mut line = String::new();
                if reader.read_line(&mut line)? == 0 {
                    return Ok(None);
                }
                Ok(Some(line.trim_end_matches(['\n', '\r']).to_owned()))
            }
        }
    }

    fn save(&mut self) {
        if let Input::Editor {
            editor,
            history: Some(path),
        } = self
        {
            if let Some(dir) = path.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            if let Err(e) = editor.save_history(path) {
                tracing::debug!("cannot save the chat history to {}: {e}", path.display());
            }
        }
    }
}

/// `$XDG_STATE_HOME/agent-host/chat-history`, else under `~/.local/state`.
fn history_file() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_STATE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|d| !d.is_empty())
                .map(|h| PathBuf::from(h).join(".local").join("state"))
        })?;
    Some(base.join("agent-host").join("chat-history"))
}

/// A slash command.
#[derive(Debug, PartialEq, Eq)]
enum Command {
    Sessions,
    Session(String),
    New,
    Delete(Option<String>),
    Rename(String),
    Export(PathBuf),
    History(usize),
    Context,
    Summarize,
    Tokens,
    Help,
    Quit,
}

const HELP: &str = "\
/sessions        list the stored sessions (the current one is marked *)
/session ID      switch to a session (its key or id; a new key starts a session)
/new             start a new session
/delete [ID]     delete a session (default: this one, then start a new one)
/rename TITLE    set this session's title
/export FILE.md  write this session as Markdown
/history [N]     show the last N messages (default 10)
/context         context use and the distance to each summarization trigger
/summarize       summarize now, whatever the triggers say
/tokens          show or hide the tokens of each answer
/help            this list
/quit            leave (Ctrl-D too)";

/// Parses a line that starts with `/`.
fn parse_command(line: &str) -> Result<Command, String> {
    let line = line.trim();
    let (name, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    let rest = rest.trim();
    let need = |what: &str| -> Result<String, String> {
        if rest.is_empty() {
            Err(format!("{name} needs {what}; see /help"))
        } else {
            Ok(rest.to_owned())
        }
    };
    let none = |c: Command| -> Result<Command, String> {
        if rest.is_empty() {
            Ok(c)
        } else {
            Err(format!("{name} takes no argument; see /help"))
        }
    };
    match name {
        "/sessions" => none(Command::Sessions),
        "/session" => need("a session key or id").map(Command::Session),
        "/new" => none(Command::New),
        "/delete" => Ok(Command::Delete((!rest.is_empty()).then(|| rest.to_owned()))),
        "/rename" => need("a title").map(Command::Rename),
        "/export" => need("a file name").map(|f| Command::Export(PathBuf::from(f))),
        "/history" => {
            if rest.is_empty() {
                Ok(Command::History(10))
            } else {
                rest.parse::<usize>()
                    .ok()
                    .filter(|&n| n > 0)
                    .map(Command::History)
                    .ok_or_else(|| format!("/history takes a count of messages, not {rest:?}"))
            }
        }
        "/context" => none(Command::Context),
        "/summarize" => none(Command::Summarize),
        "/tokens" => none(Command::Tokens),
        "/help" | "/?" => none(Command::Help),
        "/quit" | "/exit" | "/q" => none(Command::Quit),
        other => Err(format!("unknown command {other}; /help lists them")),
    }
}

/// The REPL's state.
struct Chat<'a> {
    engine: &'a Engine,
    agent: String,
    session: Option<SessionMeta>,
    show_tokens: bool,
    color: bool,
}

/// Runs `agent-host chat`.
pub fn run(args: &ChatArgs, engine: &Engine, out: &mut dyn Write) -> Result<()> {
    let mut input = Input::open(!args.no_history);
    let color = input.interactive() && term::stdout();
    let mut chat = Chat {
        engine,
        agent: args.agent.clone(),
        session: None,
        show_tokens: args.tokens,
        color,
    };
    if !args.no_history {
        chat.session = Some(chat.start(args)?);
    }
    if engine.provider().is_none() {
        writeln!(
            out,
            "{}",
            paint(
                term::WARN,
                "offline: no provider is configured, so each message shows the context that would be sent (configure [provider] in agent-host.toml, or --provider and --model)",
                color
            )
        )?;
    }
    if input.interactive() {
        let name = chat
            .session
            .as_ref()
            .map_or_else(|| "no history (heartbeat turns)".to_owned(), describe);
        writeln!(out, "session {name}; /help lists the commands")?;
    }
    out.flush()?;
    let prompt = if input.interactive() {
        paint(term::BOLD, "you> ", color)
    } else {
        String::new()
    };
    // A script's failed line makes the whole run fail, after the rest ran.
    let mut failures: Vec<anyhow::Error> = Vec::new();
    while let Some(line) = input.read(&prompt)? {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let result = if line.starts_with('/') {
            match parse_command(line) {
                Ok(Command::Quit) => break,
                Ok(command) => chat.command(command, out),
                Err(message) => Err(crate::commands::run::UsageError(message).into()),
            }
        } else {
            chat.turn(line, out)
        };
        if let Err(e) = result {
            // A failed command or turn does not end the conversation.
            if input.interactive() {
                writeln!(
                    out,
                    "{}",
                    paint(term::ERROR, &format!("error: {e:#}"), color)
                )?;
            } else {
                out.flush()?;
                eprintln!("error: {line:?}: {e:#}");
                failures.push(e);
            }
        }
        out.flush()?;
    }
    input.save();
    match failures.pop() {
        None => Ok(()),
        Some(last) => {
            let n = failures.len() + 1;
            Err(last.context(format!("{n} line(s) of the chat script failed; the last")))
        }
    }
}

impl Chat<'_> {
    /// The session the REPL starts in.
    fn start(&self, args: &ChatArgs) -> Result<SessionMeta> {
        let store = self.engine.store();
        if args.new {
            return Ok(store.create(&NewSession::new(self.agent.clone()))?);
        }
        if let Some(name) = &args.session {
            return self.find_or_open(name);
        }
        let page = store.list(&PageRequest {
            after: None,
            offset: 0,
            limit: 1,
            agent: Some(self.agent.clone()),
        })?;
        match page.sessions.into_iter().next() {
            Some(latest) => Ok(latest),
            None => Ok(store.create(&NewSession::new(self.agent.clone()))?),
        }
    }

    /// The session with this id (which must exist), else the agent's
    /// session with this key (created when new).
    fn find_or_open(&self, name: &str) -> Result<SessionMeta> {
        let engine = self.engine.clone();
        let (name, agent) = (name.to_owned(), self.agent.clone());
        Ok(crate::commands::block_on(async move {
            let session = engine.reference(&name, &agent).await?;
            engine.open(&session).await
        })?)
    }

    fn current(&self) -> Result<&SessionMeta> {
        self.session
            .as_ref()
            .context("there is no session: this chat runs heartbeat turns (--no-history)")
    }

    fn turn(&mut self, text: &str, out: &mut dyn Write) -> Result<()> {
        let (outcome, streamed) = match &self.session {
            Some(meta) => {
                let session = meta.reference();
                let request = TurnRequest::new(session, text).with_channel("cli");
                let engine = self.engine.clone();
                stream_turn(out, self.color, false, move |observer| async move {
                    engine.turn(request, observer).await
                })?
            }
            None => {
                let engine = self.engine.clone();
                let text = text.to_owned();
                stream_turn(out, self.color, false, move |observer| async move {
                    engine.heartbeat(&text, Some("cli"), observer).await
                })?
            }
        };
        finish_turn(&outcome, streamed, self.show_tokens, self.color, out)?;
        if let Some(meta) = &outcome.session
            && self.session.is_some()
        {
            self.session = Some(meta.clone());
        }
        Ok(())
    }

    fn command(&mut self, command: Command, out: &mut dyn Write) -> Result<()> {
        let store = self.engine.store();
        match command {
            Command::Help => writeln!(out, "{HELP}")?,
            Command::Quit => {}
            Command::Tokens => {
                self.show_tokens = !self.show_tokens;
                let state = if self.show_tokens { "on" } else { "off" };
                writeln!(out, "token display {state}")?;
            }
            Command::Sessions => {
                let page = store.list(&PageRequest {
                    after: None,
                    offset: 0,
                    limit: 20,
                    agent: Some(self.agent.clone()),
                })?;
                if page.sessions.is_empty() {
                    writeln!(out, "no sessions")?;
                }
                let current = self.session.as_ref().map(|s| s.id);
                for s in &page.sessions {
                    let mark = if Some(s.id) == current { '*' } else { ' ' };
                    writeln!(
                        out,
                        "{mark} {:<36}  {:>5} messages  {}  {}",
                        shown_name(s),
                        s.message_count,
                        s.updated.format("%Y-%m-%d %H:%M"),
                        s.title.as_deref().unwrap_or("")
                    )?;
                }
                if page.total > page.sessions.len() {
                    writeln!(
                        out,
                        "({} more: `agent-host sessions list --page 2`)",
                        page.total - page.sessions.len()
                    )?;
                }
            }
            Command::Session(name) => {
                let meta = self.find_or_open(&name)?;
                writeln!(
                    out,
                    "now in session {} ({} messages)",
                    describe(&meta),
                    meta.message_count
                )?;
                self.session = Some(meta);
            }
            Command::New => {
                let meta = store.create(&NewSession::new(self.agent.clone()))?;
                writeln!(out, "new session {}", meta.id)?;
                self.session = Some(meta);
            }
            Command::Delete(name) => {
                let target = match &name {
                    Some(name) => {
                        let meta = crate::commands::sessions::SessionName {
                            session: name.clone(),
                            agent: self.agent.clone(),
                        }
                        .find(Some(store.as_ref()), "this store")?;
                        meta.reference()
                    }
                    None => self.current()?.reference(),
                };
                let deleted = store.delete(&target)?;
                writeln!(
                    out,
                    "deleted session {} ({} messages)",
                    describe(&deleted),
                    deleted.message_count
                )?;
                if self.session.as_ref().is_some_and(|s| s.id == deleted.id) {
                    let meta = store.create(&NewSession::new(self.agent.clone()))?;
                    writeln!(out, "new session {}", meta.id)?;
                    self.session = Some(meta);
                }
            }
            Command::Rename(title) => {
                let meta = store.rename(&self.current()?.reference(), Some(&title))?;
                writeln!(out, "renamed to {title:?}")?;
                self.session = Some(meta);
            }
            Command::Export(path) => {
                let history = store.load(&self.current()?.reference())?;
                let md = export::to_markdown(&history.messages, history.meta.title.as_deref());
                std::fs::write(&path, md)
                    .with_context(|| format!("cannot write {}", path.display()))?;
                writeln!(
                    out,
                    "wrote {} messages to {}",
                    history.messages.len(),
                    path.display()
                )?;
            }
            Command::History(n) => {
                let history = store.load(&self.current()?.reference())?;
                let from = history.messages.len().saturating_sub(n);
                if history.messages.is_empty() {
                    writeln!(out, "no messages yet")?;
                }
                for (i, m) in history.messages.iter().enumerate().skip(from) {
                    let flag = if m.summary { " (summary)" } else { "" };
                    writeln!(
                        out,
                        "{i:>5}  {:<9}{flag} {}",
                        m.role.as_str(),
                        crate::preview(m)
                    )?;
                }
            }
            Command::Context => {
                let session = self.current()?.reference();
                let (meta, compaction) = crate::commands::block_on(self.engine.context(&session))?;
                write!(
                    out,
                    "{}",
                    crate::commands::context::text(&meta, &compaction)
                )?;
            }
            Command::Summarize => {
                let session = self.current()?.reference();
                let engine = self.engine.clone();
                let mut spinner = SummarySpinner::new(true);
                let prepared = crate::commands::with_events(
                    |observer| {
                        let session = session.clone();
                        async move { engine.summarize(&session, observer).await }
                    },
                    &mut |event| spinner.follow(&event),
                )?;
                match &prepared.compaction.report.summary {
                    agent_host_core::pipeline::SummaryOutcome::Summarized {
                        covered,
                        parts,
                        ..
                    } => {
                        writeln!(
                            out,
                            "summarized {covered} messages into a checkpoint ({parts} part(s))"
                        )?;
                    }
                    agent_host_core::pipeline::SummaryOutcome::Failed { error, .. } => {
                        bail!("{error}; the full history is kept")
                    }
                    agent_host_core::pipeline::SummaryOutcome::NotDone(why) => {
                        writeln!(out, "nothing to summarize: {}", no_plan(why))?;
                    }
                    agent_host_core::pipeline::SummaryOutcome::Skipped => {
                        writeln!(out, "summarization is off in the configuration")?;
                    }
                }
                self.session = store.get(&session)?;
            }
        }
        Ok(())
    }
}

/// Runs the turn `start` makes, printing the answer to `out` as it streams
/// in (and, unless `quiet`, a spinner on standard error while a summary is
/// written); says whether anything streamed.
pub(crate) fn stream_turn<F>(
    out: &mut dyn Write,
    color: bool,
    quiet: bool,
    start: impl FnOnce(Arc<dyn Observer>) -> F,
) -> Result<(TurnOutcome, bool)>
where
    F: Future<Output = Result<TurnOutcome, EngineError>>,
{
    let mut streamed = false;
    let mut in_reasoning = false;
    // The model's text reaches a terminal escaped (a reply can echo a
    // history's escape sequences); piped, it stays the model's own bytes.
    let tty = io::stdout().is_terminal();
    let mut failed: Option<io::Error> = None;
    let mut spinner = SummarySpinner::new(!quiet);
    let outcome = {
        let mut on_event = |event: EngineEvent| {
            let written = match &event {
                EngineEvent::Model(StreamEvent::Text(text)) => {
                    let lead = if in_reasoning { "\n" } else { "" };
                    in_reasoning = false;
                    streamed = true;
                    write!(out, "{lead}{}", term::shown(text, tty)).and_then(|()| out.flush())
                }
                EngineEvent::Model(StreamEvent::Reasoning(text)) => {
                    in_reasoning = true;
                    streamed = true;
                    write!(out, "{}", paint(term::DIM, &term::shown(text, tty), color))
                        .and_then(|()| out.flush())
                }
                EngineEvent::Model(StreamEvent::Retry {
                    attempt,
                    delay,
                    reason,
                }) => {
                    eprintln!(
                        "{}",
                        paint(
                            term::WARN,
                            &format!(
                                "retrying (attempt {attempt}) in {:.1} s: {reason}",
                                delay.as_secs_f64()
                            ),
                            term::stderr()
                        )
                    );
                    Ok(())
                }
                other => {
                    spinner.follow(other);
                    Ok(())
                }
            };
            if let Err(e) = written
                && failed.is_none()
            {
                failed = Some(e);
            }
        };
        crate::commands::with_events(start, &mut on_event)
    };
    spinner.stop();
    if let Some(e) = failed {
        return Err(e.into());
    }
    let outcome = outcome?;
    if streamed {
        writeln!(out)?;
    }
    Ok((outcome, streamed))
}

/// A spinner on standard error (a terminal only) while the model writes a
/// summary: a summary of a long span takes a while.
struct SummarySpinner {
    enabled: bool,
    bar: Option<indicatif::ProgressBar>,
}

impl SummarySpinner {
    fn new(enabled: bool) -> Self {
        SummarySpinner {
            enabled: enabled && io::stderr().is_terminal(),
            bar: None,
        }
    }

    /// Starts or stops with the summary events; ignores the others.
    fn follow(&mut self, event: &EngineEvent) {
        match event {
            EngineEvent::SummaryStarted {
                messages,
                partials,
                model,
            } => self.start(*messages, *partials, model),
            EngineEvent::SummaryFinished { .. } => self.stop(),
            _ => {}
        }
    }

    fn start(&mut self, messages: usize, partials: usize, model: &str) {
        if !self.enabled {
            return;
        }
        let bar = self.bar.get_or_insert_with(|| {
            let bar = indicatif::ProgressBar::new_spinner();
            bar.set_style(
                indicatif::ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
            );
            bar.enable_steady_tick(std::time::Duration::from_millis(120));
            bar
        });
        let what = if messages == 0 {
            format!("merging {partials} partial summaries")
        } else {
            format!("summarizing {messages} messages")
        };
        bar.set_message(format!("{what} with {model}"));
    }

    fn stop(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

/// What follows the streamed text: an answer that did not stream, tool
/// calls, the compaction note, the tokens; or the offline view.
pub(crate) fn finish_turn(
    outcome: &TurnOutcome,
    streamed: bool,
    show_tokens: bool,
    color: bool,
    out: &mut dyn Write,
) -> Result<()> {
    if let Some(summary) = compaction_note(outcome) {
        writeln!(out, "{}", paint(term::DIM, &summary, color))?;
    }
    let Some(reply) = &outcome.reply else {
        writeln!(
            out,
            "{}",
            paint(
                term::DIM,
                &format!(
                    "(offline) the context that would be sent: {} messages, {} tokens",
                    outcome.prepared.view.len(),
                    outcome.prepared.compaction.report.usage.view.total()
                ),
                color
            )
        )?;
        for m in &outcome.prepared.view {
            writeln!(out, "  {:<9} {}", m.role.as_str(), crate::preview(m))?;
        }
        return Ok(());
    };
    if !streamed && !reply.text().is_empty() {
        let text = reply.text();
        writeln!(out, "{}", term::shown(&text, io::stdout().is_terminal()))?;
    }
    for call in &reply.tool_calls {
        writeln!(
            out,
            "{}",
            paint(
                term::DIM,
                &format!(
                    "-> {}({}) [tool call stored; agent-host does not run tools]",
                    term::safe(&call.name),
                    term::safe(&call.arguments)
                ),
                color
            )
        )?;
    }
    if show_tokens && let Some(usage) = &reply.usage {
        writeln!(
            out,
            "{}",
            paint(
                term::DIM,
                &format!(
                    "[{} in, {} out{}]",
                    usage.input_tokens,
                    usage.output_tokens,
                    reply
                        .model
                        .as_deref()
                        .map(|m| format!(", {m}"))
                        .unwrap_or_default()
                ),
                color
            )
        )?;
    }
    Ok(())
}

/// Why `/summarize` made no checkpoint, for the user.
fn no_plan(why: &agent_host_core::compact::NoPlan) -> String {
    use agent_host_core::compact::NoPlan;
    match why {
        NoPlan::NotTriggered => "no trigger fired".to_owned(),
        NoPlan::TooFewMessages { count, .. } => format!(
            "only {count} message(s) since the last summary, fewer than context.min_messages_to_summarize"
        ),
        NoPlan::NothingBeforeKeptTurns { .. } => {
            "every message is in the last turns, which stay intact (context.keep_last_turns)"
                .to_owned()
        }
        NoPlan::NothingSummarizable { .. } => {
            "every message before the kept turns is too large to summarize".to_owned()
        }
        NoPlan::UnusableIds { id } => {
            format!("messages have empty or repeated ids (first: {id:?})")
        }
    }
}

/// One line about a checkpoint made this turn, or an aggressive retry.
fn compaction_note(outcome: &TurnOutcome) -> Option<String> {
    use agent_host_core::pipeline::SummaryOutcome;
    let mut notes = Vec::new();
    if let Some(error) = &outcome.aggressive_retry {
        notes.push(format!(
            "[the model refused the context as too long ({error}); pruned aggressively and retried]"
        ));
    }
    // The first try's preparation counts too: its checkpoint was stored.
    let attempts = outcome.first_attempt.iter().chain([&outcome.prepared]);
    for prepared in attempts {
        match &prepared.compaction.report.summary {
            SummaryOutcome::Summarized { covered, parts, .. } => notes.push(format!(
                "[context compacted: {covered} messages summarized into a checkpoint, {parts} part(s)]"
            )),
            SummaryOutcome::Failed { error, .. } => {
                notes.push(format!("[summary failed, full history kept: {error}]"))
            }
            _ => {}
        }
    }
    (!notes.is_empty()).then(|| notes.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_parse_with_their_arguments() {
        assert_eq!(parse_command("/sessions"), Ok(Command::Sessions));
        assert_eq!(
            parse_command("/session  work "),
            Ok(Command::Session("work".into()))
        );
        assert_eq!(parse_command("/delete"), Ok(Command::Delete(None)));
        assert_eq!(
            parse_command("/rename My big task"),
            Ok(Command::Rename("My big task".into()))
        );
        assert_eq!(parse_command("/history"), Ok(Command::History(10)));
        assert_eq!(parse_command("/history 3"), Ok(Command::History(3)));
        assert_eq!(parse_command("/exit"), Ok(Command::Quit));
    }

    #[test]
    fn bad_commands_say_what_is_wrong() {
        assert!(
            parse_command("/session")
                .unwrap_err()
                .contains("needs a session key")
        );
        assert!(parse_command("/history x").unwrap_err().contains("\"x\""));
        assert!(parse_command("/history 0").is_err());
        assert!(
            parse_command("/tokens on")
                .unwrap_err()
                .contains("takes no argument")
        );
        assert!(
            parse_command("/frobnicate")
                .unwrap_err()
                .contains("unknown command /frobnicate")
        );
    }
}
