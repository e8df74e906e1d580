//! `agent_host._native`: the CPython extension behind the `agent-host`
//! Python package (`host/python/python/agent_host`).
//!
//! It is a front end like the CLI: it parses what Python hands it, calls
//! core, the engine's transcript reader, the sandbox runtime and the stores,
//! and hands back plain data. Every call that reads files, compiles or runs
//! a component, or touches a store runs with the GIL released
//! ([`Python::detach`]), so other Python threads (and the package's asyncio
//! API, which runs these calls in a thread) go on meanwhile.
//!
//! Messages cross the boundary as JSON text: a history given as Python
//! objects is serialised by Python's `json` and read by core's format
//! detection like a file would be, and what comes back is the JSON a format
//! writer makes, parsed by Python's `json`. One code path reads every input.
//!
//! Errors become the exception classes of `agent_host.errors`, one per
//! [`ErrorKind`], registered by the package at import
//! (`register_errors`): the CLI maps a kind to an exit code, the server to
//! a status, this module to a class.

use std::io::Cursor;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use agent_host_core::budget::BudgetConfig;
use agent_host_core::extractive::ExtractiveSummarizer;
use agent_host_core::format::{self, Format, FormatError, Limits};
use agent_host_core::pipeline::{self, PipelineConfig};
use agent_host_core::query::{self, Query, QueryError};
use agent_host_core::validate::validate;
use agent_host_core::{ErrorKind, HeuristicCounter, Message, Role};
use agent_host_engine::EngineError;
use agent_host_engine::transcript;
use agent_host_runtime::{
    FailurePolicy, Grants, InvalidPolicy, ProcessorError, ProcessorOptions, RunInfo, Runtime,
    RuntimeConfig,
};
use agent_host_store::{NewSession, SessionMeta, SessionRef, SessionStore, StoreError};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList, PyString};
use serde_json::{Value, json};

/// The exception class of each error kind, registered by the package.
static ERRORS: PyOnceLock<Py<PyDict>> = PyOnceLock::new();

/// Registers the exception classes, a dict from kind name (`not_found`,
/// ...) to class. Called once by `agent_host/__init__.py`.
#[pyfunction]
fn register_errors(py: Python<'_>, classes: Bound<'_, PyDict>) -> PyResult<()> {
    let _ = ERRORS.set(py, classes.unbind());
    Ok(())
}

/// The kind of the first classified error in `error`'s chain, else
/// `fallback`.
fn kind_of(error: &anyhow::Error, fallback: ErrorKind) -> ErrorKind {
    for cause in error.chain() {
        if let Some(e) = cause.downcast_ref::<EngineError>() {
            return e.kind();
        } else if let Some(e) = cause.downcast_ref::<StoreError>() {
            return e.kind();
        } else if let Some(e) = cause.downcast_ref::<ProcessorError>() {
            return e.kind();
        } else if let Some(e) = cause.downcast_ref::<FormatError>() {
            return e.kind();
        } else if cause.is::<QueryError>() {
            return ErrorKind::InvalidInput;
        } else if let Some(e) = cause.downcast_ref::<std::io::Error>() {
            return match e.kind() {
                std::io::ErrorKind::NotFound => ErrorKind::NotFound,
                std::io::ErrorKind::InvalidData | std::io::ErrorKind::InvalidInput => {
                    ErrorKind::InvalidInput
                }
                _ => ErrorKind::Io,
            };
        }
    }
    fallback
}

/// A Python exception of the class registered for `kind`.
fn raise(py: Python<'_>, kind: ErrorKind, message: String) -> PyErr {
    let class = ERRORS
        .get(py)
        .and_then(|classes| classes.bind(py).get_item(kind.as_str()).ok().flatten());
    match class.map(|c| c.call1((message.clone(),))) {
        Some(Ok(instance)) => PyErr::from_value(instance),
        Some(Err(e)) => e,
        None => PyRuntimeError::new_err(format!("{kind}: {message}")),
    }
}

/// `error` as the exception of its kind (`fallback` when nothing in its
/// chain says one), its message the whole chain on one line.
fn to_py(py: Python<'_>, error: anyhow::Error, fallback: ErrorKind) -> PyErr {
    let kind = kind_of(&error, fallback);
    raise(py, kind, format!("{error:#}"))
}

fn invalid(py: Python<'_>, message: impl Into<String>) -> PyErr {
    raise(py, ErrorKind::InvalidInput, message.into())
}

fn parse_format(py: Python<'_>, name: Option<&str>) -> PyResult<Option<Format>> {
    name.map(|n| n.parse::<Format>().map_err(|e| invalid(py, e)))
        .transpose()
}

fn json_loads<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
    py.import("json")?.call_method1("loads", (text,))
}

fn json_dumps(py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<String> {
    py.import("json")?
        .call_method1("dumps", (value,))?
        .extract::<String>()
}

fn counter() -> &'static HeuristicCounter {
    static COUNTER: OnceLock<HeuristicCounter> = OnceLock::new();
    COUNTER.get_or_init(HeuristicCounter::default)
}

fn total_tokens(messages: &[Message]) -> u64 {
    agent_host_core::tokens::total(messages, counter())
}

