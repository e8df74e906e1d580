//! Reading histories from files, standard input, or the embedded sample.

use std::io::Read;
use std::path::Path;

use agent_host_core::format::{self, Format, FormatError, Transcript};
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
/// detected one.
///
/// A read failure is an I/O error with the path; a parse failure keeps the
/// [`FormatError`] (with its line, message and field) in the error chain, so
/// callers can tell bad input from other failures.
///
/// A history is read up to [`max_history_bytes`]; a larger one, or a path
/// that is not a regular file (a FIFO, `/dev/zero`), is refused with an
/// error naming the limit and [`MAX_HISTORY_ENV`].
pub fn load(path: &Path, format: Option<Format>) -> anyhow::Result<Loaded> {
    let max = max_history_bytes();
    let (source, text) = if path == Path::new("-") {
        let text = read_capped(std::io::stdin(), max, "standard input")
            .context("cannot read the history from standard input")?;
        ("stdin".to_owned(), text)
    } else {
        let shown = path.display().to_string();
        let meta = std::fs::metadata(path)
            .with_context(|| format!("cannot read the history from {shown}"))?;
        if !meta.is_file() {
            anyhow::bail!("cannot read the history from {shown}: it is not a regular file");
        }
        let file = std::fs::File::open(path)
            .with_context(|| format!("cannot read the history from {shown}"))?;
        let text = read_capped(file, max, &shown)
            .with_context(|| format!("cannot read the history from {shown}"))?;
        (shown, text)
    };
    parse(source, &text, format)
}

/// The environment variable that raises (or lowers) the largest history
/// read from a file or standard input, in MiB.
pub const MAX_HISTORY_ENV: &str = "AGENT_HOST_MAX_HISTORY_MB";

/// The largest history read by default: above the longest real agent logs
/// (about 100 MB), bounded because parsing takes several times the file's
/// size in memory.
pub const DEFAULT_MAX_HISTORY_BYTES: u64 = 256 << 20;

/// The largest history [`load`] reads: [`MAX_HISTORY_ENV`] MiB when set to
/// a number, else [`DEFAULT_MAX_HISTORY_BYTES`].
pub fn max_history_bytes() -> u64 {
    std::env::var(MAX_HISTORY_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(DEFAULT_MAX_HISTORY_BYTES, |mb| mb.saturating_mul(1 << 20))
}

/// `reader`'s text, refused past `max` bytes (only `max + 1` are read).
fn read_capped(reader: impl Read, max: u64, what: &str) -> anyhow::Result<String> {
    let mut bytes = Vec::new();
    reader.take(max.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        anyhow::bail!(
            "{what} is larger than the {} MiB a history may take; set {MAX_HISTORY_ENV} to \
             raise the limit",
            max >> 20
        );
    }
    String::from_utf8(bytes).map_err(|e| {
        anyhow::anyhow!(
            "{what} is not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        )
    })
}

/// The embedded sample history.
pub fn sample() -> Loaded {
    parse("embedded sample".to_owned(), SAMPLE, Some(Format::Jsonl))
        .expect("the embedded sample is a valid native log")
}

fn parse(source: String, text: &str, format: Option<Format>) -> anyhow::Result<Loaded> {
    let parsed: Result<(Format, Transcript), FormatError> = match format {
        Some(format) => format::parse(format, text).map(|t| (format, t)),
        None => format::parse_detected(text),
    };
    let (format, transcript) =
        parsed.with_context(|| format!("cannot read the history in {source}"))?;
    Ok(Loaded {
        source,
        format,
        transcript,
    })
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

    #[test]
    fn a_history_past_the_cap_or_not_a_file_is_refused_naming_the_limit() {
        let e = read_capped(&b"0123456789"[..], 4, "x.jsonl").unwrap_err();
        assert!(format!("{e}").contains(MAX_HISTORY_ENV), "{e}");
        assert_eq!(read_capped(&b"0123"[..], 4, "x").unwrap(), "0123");
        if cfg!(unix) {
            // An endless device is refused before a byte is read.
            let e = load(Path::new("/dev/zero"), None).unwrap_err();
            assert!(format!("{e:#}").contains("not a regular file"), "{e:#}");
        }
    }

    #[test]
    fn parse_errors_keep_the_format_error_in_the_chain() {
        let err = parse("x.jsonl".into(), "{\"type\":\"robot\"}", None).unwrap_err();
        assert!(err.downcast_ref::<FormatError>().is_some());
        assert!(format!("{err:#}").contains("cannot read the history in x.jsonl"));
    }
}
