//! Session hooks: components the host calls when something happens to a
//! session (`agent-host:hooks@0.1.0`, world `session-hook`).
//!
//! A hook runs in the processor sandbox: the runtime's engine and compile
//! cache, a fresh store per call with the same [`Limits`] (deadline by epoch
//! interruption, memory, tables, instances), the same host functions
//! (logging and token estimates), and WASI closed with no grant at all: no
//! files, no network, no clocks, no random numbers.

use serde::Deserialize;
use uuid::Uuid;
use wasmtime::component::{ComponentExportIndex, ComponentType, Lower};

use super::*;

/// The host side of the `agent-host:hooks@0.1.0` contract. The history
/// types and host functions it uses are those of the processor bindings.
mod wit_hooks {
    wasmtime::component::bindgen!({
        path: "../../wit/hooks/v0.1.0",
        world: "session-hook",
        with: {
            "agent-host:history/types@0.1.0": crate::bindings::agent_host::history::types,
            "agent-host:history/host@0.1.0": crate::bindings::agent_host::history::host,
        },
    });
}

use wit_hooks::exports::agent_host::hooks::hook as wit_hook;
use wit_hooks::{SessionHook, SessionHookPre};

/// The name of the export that carries the hook in 0.1.0.
pub(crate) const HOOK_INTERFACE: &str = "agent-host:hooks/hook@0.1.0";

/// What happened to a session: the kind of a [`HookEvent`].
///
/// ```
/// use agent_host_runtime::HookKind;
///
/// assert_eq!(HookKind::BeforeCompaction.as_str(), "before_compaction");
/// assert_eq!("session_save".parse::<HookKind>(), Ok(HookKind::SessionSave));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookKind {
    /// A session was created; the event holds the messages it was created
    /// with, usually none.
    SessionCreate,
    /// Messages were appended to a session and are durable; the event holds
    /// the appended messages only.
    SessionSave,
    /// A session was deleted; the event holds no messages.
    SessionDelete,
    /// A summary checkpoint is about to cover the event's messages.
    BeforeCompaction,
}

impl HookKind {
    /// Every kind, in the order of the WIT enum.
    pub const ALL: [HookKind; 4] = [
        HookKind::SessionCreate,
        HookKind::SessionSave,
        HookKind::SessionDelete,
        HookKind::BeforeCompaction,
    ];

    /// The kind's name in snake case, as serde writes it (`session_save`).
    pub fn as_str(self) -> &'static str {
        match self {
            HookKind::SessionCreate => "session_create",
            HookKind::SessionSave => "session_save",
            HookKind::SessionDelete => "session_delete",
            HookKind::BeforeCompaction => "before_compaction",
        }
    }

    fn to_wit(self) -> wit_hook::HookKind {
        match self {
            HookKind::SessionCreate => wit_hook::HookKind::SessionCreate,
            HookKind::SessionSave => wit_hook::HookKind::SessionSave,
            HookKind::SessionDelete => wit_hook::HookKind::SessionDelete,
            HookKind::BeforeCompaction => wit_hook::HookKind::BeforeCompaction,
        }
    }
}

impl std::fmt::Display for HookKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for HookKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        HookKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| {
                format!(
                    "`{s}` is not a hook event: use session_create, session_save, \
                     session_delete or before_compaction"
                )
            })
    }
}

/// One event told to a hook: what happened, to which session, and the
/// messages concerned (see [`HookKind`] for which they are).
///
/// ```
/// use agent_host_core::Message;
/// use agent_host_runtime::{HookEvent, HookKind};
///
/// let session = uuid::Uuid::from_u128(7);
/// let mut event = HookEvent::new(HookKind::SessionSave, session, "main");
/// event.key = Some("telegram:123456".into());
/// event.messages = vec![Message::user("hello")];
/// assert_eq!(event.kind.as_str(), "session_save");
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct HookEvent {
    /// What happened.
    pub kind: HookKind,
    /// The session's id.
    pub session_id: Uuid,
    /// The session's key (`telegram:123456`), when it has one.
    pub key: Option<String>,
    /// The agent that owns the session.
    pub agent: String,
    /// The channel the event came through (`telegram`, `cli`), when known.
    pub channel: Option<String>,
    /// The messages the event concerns.
    pub messages: Vec<Message>,
    /// When the event happened.
    pub at: DateTime<Utc>,
}

