//! `truncate-tool-results`: cuts long tool results to their head and tail.
//!
//! A tool result (a message with role `tool`) whose text is longer than its
//! limit keeps its first `head` and last `tail` characters, with a marker
//! between them that says how much was cut:
//!
//! ```text
//! …the first lines of the output
//! [… 12,345 characters cut by truncate-tool-results …]
//! the last lines of the output…
//! ```
//!
//! Only the text is cut, nothing else of the message changes (its
//! `tool_call_id` stays, so the exchange stays valid), and messages that are
//! not cut are kept as they are, never copied back to the host.
//!
//! # What counts
//!
//! - The text is the `content` and the text parts, in that order, counted
//!   together in characters (Unicode scalar values, not bytes); a cut never
//!   splits a character. When the cut spans several pieces, the pieces wholly
//!   inside it are emptied (emptied text parts are removed) and the marker
//!   goes where the head ends. Images and file parts are left in place: this
//!   processor only cuts text (`strip-media` deals with media).
//! - A cut prefers a line boundary: when a newline lies within 100 characters
//!   (and within a fifth of `head`) before the head's end, the head stops at
//!   it; when one lies within 100 characters (and a fifth of `tail`) after
//!   the tail's start, the tail starts on the next line. Snapping only ever
//!   keeps less, never more.
//! - A result is only cut when that makes it shorter: when the characters
//!   removed would not outweigh the marker, it is left whole.
//! - The text of other messages (user, assistant, system) is never touched.
//!
//! # Configuration
//!
//! - `max_chars` (default 2000): results of at most this many characters are
//!   left whole. `0` or `null` means no limit (only the tools listed in
//!   `tools` are cut).
//! - `head` (default 70% of `max_chars`) and `tail` (default 25%): the
//!   characters kept at each end of a result cut to `max_chars`.
//!   `head + tail` must be below `max_chars`, and they can only be given
//!   with a `max_chars`. The defaults leave 5% of the limit to the marker
//!   (about 55 characters), so a cut result is within the limit from limits
//!   of about 1,200 up, and at most a few characters over it below that.
//!   The head gets more because a result usually says what it is first (the
//!   command, the file's start, the structure), the tail because that is
//!   where it says how it ended (the exit status, the error, the totals).
//! - `tools` (default none): a map from a tool's name to its own
//!   `max_chars`; `0` or `null` means that tool's results are never cut. A
//!   tool's results keep the same shares of its limit as `head` and `tail`
//!   are of `max_chars` (`{"max_chars": 1000, "head": 600, "tools": {"ls":
//!   5000}}` keeps 3000 characters of the head of `ls` results), so a tool's
//!   limit never conflicts with them. The tool's name is the result's
//!   `tool_name`, or when it has none, the name in the call it answers.
//! - `keep_last` (default 0): the N most recent tool results (of any tool)
//!   are left whole, whatever their length.
//!
//! ```sh
//! agent-host run --processor target/processors/truncate-tool-results.wasm \
//!     --processor-config '{"max_chars": 4000, "tools": {"read_file": 20000, "ask_user": null}, "keep_last": 2}'
//! ```

use std::collections::BTreeMap;

use agent_host_guest::{
    Error, History, Message, Part, Processor, Result, Role, export_processor, group_thousands,
};
use serde::Deserialize;

/// The configuration.
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// The default limit in characters; `None` (or 0) means no limit.
    pub max_chars: Option<usize>,
    /// Characters kept at the start at `max_chars` (default: 70% of it).
    pub head: Option<usize>,
    /// Characters kept at the end at `max_chars` (default: 25% of it).
    pub tail: Option<usize>,
    /// Limits for single tools, by name; `None` (or 0) means never cut.
    pub tools: BTreeMap<String, Option<usize>>,
    /// How many of the most recent tool results are left whole.
    pub keep_last: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_chars: Some(2000),
            head: None,
            tail: None,
            tools: BTreeMap::new(),
            keep_last: 0,
        }
    }
}

/// The processor.
pub struct TruncateToolResults;

