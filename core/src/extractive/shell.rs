//! What an agent did through a shell: the commands of a message (tool calls
//! with a `command` argument, or the fenced block that ends an assistant's
//! text, as thought-action agents write them), and the files a command writes.

use std::borrow::Cow;

use serde_json::Value;

use super::values::{MAX_PATH_BYTES, cut_chars};
use crate::message::{Message, Role};

/// The most characters of a kept command (its first line).
pub(super) const MAX_COMMAND_CHARS: usize = 200;

/// The arguments of a tool call that hold the command it runs.
const COMMAND_ARGUMENTS: [&str; 2] = ["command", "cmd"];

/// The info strings of a fenced block that is a command: none, a shell's
/// name, or mini-swe-agent's `mswea_bash_command`.
const SHELL_FENCES: [&str; 7] = [
    "",
    "bash",
    "sh",
    "shell",
    "console",
    "zsh",
    "mswea_bash_command",
];

/// Whether a tool writes or edits files (its name holds `edit`, `write`,
/// `create`, `str_replace`, `patch` or `insert`, and not `todo`).
pub(super) fn is_edit_tool(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    !name.contains("todo")
        && ["edit", "write", "create", "str_replace", "patch", "insert"]
            .iter()
            .any(|k| name.contains(k))
}

/// The scripts a message ran, whole: the `command` or `cmd` argument of each
/// tool call that does not edit files (a string, or an argument vector such
/// as `["bash", "-lc", "..."]`), and, for an assistant message with no tool
/// calls, the fenced block (no info string, or `bash`, `sh`, `shell`,
/// `console`, `zsh`, `mswea_bash_command`) that ends its text.
pub(super) fn scripts(message: &Message) -> Vec<Cow<'_, str>> {
    let mut out = Vec::new();
    for call in &message.tool_calls {
        if is_edit_tool(&call.name) {
            continue;
        }
        let Ok(Value::Object(arguments)) = serde_json::from_str::<Value>(&call.arguments) else {
            continue;
        };
        for key in COMMAND_ARGUMENTS {
            match arguments.get(key) {
                Some(Value::String(script)) => out.push(Cow::Owned(script.clone())),
                Some(Value::Array(argv)) => {
                    let words: Vec<&str> = argv.iter().filter_map(Value::as_str).collect();
                    if let Some(script) = script_of_argv(&words) {
                        out.push(Cow::Owned(script));
                    }
                }
                _ => {}
            }
        }
    }
    if message.role == Role::Assistant
        && message.tool_calls.is_empty()
        && let Some(block) = final_fenced_block(&message.content)
    {
        out.push(Cow::Borrowed(block));
    }
    out
}

/// The commands of a message, as a summary keeps them: the first line of
/// each script it ran, trimmed and cut to 200 characters. The scripts are the
/// `command` or `cmd` argument of each tool call that does not edit files (a
/// string, or an argument vector such as `["bash", "-lc", "..."]`), and, for
/// an assistant message with no tool calls, the fenced block (no info string,
/// or `bash`, `sh`, `shell`, `console`, `zsh`, `mswea_bash_command`) that
/// ends its text.
///
/// ```
/// use agent_host_core::Message;
/// use agent_host_core::extractive::commands;
///
/// let mut call = Message::assistant("Reproducing it.");
/// call.push_tool_call("c1", "bash", r#"{"command": "cat > repro.py << 'EOF'\nprint(1)\nEOF"}"#);
/// assert_eq!(commands(&call), ["cat > repro.py << 'EOF'"]);
/// let text = Message::assistant("Let me look.\n```\nfind_file fields.py src\n```");
/// assert_eq!(commands(&text), ["find_file fields.py src"]);
/// ```
pub fn commands(message: &Message) -> Vec<String> {
    scripts(message)
        .iter()
        .map(|script| first_line(script).to_owned())
        .filter(|line| !line.is_empty())
        .collect()
}

/// The first line of a script, trimmed and cut to [`MAX_COMMAND_CHARS`].
pub(super) fn first_line(script: &str) -> &str {
    let line = script.trim().lines().next().unwrap_or("");
    cut_chars(line.trim(), MAX_COMMAND_CHARS)
}

