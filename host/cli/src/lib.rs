//! The `agent-host` command line: clap arguments, the commands, rendering,
//! the REPL, colours, spinners and exit codes.
//!
//! Everything else lives in the library crates (`agent-host-engine`,
//! `-store`, `-runtime`, `-provider`, `-config`, `-api`, `-tools`); this
//! crate parses arguments, calls them and renders their answers. It is the
//! only crate that may depend on clap, rustyline or indicatif.

mod chat;
mod commands;
pub mod term;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use agent_host_core::ErrorKind;
use agent_host_core::format::{self, Format, FormatError};
use agent_host_core::pairing::ToolPairing;
use agent_host_core::{HeuristicCounter, Message};
use anyhow::Context;
use clap::{ArgMatches, CommandFactory, Parser, Subcommand};

use crate::chat::ChatArgs;
use agent_host_config::{Overrides, Settings};
use agent_host_engine::Engine;
use agent_host_runtime::ProcessorOptions;

use crate::commands::run::{ProcessorFailed, RunArgs, UsageError};
use agent_host_engine::transcript::{self, Loaded};

/// Exit code for input that could not be read as a history (sysexits' EX_DATAERR).
pub const EXIT_BAD_INPUT: u8 = 65;
/// Exit code for a processor that failed under the `fail` policy, or could not be loaded.
pub const EXIT_PROCESSOR_FAILED: u8 = 3;
/// Exit code for a model provider that failed or could not be reached (sysexits' EX_UNAVAILABLE).
pub const EXIT_PROVIDER_FAILED: u8 = 69;
/// Exit code for a configuration file or variable that is wrong (sysexits' EX_CONFIG).
pub const EXIT_CONFIG: u8 = 78;
/// Exit code for a replay whose answers differ from the recorded run's.
pub const EXIT_REPLAY_DIFFERS: u8 = 4;
/// Exit code for a replay whose answers differ only where the recorded run
/// was not deterministic (it read a clock, randomness or files, or made a
/// call it was not granted).
pub const EXIT_REPLAY_NONDETERMINISTIC: u8 = 5;

/// agent-host: sessions and context for LLM agents, with sandboxed history processors.
#[derive(Debug, Parser)]
#[command(name = "agent-host", version, about, max_term_width = 100)]
pub struct Cli {
    /// Where sessions are stored: a folder (the file store) or `sqlite:PATH`. Default: the
    /// AGENT_HOST_STORE environment variable, else `.agent-host/` in the working directory.
    #[arg(
        long,
        global = true,
        value_name = "DIR|sqlite:PATH",
        value_parser = clap::builder::NonEmptyStringValueParser::new()
    )]
    store: Option<String>,
    /// The configuration file to read (default: the AGENT_HOST_CONFIG environment variable, else
    /// `agent-host.toml` in the working directory, else in the user config folder).
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Log more on standard error: -v info, -vv debug, -vvv trace (RUST_LOG, when set, wins).
    #[arg(long, short, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

