//! `sessions info`: what a session holds (roles, tool calls, tokens, first
//! and last message, checkpoints) and the files it is stored in.

use super::*;

pub(super) fn info(args: &InfoArgs, spec: &str, out: &mut dyn Write) -> Result<()> {
    let store = open_existing(spec)?;
    let meta = args.name.find(store.as_deref(), spec)?;
    let history = load(store.as_deref().context("the store vanished")?, &meta)?;
    let meta = &history.meta;
    let messages = &history.messages;
    let counter = HeuristicCounter::default();
    let tokens = agent_host_core::tokens::total(messages, &counter);
    let mut roles: BTreeMap<&str, usize> = BTreeMap::new();
    for m in messages {
        *roles.entry(m.role.as_str()).or_default() += 1;
    }
    let pairing = ToolPairing::of(messages);
    let first = messages.iter().filter_map(|m| m.timestamp).min();
    let last = messages.iter().filter_map(|m| m.timestamp).max();
    let files = session_files(spec, meta);
    let warnings: Vec<String> = history.warnings.iter().map(ToString::to_string).collect();

    if args.json {
        let mut value = session_json(meta);
        value["message_count"] = json!(messages.len());
        value["roles"] = json!(roles);
        value["tool_calls"] = json!({
            "calls": pairing.calls,
            "answered": pairing.answered,
            "unanswered": pairing.unanswered.len(),
            "orphan_results": pairing.orphans.len(),
        });
        value["tokens"] = json!(tokens);
        value["first_message"] = json!(first);
        value["last_message"] = json!(last);
        value["checkpoints"] = json!(meta.checkpoints.len());
        value["store"] = json!(spec);
        value["files"] = Value::Object(
            files
                .iter()
                .map(|(label, path)| {
                    let size = std::fs::metadata(path).ok().map(|m| m.len());
                    ((*label).to_owned(), json!({"path": path, "bytes": size}))
                })
                .collect(),
        );
        value["warnings"] = json!(warnings);
        writeln!(out, "{}", agent_host_core::format::to_pretty(&value)?)?;
        return Ok(());
    }
    writeln!(out, "id:          {}", meta.id)?;
    writeln!(
        out,
        "key:         {}",
        meta.key
            .as_deref()
            .map(shown)
            .unwrap_or(Cow::Borrowed("(none)"))
    )?;
    writeln!(out, "agent:       {}", shown(&meta.agent))?;
    writeln!(
        out,
        "title:       {}",
        meta.title
            .as_deref()
            .map(shown)
            .unwrap_or(Cow::Borrowed("(none)"))
    )?;
    writeln!(out, "created:     {} UTC", time(meta.created))?;
    writeln!(out, "updated:     {} UTC", time(meta.updated))?;
    let by_role: Vec<String> = roles.iter().map(|(r, n)| format!("{r} {n}")).collect();
    writeln!(
        out,
        "messages:    {}{}",
        messages.len(),
        if by_role.is_empty() {
            String::new()
        } else {
            format!(" ({})", by_role.join(", "))
        }
    )?;
    if let (Some(first), Some(last)) = (first, last) {
        writeln!(out, "spanning:    {} to {} UTC", time(first), time(last))?;
    }
    writeln!(
        out,
        "tool calls:  {}, answered: {}, unanswered: {}, orphan results: {}",
        pairing.calls,
        pairing.answered,
        pairing.unanswered.len(),
        pairing.orphans.len()
    )?;
    writeln!(out, "tokens:      about {tokens} (heuristic)")?;
    writeln!(out, "checkpoints: {}", meta.checkpoints.len())?;
    writeln!(out, "store:       {}", agent_host_store::redact(spec))?;
    for (label, path) in &files {
        let size = match std::fs::metadata(path) {
            Ok(m) if m.is_dir() => "folder".to_owned(),
            Ok(m) => format!("{} bytes", m.len()),
            Err(_) => "none".to_owned(),
        };
        writeln!(
            out,
            "{:<12} {} ({size})",
            format!("{label}:"),
            path.display()
        )?;
    }
    for warning in &warnings {
        writeln!(out, "warning:     {warning}")?;
    }
    Ok(())
}

/// The files that hold a session, labelled: the file store's log, metadata, state,
/// sidecar and media folder, or the SQLite database.
fn session_files(spec: &str, meta: &SessionMeta) -> Vec<(&'static str, PathBuf)> {
    if let Some(path) = spec.strip_prefix(SQLITE_PREFIX) {
        return vec![("database", PathBuf::from(path))];
    }
    if agent_host_store::is_postgres(spec) {
        return vec![("database", PathBuf::from(agent_host_store::redact(spec)))];
    }
    // The folder exists (the session was found in it): opening creates nothing.
    match agent_host_store::FileStore::open(spec).and_then(|s| s.files(&meta.reference())) {
        Ok(files) => vec![
            ("log", files.log),
            ("metadata", files.meta),
            ("state", files.state),
            ("sidecar", files.sidecar),
            ("media", files.media),
        ],
        Err(_) => Vec::new(),
    }
}
