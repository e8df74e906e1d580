//! Reads the history through every 0.2.0 method that hands data over
//! (`headers`, `messages`, `message`, `contents`, `content`) and logs what
//! it received, one line per message and method, field by field; keeps
//! every message. A test compares the lines with the host's history.
wit_bindgen::generate!({ path: "../../wit/v0.2.0", world: "history-processor" });

use agent_host::history::host::{Level, log};
use agent_host::history::types::{
    Description, Error, Header, History, Item, MediaSource, Message, MessageFlags, Part, Role,
    RunContext, Timestamp, Usage,
};
use exports::agent_host::history::processor::Guest;

struct Reads;

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

fn role(r: Role) -> u8 {
    match r {
        Role::System => 0,
        Role::User => 1,
        Role::Assistant => 2,
        Role::Tool => 3,
    }
}

fn flags(f: MessageFlags) -> u8 {
    let has = |flag: MessageFlags| (f & flag).bits() != 0;
    u8::from(has(MessageFlags::SYNTHETIC))
        | u8::from(has(MessageFlags::SUMMARY)) << 1
        | u8::from(has(MessageFlags::ERROR)) << 2
}

fn timestamp(t: Option<Timestamp>) -> String {
    opt(t.map(|t| format!("{}.{}", t.seconds, t.nanoseconds)))
}

fn usage(u: Option<Usage>) -> String {
    opt(u.map(|u| {
        format!(
            "{}/{}/{}/{}",
            u.input_tokens,
            u.output_tokens,
            opt(u.cache_read_tokens),
            opt(u.cache_write_tokens)
        )
    }))
}

fn header(i: usize, h: &Header) -> String {
    format!(
        "h{i} role={} flags={} tokens={} ts={} answers={} calls={} parts={} content={} \
         reasoning={} metadata={} usage={}",
        role(h.role),
        flags(h.flags),
        h.tokens,
        timestamp(h.timestamp),
        opt(h.answers),
        h.tool_calls,
        h.parts,
        h.content_bytes,
        opt(h.reasoning_bytes),
        h.metadata_bytes,
        usage(h.usage),
    )
}

fn message(m: &Message) -> String {
    let parts: Vec<String> = m
        .parts
        .iter()
        .map(|p| match p {
            Part::Text(t) => format!("text:{t:?}"),
            Part::Image(i) => format!(
                "image:{}:{}",
                match &i.source {
                    MediaSource::Url(u) => format!("url:{u:?}"),
                    MediaSource::Path(p) => format!("path:{p:?}"),
                },
                opt(i.mime_type.as_ref())
            ),
            Part::File(f) => format!(
                "file:{:?}:{:?}:{}",
                f.name,
                f.path,
                opt(f.mime_type.as_ref())
            ),
        })
        .collect();
    let calls: Vec<String> = m
        .tool_calls
        .iter()
        .map(|c| format!("{:?}:{:?}:{:?}", c.id, c.name, c.arguments))
        .collect();
    format!(
        "id={:?} role={} content={:?} parts=[{}] reasoning={} calls=[{}] call-id={} tool={} \
         usage={} model={} ts={} agent={} channel={} flags={} metadata={} tokens={}",
        m.id,
        role(m.role),
        m.content,
        parts.join(","),
        opt(m
            .reasoning
            .as_ref()
            .map(|r| format!("{:?}:{}:{}", r.text, opt(r.signature.as_ref()), r.redacted))),
        calls.join(","),
        opt(m.tool_call_id.as_ref()),
        opt(m.tool_name.as_ref()),
        usage(m.usage),
        opt(m.model.as_ref()),
        timestamp(m.timestamp),
        opt(m.agent.as_ref()),
        opt(m.channel.as_ref()),
        flags(m.flags),
        opt(m.metadata.as_ref()),
        m.tokens,
    )
}

impl Guest for Reads {
    fn describe() -> Description {
        Description {
            name: "reads".into(),
            version: "1.0.0".into(),
            summary: "Logs the history as every method hands it over.".into(),
            config_schema: None,
            config_example: None,
            reorders: false,
        }
    }

    fn process(_: RunContext, history: &History) -> Result<Vec<Item>, Error> {
        let n = history.len();
        for (i, h) in history.headers(0, n).iter().enumerate() {
            log(Level::Info, &header(i, h));
        }
        for (i, m) in history.messages(0, n).iter().enumerate() {
            log(Level::Info, &format!("m{i} {}", message(m)));
        }
        for i in 0..n {
            let one = history.message(i).map(|m| message(&m));
            log(Level::Info, &format!("one{i} {}", opt(one)));
        }
        for (i, c) in history.contents(0, n).iter().enumerate() {
            log(Level::Info, &format!("c{i} {c:?}"));
        }
        for i in 0..n {
            let one = history.content(i).map(|c| format!("{c:?}"));
            log(Level::Info, &format!("content{i} {}", opt(one)));
        }
        // Past the end, and ranges cut to the history.
        log(
            Level::Info,
            &format!(
                "past the end: message={} content={} headers={} messages={} contents={}",
                history.message(n).is_some(),
                history.content(n).is_some(),
                history.headers(n, n + 5).len(),
                history.messages(n - 1, u32::MAX).len(),
                history.contents(2, 1).len(),
            ),
        );
        Ok((0..n).map(Item::Keep).collect())
    }
}

export!(Reads);