/// A history: messages in agent-host's model, with where they came from and
/// the format they were read as.
///
/// Make one with `agent_host.load(path)`, `agent_host.loads(text)` or
/// `agent_host.from_messages(list_of_dicts)`; every supported format is
/// detected (native JSONL, OpenAI, Anthropic, Responses, Claude Code,
/// Codex, Gemini CLI, pydantic-ai, LangChain) unless `format` names one.
#[pyclass(frozen, module = "agent_host")]
pub struct History {
    messages: Arc<Vec<Message>>,
    format: Format,
    source: String,
    title: Option<String>,
    quarantined: Vec<String>,
}

impl History {
    fn of(messages: Vec<Message>, format: Format, source: String) -> History {
        History {
            messages: Arc::new(messages),
            format,
            source,
            title: None,
            quarantined: Vec::new(),
        }
    }

    fn from_loaded(loaded: transcript::Loaded) -> History {
        let t = loaded.transcript;
        History {
            messages: Arc::new(t.messages),
            format: loaded.format,
            source: loaded.source,
            title: t.title,
            quarantined: t
                .quarantined
                .iter()
                .map(|q| format!("line {}: {}", q.line, q.error))
                .collect(),
        }
    }

    /// Reads `text`, detecting its format unless `format` is given.
    fn read_text(
        py: Python<'_>,
        text: String,
        format: Option<Format>,
        source: String,
    ) -> PyResult<History> {
        let limits = Limits::default();
        py.detach(move || transcript::read(Cursor::new(text.into_bytes()), source, format, &limits))
            .map(History::from_loaded)
            .map_err(|e| to_py(py, e, ErrorKind::InvalidInput))
    }

    /// The messages of `value`: a `History`, a string of any supported
    /// format, or Python objects (a list of message dicts, a document).
    fn messages_of(
        py: Python<'_>,
        value: &Bound<'_, PyAny>,
        format: Option<Format>,
    ) -> PyResult<Arc<Vec<Message>>> {
        if let Ok(h) = value.cast::<History>() {
            return Ok(Arc::clone(&h.get().messages));
        }
        let text = if let Ok(s) = value.cast::<PyString>() {
            s.extract::<String>()?
        } else {
            json_dumps(py, value)
                .map_err(|e| invalid(py, format!("the messages are not JSON-serialisable: {e}")))?
        };
        Ok(History::read_text(py, text, format, "<messages>".to_owned())?.messages)
    }
}

#[pymethods]
impl History {
    /// Reads the history in the file at `path`, in `format` or a detected
    /// one, within the default limits (256 MiB, 500,000 messages).
    #[staticmethod]
    #[pyo3(signature = (path, format = None))]
    fn from_path(py: Python<'_>, path: PathBuf, format: Option<&str>) -> PyResult<History> {
        let format = parse_format(py, format)?;
        let limits = Limits::default();
        py.detach(move || transcript::load(&path, format, &limits))
            .map(History::from_loaded)
            .map_err(|e| to_py(py, e, ErrorKind::InvalidInput))
    }

    /// Reads a history from `text` (any supported format, JSON or JSONL).
    #[staticmethod]
    #[pyo3(signature = (text, format = None, source = None))]
    fn from_string(
        py: Python<'_>,
        text: String,
        format: Option<&str>,
        source: Option<String>,
    ) -> PyResult<History> {
        let format = parse_format(py, format)?;
        History::read_text(
            py,
            text,
            format,
            source.unwrap_or_else(|| "<string>".into()),
        )
    }

    /// Reads a history from Python objects: a list of message dicts (OpenAI,
    /// Anthropic, Responses, pydantic-ai, LangChain or native records) or a
    /// whole document such as an Anthropic request.
    #[staticmethod]
    #[pyo3(signature = (messages, format = None))]
    fn from_messages(
        py: Python<'_>,
        messages: &Bound<'_, PyAny>,
        format: Option<&str>,
    ) -> PyResult<History> {
        let format = parse_format(py, format)?;
        let not_json =
            |e: PyErr| invalid(py, format!("the messages are not JSON-serialisable: {e}"));
        // A line-based format's records, given as a list, are its lines.
        let text = match messages.cast::<PyList>() {
            Ok(list) if format.is_some_and(Format::is_line_based) => {
                let mut lines = Vec::with_capacity(list.len());
                for record in list.iter() {
                    lines.push(json_dumps(py, &record).map_err(not_json)?);
                }
                lines.join("\n")
            }
            _ => json_dumps(py, messages).map_err(not_json)?,
        };
        History::read_text(py, text, format, "<messages>".to_owned())
    }

