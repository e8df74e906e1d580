//! How much a transcript reader accepts: bytes and JSON values, per message
//! and per history.
//!
//! Parsed JSON takes more memory than its text: a `0` in an array is one byte
//! of input and an 80-byte `serde_json::Value` in memory, so a byte cap alone
//! lets 52 MB of zeros take gigabytes. Every reader therefore counts the JSON
//! values of each message (a JSONL line, a Claude Code record) or document
//! *before* it builds anything, with a pass that allocates nothing, and
//! refuses what is over a limit with an error naming the limit. A value
//! takes a byte at least, so a text no longer than its values' limit cannot
//! be over it: an OpenAI document that short is not counted, and a Claude
//! Code record that short is counted as it is parsed (no pass of its own).
//! Real agent logs hold about one value per 90 bytes; the defaults leave
//! them room several times over and bound a hostile input to a small
//! multiple of its byte cap.
//!
//! | limit | default | counts |
//! |---|---|---|
//! | `history_mb` | 256 | bytes of one history (a file, standard input, a document) |
//! | `message_mb` | 64 | bytes of one message (a line, or a message of a document as stored) |
//! | `history_values` | 4,000,000 | JSON values (objects, arrays, strings, numbers, booleans, nulls) of one history |
//! | `message_values` | 1,000,000 | JSON values of one message |
//! | `history_messages` | 500,000 | messages of one history (a message takes about 500 bytes before its text) |

use std::cell::Cell;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

use super::{Format, FormatError};

/// One of the limits, by the name a front end sets it with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Limit {
    /// Bytes of one history.
    HistoryBytes,
    /// Bytes of one message.
    MessageBytes,
    /// JSON values of one history.
    HistoryValues,
    /// JSON values of one message.
    MessageValues,
    /// Messages of one history.
    HistoryMessages,
}

impl Limit {
    /// Every limit, in the order they are documented.
    pub const ALL: [Limit; 5] = [
        Limit::HistoryBytes,
        Limit::MessageBytes,
        Limit::HistoryValues,
        Limit::MessageValues,
        Limit::HistoryMessages,
    ];

    /// The name a front end sets it with (`history_mb`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Limit::HistoryBytes => "history_mb",
            Limit::MessageBytes => "message_mb",
            Limit::HistoryValues => "history_values",
            Limit::MessageValues => "message_values",
            Limit::HistoryMessages => "history_messages",
        }
    }
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The limits a reader applies. [`Limits::default`] is what every reader uses
/// unless told otherwise (the store's logs included).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of one history.
    pub history_bytes: u64,
    /// Bytes of one message.
    pub message_bytes: u64,
    /// JSON values of one history.
    pub history_values: u64,
    /// JSON values of one message.
    pub message_values: u64,
    /// Messages of one history.
    pub history_messages: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            history_bytes: 256 << 20,
            message_bytes: 64 << 20,
            history_values: 4_000_000,
            message_values: 1_000_000,
            history_messages: 500_000,
        }
    }
}

impl Limits {
    /// The value of one limit, in its unit (MiB for the `_mb` ones).
    pub fn get(&self, limit: Limit) -> u64 {
        match limit {
            Limit::HistoryBytes => self.history_bytes >> 20,
            Limit::MessageBytes => self.message_bytes >> 20,
            Limit::HistoryValues => self.history_values,
            Limit::MessageValues => self.message_values,
            Limit::HistoryMessages => self.history_messages,
        }
    }

    /// Sets one limit, in its unit (MiB for the `_mb` ones).
    pub fn set(&mut self, limit: Limit, value: u64) {
        match limit {
            Limit::HistoryBytes => self.history_bytes = value.saturating_mul(1 << 20),
            Limit::MessageBytes => self.message_bytes = value.saturating_mul(1 << 20),
            Limit::HistoryValues => self.history_values = value,
            Limit::MessageValues => self.message_values = value,
            Limit::HistoryMessages => self.history_messages = value,
        }
    }

    /// Applies `NAME=VALUE` assignments separated by commas
    /// (`message_mb=128,history_values=20000000`); nothing is changed when
    /// one of them is wrong.
    ///
    /// ```
    /// use agent_host_core::format::Limits;
    ///
    /// let mut limits = Limits::default();
    /// limits.apply("message_mb=128, history_values=20000000").unwrap();
    /// assert_eq!(limits.message_bytes, 128 << 20);
    /// assert!(limits.apply("message_gb=1").unwrap_err().contains("history_mb"));
    /// ```
    pub fn apply(&mut self, assignments: &str) -> Result<(), String> {
        let mut next = *self;
        for assignment in assignments.split(',').map(str::trim) {
            if !assignment.is_empty() {
                let (limit, value) = Limit::assignment(assignment)?;
                next.set(limit, value);
            }
        }
        *self = next;
        Ok(())
    }
}

