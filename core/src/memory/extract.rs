//! The offline extractor: explicit facts out of what a participant said,
//! without a model.
//!
//! Each sentence of an utterance that says something becomes one [`Fact`]
//! about the speaker, of the most specific [`FactKind`] that applies:
//!
//! - **name**: `my name is Ada`, `call me Ada` (attribute `name`);
//! - **preference**: `I love/like/enjoy/prefer/hate X`, `I don't like X`
//!   (attribute `likes: X`, value `yes` or `no`, so that a later `I don't
//!   like X anymore` invalidates it);
//! - **decision**: `we decided to ...`, `let's use ...`, `I'll go with ...`;
//! - **attribute**: `my X is Y` (attribute `X`), `I live in / moved to Y`
//!   (`lives in`), `I work at/for Y` (`works at`), `I am N years old`
//!   (`age`);
//! - **path**: `/etc/hosts`, `./src/main.rs`, `~/notes`, `Cargo.toml`;
//! - **identifier**: emails, URLs, UUIDs, `#123`, `ABC-123`, versions
//!   (`v1.2.3`), commit hashes;
//! - **date**: explicit dates (`8 May 2023`, `May 8, 2023`, `2023-05-08`,
//!   `May 2023`, `in 2022`) and relative ones (`yesterday`, `last week`,
//!   `last Saturday`, `two years ago`), resolved against the utterance's
//!   time into [`Fact::dates`];
//! - **statement**: any other sentence with at least three content words
//!   that is not a question.
//!
//! Capitalised names inside a sentence become its [`Fact::mentions`].
//! Fact ids are derived from the scope, the message id and the sentence's
//! place, so extracting the same messages twice yields the same ids (and
//! [`Memory::plan_add`](super::Memory::plan_add) recognises them).
//!
//! Bounds: at most [`MAX_FACTS_PER_UTTERANCE`] facts from one utterance,
//! sentences cut at [`MAX_SENTENCE_BYTES`].

use chrono::{DateTime, Datelike, Duration, Months, NaiveDate, Utc, Weekday};

use super::terms::{is_stop_word, terms};
use super::{Fact, FactKind, Provenance, Scope};
use crate::message::{Message, Role};

/// The most facts one utterance yields.
pub const MAX_FACTS_PER_UTTERANCE: usize = 64;
/// A sentence with fewer content words than this is searched together with
/// the sentence before it.
pub const SHORT_SENTENCE_TERMS: usize = 5;
/// The longest sentence kept, in bytes (longer ones are cut).
pub const MAX_SENTENCE_BYTES: usize = 2048;

/// Something a participant said.
#[derive(Clone, Debug, PartialEq)]
pub struct Utterance<'a> {
    /// Who said it: the entity first-person facts are about.
    pub speaker: &'a str,
    /// The message's id (the facts' provenance).
    pub message_id: &'a str,
    /// What was said.
    pub text: &'a str,
    /// When.
    pub at: DateTime<Utc>,
    /// The message it answered (the other party's, just before it), if
    /// any: searched with its facts, cut at [`MAX_SENTENCE_BYTES`].
    pub replying_to: Option<&'a str>,
}

impl<'a> Utterance<'a> {
    /// `speaker` said `text` in message `message_id` at `at`.
    pub fn new(speaker: &'a str, message_id: &'a str, text: &'a str, at: DateTime<Utc>) -> Self {
        Utterance {
            speaker,
            message_id,
            text,
            at,
            replying_to: None,
        }
    }

    /// The same utterance, answering `message` (the text said just before
    /// it by someone else).
    pub fn replying_to(mut self, message: &'a str) -> Self {
        self.replying_to = Some(message);
        self
    }
}

