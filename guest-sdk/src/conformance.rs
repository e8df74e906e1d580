//! The shared conformance cases (`guest-sdk/conformance/cases/*.json`, the
//! format in its README), run against this SDK: the `conformance` processor
//! the cases configure, written with the SDK's own API, over each case's
//! history; its answer, whether it fetched the messages, and the SDK's
//! native token estimates, compared with what the case expects. The Python,
//! JavaScript and C SDKs run the same cases.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use crate::__private::{Item, Replacement};
use crate::{
    Error, FileRef, History, Image, MediaSource, Message, MessageFlags, Part, Processor, Reasoning,
    Result, Role, ToolCall,
};

/// The processor the cases configure: a list of steps, each one call of
/// the SDK's API.
struct Conformance;

#[derive(Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
struct Config {
    steps: Vec<Step>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Step {
    op: String,
    index: Option<u32>,
    turns: Option<u32>,
    tokens: Option<u32>,
    role: Option<String>,
    text: Option<String>,
    message: Option<Value>,
}

fn needs<T: Clone>(value: &Option<T>, op: &str, key: &str) -> Result<T> {
    value
        .clone()
        .ok_or_else(|| Error::bad_config(format!("op `{op}` needs `{key}`")))
}

impl Processor for Conformance {
    type Config = Config;

    fn process(history: &mut History<'_>, config: Config) -> Result<()> {
        for step in config.steps {
            let op = step.op.as_str();
            let index = || needs(&step.index, op, "index").map(|i| i as usize);
            match op {
                "drop" => history.drop(index()?),
                "restore" => history.restore(index()?),
                "keep_last_turns" => {
                    history.keep_last_turns(needs(&step.turns, op, "turns")? as usize);
                }
                "settle_tool_exchanges" => history.settle_tool_exchanges(),
                "drop_role" => {
                    let role = role(&needs(&step.role, op, "role")?);
                    history.retain_headers(|h| h.role != role);
                }
                "drop_over_tokens" => {
                    let most = needs(&step.tokens, op, "tokens")?;
                    history.retain_headers(|h| h.tokens <= most);
                }
                "drop_containing" => {
                    let text = needs(&step.text, op, "text")?;
                    history.retain(|m| !m.content.contains(&text));
                }
                "replace" => {
                    let m = message(&needs(&step.message, op, "message")?);
                    history.replace(index()?, m);
                }
                "set_content" => {
                    let text = needs(&step.text, op, "text")?;
                    history.message_mut(index()?).content = text;
                }
                "clear_tool_calls" => history.message_mut(index()?).tool_calls.clear(),
                "insert_before" => {
                    let m = message(&needs(&step.message, op, "message")?);
                    history.insert_before(index()?, m);
                }
                "push" => history.push(message(&needs(&step.message, op, "message")?)),
                "fail" => return Err(Error::failed(needs(&step.text, op, "text")?)),
                other => return Err(Error::bad_config(format!("unknown op `{other}`"))),
            }
        }
        Ok(())
    }
}

fn role(name: &str) -> Role {
    match name {
        "system" => Role::System,
        "user" => Role::User,
        "assistant" => Role::Assistant,
        "tool" => Role::Tool,
        other => panic!("unknown role {other:?}"),
    }
}

/// An object's keys, refusing any but `known`: a case in a shape this
/// harness does not know fails rather than being half read.
fn object<'v>(v: &'v Value, known: &[&str], what: &str) -> &'v serde_json::Map<String, Value> {
    let map = v
        .as_object()
        .unwrap_or_else(|| panic!("{what} is not an object: {v}"));
    for key in map.keys() {
        assert!(known.contains(&key.as_str()), "{what}: unknown key {key:?}");
    }
    map
}

fn string(v: &Value, what: &str) -> String {
    v.as_str()
        .unwrap_or_else(|| panic!("{what} is not a string: {v}"))
        .to_owned()
}

fn opt_string(map: &serde_json::Map<String, Value>, key: &str) -> Option<String> {
    match map.get(key) {
        None | Some(Value::Null) => None,
        Some(v) => Some(string(v, key)),
    }
}

