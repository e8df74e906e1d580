//! Which processors a gateway request runs: the configured entries (only
//! those: a client names a chain, never a component) that are in the chain
//! it asks for (the `x-agent-host-chain` header; else the chain its session
//! ran last, so a session keeps the chain it was given; else `default`),
//! run on its route, and run for its model.
//!
//! Each distinct selection is loaded once into the engine's sandbox
//! runtime (its compile cache makes that a read of compiled code) and
//! kept; the whole list is loaded when the server starts, so a component
//! that cannot load stops the server rather than a request.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};

use agent_host_engine::{Engine, ProcessorChain};
use agent_host_runtime::ProcessorOptions;
use axum::http::{HeaderMap, StatusCode};

use super::Wire;

/// The request header naming the chain to run.
pub const CHAIN_HEADER: &str = "x-agent-host-chain";

/// The chain a request runs when it names none.
pub const DEFAULT_CHAIN: &str = "default";

/// The most selections kept loaded; beyond it, a selection is loaded for
/// its request and dropped after.
const MAX_KEPT: usize = 256;

/// One processor the gateway may run, and where.
#[derive(Clone, Debug)]
pub struct GatewayProcessor {
    /// The component.
    pub path: PathBuf,
    /// How it runs.
    pub options: ProcessorOptions,
    /// The wires it runs on; `None`: every one.
    pub routes: Option<Vec<Wire>>,
    /// The models it runs for: names, or prefixes ending in `*`; `None`:
    /// every model.
    pub models: Option<Vec<String>>,
    /// The chains it is in (at least one; [`DEFAULT_CHAIN`] unless
    /// configured otherwise).
    pub chains: Vec<String>,
}

impl GatewayProcessor {
    fn runs(&self, chain: &str, wire: Wire, model: &str) -> bool {
        self.chains.iter().any(|c| c == chain)
            && self.routes.as_ref().is_none_or(|r| r.contains(&wire))
            && self.models.as_ref().is_none_or(|m| {
                m.iter().any(|p| match p.strip_suffix('*') {
                    Some(prefix) => model.starts_with(prefix),
                    None => p == model,
                })
            })
    }
}

/// The chain a request runs.
#[derive(Clone, Debug)]
pub(crate) struct Selected {
    /// Its name.
    pub name: String,
    /// The processors; `None`: the engine's own chain (no gateway
    /// processors are configured).
    pub chain: Option<ProcessorChain>,
    /// Whether the request named it (else it is the default, until the
    /// session's own chain is known: [`Chains::for_session`]).
    pub named: bool,
    /// Why the session's chain is not the one it ran last, when it is not.
    pub note: Option<String>,
}

/// The configured processors and the selections loaded so far.
pub(crate) struct Chains {
    entries: Vec<GatewayProcessor>,
    /// The chain names, sorted.
    names: Vec<String>,
    loaded: Mutex<HashMap<Vec<usize>, ProcessorChain>>,
}

impl Chains {
    /// Checks `entries` and loads them all (blocking: compiles or reads the
    /// compile cache). None configured: the gateway runs the engine's chain.
    pub(crate) fn new(engine: &Engine, entries: Vec<GatewayProcessor>) -> anyhow::Result<Chains> {
        let mut names: Vec<String> = Vec::new();
        for (i, entry) in entries.iter().enumerate() {
            anyhow::ensure!(
                !entry.chains.is_empty(),
                "the gateway processor {i} ({}) is in no chain",
                entry.path.display()
            );
            for name in &entry.chains {
                anyhow::ensure!(
                    valid_name(name),
                    "the gateway processor {i} ({}) names the chain {name:?}: a chain's name is 1 to 64 ASCII letters, digits, `-` or `_`",
                    entry.path.display()
                );
                if !names.contains(name) {
                    names.push(name.clone());
                }
            }
        }
        names.sort();
        let mut loaded = HashMap::new();
        if !entries.is_empty() {
            let all: Vec<(PathBuf, ProcessorOptions)> = entries
                .iter()
                .map(|e| (e.path.clone(), e.options.clone()))
                .collect();
            let chain = engine.load_processors(&all)?;
            loaded.insert((0..entries.len()).collect(), chain);
        }
        Ok(Chains {
            entries,
            names,
            loaded: Mutex::new(loaded),
        })
    }

