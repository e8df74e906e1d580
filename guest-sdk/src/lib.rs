//! The Rust SDK for agent-host history processors.
//!
//! A history processor is a WebAssembly component that receives a session's
//! history and answers with edits (keep message N, replace it, insert a new
//! one). This crate will wrap the generated `wit-bindgen` bindings of the
//! `agent-host:history` WIT package behind an idiomatic trait and a one-line
//! export macro, so that an author never writes canonical-ABI code.
//!
//! It is empty until the WIT contract exists: the contract and the runtime come
//! first (see the project's issues), and this crate follows them.
