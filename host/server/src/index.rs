//! The server's index of sessions: every session's metadata and lifecycle
//! state in memory, ordered newest update first, so that a page costs the
//! page (a cursor is a position in the order), not a walk of the store.
//!
//! Built from one [`SessionStore::scan`](agent_host_store::SessionStore::scan)
//! at startup and kept current by the server's own writes and, when the
//! store has notifications (PostgreSQL), by what other instances announce
//! (see `peers.rs`): each announced session is read again from the store.
//! Otherwise a store written by another process at the same time is not
//! seen until the session is named (a lookup that misses the index asks the
//! store) or the server restarts.

use std::cmp::Reverse;
use std::collections::{BTreeSet, HashMap};
use std::sync::RwLock;
use std::time::Duration;

use agent_host_api::{SessionState, SessionView};
use agent_host_store::SessionMeta;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::error::ApiError;

/// What last happened to a session (its state when it is not idle).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// It was created (or found with no messages).
    Created,
    /// Messages were appended, or a turn ran.
    Active,
    /// A summary checkpoint was stored.
    Compacted,
}

/// One session in the index.
#[derive(Clone, Debug)]
struct Entry {
    view: SessionView,
    last: Change,
    idle: bool,
    last_activity: DateTime<Utc>,
    /// The channels seen, sorted, at most [`MAX_CHANNELS`].
    channels: Vec<String>,
}

impl Entry {
    fn state(&self) -> SessionState {
        match (self.idle, self.last) {
            (true, _) => SessionState::Idle,
            (false, Change::Created) => SessionState::Created,
            (false, Change::Active) => SessionState::Active,
            (false, Change::Compacted) => SessionState::Compacted,
        }
    }

    fn shown(&self) -> SessionView {
        let mut view = self.view.clone();
        view.state = Some(self.state());
        view.last_activity = Some(self.last_activity);
        view.channels.clone_from(&self.channels);
        view
    }
}

type Position = (Reverse<DateTime<Utc>>, Uuid);

#[derive(Default)]
struct Inner {
    by_id: HashMap<Uuid, Entry>,
    by_key: HashMap<(String, String), Uuid>,
    order: BTreeSet<Position>,
}

/// A state that changed, for a `state_changed` event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateChange {
    /// The session.
    pub id: Uuid,
    /// What it was.
    pub from: SessionState,
    /// What it is.
    pub to: SessionState,
}

/// The index; see the [module documentation](self).
pub struct Index {
    inner: RwLock<Inner>,
}

/// What a page asks for.
#[derive(Clone, Debug, Default)]
pub struct PageQuery {
    /// At most this many sessions.
    pub limit: usize,
    /// Start after this position (from a previous page's `next_cursor`).
    pub cursor: Option<String>,
    /// Only this agent's sessions.
    pub agent: Option<String>,
    /// Only sessions in this state.
    pub state: Option<SessionState>,
    /// Only sessions whose key, title, id or agent holds this text (any
    /// case).
    pub text: Option<String>,
    /// Only sessions that list this channel.
    pub channel: Option<String>,
}

impl Index {
    /// An index of `sessions`, all taken as idle when their last update is
    /// older than `idle_after` at `now`.
    pub fn new(sessions: Vec<SessionMeta>, idle_after: Duration, now: DateTime<Utc>) -> Self {
        let index = Index {
            inner: RwLock::new(Inner::default()),
        };
        {
            let mut inner = index.inner.write().expect("index lock");
            for meta in sessions {
                let last = if meta.message_count == 0 {
                    Change::Created
                } else {
                    Change::Active
                };
                let idle = is_idle(meta.updated, idle_after, now);
                inner.put(Entry {
                    view: SessionView::from(&meta),
                    last,
                    idle,
                    last_activity: meta.updated,
                    channels: meta.channels.clone(),
                });
            }
        }
        index
    }

