//! The typed route of the Claude Code reader: a `user` or `assistant` record
//! read straight from its line, without a `serde_json::Value` of the whole
//! record.
//!
//! The generic route parses a record into a `Value` and takes it apart; most
//! of that tree is thrown away (the `message` object but its `content`, its
//! `usage` object) or taken apart again (the record's known fields). This
//! route builds only what the reader keeps: the record's other fields (kept
//! in metadata, as `Value`s), the `message`'s `content` (read by the
//! Anthropic block readers), its `usage` numbers, `id` and `model`.
//!
//! What it does not build it still reads as `Value` does: every number in
//! range, every string's escapes (no lone surrogates), nesting within
//! serde_json's depth, and every value counted into the record's tally, so
//! that the count is the generic route's to the value. It takes only what it
//! reads whole: any other record (another type, a field of a shape it does
//! not read, bad JSON, serde_json's raw-value key, a tally over its maximum)
//! gives `None`, and the caller reads the line through the generic route,
//! which gives the error, if any, as it always has.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use super::super::anthropic::{self, AssistantBlock, AssistantContent, Block};
use super::super::limits::{CountedValue, RAW_VALUE_KEY, Tally};
use super::FORMAT;
use crate::message::{Part, ToolCall, Usage};

/// The two record types this route reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    User,
    Assistant,
}

/// A `user` or `assistant` record, its known fields apart.
pub(super) struct Record {
    pub(super) kind: Kind,
    /// `uuid`: a string, or `null` or absent.
    pub(super) uuid: Option<String>,
    /// `timestamp`: a string (not parsed yet), or `null` or absent.
    pub(super) timestamp: Option<String>,
    /// `message.content`, if the record has a `message` object with one.
    pub(super) content: Option<Content>,
    /// `message.usage`, when the message has one (of any shape).
    pub(super) usage: Option<Usage>,
    /// `message.id`, when it is a string.
    pub(super) message_id: Option<String>,
    /// `message.model`, when it is a string.
    pub(super) model: Option<String>,
    /// The record's other fields, in their order.
    pub(super) extra: Map<String, Value>,
}

/// Reads a record from `line`, counting its values into `tally`, or `None`
/// when this route does not take it (see the module's doc).
pub(super) fn read(line: &str, tally: &Tally) -> Option<Record> {
    let mut de = serde_json::Deserializer::from_str(line);
    let record = RecordSeed(tally).deserialize(&mut de).ok()?;
    de.end().ok()?;
    Some(record)
}

/// `message.content`: read as the generic route reads it, or, in an
/// `assistant` record, already read into blocks.
pub(super) enum Content {
    Value(Value),
    Assistant(AssistantContent),
}

/// Fails the route (the text is never shown).
fn refuse<E: de::Error>(why: &str) -> E {
    E::custom(why)
}

/// A key, borrowed from the line when it has no escapes; serde_json's
/// raw-value key is refused (`Value` reads an object with it as raw JSON).
struct Key<'de>(Cow<'de, str>);

impl<'de> de::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(KeyVisitor)
    }
}

struct KeyVisitor;

impl KeyVisitor {
    fn checked<'de, E: de::Error>(key: Cow<'de, str>) -> Result<Key<'de>, E> {
        if key == RAW_VALUE_KEY {
            return Err(refuse("serde_json's raw-value key"));
        }
        Ok(Key(key))
    }
}

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = Key<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a key")
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
        Self::checked(Cow::Borrowed(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
        Self::checked(Cow::Owned(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Key<'de>, E> {
        Self::checked(Cow::Owned(v))
    }
}

/// A value read and counted as `Value` reads it, and dropped: nothing is
/// built (but a key with escapes).
struct Skip<'a>(&'a Tally);

impl<'de> DeserializeSeed<'de> for Skip<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Skip<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        self.0.one()
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        self.0.one()
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        self.0.one()
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        self.0.one()
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        self.0.one()
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.0.one()
    }
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        self.0.one()
    }
    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.0.one()?;
        while seq.next_element_seed(Skip(self.0))?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.0.one()?;
        while map.next_key::<Key<'de>>()?.is_some() {
            map.next_value_seed(Skip(self.0))?;
        }
        Ok(())
    }
}

/// A value `Value::as_str` or `Value::as_u64` takes.
trait Scalar: Sized {
    fn from_str(_: &str) -> Option<Self> {
        None
    }
    fn from_string(v: String) -> Option<Self> {
        Self::from_str(&v)
    }
    fn from_u64(_: u64) -> Option<Self> {
        None
    }
    fn from_i64(_: i64) -> Option<Self> {
        None
    }
}

