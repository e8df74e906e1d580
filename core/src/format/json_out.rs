//! JSON text written straight, byte for byte as serde_json writes it
//! (compact, or indented as [`to_pretty`](super::to_pretty) indents it), for
//! the writers that lay out a known shape ([`JsonOut`]).
//!
//! serde_json escapes a string a byte at a time through its `Formatter`;
//! writing the view of a history was mostly that (issue 23). Here a string is
//! scanned eight bytes at a time for what needs escaping, and the runs
//! between are copied whole. The escapes are serde_json's: `\"`, `\\`, `\b`,
//! `\f`, `\n`, `\r`, `\t`, and `\u00xx` (lower-case hex) for the other
//! control characters; nothing else is escaped.

use std::cell::Cell;

use serde_json::Value;

use super::pretty::{Indenting, Measured, within_cap};

/// The text over the indenting cap of [`to_pretty`](super::to_pretty) so
/// far: the caller writes it again the exact way.
#[derive(Debug)]
pub(crate) struct OverCap;

/// A JSON text being written, compact or indented two spaces a level (as
/// serde_json's `PrettyFormatter`).
pub(crate) struct JsonOut {
    out: Vec<u8>,
    indent: bool,
    level: usize,
    /// The bytes written beyond the compact text (line breaks, indentation,
    /// the space after a colon).
    added: usize,
    /// For each open array or object, whether it is still empty.
    empty: Vec<bool>,
}

impl JsonOut {
    /// An empty text, indented or compact, with room for `capacity` bytes.
    pub(crate) fn new(indent: bool, capacity: usize) -> Self {
        JsonOut {
            out: Vec::with_capacity(capacity),
            indent,
            level: 0,
            added: 0,
            empty: Vec::new(),
        }
    }

    /// The text.
    pub(crate) fn into_string(self) -> String {
        String::from_utf8(self.out).expect("only UTF-8 is written")
    }

    /// Fails once the indented text so far is more than four times its
    /// compact length plus 4 KiB (the cap of [`to_pretty`](super::to_pretty)).
    pub(crate) fn check(&self) -> Result<(), OverCap> {
        if within_cap(self.out.len(), self.added) {
            Ok(())
        } else {
            Err(OverCap)
        }
    }

    /// Opens an object.
    pub(crate) fn begin_object(&mut self) {
        self.begin(b'{');
    }

    /// Closes the innermost object.
    pub(crate) fn end_object(&mut self) {
        self.end(b'}');
    }

    /// Opens an array.
    pub(crate) fn begin_array(&mut self) {
        self.begin(b'[');
    }

    /// Closes the innermost array.
    pub(crate) fn end_array(&mut self) {
        self.end(b']');
    }

    /// Starts the next element of the innermost array.
    pub(crate) fn element(&mut self) {
        let empty = self.empty.last_mut().expect("inside an array");
        if !std::mem::replace(empty, false) {
            self.out.push(b',');
        }
        self.new_line();
    }

    /// Writes the key of the next field of the innermost object.
    pub(crate) fn key(&mut self, key: &str) {
        self.element();
        self.string(key);
        if self.indent {
            self.out.extend_from_slice(b": ");
            self.added += 1;
        } else {
            self.out.push(b':');
        }
    }

    /// A field whose value is a string.
    pub(crate) fn field(&mut self, key: &str, value: &str) {
        self.key(key);
        self.string(value);
    }

    /// Writes `null`.
    pub(crate) fn null(&mut self) {
        self.out.extend_from_slice(b"null");
    }

    /// Writes a string, escaped as serde_json escapes it.
    pub(crate) fn string(&mut self, text: &str) {
        self.out.push(b'"');
        escape_into(&mut self.out, text.as_bytes());
        self.out.push(b'"');
    }

    /// Writes a `Value` as serde_json writes it at this depth; indented, it
    /// fails as soon as the text so far is over the cap.
    pub(crate) fn value(&mut self, value: &Value) -> Result<(), OverCap> {
        if !self.indent {
            return serde_json::to_writer(&mut self.out, value).map_err(|_| OverCap);
        }
        let added = Cell::new(self.added);
        let mut writer = Measured {
            out: &mut self.out,
            added: &added,
        };
        let indenting = Indenting {
            level: self.level,
            has_value: false,
            added: &added,
        };
        let mut serializer = serde_json::Serializer::with_formatter(&mut writer, indenting);
        let written = serde::Serialize::serialize(value, &mut serializer);
        self.added = added.get();
        written.map_err(|_| OverCap)
    }