impl Limit {
    /// Reads one `NAME=VALUE` assignment (`message_mb=128`); the value is a
    /// whole number greater than 0, in the limit's unit.
    pub fn assignment(assignment: &str) -> Result<(Limit, u64), String> {
        let names = || {
            Limit::ALL
                .iter()
                .map(|l| l.name())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let Some((name, value)) = assignment.split_once('=') else {
            return Err(format!(
                "`{assignment}` is not NAME=VALUE; the limits are {}",
                names()
            ));
        };
        let (name, value) = (name.trim(), value.trim());
        let limit = Limit::ALL
            .into_iter()
            .find(|l| l.name() == name)
            .ok_or_else(|| format!("unknown limit `{name}`; the limits are {}", names()))?;
        match value.replace('_', "").parse::<u64>() {
            Ok(n) if n > 0 => Ok((limit, n)),
            _ => Err(format!(
                "limit `{name}` wants a whole number greater than 0, not `{value}`"
            )),
        }
    }
}

impl Limits {
    /// The error for input over `limit`, naming it and its value; the
    /// caller adds where (a line, a message).
    pub fn exceeded(&self, format: Format, limit: Limit) -> FormatError {
        let what = match limit {
            Limit::HistoryBytes => format!(
                "the history is larger than {} MiB (the `{limit}` limit)",
                self.history_bytes >> 20
            ),
            Limit::MessageBytes => format!(
                "the message is larger than {} MiB (the `{limit}` limit)",
                self.message_bytes >> 20
            ),
            Limit::HistoryValues => format!(
                "the history holds more than {} JSON values (the `{limit}` limit)",
                self.history_values
            ),
            Limit::MessageValues => format!(
                "the message holds more than {} JSON values (the `{limit}` limit)",
                self.message_values
            ),
            Limit::HistoryMessages => format!(
                "the history holds more than {} messages (the `{limit}` limit)",
                self.history_messages
            ),
        };
        over(format, limit, what)
    }
}

/// The error for a unit over a limit.
fn over(format: Format, limit: Limit, what: String) -> FormatError {
    let mut e = FormatError::new(format, what);
    e.limit = Some(limit);
    e
}

/// Counts what a reader has taken so far against its [`Limits`].
#[derive(Clone, Debug)]
pub struct Meter {
    limits: Limits,
    bytes: u64,
    values: u64,
    messages: u64,
}

impl Meter {
    /// A meter with nothing counted yet.
    pub fn new(limits: Limits) -> Self {
        Meter {
            limits,
            bytes: 0,
            values: 0,
            messages: 0,
        }
    }

    /// The limits it applies.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Counts `bytes` more bytes of the history (read, not necessarily parsed
    /// yet), refusing them past `history_mb`.
    pub fn bytes(&mut self, format: Format, bytes: u64) -> Result<(), FormatError> {
        self.bytes = self.bytes.saturating_add(bytes);
        if self.bytes > self.limits.history_bytes {
            return Err(self.limits.exceeded(format, Limit::HistoryBytes));
        }
        Ok(())
    }

    /// Checks one message's text (its bytes were counted with
    /// [`Meter::bytes`]) against `message_mb` and counts its JSON values
    /// against `message_values` and `history_values`, before anything is
    /// built from it.
    pub fn message(&mut self, format: Format, text: &str) -> Result<(), FormatError> {
        let max = self.begin_message(format, text)?;
        self.count_message(format, text, max)
    }

    /// What [`Meter::message`] checks before it counts: the message's bytes,
    /// and one more message for the history. Gives the most JSON values the
    /// message may hold.
    pub(crate) fn begin_message(&mut self, format: Format, text: &str) -> Result<u64, FormatError> {
        message_bytes(format, text.len() as u64, &self.limits)?;
        self.messages(format, 1)?;
        let room = self.limits.history_values.saturating_sub(self.values);
        Ok(self.limits.message_values.min(room))
    }

