//! Doom-loop detection: an agent calling the same tool with the same
//! arguments over and over, and the synthetic warning that tells it to stop.
//!
//! The rule: [`DoomLoopConfig::threshold`] (3 by default) identical
//! consecutive tool calls make a doom loop. Calls are *consecutive* when they
//! are made by assistant messages, in log order, with no user message between
//! them; tool results, assistant text and system messages between them do not
//! break the run. Calls are *identical* when they name the same tool and their
//! arguments are equal: as JSON values when both parse as JSON (so spacing and
//! key order do not matter), else as exact text.
//!
//! ```
//! use agent_host_core::doom_loop::{self, DoomLoopConfig};
//! use agent_host_core::Message;
//!
//! let mut history = vec![Message::user("fix the build").with_id("u")];
//! for i in 0..3 {
//!     let mut call = Message::assistant("").with_id(format!("a{i}"));
//!     call.push_tool_call(format!("c{i}"), "cargo_build", "{}");
//!     history.push(call);
//!     history.push(Message::tool_result(format!("c{i}"), "cargo_build", "error[E0425]"));
//! }
//! let warned = doom_loop::inject_warnings(&mut history, &DoomLoopConfig::default());
//! assert_eq!(warned.len(), 1);
//! assert!(history.last().unwrap().synthetic);
//! // Running it again changes nothing.
//! assert!(doom_loop::inject_warnings(&mut history, &DoomLoopConfig::default()).is_empty());
//! ```

use std::collections::HashSet;

use serde_json::{Value, json};

use crate::message::{Message, Role, ToolCall};

/// The metadata key of a doom-loop warning; its value is
/// `{"tool": <name>, "count": <calls>}`.
pub const METADATA_KEY: &str = "doom_loop";

/// The prefix of the id of every doom-loop warning.
pub const ID_PREFIX: &str = "doom-loop-";

/// When repeated calls count as a doom loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DoomLoopConfig {
    /// How many identical consecutive calls make a loop. Values below 2 are
    /// treated as 2: one call is never a loop.
    pub threshold: usize,
}

impl Default for DoomLoopConfig {
    /// The product rule: three identical calls in a row.
    fn default() -> Self {
        DoomLoopConfig { threshold: 3 }
    }
}

/// One maximal run of identical consecutive tool calls.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DoomLoop {
    /// The tool called.
    pub tool: String,
    /// The arguments of the last call of the run, as the model wrote them.
    pub arguments: String,
    /// How many identical calls the run has.
    pub count: usize,
    /// The index of the assistant message holding the last call of the run.
    pub last_call_index: usize,
}

/// Finds the doom loops of `messages`, in log order.
///
/// Each maximal run of at least `config.threshold` identical consecutive calls
/// (see the [module documentation](self)) is reported once, however long it
/// is.
pub fn detect(messages: &[Message], config: &DoomLoopConfig) -> Vec<DoomLoop> {
    runs(messages, config)
        .into_iter()
        .map(|run| run.doom_loop)
        .collect()
}

