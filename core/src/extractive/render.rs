//! Fitting the ranked facts into the word cap and writing them under the
//! five headings.

use std::collections::{HashMap, HashSet};

use super::facts::{Fact, FactKind, Facts};
use super::prose::shorten;
use super::rank::ranked;
use super::sections::{HEADINGS, Section, bullet};
use super::values::ValueKind;
use super::{ExtractiveSummarizer, MIN_WORDS, word_count};
use crate::tokens::TokenCounter;

/// How many one-word values share a bullet when values are packed.
const PACK: usize = 8;

/// The order of value kinds under Important Values.
const VALUE_ORDER: [ValueKind; 6] = [
    ValueKind::ErrorLine,
    ValueKind::Url,
    ValueKind::Path,
    ValueKind::Command,
    ValueKind::Identifier,
    ValueKind::Quantity,
];

/// The order in which values are placed, each tier best-ranked first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tier {
    /// Modified files, what the agent used (its commands, the paths and
    /// URLs it passed to tools) and every URL. A listing of a thousand paths it was only
    /// shown must not push these out.
    Used,
    /// The other key values (paths, URLs, error lines) and the numbers with
    /// units (measured timings, sizes and counts: short, and the evidence
    /// of what a run found).
    Key,
    /// Identifiers and the rest.
    Other,
}

impl Tier {
    fn of(fact: &Fact) -> Tier {
        match fact.kind {
            FactKind::FileModified => Tier::Used,
            FactKind::Value(_) if fact.uses > 0 => Tier::Used,
            // Few and the evidence of where an answer came from.
            FactKind::Value(ValueKind::Url) => Tier::Used,
            FactKind::Value(ValueKind::Quantity) => Tier::Key,
            FactKind::Value(kind) if kind.is_key() => Tier::Key,
            _ => Tier::Other,
        }
    }
}

/// One pass over the ranked facts: a tier, or the short values of a tier
/// (files, paths, URLs and numbers: a word or two each). Short values go
/// before the long ones (commands, error lines) of their tier, so that
/// sixty commands cannot leave no room for the thirty paths a run touched;
/// the short values the agent was only shown go before the commands too,
/// but within half of the room left and not those only seen in a listing,
/// so that a thousand paths of a `find` cannot leave no room for the
/// commands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pass {
    UsedShort,
    KeyShort,
    Used,
    Key,
    Other,
}

impl Pass {
    const ALL: [Pass; 5] = [
        Pass::UsedShort,
        Pass::KeyShort,
        Pass::Used,
        Pass::Key,
        Pass::Other,
    ];

    fn admits(self, fact: &Fact) -> bool {
        let short = matches!(
            fact.kind,
            FactKind::FileModified
                | FactKind::Value(ValueKind::Path | ValueKind::Url | ValueKind::Quantity)
        );
        match (self, Tier::of(fact)) {
            (Pass::UsedShort, Tier::Used) => short,
            // A listing's values wait for the commands.
            (Pass::KeyShort, Tier::Key) => short && !fact.listed,
            (Pass::Used, Tier::Used) | (Pass::Key, Tier::Key) | (Pass::Other, Tier::Other) => true,
            _ => false,
        }
    }

    /// Whether the pass takes at most half of the words and tokens left
    /// when it starts.
    fn halves(self) -> bool {
        self == Pass::KeyShort
    }
}

/// How far a pass limited to a share of the room may fill a [`Plan`].
#[derive(Clone, Copy)]
struct Limit {
    /// The most words used.
    words: usize,
    /// The fewest tokens left, when the plan counts tokens.
    tokens: u64,
}

/// What separates the chosen texts in [`Plan::joined`].
const SEPARATOR: char = '\0';

/// How many leading bytes index a chosen value in [`ValueIndex`].
const PREFIX: usize = 4;

/// The chosen Important Values, indexed by their first [`PREFIX`] bytes, so
/// that finding those that appear inside a new value takes one look-up per
/// position of the new value instead of one substring search per chosen
/// value.
#[derive(Default)]
struct ValueIndex {
    /// Values of at least [`PREFIX`] bytes, by their first bytes.
    long: HashMap<[u8; PREFIX], Vec<String>>,
    /// Shorter values.
    short: Vec<String>,
}

