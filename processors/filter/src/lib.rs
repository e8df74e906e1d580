//! `filter`: keeps only the messages that match, with some context around
//! them.
//!
//! A message matches when it passes every condition that is set; with none
//! set, every message matches and the history is left as it is. Messages
//! that do not match are dropped, except system messages (unless
//! `keep_system` is false) and the `context` messages on either side of a
//! match. The output stays a valid history: a tool result whose call was
//! dropped is dropped too, and a call whose results were all dropped is taken
//! out of its message (which goes when nothing else is left in it). So a
//! tool exchange survives only when both its sides are kept: match them both
//! (`tools` does) or widen `context`.
//!
//! Configuration (every key optional):
//! - `roles`: keep messages with one of these roles (`"system"`, `"user"`,
//!   `"assistant"`, `"tool"`).
//! - `agents`: keep messages written by one of these agents; a message
//!   without an agent does not match.
//! - `tools`: keep the results of these tools (by their `tool_name`, or the
//!   name in the call they answer when they have none) and the assistant
//!   messages that call one of them.
//! - `contains`: keep messages in which this text occurs, ignoring the case
//!   of ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic letters (other
//!   scripts match as written). The places searched are the content, each
//!   text part, each tool call's name and arguments, and a tool result's
//!   tool name; a match does not span two of them. Reasoning is not
//!   searched.
//! - `regex`: like `contains`, with a regular expression, case-sensitive
//!   unless it starts with `(?i)`. The syntax is the `regex` crate's without
//!   its Unicode tables (the `regex-lite` engine, which keeps the component
//!   small): `\w`, `\d`, `\s` and `\b` are ASCII, `(?i)` folds ASCII letters
//!   only, and `\p{...}` classes are refused. It is slower than `contains`
//!   (tens of MB/s): prefer `contains` for plain text on long histories.
//!   Give `contains` or `regex`, not both.
//! - `since`, `until`: keep messages with `since <= timestamp < until`.
//!   Each is a duration before the run's time (`30m`, `1.5h`, `2d`, `1w`),
//!   an RFC 3339 time (`2025-06-01T10:00:00Z`) or a date (`2025-06-01`,
//!   midnight UTC). When either is set, a message without a timestamp does
//!   not match.
//! - `context` (default 0): also keep this many messages before and after
//!   each match.
//! - `keep_system` (default `true`): keep system messages whether or not
//!   they match.
//!
//! ```sh
//! agent-host run --processor target/processors/filter.wasm \
//!     --processor-config '{"contains": "deploy", "since": "2d", "context": 1}'
//! ```

use agent_host_guest::{
    Error, History, Message, Part, Processor, Result, Role, Timestamp, export_processor,
};
use regex_lite::Regex;
use serde::Deserialize;

/// The configuration; see the crate documentation.
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Roles to keep; empty for every role.
    pub roles: Vec<String>,
    /// Agents whose messages to keep; empty for any agent.
    pub agents: Vec<String>,
    /// Tools whose calls and results to keep; empty for every message.
    pub tools: Vec<String>,
    /// Text that a kept message contains, ignoring case.
    pub contains: Option<String>,
    /// A regular expression that a kept message matches.
    pub regex: Option<String>,
    /// How many messages to keep on either side of each match.
    pub context: usize,
    /// The earliest time kept: a duration ago, a time or a date.
    pub since: Option<String>,
    /// The time from which on nothing is kept: a duration ago, a time or a
    /// date.
    pub until: Option<String>,
    /// Whether system messages are always kept.
    pub keep_system: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            roles: Vec::new(),
            agents: Vec::new(),
            tools: Vec::new(),
            contains: None,
            regex: None,
            context: 0,
            since: None,
            until: None,
            keep_system: true,
        }
    }
}

/// The processor.
pub struct Filter;

