//! Cross-crate tests: the real `agent-host` binary on real and hostile input.

mod cli;
mod runtime;
mod util;