impl ValueIndex {
    fn insert(&mut self, text: &str) {
        match text.as_bytes().first_chunk::<PREFIX>() {
            Some(key) => self.long.entry(*key).or_default().push(text.to_owned()),
            None => self.short.push(text.to_owned()),
        }
    }

    fn remove(&mut self, text: &str) {
        let list = match text.as_bytes().first_chunk::<PREFIX>() {
            Some(key) => self.long.get_mut(key),
            None => Some(&mut self.short),
        };
        if let Some(list) = list
            && let Some(at) = list.iter().position(|t| t == text)
        {
            list.swap_remove(at);
        }
    }

    /// The indexed values that appear verbatim in `value`, once for each
    /// place they appear.
    fn inside<'a>(&'a self, value: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        let bytes = value.as_bytes();
        let short = self
            .short
            .iter()
            .filter(move |t| value.contains(t.as_str()));
        let long = (0..bytes.len().saturating_sub(PREFIX - 1)).flat_map(move |i| {
            let key: &[u8; PREFIX] = bytes[i..].first_chunk().expect("i leaves PREFIX bytes");
            self.long
                .get(key)
                .into_iter()
                .flatten()
                .filter(move |t| bytes[i..].starts_with(t.as_bytes()))
        });
        short.chain(long).map(String::as_str)
    }
}

/// A piece of text chosen for the summary.
struct Chosen {
    section: Section,
    /// The value kind, for Important Values.
    kind: Option<ValueKind>,
    /// The text, verbatim.
    text: String,
    /// Its words.
    words: usize,
    /// Whether it shares a bullet with others of its kind when packed: a
    /// one-word value without backticks.
    packable: bool,
}

impl Chosen {
    fn new(section: Section, kind: Option<ValueKind>, text: &str) -> Self {
        let words = word_count(text);
        Chosen {
            section,
            kind,
            text: text.to_owned(),
            words,
            packable: kind.is_some() && words == 1 && !text.contains('`'),
        }
    }
}

/// A budget of tokens for the chosen texts, besides the words.
struct Tokens<'a> {
    /// The tokens left.
    left: u64,
    counter: &'a dyn TokenCounter,
}

impl Tokens<'_> {
    /// What a chosen text costs once written: its tokens and those of its
    /// bullet, backticks and line end.
    fn cost(&self, text: &str) -> u64 {
        u64::from(self.counter.count_text(text)) + 2
    }
}

/// The texts chosen for a summary, within a budget of words (headings aside)
/// and, when it is given one, of tokens.
struct Plan<'a> {
    chosen: Vec<Chosen>,
    /// Every chosen text, each followed by [`SEPARATOR`], in no particular
    /// order: whether a text without the separator appears verbatim in a
    /// chosen one is one search of this (a match cannot span two texts).
    joined: String,
    /// `joined` misses no chosen text but may hold dropped ones.
    joined_stale: bool,
    /// The chosen Important Values, to find those inside a new value.
    values: ValueIndex,
    budget: usize,
    /// One-word values share bullets, [`PACK`] to a bullet.
    packed: bool,
    /// The words the chosen texts take as written.
    used: usize,
    /// Whether a key value or modified file had to be left out.
    key_left_out: bool,
    /// The tokens left, when the summary must fit a number of tokens.
    tokens: Option<Tokens<'a>>,
}

impl<'a> Plan<'a> {
    fn new(budget: usize, packed: bool, tokens: Option<Tokens<'a>>) -> Self {
        Plan {
            chosen: Vec::new(),
            joined: String::new(),
            joined_stale: false,
            values: ValueIndex::default(),
            budget,
            packed,
            used: 0,
            key_left_out: false,
            tokens,
        }
    }

    /// The limit of a pass that may take half of the room left.
    fn half_left(&self) -> Limit {
        Limit {
            words: self.used + self.budget.saturating_sub(self.used) / 2,
            tokens: self.tokens.as_ref().map_or(0, |t| t.left / 2),
        }
    }

