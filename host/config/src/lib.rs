//! The configuration: `agent-host.toml`, environment variables and flags,
//! merged into one [`Settings`] that remembers where every value came from.
//!
//! # Precedence
//!
//! For every key, the first of these that sets it wins:
//!
//! 1. a flag ([`Overrides`], and `--store`);
//! 2. an environment variable ([`ENV_PROVIDER`], [`ENV_MODEL`],
//!    [`ENV_BASE_URL`], [`ENV_API_KEY_ENV`], [`ENV_CONTEXT_LIMIT`],
//!    [`STORE_ENV`]); a variable set to the empty string
//!    counts as unset;
//! 3. the configuration file;
//! 4. the defaults, which are core's own ([`BudgetConfig`], [`SummaryConfig`],
//!    [`PruneConfig`], [`DoomLoopConfig`], [`TruncateConfig`]), so that the
//!    file and the library cannot drift apart.
//!
//! Precedence is per key: `AGENT_HOST_MODEL` replaces the file's `model` and
//! leaves its `base_url` alone.
//!
//! # Which file
//!
//! `--config FILE`, else the file [`CONFIG_ENV`] names, else
//! `./agent-host.toml`, else `agent-host.toml` in the [`user_config_dir`].
//! Only the first found is read: two files are never merged, so what a file
//! says is what runs. A file named by `--config` or [`CONFIG_ENV`] must exist.
//!
//! # Trust
//!
//! A file found in the working directory may come with a cloned repository.
//! The keys of it that choose where requests go, which secret is sent, where
//! sessions are written or which folders a processor reads
//! (`provider.base_url`, `provider.api_key_env`, `store.path`,
//! `processors[].allow_dirs`, `upstreams[].base_url`,
//! `upstreams[].api_key_env`) are honoured only when the [`TrustList`]
//! trusts the file's path and content (`agent-host config trust`);
//! otherwise loading fails with a [`ConfigError`] naming the file and the
//! keys. No file names a processor crate to build: building runs native
//! code.
//!
//! # The file
//!
//! ```toml
//! [context]
//! context_limit = 200000
//! response_reserve = 8000
//! auto_summarize = true
//! max_messages_before_summary = 30    # a trigger is turned off with "off"
//! max_tokens_before_summary = 128000  # or "off"
//! summarize_fraction = 0.8            # or "off"
//! summarizer = "llm"                  # or "extractive"
//! extractive_fallback = false
//!
//! [context.pruning]
//! soft_ratio = 0.3
//! hard_ratio = 0.5
//! excluded_tools = ["read_file"]
//!
//! [provider]
//! kind = "openai"                     # or "anthropic"; required in [provider]
//! model = "llama3.1"                  # required in [provider]
//! base_url = "http://localhost:11434/v1"
//! api_key_env = ""                    # "" sends no key (local servers)
//! max_tokens_field = "max_tokens"     # "max_completion_tokens" for OpenAI's o1/o3/o4/gpt-5
//!
//! [store]
//! path = ".agent-host"                # or "sqlite:sessions.db"; relative to the working directory
//!
//! [[upstreams]]                       # the gateway's servers, picked by a request's model
//! name = "local"
//! kind = "openai"                     # the upstream's wire
//! base_url = "http://localhost:8080/v1"
//! api_key_env = ""
//! models = ["smollm2", "qwen*"]       # names, or prefixes ending in `*`
//! default = true                      # takes the models no upstream lists
//! responses = false                   # true: it serves /responses, and Responses clients go there untranslated
//!
//! [[processors]]
//! path = "target/processors/redact-secrets.wasm"   # relative to this file's folder
//! config = { kinds = ["openai-key"] }               # any table, passed as JSON
//! on_failure = "skip"
//! deadline_ms = 250
//! routes = ["chat_completions", "messages", "responses", "turns"]   # where it runs (default: all)
//! models = ["gpt-4o", "qwen*"]                      # for which models (default: all)
//! chains = ["default", "review"]                    # the chains it is in (default: ["default"])
//! ```
//!
//! Every key is listed, with its default, by `agent-host config show`.
//! Unknown keys and values of the wrong type are errors that name the key,
//! the file and the line: a misspelt key silently ignored is a setting the
//! user believes in and does not get.
//!
//! What is deliberately not here: reading the API key itself. Only the *name*
//! of its variable is configuration; the provider reads the key when it is
//! built, so `config show` can never print a secret.

mod file;
mod merge;
mod show;
mod trust;

pub use trust::{TRUST_FILE, TrustList, TrustState};

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use agent_host_core::budget::BudgetConfig;
use agent_host_core::compact::SummaryConfig;
use agent_host_core::doom_loop::DoomLoopConfig;
use agent_host_core::pipeline::PipelineConfig;
use agent_host_core::prune::PruneConfig;
use agent_host_core::truncate::TruncateConfig;
use anyhow::Result;

