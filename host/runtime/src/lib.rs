//! The sandboxed runtime for history processors and session hooks.
//!
//! One [`Runtime`] holds one wasmtime [`Engine`] (component model, epoch
//! interruption driven by its own ticker thread), a disk compile cache and
//! the token counter. [`Runtime::load`] compiles (or loads from the cache),
//! audits the imports, pre-links and asks the processor to describe itself;
//! [`Runtime::run`] then calls a chain of processors over a history: every
//! call gets a fresh wasmtime `Store` with its limits, the answer is
//! checked and applied as edits, the result is validated against the
//! provider rules, and a [`ProcessorReport`] records what happened.
//!
//! Session hooks (`agent-host:hooks@0.1.0`) share the same sandbox:
//! [`Runtime::load_hook_file`] gives a [`Hook`], and [`Hook::call`] tells it
//! one [`HookEvent`] (a session created, saved, deleted, or about to be
//! compacted) in a fresh store under its [`Limits`], with WASI closed.
//!
//! The runtime is `Send + Sync`: share it behind an `Arc` and call it from
//! many threads at once. Calls block the calling thread while the guest runs
//! (at most its deadline); from async code, call it inside
//! `tokio::task::spawn_blocking`.
//!
//! ```no_run
//! use agent_host_runtime::{ProcessorOptions, RunInfo, Runtime, RuntimeConfig};
//! use agent_host_core::Message;
//!
//! # fn main() -> anyhow::Result<()> {
//! let runtime = Runtime::new(RuntimeConfig::default())?;
//! let filter = runtime.load_file("filter.wasm".as_ref(), ProcessorOptions::default())?;
//! let history = vec![Message::user("hello"), Message::assistant("hi")];
//! let outcome = runtime.run(&[filter], &RunInfo::default(), history);
//! for report in &outcome.reports {
//!     println!("{}: {:?}, {} dropped", report.name, report.outcome, report.dropped.len());
//! }
//! # Ok(())
//! # }
//! ```

mod apply;
mod bindings;
mod cache;
mod call;
mod compile;
mod hook;
mod limits;
mod processor;
mod record;
mod report;
mod services;
mod v0_2;
mod wasi;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use agent_host_core::{HeuristicCounter, Message, Role, TokenCounter};
use anyhow::{Context, Result, anyhow, bail};
use chrono::{DateTime, Utc};
use serde::Serialize;
use wasmtime::component::{HasSelf, Linker, ResourceTable};
use wasmtime::{Config, Engine, Store, Trap};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use bindings::{HistoryProcessor, HistoryProcessorPre, Level, wit};

pub use cache::{CacheOutcome, CompileCache};
pub use compile::{COMPILE_MEMORY_ENV, COMPILE_TIMEOUT_ENV, CompileIsolation, compile_child_main};
pub use limits::{
    DEFAULT_COMPILE_MEMORY_BYTES, DEFAULT_COMPILE_TIMEOUT, DEFAULT_DEADLINE, DEFAULT_INSTANCES,
    DEFAULT_MAX_COMPONENT_BYTES, DEFAULT_MAX_ITEMS, DEFAULT_MAX_LOG_LINES,
    DEFAULT_MAX_OUTPUT_BYTES, DEFAULT_MAX_WASM_STACK, DEFAULT_MEMORY_BYTES, DEFAULT_TABLE_ELEMENTS,
    Limits,
};

/// Raises the largest component accepted, in MiB (read by
/// [`RuntimeConfig::default`]).
pub const MAX_COMPONENT_ENV: &str = "AGENT_HOST_MAX_COMPONENT_MB";
pub use processor::{
    Cause, ComponentRole, Description, FailurePolicy, InvalidPolicy, Processor, ProcessorError,
    ProcessorOptions, RunInfo,
};

use call::{Call, Sandbox, State, Ticker};
pub use hook::{Hook, HookEvent, HookKind, HookOptions, HookOutcome};
use processor::Bound;
pub use record::{
    AnswerRecord, EditDifference, HistoryDigest, MAX_RECORDED_EDITS, RECORD_VERSION,
    RecordedContext, RunRecord, Sources, history_sha256, sha256_hex,
};
pub use report::{LogLine, Outcome, ProcessorReport, Replaced};
pub use services::{
    DEFAULT_ANSWER_TOKENS, DEFAULT_MODEL_TOKENS, DEFAULT_SERVICE_CALLS, DEFAULT_SERVICE_TIME,
    HostServices, MAX_MEMORY_FACTS, MemoryFact, NoServices, RecordedServices, Service,
    ServiceAnswer, ServiceBudget, ServiceCall, ServiceError, ServiceRequest, ServiceResult,
    ServiceUsage,
};
pub use wasi::{Grants, Import, ImportUse};

