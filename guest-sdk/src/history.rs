//! The history a processor edits: the input's headers (role, flags, token
//! counts, which call a tool result answers), its messages fetched from the
//! host on first use, what has been dropped, changed or inserted so far, and
//! the structure processors reason about (turns, tool exchanges).
//!
//! Under contract 0.2.0 the host does not copy the history into the
//! processor: the headers come in one call, and the whole messages (with
//! their texts) only when the processor first reads one. A processor that
//! works on structure alone ([`History::keep_last_turns`],
//! [`History::headers`], [`History::drop`]) never pays for text.

use std::cell::{Cell, OnceCell};
use std::collections::HashMap;
use std::marker::PhantomData;

use crate::__private::{Item, Replacement};
use crate::{Message, MessageFlags, Role, RunContext, Timestamp, Usage};

/// What a structural processor reads of a message, without its strings:
/// the input message's header as the host sent it (see
/// [`History::header`] for the current one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Who speaks.
    pub role: Role,
    /// Flags: synthetic, summary, error.
    pub flags: MessageFlags,
    /// The host's token estimate for the whole message.
    pub tokens: u32,
    /// When the message was created.
    pub timestamp: Option<Timestamp>,
    /// For a tool result: the index of the message whose call it answers
    /// (the nearest earlier call with its id), when that call is in the
    /// history.
    pub answers: Option<u32>,
    /// How many tool calls it makes.
    pub tool_calls: u32,
    /// How many structured parts it has.
    pub parts: u32,
    /// The length of its plain text content, in bytes.
    pub content_bytes: u32,
    /// The length of its reasoning text in bytes, when it has reasoning.
    pub reasoning_bytes: Option<u32>,
    /// The length of its metadata as JSON text in bytes (0 when none).
    pub metadata_bytes: u32,
    /// Provider-reported usage.
    pub usage: Option<Usage>,
}

impl Header {
    /// The header of `m` (without `answers`, which needs the history).
    pub fn of(m: &Message) -> Header {
        Header {
            role: m.role,
            flags: m.flags,
            tokens: m.tokens,
            timestamp: m.timestamp,
            answers: None,
            tool_calls: len32(m.tool_calls.len()),
            parts: len32(m.parts.len()),
            content_bytes: len32(m.content.len()),
            reasoning_bytes: m.reasoning.as_ref().map(|r| len32(r.text.len())),
            metadata_bytes: m.metadata.as_ref().map_or(0, |s| len32(s.len())),
            usage: m.usage,
        }
    }

    /// Whether the host or an earlier stage wrote it.
    pub fn is_synthetic(&self) -> bool {
        self.flags.contains(MessageFlags::SYNTHETIC)
    }

    /// Whether it is part of a summary checkpoint.
    pub fn is_summary(&self) -> bool {
        self.flags.contains(MessageFlags::SUMMARY)
    }

    /// Whether it starts a turn: a user message that is not synthetic.
    pub fn starts_turn(&self) -> bool {
        self.role == Role::User && !self.is_synthetic()
    }
}

fn len32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// For each message, the index of the nearest earlier message with a call
/// of its `tool_call_id`, for tool results: the host's rule in 0.2.0.
fn answers(messages: &[Message]) -> Vec<Option<u32>> {
    let mut calls: HashMap<&str, u32> = HashMap::new();
    messages
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let answers = match (&m.role, &m.tool_call_id) {
                (Role::Tool, Some(id)) => calls.get(id.as_str()).copied(),
                _ => None,
            };
            for call in &m.tool_calls {
                calls.insert(&call.id, len32(i));
            }
            answers
        })
        .collect()
}

/// The whole messages, fetched from `source` on first use (`n` of them).
fn load<'m>(cell: &'m OnceCell<Vec<Message>>, source: &Source<'_>, n: usize) -> &'m Vec<Message> {
    cell.get_or_init(|| match source {
        Source::Local(messages, _) => {
            let _ = n;
            messages.take().unwrap_or_default()
        }
        #[cfg(all(target_arch = "wasm32", not(feature = "contract-0-1")))]
        Source::Host(host) => host.messages(0, len32(n)),
    })
}