impl Processor for TruncateToolResults {
    type Config = Config;
    const CONFIG_EXAMPLE: Option<&'static str> = Some(
        r#"{"max_chars": 4000, "tools": {"read_file": 20000, "ask_user": null}, "keep_last": 2}"#,
    );
    const CONFIG_SCHEMA: Option<&'static str> = Some(concat!(
        r#"{"type":"object","properties":{"#,
        r#""max_chars":{"type":["integer","null"],"minimum":0,"default":2000},"#,
        r#""head":{"type":["integer","null"],"minimum":0},"#,
        r#""tail":{"type":["integer","null"],"minimum":0},"#,
        r#""tools":{"type":"object","additionalProperties":{"type":["integer","null"],"minimum":0},"default":{}},"#,
        r#""keep_last":{"type":"integer","minimum":0,"default":0}"#,
        r#"},"additionalProperties":false}"#
    ));

    fn process(history: &mut History, config: Config) -> Result<()> {
        config.check()?;
        let messages = history.messages();
        let protected = history.last_tool_results_start(config.keep_last);
        // Names are only needed for per-tool limits.
        let names = if config.tools.is_empty() {
            Vec::new()
        } else {
            history.tool_names()
        };

        let mut cuts = Vec::new();
        let mut results = 0usize;
        for (i, m) in messages[..protected].iter().enumerate() {
            if m.role != Role::Tool {
                continue;
            }
            results += 1;
            let name = names.get(i).copied().flatten();
            if let Some(limit) = config.limit_for(name)
                && let Some(cut) = plan(m, limit)
            {
                cuts.push((i, cut));
            }
        }

        let mut removed = 0usize;
        for (i, cut) in &cuts {
            apply(history.message_mut(*i), cut);
            removed += cut.removed;
        }
        agent_host_guest::info!(
            "cut {} of {} tool results, {} characters removed",
            cuts.len(),
            results,
            group_thousands(removed)
        );
        Ok(())
    }
}

export_processor!(TruncateToolResults);

/// Share of the limit kept at the start, in percent, when `head` is not set.
const HEAD_PERCENT: usize = 70;
/// Share of the limit kept at the end, in percent, when `tail` is not set.
const TAIL_PERCENT: usize = 25;
/// How far, in characters, a cut may move to land on a line boundary.
const SNAP_WINDOW: usize = 100;

/// One limit, with the head and tail that go with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Limit {
    max: usize,
    head: usize,
    tail: usize,
}

impl Config {
    /// The limit of `max` characters (none when `max` is 0). Its head and
    /// tail are the same shares of `max` as `head` and `tail` are of
    /// `max_chars` (70% and 25% when they are not given).
    fn limit(&self, max: usize) -> Option<Limit> {
        if max == 0 {
            return None;
        }
        let base = self.max_chars.unwrap_or(0);
        let split = |given: Option<usize>, percent| match given {
            Some(n) if base > 0 => share(max, n, base),
            _ => share(max, percent, 100),
        };
        Some(Limit {
            max,
            head: split(self.head, HEAD_PERCENT),
            tail: split(self.tail, TAIL_PERCENT),
        })
    }

    /// The limit for a result of tool `name` (`None` when the name is unknown).
    fn limit_for(&self, name: Option<&str>) -> Option<Limit> {
        match name.and_then(|n| self.tools.get(n)) {
            Some(max) => self.limit(max.unwrap_or(0)),
            None => self.limit(self.max_chars.unwrap_or(0)),
        }
    }

    /// Refuses a `head` and `tail` that do not fit below `max_chars`, or that
    /// have no `max_chars` to be shares of.
    fn check(&self) -> Result<()> {
        if self.head.is_none() && self.tail.is_none() {
            return Ok(());
        }
        let Some(l) = self.max_chars.and_then(|max| self.limit(max)) else {
            return Err(Error::bad_config(
                "`head` and `tail` are shares of `max_chars`, which sets no limit here: \
                 leave them out (tools then keep 70% and 25% of their limit) or set `max_chars`",
            ));
        };
        if l.head.saturating_add(l.tail) >= l.max {
            return Err(Error::bad_config(format!(
                "`head` ({}) + `tail` ({}) must be below `max_chars` ({}): lower them or raise the limit",
                l.head, l.tail, l.max
            )));
        }
        Ok(())
    }
}

/// `n * numerator / denominator`, rounded down, without overflow; at most `n`
/// when `numerator` is at most `denominator`.
fn share(n: usize, numerator: usize, denominator: usize) -> usize {
    let exact = n as u128 * numerator as u128 / denominator as u128;
    usize::try_from(exact).unwrap_or(usize::MAX)
}