impl Scalar for String {
    fn from_str(v: &str) -> Option<String> {
        Some(v.to_owned())
    }
    fn from_string(v: String) -> Option<String> {
        Some(v)
    }
}

impl Scalar for u64 {
    fn from_u64(v: u64) -> Option<u64> {
        Some(v)
    }
    fn from_i64(v: i64) -> Option<u64> {
        // A `Value` holds a non-negative `i64` as a `u64`.
        u64::try_from(v).ok()
    }
}

/// What `Value::as_str` (`As<String>`) or `Value::as_u64` (`As<u64>`)
/// gives of a value, the value read as [`Skip`] reads it.
struct As<'a, T>(&'a Tally, std::marker::PhantomData<T>);

impl<'a, T> As<'a, T> {
    fn new(tally: &'a Tally) -> Self {
        As(tally, std::marker::PhantomData)
    }
}

impl<'de, T: Scalar> DeserializeSeed<'de> for As<'_, T> {
    type Value = Option<T>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de, T: Scalar> Visitor<'de> for As<'_, T> {
    type Value = Option<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        self.0.one().map(|()| T::from_str(v))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        self.0.one().map(|()| T::from_string(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        self.0.one().map(|()| T::from_u64(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        self.0.one().map(|()| T::from_i64(v))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        self.0.one().map(|()| None)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        self.0.one().map(|()| None)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        self.0.one().map(|()| None)
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        self.0.one().map(|()| None)
    }
    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        Skip(self.0).visit_seq(seq).map(|()| None)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        Skip(self.0).visit_map(map).map(|()| None)
    }
}

/// `message.usage` as `usage_from_value` reads it from a `Value`: a field
/// repeated counts with its last value, as in a `Value`'s map; a usage that
/// is no object is all zeros.
struct UsageSeed<'a>(&'a Tally);

impl<'de> DeserializeSeed<'de> for UsageSeed<'_> {
    type Value = Usage;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Usage, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for UsageSeed<'_> {
    type Value = Usage;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Usage, E> {
        self.0.one().map(|()| Usage::default())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Usage, E> {
        self.0.one().map(|()| Usage::default())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Usage, E> {
        self.0.one().map(|()| Usage::default())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Usage, E> {
        self.0.one().map(|()| Usage::default())
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Usage, E> {
        self.0.one().map(|()| Usage::default())
    }
    fn visit_unit<E: de::Error>(self) -> Result<Usage, E> {
        self.0.one().map(|()| Usage::default())
    }
    fn visit_none<E: de::Error>(self) -> Result<Usage, E> {
        self.0.one().map(|()| Usage::default())
    }
    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Usage, D::Error> {
        deserializer.deserialize_any(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Usage, A::Error> {
        Skip(self.0).visit_seq(seq).map(|()| Usage::default())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Usage, A::Error> {
        self.0.one()?;
        let (mut input, mut output, mut cache_read, mut cache_write) = (None, None, None, None);
        while let Some(key) = map.next_key::<Key<'de>>()? {
            let field = match key.0.as_ref() {
                "input_tokens" => &mut input,
                "output_tokens" => &mut output,
                "cache_read_input_tokens" => &mut cache_read,
                "cache_creation_input_tokens" => &mut cache_write,
                _ => {
                    map.next_value_seed(Skip(self.0))?;
                    continue;
                }
            };
            *field = map.next_value_seed(As::<u64>::new(self.0))?;
        }
        Ok(Usage {
            input_tokens: input.unwrap_or(0),
            output_tokens: output.unwrap_or(0),
            cache_read_tokens: cache_read,
            cache_write_tokens: cache_write,
        })
    }
}

/// The `message` object: its `content` (a `Value`), `usage`, `id` and
/// `model`; its other fields are read and dropped. A field repeated counts
/// with its last value, as in a `Value`'s map.
#[derive(Default)]
struct MessageFields {
    content: Option<Content>,
    usage: Option<Usage>,
    id: Option<String>,
    model: Option<String>,
}

/// The record's type when its `message` is read, if it came before.
struct MessageSeed<'a>(&'a Tally, Option<Kind>);

impl<'de> DeserializeSeed<'de> for MessageSeed<'_> {
    type Value = MessageFields;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for MessageSeed<'_> {
    type Value = MessageFields;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a message object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<MessageFields, A::Error> {
        self.0.one()?;
        let mut fields = MessageFields::default();
        // The record's type, or else the message's `role`: a guess that the
        // record's type settles (Claude Code writes `message` before `type`
        // in an assistant record, and `role` before `content`).
        let mut kind = self.1;
        while let Some(key) = map.next_key::<Key<'de>>()? {
            match key.0.as_ref() {
                "role" => {
                    let role = map.next_value_seed(As::<String>::new(self.0))?;
                    if self.1.is_none() && role.as_deref() == Some("assistant") {
                        kind = Some(Kind::Assistant);
                    }
                }
                "content" => {
                    fields.content = Some(match kind {
                        Some(Kind::Assistant) => {
                            Content::Assistant(map.next_value_seed(AssistantContentSeed(self.0))?)
                        }
                        _ => Content::Value(map.next_value_seed(CountedValue(self.0))?),
                    })
                }
                "usage" => fields.usage = Some(map.next_value_seed(UsageSeed(self.0))?),
                "id" => fields.id = map.next_value_seed(As::<String>::new(self.0))?,
                "model" => fields.model = map.next_value_seed(As::<String>::new(self.0))?,
                _ => map.next_value_seed(Skip(self.0))?,
            }
        }
        Ok(fields)
    }
}

/// A string or `null`; anything else fails the route.
struct StringOrNull<'a>(&'a Tally);

impl<'de> DeserializeSeed<'de> for StringOrNull<'_> {
    type Value = Option<String>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_option(self)
    }
}

