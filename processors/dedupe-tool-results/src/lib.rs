//! `dedupe-tool-results`: replaces a tool result identical to an earlier one
//! with a short reference to it.
//!
//! Agents read the same file, list the same folder or run the same query
//! again and again; each copy costs its full length on every call. Here the
//! first copy is kept and every later one becomes
//!
//! ```text
//! [same result as the tool call toolu_01A (message m17), 4,812 characters]
//! ```
//!
//! The message stays where it is, with its `tool_call_id`, tool name and
//! flags, so the call/result exchange stays valid; only its text changes
//! (its text parts go, the reference becomes its content). Messages that are
//! not duplicates are kept as they are, never copied back to the host.
//!
//! # What counts as the same
//!
//! - The text is the `content` and the text parts, in order, empty pieces
//!   left out; two results are the same when these pieces are equal. They
//!   are found by a hash, and the texts are always compared in full before
//!   one is taken for the other.
//! - Results with an image or a file part are never deduplicated, nor used
//!   as the earlier copy: their text alone does not say they are the same.
//! - Every later copy refers to the first one, which is left whole.
//! - A copy is only replaced when the reference is shorter than it.
//! - A result without a `tool_call_id` is left alone.
//!
//! The reference names a message of the same history, so run this processor
//! after any that drops messages (`keep-last-turns`, `token-budget`): once
//! the first copy is gone, the reference points at nothing.
//!
//! # Configuration
//!
//! - `min_chars` (default 200): only results of at least this many characters
//!   (Unicode scalar values) are deduplicated; a short result such as `ok`
//!   is cheaper than the reference.
//! - `same_tool` (default true): only results of the same tool count as the
//!   same (the tool is the result's `tool_name`, or when it has none, the
//!   name in the call it answers; results whose tool is not known at all
//!   count as one tool).
//! - `keep_last` (default 0): the N most recent tool results are left alone.
//!
//! ```sh
//! agent-host run --processor target/processors/dedupe-tool-results.wasm \
//!     --processor-config '{"min_chars": 500, "same_tool": false, "keep_last": 1}'
//! ```

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use agent_host_guest::{
    History, Message, Part, Processor, Result, Role, export_processor, group_thousands,
};
use serde::Deserialize;

/// The configuration.
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Results shorter than this many characters are left alone.
    pub min_chars: usize,
    /// Whether only results of the same tool count as the same.
    pub same_tool: bool,
    /// How many of the most recent tool results are left alone.
    pub keep_last: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            min_chars: 200,
            same_tool: true,
            keep_last: 0,
        }
    }
}

/// The processor.
pub struct DedupeToolResults;

impl Processor for DedupeToolResults {
    type Config = Config;
    const CONFIG_EXAMPLE: Option<&'static str> =
        Some(r#"{"min_chars": 500, "same_tool": false, "keep_last": 1}"#);
    const CONFIG_SCHEMA: Option<&'static str> = Some(concat!(
        r#"{"type":"object","properties":{"#,
        r#""min_chars":{"type":"integer","minimum":0,"default":200},"#,
        r#""same_tool":{"type":"boolean","default":true},"#,
        r#""keep_last":{"type":"integer","minimum":0,"default":0}"#,
        r#"},"additionalProperties":false}"#
    ));

    fn process(history: &mut History, config: Config) -> Result<()> {
        let (copies, results) = find_copies(history, &config, text_hash);
        let (mut replaced, mut saved) = (0usize, 0usize);
        for copy in copies {
            let reference = reference(&history.messages()[copy.original], copy.chars);
            let length = reference.chars().count();
            if length >= copy.chars {
                continue;
            }
            let m = history.message_mut(copy.index);
            m.content = reference;
            m.parts.clear();
            replaced += 1;
            saved += copy.chars - length;
        }
        agent_host_guest::info!(
            "deduplicated {} of {} tool results, {} characters saved",
            replaced,
            results,
            group_thousands(saved)
        );
        Ok(())
    }
}

export_processor!(DedupeToolResults);

/// How many different texts one hash may stand for before further ones are
/// no longer looked up. Only crafted input shares a 64-bit hash; the cap
/// keeps it from making the search quadratic.
const MAX_SAME_HASH: usize = 8;

/// A later copy of an earlier result.
#[derive(Debug, PartialEq, Eq)]
struct Duplicate {
    /// The copy's index.
    index: usize,
    /// The index of the first result with the same text.
    original: usize,
    /// The text's length in characters.
    chars: usize,
}

