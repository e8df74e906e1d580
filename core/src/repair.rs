//! Repair of tool-call pairing: the first stage of compaction.
//!
//! Real histories break the provider rules: a view that starts inside a tool
//! exchange, a crash between a call and its result, a result logged twice, a
//! result logged after the user spoke again. [`repair`] makes the history pass
//! [`crate::validate::validate`] and reports every change:
//!
//! - tool results before any assistant message are dropped (leading orphans);
//! - results whose call appears nowhere before them are dropped (orphans);
//! - a second result for one call is dropped;
//! - a result separated from its call by other messages is moved back next to
//!   its call;
//! - a call left without a result (an interrupted run) is closed with a
//!   synthetic result marked interrupted;
//! - tool calls on messages that are not the assistant's, repeated call ids
//!   within one message, and reasoning on messages that are not the
//!   assistant's are removed.
//!
//! Repair is idempotent: a repaired history needs no further repair.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use crate::message::{Message, Role};
use crate::stop::{StopCheck, Stopped};

/// The text of a synthetic result that closes an interrupted call.
pub const INTERRUPTED_RESULT: &str =
    "[interrupted: the tool call was not completed, no result was recorded]";

/// The metadata key set on synthetic interrupted results.
pub const INTERRUPTED_KEY: &str = "interrupted";

/// One change made by [`repair`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Repair {
    /// A tool result before any assistant message was dropped.
    DroppedLeadingOrphan {
        /// The dropped message.
        id: String,
    },
    /// A tool result answering no earlier call was dropped.
    DroppedOrphan {
        /// The dropped message.
        id: String,
    },
    /// A second result for one call was dropped.
    DroppedDuplicateResult {
        /// The dropped message.
        id: String,
        /// The call it named.
        call_id: String,
    },
    /// A result was moved back next to its call.
    MovedResult {
        /// The moved message.
        id: String,
        /// The call it answers.
        call_id: String,
    },
    /// A call without a result was closed with a synthetic interrupted result.
    ClosedInterruptedCall {
        /// The call.
        call_id: String,
        /// The id of the synthetic result.
        result_id: String,
    },
    /// Tool calls were removed from a message that may not carry them, or a
    /// repeated call id was removed from one message.
    RemovedToolCalls {
        /// The message.
        id: String,
        /// How many calls were removed.
        count: usize,
    },
    /// A `tool_call_id` was removed from a message that is not a tool result.
    RemovedStrayCallId {
        /// The message.
        id: String,
    },
    /// Reasoning was removed from a message that is not the assistant's.
    RemovedDetachedReasoning {
        /// The message.
        id: String,
    },
}

impl std::fmt::Display for Repair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Repair::DroppedLeadingOrphan { id } => {
                write!(
                    f,
                    "dropped tool result {id}: it comes before any assistant message"
                )
            }
            Repair::DroppedOrphan { id } => {
                write!(
                    f,
                    "dropped tool result {id}: no earlier message made its call"
                )
            }
            Repair::DroppedDuplicateResult { id, call_id } => {
                write!(
                    f,
                    "dropped tool result {id}: a second result for call {call_id}"
                )
            }
            Repair::MovedResult { id, call_id } => {
                write!(f, "moved tool result {id} back next to its call {call_id}")
            }
            Repair::ClosedInterruptedCall { call_id, result_id } => write!(
                f,
                "closed interrupted call {call_id} with the synthetic result {result_id}"
            ),
            Repair::RemovedToolCalls { id, count } => {
                write!(f, "removed {count} tool call(s) from message {id}")
            }
            Repair::RemovedStrayCallId { id } => {
                write!(
                    f,
                    "removed the tool call id of message {id}, which is not a tool result"
                )
            }
            Repair::RemovedDetachedReasoning { id } => {
                write!(
                    f,
                    "removed reasoning from message {id}, which is not the assistant's"
                )
            }
        }
    }
}

/// Repairs `messages` so that they pass validation; returns the repaired
/// history and what was changed, in order.
///
/// ```
/// use agent_host_core::Message;
/// use agent_host_core::repair::{repair, Repair};
/// use agent_host_core::validate::validate;
///
/// let mut call = Message::assistant("").with_id("a1");
/// call.push_tool_call("c1", "deploy", "{}");
/// // The run crashed before the tool answered.
/// let (history, changes) = repair(vec![Message::user("deploy"), call]);
/// assert!(validate(&history).is_empty());
/// assert!(matches!(changes[0], Repair::ClosedInterruptedCall { .. }));
/// ```
pub fn repair(messages: Vec<Message>) -> (Vec<Message>, Vec<Repair>) {
    match repair_until(messages, &mut StopCheck::never()) {
        Ok(repaired) => repaired,
        Err(Stopped) => unreachable!("a check that never stops stopped"),
    }
}

