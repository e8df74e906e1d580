//! Copying every session from one store to another (`agent-host store
//! migrate FROM TO`), verified and resumable.
//!
//! Each session is loaded from the source and stored whole in the target
//! with [`SessionStore::import`] (same id, names, times, checkpoints and
//! messages), then loaded back from the target and compared: message count
//! and a SHA-256 digest of the messages and checkpoints must match. A
//! session the target already holds is compared the same way: equal, it is
//! skipped, so a run that was interrupted is resumed by running it again;
//! different (a copy cut short), it is deleted from the target and copied
//! again. A different session in the target with the same key is an error,
//! never overwritten.
//!
//! ```
//! use agent_host_core::Message;
//! use agent_host_store::{FileStore, NewSession, SessionStore, SqliteStore, migrate};
//!
//! let dir = tempfile::tempdir()?;
//! let from = FileStore::open(dir.path().join("files"))?;
//! let s = from.create(&NewSession::new("default").with_key("chat"))?.reference();
//! from.append(&s, &[Message::user("hi").with_id("m1")])?;
//! let to = SqliteStore::open(dir.path().join("sessions.db"))?;
//! let report = migrate::copy_all(&from, &to, &mut |_| {})?;
//! assert_eq!((report.copied, report.messages), (1, 1));
//! // Again: nothing to copy, everything verified.
//! let again = migrate::copy_all(&from, &to, &mut |_| {})?;
//! assert_eq!((again.copied, again.already_there), (0, 1));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use agent_host_core::Message;
use agent_host_core::format::jsonl;
use sha2::{Digest, Sha256};

use crate::{Result, SessionMeta, SessionStore, StoreError};

/// What a copy did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Sessions in the source.
    pub sessions: usize,
    /// Sessions copied by this run.
    pub copied: usize,
    /// Sessions the target held already, equal (a resumed run).
    pub already_there: usize,
    /// Sessions the target held in part, deleted and copied again.
    pub recopied: usize,
    /// Messages in the source's sessions.
    pub messages: u64,
    /// The SHA-256 over every session's digest, in the order copied (id
    /// order): equal for two stores holding the same sessions.
    pub digest: String,
    /// What the source's loads warned about (lines skipped).
    pub warnings: Vec<String>,
}

/// What happened to one session, for progress output.
#[derive(Clone, Debug)]
pub enum Step<'a> {
    /// Copied and verified.
    Copied(&'a SessionMeta),
    /// Already in the target, equal.
    AlreadyThere(&'a SessionMeta),
    /// In the target in part: deleted, copied again, verified.
    Recopied(&'a SessionMeta),
}

/// The digest of a session's content: its messages (as JSONL lines) and
/// checkpoints.
pub fn digest(messages: &[Message], meta: &SessionMeta) -> [u8; 32] {
    let mut hash = Sha256::new();
    let mut line = Vec::with_capacity(1024);
    for message in messages {
        line.clear();
        jsonl::write_line(message, &mut line);
        hash.update(&line);
    }
    hash.update(serde_json::to_vec(&meta.checkpoints).expect("checkpoints serialize"));
    hash.update(meta.id.as_bytes());
    hash.finalize().into()
}

/// Copies every session of `from` into `to`; see the module docs. `step`
/// hears of each session as it is done.
pub fn copy_all(
    from: &dyn SessionStore,
    to: &dyn SessionStore,
    step: &mut dyn FnMut(Step<'_>),
) -> Result<Report> {
    let scan = from.scan()?;
    let mut report = Report {
        warnings: scan.warnings.iter().map(ToString::to_string).collect(),
        ..Report::default()
    };
    let mut sessions = scan.sessions;
    sessions.sort_by_key(|meta| meta.id);
    let mut total = Sha256::new();
    for listed in &sessions {
        let session = listed.reference();
        let history = from.load(&session)?;
        report
            .warnings
            .extend(history.warnings.iter().map(ToString::to_string));
        let meta = &history.meta;
        let want = digest(&history.messages, meta);
        let count = history.messages.len() as u64;
        let mismatch = |found: &SessionMeta, messages: &[Message]| -> Option<String> {
            if messages.len() as u64 != count {
                Some(format!("{} messages, the source {count}", messages.len()))
            } else if digest(messages, found) != want {
                Some("the digests of the messages and checkpoints differ".into())
            } else if (
                found.agent.as_str(),
                found.key.as_deref(),
                found.title.as_deref(),
            ) != (
                meta.agent.as_str(),
                meta.key.as_deref(),
                meta.title.as_deref(),
            ) {
                Some("the agent, key or title differ".into())
            } else {
                None
            }
        };
        let mut recopy = false;
        if to.get(&session)?.is_some() {
            let there = to.load(&session)?;
            match mismatch(&there.meta, &there.messages) {
                None => {
                    report.already_there += 1;
                    report.messages += count;
                    total.update(want);
                    step(Step::AlreadyThere(meta));
                    continue;
                }
                Some(why) => {
                    tracing::info!(
                        "session {session}: the target holds it in part ({why}); copying it again"
                    );
                    to.delete(&session)?;
                    recopy = true;
                }
            }
        }
        to.import(meta, &history.messages).map_err(|e| match e {
            StoreError::AlreadyExists(taken) => StoreError::Backend {
                context: format!(
                    "session {session}: the target holds another session {taken}; nothing was overwritten"
                ),
                source: "delete or rename it there, then run the migration again".into(),
            },
            other => other,
        })?;
        let copied = to.load(&session)?;
        if let Some(why) = mismatch(&copied.meta, &copied.messages) {
            return Err(StoreError::Backend {
                context: format!("session {session}: the copy does not match the source"),
                source: why.into(),
            });
        }
        if !copied.warnings.is_empty() {
            return Err(StoreError::Backend {
                context: format!("session {session}: the copy loads with warnings"),
                source: copied
                    .warnings
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; ")
                    .into(),
            });
        }
        report.messages += count;
        total.update(want);
        if recopy {
            report.recopied += 1;
            step(Step::Recopied(meta));
        } else {
            report.copied += 1;
            step(Step::Copied(meta));
        }
    }
    report.sessions = sessions.len();
    report.digest = hex(&total.finalize());
    Ok(report)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