    /// The format it was read as (`openai`, `jsonl`, `claude-code`, ...).
    #[getter]
    fn format(&self) -> &'static str {
        self.format.name()
    }

    /// Where it came from: a path, `<string>` or `<messages>`.
    #[getter]
    fn source(&self) -> &str {
        &self.source
    }

    /// The title the source carries, if any (Claude Code summaries).
    #[getter]
    fn title(&self) -> Option<&str> {
        self.title.as_deref()
    }

    /// Records of a line-based log that could not be read and were left
    /// out, each `line N: what was wrong`.
    #[getter]
    fn quarantined(&self) -> Vec<String> {
        self.quarantined.clone()
    }

    /// Its size in tokens, by agent-host's heuristic counter.
    #[getter]
    fn tokens(&self) -> u64 {
        total_tokens(&self.messages)
    }

    /// The roles of its messages, in order.
    #[getter]
    fn roles(&self) -> Vec<&'static str> {
        self.messages.iter().map(|m| m.role.as_str()).collect()
    }

    /// The provider rules it breaks (a tool result without its call, ...);
    /// empty when it can be sent as it is.
    fn violations(&self) -> Vec<String> {
        validate(&self.messages)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    /// The history as text in `format`: `openai` (default), `anthropic`,
    /// `responses`, `pydantic-ai` or `jsonl`.
    #[pyo3(signature = (format = "openai"))]
    fn dumps(&self, py: Python<'_>, format: &str) -> PyResult<String> {
        let format = parse_format(py, Some(format))?.unwrap_or(Format::OpenAi);
        let messages = Arc::clone(&self.messages);
        py.detach(move || format::write(format, &messages))
            .map_err(|e| to_py(py, e.into(), ErrorKind::InvalidInput))
    }

    /// The history as Python objects in `format`: a list of message dicts
    /// for `openai` (default), `responses`, `pydantic-ai` and `jsonl` (one
    /// dict per record), and the request dict (`system`, `messages`) for
    /// `anthropic`.
    #[pyo3(signature = (format = "openai"))]
    fn to_messages<'py>(&self, py: Python<'py>, format: &str) -> PyResult<Bound<'py, PyAny>> {
        let format = parse_format(py, Some(format))?.unwrap_or(Format::OpenAi);
        let messages = Arc::clone(&self.messages);
        let text = py
            .detach(move || -> Result<String, FormatError> {
                let text = format::write(format, &messages)?;
                if format == Format::Jsonl {
                    let records: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
                    Ok(format!("[{}]", records.join(",")))
                } else {
                    Ok(text)
                }
            })
            .map_err(|e| to_py(py, e.into(), ErrorKind::InvalidInput))?;
        json_loads(py, &text)
    }

    fn __len__(&self) -> usize {
        self.messages.len()
    }

    fn __repr__(&self) -> String {
        format!(
            "<agent_host.History {} messages, {} format, from {}>",
            self.messages.len(),
            self.format,
            self.source
        )
    }
}

/// The one sandbox runtime of the process: one wasmtime engine, one
/// deadline ticker and the user's compile cache, shared by every processor.
/// Components are compiled in process (an embedding program has no
/// `agent-host` binary to run as the compile child).
fn runtime() -> anyhow::Result<&'static Runtime> {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    if let Some(r) = RUNTIME.get() {
        return Ok(r);
    }
    let made = Runtime::new(RuntimeConfig::default())?;
    Ok(RUNTIME.get_or_init(|| made))
}

/// A history processor: a WebAssembly component run in agent-host's
/// sandbox, with no access to anything but what it is granted.
///
/// `config` is the processor's configuration (a dict, or JSON text);
/// `deadline_ms` and `memory_mib` its limits per call (default 250 ms and
/// 64 MiB); `on_failure` says what a failure does (`"fail"`, the default
/// here, raises `ProcessorFailedError`; `"skip"` keeps its input and says so
/// in the report); `on_invalid` what an answer breaking provider rules
/// becomes (`"reject"` or `"repair"`). Loading compiles the component (or
/// reads the compile cache) with the GIL released.
#[pyclass(frozen, module = "agent_host")]
pub struct Processor {
    inner: Arc<agent_host_runtime::Processor>,
}

