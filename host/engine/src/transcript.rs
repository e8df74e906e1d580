//! Reading histories from files, standard input, or the embedded sample.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use agent_host_core::format::{self, Format, Limit, Limits, LineReader, Transcript};
use anyhow::Context;

/// A short coding-agent session in the native JSONL format, built into the
/// binary so that the main command works with no input at all.
pub const SAMPLE: &str = include_str!("sample.jsonl");

/// A history read from somewhere, with the format it was read as.
#[derive(Debug)]
pub struct Loaded {
    /// Where it came from, for messages (`stdin`, a path, or `embedded sample`).
    pub source: String,
    /// The format it was read as (given or detected).
    pub format: Format,
    /// What it holds.
    pub transcript: Transcript,
}

/// Reads a history from `path` (`-` for standard input), in `format` or a
/// detected one, within `limits`.
///
/// A read failure is an I/O error with the path; a parse failure keeps the
/// [`FormatError`](agent_host_core::format::FormatError) (with its line, message and field, and the limit when it
/// is one) in the error chain, so callers can tell bad input from other
/// failures.
///
/// Line-based histories (native JSONL, Claude Code) are read a line at a
/// time: no more than one line of text is held, a line is read no further
/// than the per-message limit, and each is counted (bytes, JSON values)
/// before it is parsed. A JSON document is read whole, up to the history's
/// byte limit, and its values counted before it is parsed. A path that is
/// not a regular file (a FIFO, `/dev/zero`) is refused before a byte is read.
pub fn load(path: &Path, format: Option<Format>, limits: &Limits) -> anyhow::Result<Loaded> {
    if path == Path::new("-") {
        return read(std::io::stdin().lock(), "stdin".to_owned(), format, limits);
    }
    let shown = path.display().to_string();
    let meta =
        std::fs::metadata(path).with_context(|| format!("cannot read the history from {shown}"))?;
    if !meta.is_file() {
        anyhow::bail!("cannot read the history from {shown}: it is not a regular file");
    }
    let file = std::fs::File::open(path)
        .with_context(|| format!("cannot read the history from {shown}"))?;
    read(BufReader::new(file), shown, format, limits)
}

