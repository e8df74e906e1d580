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
        use agent_host_core::tokens::{HeuristicCounter, TokenCounter};
        let counter = HeuristicCounter::default();
        let mut total = counter.message_overhead() + counter.count_text(&message.content);
        for part in &message.parts {
            total += match part {
                crate::Part::Text(text) => counter.count_text(text),
                crate::Part::Image(_) => counter.image_tokens(),
                crate::Part::File(f) => counter.count_text(&f.name) + counter.count_text(&f.path),
            };
        }
        if let Some(r) = &message.reasoning {
            total += counter.count_text(&r.text);
        }
        for call in &message.tool_calls {
            total += 3 + counter.count_text(&call.name) + counter.count_text(&call.arguments);
        }
        if let Some(name) = &message.tool_name {
            total += counter.count_text(name);
        }
        total
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

#[cfg(test)]
mod tests {
    use crate::{Image, MediaSource, Message, Part, Reasoning, Role, ToolCall};
    use agent_host_core::tokens::{HeuristicCounter, TokenCounter};

    /// The native estimate mirrors core's `count_message`; this catches drift.
    #[test]
    fn native_message_estimate_matches_the_host_default() {
        let mut m = Message::new(Role::Assistant, "Let me look at the file first.");
        m.parts.push(Part::Text("and a second text part".into()));
        m.parts.push(Part::Image(Image {
            source: MediaSource::Url("https://example.com/a.png".into()),
            mime_type: None,
        }));
        m.reasoning = Some(Reasoning {
            text: "the user wants the file".into(),
            signature: None,
            redacted: false,
        });
        m.tool_calls
            .push(ToolCall::new("c1", "read_file", r#"{"path":"/etc/hosts"}"#));

        let mut core = agent_host_core::Message::assistant("Let me look at the file first.");
        core.parts.push(agent_host_core::message::Part::Text {
            text: "and a second text part".into(),
        });
        core.parts.push(agent_host_core::message::Part::Image {
            source: agent_host_core::message::MediaRef::Url("https://example.com/a.png".into()),
            mime_type: None,
        });
        core.reasoning = Some(agent_host_core::message::Reasoning {
            text: "the user wants the file".into(),
            signature: None,
            redacted: false,
        });
        core.tool_calls.push(agent_host_core::message::ToolCall {
            id: "c1".into(),
            name: "read_file".into(),
            arguments: r#"{"path":"/etc/hosts"}"#.into(),
        });
        assert_eq!(
            super::estimate_message_tokens(&m),
            HeuristicCounter::default().count_message(&core)
        );
    }
}
