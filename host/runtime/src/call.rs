//! One call into a guest: its store and limits, the host functions the
//! guest may call (logging, token estimates), and the ticker that drives
//! deadlines.

use super::*;

/// One call in progress: its store and when it started.
pub(crate) struct Call {
    pub(crate) store: Store<State>,
    pub(crate) started: Instant,
    pub(crate) stack: usize,
    /// Whether instantiation succeeded: a later error is about the call.
    pub(crate) instantiated: bool,
}

impl Call {
    /// A fresh store for one call of a guest named `name`, with its limits
    /// and its deadline armed.
    pub(crate) fn new(sandbox: &Sandbox, limits: &Limits, grants: &Grants, name: &str) -> Call {
        let deadline = Instant::now() + limits.deadline;
        let state = State {
            limiter: limits::Limiter::new(limits),
            wasi: None,
            grants: grants.clone(),
            table: {
                let mut table = ResourceTable::new();
                table.set_max_capacity(limits::RESOURCE_TABLE_CAPACITY);
                table
            },
            stdout: MemoryOutputPipe::new(wasi::STDIO_CAPTURE),
            stderr: MemoryOutputPipe::new(wasi::STDIO_CAPTURE),
            logs: Vec::new(),
            logs_dropped: 0,
            max_log_lines: limits.max_log_lines,
            name: name.to_owned(),
            counter: Arc::clone(&sandbox.counter),
            deadline,
            sources: record::SourceLog::default(),
            services: None,
        };
        let mut store = Store::new(&sandbox.engine, state);
        store.limiter(|s| &mut s.limiter);
        store.set_hostcall_fuel(limits::HOSTCALL_FUEL);
        store.set_max_component_handles(limits::MAX_COMPONENT_HANDLES);
        let tick = sandbox.tick;
        store.set_epoch_deadline(ticks_until(limits.deadline, tick));
        // When the epoch deadline comes, the call's deadline decides: a host
        // service call moves it later by the time the service took (that
        // time is not the guest's), so the guest may run on until then.
        store.epoch_deadline_callback(move |ctx| {
            let left = ctx
                .data()
                .deadline
                .saturating_duration_since(Instant::now());
            Ok(if left.is_zero() {
                wasmtime::UpdateDeadline::Interrupt
            } else {
                wasmtime::UpdateDeadline::Continue(ticks_until(left, tick))
            })
        });
        Call {
            store,
            started: Instant::now(),
            stack: sandbox.stack,
            instantiated: false,
        }
    }

    /// Explains a wasmtime error from a call under `limits`, using what the
    /// limiter saw.
    pub(crate) fn classify(&self, limits: &Limits, e: wasmtime::Error) -> Cause {
        let state = self.store.data();
        if wasi::is_interrupt(&e) {
            return Cause::Deadline(limits.deadline);
        }
        if let Some(wanted) = state.limiter.refused_memory {
            return Cause::Memory {
                limit: limits.memory_bytes,
                wanted,
            };
        }
        if state.limiter.refused_table.is_some() {
            return Cause::Table {
                limit: limits.table_elements,
            };
        }
        if let Some(denied) = e.downcast_ref::<wasi::NotGranted>() {
            return Cause::NotGranted(denied.to_string());
        }
        match e.downcast_ref::<Trap>() {
            Some(Trap::StackOverflow) => Cause::Stack(self.stack),
            Some(_) => Cause::Trap(format!("{e:#}")),
            None if !self.instantiated => Cause::Instantiate(format!("{e:#}")),
            // Past instantiation, an error that is not a trap comes from
            // reading the answer out of the guest (a bad pointer, length or
            // discriminant).
            None => Cause::BadAnswer(format!("{e:#}")),
        }
    }

    /// Moves what the call measured and logged into `report`.
    pub(crate) fn finish(mut self, report: &mut ProcessorReport) {
        report.peak_memory_bytes = self.store.data().limiter.peak_memory;
        if let Some(meter) = self.store.data_mut().services.take() {
            report.services = meter.calls;
            report.service_usage = meter.usage;
        }
        report.logs_dropped += self.take_logs(&mut report.logs);
    }

    /// Moves the call's log lines, then what it wrote to stdout and stderr,
    /// into `logs`; returns how many lines were dropped over the cap.
    pub(crate) fn take_logs(&mut self, logs: &mut Vec<LogLine>) -> usize {
        let state = self.store.data_mut();
        logs.append(&mut state.logs);
        for (stream, pipe) in [("stdout", &state.stdout), ("stderr", &state.stderr)] {
            let bytes = pipe.contents();
            for line in String::from_utf8_lossy(&bytes)
                .lines()
                .filter(|l| !l.is_empty())
            {
                logs.push(LogLine {
                    level: stream.to_owned(),
                    text: line.to_owned(),
                });
            }
        }
        state.logs_dropped
    }
}

/// Epoch ticks of `tick` that cover `left`, and one more: the first tick
/// may come at once after the deadline is armed.
fn ticks_until(left: Duration, tick: Duration) -> u64 {
    let tick = tick.as_nanos().max(1);
    u64::try_from(left.as_nanos().div_ceil(tick) + 1).unwrap_or(u64::MAX)
}