impl Cli {
    /// How many times `-v` was given.
    pub fn verbosity(&self) -> u8 {
        self.verbose
    }
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Fit a history to a context window, run it through sandboxed processors, and write it.
    ///
    /// Reads the history, runs the core pipeline (repair, pruning, an extractive summary
    /// when a trigger fires, emergency truncation) so it fits --context-limit, then each
    /// --processor in order inside the WebAssembly sandbox, validates the result and writes
    /// it (OpenAI chat messages by default) with an optional provenance report.
    Run(Box<RunArgs>),
    /// Run a recorded run's processors again and check each answer is the same, byte for byte.
    ///
    /// Reads a report written by `run --report`, reads the history it records (or --history)
    /// and checks its SHA-256, makes the processors' input with the recorded pipeline and
    /// clock, then runs each processor with its recorded context, configuration, grants and
    /// limits, and compares its answer and output with the record.
    Replay(Box<crate::commands::replay::ReplayArgs>),
    /// Talk to the configured model in a stored session, with slash commands.
    ///
    /// Each message is a turn: the session's history goes through the pipeline (summarizing
    /// and pruning as configured) and the processors, then to the model; the reply streams in
    /// and both are stored. Without a provider it shows the context that would be sent.
    Chat(Box<ChatCommand>),
    /// Serve sessions over HTTP: the /v1 API, server-sent events, hooks, metrics.
    ///
    /// Prints `listening on http://HOST:PORT` first, then serves until Ctrl-C or SIGTERM
    /// (in-flight requests finish; every acknowledged write is already durable). The API is
    /// described at /openapi.json.
    #[command(after_help = "Examples:\n  agent-host serve\n  \
        agent-host serve --listen 127.0.0.1:0 --store sqlite:sessions.db\n  \
        agent-host serve --listen 0.0.0.0:8787 --tokens tokens.txt")]
    Serve(Box<crate::commands::serve::ServeArgs>),
    /// Show how full a session's context is and how close each summarization trigger is.
    #[command(after_help = "Examples:\n  agent-host context --session work\n  \
        agent-host context --session telegram:123456 --agent support --json")]
    Context(Box<ContextCommand>),
    /// Show the effective configuration and where each value came from.
    #[command(subcommand)]
    Config(crate::commands::config::ConfigCommand),
    /// Print a shell completion script.
    #[command(after_help = "Examples:\n  \
        agent-host completions bash > ~/.local/share/bash-completion/completions/agent-host\n  \
        agent-host completions zsh > ~/.zfunc/_agent-host\n  \
        agent-host completions fish > ~/.config/fish/completions/agent-host.fish")]
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Write processors: scaffold a Rust processor crate, build it into a component.
    #[command(subcommand)]
    Processor(crate::commands::processor::ProcessorCommand),
    /// Manage stored sessions: list, show, export, rename, delete, clear, info, cleanup, import.
    ///
    /// Sessions live in the store given by --store, the AGENT_HOST_STORE environment variable,
    /// or `.agent-host/` in the working directory. A session is named by its key (within
    /// --agent, default `default`) or by its id.
    Sessions(crate::commands::sessions::SessionsArgs),
    /// Long-term memory: facts across sessions. Add (or extract from a history), search,
    /// get, list, update, delete.
    ///
    /// Memory lives in the same store as the sessions (--store); each command works in one
    /// user's memory (--user) with one agent (--agent).
    #[command(after_help = "Examples:\n  \
        agent-host memory add \"prefers tabs over spaces\" --user alice\n  \
        agent-host memory search \"tabs or spaces\" --user alice\n  \
        agent-host memory get --entity alice --user alice")]
    Memory(crate::commands::memory::MemoryArgs),
    /// Whole stores: copy every session from one store to another (file, SQLite, PostgreSQL).
    #[command(subcommand)]
    Store(crate::commands::store::StoreCommand),
    /// Show a history: its messages, token estimates, and how tool calls pair with results.
    ///
    /// With no FILE, shows the sample session built into the binary.
    Inspect {
        /// The history to read (`-` for standard input).
        file: Option<PathBuf>,
        /// Its format; detected when not given.
        #[arg(
            long,
            value_name = "jsonl|openai|anthropic|responses|claude-code|codex|gemini-cli|pydantic-ai|langchain"
        )]
        format: Option<Format>,
        #[command(flatten)]
        limits: crate::commands::LimitArgs,
    },
    /// Convert a history from one format to another.
    Convert {
        /// The history to read (`-` for standard input).
        file: PathBuf,
        /// Its format; detected when not given.
        #[arg(
            long,
            value_name = "jsonl|openai|anthropic|responses|claude-code|codex|gemini-cli|pydantic-ai|langchain"
        )]
        format: Option<Format>,
        /// The format to write.
        #[arg(long, value_name = "jsonl|openai|anthropic|responses|pydantic-ai")]
        to: Format,
        /// Where to write (standard output when not given).
        #[arg(long, short)]
        output: Option<PathBuf>,
        #[command(flatten)]
        limits: crate::commands::LimitArgs,
    },
}

