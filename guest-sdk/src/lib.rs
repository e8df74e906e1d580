//! The Rust SDK for agent-host history processors.
//!
//! A history processor is a WebAssembly component that receives a session's
//! history and answers with edits: keep this message, drop that one, replace a
//! third, insert a new one. The host applies the edits, checks that the result
//! is still a history a model accepts, and never lets the processor touch
//! anything else. This crate hides the component-model bindings: an author
//! implements [`Processor`] over a [`History`], exports it with
//! [`export_processor!`], and builds it with `agent-host processor build`.
//!
//! What it deliberately leaves out: the host side (`agent-host`), and any way to
//! reorder messages (the host supports it for processors that declare it, but
//! no standard processor needs it).
//!
//! # A complete processor
//!
//! This one drops every message with an error flag and everything older than
//! the last `turns` turns (a turn starts at a user message), without ever
//! splitting a tool call from its results:
//!
//! ```
//! use agent_host_guest::{History, Processor, Result, export_processor};
//! use serde::Deserialize;
//!
//! #[derive(Deserialize)]
//! #[serde(default, deny_unknown_fields)]
//! pub struct Config {
//!     turns: usize,
//! }
//!
//! impl Default for Config {
//!     fn default() -> Self {
//!         Config { turns: 4 }
//!     }
//! }
//!
//! pub struct Tidy;
//!
//! impl Processor for Tidy {
//!     type Config = Config;
//!     const CONFIG_EXAMPLE: Option<&'static str> = Some(r#"{"turns": 2}"#);
//!
//!     fn process(history: &mut History, config: Config) -> Result<()> {
//!         history.keep_last_turns(config.turns);
//!         history.retain(|m| !m.flags.contains(agent_host_guest::MessageFlags::ERROR));
//!         history.settle_tool_exchanges();
//!         agent_host_guest::info!("kept {} of {} messages", history.kept(), history.len());
//!         Ok(())
//!     }
//! }
//!
//! export_processor!(Tidy);
//!
//! // The same code runs natively, so it can be tested with `cargo test`:
//! use agent_host_guest::{Message, Role, testing};
//! let history = vec![
//!     Message::new(Role::User, "first"),
//!     Message::new(Role::Assistant, "one"),
//!     Message::new(Role::User, "second"),
//!     Message::new(Role::Assistant, "two"),
//! ];
//! let out = testing::run::<Tidy>(r#"{"turns": 1}"#, history)?;
//! assert_eq!(out.iter().map(|m| m.content.as_str()).collect::<Vec<_>>(), ["second", "two"]);
//!
//! let bad = testing::run::<Tidy>(r#"{"turn": 1}"#, vec![]).unwrap_err();
//! assert!(bad.to_string().contains("unknown field `turn`"), "{bad}");
//! # Ok::<(), agent_host_guest::Error>(())
//! ```
//!
//! Build it into a component with `agent-host processor build PATH` (a cargo
//! build for `wasm32-unknown-unknown`, then componentization), and run it with
//! `agent-host run --processor target/processors/tidy.wasm`.
//!
//! # Configuration
//!
//! The user's JSON configuration is deserialised with serde into
//! [`Processor::Config`]. When the user gives none the host passes `{}`, so
//! give the struct `#[serde(default)]` (an empty or `null` text also gives
//! `Config::default()`). A configuration that does not deserialise fails the
//! call with [`Error::BadConfig`]: serde's message, prefixed with the key it
//! is about (`` `turns`: invalid type: string "four", expected usize ``).
//! Add `#[serde(deny_unknown_fields)]` so that a misspelt key is an error, not
//! a silent default. Processors without settings use [`NoConfig`], which
//! accepts `{}` and refuses any key.
//!
//! # Cost, and the contract version
//!
//! The SDK speaks contract `agent-host:history@0.2.0` by default: the host
//! keeps the history and sends the [`Header`]s (role, flags, token estimate,
//! timestamp, which call a tool result answers, sizes) without any string;
//! the first read of a whole message ([`History::messages`], [`History::get`],
//! [`History::retain`], [`History::message_mut`], ...) fetches every message
//! once. A processor that works on headers alone
//! ([`History::headers`], [`History::header`], [`History::retain_headers`],
//! [`History::keep_last_turns`], [`History::drop`]) pays for no text. With
//! the feature `contract-0-1` the same code builds against 0.1.0, where the
//! whole history is copied in up front; [`CONTRACT`] says which one a build
//! speaks.
//!
//! # Host services
//!
//! A 0.2.0 processor may ask the host for a summary written by the
//! session's model ([`summarize`]), a token count with the session's
//! tokenizer ([`count_tokens`]) and the session's long-term memory
//! ([`read_memory`]). Each is closed unless the user grants it to the
//! processor (`--allow-summarize`, ...) and spends the processor's budget
//! for the run; a refusal is a [`ServiceError`] to handle (usually by
//! leaving the history as it is), never a trap. The standard processor
//! `summarize-history` is the example. A processor that calls none of them
//! does not import them.
//!
//! Each call runs in a fresh instance that the host throws away afterwards, so
//! the SDK never frees the input: dropping ten thousand messages one string at
//! a time would be pure waste inside WebAssembly.