    /// The chain a request asks for (`headers`), of its processors those
    /// that run on `wire` for `model`; `Err` (a status and a message) for a
    /// chain that is not configured.
    pub(crate) async fn select(
        &self,
        engine: &Engine,
        headers: &HeaderMap,
        wire: Wire,
        model: &str,
    ) -> Result<Selected, (StatusCode, String)> {
        let asked = match headers.get(CHAIN_HEADER) {
            None => None,
            Some(value) => {
                let name = value.to_str().ok().map(str::trim).filter(|n| valid_name(n));
                match name {
                    Some(name) => Some(name.to_owned()),
                    None => {
                        return Err((
                            StatusCode::BAD_REQUEST,
                            format!(
                                "the {CHAIN_HEADER} header must name a chain: 1 to 64 ASCII letters, digits, `-` or `_`"
                            ),
                        ));
                    }
                }
            }
        };
        let named = asked.is_some();
        let name = asked.unwrap_or_else(|| DEFAULT_CHAIN.to_owned());
        let mut selected = self.load(engine, name, wire, model).await?;
        selected.named = named;
        Ok(selected)
    }

    /// The chain a request of a session runs: the one `selected` when the
    /// request named it, else the one the session ran `last` (its newest
    /// request record's), when that is still configured; a chain that no
    /// longer is gives way to the default, with a note saying so.
    pub(crate) async fn for_session(
        &self,
        engine: &Engine,
        selected: Selected,
        last: Option<String>,
        wire: Wire,
        model: &str,
    ) -> Result<Selected, (StatusCode, String)> {
        let Some(last) = last.filter(|last| !selected.named && *last != selected.name) else {
            return Ok(selected);
        };
        if !self.names.contains(&last) {
            return Ok(Selected {
                note: Some(format!(
                    "the session ran the processor chain {last:?} last, which is no longer configured; it runs {:?}",
                    selected.name
                )),
                ..selected
            });
        }
        self.load(engine, last, wire, model).await
    }

    /// The chain `name` (checked against the configured ones) for `wire`
    /// and `model`, loaded.
    async fn load(
        &self,
        engine: &Engine,
        name: String,
        wire: Wire,
        model: &str,
    ) -> Result<Selected, (StatusCode, String)> {
        if self.entries.is_empty() {
            if name != DEFAULT_CHAIN {
                return Err((
                    StatusCode::BAD_REQUEST,
                    format!(
                        "the processor chain {name:?} is not configured: this gateway runs only its `{DEFAULT_CHAIN}` chain (name others with `chains` in [[processors]])"
                    ),
                ));
            }
            return Ok(Selected {
                name,
                chain: None,
                named: false,
                note: None,
            });
        }
        if !self.names.contains(&name) && name != DEFAULT_CHAIN {
            return Err((
                StatusCode::BAD_REQUEST,
                format!(
                    "the processor chain {name:?} is not configured; the chains are: {}",
                    self.names.join(", ")
                ),
            ));
        }
        let picked: Vec<usize> = self
            .entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.runs(&name, wire, model))
            .map(|(i, _)| i)
            .collect();
        if picked.is_empty() {
            return Ok(Selected {
                name,
                chain: Some(ProcessorChain::default()),
                named: false,
                note: None,
            });
        }
        if let Some(chain) = self.kept().get(&picked) {
            return Ok(Selected {
                name,
                chain: Some(chain.clone()),
                named: false,
                note: None,
            });
        }
        let list: Vec<(PathBuf, ProcessorOptions)> = picked
            .iter()
            .map(|&i| {
                (
                    self.entries[i].path.clone(),
                    self.entries[i].options.clone(),
                )
            })
            .collect();
        let loader = engine.clone();
        let chain = tokio::task::spawn_blocking(move || loader.load_processors(&list))
            .await
            .map_err(|e| e.to_string())
            .and_then(|r| r.map_err(|e| e.to_string()))
            .map_err(|e| {
                (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("the processors of the chain {name:?} could not be loaded: {e}"),
                )
            })?;
        let mut kept = self.kept();
        if kept.len() < MAX_KEPT {
            kept.insert(picked, chain.clone());
        }
        Ok(Selected {
            name,
            chain: Some(chain),
            named: false,
            note: None,
        })
    }

    fn kept(&self) -> std::sync::MutexGuard<'_, HashMap<Vec<usize>, ProcessorChain>> {
        self.loaded.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A chain's name: 1 to 64 ASCII letters, digits, `-` or `_`.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}
