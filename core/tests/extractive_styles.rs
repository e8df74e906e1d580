//! How much of a history's evidence survives compaction, per agent style: the
//! share of the file paths, URLs, commands and numbers with units of the input
//! that appear verbatim in the output (the messages kept plus the summary).
//!
//! Styles: real trajectories from public repositories in `tests/data/trajectories`
//! (SWE-agent with function calls, SWE-agent in thought-action mode, OpenHands,
//! mini-swe-agent, Aider, Codex CLI; see its README for sources and licences),
//! each read through the reader of its own format, and, when the corpus is beside
//! this checkout, its Claude Code sessions and tau-bench runs. Each history is
//! compacted by the default pipeline with the extractive summarizer to an
//! 8,000-token window and to a window of a third of its own size (at least
//! 1,000 tokens), so that the small trajectories are summarized too.
//!
//! Asserted at both windows: at least 95% of the paths and URLs of each
//! trajectory, and of the URLs and the paths the agent used itself (in its
//! tool calls and commands) for every style. Run with `-- --nocapture` to see
//! the figures (BENCHMARKS.md quotes them).

mod common;

use std::collections::BTreeSet;
use std::path::PathBuf;

use agent_host_core::budget::BudgetConfig;
use agent_host_core::extractive::{self, ExtractiveSummarizer, ValueKind};
use agent_host_core::format::{self, Format};
use agent_host_core::pipeline::{PipelineConfig, compact};
use agent_host_core::{HeuristicCounter, Message, Role, TokenCounter};
use chrono::{TimeZone, Utc};
use serde_json::Value;

/// What is measured, in the order it is reported.
const KINDS: [&str; 5] = ["paths", "URLs", "commands", "numbers", "paths used"];

/// The share of paths and URLs a style must keep (the issue's target): all
/// of them for the trajectories, and for every style the URLs and the paths
/// the agent used itself. (The corpus' Claude Code sessions list hundreds of
/// `node_modules` paths in single tool results, more tokens than the whole
/// window: those are reported, not asserted.)
const MIN_KEPT: f64 = 0.95;

/// The values of one message to look for in the output, by kind.
fn values(message: &Message) -> [Vec<String>; 5] {
    let mut out: [Vec<String>; 5] = Default::default();
    for value in extractive::message_key_values(message) {
        match value.kind {
            ValueKind::Path => out[0].push(value.text),
            ValueKind::Url => out[1].push(value.text),
            _ => {}
        }
    }
    out[2] = commands(message);
    // The paths of the agent's own tool calls and commands.
    for call in &message.tool_calls {
        let value = serde_json::from_str::<Value>(&call.arguments).unwrap_or(Value::Null);
        let mut text = String::new();
        strings(&value, &mut text);
        out[4].extend(extractive::paths(&text).into_iter().map(str::to_owned));
    }
    for command in commands(message) {
        out[4].extend(extractive::paths(&command).into_iter().map(str::to_owned));
    }
    if message.role != Role::System {
        out[3] = extractive::quantities(&message.text())
            .into_iter()
            .map(str::to_owned)
            .collect();
    }
    out
}