impl HookEvent {
    /// An event of `kind` for session `session_id` of `agent`, happening
    /// now, with no key, channel or messages.
    pub fn new(kind: HookKind, session_id: Uuid, agent: impl Into<String>) -> Self {
        HookEvent {
            kind,
            session_id,
            key: None,
            agent: agent.into(),
            channel: None,
            messages: Vec::new(),
            at: Utc::now(),
        }
    }
}

/// How one hook is run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HookOptions {
    /// The name errors and logs give the hook (default: the file name
    /// without its extension).
    pub name: Option<String>,
    /// The hook's configuration, as JSON text (`None` passes `{}`).
    pub config: Option<String>,
    /// Its limits. `max_items` and `max_output_bytes` do not apply: a hook
    /// answers nothing but success or an error.
    pub limits: Limits,
}

/// What a successful hook call did.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct HookOutcome {
    /// Its log lines (from the host's `log`, then stdout and stderr).
    pub logs: Vec<LogLine>,
    /// Log lines dropped over [`Limits::max_log_lines`].
    pub logs_dropped: usize,
    /// Wall-clock time of the call, instantiation included, in milliseconds.
    pub time_ms: f64,
    /// The most linear memory it used, in bytes.
    pub peak_memory_bytes: usize,
}

/// A loaded, audited and pre-linked session hook, ready to be called any
/// number of times, from any number of threads at once.
///
/// A hook keeps the runtime's engine and deadline clock alive: it can be
/// called after the [`Runtime`] that loaded it is dropped.
///
/// ```no_run
/// use agent_host_runtime::{HookEvent, HookKind, HookOptions, Runtime, RuntimeConfig};
///
/// # fn main() -> anyhow::Result<()> {
/// let runtime = Runtime::new(RuntimeConfig::default())?;
/// let hook = runtime.load_hook_file("audit.wasm".as_ref(), HookOptions::default())?;
/// let event = HookEvent::new(HookKind::SessionCreate, uuid::Uuid::nil(), "main");
/// match hook.call(&event) {
///     Ok(outcome) => println!("{} log lines in {} ms", outcome.logs.len(), outcome.time_ms),
///     Err(e) => eprintln!("{e}"),
/// }
/// # Ok(())
/// # }
/// ```
pub struct Hook {
    pre: SessionHookPre<State>,
    /// The `on-event` export, looked up once.
    on_event: ComponentExportIndex,
    name: String,
    source: String,
    hash: String,
    imports: Vec<Import>,
    options: HookOptions,
    config: Arc<str>,
    compile: CacheOutcome,
    load_time: Duration,
    sandbox: Sandbox,
}

impl std::fmt::Debug for Hook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hook")
            .field("name", &self.name)
            .field("source", &self.source)
            .field("hash", &self.hash)
            .field("options", &self.options)
            .field("compile", &self.compile)
            .finish_non_exhaustive()
    }
}

/// A hook event lowered into a guest without copying its messages first:
/// the borrowed twin of the WIT `hook-event`, field for field.
#[derive(ComponentType, Lower)]
#[component(record)]
struct HookEventIn<'a> {
    kind: wit_hook::HookKind,
    #[component(name = "session-id")]
    session_id: &'a str,
    key: Option<&'a str>,
    agent: &'a str,
    channel: Option<&'a str>,
    messages: Vec<bindings::MessageIn<'a>>,
    at: wit::Timestamp,
    config: &'a str,
}

/// The parameters of `on-event`, with the event borrowed.
type OnEventParams<'a> = (&'a HookEventIn<'a>,);
/// The results of `on-event`.
type OnEventResults = (Result<(), wit::Error>,);