/// The later copies in `messages`, oldest first, and the number of tool
/// results looked at. `hash` is [`text_hash`] (tests pass a worse one).
fn find_copies(
    history: &History,
    config: &Config,
    hash: fn(Option<&str>, &Message) -> u64,
) -> (Vec<Duplicate>, usize) {
    let end = history.last_tool_results_start(config.keep_last);
    let messages = &history.messages()[..end];
    let names = if config.same_tool {
        history.tool_names()
    } else {
        Vec::new()
    };
    let tool = |i: usize| -> Option<&str> { names.get(i).copied().flatten() };

    // First copies by hash; a hash shared by several texts chains them.
    let mut firsts: HashMap<u64, usize, BuildHasherDefault<Prehashed>> = HashMap::default();
    let mut chain: Vec<(usize, Option<usize>)> = Vec::new();
    let mut copies = Vec::new();
    let mut results = 0;
    for (i, m) in messages.iter().enumerate() {
        if m.role != Role::Tool {
            continue;
        }
        results += 1;
        if m.tool_call_id.is_none() || m.parts.iter().any(|p| !matches!(p, Part::Text(_))) {
            continue;
        }
        // Bytes bound characters from above: most results stop here.
        let bytes: usize = pieces(m).map(str::len).sum();
        if bytes == 0 || bytes < config.min_chars {
            continue;
        }
        let chars: usize = pieces(m).map(|s| s.chars().count()).sum();
        if chars < config.min_chars {
            continue;
        }
        let name = tool(i);
        let key = hash(name, m);
        let mut next = firsts.get(&key).copied();
        let mut seen = 0;
        let mut original = None;
        while let Some(k) = next {
            let (j, after) = chain[k];
            if same_text(&messages[j], m) && tool(j) == name {
                original = Some(j);
                break;
            }
            next = after;
            seen += 1;
        }
        match original {
            Some(original) => copies.push(Duplicate {
                index: i,
                original,
                chars,
            }),
            None if seen < MAX_SAME_HASH => {
                let after = firsts.insert(key, chain.len());
                chain.push((i, after));
            }
            None => {}
        }
    }
    (copies, results)
}

/// The non-empty text pieces of a message: its content, then its text parts.
fn pieces(m: &Message) -> impl Iterator<Item = &str> {
    m.text_pieces().filter(|s| !s.is_empty())
}

/// Whether two messages hold the same text pieces.
fn same_text(a: &Message, b: &Message) -> bool {
    pieces(a).eq(pieces(b))
}

/// A 64-bit hash of a tool's name and a message's text pieces: one multiply
/// per eight bytes, then a final mix. Not keyed, so not proof against
/// crafted collisions; it need not be, as texts are compared in full.
fn text_hash(tool: Option<&str>, m: &Message) -> u64 {
    let mut h = TextHash(0);
    if let Some(tool) = tool {
        h.write(tool.as_bytes());
    }
    for piece in pieces(m) {
        h.write(piece.as_bytes());
    }
    h.finish()
}

/// The state of [`text_hash`].
struct TextHash(u64);

impl TextHash {
    fn mix(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(26) ^ word).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }

    /// Adds `bytes` and their length, so that pieces cannot run into each
    /// other.
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            self.mix(u64::from_le_bytes(word.try_into().unwrap_or_default()));
        }
        let rest = words.remainder();
        let mut last = [0u8; 8];
        last[..rest.len()].copy_from_slice(rest);
        self.mix(u64::from_le_bytes(last));
        self.mix(bytes.len() as u64);
    }

    /// The final mix (MurmurHash3's), so that every bit of the state reaches
    /// the bits the map looks at.
    fn finish(self) -> u64 {
        let mut x = self.0;
        x ^= x >> 33;
        x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
        x ^= x >> 33;
        x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        x ^ (x >> 33)
    }
}

/// A map hasher for keys that are hashes already.
#[derive(Default)]
struct Prehashed(u64);

