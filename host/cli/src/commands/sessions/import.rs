//! `sessions import`: a history file in any supported format, appended to a
//! session in durable batches of whole turns, with a progress bar on a
//! terminal.

use super::*;
use agent_host_core::message::derived_place;
use std::cell::OnceCell;
use std::collections::{HashMap, HashSet};

/// How many messages one append of `sessions import` carries at most (whole
/// turns only: a longer turn goes alone). Each append is one durable write.
const IMPORT_BATCH: usize = 256;

/// From how many messages `sessions import` shows a progress bar (when
/// standard error is a terminal).
const IMPORT_PROGRESS_FROM: usize = 2_000;

pub(super) fn import(args: &ImportArgs, spec: &str, out: &mut dyn Write) -> Result<()> {
    let loaded = transcript::load(&args.file, args.format, &args.limits.limits())?;
    let transcript = loaded.transcript;
    if transcript.messages.is_empty() {
        bail!("nothing to import: {} holds no messages", loaded.source);
    }
    crate::report_left_out(&transcript);
    let messages = transcript.messages;
    let store = open_store(spec)?;
    let name = SessionName {
        session: args.session.clone(),
        agent: args.agent.clone(),
    };
    let by_id = Uuid::parse_str(&args.session)
        .ok()
        .map(|id| store.get(&SessionRef::Id(id)))
        .transpose()?
        .flatten();
    let meta = match by_id {
        Some(meta) => meta,
        None => {
            let mut new = NewSession::new(name.agent.clone()).with_key(name.session.clone());
            new.title = args.title.clone().or(transcript.title);
            store
                .get_or_create(&new)
                .with_context(|| format!("cannot open session {:?}", args.session))?
                .meta
        }
    };
    let session = meta.reference();

    // Importing is idempotent: a message whose id the session holds already
    // (ids are the source's, or derived from position and text) is not
    // appended again, so importing a file twice, or a log that grew since,
    // adds only what is new. A derived id is also looked for by its place
    // (`derived_place`: versions before XXH3 gave the same place another
    // hash) with the same text, so a document imported by one of them is
    // not imported again.
    let read = messages.len();
    let messages: Vec<Message> = if meta.message_count > 0 {
        let held = store
            .load(&session)
            .with_context(|| format!("cannot load session {}", describe(&meta)))?;
        let ids: HashSet<&str> = held.messages.iter().map(|m| m.id.as_str()).collect();
        // The held messages by place, made only for a message whose id the
        // session does not hold (a log imported by this version has none).
        let places = OnceCell::new();
        let held_at_its_place = |m: &Message| {
            let Some(place) = derived_place(&m.id) else {
                return false;
            };
            let places = places.get_or_init(|| {
                let mut places: HashMap<String, Vec<&Message>> = HashMap::new();
                for h in &held.messages {
                    if let Some(place) = derived_place(&h.id) {
                        places.entry(place).or_default().push(h);
                    }
                }
                places
            });
            places
                .get(&place)
                .is_some_and(|there| there.iter().any(|h| h.text() == m.text()))
        };
        messages
            .into_iter()
            .filter(|m| !ids.contains(m.id.as_str()) && !held_at_its_place(m))
            .collect()
    } else {
        messages
    };
    if messages.is_empty() {
        writeln!(
            out,
            "nothing new: the {read} messages of {} ({}) are in session {} already; it holds {} messages",
            loaded.source,
            loaded.format,
            describe(&meta),
            meta.message_count
        )?;
        return Ok(());
    }

    let progress = if messages.len() >= IMPORT_PROGRESS_FROM && io::stderr().is_terminal() {
        let bar = ProgressBar::with_draw_target(
            Some(messages.len() as u64),
            ProgressDrawTarget::stderr(),
        );
        bar.set_style(
            ProgressStyle::with_template("importing [{bar:40}] {pos}/{len} messages ({eta})")?
                .progress_chars("=> "),
        );
        bar
    } else {
        ProgressBar::hidden()
    };
    let mut done = 0;
    let mut last = meta.clone();
    for batch in batches(&messages, IMPORT_BATCH) {
        last = store.append(&session, batch).with_context(|| {
            format!(
                "cannot append to session {} after importing {done} of {} messages",
                describe(&meta),
                messages.len()
            )
        })?;
        done += batch.len();
        progress.set_position(done as u64);
    }
    progress.finish_and_clear();

    let sidechains: usize = transcript.sidechains.iter().map(Vec::len).sum();
    if sidechains > 0 {
        eprintln!(
            "left out: {sidechains} messages of {} subagent sidechains",
            transcript.sidechains.len()
        );
    }
    if !transcript.skipped.is_empty() {
        eprintln!(
            "left out: {} records that are not messages",
            transcript.skipped.len()
        );
    }
    let already = read - messages.len();
    let already = if already > 0 {
        format!(" ({already} were in it already)")
    } else {
        String::new()
    };
    writeln!(
        out,
        "imported {done} messages from {} ({}) into session {}{already}; it holds {} messages",
        loaded.source,
        loaded.format,
        describe(&last),
        last.message_count
    )?;
    Ok(())
}

/// Cuts `messages` into batches of whole turns (a turn starts at each user
/// message) of at most `max` messages; a longer turn is a batch of its own.
pub(super) fn batches(messages: &[Message], max: usize) -> Vec<&[Message]> {
    let mut out = Vec::new();
    let mut start = 0;
    // Where the current batch could be cut without splitting a turn.
    let mut turn_start = 0;
    for (i, m) in messages.iter().enumerate() {
        if i > start && m.role == Role::User {
            turn_start = i;
        }
        if i + 1 - start > max && turn_start > start {
            out.push(&messages[start..turn_start]);
            start = turn_start;
        }
    }
    if start < messages.len() {
        out.push(&messages[start..]);
    }
    out
}
