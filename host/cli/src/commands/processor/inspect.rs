//! `agent-host processor inspect`: what a component is (its description,
//! contract, size and hash) and what it needs (every import, with the grant
//! that opens it).

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use serde_json::{Value, json};

use super::{CacheArgs, load};
use agent_host_runtime::{Import, ImportUse, Processor, ProcessorOptions};

/// The options of `agent-host processor inspect`.
#[derive(Debug, Args)]
#[command(after_help = "\
Imports of the agent-host interface are always allowed. WASI imports are served closed:
wasi:clocks/* needs --allow-clocks, wasi:random/* --allow-random, wasi:filesystem/* --allow-dir,
stdout and stderr are captured into the report log, and the network is never granted.

Examples:
  agent-host processor inspect target/processors/keep-last-turns.wasm
  agent-host processor inspect my-processor.wasm --json | jq .imports")]
pub struct InspectArgs {
    /// The processor component, or a Rust processor crate's folder (built first).
    #[arg(value_name = "FILE.wasm|CRATE")]
    file: PathBuf,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    cache: CacheArgs,
}

/// Runs `agent-host processor inspect`.
pub(super) fn run(args: &InspectArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let loaded = load(&args.file, &args.cache, ProcessorOptions::default())?;
    let p = loaded.processor();
    let bytes = std::fs::read(&args.file)
        .with_context(|| format!("cannot read {}", args.file.display()))?;
    let exports = exports_of(&bytes);
    let contracts = contracts(p, exports.as_deref().unwrap_or_default());
    let imports: Vec<ImportView<'_>> = p.imports().iter().map(ImportView::of).collect();
    let report = json!({
        "name": p.name(),
        "version": p.description().version,
        "summary": p.description().summary,
        "contract": contracts,
        "file": args.file.display().to_string(),
        "size_bytes": bytes.len(),
        "sha256": p.hash(),
        "reorders": p.description().reorders,
        "config_example": p.description().config_example.as_deref().map(json_or_text),
        "config_schema": p.description().config_schema.as_deref().map(json_or_text),
        "imports": imports.iter().map(ImportView::json).collect::<Vec<_>>(),
        "grants": grants(&imports),
        "exports": exports,
        "load": {
            "ms": super::ms(p.load_time()),
            "compile": p.compile(),
        },
    });
    if args.json {
        writeln!(out, "{}", agent_host_core::format::to_pretty(&report)?)?;
        return Ok(());
    }

    let d = p.description();
    // Everything the component describes itself with is its author's text.
    use crate::term::safe;
    writeln!(out, "{} {}", safe(p.name()), safe(&d.version))?;
    if !d.summary.is_empty() {
        writeln!(out, "{}", safe(&d.summary))?;
    }
    writeln!(out)?;
    writeln!(out, "file       {}", args.file.display())?;
    writeln!(
        out,
        "size       {} bytes ({:.1} KiB)",
        bytes.len(),
        bytes.len() as f64 / 1024.0
    )?;
    writeln!(out, "sha256     {}", p.hash())?;
    writeln!(
        out,
        "contract   {}",
        if contracts.is_empty() {
            "unknown".to_owned()
        } else {
            contracts.join(", ")
        }
    )?;
    writeln!(
        out,
        "reorders   {}",
        if d.reorders {
            "yes (its answers may reorder kept messages)"
        } else {
            "no"
        }
    )?;
    writeln!(
        out,
        "load       {:.1} ms, {}",
        super::ms(p.load_time()),
        super::compile_words(p)
    )?;
    for (title, text) in [
        ("config example", &d.config_example),
        ("config schema", &d.config_schema),
    ] {
        match text {
            Some(text) => {
                writeln!(out, "\n{title}:")?;
                for line in pretty(text).lines() {
                    writeln!(out, "  {}", safe(line))?;
                }
            }
            None => writeln!(out, "{title}: none published")?,
        }
    }

    let (host, wasi): (Vec<&ImportView<'_>>, Vec<&ImportView<'_>>) =
        imports.iter().partition(|i| i.host);
    writeln!(
        out,
        "\nimports of the agent-host interface (always allowed):"
    )?;
    if host.is_empty() {
        writeln!(out, "  none")?;
    }
    for i in &host {
        writeln!(out, "  {}", i.import.name)?;
        if i.import.name.starts_with("agent-host:history/services@") {
            writeln!(
                out,
                "    (its host services are each closed unless granted: --allow-summarize, \
                 --allow-count-tokens, --allow-memory)"
            )?;
        }
    }
    if wasi.is_empty() {
        writeln!(out, "WASI imports: none (it needs no grant)")?;
    } else {
        writeln!(out, "WASI imports (closed unless granted):")?;
        let width = wasi.iter().map(|i| i.import.name.len()).max().unwrap_or(0);
        for i in &wasi {
            let needs = match i.grant {
                Some(g) => format!("needs {g}: "),
                None => String::new(),
            };
            writeln!(out, "  {:<width$}  {needs}{}", i.import.name, i.served)?;
        }
        let grants = grants(&imports);
        if !grants.is_empty() {
            writeln!(out, "to grant everything it imports: {}", grants.join(" "))?;
        }
    }
    if let Some(exports) = &exports {
        writeln!(out, "exports:")?;
        for e in exports {
            writeln!(out, "  {e}")?;
        }
    }
    Ok(())
}

/// One import, with what a user must grant for it to work and how the host
/// serves it.
struct ImportView<'a> {
    import: &'a Import,
    /// An import of the agent-host interface (always allowed).
    host: bool,
    /// The flag that opens it.
    grant: Option<&'static str>,
    /// How the host serves it, in words.
    served: &'static str,
}

impl<'a> ImportView<'a> {
    fn of(import: &'a Import) -> Self {
        let grant = match import.serves {
            ImportUse::Host => {
                return ImportView {
                    import,
                    host: true,
                    grant: None,
                    served: "always allowed",
                };
            }
            ImportUse::Wasi { grant } => grant,
        };
        let iface = import
            .name
            .strip_prefix("wasi:")
            .and_then(|n| n.split_once('@'))
            .map_or(import.name.as_str(), |(iface, _)| iface);
        let served = match iface {
            "random/insecure-seed" => "answers a fixed seed without it",
            _ if iface.starts_with("clocks/") || iface.starts_with("random/") => {
                "traps when called without it"
            }
            _ if iface.starts_with("filesystem/") => "sees no directory without it (read-only)",
            "cli/stdout" | "cli/stderr" => "captured into the report log",
            "cli/stdin" => "served closed: reads end at once",
            "cli/environment" => "served empty: no variables, no arguments",
            "cli/exit" => "served: exiting ends the call as a failure",
            _ if iface.starts_with("cli/terminal-") => "served: never a terminal",
            _ if iface.starts_with("io/") => "served (streams and polling)",
            _ if iface.starts_with("sockets/") => "refused: no network is ever granted",
            _ => "refused",
        };
        ImportView {
            import,
            host: false,
            grant,
            served,
        }
    }

    fn json(&self) -> Value {
        json!({
            "name": self.import.name,
            "interface": if self.host { "agent-host" } else { "wasi" },
            "grant": self.grant,
            "served": self.served,
        })
    }
}

/// Every grant some import needs, each once, `--allow-dir` with its argument.
fn grants(imports: &[ImportView<'_>]) -> Vec<String> {
    let mut grants: Vec<String> = Vec::new();
    for g in imports.iter().filter_map(|i| i.grant) {
        let flag = if g == "--allow-dir" {
            "--allow-dir PATH".to_owned()
        } else {
            g.to_owned()
        };
        if !grants.contains(&flag) {
            grants.push(flag);
        }
    }
    grants
}

/// The contract versions (`agent-host:history@0.1.0`) the component imports
/// or exports, each once.
fn contracts(p: &Processor, exports: &[String]) -> Vec<String> {
    let names = p
        .imports()
        .iter()
        .map(|i| i.name.as_str())
        .chain(exports.iter().map(String::as_str));
    let mut out: Vec<String> = Vec::new();
    for name in names {
        let Some((_, version)) = name
            .strip_prefix("agent-host:history/")
            .and_then(|rest| rest.split_once('@'))
        else {
            continue;
        };
        let contract = format!("agent-host:history@{version}");
        if !out.contains(&contract) {
            out.push(contract);
        }
    }
    out
}

/// The names of a component's exports, read from its embedded types; `None`
/// when they cannot be decoded (the runtime has already checked that it
/// exports a processor).
fn exports_of(bytes: &[u8]) -> Option<Vec<String>> {
    match wit_component::decode(bytes) {
        Ok(wit_component::DecodedWasm::Component(resolve, world)) => Some(
            resolve.worlds[world]
                .exports
                .keys()
                .map(|k| resolve.name_world_key(k))
                .collect(),
        ),
        Ok(wit_component::DecodedWasm::WitPackage(..)) => None,
        Err(e) => {
            tracing::debug!("cannot decode the component's exports: {e:#}");
            None
        }
    }
}

/// `text` as JSON when it parses, else as a string.
fn json_or_text(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

/// `text` pretty-printed when it is JSON, else as it is (see
/// [`agent_host_core::format::to_pretty`]: a deeply nested document comes
/// out compact rather than inflated by its indentation).
fn pretty(text: &str) -> String {
    serde_json::from_str::<Value>(text)
        .ok()
        .and_then(|v| agent_host_core::format::to_pretty(&v).ok())
        .unwrap_or_else(|| text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deeply_nested_schema_is_not_inflated_by_pretty_printing() {
        let nested = format!("{}{}", "[".repeat(120), "]".repeat(120));
        assert!(pretty(&nested).len() <= nested.len() * 4 + 4096);
        let flat = r#"{"type":"object","properties":{"turns":{"type":"integer"}}}"#;
        assert!(
            pretty(flat).contains("\n  \"properties\""),
            "{}",
            pretty(flat)
        );
    }
}