/// Where a cut removes text: from the head's end to the tail's start, each a
/// piece and a byte offset in it.
#[derive(Debug)]
struct Cut {
    head: (usize, usize),
    tail: (usize, usize),
    /// The characters removed.
    removed: usize,
    marker: String,
}

/// The cut for `m` under `limit`, or none when it stays whole.
fn plan(m: &Message, limit: Limit) -> Option<Cut> {
    // Bytes bound characters from above: most results stop here.
    if m.text_pieces().map(str::len).sum::<usize>() <= limit.max {
        return None;
    }
    let total: usize = m.text_pieces().map(|s| s.chars().count()).sum();
    if total <= limit.max {
        return None;
    }
    let (hp, mut he) = head_end(m, limit.head)?;
    let (tp, mut ts) = tail_start(m, limit.tail)?;
    let mut kept = limit.head + limit.tail;
    let window = SNAP_WINDOW.min(limit.head / 5);
    if let Some((at, dropped)) = m
        .text_pieces()
        .nth(hp)
        .and_then(|s| snap_back(s, he, window))
    {
        he = at;
        kept -= dropped;
    }
    let window = SNAP_WINDOW.min(limit.tail / 5);
    if let Some((at, dropped)) = m
        .text_pieces()
        .nth(tp)
        .and_then(|s| snap_forward(s, ts, window))
    {
        ts = at;
        kept -= dropped;
    }
    let removed = total - kept;
    let marker = format!(
        "\n[… {} characters cut by {} …]\n",
        group_thousands(removed),
        env!("CARGO_PKG_NAME")
    );
    if marker.chars().count() >= removed {
        return None;
    }
    Some(Cut {
        head: (hp, he),
        tail: (tp, ts),
        removed,
        marker,
    })
}

/// The piece and byte offset where the first `head` characters end. `head`
/// must be below the text's length.
fn head_end(m: &Message, head: usize) -> Option<(usize, usize)> {
    let mut left = head;
    for (k, s) in m.text_pieces().enumerate() {
        match s.char_indices().nth(left) {
            Some((b, _)) => return Some((k, b)),
            None => left -= s.chars().count(),
        }
    }
    None
}

/// The piece and byte offset where the last `tail` characters start.
fn tail_start(m: &Message, tail: usize) -> Option<(usize, usize)> {
    let n = m.text_pieces().count();
    let mut left = tail;
    for (k, s) in (0..n).rev().zip(m.text_pieces().rev()) {
        if left == 0 {
            return Some((k, s.len()));
        }
        match s.char_indices().rev().nth(left - 1) {
            Some((b, _)) => return Some((k, b)),
            None => left -= s.chars().count(),
        }
    }
    None
}

/// Moves a head that ends at byte `at` of `s` back to the end of a line, when
/// a newline is within `window` characters before it: the new end and the
/// characters given up (the newline included: the marker brings its own).
fn snap_back(s: &str, at: usize, window: usize) -> Option<(usize, usize)> {
    if at == 0 || s[at..].starts_with('\n') {
        return None;
    }
    s[..at]
        .char_indices()
        .rev()
        .take(window)
        .enumerate()
        .find(|(_, (_, c))| *c == '\n')
        .map(|(k, (b, _))| (b, k + 1))
}

/// Moves a tail that starts at byte `at` of `s` forward to the start of the
/// next line, when a newline is within `window` characters after it: the new
/// start and the characters given up.
fn snap_forward(s: &str, at: usize, window: usize) -> Option<(usize, usize)> {
    if at == 0 || at == s.len() || s[..at].ends_with('\n') {
        return None;
    }
    s[at..]
        .char_indices()
        .take(window)
        .enumerate()
        .find(|(_, (_, c))| *c == '\n')
        .map(|(k, (b, _))| (at + b + 1, k + 1))
}

