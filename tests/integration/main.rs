//! Cross-crate tests: the real `agent-host` binary on real and hostile input.

mod chat;
mod cli;
mod compile_limits;
mod config;
mod gateway;
mod lang_c;
mod lang_js;
mod lang_python;
mod langs;
mod layers;
mod migrate;
use agent_host_testkit::model_server as llm_server;
mod postgres;
mod processor_tools;
mod processors;
mod provider;
mod python_package;
mod replay;
mod run;
mod runtime;
mod serve;
mod services;
mod sessions;
mod store;
mod util;