/// [`repair`], giving up with [`Stopped`] when `stop` says so (the
/// messages are dropped then): for a caller that must finish within a
/// deadline.
///
/// A few passes, each linear in the messages and tool calls.
pub fn repair_until(
    messages: Vec<Message>,
    stop: &mut StopCheck<'_>,
) -> Result<(Vec<Message>, Vec<Repair>), Stopped> {
    let mut changes = Vec::new();
    let mut messages = messages;
    for m in &mut messages {
        stop.steps(1 + m.tool_calls.len())?;
        clean_message(m, &mut changes);
    }
    let assignment = assign_results(&messages, &mut changes, stop)?;
    if assignment.keeps_order(&messages) {
        // Every result already follows its call and every call has its
        // result: the rebuild would give back the same sequence.
        return Ok((messages, changes));
    }
    let out = rebuild(messages, &assignment, &mut changes, stop)?;
    Ok((out, changes))
}

/// The repaired sequence: each kept result right after the message that
/// made its call, in result order, then a synthetic result for each call
/// left without one; dropped results are left out.
fn rebuild(
    messages: Vec<Message>,
    assignment: &Assignment,
    changes: &mut Vec<Repair>,
    stop: &mut StopCheck<'_>,
) -> Result<Vec<Message>, Stopped> {
    let mut results: HashMap<usize, Vec<Message>> = HashMap::new();
    let mut slots: Vec<Option<Message>> = messages.into_iter().map(Some).collect();
    for (result_index, owner) in &assignment.owner {
        stop.step()?;
        let m = slots[*result_index]
            .take()
            .expect("each result is assigned once");
        if assignment.moved.contains(result_index) {
            changes.push(Repair::MovedResult {
                id: m.id.clone(),
                call_id: m.tool_call_id.clone().unwrap_or_default(),
            });
        }
        results.entry(*owner).or_default().push(m);
    }
    let mut out = Vec::with_capacity(slots.len());
    for (index, slot) in slots.into_iter().enumerate() {
        let Some(m) = slot else { continue };
        stop.steps(1 + m.tool_calls.len())?;
        if m.role == Role::Tool {
            continue; // dropped: its change was recorded in `assign_results`
        }
        let answered = results.remove(&index).unwrap_or_default();
        let missing: Vec<(String, String)> = if answered.len() == m.tool_calls.len() {
            // Each result answers a distinct call of this message.
            Vec::new()
        } else {
            let answered_ids: HashSet<&str> = answered
                .iter()
                .filter_map(|r| r.tool_call_id.as_deref())
                .collect();
            m.tool_calls
                .iter()
                .filter(|c| !answered_ids.contains(c.id.as_str()))
                .map(|c| (c.id.clone(), c.name.clone()))
                .collect()
        };
        let assistant_id = m.id.clone();
        out.push(m);
        // Results keep their order; calls without one are closed after them.
        out.extend(answered);
        for (call_id, name) in missing {
            let result = interrupted_result(&assistant_id, &call_id, &name);
            changes.push(Repair::ClosedInterruptedCall {
                call_id,
                result_id: result.id.clone(),
            });
            out.push(result);
        }
    }
    Ok(out)
}

/// Whether [`repair`] would return `messages` as they are and report no
/// change, found without copying them (for a caller that would repair a
/// copy).
///
/// ```
/// use agent_host_core::Message;
/// use agent_host_core::repair::is_repaired;
///
/// let mut call = Message::assistant("").with_id("a");
/// call.push_tool_call("c1", "deploy", "{}");
/// let result = Message::tool_result("c1", "deploy", "done").with_id("r");
/// assert!(is_repaired(&[Message::user("deploy"), call.clone(), result]));
/// assert!(!is_repaired(&[Message::user("deploy"), call]));
/// ```
pub fn is_repaired(messages: &[Message]) -> bool {
    let mut exchanges = false;
    for m in messages {
        if needs_cleaning(m) {
            return false;
        }
        exchanges |= m.role == Role::Tool || !m.tool_calls.is_empty();
    }
    if !exchanges {
        // No call and no result: nothing to pair.
        return true;
    }
    let mut changes = Vec::new();
    match assign_results(messages, &mut changes, &mut StopCheck::never()) {
        Ok(assignment) => changes.is_empty() && assignment.keeps_order(messages),
        Err(Stopped) => false,
    }
}