/// `agent-host chat`'s options.
#[derive(Debug, clap::Args)]
pub struct ChatCommand {
    #[command(flatten)]
    chat: ChatArgs,
    /// A processor component (or Rust processor crate) to run on every view; repeat for a
    /// chain. Given, it replaces the `[[processors]]` of the configuration.
    #[arg(long = "processor", short = 'p', value_name = "FILE.wasm|CRATE")]
    processors: Vec<PathBuf>,
    #[command(flatten)]
    memory: crate::commands::MemoryArgs,
    #[command(flatten)]
    overrides: Overrides,
}

/// `agent-host context`'s options.
#[derive(Debug, clap::Args)]
pub struct ContextCommand {
    /// The session: its key (within --agent) or its id.
    #[arg(long, value_name = "KEY|ID")]
    session: String,
    /// The agent the key belongs to.
    #[arg(long, value_name = "AGENT", default_value = agent_host_store::DEFAULT_AGENT)]
    agent: String,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    overrides: Overrides,
}

/// Runs a parsed command line, writing results to `out`.
///
/// Errors carry the libraries' typed errors in their chain (a
/// [`FormatError`] for unreadable input, say); [`exit_code`] maps their kinds
/// to exit codes ([`EXIT_BAD_INPUT`], [`EXIT_PROCESSOR_FAILED`], ...).
///
/// `matches` are the matches `cli` was built from: `run` reads the order of
/// its per-processor options from them.
pub fn run(cli: Cli, matches: &ArgMatches, out: &mut dyn Write) -> anyhow::Result<()> {
    let Cli {
        store,
        config,
        command,
        ..
    } = cli;
    let settings =
        |overrides: &Overrides| Settings::load(config.as_deref(), overrides, store.as_deref());
    match command {
        Command::Run(args) => {
            let sub = matches
                .subcommand_matches("run")
                .context("the run subcommand's matches")?;
            let settings = settings(args.overrides())?;
            crate::commands::run::run(*args, sub, &settings, out)
        }
        Command::Replay(args) => crate::commands::replay::run(&args, out),
        Command::Sessions(command) => {
            let settings = settings(&Overrides::default())?;
            command.run(&settings.store, out)
        }
        Command::Memory(command) => {
            let settings = settings(&Overrides::default())?;
            crate::commands::memory::run(command, &settings.store, out)
        }
        Command::Chat(command) => {
            let settings = settings(&command.overrides)?;
            let processors = (!command.processors.is_empty()).then(|| {
                command
                    .processors
                    .iter()
                    .map(|p| (p.clone(), ProcessorOptions::default()))
                    .collect()
            });
            let store = crate::commands::sessions::open_store(&settings.store)?;
            let mut config = settings.engine_config(processors);
            config.cache_dir = agent_host_runtime::CompileCache::default_root();
            config.memory = command.memory.config(
                &settings.memory,
                || crate::commands::open_memory(&settings.store),
                config.provider.is_some(),
            )?;
            let engine = engine_over(config, store, false)?;
            crate::chat::run(&command.chat, &engine, out)
        }
        Command::Serve(args) => {
            let settings = settings(args.overrides())?;
            crate::commands::serve::run(*args, &settings, out)
        }
        Command::Context(command) => {
            let settings = settings(&command.overrides)?;
            let name = crate::commands::sessions::SessionName {
                session: command.session,
                agent: command.agent,
            };
            crate::commands::context::run(&name, command.json, &settings, out)
        }
        Command::Config(command) => {
            crate::commands::config::run(&command, config.as_deref(), store.as_deref(), out)
        }
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "agent-host", out);
            Ok(())
        }
        Command::Processor(command) => crate::commands::processor::run(command, out),
        Command::Store(command) => crate::commands::store::run(&command, out),
        Command::Inspect {
            file,
            format,
            limits,
        } => {
            let loaded = match file {
                Some(path) => transcript::load(&path, format, &limits.limits())?,
                None => transcript::sample(),
            };
            inspect(&loaded, out)
        }
        Command::Convert {
            file,
            format,
            to,
            output,
            limits,
        } => {
            let loaded = transcript::load(&file, format, &limits.limits())?;
            let text = format::write(to, &loaded.transcript.messages)
                .with_context(|| format!("cannot write {} as {to}", loaded.source))?;
            report_left_out(&loaded.transcript);
            for loss in format::losses(to, &loaded.transcript.messages) {
                eprintln!("not carried by {to}: {}", term::safe(&loss.to_string()));
            }
            match output {
                Some(path) => std::fs::write(&path, text)
                    .with_context(|| format!("cannot write {}", path.display()))?,
                None => out.write_all(text.as_bytes())?,
            }
            Ok(())
        }
    }
}