impl Processor for Filter {
    type Config = Config;
    const CONFIG_EXAMPLE: Option<&'static str> = Some(
        r#"{"roles": ["user", "assistant"], "contains": "deploy", "since": "2d", "context": 1}"#,
    );
    const CONFIG_SCHEMA: Option<&'static str> = Some(concat!(
        r#"{"type":"object","properties":{"#,
        r#""roles":{"type":"array","items":{"enum":["system","user","assistant","tool"]}},"#,
        r#""agents":{"type":"array","items":{"type":"string"}},"#,
        r#""tools":{"type":"array","items":{"type":"string"}},"#,
        r#""contains":{"type":"string"},"#,
        r#""regex":{"type":"string"},"#,
        r#""context":{"type":"integer","minimum":0,"default":0},"#,
        r#""since":{"type":"string"},"#,
        r#""until":{"type":"string"},"#,
        r#""keep_system":{"type":"boolean","default":true}},"#,
        r#""not":{"required":["contains","regex"]},"additionalProperties":false}"#
    ));

    fn process(history: &mut History, config: Config) -> Result<()> {
        let conditions = Conditions::new(&config, history.context().now)?;
        let n = history.len();
        if conditions.is_empty() {
            agent_host_guest::info!("no condition set: kept all {n} messages");
            return Ok(());
        }
        // Only `tools` needs to know which tool a result comes from.
        let names = match conditions.tools.is_empty() {
            true => Vec::new(),
            false => history.tool_names(),
        };
        let mut matched = Vec::with_capacity(n);
        for (i, m) in history.messages().iter().enumerate() {
            matched.push(conditions.matches(m, names.get(i).copied().flatten()));
        }
        let mut count = 0;
        for (i, &matched) in matched.iter().enumerate() {
            count += usize::from(matched);
            let system = history.messages()[i].role == Role::System;
            let kept = matched || (config.keep_system && system);
            if !kept {
                history.drop(i);
            }
        }
        if config.context > 0 {
            // Each match brings back its neighbours; `done` is where the last
            // one's stopped, so no message is looked at twice.
            let mut done = 0;
            for j in (0..n).filter(|&j| matched[j]) {
                let end = n.min(j.saturating_add(config.context).saturating_add(1));
                for i in done.max(j.saturating_sub(config.context))..end {
                    history.restore(i);
                }
                done = end;
            }
        }
        if history.kept() < n {
            history.settle_tool_exchanges();
        }
        agent_host_guest::info!(
            "{count} of {n} messages matched; kept {} with context, system messages \
             and whole tool exchanges",
            history.kept()
        );
        Ok(())
    }
}

export_processor!(Filter);

/// The configuration's conditions, checked and compiled once.
struct Conditions<'c> {
    /// The roles kept, as [`role_bit`]s; 0 for every role.
    roles: u8,
    agents: &'c [String],
    tools: &'c [String],
    text: Option<TextCondition>,
    /// `(seconds, nanoseconds)` bounds, as in [`Timestamp`].
    since: Option<(i64, u32)>,
    until: Option<(i64, u32)>,
}

impl<'c> Conditions<'c> {
    /// Checks `config`; every error names the key and what is wrong.
    fn new(config: &'c Config, now: Timestamp) -> Result<Self> {
        let mut roles = 0;
        for name in &config.roles {
            roles |= role_bit(parse_role(name)?);
        }
        let text = match (&config.contains, &config.regex) {
            (Some(_), Some(_)) => {
                return Err(Error::bad_config(
                    "`contains` and `regex` are both set; give one of them",
                ));
            }
            (Some(text), None) => Some(TextCondition::Contains(Needle::new(text))),
            (None, Some(pattern)) => {
                Some(TextCondition::Regex(Regex::new(pattern).map_err(|e| {
                    Error::bad_config(format!("`regex` is not a valid regular expression: {e}"))
                })?))
            }
            (None, None) => None,
        };
        let since = bound("since", config.since.as_deref(), now)?;
        let until = bound("until", config.until.as_deref(), now)?;
        if let (Some(start), Some(end)) = (since, until)
            && start >= end
        {
            return Err(Error::bad_config(format!(
                "`since` (`{}`) is not before `until` (`{}`), so nothing could match; \
                 a duration means that long before now, so `since` takes the longer one",
                config.since.as_deref().unwrap_or_default(),
                config.until.as_deref().unwrap_or_default(),
            )));
        }
        Ok(Conditions {
            roles,
            agents: &config.agents,
            tools: &config.tools,
            text,
            since,
            until,
        })
    }

    /// Whether no condition is set (every message matches).
    fn is_empty(&self) -> bool {
        self.roles == 0
            && self.agents.is_empty()
            && self.tools.is_empty()
            && self.text.is_none()
            && self.since.is_none()
            && self.until.is_none()
    }

