//! Facts: what a span holds that is worth keeping, with how often and how
//! late each was seen, and how they are gathered from messages.

use std::collections::{BTreeSet, HashMap};

use serde_json::Value;

use super::prose::{collapse, decisions, shorten, todo_lines};
use super::shell;
use super::values::{
    MAX_PATH_BYTES, ValueKind, identifiers, json_strings_or_text, message_key_values, paths,
    quantities, strings_or_text, urls,
};
use crate::message::{Message, Role};

/// The most words of a kept decision, task or command.
const ITEM_WORDS: usize = 25;

/// A message naming more key values than this, at least one for every two
/// lines, is a listing ([`Fact::listed`]).
pub const LISTING: usize = 20;

/// The most unanswered user messages taken for pending tasks (the last ones).
const UNANSWERED: usize = 3;

/// What a fact is, which decides the section it goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum FactKind {
    /// A path written or edited by a tool (Files Modified).
    FileModified,
    /// A sentence announcing a decision (Key Decisions).
    Decision,
    /// A value kept verbatim (Important Values).
    Value(ValueKind),
    /// Something still to do (Pending Tasks).
    PendingTask,
}

/// One fact of a span, with what ranks it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fact {
    /// What it is.
    pub kind: FactKind,
    /// Its text, verbatim.
    pub text: String,
    /// In how many messages (or merged summaries) it appears.
    pub count: u32,
    /// The position where it was last seen (a message index for
    /// [`extract_facts`]); higher is more recent.
    pub last_seen: usize,
    /// In how many messages the agent used it: a value in the arguments of
    /// one of its tool calls or in a command it ran, as opposed to one it was
    /// shown (a path in a listing).
    pub uses: u32,
    /// Whether every message it was seen in is a listing (`find`, `ls -R`,
    /// `grep -rn`: more than [`LISTING`] key values, at least one for every
    /// two lines): a path seen only in a listing of hundreds is worth less,
    /// each, than one an error or a short answer named.
    pub listed: bool,
}

/// The facts of a span, ready to be written as a summary.
#[derive(Clone, Debug, Default)]
pub struct Facts {
    /// The facts, in the order they were first seen.
    pub facts: Vec<Fact>,
    /// The last thing the assistant said, whitespace collapsed.
    pub current_state: Option<String>,
    /// The number of positions facts were taken from (messages, or the items
    /// of a parsed summary); the scale of [`Fact::last_seen`].
    pub span: usize,
    /// Where each fact is in `facts`, by kind and text.
    index: HashMap<FactKind, HashMap<String, usize>>,
}

impl Facts {
    /// The facts of one kind, in the order they were first seen.
    pub fn of_kind(&self, kind: FactKind) -> impl Iterator<Item = &Fact> {
        self.facts.iter().filter(move |f| f.kind == kind)
    }

    /// Records `text` as a fact of `kind` seen at `position`. Seeing it again
    /// at the same position does not count twice.
    pub(super) fn add(&mut self, kind: FactKind, text: &str, position: usize) {
        self.add_in(kind, text, position, false);
    }

    /// [`add`](Self::add) for a fact seen in a message that is a listing, or
    /// not.
    fn add_in(&mut self, kind: FactKind, text: &str, position: usize, listed: bool) {
        let text = text.trim();
        if text.is_empty() {
            return;
        }
        self.span = self.span.max(position + 1);
        let of_kind = self.index.entry(kind).or_default();
        if let Some(&i) = of_kind.get(text) {
            let fact = &mut self.facts[i];
            fact.listed &= listed;
            if fact.last_seen != position {
                fact.count += 1;
                fact.last_seen = fact.last_seen.max(position);
            }
            return;
        }
        of_kind.insert(text.to_owned(), self.facts.len());
        self.facts.push(Fact {
            kind,
            text: text.to_owned(),
            count: 1,
            last_seen: position,
            uses: 0,
            listed,
        });
    }

    /// Records that the agent used `text`, a fact of `kind`, at `position`
    /// (adding the fact if it is new). Call it once per position.
    fn add_use(&mut self, kind: FactKind, text: &str, position: usize) {
        self.add(kind, text, position);
        if let Some(&i) = self
            .index
            .get(&kind)
            .and_then(|of_kind| of_kind.get(text.trim()))
        {
            self.facts[i].uses += 1;
        }
    }

