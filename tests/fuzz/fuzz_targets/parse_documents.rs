//! The document readers added for issue 23 (gemini-cli, pydantic-ai, langchain) on
//! arbitrary text, the first byte choosing the reader: each returns a
//! transcript or a `FormatError` of its own format, never panics.
#![no_main]

use agent_host_core::format::{self, Format};
use libfuzzer_sys::fuzz_target;

const READERS: [Format; 3] = [Format::GeminiCli, Format::PydanticAi, Format::LangChain];

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let reader = READERS[usize::from(selector) % READERS.len()];
    if let Err(e) = format::parse(reader, text) {
        assert_eq!(e.format, reader, "{e}");
        assert!(!e.detail.is_empty(), "an error says what was wrong");
    }
});