/// The script of an argument vector: the last word after `sh -c` / `bash -lc`
/// (any shell), else the words joined by spaces.
fn script_of_argv(words: &[&str]) -> Option<String> {
    match words {
        [] => None,
        [shell, flag, .., script]
            if shell.rsplit('/').next().is_some_and(|s| s.ends_with("sh"))
                && flag.starts_with('-')
                && flag.contains('c') =>
        {
            Some((*script).to_owned())
        }
        _ => Some(words.join(" ")),
    }
}

/// The contents of the fenced block that ends `text` (nothing but
/// whitespace after its closing fence), when its info string names a shell
/// or is empty.
fn final_fenced_block(text: &str) -> Option<&str> {
    let body = text.trim_end().strip_suffix("```")?;
    let open = body.rfind("```")?;
    let inner = &body[open + 3..];
    let (info, block) = inner.split_once('\n')?;
    if !SHELL_FENCES.contains(&info.trim()) {
        return None;
    }
    let block = block.trim();
    (!block.is_empty()).then_some(block)
}

/// One word of a shell line: its text with quotes removed, and whether it
/// is an operator (`;`, `&&`, `||`, `|`, `&`, a redirection).
#[derive(Debug, PartialEq, Eq)]
struct Word {
    text: String,
    operator: bool,
    /// Whether any part of it was quoted or escaped (a quoted `<<` delimiter
    /// or a word that only looks like an operator).
    quoted: bool,
}

/// Splits one line of shell into words: whitespace separates, `'...'` is
/// literal, `"..."` and `\` escape, operators are words of their own, and a
/// `#` that starts a word starts a comment.
fn shell_words(line: &str) -> Vec<Word> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    let mut started = false;
    let mut chars = line.chars().peekable();
    let flush = |out: &mut Vec<Word>, word: &mut String, quoted: &mut bool, started: &mut bool| {
        if *started {
            out.push(Word {
                text: std::mem::take(word),
                operator: false,
                quoted: *quoted,
            });
        }
        *quoted = false;
        *started = false;
    };
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => flush(&mut out, &mut word, &mut quoted, &mut started),
            '#' if !started => break,
            '\'' => {
                started = true;
                quoted = true;
                for c in chars.by_ref() {
                    if c == '\'' {
                        break;
                    }
                    word.push(c);
                }
            }
            '"' => {
                started = true;
                quoted = true;
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => match chars.peek() {
                            Some(&next @ ('"' | '\\' | '$' | '`')) => {
                                word.push(next);
                                chars.next();
                            }
                            _ => word.push('\\'),
                        },
                        c => word.push(c),
                    }
                }
            }
            '\\' => {
                started = true;
                quoted = true;
                if let Some(next) = chars.next() {
                    word.push(next);
                }
            }
            ';' | '|' | '&' | '<' | '>' => {
                // A file descriptor number before a redirection belongs to it.
                let fd = matches!(c, '<' | '>')
                    && started
                    && !quoted
                    && word.bytes().all(|b| b.is_ascii_digit());
                let mut operator = if fd {
                    started = false;
                    std::mem::take(&mut word)
                } else {
                    flush(&mut out, &mut word, &mut quoted, &mut started);
                    String::new()
                };
                operator.push(c);
                while let Some(&next) = chars.peek() {
                    let continues = match (c, next) {
                        ('&' | '|', n) => n == c || (c == '&' && n == '>'),
                        ('>', '>' | '|' | '&') | ('<', '<' | '-' | '&') => true,
                        _ => false,
                    };
                    if !continues || operator.len() >= 3 {
                        break;
                    }
                    operator.push(next);
                    chars.next();
                }
                out.push(Word {
                    text: operator,
                    operator: true,
                    quoted: false,
                });
            }
            c => {
                started = true;
                word.push(c);
            }
        }
    }
    flush(&mut out, &mut word, &mut quoted, &mut started);
    out
}

/// Whether an operator writes its target: `>`, `>>`, `>|`, `&>`, `&>>`, with
/// or without a file descriptor.
fn is_write_redirection(operator: &str) -> bool {
    let op = operator.trim_start_matches(|c: char| c.is_ascii_digit());
    matches!(op, ">" | ">>" | ">|" | "&>" | "&>>")
}

