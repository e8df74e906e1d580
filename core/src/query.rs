//! Session queries: filters over a history by time, text, role, agent and
//! origin, and the parsers for the time values a user types (`30m`, `2d`,
//! `2025-06-01`).
//!
//! Nothing here reads a clock: "30 minutes ago" is measured from a `now` the
//! caller passes in.
//!
//! ```
//! use agent_host_core::query::{self, Query};
//! use agent_host_core::{Message, Role};
//! use chrono::{TimeZone, Utc};
//!
//! let now = Utc.with_ymd_and_hms(2025, 6, 2, 12, 0, 0).unwrap();
//! let mut old = Message::user("deploy the site");
//! old.timestamp = Some(now - chrono::Duration::hours(3));
//! let mut recent = Message::user("Deploy again");
//! recent.timestamp = Some(now - chrono::Duration::minutes(10));
//! let history = [old, recent];
//!
//! let query = Query {
//!     since: Some(query::parse_time("1h", now)?),
//!     contains: Some("DEPLOY".into()),
//!     roles: vec![Role::User],
//!     ..Query::default()
//! };
//! let found = query.apply(&history);
//! assert_eq!(found.len(), 1);
//! assert_eq!(found[0].content, "Deploy again");
//! # Ok::<(), agent_host_core::query::QueryError>(())
//! ```

use chrono::{DateTime, Duration, NaiveDate, Utc};

use crate::message::{Message, Role};

/// The metadata key that marks a message as forwarded from another session or
/// agent; its value names the source.
///
/// Forwarded messages are left out of query results unless
/// [`Query::include_forwarded`] is set.
pub const FORWARDED_FROM: &str = "forwarded_from";

/// The units [`parse_duration`] accepts, with their length in seconds.
const UNITS: [(&str, f64); 5] = [
    ("s", 1.0),
    ("m", 60.0),
    ("h", 3_600.0),
    ("d", 86_400.0),
    ("w", 604_800.0),
];

/// Why a query value could not be read.
///
/// Every message names the value, what was wrong with it, and shows valid
/// examples.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum QueryError {
    /// A duration such as `30m` could not be read.
    #[error(
        "invalid duration `{input}`: {problem}; use a number and one of s, m, h, d, w \
         (e.g. `30m`, `1.5h`, `2d`)"
    )]
    Duration {
        /// The text as given (trimmed).
        input: String,
        /// What was wrong with it.
        problem: DurationProblem,
    },
    /// A point in time could not be read.
    #[error(
        "invalid time `{input}`: {problem}; use a duration before now (e.g. `30m`, `2d`), \
         an RFC 3339 timestamp (e.g. `2025-06-01T10:00:00Z`) or a date (e.g. `2025-06-01`)"
    )]
    Time {
        /// The text as given (trimmed).
        input: String,
        /// What was wrong with it.
        problem: TimeProblem,
    },
}

/// What was wrong with a duration.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DurationProblem {
    /// The text was empty or only whitespace.
    #[error("it is empty")]
    Empty,
    /// A number without a unit, such as `90`.
    #[error("the unit is missing")]
    MissingUnit,
    /// A unit other than s, m, h, d, w.
    #[error("unknown unit `{0}`")]
    UnknownUnit(String),
    /// The part before the unit is not a plain decimal number.
    #[error("`{0}` is not a number")]
    BadNumber(String),
    /// A negative duration.
    #[error("it is negative")]
    Negative,
    /// A duration of zero (or one too small to measure).
    #[error("it is zero")]
    Zero,
    /// A duration longer than can be represented.
    #[error("it is too large")]
    TooLarge,
}

/// What was wrong with a point in time.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TimeProblem {
    /// Neither a duration, an RFC 3339 timestamp nor a date.
    #[error("it is not a duration, a timestamp or a date")]
    Unrecognized,
    /// Looks like a timestamp but is not valid RFC 3339; the reason is the
    /// parser's.
    #[error("not a valid RFC 3339 timestamp ({0})")]
    BadTimestamp(String),
    /// Looks like a `YYYY-MM-DD` date but is not a valid one.
    #[error("not a valid date ({0})")]
    BadDate(String),
    /// A duration reaching back before the earliest representable time.
    #[error("it reaches back before the earliest representable time")]
    OutOfRange,
}

