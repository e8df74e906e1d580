//! Markdown export: a history rendered for people to read, in a file, an
//! issue or a chat.
//!
//! The output is CommonMark with the HTML `<details>` blocks that GitHub and
//! most renderers fold: reasoning and tool results are folded, tool calls are
//! summarised in one line each. Text and tool content can hold any
//! characters; fences and code spans are chosen so that backticks in them
//! never break the document. The export is for reading only; it is not a
//! format agent-host reads back (use `format::Format::Jsonl` for that).

use std::fmt::Write as _;

use crate::message::{MediaRef, Message, Part, Role};

/// How many characters of a tool call's arguments the one-line summary shows.
const MAX_ARGUMENT_CHARS: usize = 200;

/// Renders `messages` as a Markdown document, with `title` as its `#` heading.
///
/// - System, user and assistant messages get a `###` heading naming the role,
///   followed in parentheses by the agent, the timestamp (UTC) and
///   "synthetic" for messages made by agent-host, when present:
///   `### Assistant (coder, 2025-06-02 09:00:09 UTC)`.
/// - An assistant message's reasoning is folded under "Reasoning".
/// - Tool calls are one bullet each: name, id and the arguments, cut to about
///   200 characters.
/// - Tool results are folded under "Result of `name` (N chars)" ("error" is
///   added for failed calls), the content in a fenced code block.
/// - A summary checkpoint shows its assistant summary under
///   `### Summary (checkpoint)` and its synthetic user boundary as one italic
///   line.
/// - Images are `![image](url)` (embedded `data:` images are only named),
///   images in the media folder `[image: path]`, files `[file: name](path)`.
///
/// An empty history gives just the title, or an empty string without one.
///
/// ```
/// use agent_host_core::{export, Message};
///
/// let mut call = Message::assistant("Let me look.");
/// call.push_tool_call("call_1", "read_file", r#"{"path":"notes.md"}"#);
/// let history = [
///     Message::user("What is in notes.md?"),
///     call,
///     Message::tool_result("call_1", "read_file", "buy milk"),
/// ];
/// let md = export::to_markdown(&history, Some("Notes"));
/// assert!(md.starts_with("# Notes\n\n### User\n\nWhat is in notes.md?\n"));
/// assert!(md.contains("- Tool call `read_file` (`call_1`): `{\"path\":\"notes.md\"}`"));
/// assert!(md.contains("<summary>Result of <code>read_file</code> (8 chars)</summary>"));
/// ```
pub fn to_markdown(messages: &[Message], title: Option<&str>) -> String {
    let mut blocks: Vec<String> = Vec::new();
    if let Some(title) = title {
        blocks.push(format!("# {}", one_line(title)));
    }
    for m in messages {
        render_message(m, &mut blocks);
    }
    if blocks.is_empty() {
        return String::new();
    }
    let mut out = blocks.join("\n\n");
    out.push('\n');
    out
}

/// Appends the blocks of one message.
fn render_message(m: &Message, blocks: &mut Vec<String>) {
    if m.role == Role::Tool {
        blocks.push(tool_result(m));
        return;
    }
    if m.summary && m.role == Role::User {
        blocks.push("*Checkpoint: the conversation before this point is summarised below.*".into());
        return;
    }
    blocks.push(heading(m));
    if let Some(reasoning) = &m.reasoning {
        let body = if reasoning.redacted {
            "*(redacted)*"
        } else {
            reasoning.text.trim()
        };
        blocks.push(format!(
            "<details><summary>Reasoning</summary>\n\n{body}\n\n</details>"
        ));
    }
    content_blocks(m, blocks);
    if !m.tool_calls.is_empty() {
        let list: Vec<String> = m
            .tool_calls
            .iter()
            .map(|call| {
                format!(
                    "- Tool call {} ({}): {}",
                    code_span(&call.name),
                    code_span(&call.id),
                    arguments(&call.arguments)
                )
            })
            .collect();
        blocks.push(list.join("\n"));
    }
}