/// A word that names a file literally: one line, not too long, no variable,
/// command substitution or glob, not a device or a descriptor.
fn literal_path(word: &str) -> Option<&str> {
    let literal = !word.is_empty()
        && word.len() <= MAX_PATH_BYTES
        && !word.starts_with(['&', '-'])
        && !word.starts_with("/dev/")
        && !word.contains(['$', '`', '*', '?', '\n', '\r', '\0', '{', '}'])
        && word != "."
        && word != "..";
    literal.then_some(word)
}

/// The files a script writes: redirections (`>`, `>>`, `tee`), in-place
/// edits (`sed -i`, `perl -i`), `touch`, `cp` and `install` targets, `mv` and
/// `rm` operands, SWE-agent's `create` and `str_replace_editor`, and the
/// files named by a patch a here-document gives to `apply_patch`,
/// `git apply` or `patch` (`*** Update File:` and unified diff headers).
/// Words with variables, substitutions or globs are left out.
///
/// ```
/// use agent_host_core::extractive::written_paths;
///
/// assert_eq!(
///     written_paths("sed -i 's/a b/c/' src/x.py && cat > new.txt << 'EOF'\nhello > old\nEOF\nls > /dev/null"),
///     ["src/x.py", "new.txt"]
/// );
/// ```
pub fn written_paths(script: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let lines: Vec<&str> = script.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let words = shell_words(lines[i]);
        i += 1;
        // A here-document's body follows the line that opens it.
        let mut body: Option<&[&str]> = None;
        if let Some(at) = words
            .iter()
            .position(|w| w.operator && (w.text == "<<" || w.text == "<<-"))
            && let Some(delimiter) = words.get(at + 1).filter(|w| !w.operator)
        {
            let start = i;
            while i < lines.len() && lines[i].trim_start_matches('\t') != delimiter.text {
                i += 1;
            }
            body = Some(&lines[start..i]);
            i += 1;
        }
        for command in
            words.split(|w| w.operator && matches!(w.text.as_str(), ";" | "&&" | "||" | "|" | "&"))
        {
            written_by(command, body, &mut out);
        }
    }
    let mut seen = std::collections::HashSet::new();
    out.retain(|p| seen.insert(p.clone()));
    out
}

/// The files one simple command writes (`body`: the here-document of its line).
fn written_by(command: &[Word], body: Option<&[&str]>, out: &mut Vec<String>) {
    let mut args: Vec<&str> = Vec::new();
    let mut words = command.iter();
    while let Some(word) = words.next() {
        if word.operator {
            let target = words.next().filter(|w| !w.operator);
            if is_write_redirection(&word.text)
                && let Some(path) = target.and_then(|w| literal_path(&w.text))
            {
                out.push(path.to_owned());
            }
            continue;
        }
        args.push(&word.text);
    }
    // Skip environment assignments and wrappers to the command's name.
    while let Some(first) = args.first() {
        let assignment = first.split_once('=').is_some_and(|(name, _)| {
            !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        });
        if assignment
            || matches!(
                *first,
                "sudo" | "env" | "command" | "time" | "nohup" | "exec"
            )
        {
            args.remove(0);
        } else {
            break;
        }
    }
    let Some((&name, rest)) = args.split_first() else {
        return;
    };
    let name = name.rsplit('/').next().unwrap_or(name);
    let operands = || rest.iter().copied().filter(|a| !a.starts_with('-'));
    let mut push = |path: &str| {
        if let Some(path) = literal_path(path) {
            out.push(path.to_owned());
        }
    };
    match name {
        "sed" | "perl" => {
            let in_place = rest.iter().any(|a| {
                a.starts_with("--in-place")
                    || (a.starts_with('-')
                        && !a.starts_with("--")
                        && (a.starts_with("-i")
                            || a[1..].bytes().all(|b| b.is_ascii_alphabetic()) && a.contains('i')))
            });
            if !in_place {
                return;
            }
            let mut script_given = false;
            let mut files = Vec::new();
            let mut args = rest.iter();
            while let Some(&arg) = args.next() {
                if matches!(arg, "-e" | "-f" | "--expression" | "--file")
                    || (name == "perl"
                        && arg.starts_with('-')
                        && !arg.starts_with("--")
                        && arg.ends_with('e'))
                {
                    script_given = true;
                    args.next();
                } else if !arg.starts_with('-') && !arg.is_empty() {
                    files.push(arg);
                }
            }
            let skip = usize::from(!script_given);
            files.into_iter().skip(skip).for_each(&mut push);
        }
        "tee" | "touch" | "rm" | "mv" => operands().for_each(&mut push),
        "cp" | "install" => {
            let all: Vec<&str> = operands().collect();
            if all.len() >= 2
                && let Some(last) = all.last()
            {
                push(last);
            }
        }
        "create" => {
            let all: Vec<&str> = operands().collect();
            if let [file] = all.as_slice() {
                push(file);
            }
        }
        "str_replace_editor" => {
            if let [sub, path, ..] = rest
                && matches!(*sub, "create" | "str_replace" | "insert" | "undo_edit")
            {
                push(path);
            }
        }
        "apply_patch" | "patch" | "git" => {
            let applies = name != "git" || rest.first() == Some(&"apply");
            if applies && let Some(body) = body {
                for path in patch_paths(&body.join("\n")) {
                    push(&path);
                }
            }
        }
        _ => {}
    }
}