/// Reads a duration: a positive decimal number followed by a unit.
///
/// The units are `s` (seconds), `m` (minutes), `h` (hours), `d` (days) and
/// `w` (weeks). The number may have a fractional part (`1.5h`) and may be
/// separated from the unit by spaces; surrounding whitespace is ignored. A
/// number without a unit, a negative or zero duration, and one too large to
/// represent are errors whose message shows valid examples.
///
/// ```
/// use agent_host_core::query::parse_duration;
/// use chrono::Duration;
///
/// assert_eq!(parse_duration("1.5h")?, Duration::minutes(90));
/// assert_eq!(parse_duration(" 2d ")?, Duration::days(2));
/// let err = parse_duration("90").unwrap_err().to_string();
/// assert!(err.contains("unit is missing") && err.contains("`30m`"), "{err}");
/// # Ok::<(), agent_host_core::query::QueryError>(())
/// ```
pub fn parse_duration(text: &str) -> Result<Duration, QueryError> {
    let input = text.trim();
    let fail = |problem| QueryError::Duration {
        input: input.to_owned(),
        problem,
    };
    if input.is_empty() {
        return Err(fail(DurationProblem::Empty));
    }
    let split = input
        .char_indices()
        .rev()
        .take_while(|(_, c)| c.is_alphabetic())
        .last()
        .map_or(input.len(), |(i, _)| i);
    let (number, unit) = (input[..split].trim_end(), &input[split..]);
    if number.is_empty() {
        return Err(fail(DurationProblem::BadNumber(input.to_owned())));
    }
    if let Some(rest) = number.strip_prefix('-')
        && is_decimal(rest.trim_start())
    {
        return Err(fail(DurationProblem::Negative));
    }
    if !is_decimal(number) {
        return Err(fail(DurationProblem::BadNumber(number.to_owned())));
    }
    if unit.is_empty() {
        return Err(fail(DurationProblem::MissingUnit));
    }
    let Some(&(_, unit_seconds)) = UNITS.iter().find(|(name, _)| *name == unit) else {
        return Err(fail(DurationProblem::UnknownUnit(unit.to_owned())));
    };
    let value: f64 = number
        .parse()
        .map_err(|_| fail(DurationProblem::BadNumber(number.to_owned())))?;
    seconds_to_duration(value * unit_seconds).map_err(fail)
}

/// Whether `s` is a plain decimal number: digits with at most one `.`, and at
/// least one digit. Rejects what `f64::from_str` would also take (`inf`,
/// `1e9`, `+1`).
fn is_decimal(s: &str) -> bool {
    let mut dots = 0;
    let mut digits = 0;
    for c in s.chars() {
        match c {
            '0'..='9' => digits += 1,
            '.' => dots += 1,
            _ => return false,
        }
    }
    digits > 0 && dots <= 1
}

/// Converts a non-negative, finite number of seconds to a duration, to the
/// nanosecond.
fn seconds_to_duration(total: f64) -> Result<Duration, DurationProblem> {
    // The longest `Duration` is `i64::MAX` milliseconds.
    const MAX_SECONDS: f64 = (i64::MAX / 1_000) as f64;
    if !total.is_finite() || total >= MAX_SECONDS {
        return Err(DurationProblem::TooLarge);
    }
    let mut seconds = total.trunc() as i64;
    let mut nanos = ((total - total.trunc()) * 1e9).round() as u32;
    if nanos >= 1_000_000_000 {
        seconds += 1;
        nanos = 0;
    }
    if seconds == 0 && nanos == 0 {
        return Err(DurationProblem::Zero);
    }
    Duration::new(seconds, nanos).ok_or(DurationProblem::TooLarge)
}

