//! The file store's tail read: a log's leading system messages from its
//! start, its newest lines from its end in blocks, and nothing between.
//!
//! Lines are read as [`records::scan`] reads them (a malformed line skipped,
//! glued records split, NUL bytes before a record set aside), so the
//! messages and findings of the lines read are the ones a whole scan has.
//! Two things of a line depend on its number, which a line read from the end
//! does not know: the line of a finding, and the id of a message written
//! without one (core derives it from the line). Those lines are parsed with
//! a placeholder number first; should any need its number, the newlines of
//! the part not read are counted (no parsing) and the placeholder replaced.
//!
//! The caller holds the log's shared lock and has checked that it ends in a
//! newline (a torn tail is for the load's repair).

use std::cmp::Reverse;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};

use agent_host_core::Message;
use agent_host_core::message::derived_id;

use crate::records::{self, Finding, Scan};
use crate::tail::start_in;
use crate::{TailStart, leads};

/// How much of the log one read takes (more for a longer line).
const BLOCK: usize = 64 << 10;

/// The line number lines read from the end are parsed with until theirs is
/// known; no log has a line this far.
const UNNUMBERED: usize = usize::MAX;

/// A finding and, when it is quarantined, its bytes (for the sidecar check).
pub(super) type Found = (Finding, Vec<u8>);

/// A log's tail, read.
#[derive(Debug, Default)]
pub(super) struct TailRead {
    /// The leading system messages.
    pub system: Vec<Message>,
    /// The messages from the start point on.
    pub messages: Vec<Message>,
    /// Whether the start point was found.
    pub found: bool,
    /// When every line was read: how many messages lie between `system` and
    /// `messages`, and how many the log holds.
    pub whole: Option<(u64, u64)>,
    /// What was not a clean line among those read, in log order.
    pub findings: Vec<Found>,
}

/// Reads the leading system messages of the `len` bytes of `file`, then
/// lines from the end until `from` is met.
pub(super) fn read(file: &File, len: u64, from: &TailStart) -> io::Result<TailRead> {
    let head = read_head(file, len)?;
    let mut back = read_back(file, head.end, len, from)?;
    let numbered = back.findings.is_empty() && !back.unnumbered;
    if !numbered {
        let before = head.lines + count_lines(file, head.end, back.start)?;
        back.number(before);
    }
    let mut after = Vec::new();
    if back.reached {
        after.extend(head.rest);
    }
    after.extend(back.lines.into_iter().rev().flatten());
    let (start, found) = start_in(&after, from);
    let whole = back.reached.then(|| {
        let total = head.system.len() + after.len();
        (start as u64, total as u64)
    });
    let mut findings = head.findings;
    findings.extend(back.findings.into_iter().map(|(_, found)| found));
    Ok(TailRead {
        system: head.system,
        messages: after.split_off(start),
        found,
        whole,
        findings,
    })
}

/// The start of a log, read up to the line that ends its leading system
/// messages.
#[derive(Debug, Default)]
struct Head {
    system: Vec<Message>,
    /// The messages after the system ones on the line that ended them.
    rest: Vec<Message>,
    /// Where the lines after that one start.
    end: u64,
    /// How many lines were read.
    lines: usize,
    findings: Vec<Found>,
}

fn read_head(file: &File, len: u64) -> io::Result<Head> {
    let mut reader = file;
    reader.seek(SeekFrom::Start(0))?;
    let mut reader = BufReader::with_capacity(BLOCK, reader.take(len));
    let mut head = Head::default();
    let mut line = Vec::new();
    while head.rest.is_empty() {
        line.clear();
        let read = reader.read_until(b'\n', &mut line)?;
        if read == 0 {
            break;
        }
        let offset = head.end;
        head.end += read as u64;
        head.lines += 1;
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        let mut scan = Scan::default();
        records::read_line_at(&line, offset as usize, head.lines, &mut scan);
        head.findings
            .extend(with_bytes(scan.findings, &line, offset));
        let mut messages = scan.messages.into_iter();
        for message in messages.by_ref() {
            if leads(&message) {
                head.system.push(message);
            } else {
                head.rest.push(message);
                break;
            }
        }
        head.rest.extend(messages);
    }
    Ok(head)
}

/// The end of a log, read back line by line.
#[derive(Debug, Default)]
struct Back {
    /// The messages of each line read, the last line first.
    lines: Vec<Vec<Message>>,
    /// Where the oldest line read starts.
    start: u64,
    /// Whether every line down to the floor was read.
    reached: bool,
    /// The findings, each with its line's place from the end (0: the last).
    findings: Vec<(usize, Found)>,
    /// Whether a message took its id from the placeholder line number.
    unnumbered: bool,
}

impl Back {
    /// Gives the lines read their numbers, `before` lines coming before them.
    fn number(&mut self, before: usize) {
        let read = self.lines.len();
        let line_no = |from_end: usize| before + read - from_end;
        let placeholder = format!("jsonl-{UNNUMBERED:05}-");
        for (from_end, messages) in self.lines.iter_mut().enumerate() {
            for m in messages {
                if m.id.starts_with(&placeholder)
                    && m.id == derived_id("jsonl", UNNUMBERED, &m.content)
                {
                    m.id = derived_id("jsonl", line_no(from_end), &m.content);
                }
            }
        }
        for (from_end, (finding, _)) in &mut self.findings {
            finding.line = line_no(*from_end);
        }
        // Lines were read last first; their findings go back to log order.
        self.findings
            .sort_by_key(|(from_end, _)| Reverse(*from_end));
    }
}