/// The files a patch changes: `*** Add File:`, `*** Update File:`,
/// `*** Delete File:`, `*** Move to:` lines (the `apply_patch` format) and
/// unified diff `+++` headers (without git's `b/` and a trailing timestamp;
/// not `/dev/null`).
///
/// ```
/// use agent_host_core::extractive::patch_paths;
///
/// let patch = "*** Begin Patch\n*** Update File: src/app.py\n@@\n-a\n+b\n*** End Patch\n\
///              --- a/lib/x.rs\n+++ b/lib/x.rs\n";
/// assert_eq!(patch_paths(patch), ["src/app.py", "lib/x.rs"]);
/// ```
pub fn patch_paths(patch: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in patch.lines() {
        let path = [
            "*** Add File: ",
            "*** Update File: ",
            "*** Delete File: ",
            "*** Move to: ",
        ]
        .iter()
        .find_map(|p| line.strip_prefix(p))
        .or_else(|| {
            line.strip_prefix("+++ ").map(|p| {
                let p = p.split('\t').next().unwrap_or(p);
                p.strip_prefix("b/").unwrap_or(p)
            })
        });
        if let Some(path) = path.map(str::trim)
            && path != "/dev/null"
            && let Some(path) = literal_path(path)
            && !out.iter().any(|p| p == path)
        {
            out.push(path.to_owned());
        }
    }
    out
}

/// The files an assistant's text edits with edit blocks, as Aider and the
/// agents that copy its formats write them: the line before a
/// `<<<<<<< SEARCH` (or `<<<<<<< ORIGINAL`) line names the file, with the
/// block's opening fence between them or before them; and the files of
/// Aider's `Applied edit to PATH` lines.
///
/// ```
/// use agent_host_core::extractive::edit_block_paths;
///
/// let reply = "Here:\n\nsrc/app.py\n```python\n<<<<<<< SEARCH\nx = 1\n=======\nx = 2\n>>>>>>> REPLACE\n```";
/// assert_eq!(edit_block_paths(reply), ["src/app.py"]);
/// assert_eq!(edit_block_paths("Applied edit to app.py"), ["app.py"]);
/// ```
pub fn edit_block_paths(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut previous: [&str; 2] = ["", ""];
    for line in text.lines() {
        let line = line.trim();
        let opens = matches!(line, "<<<<<<< SEARCH" | "<<<<<<< ORIGINAL");
        let named = if opens {
            // The file name, skipping the fence that may stand between.
            let [before, last] = previous;
            Some(if last.starts_with("```") {
                before
            } else {
                last
            })
        } else {
            line.strip_prefix("Applied edit to ")
        };
        if let Some(name) = named.map(|n| n.trim_matches(['`', '*', ':']))
            && !name.starts_with("```")
            && !name.contains(char::is_whitespace)
            && let Some(path) = literal_path(name)
            && !out.iter().any(|p| p == path)
        {
            out.push(path.to_owned());
        }
        if !line.is_empty() {
            previous = [previous[1], line];
        }
    }
    out
}