/// Reads a point in time.
///
/// Accepts, in this order:
/// - an RFC 3339 timestamp, with `Z` or an offset
///   (`2025-06-01T10:00:00Z`, `2025-06-01T12:00:00+02:00`);
/// - a bare date `YYYY-MM-DD`, meaning midnight UTC at its start;
/// - a duration as read by [`parse_duration`], meaning that long before `now`.
///
/// Text shaped like a duration (`5x`, `90`, `-3h`) gets the duration's error,
/// which says what is wrong with it; anything else gets an error listing the
/// three accepted forms.
///
/// ```
/// use agent_host_core::query::parse_time;
/// use chrono::{TimeZone, Utc};
///
/// let now = Utc.with_ymd_and_hms(2025, 6, 2, 12, 0, 0).unwrap();
/// assert_eq!(parse_time("2h", now)?, Utc.with_ymd_and_hms(2025, 6, 2, 10, 0, 0).unwrap());
/// assert_eq!(parse_time("2025-06-01", now)?, Utc.with_ymd_and_hms(2025, 6, 1, 0, 0, 0).unwrap());
/// assert!(parse_time("yesterday", now).is_err());
/// # Ok::<(), agent_host_core::query::QueryError>(())
/// ```
pub fn parse_time(text: &str, now: DateTime<Utc>) -> Result<DateTime<Utc>, QueryError> {
    let input = text.trim();
    let fail = |problem| QueryError::Time {
        input: input.to_owned(),
        problem,
    };
    if let Ok(time) = DateTime::parse_from_rfc3339(input) {
        return Ok(time.with_timezone(&Utc));
    }
    // `FromStr` rather than a format string: the strftime parser would cost a
    // processor that uses this 31 KB of WebAssembly. The shape check keeps
    // it as strict as `%Y-%m-%d`.
    let date = looks_like_date(input).then(|| input.parse::<NaiveDate>());
    if let Some(Ok(date)) = date {
        return Ok(date.and_time(chrono::NaiveTime::MIN).and_utc());
    }
    if looks_like_duration(input) {
        let ago = parse_duration(input)?;
        return now
            .checked_sub_signed(ago)
            .ok_or_else(|| fail(TimeProblem::OutOfRange));
    }
    if input.contains(':') {
        let reason = DateTime::parse_from_rfc3339(input)
            .err()
            .map_or_else(String::new, |e| e.to_string());
        return Err(fail(TimeProblem::BadTimestamp(reason)));
    }
    if let Some(Err(e)) = date {
        return Err(fail(TimeProblem::BadDate(e.to_string())));
    }
    Err(fail(TimeProblem::Unrecognized))
}

/// Whether `s` has the shape of a duration, right or wrong: an optional `-`,
/// a decimal number, optional spaces, and optional letters.
fn looks_like_duration(s: &str) -> bool {
    let s = s.strip_prefix('-').unwrap_or(s).trim_start();
    let number_end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, rest) = s.split_at(number_end);
    is_decimal(number) && rest.trim_start().chars().all(char::is_alphabetic)
}

/// Whether `s` has the shape `dddd-dd-dd`.
fn looks_like_date(s: &str) -> bool {
    let bytes = s.as_bytes();
    bytes.len() == 10
        && bytes.iter().enumerate().all(|(i, &b)| match i {
            4 | 7 => b == b'-',
            _ => b.is_ascii_digit(),
        })
}

/// A filter over the messages of a history.
///
/// A message matches when it passes every condition that is set; the default
/// query matches every message that is not forwarded.
///
/// - `since` / `until`: `since <= timestamp < until`. When either is set, a
///   message without a timestamp does not match.
/// - `contains`: a case-insensitive substring of the message's text
///   ([`Message::text`]), of a tool call's name or arguments, or of a tool
///   result's `tool_name`.
/// - `roles`: the message's role is one of these; empty means every role.
/// - `agents`: the message's `agent` is one of these; empty means any agent,
///   including none. When set, a message without an agent does not match.
/// - `limit`: [`Query::apply`] keeps only the most recent `limit` matches.
/// - `include_forwarded`: a message whose metadata has the key
///   [`FORWARDED_FROM`] matches only when this is set.
///
/// ```
/// use agent_host_core::query::{Query, FORWARDED_FROM};
/// use agent_host_core::Message;
///
/// let mut relayed = Message::user("from the other agent");
/// relayed.metadata.insert(FORWARDED_FROM.into(), "planner".into());
/// assert!(!Query::default().matches(&relayed));
/// let all = Query { include_forwarded: true, ..Query::default() };
/// assert!(all.matches(&relayed));
/// ```
#[derive(Clone, Debug, Default)]
pub struct Query {
    /// Only messages at or after this time.
    pub since: Option<DateTime<Utc>>,
    /// Only messages strictly before this time.
    pub until: Option<DateTime<Utc>>,
    /// Only messages containing this text, ignoring case.
    pub contains: Option<String>,
    /// Only messages with one of these roles; empty for all roles.
    pub roles: Vec<Role>,
    /// Only messages written by one of these agents; empty for any agent.
    pub agents: Vec<String>,
    /// Keep only the most recent this many matches.
    pub limit: Option<usize>,
    /// Also match messages forwarded from elsewhere (see [`FORWARDED_FROM`]).
    pub include_forwarded: bool,
}