impl Hasher for Prehashed {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is used; anything else is folded in.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// What a copy of `original` is replaced by.
fn reference(original: &Message, chars: usize) -> String {
    let call = original.tool_call_id.as_deref().unwrap_or_default();
    if original.id.is_empty() {
        format!(
            "[same result as the tool call {call}, {} characters]",
            group_thousands(chars)
        )
    } else {
        format!(
            "[same result as the tool call {call} (message {}), {} characters]",
            original.id,
            group_thousands(chars)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_host_guest::{Error, FileRef, ToolCall, testing};

    fn run(config: &str, messages: Vec<Message>) -> Vec<Message> {
        testing::run::<DedupeToolResults>(config, messages).unwrap()
    }

    fn bad(config: &str) -> String {
        match testing::run::<DedupeToolResults>(config, vec![]) {
            Err(Error::BadConfig(m)) => m,
            other => panic!("{config} gave {other:?}"),
        }
    }

    fn config(json: &str) -> Config {
        serde_json::from_str(json).unwrap()
    }

    /// Runs the processor on a `History` so that `is_changed` can be asked.
    fn changed(config: &str, messages: Vec<Message>) -> Vec<bool> {
        let n = messages.len();
        let mut h = History::for_test(messages);
        DedupeToolResults::process(&mut h, self::config(config)).unwrap();
        (0..n).map(|i| h.is_changed(i)).collect()
    }

    /// A result of tool `tool` for call `call`, with the message id `m-<call>`.
    fn result(call: &str, tool: &str, text: &str) -> Message {
        Message::tool_result(call, text)
            .with_tool_name(tool)
            .with_id(format!("m-{call}"))
    }

    fn listing(seed: u32) -> String {
        (0..100).map(|i| format!("file-{seed}-{i}.rs\n")).collect()
    }

    #[test]
    fn a_later_copy_becomes_a_reference_to_the_first() {
        let a = listing(1);
        let h = vec![
            Message::new(Role::User, "list it"),
            result("c1", "ls", &a),
            result("c2", "ls", &listing(2)),
            result("c3", "ls", &a),
            result("c4", "ls", &a),
        ];
        assert_eq!(changed("{}", h.clone()), [false, false, false, true, true]);
        let out = run("{}", h);
        let n = a.chars().count();
        assert!(n > 1000, "{n}");
        let expected = format!(
            "[same result as the tool call c1 (message m-c1), {} characters]",
            group_thousands(n)
        );
        assert_eq!(out[3].content, expected);
        assert_eq!(out[4].content, expected, "the third copy names the first");
        assert_eq!(out[1].content, a);
        assert_eq!(out[4].tool_call_id.as_deref(), Some("c4"));
        assert_eq!(out[4].tool_name.as_deref(), Some("ls"));
        assert_eq!(out[4].id, "m-c4");
    }

    #[test]
    fn short_results_are_left_alone_and_length_is_in_characters() {
        let h = vec![
            result("c1", "t", "ok"),
            result("c2", "t", "ok"),
            // 150 characters, 450 bytes: under the default 200.
            result("c3", "t", &"日".repeat(150)),
            result("c4", "t", &"日".repeat(150)),
        ];
        assert_eq!(changed("{}", h.clone()), [false; 4]);
        assert_eq!(
            changed(r#"{"min_chars": 150}"#, h),
            [false, false, false, true]
        );
    }

    #[test]
    fn a_reference_longer_than_the_copy_is_not_made() {
        let h = vec![result("c1", "t", "ok"), result("c2", "t", "ok")];
        assert_eq!(changed(r#"{"min_chars": 0}"#, h), [false, false]);
    }

    #[test]
    fn same_tool_decides_whether_other_tools_count() {
        let a = listing(1);
        let h = vec![result("c1", "cat", &a), result("c2", "read_file", &a)];
        assert_eq!(changed("{}", h.clone()), [false, false]);
        assert_eq!(changed(r#"{"same_tool": false}"#, h), [false, true]);
    }

    #[test]
    fn a_result_without_a_tool_name_takes_the_name_of_its_call() {
        let a = listing(1);
        let h = vec![
            Message::tool_calls(vec![
                ToolCall::new("c1", "ls", "{}"),
                ToolCall::new("c2", "ls", "{}"),
                ToolCall::new("c3", "find", "{}"),
            ]),
            Message::tool_result("c1", a.clone()),
            Message::tool_result("c2", a.clone()),
            Message::tool_result("c3", a.clone()),
        ];
        assert_eq!(changed("{}", h), [false, false, true, false]);
    }

    #[test]
    fn text_parts_count_and_other_parts_rule_a_result_out() {
        let a = listing(1);
        let b = listing(2);
        let mut parts = result("c2", "t", "");
        parts.parts = vec![Part::Text(a.clone()), Part::Text(b.clone())];
        let mut same = result("c3", "t", &a);
        same.parts = vec![Part::Text(b.clone())];
        let mut split = result("c4", "t", "");
        split.parts = vec![Part::Text(format!("{a}{b}"))];
        let mut with_file = result("c5", "t", "");
        with_file.parts = vec![
            Part::Text(a.clone()),
            Part::Text(b.clone()),
            Part::File(FileRef {
                name: "out.txt".into(),
                path: "/tmp/out.txt".into(),
                mime_type: None,
            }),
        ];
        let h = vec![result("c1", "t", &a), parts, same, split, with_file];
        assert_eq!(changed("{}", h.clone()), [false, false, true, false, false]);
        let out = run("{}", h);
        assert!(
            out[2]
                .content
                .starts_with("[same result as the tool call c2 (message m-c2)")
        );
        assert!(out[2].parts.is_empty());
    }

    #[test]
    fn texts_are_compared_in_full_not_by_hash() {
        // Every text has the same hash here: only a full comparison tells
        // them apart.
        let h: Vec<Message> = (0..6)
            .map(|i| result(&format!("c{i}"), "t", &listing(i % 3)))
            .collect();
        let (copies, results) =
            find_copies(&History::for_test(h.clone()), &Config::default(), |_, _| 7);
        assert_eq!(results, 6);
        let pairs: Vec<_> = copies.iter().map(|c| (c.index, c.original)).collect();
        assert_eq!(pairs, [(3, 0), (4, 1), (5, 2)]);
    }

    #[test]
    fn a_crowded_hash_stops_being_searched() {
        // Ten different texts on one hash, then a copy of the last: only the
        // first eight were recorded.
        let mut h: Vec<Message> = (0..10)
            .map(|i| result(&format!("c{i}"), "t", &listing(i)))
            .collect();
        h.push(result("x", "t", &listing(0)));
        h.push(result("y", "t", &listing(9)));
        let (copies, _) = find_copies(&History::for_test(h.clone()), &Config::default(), |_, _| 7);
        let pairs: Vec<_> = copies.iter().map(|c| (c.index, c.original)).collect();
        assert_eq!(pairs, [(10, 0)]);
    }

    #[test]
    fn the_last_results_are_left_alone() {
        let a = listing(1);
        let h = vec![
            result("c1", "t", &a),
            result("c2", "t", &a),
            Message::new(Role::Assistant, "again"),
            result("c3", "t", &a),
        ];
        assert_eq!(
            changed(r#"{"keep_last": 1}"#, h.clone()),
            [false, true, false, false]
        );
        assert_eq!(changed(r#"{"keep_last": 2}"#, h.clone()), [false; 4]);
        assert_eq!(changed(r#"{"keep_last": 9}"#, h), [false; 4]);
    }

    #[test]
    fn a_reference_without_a_message_id_names_the_call_only() {
        let a = listing(1);
        let h = vec![
            Message::tool_result("c1", a.clone()).with_tool_name("t"),
            Message::tool_result("c2", a.clone()).with_tool_name("t"),
        ];
        let out = run("{}", h);
        assert_eq!(
            out[1].content,
            format!(
                "[same result as the tool call c1, {} characters]",
                group_thousands(a.len())
            )
        );
    }

    #[test]
    fn nothing_to_do() {
        assert!(run("{}", vec![]).is_empty());
        let long = listing(1);
        // Identical user and assistant messages are not tool results.
        let h = vec![
            Message::new(Role::User, long.clone()),
            Message::new(Role::User, long.clone()),
            Message::new(Role::Assistant, long.clone()),
            Message::new(Role::Assistant, long.clone()),
        ];
        assert_eq!(changed("{}", h), [false; 4]);
        // A result without a call id is left alone.
        let mut orphan = Message::new(Role::Tool, long.clone());
        orphan.tool_name = Some("t".into());
        let h = vec![result("c1", "t", &long), orphan];
        assert_eq!(changed("{}", h), [false, false]);
        // Empty results.
        let h = vec![result("c1", "t", ""), result("c2", "t", "")];
        assert_eq!(changed(r#"{"min_chars": 0}"#, h), [false, false]);
    }

    #[test]
    fn malformed_configurations_are_refused() {
        assert!(bad(r#"{"min_chars": "200"}"#).contains("invalid type: string"));
        assert!(bad(r#"{"min_chars": -5}"#).contains("invalid value"));
        assert!(bad(r#"{"same_tool": "yes"}"#).contains("invalid type: string"));
        assert!(bad(r#"{"same_tool": 1}"#).contains("invalid type: integer"));
        assert!(bad(r#"{"keep_last": 1.5}"#).contains("invalid type: floating point"));
        assert!(bad(r#"{"min_char": 10}"#).contains("unknown field `min_char`"));
        assert!(bad("true").contains("invalid type: boolean"));
    }

    #[test]
    fn the_published_example_and_schema_are_valid() {
        let example = DedupeToolResults::CONFIG_EXAMPLE.unwrap();
        run(example, vec![]);
        let schema: serde_json::Value =
            serde_json::from_str(DedupeToolResults::CONFIG_SCHEMA.unwrap()).unwrap();
        let mut keys: Vec<_> = schema["properties"].as_object().unwrap().keys().collect();
        keys.sort();
        assert_eq!(keys, ["keep_last", "min_chars", "same_tool"]);
    }

    #[test]
    fn the_hash_sees_piece_boundaries_and_the_tool() {
        let mut split = result("c1", "t", "ab");
        split.parts = vec![Part::Text("c".into())];
        let whole = result("c2", "t", "abc");
        assert_ne!(text_hash(None, &split), text_hash(None, &whole));
        assert_ne!(text_hash(Some("a"), &whole), text_hash(Some("b"), &whole));
        assert_eq!(
            text_hash(Some("t"), &whole),
            text_hash(Some("t"), &result("c9", "u", "abc"))
        );
    }
}