    /// Counts a message's JSON values, at most `max` (from
    /// [`Meter::begin_message`]), with a pass that builds nothing.
    pub(crate) fn count_message(
        &mut self,
        format: Format,
        text: &str,
        max: u64,
    ) -> Result<(), FormatError> {
        match count_values(text, max) {
            Ok(n) => {
                self.values += n;
                Ok(())
            }
            // Not JSON: the parser that follows says where and why.
            Err(Counted::Invalid) => Ok(()),
            Err(Counted::Over) => Err(self.values_over(format, max)),
        }
    }

    /// Parses a message that is one JSON value into a `serde_json::Value`,
    /// counting its values (at most `max`, from [`Meter::begin_message`]):
    /// what [`Meter::message`] then `serde_json::from_str` do.
    ///
    /// A value takes a byte at least, so a text no longer than `max` cannot
    /// be over it: its values are counted as it is parsed, in one pass. A
    /// longer one is counted first, so that a hostile one is refused before
    /// anything of it is built, and is then left to the caller (`None`), as
    /// is a text that is not JSON (the caller's own parse says where and
    /// why).
    pub(crate) fn parse_message(
        &mut self,
        format: Format,
        text: &str,
        max: u64,
    ) -> Result<Option<Value>, FormatError> {
        if text.len() as u64 > max {
            self.count_message(format, text, max)?;
            return Ok(None);
        }
        let tally = Tally::new(max);
        let mut de = serde_json::Deserializer::from_str(text);
        let read = CountedValue(&tally)
            .deserialize(&mut de)
            .and_then(|value| de.end().map(|()| value));
        match read {
            Ok(value) => {
                self.values += tally.count.get();
                Ok(Some(value))
            }
            Err(_) => {
                self.count_message(format, text, max)?;
                Ok(None)
            }
        }
    }

    /// Reads a message that is one JSON value with `read`, which counts its
    /// values into the tally it is given (at most `max`, from
    /// [`Meter::begin_message`]) as it reads, and says whether it took the
    /// message; the values are counted when it did.
    ///
    /// As [`Meter::parse_message`], only a text no longer than `max` (which
    /// cannot be over it) is read this way: a longer one is not taken, and
    /// is left to the caller, to count first.
    pub(crate) fn read_counted(
        &mut self,
        text: &str,
        max: u64,
        read: impl FnOnce(&Tally) -> bool,
    ) -> bool {
        if text.len() as u64 > max {
            return false;
        }
        let tally = Tally::new(max);
        let taken = read(&tally);
        if taken {
            self.values += tally.count.get();
        }
        taken
    }

    /// The error for a message over `max` values: over its own limit, or
    /// over what the history has left.
    fn values_over(&self, format: Format, max: u64) -> FormatError {
        if max == self.limits.message_values {
            self.limits.exceeded(format, Limit::MessageValues)
        } else {
            self.limits.exceeded(format, Limit::HistoryValues)
        }
    }

    /// Counts `n` more messages against `history_messages`.
    pub fn messages(&mut self, format: Format, n: u64) -> Result<(), FormatError> {
        self.messages = self.messages.saturating_add(n);
        if self.messages > self.limits.history_messages {
            return Err(self.limits.exceeded(format, Limit::HistoryMessages));
        }
        Ok(())
    }

    /// Counts the JSON values of a whole document (its bytes were counted
    /// with [`Meter::bytes`]) against `history_values`.
    pub fn document(&mut self, format: Format, text: &str) -> Result<(), FormatError> {
        let room = self.limits.history_values.saturating_sub(self.values);
        match count_values(text, room) {
            Ok(n) => {
                self.values += n;
                Ok(())
            }
            Err(Counted::Invalid) => Ok(()),
            Err(Counted::Over) => Err(self.limits.exceeded(format, Limit::HistoryValues)),
        }
    }
}

/// Refuses a message of `len` bytes past `message_mb`.
pub(crate) fn message_bytes(format: Format, len: u64, limits: &Limits) -> Result<(), FormatError> {
    if len > limits.message_bytes {
        return Err(over(
            format,
            Limit::MessageBytes,
            format!(
                "the message is {len} bytes, more than {} MiB (the `{}` limit)",
                limits.message_bytes >> 20,
                Limit::MessageBytes
            ),
        ));
    }
    Ok(())
}

/// Why values could not be counted.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Counted {
    /// More than the maximum.
    Over,
    /// The text is not one JSON value.
    Invalid,
}

