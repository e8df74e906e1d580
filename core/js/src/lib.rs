//! agent-host's pure core as a WebAssembly component for JavaScript.
//!
//! The component exports the world `core-library` of
//! `wit/core/v0.1.0/core.wit` (`agent-host:core@0.1.0`): reading and writing
//! every transcript format (with detection), validation and repair, the
//! compaction pipeline with its budget and the extractive summarizer, queries
//! and the Markdown export, each a thin call into `agent-host-core`. Built
//! for `wasm32-unknown-unknown` it imports nothing, so the JavaScript jco
//! makes of it runs in Node.js, browsers and edge runtimes without WASI
//! shims; `build.sh` makes the npm package `agent-host-core`.
//!
//! Errors are values (`result<_, error>` with core's `ErrorKind`), never
//! traps. The current time, which core never reads, is an argument.

use std::sync::OnceLock;

use agent_host_core::budget::BudgetConfig;
use agent_host_core::export;
use agent_host_core::extractive::ExtractiveSummarizer;
use agent_host_core::format::{self, Format, FormatError, Limits};
use agent_host_core::pipeline::{self, PipelineConfig, SummaryOutcome};
use agent_host_core::query::{self, Query};
use agent_host_core::repair::repair;
use agent_host_core::validate::validate;
use agent_host_core::{ErrorKind, HeuristicCounter, Message, Role, TokenCounter};
use chrono::{DateTime, Utc};

#[doc(hidden)]
pub mod bindings {
    // The generated code is not ours to lint or document.
    #![allow(missing_docs, unsafe_code, clippy::all)]
    wit_bindgen::generate!({
        path: "../../wit/core/v0.1.0",
        world: "core-library",
    });
}

use bindings::exports::agent_host::core::core as api;
use bindings::exports::agent_host::core::core as wit;

/// The component's exports.
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
struct Component;

/// The generated export glue: `unsafe` by nature, confined here. Only in
/// WebAssembly: its symbol names (`agent-host:core/core@0.1.0#...`) are no
/// names a native linker takes.
#[cfg(target_arch = "wasm32")]
#[allow(unsafe_code)]
mod glue {
    use super::{Component, bindings};
    bindings::export!(Component with_types_in bindings);
}

/// A history kept inside the component, behind the `history` resource.
pub struct History {
    messages: Vec<Message>,
    format: Format,
    title: Option<String>,
    quarantined: Vec<String>,
}

impl History {
    /// A history this component made (a view, a query's answer): `jsonl`.
    fn made(messages: Vec<Message>) -> api::History {
        api::History::new(History {
            messages,
            format: Format::Jsonl,
            title: None,
            quarantined: Vec::new(),
        })
    }
}

fn counter() -> &'static HeuristicCounter {
    static COUNTER: OnceLock<HeuristicCounter> = OnceLock::new();
    COUNTER.get_or_init(HeuristicCounter::default)
}

/// A count the WIT carries as `u32`: core's limits keep every count far
/// below it (500,000 messages, 256 MiB), so the cap is never reached.
fn small(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn error(kind: ErrorKind, message: impl Into<String>) -> wit::Failure {
    let kind = match kind {
        ErrorKind::NotFound => wit::ErrorKind::NotFound,
        ErrorKind::Conflict => wit::ErrorKind::Conflict,
        ErrorKind::InvalidInput => wit::ErrorKind::InvalidInput,
        ErrorKind::LimitExceeded => wit::ErrorKind::LimitExceeded,
        ErrorKind::ProcessorFailed => wit::ErrorKind::ProcessorFailed,
        ErrorKind::ProviderFailed => wit::ErrorKind::ProviderFailed,
        ErrorKind::Configuration => wit::ErrorKind::Configuration,
        ErrorKind::Io => wit::ErrorKind::Io,
        ErrorKind::Unauthorized => wit::ErrorKind::Unauthorized,
        ErrorKind::Forbidden => wit::ErrorKind::Forbidden,
        // A kind core adds later is `internal` until the WIT names it.
        _ => wit::ErrorKind::Internal,
    };
    wit::Failure {
        kind,
        message: message.into(),
    }
}

fn invalid(message: impl Into<String>) -> wit::Failure {
    error(ErrorKind::InvalidInput, message)
}

fn format_error(e: &FormatError) -> wit::Failure {
    error(e.kind(), e.to_string())
}

fn parse_format(name: &str) -> Result<Format, wit::Failure> {
    name.parse::<Format>().map_err(invalid)
}

fn parse_now(what: &str, text: &str) -> Result<DateTime<Utc>, wit::Failure> {
    DateTime::parse_from_rfc3339(text.trim())
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| {
            invalid(format!(
                "{what} `{text}` is not an RFC 3339 time (e.g. `2025-06-01T09:00:00Z`): {e}"
            ))
        })
}

