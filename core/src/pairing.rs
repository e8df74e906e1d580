//! How the tool calls of a history pair with their results.

use std::collections::HashSet;

use crate::message::{Message, Role};

/// The tool calls of a history and which of them got a result.
///
/// ```
/// use agent_host_core::{Message, pairing::ToolPairing};
///
/// let mut call = Message::assistant("");
/// call.push_tool_call("c1", "ls", "{}");
/// call.push_tool_call("c2", "pwd", "{}");
/// let history = [call, Message::tool_result("c1", "ls", "a.txt")];
/// let pairing = ToolPairing::of(&history);
/// assert_eq!((pairing.calls, pairing.answered), (2, 1));
/// assert_eq!(pairing.unanswered, ["c2"]);
/// assert!(!pairing.is_complete());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ToolPairing {
    /// Tool calls made by assistant messages.
    pub calls: usize,
    /// Tool results, answering a call or not.
    pub results: usize,
    /// Calls answered by a later tool result.
    pub answered: usize,
    /// Ids of calls no later result answers, in order.
    pub unanswered: Vec<String>,
    /// Ids of messages holding a result that answers no earlier call.
    pub orphans: Vec<String>,
}

impl ToolPairing {
    /// Pairs the calls and results of `messages`, in order: a result pairs
    /// with an earlier call of the same id that has no result yet.
    pub fn of(messages: &[Message]) -> Self {
        let mut pairing = ToolPairing::default();
        let mut open: Vec<&str> = Vec::new();
        let mut open_set: HashSet<&str> = HashSet::new();
        for m in messages {
            for call in &m.tool_calls {
                pairing.calls += 1;
                if open_set.insert(&call.id) {
                    open.push(&call.id);
                }
            }
            if m.role == Role::Tool {
                pairing.results += 1;
                match m.tool_call_id.as_deref() {
                    Some(id) if open_set.remove(id) => pairing.answered += 1,
                    _ => pairing.orphans.push(m.id.clone()),
                }
            }
        }
        // An id answered and then called again is in `open` twice: it is
        // reported once.
        pairing.unanswered = open
            .into_iter()
            .filter(|id| open_set.remove(id))
            .map(str::to_owned)
            .collect();
        pairing
    }

    /// Whether every call has its result and every result its call.
    pub fn is_complete(&self) -> bool {
        self.unanswered.is_empty() && self.orphans.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_before_their_call_are_orphans() {
        let mut call = Message::assistant("");
        call.push_tool_call("c1", "ls", "{}");
        let early = Message::tool_result("c1", "ls", "x").with_id("r0");
        let pairing = ToolPairing::of(&[early, call]);
        assert_eq!(pairing.orphans, ["r0"]);
        assert_eq!(pairing.unanswered, ["c1"]);
    }

    #[test]
    fn a_second_result_for_one_call_is_an_orphan() {
        let mut call = Message::assistant("");
        call.push_tool_call("c1", "ls", "{}");
        let a = Message::tool_result("c1", "ls", "x").with_id("r1");
        let b = Message::tool_result("c1", "ls", "y").with_id("r2");
        let pairing = ToolPairing::of(&[call, a, b]);
        assert_eq!(
            (pairing.answered, pairing.orphans.clone()),
            (1, vec!["r2".to_owned()])
        );
    }

    #[test]
    fn an_id_called_again_and_left_unanswered_is_listed_once() {
        let mut call = Message::assistant("");
        call.push_tool_call("c1", "ls", "{}");
        let answer = Message::tool_result("c1", "ls", "x");
        let pairing = ToolPairing::of(&[call.clone(), answer, call]);
        assert_eq!(pairing.unanswered, ["c1"]);
    }
}