#[pymethods]
impl Processor {
    #[new]
    #[pyo3(signature = (
        path,
        config = None,
        *,
        deadline_ms = None,
        memory_mib = None,
        on_failure = "fail",
        on_invalid = "reject",
        allow_dirs = Vec::new(),
        allow_clocks = false,
        allow_random = false,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        config: Option<&Bound<'_, PyAny>>,
        deadline_ms: Option<u64>,
        memory_mib: Option<usize>,
        on_failure: &str,
        on_invalid: &str,
        allow_dirs: Vec<PathBuf>,
        allow_clocks: bool,
        allow_random: bool,
    ) -> PyResult<Processor> {
        let config = match config {
            None => None,
            Some(c) if c.is_none() => None,
            Some(c) => Some(match c.cast::<PyString>() {
                Ok(s) => {
                    let text = s.extract::<String>()?;
                    serde_json::from_str::<Value>(&text).map_err(|e| {
                        invalid(
                            py,
                            format!(
                                "the configuration for {} is not valid JSON: {e}",
                                path.display()
                            ),
                        )
                    })?;
                    text
                }
                Err(_) => json_dumps(py, c).map_err(|e| {
                    invalid(
                        py,
                        format!("the configuration is not JSON-serialisable: {e}"),
                    )
                })?,
            }),
        };
        let mut options = ProcessorOptions {
            config,
            grants: Grants {
                read_dirs: allow_dirs,
                clocks: allow_clocks,
                random: allow_random,
                ..Grants::default()
            },
            on_failure: on_failure
                .parse::<FailurePolicy>()
                .map_err(|e| invalid(py, e))?,
            on_invalid: on_invalid
                .parse::<InvalidPolicy>()
                .map_err(|e| invalid(py, e))?,
            ..ProcessorOptions::default()
        };
        if let Some(ms) = deadline_ms {
            if ms == 0 {
                return Err(invalid(py, "deadline_ms must be at least 1"));
            }
            options.limits.deadline = Duration::from_millis(ms);
        }
        if let Some(mib) = memory_mib {
            if mib == 0 {
                return Err(invalid(py, "memory_mib must be at least 1"));
            }
            options.limits.memory_bytes = mib.checked_mul(1 << 20).ok_or_else(|| {
                raise(
                    py,
                    ErrorKind::LimitExceeded,
                    format!("memory_mib {mib} is too large"),
                )
            })?;
        }
        let loaded = py.detach(move || runtime()?.load_file(&path, options));
        loaded
            .map(|p| Processor { inner: Arc::new(p) })
            .map_err(|e| to_py(py, e, ErrorKind::ProcessorFailed))
    }

    /// The processor's name, from its description.
    #[getter]
    fn name(&self) -> &str {
        self.inner.name()
    }

    /// The processor's version, from its description.
    #[getter]
    fn version(&self) -> &str {
        &self.inner.description().version
    }

    /// The SHA-256 of the component.
    #[getter]
    fn hash(&self) -> &str {
        self.inner.hash()
    }

    /// What the component says of itself: name, version, summary, the JSON
    /// schema and an example of its configuration, whether it reorders.
    fn describe<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let d = serde_json::to_string(self.inner.description())
            .map_err(|e| to_py(py, e.into(), ErrorKind::Internal))?;
        json_loads(py, &d)
    }

    /// Runs this processor alone over `history` (a `History`, text, or
    /// message dicts); `context_limit` is the window it is told of.
    #[pyo3(signature = (history, *, context_limit = None))]
    fn run(
        slf: &Bound<'_, Self>,
        history: &Bound<'_, PyAny>,
        context_limit: Option<u32>,
    ) -> PyResult<RunResult> {
        let py = slf.py();
        let input = input_of(py, history)?;
        execute(
            py,
            input,
            vec![Arc::clone(&slf.get().inner)],
            None,
            context_limit,
        )
    }

    fn __repr__(&self) -> String {
        format!(
            "<agent_host.Processor {} {} from {}>",
            self.inner.name(),
            self.version(),
            self.inner.source()
        )
    }
}

/// What a run made: the resulting history and the report of every stage
/// (the same report `agent-host run --report` writes).
#[pyclass(frozen, module = "agent_host")]
pub struct RunResult {
    history: Py<History>,
    report: String,
}

#[pymethods]
impl RunResult {
    /// The history after the pipeline and the processors.
    #[getter]
    fn history(&self, py: Python<'_>) -> Py<History> {
        self.history.clone_ref(py)
    }

    /// The report (a dict): `input`, `pipeline` (repairs, pruning, summary,
    /// truncation, context use; `None` when only processors ran),
    /// `processors` (one report each: kept, dropped, replaced, inserted,
    /// tokens, time, logs, error), `output`.
    #[getter]
    fn report<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        json_loads(py, &self.report)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "<agent_host.RunResult {} messages>",
            self.history.bind(py).get().messages.len()
        )
    }
}

/// What a run reads: the messages and where they came from.
struct Input {
    messages: Arc<Vec<Message>>,
    source: String,
    format: Format,
}