fn read_back(file: &File, floor: u64, len: u64, from: &TailStart) -> io::Result<Back> {
    let mut lines = Backward::new(file, floor, len);
    let mut back = Back {
        start: len,
        ..Back::default()
    };
    let placeholder = format!("jsonl-{UNNUMBERED:05}-");
    let mut start = from.scan();
    loop {
        if start.found() {
            break;
        }
        let Some((offset, line)) = lines.next_line()? else {
            back.reached = true;
            break;
        };
        let mut scan = Scan::default();
        records::read_line_at(&line, offset as usize, UNNUMBERED, &mut scan);
        let from_end = back.lines.len();
        back.findings
            .extend(with_bytes(scan.findings, &line, offset).map(|found| (from_end, found)));
        back.unnumbered |= scan.messages.iter().any(|m| m.id.starts_with(&placeholder));
        for m in scan.messages.iter().rev() {
            start.feed(m);
        }
        back.lines.push(scan.messages);
        back.start = offset;
    }
    Ok(back)
}

/// Pairs each finding with its bytes when it is quarantined; `line` starts
/// at `offset` in the log.
fn with_bytes(
    findings: Vec<Finding>,
    line: &[u8],
    offset: u64,
) -> impl Iterator<Item = Found> + '_ {
    findings.into_iter().map(move |finding| {
        let start = finding.bytes.start - offset as usize;
        let bytes = line[start..start + finding.bytes.len()].to_vec();
        (finding, bytes)
    })
}

/// A file's lines from its end back to `floor` (where a line starts), read
/// in blocks.
struct Backward<'a> {
    file: &'a File,
    floor: u64,
    /// The bytes from `pos` to the end of the next line (its newline left out).
    buf: Vec<u8>,
    pos: u64,
    done: bool,
}

impl<'a> Backward<'a> {
    /// Lines of the `len` bytes of `file`, which end in a newline.
    fn new(file: &'a File, floor: u64, len: u64) -> Self {
        Backward {
            file,
            floor,
            buf: Vec::new(),
            // The last newline ends the last line.
            pos: len.saturating_sub(1).max(floor),
            done: floor >= len,
        }
    }

    /// The next line back: where it starts, and its bytes without the newline.
    fn next_line(&mut self) -> io::Result<Option<(u64, Vec<u8>)>> {
        if self.done {
            return Ok(None);
        }
        loop {
            if let Some(i) = memchr::memrchr(b'\n', &self.buf) {
                let line = self.buf.split_off(i + 1);
                self.buf.truncate(i);
                return Ok(Some((self.pos + i as u64 + 1, line)));
            }
            if self.pos == self.floor {
                self.done = true;
                return Ok(Some((self.pos, std::mem::take(&mut self.buf))));
            }
            // A line longer than a block doubles the read: linear in all.
            let want = (self.buf.len().max(BLOCK) as u64).min(self.pos - self.floor);
            let pos = self.pos - want;
            let mut block = vec![0; want as usize];
            read_exact_at(self.file, &mut block, pos)?;
            block.extend_from_slice(&self.buf);
            self.buf = block;
            self.pos = pos;
        }
    }
}

/// How many lines (newlines) the bytes from `from` to `to` of `file` hold.
fn count_lines(file: &File, from: u64, to: u64) -> io::Result<usize> {
    let mut lines = 0;
    let mut block = vec![0; BLOCK];
    let mut at = from;
    while at < to {
        let n = (BLOCK as u64).min(to - at) as usize;
        read_exact_at(file, &mut block[..n], at)?;
        lines += memchr::memchr_iter(b'\n', &block[..n]).count();
        at += n as u64;
    }
    Ok(lines)
}

fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
    }
    #[cfg(not(unix))]
    {
        let mut reader = file;
        reader.seek(SeekFrom::Start(offset))?;
        reader.read_exact(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file_of(bytes: &[u8]) -> File {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(bytes).unwrap();
        file
    }

    fn lines_back(bytes: &[u8], floor: u64) -> Vec<(u64, Vec<u8>)> {
        let file = file_of(bytes);
        let mut lines = Backward::new(&file, floor, bytes.len() as u64);
        let mut out = Vec::new();
        while let Some(line) = lines.next_line().unwrap() {
            out.push(line);
        }
        out
    }

    #[test]
    fn lines_come_back_last_first_with_their_offsets() {
        let log = b"ab\n\ncde\n";
        assert_eq!(
            lines_back(log, 0),
            [(4, b"cde".to_vec()), (3, Vec::new()), (0, b"ab".to_vec())]
        );
        assert_eq!(lines_back(log, 3), [(4, b"cde".to_vec()), (3, Vec::new())]);
        assert!(lines_back(log, 8).is_empty());
        assert!(lines_back(b"", 0).is_empty());
    }

    #[test]
    fn lines_longer_than_a_block_are_whole() {
        let long = "x".repeat(3 * BLOCK + 17);
        let log = format!("a\n{long}\n{long}\nb\n");
        let lines = lines_back(log.as_bytes(), 0);
        let texts: Vec<&[u8]> = lines.iter().map(|(_, l)| l.as_slice()).collect();
        assert_eq!(
            texts,
            [b"b".as_slice(), long.as_bytes(), long.as_bytes(), b"a"]
        );
        assert_eq!(lines[2].0, 2);
    }

    #[test]
    fn newlines_are_counted_across_blocks() {
        let log = "line\n".repeat(BLOCK / 2);
        let file = file_of(log.as_bytes());
        assert_eq!(count_lines(&file, 0, log.len() as u64).unwrap(), BLOCK / 2);
        assert_eq!(count_lines(&file, 5, 15).unwrap(), 2);
    }
}