impl Hook {
    /// The hook's name (from its options; the file name if none).
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The SHA-256 of the component, in hex.
    pub fn hash(&self) -> &str {
        &self.hash
    }
    /// Where it was loaded from.
    pub fn source(&self) -> &str {
        &self.source
    }
    /// Its imports and how each is served.
    pub fn imports(&self) -> &[Import] {
        &self.imports
    }
    /// How it runs.
    pub fn options(&self) -> &HookOptions {
        &self.options
    }
    /// Whether it was compiled or loaded from the cache.
    pub fn compile(&self) -> CacheOutcome {
        self.compile
    }
    /// How long loading took (compile or cache load, audit, link, a trial
    /// instantiation).
    pub fn load_time(&self) -> Duration {
        self.load_time
    }

    /// Tells the hook about `event`, in a fresh instance under the hook's
    /// limits, and waits for its answer (at most its deadline).
    ///
    /// Blocks the calling thread: from async code, call it inside
    /// `tokio::task::spawn_blocking`. A trap, a missed deadline, a limit
    /// hit or an error the hook returns is a [`ProcessorError`] whose role
    /// is [`ComponentRole::Hook`] and whose message names the hook, its
    /// hash, the event and the cause.
    pub fn call(&self, event: &HookEvent) -> Result<HookOutcome, ProcessorError> {
        let counter = &*self.sandbox.counter;
        let session_id = event.session_id.to_string();
        let wit_event = HookEventIn {
            kind: event.kind.to_wit(),
            session_id: &session_id,
            key: event.key.as_deref(),
            agent: &event.agent,
            channel: event.channel.as_deref(),
            messages: event
                .messages
                .iter()
                .map(|m| bindings::message_in(m, counter))
                .collect(),
            at: bindings::timestamp_to_wit(event.at),
            config: &self.config,
        };
        let mut call = self.start_call();
        let result = self
            .pre
            .instance_pre()
            .instantiate(&mut call.store)
            .and_then(|instance| {
                call.instantiated = true;
                instance.get_typed_func::<OnEventParams<'_>, OnEventResults>(
                    &mut call.store,
                    &self.on_event,
                )
            })
            .and_then(|f| f.call(&mut call.store, (&wit_event,)))
            .map(|(r,)| r);
        let time_ms = call.started.elapsed().as_secs_f64() * 1e3;
        let cause = match result {
            Ok(Ok(())) => {
                let mut outcome = HookOutcome {
                    time_ms,
                    peak_memory_bytes: call.store.data().limiter.peak_memory,
                    ..HookOutcome::default()
                };
                outcome.logs_dropped = call.take_logs(&mut outcome.logs);
                return Ok(outcome);
            }
            Ok(Err(wit::Error::BadConfig(m))) => Cause::BadConfig(m),
            Ok(Err(wit::Error::Failed(m))) => Cause::Failed(m),
            Err(e) => call.classify(&self.options.limits, e),
        };
        let error = ProcessorError {
            name: self.name.clone(),
            hash: self.hash.clone(),
            role: ComponentRole::Hook(event.kind),
            cause,
        };
        tracing::debug!(ms = time_ms, "{error}");
        Err(error)
    }

    fn start_call(&self) -> Call {
        // No grant, ever: WASI stays closed for hooks.
        Call::new(
            &self.sandbox,
            &self.options.limits,
            &Grants::default(),
            &self.name,
        )
    }
}

impl Runtime {
    /// Loads a session hook from a component file.
    ///
    /// See [`Runtime::load_hook`] for what is checked.
    pub fn load_hook_file(&self, path: &Path, options: HookOptions) -> Result<Hook> {
        let bytes = self.read_component("hook", path)?;
        self.load_hook(&path.display().to_string(), &bytes, options)
    }