/// The facts of `messages` (user and assistant text that is neither
/// synthetic nor part of a summary), in order: the user's said by `user`,
/// the assistant's by `agent`; a message without a timestamp is dated
/// `recorded_at`.
pub fn extract_messages(
    scope: &Scope,
    session: Option<&str>,
    messages: &[Message],
    user: &str,
    agent: &str,
    recorded_at: DateTime<Utc>,
) -> Vec<Fact> {
    let mut facts = Vec::new();
    // The other party's last message, which the next one answers.
    let mut before: Option<(Role, String)> = None;
    for message in messages.iter().filter(|m| !m.synthetic && !m.summary) {
        let speaker = match message.role {
            Role::User => user,
            Role::Assistant => agent,
            _ => continue,
        };
        let text = message.text();
        let mut said = Utterance::new(
            speaker,
            &message.id,
            &text,
            message.timestamp.unwrap_or(recorded_at),
        );
        if let Some((role, answered)) = &before
            && *role != message.role
        {
            said = said.replying_to(answered);
        }
        facts.extend(extract(scope, session, &said, recorded_at));
        before = Some((message.role, text.into_owned()));
    }
    facts
}

/// The facts `said` states, in `scope`, from session `session`, recorded at
/// `recorded_at`.
pub fn extract(
    scope: &Scope,
    session: Option<&str>,
    said: &Utterance<'_>,
    recorded_at: DateTime<Utc>,
) -> Vec<Fact> {
    let mut facts = Vec::new();
    let mut before: Option<&str> = None;
    for (place, sentence) in sentences(said.text).enumerate() {
        let previous = before.replace(sentence);
        if facts.len() == MAX_FACTS_PER_UTTERANCE {
            break;
        }
        let Some(found) = read_sentence(sentence, said.at.date_naive()) else {
            continue;
        };
        let mut fact = Fact::new(
            fact_id(scope, session, said.message_id, place),
            scope.clone(),
            said.speaker,
            sentence,
            recorded_at,
        );
        fact.kind = found.kind;
        fact.attribute = found.attribute;
        fact.value = found.value;
        fact.mentions = found.mentions;
        fact.dates = found.dates;
        // A short sentence that fills no attribute (`It was so powerful.`)
        // is searched with the one before it, which it likely refers to.
        fact.context = previous
            .filter(|_| fact.attribute.is_none() && terms(sentence).len() < SHORT_SENTENCE_TERMS)
            .map(str::to_owned);
        fact.reply_to = said
            .replying_to
            .map(|m| cut(m.trim(), MAX_SENTENCE_BYTES))
            .filter(|m| !m.is_empty())
            .map(str::to_owned);
        fact.valid_from = said.at;
        fact.source = Provenance {
            session: session.map(str::to_owned),
            message: Some(said.message_id.to_owned()),
        };
        if fact.validate().is_ok() {
            facts.push(fact);
        }
    }
    facts
}