/// The file an editor command without a path changed, as the observation
/// that answers it names it: `[File: PATH (N lines total)]` (SWE-agent).
pub(super) fn observed_file(observation: &str) -> Option<&str> {
    let start = observation.find("[File: ")? + "[File: ".len();
    let rest = &observation[start..];
    let end = rest.find(" (")?;
    literal_path(rest[..end].trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_writes_are_found_and_reads_are_not() {
        let cases: [(&str, &[&str]); 14] = [
            (
                "sed -i 's/old/new/g' src/a.py src/b.py",
                &["src/a.py", "src/b.py"],
            ),
            ("sed -i.bak -e 's/x/y/' -e 's/z/w/' conf.ini", &["conf.ini"]),
            ("sed -n '10,20p' src/a.py", &[]),
            ("sed -Ei 's/a/b/' x.txt", &["x.txt"]),
            ("perl -pi -e 's/a/b/' lib/x.pm", &["lib/x.pm"]),
            ("echo 'x' >> notes.md 2>/dev/null", &["notes.md"]),
            ("python run.py > out.log 2>&1", &["out.log"]),
            ("grep -n error src/*.py | tee report.txt", &["report.txt"]),
            (
                "cp a.txt b.txt && mv c.txt d/c.txt",
                &["b.txt", "c.txt", "d/c.txt"],
            ),
            (
                "FOO=1 sudo touch /etc/flag; rm -f build.o",
                &["/etc/flag", "build.o"],
            ),
            (
                "echo $HOME > $OUT; cat x > \"/tmp/with space.txt\"",
                &["/tmp/with space.txt"],
            ),
            (
                "str_replace_editor str_replace /testbed/x.py --old_str a --new_str b",
                &["/testbed/x.py"],
            ),
            ("create exploit.py", &["exploit.py"]),
            ("cat README.md # > not-a-file", &[]),
        ];
        for (script, expected) in cases {
            assert_eq!(written_paths(script), expected, "{script}");
        }
    }

    #[test]
    fn here_documents_are_bodies_not_commands() {
        let script = "cat > repro.py << 'EOF'\nimport os\nos.remove('x') > y\nEOF\npython repro.py";
        assert_eq!(written_paths(script), ["repro.py"]);
        let patch = "apply_patch <<'PATCH'\n*** Begin Patch\n*** Add File: docs/new.md\n+hi\n\
                     *** Update File: src/lib.rs\n*** End Patch\nPATCH";
        assert_eq!(written_paths(patch), ["docs/new.md", "src/lib.rs"]);
        let diff = "git apply <<EOF\n--- a/x.c\n+++ b/x.c\n@@ -1 +1 @@\n-a\n+b\nEOF";
        assert_eq!(written_paths(diff), ["x.c"]);
        // An unterminated here-document ends with the script.
        assert_eq!(written_paths("cat > a.txt <<EOF\nrm b.txt"), ["a.txt"]);
    }

    #[test]
    fn commands_come_from_tool_calls_and_final_fenced_blocks() {
        let mut call = Message::assistant("");
        call.push_tool_call(
            "c1",
            "bash",
            r#"{"command": ["bash", "-lc", "ls -la\npwd"]}"#,
        );
        call.push_tool_call("c2", "shell", r#"{"cmd": ["git", "status"]}"#);
        call.push_tool_call(
            "c3",
            "str_replace_editor",
            r#"{"command": "view", "path": "/x"}"#,
        );
        assert_eq!(commands(&call), ["ls -la", "git status"]);
        for (text, expected) in [
            (
                "Run it:\n```bash\npytest -q tests/\n```\n",
                vec!["pytest -q tests/"],
            ),
            ("Code:\n```python\nprint(1)\n```", vec![]),
            ("```\nls\n```\nand then some prose", vec![]),
            ("no block at all", vec![]),
        ] {
            assert_eq!(commands(&Message::assistant(text)), expected, "{text}");
        }
        // Only the assistant's text holds commands.
        assert!(commands(&Message::user("```\nrm -rf /\n```")).is_empty());
    }

    #[test]
    fn the_observed_file_is_read_from_swe_agent_observations() {
        assert_eq!(
            observed_file("Text replaced.\r\n[File: /repo/tests/x.py (10 lines total)]\r\n1:a"),
            Some("/repo/tests/x.py")
        );
        assert_eq!(observed_file("[File: $X (1 lines total)]"), None);
        assert_eq!(observed_file("no file here"), None);
    }
}