    /// Loads a session hook from component bytes; `source` names it in
    /// errors.
    ///
    /// Compiles it (or loads it from the compile cache), refuses a
    /// component that does not export `agent-host:hooks/hook@0.1.0` (a
    /// history processor, say) or that imports anything but the host's
    /// interface and WASI 0.2 (served closed), checks that the configuration
    /// is JSON, pre-links it and instantiates it once, under its limits, to
    /// catch a component that cannot start.
    pub fn load_hook(&self, source: &str, bytes: &[u8], options: HookOptions) -> Result<Hook> {
        let start = Instant::now();
        self.check_component(source, bytes, &options.limits)?;
        check_config(source, options.config.as_deref())?;
        let (component, hash, compile) = self.compile(source, bytes)?;

        let (imports, on_event) = self.contract(
            &component,
            source,
            crate::Contract {
                interface: HOOK_INTERFACE,
                function: "on-event",
                who: "session hooks",
                wasi: "always closed",
                other: bindings::PROCESSOR_INTERFACE,
                other_hint: "it is a history processor, not a session hook",
                hint: "is it a session hook?",
            },
        )?;
        let uses_wasi = imports
            .iter()
            .any(|i| matches!(i.serves, ImportUse::Wasi { .. }));

        let mut linker = Linker::<State>::new(&self.sandbox.engine);
        SessionHook::add_to_linker::<State, HasSelf<State>>(&mut linker, |s| s)
            .map_err(anyhow::Error::from)
            .context("linking the host interface")?;
        if uses_wasi {
            wasi::add_to_linker(&mut linker, &Grants::default())
                .map_err(anyhow::Error::from)
                .context("linking WASI")?;
        }
        let pre = linker
            .instantiate_pre(&component)
            .map_err(anyhow::Error::from)
            .with_context(|| format!("linking {source}"))?;
        let pre = SessionHookPre::new(pre)
            .map_err(anyhow::Error::from)
            .with_context(|| format!("linking {source}"))?;

        let name = options
            .name
            .clone()
            .filter(|n| !n.trim().is_empty())
            .unwrap_or_else(|| fallback_name(source));
        let config: Arc<str> = options.config.as_deref().unwrap_or("{}").into();
        let mut hook = Hook {
            pre,
            on_event,
            name,
            source: source.to_owned(),
            hash,
            imports,
            options,
            config,
            compile,
            load_time: Duration::ZERO,
            sandbox: self.sandbox.clone(),
        };
        let mut call = hook.start_call();
        if let Err(e) = hook.pre.instance_pre().instantiate(&mut call.store) {
            let cause = call.classify(&hook.options.limits, e);
            bail!("{source}: a trial instantiation failed: it {cause}");
        }
        hook.load_time = start.elapsed();
        tracing::debug!(
            hook = hook.name(),
            hash = hook.hash(),
            compile = ?hook.compile,
            ms = hook.load_time.as_secs_f64() * 1e3,
            "hook loaded"
        );
        Ok(hook)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hooks_can_be_shared_across_threads() {
        fn shared<T: Send + Sync + std::fmt::Debug>() {}
        shared::<Hook>();
    }

    #[test]
    fn a_kind_names_itself_as_serde_does_and_parses_back() {
        for kind in HookKind::ALL {
            let json = serde_json::to_string(&kind).unwrap();
            assert_eq!(json, format!("\"{}\"", kind.as_str()));
            assert_eq!(serde_json::from_str::<HookKind>(&json).unwrap(), kind);
            assert_eq!(kind.as_str().parse::<HookKind>(), Ok(kind));
            assert_eq!(kind.to_string(), kind.as_str());
        }
        assert!("session-save".parse::<HookKind>().is_err());
    }

    #[test]
    fn a_hook_error_names_the_hook_and_its_event() {
        let e = ProcessorError {
            name: "audit".into(),
            hash: "0123456789abcdef".into(),
            role: ComponentRole::Hook(HookKind::BeforeCompaction),
            cause: Cause::Failed("disk quota".into()),
        };
        assert_eq!(
            e.to_string(),
            "hook `audit` (sha256 0123456789ab) on before_compaction failed: disk quota"
        );
        let e = ProcessorError {
            role: ComponentRole::Processor,
            ..e
        };
        assert_eq!(
            e.to_string(),
            "processor `audit` (sha256 0123456789ab) failed: disk quota"
        );
    }
}
