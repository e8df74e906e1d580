//! Format detection on arbitrary text: `detect` and `parse_detected` never
//! panic, and agree with each other and with `parse` in the detected format.
#![no_main]

use agent_host_core::format::{self, Format};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let detected = Format::detect(text);
    match format::parse_detected(text) {
        Ok((format, transcript)) => {
            assert_eq!(detected.as_ref().ok(), Some(&format));
            let direct = format::parse(format, text).expect("parse agrees with parse_detected");
            assert_eq!(direct, transcript);
        }
        Err(_) => {
            if let Ok(format) = detected {
                assert!(format::parse(format, text).is_err());
            }
        }
    }
});