/// Settings of a [`Runtime`], shared by every processor it loads.
#[derive(Clone)]
pub struct RuntimeConfig {
    /// Where compiled components are cached; `None` compiles every time.
    pub cache_dir: Option<PathBuf>,
    /// The largest component accepted for compilation (default
    /// [`DEFAULT_MAX_COMPONENT_BYTES`], 32 MiB, or [`MAX_COMPONENT_ENV`] MiB
    /// when set).
    pub max_component_bytes: usize,
    /// Where components that are not in the compile cache are compiled
    /// (default: in a child process under a time and memory limit when the
    /// program called [`compile_child_main`], else in process; see
    /// [`CompileIsolation::default`]).
    pub compile: CompileIsolation,
    /// The wasm stack of every call (default [`DEFAULT_MAX_WASM_STACK`], 1
    /// MiB). Wasmtime sets it per engine, so it is a runtime setting rather
    /// than a per-processor one.
    pub max_wasm_stack: usize,
    /// How often the deadline clock ticks (default 5 ms); deadlines are
    /// enforced to within one tick.
    pub epoch_tick: Duration,
    /// Use wasmtime's pooling instance allocator: 128 pre-reserved slots whose
    /// memory stays mapped between calls (about 1.5 times faster per call on
    /// 1,000 messages, see BENCHMARKS.md), at the price of address space
    /// reserved up front and a per-processor memory limit of at most 256 MiB.
    /// Worth it for a server making many calls; off by default.
    pub pooling: bool,
    /// The token counter behind estimates given to and asked by processors.
    pub counter: Arc<dyn TokenCounter>,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            cache_dir: CompileCache::default_root(),
            max_component_bytes: compile::env_number(MAX_COMPONENT_ENV)
                .and_then(|mb| usize::try_from(mb.saturating_mul(1 << 20)).ok())
                .unwrap_or(limits::DEFAULT_MAX_COMPONENT_BYTES),
            compile: CompileIsolation::default(),
            max_wasm_stack: limits::DEFAULT_MAX_WASM_STACK,
            epoch_tick: Duration::from_millis(5),
            pooling: false,
            counter: Arc::new(HeuristicCounter::default()),
        }
    }
}

/// The engine settings of a runtime: the same in the compile child, whose
/// artifacts must load into the parent's engine.
pub(crate) fn engine_config(max_wasm_stack: usize, pooling: bool) -> Config {
    let mut wasm = Config::new();
    wasm.wasm_component_model(true)
        .epoch_interruption(true)
        .max_wasm_stack(max_wasm_stack)
        .wasm_backtrace_max_frames(std::num::NonZeroUsize::new(limits::WASM_BACKTRACE_FRAMES));
    if pooling {
        let mut pool = wasmtime::PoolingAllocationConfig::default();
        pool.total_component_instances(POOL_SLOTS)
            .total_memories(POOL_SLOTS)
            .total_tables(POOL_SLOTS)
            .total_core_instances(POOL_SLOTS)
            .max_memory_size(POOL_MAX_MEMORY)
            .table_elements(POOL_MAX_TABLE_ELEMENTS)
            // Reset a reused slot's first 16 MiB with memset rather than
            // handing the pages back: the next call does not fault them in.
            .linear_memory_keep_resident(16 << 20)
            .table_keep_resident(1 << 20)
            // Where the kernel has PAGEMAP_SCAN (Linux 6.7), only the pages
            // a call wrote are reset, instead of every accessible byte.
            .pagemap_scan(wasmtime::Enabled::Auto);
        wasm.allocation_strategy(wasmtime::InstanceAllocationStrategy::Pooling(pool));
    }
    wasm
}

/// Instance slots of the pooling allocator.
const POOL_SLOTS: u32 = 128;
/// The largest linear memory a pooled slot holds: four times the default
/// per-call limit; a processor whose limit is higher is refused at load by a
/// pooled runtime.
const POOL_MAX_MEMORY: usize = 256 << 20;
/// The most elements of a pooled table: the default per-call limit, so that
/// the limiter (whose refusal explains itself) refuses a growth first.
const POOL_MAX_TABLE_ELEMENTS: usize = limits::DEFAULT_TABLE_ELEMENTS;

fn mib(bytes: usize) -> String {
    if bytes >= 1 << 20 {
        format!("{:.1} MiB", bytes as f64 / f64::from(1 << 20))
    } else {
        format!("{bytes} bytes")
    }
}