fn input_of(py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<Input> {
    if let Ok(h) = value.cast::<History>() {
        let h = h.get();
        return Ok(Input {
            messages: Arc::clone(&h.messages),
            source: h.source.clone(),
            format: h.format,
        });
    }
    let messages = History::messages_of(py, value, None)?;
    Ok(Input {
        messages,
        source: "<messages>".into(),
        format: Format::OpenAi,
    })
}

/// The pipeline (when `pipeline` is given) and then `processors`, in order,
/// with the GIL released; a processor failing under the `fail` policy is a
/// `ProcessorFailedError` carrying the report as its `report` attribute.
fn execute(
    py: Python<'_>,
    input: Input,
    processors: Vec<Arc<agent_host_runtime::Processor>>,
    pipeline: Option<PipelineConfig>,
    context_limit: Option<u32>,
) -> PyResult<RunResult> {
    if input.messages.is_empty() {
        return Err(invalid(py, format!("{} holds no messages", input.source)));
    }
    let budget = pipeline.as_ref().map_or_else(
        || context_limit.map_or_else(BudgetConfig::default, BudgetConfig::for_window),
        |p| p.budget.clone(),
    );
    let outcome = py.detach(move || -> anyhow::Result<(Vec<Message>, Value, Option<String>)> {
        let now = chrono::Utc::now();
        let log = input.messages.as_slice();
        let input_tokens = total_tokens(log);
        let (mut messages, pipeline_report) = match &pipeline {
            Some(config) => {
                let summarizer = ExtractiveSummarizer::default();
                let c = pipeline::compact(log, None, config, counter(), Some(&summarizer), now);
                let report = serde_json::to_value(agent_host_api::PipelineReport::from(&c))?;
                (c.view, report)
            }
            None => (log.to_vec(), Value::Null),
        };
        let mut reports = Vec::new();
        let mut failure = None;
        if !processors.is_empty() {
            let info = RunInfo {
                context_window: budget.context_limit,
                budget: budget.available(),
                now,
                ..RunInfo::default()
            };
            let rt = runtime()?;
            for p in &processors {
                let out = rt.run(std::slice::from_ref(&**p), &info, messages);
                messages = out.messages;
                reports.extend(out.reports);
                if let Some(e) = out.failure {
                    failure = Some(e.to_string());
                    break;
                }
            }
        }
        let report = json!({
            "input": {
                "source": input.source,
                "format": input.format.to_string(),
                "messages": log.len(),
                "tokens": input_tokens,
            },
            "pipeline": pipeline_report,
            "processors": reports,
            "output": {
                "messages": messages.len(),
                "tokens": total_tokens(&messages),
                "violations": validate(&messages).iter().map(ToString::to_string).collect::<Vec<_>>(),
            },
            "failure": failure,
        });
        Ok((messages, report, failure))
    });
    let (messages, report, failure) = outcome.map_err(|e| to_py(py, e, ErrorKind::Internal))?;
    let report = report.to_string();
    if let Some(failure) = failure {
        let err = raise(py, ErrorKind::ProcessorFailed, failure);
        err.value(py).setattr("report", json_loads(py, &report)?)?;
        return Err(err);
    }
    let history = Py::new(py, History::of(messages, Format::Jsonl, "<run>".into()))?;
    Ok(RunResult { history, report })
}

/// Runs core's pipeline over `history` (repair, doom-loop warnings, pruning
/// of large tool results, an extractive summary when a trigger fires,
/// packing into the budget, emergency truncation), then each of
/// `processors` in order. `compact=False` only repairs and packs;
/// `pipeline=False` runs the processors alone, on the history as given
/// (`context_limit` is then only what they are told of).
#[pyfunction]
#[pyo3(signature = (
    history,
    processors = Vec::new(),
    *,
    context_limit = None,
    response_reserve = None,
    min_recent_messages = None,
    compact = true,
    pipeline = true,
))]
#[allow(clippy::too_many_arguments)]
fn run(
    py: Python<'_>,
    history: &Bound<'_, PyAny>,
    processors: Vec<PyRef<'_, Processor>>,
    context_limit: Option<u32>,
    response_reserve: Option<u32>,
    min_recent_messages: Option<usize>,
    compact: bool,
    pipeline: bool,
) -> PyResult<RunResult> {
    let input = input_of(py, history)?;
    let chain: Vec<_> = processors.iter().map(|p| Arc::clone(&p.inner)).collect();
    if !pipeline {
        return execute(py, input, chain, None, context_limit);
    }
    let mut budget = context_limit.map_or_else(BudgetConfig::default, BudgetConfig::for_window);
    if let Some(reserve) = response_reserve {
        if reserve >= budget.context_limit {
            return Err(invalid(
                py,
                format!(
                    "response_reserve {reserve} leaves nothing of the context limit {}",
                    budget.context_limit
                ),
            ));
        }
        budget.response_reserve = reserve;
    }
    if let Some(n) = min_recent_messages {
        budget.min_recent_messages = n;
    }
    let config = if compact {
        PipelineConfig {
            budget,
            ..PipelineConfig::default()
        }
    } else {
        PipelineConfig::repair_only(budget)
    };
    execute(py, input, chain, Some(config), None)
}

/// A session store: a folder (the file store), `sqlite:PATH`, or a
/// `postgres://` URL. Opening a folder that does not exist creates it.
#[pyclass(frozen, module = "agent_host")]
pub struct Store {
    store: Arc<dyn SessionStore>,
    spec: String,
}

fn parse_role(py: Python<'_>, name: &str) -> PyResult<Role> {
    match name {
        "system" => Ok(Role::System),
        "user" => Ok(Role::User),
        "assistant" => Ok(Role::Assistant),
        "tool" => Ok(Role::Tool),
        other => Err(invalid(
            py,
            format!("`{other}` is not a role: use system, user, assistant or tool"),
        )),
    }
}

fn store_call<T: Send>(
    py: Python<'_>,
    f: impl FnOnce() -> Result<T, StoreError> + Send,
) -> PyResult<T> {
    py.detach(f).map_err(|e| to_py(py, e.into(), ErrorKind::Io))
}

impl Store {
    fn wrap_session(&self, meta: SessionMeta) -> Session {
        Session {
            store: Arc::clone(&self.store),
            meta,
        }
    }

    /// The session `name` stands for: an id, or a key of `agent`.
    fn reference(name: &str, agent: &str) -> SessionRef {
        match uuid::Uuid::parse_str(name) {
            Ok(id) => SessionRef::Id(id),
            Err(_) => SessionRef::key(agent, name),
        }
    }
}

#[pymethods]
impl Store {
    #[new]
    fn new(py: Python<'_>, spec: PathBuf) -> PyResult<Store> {
        let spec = spec.to_string_lossy().into_owned();
        let shown = agent_host_store::redact(&spec);
        let opened = {
            let spec = spec.clone();
            py.detach(move || agent_host_store::open(&spec))
        };
        let store = opened.map_err(|e| {
            let e = anyhow::Error::from(e).context(format!("cannot open the store {shown}"));
            to_py(py, e, ErrorKind::Io)
        })?;
        Ok(Store {
            store: Arc::from(store),
            spec: shown,
        })
    }