/// Where the whole messages come from when a processor first reads one.
enum Source<'a> {
    /// Already here, given whole (contract 0.1.0, native tests), and moved
    /// into the history on first read, as if fetched: so that
    /// [`History::is_loaded`] says natively what it says in a 0.2.0
    /// component.
    Local(Cell<Option<Vec<Message>>>, PhantomData<&'a ()>),
    /// The host's history resource, asked on first use (contract 0.2.0).
    #[cfg(all(target_arch = "wasm32", not(feature = "contract-0-1")))]
    Host(&'a crate::bindings::agent_host::history::types::History),
}

/// The session's history for one call, and the edits made to it so far.
///
/// Every input message starts out kept. [`History::drop`], [`History::retain`]
/// and the structural helpers drop messages (a processor that only drops
/// never builds a message), [`History::replace`] and
/// [`History::message_mut`] change one, [`History::insert_before`] and
/// [`History::push`] add new ones. Reads ([`History::messages`],
/// [`History::get`]) see the current contents, indices are always those of
/// the input, and nothing is ever reordered.
///
/// The headers ([`History::headers`], [`History::header`]) are always
/// there; the first read of a whole message fetches every message from the
/// host (once), so a processor that reads only headers pays for no text.
///
/// ```
/// use agent_host_guest::{History, Message, Role, ToolCall};
///
/// let mut history = History::for_test(vec![
///     Message::new(Role::User, "weather?"),
///     Message::tool_calls(vec![ToolCall::new("c1", "weather", "{}")]),
///     Message::tool_result("c1", "sunny"),
///     Message::new(Role::Assistant, "It is sunny."),
/// ]);
/// history.drop(1);                   // the call...
/// history.settle_tool_exchanges();   // ...takes its result with it
/// assert!(!history.is_kept(2));
/// assert_eq!(history.kept(), 2);
/// ```
pub struct History<'a> {
    ctx: RunContext,
    headers: Vec<Header>,
    messages: OnceCell<Vec<Message>>,
    source: Source<'a>,
    dropped: Vec<bool>,
    changed: Vec<bool>,
    /// New messages with the input index they go before (`len()` for the end),
    /// in the order they were added.
    inserts: Vec<(usize, Message)>,
    /// Which call each input result answers, as in the input.
    callers: Vec<Option<usize>>,
}

impl<'a> History<'a> {
    /// A history given whole (contract 0.1.0, native tests); the headers
    /// are worked out here.
    pub(crate) fn new(ctx: RunContext, messages: Vec<Message>) -> Self {
        let links = answers(&messages);
        let headers = messages
            .iter()
            .zip(&links)
            .map(|(m, a)| Header {
                answers: *a,
                ..Header::of(m)
            })
            .collect();
        let source = Source::Local(Cell::new(Some(messages)), PhantomData);
        History::with(ctx, headers, OnceCell::new(), source)
    }

    /// The host's history (contract 0.2.0): its headers now, its messages
    /// when first read.
    #[cfg(all(target_arch = "wasm32", not(feature = "contract-0-1")))]
    pub(crate) fn from_host(
        ctx: RunContext,
        host: &'a crate::bindings::agent_host::history::types::History,
    ) -> Self {
        let n = host.len();
        let headers = host
            .headers(0, n)
            .into_iter()
            .map(|h| Header {
                role: h.role,
                flags: h.flags,
                tokens: h.tokens,
                timestamp: h.timestamp,
                answers: h.answers,
                tool_calls: h.tool_calls,
                parts: h.parts,
                content_bytes: h.content_bytes,
                reasoning_bytes: h.reasoning_bytes,
                metadata_bytes: h.metadata_bytes,
                usage: h.usage,
            })
            .collect();
        History::with(ctx, headers, OnceCell::new(), Source::Host(host))
    }

    fn with(
        ctx: RunContext,
        headers: Vec<Header>,
        messages: OnceCell<Vec<Message>>,
        source: Source<'a>,
    ) -> Self {
        let n = headers.len();
        let callers = headers
            .iter()
            .map(|h| h.answers.map(|a| a as usize).filter(|&a| a < n))
            .collect();
        History {
            ctx,
            headers,
            messages,
            source,
            dropped: vec![false; n],
            changed: vec![false; n],
            inserts: Vec::new(),
            callers,
        }
    }