/// Whether [`clean_message`] would change `m`.
fn needs_cleaning(m: &Message) -> bool {
    (m.role != Role::Assistant && m.reasoning.is_some())
        || (m.role != Role::Tool && m.tool_call_id.is_some())
        || if m.role == Role::Assistant {
            m.tool_calls.len() > 1 && {
                let mut seen = HashSet::new();
                m.tool_calls.iter().any(|c| !seen.insert(c.id.as_str()))
            }
        } else {
            !m.tool_calls.is_empty()
        }
}

/// Removes what a message's role may not carry.
fn clean_message(m: &mut Message, changes: &mut Vec<Repair>) {
    if !needs_cleaning(m) {
        return;
    }
    if m.role != Role::Assistant && m.reasoning.take().is_some() {
        changes.push(Repair::RemovedDetachedReasoning { id: m.id.clone() });
    }
    if m.role != Role::Tool && m.tool_call_id.take().is_some() {
        changes.push(Repair::RemovedStrayCallId { id: m.id.clone() });
    }
    let before = m.tool_calls.len();
    if m.role == Role::Assistant {
        let mut seen = HashSet::new();
        m.tool_calls.retain(|c| seen.insert(c.id.clone()));
    } else {
        m.tool_calls.clear();
    }
    if m.tool_calls.len() != before {
        changes.push(Repair::RemovedToolCalls {
            id: m.id.clone(),
            count: before - m.tool_calls.len(),
        });
    }
    // Whatever was removed was counted: a count cached before (say, by the
    // summary's trigger on the history as loaded) is stale now.
    m.invalidate_tokens();
}

/// Which assistant message each kept result belongs to.
struct Assignment {
    /// Result index -> index of the assistant message that made its call, in
    /// result order.
    owner: Vec<(usize, usize)>,
    /// Results that were not directly in their call's block.
    moved: HashSet<usize>,
}

impl Assignment {
    /// Whether the rebuild in [`repair_until`] would return `messages` as
    /// they are: no result is dropped (every tool message has an owner) or
    /// moved, and every assistant message has as many results as calls (so
    /// none is closed as interrupted). Results that are not moved follow
    /// their owner's message in log order, which is where the rebuild puts
    /// them.
    fn keeps_order(&self, messages: &[Message]) -> bool {
        if !self.moved.is_empty() {
            return false;
        }
        let tools = messages.iter().filter(|m| m.role == Role::Tool).count();
        if tools != self.owner.len() {
            return false;
        }
        let mut answered: HashMap<usize, usize> = HashMap::new();
        for &(_, owner) in &self.owner {
            *answered.entry(owner).or_default() += 1;
        }
        messages.iter().enumerate().all(|(i, m)| {
            m.role == Role::Tool || answered.get(&i).copied().unwrap_or(0) == m.tool_calls.len()
        })
    }
}

/// Pairs each result with the latest unanswered call of its id; records the
/// results that are dropped.
fn assign_results(
    messages: &[Message],
    changes: &mut Vec<Repair>,
    stop: &mut StopCheck<'_>,
) -> Result<Assignment, Stopped> {
    let mut owner = Vec::new();
    let mut moved = HashSet::new();
    // Unanswered calls: id -> stack of assistant indices.
    let mut open: HashMap<&str, Vec<usize>> = HashMap::new();
    let mut answered: HashSet<&str> = HashSet::new();
    let mut seen_assistant = false;
    // The start of the current block: the last non-tool message.
    let mut block_owner: Option<usize> = None;
    for (index, m) in messages.iter().enumerate() {
        stop.steps(1 + m.tool_calls.len())?;
        if m.role != Role::Tool {
            block_owner = Some(index);
            if m.role == Role::Assistant {
                seen_assistant = true;
                for call in &m.tool_calls {
                    open.entry(&call.id).or_default().push(index);
                }
            }
            continue;
        }
        let call_id = m.tool_call_id.as_deref();
        let assistant = call_id.and_then(|id| open.get_mut(id)).and_then(Vec::pop);
        match (assistant, call_id) {
            (Some(assistant), Some(id)) => {
                answered.insert(id);
                if block_owner != Some(assistant) {
                    moved.insert(index);
                }
                owner.push((index, assistant));
            }
            (_, Some(id)) if answered.contains(id) => {
                changes.push(Repair::DroppedDuplicateResult {
                    id: m.id.clone(),
                    call_id: id.to_owned(),
                })
            }
            _ if !seen_assistant => changes.push(Repair::DroppedLeadingOrphan { id: m.id.clone() }),
            _ => changes.push(Repair::DroppedOrphan { id: m.id.clone() }),
        }
    }
    Ok(Assignment { owner, moved })
}

