//! `agent-host processor`: tools for processor authors. `new` scaffolds a Rust
//! processor crate; `build` turns one (or a workspace of them) into
//! components; `inspect` shows what a component is and what it needs;
//! `check` runs it over awkward histories; `bench` times it.

mod bench;
mod check;
mod inspect;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, Subcommand};

use agent_host_runtime::{Cause, FailurePolicy, Processor, ProcessorOptions, Runtime};

pub use agent_host_tools::{BuildOptions, Lang, build};
pub use bench::BenchArgs;
pub use check::CheckArgs;
pub use inspect::InspectArgs;

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
        agent-host processor build processors -p filter  # one member of a workspace\n  \
        agent-host processor build processors --features agent-host-guest/contract-0-1  # contract 0.1.0")]
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
        /// Cargo features to turn on, comma-separated
        /// (`agent-host-guest/contract-0-1` builds Rust processors against
        /// contract 0.1.0 instead of 0.2.0).
        #[arg(long, value_delimiter = ',', value_name = "FEATURES")]
        features: Vec<String>,
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
        /// built with). Rust only.
        #[arg(long, value_name = "PATH")]
        sdk: Option<PathBuf>,
        /// The language to write the processor in.
        #[arg(long, value_name = "rust|python|js|c", default_value_t = Lang::Rust)]
        lang: Lang,
    },
    /// Show what a processor component is and what it needs to run.
    ///
    /// Loads the component as `run` does (compile cache included) and prints how it
    /// describes itself, the contract version it targets, its size and SHA-256, its
    /// configuration example and schema, and every import with the grant it needs.
    Inspect(InspectArgs),
    /// Run a processor over built-in sample and awkward histories and report each case.
    ///
    /// Every case is a history the host accepts (valid tool pairing) but of an awkward shape:
    /// empty, huge, unicode, media, reasoning, checkpoints, metadata. The processor runs under
    /// the `fail` policy, so every failure and every answer the host refuses is reported.
    /// Exits with 3 when any case fails.
    Check(CheckArgs),
    /// Time a processor over a history: per-call statistics, messages and tokens in and out.
    Bench(BenchArgs),
}

/// Where compiled components are cached: the same options as `run`.
#[derive(Debug, Args)]
pub struct CacheArgs {
    /// Where compiled processors are cached (default: the user cache folder).
    #[arg(long, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    /// Compile the processor instead of loading it from the cache.
    #[arg(long, conflicts_with = "cache_dir")]
    no_cache: bool,
}

/// The configuration, grants and limits of the one processor `check` and
/// `bench` run.
#[derive(Debug, Args)]
pub struct SandboxArgs {
    /// The processor's configuration (JSON); `{}` when not given.
    #[arg(long, value_name = "JSON")]
    processor_config: Option<String>,
    /// Let the processor read this directory (never write); repeat for more.
    #[arg(long = "allow-dir", value_name = "PATH")]
    allow_dirs: Vec<PathBuf>,
    /// Let the processor read clocks (and sleep within its deadline).
    #[arg(long)]
    allow_clocks: bool,
    /// Let the processor use random numbers.
    #[arg(long)]
    allow_random: bool,
    /// The deadline of one call, in milliseconds (default 250).
    #[arg(long, value_name = "MS")]
    deadline_ms: Option<u64>,
    /// The memory limit of one call, in MiB (default 64).
    #[arg(long, value_name = "MIB")]
    memory_mib: Option<usize>,
}

impl SandboxArgs {
    /// The processor's options, under the `fail` policy so that every
    /// failure is seen.
    fn options(&self) -> ProcessorOptions {
        let mut options = ProcessorOptions {
            config: self.processor_config.clone(),
            on_failure: FailurePolicy::Fail,
            ..ProcessorOptions::default()
        };
        options.grants.read_dirs.clone_from(&self.allow_dirs);
        options.grants.clocks = self.allow_clocks;
        options.grants.random = self.allow_random;
        if let Some(ms) = self.deadline_ms {
            options.limits.deadline = Duration::from_millis(ms);
        }
        if let Some(mib) = self.memory_mib {
            options.limits.memory_bytes = mib.saturating_mul(1 << 20);
        }
        options
    }
}

