//! Compiling a component under a time and memory cap, in a child process.
//!
//! Compiling is the one step of loading a component that no wasmtime limit
//! covers: a hostile component of a few hundred kilobytes can keep
//! Cranelift busy for minutes and make it allocate gigabytes. Under
//! [`CompileIsolation::Child`] the runtime hands the component's bytes to a
//! child process (the host's own executable, which calls
//! [`compile_child_main`] first thing in `main`) that lowers its own limits
//! with `setrlimit` (address space, CPU time), compiles with the runtime's
//! engine settings and writes the artifact back; the parent kills it at the
//! wall-clock limit. A component that breaks a limit is refused with an
//! error naming it, the limit, and the setting that raises it.
//!
//! What it leaves out: the child is not otherwise sandboxed (it is our own
//! code compiling bytes, not running them), and components loaded from the
//! compile cache, already compiled, never reach it.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use wasmtime::Engine;
use wasmtime::component::Component;

use crate::limits::{DEFAULT_COMPILE_MEMORY_BYTES, DEFAULT_COMPILE_TIMEOUT};

/// The environment variable that makes a process a compile child; its value
/// carries the engine settings (`<max wasm stack>,<pooling 0|1>`).
const CHILD_MARKER: &str = "AGENT_HOST_COMPILE_CHILD";

/// Raises the wall-clock limit of a compile, in seconds (read by
/// [`CompileIsolation::default`]).
pub const COMPILE_TIMEOUT_ENV: &str = "AGENT_HOST_COMPILE_TIMEOUT";
/// Raises the memory limit of a compile, in MiB (read by
/// [`CompileIsolation::default`]).
pub const COMPILE_MEMORY_ENV: &str = "AGENT_HOST_COMPILE_MEMORY_MB";

/// Bytes of the child's standard error kept for an error message.
const CHILD_STDERR_BYTES: u64 = 16 << 10;

/// How often the parent looks whether the child has finished.
const POLL: Duration = Duration::from_millis(10);

/// Set by [`compile_child_main`]: the executable that can compile in a
/// child, the current one.
static CHILD_EXE: OnceLock<Option<PathBuf>> = OnceLock::new();

/// Where a [`Runtime`](crate::Runtime) compiles components it has not
/// cached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CompileIsolation {
    /// In the calling process, without limits: for components you trust
    /// (tests, your own builds) or programs that cannot spawn themselves.
    InProcess,
    /// In a child process, `exe`, whose `main` calls
    /// [`compile_child_main`] first; killed after `timeout`, its address
    /// space capped at `memory_bytes`.
    Child {
        /// The executable to run as the compiler.
        exe: PathBuf,
        /// Wall-clock time for one compile.
        timeout: Duration,
        /// Address space of the child (`RLIMIT_AS`).
        memory_bytes: u64,
    },
}

impl Default for CompileIsolation {
    /// [`CompileIsolation::Child`] with the current executable when this
    /// program called [`compile_child_main`] (the `agent-host` binary
    /// does), with [`DEFAULT_COMPILE_TIMEOUT`] and
    /// [`DEFAULT_COMPILE_MEMORY_BYTES`] unless [`COMPILE_TIMEOUT_ENV`] or
    /// [`COMPILE_MEMORY_ENV`] say otherwise; [`CompileIsolation::InProcess`]
    /// otherwise.
    fn default() -> Self {
        match CHILD_EXE.get() {
            Some(Some(exe)) => CompileIsolation::Child {
                exe: exe.clone(),
                timeout: env_number(COMPILE_TIMEOUT_ENV)
                    .map_or(DEFAULT_COMPILE_TIMEOUT, Duration::from_secs),
                memory_bytes: env_number(COMPILE_MEMORY_ENV)
                    .map_or(DEFAULT_COMPILE_MEMORY_BYTES, |mb| {
                        mb.saturating_mul(1 << 20)
                    }),
            },
            _ => CompileIsolation::InProcess,
        }
    }
}