    /// The store's spec, any password redacted.
    #[getter]
    fn spec(&self) -> &str {
        &self.spec
    }

    /// The session `key` of `agent`, created (with `title`) when it has
    /// none yet.
    #[pyo3(signature = (key, *, agent = "default", title = None))]
    fn session(
        &self,
        py: Python<'_>,
        key: String,
        agent: &str,
        title: Option<String>,
    ) -> PyResult<Session> {
        let mut new = NewSession::new(agent).with_key(key);
        if let Some(title) = title {
            new = new.with_title(title);
        }
        let store = Arc::clone(&self.store);
        let opened = store_call(py, move || store.get_or_create(&new))?;
        Ok(self.wrap_session(opened.meta))
    }

    /// The session `name` stands for (its id, or its key within `agent`),
    /// or `None` when there is none.
    #[pyo3(signature = (name, *, agent = "default"))]
    fn get(&self, py: Python<'_>, name: &str, agent: &str) -> PyResult<Option<Session>> {
        let reference = Store::reference(name, agent);
        let store = Arc::clone(&self.store);
        let found = store_call(py, move || store.get(&reference))?;
        Ok(found.map(|meta| self.wrap_session(meta)))
    }

    /// Every session, most recently updated first.
    fn sessions(&self, py: Python<'_>) -> PyResult<Vec<Session>> {
        let store = Arc::clone(&self.store);
        let page = store_call(py, move || store.scan())?;
        Ok(page
            .sessions
            .into_iter()
            .map(|meta| self.wrap_session(meta))
            .collect())
    }

    /// Deletes the session `name` stands for; `NotFoundError` when there is
    /// none.
    #[pyo3(signature = (name, *, agent = "default"))]
    fn delete(&self, py: Python<'_>, name: &str, agent: &str) -> PyResult<()> {
        let reference = Store::reference(name, agent);
        let store = Arc::clone(&self.store);
        store_call(py, move || store.delete(&reference)).map(drop)
    }

    fn __repr__(&self) -> String {
        format!("<agent_host.Store {}>", self.spec)
    }
}

/// Long-term memory: facts about entities, scoped by user and agent, kept
/// beside the sessions of a store (a folder, `sqlite:PATH` or a
/// `postgres://` URL). Facts are returned as dicts (the shape of
/// `/v1/memory`).
#[pyclass(frozen, module = "agent_host")]
pub struct Memory {
    memory: Arc<agent_host_store::memory::MemoryStore>,
    spec: String,
}

/// A JSON value as Python objects.
fn to_python<'py, T: serde::Serialize>(py: Python<'py>, value: &T) -> PyResult<Bound<'py, PyAny>> {
    let text = serde_json::to_string(value)
        .map_err(|e| PyRuntimeError::new_err(format!("cannot convert to Python: {e}")))?;
    json_loads(py, &text)
}

fn added_to_python<'py>(
    py: Python<'py>,
    added: &[agent_host_store::memory::Added],
) -> PyResult<Vec<Bound<'py, PyAny>>> {
    added
        .iter()
        .map(|a| {
            to_python(
                py,
                &json!({"fact": a.fact, "duplicate": a.duplicate, "invalidated": a.invalidated}),
            )
        })
        .collect()
}

#[pymethods]
impl Memory {
    #[new]
    fn new(py: Python<'_>, spec: PathBuf) -> PyResult<Memory> {
        let spec = spec.to_string_lossy().into_owned();
        let shown = agent_host_store::redact(&spec);
        let opened = {
            let spec = spec.clone();
            py.detach(move || agent_host_store::memory::MemoryStore::open(&spec))
        };
        let memory = opened.map_err(|e| {
            let e = anyhow::Error::from(e).context(format!("cannot open the memory of {shown}"));
            to_py(py, e, ErrorKind::Io)
        })?;
        Ok(Memory {
            memory: Arc::new(memory),
            spec: shown,
        })
    }

    /// The store's spec, any password redacted.
    #[getter]
    fn spec(&self) -> &str {
        &self.spec
    }