/// The longest start of `text` of at most `max` bytes that ends on a
/// character boundary.
fn cut(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// A stable id: `f` and 32 hex digits over the scope, session, message and
/// place.
fn fact_id(scope: &Scope, session: Option<&str>, message: &str, place: usize) -> String {
    derived_fact_id('f', scope, session, message, &(place as u64).to_le_bytes())
}

/// `letter` and 32 hex digits over the scope, the session, the message and
/// `tail`: the ids of extracted facts (the offline extractor's and the
/// model's, each with its letter).
pub(super) fn derived_fact_id(
    letter: char,
    scope: &Scope,
    session: Option<&str>,
    message: &str,
    tail: &[u8],
) -> String {
    let mut key = Vec::new();
    for piece in [
        scope.user.as_str(),
        scope.agent.as_str(),
        scope.session.as_deref().unwrap_or(""),
        session.unwrap_or(""),
        message,
    ] {
        key.extend_from_slice(&(piece.len() as u64).to_le_bytes());
        key.extend_from_slice(piece.as_bytes());
    }
    key.extend_from_slice(tail);
    format!(
        "{letter}{:016x}{:016x}",
        fnv(&key, 0xcbf2_9ce4_8422_2325),
        fnv(&key, 0x8422_2325_cbf2_9ce4)
    )
}

fn fnv(bytes: &[u8], seed: u64) -> u64 {
    bytes.iter().fold(seed, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The sentences of `text`: split after `.`, `!` or `?` followed by a space,
/// and at line breaks; trimmed, cut at [`MAX_SENTENCE_BYTES`].
fn sentences(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        loop {
            if rest.is_empty() {
                return None;
            }
            let bytes = rest.as_bytes();
            let mut end = bytes.len();
            let mut next = bytes.len();
            for i in 0..bytes.len() {
                if bytes[i] == b'\n' {
                    end = i;
                    next = i + 1;
                    break;
                }
                if matches!(bytes[i], b'.' | b'!' | b'?')
                    && bytes.get(i + 1).is_none_or(|b| b.is_ascii_whitespace())
                {
                    end = i + 1;
                    next = i + 1;
                    break;
                }
            }
            let sentence = rest[..end].trim();
            rest = &rest[next..];
            if sentence.is_empty() {
                continue;
            }
            let mut cut = sentence.len().min(MAX_SENTENCE_BYTES);
            while !sentence.is_char_boundary(cut) {
                cut -= 1;
            }
            return Some(&sentence[..cut]);
        }
    })
}

/// What a sentence states.
struct Found {
    kind: FactKind,
    attribute: Option<String>,
    value: Option<String>,
    mentions: Vec<String>,
    dates: Vec<String>,
}

fn read_sentence(sentence: &str, today: NaiveDate) -> Option<Found> {
    let lower = sentence.to_lowercase();
    // Values are cut from the original at offsets found in the lowercase
    // text: where lowercasing changed lengths, they are cut from it instead.
    let original = if lower.len() == sentence.len() {
        sentence
    } else {
        lower.as_str()
    };
    let words: Vec<&str> = lower
        .split(|c: char| !(c.is_alphanumeric() || c == '\''))
        .filter(|w| !w.is_empty())
        .collect();
    let dates = dates(&words, today);
    let tokens: Vec<&str> = sentence.split_whitespace().map(trim_token).collect();
    let has_path = tokens.iter().any(|t| is_path(t));
    let has_identifier = tokens.iter().any(|t| is_identifier(t));
    let mut found = Found {
        kind: FactKind::Statement,
        attribute: None,
        value: None,
        mentions: mentions(sentence),
        dates,
    };
    if let Some(name) = after_any(
        &lower,
        original,
        &["my name is ", "call me ", "i am called "],
    ) {
        let name = leading_name(name);
        if !name.is_empty() {
            found.kind = FactKind::Name;
            found.attribute = Some("name".into());
            found.value = Some(name);
        }
    }
    if found.attribute.is_none()
        && let Some((object, liked)) = preference(&words)
    {
        found.kind = FactKind::Preference;
        found.attribute = Some(format!("likes: {object}"));
        found.value = Some(if liked { "yes" } else { "no" }.into());
    }
    if found.attribute.is_none() && is_decision(&lower) {
        found.kind = FactKind::Decision;
    }
    if found.attribute.is_none()
        && found.kind == FactKind::Statement
        && let Some((attribute, value)) = attribute(&lower, original)
    {
        found.kind = FactKind::Attribute;
        found.attribute = Some(attribute);
        found.value = Some(value);
    }
    if found.kind == FactKind::Statement {
        if has_path {
            found.kind = FactKind::Path;
        } else if has_identifier {
            found.kind = FactKind::Identifier;
        } else if !found.dates.is_empty() {
            found.kind = FactKind::Date;
        }
    }
    if found.kind == FactKind::Statement {
        let content = terms(sentence).len();
        if content < 3 || sentence.ends_with('?') {
            return None;
        }
    }
    Some(found)
}

/// A token without surrounding quotes, brackets and trailing punctuation.
fn trim_token(token: &str) -> &str {
    token
        .trim_start_matches(['"', '\'', '(', '[', '<', '`'])
        .trim_end_matches(['"', '\'', ')', ']', '>', '`', ',', ';', ':', '.', '!', '?'])
}

const EXTENSIONS: &[&str] = &[
    "c", "cfg", "conf", "cpp", "css", "csv", "db", "env", "go", "h", "html", "ini", "java", "js",
    "json", "jsonl", "lock", "log", "md", "pem", "py", "rs", "sh", "sql", "toml", "ts", "tsx",
    "txt", "wasm", "wit", "yaml", "yml", "zip",
];

fn is_path(token: &str) -> bool {
    if token.contains("://") || token.contains('@') || token.len() < 3 {
        return false;
    }
    if ["/", "./", "../", "~/"]
        .iter()
        .any(|p| token.starts_with(p))
    {
        return token.len() > 1 && token[1..].chars().any(char::is_alphanumeric);
    }
    if token.len() > 3 && token.as_bytes()[1] == b':' && token.as_bytes()[2] == b'\\' {
        return true;
    }
    let Some((stem, extension)) = token.rsplit_once('.') else {
        return false;
    };
    !stem.is_empty()
        && stem
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '/' | '.'))
        && EXTENSIONS.contains(&extension)
}