use agent_host_engine::{EngineConfig, SummarizerChoice};
use agent_host_provider::{ProviderKind, ProviderSettings};
use agent_host_runtime::{Limits, ProcessorOptions};
use agent_host_store::DEFAULT_STORE;
use file::{Document, RawFile};
use merge::Merge;

/// The configuration file's name, in the working directory and in the
/// [`user_config_dir`].
pub const FILE_NAME: &str = "agent-host.toml";
/// The environment variable naming the configuration file when `--config`
/// is not given.
pub const CONFIG_ENV: &str = "AGENT_HOST_CONFIG";
/// Overrides `[provider] kind`.
pub const ENV_PROVIDER: &str = "AGENT_HOST_PROVIDER";
/// Overrides `[provider] model`.
pub const ENV_MODEL: &str = "AGENT_HOST_MODEL";
/// Overrides `[provider] base_url`.
pub const ENV_BASE_URL: &str = "AGENT_HOST_BASE_URL";
/// Overrides `[provider] api_key_env` (the *name* of the key's variable).
pub const ENV_API_KEY_ENV: &str = "AGENT_HOST_API_KEY_ENV";
/// Overrides `[context] context_limit`.
pub const ENV_CONTEXT_LIMIT: &str = "AGENT_HOST_CONTEXT_LIMIT";
/// The environment variable that names the session store when `--store` is
/// not given.
pub const STORE_ENV: &str = "AGENT_HOST_STORE";

/// The store spec in force: `flag` (the `--store` option) when given, else
/// [`STORE_ENV`] when set and not empty, else the default store.
///
/// ```
/// use agent_host_config::store_spec;
///
/// assert_eq!(store_spec(Some("sqlite:s.db")), "sqlite:s.db");
/// ```
pub fn store_spec(flag: Option<&str>) -> String {
    if let Some(spec) = flag {
        return spec.to_owned();
    }
    match std::env::var(STORE_ENV) {
        Ok(spec) if !spec.is_empty() => spec,
        _ => DEFAULT_STORE.to_owned(),
    }
}

/// Reads and checks the configuration file at `path` for
/// `agent-host config trust`: its text (what trust is recorded for) and the
/// keys needing trust it sets, with their values as written. A file that
/// does not parse is an error: there is nothing to review in it.
pub fn read_for_trust(path: &Path) -> Result<(String, Vec<(String, String)>)> {
    let doc = Document::read(path)?;
    let keys = trust::sensitive_settings(&doc.raw);
    Ok((doc.text().to_owned(), keys))
}

/// Where API keys come from for the command line: the environment, read
/// when the provider is made. The variable's *name* is configuration
/// (`api_key_env`); its value never passes through [`Settings`].
pub fn env_keys(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// Where a value came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// The built-in default.
    Default,
    /// The configuration file at this path.
    File(PathBuf),
    /// This environment variable.
    Env(String),
    /// This command-line flag (`--model`).
    Flag(String),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Default => f.write_str("default"),
            Origin::File(path) => write!(f, "{}", path.display()),
            Origin::Env(var) => write!(f, "env {var}"),
            Origin::Flag(flag) => write!(f, "flag {flag}"),
        }
    }
}

/// A configuration that is wrong: what, and where (the file and line, or the
/// variable or flag).
///
/// It travels inside `anyhow` errors; downcast to it to read the parts.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    /// The file, when the value came from one.
    pub file: Option<PathBuf>,
    /// The line in it (from 1), when known.
    pub line: Option<usize>,
    /// The dotted key (`context.pruning.soft_ratio`) or the environment
    /// variable, when one is at fault.
    pub key: Option<String>,
    /// What is wrong, naming the key.
    pub message: String,
}

impl ConfigError {
    /// What kind of failure this is: the configuration is wrong.
    pub fn kind(&self) -> agent_host_core::ErrorKind {
        agent_host_core::ErrorKind::Configuration
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.file, self.line) {
            (Some(file), Some(line)) => write!(f, "{}:{line}: {}", file.display(), self.message),
            (Some(file), None) => write!(f, "{}: {}", file.display(), self.message),
            (None, _) => f.write_str(&self.message),
        }
    }
}

/// Which summarizer writes the checkpoint summaries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum SummarizerKind {
    /// The configured provider's model writes them.
    Llm,
    /// The extractive summarizer (no model, deterministic).
    Extractive,
}

impl SummarizerKind {
    /// The name used in the file and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            SummarizerKind::Llm => "llm",
            SummarizerKind::Extractive => "extractive",
        }
    }
}

impl std::str::FromStr for SummarizerKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "llm" => Ok(SummarizerKind::Llm),
            "extractive" => Ok(SummarizerKind::Extractive),
            _ => Err(format!(
                "`{s}` is not a summarizer: use `llm` or `extractive`"
            )),
        }
    }
}