/// Inserts a warning after each doom loop not yet warned about, and returns
/// those loops, with `last_call_index` pointing into the updated `messages`.
///
/// The warning is a synthetic user message placed right after the tool results
/// that follow the loop's last call, so that a call is never separated from
/// its results. A loop whose last call is still waiting for results gets no
/// warning yet; a later run, once the results are in, warns about it.
///
/// The warning's id is derived from the ids of the last call's message and of
/// the call itself (`doom-loop-<message id>-<call id>`), so that running this
/// again finds the warning already there and adds nothing. Being a user
/// message, the warning also ends the run: if the model keeps repeating the
/// call afterwards, the new run is warned about on its own. The warning takes
/// the agent and timestamp of the message it follows, and its metadata
/// [`METADATA_KEY`] holds `{"tool": <name>, "count": <calls>}`.
pub fn inject_warnings(messages: &mut Vec<Message>, config: &DoomLoopConfig) -> Vec<DoomLoop> {
    let existing: HashSet<&str> = messages
        .iter()
        .filter(|m| m.id.starts_with(ID_PREFIX))
        .map(|m| m.id.as_str())
        .collect();
    let mut planned: Vec<(usize, DoomLoop, Message)> = Vec::new();
    // Runs come in log order, and several may end in one assistant message
    // (parallel calls): its results are looked through once.
    let mut after: Option<(usize, Option<usize>)> = None;
    for run in runs(messages, config) {
        let last = &messages[run.doom_loop.last_call_index];
        let id = format!("{ID_PREFIX}{}-{}", last.id, run.last_call_id);
        if existing.contains(id.as_str()) {
            continue;
        }
        let call_index = run.doom_loop.last_call_index;
        let at = match after {
            Some((index, at)) if index == call_index => at,
            _ => {
                let at = after_results(messages, call_index);
                after = Some((call_index, at));
                at
            }
        };
        let Some(at) = at else {
            continue;
        };
        let warning = warning(&run.doom_loop, id, &messages[at - 1]);
        planned.push((at, run.doom_loop, warning));
    }
    if planned.is_empty() {
        return Vec::new();
    }
    // One pass that puts each warning at its planned position (positions
    // are in log order; warnings planned for one position keep theirs).
    let old = std::mem::take(messages);
    messages.reserve(old.len() + planned.len());
    let mut warnings = planned.iter_mut().peekable();
    for (index, m) in old.into_iter().enumerate() {
        while let Some((_, _, warning)) = warnings.next_if(|(at, _, _)| *at == index) {
            messages.push(std::mem::take(warning));
        }
        messages.push(m);
    }
    messages.extend(warnings.map(|(_, _, warning)| std::mem::take(warning)));
    let positions: Vec<usize> = planned.iter().map(|(at, _, _)| *at).collect();
    planned
        .into_iter()
        .map(|(_, mut doom_loop, _)| {
            // The warnings placed before this loop's last call (not those of
            // other runs that end in the same message) shift it.
            let before = positions.partition_point(|&at| at <= doom_loop.last_call_index);
            doom_loop.last_call_index += before;
            doom_loop
        })
        .collect()
}

/// The synthetic warning about `doom_loop`, placed after `previous`.
fn warning(doom_loop: &DoomLoop, id: String, previous: &Message) -> Message {
    let mut warning = Message::user(format!(
        "Warning: the tool `{}` has been called {} times in a row with the same arguments \
         and the same result is likely. Stop repeating it; change approach or ask the user.",
        doom_loop.tool, doom_loop.count
    ))
    .with_id(id);
    warning.synthetic = true;
    warning.agent = previous.agent.clone();
    warning.timestamp = previous.timestamp;
    warning.metadata.insert(
        METADATA_KEY.into(),
        json!({"tool": doom_loop.tool, "count": doom_loop.count}),
    );
    warning
}

/// The index just past the tool results that directly follow the assistant
/// message at `call_index`, or `None` while some of its calls have no result
/// there yet.
fn after_results(messages: &[Message], call_index: usize) -> Option<usize> {
    let mut waiting: HashSet<&str> = messages[call_index]
        .tool_calls
        .iter()
        .map(|call| call.id.as_str())
        .collect();
    let mut end = call_index + 1;
    while let Some(m) = messages.get(end).filter(|m| m.role == Role::Tool) {
        if let Some(id) = &m.tool_call_id {
            waiting.remove(id.as_str());
        }
        end += 1;
    }
    waiting.is_empty().then_some(end)
}

/// A detected loop with the id of its last call.
struct Run {
    doom_loop: DoomLoop,
    last_call_id: String,
}

/// How calls compare: as JSON values when the arguments parse, else as text.
#[derive(PartialEq)]
enum Arguments {
    Json(Value),
    Text(String),
}

impl Arguments {
    fn of(text: &str) -> Self {
        serde_json::from_str(text)
            .map_or_else(|_| Arguments::Text(text.to_owned()), Arguments::Json)
    }
}

