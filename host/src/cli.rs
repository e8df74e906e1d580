//! The `agent-host` command line.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use agent_host_core::format::{self, Format, FormatError};
use agent_host_core::pairing::ToolPairing;
use agent_host_core::{HeuristicCounter, Message};
use anyhow::Context;
use clap::{ArgMatches, Parser, Subcommand};

use crate::input::{self, Loaded};
use crate::run::{ProcessorFailed, RunArgs, UsageError};

/// Exit code for input that could not be read as a history (sysexits' EX_DATAERR).
pub const EXIT_BAD_INPUT: u8 = 65;
/// Exit code for a processor that failed under the `fail` policy, or could not be loaded.
pub const EXIT_PROCESSOR_FAILED: u8 = 3;

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
    #[command(subcommand)]
    command: Command,
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
    /// Write processors: scaffold a Rust processor crate, build it into a component.
    #[command(subcommand)]
    Processor(crate::processor::ProcessorCommand),
    /// Manage stored sessions: list, show, export, rename, delete, clear, info, cleanup, import.
    ///
    /// Sessions live in the store given by --store, the AGENT_HOST_STORE environment variable,
    /// or `.agent-host/` in the working directory. A session is named by its key (within
    /// --agent, default `default`) or by its id.
    #[command(subcommand)]
    Sessions(crate::sessions::SessionsCommand),
    /// Show a history: its messages, token estimates, and how tool calls pair with results.
    ///
    /// With no FILE, shows the sample session built into the binary.
    Inspect {
        /// The history to read (`-` for standard input).
        file: Option<PathBuf>,
        /// Its format; detected when not given.
        #[arg(long, value_name = "jsonl|openai|anthropic|claude-code")]
        format: Option<Format>,
    },
    /// Convert a history from one format to another.
    Convert {
        /// The history to read (`-` for standard input).
        file: PathBuf,
        /// Its format; detected when not given.
        #[arg(long, value_name = "jsonl|openai|anthropic|claude-code")]
        format: Option<Format>,
        /// The format to write.
        #[arg(long, value_name = "jsonl|openai|anthropic")]
        to: Format,
        /// Where to write (standard output when not given).
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
}

/// Runs a parsed command line, writing results to `out`.
///
/// Errors caused by unreadable input carry a [`FormatError`] in their chain,
/// and processor failures a [`ProcessorFailed`]; [`exit_code`] maps them to
/// [`EXIT_BAD_INPUT`] and [`EXIT_PROCESSOR_FAILED`].
///
/// `matches` are the matches `cli` was built from: `run` reads the order of
/// its per-processor options from them.
pub fn run(cli: Cli, matches: &ArgMatches, out: &mut dyn Write) -> anyhow::Result<()> {
    match cli.command {
        Command::Run(args) => {
            let sub = matches
                .subcommand_matches("run")
                .context("the run subcommand's matches")?;
            let spec = crate::sessions::store_spec(cli.store.as_deref());
            crate::run::run(*args, sub, &spec, out)
        }
        Command::Sessions(command) => {
            let spec = crate::sessions::store_spec(cli.store.as_deref());
            crate::sessions::run(command, &spec, out)
        }
        Command::Processor(command) => crate::processor::run(command, out),
        Command::Inspect { file, format } => {
            let loaded = match file {
                Some(path) => input::load(&path, format)?,
                None => input::sample(),
            };
            inspect(&loaded, out)
        }
        Command::Convert {
            file,
            format,
            to,
            output,
        } => {
            let loaded = input::load(&file, format)?;
            let text = format::write(to, &loaded.transcript.messages)
                .with_context(|| format!("cannot write {} as {to}", loaded.source))?;
            match output {
                Some(path) => std::fs::write(&path, text)
                    .with_context(|| format!("cannot write {}", path.display()))?,
                None => out.write_all(text.as_bytes())?,
            }
            Ok(())
        }
    }
}

/// The process exit code for an error returned by [`run`].
pub fn exit_code(error: &anyhow::Error) -> ExitCode {
    if error.chain().any(|e| e.is::<FormatError>()) {
        ExitCode::from(EXIT_BAD_INPUT)
    } else if error.chain().any(|e| e.is::<ProcessorFailed>()) {
        ExitCode::from(EXIT_PROCESSOR_FAILED)
    } else if error.chain().any(|e| e.is::<UsageError>()) {
        ExitCode::from(2)
    } else {
        ExitCode::FAILURE
    }
}

fn inspect(loaded: &Loaded, out: &mut dyn Write) -> anyhow::Result<()> {
    let counter = HeuristicCounter::default();
    let messages = &loaded.transcript.messages;
    let total: u64 = messages.iter().map(|m| u64::from(m.tokens(&counter))).sum();
    let pairing = ToolPairing::of(messages);
    writeln!(
        out,
        "{} ({}): {} messages, about {total} tokens (heuristic)",
        loaded.source,
        loaded.format,
        messages.len()
    )?;
    if let Some(title) = &loaded.transcript.title {
        writeln!(out, "title: {title}")?;
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
        writeln!(out, "  unanswered call: {id}")?;
    }
    for id in &pairing.orphans {
        writeln!(out, "  orphan result in message: {id}")?;
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
    let line: String = line.split_whitespace().collect::<Vec<_>>().join(" ");
    const WIDTH: usize = 72;
    if line.chars().count() > WIDTH {
        let cut: String = line.chars().take(WIDTH - 1).collect();
        format!("{cut}…")
    } else {
        line
    }
}