#![cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
// A 0.2.0 component gets its history from the host: the paths that take one
// whole serve only tests and 0.1.0.
#![cfg_attr(
    all(target_arch = "wasm32", not(feature = "contract-0-1")),
    allow(dead_code)
)]

/// The generated bindings of the contract version this build speaks: 0.2.0
/// unless the `contract-0-1` feature is on.
#[doc(hidden)]
#[cfg(not(feature = "contract-0-1"))]
pub mod bindings {
    // The generated code is not ours to lint or document.
    #![allow(missing_docs, unsafe_code, clippy::all)]
    wit_bindgen::generate!({
        path: "../wit/v0.2.0",
        world: "history-processor",
        pub_export_macro: true,
        export_macro_name: "__export_bindings",
        // So that authors' tests can compare messages.
        additional_derives: [PartialEq, Eq],
    });
}

/// The generated bindings of the contract version this build speaks: 0.1.0
/// with the `contract-0-1` feature.
#[doc(hidden)]
#[cfg(feature = "contract-0-1")]
pub mod bindings {
    // The generated code is not ours to lint or document.
    #![allow(missing_docs, unsafe_code, clippy::all)]
    wit_bindgen::generate!({
        path: "../wit/v0.1.0",
        world: "history-processor",
        pub_export_macro: true,
        export_macro_name: "__export_bindings",
        // So that authors' tests can compare messages.
        additional_derives: [PartialEq, Eq],
    });
}

/// The version of the `agent-host:history` contract this build speaks.
#[cfg(not(feature = "contract-0-1"))]
pub const CONTRACT: &str = "0.2.0";
/// The version of the `agent-host:history` contract this build speaks.
#[cfg(feature = "contract-0-1")]
pub const CONTRACT: &str = "0.1.0";

#[cfg(test)]
mod conformance;
mod error;
mod history;
mod host;
mod message;
mod services;
#[cfg(not(target_arch = "wasm32"))]
pub mod testing;

pub use bindings::agent_host::history::host::Level;
pub use bindings::agent_host::history::types::{
    FileRef, Image, MediaSource, Message, MessageFlags, Part, Reasoning, Role, RunContext,
    Timestamp, ToolCall, Usage,
};
pub use error::{Error, Result};
pub use history::{Header, History};
pub use host::{estimate_message_tokens, estimate_tokens, log};
pub use message::{group_thousands, plural};
pub use services::{
    Fact, ServiceError, Summary, SummaryCaps, count_tokens, read_memory, summarize,
};

/// A history processor: what [`export_processor!`] turns into a component.
///
/// Its name, version and summary are the crate's (`name`, `version` and
/// `description` in `Cargo.toml`).
pub trait Processor {
    /// Its configuration, deserialised from the user's JSON.
    type Config: serde::de::DeserializeOwned + Default;

    /// An example configuration, shown by `agent-host processor inspect`.
    const CONFIG_EXAMPLE: Option<&'static str> = None;

    /// The JSON Schema of [`Processor::Config`], when you publish one.
    const CONFIG_SCHEMA: Option<&'static str> = None;