/// The result of running a chain of processors.
#[derive(Debug)]
pub struct RunOutcome {
    /// The history after every processor that succeeded.
    pub messages: Vec<Message>,
    /// One report per processor called, in order.
    pub reports: Vec<ProcessorReport>,
    /// The failure that stopped the run (a processor under [`FailurePolicy::Fail`]).
    pub failure: Option<ProcessorError>,
}

/// How [`Runtime::run_with`] makes a run, beyond its processors, context
/// and history.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunOptions {
    /// Record each call in its report ([`ProcessorReport::record`]): what it
    /// saw and answered, by digest, so that it can be replayed. Costs hashing
    /// the history before and after each processor, and its answer.
    pub record: bool,
}

/// The processor runtime. See the [module documentation](self).
pub struct Runtime {
    cache: Option<CompileCache>,
    config: RuntimeConfig,
    /// The engine, the deadline ticker and what every call needs (shared
    /// with the hooks this runtime loads).
    sandbox: Sandbox,
}

impl Runtime {
    /// A runtime with its engine and its deadline ticker thread.
    pub fn new(config: RuntimeConfig) -> Result<Self> {
        let wasm = engine_config(config.max_wasm_stack, config.pooling);
        let engine = Engine::new(&wasm)
            .map_err(anyhow::Error::from)
            .context("creating the WebAssembly engine")?;
        let cache = config
            .cache_dir
            .as_deref()
            .map(|root| CompileCache::new(root, &engine));
        let ticker = Ticker::start(&engine, config.epoch_tick)?;
        let sandbox = Sandbox {
            engine,
            tick: config.epoch_tick,
            stack: config.max_wasm_stack,
            counter: Arc::clone(&config.counter),
            _ticker: Arc::new(ticker),
        };
        Ok(Runtime {
            cache,
            config,
            sandbox,
        })
    }

    /// The compile cache, when there is one.
    pub fn cache(&self) -> Option<&CompileCache> {
        self.cache.as_ref()
    }

    /// Loads a processor from a component file.
    pub fn load_file(&self, path: &Path, options: ProcessorOptions) -> Result<Processor> {
        let bytes = self.read_component("processor", path)?;
        self.load(&path.display().to_string(), &bytes, options)
    }

    /// Reads a processor's component file as [`load_file`](Self::load_file)
    /// does, without loading it: a regular file, within
    /// [`RuntimeConfig::max_component_bytes`]. For a caller that checks the
    /// bytes (their digest, say) before [`load`](Self::load)ing them.
    pub fn read_processor_file(&self, path: &Path) -> Result<Vec<u8>> {
        self.read_component("processor", path)
    }

    /// Reads a component file (`what` names it in errors): a regular file
    /// only, opened without blocking, so that a FIFO, a device such as
    /// `/dev/zero` or a folder given as the path is refused at once instead
    /// of hanging the host or reading without end; and at most
    /// [`RuntimeConfig::max_component_bytes`] of it, even if it grows while
    /// it is read.
    pub(crate) fn read_component(&self, what: &str, path: &Path) -> Result<Vec<u8>> {
        use std::io::Read;
        let source = path.display().to_string();
        let mut options = std::fs::OpenOptions::new();
        options.read(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK);
        let file = options
            .open(path)
            .with_context(|| format!("reading {what} {source}"))?;
        let meta = file
            .metadata()
            .with_context(|| format!("reading {what} {source}"))?;
        if !meta.is_file() {
            let kind = if meta.is_dir() {
                "a folder"
            } else {
                "not a regular file (a pipe, a device or a socket)"
            };
            bail!("{what} {source} is {kind}; give the path of a .wasm component");
        }
        self.check_size(&source, meta.len())?;
        let max = self.config.max_component_bytes as u64;
        let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
        file.take(max + 1)
            .read_to_end(&mut bytes)
            .with_context(|| format!("reading {what} {source}"))?;
        self.check_size(&source, bytes.len() as u64)?;
        Ok(bytes)
    }

    fn check_size(&self, source: &str, size: u64) -> Result<()> {
        let max = self.config.max_component_bytes;
        if size > max as u64 {
            bail!(
                "{source} is {}, over the limit of {} for a component; to accept larger \
                 components, raise {MAX_COMPONENT_ENV} (MiB) or RuntimeConfig::max_component_bytes",
                mib(usize::try_from(size).unwrap_or(usize::MAX)),
                mib(max)
            );
        }
        Ok(())
    }

