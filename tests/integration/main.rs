//! Cross-crate tests: the real `agent-host` binary on real and hostile input.

mod cli;
mod processors;
mod run;
mod runtime;
mod sessions;
mod store;
mod util;
