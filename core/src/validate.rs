//! The provider rules a history must keep before it is sent to a model.
//!
//! Providers reject a request whose tool calls and results do not pair up, so
//! the host runs [`validate`] after every stage and every processor, and again
//! before a request. The rules:
//!
//! 1. Every tool result answers a call of the assistant message it follows:
//!    the results of an assistant message's calls come right after it, before
//!    any other message ([`Violation::OrphanResult`],
//!    [`Violation::ResultOutOfOrder`], [`Violation::DuplicateResult`]).
//! 2. Every tool call has its result there ([`Violation::MissingResult`]).
//! 3. Only assistant messages carry tool calls and reasoning, and a tool
//!    result names its call ([`Violation::ReasoningDetached`],
//!    [`Violation::InvalidRole`]).
//! 4. Tool call ids are unique among the calls still waiting for results
//!    ([`Violation::DuplicateCallId`]).

use std::collections::HashMap;
use std::fmt;

use crate::message::{Message, Role};
use crate::stop::{StopCheck, Stopped};

/// A broken provider rule, with the index of the message that breaks it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Violation {
    /// A tool result whose call appears nowhere before it.
    OrphanResult {
        /// Index of the tool message.
        index: usize,
        /// The call id it names.
        call_id: String,
    },
    /// A tool result whose call exists earlier, but other messages stand
    /// between the call and this result.
    ResultOutOfOrder {
        /// Index of the tool message.
        index: usize,
        /// The call id it names.
        call_id: String,
        /// Index of the assistant message that made the call.
        call_index: usize,
    },
    /// A second result for a call that already has one.
    DuplicateResult {
        /// Index of the extra tool message.
        index: usize,
        /// The call id it names.
        call_id: String,
    },
    /// A tool call with no result right after its message.
    MissingResult {
        /// Index of the assistant message that made the call.
        index: usize,
        /// The id of the unanswered call.
        call_id: String,
    },
    /// Two calls waiting for results share one id, so a result cannot say
    /// which it answers.
    DuplicateCallId {
        /// Index of the assistant message with the second call.
        index: usize,
        /// The shared id.
        call_id: String,
    },
    /// Reasoning on a message that is not the assistant's.
    ReasoningDetached {
        /// Index of the message.
        index: usize,
        /// Its role.
        role: Role,
    },
    /// A message its role does not allow: tool calls outside an assistant
    /// message, or a tool result without a call id.
    InvalidRole {
        /// Index of the message.
        index: usize,
        /// What is wrong.
        detail: String,
    },
}

impl Violation {
    /// The index of the message that breaks the rule.
    pub fn index(&self) -> usize {
        match self {
            Violation::OrphanResult { index, .. }
            | Violation::ResultOutOfOrder { index, .. }
            | Violation::DuplicateResult { index, .. }
            | Violation::MissingResult { index, .. }
            | Violation::DuplicateCallId { index, .. }
            | Violation::ReasoningDetached { index, .. }
            | Violation::InvalidRole { index, .. } => *index,
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::OrphanResult { index, call_id } => {
                write!(
                    f,
                    "message {index}: tool result for `{call_id}` answers no earlier call"
                )
            }
            Violation::ResultOutOfOrder {
                index,
                call_id,
                call_index,
            } => write!(
                f,
                "message {index}: tool result for `{call_id}` is separated from its call in message {call_index}"
            ),
            Violation::DuplicateResult { index, call_id } => {
                write!(f, "message {index}: second tool result for `{call_id}`")
            }
            Violation::MissingResult { index, call_id } => {
                write!(f, "message {index}: tool call `{call_id}` has no result")
            }
            Violation::DuplicateCallId { index, call_id } => {
                write!(
                    f,
                    "message {index}: tool call id `{call_id}` is already waiting for a result"
                )
            }
            Violation::ReasoningDetached { index, role } => {
                write!(f, "message {index}: a {role} message carries reasoning")
            }
            Violation::InvalidRole { index, detail } => write!(f, "message {index}: {detail}"),
        }
    }
}

/// Checks `messages` against the provider rules; empty when the history can
/// be sent.
///
/// ```
/// use agent_host_core::Message;
/// use agent_host_core::validate::{validate, Violation};
///
/// let mut call = Message::assistant("");
/// call.push_tool_call("c1", "ls", "{}");
/// let history = vec![Message::user("list"), call, Message::user("well?")];
/// assert_eq!(
///     validate(&history),
///     [Violation::MissingResult { index: 1, call_id: "c1".into() }]
/// );
/// ```
pub fn validate(messages: &[Message]) -> Vec<Violation> {
    match validate_until(messages, &mut StopCheck::never()) {
        Ok(violations) => violations,
        Err(Stopped) => unreachable!("a check that never stops stopped"),
    }
}

/// [`validate`], giving up with [`Stopped`] when `stop` says so: for a
/// caller that must finish within a deadline.
///
/// One pass, linear in the messages and tool calls: each call and result
/// costs a hash lookup, whatever the size of the assistant message it
/// belongs to.
pub fn validate_until(
    messages: &[Message],
    stop: &mut StopCheck<'_>,
) -> Result<Vec<Violation>, Stopped> {
    check(messages, stop)
}