/// Reads a history from `reader`, named `source` in errors.
pub fn read(
    mut reader: impl BufRead,
    source: String,
    format: Option<Format>,
    limits: &Limits,
) -> anyhow::Result<Loaded> {
    let bad = |source: &str| format!("cannot read the history in {source}");
    let io = |source: &str| format!("cannot read the history from {source}");
    // The first non-empty line tells a log from a document; unless the
    // format is a log's, it is read up to the history's limit, as it may be
    // a whole minified document.
    let given = format;
    let (first_max, first_limit) = match given {
        Some(format) if format.is_line_based() => (limits.message_bytes, Limit::MessageBytes),
        _ => (limits.history_bytes, Limit::HistoryBytes),
    };
    let mut line = Vec::new();
    let mut line_no = 0;
    let mut skipped = 0u64;
    let found = loop {
        line_no += 1;
        match next_line(&mut reader, first_max, &mut line).with_context(|| io(&source))? {
            Line::End => break false,
            Line::TooLong => {
                let e = limits.exceeded(given.unwrap_or(Format::Jsonl), first_limit);
                return Err(anyhow::Error::new(e.at_line(line_no))).with_context(|| bad(&source));
            }
            Line::Text(read) if line.iter().all(u8::is_ascii_whitespace) => {
                skipped += read;
                if skipped > limits.history_bytes {
                    let e = limits.exceeded(given.unwrap_or(Format::Jsonl), Limit::HistoryBytes);
                    return Err(anyhow::Error::new(e)).with_context(|| bad(&source));
                }
            }
            Line::Text(_) => break true,
        }
    };
    let format = match given {
        Some(format) => format,
        None if found => {
            let first = text_of(&line, line_no).with_context(|| bad(&source))?;
            Format::of_line(first).unwrap_or(Format::OpenAi)
        }
        None => Format::Jsonl,
    };
    if !format.is_line_based() {
        // A document: what was read, and the rest up to the history's limit.
        let mut bytes = std::mem::take(&mut line);
        let room = limits
            .history_bytes
            .saturating_sub(bytes.len() as u64 + skipped);
        (&mut reader)
            .take(room.saturating_add(1))
            .read_to_end(&mut bytes)
            .with_context(|| io(&source))?;
        if bytes.len() as u64 + skipped > limits.history_bytes {
            let e = limits.exceeded(format, Limit::HistoryBytes);
            return Err(anyhow::Error::new(e)).with_context(|| bad(&source));
        }
        let text = text_of(&bytes, line_no).with_context(|| bad(&source))?;
        let parsed = match given {
            Some(format) => format::parse_within(format, text, limits).map(|t| (format, t)),
            None => format::parse_detected_within(text, limits),
        };
        let (format, transcript) = parsed.with_context(|| bad(&source))?;
        return Ok(Loaded {
            source,
            format,
            transcript,
        });
    }
    let mut lines = LineReader::new(format, *limits);
    let result = (|| -> anyhow::Result<()> {
        // The blank lines before the first one count towards the history.
        lines.count(skipped)?;
        if !found {
            return Ok(());
        }
        lines.push(text_of(&line, line_no)?, line_no)?;
        loop {
            line_no += 1;
            match next_line(&mut reader, limits.message_bytes, &mut line)
                .with_context(|| io(&source))?
            {
                Line::End => return Ok(()),
                Line::TooLong => {
                    let e = limits
                        .exceeded(format, Limit::MessageBytes)
                        .at_line(line_no);
                    return Err(e.into());
                }
                Line::Text(_) => lines.push(text_of(&line, line_no)?, line_no)?,
            }
        }
    })();
    result.with_context(|| bad(&source))?;
    let transcript = lines.finish().with_context(|| bad(&source))?;
    Ok(Loaded {
        source,
        format,
        transcript,
    })
}

/// What [`next_line`] found.
enum Line {
    /// The end of the input.
    End,
    /// A line of this many bytes (its break included) is in the buffer,
    /// without its break.
    Text(u64),
    /// The line is longer than the maximum; the rest of it was not read.
    TooLong,
}

/// Reads one line into `buf`, no further than `max` bytes (not counting a
/// `\n` or `\r\n` break).
fn next_line(reader: &mut impl BufRead, max: u64, buf: &mut Vec<u8>) -> std::io::Result<Line> {
    buf.clear();
    let read = reader.take(max.saturating_add(2)).read_until(b'\n', buf)? as u64;
    if read == 0 {
        return Ok(Line::End);
    }
    if buf.last() == Some(&b'\n') {
        buf.pop();
        if buf.last() == Some(&b'\r') {
            buf.pop();
        }
    }
    if buf.len() as u64 > max {
        return Ok(Line::TooLong);
    }
    Ok(Line::Text(read))
}

/// A line's bytes as text, or an error naming the line and the column.
fn text_of(bytes: &[u8], line_no: usize) -> anyhow::Result<&str> {
    std::str::from_utf8(bytes).map_err(|e| {
        anyhow::anyhow!(
            "line {line_no} is not UTF-8 text (invalid byte at column {})",
            e.valid_up_to() + 1
        )
    })
}

