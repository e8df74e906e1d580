//! agent-host: the session and context engine for LLM agents.
//!
//! This crate is the host side: reading histories from files, the sandboxed
//! WebAssembly processor [`runtime`], the session [`store`]s, the command-line
//! interface, and (as the project grows) the model providers. All pure logic (the
//! message model, formats, token estimation) lives in [`agent_host_core`],
//! which this crate re-exports as [`core`].
//!
//! What it deliberately leaves out: anything that must also run inside
//! WebAssembly belongs in `agent-host-core`, not here.

pub use agent_host_core as core;

pub mod chat;
pub mod cli;
pub mod config;
pub mod context;
pub mod engine;
pub mod input;
pub mod processor;
pub mod provider;
pub mod run;
pub mod runtime;
pub mod sessions;
pub mod store;
pub mod style;
pub mod summarizer;
