//! What a loaded processor is, how it is run, and how its failures are
//! told: the types the runtime's callers hold.

use super::*;

/// What to do when a processor fails (a trap, a timeout, a limit, a bad answer).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailurePolicy {
    /// Log it, keep the processor's input, carry on with the next one.
    #[default]
    Skip,
    /// Abort the run with the processor's error.
    Fail,
}

/// What to do with an answer that breaks the provider rules (an orphaned tool
/// result, a call without its result, ...).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InvalidPolicy {
    /// Throw the answer away; the processor's input stands.
    #[default]
    Reject,
    /// Repair the answer with the core repair stage and report the repairs.
    Repair,
}

impl std::str::FromStr for FailurePolicy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "skip" => Ok(FailurePolicy::Skip),
            "fail" => Ok(FailurePolicy::Fail),
            _ => Err(format!(
                "`{s}` is not a failure policy: use `skip` or `fail`"
            )),
        }
    }
}

impl std::str::FromStr for InvalidPolicy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "reject" => Ok(InvalidPolicy::Reject),
            "repair" => Ok(InvalidPolicy::Repair),
            _ => Err(format!(
                "`{s}` is not an invalid-answer policy: use `reject` or `repair`"
            )),
        }
    }
}

/// How one processor is run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcessorOptions {
    /// The processor's configuration, as JSON text (`None` passes `{}`).
    pub config: Option<String>,
    /// Its limits.
    pub limits: Limits,
    /// Its capabilities.
    pub grants: Grants,
    /// What a failure does to the run.
    pub on_failure: FailurePolicy,
    /// What an answer that breaks the provider rules becomes.
    pub on_invalid: InvalidPolicy,
}

/// What a processor says about itself (its `describe` export).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Description {
    /// Short name.
    pub name: String,
    /// Version.
    pub version: String,
    /// What it does.
    pub summary: String,
    /// The JSON Schema of its configuration, when published.
    pub config_schema: Option<String>,
    /// An example configuration.
    pub config_example: Option<String>,
    /// Whether its answers may reorder kept messages.
    pub reorders: bool,
}

/// A loaded, audited and pre-linked processor, ready to be called any
/// number of times from any thread.
pub struct Processor {
    /// The component linked through the bindings of its contract version.
    pub(crate) bound: Bound,
    pub(crate) source: String,
    pub(crate) hash: String,
    pub(crate) description: Description,
    pub(crate) imports: Vec<Import>,
    pub(crate) uses_wasi: bool,
    pub(crate) options: ProcessorOptions,
    pub(crate) config: Arc<str>,
    pub(crate) compile: CacheOutcome,
    pub(crate) load_time: Duration,
}

/// A processor's component, linked through the bindings of the contract
/// version it exports: one module per version (`bindings` for 0.1.0,
/// `v0_2` for 0.2.0).
pub(crate) enum Bound {
    /// `agent-host:history@0.1.0`: the history is copied in as a list.
    V0_1 {
        pre: HistoryProcessorPre<State>,
        /// The `process` export, looked up once.
        process: wasmtime::component::ComponentExportIndex,
    },
    /// `agent-host:history@0.2.0`: the history is a resource read on demand.
    V0_2 {
        pre: crate::v0_2::HistoryProcessorPre<State>,
    },
}

impl Processor {
    /// The version of the `agent-host:history` contract the processor
    /// speaks (`0.1.0`, `0.2.0`), from the interface it exports.
    pub fn contract(&self) -> &'static str {
        match self.bound {
            Bound::V0_1 { .. } => "0.1.0",
            Bound::V0_2 { .. } => "0.2.0",
        }
    }
    /// The processor's name (from its description; the file name if empty).
    pub fn name(&self) -> &str {
        &self.description.name
    }
    /// The SHA-256 of the component, in hex.
    pub fn hash(&self) -> &str {
        &self.hash
    }
    /// Where it was loaded from.
    pub fn source(&self) -> &str {
        &self.source
    }
    /// Its description.
    pub fn description(&self) -> &Description {
        &self.description
    }
    /// Its imports and how each is served.
    pub fn imports(&self) -> &[Import] {
        &self.imports
    }
    /// Whether it imports any WASI interface (a `wasm32-wasip2` guest does).
    pub fn uses_wasi(&self) -> bool {
        self.uses_wasi
    }
    /// How it runs.
    pub fn options(&self) -> &ProcessorOptions {
        &self.options
    }
    /// Whether it was compiled or loaded from the cache.
    pub fn compile(&self) -> CacheOutcome {
        self.compile
    }
    /// How long loading took (compile or cache load, audit, link, describe).
    pub fn load_time(&self) -> Duration {
        self.load_time
    }
}