    /// Writes a `Value` as serde_json writes it at this depth, its strings
    /// escaped here; indented, it fails once the text so far is over the cap
    /// (checked after each element and field).
    pub(crate) fn tree(&mut self, value: &Value) -> Result<(), OverCap> {
        match value {
            Value::String(text) => self.string(text),
            Value::Array(items) => {
                self.begin_array();
                for item in items {
                    self.element();
                    self.tree(item)?;
                    self.check()?;
                }
                self.end_array();
            }
            Value::Object(fields) => {
                self.begin_object();
                for (key, item) in fields {
                    self.key(key);
                    self.tree(item)?;
                    self.check()?;
                }
                self.end_object();
            }
            scalar => self.value(scalar)?,
        }
        Ok(())
    }

    fn begin(&mut self, open: u8) {
        self.out.push(open);
        self.level += 1;
        self.empty.push(true);
    }

    fn end(&mut self, close: u8) {
        self.level -= 1;
        if !self.empty.pop().expect("a container is open") {
            self.new_line();
        }
        self.out.push(close);
    }

    /// A line break and the current level's indentation, when indenting.
    fn new_line(&mut self) {
        if self.indent {
            let spaces = 2 * self.level;
            self.out.push(b'\n');
            self.out.resize(self.out.len() + spaces, b' ');
            self.added += 1 + spaces;
        }
    }
}

/// What each byte is escaped as: 0 for nothing, `u` for `\u00xx`, else the
/// letter after the backslash.
const ESCAPE: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut b = 0;
    while b < 0x20 {
        table[b] = b'u';
        b += 1;
    }
    table[0x08] = b'b';
    table[0x09] = b't';
    table[0x0A] = b'n';
    table[0x0C] = b'f';
    table[0x0D] = b'r';
    table[b'"' as usize] = b'"';
    table[b'\\' as usize] = b'\\';
    table
};

/// A mask of the bytes of `word` (read little-endian) that need escaping:
/// control characters, `"` and `\`. Its lowest set bit is exact: it is the
/// high bit of the first such byte (the classic tests for "a zero byte" and
/// "a byte under n" only mark bytes wrongly above a true one).
fn escape_mask(word: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let has_zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGHS;
    let quote = word ^ (ONES * u64::from(b'"'));
    let backslash = word ^ (ONES * u64::from(b'\\'));
    let control = word.wrapping_sub(ONES * 0x20) & !word & HIGHS;
    has_zero(quote) | has_zero(backslash) | control
}

/// Appends `bytes` escaped as a JSON string's contents.
fn escape_into(out: &mut Vec<u8>, bytes: &[u8]) {
    out.reserve(bytes.len() + bytes.len() / 8);
    let mut i = 0;
    // Eight bytes at a time: a word with nothing to escape is copied whole;
    // else its bytes before the first to escape, then that one escaped.
    while let Some(word) = bytes.get(i..i + 8) {
        let word: [u8; 8] = word.try_into().expect("eight bytes");
        let value = u64::from_le_bytes(word);
        let mask = escape_mask(value);
        if mask == 0 {
            out.extend_from_slice(&word);
            i += 8;
            continue;
        }
        let clean = mask.trailing_zeros() / 8;
        out.extend_from_slice(&word);
        out.truncate(out.len() - 8 + clean as usize);
        // The byte taken from the register, not from the word stored a
        // moment ago (a load that waited on that store).
        escape_byte(out, (value >> (clean * 8)) as u8);
        i += clean as usize + 1;
    }
    for &byte in &bytes[i..] {
        if ESCAPE[usize::from(byte)] == 0 {
            out.push(byte);
        } else {
            escape_byte(out, byte);
        }
    }
}