    /// A history with a default run context, for tests and examples; see
    /// [`crate::testing`] to run a whole processor natively.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn for_test(messages: Vec<Message>) -> Self {
        History::new(crate::testing::context("{}"), messages)
    }

    /// What the host says about this call: the session, the model, its context
    /// window and the budget, the time, the configuration's text.
    pub fn context(&self) -> &RunContext {
        &self.ctx
    }

    /// How many messages the input had.
    pub fn len(&self) -> usize {
        self.headers.len()
    }

    /// Whether the input had no message.
    pub fn is_empty(&self) -> bool {
        self.headers.is_empty()
    }

    /// The input's headers, as the host sent them: roles, flags, token
    /// counts, timestamps, tool links and sizes, without any text.
    pub fn headers(&self) -> &[Header] {
        &self.headers
    }

    /// The header of message `index` as it is now (a changed message's is
    /// worked out from its new contents; its `answers` stays the input's).
    ///
    /// # Panics
    /// When `index` is out of range, like slice indexing.
    pub fn header(&self, index: usize) -> Header {
        let input = self.headers[index];
        match self.changed[index] {
            false => input,
            true => Header {
                answers: input.answers,
                ..Header::of(&self.messages()[index])
            },
        }
    }

    /// Whether the whole messages have been fetched from the host: whether
    /// the processor read, changed or replaced a message (or settled tool
    /// exchanges that link a result to a call). Natively and under contract
    /// 0.1.0 the messages are here from the start, but this says the same
    /// as it would in a 0.2.0 component.
    pub fn is_loaded(&self) -> bool {
        self.messages.get().is_some()
    }

    /// The input's messages, with the changes made so far (dropped ones
    /// included: see [`History::is_kept`]). The first call fetches them
    /// from the host, texts included.
    pub fn messages(&self) -> &[Message] {
        load(&self.messages, &self.source, self.headers.len())
    }

    fn messages_mut(&mut self) -> &mut Vec<Message> {
        load(&self.messages, &self.source, self.headers.len());
        match self.messages.get_mut() {
            Some(m) => m,
            None => unreachable!("the messages were just fetched"),
        }
    }

    /// Message `index`, as it is now.
    pub fn get(&self, index: usize) -> Option<&Message> {
        self.messages().get(index)
    }

    /// Whether message `index` is still kept.
    pub fn is_kept(&self, index: usize) -> bool {
        !self.dropped[index]
    }

    /// How many input messages are still kept (changed ones included).
    pub fn kept(&self) -> usize {
        self.dropped.iter().filter(|d| !**d).count()
    }

    /// Drops message `index` from the output.
    ///
    /// # Panics
    /// When `index` is out of range, like slice indexing.
    pub fn drop(&mut self, index: usize) {
        self.dropped[index] = true;
    }

    /// Keeps message `index` after all (undoes [`History::drop`]).
    pub fn restore(&mut self, index: usize) {
        self.dropped[index] = false;
    }

    /// Drops every kept message for which `keep` is false, like
    /// [`Vec::retain`]. Reads whole messages (see
    /// [`History::retain_headers`] for a test on headers alone).
    pub fn retain(&mut self, mut keep: impl FnMut(&Message) -> bool) {
        let messages = load(&self.messages, &self.source, self.headers.len());
        for (m, dropped) in messages.iter().zip(self.dropped.iter_mut()) {
            if !*dropped && !keep(m) {
                *dropped = true;
            }
        }
    }

    /// Drops every kept message whose current header fails `keep`, without
    /// reading any text.
    pub fn retain_headers(&mut self, mut keep: impl FnMut(&Header) -> bool) {
        for i in 0..self.len() {
            if !self.dropped[i] && !keep(&self.header(i)) {
                self.dropped[i] = true;
            }
        }
    }

    /// Replaces message `index` by `message` (it stays at its place).
    pub fn replace(&mut self, index: usize, message: Message) {
        self.messages_mut()[index] = message;
        self.changed[index] = true;
    }

    /// Message `index`, to change in place. The host receives it back as a
    /// replacement, so only ask for it when you change it.
    pub fn message_mut(&mut self, index: usize) -> &mut Message {
        self.changed[index] = true;
        &mut self.messages_mut()[index]
    }

    /// Whether message `index` was replaced or changed.
    pub fn is_changed(&self, index: usize) -> bool {
        self.changed[index]
    }

    /// Inserts a new message before input message `index` (`len()` appends).
    /// Several inserts at one place keep the order they were made in.
    pub fn insert_before(&mut self, index: usize, message: Message) {
        assert!(
            index <= self.len(),
            "insert_before({index}) in a history of {}",
            self.len()
        );
        self.inserts.push((index, message));
    }

    /// Appends a new message after the last one.
    pub fn push(&mut self, message: Message) {
        self.inserts.push((self.len(), message));
    }

    /// The indices where the kept turns start (a user message that is not
    /// synthetic), oldest first.
    pub fn turn_starts(&self) -> Vec<usize> {
        (0..self.len())
            .filter(|&i| !self.dropped[i] && self.header(i).starts_turn())
            .collect()
    }

    /// For each input message, the index of the message whose tool call it
    /// answers in the input (`None` for messages that are not tool results,
    /// and for results whose call is not in the history). A result answers
    /// the nearest earlier call with its id.
    pub fn tool_callers(&self) -> &[Option<usize>] {
        &self.callers
    }

    /// For each message, the name of the tool whose result it is: its
    /// `tool_name`, or the name in the call it answers when it has none.
    /// `None` for messages that are not tool results or whose tool is unknown.
    pub fn tool_names(&self) -> Vec<Option<&str>> {
        let mut calls: HashMap<&str, &str> = HashMap::new();
        self.messages()
            .iter()
            .map(|m| {
                for call in &m.tool_calls {
                    calls.insert(&call.id, &call.name);
                }
                if m.role != Role::Tool {
                    return None;
                }
                m.tool_name.as_deref().or_else(|| {
                    m.tool_call_id
                        .as_deref()
                        .and_then(|id| calls.get(id).copied())
                })
            })
            .collect()
    }

    /// The index where the last `n` tool results start: results from there on
    /// are the `n` most recent. The length when `n` is 0; 0 when there are no
    /// more than `n`.
    pub fn last_tool_results_start(&self, n: usize) -> usize {
        if n == 0 {
            return self.len();
        }
        (0..self.len())
            .rev()
            .filter(|&i| self.header(i).role == Role::Tool)
            .nth(n - 1)
            .unwrap_or(0)
    }

    /// Keeps the last `turns` kept turns, system messages and summaries, and
    /// drops everything older. The cut moves back rather than split a tool
    /// exchange. Does nothing when there are no more than `turns` turns.
    /// Reads headers only.
    pub fn keep_last_turns(&mut self, turns: usize) {
        let starts = self.turn_starts();
        if starts.len() <= turns {
            return;
        }
        let mut cut = if turns == 0 {
            self.len()
        } else {
            starts[starts.len() - turns]
        };
        // A kept result after the cut whose call is before it pulls the cut
        // back, and the results between the old and the new cut may pull it
        // further.
        let callers = &self.callers;
        let mut checked = self.len();
        while cut < checked {
            let earliest = (cut..checked)
                .filter(|&i| !self.dropped[i])
                .filter_map(|i| callers[i])
                .min();
            checked = cut;
            if let Some(earliest) = earliest
                && earliest < cut
            {
                cut = earliest;
            }
        }
        for i in 0..cut {
            let h = self.header(i);
            if h.role != Role::System && !h.is_summary() {
                self.dropped[i] = true;
            }
        }
    }

    /// Makes the tool exchanges whole again after drops and changes: a kept
    /// result whose call was dropped, or taken out of its message, is
    /// dropped; a kept message whose calls lost all their results loses those
    /// calls (and is dropped when nothing else is left in it). Calls that had
    /// no result in the input are left alone.
    pub fn settle_tool_exchanges(&mut self) {
        let callers = self.callers.clone();
        // Nothing links a result to a call: there is nothing to settle, and
        // no text to read.
        if callers.iter().all(Option::is_none) {
            return;
        }
        let messages = load(&self.messages, &self.source, self.headers.len());
        // Results of dropped or removed calls go.
        for (i, caller) in callers.iter().enumerate() {
            if let Some(c) = *caller
                && !self.dropped[i]
            {
                let id = messages[i].tool_call_id.as_deref().unwrap_or_default();
                let gone = self.dropped[c] || !messages[c].tool_calls.iter().any(|k| k.id == id);
                if gone {
                    self.dropped[i] = true;
                }
            }
        }
        // Calls whose results all went are taken out of their message.
        let mut answered: HashMap<usize, (Vec<&str>, Vec<&str>)> = HashMap::new();
        for (i, caller) in callers.iter().enumerate() {
            if let Some(c) = *caller {
                let id = messages[i].tool_call_id.as_deref().unwrap_or_default();
                let (kept, gone) = answered.entry(c).or_default();
                if self.dropped[i] { gone } else { kept }.push(id);
            }
        }
        let mut strip: Vec<(usize, Vec<String>)> = Vec::new();
        for (c, (kept, gone)) in answered {
            if self.dropped[c] {
                continue;
            }
            let lost: Vec<String> = gone
                .into_iter()
                .filter(|id| !kept.contains(id))
                .map(str::to_owned)
                .collect();
            if !lost.is_empty() {
                strip.push((c, lost));
            }
        }
        for (c, lost) in strip {
            let m = self.message_mut(c);
            m.tool_calls.retain(|call| !lost.contains(&call.id));
            let empty = m.tool_calls.is_empty()
                && m.content.trim().is_empty()
                && m.parts.is_empty()
                && m.reasoning.is_none();
            if empty {
                self.dropped[c] = true;
            }
        }
    }

    /// The answer for the host: one item per kept, changed or new message, in
    /// order. Messages that were never fetched cannot have changed.
    pub(crate) fn into_items(self) -> Vec<Item> {
        let History {
            headers,
            messages,
            dropped,
            changed,
            mut inserts,
            ..
        } = self;
        inserts.sort_by_key(|(at, _)| *at);
        let mut inserts = inserts.into_iter().peekable();
        let n = headers.len();
        let mut messages = messages.into_inner().map(Vec::into_iter);
        let mut items = Vec::with_capacity(n + inserts.len());
        for i in 0..n {
            while let Some((_, new)) = inserts.next_if(|(at, _)| *at == i) {
                items.push(Item::Insert(new));
            }
            let m = messages.as_mut().and_then(Iterator::next);
            let index = i as u32;
            if dropped[i] {
                discard(m);
            } else if changed[i]
                && let Some(m) = m
            {
                items.push(Item::Replace(Replacement { index, message: m }));
            } else {
                items.push(Item::Keep(index));
                discard(m);
            }
        }
        items.extend(inserts.map(|(_, new)| Item::Insert(new)));
        items
    }

    /// The output the host would build from these edits (without its
    /// validation and id assignment).
    #[cfg(not(target_arch = "wasm32"))]
    pub(crate) fn into_messages(self) -> Vec<Message> {
        let History {
            messages,
            source,
            dropped,
            mut inserts,
            ..
        } = self;
        inserts.sort_by_key(|(at, _)| *at);
        let mut inserts = inserts.into_iter().peekable();
        // Messages never read are still in the source.
        let Source::Local(unread, _) = source;
        let messages = messages
            .into_inner()
            .or_else(|| unread.take())
            .unwrap_or_default();
        let mut out = Vec::with_capacity(messages.len() + inserts.len());
        for (i, m) in messages.into_iter().enumerate() {
            while let Some((_, new)) = inserts.next_if(|(at, _)| *at == i) {
                out.push(new);
            }
            if !dropped[i] {
                out.push(m);
            }
        }
        out.extend(inserts.map(|(_, new)| new));
        out
    }
}

