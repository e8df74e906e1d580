//! The extractive summarizer's quality on real transcripts: at least 90% of the
//! file paths, URLs and error lines of a summarized span appear verbatim in
//! its summary, and no summary is over 600 words.
//!
//! Spans are cut the way compaction cuts them: every conversation (a Claude
//! Code subagent run counts as a conversation of its own) without its last 4
//! turns (a turn starts at a user message that is not synthetic), and every
//! conversation longer than 30 messages (the default trigger) also in windows
//! of 30 messages, once alone and once with the previous window's summary
//! carried forward, and whole in one call. What must appear is what
//! `extractive::message_key_values` finds.
//!
//! Skipped, saying so, when the corpus is not beside this checkout (set
//! `AGENT_HOST_CORPUS` to point elsewhere).

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use agent_host_core::extractive::{
    ExtractiveSummarizer, ValueKind, message_key_values, word_count,
};
use agent_host_core::format::{self, Format, openai};
use agent_host_core::summarize::{DEFAULT_MAX_WORDS, Summarizer, SummaryRequest};
use agent_host_core::{Message, Role};
use serde_json::Value;

/// Turns compaction keeps intact after the span.
const KEEP_LAST_TURNS: usize = 4;

/// Messages per window of a long conversation: the default summary trigger.
const WINDOW: usize = 30;

/// The recall the product issue asks for.
const MIN_RECALL: f64 = 0.90;

fn corpus() -> Option<PathBuf> {
    common::corpus_dir()
}

/// The span compaction would summarize: everything before the last
/// `KEEP_LAST_TURNS` turns (empty when there are not more turns than that).
fn compaction_span(messages: &[Message]) -> &[Message] {
    let starts: Vec<usize> = messages
        .iter()
        .enumerate()
        .filter(|(_, m)| m.role == Role::User && !m.synthetic)
        .map(|(i, _)| i)
        .collect();
    if starts.len() <= KEEP_LAST_TURNS {
        return &[];
    }
    &messages[..starts[starts.len() - KEEP_LAST_TURNS]]
}

/// Required and found values, per kind.
#[derive(Default)]
struct Tally {
    spans: usize,
    max_words: usize,
    required: [usize; 3],
    found: [usize; 3],
    /// A few values that were missed, for the failure message.
    missed: Vec<String>,
}

impl Tally {
    fn slot(kind: ValueKind) -> usize {
        match kind {
            ValueKind::Path => 0,
            ValueKind::Url => 1,
            _ => 2,
        }
    }

    /// Summarizes `span` (carrying `previous` forward) and counts which of
    /// its key values the summary keeps; gives back the summary.
    fn measure(&mut self, name: &str, span: &[Message], previous: Option<&str>) -> String {
        if span.is_empty() {
            return String::new();
        }
        let required: BTreeSet<(usize, String)> = span
            .iter()
            .flat_map(message_key_values)
            .filter(|v| v.kind.is_key())
            .map(|v| (Self::slot(v.kind), v.text))
            .collect();
        let summary = ExtractiveSummarizer::default()
            .summarize(&SummaryRequest {
                messages: span,
                previous,
                partials: &[],
                max_words: DEFAULT_MAX_WORDS,
            })
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let words = word_count(&summary);
        assert!(
            words <= DEFAULT_MAX_WORDS,
            "{name}: {words} words\n{summary}"
        );
        self.spans += 1;
        self.max_words = self.max_words.max(words);
        for (slot, value) in required {
            self.required[slot] += 1;
            if summary.contains(&value) {
                self.found[slot] += 1;
            } else if self.missed.len() < 10 {
                self.missed.push(format!("{name}: {value}"));
            }
        }
        summary
    }

    fn recall(found: usize, required: usize) -> f64 {
        if required == 0 {
            1.0
        } else {
            found as f64 / required as f64
        }
    }

    fn overall(&self) -> f64 {
        Self::recall(self.found.iter().sum(), self.required.iter().sum())
    }

    fn report(&self, what: &str) -> String {
        let figure = |slot: usize| {
            format!(
                "{:.1}% (n={})",
                100.0 * Self::recall(self.found[slot], self.required[slot]),
                self.required[slot]
            )
        };
        format!(
            "{what}: paths {}, urls {}, error lines {}, overall {:.1}% (n={}) over {} spans, longest summary {} words",
            figure(0),
            figure(1),
            figure(2),
            100.0 * self.overall(),
            self.required.iter().sum::<usize>(),
            self.spans,
            self.max_words,
        )
    }

