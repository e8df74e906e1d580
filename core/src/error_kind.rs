//! The kinds of failure every layer of agent-host classifies its errors into.
//!
//! Each library crate gives its error type a `kind()`; each front end maps a
//! kind once: the CLI to an exit code, the server to an HTTP status, the
//! Python package to an exception class. The kinds are deliberately few: a
//! front end must be able to say what to do about each.

use core::fmt;

/// What kind of failure an error is, for the front ends to map.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorKind {
    /// The session, message or file named does not exist.
    NotFound,
    /// The request conflicts with what exists (a taken key, a newer write).
    Conflict,
    /// The input is malformed or inconsistent (a bad history, a bad argument).
    InvalidInput,
    /// A size, count, time or memory limit was exceeded.
    LimitExceeded,
    /// A history processor failed under its `fail` policy, or could not load.
    ProcessorFailed,
    /// The model provider failed (after retries) or refused the request.
    ProviderFailed,
    /// The configuration is wrong or incomplete (a key, a file, a missing secret).
    Configuration,
    /// Reading or writing storage failed.
    Io,
    /// A bug or an unexpected state in agent-host itself.
    Internal,
    /// The caller did not say who it is, or its credential is wrong.
    Unauthorized,
    /// The caller is known but may not do this.
    Forbidden,
}

impl ErrorKind {
    /// The kind's stable name, as front ends show it (`not_found`, ...).
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorKind::NotFound => "not_found",
            ErrorKind::Conflict => "conflict",
            ErrorKind::InvalidInput => "invalid_input",
            ErrorKind::LimitExceeded => "limit_exceeded",
            ErrorKind::ProcessorFailed => "processor_failed",
            ErrorKind::ProviderFailed => "provider_failed",
            ErrorKind::Configuration => "configuration",
            ErrorKind::Io => "io",
            ErrorKind::Internal => "internal",
            ErrorKind::Unauthorized => "unauthorized",
            ErrorKind::Forbidden => "forbidden",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An error and its causes on one line, `: `-joined, leaving out a cause
/// whose text the line already holds (many errors repeat their source).
///
/// ```
/// use std::io;
/// let inner = io::Error::other("disk full");
/// let outer = io::Error::new(io::ErrorKind::Other, inner);
/// assert_eq!(agent_host_core::error_kind::error_chain(&outer), "disk full");
/// ```
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}
