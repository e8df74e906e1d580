//! `agent-host processor`: tools for processor authors. `new` scaffolds a Rust
//! processor crate; `build` turns one (or a workspace of them) into
//! components.

mod build;
mod scaffold;

use std::io::Write;
use std::path::PathBuf;

use clap::Subcommand;

pub use build::{BuildOptions, Built, build};
pub use scaffold::{NewOptions, scaffold};

/// The `processor` subcommands.
#[derive(Debug, Subcommand)]
pub enum ProcessorCommand {
    /// Build a Rust processor crate (or a workspace of them) into components.
    ///
    /// Runs `cargo build --release --target wasm32-unknown-unknown`, then turns each
    /// `cdylib` into a component with the `wit-component` crate. The components import
    /// only the agent-host interface (no WASI). No other tool is needed.
    #[command(after_help = "Examples:\n  \
        agent-host processor build                       # the crate in this folder\n  \
        agent-host processor build processors --out-dir target/processors\n  \
        agent-host processor build processors -p filter  # one member of a workspace")]
    Build {
        /// The crate or workspace folder (or its Cargo.toml).
        #[arg(default_value = ".")]
        path: PathBuf,
        /// Where to write `<package>.wasm` (default: `processors/` in cargo's target folder).
        #[arg(long, short)]
        out_dir: Option<PathBuf>,
        /// Build only these packages of a workspace.
        #[arg(long = "package", short = 'p', value_name = "NAME")]
        packages: Vec<String>,
        /// Build with the dev profile instead of release.
        #[arg(long)]
        debug: bool,
        /// Print nothing but errors.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Create a new Rust processor crate that builds and passes its own test.
    #[command(after_help = "Example:\n  \
        agent-host processor new drop-errors && cd drop-errors && cargo test \
        && agent-host processor build")]
    New {
        /// The processor's name (a crate name: letters, digits, `-`, `_`).
        name: String,
        /// The folder to create (default: NAME in the current folder).
        #[arg(long)]
        path: Option<PathBuf>,
        /// The agent-host-guest SDK to depend on (default: the one this binary was
        /// built with).
        #[arg(long, value_name = "PATH")]
        sdk: Option<PathBuf>,
    },
}

/// Runs a `processor` subcommand.
pub fn run(command: ProcessorCommand, out: &mut dyn Write) -> anyhow::Result<()> {
    match command {
        ProcessorCommand::Build {
            path,
            out_dir,
            packages,
            debug,
            quiet,
        } => {
            let built = build(&BuildOptions {
                path,
                out_dir,
                packages,
                debug,
                quiet,
                single: false,
            })?;
            if !quiet {
                for b in &built {
                    writeln!(
                        out,
                        "built {} ({:.1} KB) -> {}",
                        b.name,
                        b.bytes as f64 / 1024.0,
                        b.path.display()
                    )?;
                }
            }
            Ok(())
        }
        ProcessorCommand::New { name, path, sdk } => {
            let (dir, sdk) = scaffold(&NewOptions { name, path, sdk })?;
            writeln!(
                out,
                "created {0} (it depends on the SDK at {1})\nnext: cd {0} && cargo test && \
                 agent-host processor build",
                dir.display(),
                sdk.display()
            )?;
            Ok(())
        }
    }
}