fn is_identifier(token: &str) -> bool {
    if token.starts_with("http://") || token.starts_with("https://") {
        return token.len() > 10;
    }
    if let Some((user, host)) = token.split_once('@') {
        return !user.is_empty() && host.contains('.') && !host.ends_with('.');
    }
    if let Some(number) = token.strip_prefix('#') {
        return !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit());
    }
    if let Some((prefix, number)) = token.split_once('-')
        && prefix.len() >= 2
        && prefix.bytes().all(|b| b.is_ascii_uppercase())
        && !number.is_empty()
        && number.bytes().all(|b| b.is_ascii_digit())
    {
        return true;
    }
    let version = token.strip_prefix('v').unwrap_or(token);
    if version.split('.').count() == 3
        && version
            .split('.')
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
    {
        return true;
    }
    let hex = token.bytes().all(|b| b.is_ascii_hexdigit());
    let uuid = token.len() == 36
        && token.bytes().filter(|&b| b == b'-').count() == 4
        && token.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-');
    uuid || (hex
        && (7..=64).contains(&token.len())
        && token.bytes().any(|b| b.is_ascii_digit())
        && token.bytes().any(|b| b.is_ascii_alphabetic()))
}

/// The rest of `original` after the first of `prefixes` found in `lower`.
fn after_any<'a>(lower: &str, original: &'a str, prefixes: &[&str]) -> Option<&'a str> {
    prefixes.iter().find_map(|p| {
        let at = lower.find(p)?;
        // Byte offsets agree when lowercasing kept lengths (ASCII prefixes).
        original.get(at + p.len()..)
    })
}

/// The capitalised words `text` starts with (`Ada Lovelace, and ...` ->
/// `Ada Lovelace`), or its first word.
fn leading_name(text: &str) -> String {
    let words: Vec<&str> = text.split_whitespace().map(trim_token).collect();
    let capitalised: Vec<&str> = words
        .iter()
        .take_while(|w| w.chars().next().is_some_and(char::is_uppercase))
        .copied()
        .take(4)
        .collect();
    if capitalised.is_empty() {
        words.first().map(|w| (*w).to_owned()).unwrap_or_default()
    } else {
        capitalised.join(" ")
    }
}

const LIKE: &[&str] = &[
    "love", "loves", "like", "likes", "enjoy", "enjoys", "prefer", "prefers", "adore",
];
const DISLIKE: &[&str] = &["hate", "hates", "dislike", "dislikes", "detest"];
const NEGATION: &[&str] = &["don't", "dont", "not", "never", "no", "doesn't", "longer"];

/// `i (really) love X` -> (`X`, true); `i don't like X` -> (`X`, false).
fn preference(words: &[&str]) -> Option<(String, bool)> {
    let start = words.iter().position(|w| matches!(*w, "i" | "we"))?;
    let window = &words[start + 1..words.len().min(start + 5)];
    let (at, verb) = window
        .iter()
        .enumerate()
        .find(|(_, w)| LIKE.contains(w) || DISLIKE.contains(w))?;
    // `I'd like to ...` is a wish, not a preference.
    if words.get(start + 1 + at + 1) == Some(&"to") && !DISLIKE.contains(verb) {
        return None;
    }
    let negated = window[..at].iter().any(|w| NEGATION.contains(w));
    let liked = LIKE.contains(verb) != negated;
    let object: Vec<String> = words[start + 1 + at + 1..]
        .iter()
        .take_while(|w| !matches!(**w, "because" | "but" | "since" | "anymore" | "so"))
        .filter(|w| !is_stop_word(w))
        .take(3)
        .map(|w| (*w).to_owned())
        .collect();
    (!object.is_empty()).then(|| (object.join(" "), liked))
}