    /// Whether the plan has filled past `limit`.
    fn past(&self, limit: Limit) -> bool {
        self.used >= limit.words || self.tokens.as_ref().is_some_and(|t| t.left <= limit.tokens)
    }

    /// Spends the tokens of `text`, or says that they are not left.
    fn spend(&mut self, text: &str, given_back: u64) -> bool {
        let Some(tokens) = &mut self.tokens else {
            return true;
        };
        let cost = tokens.cost(text);
        if cost > tokens.left + given_back {
            return false;
        }
        tokens.left = tokens.left + given_back - cost;
        true
    }

    /// The tokens the chosen `texts` cost.
    fn cost_of<'t>(&self, texts: impl Iterator<Item = &'t str>) -> u64 {
        self.tokens
            .as_ref()
            .map_or(0, |tokens| texts.map(|t| tokens.cost(t)).sum())
    }

    /// The words of the chosen texts as they will be written.
    fn count(&self) -> usize {
        let mut words = 0;
        let mut packed = [0usize; VALUE_ORDER.len()];
        for c in &self.chosen {
            match c.kind {
                Some(kind) if self.packed && c.packable => {
                    packed[VALUE_ORDER.iter().position(|k| *k == kind).unwrap_or(0)] += 1;
                }
                _ if c.section == Section::CurrentState => words += c.words,
                _ => words += 1 + c.words,
            }
        }
        words + packed.iter().map(|n| n + n.div_ceil(PACK)).sum::<usize>()
    }

    /// Whether a text already appears verbatim in a chosen one.
    fn covers(&mut self, text: &str) -> bool {
        if text.contains(SEPARATOR) {
            return self.chosen.iter().any(|c| c.text.contains(text));
        }
        if std::mem::take(&mut self.joined_stale) {
            self.joined.clear();
            for c in &self.chosen {
                self.joined.push_str(&c.text);
                self.joined.push(SEPARATOR);
            }
        }
        memchr::memmem::find(self.joined.as_bytes(), text.as_bytes()).is_some()
    }

    /// Adds a chosen text.
    fn push(&mut self, chosen: Chosen) {
        self.joined.push_str(&chosen.text);
        self.joined.push(SEPARATOR);
        if chosen.section == Section::ImportantValues {
            self.values.insert(&chosen.text);
        }
        self.chosen.push(chosen);
    }

    /// Takes a text into a section if it is not there yet and fits; says
    /// whether the section now holds it.
    fn take(&mut self, section: Section, text: &str) -> bool {
        if self
            .chosen
            .iter()
            .any(|c| c.section == section && c.text == text)
        {
            return true;
        }
        let words = word_count(text);
        let line_words = words + usize::from(section != Section::CurrentState);
        if words == 0 || self.used + line_words > self.budget || !self.spend(text, 0) {
            return false;
        }
        self.push(Chosen::new(section, None, text));
        self.used += line_words;
        true
    }

    /// Takes a value unless it already appears verbatim in a chosen text;
    /// values it contains are dropped, their words given back.
    fn take_value(&mut self, kind: ValueKind, value: &str) -> bool {
        if self.covers(value) {
            return true;
        }
        let chosen = Chosen::new(Section::ImportantValues, Some(kind), value);
        // A packed one-word value may cost a single word.
        let at_least = if self.packed && chosen.packable {
            1
        } else {
            1 + chosen.words
        };
        // The chosen values inside this one (Important Values are unique).
        let inside: HashSet<String> = self.values.inside(value).map(str::to_owned).collect();
        if self.used + at_least > self.budget && inside.is_empty() {
            return false;
        }
        let mut dropped = Vec::new();
        if !inside.is_empty() {
            for (i, c) in std::mem::take(&mut self.chosen).into_iter().enumerate() {
                if c.section == Section::ImportantValues && inside.contains(&c.text) {
                    dropped.push((i, c));
                } else {
                    self.chosen.push(c);
                }
            }
        }
        self.chosen.push(chosen);
        let used = self.count();
        let given_back = self.cost_of(dropped.iter().map(|(_, c)| c.text.as_str()));
        if used <= self.budget && self.spend(value, given_back) {
            self.used = used;
            if let Some(chosen) = self.chosen.pop() {
                self.push(chosen);
            }
            for (_, c) in &dropped {
                self.values.remove(&c.text);
                self.joined_stale = true;
            }
            return true;
        }
        // It does not fit: put everything back as it was.
        self.chosen.pop();
        for (i, c) in dropped {
            self.chosen.insert(i, c);
        }
        false
    }

    /// The summary text.
    fn write(&self) -> String {
        let mut out = String::new();
        let mut left = self.budget.saturating_sub(self.used);
        for (n, (heading, section)) in HEADINGS.iter().zip(Section::ALL).enumerate() {
            if n > 0 {
                out.push('\n');
            }
            out.push_str("## ");
            out.push_str(heading);
            out.push('\n');
            let mut lines = Vec::new();
            let items = self.chosen.iter().filter(|c| c.section == section);
            match section {
                Section::CurrentState => lines.extend(items.map(|c| c.text.clone())),
                Section::FilesModified => lines.extend(items.map(|c| bullet(&c.text))),
                Section::ImportantValues => {
                    let items: Vec<&Chosen> = items.collect();
                    for kind in VALUE_ORDER {
                        let of_kind = items.iter().filter(|c| c.kind == Some(kind));
                        let (packed, single): (Vec<&&Chosen>, Vec<&&Chosen>) =
                            of_kind.partition(|c| self.packed && c.packable);
                        lines.extend(single.iter().map(|c| bullet(&c.text)));
                        for pack in packed.chunks(PACK) {
                            let values: Vec<String> =
                                pack.iter().map(|c| format!("`{}`", c.text)).collect();
                            lines.push(format!("- {}", values.join(" ")));
                        }
                    }
                }
                _ => lines.extend(items.map(|c| format!("- {}", c.text))),
            }
            if lines.is_empty() && left > 0 {
                lines.push("none".to_owned());
                left -= 1;
            }
            for line in lines {
                out.push_str(&line);
                out.push('\n');
            }
        }
        out
    }
}

