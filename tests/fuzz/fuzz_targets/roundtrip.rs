//! Read, write, read again. The first byte picks the format to read (the rest
//! is the transcript); whatever reads is written in every writable format and
//! read back. Nothing may panic, the native JSONL log is lossless (the messages
//! come back equal), and every writer reaches a fixed point: once its output
//! has been read back, writing and reading it again changes nothing.
#![no_main]

use agent_host_core::format::{self, Format};
use libfuzzer_sys::fuzz_target;

const WRITABLE: [Format; 5] = [
    Format::Jsonl,
    Format::OpenAi,
    Format::Anthropic,
    Format::Responses,
    Format::PydanticAi,
];

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let source = Format::ALL[usize::from(selector) % Format::ALL.len()];
    let Ok(transcript) = format::parse(source, text) else {
        return;
    };
    for target in WRITABLE {
        let Ok(written) = format::write(target, &transcript.messages) else {
            continue;
        };
        let back = format::parse(target, &written)
            .unwrap_or_else(|e| panic!("{target} cannot read what it wrote: {e}\n{written}"));
        if target == Format::Jsonl {
            assert_eq!(back.messages, transcript.messages, "jsonl is lossless");
        }
        // Readers may fill in what a writer left out (a tool result's name from
        // its call), so the text is stable from the second trip on.
        let again = format::write(target, &back.messages)
            .unwrap_or_else(|e| panic!("{target} cannot write what it read back: {e}"));
        let third = format::parse(target, &again)
            .and_then(|t| format::write(target, &t.messages))
            .unwrap_or_else(|e| panic!("{target} cannot read and write its own output: {e}"));
        assert_eq!(third, again, "{target} is stable after a round trip");
    }
});
