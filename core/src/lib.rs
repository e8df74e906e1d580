//! The pure heart of agent-host: the message model, the conversions between the
//! transcript formats agents use, and token estimation.
//!
//! Everything here is deterministic and free of I/O, threads, clocks and
//! randomness, so the same code runs in the host and inside WebAssembly (the
//! crate builds for `wasm32-unknown-unknown` and `wasm32-wasip2`). Whatever needs
//! the outside world (the current time, fresh UUIDs, files) is passed in by the
//! caller.
//!
//! What it deliberately leaves out: storage, the sandboxed processor runtime and
//! model providers live in the `host/` crates; the guest-side API lives in
//! `agent-host-guest`.
//!
//! # Example
//!
//! ```
//! use agent_host_core::format::{self, Format};
//! use agent_host_core::tokens::{HeuristicCounter, TokenCounter};
//!
//! let openai = r#"[
//!   {"role": "user", "content": "What is in /etc/hosts?"},
//!   {"role": "assistant", "content": null, "tool_calls": [
//!     {"id": "call_1", "type": "function",
//!      "function": {"name": "read_file", "arguments": "{\"path\":\"/etc/hosts\"}"}}]},
//!   {"role": "tool", "tool_call_id": "call_1", "name": "read_file", "content": "127.0.0.1 localhost"}
//! ]"#;
//! let transcript = format::parse(Format::detect(openai)?, openai)?;
//! assert_eq!(transcript.messages.len(), 3);
//! assert_eq!(transcript.messages[2].tool_name.as_deref(), Some("read_file"));
//!
//! let counter = HeuristicCounter::default();
//! let total: u32 = transcript.messages.iter().map(|m| m.tokens(&counter)).sum();
//! assert!(total > 0);
//!
//! // The same history as native JSONL lines, and back.
//! let jsonl = format::write(Format::Jsonl, &transcript.messages)?;
//! assert_eq!(format::parse(Format::Jsonl, &jsonl)?.messages, transcript.messages);
//! # Ok::<(), agent_host_core::format::FormatError>(())
//! ```

pub mod budget;
pub mod compact;
pub mod diff;
pub mod doom_loop;
pub mod error_kind;
pub mod export;
pub mod extractive;
pub mod format;
pub mod memory;
pub mod message;
pub mod pairing;
pub mod pipeline;
pub mod prune;
pub mod query;
pub mod reconcile;
pub mod repair;
pub mod session;
pub mod stop;
pub mod summarize;
pub mod tokens;
pub mod truncate;
pub mod validate;
pub mod window;

pub use error_kind::ErrorKind;
pub use message::{MediaRef, Message, Part, Reasoning, Role, ToolCall, Usage};
pub use session::{Checkpoint, SessionHeader, SummaryUsage};
pub use tokens::{HeuristicCounter, TokenCounter};