/// The synthetic result that closes a call left without one.
fn interrupted_result(assistant_id: &str, call_id: &str, tool: &str) -> Message {
    let mut m = Message::tool_result(call_id, tool, INTERRUPTED_RESULT)
        .with_id(format!("{assistant_id}:interrupted:{call_id}"));
    m.synthetic = true;
    m.is_error = true;
    m.metadata.insert(INTERRUPTED_KEY.into(), Value::Bool(true));
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::validate;

    fn call(id: &str, calls: &[&str]) -> Message {
        let mut m = Message::assistant("").with_id(id);
        for c in calls {
            m.push_tool_call(*c, "t", "{}");
        }
        m
    }

    fn result(id: &str, call_id: &str) -> Message {
        Message::tool_result(call_id, "t", "ok").with_id(id)
    }

    fn ids(messages: &[Message]) -> Vec<&str> {
        messages.iter().map(|m| m.id.as_str()).collect()
    }

    proptest::proptest! {
        /// Regression guard for the shortcut that returns the messages as
        /// they are: whenever it is taken, the rebuild gives the same.
        #[test]
        fn the_shortcut_gives_what_the_rebuild_gives(
            steps in proptest::collection::vec((0u8..4, 0usize..4, 0usize..3), 0..14)
        ) {
            let history: Vec<Message> = steps
                .iter()
                .enumerate()
                .map(|(i, &(kind, call, calls))| {
                    let id = format!("m{i}");
                    match kind {
                        0 => Message::user("u").with_id(id),
                        1 => {
                            let names: Vec<String> = (call..call + calls).map(|c| format!("c{c}")).collect();
                            let names: Vec<&str> = names.iter().map(String::as_str).collect();
                            super::tests::call(&id, &names)
                        }
                        2 => result(&id, &format!("c{call}")),
                        _ => Message::assistant("a").with_id(id),
                    }
                })
                .collect();
            let mut changes = Vec::new();
            let mut stop = StopCheck::never();
            let mut cleaned = history.clone();
            for m in &mut cleaned {
                clean_message(m, &mut changes);
            }
            let assignment = assign_results(&cleaned, &mut changes, &mut stop).unwrap();
            let rebuilt = rebuild(cleaned.clone(), &assignment, &mut changes, &mut stop).unwrap();
            if assignment.keeps_order(&cleaned) {
                proptest::prop_assert_eq!(&rebuilt, &cleaned);
            }
            proptest::prop_assert_eq!(repair(history).0, rebuilt);
        }
    }

    #[test]
    fn a_valid_history_is_unchanged() {
        let history = vec![
            Message::user("u").with_id("u"),
            call("a", &["c1"]),
            result("r", "c1"),
        ];
        let (out, changes) = repair(history.clone());
        assert_eq!(out, history);
        assert!(changes.is_empty());
    }

    #[test]
    fn every_kind_of_break_is_repaired_and_reported() {
        let mut user_with_call = Message::user("x").with_id("ux");
        user_with_call.push_tool_call("zz", "t", "{}");
        let history = vec![
            result("lead", "c0"), // leading orphan
            Message::user("u").with_id("u"),
            call("a1", &["c1", "c2"]),
            result("r1", "c1"),
            Message::user("hurry").with_id("u2"), // c2's block ends unanswered here
            result("r2", "c2"),                   // out of order: moved back
            result("r2b", "c2"),                  // duplicate
            result("ghost", "nope"),              // orphan
            user_with_call,
            call("a2", &["c3"]), // interrupted
        ];
        let (out, changes) = repair(history);
        assert!(validate(&out).is_empty(), "{:?}", validate(&out));
        assert_eq!(
            ids(&out),
            ["u", "a1", "r1", "r2", "u2", "ux", "a2", "a2:interrupted:c3"]
        );
        assert_eq!(
            changes,
            [
                Repair::RemovedToolCalls {
                    id: "ux".into(),
                    count: 1
                },
                Repair::DroppedLeadingOrphan { id: "lead".into() },
                Repair::DroppedDuplicateResult {
                    id: "r2b".into(),
                    call_id: "c2".into()
                },
                Repair::DroppedOrphan { id: "ghost".into() },
                Repair::MovedResult {
                    id: "r2".into(),
                    call_id: "c2".into()
                },
                Repair::ClosedInterruptedCall {
                    call_id: "c3".into(),
                    result_id: "a2:interrupted:c3".into()
                },
            ]
        );
        let closed = out.last().unwrap();
        assert!(closed.synthetic && closed.is_error);
        assert_eq!(closed.metadata[INTERRUPTED_KEY], true);
        // Idempotent.
        let (again, more) = repair(out.clone());
        assert_eq!(again, out);
        assert!(more.is_empty());
    }

    #[test]
    fn parallel_results_keep_their_order() {
        let history = vec![
            call("a", &["c1", "c2"]),
            result("r2", "c2"),
            result("r1", "c1"),
        ];
        let (out, changes) = repair(history.clone());
        assert_eq!(out, history);
        assert!(changes.is_empty());
    }

    #[test]
    fn reused_call_ids_pair_with_the_latest_open_call() {
        let history = vec![
            call("a", &["c"]),
            result("r1", "c"),
            call("b", &["c"]),
            result("r2", "c"),
        ];
        let (out, changes) = repair(history.clone());
        assert_eq!(out, history);
        assert!(changes.is_empty());
    }

    /// Regression (hardening item 5): each call of a message was looked for
    /// among all the results it got, quadratic in the calls of one message.
    /// A message of 100,000 calls with half of them answered is repaired in
    /// one pass: the other half are closed, in call order.
    #[test]
    fn a_hundred_thousand_calls_in_one_message_are_repaired_in_one_pass() {
        let n = 100_000;
        let names: Vec<String> = (0..n).map(|i| format!("c{i}")).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let mut history = vec![call("a", &refs)];
        history.extend(
            (0..n / 2)
                .rev()
                .map(|i| result(&format!("r{i}"), &names[i])),
        );
        let (out, changes) = repair(history);
        assert_eq!(out.len(), 1 + n);
        assert_eq!(changes.len(), n / 2);
        assert_eq!(
            changes[0],
            Repair::ClosedInterruptedCall {
                call_id: "c50000".into(),
                result_id: "a:interrupted:c50000".into()
            }
        );
        assert!(validate(&out).is_empty());
    }

    #[test]
    fn a_count_cached_before_repair_is_not_used_after_it() {
        use crate::message::Reasoning;
        use crate::tokens::{HeuristicCounter, TokenCounter};
        let counter = HeuristicCounter::default();
        let mut system = Message::system("You are an agent.").with_id("sys");
        system.reasoning = Some(Reasoning {
            text: "a long detached thought that was counted".into(),
            ..Reasoning::default()
        });
        let mut user = Message::user("u").with_id("u1");
        user.tool_call_id = Some("stray".into());
        let mut assistant = call("a", &["c1", "c1"]);
        assistant.push_tool_call("c2", "t", "{}");
        let history = vec![
            system,
            user,
            assistant,
            result("r1", "c1"),
            result("r2", "c2"),
        ];
        let before: Vec<u32> = history.iter().map(|m| m.tokens(&counter)).collect();
        let (repaired, changes) = repair(history);
        assert_eq!(changes.len(), 3, "{changes:?}");
        for (i, m) in repaired.iter().enumerate() {
            let fresh = counter.count_message(m);
            assert_eq!(m.tokens(&counter), fresh, "{}", m.id);
            if ["sys", "a"].contains(&m.id.as_str()) {
                assert!(fresh < before[i], "{}: {fresh} < {}", m.id, before[i]);
            }
        }
    }

    #[test]
    fn repair_gives_up_when_its_caller_says_stop() {
        let history = vec![call("a", &["c1"]), result("r", "c1")];
        assert_eq!(
            repair_until(history.clone(), &mut StopCheck::new(&|| true)),
            Err(Stopped)
        );
        assert_eq!(
            repair_until(history.clone(), &mut StopCheck::new(&|| false)),
            Ok((history, Vec::new()))
        );
    }
}