    /// Adds the facts of a later span: their positions come after these,
    /// counts of facts seen in both add up, and a later current state
    /// replaces this one.
    pub fn append(&mut self, later: Facts) {
        let offset = self.span;
        for fact in later.facts {
            let position = fact.last_seen + offset;
            let of_kind = self.index.entry(fact.kind).or_default();
            match of_kind.get(&fact.text) {
                Some(&i) => {
                    let mine = &mut self.facts[i];
                    mine.count += fact.count;
                    mine.uses += fact.uses;
                    mine.listed &= fact.listed;
                    mine.last_seen = mine.last_seen.max(position);
                }
                None => {
                    of_kind.insert(fact.text.clone(), self.facts.len());
                    self.facts.push(Fact {
                        last_seen: position,
                        ..fact
                    });
                }
            }
        }
        self.span = offset + later.span;
        if later.current_state.is_some() {
            self.current_state = later.current_state;
        }
    }
}

/// The facts of a span of messages, each counted once per message it
/// appears in, with the message index as its position.
///
/// - every message's key values ([`message_key_values`]) become values;
/// - tool calls that write or edit files give Files Modified; the scripts
///   the agent ran (the `command` / `cmd` arguments of other tool calls, or
///   the fenced block that ends an assistant's text) give commands (their
///   first line) and Files Modified (the files they write, see
///   [`written_paths`](super::written_paths));
/// - the paths and URLs of tool call arguments and scripts, and the
///   commands, count as used ([`Fact::uses`]);
/// - user and assistant text and tool arguments give identifiers; user and
///   assistant text gives TODO-like lines (`- [ ]`, `TODO`, `Next:`,
///   `Remaining`) and the files of edit blocks
///   ([`edit_block_paths`](super::edit_block_paths)); every message but the
///   system prompt gives numbers with units;
/// - assistant text gives decisions and the current state;
/// - the open items of the last todo list (a tool call with a `todos`
///   argument) and the user messages after the last assistant text are
///   pending tasks (at most the last three of those messages).
///
/// ```
/// use agent_host_core::Message;
/// use agent_host_core::extractive::{FactKind, ValueKind, extract_facts};
///
/// let facts = extract_facts(&[
///     Message::user("The upload to https://example.com/api is 12 MB."),
///     Message::assistant("I'll retry the upload."),
/// ]);
/// let urls: Vec<_> = facts.of_kind(FactKind::Value(ValueKind::Url)).collect();
/// assert_eq!(urls[0].text, "https://example.com/api");
/// assert_eq!(facts.of_kind(FactKind::Value(ValueKind::Quantity)).next().unwrap().text, "12 MB");
/// assert_eq!(facts.current_state.as_deref(), Some("I'll retry the upload."));
/// ```
pub fn extract_facts(messages: &[Message]) -> Facts {
    let mut facts = Facts::default();
    let mut last_text = None;
    let mut todos: Option<(usize, Vec<String>)> = None;
    for (position, message) in messages.iter().enumerate() {
        let values = message_key_values(message);
        let text = message.text();
        let listing = values.len() > LISTING && values.len() * 2 >= text.lines().count();
        for value in values {
            facts.add_in(FactKind::Value(value.kind), &value.text, position, listing);
        }
        let said = matches!(message.role, Role::User | Role::Assistant);
        if said {
            for id in identifiers(&text) {
                facts.add(FactKind::Value(ValueKind::Identifier), id, position);
            }
            for task in todo_lines(&text) {
                facts.add(FactKind::PendingTask, &shorten(task, ITEM_WORDS), position);
            }
            // Edit blocks in the text (Aider's formats) and Aider's
            // `Applied edit to` lines.
            for path in shell::edit_block_paths(&text) {
                facts.add(FactKind::FileModified, &path, position);
            }
        }
        // Measured numbers are mostly in what tools answered: timings,
        // sizes, counts of tests.
        if message.role != Role::System {
            for quantity in quantities(&text) {
                facts.add(FactKind::Value(ValueKind::Quantity), quantity, position);
            }
        }
        if message.role == Role::Assistant && !text.trim().is_empty() {
            for decision in decisions(&text) {
                facts.add(FactKind::Decision, &shorten(decision, ITEM_WORDS), position);
            }
            last_text = Some(position);
        }
        // What the agent used: the paths and URLs of its tool calls and of
        // the commands it ran, and those commands.
        let mut used: BTreeSet<(FactKind, String)> = BTreeSet::new();
        for call in &message.tool_calls {
            for piece in strings_or_text(&call.arguments) {
                used.extend(
                    paths(&piece)
                        .into_iter()
                        .map(|p| (FactKind::Value(ValueKind::Path), p.to_owned())),
                );
                used.extend(
                    urls(&piece)
                        .into_iter()
                        .map(|u| (FactKind::Value(ValueKind::Url), u.to_owned())),
                );
            }
        }
        for script in shell::scripts(message) {
            used.extend(
                paths(&script)
                    .into_iter()
                    .map(|p| (FactKind::Value(ValueKind::Path), p.to_owned())),
            );
            used.extend(
                urls(&script)
                    .into_iter()
                    .map(|u| (FactKind::Value(ValueKind::Url), u.to_owned())),
            );
            used.insert((
                FactKind::Value(ValueKind::Command),
                shell::first_line(&script).to_owned(),
            ));
            for path in shell::written_paths(&script) {
                facts.add(FactKind::FileModified, &path, position);
            }
            // SWE-agent's editor commands change the open file, which the
            // observation names.
            let edits_open_file = message.tool_calls.is_empty()
                && matches!(
                    script.split_whitespace().next(),
                    Some("edit" | "insert" | "append")
                );
            if edits_open_file
                && let Some(path) = messages
                    .get(position + 1)
                    .and_then(|next| shell::observed_file(&next.content))
            {
                facts.add(FactKind::FileModified, path, position);
            }
        }
        for (kind, text) in used {
            facts.add_use(kind, &text, position);
        }
        for call in &message.tool_calls {
            let arguments: Option<Value> = serde_json::from_str(&call.arguments).ok();
            for piece in json_strings_or_text(&call.arguments, arguments.as_ref()) {
                for id in identifiers(&piece) {
                    facts.add(FactKind::Value(ValueKind::Identifier), id, position);
                }
            }
            let Some(Value::Object(arguments)) = arguments else {
                // A free-form call whose input is the patch itself (Codex
                // CLI's `apply_patch` custom tool) names its files in it.
                if shell::is_edit_tool(&call.name) {
                    for path in shell::patch_paths(&call.arguments) {
                        facts.add(FactKind::FileModified, &path, position);
                    }
                }
                continue;
            };
            if shell::is_edit_tool(&call.name) {
                let viewing = arguments.get("command").and_then(Value::as_str) == Some("view");
                let mut named = false;
                for key in PATH_ARGUMENTS {
                    match arguments.get(key).and_then(Value::as_str).map(str::trim) {
                        Some(path) if !viewing && is_one_line(path, MAX_PATH_BYTES) => {
                            facts.add(FactKind::FileModified, path, position);
                            named = true;
                        }
                        _ => {}
                    }
                }
                // A patch names its files; an editor without a path argument
                // changed the file its result names.
                for value in arguments.values().filter_map(Value::as_str) {
                    for path in shell::patch_paths(value) {
                        facts.add(FactKind::FileModified, &path, position);
                        named = true;
                    }
                }
                if !named
                    && !viewing
                    && let Some(path) = result_of(messages, position, &call.id)
                        .and_then(|result| shell::observed_file(&result.content))
                {
                    facts.add(FactKind::FileModified, path, position);
                }
            }
            if let Some(Value::Array(list)) = arguments.get("todos") {
                let open = list
                    .iter()
                    .filter(|todo| todo.get("status").and_then(Value::as_str) != Some("completed"))
                    .filter_map(|todo| todo.get("content").and_then(Value::as_str))
                    .map(|content| shorten(content, ITEM_WORDS))
                    .collect();
                todos = Some((position, open));
            }
        }
    }
    if let Some((position, open)) = todos {
        for task in open {
            facts.add(FactKind::PendingTask, &task, position);
        }
    }
    let answered = last_text.map_or(0, |i| i + 1);
    let unanswered: Vec<usize> = (answered..messages.len())
        .filter(|&i| messages[i].role == Role::User && !messages[i].synthetic)
        .collect();
    for &i in unanswered.iter().rev().take(UNANSWERED).rev() {
        facts.add(
            FactKind::PendingTask,
            &shorten(&messages[i].text(), ITEM_WORDS),
            i,
        );
    }
    facts.current_state = last_text.map(|i| collapse(&messages[i].text()));
    facts.span = messages.len();
    facts
}

