//! `agent-host memory`: long-term memory from the command line: add a fact
//! (or extract facts from a history file), search, get, list, update,
//! delete. The memory lives in the same store as the sessions (`--store`):
//! `memory/changes.jsonl` in a folder store, the `memory_changes` table in a
//! SQLite one ([`agent_host_store::memory`]).
//!
//! Every command works in one user's memory (`--user`, default `default`)
//! with one agent (`--agent`, default `default`); `--json` prints the API's
//! shapes ([`agent_host_api::memory`]).

use std::io::Write;
use std::path::PathBuf;

use agent_host_api::memory::{
    MemoryAddResult, MemoryAdded, MemoryFact, MemoryHit, MemoryHits, MemoryList,
};
use agent_host_core::format::Format;
use agent_host_core::memory::{Fact, FactEdit, FactKind, Filter, Scope};
use agent_host_engine::transcript;
use agent_host_store::DEFAULT_AGENT;
use agent_host_store::memory::MemoryStore;
use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};

use crate::term;

/// The user whose memory a command works in when `--user` is not given.
pub const DEFAULT_USER: &str = "default";

/// `agent-host memory`'s options.
#[derive(Debug, Args)]
pub struct MemoryArgs {
    #[command(subcommand)]
    command: MemoryCommand,
    /// The user whose memory it is.
    #[arg(long, global = true, value_name = "USER", default_value = DEFAULT_USER)]
    user: String,
    /// The agent that remembers.
    #[arg(long, global = true, value_name = "AGENT", default_value = DEFAULT_AGENT)]
    agent: String,
    /// Print JSON (the server's shapes).
    #[arg(long, global = true)]
    json: bool,
}

#[derive(Debug, Subcommand)]
enum MemoryCommand {
    /// Add a fact, or extract facts from a history file with the offline extractor.
    ///
    /// A fact that restates a valid one adds nothing; one giving an attribute a new value
    /// (`--attribute`, or `I live in ...`, `my email is ...` when extracted) invalidates the
    /// older fact, which stays queryable (`search --all`, `get`).
    #[command(after_help = "Examples:\n  \
        agent-host memory add \"prefers tabs over spaces\" --user alice\n  \
        agent-host memory add \"lives in Porto\" --attribute \"lives in\" --value Porto --user alice\n  \
        agent-host memory add --from chat.jsonl --source-session s1 --user alice")]
    Add {
        /// The fact.
        #[arg(required_unless_present = "from", conflicts_with = "from")]
        text: Option<String>,
        /// What it is about (the user when not given).
        #[arg(long)]
        entity: Option<String>,
        /// The single-valued attribute it fills.
        #[arg(long, requires = "value")]
        attribute: Option<String>,
        /// The attribute's value.
        #[arg(long, requires = "attribute")]
        value: Option<String>,
        /// Keep it to this session only.
        #[arg(long)]
        session: Option<String>,
        /// Extract facts from this history (any format `inspect` reads; `-` for standard
        /// input).
        #[arg(long, value_name = "FILE")]
        from: Option<PathBuf>,
        /// The session the history or fact came from (its provenance).
        #[arg(long, value_name = "SESSION")]
        source_session: Option<String>,
        #[command(flatten)]
        limits: crate::commands::LimitArgs,
    },
    /// The facts that best match a query, best first.
    Search {
        /// What to look for.
        query: String,
        /// How many facts.
        #[arg(long, default_value_t = 10)]
        limit: usize,
        /// Include facts newer ones invalidated.
        #[arg(long)]
        all: bool,
        /// Only facts about (or naming) this entity.
        #[arg(long)]
        entity: Option<String>,
        /// Only facts kept to this session.
        #[arg(long)]
        session: Option<String>,
    },
    /// One fact by id, or everything about an entity (--entity), valid or not.
    Get {
        /// The fact's id.
        #[arg(required_unless_present = "entity", conflicts_with = "entity")]
        id: Option<String>,
        /// Everything about (or naming) this entity.
        #[arg(long)]
        entity: Option<String>,
    },
    /// Facts in the order recorded, valid or not.
    List {
        /// Only facts about (or naming) this entity.
        #[arg(long)]
        entity: Option<String>,
        /// Only facts kept to this session.
        #[arg(long)]
        session: Option<String>,
        /// Start after this fact (a page's `next`).
        #[arg(long, value_name = "ID")]
        after: Option<String>,
        /// How many facts (at most 1000).
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// Edit a fact.
    Update {
        /// The fact's id.
        id: String,
        /// The new text.
        #[arg(long)]
        text: Option<String>,
        /// The new entity.
        #[arg(long)]
        entity: Option<String>,
        /// The new attribute.
        #[arg(long)]
        attribute: Option<String>,
        /// The new value.
        #[arg(long)]
        value: Option<String>,
    },
    /// Forget a fact.
    Delete {
        /// The fact's id.
        id: String,
    },
}

