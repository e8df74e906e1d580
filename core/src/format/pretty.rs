//! Indented JSON under a cap on its growth ([`to_pretty`]).

use std::cell::Cell;
use std::io;

use serde::Serialize;
use serde_json::ser::Formatter;

/// `value` as indented JSON, or as compact JSON when indenting would make it
/// more than four times larger (plus 4 KiB).
///
/// Indentation grows with depth, so 8 MB of nested arrays (a processor's
/// metadata, a history's unknown fields) indented one bracket a line came
/// out as a gigabyte. The indented text is written under that cap and given
/// up as soon as it passes it, so the large text is never built.
///
/// ```
/// use agent_host_core::format::to_pretty;
///
/// let flat = serde_json::json!({"a": [1, 2]});
/// assert_eq!(to_pretty(&flat).unwrap(), "{\n  \"a\": [\n    1,\n    2\n  ]\n}");
/// let deep = serde_json::from_str::<serde_json::Value>(&format!("{}{}", "[".repeat(100), "]".repeat(100))).unwrap();
/// assert_eq!(to_pretty(&deep).unwrap().len(), 200);
/// ```
pub fn to_pretty<T: serde::Serialize + ?Sized>(value: &T) -> serde_json::Result<String> {
    /// Keeps what is written to it, failing past `cap` bytes.
    struct Capped {
        out: Vec<u8>,
        cap: usize,
    }
    impl std::io::Write for Capped {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            if self.out.len() + bytes.len() > self.cap {
                return Err(std::io::Error::other("over the cap"));
            }
            self.out.extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    /// Counts what is written to it, keeping nothing.
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    if let Some(bytes) = within_cap_in_one_pass(value) {
        return Ok(String::from_utf8(bytes).expect("serde_json writes UTF-8"));
    }
    // Over the cap somewhere on the way (or not serializable): measured
    // exactly. The compact text's length sets the cap; it is measured, not
    // kept, and written only when the indented text is given up.
    let mut compact = Count(0);
    serde_json::to_writer(&mut compact, value)?;
    let compact = compact.0;
    let mut capped = Capped {
        out: Vec::with_capacity(compact + compact / 2),
        cap: compact.saturating_mul(4).saturating_add(4096),
    };
    let bytes = match serde_json::to_writer_pretty(&mut capped, value) {
        Ok(()) => capped.out,
        Err(_) => serde_json::to_vec(value)?,
    };
    Ok(String::from_utf8(bytes).expect("serde_json writes UTF-8"))
}

/// The indented text of `value` written in one pass, while it is within the
/// cap [`to_pretty`] sets: `None` as soon as the text so far is more than four
/// times its compact length plus 4 KiB (or `value` fails to serialize).
///
/// Only indentation grows the text faster than its compact length, so the
/// text so far is checked at every write against its compact length so far
/// (its length less the indentation written). A text that passes every check
/// passes the last one, on the whole text: the cap `to_pretty` applies. One
/// that fails a check midway may still end under the cap, and is measured
/// again by the caller.
fn within_cap_in_one_pass<T: Serialize + ?Sized>(value: &T) -> Option<Vec<u8>> {
    let added = Cell::new(0);
    let mut text = Vec::new();
    let mut out = Measured {
        out: &mut text,
        added: &added,
    };
    let indenting = Indenting {
        level: 0,
        has_value: false,
        added: &added,
    };
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, indenting);
    value.serialize(&mut serializer).ok()?;
    Some(text)
}

/// Appends what is written to it to `out` while the text stays within four
/// times its compact length plus 4 KiB; `added` is how much of it is
/// indentation.
pub(super) struct Measured<'a> {
    pub(super) out: &'a mut Vec<u8>,
    pub(super) added: &'a Cell<usize>,
}

impl io::Write for Measured<'_> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        if !within_cap(self.out.len() + bytes.len(), self.added.get()) {
            return Err(io::Error::other("over the cap"));
        }
        self.out.extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Whether an indented text `len` bytes long, `added` of them indentation,
/// is within four times its compact length plus 4 KiB.
pub(super) fn within_cap(len: usize, added: usize) -> bool {
    let compact = len - added;
    len <= compact.saturating_mul(4).saturating_add(4096)
}

