//! `strip-media`: replaces images and binary file attachments with a short
//! text reference.
//!
//! An image or a PDF costs the model far more than a line saying it was
//! there. Each removed part becomes a text part in the same place:
//!
//! ```text
//! [image: https://example.com/shots/a.png (image/png) removed]
//! [image: inline data (image/jpeg) removed]
//! [file: report.pdf (application/pdf) removed]
//! ```
//!
//! A `data:` URL is never copied into the reference (it carries the bytes);
//! a URL or path longer than 100 characters is shortened in the middle; the
//! MIME type is left out when unknown. Messages without media to remove are
//! left untouched, and so are the last `keep_last` messages.
//!
//! Configuration:
//! - `images` (default `true`): remove image parts.
//! - `files` (default `"binary"`): which file parts to remove: `"binary"`
//!   removes those that are not text, `"all"` every one, `"none"` none. A
//!   file is text when its MIME type is `text/*`, JSON, XML, YAML, TOML,
//!   JavaScript, SQL or a shell script (`application/json`,
//!   `application/ld+json`, `image/svg+xml`, ...); without a MIME type, when
//!   its name (or path) ends in a common text extension (`.md`, `.rs`,
//!   `.csv`, ...).
//! - `keep_last` (default 0): leave the media of the last N messages (of any
//!   role) in place, so the model still sees what was just shared.
//!
//! ```sh
//! agent-host run --processor target/processors/strip-media.wasm \
//!     --processor-config '{"files": "all", "keep_last": 2}'
//! ```

use agent_host_guest::export_processor;
use agent_host_guest::{FileRef, History, Image, MediaSource, Part, Processor, Result};
use serde::Deserialize;

/// The configuration.
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Whether to remove image parts.
    pub images: bool,
    /// Which file parts to remove.
    pub files: Files,
    /// How many of the last messages keep their media.
    pub keep_last: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            images: true,
            files: Files::Binary,
            keep_last: 0,
        }
    }
}

/// Which file parts to remove.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub enum Files {
    /// Those that are not text (see the crate documentation).
    #[default]
    Binary,
    /// Every file part.
    All,
    /// None.
    None,
}

impl TryFrom<String> for Files {
    type Error = String;

    fn try_from(value: String) -> Result<Self, String> {
        match value.as_str() {
            "binary" => Ok(Files::Binary),
            "all" => Ok(Files::All),
            "none" => Ok(Files::None),
            other => Err(format!(
                "`files` is \"binary\", \"all\" or \"none\", not {other:?}"
            )),
        }
    }
}

/// The processor.
pub struct StripMedia;

impl Processor for StripMedia {
    type Config = Config;
    const CONFIG_EXAMPLE: Option<&'static str> =
        Some(r#"{"images": true, "files": "binary", "keep_last": 0}"#);
    const CONFIG_SCHEMA: Option<&'static str> = Some(
        r#"{"type":"object","properties":{"images":{"type":"boolean","default":true},"files":{"enum":["binary","all","none"],"default":"binary"},"keep_last":{"type":"integer","minimum":0,"default":0}},"additionalProperties":false}"#,
    );

    fn process(history: &mut History, config: Config) -> Result<()> {
        let end = history.len().saturating_sub(config.keep_last);
        let (mut removed, mut messages) = (0, 0);
        for i in 0..end {
            if !history.messages()[i]
                .parts
                .iter()
                .any(|p| config.removes(p))
            {
                continue;
            }
            messages += 1;
            for part in &mut history.message_mut(i).parts {
                if config.removes(part) {
                    *part = Part::Text(reference(part));
                    removed += 1;
                }
            }
        }
        agent_host_guest::info!(
            "removed {removed} media {} from {messages} {}",
            agent_host_guest::plural(removed, "part"),
            agent_host_guest::plural(messages, "message")
        );
        Ok(())
    }
}

export_processor!(StripMedia);

impl Config {
    /// Whether `part` is to be replaced by a reference.
    fn removes(&self, part: &Part) -> bool {
        match part {
            Part::Text(_) => false,
            Part::Image(_) => self.images,
            Part::File(file) => match self.files {
                Files::All => true,
                Files::None => false,
                Files::Binary => !is_text_file(file),
            },
        }
    }
}