/// The number of JSON values in `text` (every object, array, string, number,
/// boolean and null, at any depth), counting no further than `max`. Nothing
/// is allocated but the parser's own scratch space.
pub(crate) fn count_values(text: &str, max: u64) -> Result<u64, Counted> {
    let tally = Tally::new(max);
    let mut de = serde_json::Deserializer::from_str(text);
    let counted = (&tally).deserialize(&mut de).and_then(|()| de.end());
    match counted {
        Ok(()) => Ok(tally.count.get()),
        Err(_) if tally.over.get() => Err(Counted::Over),
        Err(_) => Err(Counted::Invalid),
    }
}

/// Counts values as the parser meets them, and stops the parse at `max`.
///
/// As a seed it counts a value and builds nothing; a reader that builds what
/// it reads counts through it as it goes ([`CountedValue`]), so that
/// counting takes no pass of its own.
pub(crate) struct Tally {
    count: Cell<u64>,
    max: u64,
    over: Cell<bool>,
}

impl Tally {
    /// A tally that stops the parse past `max` values.
    pub(crate) fn new(max: u64) -> Self {
        Tally {
            count: Cell::new(0),
            max,
            over: Cell::new(false),
        }
    }

    /// The values counted so far.
    #[cfg(test)]
    pub(crate) fn count(&self) -> u64 {
        self.count.get()
    }

    /// Counts one value, failing the parse past the maximum.
    pub(crate) fn one<E: de::Error>(&self) -> Result<(), E> {
        let n = self.count.get() + 1;
        self.count.set(n);
        if n > self.max {
            self.over.set(true);
            return Err(E::custom("over the limit"));
        }
        Ok(())
    }
}

impl<'de> DeserializeSeed<'de> for &Tally {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for &Tally {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        self.one()
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        self.one()
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        self.one()
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        self.one()
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        self.one()
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.one()
    }
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        self.one()
    }
    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.one()?;
        while seq.next_element_seed(self)?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.one()?;
        while map.next_key::<IgnoredAny>()?.is_some() {
            map.next_value_seed(self)?;
        }
        Ok(())
    }
}

/// Deserializes a `serde_json::Value` as `Value`'s own `Deserialize` does,
/// counting each value into the tally as it is met (past the tally's
/// maximum, the parse stops before that value is built).
pub(crate) struct CountedValue<'a>(pub(crate) &'a Tally);

