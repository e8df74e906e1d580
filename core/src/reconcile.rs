//! A client's resent history against the stored log.
//!
//! A chat client (an OpenAI or Anthropic SDK, a framework) sends its whole
//! history with every request. The gateway stores each request's new
//! messages once: [`reconcile`] says how many of the client's messages the
//! log holds already, or where the client's history parts from the log (it
//! rewrote or rewound it), so that the caller opens a branch rather than
//! appending onto a history the client no longer has.
//!
//! Two messages are the same when what a model would read of them is: the
//! role, the text (plain content and text parts alike), images and files,
//! tool calls (ids, names, and arguments compared as JSON when they parse),
//! and a tool result's call id and error flag. Ids, timestamps, usage,
//! metadata and reasoning are not compared: clients drop or rewrite them
//! (Chat Completions has no field to send reasoning back in). Summary
//! messages the host wrote into the log are skipped, and so are the
//! messages it marked as its own ([`HOST_ONLY`]: the gateway's rounds of
//! memory-tool calls): the client never saw them.

use serde_json::Value;

use crate::message::{MediaRef, Message, Part, Role};

/// The metadata key (`"host_only": true`) of a message the host added to
/// a log that its client never saw: the calls to the memory tools the
/// gateway ran for the model, their results, and the answers that asked
/// for them. [`reconcile`] skips such messages, as it skips summaries; they
/// stay in the log, and in the views made from it.
pub const HOST_ONLY: &str = "host_only";

/// Whether `m` is a message the client never saw: a summary, or one marked
/// [`HOST_ONLY`].
pub fn unseen_by_client(m: &Message) -> bool {
    m.summary || m.metadata.get(HOST_ONLY) == Some(&Value::Bool(true))
}

/// How a client's history stands against the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reconciled {
    /// The log holds the client's first `stored` messages; the rest are new.
    Continues {
        /// How many of the client's messages are stored already.
        stored: usize,
    },
    /// The client's message `at` differs from the log's (or the client's
    /// history ends before the log's does: `at` is then its length).
    Diverged {
        /// The first client message the log does not hold there.
        at: usize,
    },
}

/// Compares `client` with `log` from their starts (see the [module
/// documentation](self)).
pub fn reconcile(log: &[Message], client: &[Message]) -> Reconciled {
    let mut stored = log.iter().filter(|m| !unseen_by_client(m));
    let mut at = 0;
    loop {
        match (stored.next(), client.get(at)) {
            (None, _) => return Reconciled::Continues { stored: at },
            (Some(_), None) => return Reconciled::Diverged { at },
            (Some(kept), Some(sent)) if same(kept, sent) => at += 1,
            (Some(_), Some(_)) => return Reconciled::Diverged { at },
        }
    }
}

/// Whether a model reads `a` and `b` alike (see the [module
/// documentation](self)).
pub fn same(a: &Message, b: &Message) -> bool {
    a.role == b.role
        && texts(a).eq(texts(b))
        && media(a).eq(media(b))
        && a.tool_calls.len() == b.tool_calls.len()
        && a.tool_calls.iter().zip(&b.tool_calls).all(|(x, y)| {
            x.id == y.id && x.name == y.name && same_arguments(&x.arguments, &y.arguments)
        })
        && (a.role != Role::Tool || (a.tool_call_id == b.tool_call_id && a.is_error == b.is_error))
}

/// A stable 64-bit fingerprint of what [`same`] compares, for keys that
/// must not change between releases (FNV-1a over a fixed encoding).
pub fn fingerprint(messages: &[Message]) -> u64 {
    let mut hash = Fnv::default();
    for m in messages {
        hash.field(m.role.as_str().as_bytes());
        for text in texts(m) {
            hash.field(text.as_bytes());
        }
        for (kind, place) in media(m) {
            hash.field(kind.as_bytes());
            hash.field(place.as_bytes());
        }
        for call in &m.tool_calls {
            hash.field(call.id.as_bytes());
            hash.field(call.name.as_bytes());
            hash.field(canonical_arguments(&call.arguments).as_bytes());
        }
        if m.role == Role::Tool {
            hash.field(m.tool_call_id.as_deref().unwrap_or("").as_bytes());
        }
        hash.field(b"\x1e");
    }
    hash.0
}

/// The non-empty texts of a message: its content, then its text parts.
fn texts(m: &Message) -> impl Iterator<Item = &str> {
    std::iter::once(m.content.as_str())
        .chain(m.parts.iter().filter_map(|p| match p {
            Part::Text { text } => Some(text.as_str()),
            _ => None,
        }))
        .filter(|t| !t.is_empty())
}

/// Images and files, as (kind, where).
fn media(m: &Message) -> impl Iterator<Item = (&'static str, &str)> {
    m.parts.iter().filter_map(|p| match p {
        Part::Text { .. } => None,
        Part::Image { source, .. } => Some(match source {
            MediaRef::Url(url) => ("image", url.as_str()),
            MediaRef::Path(path) => ("image-path", path.as_str()),
        }),
        Part::File { path, .. } => Some(("file", path.as_str())),
    })
}