    /// Refuses what cannot be a component the runtime can run under
    /// `limits`: too large, a core module or garbage, a memory limit over
    /// what the pooling allocator holds.
    fn check_component(&self, source: &str, bytes: &[u8], limits: &Limits) -> Result<()> {
        self.check_size(source, bytes.len() as u64)?;
        match bytes.get(4..8) {
            Some([0x0d, 0x00, 0x01, 0x00]) if bytes.starts_with(b"\0asm") => {}
            Some([0x01, 0x00, 0x00, 0x00]) if bytes.starts_with(b"\0asm") => bail!(
                "{source} is a core WebAssembly module, not a component: turn it into one \
                 with `wasm-tools component new` or build it with `agent-host processor build`"
            ),
            _ => bail!("{source} is not a WebAssembly component (bad header)"),
        }
        if self.config.pooling && limits.memory_bytes > POOL_MAX_MEMORY {
            bail!(
                "{source}: a memory limit of {} is over the {} a pooled runtime allows",
                mib(limits.memory_bytes),
                mib(POOL_MAX_MEMORY)
            );
        }
        if self.config.pooling && limits.table_elements > POOL_MAX_TABLE_ELEMENTS {
            bail!(
                "{source}: a table limit of {} elements is over the {POOL_MAX_TABLE_ELEMENTS} a \
                 pooled runtime allows",
                limits.table_elements
            );
        }
        Ok(())
    }

    /// Compiles `bytes`, or loads them from the compile cache; returns the
    /// component, its SHA-256 and which of the two happened.
    fn compile(
        &self,
        source: &str,
        bytes: &[u8],
    ) -> Result<(wasmtime::component::Component, String, CacheOutcome)> {
        let sha256 = cache::sha256(bytes);
        let hash = cache::hex(&sha256);
        let engine = &self.sandbox.engine;
        let compile = || match &self.config.compile {
            CompileIsolation::InProcess => {
                wasmtime::component::Component::new(engine, bytes).map_err(anyhow::Error::from)
            }
            CompileIsolation::Child {
                exe,
                timeout,
                memory_bytes,
            } => compile::in_child(
                engine,
                (self.config.max_wasm_stack, self.config.pooling),
                (exe, *timeout, *memory_bytes),
                source,
                bytes,
            ),
        };
        let (component, compile) = match &self.cache {
            Some(cache) => cache.load_or_compile(engine, &sha256, compile),
            None => compile().map(|c| (c, CacheOutcome::CompiledUncached)),
        }
        .with_context(|| format!("compiling {source}"))?;
        Ok((component, hash, compile))
    }