    /// Edits `history` in place: drop, replace and insert messages. Whatever
    /// it leaves untouched is kept as it was.
    fn process(history: &mut History<'_>, config: Self::Config) -> Result<()>;
}

/// A configuration with no settings: accepts `{}` (or none) and refuses any
/// key, so a user who misspells a processor's name in a pipeline hears of it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoConfig {}

/// Exports a [`Processor`] as the component's `processor` interface.
///
/// ```
/// use agent_host_guest::{History, NoConfig, Processor, Result, Role, export_processor};
///
/// struct DropSystem;
///
/// impl Processor for DropSystem {
///     type Config = NoConfig;
///     fn process(history: &mut History, _: NoConfig) -> Result<()> {
///         history.retain(|m| m.role != Role::System);
///         Ok(())
///     }
/// }
///
/// export_processor!(DropSystem);
/// ```
///
/// Outside WebAssembly it expands to nothing, so the crate can also be used as
/// an ordinary library (tests, benchmarks against the host).
#[macro_export]
macro_rules! export_processor {
    ($processor:ty) => {
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            struct Export;

            impl $crate::__private::Guest for Export {
                fn describe() -> $crate::__private::Description {
                    $crate::__private::describe::<$processor>(
                        ::core::env!("CARGO_PKG_NAME"),
                        ::core::env!("CARGO_PKG_VERSION"),
                        ::core::env!("CARGO_PKG_DESCRIPTION"),
                    )
                }

                fn process(
                    ctx: $crate::RunContext,
                    history: $crate::__private::Input<'_>,
                ) -> ::core::result::Result<
                    ::std::vec::Vec<$crate::__private::Item>,
                    $crate::__private::WitError,
                > {
                    $crate::__private::process::<$processor>(ctx, history)
                }
            }

            $crate::__private::bindings::__export_bindings!(Export with_types_in $crate::__private::bindings);
        };
    };
}

/// What [`export_processor!`] expands to; not part of the API.
#[doc(hidden)]
pub mod __private {
    use crate::Processor;
    pub use crate::bindings;
    pub use crate::bindings::agent_host::history::types::{
        Description, Error as WitError, Item, Replacement,
    };
    pub use crate::bindings::exports::agent_host::history::processor::Guest;

    /// The description the host asks for before the first call.
    pub fn describe<P: Processor>(name: &str, version: &str, summary: &str) -> Description {
        Description {
            name: name.into(),
            version: version.into(),
            summary: summary.into(),
            config_schema: P::CONFIG_SCHEMA.map(Into::into),
            config_example: P::CONFIG_EXAMPLE.map(Into::into),
            reorders: false,
        }
    }

    /// What the host passes to `process`: the whole history in 0.1.0.
    #[cfg(feature = "contract-0-1")]
    pub type Input<'a> = Vec<crate::Message>;
    /// What the host passes to `process`: a borrowed handle on the host's
    /// history in 0.2.0.
    #[cfg(not(feature = "contract-0-1"))]
    pub type Input<'a> = &'a crate::bindings::agent_host::history::types::History;

    /// One call: parse the configuration, run the processor, answer with its
    /// edits.
    #[cfg(feature = "contract-0-1")]
    pub fn process<P: Processor>(
        ctx: crate::RunContext,
        messages: Input<'_>,
    ) -> Result<Vec<Item>, WitError> {
        let config = crate::error::parse_config::<P::Config>(&ctx.config)?;
        let mut history = crate::History::new(ctx, messages);
        P::process(&mut history, config)?;
        Ok(history.into_items())
    }

    /// One call: parse the configuration, read the headers, run the
    /// processor (which fetches texts only if it reads them), answer with
    /// its edits.
    #[cfg(all(target_arch = "wasm32", not(feature = "contract-0-1")))]
    pub fn process<P: Processor>(
        ctx: crate::RunContext,
        input: Input<'_>,
    ) -> Result<Vec<Item>, WitError> {
        let config = crate::error::parse_config::<P::Config>(&ctx.config)?;
        let mut history = crate::History::from_host(ctx, input);
        P::process(&mut history, config)?;
        Ok(history.into_items())
    }
}