/// The run being counted.
struct Current<'a> {
    name: &'a str,
    /// The arguments of the run's first call, and what they read as once a
    /// call with other text is compared with them.
    text: &'a str,
    arguments: Option<Arguments>,
    count: usize,
    last: &'a ToolCall,
    last_index: usize,
}

/// Every maximal run of at least the threshold of identical consecutive calls.
fn runs(messages: &[Message], config: &DoomLoopConfig) -> Vec<Run> {
    let threshold = config.threshold.max(2);
    let mut found = Vec::new();
    let mut current: Option<Current<'_>> = None;
    let mut finish = |current: Option<Current<'_>>| {
        if let Some(run) = current.filter(|run| run.count >= threshold) {
            found.push(Run {
                doom_loop: DoomLoop {
                    tool: run.name.to_owned(),
                    arguments: run.last.arguments.clone(),
                    count: run.count,
                    last_call_index: run.last_index,
                },
                last_call_id: run.last.id.clone(),
            });
        }
    };
    for (index, m) in messages.iter().enumerate() {
        match m.role {
            Role::User => finish(current.take()),
            Role::Assistant => {
                for call in &m.tool_calls {
                    // The same text reads the same; other text is read (once
                    // for the run) only to compare calls of the same tool.
                    let same = |run: &mut Current<'_>| {
                        run.name == call.name
                            && (run.text == call.arguments
                                || *run.arguments.get_or_insert_with(|| Arguments::of(run.text))
                                    == Arguments::of(&call.arguments))
                    };
                    let continues = current.as_mut().is_some_and(same);
                    match current.as_mut() {
                        Some(run) if continues => {
                            run.count += 1;
                            run.last = call;
                            run.last_index = index;
                        }
                        _ => {
                            finish(current.take());
                            current = Some(Current {
                                name: &call.name,
                                text: &call.arguments,
                                arguments: None,
                                count: 1,
                                last: call,
                                last_index: index,
                            });
                        }
                    }
                }
            }
            Role::System | Role::Tool => {}
        }
    }
    finish(current);
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pairing::ToolPairing;

    /// An assistant message `a{n}` calling `tool` once as `c{n}`, and its result.
    fn exchange(n: usize, tool: &str, arguments: &str) -> [Message; 2] {
        let mut call = Message::assistant("").with_id(format!("a{n}"));
        call.push_tool_call(format!("c{n}"), tool, arguments);
        let result =
            Message::tool_result(format!("c{n}"), tool, "same output").with_id(format!("r{n}"));
        [call, result]
    }

    fn history(calls: &[(&str, &str)]) -> Vec<Message> {
        let mut messages = vec![Message::user("go").with_id("u0")];
        for (n, (tool, arguments)) in calls.iter().enumerate() {
            messages.extend(exchange(n, tool, arguments));
        }
        messages
    }

    fn ids(messages: &[Message]) -> Vec<&str> {
        messages.iter().map(|m| m.id.as_str()).collect()
    }

    /// The runs as found before the arguments were read lazily (issue 23):
    /// every call's arguments read and compared with the run's.
    fn runs_read_eagerly(messages: &[Message], threshold: usize) -> Vec<(DoomLoop, String)> {
        let mut found = Vec::new();
        let mut current: Option<(&str, Arguments, usize, &ToolCall, usize)> = None;
        let mut finish = |current: Option<(&str, Arguments, usize, &ToolCall, usize)>| {
            if let Some((name, _, count, last, index)) = current.filter(|run| run.2 >= threshold) {
                found.push((
                    DoomLoop {
                        tool: name.to_owned(),
                        arguments: last.arguments.clone(),
                        count,
                        last_call_index: index,
                    },
                    last.id.clone(),
                ));
            }
        };
        for (index, m) in messages.iter().enumerate() {
            match m.role {
                Role::User => finish(current.take()),
                Role::Assistant => {
                    for call in &m.tool_calls {
                        let arguments = Arguments::of(&call.arguments);
                        match &mut current {
                            Some(run) if run.0 == call.name && run.1 == arguments => {
                                run.2 += 1;
                                run.3 = call;
                                run.4 = index;
                            }
                            _ => {
                                finish(current.take());
                                current = Some((&call.name, arguments, 1, call, index));
                            }
                        }
                    }
                }
                Role::System | Role::Tool => {}
            }
        }
        finish(current);
        found
    }

    proptest::proptest! {
        #[test]
        fn runs_are_those_of_reading_every_call(
            calls in proptest::collection::vec(
                (0..3usize, 0..6usize, proptest::bool::weighted(0.1), 1..3usize),
                0..24,
            ),
        ) {
            let arguments = [
                "{}", "{ }", r#"{"a": 1, "b": 2}"#, r#"{"b":2,"a":1}"#, "not json", "not  json",
            ];
            let mut messages = vec![Message::user("go")];
            for (n, &(tool, args, user, per_message)) in calls.iter().enumerate() {
                if user {
                    messages.push(Message::user("again"));
                }
                let mut m = Message::assistant("");
                for k in 0..per_message {
                    m.push_tool_call(format!("c{n}-{k}"), ["ls", "cat", "rg"][tool], arguments[(args + k) % 6]);
                }
                messages.push(m);
            }
            let lazily: Vec<(DoomLoop, String)> = runs(&messages, &DoomLoopConfig { threshold: 2 })
                .into_iter()
                .map(|run| (run.doom_loop, run.last_call_id))
                .collect();
            proptest::prop_assert_eq!(lazily, runs_read_eagerly(&messages, 2));
        }
    }

    #[test]
    fn three_identical_calls_get_one_warning_after_the_results() {
        let mut messages = history(&[("ls", "{}"), ("ls", "{}"), ("ls", "{}")]);
        messages.push(Message::assistant("still looking").with_id("a-text"));
        let warned = inject_warnings(&mut messages, &DoomLoopConfig::default());
        assert_eq!(
            warned,
            [DoomLoop {
                tool: "ls".into(),
                arguments: "{}".into(),
                count: 3,
                last_call_index: 5,
            }]
        );
        assert_eq!(
            ids(&messages),
            [
                "u0",
                "a0",
                "r0",
                "a1",
                "r1",
                "a2",
                "r2",
                "doom-loop-a2-c2",
                "a-text"
            ]
        );
        let warning = &messages[7];
        assert_eq!(warning.role, Role::User);
        assert!(warning.synthetic);
        assert_eq!(
            warning.metadata[METADATA_KEY],
            json!({"tool": "ls", "count": 3})
        );
        assert!(
            warning
                .content
                .starts_with("Warning: the tool `ls` has been called 3 times in a row"),
            "{}",
            warning.content
        );
        assert!(ToolPairing::of(&messages).is_complete());
    }

    #[test]
    fn two_identical_calls_are_not_a_loop() {
        let mut messages = history(&[("ls", "{}"), ("ls", "{}")]);
        let before = messages.clone();
        assert!(inject_warnings(&mut messages, &DoomLoopConfig::default()).is_empty());
        assert_eq!(messages, before);
    }

    #[test]
    fn a_user_message_breaks_the_run() {
        let mut messages = history(&[("ls", "{}"), ("ls", "{}")]);
        messages.push(Message::user("try once more").with_id("u1"));
        messages.extend(exchange(7, "ls", "{}"));
        messages.extend(exchange(8, "ls", "{}"));
        assert!(detect(&messages, &DoomLoopConfig::default()).is_empty());
    }

    #[test]
    fn a_different_call_breaks_the_run() {
        let messages = history(&[("ls", "{}"), ("ls", "{}"), ("pwd", "{}"), ("ls", "{}")]);
        assert!(detect(&messages, &DoomLoopConfig::default()).is_empty());
        let other_args = history(&[("ls", "{}"), ("ls", r#"{"all":true}"#), ("ls", "{}")]);
        assert!(detect(&other_args, &DoomLoopConfig::default()).is_empty());
    }

    #[test]
    fn assistant_text_and_system_messages_do_not_break_the_run() {
        let mut messages = history(&[("ls", "{}"), ("ls", "{}")]);
        messages.push(Message::assistant("hmm").with_id("t"));
        messages.push(Message::system("note").with_id("s"));
        messages.extend(exchange(5, "ls", "{}"));
        let loops = detect(&messages, &DoomLoopConfig::default());
        assert_eq!(loops.len(), 1);
        assert_eq!(loops[0].count, 3);
        assert_eq!(messages[loops[0].last_call_index].id, "a5");
    }

    #[test]
    fn json_arguments_compare_as_values() {
        let messages = history(&[
            ("read", r#"{"path":"a","line":1}"#),
            ("read", r#"{ "line": 1, "path": "a" }"#),
            ("read", "{\n  \"path\": \"a\",\n  \"line\": 1\n}"),
        ]);
        let loops = detect(&messages, &DoomLoopConfig::default());
        assert_eq!(loops.len(), 1);
        assert_eq!(loops[0].count, 3);
        assert_eq!(
            loops[0].arguments,
            "{\n  \"path\": \"a\",\n  \"line\": 1\n}"
        );
    }

    #[test]
    fn non_json_arguments_compare_as_exact_text() {
        let same = history(&[("sh", "ls -l"), ("sh", "ls -l"), ("sh", "ls -l")]);
        assert_eq!(detect(&same, &DoomLoopConfig::default()).len(), 1);
        let spaced = history(&[("sh", "ls -l"), ("sh", "ls  -l"), ("sh", "ls -l")]);
        assert!(detect(&spaced, &DoomLoopConfig::default()).is_empty());
    }

    #[test]
    fn a_long_run_is_reported_once_and_separate_runs_separately() {
        let calls = [("ls", "{}"); 5]
            .into_iter()
            .chain([("pwd", "{}"); 3])
            .collect::<Vec<_>>();
        let loops = detect(&history(&calls), &DoomLoopConfig::default());
        assert_eq!(
            loops
                .iter()
                .map(|l| (l.tool.as_str(), l.count))
                .collect::<Vec<_>>(),
            [("ls", 5), ("pwd", 3)]
        );
    }

    #[test]
    fn parallel_calls_in_one_message_count() {
        let mut call = Message::assistant("").with_id("a");
        for i in 0..3 {
            call.push_tool_call(format!("c{i}"), "ls", "{}");
        }
        let mut messages = vec![call];
        messages.push(Message::tool_result("c0", "ls", "x").with_id("r0"));
        messages.push(Message::tool_result("c1", "ls", "x").with_id("r1"));
        messages.push(Message::tool_result("c2", "ls", "x").with_id("r2"));
        inject_warnings(&mut messages, &DoomLoopConfig::default());
        assert_eq!(ids(&messages), ["a", "r0", "r1", "r2", "doom-loop-a-c2"]);
    }

    #[test]
    fn injecting_twice_adds_one_warning() {
        let config = DoomLoopConfig::default();
        let mut messages = history(&[("ls", "{}"), ("ls", "{}"), ("ls", "{}")]);
        assert_eq!(inject_warnings(&mut messages, &config).len(), 1);
        let once = messages.clone();
        assert!(inject_warnings(&mut messages, &config).is_empty());
        assert_eq!(messages, once);
    }

    #[test]
    fn repeating_after_a_warning_is_warned_again() {
        let config = DoomLoopConfig::default();
        let mut messages = history(&[("ls", "{}"); 3]);
        inject_warnings(&mut messages, &config);
        for n in 10..13 {
            messages.extend(exchange(n, "ls", "{}"));
        }
        let warned = inject_warnings(&mut messages, &config);
        assert_eq!(warned.len(), 1);
        assert_eq!(messages[warned[0].last_call_index].id, "a12");
        let warnings: Vec<&str> = messages
            .iter()
            .filter(|m| m.id.starts_with(ID_PREFIX))
            .map(|m| m.id.as_str())
            .collect();
        assert_eq!(warnings, ["doom-loop-a2-c2", "doom-loop-a12-c12"]);
    }

    #[test]
    fn returned_indices_point_into_the_updated_history() {
        let calls = [("ls", "{}"); 3]
            .into_iter()
            .chain([("pwd", "{}"); 3])
            .collect::<Vec<_>>();
        let mut messages = history(&calls);
        let warned = inject_warnings(&mut messages, &DoomLoopConfig::default());
        assert_eq!(warned.len(), 2);
        for doom_loop in &warned {
            let last = &messages[doom_loop.last_call_index];
            assert_eq!(last.tool_calls[0].name, doom_loop.tool);
        }
        assert_eq!(messages[warned[1].last_call_index].id, "a5");
    }

    #[test]
    fn the_warning_never_separates_a_call_from_its_results() {
        let config = DoomLoopConfig::default();
        // The last call's result is still missing: no warning yet.
        let mut messages = history(&[("ls", "{}"); 3]);
        let pending_result = messages.pop().unwrap();
        assert!(inject_warnings(&mut messages, &config).is_empty());
        assert_eq!(messages.len(), 6);
        // Once the result is in, the warning goes after it.
        messages.push(pending_result);
        assert_eq!(inject_warnings(&mut messages, &config).len(), 1);
        assert_eq!(messages[6].id, "r2");
        assert_eq!(messages[7].id, "doom-loop-a2-c2");
        assert!(ToolPairing::of(&messages).is_complete());
        for (i, m) in messages.iter().enumerate() {
            if m.role == Role::Tool {
                assert!(
                    matches!(messages[i - 1].role, Role::Tool | Role::Assistant),
                    "result {} follows {:?}",
                    m.id,
                    messages[i - 1].role
                );
            }
        }
    }

    #[test]
    fn the_threshold_is_configurable_but_at_least_two() {
        let messages = history(&[("ls", "{}"); 2]);
        assert_eq!(detect(&messages, &DoomLoopConfig { threshold: 2 }).len(), 1);
        assert_eq!(detect(&messages, &DoomLoopConfig { threshold: 0 }).len(), 1);
        let single = history(&[("ls", "{}")]);
        assert!(detect(&single, &DoomLoopConfig { threshold: 1 }).is_empty());
        assert!(
            detect(
                &history(&[("ls", "{}"); 3]),
                &DoomLoopConfig { threshold: 4 }
            )
            .is_empty()
        );
    }

    /// Regression (hardening item 5): each warning was inserted into the
    /// history on its own (a shift of every later message), and each run's
    /// results were looked through again when several runs end in one
    /// message (both quadratic, see the `pairing` benchmark); the second
    /// such run was also told an index one past its message. Runs ending in
    /// one message each get their warning after its results, in log order,
    /// and both point at the message.
    #[test]
    fn runs_that_end_in_one_message_are_warned_about_in_order() {
        let mut m = Message::assistant("").with_id("a");
        for (i, tool) in ["ls", "ls", "ls", "pwd", "pwd", "pwd"].iter().enumerate() {
            m.push_tool_call(format!("c{i}"), *tool, "{}");
        }
        let mut messages = vec![Message::user("go").with_id("u"), m];
        for i in 0..6 {
            messages
                .push(Message::tool_result(format!("c{i}"), "t", "ok").with_id(format!("r{i}")));
        }
        messages.push(Message::user("next").with_id("u2"));
        let warned = inject_warnings(&mut messages, &DoomLoopConfig::default());
        assert_eq!(warned.len(), 2);
        assert_eq!(
            ids(&messages),
            [
                "u",
                "a",
                "r0",
                "r1",
                "r2",
                "r3",
                "r4",
                "r5",
                "doom-loop-a-c2",
                "doom-loop-a-c5",
                "u2"
            ]
        );
        assert!(warned.iter().all(|l| l.last_call_index == 1));
    }
}
