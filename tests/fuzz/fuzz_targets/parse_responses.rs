//! The responses importer on arbitrary text: it returns a transcript or a
//! `FormatError`, never panics.
#![no_main]

use agent_host_core::format::{self, Format};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(e) = format::parse(Format::Responses, text) {
        assert_eq!(e.format, Format::Responses, "{e}");
        assert!(!e.detail.is_empty(), "an error says what was wrong");
    }
});