/// The engine `config` describes over `store`, with API keys from the
/// environment. Processor crate folders are built first (the engine loads
/// components only); `quiet` builds without a word on standard error.
pub(crate) fn engine_over(
    mut config: agent_host_engine::EngineConfig,
    store: Box<dyn agent_host_store::SessionStore>,
    quiet: bool,
) -> anyhow::Result<Engine> {
    for (path, _) in &mut config.processors {
        *path = crate::commands::run::component_of(path, quiet)?;
    }
    Ok(Engine::new(
        config,
        std::sync::Arc::from(store),
        &agent_host_config::env_keys,
    )?)
}

/// The kind of the first classified error in `error`'s chain: each library
/// crate's typed error says its own [`ErrorKind`].
pub fn error_kind(error: &anyhow::Error) -> Option<ErrorKind> {
    error.chain().find_map(|e| {
        if let Some(e) = e.downcast_ref::<agent_host_engine::EngineError>() {
            Some(e.kind())
        } else if let Some(e) = e.downcast_ref::<agent_host_store::StoreError>() {
            Some(e.kind())
        } else if let Some(e) = e.downcast_ref::<agent_host_provider::ProviderError>() {
            Some(e.kind())
        } else if let Some(e) = e.downcast_ref::<agent_host_runtime::ProcessorError>() {
            Some(e.kind())
        } else if let Some(e) = e.downcast_ref::<agent_host_config::ConfigError>() {
            Some(e.kind())
        } else if let Some(e) = e.downcast_ref::<agent_host_server::ApiError>() {
            Some(e.kind)
        } else if let Some(e) = e.downcast_ref::<FormatError>() {
            Some(e.kind())
        } else if e.is::<ProcessorFailed>() {
            Some(ErrorKind::ProcessorFailed)
        } else {
            None
        }
    })
}

/// How to raise the limit an error says the input is over, when it is one:
/// a line for standard error after the error itself.
pub fn limit_hint(error: &anyhow::Error) -> Option<String> {
    let limit = error
        .chain()
        .find_map(|e| e.downcast_ref::<FormatError>())
        .and_then(|e| e.limit)?;
    Some(format!(
        "to read it anyway, raise the limit: --limit {limit}=N (or AGENT_HOST_LIMITS=\"{limit}=N\")"
    ))
}

/// The process exit code for an error returned by [`run`]: the one place
/// error kinds become exit codes.
pub fn exit_code(error: &anyhow::Error) -> ExitCode {
    if error.chain().any(|e| e.is::<UsageError>()) {
        return ExitCode::from(2);
    }
    if let Some(differs) = error
        .chain()
        .find_map(|e| e.downcast_ref::<crate::commands::replay::ReplayDiffers>())
    {
        return ExitCode::from(if differs.only_nondeterministic {
            EXIT_REPLAY_NONDETERMINISTIC
        } else {
            EXIT_REPLAY_DIFFERS
        });
    }
    match error_kind(error) {
        Some(ErrorKind::InvalidInput | ErrorKind::LimitExceeded) => ExitCode::from(EXIT_BAD_INPUT),
        Some(ErrorKind::ProcessorFailed) => ExitCode::from(EXIT_PROCESSOR_FAILED),
        Some(ErrorKind::ProviderFailed) => ExitCode::from(EXIT_PROVIDER_FAILED),
        Some(ErrorKind::Configuration) => ExitCode::from(EXIT_CONFIG),
        _ => ExitCode::FAILURE,
    }
}