fn is_decision(lower: &str) -> bool {
    [
        "we decided",
        "i decided",
        "we've decided",
        "i've decided",
        "we agreed",
        "decided to ",
        "let's use ",
        "let's go with ",
        "we'll use ",
        "we will use ",
        "i'll go with ",
        "we'll go with ",
        "we chose ",
        "i chose ",
        "settled on ",
        "decision:",
    ]
    .iter()
    .any(|p| lower.contains(p))
}

/// `my X is Y`, `i live in Y`, `i work at Y`, `i am N years old`.
fn attribute(lower: &str, original: &str) -> Option<(String, String)> {
    for (prefixes, attribute) in [
        (
            &[
                "i live in ",
                "i moved to ",
                "i'm living in ",
                "i now live in ",
            ][..],
            "lives in",
        ),
        (
            &[
                "i work at ",
                "i work for ",
                "i'm working at ",
                "i now work at ",
            ][..],
            "works at",
        ),
    ] {
        if let Some(rest) = after_any(lower, original, prefixes) {
            let value = clause(rest);
            if !value.is_empty() {
                return Some((attribute.to_owned(), value));
            }
        }
    }
    if let Some(at) = lower.find(" years old") {
        let before = lower[..at].split_whitespace().last()?;
        if before.bytes().all(|b| b.is_ascii_digit())
            && (lower.contains("i am ") || lower.contains("i'm "))
        {
            return Some(("age".into(), before.to_owned()));
        }
    }
    let at = if lower.starts_with("my ") {
        0
    } else {
        lower.find(" my ")? + 1
    };
    let rest = &lower[at + 3..];
    let is = rest.find(" is ")?;
    let key = rest[..is].trim();
    if key.is_empty() || key.split_whitespace().count() > 3 {
        return None;
    }
    let value = clause(original.get(at + 3 + is + 4..)?);
    (!value.is_empty()).then(|| (key.to_owned(), value))
}

/// The start of `text` up to the end of its clause, at most eight words.
fn clause(text: &str) -> String {
    let end = text.find([',', ';', '!', '?']).unwrap_or(text.len());
    let words: Vec<&str> = text[..end]
        .split_whitespace()
        .map(trim_token)
        .take_while(|w| {
            !matches!(
                w.to_lowercase().as_str(),
                "and"
                    | "but"
                    | "because"
                    | "since"
                    | "so"
                    | "last"
                    | "next"
                    | "this"
                    | "yesterday"
                    | "today"
                    | "tomorrow"
                    | "ago"
                    | "for"
                    | "with"
                    | "when"
                    | "after"
                    | "before"
                    | "now"
                    | "recently"
            )
        })
        .filter(|w| !w.is_empty())
        .take(8)
        .collect();
    words.join(" ")
}

const NOT_NAMES: &[&str] = &[
    "I",
    "I'm",
    "I've",
    "I'll",
    "I'd",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
    "OK",
    "Ok",
];

/// Capitalised words that do not start the sentence, runs joined
/// (`New York`), at most eight.
fn mentions(sentence: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut run: Vec<&str> = Vec::new();
    let mut first = true;
    for raw in sentence.split_whitespace() {
        let word = trim_token(raw)
            .trim_end_matches("'s")
            .trim_end_matches("’s");
        let capitalised = word.chars().next().is_some_and(char::is_uppercase)
            && word.chars().all(|c| c.is_alphanumeric() || c == '-')
            && !NOT_NAMES.contains(&word);
        if capitalised && !first {
            run.push(word);
        } else if !run.is_empty() {
            out.push(run.join(" "));
            run.clear();
        }
        first = false;
        if raw.ends_with([',', ';', ':', '.']) && !run.is_empty() {
            out.push(run.join(" "));
            run.clear();
        }
    }
    if !run.is_empty() {
        out.push(run.join(" "));
    }
    out.dedup();
    out.truncate(8);
    out
}