fn u32_of(v: &Value, what: &str) -> u32 {
    v.as_u64()
        .and_then(|n| u32::try_from(n).ok())
        .unwrap_or_else(|| panic!("{what} is not a u32: {v}"))
}

/// A message in the cases' JSON shape.
fn message(v: &Value) -> Message {
    let map = object(
        v,
        &[
            "id",
            "role",
            "content",
            "parts",
            "reasoning",
            "tool_calls",
            "tool_call_id",
            "tool_name",
            "model",
            "agent",
            "channel",
            "flags",
            "metadata",
            "tokens",
        ],
        "message",
    );
    let mut m = Message::new(
        role(&string(&map["role"], "role")),
        opt_string(map, "content").unwrap_or_default(),
    );
    m.id = opt_string(map, "id").unwrap_or_default();
    for p in map
        .get("parts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let p = object(p, &["text", "image", "file"], "part");
        let part = if let Some(t) = p.get("text") {
            Part::Text(string(t, "text"))
        } else if let Some(i) = p.get("image") {
            let i = object(i, &["url", "path", "mime_type"], "image");
            let source = match (opt_string(i, "url"), opt_string(i, "path")) {
                (Some(url), None) => MediaSource::Url(url),
                (None, Some(path)) => MediaSource::Path(path),
                _ => panic!("an image has a url or a path: {i:?}"),
            };
            Part::Image(Image {
                source,
                mime_type: opt_string(i, "mime_type"),
            })
        } else {
            let f = object(&p["file"], &["name", "path", "mime_type"], "file");
            Part::File(FileRef {
                name: string(&f["name"], "name"),
                path: string(&f["path"], "path"),
                mime_type: opt_string(f, "mime_type"),
            })
        };
        m.parts.push(part);
    }
    if let Some(r) = map.get("reasoning").filter(|r| !r.is_null()) {
        let r = object(r, &["text", "signature", "redacted"], "reasoning");
        m.reasoning = Some(Reasoning {
            text: string(&r["text"], "text"),
            signature: opt_string(r, "signature"),
            redacted: r.get("redacted").and_then(Value::as_bool).unwrap_or(false),
        });
    }
    for c in map
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let c = object(c, &["id", "name", "arguments"], "tool call");
        m.tool_calls.push(ToolCall {
            id: string(&c["id"], "id"),
            name: string(&c["name"], "name"),
            arguments: string(&c["arguments"], "arguments"),
        });
    }
    m.tool_call_id = opt_string(map, "tool_call_id");
    m.tool_name = opt_string(map, "tool_name");
    m.model = opt_string(map, "model");
    m.agent = opt_string(map, "agent");
    m.channel = opt_string(map, "channel");
    for f in map
        .get("flags")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        m.flags |= match f.as_str() {
            Some("synthetic") => MessageFlags::SYNTHETIC,
            Some("summary") => MessageFlags::SUMMARY,
            Some("error") => MessageFlags::ERROR,
            _ => panic!("unknown flag {f}"),
        };
    }
    m.metadata = opt_string(map, "metadata");
    m.tokens = map.get("tokens").map_or(0, |t| u32_of(t, "tokens"));
    m
}

fn item(v: &Value) -> Item {
    let map = object(v, &["keep", "replace", "message", "insert"], "item");
    if let Some(k) = map.get("keep") {
        Item::Keep(u32_of(k, "keep"))
    } else if let Some(r) = map.get("replace") {
        Item::Replace(Replacement {
            index: u32_of(r, "replace"),
            message: message(&map["message"]),
        })
    } else {
        Item::Insert(message(&map["insert"]))
    }
}

/// Every case of every file, with the file it came from.
fn cases() -> Vec<(PathBuf, Value)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance/cases");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let mut all = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("a case file");
        let doc: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{}: not JSON: {e}", file.display()));
        let doc = object(&doc, &["cases"], "a case file");
        for case in doc["cases"].as_array().expect("`cases` is a list") {
            all.push((file.clone(), case.clone()));
        }
    }
    all
}