    fn add(&mut self, other: &Tally) {
        self.spans += other.spans;
        self.max_words = self.max_words.max(other.max_words);
        for slot in 0..3 {
            self.required[slot] += other.required[slot];
            self.found[slot] += other.found[slot];
        }
        self.missed.extend(other.missed.iter().cloned());
    }
}

fn tau_bench(dir: &Path) -> Tally {
    let path = dir.join("tau-bench-gpt4o-airline/gpt-4o-airline.json");
    let runs: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut tally = Tally::default();
    for (i, run) in runs.iter().enumerate() {
        let history = openai::from_value(run["traj"].clone())
            .unwrap_or_else(|e| panic!("tau-bench conversation {i}: {e}"));
        tally.measure(&format!("tau-bench {i}"), compaction_span(&history), None);
    }
    tally
}

/// Every Claude Code conversation: each session's main thread and each of
/// its subagent runs (sidechains, which have a context of their own).
fn claude_code_conversations(dir: &Path) -> Vec<(String, Vec<Message>)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir.join("claude-code-sessions-ccv"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 3, "expected the three Claude Code sessions");
    let mut out = Vec::new();
    for path in files {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        let transcript =
            format::parse(Format::ClaudeCode, &text).unwrap_or_else(|e| panic!("{name}: {e}"));
        for (k, side) in transcript.sidechains.into_iter().enumerate() {
            out.push((format!("{name} sidechain {k}"), side));
        }
        out.push((name, transcript.messages));
    }
    out
}

fn claude_code(conversations: &[(String, Vec<Message>)]) -> Tally {
    let mut tally = Tally::default();
    for (name, messages) in conversations {
        tally.measure(name, compaction_span(messages), None);
    }
    // The long conversations also in windows of the default trigger's size.
    for (name, messages) in conversations.iter().filter(|(_, m)| m.len() > WINDOW) {
        for (n, window) in messages.chunks(WINDOW).enumerate() {
            tally.measure(&format!("{name} window {n}"), window, None);
        }
    }
    tally
}

/// The long conversations whole, each in one call: the hardest spans, with
/// the most values to fit in the cap.
fn claude_code_whole(conversations: &[(String, Vec<Message>)]) -> Tally {
    let mut tally = Tally::default();
    for (name, messages) in conversations.iter().filter(|(_, m)| m.len() > WINDOW) {
        tally.measure(&format!("{name} whole"), messages, None);
    }
    tally
}

/// The windows again, each summarized with the summary of the window before
/// carried forward, as repeated compaction does: the previous facts must not
/// crowd out the new span's.
fn claude_code_chained(conversations: &[(String, Vec<Message>)]) -> Tally {
    let mut tally = Tally::default();
    for (name, messages) in conversations.iter().filter(|(_, m)| m.len() > WINDOW) {
        let mut previous = None;
        for (n, window) in messages.chunks(WINDOW).enumerate() {
            previous = Some(tally.measure(
                &format!("{name} chained window {n}"),
                window,
                previous.as_deref(),
            ));
        }
    }
    tally
}

#[test]
fn summaries_keep_the_paths_urls_and_error_lines_of_real_spans() {
    let Some(dir) = corpus() else { return };
    let tau = tau_bench(&dir);
    let conversations = claude_code_conversations(&dir);
    let claude = claude_code(&conversations);
    let chained = claude_code_chained(&conversations);
    let whole = claude_code_whole(&conversations);
    let mut all = Tally::default();
    all.add(&tau);
    all.add(&claude);
    eprintln!("{}", tau.report("tau-bench airline"));
    eprintln!("{}", claude.report("claude code"));
    eprintln!("{}", all.report("extractive recall"));
    eprintln!(
        "{}",
        chained.report("with the previous summary carried forward")
    );
    eprintln!("{}", whole.report("long conversations whole"));
    assert!(
        tau.spans > 100 && claude.spans >= 10 && chained.spans >= 10 && whole.spans >= 3,
        "too few spans measured"
    );
    assert!(
        all.overall() >= MIN_RECALL,
        "{}\nmissed, for example:\n{}",
        all.report("extractive recall"),
        all.missed.join("\n")
    );
    for (what, tally) in [("chained", &chained), ("whole", &whole)] {
        assert!(
            tally.overall() >= MIN_RECALL,
            "{}\nmissed, for example:\n{}",
            tally.report(what),
            tally.missed.join("\n")
        );
    }
}