/// Makes `cut` in `m`.
fn apply(m: &mut Message, cut: &Cut) {
    let ((hp, he), (tp, ts)) = (cut.head, cut.tail);
    for (k, s) in m.text_pieces_mut().enumerate() {
        if k == hp && k == tp {
            s.replace_range(he..ts, &cut.marker);
        } else if k == hp {
            s.truncate(he);
            s.push_str(&cut.marker);
        } else if k > hp && k < tp {
            s.clear();
        } else if k == tp {
            s.replace_range(..ts, "");
        }
    }
    // Text parts the cut emptied go; content stays, even empty.
    let mut k = 0;
    m.parts.retain(|p| match p {
        Part::Text(t) => {
            k += 1;
            !(k > hp && k <= tp && t.is_empty())
        }
        _ => true,
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_host_guest::{Image, MediaSource, ToolCall, testing};

    fn run(config: &str, messages: Vec<Message>) -> Vec<Message> {
        testing::run::<TruncateToolResults>(config, messages).unwrap()
    }

    fn bad(config: &str) -> String {
        match testing::run::<TruncateToolResults>(config, vec![]) {
            Err(Error::BadConfig(m)) => m,
            other => panic!("{config} gave {other:?}"),
        }
    }

    /// Runs the processor on a `History` so that `is_changed` can be asked.
    fn changed(config: &str, messages: Vec<Message>) -> Vec<bool> {
        let n = messages.len();
        let mut h = History::for_test(messages);
        TruncateToolResults::process(&mut h, serde_json::from_str(config).unwrap()).unwrap();
        (0..n).map(|i| h.is_changed(i)).collect()
    }

    fn result(text: &str) -> Message {
        Message::tool_result("c1", text).with_tool_name("bash")
    }

    /// Parts as text (`Part` has no `PartialEq`): text as itself, media as
    /// `[image]` or `[file]`.
    fn shape(parts: &[Part]) -> Vec<String> {
        parts
            .iter()
            .map(|p| match p {
                Part::Text(t) => t.clone(),
                Part::Image(_) => "[image]".into(),
                Part::File(_) => "[file]".into(),
            })
            .collect()
    }

    fn chars(m: &Message) -> usize {
        m.text_pieces().map(|s| s.chars().count()).sum()
    }

    /// `n` lines of `width` characters (newline included), numbered.
    fn lines(n: usize, width: usize) -> String {
        (0..n)
            .map(|i| format!("{i:0w$}\n", w = width - 1))
            .collect()
    }

    #[test]
    fn short_results_and_other_roles_are_left_alone() {
        let long = "x".repeat(5000);
        let h = vec![
            Message::new(Role::User, long.clone()),
            Message::new(Role::Assistant, long.clone()),
            result(&"y".repeat(2000)),
            result("ok"),
        ];
        assert_eq!(changed("{}", h.clone()), [false; 4]);
        let out = run("{}", h);
        assert_eq!(out[0].content, long);
        assert_eq!(
            out[2].content.len(),
            2000,
            "exactly at the limit stays whole"
        );
    }

    #[test]
    fn a_long_result_keeps_its_head_and_tail_with_a_marker() {
        // No newline: the cut is exact.
        let text: String = ('a'..='z').cycle().take(10_000).collect();
        let out = run(
            r#"{"max_chars": 100, "head": 30, "tail": 20}"#,
            vec![result(&text)],
        );
        let expected = format!(
            "{}\n[… 9,950 characters cut by truncate-tool-results …]\n{}",
            &text[..30],
            &text[10_000 - 20..]
        );
        assert_eq!(out[0].content, expected);
        assert_eq!(out[0].tool_call_id.as_deref(), Some("c1"));
        assert_eq!(out[0].tool_name.as_deref(), Some("bash"));
    }

    #[test]
    fn defaults_bring_a_result_within_the_limit_and_a_second_run_changes_nothing() {
        let text = "0123456789abcdefghij".repeat(500); // 10,000 characters
        let out = run("{}", vec![result(&text)]);
        let m = &out[0];
        assert!(chars(m) <= 2000, "{}", chars(m));
        assert!(m.content.starts_with(&text[..1400]));
        assert!(m.content.ends_with(&text[10_000 - 500..]));
        assert!(
            m.content
                .contains("[… 8,100 characters cut by truncate-tool-results …]")
        );
        let again = run("{}", out.clone());
        assert_eq!(again[0].content, m.content);
    }

    #[test]
    fn cuts_land_on_line_boundaries_nearby() {
        // 200 lines of 50 characters: neither cut point is on a line boundary.
        let text = lines(200, 50);
        let out = run(
            r#"{"max_chars": 1000, "head": 525, "tail": 260}"#,
            vec![result(&text)],
        );
        let c = &out[0].content;
        // The head stops at the end of line 9 (its newline given up to the
        // marker's), the tail starts at line 195 (the last 250 characters).
        let expected = format!(
            "{}\n[… 9,251 characters cut by truncate-tool-results …]\n{}",
            &text[..499],
            &text[10_000 - 250..]
        );
        assert_eq!(*c, expected);
    }

    #[test]
    fn no_newline_in_the_window_cuts_where_it_falls() {
        // Lines far longer than the window.
        let text = lines(10, 1000);
        let out = run(
            r#"{"max_chars": 2000, "head": 1500, "tail": 400}"#,
            vec![result(&text)],
        );
        let c = &out[0].content;
        assert!(c.starts_with(&text[..1500]));
        assert!(c.contains(&format!("{}\n[…", &text[..1500])));
        assert!(c.ends_with(&format!("…]\n{}", &text[10_000 - 400..])));
    }

    #[test]
    fn multibyte_text_is_counted_and_cut_in_characters() {
        // Two-, three- and four-byte characters around both cut points.
        let text: String = "é日🦀a".chars().cycle().take(4000).collect();
        let out = run(
            r#"{"max_chars": 1000, "head": 501, "tail": 299}"#,
            vec![result(&text)],
        );
        let c = &out[0].content;
        let head: String = text.chars().take(501).collect();
        let tail: String = text.chars().skip(4000 - 299).collect();
        assert_eq!(
            *c,
            format!("{head}\n[… 3,200 characters cut by truncate-tool-results …]\n{tail}")
        );
        // 4,000 characters are 10,000 bytes: the limit is in characters.
        let whole: String = "é日🦀a".chars().cycle().take(1000).collect();
        assert_eq!(
            run(r#"{"max_chars": 1000}"#, vec![result(&whole)])[0].content,
            whole
        );
    }

    /// Over many lengths, limits and split points (lines of varying width,
    /// multibyte characters, text parts): the output is a prefix of at most
    /// `head` characters, the marker with the count of what went, and a
    /// suffix of at most `tail`, each at most a window short.
    #[test]
    fn a_cut_keeps_a_prefix_and_a_suffix_and_counts_the_rest() {
        let alphabet: Vec<char> = "ab\né日🦀\ncd 12\n".chars().collect();
        for total in [120, 333, 1000, 2500] {
            let text: String = (0..total)
                .map(|i| alphabet[i * 7 % alphabet.len()])
                .collect();
            for (head, tail) in [(0, 50), (50, 0), (60, 39), (17, 82), (99, 0)] {
                for split in [None, Some(total / 3), Some(total / 2 + 1)] {
                    let mut m = result(&text);
                    if let Some(at) = split {
                        let b = text.char_indices().nth(at).unwrap().0;
                        m.content = text[..b].into();
                        m.parts = vec![Part::Text(text[b..].into())];
                    }
                    let config = format!(r#"{{"max_chars": 100, "head": {head}, "tail": {tail}}}"#);
                    let out: String = run(&config, vec![m])[0].text_pieces().collect();
                    let Some((kept_head, rest)) = out.split_once("\n[… ") else {
                        // Left whole: the cut would not have paid for its marker.
                        assert_eq!(out, text);
                        assert!(total - head - tail <= 100, "{total} {head} {tail}");
                        continue;
                    };
                    let (count, kept_tail) = rest
                        .split_once(" characters cut by truncate-tool-results …]\n")
                        .unwrap();
                    let (h, t) = (kept_head.chars().count(), kept_tail.chars().count());
                    assert!(text.starts_with(kept_head) && text.ends_with(kept_tail));
                    assert!(h <= head && h + head.min(500) / 5 >= head, "{h} of {head}");
                    assert!(t <= tail && t + tail.min(500) / 5 >= tail, "{t} of {tail}");
                    assert_eq!(
                        count.replace(',', "").parse::<usize>().unwrap(),
                        total - h - t
                    );
                }
            }
        }
    }

    #[test]
    fn a_cut_spans_text_parts_and_leaves_other_parts() {
        let image = Part::Image(Image {
            source: MediaSource::Url("https://example.com/a.png".into()),
            mime_type: None,
        });
        let mut m = result("");
        m.parts = vec![
            Part::Text("A".repeat(300)),
            image,
            Part::Text("B".repeat(300)),
            Part::Text("C".repeat(300)),
            Part::Text("D".repeat(300)),
        ];
        let out = run(r#"{"max_chars": 500, "head": 350, "tail": 100}"#, vec![m]);
        let m = &out[0];
        assert_eq!(m.content, "");
        let marker = "\n[… 750 characters cut by truncate-tool-results …]\n";
        assert_eq!(
            shape(&m.parts),
            [
                "A".repeat(300),
                "[image]".into(),
                format!("{}{marker}", "B".repeat(50)),
                "D".repeat(100),
            ]
        );
    }

    #[test]
    fn content_and_parts_count_together() {
        let mut m = result(&"a".repeat(400));
        m.parts = vec![Part::Text("b".repeat(400))];
        let out = run(r#"{"max_chars": 500, "head": 300, "tail": 100}"#, vec![m]);
        assert_eq!(
            out[0].content,
            format!(
                "{}\n[… 400 characters cut by truncate-tool-results …]\n",
                "a".repeat(300)
            )
        );
        assert_eq!(shape(&out[0].parts), ["b".repeat(100)]);
    }

    #[test]
    fn a_cut_smaller_than_its_marker_is_not_made() {
        let text = "z".repeat(1010);
        let h = vec![result(&text)];
        assert_eq!(
            changed(r#"{"max_chars": 1000, "head": 900, "tail": 99}"#, h),
            [false]
        );
    }

    #[test]
    fn tools_have_their_own_limits_and_null_or_zero_means_never() {
        let text = "w".repeat(3000);
        let h = vec![
            result(&text).with_tool_name("read_file"),
            result(&text).with_tool_name("ask_user"),
            result(&text).with_tool_name("search"),
            result(&text).with_tool_name("other"),
        ];
        let config = r#"{"tools": {"read_file": 5000, "ask_user": null, "search": 0}}"#;
        assert_eq!(changed(config, h.clone()), [false, false, false, true]);
        // A tool's lower limit: the head and tail follow it.
        let out = run(r#"{"tools": {"other": 1000}}"#, h);
        let cut = &out[0].content; // read_file, now under the default 2000
        assert!(cut.starts_with(&"w".repeat(1400)) && !cut.starts_with(&"w".repeat(1401)));
        let cut = &out[3].content;
        assert!(cut.starts_with(&"w".repeat(700)) && !cut.starts_with(&"w".repeat(701)));
        assert!(cut.ends_with(&format!("]\n{}", "w".repeat(250))));
    }

    #[test]
    fn no_default_limit_cuts_only_the_tools_named() {
        let text = "v".repeat(9000);
        let h = vec![
            result(&text).with_tool_name("bash"),
            result(&text).with_tool_name("grep"),
        ];
        assert_eq!(
            changed(r#"{"max_chars": null, "tools": {"grep": 4000}}"#, h.clone()),
            [false, true]
        );
        assert_eq!(
            changed(r#"{"max_chars": 0, "tools": {"grep": 4000}}"#, h),
            [false, true]
        );
    }

    #[test]
    fn a_result_without_a_tool_name_takes_the_name_of_its_call() {
        let h = vec![
            Message::new(Role::User, "look"),
            Message::tool_calls(vec![ToolCall::new("c1", "read_file", "{}")]),
            Message::tool_result("c1", "u".repeat(3000)),
        ];
        assert_eq!(
            changed(r#"{"tools": {"read_file": null}}"#, h.clone()),
            [false; 3]
        );
        assert_eq!(changed("{}", h), [false, false, true]);
    }

    #[test]
    fn the_last_results_are_kept_whole() {
        let text = "t".repeat(3000);
        let h = vec![
            result(&text),
            Message::new(Role::User, "more"),
            result(&text),
            result(&text),
            Message::new(Role::Assistant, "done"),
        ];
        assert_eq!(
            changed(r#"{"keep_last": 2}"#, h.clone()),
            [true, false, false, false, false]
        );
        assert_eq!(changed(r#"{"keep_last": 3}"#, h.clone()), [false; 5]);
        assert_eq!(changed(r#"{"keep_last": 10}"#, h), [false; 5]);
    }

    #[test]
    fn nothing_to_do() {
        assert!(run("{}", vec![]).is_empty());
        let h = vec![
            Message::new(Role::User, "a".repeat(10_000)),
            Message::new(Role::Assistant, "b"),
        ];
        assert_eq!(changed("{}", h), [false, false]);
        // A result with no text at all.
        let mut m = result("");
        m.parts = vec![Part::Image(Image {
            source: MediaSource::Path("a.png".into()),
            mime_type: None,
        })];
        assert_eq!(changed(r#"{"max_chars": 1}"#, vec![m]), [false]);
    }

    #[test]
    fn head_and_tail_may_be_zero() {
        let text = "s".repeat(500);
        let out = run(
            r#"{"max_chars": 100, "head": 0, "tail": 0}"#,
            vec![result(&text)],
        );
        assert_eq!(
            out[0].content,
            "\n[… 500 characters cut by truncate-tool-results …]\n"
        );
    }

    #[test]
    fn head_and_tail_must_fit_below_max_chars() {
        let m = bad(r#"{"max_chars": 2000, "head": 1500, "tail": 500}"#);
        assert!(
            m.contains("`head` (1500) + `tail` (500) must be below `max_chars` (2000)"),
            "{m}"
        );
        // The default tail of a 1000 limit is 250.
        let m = bad(r#"{"max_chars": 1000, "head": 800}"#);
        assert!(m.contains("`head` (800) + `tail` (250)"), "{m}");
        // Absurd values do not overflow.
        let huge = format!(r#"{{"head": {}, "tail": {}}}"#, usize::MAX, usize::MAX);
        assert!(bad(&huge).contains("must be below"));
    }

    #[test]
    fn head_and_tail_need_a_max_chars() {
        for config in [
            r#"{"max_chars": null, "head": 10, "tools": {"ls": 100}}"#,
            r#"{"max_chars": 0, "tail": 10}"#,
        ] {
            assert!(bad(config).contains("shares of `max_chars`"), "{config}");
        }
    }

    #[test]
    fn a_tools_limit_keeps_the_same_shares_as_max_chars() {
        let text = "q".repeat(20_000);
        let config =
            r#"{"max_chars": 1000, "head": 600, "tail": 300, "tools": {"ls": 5000, "cat": 100}}"#;
        let out = run(
            config,
            vec![
                result(&text).with_tool_name("ls"),
                result(&text).with_tool_name("cat"),
            ],
        );
        let marker = |n| format!("\n[… {n} characters cut by truncate-tool-results …]\n");
        let q = |n| "q".repeat(n);
        assert_eq!(
            out[0].content,
            format!("{}{}{}", q(3000), marker("15,500"), q(1500))
        );
        assert_eq!(
            out[1].content,
            format!("{}{}{}", q(60), marker("19,910"), q(30))
        );
    }

    #[test]
    fn malformed_configurations_are_refused() {
        assert!(bad(r#"{"max_chars": "2000"}"#).contains("invalid type: string"));
        assert!(bad(r#"{"max_chars": -1}"#).contains("invalid value"));
        assert!(bad(r#"{"head": 1.5}"#).contains("invalid type"));
        assert!(bad(r#"{"tools": ["bash"]}"#).contains("invalid type: sequence"));
        assert!(bad(r#"{"tools": {"bash": "never"}}"#).contains("invalid type: string"));
        assert!(bad(r#"{"keep_last": null}"#).contains("invalid type: null"));
        assert!(bad(r#"{"max_char": 10}"#).contains("unknown field `max_char`"));
        assert!(bad("2000").contains("invalid type: integer"));
    }

    #[test]
    fn the_published_example_and_schema_are_valid() {
        let example = TruncateToolResults::CONFIG_EXAMPLE.unwrap();
        run(example, vec![]);
        let schema: serde_json::Value =
            serde_json::from_str(TruncateToolResults::CONFIG_SCHEMA.unwrap()).unwrap();
        let mut keys: Vec<_> = schema["properties"].as_object().unwrap().keys().collect();
        keys.sort();
        assert_eq!(keys, ["head", "keep_last", "max_chars", "tail", "tools"]);
    }
}
