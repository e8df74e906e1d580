//! Lines and sentences of what the user and the assistant wrote: decisions,
//! TODO-like lines, and text shortened to a number of words.

use std::sync::LazyLock;

use aho_corasick::AhoCorasick;

/// The words that mark a sentence as a decision.
const DECISION_MARKERS: [&str; 10] = [
    "I'll ",
    "I will ",
    "Let's ",
    "We'll ",
    "we'll ",
    "decided",
    "decision",
    "instead",
    "because",
    "going to ",
];

/// Whitespace collapsed to single spaces.
pub(super) fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The first `max` words of `text`, whitespace collapsed, with `…` when cut.
pub(super) fn shorten(text: &str, max: usize) -> String {
    let words: Vec<&str> = text.split_whitespace().collect();
    if words.len() <= max {
        return words.join(" ");
    }
    let mut short = words[..max].join(" ");
    short.push('…');
    short
}

/// Lines of prose: outside code fences, without list and heading markers or
/// bold, never starting with `#`.
fn prose_lines(text: &str) -> Vec<&str> {
    let mut fenced = false;
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut line = line.trim_start_matches(['#', '>', '-', '*', '+', ' ']);
        let numbered = line
            .find(". ")
            .filter(|&n| n > 0 && line[..n].bytes().all(|b| b.is_ascii_digit()));
        if let Some(n) = numbered {
            line = &line[n + 2..];
        }
        let line = line.trim_matches('*').trim();
        if !line.is_empty() {
            out.push(line);
        }
    }
    out
}

/// The sentences of assistant prose that announce a decision.
pub(super) fn decisions(text: &str) -> Vec<&str> {
    static MARKERS: LazyLock<AhoCorasick> = LazyLock::new(|| {
        AhoCorasick::new(DECISION_MARKERS).expect("a few short literal patterns always build")
    });
    let mut out = Vec::new();
    for line in prose_lines(text) {
        // A sentence holds a marker only if its line does.
        if !MARKERS.is_match(line) {
            continue;
        }
        let mut start = 0;
        let bytes = line.as_bytes();
        for i in 0..bytes.len() {
            let ends = matches!(bytes[i], b'.' | b'!' | b'?')
                && bytes.get(i + 1).is_none_or(|b| b.is_ascii_whitespace());
            if ends || i + 1 == bytes.len() {
                let sentence = line[start..=i].trim();
                if DECISION_MARKERS.iter().any(|m| sentence.contains(m)) {
                    out.push(sentence);
                }
                start = i + 1;
            }
        }
    }
    out
}

/// TODO-like lines: unchecked boxes, `TODO`, `Next:` / `Next steps`, and
/// `Remaining`.
pub(super) fn todo_lines(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if let Some(task) = line
            .strip_prefix("- [ ]")
            .or_else(|| line.strip_prefix("* [ ]"))
        {
            out.push(task.trim());
            continue;
        }
        let lower = line
            .trim_start_matches(['#', '-', '*', ' '])
            .to_ascii_lowercase();
        let todo = line.starts_with("TODO") || line.contains("TODO:") || line.contains("TODO(");
        if todo
            || lower.starts_with("next:")
            || lower.starts_with("next step")
            || lower.starts_with("remaining")
        {
            out.push(line);
        }
    }
    out
}
