//! `agent-host store`: whole-store operations (`migrate FROM TO`).

use std::io::Write;

use anyhow::{Context, Result};
use clap::Subcommand;

use agent_host_store::migrate::{self, Step};
use agent_host_store::redact;

/// `agent-host store`'s subcommands.
#[derive(Debug, Subcommand)]
pub enum StoreCommand {
    /// Copy every session, with its checkpoints and metadata, from one store to another.
    ///
    /// FROM and TO are store specs: a folder, `sqlite:PATH` or `postgres://...`. Each
    /// session keeps its id, key, title and times; each copy is loaded back and verified
    /// (message count, SHA-256 of messages and checkpoints). Sessions already copied are
    /// skipped, so an interrupted run resumes when run again; one copied in part is copied
    /// again. A different session with the same key in TO stops the run; nothing is
    /// overwritten.
    #[command(after_help = "Examples:\n  \
        agent-host store migrate .agent-host sqlite:sessions.db\n  \
        agent-host store migrate sqlite:sessions.db postgres://agents@db.internal/agents")]
    Migrate {
        /// The store to copy from.
        from: String,
        /// The store to copy into (created when missing).
        to: String,
    },
}

/// Runs a `store` subcommand.
pub fn run(command: &StoreCommand, out: &mut dyn Write) -> Result<()> {
    match command {
        StoreCommand::Migrate { from, to } => {
            if !agent_host_store::exists(from) {
                anyhow::bail!(
                    "there is no store at {}; name an existing folder, sqlite:PATH or postgres:// URL",
                    redact(from)
                );
            }
            let source = crate::commands::sessions::open_store(from)?;
            let target = crate::commands::sessions::open_store(to)?;
            let mut written = Ok(());
            let report = migrate::copy_all(source.as_ref(), target.as_ref(), &mut |step| {
                let (what, meta) = match step {
                    Step::Copied(meta) => ("copied", meta),
                    Step::AlreadyThere(meta) => ("already there", meta),
                    Step::Recopied(meta) => ("copied again", meta),
                };
                if written.is_ok() {
                    written =
                        writeln!(out, "{what}: {} ({} messages)", meta.id, meta.message_count);
                }
            })
            .with_context(|| format!("cannot migrate {} to {}", redact(from), redact(to)))?;
            written?;
            for warning in &report.warnings {
                writeln!(out, "warning: {warning}")?;
            }
            writeln!(
                out,
                "{} sessions ({} messages) in {}: {} copied, {} copied again, {} already there; \
                 every copy verified (count and SHA-256), digest {}",
                report.sessions,
                report.messages,
                redact(to),
                report.copied,
                report.recopied,
                report.already_there,
                report.digest
            )?;
            Ok(())
        }
    }
}