/// Whether a file holds text: by its MIME type, or by its name's extension
/// when the type is unknown.
fn is_text_file(file: &FileRef) -> bool {
    match &file.mime_type {
        Some(mime) if !mime.trim().is_empty() => is_text_mime(mime),
        _ => {
            let name = if file.name.is_empty() {
                &file.path
            } else {
                &file.name
            };
            has_text_extension(name)
        }
    }
}

/// Whether a MIME type (parameters and case ignored) is text.
fn is_text_mime(mime: &str) -> bool {
    let essence = mime.split(';').next().unwrap_or_default().trim();
    let Some((kind, subtype)) = essence.split_once('/') else {
        return false;
    };
    if kind.eq_ignore_ascii_case("text") {
        return true;
    }
    let ends_with = |suffix: &str| {
        subtype.len() >= suffix.len()
            && subtype[subtype.len() - suffix.len()..].eq_ignore_ascii_case(suffix)
    };
    if ends_with("+json") || ends_with("+xml") || ends_with("+yaml") {
        return true;
    }
    if !kind.eq_ignore_ascii_case("application") {
        return false;
    }
    const TEXT_APPLICATION: [&str; 14] = [
        "json",
        "xml",
        "javascript",
        "ecmascript",
        "x-javascript",
        "yaml",
        "x-yaml",
        "toml",
        "x-toml",
        "sql",
        "x-sh",
        "x-ndjson",
        "jsonl",
        "graphql",
    ];
    TEXT_APPLICATION
        .iter()
        .any(|t| subtype.eq_ignore_ascii_case(t))
}

/// Whether `name` ends in the extension of a common text format.
fn has_text_extension(name: &str) -> bool {
    const TEXT_EXTENSIONS: [&str; 44] = [
        "txt", "md", "markdown", "rst", "csv", "tsv", "log", "json", "jsonl", "ndjson", "xml",
        "yaml", "yml", "toml", "ini", "cfg", "conf", "env", "html", "htm", "css", "svg", "js",
        "mjs", "ts", "tsx", "jsx", "py", "rs", "go", "java", "kt", "c", "h", "cc", "cpp", "hpp",
        "cs", "rb", "php", "sh", "sql", "swift", "diff",
    ];
    let file_name = name.rsplit(['/', '\\']).next().unwrap_or(name);
    let Some((stem, extension)) = file_name.rsplit_once('.') else {
        return false;
    };
    !stem.is_empty()
        && TEXT_EXTENSIONS
            .iter()
            .any(|t| extension.eq_ignore_ascii_case(t))
}

/// The text that takes a removed part's place.
fn reference(part: &Part) -> String {
    let (kind, label, mime) = match part {
        Part::Image(Image { source, mime_type }) => {
            let where_ = match source {
                MediaSource::Url(url) if url.starts_with("data:") => "inline data",
                MediaSource::Url(place) | MediaSource::Path(place) => place.as_str(),
            };
            ("image", where_, mime_type)
        }
        Part::File(FileRef {
            name,
            path,
            mime_type,
        }) => {
            let label = if !name.is_empty() {
                name.as_str()
            } else if path.starts_with("data:") {
                "inline data"
            } else {
                path.as_str()
            };
            ("file", label, mime_type)
        }
        // Never asked for: text parts are not removed.
        Part::Text(text) => return text.clone(),
    };
    let mut out = format!("[{kind}");
    let label = label.trim();
    if !label.is_empty() {
        out.push_str(": ");
        push_shortened(&mut out, label, 100);
    }
    if let Some(mime) = mime.as_deref().map(str::trim).filter(|m| !m.is_empty()) {
        out.push_str(" (");
        push_shortened(&mut out, mime, 60);
        out.push(')');
    }
    out.push_str(" removed]");
    out
}