/// Starts a runtime with the cache `cache` asks for and loads the component
/// at `file` into it. A failure to load is a [`ProcessorFailed`] (exit
/// code 3), as it is for `run`, and carries the runtime's own explanation
/// (not a component, an import it cannot grant, a `describe` that traps).
fn load(file: &Path, cache: &CacheArgs, options: ProcessorOptions) -> anyhow::Result<Loaded> {
    let chain = [(file.to_owned(), options)];
    let cache_dir = crate::commands::run::cache_dir(cache.cache_dir.as_deref(), cache.no_cache);
    let chain = crate::commands::run::load_chain(cache_dir, &chain, false)?;
    match chain.runtime() {
        Some(_) => Ok(Loaded { chain }),
        None => anyhow::bail!("no processor was loaded from {}", file.display()),
    }
}

/// A runtime and the one processor loaded into it.
struct Loaded {
    chain: agent_host_engine::ProcessorChain,
}

impl Loaded {
    fn runtime(&self) -> &Runtime {
        self.chain.runtime().expect("a loaded chain has a runtime")
    }

    fn processor(&self) -> &Processor {
        &self.chain.processors()[0]
    }
}

/// A loaded processor in one line: name, version, hash, and how it loaded.
fn identity(p: &Processor) -> String {
    format!(
        "{} {} (sha256 {}), {} in {:.1} ms",
        p.name(),
        p.description().version,
        &p.hash()[..12],
        compile_words(p),
        ms(p.load_time())
    )
}

/// Milliseconds, as a float, for reports.
fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// A cause in one line: a trap's text carries a wasm backtrace whose last
/// line says what trapped.
fn cause_line(cause: &Cause) -> String {
    if let Cause::Trap(detail) = cause
        && let Some((_, what)) = detail
            .lines()
            .last()
            .and_then(|l| l.rsplit_once("wasm trap: "))
    {
        let hint = if what.contains("unreachable") {
            " (a Rust panic ends this way)"
        } else {
            ""
        };
        return format!("trapped: {what}{hint}");
    }
    cause
        .to_string()
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// How the component was obtained, in words.
fn compile_words(p: &Processor) -> &'static str {
    match p.compile() {
        agent_host_runtime::CacheOutcome::Hit => "loaded from the compile cache",
        agent_host_runtime::CacheOutcome::Compiled => "compiled (now cached)",
        agent_host_runtime::CacheOutcome::CompiledUncached => "compiled (not cached)",
    }
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
            features,
        } => {
            let built = build(&BuildOptions {
                path,
                out_dir,
                packages,
                debug,
                quiet,
                single: false,
                features,
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
        ProcessorCommand::New {
            name,
            path,
            sdk,
            lang,
        } => {
            if sdk.is_some() && lang != Lang::Rust {
                return Err(crate::commands::run::UsageError(
                    "--sdk applies to Rust processors only".into(),
                )
                .into());
            }
            let created = agent_host_tools::new_project(&name, path, lang, sdk)?;
            if lang == Lang::Rust {
                writeln!(
                    out,
                    "created {} (it depends on the SDK at {})\nnext: {}",
                    created.dir.display(),
                    created.sdk.display(),
                    created.next
                )?;
            } else {
                writeln!(
                    out,
                    "created {} ({lang})\nnext: {}",
                    created.dir.display(),
                    created.next
                )?;
            }
            Ok(())
        }
        ProcessorCommand::Inspect(args) => inspect::run(&args, out),
        ProcessorCommand::Check(args) => check::run(&args, out),
        ProcessorCommand::Bench(args) => bench::run(&args, out),
    }
}