impl ExtractiveSummarizer {
    /// Writes `facts` under the five headings in at most `max_words` words
    /// (which must be at least [`MIN_WORDS`]).
    ///
    /// Values are written one to a bullet; when that leaves out a key value,
    /// one-word values share bullets instead. Given `max_tokens` (the tokens
    /// the chosen texts may take, headings aside, and the counter), a text
    /// whose tokens are not left is skipped and lower-ranked ones that fit are
    /// taken instead, so a few long values cannot crowd out many short ones
    /// ranked after them.
    pub(super) fn render(
        &self,
        facts: &Facts,
        max_words: usize,
        max_tokens: Option<(u32, &dyn TokenCounter)>,
    ) -> String {
        let ranked = ranked(facts);
        let budget = max_words - MIN_WORDS;
        let tokens = || {
            max_tokens.map(|(left, counter)| Tokens {
                left: u64::from(left),
                counter,
            })
        };
        let mut plan = self.choose(
            facts,
            &ranked,
            max_words,
            Plan::new(budget, false, tokens()),
        );
        if plan.key_left_out {
            plan = self.choose(facts, &ranked, max_words, Plan::new(budget, true, tokens()));
        }
        let summary = plan.write();
        debug_assert!(word_count(&summary) <= max_words, "{summary}");
        summary
    }