impl fmt::Display for SummarizerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How long-term memory extracts facts (`[memory] extraction`,
/// `--memory-extraction`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum MemoryExtraction {
    /// Core's offline extractor: explicit facts, at the flush before a
    /// summary.
    #[default]
    Offline,
    /// The configured provider's model, every `extraction_threshold`
    /// exchanges and at the flush (offline when it fails).
    Model,
}

impl MemoryExtraction {
    /// The name used in the file and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            MemoryExtraction::Offline => "offline",
            MemoryExtraction::Model => "model",
        }
    }
}

/// `[memory]`: whose long-term memory the engine's turns, views and the
/// gateway use, and how. Off until a user is named (`memory.user`, or
/// `--memory-user` on `chat` and `serve`, which outranks it).
#[derive(Clone, Debug, PartialEq)]
pub struct MemorySettings {
    /// Whose memory: recalled facts go in each view's volatile tail, facts
    /// are flushed into it before a summary. `None`: no memory.
    pub user: Option<String>,
    /// Whether the model is offered the memory tools (`memory_search`,
    /// `memory_write`, `memory_recall`) and agent-host runs its calls.
    pub tools: bool,
    /// How facts are extracted.
    pub extraction: MemoryExtraction,
    /// With model extraction, exchanges between two extractions (default 5).
    pub extraction_threshold: usize,
    /// The most facts recalled per turn (default 10).
    pub retrieval_limit: usize,
    /// The most tokens recalled facts take (default 1,000).
    pub recall_tokens: u32,
}

/// The most facts a turn may recall: a page of the memory store.
pub const MAX_RETRIEVAL_LIMIT: usize = agent_host_store::memory::MAX_PAGE;

impl Default for MemorySettings {
    fn default() -> Self {
        MemorySettings {
            user: None,
            tools: false,
            extraction: MemoryExtraction::Offline,
            extraction_threshold: agent_host_engine::DEFAULT_EXTRACTION_THRESHOLD,
            retrieval_limit: agent_host_core::memory::recall::DEFAULT_RETRIEVAL_LIMIT,
            recall_tokens: agent_host_core::memory::recall::DEFAULT_RECALL_TOKENS,
        }
    }
}

impl MemorySettings {
    /// The engine's memory over `store`, when a user is named; the checks
    /// that need every layer at once (a model to extract with, a user for
    /// the tools) are the front end's, which knows its flags.
    pub fn engine_config(
        &self,
        store: std::sync::Arc<agent_host_store::memory::MemoryStore>,
    ) -> Option<agent_host_engine::MemoryConfig> {
        let user = self.user.clone()?;
        let mut config = agent_host_engine::MemoryConfig::new(store, user);
        config.tools = self.tools;
        config.extraction = match self.extraction {
            MemoryExtraction::Offline => agent_host_engine::Extraction::Offline,
            MemoryExtraction::Model => agent_host_engine::Extraction::Model,
        };
        config.extraction_threshold = self.extraction_threshold;
        config.retrieval_limit = self.retrieval_limit;
        config.recall_tokens = self.recall_tokens;
        Some(config)
    }
}

/// Whether `user` can name a memory's user: 1 to 256 bytes, not blank (the
/// memory store's bound on names).
pub fn valid_memory_user(user: &str) -> bool {
    !user.trim().is_empty() && user.len() <= 256
}

/// Command-line overrides of the configuration, for `run`, `chat` and
/// `context` (`#[command(flatten)]`).
///
/// Every field is an `Option` or a flag without a clap default: a value is
/// there only when typed, so it can outrank the environment and the file.
#[derive(Debug, Default, Clone)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct Overrides {
    /// The provider's wire format [config: provider.kind; env: AGENT_HOST_PROVIDER].
    #[cfg_attr(feature = "clap", arg(long, value_name = "openai|anthropic"))]
    pub provider: Option<ProviderKind>,
    /// The model to ask [config: provider.model; env: AGENT_HOST_MODEL].
    #[cfg_attr(feature = "clap", arg(long, value_name = "NAME"))]
    pub model: Option<String>,
    /// The provider's server [config: provider.base_url; env: AGENT_HOST_BASE_URL].
    #[cfg_attr(feature = "clap", arg(long, value_name = "URL"))]
    pub base_url: Option<String>,
    /// The environment variable holding the API key, "" for none [config:
    /// provider.api_key_env; env: AGENT_HOST_API_KEY_ENV].
    #[cfg_attr(feature = "clap", arg(long, value_name = "VAR"))]
    pub api_key_env: Option<String>,
    /// The most tokens an answer may take [config: provider.max_tokens].
    #[cfg_attr(feature = "clap", arg(long, value_name = "N"))]
    pub max_tokens: Option<u32>,
    /// The sampling temperature [config: provider.temperature].
    #[cfg_attr(feature = "clap", arg(long, value_name = "F"))]
    pub temperature: Option<f32>,
    /// Wait for whole answers instead of streaming them [config: provider.stream].
    #[cfg_attr(feature = "clap", arg(long))]
    pub no_stream: bool,
    /// The model's context window, in tokens [config: context.context_limit; env:
    /// AGENT_HOST_CONTEXT_LIMIT].
    #[cfg_attr(feature = "clap", arg(long, value_name = "TOKENS"))]
    pub context_limit: Option<u32>,
    /// Tokens kept free for the answer [config: context.response_reserve].
    #[cfg_attr(feature = "clap", arg(long, value_name = "TOKENS"))]
    pub response_reserve: Option<u32>,
    /// Never summarize automatically [config: context.auto_summarize = false].
    #[cfg_attr(feature = "clap", arg(long))]
    pub no_summarize: bool,
    /// Who writes summaries [config: context.summarizer].
    #[cfg_attr(feature = "clap", arg(long, value_name = "llm|extractive"))]
    pub summarizer: Option<SummarizerKind>,
}