/// What the host knows about the run, passed to every processor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunInfo {
    /// The session's key, when the history is a stored session.
    pub session_key: Option<String>,
    /// The agent the run is for.
    pub agent: Option<String>,
    /// The model the history is for.
    pub model: Option<String>,
    /// The model's context window, in tokens.
    pub context_window: u32,
    /// Tokens available for the history.
    pub budget: u32,
    /// The time of the run.
    pub now: DateTime<Utc>,
}

impl Default for RunInfo {
    fn default() -> Self {
        let budget = agent_host_core::budget::BudgetConfig::default();
        RunInfo {
            session_key: None,
            agent: None,
            model: None,
            context_window: budget.context_limit,
            budget: budget.available(),
            now: Utc::now(),
        }
    }
}

/// A component's failure: which processor or session hook, and why.
///
/// Its message names the component and the first 12 hex digits of its
/// hash: `processor `trim` (sha256 0123456789ab) ran past its deadline of
/// 250 ms`, or for a hook, with the event it was handling, `hook `audit`
/// (sha256 0123456789ab) on session_save failed: disk quota`.
#[derive(Debug)]
pub struct ProcessorError {
    /// The component's name.
    pub name: String,
    /// The SHA-256 of its component.
    pub hash: String,
    /// What the component was doing: processing a history, or handling a
    /// session event as a hook.
    pub role: ComponentRole,
    /// What went wrong.
    pub cause: Cause,
}

impl std::fmt::Display for ProcessorError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let short = self.hash.get(..12).unwrap_or(&self.hash);
        match self.role {
            ComponentRole::Processor => {
                write!(
                    f,
                    "processor `{}` (sha256 {short}) {}",
                    self.name, self.cause
                )
            }
            ComponentRole::Hook(kind) => write!(
                f,
                "hook `{}` (sha256 {short}) on {kind} {}",
                self.name, self.cause
            ),
        }
    }
}

impl std::error::Error for ProcessorError {}

/// What a failed component was doing, which says what a
/// [`ProcessorError`] is about.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(tag = "role", content = "event", rename_all = "snake_case")]
pub enum ComponentRole {
    /// A history processor, processing a history.
    #[default]
    Processor,
    /// A session hook, handling an event of this kind.
    Hook(HookKind),
}

impl ProcessorError {
    /// What kind of failure this is: a processor failure whatever the cause
    /// (the front ends report the cause itself).
    pub fn kind(&self) -> agent_host_core::ErrorKind {
        agent_host_core::ErrorKind::ProcessorFailed
    }
}

/// Why a processor call did not give a usable answer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize)]
#[serde(tag = "kind", content = "detail", rename_all = "snake_case")]
pub enum Cause {
    /// It ran past its deadline.
    #[error("ran past its deadline of {} ms", .0.as_millis())]
    Deadline(Duration),
    /// It asked for more linear memory than its limit.
    #[error("hit its memory limit of {} (it asked for {})", mib(*limit), mib(*wanted))]
    Memory {
        /// The limit, in bytes.
        limit: usize,
        /// What it asked for, in bytes.
        wanted: usize,
    },
    /// It asked for more table elements than its limit.
    #[error("hit its table limit of {limit} elements")]
    Table {
        /// The limit.
        limit: usize,
    },
    /// It overflowed the wasm stack (deep recursion).
    #[error("exhausted its wasm stack of {} KiB (too deep a recursion)", .0 / 1024)]
    Stack(usize),
    /// It called a capability it was not granted.
    #[error("{0}")]
    NotGranted(String),
    /// It trapped (a panic, an `unreachable`, an out-of-bounds access).
    #[error("trapped: {0}")]
    Trap(String),
    /// It could not be instantiated.
    #[error("could not be instantiated: {0}")]
    Instantiate(String),
    /// It refused its configuration.
    #[error("rejected its configuration: {0}")]
    BadConfig(String),
    /// It reported a failure.
    #[error("failed: {0}")]
    Failed(String),
    /// Its answer could not be used (a bad index, a duplicate, too large).
    #[error("gave an unusable answer: {0}")]
    BadAnswer(String),
    /// Its answer breaks the provider rules and was rejected.
    #[error("gave an answer that breaks the provider rules: {0}")]
    Invalid(String),
}