    /// Adds the fact `text` about `entity` (the user by default); with an
    /// `attribute` and its `value`, a newer value invalidates the older
    /// fact. Returns `{"fact", "duplicate", "invalidated"}`.
    #[pyo3(signature = (text, *, user, agent = "default", entity = None, attribute = None, value = None))]
    #[allow(clippy::too_many_arguments)]
    fn add<'py>(
        &self,
        py: Python<'py>,
        text: String,
        user: String,
        agent: &str,
        entity: Option<String>,
        attribute: Option<String>,
        value: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let memory = Arc::clone(&self.memory);
        let mut fact = agent_host_core::memory::Fact::new(
            agent_host_store::memory::MemoryStore::new_id(),
            agent_host_core::memory::Scope::new(user.clone(), agent),
            entity.unwrap_or(user),
            text,
            memory.now(),
        );
        if attribute.is_some() {
            fact.kind = agent_host_core::memory::FactKind::Attribute;
        }
        fact.attribute = attribute;
        fact.value = value;
        let added = store_call(py, move || memory.add(fact))?;
        Ok(added_to_python(py, std::slice::from_ref(&added))?.remove(0))
    }

    /// The facts the offline extractor finds in `history` (what the user
    /// said is about `user`, what the assistant said about `agent`), added.
    #[pyo3(signature = (history, *, user, agent = String::from("default"), session = None))]
    fn extract<'py>(
        &self,
        py: Python<'py>,
        history: &History,
        user: String,
        agent: String,
        session: Option<String>,
    ) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let memory = Arc::clone(&self.memory);
        let messages = Arc::clone(&history.messages);
        let added = store_call(py, move || {
            let scope = agent_host_core::memory::Scope::new(user.clone(), agent.clone());
            memory.extract(&scope, session.as_deref(), &messages, &user, &agent)
        })?;
        added_to_python(py, &added)
    }

    /// The `limit` (at most 100) facts of `user` that best match `query`,
    /// best first, as `{"fact", "score"}`.
    #[pyo3(signature = (query, *, user, agent = None, limit = 10, include_invalid = false))]
    fn search<'py>(
        &self,
        py: Python<'py>,
        query: String,
        user: String,
        agent: Option<String>,
        limit: usize,
        include_invalid: bool,
    ) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let memory = Arc::clone(&self.memory);
        let found = store_call(py, move || {
            let mut filter = agent_host_core::memory::Filter::user(user);
            if let Some(agent) = agent {
                filter = filter.agent(agent);
            }
            memory.search(&query, &filter, limit, include_invalid)
        })?;
        found
            .iter()
            .map(|f| to_python(py, &json!({"fact": f.fact, "score": f.score})))
            .collect()
    }

    /// Fact `id` of `user`; `NotFoundError` when `user` has none by that id.
    #[pyo3(signature = (id, *, user))]
    fn get<'py>(&self, py: Python<'py>, id: String, user: String) -> PyResult<Bound<'py, PyAny>> {
        let memory = Arc::clone(&self.memory);
        let fact = store_call(py, move || memory.get(&user, &id))?;
        to_python(py, &fact)
    }

    /// `user`'s facts (about `entity`, by `agent`, when given), oldest
    /// first, at most `limit` (100), after the fact `after`.
    #[pyo3(signature = (*, user, agent = None, entity = None, after = None, limit = 100))]
    fn list<'py>(
        &self,
        py: Python<'py>,
        user: String,
        agent: Option<String>,
        entity: Option<String>,
        after: Option<String>,
        limit: usize,
    ) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let memory = Arc::clone(&self.memory);
        let facts = store_call(py, move || {
            let mut filter = agent_host_core::memory::Filter::user(user);
            if let Some(agent) = agent {
                filter = filter.agent(agent);
            }
            filter.entity = entity;
            memory.list(&filter, after.as_deref(), limit)
        })?;
        facts.iter().map(|f| to_python(py, f)).collect()
    }

    /// Changes fact `id` of `user`; returns it as it is now.
    #[pyo3(signature = (id, *, user, text = None, entity = None, attribute = None, value = None))]
    #[allow(clippy::too_many_arguments)]
    fn update<'py>(
        &self,
        py: Python<'py>,
        id: String,
        user: String,
        text: Option<String>,
        entity: Option<String>,
        attribute: Option<String>,
        value: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let memory = Arc::clone(&self.memory);
        let edit = agent_host_core::memory::FactEdit {
            text,
            entity,
            attribute,
            value,
        };
        let fact = store_call(py, move || memory.update(&user, &id, edit))?;
        to_python(py, &fact)
    }

    /// Deletes fact `id` of `user`.
    #[pyo3(signature = (id, *, user))]
    fn delete(&self, py: Python<'_>, id: String, user: String) -> PyResult<()> {
        let memory = Arc::clone(&self.memory);
        store_call(py, move || memory.delete(&user, &id))
    }

    fn __repr__(&self) -> String {
        format!("<agent_host.Memory {}>", self.spec)
    }
}

/// A stored session: an append-only log of messages.
#[pyclass(frozen, module = "agent_host")]
pub struct Session {
    store: Arc<dyn SessionStore>,
    meta: SessionMeta,
}

impl Session {
    fn load_messages(&self, py: Python<'_>) -> PyResult<Vec<Message>> {
        let store = Arc::clone(&self.store);
        let reference = self.meta.reference();
        Ok(store_call(py, move || store.load(&reference))?.messages)
    }
}

#[pymethods]
impl Session {
    /// The session's id (a UUID, as text).
    #[getter]
    fn id(&self) -> String {
        self.meta.id.to_string()
    }

    /// The session's key within its agent, if it has one.
    #[getter]
    fn key(&self) -> Option<&str> {
        self.meta.key.as_deref()
    }

    /// The agent the session belongs to.
    #[getter]
    fn agent(&self) -> &str {
        &self.meta.agent
    }

    /// The session's title, if any.
    #[getter]
    fn title(&self) -> Option<&str> {
        self.meta.title.as_deref()
    }

    /// How many messages the log held when this object was made or last
    /// appended to.
    #[getter]
    fn message_count(&self) -> u64 {
        self.meta.message_count
    }