const MONTHS: &[&str] = &[
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

fn month(word: &str) -> Option<u32> {
    MONTHS
        .iter()
        .position(|m| *m == word || (word.len() == 3 && m.starts_with(word) && word != "may"))
        .map(|i| i as u32 + 1)
        .or_else(|| (word == "may").then_some(5))
}

fn weekday(word: &str) -> Option<Weekday> {
    Some(match word {
        "monday" => Weekday::Mon,
        "tuesday" => Weekday::Tue,
        "wednesday" => Weekday::Wed,
        "thursday" => Weekday::Thu,
        "friday" => Weekday::Fri,
        "saturday" => Weekday::Sat,
        "sunday" => Weekday::Sun,
        _ => return None,
    })
}

/// A count of days, weeks, months or years, at most 10,000.
fn number(word: &str) -> Option<u32> {
    word.parse().ok().filter(|n| *n <= 10_000).or(match word {
        "a" | "an" | "one" => Some(1),
        "two" | "couple" => Some(2),
        "three" | "few" => Some(3),
        "four" => Some(4),
        "five" => Some(5),
        "six" => Some(6),
        "seven" => Some(7),
        "eight" => Some(8),
        "nine" => Some(9),
        "ten" => Some(10),
        _ => None,
    })
}

/// The dates `words` (lowercase) speak of, resolved against `today`:
/// `YYYY-MM-DD`, `YYYY-MM` or `YYYY`.
fn dates(words: &[&str], today: NaiveDate) -> Vec<String> {
    let mut out = Vec::new();
    let day = |d: NaiveDate| d.format("%Y-%m-%d").to_string();
    let month_of = |d: NaiveDate| d.format("%Y-%m").to_string();
    let mut i = 0;
    while i < words.len() {
        let w = words[i];
        let next = words.get(i + 1).copied().unwrap_or("");
        let after = words.get(i + 2).copied().unwrap_or("");
        let mut used = 1;
        match w {
            "yesterday" => out.push(day(today - Duration::days(1))),
            "today" | "tonight" => out.push(day(today)),
            "tomorrow" => out.push(day(today + Duration::days(1))),
            "last" | "next" | "this" => {
                let forward = w == "next";
                let sign = if forward {
                    1
                } else if w == "last" {
                    -1
                } else {
                    0
                };
                match next {
                    "week" | "weekend" => {
                        out.push(day(today + Duration::days(7 * sign)));
                        used = 2;
                    }
                    "month" => {
                        let d = shift_months(today, sign);
                        out.push(month_of(d));
                        used = 2;
                    }
                    "year" => {
                        out.push((today.year() + sign as i32).to_string());
                        used = 2;
                    }
                    _ => {
                        if let Some(target) = weekday(next) {
                            out.push(day(weekday_near(today, target, sign)));
                            used = 2;
                        }
                    }
                }
            }
            _ if next == "ago" || after == "ago" => {
                if let Some(n) = number(w) {
                    let unit = if next == "ago" { "" } else { next };
                    let n = i64::from(n);
                    let unit = unit.trim_end_matches('s');
                    let resolved = match unit {
                        "day" => Some(day(today - Duration::days(n))),
                        "week" => Some(day(today - Duration::days(7 * n))),
                        "month" => Some(month_of(shift_months(today, -n))),
                        "year" => Some((today.year() - n as i32).to_string()),
                        _ => None,
                    };
                    if let Some(r) = resolved {
                        out.push(r);
                        used = 3;
                    }
                }
            }
            _ => {
                if let Some(date) = iso_date(w, next, after) {
                    out.push(date);
                    used = 3;
                } else if let (Ok(d), Some(m)) = (w.parse::<u32>(), month(next)) {
                    // 8 may 2023, 8 may
                    let year = after
                        .parse::<i32>()
                        .ok()
                        .filter(|y| (1900..2200).contains(y));
                    if let Some(date) = NaiveDate::from_ymd_opt(year.unwrap_or(today.year()), m, d)
                    {
                        out.push(day(date));
                        used = if year.is_some() { 3 } else { 2 };
                    }
                } else if let Some(m) = month(w).filter(|_| {
                    next.parse::<u32>().is_ok()
                        || (w.len() > 3
                            && i > 0
                            && matches!(
                                words[i - 1],
                                "in" | "since"
                                    | "until"
                                    | "of"
                                    | "by"
                                    | "during"
                                    | "early"
                                    | "late"
                                    | "mid"
                            ))
                }) {
                    // may 8 2023, may 2023, may
                    let d = next.parse::<u32>().ok().filter(|d| (1..=31).contains(d));
                    let year_word = if d.is_some() { after } else { next };
                    let year = year_word
                        .parse::<i32>()
                        .ok()
                        .filter(|y| (1900..2200).contains(y));
                    match (d, year) {
                        (Some(d), y) => {
                            if let Some(date) =
                                NaiveDate::from_ymd_opt(y.unwrap_or(today.year()), m, d)
                            {
                                out.push(day(date));
                                used = if y.is_some() { 3 } else { 2 };
                            }
                        }
                        (None, Some(y)) => {
                            out.push(format!("{y:04}-{m:02}"));
                            used = 2;
                        }
                        (None, None) if w != "may" => {
                            out.push(format!("{:04}-{m:02}", today.year()))
                        }
                        _ => {}
                    }
                } else if w.len() == 4
                    && let Ok(year) = w.parse::<i32>()
                    && (1900..2200).contains(&year)
                {
                    out.push(year.to_string());
                }
            }
        }
        i += used;
    }
    out.dedup();
    out.truncate(8);
    out
}

/// `2023-05-08` split into words (`2023`, `05`, `08`) by the caller.
fn iso_date(year: &str, month: &str, day: &str) -> Option<String> {
    if year.len() != 4 || month.len() != 2 || day.len() != 2 {
        return None;
    }
    let date = NaiveDate::from_ymd_opt(year.parse().ok()?, month.parse().ok()?, day.parse().ok()?)?;
    Some(date.format("%Y-%m-%d").to_string())
}

fn shift_months(date: NaiveDate, by: i64) -> NaiveDate {
    let months = Months::new(by.unsigned_abs() as u32);
    if by < 0 {
        date.checked_sub_months(months).unwrap_or(date)
    } else {
        date.checked_add_months(months).unwrap_or(date)
    }
}

/// The `target` weekday before `today` (`sign` < 0), after it (> 0), or in
/// its week (0).
fn weekday_near(today: NaiveDate, target: Weekday, sign: i64) -> NaiveDate {
    let from = i64::from(today.weekday().num_days_from_monday());
    let to = i64::from(target.num_days_from_monday());
    match sign {
        s if s < 0 => {
            let back = (from - to).rem_euclid(7);
            today - Duration::days(if back == 0 { 7 } else { back })
        }
        s if s > 0 => {
            let ahead = (to - from).rem_euclid(7);
            today + Duration::days(if ahead == 0 { 7 } else { ahead })
        }
        _ => today + Duration::days(to - from),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at() -> DateTime<Utc> {
        // A Monday.
        Utc.with_ymd_and_hms(2023, 5, 8, 13, 56, 0).unwrap()
    }

    fn one(text: &str) -> Fact {
        let facts = all(text);
        assert_eq!(facts.len(), 1, "{text}: {facts:#?}");
        facts.into_iter().next().unwrap()
    }

    fn all(text: &str) -> Vec<Fact> {
        let scope = Scope::new("u", "a");
        extract(
            &scope,
            Some("s1"),
            &Utterance::new("Caroline", "D1:3", text, at()),
            at(),
        )
    }

    #[test]
    fn names_preferences_and_attributes_fill_their_slots() {
        let name = one("Hi! My name is Ada Lovelace, nice to meet you.");
        assert_eq!(
            (name.kind, name.attribute.as_deref(), name.value.as_deref()),
            (FactKind::Name, Some("name"), Some("Ada Lovelace"))
        );
        let likes = one("I really love green tea in the morning.");
        assert_eq!(likes.kind, FactKind::Preference);
        assert_eq!(likes.attribute.as_deref(), Some("likes: green tea morning"));
        assert_eq!(likes.value.as_deref(), Some("yes"));
        let dislikes = one("I don't like green tea in the morning anymore.");
        assert_eq!(dislikes.attribute, likes.attribute);
        assert_eq!(dislikes.value.as_deref(), Some("no"));
        let wish = all("I'd like to visit Japan someday with my family.");
        assert_eq!(
            wish[0].kind,
            FactKind::Statement,
            "a wish is not a preference"
        );
        let lives = one("I moved to Porto, it's lovely.");
        assert_eq!(
            (lives.attribute.as_deref(), lives.value.as_deref()),
            (Some("lives in"), Some("Porto"))
        );
        let moved = one("I moved to New York last week.");
        assert_eq!(moved.value.as_deref(), Some("New York"));
        let facts = all("I went to the science museum downtown. It was great fun for everyone!");
        assert_eq!(
            facts[1].context.as_deref(),
            Some("I went to the science museum downtown.")
        );
        let email = one("My email is ada@example.org.");
        assert_eq!(email.attribute.as_deref(), Some("email"));
        assert_eq!(email.value.as_deref(), Some("ada@example.org"));
    }

    #[test]
    fn decisions_paths_identifiers_and_dates() {
        assert_eq!(
            one("We decided to ship the SQLite store first.").kind,
            FactKind::Decision
        );
        assert_eq!(
            one("Let's use tantivy for search.").kind,
            FactKind::Decision
        );
        for path in [
            "The config lives in /etc/agent-host/config.toml now.",
            "Look at src/main.rs please.",
            "Edit ~/notes today",
        ] {
            assert_eq!(one(path).kind, FactKind::Path, "{path}");
        }
        for id in [
            "Ticket ABC-123 is mine.",
            "It broke in v1.2.3 again.",
            "See https://example.org/x for it.",
            "Fixed by commit 9fceb02a.",
            "Issue #42 is open.",
        ] {
            assert_eq!(one(id).kind, FactKind::Identifier, "{id}");
        }
        let dated = one("I went to a LGBTQ support group yesterday and it was so powerful.");
        assert_eq!(dated.kind, FactKind::Date);
        assert_eq!(dated.dates, ["2023-05-07"]);
        assert_eq!(
            one("We met on 3 March 2021 in Paris.").dates,
            ["2021-03-03"]
        );
        assert_eq!(
            one("The launch was May 1, 2022 after all.").dates,
            ["2022-05-01"]
        );
        assert_eq!(
            one("I painted that lake sunrise last year.").dates,
            ["2022"]
        );
        assert_eq!(
            one("We ran the charity race last Saturday.").dates,
            ["2023-05-06"]
        );
        assert_eq!(one("I started pottery two years ago.").dates, ["2021"]);
        assert_eq!(
            one("The deadline is 2023-06-30 for the grant.").dates,
            ["2023-06-30"]
        );
    }

    #[test]
    fn filler_and_questions_are_not_facts_and_provenance_is_kept() {
        assert!(all("Hey Mel! Good to see you! How have you been?").is_empty());
        assert!(all("Thanks!").is_empty());
        let facts = all("Wow. I joined the Rainbow Choir in Boston. What about you?");
        assert_eq!(facts.len(), 1);
        let fact = &facts[0];
        assert_eq!(fact.entity, "Caroline");
        assert_eq!(fact.mentions, ["Rainbow Choir", "Boston"]);
        assert_eq!(fact.source.message.as_deref(), Some("D1:3"));
        assert_eq!(fact.source.session.as_deref(), Some("s1"));
        assert_eq!(fact.valid_from, at());
        // Same message, same ids: extraction twice is recognised.
        assert_eq!(
            all("Wow. I joined the Rainbow Choir in Boston. What about you?")[0].id,
            fact.id
        );
    }

    #[test]
    fn hostile_input_is_bounded() {
        let long = "I like cake. ".repeat(10_000);
        assert_eq!(all(&long).len(), MAX_FACTS_PER_UTTERANCE);
        let one_sentence = format!("I saw {} there", "x ".repeat(10_000));
        assert!(all(&one_sentence)[0].text.len() <= MAX_SENTENCE_BYTES);
        // Odd dates do not panic.
        let _ = all("On 31 February 2023 and 99 may 1800, 0 days ago and 4000000000 years ago.");
    }
}