impl<'de> DeserializeSeed<'de> for CountedValue<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for CountedValue<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, value: bool) -> Result<Value, E> {
        self.0.one()?;
        Ok(Value::Bool(value))
    }
    fn visit_i64<E: de::Error>(self, value: i64) -> Result<Value, E> {
        self.0.one()?;
        Ok(Value::Number(value.into()))
    }
    fn visit_u64<E: de::Error>(self, value: u64) -> Result<Value, E> {
        self.0.one()?;
        Ok(Value::Number(value.into()))
    }
    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Value, E> {
        self.0.one()?;
        Ok(Number::from_f64(value).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E: de::Error>(self, value: &str) -> Result<Value, E> {
        self.0.one()?;
        Ok(Value::String(value.to_owned()))
    }
    fn visit_string<E: de::Error>(self, value: String) -> Result<Value, E> {
        self.0.one()?;
        Ok(Value::String(value))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        self.0.one()?;
        Ok(Value::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        self.0.one()?;
        Ok(Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        self.0.one()?;
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(CountedValue(self.0))? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        self.0.one()?;
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            // `Value` reads an object under serde_json's private raw-value
            // key as raw JSON; such a document is left to `Value` itself.
            if key == RAW_VALUE_KEY {
                return Err(de::Error::custom("serde_json's raw-value key"));
            }
            // A repeated key keeps its first place and its last value, as
            // in `Value`.
            object.insert(key, map.next_value_seed(CountedValue(self.0))?);
        }
        Ok(Value::Object(object))
    }
}

/// The key under which serde_json's `Value` reads an object as raw JSON (its
/// `raw_value` feature).
pub(crate) const RAW_VALUE_KEY: &str = "$serde_json::private::RawValue";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_of_value_counts_once() {
        assert_eq!(count_values("0", 10), Ok(1));
        assert_eq!(count_values("[]", 10), Ok(1));
        assert_eq!(count_values("{}", 10), Ok(1));
        assert_eq!(
            count_values(r#"{"a":[0,1.5,-2,"x",null,true,{"b":{}}]}"#, 100),
            Ok(10)
        );
        assert_eq!(count_values("[0,0,0]", 3), Err(Counted::Over));
        assert_eq!(count_values("[0,0,", 100), Err(Counted::Invalid));
        assert_eq!(count_values("0 0", 100), Err(Counted::Invalid));
    }

    /// Claude Code records are parsed through `CountedValue` (issue 23):
    /// it must build what `serde_json` builds, and count what the count does.
    #[test]
    fn counted_values_are_serde_jsons_values_and_counted_as_the_count_does() {
        for text in [
            r#"{"b": [0, -1, 2.5, 1e300, 18446744073709551615, true, null], "a": {"x": "\u00e9\n"}}"#,
            r#"{"k": 1, "j": 2, "k": 3}"#,
            r#"[[], {}, "", [[[null]]]]"#,
            "7",
        ] {
            let tally = Tally::new(u64::MAX);
            let mut de = serde_json::Deserializer::from_str(text);
            let value = CountedValue(&tally).deserialize(&mut de).unwrap();
            assert_eq!(
                value,
                serde_json::from_str::<Value>(text).unwrap(),
                "{text}"
            );
            assert_eq!(
                value.to_string(),
                serde_json::from_str::<Value>(text).unwrap().to_string()
            );
            assert_eq!(
                Ok(tally.count.get()),
                count_values(text, u64::MAX),
                "{text}"
            );
        }
        // serde_json's raw-value key is left to `Value` itself.
        let tally = Tally::new(u64::MAX);
        let raw = r#"{"$serde_json::private::RawValue": "1"}"#;
        let mut de = serde_json::Deserializer::from_str(raw);
        assert!(CountedValue(&tally).deserialize(&mut de).is_err());
    }

    #[test]
    fn a_message_over_a_limit_names_it() {
        let limits = Limits {
            message_values: 4,
            history_values: 10,
            message_bytes: 1 << 20,
            history_bytes: 1 << 20,
            history_messages: 5,
        };
        let mut meter = Meter::new(limits);
        meter.message(Format::Jsonl, "[1,2,3]").unwrap();
        let e = meter.message(Format::Jsonl, "[1,2,3,4]").unwrap_err();
        assert_eq!(e.limit, Some(Limit::MessageValues));
        assert!(e.detail.contains("`message_values`"), "{e}");
        // A refused message is not counted: two fit, and then two values
        // are left for the history, so the next message is over the
        // history's limit, not its own.
        meter.message(Format::Jsonl, "[1,2,3]").unwrap();
        let e = meter.message(Format::Jsonl, "[1,2,3]").unwrap_err();
        assert_eq!(e.limit, Some(Limit::HistoryValues), "{e}");
        meter.message(Format::Jsonl, "1").unwrap();
        let e = meter.message(Format::Jsonl, "1").unwrap_err();
        assert_eq!(e.limit, Some(Limit::HistoryMessages), "{e}");
        let e = meter.bytes(Format::Jsonl, 2 << 20).unwrap_err();
        assert_eq!(e.limit, Some(Limit::HistoryBytes), "{e}");
        let e = message_bytes(Format::Jsonl, (1 << 20) + 1, &limits).unwrap_err();
        assert_eq!(e.limit, Some(Limit::MessageBytes), "{e}");
    }

    #[test]
    fn assignments_set_limits_in_their_units_and_bad_ones_say_why() {
        let mut limits = Limits::default();
        limits
            .apply("history_mb=1, message_mb=2,history_values=3_000,message_values=4,history_messages=5")
            .unwrap();
        assert_eq!(
            limits,
            Limits {
                history_bytes: 1 << 20,
                message_bytes: 2 << 20,
                history_values: 3_000,
                message_values: 4,
                history_messages: 5,
            }
        );
        for limit in Limit::ALL {
            assert!(limits.get(limit) > 0);
        }
        assert!(
            limits
                .apply("history_mb")
                .unwrap_err()
                .contains("NAME=VALUE")
        );
        assert!(
            limits
                .apply("history_mb=0")
                .unwrap_err()
                .contains("greater than 0")
        );
        assert!(
            limits
                .apply("history_mb=lots")
                .unwrap_err()
                .contains("`lots`")
        );
        assert!(limits.apply("history_mb=5,history_mb=0").is_err());
        assert_eq!(
            limits.history_bytes,
            1 << 20,
            "a refused assignment changes nothing"
        );
    }
}