/// serde_json's `PrettyFormatter` (two spaces a level), byte for byte, that
/// adds to `added` the bytes it writes beyond the compact text (line
/// breaks, indentation, the space after a colon) before writing them.
pub(super) struct Indenting<'a> {
    /// The depth written at.
    pub(super) level: usize,
    /// Whether the innermost array or object has a value yet.
    pub(super) has_value: bool,
    /// The bytes written beyond the compact text so far.
    pub(super) added: &'a Cell<usize>,
}

/// Spaces to indent with, written a slice at a time.
const SPACES: &[u8; 64] = &[b' '; 64];

impl Indenting<'_> {
    /// A line break and the current level's indentation, `prefix` (a comma)
    /// before them.
    fn new_line<W: ?Sized + io::Write>(&self, writer: &mut W, prefix: &[u8]) -> io::Result<()> {
        let mut spaces = 2 * self.level;
        self.added.set(self.added.get() + 1 + spaces);
        let mut line = [0u8; 2 + SPACES.len()];
        line[..prefix.len()].copy_from_slice(prefix);
        line[prefix.len()] = b'\n';
        let head = prefix.len() + 1;
        let first = spaces.min(SPACES.len());
        line[head..head + first].copy_from_slice(&SPACES[..first]);
        writer.write_all(&line[..head + first])?;
        spaces -= first;
        while spaces > 0 {
            let n = spaces.min(SPACES.len());
            writer.write_all(&SPACES[..n])?;
            spaces -= n;
        }
        Ok(())
    }
}

impl Formatter for Indenting<'_> {
    fn begin_array<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.level += 1;
        self.has_value = false;
        writer.write_all(b"[")
    }

    fn end_array<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.level -= 1;
        if self.has_value {
            self.new_line(writer, b"")?;
        }
        writer.write_all(b"]")
    }

    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.new_line(writer, if first { b"" } else { b"," })
    }

    fn end_array_value<W: ?Sized + io::Write>(&mut self, _writer: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }

    fn begin_object<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.level += 1;
        self.has_value = false;
        writer.write_all(b"{")
    }

    fn end_object<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.level -= 1;
        if self.has_value {
            self.new_line(writer, b"")?;
        }
        writer.write_all(b"}")
    }

    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.new_line(writer, if first { b"" } else { b"," })
    }

    fn begin_object_value<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.added.set(self.added.get() + 1);
        writer.write_all(b": ")
    }

    fn end_object_value<W: ?Sized + io::Write>(&mut self, _writer: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    /// The one-pass writer is serde_json's pretty printer byte for byte,
    /// at every depth (past the 64 spaces it writes at a time too).
    #[test]
    fn one_pass_text_is_serde_jsons_pretty_text() {
        let mut deep = json!({"leaf": [1, "two", null, {}, []]});
        for depth in 0..40 {
            deep = json!({"k": deep, "list": [depth, {"a": "b\"c".repeat(60)}], "empty": {}});
            let expected = serde_json::to_string_pretty(&deep).unwrap();
            assert_eq!(to_pretty(&deep).unwrap(), expected, "depth {depth}");
            let one_pass = within_cap_in_one_pass(&deep).expect("within the cap");
            assert_eq!(String::from_utf8(one_pass).unwrap(), expected);
        }
    }

    /// Indentation past the cap: the compact text, as before the one-pass
    /// writer.
    #[test]
    fn past_the_cap_the_text_is_compact() {
        let text = format!("{}{}", "[".repeat(120), "]".repeat(120));
        let deep: Value = serde_json::from_str(&text).unwrap();
        assert!(within_cap_in_one_pass(&deep).is_none());
        assert_eq!(to_pretty(&deep).unwrap(), text);
        // Deep, then long and flat: over the cap midway, under it at the
        // end, so indented after all.
        let mut nested = json!("x".repeat(200_000));
        for _ in 0..100 {
            nested = json!([nested]);
        }
        assert!(within_cap_in_one_pass(&nested).is_none());
        let expected = serde_json::to_string_pretty(&nested).unwrap();
        assert_eq!(to_pretty(&nested).unwrap(), expected);
    }
}
