//! What the host offers a processor: a log and its token estimates.
//!
//! Inside WebAssembly these call the host. Natively (an author's tests, the
//! host's benchmarks) the log goes to standard error and the estimates come
//! from the host's default estimator, `agent-host-core`'s heuristic counter.

use crate::{Level, Message};

/// Writes a line to the host's log; it appears in the run report under this
/// processor. The host caps the number of lines per call.
///
/// The macros [`info!`](crate::info), [`warn!`](crate::warn) and
/// [`debug!`](crate::debug) format their arguments first.
pub fn log(level: Level, text: &str) {
    #[cfg(target_arch = "wasm32")]
    crate::bindings::agent_host::history::host::log(level, text);
    #[cfg(not(target_arch = "wasm32"))]
    eprintln!("[{level:?}] {text}");
}

/// The host's estimate of how many tokens `text` costs.
pub fn estimate_tokens(text: &str) -> u32 {
    #[cfg(target_arch = "wasm32")]
    return crate::bindings::agent_host::history::host::estimate_tokens(text);
    #[cfg(not(target_arch = "wasm32"))]
    {
        use agent_host_core::tokens::{HeuristicCounter, TokenCounter};
        HeuristicCounter::default().count_text(text)
    }
}

/// The host's estimate of a whole message (text, parts, tool calls and the
/// per-message overhead). Messages in the input already carry it in
/// [`Message::tokens`]; this is for the ones you build.
pub fn estimate_message_tokens(message: &Message) -> u32 {
    #[cfg(target_arch = "wasm32")]
    return crate::bindings::agent_host::history::host::estimate_message_tokens(message);
    #[cfg(not(target_arch = "wasm32"))]
    {
        use agent_host_core::message::{MediaRef, Part as P, Reasoning, ToolCall};
        use agent_host_core::tokens::{HeuristicCounter, TokenCounter};
        // What the count reads, in the host's own type.
        let mut m = agent_host_core::Message::assistant(message.content.clone());
        m.parts = message
            .parts
            .iter()
            .map(|p| match p {
                crate::Part::Text(text) => P::Text { text: text.clone() },
                crate::Part::Image(i) => P::Image {
                    source: MediaRef::Url(String::new()),
                    mime_type: i.mime_type.clone(),
                },
                crate::Part::File(f) => P::File {
                    name: f.name.clone(),
                    path: f.path.clone(),
                    mime_type: f.mime_type.clone(),
                },
            })
            .collect();
        m.reasoning = message.reasoning.as_ref().map(|r| Reasoning {
            text: r.text.clone(),
            signature: None,
            redacted: r.redacted,
        });
        m.tool_calls = message
            .tool_calls
            .iter()
            .map(|c| ToolCall {
                id: String::new(),
                name: c.name.clone(),
                arguments: c.arguments.clone(),
            })
            .collect();
        m.tool_name = message.tool_name.clone();
        HeuristicCounter::default().count_message(&m)
    }
}

/// Logs at `info` level: `info!("replaced {} keys", n)`.
#[macro_export]
macro_rules! info {
    ($($arg:tt)*) => { $crate::log($crate::Level::Info, &::std::format!($($arg)*)) };
}

/// Logs at `warn` level: `warn!("pattern {} matched nothing", p)`.
#[macro_export]
macro_rules! warn {
    ($($arg:tt)*) => { $crate::log($crate::Level::Warn, &::std::format!($($arg)*)) };
}

/// Logs at `debug` level.
#[macro_export]
macro_rules! debug {
    ($($arg:tt)*) => { $crate::log($crate::Level::Debug, &::std::format!($($arg)*)) };
}