    /// Loads a processor from component bytes; `source` names it in errors.
    ///
    /// Compiles it (or loads it from the cache), refuses imports the host
    /// cannot grant, pre-links it and calls its `describe` export.
    pub fn load(&self, source: &str, bytes: &[u8], options: ProcessorOptions) -> Result<Processor> {
        let start = Instant::now();
        self.check_component(source, bytes, &options.limits)?;
        check_config(source, options.config.as_deref())?;
        let mut dirs = Vec::with_capacity(options.grants.read_dirs.len());
        for dir in &options.grants.read_dirs {
            let canonical = dir
                .canonicalize()
                .with_context(|| format!("granted directory {}", dir.display()))?;
            if !canonical.is_dir() {
                bail!("granted directory {} is not a directory", dir.display());
            }
            dirs.push(canonical);
        }
        let mut options = options;
        options.grants.read_dirs = dirs;

        let (component, hash, compile) = self.compile(source, bytes)?;

        // The contract version is the processor interface the component
        // exports; each version links through its own bindings.
        let v0_2 = component
            .component_type()
            .get_export(&self.sandbox.engine, v0_2::PROCESSOR_INTERFACE)
            .is_some();
        let (imports, process) = self.contract(
            &component,
            source,
            Contract {
                interface: if v0_2 {
                    v0_2::PROCESSOR_INTERFACE
                } else {
                    bindings::PROCESSOR_INTERFACE
                },
                function: "process",
                who: "processors",
                wasi: "closed unless granted",
                other: hook::HOOK_INTERFACE,
                other_hint: "it is a session hook: load it with `Runtime::load_hook`",
                hint: "is it a history processor?",
            },
        )?;
        let uses_wasi = imports
            .iter()
            .any(|i| matches!(i.serves, ImportUse::Wasi { .. }));

        let mut linker = Linker::<State>::new(&self.sandbox.engine);
        if v0_2 {
            v0_2::HistoryProcessor::add_to_linker::<State, HasSelf<State>>(&mut linker, |s| s)
                .and_then(|()| v0_2::shadow(&mut linker))
        } else {
            HistoryProcessor::add_to_linker::<State, HasSelf<State>>(&mut linker, |s| s)
        }
        .map_err(anyhow::Error::from)
        .context("linking the host interface")?;
        if uses_wasi {
            wasi::add_to_linker(&mut linker, &options.grants)
                .map_err(anyhow::Error::from)
                .context("linking WASI")?;
        }
        let pre = linker
            .instantiate_pre(&component)
            .map_err(anyhow::Error::from)
            .with_context(|| format!("linking {source}"))?;
        let bound = if v0_2 {
            Bound::V0_2 {
                pre: v0_2::HistoryProcessorPre::new(pre)
                    .map_err(anyhow::Error::from)
                    .with_context(|| format!("linking {source}"))?,
            }
        } else {
            Bound::V0_1 {
                pre: HistoryProcessorPre::new(pre)
                    .map_err(anyhow::Error::from)
                    .with_context(|| format!("linking {source}"))?,
                process,
            }
        };

        let config: Arc<str> = options.config.as_deref().unwrap_or("{}").into();
        let mut processor = Processor {
            bound,
            source: source.to_owned(),
            hash,
            description: Description {
                name: fallback_name(source),
                version: String::new(),
                summary: String::new(),
                config_schema: None,
                config_example: None,
                reorders: false,
            },
            imports,
            uses_wasi,
            options,
            config,
            compile,
            load_time: Duration::ZERO,
        };
        let mut call = self.start_call(&processor);
        let described = match &processor.bound {
            Bound::V0_1 { pre, .. } => pre.instantiate(&mut call.store).and_then(|b| {
                call.instantiated = true;
                b.agent_host_history_processor()
                    .call_describe(&mut call.store)
            }),
            Bound::V0_2 { pre } => pre.instantiate(&mut call.store).and_then(|b| {
                call.instantiated = true;
                b.agent_host_history_processor()
                    .call_describe(&mut call.store)
                    .map(|d| wit::Description {
                        name: d.name,
                        version: d.version,
                        summary: d.summary,
                        config_schema: d.config_schema,
                        config_example: d.config_example,
                        reorders: d.reorders,
                    })
            }),
        };
        match described {
            Ok(d) => {
                if let Some(why) = oversized_description(
                    &d.name,
                    &d.version,
                    &d.summary,
                    d.config_schema.as_deref(),
                    d.config_example.as_deref(),
                ) {
                    bail!("{source}: its `describe` export {why}");
                }
                if !d.name.trim().is_empty() {
                    processor.description.name = d.name;
                }
                processor.description.version = d.version;
                processor.description.summary = d.summary;
                processor.description.config_schema = d.config_schema;
                processor.description.config_example = d.config_example;
                processor.description.reorders = d.reorders;
            }
            Err(e) => {
                let cause = call.classify(&processor.options.limits, e);
                bail!("{source}: its `describe` export {cause}");
            }
        }
        processor.load_time = start.elapsed();
        tracing::debug!(
            processor = processor.name(),
            hash = processor.hash(),
            compile = ?processor.compile,
            ms = processor.load_time.as_secs_f64() * 1e3,
            "processor loaded"
        );
        Ok(processor)
    }

    fn start_call(&self, p: &Processor) -> Call {
        Call::new(
            &self.sandbox,
            &p.options.limits,
            &p.options.grants,
            &p.description.name,
        )
    }

    /// What the host tells a processor about a run over `history`, in
    /// 0.1.0's shape (0.2.0's has the same fields), and each message's token
    /// estimate; fills the report's `tokens_before`.
    fn run_context(
        &self,
        p: &Processor,
        info: &RunInfo,
        history: &[Message],
        report: &mut ProcessorReport,
    ) -> (wit::RunContext, Vec<u32>) {
        let counter = &*self.config.counter;
        let mut usage = agent_host_core::Usage::default();
        let mut turn = 0u32;
        let mut total = 0u64;
        let tokens: Vec<u32> = history
            .iter()
            .map(|m| {
                if m.role == Role::User && !m.synthetic {
                    turn += 1;
                }
                if let Some(u) = m.usage {
                    usage.input_tokens = usage.input_tokens.saturating_add(u.input_tokens);
                    usage.output_tokens = usage.output_tokens.saturating_add(u.output_tokens);
                }
                let t = m.tokens(counter);
                total += u64::from(t);
                t
            })
            .collect();
        report.tokens_before = total;
        let ctx = wit::RunContext {
            session_key: info.session_key.clone(),
            agent: info.agent.clone(),
            model: info.model.clone(),
            context_window: info.context_window,
            budget: info.budget,
            total_tokens: u32::try_from(total).unwrap_or(u32::MAX),
            turn,
            usage: bindings::usage_to_wit(usage),
            now: bindings::timestamp_to_wit(info.now),
            config: p.config.to_string(),
        };
        (ctx, tokens)
    }