/// Lets go of an input message. Inside WebAssembly the instance is thrown
/// away after the call, so freeing its strings one by one is wasted work.
fn discard(m: Option<Message>) {
    #[cfg(target_arch = "wasm32")]
    std::mem::forget(m);
    #[cfg(not(target_arch = "wasm32"))]
    drop(m);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ToolCall;

    fn user(text: &str) -> Message {
        Message::new(Role::User, text).with_id(text)
    }
    fn assistant(text: &str) -> Message {
        Message::new(Role::Assistant, text).with_id(text)
    }
    fn call(id: &str) -> Message {
        Message::tool_calls(vec![ToolCall::new(id, "t", "{}")]).with_id(format!("call-{id}"))
    }
    fn result(id: &str) -> Message {
        Message::tool_result(id, "ok").with_id(format!("result-{id}"))
    }
    fn ids(h: History<'_>) -> Vec<String> {
        h.into_messages().into_iter().map(|m| m.id).collect()
    }

    #[test]
    fn headers_link_results_to_their_calls_and_follow_changes() {
        let mut h = History::for_test(vec![
            user("u"),
            call("c1"),
            result("c1"),
            call("c1"),
            result("c1"),
            result("c9"),
        ]);
        let answers: Vec<Option<u32>> = h.headers().iter().map(|x| x.answers).collect();
        assert_eq!(answers, [None, None, Some(1), None, Some(3), None]);
        assert_eq!(h.tool_callers(), [None, None, Some(1), None, Some(3), None]);
        assert_eq!(h.headers()[1].tool_calls, 1);
        assert_eq!(h.headers()[0].content_bytes, 1);
        // A changed message's header is worked out again; its link stays.
        h.message_mut(2).role = Role::User;
        assert_eq!(h.header(2).role, Role::User);
        assert_eq!(h.header(2).answers, Some(1));
        assert_eq!(h.headers()[2].role, Role::Tool);
        // A test on headers drops without reading a message.
        h.retain_headers(|x| x.role != Role::Tool);
        assert_eq!(
            (0..h.len()).filter(|&i| h.is_kept(i)).collect::<Vec<_>>(),
            [0, 1, 2, 3]
        );
    }

    #[test]
    fn items_keep_replace_and_insert_in_order() {
        let mut h = History::for_test(vec![user("a"), assistant("b"), user("c")]);
        h.drop(1);
        h.replace(2, user("C"));
        h.insert_before(0, assistant("first"));
        h.push(assistant("last"));
        h.insert_before(2, assistant("x"));
        h.insert_before(2, assistant("y"));
        let items = h.into_items();
        let shape: Vec<String> = items
            .iter()
            .map(|i| match i {
                Item::Keep(k) => format!("keep {k}"),
                Item::Replace(r) => format!("replace {} {}", r.index, r.message.content),
                Item::Insert(m) => format!("insert {}", m.content),
            })
            .collect();
        assert_eq!(
            shape,
            [
                "insert first",
                "keep 0",
                "insert x",
                "insert y",
                "replace 2 C",
                "insert last"
            ]
        );
    }

    #[test]
    fn last_turns_keep_system_and_summaries() {
        let mut system = Message::new(Role::System, "rules").with_id("sys");
        system.flags = crate::MessageFlags::empty();
        let mut summary = assistant("summary");
        summary.flags = crate::MessageFlags::SUMMARY | crate::MessageFlags::SYNTHETIC;
        let mut h = History::for_test(vec![
            system,
            summary,
            user("u1"),
            assistant("a1"),
            user("u2"),
            assistant("a2"),
            user("u3"),
        ]);
        h.keep_last_turns(2);
        assert_eq!(ids(h), ["sys", "summary", "u2", "a2", "u3"]);
    }

    #[test]
    fn last_turns_never_split_an_exchange() {
        // A user message between a call and its result: the cut moves back.
        let h = vec![
            user("u1"),
            call("c1"),
            user("u2"),
            result("c1"),
            assistant("a"),
        ];
        let mut h = History::for_test(h);
        h.keep_last_turns(1);
        assert_eq!(ids(h), ["call-c1", "u2", "result-c1", "a"]);
    }

    #[test]
    fn the_cut_moves_back_until_no_exchange_is_split() {
        // Regression: one pull-back left `result-a` without its call.
        let h = vec![
            user("u0"),
            call("a"),
            user("u2"),
            call("b"),
            result("a"),
            user("u5"),
            result("b"),
        ];
        let mut h = History::for_test(h);
        h.keep_last_turns(1);
        assert_eq!(
            ids(h),
            ["call-a", "u2", "call-b", "result-a", "u5", "result-b"]
        );
    }

    #[test]
    fn turns_already_dropped_do_not_count() {
        let mut h = History::for_test(vec![user("u1"), assistant("a1"), user("u2"), user("u3")]);
        h.drop(3);
        h.keep_last_turns(1);
        assert_eq!(ids(h), ["u2"]);
    }

    #[test]
    fn settling_sees_calls_taken_out_of_a_message() {
        let mut h = History::for_test(vec![user("u"), call("a"), result("a")]);
        h.message_mut(1).tool_calls.clear();
        h.message_mut(1).content = "never mind".into();
        h.settle_tool_exchanges();
        assert_eq!(ids(h), ["u", "call-a"]);
    }

    /// Tool pairing is whole after keep_last_turns and settling, whatever
    /// was dropped: every kept result has its call kept, in the message.
    #[test]
    fn pairing_stays_whole_for_every_drop_pattern() {
        let base = vec![
            user("u0"),
            call("a"),
            user("u2"),
            call("b"),
            result("a"),
            result("b"),
            user("u6"),
            call("c"),
            result("c"),
        ];
        let n = base.len();
        for mask in 0u32..(1 << n) {
            for turns in 1..3 {
                let mut h = History::for_test(base.clone());
                for i in 0..n {
                    if mask & (1 << i) != 0 {
                        h.drop(i);
                    }
                }
                h.keep_last_turns(turns);
                h.settle_tool_exchanges();
                let out = h.into_messages();
                for (k, m) in out.iter().enumerate() {
                    if let Some(id) = &m.tool_call_id {
                        assert!(
                            out[..k]
                                .iter()
                                .any(|c| c.tool_calls.iter().any(|t| &t.id == id)),
                            "mask {mask:b}, {turns} turns: {id} lost its call"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn fewer_turns_than_asked_keeps_everything() {
        let mut h = History::for_test(vec![assistant("hello"), user("u1")]);
        h.keep_last_turns(4);
        assert_eq!(h.kept(), 2);
    }

    #[test]
    fn settling_drops_results_of_dropped_calls_and_calls_without_results() {
        let mut two = call("c1");
        two.tool_calls.push(ToolCall::new("c2", "t", "{}"));
        two.content = "checking two things".into();
        let mut h = History::for_test(vec![
            user("u"),
            two,
            result("c1"),
            result("c2"),
            call("c3"),
            result("c3"),
        ]);
        h.drop(3); // the result of c2
        h.drop(4); // the call c3
        h.settle_tool_exchanges();
        assert!(!h.is_kept(5), "c3's result goes with its call");
        assert!(h.is_changed(1));
        let out = h.into_messages();
        assert_eq!(out[1].tool_calls.len(), 1, "c2 lost its result");
        assert_eq!(out[1].tool_calls[0].id, "c1");
        assert_eq!(out.len(), 3);
    }

    #[test]
    fn a_call_left_with_nothing_is_dropped() {
        let mut h = History::for_test(vec![user("u"), call("c1"), result("c1")]);
        h.drop(2);
        h.settle_tool_exchanges();
        assert_eq!(ids(h), ["u"]);
    }

    #[test]
    fn tool_names_come_from_the_result_or_its_call() {
        let named = result("c1").with_tool_name("read");
        let h = History::for_test(vec![user("u"), call("c1"), named, call("c2"), result("c2")]);
        assert_eq!(h.tool_names(), [None, None, Some("read"), None, Some("t")]);
        assert_eq!(h.last_tool_results_start(0), 5);
        assert_eq!(h.last_tool_results_start(1), 4);
        assert_eq!(h.last_tool_results_start(2), 2);
        assert_eq!(h.last_tool_results_start(3), 0);
    }

    #[test]
    fn interrupted_calls_are_left_alone() {
        let mut h = History::for_test(vec![user("u"), call("c1")]);
        h.settle_tool_exchanges();
        assert_eq!(h.kept(), 2);
        assert!(!h.is_changed(1));
    }
}