    /// Fills `plan`: the current state, a share of pending tasks and
    /// decisions, then the values in [`Pass`]es, each best-ranked first:
    /// the modified files and the paths and URLs the agent used; the other
    /// paths, URLs and numbers, within half of what is left; the commands
    /// and the rest of what the agent used; the other key values; the rest
    /// ([`Tier`]).
    fn choose<'a>(
        &self,
        facts: &Facts,
        ranked: &[&Fact],
        max_words: usize,
        mut plan: Plan<'a>,
    ) -> Plan<'a> {
        if let Some(state) = &facts.current_state {
            let cap = self.state_words.min(max_words / 10).max(1);
            plan.take(
                Section::CurrentState,
                &shorten(state.trim_start_matches(['#', ' ']), cap),
            );
        }
        let reserve = max_words.saturating_mul(self.reserved_percent) / 100;
        for kind in [FactKind::PendingTask, FactKind::Decision] {
            let mut used = 0;
            for fact in ranked.iter().filter(|f| f.kind == kind) {
                let words = 1 + word_count(&fact.text);
                if used + words <= reserve && plan.take(Section::of(kind), &fact.text) {
                    used += words;
                }
            }
        }
        // A path that was modified is listed under Files Modified only, even
        // when it ranks higher as a mentioned path.
        let modified: HashSet<&str> = facts
            .of_kind(FactKind::FileModified)
            .map(|f| f.text.as_str())
            .collect();
        let mut placed = vec![false; ranked.len()];
        for pass in Pass::ALL {
            let limit = pass.halves().then(|| plan.half_left());
            for (fact, placed) in ranked.iter().zip(&mut placed) {
                if *placed || !pass.admits(fact) {
                    continue;
                }
                if limit.is_some_and(|limit| plan.past(limit)) {
                    break;
                }
                *placed = true;
                let key = Tier::of(fact) != Tier::Other;
                let taken = match fact.kind {
                    FactKind::Value(ValueKind::Path) if modified.contains(fact.text.as_str()) => {
                        plan.take(Section::FilesModified, &fact.text)
                    }
                    FactKind::Value(kind) => plan.take_value(kind, &fact.text),
                    kind => plan.take(Section::of(kind), &fact.text),
                };
                if key && !taken {
                    plan.key_left_out = true;
                }
            }
        }
        plan
    }
}

#[cfg(test)]
mod tests {
    use crate::Message;
    use crate::extractive::fixtures::{assert_headings, call, merge, sections_of, summarize};
    use crate::extractive::{FactKind, Facts, MIN_WORDS, ValueKind, word_count};
    use proptest::prelude::*;