    /// Appends `messages` (a `History`, text of any supported format, or
    /// message dicts) to the log, durably, each without a time stamped now;
    /// returns the new message count.
    fn append(&self, py: Python<'_>, messages: &Bound<'_, PyAny>) -> PyResult<u64> {
        let messages = History::messages_of(py, messages, None)?;
        if messages.is_empty() {
            return self.current(py);
        }
        // Stamped now when they carry no time, as the server's appends are,
        // so that time queries find them.
        let now = chrono::Utc::now();
        let mut messages = Arc::unwrap_or_clone(messages);
        for m in &mut messages {
            m.timestamp.get_or_insert(now);
        }
        let store = Arc::clone(&self.store);
        let reference = self.meta.reference();
        let meta = store_call(py, move || store.append(&reference, &messages))?;
        Ok(meta.message_count)
    }

    /// The whole log, in order.
    fn load(&self, py: Python<'_>) -> PyResult<History> {
        let messages = self.load_messages(py)?;
        Ok(History::of(
            messages,
            Format::Jsonl,
            format!("session {}", self.meta.id),
        ))
    }

    /// The messages of the log that match: `since` and `until` (`30m`,
    /// `2d`, `2025-06-01`, an RFC 3339 time), `contains` (ignoring case),
    /// `roles`, `limit` (the most recent that many); forwarded messages only
    /// with `include_forwarded`.
    #[pyo3(signature = (*, since = None, until = None, contains = None, roles = Vec::new(), limit = None, include_forwarded = false))]
    #[allow(clippy::too_many_arguments)]
    fn query(
        &self,
        py: Python<'_>,
        since: Option<&str>,
        until: Option<&str>,
        contains: Option<String>,
        roles: Vec<String>,
        limit: Option<usize>,
        include_forwarded: bool,
    ) -> PyResult<History> {
        let now = chrono::Utc::now();
        let time = |what: &str, t: Option<&str>| {
            t.map(|t| query::parse_time(t, now))
                .transpose()
                .map_err(|e| invalid(py, format!("{what}: {e}")))
        };
        let q = Query {
            since: time("since", since)?,
            until: time("until", until)?,
            contains,
            roles: roles
                .iter()
                .map(|r| parse_role(py, r))
                .collect::<PyResult<_>>()?,
            limit,
            include_forwarded,
            ..Query::default()
        };
        let messages = self.load_messages(py)?;
        let found = py.detach(move || q.apply(&messages).into_iter().cloned().collect());
        Ok(History::of(
            found,
            Format::Jsonl,
            format!("session {} (query)", self.meta.id),
        ))
    }

    /// The context report (a dict): what the next view sent to a model of
    /// `context_limit` tokens holds, and how close each summary trigger is.
    /// Reads only; summarises and stores nothing.
    #[pyo3(signature = (*, context_limit = None))]
    fn context<'py>(
        &self,
        py: Python<'py>,
        context_limit: Option<u32>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let config = PipelineConfig {
            budget: context_limit.map_or_else(BudgetConfig::default, BudgetConfig::for_window),
            ..PipelineConfig::default()
        };
        let store = Arc::clone(&self.store);
        let reference = self.meta.reference();
        let report = py
            .detach(move || -> anyhow::Result<String> {
                let (meta, c) =
                    agent_host_engine::context_report(store.as_ref(), &reference, &config)?;
                Ok(serde_json::to_string(&agent_host_api::ContextReport::new(
                    &meta, &c,
                ))?)
            })
            .map_err(|e| to_py(py, e, ErrorKind::Io))?;
        json_loads(py, &report)
    }

    /// Removes every message and checkpoint of the log, durably; the
    /// session (id, key, title) stays.
    fn clear(&self, py: Python<'_>) -> PyResult<()> {
        let store = Arc::clone(&self.store);
        let reference = self.meta.reference();
        store_call(py, move || store.clear(&reference)).map(drop)
    }

    /// The number of messages the log holds now.
    fn current(&self, py: Python<'_>) -> PyResult<u64> {
        let store = Arc::clone(&self.store);
        let reference = self.meta.reference();
        let meta = store_call(py, move || store.get(&reference))?;
        meta.map(|m| m.message_count).ok_or_else(|| {
            raise(
                py,
                ErrorKind::NotFound,
                format!("the session {} no longer exists", self.meta.id),
            )
        })
    }

    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        Ok(usize::try_from(self.current(py)?).unwrap_or(usize::MAX))
    }

    fn __repr__(&self) -> String {
        format!(
            "<agent_host.Session {} key={:?} agent={}>",
            self.meta.id, self.meta.key, self.meta.agent
        )
    }
}

/// The names of every supported format, and whether each can be written.
#[pyfunction]
fn formats() -> Vec<(&'static str, bool)> {
    Format::ALL
        .iter()
        .map(|f| (f.name(), f.is_writable()))
        .collect()
}

/// The module `agent_host._native`.
#[pymodule]
#[pyo3(name = "_native")]
fn native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<History>()?;
    m.add_class::<Processor>()?;
    m.add_class::<RunResult>()?;
    m.add_class::<Store>()?;
    m.add_class::<Session>()?;
    m.add_class::<Memory>()?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(formats, m)?)?;
    m.add_function(wrap_pyfunction!(register_errors, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