/// The `###` heading line of a message.
fn heading(m: &Message) -> String {
    let name = match m.role {
        Role::Assistant if m.summary => "Summary",
        Role::System => "System",
        Role::User => "User",
        Role::Assistant => "Assistant",
        Role::Tool => "Tool",
    };
    let mut details: Vec<String> = Vec::new();
    if m.summary {
        details.push("checkpoint".into());
    }
    if let Some(agent) = &m.agent {
        details.push(one_line(agent));
    }
    if let Some(time) = m.timestamp {
        details.push(time.format("%Y-%m-%d %H:%M:%S UTC").to_string());
    }
    if m.synthetic && !m.summary {
        details.push("synthetic".into());
    }
    if details.is_empty() {
        format!("### {name}")
    } else {
        format!("### {name} ({})", details.join(", "))
    }
}

/// Appends the plain content and the parts of a message, in order.
fn content_blocks(m: &Message, blocks: &mut Vec<String>) {
    let content = m.content.trim_end();
    if !content.trim_start().is_empty() {
        blocks.push(content.to_owned());
    }
    for part in &m.parts {
        match part {
            Part::Text { text } => {
                let text = text.trim_end();
                if !text.trim_start().is_empty() {
                    blocks.push(text.to_owned());
                }
            }
            Part::Image { source, mime_type } => blocks.push(image(source, mime_type.as_deref())),
            Part::File { name, path, .. } => {
                blocks.push(format!(
                    "[file: {}]({})",
                    link_text(name),
                    destination(path)
                ));
            }
        }
    }
}

/// An image reference.
fn image(source: &MediaRef, mime_type: Option<&str>) -> String {
    match source {
        // A data URL can be megabytes of base64: name it rather than inline it.
        MediaRef::Url(url) if url.starts_with("data:") => {
            let kind = mime_type
                .or_else(|| url["data:".len()..].split([';', ',']).next())
                .filter(|kind| !kind.is_empty())
                .unwrap_or("unknown type");
            format!("[image: embedded {}]", link_text(kind))
        }
        MediaRef::Url(url) => format!("![image]({})", destination(url)),
        MediaRef::Path(path) => format!("[image: {}]", link_text(path)),
    }
}

/// A folded tool result.
fn tool_result(m: &Message) -> String {
    let text = m.text();
    let chars = text.chars().count();
    let subject = match (&m.tool_name, &m.tool_call_id) {
        (Some(name), _) => format!("Result of <code>{}</code>", escape_html(name)),
        (None, Some(id)) => format!("Result of call <code>{}</code>", escape_html(id)),
        (None, None) => "Tool result".to_owned(),
    };
    let error = if m.is_error { "error, " } else { "" };
    let mut out = format!("<details><summary>{subject} ({error}{chars} chars)</summary>\n\n");
    out.push_str(&code_block(&text));
    let mut extra = Vec::new();
    for part in &m.parts {
        match part {
            Part::Text { .. } => {}
            Part::Image { source, mime_type } => extra.push(image(source, mime_type.as_deref())),
            Part::File { name, path, .. } => {
                extra.push(format!(
                    "[file: {}]({})",
                    link_text(name),
                    destination(path)
                ));
            }
        }
    }
    for line in extra {
        let _ = write!(out, "\n\n{line}");
    }
    out.push_str("\n\n</details>");
    out
}

/// The arguments of a tool call as an inline code span, cut to
/// [`MAX_ARGUMENT_CHARS`] characters with an ellipsis, on one line.
fn arguments(arguments: &str) -> String {
    let flat: String = arguments
        .trim()
        .chars()
        .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
        .collect();
    if flat.is_empty() {
        return "(no arguments)".to_owned();
    }
    match flat.char_indices().nth(MAX_ARGUMENT_CHARS) {
        Some((cut, _)) => code_span(&format!("{}…", &flat[..cut])),
        None => code_span(&flat),
    }
}

/// `text` as an inline code span: delimited by more backticks than its longest
/// run of backticks, and padded with spaces when it starts or ends with a
/// backtick or a space (CommonMark strips one space on each side).
fn code_span(text: &str) -> String {
    if text.is_empty() {
        return "` `".to_owned();
    }
    let fence = "`".repeat(longest_backtick_run(text) + 1);
    let pad = text.starts_with(['`', ' ']) || text.ends_with(['`', ' ']);
    let space = if pad { " " } else { "" };
    format!("{fence}{space}{text}{space}{fence}")
}

