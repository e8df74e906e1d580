//! The context report: how full the next request would be, and how close
//! each summarization trigger is. `agent-host context --session KEY` prints
//! it; `/context` in `chat` prints the same.
//!
//! It runs core's pipeline without a summarizer and without processors, so
//! it changes nothing and needs no model: the figures are those of the view
//! the next turn would start from.

use std::fmt::Write as _;

use agent_host_core::Role;
use agent_host_core::pipeline::Compaction;
use agent_host_store::SessionMeta;
use anyhow::{Context, Result};
use serde_json::Value;

/// The report as text, one fact a line.
pub fn text(meta: &SessionMeta, c: &Compaction) -> String {
    let u = &c.report.usage;
    let v = &u.view;
    let mut out = String::new();
    let name = meta
        .key
        .as_deref()
        .or(meta.title.as_deref())
        .map_or_else(|| meta.id.to_string(), str::to_owned);
    let _ = writeln!(
        out,
        "session {name} ({} messages stored, {} checkpoint(s))",
        meta.message_count,
        meta.checkpoints.len()
    );
    let used = u64::from(v.total());
    let window = u64::from(u.context_limit);
    let _ = writeln!(
        out,
        "context: {used} of {window} tokens ({:.1}%), {} reserved for the answer, {} for tool definitions",
        agent_host_api::percent(used, window),
        u.response_reserve,
        u.tool_definitions,
    );
    let _ = writeln!(
        out,
        "  system prompt {:>8} tokens\n  summary       {:>8} tokens (cap {})\n  recent        {:>8} tokens\n  available     {:>8} tokens, {} left",
        v.system,
        v.summary,
        v.summary_cap,
        v.recent,
        v.available,
        v.available.saturating_sub(v.total()),
    );
    let recent = c
        .view
        .iter()
        .filter(|m| !m.summary && m.role != Role::System)
        .count();
    let _ = writeln!(
        out,
        "view: {} messages ({recent} recent), {} left out for the budget",
        u.messages_in_view, v.left_out
    );
    let _ = writeln!(
        out,
        "since the last summary: {} messages, {} tokens",
        u.messages_since_summary, u.tokens_since_summary
    );
    if u.triggers.is_empty() {
        let _ = writeln!(out, "summarization: off");
    } else {
        let _ = writeln!(out, "summarization triggers:");
        for t in &u.triggers {
            let status = if t.current >= t.limit {
                "fires on the next turn".to_owned()
            } else {
                format!("{} to go", t.limit - t.current)
            };
            let _ = writeln!(
                out,
                "  {:<9} {:>8} / {:<8} ({:>5.1}%)  {status}",
                t.name, t.current, t.limit, t.percent
            );
        }
    }
    if !c.report.pruned.is_empty() {
        let _ = writeln!(
            out,
            "pruning: {} large tool result(s) would be trimmed",
            c.report.pruned.len()
        );
    }
    for d in &c.report.doom_loops {
        let _ = writeln!(
            out,
            "doom loop: {} called {} times in a row with the same arguments",
            d.tool, d.count
        );
    }
    out
}

/// The report as JSON.
pub fn json(meta: &SessionMeta, c: &Compaction) -> Value {
    serde_json::to_value(agent_host_api::ContextReport::new(meta, c))
        .expect("a context report is plain data")
}

/// Runs `agent-host context`: the report of the named session, as text or
/// JSON, under the effective configuration.
pub fn run(
    name: &crate::commands::sessions::SessionName,
    as_json: bool,
    settings: &agent_host_config::Settings,
    out: &mut dyn std::io::Write,
) -> Result<()> {
    let store = crate::commands::sessions::open_existing(&settings.store)?;
    let meta = name.find(store.as_deref(), &settings.store)?;
    let store = store.context("the store vanished")?;
    let (meta, compaction) = agent_host_engine::context_report(
        store.as_ref(),
        &meta.reference(),
        &settings.pipeline_config(),
    )?;
    if as_json {
        writeln!(
            out,
            "{}",
            agent_host_core::format::to_pretty(&json(&meta, &compaction))?
        )?;
    } else {
        write!(out, "{}", text(&meta, &compaction))?;
    }
    Ok(())
}