/// The commands a message ran, defined here rather than taken from the code
/// under test: the first line of each tool call's `command` or `cmd`
/// argument (a string, as SWE-agent's `bash`, OpenHands' `execute_bash` and
/// Gemini CLI's `run_shell_command` give it, or the script of Codex CLI's
/// `shell` tool, `["bash", "-lc", script]`), and the
/// first line of a fenced block that ends an assistant's text without tool
/// calls (thought-action agents; the block's info string empty, a shell's
/// name, or `mswea_bash_command`, the fence mini-swe-agent's prompt asks its
/// model to write its one command in).
fn commands(message: &Message) -> Vec<String> {
    let first = |s: &str| {
        s.trim()
            .lines()
            .next()
            .unwrap_or("")
            .trim()
            .chars()
            .take(200)
            .collect::<String>()
    };
    let mut out = Vec::new();
    for call in &message.tool_calls {
        let Ok(Value::Object(args)) = serde_json::from_str::<Value>(&call.arguments) else {
            continue;
        };
        if ["edit", "write", "create", "str_replace", "patch", "insert"]
            .iter()
            .any(|k| call.name.to_ascii_lowercase().contains(k))
        {
            continue;
        }
        for key in ["command", "cmd"] {
            match args.get(key) {
                Some(Value::String(s)) => out.push(first(s)),
                Some(Value::Array(argv)) => {
                    if let Some(Value::String(s)) = argv.last() {
                        out.push(first(s));
                    }
                }
                _ => {}
            }
        }
    }
    if message.role == Role::Assistant && message.tool_calls.is_empty() {
        let text = message.content.trim_end();
        if let Some(body) = text.strip_suffix("```")
            && let Some(open) = body.rfind("```")
            && let Some((info, block)) = body[open + 3..].split_once('\n')
            && ["", "bash", "sh", "shell", "console", "mswea_bash_command"].contains(&info.trim())
        {
            out.push(first(block));
        }
    }
    out.retain(|c| !c.is_empty());
    out
}

/// The strings of a JSON value, one a line.
fn strings(value: &Value, out: &mut String) {
    match value {
        Value::String(s) => {
            out.push_str(s);
            out.push('\n');
        }
        Value::Array(list) => list.iter().for_each(|v| strings(v, out)),
        Value::Object(map) => map.values().for_each(|v| strings(v, out)),
        _ => {}
    }
}

/// Everything the output says: each message's text and its tool calls'
/// arguments, read as their strings when they are JSON.
fn output_text(view: &[Message]) -> String {
    let mut out = String::new();
    for m in view {
        out.push_str(&m.text());
        out.push('\n');
        for call in &m.tool_calls {
            out.push_str(&call.arguments);
            out.push('\n');
            if let Ok(value) = serde_json::from_str::<Value>(&call.arguments) {
                strings(&value, &mut out);
            }
        }
    }
    out
}

/// Required and kept values of one style, per kind.
#[derive(Default)]
struct Tally {
    histories: usize,
    summarized: usize,
    required: [usize; 5],
    kept: [usize; 5],
    longest_summary: usize,
    missed: Vec<String>,
}

impl Tally {
    fn measure(&mut self, name: &str, history: &[Message], window: u32) {
        let counter = HeuristicCounter::default();
        let config = PipelineConfig {
            budget: BudgetConfig::for_window(window),
            ..PipelineConfig::default()
        };
        let now = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
        let summarizer = ExtractiveSummarizer::default();
        let out = compact(history, None, &config, &counter, Some(&summarizer), now);
        let text = output_text(&out.view);
        // The summary is written to fit its share of the budget, never cut
        // to it (a cut can break a path in two), when the share holds at
        // least the headings (the small windows leave tau-bench's long system
        // prompt no room at all).
        assert!(
            window < 8_000 || !text.contains("[... summary cut to fit the context budget]"),
            "{name} at {window}: the summary was cut"
        );
        let mut required: [BTreeSet<String>; 5] = Default::default();
        for message in history {
            for (kind, found) in values(message).into_iter().enumerate() {
                required[kind].extend(found);
            }
        }
        for (kind, values) in required.iter().enumerate() {
            self.required[kind] += values.len();
            for value in values {
                if text.contains(value.as_str()) {
                    self.kept[kind] += 1;
                } else if self.missed.len() < 12 {
                    self.missed
                        .push(format!("{name} at {window}: {} {value:?}", KINDS[kind]));
                }
            }
        }
        self.histories += 1;
        if let Some(summary) = out.view.iter().find(|m| m.summary && m.role != Role::User) {
            self.summarized += 1;
            self.longest_summary = self
                .longest_summary
                .max(extractive::word_count(&summary.text()));
        }
    }

    fn share(&self, kind: usize) -> f64 {
        if self.required[kind] == 0 {
            1.0
        } else {
            self.kept[kind] as f64 / self.required[kind] as f64
        }
    }