/// Runs a `memory` subcommand on the store `spec`.
pub fn run(args: MemoryArgs, spec: &str, out: &mut dyn Write) -> Result<()> {
    let reads_only = !matches!(
        args.command,
        MemoryCommand::Add { .. } | MemoryCommand::Update { .. } | MemoryCommand::Delete { .. }
    );
    if reads_only && !agent_host_store::exists(spec) {
        // Reading never creates a store.
        return match args.command {
            MemoryCommand::Get { id: Some(id), .. } => {
                bail!(agent_host_store::StoreError::Memory(
                    agent_host_core::memory::MemoryError::NotFound(id)
                ))
            }
            _ => show_list(&[], None, args.json, out),
        };
    }
    let store = MemoryStore::open(spec).with_context(|| {
        format!(
            "cannot open the memory of the store {}",
            agent_host_store::redact(spec)
        )
    })?;
    let filter = |entity: Option<String>, session: Option<String>| Filter {
        user: args.user.clone(),
        agent: Some(args.agent.clone()),
        session,
        entity,
    };
    match args.command {
        MemoryCommand::Add {
            text,
            entity,
            attribute,
            value,
            session,
            from,
            source_session,
            limits,
        } => {
            let mut scope = Scope::new(args.user.clone(), args.agent.clone());
            scope.session = session;
            let added = match (text, from) {
                (Some(text), _) => {
                    let now = store.now();
                    let mut fact = Fact::new(
                        MemoryStore::new_id(),
                        scope,
                        entity.unwrap_or_else(|| args.user.clone()),
                        text,
                        now,
                    );
                    if attribute.is_some() {
                        fact.kind = FactKind::Attribute;
                    }
                    fact.attribute = attribute;
                    fact.value = value;
                    fact.source.session = source_session;
                    vec![store.add(fact)?]
                }
                (None, Some(path)) => {
                    let loaded = transcript::load(&path, None::<Format>, &limits.limits())?;
                    store.extract(
                        &scope,
                        source_session.as_deref(),
                        &loaded.transcript.messages,
                        &args.user,
                        &args.agent,
                    )?
                }
                (None, None) => bail!("give a fact, or --from FILE to extract facts from"),
            };
            if args.json {
                let result = MemoryAddResult {
                    added: added.iter().map(MemoryAdded::from).collect(),
                };
                serde_json::to_writer_pretty(&mut *out, &result)?;
                writeln!(out)?;
                return Ok(());
            }
            if added.is_empty() {
                writeln!(out, "no facts found")?;
            }
            for a in &added {
                let what = if a.duplicate {
                    "already known"
                } else {
                    "added"
                };
                writeln!(out, "{what}: {}", line(&MemoryFact::from(&a.fact)))?;
                for id in &a.invalidated {
                    writeln!(out, "  invalidated {id}")?;
                }
            }
            Ok(())
        }
        MemoryCommand::Search {
            query,
            limit,
            all,
            entity,
            session,
        } => {
            let found = store.search(&query, &filter(entity, session), limit, all)?;
            if args.json {
                let hits = MemoryHits {
                    hits: found
                        .iter()
                        .map(|f| MemoryHit {
                            fact: MemoryFact::from(&f.fact),
                            score: f.score,
                        })
                        .collect(),
                };
                serde_json::to_writer_pretty(&mut *out, &hits)?;
                writeln!(out)?;
                return Ok(());
            }
            if found.is_empty() {
                writeln!(out, "nothing found")?;
            }
            for f in &found {
                writeln!(out, "{:6.2}  {}", f.score, line(&MemoryFact::from(&f.fact)))?;
            }
            Ok(())
        }
        MemoryCommand::Get { id: Some(id), .. } => {
            let fact = MemoryFact::from(&store.get(&args.user, &id)?);
            if args.json {
                serde_json::to_writer_pretty(&mut *out, &fact)?;
                writeln!(out)?;
                return Ok(());
            }
            show_fact(&fact, out)
        }
        MemoryCommand::Get { id: None, entity } => {
            let facts = store.list(
                &filter(entity, None),
                None,
                agent_host_store::memory::MAX_PAGE,
            )?;
            let shown: Vec<MemoryFact> = facts.iter().map(MemoryFact::from).collect();
            show_list(&shown, None, args.json, out)
        }
        MemoryCommand::List {
            entity,
            session,
            after,
            limit,
        } => {
            let facts = store.list(&filter(entity, session), after.as_deref(), limit)?;
            let shown: Vec<MemoryFact> = facts.iter().map(MemoryFact::from).collect();
            let next = (shown.len() == limit.min(agent_host_store::memory::MAX_PAGE))
                .then(|| shown.last().map(|f| f.id.clone()))
                .flatten();
            show_list(&shown, next, args.json, out)
        }
        MemoryCommand::Update {
            id,
            text,
            entity,
            attribute,
            value,
        } => {
            if text.is_none() && entity.is_none() && attribute.is_none() && value.is_none() {
                bail!("nothing to change: give --text, --entity, --attribute or --value");
            }
            let edit = FactEdit {
                text,
                entity,
                attribute,
                value,
            };
            let fact = MemoryFact::from(&store.update(&args.user, &id, edit)?);
            if args.json {
                serde_json::to_writer_pretty(&mut *out, &fact)?;
                writeln!(out)?;
                return Ok(());
            }
            writeln!(out, "updated: {}", line(&fact))?;
            Ok(())
        }
        MemoryCommand::Delete { id } => {
            store.delete(&args.user, &id)?;
            if args.json {
                writeln!(out, "{}", serde_json::json!({ "deleted": id }))?;
            } else {
                writeln!(out, "deleted {id}")?;
            }
            Ok(())
        }
    }
}