impl<'de> Visitor<'de> for StringOrNull<'_> {
    type Value = Option<String>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string or null")
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        self.0.one().map(|()| None)
    }
    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        let text: String = de::Deserialize::deserialize(deserializer)?;
        self.0.one()?;
        Ok(Some(text))
    }
}

struct RecordSeed<'a>(&'a Tally);

impl<'de> DeserializeSeed<'de> for RecordSeed<'_> {
    type Value = Record;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Record, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for RecordSeed<'_> {
    type Value = Record;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a record object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Record, A::Error> {
        self.0.one()?;
        let mut kind = None;
        let mut uuid = None;
        let mut timestamp = None;
        let mut message = None;
        // Room for the fields a log's record has around its message.
        let mut extra = Map::with_capacity(16);
        while let Some(key) = map.next_key::<Key<'de>>()? {
            // A field repeated counts with its last value, as in a `Value`'s
            // map (and an other field keeps its first place).
            match key.0.as_ref() {
                "type" => {
                    kind = Some(match map.next_value::<Key<'de>>()?.0.as_ref() {
                        "user" => Kind::User,
                        "assistant" => Kind::Assistant,
                        _ => return Err(refuse("another record type")),
                    });
                    self.0.one()?;
                }
                "uuid" => uuid = map.next_value_seed(StringOrNull(self.0))?,
                "timestamp" => timestamp = map.next_value_seed(StringOrNull(self.0))?,
                "message" => message = Some(map.next_value_seed(MessageSeed(self.0, kind))?),
                _ => {
                    let value = map.next_value_seed(CountedValue(self.0))?;
                    extra.insert(key.0.into_owned(), value);
                }
            }
        }
        let kind = kind.ok_or_else(|| refuse("no `type`"))?;
        let message = message.ok_or_else(|| refuse("no `message`"))?;
        if kind == Kind::User && matches!(message.content, Some(Content::Assistant(_))) {
            // Read as an assistant's (by the message's role, or a first
            // `type`), and then the record's type is `user`.
            return Err(refuse("content read as an assistant's"));
        }
        Ok(Record {
            kind,
            uuid,
            timestamp,
            content: message.content,
            usage: message.usage,
            message_id: message.id,
            model: message.model,
            extra,
        })
    }
}

/// An assistant turn's `content`, read as [`anthropic::read_assistant_content`]
/// reads it from a `Value`: a string, or an array of blocks.
struct AssistantContentSeed<'a>(&'a Tally);