    fn paths_and_urls(&self) -> f64 {
        let required = self.required[0] + self.required[1];
        if required == 0 {
            1.0
        } else {
            (self.kept[0] + self.kept[1]) as f64 / required as f64
        }
    }

    fn report(&self, style: &str, window: &str) -> String {
        let figures: Vec<String> = (0..KINDS.len())
            .map(|k| {
                format!(
                    "{} {:.1}% (n={})",
                    KINDS[k],
                    100.0 * self.share(k),
                    self.required[k]
                )
            })
            .collect();
        format!(
            "{style} at {window}: {}; {} histories, {} summarized, longest summary {} words",
            figures.join(", "),
            self.histories,
            self.summarized,
            self.longest_summary
        )
    }
}

/// The trajectories of `tests/data/trajectories`: each style with its
/// runs, each run named by its file. The long runs (over 8,000 tokens,
/// summarized at both windows) are rows of their own.
const TRAJECTORIES: [(&str, &[&str]); 9] = [
    (
        "SWE-agent, function calls",
        &["swe-agent-function-calling.json"],
    ),
    (
        "SWE-agent, function calls, long",
        &["swe-agent-function-calling-marshmallow-1867.json"],
    ),
    (
        "SWE-agent, thought-action",
        &[
            "swe-agent-thought-action-ctf.json",
            "swe-agent-thought-action-networking.json",
        ],
    ),
    (
        "SWE-agent, thought-action, long",
        &[
            "swe-agent-pydicom-1458.json",
            "swe-agent-thought-action-web.json",
        ],
    ),
    (
        "OpenHands, CodeAct",
        &["openhands-rename.json", "openhands-2048.json"],
    ),
    (
        "mini-swe-agent, bash only",
        &["mini-swe-agent-missing-colon.json"],
    ),
    (
        "mini-swe-agent, bash tool calls, long",
        &["mini-swe-agent-toolcalls-marshmallow-1359.json"],
    ),
    (
        "Aider, edit blocks",
        &["aider-flask.json", "aider-add-test.json"],
    ),
    (
        "Codex CLI, shell and apply_patch, long",
        &["codex-cli-chatbot-ui-lmstudio.jsonl"],
    ),
];

/// One trajectory of `tests/data/trajectories`, read in its own format: an
/// OpenAI message list (`.json`, converted from the source's own list) or a
/// file as the agent wrote it (a Codex CLI rollout, `.jsonl`), told apart
/// by the format detection a user's import goes through.
fn trajectory(file: &str) -> Vec<Message> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/trajectories")
        .join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let (format, transcript) =
        format::parse_detected(&text).unwrap_or_else(|e| panic!("{file}: {e}"));
    let expected = if file.ends_with(".jsonl") {
        Format::Codex
    } else {
        Format::OpenAi
    };
    assert_eq!(format, expected, "{file} was read as another format");
    transcript.messages
}

/// The trajectories of `tests/data/trajectories`, by style.
fn trajectories() -> Vec<(&'static str, Vec<Vec<Message>>)> {
    TRAJECTORIES
        .iter()
        .map(|(style, files)| (*style, files.iter().map(|f| trajectory(f)).collect()))
        .collect()
}

/// A window of a third of the history's tokens, at least 1,000.
fn small_window(history: &[Message]) -> u32 {
    let counter = HeuristicCounter::default();
    let tokens: u32 = history.iter().map(|m| counter.count_message(m)).sum();
    (tokens / 3).max(1_000)
}