    /// How many sessions the index holds.
    pub fn len(&self) -> usize {
        self.inner.read().expect("index lock").by_id.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The session with `id`, as the API shows it.
    pub fn get(&self, id: Uuid) -> Option<SessionView> {
        self.inner
            .read()
            .expect("index lock")
            .by_id
            .get(&id)
            .map(Entry::shown)
    }

    /// The id of `agent`'s session with `key`.
    pub fn by_key(&self, agent: &str, key: &str) -> Option<Uuid> {
        self.inner
            .read()
            .expect("index lock")
            .by_key
            .get(&(agent.to_owned(), key.to_owned()))
            .copied()
    }

    /// Records `meta` after `change` at `now`; returns the state change it
    /// made, if any (a new session is not a state change).
    pub fn record(
        &self,
        meta: &SessionMeta,
        change: Change,
        now: DateTime<Utc>,
    ) -> Option<StateChange> {
        let mut inner = self.inner.write().expect("index lock");
        let before = inner.remove(meta.id);
        let entry = Entry {
            view: SessionView::from(meta),
            last: change,
            idle: false,
            last_activity: now.max(meta.updated),
            channels: merged(meta, before.as_ref().map(|b| b.channels.as_slice())),
        };
        let to = entry.state();
        inner.put(entry);
        let from = before?.state();
        (from != to).then_some(StateChange {
            id: meta.id,
            from,
            to,
        })
    }

    /// Records that `id` was used (read by a turn) without a change to its
    /// metadata; returns the state change (an idle session wakes up).
    pub fn touch(&self, id: Uuid, now: DateTime<Utc>) -> Option<StateChange> {
        let mut inner = self.inner.write().expect("index lock");
        let entry = inner.by_id.get_mut(&id)?;
        let from = entry.state();
        entry.idle = false;
        entry.last_activity = entry.last_activity.max(now);
        let to = entry.state();
        (from != to).then_some(StateChange { id, from, to })
    }

    /// Takes `meta` as another instance left it: its facts change, its
    /// state here does not (a session new here is `created` or `active`).
    pub fn refresh(&self, meta: &SessionMeta) {
        let mut inner = self.inner.write().expect("index lock");
        let entry = match inner.remove(meta.id) {
            Some(before) => Entry {
                view: SessionView::from(meta),
                last_activity: before.last_activity.max(meta.updated),
                channels: merged(meta, Some(&before.channels)),
                ..before
            },
            None => Entry {
                view: SessionView::from(meta),
                last: if meta.message_count == 0 {
                    Change::Created
                } else {
                    Change::Active
                },
                idle: false,
                last_activity: meta.updated,
                channels: meta.channels.clone(),
            },
        };
        inner.put(entry);
    }

    /// Adds the channels of `id`'s messages to those it lists.
    pub fn add_channels<'a>(&self, id: Uuid, channels: impl IntoIterator<Item = &'a str>) {
        let mut inner = self.inner.write().expect("index lock");
        let Some(entry) = inner.by_id.get_mut(&id) else {
            return;
        };
        agent_host_store::add_channels(&mut entry.channels, channels);
    }

    /// Forgets every session but those in `kept` (after a full read of the
    /// store); returns how many were forgotten.
    pub fn retain(&self, kept: &std::collections::HashSet<Uuid>) -> usize {
        let mut inner = self.inner.write().expect("index lock");
        let gone: Vec<Uuid> = inner
            .by_id
            .keys()
            .filter(|id| !kept.contains(id))
            .copied()
            .collect();
        for id in &gone {
            inner.remove(*id);
        }
        gone.len()
    }

    /// Forgets a deleted session.
    pub fn forget(&self, id: Uuid) -> Option<SessionView> {
        let mut inner = self.inner.write().expect("index lock");
        inner.remove(id).map(|e| e.shown())
    }