    /// Whether `m` passes every condition. `result_of` is the tool whose
    /// result `m` is (see `History::tool_names`).
    fn matches(&self, m: &Message, result_of: Option<&str>) -> bool {
        if self.roles != 0 && self.roles & role_bit(m.role) == 0 {
            return false;
        }
        if !self.agents.is_empty()
            && !m
                .agent
                .as_ref()
                .is_some_and(|agent| self.agents.contains(agent))
        {
            return false;
        }
        if !self.tools.is_empty() {
            let listed = |name: &str| self.tools.iter().any(|t| t == name);
            let calls = m.tool_calls.iter().any(|call| listed(&call.name));
            if !calls && !result_of.is_some_and(listed) {
                return false;
            }
        }
        if self.since.is_some() || self.until.is_some() {
            let Some(t) = &m.timestamp else {
                return false;
            };
            let t = (t.seconds, t.nanoseconds);
            if self.since.is_some_and(|since| t < since)
                || self.until.is_some_and(|until| t >= until)
            {
                return false;
            }
        }
        match &self.text {
            None => true,
            Some(condition) => {
                let found = |text: &str| condition.is_found_in(text);
                found(&m.content)
                    || m.parts.iter().any(|p| match p {
                        Part::Text(text) => found(text),
                        _ => false,
                    })
                    || m.tool_name.as_deref().is_some_and(found)
                    || m.tool_calls
                        .iter()
                        .any(|call| found(&call.name) || found(&call.arguments))
            }
        }
    }
}

/// What a message's text must hold.
enum TextCondition {
    Contains(Needle),
    Regex(Regex),
}

impl TextCondition {
    fn is_found_in(&self, haystack: &str) -> bool {
        match self {
            TextCondition::Contains(needle) => needle.is_found_in(haystack),
            TextCondition::Regex(regex) => regex.is_match(haystack),
        }
    }
}

/// A text searched for ignoring case, without allocating per haystack.
struct Needle {
    /// The text, each character passed through [`fold`].
    folded: String,
}

impl Needle {
    fn new(text: &str) -> Self {
        Needle {
            folded: text.chars().map(fold).collect(),
        }
    }

    /// Whether the needle occurs in `haystack`, ignoring case (see
    /// [`fold`]).
    fn is_found_in(&self, haystack: &str) -> bool {
        let needle = self.folded.as_bytes();
        let Some(&first) = needle.first() else {
            return true;
        };
        let bytes = haystack.as_bytes();
        if self.folded.is_ascii() {
            // No character outside ASCII folds into it, and ASCII bytes never
            // occur inside a multi-byte character: a byte search is exact.
            let upper = first.to_ascii_uppercase();
            let Some(last_start) = bytes.len().checked_sub(needle.len()) else {
                return false;
            };
            return (0..=last_start).any(|i| {
                (bytes[i] == first || bytes[i] == upper)
                    && bytes[i + 1..i + needle.len()].eq_ignore_ascii_case(&needle[1..])
            });
        }
        // Only characters of the needle's first one's kind can start a match:
        // the two cases of an ASCII letter, or any character outside ASCII
        // (whose first byte is at least 0xC0).
        let upper = first.to_ascii_uppercase();
        (0..bytes.len()).any(|i| {
            let b = bytes[i];
            let candidate = match first.is_ascii() {
                true => b == first || b == upper,
                false => b >= 0xC0,
            };
            candidate && {
                let mut rest = haystack[i..].chars().map(fold);
                self.folded.chars().all(|c| rest.next() == Some(c))
            }
        })
    }
}