/// [`validate`] of borrowed messages (a view counted without copying it).
pub(crate) fn validate_refs(messages: &[&Message]) -> Vec<Violation> {
    match check(messages, &mut StopCheck::never()) {
        Ok(violations) => violations,
        Err(Stopped) => unreachable!("a check that never stops stopped"),
    }
}

fn check<M: std::borrow::Borrow<Message>>(
    messages: &[M],
    stop: &mut StopCheck<'_>,
) -> Result<Vec<Violation>, Stopped> {
    let mut violations = Vec::new();
    // The current assistant message's calls.
    let mut block = Block::default();
    // Every call seen so far: id -> index of its assistant message (of the
    // latest, for a reused id), and whether it has been answered. A call of
    // the current block still waits for its result while its entry is
    // `(block.index, false)`.
    let mut seen: HashMap<&str, (usize, bool)> = HashMap::new();
    for (index, m) in messages.iter().enumerate() {
        let m: &Message = m.borrow();
        stop.steps(1 + m.tool_calls.len())?;
        if m.role != Role::Tool {
            block.close(&seen, &mut violations);
        }
        if m.tool_call_id.is_some() && m.role != Role::Tool {
            violations.push(Violation::InvalidRole {
                index,
                detail: format!("a {} message carries a `tool_call_id`", m.role),
            });
        }
        if m.reasoning.is_some() && m.role != Role::Assistant {
            violations.push(Violation::ReasoningDetached {
                index,
                role: m.role,
            });
        }
        match m.role {
            Role::Assistant => {
                block.index = index;
                for call in &m.tool_calls {
                    let entry = seen.entry(&call.id).or_insert((usize::MAX, true));
                    if *entry == (index, false) {
                        violations.push(Violation::DuplicateCallId {
                            index,
                            call_id: call.id.clone(),
                        });
                        continue;
                    }
                    *entry = (index, false);
                    block.calls.push(&call.id);
                    block.waiting += 1;
                }
            }
            Role::Tool => {
                if m.has_tool_calls() {
                    violations.push(Violation::InvalidRole {
                        index,
                        detail: "a tool message carries tool calls".into(),
                    });
                }
                let Some(call_id) = m.tool_call_id.as_deref() else {
                    violations.push(Violation::InvalidRole {
                        index,
                        detail: "a tool result without a `tool_call_id`".into(),
                    });
                    continue;
                };
                let entry = seen.get_mut(call_id);
                violations.push(match entry {
                    Some(entry) if block.waiting > 0 && *entry == (block.index, false) => {
                        entry.1 = true;
                        block.waiting -= 1;
                        continue;
                    }
                    None => Violation::OrphanResult {
                        index,
                        call_id: call_id.to_owned(),
                    },
                    Some((_, true)) => Violation::DuplicateResult {
                        index,
                        call_id: call_id.to_owned(),
                    },
                    Some(&mut (call_index, false)) => Violation::ResultOutOfOrder {
                        index,
                        call_id: call_id.to_owned(),
                        call_index,
                    },
                });
            }
            Role::System | Role::User => {
                if m.has_tool_calls() {
                    violations.push(Violation::InvalidRole {
                        index,
                        detail: format!("a {} message carries tool calls", m.role),
                    });
                }
            }
        }
    }
    block.close(&seen, &mut violations);
    violations.sort_by_key(Violation::index);
    Ok(violations)
}

/// The calls of the current assistant message.
#[derive(Default)]
struct Block<'a> {
    /// The index of the assistant message.
    index: usize,
    /// Its calls with distinct ids, in order.
    calls: Vec<&'a str>,
    /// How many of them still wait for their result.
    waiting: usize,
}