    /// Marks sessions with no activity for `idle_after` idle; returns what changed.
    pub fn sweep(&self, idle_after: Duration, now: DateTime<Utc>) -> Vec<StateChange> {
        let mut inner = self.inner.write().expect("index lock");
        let mut changes = Vec::new();
        for (id, entry) in &mut inner.by_id {
            if !entry.idle && is_idle(entry.last_activity, idle_after, now) {
                let from = entry.state();
                entry.idle = true;
                changes.push(StateChange {
                    id: *id,
                    from,
                    to: SessionState::Idle,
                });
            }
        }
        changes
    }

    /// A page of sessions, newest update first, and the cursor of the next
    /// page when there is one.
    pub fn page(&self, query: &PageQuery) -> Result<(Vec<SessionView>, Option<String>), ApiError> {
        let start = match &query.cursor {
            Some(cursor) => Some(parse_cursor(cursor)?),
            None => None,
        };
        let inner = self.inner.read().expect("index lock");
        let range = match start {
            Some(position) => inner.order.range((
                std::ops::Bound::Excluded(position),
                std::ops::Bound::Unbounded,
            )),
            None => inner.order.range(..),
        };
        let mut sessions = Vec::with_capacity(query.limit);
        let mut next = None;
        let text = query.text.as_deref().map(str::to_lowercase);
        for position in range {
            let entry = &inner.by_id[&position.1];
            if query.agent.as_ref().is_some_and(|a| *a != entry.view.agent)
                || query.state.is_some_and(|s| s != entry.state())
                || text.as_deref().is_some_and(|t| !mentions(&entry.view, t))
                || query
                    .channel
                    .as_ref()
                    .is_some_and(|c| !entry.channels.contains(c))
            {
                continue;
            }
            if sessions.len() == query.limit {
                // One more matches: there is a next page.
                next = sessions
                    .last()
                    .map(|v: &SessionView| cursor_of(v.updated, v.id));
                break;
            }
            sessions.push(entry.shown());
        }
        Ok((sessions, next))
    }
}

impl Inner {
    fn put(&mut self, entry: Entry) {
        let id = entry.view.id;
        if let Some(key) = &entry.view.key {
            self.by_key
                .insert((entry.view.agent.clone(), key.clone()), id);
        }
        self.order.insert((Reverse(entry.view.updated), id));
        self.by_id.insert(id, entry);
    }

    fn remove(&mut self, id: Uuid) -> Option<Entry> {
        let entry = self.by_id.remove(&id)?;
        if let Some(key) = &entry.view.key {
            self.by_key.remove(&(entry.view.agent.clone(), key.clone()));
        }
        self.order.remove(&(Reverse(entry.view.updated), id));
        Some(entry)
    }
}

/// Whether `view`'s key, title, id or agent holds `text` (lower case).
fn mentions(view: &SessionView, text: &str) -> bool {
    [
        view.key.as_deref(),
        view.title.as_deref(),
        Some(view.agent.as_str()),
    ]
    .into_iter()
    .flatten()
    .any(|field| field.to_lowercase().contains(text))
        || view.id.to_string().contains(text)
}

fn is_idle(last: DateTime<Utc>, idle_after: Duration, now: DateTime<Utc>) -> bool {
    chrono::TimeDelta::from_std(idle_after)
        .ok()
        .and_then(|d| now.checked_sub_signed(d))
        .is_some_and(|cutoff| last <= cutoff)
}

/// A cursor: the position of the last session of a page.
fn cursor_of(updated: DateTime<Utc>, id: Uuid) -> String {
    format!(
        "{}_{}",
        updated.timestamp_nanos_opt().unwrap_or(i64::MAX),
        id.simple()
    )
}

fn parse_cursor(cursor: &str) -> Result<Position, ApiError> {
    let bad = || {
        ApiError::invalid(
            "cursor",
            format!(
                "{cursor:?} is not a cursor this server gave; pass a page's next_cursor as it is"
            ),
        )
    };
    let (nanos, id) = cursor.split_once('_').ok_or_else(bad)?;
    let nanos: i64 = nanos.parse().map_err(|_| bad())?;
    let id = Uuid::try_parse(id).map_err(|_| bad())?;
    Ok((Reverse(DateTime::from_timestamp_nanos(nanos)), id))
}