/// When and how tool results are pruned: core's own configuration, so its
/// defaults are the file's.
pub type PruneSettings = PruneConfig;

/// `[context]`: how the history is fitted to the model's window.
#[derive(Clone, Debug, PartialEq)]
pub struct ContextSettings {
    /// The model's context window, in tokens (default 128,000).
    pub context_limit: u32,
    /// Tokens kept free for the answer (default 4,096, or a quarter of a
    /// smaller window when only the window is set).
    pub response_reserve: u32,
    /// Tokens the tool definitions of a request take (default 0).
    pub tool_definition_tokens: u32,
    /// Summarize when a trigger fires (default true). Off, a summary can
    /// still be forced (see [`ContextSettings::summary_config`]).
    pub auto_summarize: bool,
    /// Summarize after this many messages since the last summary (default 30;
    /// `None`, written `"off"`, turns the trigger off).
    pub max_messages_before_summary: Option<usize>,
    /// Summarize when the history takes more tokens than this (default
    /// 128,000; `None` is off).
    pub max_tokens_before_summary: Option<u64>,
    /// Summarize when the history takes more than this share of the window
    /// (default 0.80; `None` is off).
    pub summarize_fraction: Option<f64>,
    /// Never summarize fewer messages than this (default 6).
    pub min_messages_to_summarize: usize,
    /// The last N turns are never summarized (default 4).
    pub keep_last_turns: usize,
    /// Recent messages always in the view, even over budget (default 6).
    pub min_recent_messages: usize,
    /// The most of the budget the summary may take (default 0.30).
    pub summary_share: f64,
    /// The summary's word cap (default 600).
    pub summary_max_words: usize,
    /// Who writes summaries (default: the model when a provider is
    /// configured, else the extractive summarizer).
    pub summarizer: SummarizerKind,
    /// When the model fails to summarize, summarize extractively instead
    /// (default false: a failed summary keeps the full history, and says so,
    /// rather than quietly storing a worse summary).
    pub extractive_fallback: bool,
    /// Pruning of large tool results.
    pub pruning: PruneSettings,
    /// How many identical consecutive tool calls make a doom loop (default 3).
    pub doom_loop_threshold: usize,
    /// Emergency truncation cuts tool results to this many characters
    /// (default 2,000).
    pub max_tool_result_chars: usize,
}

impl Default for ContextSettings {
    /// Core's defaults, with the extractive summarizer (no provider).
    fn default() -> Self {
        let budget = BudgetConfig::default();
        let summary = SummaryConfig::default();
        ContextSettings {
            context_limit: budget.context_limit,
            response_reserve: budget.response_reserve,
            tool_definition_tokens: budget.tool_definition_tokens,
            auto_summarize: true,
            max_messages_before_summary: summary.max_messages,
            max_tokens_before_summary: summary.max_tokens,
            summarize_fraction: summary.window_fraction,
            min_messages_to_summarize: summary.min_messages,
            keep_last_turns: summary.keep_last_turns,
            min_recent_messages: budget.min_recent_messages,
            summary_share: budget.summary_share,
            summary_max_words: summary.max_words,
            summarizer: SummarizerKind::Extractive,
            extractive_fallback: false,
            pruning: PruneConfig::default(),
            doom_loop_threshold: DoomLoopConfig::default().threshold,
            max_tool_result_chars: TruncateConfig::default().max_tool_result_chars,
        }
    }
}

impl ContextSettings {
    /// The context budget.
    pub fn budget_config(&self) -> BudgetConfig {
        BudgetConfig {
            context_limit: self.context_limit,
            response_reserve: self.response_reserve,
            tool_definition_tokens: self.tool_definition_tokens,
            summary_share: self.summary_share,
            min_recent_messages: self.min_recent_messages,
        }
    }