    /// Calls one processor on `history` and returns the history (given
    /// back whatever happened), its raw answer and the call's deadline
    /// (which also bounds the host's work on the answer), with the call's
    /// report filled in as far as the call goes.
    fn call(
        &self,
        p: &Processor,
        info: &RunInfo,
        history: Vec<Message>,
        services: &Arc<dyn HostServices>,
        report: &mut ProcessorReport,
        traced: Traced,
    ) -> (Vec<Message>, Called, CallTrace) {
        let (ctx, tokens) = self.run_context(p, info, &history, report);
        let mut trace = CallTrace {
            context: record::RecordedContext::of(&ctx, info.now),
            answer: None,
            sources: Sources::default(),
        };
        let mut call = self.start_call(p);
        let (history, result) = match &p.bound {
            Bound::V0_1 { pre, process } => {
                let counter = &*self.config.counter;
                // Borrowed, not copied: the strings go straight from the
                // history into the guest's memory.
                let wit_history: Vec<bindings::MessageIn<'_>> = history
                    .iter()
                    .map(|m| bindings::message_in(m, counter))
                    .collect();
                let result = pre
                    .instance_pre()
                    .instantiate(&mut call.store)
                    .and_then(|instance| {
                        call.instantiated = true;
                        instance.get_typed_func::<bindings::ProcessParams<'_>, bindings::ProcessResults>(
                            &mut call.store,
                            process,
                        )
                    })
                    .and_then(|f| f.call(&mut call.store, (&ctx, &wit_history)))
                    .map(|(r,)| r);
                drop(wit_history);
                (history, result)
            }
            Bound::V0_2 { pre } => {
                call.store.data_mut().services = Some(services::Meter::new(
                    Arc::clone(services),
                    &p.options.grants,
                    &p.options.limits.services,
                    Arc::clone(&self.config.counter),
                    p.name(),
                ));
                // The history moves into the call's resource table and back
                // out afterwards; the guest reads it through its handle.
                let data = v0_2::HistoryData::new(history, tokens);
                let handle = match call.store.data_mut().table.push(data) {
                    Ok(handle) => handle,
                    Err(e) => unreachable!("a fresh call's resource table has room: {e}"),
                };
                let rep = handle.rep();
                let ctx = v0_2::run_context(ctx);
                let result = pre
                    .instantiate(&mut call.store)
                    .and_then(|b| {
                        call.instantiated = true;
                        b.agent_host_history_processor().call_process(
                            &mut call.store,
                            &ctx,
                            wasmtime::component::Resource::new_borrow(rep),
                        )
                    })
                    .map(|r| match r {
                        Ok(items) => Ok(items.into_iter().map(v0_2::item_v1).collect()),
                        Err(v0_2::wit::Error::BadConfig(m)) => Err(wit::Error::BadConfig(m)),
                        Err(v0_2::wit::Error::Failed(m)) => Err(wit::Error::Failed(m)),
                    });
                let history = match call.store.data_mut().table.delete(handle) {
                    Ok(data) => data.into_messages(),
                    Err(e) => unreachable!("the history stays in the table through the call: {e}"),
                };
                (history, result)
            }
        };
        report.time_ms = call.started.elapsed().as_secs_f64() * 1e3;
        if traced.record {
            trace.answer = match &result {
                Ok(Ok(items)) => Some(record::AnswerRecord::of_items(items)),
                Ok(Err(e)) => Some(record::AnswerRecord::of_error(e)),
                Err(_) => None,
            };
        }
        trace.sources = call.store.data_mut().sources.take();
        // Read after the call: its host service calls moved it.
        let deadline = call.store.data().deadline;
        let outcome = match result {
            Ok(Ok(items)) => Ok((items, deadline)),
            Ok(Err(wit::Error::BadConfig(m))) => Err(Cause::BadConfig(m)),
            Ok(Err(wit::Error::Failed(m))) => Err(Cause::Failed(m)),
            Err(e) => Err(call.classify(&p.options.limits, e)),
        };
        call.finish(report);
        (history, outcome, trace)
    }

    /// Runs `processors` in order over `history`. A processor that fails
    /// under [`FailurePolicy::Skip`] leaves its input to the next one; one
    /// under [`FailurePolicy::Fail`] stops the run, and the failure is in
    /// [`RunOutcome::failure`].
    ///
    /// No host services are offered: a granted service call fails (see
    /// [`Runtime::run_with_services`]).
    pub fn run(
        &self,
        processors: &[Processor],
        info: &RunInfo,
        history: Vec<Message>,
    ) -> RunOutcome {
        self.run_with_services(processors, info, history, Arc::new(NoServices))
    }

    /// [`Runtime::run`], with `services` serving the host service calls of
    /// 0.2.0 processors: each call is checked against the processor's
    /// grants ([`Grants::summarize`], ...) and budget
    /// ([`Limits::services`]) first, and recorded in its report
    /// ([`ProcessorReport::services`]).
    pub fn run_with_services(
        &self,
        processors: &[Processor],
        info: &RunInfo,
        history: Vec<Message>,
        services: Arc<dyn HostServices>,
    ) -> RunOutcome {
        self.run_with(processors, info, history, &RunOptions::default(), services)
    }

    /// [`Runtime::run_with_services`], recording each call in its report
    /// when `options.record` is set (its service calls among it: a replay
    /// answers them again with [`RecordedServices`]).
    pub fn run_with(
        &self,
        processors: &[Processor],
        info: &RunInfo,
        history: Vec<Message>,
        options: &RunOptions,
        services: Arc<dyn HostServices>,
    ) -> RunOutcome {
        let mut messages = history;
        let mut reports = Vec::with_capacity(processors.len());
        for p in processors {
            let mut report = ProcessorReport::new(p);
            report.messages_before = messages.len();
            let input = options.record.then(|| HistoryDigest::of(&messages));
            let traced = Traced {
                record: options.record,
            };
            let (input_messages, called, trace) =
                self.call(p, info, messages, &services, &mut report, traced);
            messages = input_messages;
            let cause = match called {
                Err(cause) => Some(cause),
                Ok((items, deadline)) => {
                    let expired = || Instant::now() >= deadline;
                    let rules = apply::Rules::of(p);
                    let counter = &*self.config.counter;
                    match apply::apply(messages, items, &rules, counter, &mut report, &expired) {
                        Ok(out) => {
                            messages = out;
                            None
                        }
                        // `apply` gives the input back untouched.
                        Err((input, cause)) => {
                            messages = input;
                            Some(cause)
                        }
                    }
                }
            };
            let failure = cause.map(|cause| {
                let error = ProcessorError {
                    name: p.name().to_owned(),
                    hash: p.hash.clone(),
                    role: ComponentRole::Processor,
                    cause,
                };
                report.fail(&error);
                report.tokens_after = report.tokens_before;
                // The report carries the failure; callers decide how loud it is.
                tracing::info!(policy = ?p.options.on_failure, "{error}");
                error
            });
            report.messages_after = messages.len();
            if let Some(input) = input {
                let calls = report.services.clone();
                report.record = Some(Box::new(record::finish(p, input, trace, &messages, calls)));
            }
            reports.push(report);
            if let Some(error) = failure
                && p.options.on_failure == FailurePolicy::Fail
            {
                return RunOutcome {
                    messages,
                    reports,
                    failure: Some(error),
                };
            }
        }
        RunOutcome {
            messages,
            reports,
            failure: None,
        }
    }
}