fn same_arguments(a: &str, b: &str) -> bool {
    a == b || canonical_arguments(a) == canonical_arguments(b)
}

/// Tool arguments as compact JSON when they parse (Anthropic sends them
/// back as an object, so spacing is lost), else as written.
fn canonical_arguments(text: &str) -> std::borrow::Cow<'_, str> {
    match serde_json::from_str::<Value>(text) {
        Ok(value) => std::borrow::Cow::Owned(value.to_string()),
        Err(_) => std::borrow::Cow::Borrowed(text),
    }
}

struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    /// Hashes `bytes` with its length first, so fields cannot run together.
    fn field(&mut self, bytes: &[u8]) {
        for b in (bytes.len() as u64).to_le_bytes().iter().chain(bytes) {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn() -> Vec<Message> {
        let mut call = Message::assistant("");
        call.push_tool_call("c1", "read", r#"{"path": "a.rs"}"#);
        vec![
            Message::system("be brief"),
            Message::user("read a.rs"),
            call,
            Message::tool_result("c1", "read", "fn main() {}"),
            Message::assistant("It is empty."),
        ]
    }

    #[test]
    fn a_client_that_resends_the_log_and_more_continues_it() {
        let log = turn();
        let mut client = turn();
        client.push(Message::user("and b.rs?"));
        assert_eq!(
            reconcile(&log, &client),
            Reconciled::Continues { stored: 5 }
        );
        assert_eq!(reconcile(&[], &client), Reconciled::Continues { stored: 0 });
        assert_eq!(reconcile(&log, &log), Reconciled::Continues { stored: 5 });
    }

    #[test]
    fn what_clients_drop_or_rewrite_does_not_count() {
        let log = turn();
        let mut client = turn();
        // New ids, reasoning dropped, the text as a part, arguments respaced.
        for m in &mut client {
            m.id = format!("other-{}", m.id);
        }
        client[2].tool_calls[0].arguments = r#"{"path":"a.rs"}"#.into();
        client[4].content.clear();
        client[4].parts = vec![Part::Text {
            text: "It is empty.".into(),
        }];
        let mut with_reasoning = log.clone();
        with_reasoning[4].reasoning = Some(crate::message::Reasoning {
            text: "hm".into(),
            ..Default::default()
        });
        assert_eq!(
            reconcile(&with_reasoning, &client),
            Reconciled::Continues { stored: 5 }
        );
        assert_eq!(fingerprint(&log), fingerprint(&client));
    }

    #[test]
    fn summary_messages_of_the_host_are_skipped() {
        let mut log = turn();
        let mut summary = Message::assistant("Summary: they read a.rs");
        summary.summary = true;
        log.insert(2, summary);
        assert_eq!(
            reconcile(&log, &turn()),
            Reconciled::Continues { stored: 5 }
        );
    }

    #[test]
    fn the_hosts_own_rounds_are_skipped_and_nothing_else() {
        let mut log = turn();
        let host_only = |mut m: Message| {
            m.metadata.insert(HOST_ONLY.into(), Value::Bool(true));
            m
        };
        let mut search = Message::assistant("");
        search.push_tool_call("m1", "memory_search", r#"{"query": "a.rs"}"#);
        log.insert(2, host_only(search));
        log.insert(
            3,
            host_only(Message::tool_result("m1", "memory_search", "[]")),
        );
        assert_eq!(
            reconcile(&log, &turn()),
            Reconciled::Continues { stored: 5 }
        );
        // A mark that is not `true` hides nothing: the log parts there.
        log[2].metadata.insert(HOST_ONLY.into(), Value::from("yes"));
        assert_eq!(reconcile(&log, &turn()), Reconciled::Diverged { at: 2 });
    }

    #[test]
    fn a_rewritten_or_rewound_history_diverges_where_it_parts() {
        let log = turn();
        let mut edited = turn();
        edited[1] = Message::user("read b.rs");
        assert_eq!(reconcile(&log, &edited), Reconciled::Diverged { at: 1 });
        let mut other_call = turn();
        other_call[2].tool_calls[0].arguments = r#"{"path":"b.rs"}"#.into();
        assert_eq!(reconcile(&log, &other_call), Reconciled::Diverged { at: 2 });
        let rewound = &turn()[..4];
        assert_eq!(reconcile(&log, rewound), Reconciled::Diverged { at: 4 });
        assert_ne!(fingerprint(&log), fingerprint(&edited));
    }

    #[test]
    fn fingerprints_do_not_run_fields_together() {
        let a = [Message::user("ab"), Message::user("c")];
        let b = [Message::user("a"), Message::user("bc")];
        assert_ne!(fingerprint(&a), fingerprint(&b));
        // Fixed across releases: keys are made from it.
        assert_eq!(fingerprint(&[]), 0xcbf2_9ce4_8422_2325);
    }
}