/// The channels `meta` keeps and those the index had seen of it.
fn merged(meta: &SessionMeta, before: Option<&[String]>) -> Vec<String> {
    let mut channels = meta.channels.clone();
    agent_host_store::add_channels(
        &mut channels,
        before.unwrap_or_default().iter().map(String::as_str),
    );
    channels
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(n: i64, agent: &str) -> SessionMeta {
        let at = DateTime::from_timestamp(1_700_000_000 + n, 0).unwrap();
        SessionMeta {
            id: Uuid::from_u128(n as u128),
            key: Some(format!("k{n}")),
            title: None,
            agent: agent.into(),
            worker_id: None,
            workspace_id: None,
            created: at,
            updated: at,
            message_count: u64::from(n % 2 == 0),
            checkpoints: Vec::new(),
            channels: Vec::new(),
        }
    }

    fn now() -> DateTime<Utc> {
        DateTime::from_timestamp(1_700_000_100, 0).unwrap()
    }

    #[test]
    fn pages_follow_cursors_without_gaps_or_repeats() {
        let index = Index::new(
            (0..25).map(|n| meta(n, "a")).collect(),
            Duration::from_secs(3600),
            now(),
        );
        let mut seen = Vec::new();
        let mut cursor = None;
        loop {
            let (page, next) = index
                .page(&PageQuery {
                    limit: 7,
                    cursor: cursor.clone(),
                    ..PageQuery::default()
                })
                .unwrap();
            seen.extend(page.iter().map(|v| v.key.clone().unwrap()));
            // A session made while paging goes to the front: not seen again.
            index.record(&meta(100 + seen.len() as i64, "a"), Change::Created, now());
            match next {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        let expected: Vec<_> = (0..25).rev().map(|n| format!("k{n}")).collect();
        assert_eq!(seen, expected);
    }

    #[test]
    fn filters_and_states() {
        let index = Index::new(
            (0..10)
                .map(|n| meta(n, if n < 5 { "a" } else { "b" }))
                .collect(),
            Duration::from_secs(50),
            now(),
        );
        let page = |agent: Option<&str>, state| {
            index
                .page(&PageQuery {
                    limit: 200,
                    agent: agent.map(Into::into),
                    state,
                    ..PageQuery::default()
                })
                .unwrap()
                .0
        };
        assert_eq!(page(Some("b"), None).len(), 5);
        // Sessions updated 100 s before `now` with an idle time of 50 s are idle.
        assert_eq!(page(None, Some(SessionState::Idle)).len(), 10);
        let change = index.touch(Uuid::from_u128(4), now()).unwrap();
        assert_eq!(
            (change.from, change.to),
            (SessionState::Idle, SessionState::Active)
        );
        assert_eq!(page(None, Some(SessionState::Active)).len(), 1);
        let later = now() + chrono::TimeDelta::seconds(60);
        let swept = index.sweep(Duration::from_secs(50), later);
        assert_eq!(swept.len(), 1);
        assert_eq!(swept[0].to, SessionState::Idle);
        assert!(index.sweep(Duration::from_secs(50), later).is_empty());
    }

    #[test]
    fn a_bad_cursor_names_the_field() {
        let index = Index::new(Vec::new(), Duration::from_secs(1), now());
        for cursor in [
            "",
            "abc",
            "12_notauuid",
            "x_00000000000000000000000000000000",
        ] {
            let e = index
                .page(&PageQuery {
                    limit: 1,
                    cursor: Some(cursor.into()),
                    ..PageQuery::default()
                })
                .unwrap_err();
            assert!(e.message.starts_with("cursor:"), "{e}");
        }
    }
}