/// Arguments that name the file a writing tool changes.
const PATH_ARGUMENTS: [&str; 7] = [
    "file_path",
    "path",
    "notebook_path",
    "filename",
    "filepath",
    "target_file",
    "file",
];

/// The tool result that answers the call `id` made at `position`: the first
/// tool message after it with that call id.
fn result_of<'a>(messages: &'a [Message], position: usize, id: &str) -> Option<&'a Message> {
    messages[position + 1..]
        .iter()
        .take_while(|m| m.role != Role::Assistant || m.tool_calls.is_empty())
        .find(|m| m.role == Role::Tool && m.tool_call_id.as_deref() == Some(id))
}

fn is_one_line(text: &str, max_bytes: usize) -> bool {
    !text.is_empty() && text.len() <= max_bytes && !text.contains(['\n', '\r'])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extractive::fixtures::{call, sections_of, summarize};

    #[test]
    fn only_writing_tools_modify_files() {
        let messages = [
            call("", "c1", "Read", r#"{"file_path": "/r/read.rs"}"#),
            call(
                "",
                "c2",
                "Write",
                r#"{"file_path": "/r/written.rs", "content": "x"}"#,
            ),
            call(
                "",
                "c3",
                "str_replace_based_edit_tool",
                r#"{"command": "view", "path": "/r/viewed.rs"}"#,
            ),
            call(
                "",
                "c4",
                "str_replace_based_edit_tool",
                r#"{"command": "create", "path": "/r/created.rs"}"#,
            ),
            call(
                "",
                "c5",
                "TodoWrite",
                r#"{"todos": [{"content": "ship /r/todo.rs", "status": "pending"}]}"#,
            ),
        ];
        let facts = extract_facts(&messages);
        let modified: Vec<&str> = facts
            .of_kind(FactKind::FileModified)
            .map(|f| f.text.as_str())
            .collect();
        assert_eq!(modified, ["/r/written.rs", "/r/created.rs"]);
        let summary = summarize(&messages, 600);
        assert_eq!(sections_of(&summary, "/r/read.rs"), ["Important Values"]);
        assert_eq!(sections_of(&summary, "/r/todo.rs"), ["Pending Tasks"]);
    }

    // Regression: Codex CLI's free-form `apply_patch` tool (a
    // `custom_tool_call` whose input is the patch, not JSON) was skipped with
    // the calls whose arguments do not parse, and its files were never
    // listed as modified.
    #[test]
    fn a_free_form_patch_names_the_files_it_modifies() {
        let patch = "*** Begin Patch\n*** Update File: src/app.py\n@@\n-a\n+b\n\
                     *** Add File: docs/new.md\n+hi\n*** End Patch\n";
        let messages = [
            call("", "c1", "apply_patch", patch),
            call("", "c2", "read_notes", "see src/notes.py"),
        ];
        let facts = extract_facts(&messages);
        let modified: Vec<&str> = facts
            .of_kind(FactKind::FileModified)
            .map(|f| f.text.as_str())
            .collect();
        assert_eq!(modified, ["src/app.py", "docs/new.md"]);
        let summary = summarize(&messages, 600);
        assert_eq!(sections_of(&summary, "`src/app.py`"), ["Files Modified"]);
        assert_eq!(sections_of(&summary, "`docs/new.md`"), ["Files Modified"]);
    }

    #[test]
    fn pending_tasks_are_open_todos_and_unanswered_requests() {
        let messages = [
            Message::user("Fix the login page."),
            call(
                "On it.",
                "c1",
                "TodoWrite",
                r#"{"todos": [
                    {"content": "Reproduce the bug", "status": "completed"},
                    {"content": "Add a regression test", "status": "in_progress"},
                    {"content": "Update the changelog", "status": "pending"}]}"#,
            ),
            Message::tool_result("c1", "TodoWrite", "ok"),
            Message::assistant("The bug is reproduced.\n- [ ] check Safari"),
            Message::user("Also, can you bump the version?"),
        ];
        let facts = extract_facts(&messages);
        let pending: Vec<&str> = facts
            .of_kind(FactKind::PendingTask)
            .map(|f| f.text.as_str())
            .collect();
        assert_eq!(
            pending,
            [
                "check Safari",
                "Add a regression test",
                "Update the changelog",
                "Also, can you bump the version?"
            ]
        );
        assert_eq!(
            facts.current_state.as_deref(),
            Some("The bug is reproduced. - [ ] check Safari")
        );
    }
}