fn role_of(role: wit::Role) -> Role {
    match role {
        wit::Role::System => Role::System,
        wit::Role::User => Role::User,
        wit::Role::Assistant => Role::Assistant,
        wit::Role::Tool => Role::Tool,
    }
}

fn wit_role(role: Role) -> wit::Role {
    match role {
        Role::System => wit::Role::System,
        Role::User => wit::Role::User,
        Role::Assistant => wit::Role::Assistant,
        Role::Tool => wit::Role::Tool,
    }
}

fn violations(messages: &[Message]) -> Vec<wit::Violation> {
    validate(messages)
        .iter()
        .map(|v| wit::Violation {
            index: small(v.index()),
            message: v.to_string(),
        })
        .collect()
}

/// `q` as core's query, its times read against its `now`.
fn query_of(q: wit::Query) -> Result<Query, wit::Failure> {
    let now = q
        .now
        .as_deref()
        .map(|n| parse_now("query now", n))
        .transpose()?;
    let time = |what: &str, t: Option<&str>| -> Result<Option<DateTime<Utc>>, wit::Failure> {
        let Some(t) = t else { return Ok(None) };
        match now {
            Some(now) => query::parse_time(t, now),
            None if query::parse_duration(t).is_ok() => {
                return Err(invalid(format!(
                    "{what} `{t}` is a duration before now: give the query's `now` too"
                )));
            }
            // Not a duration: an absolute time, which never reads `now`.
            None => query::parse_time(t, DateTime::<Utc>::UNIX_EPOCH),
        }
        .map(Some)
        .map_err(|e| invalid(format!("{what}: {e}")))
    };
    Ok(Query {
        since: time("since", q.since.as_deref())?,
        until: time("until", q.until.as_deref())?,
        contains: q.contains,
        roles: q.roles.into_iter().map(role_of).collect(),
        agents: q.agents,
        limit: q.limit.map(|l| l as usize),
        include_forwarded: q.include_forwarded,
    })
}

/// The pipeline's configuration for `o`, as the Python package builds it.
fn pipeline_config(o: &wit::PipelineOptions) -> Result<PipelineConfig, wit::Failure> {
    let mut budget = o
        .context_limit
        .map_or_else(BudgetConfig::default, BudgetConfig::for_window);
    if let Some(reserve) = o.response_reserve {
        if reserve >= budget.context_limit {
            return Err(invalid(format!(
                "response-reserve {reserve} leaves nothing of the context limit {}",
                budget.context_limit
            )));
        }
        budget.response_reserve = reserve;
    }
    if let Some(n) = o.min_recent_messages {
        budget.min_recent_messages = n as usize;
    }
    Ok(if o.compact {
        PipelineConfig {
            budget,
            ..PipelineConfig::default()
        }
    } else {
        PipelineConfig::repair_only(budget)
    })
}

fn report(r: &pipeline::PipelineReport) -> wit::PipelineReport {
    let summary = match &r.summary {
        SummaryOutcome::Skipped => wit::SummaryOutcome::Skipped,
        SummaryOutcome::NotDone(why) => wit::SummaryOutcome::NotDone(format!("{why:?}")),
        SummaryOutcome::Summarized {
            trigger,
            covered,
            parts,
            oversized,
        } => wit::SummaryOutcome::Summarized(wit::Summarized {
            trigger: format!("{trigger:?}"),
            covered: small(*covered),
            parts: small(*parts),
            oversized: oversized.clone(),
        }),
        SummaryOutcome::Failed { trigger, error } => {
            wit::SummaryOutcome::Failed(wit::SummaryFailure {
                trigger: format!("{trigger:?}"),
                error: error.clone(),
            })
        }
    };
    let u = &r.usage;
    wit::PipelineReport {
        repairs: r.repairs.iter().map(ToString::to_string).collect(),
        doom_loops: r
            .doom_loops
            .iter()
            .map(|d| wit::DoomLoop {
                tool: d.tool.clone(),
                count: small(d.count),
            })
            .collect(),
        pruned: r
            .pruned
            .iter()
            .map(|p| wit::Pruned {
                id: p.id.clone(),
                tool: p.tool.clone(),
                chars_before: small(p.chars_before),
                chars_after: small(p.chars_after),
                cleared: p.cleared,
            })
            .collect(),
        summary,
        summary_cut: r.summary_cut,
        truncations: r.truncations.iter().map(|t| format!("{t:?}")).collect(),
        usage: wit::ContextUsage {
            context_limit: u.context_limit,
            response_reserve: u.response_reserve,
            tool_definitions: u.tool_definitions,
            view: wit::ViewTokens {
                available: u.view.available,
                system: u.view.system,
                summary: u.view.summary,
                summary_cap: u.view.summary_cap,
                recent: u.view.recent,
                total: u.view.total(),
                left_out: small(u.view.left_out),
            },
            messages_in_view: small(u.messages_in_view),
            messages_since_summary: small(u.messages_since_summary),
            tokens_since_summary: u.tokens_since_summary,
            triggers: u
                .triggers
                .iter()
                .map(|t| wit::TriggerDistance {
                    name: t.name.to_owned(),
                    current: t.current,
                    limit: t.limit,
                    percent: t.percent,
                })
                .collect(),
        },
        violations: r
            .violations
            .iter()
            .map(|v| wit::Violation {
                index: small(v.index()),
                message: v.to_string(),
            })
            .collect(),
    }
}