/// Appends `text`, or when it is longer than `max` characters its start and
/// end around an ellipsis.
fn push_shortened(out: &mut String, text: &str, max: usize) {
    let chars = text.chars().count();
    if chars <= max {
        out.push_str(text);
        return;
    }
    let head = max / 2;
    let tail = max - head - 1;
    out.extend(text.chars().take(head));
    out.push('…');
    out.extend(text.chars().skip(chars - tail));
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_host_guest::{Error, Message, Role, ToolCall, testing};

    fn image(url: &str, mime: Option<&str>) -> Part {
        Part::Image(Image {
            source: MediaSource::Url(url.into()),
            mime_type: mime.map(Into::into),
        })
    }

    fn file(name: &str, mime: Option<&str>) -> Part {
        Part::File(FileRef {
            name: name.into(),
            path: format!("media/{name}"),
            mime_type: mime.map(Into::into),
        })
    }

    fn with_parts(role: Role, id: &str, parts: Vec<Part>) -> Message {
        let mut m = Message::new(role, "").with_id(id);
        m.parts = parts;
        m
    }

    /// Each part as text: the text itself, or `<image>` / `<file>`.
    fn parts(m: &Message) -> Vec<String> {
        m.parts
            .iter()
            .map(|p| match p {
                Part::Text(t) => t.clone(),
                Part::Image(_) => "<image>".into(),
                Part::File(_) => "<file>".into(),
            })
            .collect()
    }

    fn run(config: &str, history: Vec<Message>) -> Vec<Message> {
        testing::run::<StripMedia>(config, history).unwrap()
    }

    #[test]
    fn images_and_binary_files_become_references_in_place() {
        let m = with_parts(
            Role::User,
            "u",
            vec![
                Part::Text("look at these".into()),
                image("https://example.com/a.png", Some("image/png")),
                file("notes.md", Some("text/markdown")),
                file("report.pdf", Some("application/pdf")),
            ],
        );
        let out = run("{}", vec![m]);
        assert_eq!(
            parts(&out[0]),
            [
                "look at these",
                "[image: https://example.com/a.png (image/png) removed]",
                "<file>",
                "[file: report.pdf (application/pdf) removed]",
            ]
        );
    }

    #[test]
    fn files_all_and_none() {
        let m = || {
            with_parts(
                Role::User,
                "u",
                vec![
                    file("notes.md", Some("text/markdown")),
                    file("a.zip", Some("application/zip")),
                ],
            )
        };
        let all = run(r#"{"files": "all"}"#, vec![m()]);
        assert_eq!(
            parts(&all[0]),
            [
                "[file: notes.md (text/markdown) removed]",
                "[file: a.zip (application/zip) removed]"
            ]
        );
        let none = run(r#"{"files": "none"}"#, vec![m()]);
        assert_eq!(parts(&none[0]), ["<file>", "<file>"]);
    }

    #[test]
    fn images_can_be_kept() {
        let m = with_parts(
            Role::User,
            "u",
            vec![image("a.png", None), file("b.pdf", None)],
        );
        let out = run(r#"{"images": false}"#, vec![m]);
        assert_eq!(parts(&out[0]), ["<image>", "[file: b.pdf removed]"]);
    }

    #[test]
    fn the_last_messages_keep_their_media() {
        let history: Vec<Message> = (0..4)
            .map(|i| with_parts(Role::User, &i.to_string(), vec![image("a.png", None)]))
            .collect();
        let out = run(r#"{"keep_last": 2}"#, history.clone());
        let kinds: Vec<_> = out.iter().map(|m| parts(m)[0].clone()).collect();
        assert_eq!(
            kinds,
            [
                "[image: a.png removed]",
                "[image: a.png removed]",
                "<image>",
                "<image>"
            ]
        );
        let out = run(r#"{"keep_last": 10}"#, history);
        assert!(out.iter().all(|m| parts(m) == ["<image>"]));
    }

    #[test]
    fn untouched_messages_are_not_replaced() {
        let mut h = History::for_test(vec![
            Message::new(Role::User, "no media"),
            with_parts(Role::User, "md", vec![file("notes.md", Some("text/plain"))]),
            with_parts(Role::User, "img", vec![image("a.png", None)]),
            Message::tool_calls(vec![ToolCall::new("c1", "shot", "{}")]),
            with_parts(Role::Tool, "shot", vec![image("s.png", None)]),
        ]);
        StripMedia::process(&mut h, Config::default()).unwrap();
        let changed: Vec<usize> = (0..h.len()).filter(|&i| h.is_changed(i)).collect();
        assert_eq!(changed, [2, 4]);
        assert_eq!(h.kept(), 5);
    }

    #[test]
    fn a_tool_result_keeps_its_call() {
        let screenshot = Message::tool_result("c1", "");
        let history = vec![
            Message::new(Role::User, "look"),
            Message::tool_calls(vec![ToolCall::new("c1", "screenshot", "{}")]),
            Message {
                parts: vec![image("shot.png", Some("image/png"))],
                ..screenshot
            },
            Message::new(Role::Assistant, "I see a login form."),
        ];
        let out = run("{}", history);
        assert_eq!(out.len(), 4);
        assert_eq!(out[2].tool_call_id.as_deref(), Some("c1"));
        assert_eq!(out[2].role, Role::Tool);
        assert_eq!(parts(&out[2]), ["[image: shot.png (image/png) removed]"]);
    }

    #[test]
    fn data_urls_are_never_copied() {
        let payload = "iVBORw0KGgo".repeat(1000);
        let m = with_parts(
            Role::User,
            "u",
            vec![image(
                &format!("data:image/png;base64,{payload}"),
                Some("image/png"),
            )],
        );
        let out = run("{}", vec![m]);
        assert_eq!(parts(&out[0]), ["[image: inline data (image/png) removed]"]);
    }

    #[test]
    fn long_urls_are_shortened_in_the_middle() {
        let url = format!("https://bucket.example.com/{}/shot.png", "x".repeat(300));
        let m = with_parts(Role::User, "u", vec![image(&url, None)]);
        let text = parts(&run("{}", vec![m])[0])[0].clone();
        assert!(
            text.starts_with("[image: https://bucket.example.com/"),
            "{text}"
        );
        assert!(text.ends_with("/shot.png removed]"), "{text}");
        assert!(text.contains('…'), "{text}");
        assert!(text.chars().count() < 120, "{text}");
    }

    #[test]
    fn paths_and_nameless_files() {
        let m = with_parts(
            Role::User,
            "u",
            vec![
                Part::Image(Image {
                    source: MediaSource::Path("media/7/photo.jpg".into()),
                    mime_type: Some("image/jpeg".into()),
                }),
                Part::File(FileRef {
                    name: String::new(),
                    path: "uploads/blob.bin".into(),
                    mime_type: None,
                }),
                Part::File(FileRef {
                    name: String::new(),
                    path: String::new(),
                    mime_type: Some("application/octet-stream".into()),
                }),
            ],
        );
        assert_eq!(
            parts(&run("{}", vec![m])[0]),
            [
                "[image: media/7/photo.jpg (image/jpeg) removed]",
                "[file: uploads/blob.bin removed]",
                "[file (application/octet-stream) removed]",
            ]
        );
    }

    #[test]
    fn text_files_by_mime_type() {
        let text = [
            "text/plain",
            "TEXT/CSV; charset=utf-8",
            "application/json",
            "application/ld+json",
            "image/svg+xml",
            "application/x-yaml",
            "application/javascript",
        ];
        for mime in text {
            assert!(is_text_mime(mime), "{mime}");
        }
        let binary = [
            "application/pdf",
            "application/octet-stream",
            "image/png",
            "application/zip",
            "audio/mpeg",
            "json",
            "",
        ];
        for mime in binary {
            assert!(!is_text_mime(mime), "{mime}");
        }
    }

    #[test]
    fn text_files_by_extension_when_the_type_is_unknown() {
        for name in ["notes.md", "src/main.RS", "data.csv", "C:\\x\\cfg.toml"] {
            assert!(has_text_extension(name), "{name}");
        }
        for name in [
            "photo.jpg",
            "a.pdf",
            "Makefile",
            ".md",
            "archive.tar.gz",
            "dir.md/blob",
        ] {
            assert!(!has_text_extension(name), "{name}");
        }
        // An empty MIME type counts as unknown.
        let f = FileRef {
            name: "x.py".into(),
            path: String::new(),
            mime_type: Some(" ".into()),
        };
        assert!(is_text_file(&f));
    }

    #[test]
    fn empty_history_and_no_media() {
        assert!(run("{}", vec![]).is_empty());
        let out = run("{}", vec![Message::new(Role::User, "hi")]);
        assert_eq!(out[0].content, "hi");
    }

    #[test]
    fn bad_configurations_name_the_key() {
        let e = testing::run::<StripMedia>(r#"{"files": "text"}"#, vec![]).unwrap_err();
        assert!(matches!(e, Error::BadConfig(_)), "{e}");
        assert!(e.to_string().contains("`files`"), "{e}");
        assert!(e.to_string().contains("\"text\""), "{e}");
        for config in [
            r#"{"images": "yes"}"#,
            r#"{"keep_last": -1}"#,
            r#"{"image": true}"#,
        ] {
            let e = testing::run::<StripMedia>(config, vec![]).unwrap_err();
            assert!(matches!(e, Error::BadConfig(_)), "{config}: {e}");
        }
    }
}