/// `text` as a fenced code block, with a fence longer than any run of
/// backticks in it (and at least three backticks).
fn code_block(text: &str) -> String {
    let fence = "`".repeat((longest_backtick_run(text) + 1).max(3));
    let body = text.trim_end_matches(['\n', '\r']);
    if body.is_empty() {
        format!("{fence}\n{fence}")
    } else {
        format!("{fence}\n{body}\n{fence}")
    }
}

/// The length of the longest run of consecutive backticks in `text`.
fn longest_backtick_run(text: &str) -> usize {
    let (mut longest, mut current) = (0, 0);
    for c in text.chars() {
        if c == '`' {
            current += 1;
            longest = longest.max(current);
        } else {
            current = 0;
        }
    }
    longest
}

/// Escapes the characters HTML gives a meaning to.
fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Text for inside `[...]`: brackets and backslashes escaped, on one line.
fn link_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in one_line(text).chars() {
        if matches!(c, '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A link destination, wrapped in `<...>` when it holds spaces or
/// parentheses.
fn destination(target: &str) -> String {
    let target = one_line(target);
    if target.contains([' ', '(', ')', '<', '>']) {
        let escaped = target.replace('<', "%3C").replace('>', "%3E");
        format!("<{escaped}>")
    } else {
        target
    }
}

/// `text` with line breaks turned into spaces, for headings and links.
fn one_line(text: &str) -> String {
    text.trim()
        .chars()
        .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Reasoning;
    use chrono::{TimeZone, Utc};

    #[test]
    fn empty_history_is_the_title_or_nothing() {
        assert_eq!(to_markdown(&[], None), "");
        assert_eq!(to_markdown(&[], Some("Session 1")), "# Session 1\n");
    }

    #[test]
    fn a_tool_exchange_renders_calls_and_folded_results() {
        let mut user = Message::user("Read x please");
        user.timestamp = Some(Utc.with_ymd_and_hms(2025, 6, 2, 9, 0, 0).unwrap());
        let mut call = Message::assistant("Reading it.");
        call.agent = Some("coder".into());
        call.timestamp = Some(Utc.with_ymd_and_hms(2025, 6, 2, 9, 0, 9).unwrap());
        call.reasoning = Some(Reasoning {
            text: "The user wants x.".into(),
            ..Reasoning::default()
        });
        call.push_tool_call("call_1", "read_file", r#"{"path": "x"}"#);
        call.push_tool_call("call_2", "stat", r#"{"path": "y"}"#);
        let ok = Message::tool_result("call_1", "read_file", "hello\n");
        let mut failed = Message::tool_result("call_2", "stat", "no such file");
        failed.is_error = true;
        let md = to_markdown(&[user, call, ok, failed], Some("Chat"));
        let expected = "# Chat

### User (2025-06-02 09:00:00 UTC)

Read x please

### Assistant (coder, 2025-06-02 09:00:09 UTC)

<details><summary>Reasoning</summary>

The user wants x.

</details>

Reading it.

- Tool call `read_file` (`call_1`): `{\"path\": \"x\"}`
- Tool call `stat` (`call_2`): `{\"path\": \"y\"}`

<details><summary>Result of <code>read_file</code> (6 chars)</summary>

```
hello
```

</details>

<details><summary>Result of <code>stat</code> (error, 12 chars)</summary>

```
no such file
```

</details>
";
        assert_eq!(md, expected);
    }

    #[test]
    fn backticks_in_content_get_a_longer_fence() {
        let content = "Here:\n```rust\nfn main() {}\n```\nand ```` four";
        let result = Message::tool_result("c1", "cat", content);
        let md = to_markdown(&[result], None);
        assert!(md.contains(&format!("\n`````\n{content}\n`````\n")), "{md}");
        // No line of the content can close the five-backtick fence early.
        let fences = md.lines().filter(|l| l.starts_with("`````")).count();
        assert_eq!(fences, 2, "{md}");
    }

    #[test]
    fn backticks_in_arguments_get_a_longer_code_span() {
        let mut call = Message::assistant("");
        call.push_tool_call("c1", "shell", r#"{"cmd": "echo `date` ``x``"}"#);
        call.push_tool_call("c2", "shell", "`edge`");
        let md = to_markdown(&[call], None);
        assert!(
            md.contains(r#"- Tool call `shell` (`c1`): ```{"cmd": "echo `date` ``x``"}```"#),
            "{md}"
        );
        assert!(
            md.contains("- Tool call `shell` (`c2`): `` `edge` ``"),
            "{md}"
        );
    }

    #[test]
    fn long_arguments_are_cut_with_an_ellipsis_on_a_char_boundary() {
        let mut call = Message::assistant("");
        let long = format!("{{\"text\": \"{}\"}}", "é".repeat(500));
        call.push_tool_call("c1", "write", long.clone());
        call.push_tool_call("c2", "write", "{\n  \"a\": 1\n}");
        let md = to_markdown(&[call], None);
        let line = md.lines().find(|l| l.contains("`c1`")).unwrap();
        let shown = line.split(": `").nth(1).unwrap().trim_end_matches('`');
        assert!(shown.ends_with('…'), "{line}");
        assert_eq!(shown.chars().count(), MAX_ARGUMENT_CHARS + 1);
        assert!(long.starts_with(shown.trim_end_matches('…')));
        // Multi-line arguments stay on the bullet's line.
        assert!(md.contains("(`c2`): `{   \"a\": 1 }`"), "{md}");
    }

    #[test]
    fn a_summary_pair_is_marked_as_a_checkpoint() {
        let mut boundary = Message::user("[Earlier conversation summarized]");
        boundary.synthetic = true;
        boundary.summary = true;
        let mut summary = Message::assistant("## Current State\nAll tests pass.");
        summary.synthetic = true;
        summary.summary = true;
        let md = to_markdown(&[boundary, summary, Message::user("next?")], None);
        assert_eq!(
            md,
            "*Checkpoint: the conversation before this point is summarised below.*

### Summary (checkpoint)

## Current State
All tests pass.

### User

next?
"
        );
    }

    #[test]
    fn summary_text_is_html_escaped() {
        let result = Message::tool_result("c1", "a<b>&\"c\"", "x");
        let md = to_markdown(&[result], None);
        assert!(
            md.contains(
                "<summary>Result of <code>a&lt;b&gt;&amp;&quot;c&quot;</code> (1 chars)</summary>"
            ),
            "{md}"
        );
        let mut anonymous = Message::tool_result("<id>", "", "");
        anonymous.tool_name = None;
        let md = to_markdown(&[anonymous], None);
        assert!(
            md.contains(
                "<summary>Result of call <code>&lt;id&gt;</code> (0 chars)</summary>\n\n```\n```"
            ),
            "{md}"
        );
    }

    #[test]
    fn images_and_files_render_as_links() {
        let mut m = Message::user("look");
        m.parts = vec![
            Part::Image {
                source: MediaRef::Url("https://example.com/a.png".into()),
                mime_type: None,
            },
            Part::Text {
                text: "and this".into(),
            },
            Part::Image {
                source: MediaRef::Path("media/b.png".into()),
                mime_type: Some("image/png".into()),
            },
            Part::Image {
                source: MediaRef::Url("data:image/jpeg;base64,AAAA".into()),
                mime_type: None,
            },
            Part::File {
                name: "report [final].pdf".into(),
                path: "files/report final.pdf".into(),
                mime_type: None,
            },
        ];
        let md = to_markdown(&[m], None);
        assert_eq!(
            md,
            "### User

look

![image](https://example.com/a.png)

and this

[image: media/b.png]

[image: embedded image/jpeg]

[file: report \\[final\\].pdf](<files/report final.pdf>)
"
        );
    }

    #[test]
    fn system_and_synthetic_messages_are_labelled() {
        let mut warning = Message::user("Stop repeating.");
        warning.synthetic = true;
        let mut redacted = Message::assistant("ok");
        redacted.reasoning = Some(Reasoning {
            text: "opaque-bytes".into(),
            redacted: true,
            ..Reasoning::default()
        });
        let md = to_markdown(&[Message::system("Be terse."), warning, redacted], None);
        assert!(md.starts_with("### System\n\nBe terse.\n\n### User (synthetic)\n\n"));
        assert!(
            md.contains("<summary>Reasoning</summary>\n\n*(redacted)*"),
            "{md}"
        );
        assert!(!md.contains("opaque-bytes"), "{md}");
    }
}