    /// The summarization settings, whether or not `auto_summarize` is on:
    /// what a forced summary (`/summarize`) uses.
    pub fn summary_config(&self) -> SummaryConfig {
        SummaryConfig {
            max_messages: self.max_messages_before_summary,
            max_tokens: self.max_tokens_before_summary,
            window_fraction: self.summarize_fraction,
            min_messages: self.min_messages_to_summarize,
            keep_last_turns: self.keep_last_turns,
            max_words: self.summary_max_words,
            ..SummaryConfig::default()
        }
    }

    /// The pipeline: every stage on, summarization only when
    /// `auto_summarize` is. To force a summary with it off, set
    /// `summary = Some(self.summary_config())` and `force_summary = true`.
    pub fn pipeline_config(&self) -> PipelineConfig {
        PipelineConfig {
            budget: self.budget_config(),
            doom_loop: Some(DoomLoopConfig {
                threshold: self.doom_loop_threshold,
            }),
            prune: Some(self.pruning.clone()),
            summary: self.auto_summarize.then(|| self.summary_config()),
            truncate: Some(TruncateConfig {
                max_tool_result_chars: self.max_tool_result_chars,
            }),
            ..PipelineConfig::default()
        }
    }
}

/// One `[[processors]]` entry.
#[derive(Clone, Debug, PartialEq)]
pub struct ProcessorSettings {
    /// The component, resolved against the configuration file's folder (so a
    /// file means the same wherever agent-host is started).
    pub path: PathBuf,
    /// How it runs: its `config` table as JSON text, limits, grants (its
    /// `allow_dirs` resolved like `path`) and policies.
    pub options: ProcessorOptions,
    /// The routes it runs on (`routes`); `None`: every one.
    pub routes: Option<Vec<ProcessorRoute>>,
    /// The models it runs for (`models`: names, or prefixes ending in
    /// `*`); `None`: every model.
    pub models: Option<Vec<String>>,
    /// The chains it belongs to (`chains`); [`DEFAULT_CHAIN`] unless the
    /// file says otherwise.
    pub chains: Vec<String>,
}

/// The chain a processor belongs to when its entry names none, and the one
/// a request runs unless it asks for another.
pub const DEFAULT_CHAIN: &str = "default";

/// The most `[[processors]]` entries a file may hold.
pub const MAX_PROCESSORS: usize = 64;

/// Where a processor runs: one of the gateway's routes, or the engine's own
/// turns (`agent-host chat` and `run`, `POST /v1/sessions/{id}/turns`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProcessorRoute {
    /// The gateway's `POST /v1/chat/completions`.
    ChatCompletions,
    /// The gateway's `POST /v1/messages`.
    Messages,
    /// The gateway's `POST /v1/responses`.
    Responses,
    /// The engine's turns: `chat`, `run`, the sessions API's turns.
    Turns,
}

impl ProcessorRoute {
    /// Its name in the file.
    pub fn as_str(self) -> &'static str {
        match self {
            ProcessorRoute::ChatCompletions => "chat_completions",
            ProcessorRoute::Messages => "messages",
            ProcessorRoute::Responses => "responses",
            ProcessorRoute::Turns => "turns",
        }
    }
}

/// Whether `model` is one `patterns` names: a name equal to it, or a prefix
/// of it ending in `*`.
pub fn model_matches(patterns: &[String], model: &str) -> bool {
    patterns.iter().any(|p| match p.strip_suffix('*') {
        Some(prefix) => model.starts_with(prefix),
        None => p == model,
    })
}

impl ProcessorSettings {
    /// Whether it runs in the chain `chain`, on `route`, for `model` (a
    /// request that names no model is one every filter lets through only
    /// when the entry has no `models`).
    pub fn runs(&self, chain: &str, route: ProcessorRoute, model: Option<&str>) -> bool {
        self.chains.iter().any(|c| c == chain)
            && self.routes.as_ref().is_none_or(|r| r.contains(&route))
            && self
                .models
                .as_ref()
                .is_none_or(|m| model.is_some_and(|model| model_matches(m, model)))
    }
}

/// How the configuration file was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FoundBy {
    /// `--config FILE`.
    Flag,
    /// The [`CONFIG_ENV`] variable.
    Env,
    /// `./agent-host.toml`.
    WorkingDir,
    /// `agent-host.toml` in the [`user_config_dir`].
    UserDir,
}

impl fmt::Display for FoundBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FoundBy::Flag => "named by --config",
            FoundBy::Env => "named by AGENT_HOST_CONFIG",
            FoundBy::WorkingDir => "in the working directory",
            FoundBy::UserDir => "in the user configuration folder",
        })
    }
}