/// A positive whole number from the environment variable `name`; a value
/// that is not one is ignored, with a warning.
pub(crate) fn env_number(name: &str) -> Option<u64> {
    let value = std::env::var(name).ok()?;
    match value.trim().parse::<u64>() {
        Ok(n) if n > 0 => Some(n),
        _ => {
            tracing::warn!("ignoring {name}={value:?}: not a positive whole number");
            None
        }
    }
}

/// The hook a host binary calls first thing in `main`, so that it can
/// compile components in a child of its own.
///
/// In a process the runtime started as a compile child, it compiles the
/// component on standard input under the limits and exits; it never
/// returns. Anywhere else it returns at once, after noting that this
/// executable can be a compile child, which makes
/// [`CompileIsolation::default`] choose [`CompileIsolation::Child`].
pub fn compile_child_main() {
    let Some(settings) = std::env::var_os(CHILD_MARKER) else {
        CHILD_EXE.get_or_init(|| std::env::current_exe().ok());
        return;
    };
    let code = match child(&settings.to_string_lossy()) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("{e:#}");
            1
        }
    };
    std::process::exit(code);
}

/// The child's work: limits, engine, compile, artifact on standard output.
fn child(settings: &str) -> Result<()> {
    let (stack, pooling) = settings
        .split_once(',')
        .and_then(|(s, p)| Some((s.parse::<usize>().ok()?, p == "1")))
        .with_context(|| format!("bad {CHILD_MARKER} value {settings:?}"))?;
    let memory = env_number("AGENT_HOST_COMPILE_CHILD_MEMORY").context("no memory limit given")?;
    let cpu = env_number("AGENT_HOST_COMPILE_CHILD_CPU").context("no CPU limit given")?;
    set_limits(memory, cpu)?;
    let mut bytes = Vec::new();
    std::io::stdin()
        .read_to_end(&mut bytes)
        .context("reading the component")?;
    let engine = Engine::new(&crate::engine_config(stack, pooling))
        .map_err(anyhow::Error::from)
        .context("creating the WebAssembly engine")?;
    let artifact = engine
        .precompile_component(&bytes)
        .map_err(anyhow::Error::from)?;
    let mut out = std::io::stdout().lock();
    out.write_all(&artifact)
        .and_then(|()| out.flush())
        .context("writing the artifact")
}

#[cfg(unix)]
fn set_limits(memory: u64, cpu_seconds: u64) -> Result<()> {
    use rustix::process::{Resource, Rlimit, setrlimit};
    for (resource, value, what) in [
        (Resource::As, memory, "address space"),
        (Resource::Cpu, cpu_seconds, "CPU time"),
    ] {
        let limit = Rlimit {
            current: Some(value),
            maximum: Some(value),
        };
        setrlimit(resource, limit).with_context(|| format!("limiting the {what}"))?;
    }
    Ok(())
}

#[cfg(not(unix))]
fn set_limits(_memory: u64, _cpu_seconds: u64) -> Result<()> {
    bail!("compiling in a child process under limits needs Unix; use CompileIsolation::InProcess")
}

