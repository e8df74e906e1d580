//! The `agent-host` binary: see `agent-host --help`.

use std::io::{self, Write};
use std::process::ExitCode;

use agent_host::{self, Cli};
use clap::{CommandFactory, FromArgMatches};
use tracing_subscriber::EnvFilter;

fn main() -> ExitCode {
    // First: when the runtime started this process to compile a component
    // under limits, this compiles it and exits; otherwise it lets runtimes
    // made here compile in such a child.
    agent_host_runtime::compile_child_main();
    let matches = Cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    init_tracing(cli.verbosity());
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let result = agent_host::run(cli, &matches, &mut out).and_then(|()| Ok(out.flush()?));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            // What was printed before the error stays in order before it.
            let _ = out.flush();
            let color = agent_host::term::stderr();
            // An error may quote a history, a processor or a server.
            eprintln!(
                "{} {}",
                agent_host::term::paint(agent_host::term::ERROR, "error:", color),
                agent_host::term::safe(&format!("{e:#}"))
            );
            if let Some(hint) = agent_host::limit_hint(&e) {
                eprintln!(
                    "{} {hint}",
                    agent_host::term::paint(agent_host::term::BOLD, "hint:", color)
                );
            }
            agent_host::exit_code(&e)
        }
    }
}

/// Logs go to standard error. `RUST_LOG` (e.g. `agent_host=debug`) wins when
/// set; otherwise `-v` raises agent-host's own level from warnings to info,
/// `-vv` to debug, `-vvv` to trace.
fn init_tracing(verbosity: u8) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        let level = match verbosity {
            0 => "warn",
            1 => "info",
            2 => "debug",
            _ => "trace",
        };
        // A target prefix: `agent_host` covers every agent-host crate.
        EnvFilter::new(format!("warn,agent_host={level}"))
    });
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(io::stderr)
        .with_ansi(agent_host::term::stderr())
        .with_target(verbosity > 1)
        .without_time()
        .init();
}

/// A reader that stopped reading (`agent-host inspect | head`) is not an error.
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
    })
}