/// What one call gave: the answer or the error, whether the messages were
/// fetched, and the tool links the SDK worked out.
fn run(case: &Value) -> (Result<Vec<Item>>, bool, Vec<Option<usize>>) {
    let history: Vec<Message> = case["history"]
        .as_array()
        .expect("`history` is a list")
        .iter()
        .map(message)
        .collect();
    let text = match (case.get("config"), case.get("config_text")) {
        (Some(v), None) => v.to_string(),
        (None, Some(t)) => string(t, "config_text"),
        (None, None) => "{}".into(),
        _ => panic!("config or config_text, not both"),
    };
    let config = match crate::error::parse_config::<Config>(&text) {
        Ok(c) => c,
        Err(e) => return (Err(e), false, Vec::new()),
    };
    let mut h = History::new(crate::testing::context(&text), history);
    let done = Conformance::process(&mut h, config);
    let loaded = h.is_loaded();
    let callers = h.tool_callers().to_vec();
    (done.map(|()| h.into_items()), loaded, callers)
}

#[test]
fn every_conformance_case_passes() {
    let cases = cases();
    let (mut edits, mut errors, mut tokens) = (0, 0, 0);
    let mut names = std::collections::HashSet::new();
    for (file, case) in &cases {
        let map = object(
            case,
            &[
                "name",
                "history",
                "config",
                "config_text",
                "expect",
                "text_tokens",
                "message_tokens",
            ],
            "a case",
        );
        let name = string(&map["name"], "name");
        let at = format!("{}: {name}", file.display());
        assert!(names.insert(name.clone()), "{at}: the name is taken");
        if map.contains_key("text_tokens") || map.contains_key("message_tokens") {
            for t in map
                .get("text_tokens")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let text = string(&t["text"], "text");
                let want = u32_of(&t["tokens"], "tokens");
                assert_eq!(crate::estimate_tokens(&text), want, "{at}: {text:?}");
                tokens += 1;
            }
            for t in map
                .get("message_tokens")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let m = message(&t["message"]);
                let want = u32_of(&t["tokens"], "tokens");
                assert_eq!(crate::estimate_message_tokens(&m), want, "{at}: {m:?}");
                tokens += 1;
            }
            continue;
        }
        let expect = object(
            &map["expect"],
            &["items", "loaded", "tool_callers", "error"],
            "expect",
        );
        let (answer, loaded, callers) = run(case);
        if let Some(error) = expect.get("error") {
            let error = object(error, &["kind", "contains"], "error");
            let (kind, contains) = (
                string(&error["kind"], "kind"),
                string(&error["contains"], "contains"),
            );
            let got = match answer {
                Ok(items) => panic!("{at}: answered {items:?}, expected an error"),
                Err(e) => e,
            };
            let (got_kind, message) = match &got {
                Error::BadConfig(m) => ("bad-config", m),
                Error::Failed(m) => ("failed", m),
            };
            assert_eq!(got_kind, kind, "{at}: {got}");
            assert!(
                message.contains(&contains),
                "{at}: {message:?} lacks {contains:?}"
            );
            errors += 1;
            continue;
        }
        let items = answer.unwrap_or_else(|e| panic!("{at}: {e}"));
        let want: Vec<Item> = expect["items"]
            .as_array()
            .expect("`items` is a list")
            .iter()
            .map(item)
            .collect();
        assert_eq!(items, want, "{at}");
        if let Some(l) = expect.get("loaded") {
            assert_eq!(Some(loaded), l.as_bool(), "{at}: loaded");
        }
        if let Some(c) = expect.get("tool_callers") {
            let want: Vec<Option<usize>> = c
                .as_array()
                .expect("`tool_callers` is a list")
                .iter()
                .map(|v| v.as_u64().map(|n| n as usize))
                .collect();
            assert_eq!(callers, want, "{at}: tool_callers");
        }
        edits += 1;
    }
    assert!(
        edits > 0 && errors > 0 && tokens > 0,
        "every kind of case ran: {edits} edits, {errors} errors, {tokens} token counts"
    );
    eprintln!(
        "conformance: {} cases ({edits} edits, {errors} errors, {tokens} token counts)",
        cases.len()
    );
}