/// `ID  entity: text` with `(invalid)` for a replaced fact; stored text made
/// safe for the terminal.
fn line(fact: &MemoryFact) -> String {
    let invalid = if fact.valid { "" } else { " (invalid)" };
    term::safe(&format!(
        "{}  {}: {}{invalid}",
        fact.id, fact.entity, fact.text
    ))
    .into_owned()
}

fn show_fact(fact: &MemoryFact, out: &mut dyn Write) -> Result<()> {
    writeln!(out, "{}", line(fact))?;
    let mut field = |name: &str, value: Option<String>| -> Result<()> {
        if let Some(value) = value {
            writeln!(out, "  {name}: {}", term::safe(&value))?;
        }
        Ok(())
    };
    field("kind", Some(fact.kind.clone()))?;
    field("attribute", fact.attribute.clone())?;
    field("value", fact.value.clone())?;
    field(
        "mentions",
        (!fact.mentions.is_empty()).then(|| fact.mentions.join(", ")),
    )?;
    field(
        "dates",
        (!fact.dates.is_empty()).then(|| fact.dates.join(", ")),
    )?;
    field("from session", fact.source_session.clone())?;
    field("from message", fact.source_message.clone())?;
    field("valid from", Some(fact.valid_from.to_rfc3339()))?;
    field("invalid from", fact.invalid_at.map(|t| t.to_rfc3339()))?;
    field("invalidated by", fact.invalidated_by.clone())?;
    Ok(())
}

fn show_list(
    facts: &[MemoryFact],
    next: Option<String>,
    json: bool,
    out: &mut dyn Write,
) -> Result<()> {
    if json {
        let list = MemoryList {
            facts: facts.to_vec(),
            next,
        };
        serde_json::to_writer_pretty(&mut *out, &list)?;
        writeln!(out)?;
        return Ok(());
    }
    if facts.is_empty() {
        writeln!(out, "no facts")?;
    }
    for fact in facts {
        writeln!(out, "{}", line(fact))?;
    }
    if let Some(next) = next {
        writeln!(out, "more: --after {next}")?;
    }
    Ok(())
}