impl Query {
    /// Whether `m` passes every condition of this query (see [`Query`]).
    pub fn matches(&self, m: &Message) -> bool {
        let needle = self.contains.as_deref().map(str::to_lowercase);
        self.matches_with(m, needle.as_deref())
    }

    /// The messages that match, in log order; with a `limit`, only the most
    /// recent `limit` of them.
    pub fn apply<'a>(&self, messages: &'a [Message]) -> Vec<&'a Message> {
        let needle = self.contains.as_deref().map(str::to_lowercase);
        let mut found: Vec<&Message> = messages
            .iter()
            .filter(|m| self.matches_with(m, needle.as_deref()))
            .collect();
        if let Some(limit) = self.limit
            && found.len() > limit
        {
            found.drain(..found.len() - limit);
        }
        found
    }

    /// [`Query::matches`] with `contains` already lowercased.
    fn matches_with(&self, m: &Message, needle: Option<&str>) -> bool {
        if !self.include_forwarded && m.metadata.contains_key(FORWARDED_FROM) {
            return false;
        }
        if !self.roles.is_empty() && !self.roles.contains(&m.role) {
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
        if self.since.is_some() || self.until.is_some() {
            let Some(time) = m.timestamp else {
                return false;
            };
            if self.since.is_some_and(|since| time < since)
                || self.until.is_some_and(|until| time >= until)
            {
                return false;
            }
        }
        match needle {
            None => true,
            Some(needle) => {
                let found_in = |haystack: &str| haystack.to_lowercase().contains(needle);
                found_in(&m.text())
                    || m.tool_name.as_deref().is_some_and(found_in)
                    || m.tool_calls
                        .iter()
                        .any(|call| found_in(&call.name) || found_in(&call.arguments))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Part;
    use chrono::TimeZone;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2025, 6, 2, 12, 0, 0).unwrap()
    }

    fn at(m: Message, minutes_ago: i64) -> Message {
        let mut m = m;
        m.timestamp = Some(now() - Duration::minutes(minutes_ago));
        m
    }

    fn duration_problem(text: &str) -> DurationProblem {
        match parse_duration(text) {
            Err(QueryError::Duration { problem, .. }) => problem,
            other => panic!("expected a duration error for {text:?}, got {other:?}"),
        }
    }

    fn time_problem(text: &str) -> TimeProblem {
        match parse_time(text, now()) {
            Err(QueryError::Time { problem, .. }) => problem,
            other => panic!("expected a time error for {text:?}, got {other:?}"),
        }
    }

    fn ids(found: &[&Message]) -> Vec<String> {
        found.iter().map(|m| m.id.clone()).collect()
    }

    #[test]
    fn durations_in_every_unit() {
        assert_eq!(parse_duration("45s").unwrap(), Duration::seconds(45));
        assert_eq!(parse_duration("30m").unwrap(), Duration::minutes(30));
        assert_eq!(parse_duration("1.5h").unwrap(), Duration::minutes(90));
        assert_eq!(parse_duration("2d").unwrap(), Duration::days(2));
        assert_eq!(parse_duration("1w").unwrap(), Duration::weeks(1));
        assert_eq!(parse_duration("0.5s").unwrap(), Duration::milliseconds(500));
        assert_eq!(parse_duration(".25m").unwrap(), Duration::seconds(15));
    }

    #[test]
    fn durations_allow_surrounding_and_inner_whitespace() {
        assert_eq!(parse_duration("  30m\n").unwrap(), Duration::minutes(30));
        assert_eq!(parse_duration("3 h").unwrap(), Duration::hours(3));
    }

    #[test]
    fn a_bare_number_is_missing_its_unit() {
        assert_eq!(duration_problem("90"), DurationProblem::MissingUnit);
        let message = parse_duration("90").unwrap_err().to_string();
        assert_eq!(
            message,
            "invalid duration `90`: the unit is missing; use a number and one of \
             s, m, h, d, w (e.g. `30m`, `1.5h`, `2d`)"
        );
    }

    #[test]
    fn unknown_units_are_named_in_the_error() {
        assert_eq!(
            duration_problem("5x"),
            DurationProblem::UnknownUnit("x".into())
        );
        assert_eq!(
            duration_problem("5min"),
            DurationProblem::UnknownUnit("min".into())
        );
        // Units are lowercase only: `M` could be read as months.
        assert_eq!(
            duration_problem("5M"),
            DurationProblem::UnknownUnit("M".into())
        );
        let message = parse_duration("5x").unwrap_err().to_string();
        assert!(message.starts_with("invalid duration `5x`: unknown unit `x`;"));
        assert!(message.contains("(e.g. `30m`, `1.5h`, `2d`)"));
    }

    #[test]
    fn malformed_numbers_are_rejected() {
        assert_eq!(duration_problem(""), DurationProblem::Empty);
        assert_eq!(duration_problem("   "), DurationProblem::Empty);
        assert_eq!(
            duration_problem("h"),
            DurationProblem::BadNumber("h".into())
        );
        assert_eq!(
            duration_problem("1.2.3h"),
            DurationProblem::BadNumber("1.2.3".into())
        );
        assert_eq!(
            duration_problem("1e3s"),
            DurationProblem::BadNumber("1e3".into())
        );
        assert_eq!(
            duration_problem("infs"),
            DurationProblem::BadNumber("infs".into())
        );
        assert_eq!(
            duration_problem("+5m"),
            DurationProblem::BadNumber("+5".into())
        );
        assert_eq!(
            duration_problem(".m"),
            DurationProblem::BadNumber(".".into())
        );
    }

    #[test]
    fn negative_zero_and_huge_durations_are_rejected() {
        assert_eq!(duration_problem("-5m"), DurationProblem::Negative);
        assert_eq!(duration_problem("- 5m"), DurationProblem::Negative);
        assert_eq!(duration_problem("0s"), DurationProblem::Zero);
        assert_eq!(duration_problem("0.0h"), DurationProblem::Zero);
        assert_eq!(duration_problem("0.0000000001s"), DurationProblem::Zero);
        assert_eq!(
            duration_problem("99999999999999999999w"),
            DurationProblem::TooLarge
        );
        assert_eq!(
            duration_problem(&format!("{}s", "9".repeat(400))),
            DurationProblem::TooLarge
        );
        assert!(
            parse_duration("-5m")
                .unwrap_err()
                .to_string()
                .contains("it is negative")
        );
    }

    #[test]
    fn times_from_durations_timestamps_and_dates() {
        assert_eq!(
            parse_time("30m", now()).unwrap(),
            Utc.with_ymd_and_hms(2025, 6, 2, 11, 30, 0).unwrap()
        );
        assert_eq!(
            parse_time("2025-06-01T10:00:00Z", now()).unwrap(),
            Utc.with_ymd_and_hms(2025, 6, 1, 10, 0, 0).unwrap()
        );
        assert_eq!(
            parse_time("2025-06-01T12:00:00+02:00", now()).unwrap(),
            Utc.with_ymd_and_hms(2025, 6, 1, 10, 0, 0).unwrap()
        );
        assert_eq!(
            parse_time(" 2025-06-01 ", now()).unwrap(),
            Utc.with_ymd_and_hms(2025, 6, 1, 0, 0, 0).unwrap()
        );
    }

    #[test]
    fn bad_times_say_what_is_accepted() {
        assert_eq!(time_problem("yesterday"), TimeProblem::Unrecognized);
        assert_eq!(time_problem(""), TimeProblem::Unrecognized);
        let message = parse_time("yesterday", now()).unwrap_err().to_string();
        assert!(
            message.starts_with("invalid time `yesterday`:"),
            "{message}"
        );
        assert!(message.contains("`2025-06-01T10:00:00Z`"), "{message}");
        assert!(message.contains("`2025-06-01`"), "{message}");
        assert!(matches!(
            time_problem("2025-06-01T25:00:00Z"),
            TimeProblem::BadTimestamp(_)
        ));
        assert!(matches!(
            time_problem("2025-02-30"),
            TimeProblem::BadDate(_)
        ));
    }

    #[test]
    fn duration_shaped_times_get_the_duration_error() {
        assert!(matches!(
            parse_time("5x", now()),
            Err(QueryError::Duration {
                problem: DurationProblem::UnknownUnit(_),
                ..
            })
        ));
        assert!(matches!(
            parse_time("90", now()),
            Err(QueryError::Duration {
                problem: DurationProblem::MissingUnit,
                ..
            })
        ));
    }

    #[test]
    fn a_duration_reaching_before_the_earliest_time_is_out_of_range() {
        // About 3.8 million years: a valid duration, but not a valid time ago.
        assert_eq!(time_problem("200000000w"), TimeProblem::OutOfRange);
    }

    #[test]
    fn time_bounds_are_inclusive_then_exclusive() {
        let history = [
            at(Message::user("a").with_id("a"), 60),
            at(Message::user("b").with_id("b"), 30),
            at(Message::user("c").with_id("c"), 10),
            Message::user("no time").with_id("none"),
        ];
        let query = Query {
            since: Some(now() - Duration::minutes(60)),
            until: Some(now() - Duration::minutes(10)),
            ..Query::default()
        };
        assert_eq!(ids(&query.apply(&history)), ["a", "b"]);
        let since_only = Query {
            since: Some(now() - Duration::minutes(30)),
            ..Query::default()
        };
        assert_eq!(ids(&since_only.apply(&history)), ["b", "c"]);
        // Without a time bound, messages without a timestamp match.
        assert_eq!(Query::default().apply(&history).len(), 4);
    }

    #[test]
    fn contains_ignores_case_and_searches_tool_calls_and_results() {
        let mut call = Message::assistant("").with_id("call");
        call.push_tool_call("c1", "read_file", r#"{"path":"Cargo.TOML"}"#);
        let mut parts = Message::user("").with_id("parts");
        parts.parts = vec![Part::Text {
            text: "see CARGO.toml".into(),
        }];
        let history = [
            Message::user("nothing here").with_id("plain"),
            call,
            Message::tool_result("c1", "read_file", "[package]").with_id("result"),
            parts,
        ];
        let by_text = |needle: &str| {
            let query = Query {
                contains: Some(needle.into()),
                ..Query::default()
            };
            ids(&query.apply(&history))
        };
        assert_eq!(by_text("cargo.toml"), ["call", "parts"]);
        assert_eq!(by_text("READ_FILE"), ["call", "result"]);
        assert_eq!(by_text("[PACKAGE]"), ["result"]);
        assert!(by_text("absent").is_empty());
    }

    #[test]
    fn roles_and_agents_filter_when_given() {
        let mut coder = Message::assistant("done").with_id("coder");
        coder.agent = Some("coder".into());
        let mut planner = Message::assistant("plan").with_id("planner");
        planner.agent = Some("planner".into());
        let history = [
            Message::system("rules").with_id("system"),
            Message::user("go").with_id("user"),
            coder,
            planner,
        ];
        let assistants = Query {
            roles: vec![Role::Assistant],
            ..Query::default()
        };
        assert_eq!(ids(&assistants.apply(&history)), ["coder", "planner"]);
        let coder_only = Query {
            agents: vec!["coder".into()],
            ..Query::default()
        };
        assert_eq!(ids(&coder_only.apply(&history)), ["coder"]);
        let system_or_user = Query {
            roles: vec![Role::System, Role::User],
            ..Query::default()
        };
        assert_eq!(ids(&system_or_user.apply(&history)), ["system", "user"]);
    }

    #[test]
    fn forwarded_messages_are_excluded_unless_asked_for() {
        let mut forwarded = Message::user("relay").with_id("fwd");
        forwarded
            .metadata
            .insert(FORWARDED_FROM.into(), "planner".into());
        let history = [Message::user("own").with_id("own"), forwarded];
        assert_eq!(ids(&Query::default().apply(&history)), ["own"]);
        let all = Query {
            include_forwarded: true,
            ..Query::default()
        };
        assert_eq!(ids(&all.apply(&history)), ["own", "fwd"]);
    }

    #[test]
    fn limit_keeps_the_most_recent_matches_in_log_order() {
        let history: Vec<Message> = (0..5)
            .map(|i| Message::user(format!("m{i}")).with_id(format!("m{i}")))
            .collect();
        let last_two = Query {
            limit: Some(2),
            ..Query::default()
        };
        assert_eq!(ids(&last_two.apply(&history)), ["m3", "m4"]);
        let none = Query {
            limit: Some(0),
            ..Query::default()
        };
        assert!(none.apply(&history).is_empty());
        let more_than_all = Query {
            limit: Some(10),
            ..Query::default()
        };
        assert_eq!(more_than_all.apply(&history).len(), 5);
    }
}
