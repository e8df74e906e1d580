//! Colour on the terminal, and only there.
//!
//! Colour is used when the stream is a terminal and the user did not turn it
//! off: `NO_COLOR` (any non-empty value, <https://no-color.org>), `CLICOLOR=0`
//! or `TERM=dumb` turn it off; `CLICOLOR_FORCE` turns it on even for a pipe.
//! anstream makes that decision; this module only applies it.
//!
//! And nothing else reaches the terminal raw: [`safe`] escapes the control
//! characters of text a history, a processor or a server controls.

use anstyle::{AnsiColor, Style};

/// Whether standard output gets colour.
pub fn stdout() -> bool {
    anstream::AutoStream::choice(&std::io::stdout()) != anstream::ColorChoice::Never
}

/// Whether standard error gets colour.
pub fn stderr() -> bool {
    anstream::AutoStream::choice(&std::io::stderr()) != anstream::ColorChoice::Never
}

/// Dim text: reasoning, token counts, hints.
pub const DIM: Style = Style::new().dimmed();
/// A prompt or heading.
pub const BOLD: Style = Style::new().bold();
/// A warning.
pub const WARN: Style = AnsiColor::Yellow.on_default().bold();
/// An error.
pub const ERROR: Style = AnsiColor::Red.on_default().bold();

/// `text` in `style` when `enabled`, plain otherwise.
pub fn paint(style: Style, text: &str, enabled: bool) -> String {
    if enabled {
        format!("{style}{text}{style:#}")
    } else {
        text.to_owned()
    }
}

/// `text` with every control character but newline and tab escaped
/// (`\u{1b}`), so that a stranger's escape sequences (from a history, a
/// processor's name, description or error, a server's reply) are shown,
/// never obeyed by the terminal.
pub fn safe(text: &str) -> std::borrow::Cow<'_, str> {
    if !text
        .chars()
        .any(|c| c.is_control() && c != '\n' && c != '\t')
    {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if c.is_control() && c != '\n' && c != '\t' {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// A model's `text` for `out`: escaped by [`safe`] when `tty` (the output
/// is a terminal), as it is otherwise, so piped output keeps its bytes.
pub fn shown(text: &str, tty: bool) -> std::borrow::Cow<'_, str> {
    if tty {
        safe(text)
    } else {
        std::borrow::Cow::Borrowed(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_models_text_is_escaped_only_for_a_terminal() {
        let reply = "done\u{1b}]52;c;ZXZpbA==\u{7}";
        assert_eq!(shown(reply, true), "done\\u{1b}]52;c;ZXZpbA==\\u{7}");
        assert_eq!(shown(reply, false), reply);
    }

    #[test]
    fn control_characters_are_escaped_but_lines_stay() {
        assert_eq!(safe("plain\ttext\nline"), "plain\ttext\nline");
        assert_eq!(safe("\u{1b}[2Jgone\u{7}"), "\\u{1b}[2Jgone\\u{7}");
        assert_eq!(safe("\u{9b}31m"), "\\u{9b}31m", "C1 controls too");
        assert!(matches!(safe("ok"), std::borrow::Cow::Borrowed(_)));
    }

    #[test]
    fn painting_is_plain_when_disabled_and_wrapped_in_escapes_when_enabled() {
        assert_eq!(paint(BOLD, "hi", false), "hi");
        let painted = paint(BOLD, "hi", true);
        assert!(painted.starts_with("\u{1b}[") && painted.contains("hi"));
        assert!(painted.ends_with("\u{1b}[0m"));
    }
}