/// What a call is asked to keep beyond its answer.
struct Traced {
    /// Whether to record the answer's digest.
    record: bool,
}

/// What a call saw and used, for its record.
pub(crate) struct CallTrace {
    pub(crate) context: record::RecordedContext,
    pub(crate) answer: Option<record::AnswerRecord>,
    pub(crate) sources: Sources,
}

/// What one call gave: the raw answer and the call's deadline, or why there
/// is none.
type Called = Result<(Vec<wit::Item>, Instant), Cause>;

/// Refuses a component's configuration that is not JSON, at load rather
/// than at every call.
fn check_config(source: &str, config: Option<&str>) -> Result<()> {
    if let Some(config) = config {
        serde_json::from_str::<serde_json::Value>(config)
            .with_context(|| format!("the configuration for {source} is not valid JSON"))?;
    }
    Ok(())
}

/// The names of a component's exports, for an error message.
/// What a loader requires of a component: the interface and function it
/// must export, and how errors put it.
pub(crate) struct Contract {
    /// The interface it must export.
    pub interface: &'static str,
    /// The function of that interface the host calls.
    pub function: &'static str,
    /// Who must (`processors`, `session hooks`), for the import error.
    pub who: &'static str,
    /// How WASI is served to them, for the import error.
    pub wasi: &'static str,
    /// The other contract's interface.
    pub other: &'static str,
    /// The hint when it exports the other contract instead.
    pub other_hint: &'static str,
    /// The hint when it exports neither.
    pub hint: &'static str,
}