impl api::Guest for Component {
    type History = History;

    fn formats() -> Vec<wit::FormatInfo> {
        Format::ALL
            .iter()
            .map(|f| wit::FormatInfo {
                name: f.name().to_owned(),
                writable: f.is_writable(),
            })
            .collect()
    }

    fn detect(text: String) -> Result<String, wit::Failure> {
        Format::detect(&text)
            .map(|f| f.name().to_owned())
            .map_err(|e| format_error(&e))
    }
}

impl api::GuestHistory for History {
    fn load(text: String, format: Option<String>) -> Result<api::History, wit::Failure> {
        let limits = Limits::default();
        let (format, t) = match format {
            Some(name) => {
                let format = parse_format(&name)?;
                format::parse_within(format, &text, &limits).map(|t| (format, t))
            }
            None => format::parse_detected_within(&text, &limits),
        }
        .map_err(|e| format_error(&e))?;
        Ok(api::History::new(History {
            messages: t.messages,
            format,
            title: t.title,
            quarantined: t
                .quarantined
                .iter()
                .map(|q| format!("line {}: {}", q.line, q.error))
                .collect(),
        }))
    }

    fn format(&self) -> String {
        self.format.name().to_owned()
    }

    fn title(&self) -> Option<String> {
        self.title.clone()
    }

    fn quarantined(&self) -> Vec<String> {
        self.quarantined.clone()
    }

    fn len(&self) -> u32 {
        small(self.messages.len())
    }

    fn tokens(&self) -> u64 {
        let counter: &dyn TokenCounter = counter();
        self.messages
            .iter()
            .map(|m| u64::from(m.tokens(counter)))
            .sum()
    }

    fn roles(&self) -> Vec<wit::Role> {
        self.messages.iter().map(|m| wit_role(m.role)).collect()
    }

    fn violations(&self) -> Vec<wit::Violation> {
        violations(&self.messages)
    }

    fn repair(&self) -> api::Repaired {
        let (messages, repairs) = repair(self.messages.clone());
        api::Repaired {
            history: History::made(messages),
            repairs: repairs.iter().map(ToString::to_string).collect(),
        }
    }

    fn dump(&self, format: String) -> Result<String, wit::Failure> {
        let format = parse_format(&format)?;
        format::write(format, &self.messages).map_err(|e| format_error(&e))
    }

    fn markdown(&self, title: Option<String>) -> String {
        export::to_markdown(&self.messages, title.as_deref())
    }

    fn query(&self, q: wit::Query) -> Result<api::History, wit::Failure> {
        let q = query_of(q)?;
        Ok(History::made(
            q.apply(&self.messages).into_iter().cloned().collect(),
        ))
    }

    fn compact(&self, options: wit::PipelineOptions) -> Result<api::Compaction, wit::Failure> {
        if self.messages.is_empty() {
            return Err(invalid("the history holds no messages"));
        }
        let config = pipeline_config(&options)?;
        let now = parse_now("now", &options.now)?;
        let summarizer = ExtractiveSummarizer::default();
        let c = pipeline::compact(
            &self.messages,
            None,
            &config,
            counter(),
            Some(&summarizer),
            now,
        );
        Ok(api::Compaction {
            report: report(&c.report),
            checkpoint: c.checkpoint.map(|cp| wit::Checkpoint {
                boundary_id: cp.boundary_id,
                summary_id: cp.summary_id,
                covers: cp.covers,
                created: cp.created.to_rfc3339(),
            }),
            view: History::made(c.view),
            append: History::made(c.append),
        })
    }
}