impl<'de> DeserializeSeed<'de> for AssistantContentSeed<'_> {
    type Value = AssistantContent;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for AssistantContentSeed<'_> {
    type Value = AssistantContent;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string or an array of blocks")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        self.0.one()?;
        Ok(AssistantContent::Text(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        self.0.one()?;
        Ok(AssistantContent::Text(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        self.0.one()?;
        let mut blocks = Vec::new();
        while let Some(block) = seq.next_element_seed(AssistantBlockSeed(self.0))? {
            blocks.push(block);
        }
        Ok(AssistantContent::Blocks(blocks))
    }
}

/// One block of an assistant turn. A `text` or `tool_use` block whose
/// `type` comes first (as Claude Code writes them) is read straight, its
/// `input` written as compact JSON as it is read; any other block is read
/// into a `Value` and then as the generic route reads it.
struct AssistantBlockSeed<'a>(&'a Tally);

impl<'de> DeserializeSeed<'de> for AssistantBlockSeed<'_> {
    type Value = AssistantBlock;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for AssistantBlockSeed<'_> {
    type Value = AssistantBlock;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a content block")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        self.0.one()?;
        let mut block = Map::new();
        if let Some(key) = map.next_key::<Key<'de>>()? {
            if key.0 == "type" {
                let kind = map.next_value::<Key<'de>>()?.0;
                self.0.one()?;
                match kind.as_ref() {
                    "text" => return text_block(self.0, map),
                    "tool_use" => return tool_use_block(self.0, map),
                    _ => block.insert("type".into(), Value::String(kind.into_owned())),
                };
            } else {
                let value = map.next_value_seed(CountedValue(self.0))?;
                block.insert(key.0.into_owned(), value);
            }
        }
        while let Some(key) = map.next_key::<Key<'de>>()? {
            let value = map.next_value_seed(CountedValue(self.0))?;
            block.insert(key.0.into_owned(), value);
        }
        anthropic::read_assistant_block(FORMAT, Value::Object(block))
            .map_err(|_| refuse("a bad block"))
    }
}

/// The rest of a `text` block (its `type` read): its `text`, the other
/// fields read and dropped.
fn text_block<'de, A: MapAccess<'de>>(
    tally: &Tally,
    mut map: A,
) -> Result<AssistantBlock, A::Error> {
    let mut text = None;
    while let Some(key) = map.next_key::<Key<'de>>()? {
        match key.0.as_ref() {
            // Another type: the last one is the block's.
            "type" => return Err(refuse("a repeated `type`")),
            "text" => {
                text = Some(map.next_value::<String>()?);
                tally.one()?;
            }
            _ => map.next_value_seed(Skip(tally))?,
        }
    }
    let text = text.ok_or_else(|| refuse("no `text`"))?;
    Ok(AssistantBlock::Other(Block::Part(Part::Text { text })))
}

/// The rest of a `tool_use` block (its `type` read): `id`, `name`, and
/// `input` as compact JSON; the other fields read and dropped.
fn tool_use_block<'de, A: MapAccess<'de>>(
    tally: &Tally,
    mut map: A,
) -> Result<AssistantBlock, A::Error> {
    let (mut id, mut name, mut input) = (None, None, None);
    while let Some(key) = map.next_key::<Key<'de>>()? {
        match key.0.as_ref() {
            "type" => return Err(refuse("a repeated `type`")),
            "id" => {
                id = Some(map.next_value::<String>()?);
                tally.one()?;
            }
            "name" => {
                name = Some(map.next_value::<String>()?);
                tally.one()?;
            }
            "input" => {
                let mut out = Vec::new();
                map.next_value_seed(Compact {
                    tally,
                    out: &mut out,
                })?;
                input = Some(String::from_utf8(out).map_err(|_| refuse("not UTF-8"))?);
            }
            _ => map.next_value_seed(Skip(tally))?,
        }
    }
    Ok(AssistantBlock::ToolUse(ToolCall {
        id: id.ok_or_else(|| refuse("no `id`"))?,
        name: name.ok_or_else(|| refuse("no `name`"))?,
        arguments: input.unwrap_or_else(|| "{}".into()),
    }))
}

/// A value written as compact JSON as it is read: what `Value::to_string`
/// writes of the `Value` read from it. An object with a key repeated (which
/// a `Value` keeps once) fails the route.
struct Compact<'a> {
    tally: &'a Tally,
    out: &'a mut Vec<u8>,
}

impl Compact<'_> {
    /// Writes `value` as serde_json writes it.
    fn write<T: serde::Serialize + ?Sized, E: de::Error>(self, value: &T) -> Result<(), E> {
        self.tally.one()?;
        serde_json::to_writer(self.out, value).map_err(|_| refuse("not written"))
    }
}