impl Runtime {
    /// Checks `component` against `contract`: its imports are the host's
    /// interface and WASI 0.2 only (audited), and it exports the contract's
    /// interface and function, whose index is returned; an error names the
    /// source and says what it exports instead.
    pub(crate) fn contract(
        &self,
        component: &wasmtime::component::Component,
        source: &str,
        contract: Contract,
    ) -> Result<(Vec<Import>, wasmtime::component::ComponentExportIndex)> {
        let engine = &self.sandbox.engine;
        let ty = component.component_type();
        let imports = wasi::audit(ty.imports(engine).map(|(name, _)| name)).map_err(|name| {
            anyhow!(
                "{source} imports `{name}`, which agent-host cannot grant: {} may import {} or {} \
                 and WASI 0.2 ({})",
                contract.who,
                bindings::HOST_INTERFACE,
                v0_2::HOST_INTERFACE,
                contract.wasi
            )
        })?;
        if ty.get_export(engine, contract.interface).is_none() {
            let exports: Vec<&str> = ty.exports(engine).map(|(n, _)| n).collect();
            let hint = if exports.contains(&contract.other) {
                contract.other_hint
            } else {
                contract.hint
            };
            bail!(
                "{source} does not export {} (it exports: {}); {hint}",
                contract.interface,
                exports_list(&exports),
            );
        }
        let index = component
            .get_export_index(None, contract.interface)
            .and_then(|i| component.get_export_index(Some(&i), contract.function))
            .with_context(|| {
                format!(
                    "{source} exports {} without `{}`",
                    contract.interface, contract.function
                )
            })?;
        Ok((imports, index))
    }
}

fn exports_list(exports: &[&str]) -> String {
    if exports.is_empty() {
        "nothing".to_owned()
    } else {
        exports.join(", ")
    }
}

fn fallback_name(source: &str) -> String {
    Path::new(source)
        .file_stem()
        .map_or_else(|| source.to_owned(), |s| s.to_string_lossy().into_owned())
}

/// What is too long in a processor's `describe()` answer, if anything: the
/// name and version at most [`limits::MAX_DESCRIBE_LABEL`] bytes, the
/// summary, schema and example at most [`limits::MAX_DESCRIBE_TEXT`].
fn oversized_description(
    name: &str,
    version: &str,
    summary: &str,
    schema: Option<&str>,
    example: Option<&str>,
) -> Option<String> {
    let label = limits::MAX_DESCRIBE_LABEL;
    let text = limits::MAX_DESCRIBE_TEXT;
    [
        ("name", name.len(), label),
        ("version", version.len(), label),
        ("summary", summary.len(), text),
        ("config-schema", schema.map_or(0, str::len), text),
        ("config-example", example.map_or(0, str::len), text),
    ]
    .into_iter()
    .find(|(_, len, max)| len > max)
    .map(|(field, len, max)| format!("gave a {field} of {len} bytes; at most {max} are accepted"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_oversized_description_is_named_field_by_field() {
        assert_eq!(
            oversized_description("p", "1.0", "s", Some("{}"), None),
            None
        );
        let long_name = "n".repeat(limits::MAX_DESCRIBE_LABEL + 1);
        let why = oversized_description(&long_name, "1", "", None, None).unwrap();
        assert!(why.contains("name of 257 bytes"), "{why}");
        let schema = "[".repeat(limits::MAX_DESCRIBE_TEXT + 1);
        let why = oversized_description("p", "1", "", Some(&schema), None).unwrap();
        assert!(
            why.contains("config-schema") && why.contains("65536"),
            "{why}"
        );
    }

    #[test]
    fn the_runtime_and_its_processors_can_be_shared_across_threads() {
        fn shared<T: Send + Sync>() {}
        shared::<Runtime>();
        shared::<Processor>();
    }

    #[test]
    fn a_core_module_or_garbage_is_refused_with_what_it_is() {
        let rt = Runtime::new(RuntimeConfig {
            cache_dir: None,
            ..RuntimeConfig::default()
        })
        .unwrap();
        let module = b"\0asm\x01\0\0\0";
        let e = rt
            .load("m.wasm", module, ProcessorOptions::default())
            .err()
            .unwrap();
        assert!(
            format!("{e:#}").contains("core WebAssembly module, not a component"),
            "{e:#}"
        );
        let e = rt
            .load("x.wasm", b"hello", ProcessorOptions::default())
            .err()
            .unwrap();
        assert!(
            format!("{e:#}").contains("not a WebAssembly component"),
            "{e:#}"
        );
    }

    #[test]
    fn an_oversized_component_is_refused_before_compiling() {
        let rt = Runtime::new(RuntimeConfig {
            cache_dir: None,
            max_component_bytes: 16,
            ..RuntimeConfig::default()
        })
        .unwrap();
        let e = rt
            .load("big.wasm", &[0u8; 17], ProcessorOptions::default())
            .err()
            .unwrap();
        assert!(e.to_string().contains("over the limit of 16 bytes"), "{e}");
    }
}