/// Appends the escape of a byte that needs one.
fn escape_byte(out: &mut Vec<u8>, byte: u8) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    match ESCAPE[usize::from(byte)] {
        b'u' => out.extend_from_slice(&[
            b'\\',
            b'u',
            b'0',
            b'0',
            HEX[usize::from(byte >> 4)],
            HEX[usize::from(byte & 0xF)],
        ]),
        letter => out.extend_from_slice(&[b'\\', letter]),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    fn written(text: &str) -> String {
        let mut out = JsonOut::new(false, 0);
        out.string(text);
        out.into_string()
    }

    #[test]
    fn every_character_is_escaped_as_serde_json_escapes_it() {
        for c in (0u32..0x800)
            .filter_map(char::from_u32)
            .chain(['\u{2028}', '€', '😀'])
        {
            let at = "x".repeat(c as usize % 17);
            for text in [
                format!("{c}"),
                format!("abcdefgh{c}ijklmnop{c}{c}q"),
                format!("{at}{c}yyyyyyyyy{c}"),
            ] {
                assert_eq!(
                    written(&text),
                    serde_json::to_string(&text).unwrap(),
                    "{c:?}"
                );
            }
        }
    }

    /// Any JSON value: every kind of number, strings with what needs
    /// escaping, nesting, repeated keys.
    pub(crate) fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            "(a|\"|\\\\|\n|\u{1}|é|😀|bcdefghij){0,12}".prop_map(Value::String),
        ];
        leaf.prop_recursive(5, 48, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                proptest::collection::vec(("[a-z\"]{0,3}", inner), 0..6)
                    .prop_map(|fields| Value::Object(fields.into_iter().collect())),
            ]
        })
    }

    /// A tree deep enough to put the indented text over the cap gives up (the
    /// caller writes it through `to_pretty`); compact, it is written.
    #[test]
    fn trees_over_the_cap_give_up() {
        let deep: Value =
            serde_json::from_str(&format!("{}{}", "[".repeat(120), "]".repeat(120))).unwrap();
        assert!(JsonOut::new(true, 0).tree(&deep).is_err());
        let mut compact = JsonOut::new(false, 0);
        compact.tree(&deep).unwrap();
        assert_eq!(compact.into_string(), deep.to_string());
    }

    proptest! {
        #[test]
        fn trees_are_written_as_serde_json_writes_them(value in json_value(), indent in any::<bool>()) {
            let mut out = JsonOut::new(indent, 0);
            out.tree(&value).unwrap();
            let expected = if indent {
                crate::format::to_pretty(&value).unwrap()
            } else {
                serde_json::to_string(&value).unwrap()
            };
            prop_assert_eq!(out.into_string(), expected);
        }

        #[test]
        fn strings_are_written_as_serde_json_writes_them(
            text in "(a|bcdefghij|\"|\\\\|\n|\t|\u{1}|\u{1f}|\u{7f}|é|€|😀| ){0,40}",
        ) {
            prop_assert_eq!(written(&text), serde_json::to_string(&text).unwrap());
        }

        #[test]
        fn values_are_written_as_serde_json_writes_them(
            values in proptest::collection::vec(
                prop_oneof![
                    Just(serde_json::json!(null)),
                    Just(serde_json::json!({"a": [1, 2.5, {"b": []}], "c": {}})),
                    "[a-z\"\n]{0,5}".prop_map(Value::String),
                ],
                0..4,
            ),
            indent in any::<bool>(),
        ) {
            let mut out = JsonOut::new(indent, 0);
            out.begin_array();
            out.element();
            out.begin_object();
            for (i, value) in values.iter().enumerate() {
                out.key(&format!("k{i}"));
                out.value(value).unwrap();
            }
            out.end_object();
            out.element();
            out.null();
            out.end_array();
            let document = serde_json::json!([
                values.iter().enumerate().map(|(i, v)| (format!("k{i}"), v.clone()))
                    .collect::<serde_json::Map<_, _>>(),
                null,
            ]);
            let expected = if indent {
                serde_json::to_string_pretty(&document).unwrap()
            } else {
                serde_json::to_string(&document).unwrap()
            };
            prop_assert_eq!(out.into_string(), expected);
        }
    }
}