/// The lowercase of a letter of the scripts most text is in: ASCII, Latin-1,
/// Latin Extended-A, Greek (final sigma included) and Cyrillic. Other
/// characters stay as they are.
///
/// Not `char::to_lowercase`: its table of every script would make the
/// component about 13 KB larger, over its size budget.
fn fold(c: char) -> char {
    let code = c as u32;
    let lower = match code {
        0x41..=0x5A | 0xC0..=0xD6 | 0xD8..=0xDE | 0x391..=0x3A1 | 0x3A3..=0x3AB | 0x410..=0x42F => {
            code + 0x20
        }
        // Pairs of capital (even) and small (odd) letters; U+0130 (capital I
        // with dot) and U+0131 (dotless i) are no such pair.
        0x100..=0x12F | 0x132..=0x137 | 0x14A..=0x177 => code | 1,
        // Pairs of capital (odd) and small (even) letters.
        0x139..=0x148 | 0x179..=0x17E if code % 2 == 1 => code + 1,
        0x178 => 0xFF,
        0x386 => 0x3AC,
        0x388..=0x38A => code + 0x25,
        0x38C => 0x3CC,
        0x38E..=0x38F => code + 0x3F,
        0x3C2 => 0x3C3,
        0x400..=0x40F => code + 0x50,
        _ => code,
    };
    char::from_u32(lower).unwrap_or(c)
}

/// A role as one bit of a set.
fn role_bit(role: Role) -> u8 {
    1 << role as u8
}

/// Reads a role's name as the formats write it.
fn parse_role(name: &str) -> Result<Role> {
    match name {
        "system" => Ok(Role::System),
        "user" => Ok(Role::User),
        "assistant" => Ok(Role::Assistant),
        "tool" => Ok(Role::Tool),
        other => Err(Error::bad_config(format!(
            "`roles`: unknown role `{other}`; use `system`, `user`, `assistant` or `tool`"
        ))),
    }
}