/// Compiles `bytes` in a child running `exe` under `timeout` and
/// `memory_bytes`, with the engine settings `stack` and `pooling` (those of
/// `engine`), and loads the artifact into `engine`.
pub(crate) fn in_child(
    engine: &Engine,
    (stack, pooling): (usize, bool),
    (exe, timeout, memory_bytes): (&PathBuf, Duration, u64),
    source: &str,
    bytes: &[u8],
) -> Result<Component> {
    // CPU time is a backstop for a child whose parent died: every core may
    // compile at once, so it allows the timeout on each of them.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
    let cpu = timeout
        .as_secs()
        .max(1)
        .saturating_mul(cores)
        .saturating_add(1);
    let start = Instant::now();
    let mut child = Command::new(exe)
        .env(CHILD_MARKER, format!("{stack},{}", u8::from(pooling)))
        .env("AGENT_HOST_COMPILE_CHILD_MEMORY", memory_bytes.to_string())
        .env("AGENT_HOST_COMPILE_CHILD_CPU", cpu.to_string())
        // An allocation refused under the limit aborts: one line, no backtrace.
        .env("RUST_BACKTRACE", "0")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting the compiler process {}", exe.display()))?;
    let mut stdin = child.stdin.take().expect("piped stdin");
    let mut stdout = child.stdout.take().expect("piped stdout");
    let stderr = child.stderr.take().expect("piped stderr");
    std::thread::scope(|s| {
        // A child that dies early closes its end: the write fails, and the
        // exit status says why.
        s.spawn(move || {
            let _ = stdin.write_all(bytes);
        });
        let artifact = s.spawn(move || {
            let mut out = Vec::new();
            stdout.read_to_end(&mut out).map(|_| out)
        });
        let message = s.spawn(move || {
            let mut out = String::new();
            let _ = stderr.take(CHILD_STDERR_BYTES).read_to_string(&mut out);
            out
        });
        let status = loop {
            if let Some(status) = child.try_wait().context("waiting for the compiler")? {
                break status;
            }
            if start.elapsed() >= timeout {
                // Killing closes its pipes, which ends the reader threads.
                let _ = child.kill();
                let _ = child.wait();
                bail!(
                    "it took longer than the limit of {} s for compiling a \
                     component, and was stopped; a component this slow to compile is likely \
                     hostile. To allow it, raise {COMPILE_TIMEOUT_ENV} (seconds) or \
                     RuntimeConfig::compile",
                    timeout.as_secs_f64()
                );
            }
            std::thread::sleep(POLL);
        };
        let artifact = artifact
            .join()
            .map_err(|_| anyhow!("the artifact reader panicked"))?
            .context("reading the compiled artifact")?;
        let message = message.join().unwrap_or_default();
        let first = message.trim().lines().next().unwrap_or("").to_owned();
        if status.success() {
            return deserialize(engine, &artifact)
                .with_context(|| format!("loading the artifact compiled for {source}"));
        }
        #[cfg(unix)]
        if std::os::unix::process::ExitStatusExt::signal(&status) == Some(XCPU) {
            bail!(
                "it used more than the {cpu} s of CPU time allowed for \
                 compiling a component; raise {COMPILE_TIMEOUT_ENV} (seconds) to allow it"
            );
        }
        let out_of_memory = [
            "memory allocation",
            "out of memory",
            "Cannot allocate memory",
        ]
        .iter()
        .any(|m| message.contains(m));
        if out_of_memory || status.code() != Some(1) {
            bail!(
                "it ran out of the {} MiB of memory allowed for compiling a \
                 component, or crashed ({}); a component that needs this much to compile is \
                 likely hostile. To allow it, raise {COMPILE_MEMORY_ENV} (MiB) or RuntimeConfig::compile",
                memory_bytes >> 20,
                if first.is_empty() {
                    status.to_string()
                } else {
                    first
                }
            );
        }
        Err(anyhow!(first))
    })
}

/// `SIGXCPU`, sent when a process passes its CPU time limit.
#[cfg(unix)]
const XCPU: i32 = 24;

#[allow(unsafe_code)]
fn deserialize(engine: &Engine, artifact: &[u8]) -> Result<Component> {
    // SAFETY: `Component::deserialize` trusts `artifact` to be native code
    // that wasmtime wrote for this engine. These bytes are what our own
    // compiler process (the executable the runtime was configured with, run
    // by us, with this engine's settings) wrote to a pipe only it and we
    // hold; they never touched the disk. wasmtime also checks the header,
    // its version and the engine's settings.
    unsafe { Component::deserialize(engine, artifact) }.map_err(anyhow::Error::from)
}