/// The configuration file to read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigFile {
    /// Its path (absolute when the working directory given was).
    pub path: PathBuf,
    /// How it was found.
    pub found_by: FoundBy,
}

/// The folder holding the user's `agent-host.toml`:
/// `$XDG_CONFIG_HOME/agent-host`, else `$HOME/.config/agent-host` (on
/// Windows, `%APPDATA%\agent-host`). `None` when none of these is set.
pub fn user_config_dir() -> Option<PathBuf> {
    user_config_dir_from(&|name| std::env::var(name).ok())
}

fn user_config_dir_from(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let var = |name: &str| {
        env(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            // XDG: a relative path is invalid and must be ignored.
            .filter(|p| p.is_absolute())
    };
    let base = if cfg!(windows) {
        var("APPDATA")
    } else {
        var("XDG_CONFIG_HOME").or_else(|| var("HOME").map(|home| home.join(".config")))
    };
    base.map(|b| b.join("agent-host"))
}

/// Finds the configuration file: `explicit` (`--config`), else [`CONFIG_ENV`],
/// else `cwd/agent-host.toml`, else `user_config_dir/agent-host.toml`.
/// `None` when there is none; a file named by `explicit` or the variable that
/// does not exist is an error naming it.
pub fn find_file(
    explicit: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
    cwd: &Path,
    user_config_dir: Option<&Path>,
) -> Result<Option<ConfigFile>> {
    let named = match explicit {
        Some(path) => Some((path.to_owned(), FoundBy::Flag)),
        None => env(CONFIG_ENV)
            .filter(|v| !v.is_empty())
            .map(|v| (PathBuf::from(v), FoundBy::Env)),
    };
    if let Some((path, found_by)) = named {
        let path = cwd.join(path);
        if !path.is_file() {
            let by = match found_by {
                FoundBy::Flag => "--config".to_owned(),
                _ => CONFIG_ENV.to_owned(),
            };
            return Err(ConfigError {
                file: None,
                line: None,
                key: Some(by.clone()),
                message: format!(
                    "the configuration file {} (given by {by}) does not exist",
                    path.display()
                ),
            }
            .into());
        }
        return Ok(Some(ConfigFile { path, found_by }));
    }
    let local = cwd.join(FILE_NAME);
    if local.is_file() {
        return Ok(Some(ConfigFile {
            path: local,
            found_by: FoundBy::WorkingDir,
        }));
    }
    Ok(user_config_dir
        .map(|dir| dir.join(FILE_NAME))
        .filter(|p| p.is_file())
        .map(|path| ConfigFile {
            path,
            found_by: FoundBy::UserDir,
        }))
}

/// The effective configuration: flags over environment over file over
/// defaults, with the origin of every value.
#[derive(Clone, Debug)]
pub struct Settings {
    /// How the history is fitted to the window.
    pub context: ContextSettings,
    /// The provider, or `None` when none is configured anywhere (offline:
    /// no model, extractive summaries).
    pub provider: Option<ProviderSettings>,
    /// The session store spec: a folder or `sqlite:PATH`, relative to the
    /// working directory.
    pub store: String,
    /// The processors to run, in order.
    pub processors: Vec<ProcessorSettings>,
    /// The gateway's upstreams (`[[upstreams]]`), chosen by a request's
    /// model; empty means the provider, for every model.
    pub upstreams: Vec<UpstreamSettings>,
    /// Long-term memory (`[memory]`).
    pub memory: MemorySettings,
    /// The configuration file that was read, if any.
    pub file: Option<PathBuf>,
    found_by: Option<FoundBy>,
    /// Dotted key -> origin, for every effective value.
    sources: BTreeMap<String, Origin>,
    /// The trust check of a file in the working directory (see
    /// [`TrustList`]).
    trust: trust::TrustCheck,
}

/// One `[[upstreams]]` entry: a server the gateway (`agent-host serve`)
/// sends the requests for some models to.
#[derive(Clone, Debug, PartialEq)]
pub struct UpstreamSettings {
    /// Its name, in request records and on the content only it can read.
    pub name: String,
    /// Its wire, server, key variable and the model sent when a request
    /// names none.
    pub provider: ProviderSettings,
    /// The models it serves: names, or prefixes ending in `*`.
    pub models: Vec<String>,
    /// Whether a request for a model no upstream lists goes to it.
    pub default: bool,
    /// Whether it serves OpenAI Responses (`{base_url}/responses`) too: a
    /// Responses client's request then goes to it in its own wire, not
    /// translated to Chat Completions (an `openai` upstream only).
    pub responses: bool,
}

/// The shape of [`Settings::load_with`].
type LoadWith = fn(
    Option<&Path>,
    &Overrides,
    Option<&str>,
    &dyn Fn(&str) -> Option<String>,
    &Path,
    Option<&Path>,
) -> Result<Settings>;

impl Settings {
    /// Loads the configuration from the real environment, working directory
    /// and user configuration folder. `explicit` is `--config`, `store_flag`
    /// is `--store`.
    pub fn load(
        explicit: Option<&Path>,
        overrides: &Overrides,
        store_flag: Option<&str>,
    ) -> Result<Settings> {
        Settings::from_process(explicit, overrides, store_flag, Settings::load_with)
    }

    /// [`Settings::load`] for showing a configuration, never for running
    /// one: keys that an untrusted file in the working directory sets are
    /// kept, and [`Settings::untrusted`] lists them.
    pub fn load_for_show(
        explicit: Option<&Path>,
        overrides: &Overrides,
        store_flag: Option<&str>,
    ) -> Result<Settings> {
        Settings::from_process(explicit, overrides, store_flag, Settings::read)
    }

    /// `load` over this process's environment, working directory and user
    /// configuration folder.
    fn from_process(
        explicit: Option<&Path>,
        overrides: &Overrides,
        store_flag: Option<&str>,
        load: LoadWith,
    ) -> Result<Settings> {
        let cwd = std::env::current_dir()
            .map_err(|e| anyhow::anyhow!("cannot read the working directory: {e}"))?;
        load(
            explicit,
            overrides,
            store_flag,
            &|name| std::env::var(name).ok(),
            &cwd,
            user_config_dir().as_deref(),
        )
    }

    /// [`Settings::load`] with the environment, working directory and user
    /// configuration folder given, for tests and embedders.
    ///
    /// A file found in the working directory that sets keys choosing
    /// endpoints, secrets, the store or a processor's folders is refused
    /// (a [`ConfigError`] naming the file and the keys) unless the
    /// [`TrustList`] in `user_config_dir` trusts its content.
    ///
    /// ```
    /// use agent_host_config::{Origin, Overrides, Settings};
    ///
    /// let env = |name: &str| match name {
    ///     "AGENT_HOST_PROVIDER" => Some("openai".to_owned()),
    ///     "AGENT_HOST_MODEL" => Some("gpt-4o".to_owned()),
    ///     _ => None,
    /// };
    /// let dir = tempfile::tempdir()?;
    /// let overrides = Overrides { context_limit: Some(32_000), ..Overrides::default() };
    /// let settings = Settings::load_with(None, &overrides, None, &env, dir.path(), None)?;
    /// assert_eq!(settings.provider.as_ref().unwrap().model, "gpt-4o");
    /// assert_eq!(settings.context.context_limit, 32_000);
    /// assert_eq!(settings.origin("provider.model"), Some(&Origin::Env("AGENT_HOST_MODEL".into())));
    /// # Ok::<(), anyhow::Error>(())
    /// ```
    pub fn load_with(
        explicit: Option<&Path>,
        overrides: &Overrides,
        store_flag: Option<&str>,
        env: &dyn Fn(&str) -> Option<String>,
        cwd: &Path,
        user_config_dir: Option<&Path>,
    ) -> Result<Settings> {
        let settings = Settings::read(explicit, overrides, store_flag, env, cwd, user_config_dir)?;
        match settings.trust.error {
            Some(e) => Err(e.into()),
            None => Ok(settings),
        }
    }

    /// The merge, with the trust check recorded but not enforced.
    fn read(
        explicit: Option<&Path>,
        overrides: &Overrides,
        store_flag: Option<&str>,
        env: &dyn Fn(&str) -> Option<String>,
        cwd: &Path,
        user_config_dir: Option<&Path>,
    ) -> Result<Settings> {
        let env = |name: &str| env(name).filter(|v| !v.is_empty());
        let found = find_file(explicit, &env, cwd, user_config_dir)?;
        let doc = match &found {
            Some(f) => Some(Document::read(&f.path)?),
            None => None,
        };
        let mut merge = Merge {
            doc: doc.as_ref(),
            sources: BTreeMap::new(),
        };
        let empty = RawFile::default();
        let raw = doc.as_ref().map_or(&empty, |d| &d.raw);

        let provider = merge.provider(raw, overrides, &env)?;
        let context = merge.context(raw, overrides, &env, provider.is_some())?;
        let store = merge.pick(
            "store.path",
            store_flag
                .filter(|s| !s.is_empty())
                .map(|s| (s.to_owned(), "--store")),
            env(STORE_ENV).map(|s| (s, STORE_ENV)),
            raw.store.path.clone(),
            DEFAULT_STORE.to_owned(),
        );
        let processors = merge.processors(raw)?;
        merge.check(&context, provider.as_ref(), &store, &processors)?;
        let upstreams = merge.upstreams(raw)?;
        let memory = merge.memory(raw)?;
        let trust = match (&found, &doc) {
            (Some(found), Some(doc)) if found.found_by == FoundBy::WorkingDir => {
                trust::check(doc, &merge.sources, user_config_dir)?
            }
            _ => trust::TrustCheck::default(),
        };

        Ok(Settings {
            context,
            provider,
            store,
            processors,
            upstreams,
            memory,
            file: found.as_ref().map(|f| f.path.clone()),
            found_by: found.map(|f| f.found_by),
            sources: merge.sources,
            trust,
        })
    }

    /// What the trust list says of the file read, when it is in the working
    /// directory and sets keys that need trust; `None` otherwise (no file,
    /// a file the user named or keeps in the user configuration folder, or
    /// one that sets nothing needing trust).
    pub fn trust(&self) -> Option<TrustState> {
        self.trust.state
    }

    /// The keys (with their values as written) that an untrusted file in
    /// the working directory sets and that would be in force: what
    /// [`Settings::load`] refuses and [`Settings::load_for_show`] shows.
    pub fn untrusted(&self) -> &[(String, String)] {
        &self.trust.untrusted
    }

    /// Where the value of dotted `key` (`context.context_limit`,
    /// `provider.model`, `processors[0].path`) came from; `None` for a key
    /// that has no effective value (the provider's, offline).
    pub fn origin(&self, key: &str) -> Option<&Origin> {
        self.sources.get(key)
    }

    /// The pipeline configuration (see [`ContextSettings::pipeline_config`]).
    pub fn pipeline_config(&self) -> PipelineConfig {
        self.context.pipeline_config()
    }

    /// The processors the engine's own turns run (`chat`, `run`, the
    /// sessions API's turns), as `(component, options)`, in order: the
    /// entries of the [`DEFAULT_CHAIN`] whose `routes` include `turns` and
    /// whose `models` include the provider's model (when they say).
    pub fn processor_options(&self) -> Vec<(PathBuf, ProcessorOptions)> {
        let model = self.provider.as_ref().map(|p| p.model.as_str());
        self.processors
            .iter()
            .filter(|p| p.runs(DEFAULT_CHAIN, ProcessorRoute::Turns, model))
            .map(|p| (p.path.clone(), p.options.clone()))
            .collect()
    }

    /// The names of the chains the `[[processors]]` entries form, sorted.
    pub fn processor_chains(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .processors
            .iter()
            .flat_map(|p| p.chains.iter().cloned())
            .collect();
        names.sort();
        names.dedup();
        names
    }

    /// The engine this configuration describes; `processors`, when given
    /// (from the command line), replaces the configured chain.
    pub fn engine_config(
        &self,
        processors: Option<Vec<(PathBuf, ProcessorOptions)>>,
    ) -> EngineConfig {
        let summarizer = match self.context.summarizer {
            SummarizerKind::Llm => SummarizerChoice::Llm,
            SummarizerKind::Extractive => SummarizerChoice::Extractive,
        };
        let mut pipeline = self.pipeline_config();
        // Off only stops the triggers: a forced summary still summarizes,
        // with the configured thresholds (the engine gives the pipeline no
        // summarizer unless a summary is forced).
        pipeline.summary = Some(self.context.summary_config());
        EngineConfig {
            pipeline,
            auto_summarize: self.context.auto_summarize,
            provider: self.provider.clone(),
            summarizer,
            extractive_fallback: self.context.extractive_fallback,
            processors: processors.unwrap_or_else(|| self.processor_options()),
            ..EngineConfig::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_config_dir_prefers_xdg_and_ignores_relative_paths() {
        if cfg!(windows) {
            return;
        }
        let env = |xdg: &'static str| {
            move |name: &str| match name {
                "XDG_CONFIG_HOME" => Some(xdg.to_owned()),
                "HOME" => Some("/home/u".to_owned()),
                _ => None,
            }
        };
        assert_eq!(
            user_config_dir_from(&env("/xdg")),
            Some(PathBuf::from("/xdg/agent-host"))
        );
        assert_eq!(
            user_config_dir_from(&env("relative")),
            Some(PathBuf::from("/home/u/.config/agent-host"))
        );
        assert_eq!(user_config_dir_from(&|_| None), None);
    }

    #[test]
    fn origins_display_as_show_prints_them() {
        assert_eq!(Origin::Default.to_string(), "default");
        assert_eq!(
            Origin::Env("AGENT_HOST_MODEL".into()).to_string(),
            "env AGENT_HOST_MODEL"
        );
        assert_eq!(Origin::Flag("--model".into()).to_string(), "flag --model");
    }

    #[test]
    fn pipeline_config_defaults_are_cores() {
        let c = ContextSettings::default();
        assert_eq!(c.pipeline_config(), PipelineConfig::default());
        let off = ContextSettings {
            auto_summarize: false,
            ..c.clone()
        };
        assert_eq!(off.pipeline_config().summary, None);
        assert_eq!(off.summary_config(), SummaryConfig::default());
    }
}
