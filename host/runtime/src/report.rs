//! The provenance report: what each processor did to the history.

use serde::{Deserialize, Serialize};

use super::{CacheOutcome, Processor, ProcessorError, RunRecord};

/// What became of a processor's call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Its answer was applied.
    Applied,
    /// Its answer broke the provider rules and was repaired, then applied.
    Repaired,
    /// It failed or its answer was refused; its input stands.
    Failed,
}

/// A message replaced by a processor.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Replaced {
    /// The id of the input message.
    pub id: String,
    /// The id of the message that took its place.
    pub by: String,
}

/// A line a processor logged (through the `log` import, or on stdout/stderr).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogLine {
    /// `trace`, `debug`, `info`, `warn`, `error`, `stdout` or `stderr`.
    pub level: String,
    /// The text.
    pub text: String,
}

/// What one processor did in a run: who it is, what it cost, and which
/// messages it kept, dropped, replaced and inserted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProcessorReport {
    /// Its name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// The SHA-256 of its component.
    pub hash: String,
    /// Where it was loaded from.
    pub source: String,
    /// Whether it was compiled or loaded from the cache.
    pub compile: CacheOutcome,
    /// What became of the call.
    pub outcome: Outcome,
    /// Why it failed, when it did.
    pub error: Option<String>,
    /// The call's wall-clock time (instantiation and call), in milliseconds.
    pub time_ms: f64,
    /// The highest linear memory it used, in bytes.
    pub peak_memory_bytes: usize,
    /// Messages before and after.
    pub messages_before: usize,
    /// Messages after (equal to before when it failed).
    pub messages_after: usize,
    /// The host's token estimate of the history before.
    pub tokens_before: u64,
    /// The host's token estimate of the history after.
    pub tokens_after: u64,
    /// Ids of input messages kept unchanged.
    pub kept: Vec<String>,
    /// Ids of input messages dropped.
    pub dropped: Vec<String>,
    /// Input messages replaced, and by what.
    pub replaced: Vec<Replaced>,
    /// Ids of new messages inserted.
    pub inserted: Vec<String>,
    /// Repairs made to its answer (under the `repair` policy).
    pub repairs: Vec<String>,
    /// What it logged.
    pub logs: Vec<LogLine>,
    /// Log lines over the limit, counted but not kept.
    pub logs_dropped: usize,
    /// What the call saw and answered, by digest, when the run was recorded
    /// ([`RunOptions::record`](crate::RunOptions::record)): enough to replay it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record: Option<Box<RunRecord>>,
    /// The host service calls it made (contract 0.2.0), in order: what it
    /// asked, whether the grant and budget let it through, what it got.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<crate::ServiceCall>,
    /// What its service calls came to: calls, refusals, model tokens, time.
    #[serde(default, skip_serializing_if = "crate::ServiceUsage::is_none")]
    pub service_usage: crate::ServiceUsage,
}

impl ProcessorReport {
    pub(crate) fn new(p: &Processor) -> Self {
        let d = p.description();
        ProcessorReport::of(
            d.name.clone(),
            d.version.clone(),
            p.hash().to_owned(),
            p.source().to_owned(),
            p.compile(),
        )
    }

    /// An empty report (applied, nothing done yet) for the processor so
    /// named and identified.
    pub(crate) fn of(
        name: String,
        version: String,
        hash: String,
        source: String,
        compile: CacheOutcome,
    ) -> Self {
        ProcessorReport {
            name,
            version,
            hash,
            source,
            compile,
            outcome: Outcome::Applied,
            error: None,
            time_ms: 0.0,
            peak_memory_bytes: 0,
            messages_before: 0,
            messages_after: 0,
            tokens_before: 0,
            tokens_after: 0,
            kept: Vec::new(),
            dropped: Vec::new(),
            replaced: Vec::new(),
            inserted: Vec::new(),
            repairs: Vec::new(),
            logs: Vec::new(),
            logs_dropped: 0,
            record: None,
            services: Vec::new(),
            service_usage: crate::ServiceUsage::default(),
        }
    }

    /// Marks the call failed: no edits stand.
    pub(crate) fn fail(&mut self, error: &ProcessorError) {
        self.outcome = Outcome::Failed;
        self.error = Some(error.to_string());
        self.kept.clear();
        self.dropped.clear();
        self.replaced.clear();
        self.inserted.clear();
        self.repairs.clear();
    }
}