/// The embedded sample history.
pub fn sample() -> Loaded {
    read(
        SAMPLE.as_bytes(),
        "embedded sample".to_owned(),
        Some(Format::Jsonl),
        &Limits::default(),
    )
    .expect("the embedded sample is a valid native log")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sample_is_a_complete_tool_using_session() {
        let loaded = sample();
        let pairing = agent_host_core::pairing::ToolPairing::of(&loaded.transcript.messages);
        assert!(pairing.calls >= 4);
        assert!(pairing.is_complete(), "{pairing:?}");
    }

    /// A reader that repeats `pattern` forever.
    struct Endless {
        pattern: &'static [u8],
        at: usize,
        read: std::rc::Rc<std::cell::Cell<u64>>,
    }

    impl Endless {
        fn new(pattern: &'static [u8]) -> (BufReader<Self>, std::rc::Rc<std::cell::Cell<u64>>) {
            let read = std::rc::Rc::default();
            let reader = Endless {
                pattern,
                at: 0,
                read: std::rc::Rc::clone(&read),
            };
            (BufReader::new(reader), read)
        }
    }

    impl Read for Endless {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            for byte in buf.iter_mut() {
                *byte = self.pattern[self.at % self.pattern.len()];
                self.at += 1;
            }
            self.read.set(self.read.get() + buf.len() as u64);
            Ok(buf.len())
        }
    }

    fn small() -> Limits {
        Limits {
            history_bytes: 1 << 20,
            message_bytes: 4 << 10,
            history_values: 10_000,
            message_values: 100,
            history_messages: 5_000,
        }
    }

    fn limit_of(e: &anyhow::Error) -> Option<Limit> {
        e.downcast_ref::<format::FormatError>()
            .and_then(|f| f.limit)
    }

    #[test]
    fn endless_input_of_every_shape_stops_at_a_named_limit() {
        let long: &'static [u8] = Box::leak(
            format!(
                "{{\"type\":\"user\",\"content\":\"{}\"}}\n",
                "a".repeat(400)
            )
            .into_bytes()
            .into_boxed_slice(),
        );
        let cases: [(&[u8], Option<Format>, Limit); 6] = [
            // One endless line: read no further than the limit.
            (b"a", None, Limit::HistoryBytes),
            (b"a", Some(Format::Jsonl), Limit::MessageBytes),
            (b"\n", None, Limit::HistoryBytes),
            (
                b"{\"type\":\"user\",\"content\":\"a\"}\n",
                None,
                Limit::HistoryValues,
            ),
            (long, None, Limit::HistoryBytes),
            (
                b"[{\"role\":\"user\",\"content\":\"a\"},",
                None,
                Limit::HistoryBytes,
            ),
        ];
        for (pattern, format, expected) in cases {
            let (reader, read) = Endless::new(pattern);
            let e = super::read(reader, "endless".into(), format, &small()).unwrap_err();
            let shown = String::from_utf8_lossy(pattern);
            assert_eq!(limit_of(&e), Some(expected), "{shown}: {e:#}");
            assert!(format!("{e:#}").contains(expected.name()), "{e:#}");
            // BufReader reads ahead by at most its buffer.
            assert!(
                read.get() <= (1 << 20) + 16 * 1024,
                "{shown}: read {}",
                read.get()
            );
        }
        // Many small messages stop at the message count.
        let mut limits = small();
        limits.history_values = u64::MAX;
        let (reader, _) = Endless::new(b"{\"type\":\"user\",\"content\":\"a\"}\n");
        let e = super::read(reader, "endless".into(), None, &limits).unwrap_err();
        assert_eq!(limit_of(&e), Some(Limit::HistoryMessages), "{e:#}");
    }

    #[test]
    fn a_message_or_a_history_over_its_value_limit_is_refused_before_it_is_built() {
        let zeros = vec!["0"; 200].join(",");
        let line = format!("{{\"type\":\"user\",\"content\":\"hi\",\"x\":[{zeros}]}}\n");
        let e = super::read(line.as_bytes(), "x".into(), None, &small()).unwrap_err();
        assert_eq!(limit_of(&e), Some(Limit::MessageValues), "{e:#}");
        assert!(format!("{e:#}").contains("line 1"), "{e:#}");
        let document = format!("[{{\"role\":\"user\",\"content\":\"hi\",\"x\":[{zeros}]}}]");
        let mut limits = small();
        limits.history_values = 150;
        let e = super::read(document.as_bytes(), "x".into(), None, &limits).unwrap_err();
        assert_eq!(limit_of(&e), Some(Limit::HistoryValues), "{e:#}");
        // Raised limits let the same input through.
        limits.history_values = 1_000;
        limits.message_values = 1_000;
        let loaded = super::read(line.as_bytes(), "x".into(), None, &limits).unwrap();
        assert_eq!(loaded.transcript.messages.len(), 1);
    }

    #[test]
    fn a_document_message_larger_than_a_message_may_be_is_refused_naming_it() {
        let big = "a".repeat(5 << 10);
        let document = format!(
            "[{{\"role\":\"user\",\"content\":\"hi\"}},{{\"role\":\"user\",\"content\":\"{big}\"}}]"
        );
        let e = super::read(document.as_bytes(), "x".into(), None, &small()).unwrap_err();
        assert_eq!(limit_of(&e), Some(Limit::MessageBytes), "{e:#}");
        assert!(format!("{e:#}").contains("message 1"), "{e:#}");
    }

    #[test]
    fn every_format_is_read_and_detected_from_a_stream() {
        let cases: [(&str, Format, usize); 4] = [
            (
                "\n\r\n{\"type\":\"user\",\"content\":\"a\"}\r\n\n{\"type\":\"assistant\",\"content\":\"b\"}",
                Format::Jsonl,
                2,
            ),
            (
                "{\"type\":\"user\",\"uuid\":\"u\",\"sessionId\":\"s\",\"message\":{\"role\":\"user\",\"content\":\"hi\"}}\n",
                Format::ClaudeCode,
                1,
            ),
            (
                "\n[\n {\"role\": \"system\", \"content\": \"x\"},\n {\"role\": \"user\", \"content\": \"y\"}\n]\n",
                Format::OpenAi,
                2,
            ),
            (
                "{\"system\": \"x\",\n \"messages\": [{\"role\": \"user\", \"content\": \"y\"}]}",
                Format::Anthropic,
                2,
            ),
        ];
        for (text, format, count) in cases {
            let loaded = super::read(text.as_bytes(), "x".into(), None, &small()).unwrap();
            assert_eq!(loaded.format, format, "{text}");
            assert_eq!(loaded.transcript.messages.len(), count, "{text}");
            let given = super::read(text.as_bytes(), "x".into(), Some(format), &small()).unwrap();
            assert_eq!(given.transcript, loaded.transcript);
        }
        let empty = super::read(&b"\n\n"[..], "x".into(), None, &small()).unwrap();
        assert!(empty.transcript.messages.is_empty());
    }

    #[test]
    fn a_line_that_is_not_utf8_is_named() {
        let text =
            b"{\"type\":\"user\",\"content\":\"a\"}\n{\"type\":\"user\",\"content\":\"\xff\"}\n";
        let e = super::read(&text[..], "x.jsonl".into(), None, &small()).unwrap_err();
        assert!(format!("{e:#}").contains("line 2 is not UTF-8"), "{e:#}");
    }

    #[test]
    fn a_path_that_is_not_a_regular_file_is_refused() {
        if cfg!(unix) {
            // An endless device is refused before a byte is read.
            let e = load(Path::new("/dev/zero"), None, &Limits::default()).unwrap_err();
            assert!(format!("{e:#}").contains("not a regular file"), "{e:#}");
        }
    }

    #[test]
    fn parse_errors_keep_the_format_error_in_the_chain() {
        let err = super::read(
            &b"{\"type\":\"robot\"}"[..],
            "x.jsonl".into(),
            None,
            &small(),
        )
        .unwrap_err();
        assert!(err.downcast_ref::<format::FormatError>().is_some());
        assert!(format!("{err:#}").contains("cannot read the history in x.jsonl"));
    }
}