#[test]
fn each_style_keeps_its_paths_and_urls() {
    let mut styles: Vec<(String, Vec<Vec<Message>>)> = trajectories()
        .into_iter()
        .map(|(style, runs)| (style.to_owned(), runs))
        .collect();
    if let Some(dir) = common::corpus_dir() {
        let (tau, claude): (Vec<_>, Vec<_>) = common::conversations(&dir)
            .into_iter()
            .partition(|(name, _)| name.starts_with("tau-bench"));
        styles.push((
            "Claude Code (corpus)".into(),
            claude.into_iter().map(|(_, h)| h).collect(),
        ));
        styles.push((
            "tau-bench airline (corpus)".into(),
            tau.into_iter().map(|(_, h)| h).collect(),
        ));
    }
    let mut failures = Vec::new();
    for (style, histories) in &styles {
        let mut at_8k = Tally::default();
        let mut at_third = Tally::default();
        for (n, history) in histories.iter().enumerate() {
            let name = format!("{style} #{n}");
            at_8k.measure(&name, history, 8_000);
            at_third.measure(&name, history, small_window(history));
        }
        for (tally, window) in [(&at_8k, "8,000 tokens"), (&at_third, "a third")] {
            eprintln!("{}", tally.report(style, window));
            // Every style and window is held to the target. (The web CTF
            // run's one `curl` URL of 14 that did not fit at a third was in
            // an exchange the pipeline kept back from the summary and then
            // left out of the view for want of room; such exchanges are now
            // summarized, see `SummaryPlan::fit_kept`.)
            let all_paths = !style.ends_with("(corpus)");
            let short = (all_paths && tally.paths_and_urls() < MIN_KEPT)
                || tally.share(1) < MIN_KEPT
                || tally.share(4) < MIN_KEPT;
            if short {
                failures.push(format!(
                    "{}\n  missed, for example: {}",
                    tally.report(style, window),
                    tally.missed.join("; ")
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The summary of each whole trajectory lists the files its agent changed,
/// whether through an editor tool without a path argument, a command in its
/// text, or a shell command.
#[test]
fn files_modified_come_from_every_style_of_edit() {
    use agent_host_core::summarize::{DEFAULT_MAX_WORDS, Summarizer, SummaryRequest};
    let expected: [(&str, &[&str]); 8] = [
        // `edit` with search/replace: the file its result names.
        (
            "swe-agent-function-calling.json",
            &["/SWE-agent__test-repo/tests/missing_colon.py"],
        ),
        // `create exploit.py`, then `edit 1:9` on the open file.
        (
            "swe-agent-thought-action-ctf.json",
            &[
                "exploit.py",
                "/__home__udiboy__projects__LLM_CTF__llm_ctf_automation__LLM_CTF_Dataset_Dev__2016__CSAW-Quals__pwn__WarmUp/exploit.py",
            ],
        ),
        // `mv` through execute_bash.
        (
            "openhands-rename.json",
            &["/workspace/game_2048.py", "/workspace/2048.py"],
        ),
        // `create` through str_replace_editor.
        ("openhands-2048.json", &["/workspace/game_2048.py"]),
        // `sed -i`, then `cat > file << 'EOF'`, in fenced blocks.
        (
            "mini-swe-agent-missing-colon.json",
            &["tests/missing_colon.py"],
        ),
        // Aider's edit blocks: the file named on the line before the block.
        ("aider-flask.json", &["app.py"]),
        ("aider-add-test.json", &["tests/test_commands.py"]),
        // Codex CLI: `apply_patch <<'PATCH'` with an `*** Update File:`
        // header, run through its `shell` tool.
        (
            "codex-cli-chatbot-ui-lmstudio.jsonl",
            &["components/chat/chat-helpers/index.ts"],
        ),
    ];
    for (file, files) in expected {
        let (style, history) = (file, trajectory(file));
        let summary = ExtractiveSummarizer::default()
            .summarize(&SummaryRequest {
                messages: &history,
                previous: None,
                partials: &[],
                max_words: DEFAULT_MAX_WORDS,
            })
            .unwrap();
        let section = summary.split("## Key Decisions").next().unwrap_or_default();
        for file in files {
            assert!(
                section.contains(&format!("- `{file}`\n")),
                "{style}: {file} is not under Files Modified:\n{summary}"
            );
        }
        // Files only read or listed are not modified.
        assert!(!section.contains("`/workspace`\n"), "{style}:\n{summary}");
        assert!(!section.contains("`tests/`\n"), "{style}:\n{summary}");
    }
}