impl<'de> DeserializeSeed<'de> for Compact<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Compact<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<(), E> {
        self.write(&v)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<(), E> {
        self.write(&v)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<(), E> {
        self.write(&v)
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<(), E> {
        // As a `Value` holds it: a number, or `null` (which a parsed
        // number never is).
        self.write(&v)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        self.write(v)
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.write(&())
    }
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        self.write(&())
    }
    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.tally.one()?;
        self.out.push(b'[');
        let mut first = true;
        loop {
            let at = self.out.len();
            if !first {
                self.out.push(b',');
            }
            let element = Compact {
                tally: self.tally,
                out: &mut *self.out,
            };
            if seq.next_element_seed(element)?.is_none() {
                self.out.truncate(at);
                break;
            }
            first = false;
        }
        self.out.push(b']');
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.tally.one()?;
        self.out.push(b'{');
        let mut keys: Vec<Cow<'de, str>> = Vec::new();
        let mut seen: std::collections::HashSet<Cow<'de, str>> = std::collections::HashSet::new();
        while let Some(key) = map.next_key::<Key<'de>>()? {
            // Few keys are compared in turn, many looked up.
            let repeated = if keys.len() < 16 {
                keys.contains(&key.0)
            } else {
                if seen.is_empty() {
                    seen.extend(keys.iter().cloned());
                }
                !seen.insert(key.0.clone())
            };
            if repeated {
                return Err(refuse("a repeated key"));
            }
            if !keys.is_empty() {
                self.out.push(b',');
            }
            serde_json::to_writer(&mut *self.out, key.0.as_ref())
                .map_err(|_| refuse("not written"))?;
            self.out.push(b':');
            map.next_value_seed(Compact {
                tally: self.tally,
                out: &mut *self.out,
            })?;
            keys.push(key.0);
        }
        self.out.push(b'}');
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::super::super::json_out::tests::json_value;
    use super::*;

    /// `text` as [`Compact`] writes it, or `None` when it refuses it.
    fn compact(text: &str) -> Option<String> {
        let tally = Tally::new(u64::MAX);
        let mut out = Vec::new();
        let mut de = serde_json::Deserializer::from_str(text);
        Compact {
            tally: &tally,
            out: &mut out,
        }
        .deserialize(&mut de)
        .ok()?;
        de.end().ok()?;
        let counted = crate::format::limits::count_values(text, u64::MAX);
        assert_eq!(
            Ok(tally.count()),
            counted,
            "counted as the count does: {text}"
        );
        Some(String::from_utf8(out).unwrap())
    }

    #[test]
    fn compact_json_is_what_a_value_writes() {
        for text in [
            r#" { "a" : [ 1 , -0 , 2.50 , 1e2 , -1.5E-3 , 18446744073709551615 , -9223372036854775808 , 1e300 ] ,
                "b" : "\u00e9\n\"\\\/\u0001\ud83d\ude00 \u007f" , "c" : { } , "d" : [ ] , "e" : null , "f" : true , "g" : false } "#,
            "7",
            "-0",
            "0.1",
            "123456789012345678901234567890",
            r#""x""#,
            "[[[]],{}]",
            r#"{"\u0061": 1, "b\"": {"c": [null]}}"#,
        ] {
            let value: Value = serde_json::from_str(text).unwrap();
            assert_eq!(compact(text), Some(value.to_string()), "{text}");
        }
        // Many keys (looked up rather than compared), none repeated.
        let many: Vec<String> = (0..40).map(|i| format!("\"k{i}\": {i}")).collect();
        let many = format!("{{{}}}", many.join(","));
        let value: Value = serde_json::from_str(&many).unwrap();
        assert_eq!(compact(&many), Some(value.to_string()));
    }

    /// What a `Value` refuses, and a key repeated (which a `Value` keeps
    /// once, at its first place with its last value), are refused: the
    /// generic route reads those.
    #[test]
    fn compact_json_refuses_what_it_would_write_otherwise() {
        let deep = format!("{}{}", "[".repeat(130), "]".repeat(130));
        let many: Vec<String> = (0..40).map(|i| format!("\"k{i}\": {i}")).collect();
        let repeated_late = format!("{{{}, \"k3\": 0}}", many.join(","));
        for text in [
            r#"{"a": 1, "a": 2}"#,
            r#"{"a": 1, "\u0061": 2}"#,
            &repeated_late,
            "1e400",
            r#""\ud800""#,
            &deep,
            r#"{"$serde_json::private::RawValue": "1"}"#,
            "[1,]",
        ] {
            assert_eq!(compact(text), None, "{text}");
        }
    }

    proptest! {
        #[test]
        fn compact_json_is_what_a_value_writes_of_any_value(value in json_value(), pretty in any::<bool>()) {
            let text = if pretty {
                serde_json::to_string_pretty(&value).unwrap()
            } else {
                value.to_string()
            };
            // Parsed again: a float's text may read as another float.
            let read: Value = serde_json::from_str(&text).unwrap();
            prop_assert_eq!(compact(&text), Some(read.to_string()));
        }
    }
}