    #[test]
    fn values_share_bullets_only_when_one_to_a_bullet_would_drop_some() {
        let listing = |i| Message::tool_result("c", "ls", format!("/a/f{i}.rs"));
        let mut few: Vec<Message> = (0..5).map(listing).collect();
        // Regression: a modified file that is also mentioned counted as left
        // out, and packed a summary that had room to spare.
        few.push(call("", "c9", "Edit", r#"{"file_path": "/a/f4.rs"}"#));
        let summary = summarize(&few, 600);
        assert!(summary.contains("\n- `/a/f0.rs`\n"), "{summary}");
        assert_eq!(sections_of(&summary, "/a/f4.rs"), ["Files Modified"]);

        let many: Vec<Message> = (0..400).map(listing).collect();
        let summary = summarize(&many, 600);
        assert!(word_count(&summary) <= 600);
        assert!(summary.contains("- `/a/f399.rs` `/a/f398.rs`"), "{summary}");
        let kept = (0..400)
            .filter(|i| summary.contains(&format!("/a/f{i}.rs`")))
            .count();
        assert!(kept > 300, "only {kept} of 400 kept");
        // Read back, the packed bullets give every value.
        let facts = Facts::from_summary(&summary);
        assert_eq!(
            facts.of_kind(FactKind::Value(ValueKind::Path)).count(),
            kept
        );
    }

    /// A bash agent's run: many long commands it ran, and the files its
    /// errors named. The commands must not take all the room.
    #[test]
    fn many_commands_leave_room_for_the_paths_errors_named() {
        let mut messages = Vec::new();
        for i in 0..60 {
            messages.push(call(
                "",
                &format!("c{i}"),
                "bash",
                &format!(
                    r#"{{"command": "python -m pytest tests/test_case_{i}.py -x -q --tb=short -k 'not slow and not network'"}}"#
                ),
            ));
            messages.push(Message::tool_result(
                format!("c{i}"),
                "bash",
                format!("E   AssertionError in /testbed/src/module_{i}.py\n1 failed"),
            ));
        }
        let summary = summarize(&messages, 400);
        assert!(word_count(&summary) <= 400);
        for i in 0..60 {
            let path = format!("/testbed/src/module_{i}.py");
            assert!(summary.contains(&path), "{path} missing:\n{summary}");
        }
        // The commands fill what the paths leave, the latest first.
        assert!(summary.contains("tests/test_case_59.py -x"), "{summary}");
    }

    /// A late `find` listing of hundreds of paths: the paths an earlier
    /// traceback named and the commands the agent ran come before the
    /// listing's.
    #[test]
    fn a_listing_waits_for_the_commands_and_the_paths_errors_named() {
        let mut messages = vec![Message::tool_result(
            "c0",
            "bash",
            "Traceback (most recent call last):\n  File \"/repo/app/core.py\", line 3\nKeyError: 'x'",
        )];
        for i in 1..20 {
            messages.push(call(
                "",
                &format!("c{i}"),
                "bash",
                &format!(r#"{{"command": "grep -n handler_{i} app/core.py"}}"#),
            ));
            messages.push(Message::tool_result(format!("c{i}"), "bash", "no match"));
        }
        let listing: Vec<String> = (0..400)
            .map(|i| format!("/repo/node_modules/pkg_{i}/lib/index.js"))
            .collect();
        messages.push(Message::tool_result("c99", "bash", listing.join("\n")));
        let facts = super::super::extract_facts(&messages);
        let listed = facts
            .facts
            .iter()
            .filter(|f| f.listed)
            .map(|f| f.text.as_str())
            .collect::<Vec<_>>();
        assert_eq!(listed.len(), 400, "{listed:?}");
        let summary = summarize(&messages, 200);
        assert!(word_count(&summary) <= 200);
        assert!(summary.contains("/repo/app/core.py"), "{summary}");
        for i in 1..20 {
            let command = format!("grep -n handler_{i} app/core.py");
            assert!(summary.contains(&command), "{command} missing:\n{summary}");
        }
        // What is left goes to the listing.
        assert!(summary.contains("/repo/node_modules/pkg_"), "{summary}");
    }

    #[test]
    fn empty_input_gives_the_headings_and_none() {
        let summary = summarize(&[], 600);
        assert_headings(&summary);
        assert_eq!(summary.matches("\nnone\n").count(), 5, "{summary}");
        assert_eq!(word_count(&summary), MIN_WORDS + 5);
        assert_eq!(merge(&[], 600), summary);
    }

    proptest! {
        // The index finds exactly the chosen values a search of each finds.
        #[test]
        fn the_value_index_finds_what_searching_each_value_finds(
            values in proptest::collection::btree_set("[ab/é]{1,6}", 0..12),
            removed in proptest::collection::vec(any::<proptest::sample::Index>(), 0..4),
            probe in "[ab/é]{0,16}",
        ) {
            let mut values: Vec<String> = values.into_iter().collect();
            let mut index = super::ValueIndex::default();
            for v in &values {
                index.insert(v);
            }
            for r in removed {
                if !values.is_empty() {
                    let gone = values.remove(r.index(values.len()));
                    index.remove(&gone);
                }
            }
            let mut found: Vec<&str> = index.inside(&probe).collect();
            found.sort_unstable();
            found.dedup();
            let mut expected: Vec<&str> = values
                .iter()
                .map(String::as_str)
                .filter(|v| probe.contains(v))
                .collect();
            expected.sort_unstable();
            prop_assert_eq!(found, expected);
        }

        // Budget packing never exceeds the budget, whatever the span.
        #[test]
        fn the_cap_always_holds(
            texts in proptest::collection::vec("[a-z/._ :E0-9rof`\n]{0,80}", 0..40),
            max_words in MIN_WORDS..120usize,
        ) {
            let messages: Vec<Message> = texts
                .iter()
                .enumerate()
                .map(|(i, t)| match i % 3 {
                    0 => Message::user(format!("{t} /p/{i}.rs")),
                    1 => call(t, &format!("c{i}"), "Edit", &format!(r#"{{"path": "/e/{i}.rs"}}"#)),
                    _ => Message::tool_result(format!("c{i}"), "Edit", format!("Error {t}")),
                })
                .collect();
            let summary = summarize(&messages, max_words);
            prop_assert!(word_count(&summary) <= max_words, "{}", summary);
            let merged = merge(&[summary.clone(), summary], max_words);
            prop_assert!(word_count(&merged) <= max_words, "{}", merged);
        }
    }
}