impl Block<'_> {
    /// Reports the calls of the block that just ended without results, in
    /// call order, and empties it.
    fn close(&mut self, seen: &HashMap<&str, (usize, bool)>, violations: &mut Vec<Violation>) {
        if self.waiting > 0 {
            for call_id in &self.calls {
                if seen.get(call_id) == Some(&(self.index, false)) {
                    violations.push(Violation::MissingResult {
                        index: self.index,
                        call_id: (*call_id).to_owned(),
                    });
                }
            }
        }
        self.calls.clear();
        self.waiting = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &str) -> Message {
        let mut m = Message::assistant("");
        m.push_tool_call(id, "t", "{}");
        m
    }

    fn result(id: &str) -> Message {
        Message::tool_result(id, "t", "ok")
    }

    #[test]
    fn a_paired_history_is_valid() {
        let mut two = Message::assistant("both");
        two.push_tool_call("a", "t", "{}");
        two.push_tool_call("b", "t", "{}");
        let history = vec![
            Message::system("s"),
            Message::user("u"),
            two,
            result("b"),
            result("a"),
            Message::assistant("done"),
        ];
        assert_eq!(validate(&history), []);
    }

    #[test]
    fn each_rule_is_reported_with_its_index() {
        let mut user_with_call = Message::user("u");
        user_with_call.push_tool_call("x", "t", "{}");
        let mut tool_without_id = result("z");
        tool_without_id.tool_call_id = None;
        let mut reasoning_user = Message::user("hm");
        reasoning_user.reasoning = Some(Default::default());
        let history = vec![
            result("ghost"),    // 0: orphan
            call("a"),          // 1
            Message::user("?"), // 2: closes the block: a is missing
            result("a"),        // 3: out of order
            user_with_call,     // 4: invalid role
            tool_without_id,    // 5: invalid role
            reasoning_user,     // 6: reasoning detached
            call("b"),          // 7
            result("b"),        // 8
            result("b"),        // 9: duplicate
        ];
        let v = validate(&history);
        assert_eq!(
            v,
            [
                Violation::OrphanResult {
                    index: 0,
                    call_id: "ghost".into()
                },
                Violation::MissingResult {
                    index: 1,
                    call_id: "a".into()
                },
                Violation::ResultOutOfOrder {
                    index: 3,
                    call_id: "a".into(),
                    call_index: 1
                },
                Violation::InvalidRole {
                    index: 4,
                    detail: "a user message carries tool calls".into()
                },
                Violation::InvalidRole {
                    index: 5,
                    detail: "a tool result without a `tool_call_id`".into()
                },
                Violation::ReasoningDetached {
                    index: 6,
                    role: Role::User
                },
                Violation::DuplicateResult {
                    index: 9,
                    call_id: "b".into()
                },
            ]
        );
        assert_eq!(
            v[2].to_string(),
            "message 3: tool result for `a` is separated from its call in message 1"
        );
    }

    #[test]
    fn role_fields_in_the_wrong_place_are_invalid() {
        let mut tool_with_calls = result("a");
        tool_with_calls.push_tool_call("z", "t", "{}");
        let mut user_with_call_id = Message::user("u");
        user_with_call_id.tool_call_id = Some("a".into());
        let v = validate(&[call("a"), tool_with_calls, user_with_call_id]);
        assert_eq!(
            v,
            [
                Violation::InvalidRole {
                    index: 1,
                    detail: "a tool message carries tool calls".into()
                },
                Violation::InvalidRole {
                    index: 2,
                    detail: "a user message carries a `tool_call_id`".into()
                },
            ]
        );
    }

    #[test]
    fn a_trailing_call_without_result_is_missing() {
        let history = vec![Message::user("go"), call("c")];
        assert_eq!(
            validate(&history),
            [Violation::MissingResult {
                index: 1,
                call_id: "c".into()
            }]
        );
    }

    #[test]
    fn duplicate_open_call_ids_are_reported() {
        let mut m = Message::assistant("");
        m.push_tool_call("a", "t", "{}");
        m.push_tool_call("a", "t", "{}");
        let v = validate(&[m, result("a")]);
        assert_eq!(
            v,
            [Violation::DuplicateCallId {
                index: 0,
                call_id: "a".into()
            }]
        );
    }

    #[test]
    fn reused_call_ids_in_later_turns_are_fine() {
        // tau-bench reuses call ids across turns; each pairs with its own result.
        let history = vec![call("a"), result("a"), call("a"), result("a")];
        assert_eq!(validate(&history), []);
    }

    /// `n` calls in one assistant message; `answered` of them get results,
    /// newest first.
    fn parallel(n: usize, answered: usize) -> Vec<Message> {
        let mut m = Message::assistant("");
        for i in 0..n {
            m.push_tool_call(format!("call_{i}"), "t", "{}");
        }
        let mut history = vec![Message::user("go"), m];
        history.extend((0..answered).rev().map(|i| result(&format!("call_{i}"))));
        history.push(Message::user("and?"));
        history
    }

    /// Regression (hardening item 5): each result was looked up, and each
    /// call checked for a repeat, in a list of the block's calls: quadratic
    /// in the calls of one message (150,000 took minutes). Now one hash
    /// lookup each; this runs in well under a second (the `pairing`
    /// benchmark shows the scaling).
    #[test]
    fn a_hundred_thousand_calls_in_one_message_are_checked_in_one_pass() {
        assert_eq!(validate(&parallel(100_000, 100_000)), []);
        let v = validate(&parallel(100_000, 50_000));
        assert_eq!(v.len(), 50_000);
        // The calls left without a result, in call order.
        assert_eq!(
            v[0],
            Violation::MissingResult {
                index: 1,
                call_id: "call_50000".into()
            }
        );
        assert_eq!(
            v[49_999],
            Violation::MissingResult {
                index: 1,
                call_id: "call_99999".into()
            }
        );
    }

    #[test]
    fn validation_gives_up_when_its_caller_says_stop() {
        let history = parallel(5_000, 5_000);
        let asked = std::cell::Cell::new(0);
        let stop_at_third = || {
            asked.set(asked.get() + 1);
            asked.get() == 3
        };
        assert_eq!(
            validate_until(&history, &mut StopCheck::new(&stop_at_third)),
            Err(Stopped)
        );
        assert_eq!(asked.get(), 3);
        assert_eq!(
            validate_until(&history, &mut StopCheck::new(&|| false)),
            Ok(Vec::new())
        );
    }
}