fn inspect(loaded: &Loaded, out: &mut dyn Write) -> anyhow::Result<()> {
    let counter = HeuristicCounter::default();
    let messages = &loaded.transcript.messages;
    let total = agent_host_core::tokens::total(messages, &counter);
    let pairing = ToolPairing::of(messages);
    writeln!(
        out,
        "{} ({}): {} messages, about {total} tokens (heuristic)",
        loaded.source,
        loaded.format,
        messages.len()
    )?;
    if let Some(title) = &loaded.transcript.title {
        writeln!(out, "title: {}", term::safe(title))?;
    }
    writeln!(
        out,
        "tool calls: {}, answered: {}, unanswered: {}, orphan results: {}",
        pairing.calls,
        pairing.answered,
        pairing.unanswered.len(),
        pairing.orphans.len()
    )?;
    for id in &pairing.unanswered {
        writeln!(out, "  unanswered call: {}", term::safe(id))?;
    }
    for id in &pairing.orphans {
        writeln!(out, "  orphan result in message: {}", term::safe(id))?;
    }
    let sidechains = &loaded.transcript.sidechains;
    if !sidechains.is_empty() {
        let n: usize = sidechains.iter().map(Vec::len).sum();
        writeln!(
            out,
            "subagent sidechains: {} ({n} messages, not shown)",
            sidechains.len()
        )?;
    }
    if !loaded.transcript.skipped.is_empty() {
        writeln!(
            out,
            "records that are not messages: {}",
            loaded.transcript.skipped.len()
        )?;
    }
    let branches = &loaded.transcript.branches;
    if !branches.is_empty() {
        let n: usize = branches.iter().map(Vec::len).sum();
        writeln!(
            out,
            "abandoned branches (rewinds): {} ({n} messages, not shown)",
            branches.len()
        )?;
    }
    for q in &loaded.transcript.quarantined {
        writeln!(
            out,
            "unreadable record, left out: {}",
            term::safe(&q.error.to_string())
        )?;
    }
    writeln!(out)?;
    writeln!(out, "{:>5}  {:<10} {:>7}  text", "#", "role", "tokens")?;
    for (i, m) in messages.iter().enumerate() {
        writeln!(
            out,
            "{i:>5}  {:<10} {:>7}  {}",
            m.role.as_str(),
            m.tokens(&counter),
            preview(m)
        )?;
    }
    Ok(())
}

/// Says on standard error what of a history read was left out: records that
/// could not be read, abandoned branches.
pub(crate) fn report_left_out(transcript: &format::Transcript) {
    for q in &transcript.quarantined {
        eprintln!(
            "left out an unreadable record: {}",
            term::safe(&q.error.to_string())
        );
    }
    if !transcript.branches.is_empty() {
        let n: usize = transcript.branches.iter().map(Vec::len).sum();
        eprintln!(
            "left out: {n} messages of {} abandoned branches (rewinds)",
            transcript.branches.len()
        );
    }
}

/// One line saying what a message holds.
pub(crate) fn preview(m: &Message) -> String {
    let mut line = String::new();
    if m.reasoning.is_some() {
        line.push_str("[reasoning] ");
    }
    for call in &m.tool_calls {
        line.push_str(&format!("-> {}({}) ", call.name, call.arguments));
    }
    if let Some(name) = &m.tool_name {
        line.push_str(&format!("<- {name}: "));
    }
    line.push_str(&m.text());
    // A history is a stranger's text: a control character (an escape
    // sequence that would recolour, move or retitle the terminal) is shown
    // escaped, never sent to the terminal.
    let line: String = line
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .flat_map(|c| {
            let escaped: Vec<char> = if c.is_control() {
                c.escape_default().collect()
            } else {
                vec![c]
            };
            escaped
        })
        .collect();
    const WIDTH: usize = 72;
    if line.chars().count() > WIDTH {
        let cut: String = line.chars().take(WIDTH - 1).collect();
        format!("{cut}…")
    } else {
        line
    }
}
