//! Constructors and readers for the messages a processor sees and builds.

use crate::{Message, MessageFlags, Part, Role, ToolCall};

impl Message {
    /// A message with `role` and `content` and nothing else. Messages a
    /// processor inserts are usually [`Message::synthetic`].
    ///
    /// ```
    /// use agent_host_guest::{Message, Role};
    /// let m = Message::new(Role::User, "hello");
    /// assert_eq!(m.text(), "hello");
    /// ```
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        Message {
            id: String::new(),
            role,
            content: content.into(),
            parts: Vec::new(),
            reasoning: None,
            tool_calls: Vec::new(),
            tool_call_id: None,
            tool_name: None,
            usage: None,
            model: None,
            timestamp: None,
            agent: None,
            channel: None,
            flags: MessageFlags::empty(),
            metadata: None,
            tokens: 0,
        }
    }

    /// A message the processor wrote rather than a person or a model, flagged
    /// `synthetic` (the host gives it an id when it has none).
    pub fn synthetic(role: Role, content: impl Into<String>) -> Self {
        let mut m = Message::new(role, content);
        m.flags = MessageFlags::SYNTHETIC;
        m
    }

    /// An assistant message that calls tools.
    pub fn tool_calls(calls: Vec<ToolCall>) -> Self {
        let mut m = Message::new(Role::Assistant, "");
        m.tool_calls = calls;
        m
    }

    /// A tool's result for the call `call_id`.
    pub fn tool_result(call_id: impl Into<String>, content: impl Into<String>) -> Self {
        let mut m = Message::new(Role::Tool, content);
        m.tool_call_id = Some(call_id.into());
        m
    }

    /// Sets the id.
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = id.into();
        self
    }

    /// Sets the tool name (of a tool result).
    pub fn with_tool_name(mut self, name: impl Into<String>) -> Self {
        self.tool_name = Some(name.into());
        self
    }

    /// The message's text: `content` and its text parts, the non-empty ones
    /// joined by a blank line (as the host's `Message::text`). Borrowed when
    /// there is only one.
    pub fn text(&self) -> std::borrow::Cow<'_, str> {
        let mut pieces = std::iter::once(self.content.as_str())
            .chain(self.parts.iter().filter_map(|p| match p {
                Part::Text(t) => Some(t.as_str()),
                _ => None,
            }))
            .filter(|s| !s.is_empty());
        let Some(first) = pieces.next() else {
            return "".into();
        };
        match pieces.next() {
            None => first.into(),
            Some(second) => {
                let mut all = format!("{first}\n\n{second}");
                for piece in pieces {
                    all.push_str("\n\n");
                    all.push_str(piece);
                }
                all.into()
            }
        }
    }

    /// The content, then each text part, in order (empty ones included, so
    /// piece `k > 0` is the `k`-th text part).
    pub fn text_pieces(&self) -> impl DoubleEndedIterator<Item = &str> {
        let parts = self.parts.iter().filter_map(|p| match p {
            Part::Text(t) => Some(t.as_str()),
            _ => None,
        });
        std::iter::once(self.content.as_str()).chain(parts)
    }

    /// [`Message::text_pieces`], to change.
    pub fn text_pieces_mut(&mut self) -> impl Iterator<Item = &mut String> {
        let parts = self.parts.iter_mut().filter_map(|p| match p {
            Part::Text(t) => Some(t),
            _ => None,
        });
        std::iter::once(&mut self.content).chain(parts)
    }

    /// Every text a processor may read or rewrite: the content, text parts,
    /// readable reasoning and tool-call arguments. Redacted (opaque) reasoning
    /// is left out: it is the provider's, and changing it breaks it.
    pub fn texts(&self) -> impl Iterator<Item = &str> {
        let reasoning = self.reasoning.iter().filter(|r| !r.redacted);
        self.text_pieces()
            .chain(reasoning.map(|r| r.text.as_str()))
            .chain(self.tool_calls.iter().map(|c| c.arguments.as_str()))
    }

    /// [`Message::texts`], to change, in the same order.
    pub fn texts_mut(&mut self) -> impl Iterator<Item = &mut String> {
        let parts = self.parts.iter_mut().filter_map(|p| match p {
            Part::Text(t) => Some(t),
            _ => None,
        });
        let reasoning = self.reasoning.iter_mut().filter(|r| !r.redacted);
        std::iter::once(&mut self.content)
            .chain(parts)
            .chain(reasoning.map(|r| &mut r.text))
            .chain(self.tool_calls.iter_mut().map(|c| &mut c.arguments))
    }

    /// Whether the host or an earlier stage wrote it (checkpoints, repairs).
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

impl ToolCall {
    /// A call of tool `name` with JSON `arguments`.
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }
}

/// `word`, with an `s` unless `n` is 1, for log lines:
/// `format!("{n} {}", plural(n, "message"))`.
pub fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        word.into()
    } else {
        format!("{word}s")
    }
}

/// `12345678` as `12,345,678`, for log lines.
pub fn group_thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Reasoning;

    #[test]
    fn one_is_singular() {
        assert_eq!(plural(1, "message"), "message");
        assert_eq!(plural(0, "message"), "messages");
        assert_eq!(plural(2, "part"), "parts");
    }

    #[test]
    fn numbers_are_grouped_by_thousands() {
        assert_eq!(group_thousands(0), "0");
        assert_eq!(group_thousands(999), "999");
        assert_eq!(group_thousands(1000), "1,000");
        assert_eq!(group_thousands(12_345_678), "12,345,678");
    }

    #[test]
    fn texts_leave_opaque_reasoning_alone() {
        let mut m = Message::new(Role::Assistant, "a");
        m.parts.push(Part::Text("b".into()));
        m.tool_calls.push(ToolCall::new("c1", "t", "{}"));
        m.reasoning = Some(Reasoning {
            text: "opaque".into(),
            signature: None,
            redacted: true,
        });
        assert_eq!(m.texts().collect::<Vec<_>>(), ["a", "b", "{}"]);
        assert_eq!(m.texts_mut().count(), 3);
        m.reasoning.as_mut().unwrap().redacted = false;
        assert_eq!(m.texts().collect::<Vec<_>>(), ["a", "b", "opaque", "{}"]);
        assert_eq!(m.text_pieces().collect::<Vec<_>>(), ["a", "b"]);
    }
}