/// Reads `since` or `until` (named `key`) as `(seconds, nanoseconds)`.
fn bound(key: &str, text: Option<&str>, now: Timestamp) -> Result<Option<(i64, u32)>> {
    let Some(text) = text else {
        return Ok(None);
    };
    let now = chrono::DateTime::from_timestamp(now.seconds, now.nanoseconds).ok_or_else(|| {
        Error::failed(format!(
            "the run's time ({}s after 1970) is out of range",
            now.seconds
        ))
    })?;
    let time = agent_host_core::query::parse_time(text, now)
        .map_err(|e| Error::bad_config(format!("`{key}`: {e}")))?;
    Ok(Some((time.timestamp(), time.timestamp_subsec_nanos())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_host_guest::{FileRef, ToolCall, testing};

    fn msg(role: Role, id: &str, text: &str) -> Message {
        Message::new(role, text).with_id(id)
    }
    fn system() -> Message {
        msg(Role::System, "sys", "You are terse.")
    }
    fn user(id: &str, text: &str) -> Message {
        msg(Role::User, id, text)
    }
    fn assistant(id: &str, text: &str) -> Message {
        msg(Role::Assistant, id, text)
    }
    /// `m` written `minutes` before the present (`testing::run` takes the
    /// present as the run's time).
    fn ago(mut m: Message, minutes: i64) -> Message {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap();
        m.timestamp = Some(Timestamp {
            seconds: now.as_secs() as i64 - minutes * 60,
            nanoseconds: 0,
        });
        m
    }
    /// `m` written at `seconds` after 1970.
    fn at(mut m: Message, seconds: i64) -> Message {
        m.timestamp = Some(Timestamp {
            seconds,
            nanoseconds: 0,
        });
        m
    }
    fn by(mut m: Message, agent: &str) -> Message {
        m.agent = Some(agent.into());
        m
    }
    fn call(id: &str, tool: &str, arguments: &str) -> Message {
        Message::tool_calls(vec![ToolCall::new(id, tool, arguments)]).with_id(format!("call-{id}"))
    }
    fn result(id: &str, tool: Option<&str>, text: &str) -> Message {
        let m = Message::tool_result(id, text).with_id(format!("result-{id}"));
        match tool {
            Some(tool) => m.with_tool_name(tool),
            None => m,
        }
    }

    /// The ids of the messages `config` keeps.
    fn run(config: &str, history: Vec<Message>) -> Result<Vec<String>> {
        let out = testing::run::<Filter>(config, history)?;
        Ok(out.into_iter().map(|m| m.id).collect())
    }

    fn bad_config(config: &str) -> String {
        match testing::run::<Filter>(config, vec![user("u", "hi")]) {
            Err(Error::BadConfig(message)) => message,
            other => panic!("{config}: expected a bad-config error, got {other:?}"),
        }
    }

    fn chat() -> Vec<Message> {
        vec![
            system(),
            user("u1", "Please deploy the site"),
            assistant("a1", "Deploying now."),
            user("u2", "And the weather?"),
            assistant("a2", "Sunny."),
            user("u3", "Thanks"),
        ]
    }

    #[test]
    fn an_empty_configuration_keeps_everything() {
        let mut h = History::for_test(chat());
        Filter::process(&mut h, Config::default()).unwrap();
        assert_eq!(h.kept(), 6);
        assert!((0..h.len()).all(|i| !h.is_changed(i)));
        assert_eq!(run("", chat()).unwrap().len(), 6);
    }

    #[test]
    fn an_empty_history() {
        assert!(run("{}", vec![]).unwrap().is_empty());
        assert!(
            run(r#"{"contains": "x", "since": "1h"}"#, vec![])
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn by_role_keeps_system_messages() {
        assert_eq!(
            run(r#"{"roles": ["user"]}"#, chat()).unwrap(),
            ["sys", "u1", "u2", "u3"]
        );
        assert_eq!(
            run(r#"{"roles": ["user"], "keep_system": false}"#, chat()).unwrap(),
            ["u1", "u2", "u3"]
        );
        assert_eq!(
            run(
                r#"{"roles": ["assistant", "system"], "keep_system": false}"#,
                chat()
            )
            .unwrap(),
            ["sys", "a1", "a2"]
        );
    }

    #[test]
    fn contains_ignores_case_and_conditions_combine() {
        assert_eq!(
            run(r#"{"contains": "DEPLOY"}"#, chat()).unwrap(),
            ["sys", "u1", "a1"]
        );
        assert_eq!(
            run(r#"{"contains": "deploy", "roles": ["assistant"]}"#, chat()).unwrap(),
            ["sys", "a1"]
        );
        let unicode = vec![user("u", "ÄRGER im Büro")];
        assert_eq!(run(r#"{"contains": "ärger"}"#, unicode).unwrap(), ["u"]);
    }

    #[test]
    fn contains_is_literal_text() {
        let history = vec![user("dots", "version 1.2"), user("plain", "version 102")];
        assert_eq!(run(r#"{"contains": "1.2"}"#, history).unwrap(), ["dots"]);
    }

    #[test]
    fn nothing_matching_keeps_only_system_messages() {
        assert_eq!(
            run(r#"{"contains": "kubernetes"}"#, chat()).unwrap(),
            ["sys"]
        );
        let out = run(
            r#"{"contains": "kubernetes", "keep_system": false}"#,
            chat(),
        )
        .unwrap();
        assert!(out.is_empty());
    }

    #[test]
    fn regex_is_case_sensitive_unless_asked() {
        assert_eq!(
            run(r#"{"regex": "^(Deploy|Sunny)"}"#, chat()).unwrap(),
            ["sys", "a1", "a2"]
        );
        assert_eq!(
            run(r#"{"regex": "(?i)^deploy"}"#, chat()).unwrap(),
            ["sys", "a1"]
        );
        let words = vec![user("w", "naïve café"), user("d", "42 apples")];
        assert_eq!(
            run(r#"{"regex": "caf[ée]"}"#, words.clone()).unwrap(),
            ["w"]
        );
        assert_eq!(run(r#"{"regex": "^\\d+ \\w+$"}"#, words).unwrap(), ["d"]);
    }

    #[test]
    fn text_parts_tool_calls_and_tool_names_are_searched() {
        let mut parts = user("parts", "");
        parts.parts = vec![
            Part::Text("first".into()),
            Part::File(FileRef {
                name: "needle.txt".into(),
                path: "needle.txt".into(),
                mime_type: None,
            }),
            Part::Text("the needle".into()),
        ];
        let mut thinking = assistant("thinking", "answer");
        thinking.reasoning = Some(agent_host_guest::Reasoning {
            text: "needle".into(),
            signature: None,
            redacted: false,
        });
        let history = vec![
            parts,
            thinking,
            call("c1", "grep", r#"{"pattern":"needle"}"#),
            result("c1", Some("grep"), "found it"),
            call("c2", "find_needle", "{}"),
            result("c2", Some("find_needle"), "nothing"),
        ];
        // The call to grep matches by its arguments, but its result does not
        // match: the exchange is dropped whole. find_needle matches on both
        // sides, by the call's name and by the result's tool name.
        assert_eq!(
            run(r#"{"contains": "NEEDLE"}"#, history).unwrap(),
            ["parts", "call-c2", "result-c2"]
        );
    }

    #[test]
    fn regex_does_not_span_two_text_parts() {
        let mut m = user("u", "alpha");
        m.parts = vec![Part::Text("beta".into())];
        assert!(
            run(r#"{"regex": "alpha\\s+beta"}"#, vec![m.clone()])
                .unwrap()
                .is_empty()
        );
        assert_eq!(run(r#"{"regex": "^beta$"}"#, vec![m]).unwrap(), ["u"]);
    }

    #[test]
    fn by_agent() {
        let history = vec![
            by(user("u", "go"), "alice"),
            by(assistant("planner", "plan"), "planner"),
            assistant("nobody", "?"),
            by(assistant("coder", "code"), "coder"),
        ];
        assert_eq!(
            run(r#"{"agents": ["planner", "coder"]}"#, history).unwrap(),
            ["planner", "coder"]
        );
    }

    fn tool_session() -> Vec<Message> {
        let mut both = Message::tool_calls(vec![
            ToolCall::new("c2", "read_file", r#"{"path":"a"}"#),
            ToolCall::new("c3", "bash", "ls"),
        ])
        .with_id("call-c2-c3");
        both.content = "Reading and listing.".into();
        vec![
            system(),
            user("u", "look around"),
            call("c1", "bash", "pwd"),
            result("c1", Some("bash"), "/work"),
            both,
            result("c2", None, "contents of a"),
            result("c3", Some("bash"), "a b"),
            assistant("a", "Done."),
        ]
    }

    /// Whether every tool result follows the message with its call (with
    /// only results between), and every call kept has its result.
    fn exchanges_are_whole(out: &[Message]) -> bool {
        let mut open: Vec<&str> = Vec::new();
        for m in out {
            if m.role == Role::Tool {
                let id = m.tool_call_id.as_deref().unwrap_or_default();
                let Some(at) = open.iter().position(|c| *c == id) else {
                    return false;
                };
                open.remove(at);
                continue;
            }
            if !open.is_empty() {
                return false;
            }
            open = m.tool_calls.iter().map(|c| c.id.as_str()).collect();
        }
        open.is_empty()
    }

    #[test]
    fn every_configuration_leaves_the_exchanges_whole() {
        let roles = ["system", "user", "assistant", "tool"];
        let texts = [None, Some("bash"), Some("a"), Some("contents"), Some("zzz")];
        let tools = [None, Some("bash"), Some("read_file")];
        for role_set in 0..16 {
            let chosen: Vec<String> = (0..4)
                .filter(|b| role_set & (1 << b) != 0)
                .map(|b| format!("\"{}\"", roles[b]))
                .collect();
            for text in texts {
                for tool in tools {
                    for context in 0..3 {
                        let mut config = format!(
                            r#"{{"roles": [{}], "context": {context}"#,
                            chosen.join(", ")
                        );
                        if let Some(text) = text {
                            config += &format!(r#", "contains": "{text}""#);
                        }
                        if let Some(tool) = tool {
                            config += &format!(r#", "tools": ["{tool}"]"#);
                        }
                        config += "}";
                        let out = testing::run::<Filter>(&config, tool_session()).unwrap();
                        assert!(exchanges_are_whole(&out), "{config}: {out:#?}");
                    }
                }
            }
        }
    }

    #[test]
    fn by_tool_keeps_calls_and_results() {
        assert_eq!(
            run(r#"{"tools": ["bash"]}"#, tool_session()).unwrap(),
            ["sys", "call-c1", "result-c1", "call-c2-c3", "result-c3"]
        );
    }

    #[test]
    fn by_tool_strips_the_calls_of_other_tools() {
        let out = testing::run::<Filter>(r#"{"tools": ["bash"]}"#, tool_session()).unwrap();
        let both = out.iter().find(|m| m.id == "call-c2-c3").unwrap();
        let calls: Vec<_> = both.tool_calls.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            calls,
            ["bash"],
            "read_file lost its result, so its call goes"
        );
        assert_eq!(both.content, "Reading and listing.");
    }

    #[test]
    fn by_tool_finds_the_name_of_a_result_without_one_in_its_call() {
        assert_eq!(
            run(r#"{"tools": ["read_file"]}"#, tool_session()).unwrap(),
            ["sys", "call-c2-c3", "result-c2"]
        );
    }

    #[test]
    fn dropping_one_side_of_an_exchange_drops_the_other() {
        // Results alone would answer calls that are gone.
        assert_eq!(
            run(r#"{"roles": ["tool"]}"#, tool_session()).unwrap(),
            ["sys"]
        );
        // Calls alone lose their calls; a message with nothing else goes.
        let out =
            testing::run::<Filter>(r#"{"roles": ["user", "assistant"]}"#, tool_session()).unwrap();
        let ids: Vec<_> = out.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(ids, ["sys", "u", "call-c2-c3", "a"]);
        assert!(out.iter().all(|m| m.tool_calls.is_empty()));
    }

    #[test]
    fn context_keeps_neighbours_of_each_match() {
        let history: Vec<Message> = (0..10)
            .map(|i| {
                user(
                    &i.to_string(),
                    if i == 2 || i == 8 { "hit" } else { "miss" },
                )
            })
            .collect();
        assert_eq!(
            run(r#"{"contains": "hit", "context": 1}"#, history.clone()).unwrap(),
            ["1", "2", "3", "7", "8", "9"]
        );
        assert_eq!(
            run(r#"{"contains": "hit", "context": 3}"#, history.clone()).unwrap(),
            ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"]
        );
        assert_eq!(
            run(r#"{"contains": "hit", "context": 100}"#, history)
                .unwrap()
                .len(),
            10
        );
    }

    #[test]
    fn context_can_complete_a_tool_exchange() {
        let history = vec![
            user("u", "go"),
            call("c1", "grep", r#"{"pattern":"needle"}"#),
            result("c1", Some("grep"), "found it"),
            assistant("a", "ok"),
        ];
        assert_eq!(
            run(r#"{"contains": "needle", "context": 1}"#, history).unwrap(),
            ["u", "call-c1", "result-c1"]
        );
    }

    #[test]
    fn a_time_window_relative_to_the_run() {
        let history = vec![
            system(),
            ago(user("3h", "old"), 180),
            ago(assistant("90m", "older"), 90),
            user("none", "no timestamp"),
            ago(user("20m", "recent"), 20),
            ago(assistant("5m", "newest"), 5),
        ];
        assert_eq!(
            run(r#"{"since": "1h"}"#, history.clone()).unwrap(),
            ["sys", "20m", "5m"]
        );
        assert_eq!(
            run(r#"{"until": "1h"}"#, history.clone()).unwrap(),
            ["sys", "3h", "90m"]
        );
        assert_eq!(
            run(r#"{"since": "2h", "until": "0.25h"}"#, history.clone()).unwrap(),
            ["sys", "90m", "20m"]
        );
        assert_eq!(
            run(r#"{"since": "1w", "keep_system": false}"#, history).unwrap(),
            ["3h", "90m", "20m", "5m"],
            "without a timestamp a message does not match"
        );
    }

    #[test]
    fn a_time_window_by_date_and_time_is_half_open() {
        // 2025-06-01T00:00:00Z and 2025-06-02T00:00:00Z.
        let (june1, june2) = (1_748_736_000, 1_748_822_400);
        let history = vec![
            at(user("before", "x"), june1 - 1),
            at(user("start", "x"), june1),
            at(user("inside", "x"), june1 + 3600),
            at(user("end", "x"), june2),
        ];
        assert_eq!(
            run(
                r#"{"since": "2025-06-01", "until": "2025-06-02"}"#,
                history.clone()
            )
            .unwrap(),
            ["start", "inside"]
        );
        assert_eq!(
            run(r#"{"since": "2025-06-01T02:00:00+02:00"}"#, history).unwrap(),
            ["start", "inside", "end"]
        );
    }

    #[test]
    fn untouched_messages_are_not_replaced() {
        let mut h = History::for_test(tool_session());
        let config = Config {
            tools: vec!["bash".into()],
            ..Config::default()
        };
        Filter::process(&mut h, config).unwrap();
        let changed: Vec<usize> = (0..h.len()).filter(|&i| h.is_changed(i)).collect();
        assert_eq!(changed, [4], "only the message that lost a call");
    }

    #[test]
    fn bad_roles_name_the_key() {
        let e = bad_config(r#"{"roles": ["user", "bot"]}"#);
        assert!(e.contains("`roles`") && e.contains("`bot`"), "{e}");
        assert!(e.contains("`assistant`"), "{e}");
    }

    #[test]
    fn contains_and_regex_together_are_refused() {
        let e = bad_config(r#"{"contains": "a", "regex": "b"}"#);
        assert!(e.contains("`contains`") && e.contains("`regex`"), "{e}");
    }

    #[test]
    fn a_bad_regex_says_what_is_wrong() {
        let e = bad_config(r#"{"regex": "(unclosed"}"#);
        assert!(e.starts_with("`regex`"), "{e}");
        assert!(e.contains("without closing ')'"), "{e}");
        // Unicode classes need tables the component leaves out.
        let e = bad_config(r#"{"regex": "\\p{Greek}"}"#);
        assert!(e.starts_with("`regex`"), "{e}");
    }

    #[test]
    fn folding_agrees_with_the_standard_lowercase() {
        let ranges = [0..0x250, 0x370..0x400, 0x400..0x460];
        for c in ranges.into_iter().flatten().filter_map(char::from_u32) {
            let folded = fold(c);
            let mut std = c.to_lowercase();
            let expected = match (std.next(), std.next()) {
                (Some(l), None) => l,
                _ => c,
            };
            if folded != c {
                assert_eq!(folded, if c == 'ς' { 'σ' } else { expected }, "{c}");
            } else if expected != c {
                // Letters outside the folded blocks stay as they are.
                assert!(
                    !matches!(c as u32, 0x41..=0x17F | 0x386..=0x3AB | 0x400..=0x42F),
                    "{c} (U+{:04X}) should fold to {expected}",
                    c as u32
                );
            }
        }
    }

    #[test]
    fn needles_ignore_case_without_allocating() {
        let found = |needle: &str, haystack: &str| Needle::new(needle).is_found_in(haystack);
        assert!(found("Deploy", "we DEPLOY on fridays"));
        assert!(found("ploy", "deploy"));
        assert!(!found("deploys", "deploy"));
        assert!(!found("deploy", ""));
        assert!(found("", "anything"));
        assert!(found("café", "Ein CAFÉ, bitte"));
        assert!(found("über", "ÜBERALL"));
        assert!(found("cafe", "Ünïcödé around a CAFE"));
        assert!(!found("ärger", "arger"));
        assert!(found("σ", "ΣΊΣΥΦΟΣ"));
        assert!(found("σίσυφος", "ΣΊΣΥΦΟΣ"), "a final sigma is a sigma");
        assert!(found("москва", "МОСКВА и ЁЛКА"));
        assert!(found("ёлка", "МОСКВА и ЁЛКА"));
        assert!(found("łódź", "ŁÓDŹ"));
        assert!(found("réservation", "Ma RÉSERVATION"));
        assert!(found("Ärger", "großer ärger"));
        assert!(!found("réservation", "reservation"));
        // A match may end on the last byte.
        assert!(found("z", "abcZ"));
    }

    #[test]
    fn bad_times_name_the_key_and_the_problem() {
        let e = bad_config(r#"{"since": "90"}"#);
        assert!(
            e.starts_with("`since`") && e.contains("unit is missing"),
            "{e}"
        );
        let e = bad_config(r#"{"until": "5x"}"#);
        assert!(
            e.starts_with("`until`") && e.contains("unknown unit `x`"),
            "{e}"
        );
        let e = bad_config(r#"{"since": "yesterday"}"#);
        assert!(e.contains("not a duration, a timestamp or a date"), "{e}");
        let e = bad_config(r#"{"since": "2025-02-30"}"#);
        assert!(e.contains("not a valid date"), "{e}");
    }

    #[test]
    fn an_empty_time_window_is_refused() {
        let e = bad_config(r#"{"since": "1h", "until": "2h"}"#);
        assert!(
            e.contains("`since`") && e.contains("not before `until`"),
            "{e}"
        );
        bad_config(r#"{"since": "2025-06-01", "until": "2025-06-01"}"#);
    }

    #[test]
    fn unknown_keys_and_wrong_types_are_refused() {
        bad_config(r#"{"role": ["user"]}"#);
        bad_config(r#"{"roles": "user"}"#);
        bad_config(r#"{"context": -1}"#);
    }
}