/// What every call needs from the runtime: the engine, the deadline clock
/// and the token counter. Cloned into each [`Hook`], so that a hook keeps its
/// deadlines working even after the [`Runtime`] that loaded it is dropped.
#[derive(Clone)]
pub(crate) struct Sandbox {
    pub(crate) engine: Engine,
    /// The interval of the epoch ticker.
    pub(crate) tick: Duration,
    /// The wasm stack of every call, in bytes.
    pub(crate) stack: usize,
    pub(crate) counter: Arc<dyn TokenCounter>,
    /// Keeps the epoch ticker running while anything can still make a call.
    pub(crate) _ticker: Arc<Ticker>,
}

/// The data of one call's store.
pub(crate) struct State {
    pub(crate) limiter: limits::Limiter,
    /// Built on the first WASI call: processors without WASI never pay for it.
    pub(crate) wasi: Option<WasiCtx>,
    pub(crate) grants: Grants,
    pub(crate) table: ResourceTable,
    pub(crate) stdout: MemoryOutputPipe,
    pub(crate) stderr: MemoryOutputPipe,
    pub(crate) logs: Vec<LogLine>,
    pub(crate) logs_dropped: usize,
    pub(crate) max_log_lines: usize,
    pub(crate) name: String,
    pub(crate) counter: Arc<dyn TokenCounter>,
    /// When the call must be done: its deadline, moved later by the time
    /// its host service calls took.
    pub(crate) deadline: Instant,
    /// The WASI functions the call used that read a clock, randomness, the
    /// environment or files, and those it was refused.
    pub(crate) sources: record::SourceLog,
    /// The host services of a 0.2.0 processor's call (none for hooks and
    /// 0.1.0 processors).
    pub(crate) services: Option<crate::services::Meter>,
}

impl State {
    /// Serves one host service call through the call's meter, and moves
    /// the deadline later by the time it took.
    pub(crate) fn serve(
        &mut self,
        request: crate::services::ServiceRequest,
    ) -> Result<crate::services::ServiceAnswer, crate::services::ServiceError> {
        let Some(meter) = self.services.as_mut() else {
            return Err(crate::services::ServiceError::Failed(
                "no host services are offered to this call".into(),
            ));
        };
        let (result, took) = meter.serve(request);
        self.deadline += took;
        result
    }
}

impl State {
    /// Keeps a guest's log line (cut to [`MAX_LOG_LINE`] bytes), up to the
    /// call's cap; counts the lines over it.
    pub(crate) fn push_log(&mut self, level: &'static str, text: String) {
        // A long line is copied out cut, so the guest's whole allocation is
        // freed here rather than kept (truncating keeps the capacity).
        let text = if text.len() > MAX_LOG_LINE {
            let mut cut = MAX_LOG_LINE;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            format!("{} [cut]", &text[..cut])
        } else {
            text
        };
        tracing::debug!(processor = %self.name, level, "{text}");
        if self.logs.len() >= self.max_log_lines {
            self.logs_dropped = self.logs_dropped.saturating_add(1);
            return;
        }
        self.logs.push(LogLine {
            level: level.to_owned(),
            text,
        });
    }

    pub(crate) fn wasi_parts(&mut self) -> (&mut WasiCtx, &mut ResourceTable) {
        let State {
            wasi,
            grants,
            table,
            stdout,
            stderr,
            ..
        } = self;
        let ctx = wasi.get_or_insert_with(|| wasi::context(grants, stdout, stderr));
        (ctx, table)
    }
}

impl WasiView for State {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        let (ctx, table) = self.wasi_parts();
        WasiCtxView { ctx, table }
    }
}

impl bindings::agent_host::history::types::Host for State {}

/// The longest log line kept; longer ones are cut.
const MAX_LOG_LINE: usize = 4096;

impl bindings::agent_host::history::host::Host for State {
    fn log(&mut self, level: Level, text: String) {
        let level = match level {
            Level::Trace => "trace",
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
        };
        self.push_log(level, text);
    }

    fn estimate_tokens(&mut self, text: String) -> u32 {
        self.counter.count_text(&text)
    }

    fn estimate_message_tokens(&mut self, message: wit::Message) -> u32 {
        match bindings::from_wit(message) {
            Ok(m) => self.counter.count_message(&m),
            Err(_) => 0,
        }
    }
}

/// Advances the engine's epoch at a fixed interval on its own thread, so
/// that deadlines fire; stops when dropped.
pub(crate) struct Ticker {
    pub(crate) stop: Option<mpsc::Sender<()>>,
    pub(crate) thread: Option<JoinHandle<()>>,
}

impl Ticker {
    pub(crate) fn start(engine: &Engine, tick: Duration) -> Result<Self> {
        let (stop, stopped) = mpsc::channel::<()>();
        let engine = engine.weak();
        let thread = std::thread::Builder::new()
            .name("agent-host-epoch".into())
            .spawn(move || {
                while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(tick) {
                    match engine.upgrade() {
                        Some(engine) => engine.increment_epoch(),
                        None => break,
                    }
                }
            })
            .context("starting the deadline ticker thread")?;
        Ok(Ticker {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
