//! The dashboard's HTML (maud templates: everything interpolated is
//! escaped).

use std::collections::HashMap;

use agent_host_api::{ContextReport, SessionState, SessionView};
use agent_host_core::{HeuristicCounter, MediaRef, Message, Part, Role};
use agent_host_store::SessionMeta;
use chrono::{DateTime, Utc};
use maud::{DOCTYPE, Markup, html};

/// Characters of a message shown before the rest is folded.
const FOLD_AT: usize = 2_000;
/// Lines of a message shown before the rest is folded.
const FOLD_LINES: usize = 8;

fn layout(title: &str, session: Option<&str>, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="color-scheme" content="light dark";
                title { (title) " · agent-host" }
                link rel="stylesheet" href="/assets/dashboard.css";
            }
            body {
                header.top {
                    a.brand href="/" { "agent-host" }
                    nav aria-label="Main" {
                        a href="/" { "Sessions" }
                        a href="/processors" { "Processors" }
                        a href="/reports" { "Reports" }
                        a href="/openapi.json" { "API" }
                    }
                    span #live .live role="status" aria-live="polite" {}
                }
                main data-session=[session] { (body) }
                script src="/assets/dashboard.js" defer {}
            }
        }
    }
}

fn when(t: &DateTime<Utc>) -> Markup {
    html! { time datetime=(t.to_rfc3339()) { (t.format("%Y-%m-%d %H:%M:%S UTC")) } }
}

fn state_badge(state: Option<SessionState>) -> Markup {
    match state {
        Some(s) => html! { span class={"badge state-" (s.as_str())} { (s.as_str()) } },
        None => html! { span.badge.muted { "unknown" } },
    }
}

fn name_of(view: &SessionView) -> String {
    view.title
        .clone()
        .or_else(|| view.key.clone())
        .unwrap_or_else(|| view.id.to_string())
}

/// What the list page shows.
pub(super) struct ListView<'a> {
    pub sessions: &'a [SessionView],
    pub next: Option<&'a str>,
    pub q: &'a str,
    pub agent: &'a str,
    pub channel: &'a str,
    pub state: Option<SessionState>,
    /// How many gateway requests of a session are kept.
    pub requests: &'a dyn Fn(uuid::Uuid) -> usize,
    /// A session's last context report, when one is at hand.
    pub report: &'a dyn Fn(uuid::Uuid) -> Option<std::sync::Arc<ContextReport>>,
    pub total: usize,
    pub signed_in: bool,
}

pub(super) fn list(v: &ListView<'_>) -> Markup {
    let states = [
        SessionState::Created,
        SessionState::Active,
        SessionState::Idle,
        SessionState::Compacted,
    ];
    let body = html! {
        h1 { "Sessions" }
        form.filters method="get" action="/" role="search" {
            label { "Search" input type="search" name="q" value=(v.q) placeholder="key, title, id"; }
            label { "Agent" input type="text" name="agent" value=(v.agent) size="12"; }
            label { "Channel" input type="text" name="channel" value=(v.channel) size="10"; }
            label { "State"
                select name="state" {
                    option value="" selected[v.state.is_none()] { "any" }
                    @for s in states {
                        option value=(s.as_str()) selected[v.state == Some(s)] { (s.as_str()) }
                    }
                }
            }
            button.primary type="submit" { "Filter" }
            @if v.signed_in {
                button type="submit" formaction="/logout" formmethod="post" { "Sign out" }
            }
        }
        div #sessions data-live {
            p.muted { (v.sessions.len()) " shown of " (v.total) " sessions, newest first." }
            @if v.sessions.is_empty() {
                p { "No session matches." }
            } @else {
                div.table-wrap {
                    table {
                        thead { tr {
                            th scope="col" { "Session" }
                            th scope="col" { "Agent" }
                            th scope="col" .hide-narrow { "Channels" }
                            th scope="col" { "State" }
                            th scope="col" .hide-narrow { "Last activity" }
                            th scope="col" .num { "Messages" }
                            th scope="col" .num .hide-narrow { "Summaries" }
                            th scope="col" { "Context" }
                        } }
                        tbody {
                            @for s in v.sessions {
                                tr data-id=(s.id) {
                                    td {
                                        a href={"/sessions/" (s.id)} { (name_of(s)) }
                                        @if s.title.is_some() && s.key.is_some() {
                                            br; small.muted { (s.key.as_deref().unwrap_or_default()) }
                                        }
                                        @let requests = (v.requests)(s.id);
                                        @if requests > 0 {
                                            br; small { a href={"/sessions/" (s.id) "#requests"} { (requests) " gateway request" @if requests != 1 { "s" } } }
                                        }
                                    }
                                    td { (s.agent) }
                                    td.hide-narrow.channels {
                                        @for c in &s.channels {
                                            a.badge href={"/?channel=" (enc(c))} title={"Only sessions with messages through " (c)} { (c) }
                                        }
                                    }
                                    td { (state_badge(s.state)) }
                                    td.hide-narrow { @if let Some(t) = &s.last_activity { (when(t)) } }
                                    td.num { (s.message_count) }
                                    td.num.hide-narrow { (s.checkpoints) }
                                    td { (meter(s.id, (v.report)(s.id).as_deref())) }
                                }
                            }
                        }
                    }
                }
            }
            @if let Some(next) = v.next {
                nav.pager aria-label="Pages" {
                    a href={"/?q=" (enc(v.q)) "&agent=" (enc(v.agent)) "&channel=" (enc(v.channel)) "&state=" (v.state.map_or("", |s| s.as_str())) "&cursor=" (enc(next))} { "Older sessions →" }
                }
            }
        }
    };
    layout("Sessions", None, body)
}

/// A session's context meter: its use against the window, the compaction
/// point marked. Drawn here from the last report at hand (so it reads with
/// JavaScript off); the script draws it from a fresh one.
fn meter(id: uuid::Uuid, report: Option<&ContextReport>) -> Markup {
    let Some(r) = report else {
        return html! {
            div.meter data-context={"/v1/sessions/" (id) "/context"} {
                div.bar role="img" aria-label="context use not measured yet" { span.fill style="width:0" {} }
                small { a href={"/sessions/" (id)} { "open" } }
            }
        };
    };
    let used = r.tokens.total;
    let window = r.context_limit;
    let pct = if window == 0 {
        0.0
    } else {
        (100.0 * f64::from(used) / f64::from(window)).min(100.0)
    };
    let level = if pct >= 95.0 {
        "fill full"
    } else if pct >= 75.0 {
        "fill high"
    } else {
        "fill"
    };
    let trigger = r
        .triggers
        .iter()
        .rfind(|t| t.name == "tokens" || t.name == "fraction");
    let mut label = format!("{used} / {window} tokens");
    if let Some(t) = trigger {
        label.push_str(&format!(" · {:.0}% of the compaction point", t.percent));
    }
    html! {
        div.meter data-context={"/v1/sessions/" (id) "/context"} {
            div.bar role="img" aria-label=(label) {
                span class=(level) style={"width:" (format!("{pct:.1}")) "%"} {}
                @if let (Some(t), true) = (trigger, window > 0) {
                    span.mark style={"left:" (format!("{:.1}", (100.0 * t.limit as f64 / f64::from(window)).min(100.0))) "%"}
                        title={"compacts at " (t.limit) " tokens"} {}
                }
            }
            small { (label) }
        }
    }
}

fn enc(text: &str) -> String {
    form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// What the session page shows.
pub(super) struct SessionPage<'a> {
    pub view: &'a SessionView,
    pub meta: &'a SessionMeta,
    pub system: &'a [Message],
    pub messages: &'a [Message],
    /// Messages older than those shown.
    pub skipped: usize,
    pub back: usize,
    pub earlier: bool,
    pub report: Option<&'a ContextReport>,
    pub report_error: Option<String>,
    /// The gateway's records of this session, newest first.
    pub requests: &'a [crate::gateway::Brief],
}

pub(super) fn session(p: &SessionPage<'_>) -> Markup {
    let v = p.view;
    let id = v.id.to_string();
    let name = name_of(v);
    let counter = HeuristicCounter::default();
    let tokens: HashMap<&str, u32> = p
        .messages
        .iter()
        .map(|m| (m.id.as_str(), m.tokens(&counter)))
        .collect();
    let body = html! {
        nav aria-label="Breadcrumb" { a href="/" { "← Sessions" } }
        h1 { (name) }
        dl.facts {
            dt { "Id" } dd { code { (id) } }
            @if let Some(key) = &v.key { dt { "Key" } dd { (key) } }
            dt { "Agent" } dd { (v.agent) }
            @if !v.channels.is_empty() {
                dt { "Channels" } dd.channels { @for c in &v.channels { a.badge href={"/?channel=" (enc(c))} { (c) } } }
            }
            dt { "State" } dd { (state_badge(v.state)) }
            dt { "Messages" } dd { (p.meta.message_count) }
            dt { "Summaries" } dd { (p.meta.checkpoints.len()) }
            dt { "Created" } dd { (when(&p.meta.created)) }
            dt { "Updated" } dd { (when(&p.meta.updated)) }
        }
        div.actions {
            form.inline method="post" action={"/sessions/" (id) "/rename"} {
                label { "Title" input type="text" name="title" value=(v.title.as_deref().unwrap_or_default()) maxlength="512"; }
                button type="submit" { "Rename" }
            }
            form.inline method="post" action={"/sessions/" (id) "/summarize"} {
                button type="submit" { "Summarize now" }
            }
            a href={"/sessions/" (id) "/clear"} { "Clear…" }
            a href={"/sessions/" (id) "/delete"} { "Delete…" }
            nav aria-label="Export" {
                "Export: "
                @for (format, label) in [("markdown", "Markdown"), ("openai", "OpenAI"), ("anthropic", "Anthropic"), ("jsonl", "JSONL")] {
                    a href={"/v1/sessions/" (id) "/export?format=" (format)} { (label) } " "
                }
            }
        }
        div #context data-live {
            h2 { "What would be sent now" }
            @match (p.report, &p.report_error) {
                (Some(r), _) => { (zones(r)) }
                (None, Some(e)) => { p.error { "The context report failed: " (e) } }
                (None, None) => {}
            }
            (chart(p))
        }
        (requests(&id, p.requests))
        div #timeline data-live {
            h2 { "Conversation" }
            @if p.earlier || p.back > 0 {
                nav.pager aria-label="Messages" {
                    @if p.earlier { a href={"/sessions/" (id) "?back=" (p.back + 1)} { "← Earlier messages" } }
                    @if p.back > 0 { a href={"/sessions/" (id) "?back=" (p.back - 1)} { "Later messages →" } }
                }
            }
            @if p.skipped > 0 { p.muted { (p.skipped) " earlier messages not shown." } }
            ol.timeline {
                @if p.skipped > 0 {
                    @for m in p.system { (message(m, p.meta, &tokens)) }
                }
                @for m in p.messages { (message(m, p.meta, &tokens)) }
            }
        }
    };
    layout(&name, Some(&id), body)
}

fn zones(r: &ContextReport) -> Markup {
    let window = f64::from(r.context_limit.max(1));
    let pct = |t: u32| 100.0 * f64::from(t) / window;
    let t = &r.tokens;
    let free = r
        .context_limit
        .saturating_sub(t.total)
        .saturating_sub(r.response_reserve);
    html! {
        div.zones role="img" aria-label={"The view takes " (t.total) " of " (r.context_limit) " tokens"} {
            span.z-system style={"width:" (format!("{:.2}", pct(t.system))) "%"} title={"system prompt: " (t.system) " tokens"} {}
            span.z-summary style={"width:" (format!("{:.2}", pct(t.summary))) "%"} title={"summary: " (t.summary) " tokens"} {}
            span.z-recent style={"width:" (format!("{:.2}", pct(t.recent))) "%"} title={"recent messages: " (t.recent) " tokens"} {}
            span.z-volatile style={"width:" (format!("{:.2}", pct(t.volatile))) "%"} title={"volatile tail: " (t.volatile) " tokens"} {}
            span.z-free {}
            span.z-reserve style={"width:" (format!("{:.2}", pct(r.response_reserve))) "%"} title={"kept for the answer: " (r.response_reserve) " tokens"} {}
        }
        div.legend {
            span { i.z-system {} "System prompt " strong { (t.system) } }
            span { i.z-summary {} "Summary " strong { (t.summary) } }
            span { i.z-recent {} "Recent messages " strong { (t.recent) } " (" (r.messages_in_view) " messages)" }
            span { i.z-volatile {} "Volatile tail " strong { (t.volatile) } }
            span { i.z-free {} "Free " strong { (free) } }
            span { i.z-reserve {} "Kept for the answer " strong { (r.response_reserve) } }
        }
        @if r.volatile_tail.is_empty() {
            p.muted { "Volatile tail: nothing recalled (long-term memory is off, or holds nothing for the newest user message)." }
        } @else {
            details.volatile {
                summary { "Volatile tail: " (r.volatile_tail.len()) " recalled facts after the newest message, never cached" }
                ul { @for fact in &r.volatile_tail { li { (fact) } } }
            }
        }
        p {
            (t.total) " of " (r.context_limit) " tokens (" (format!("{:.1}", t.percent_of_window)) "% of the window); "
            (r.left_out) " older messages left out; " (r.messages_since_summary) " messages since the last summary."
        }
        @if !r.triggers.is_empty() {
            ul {
                @for trig in &r.triggers {
                    li {
                        "Compaction by " (trig.name) ": " (trig.current) " of " (trig.limit)
                        " (" (format!("{:.0}", trig.percent)) "%)"
                        @if trig.fires { strong { " fires on the next turn" } }
                    }
                }
            }
        }
    }
}

/// Context use over the shown messages: tokens since the last summary after
/// each message, with summaries marked.
fn chart(p: &SessionPage<'_>) -> Markup {
    let counter = HeuristicCounter::default();
    let mut running = 0u64;
    let mut points = Vec::with_capacity(p.messages.len());
    let mut marks = Vec::new();
    for (i, m) in p.messages.iter().enumerate() {
        if m.summary {
            marks.push(i);
            running = u64::from(m.tokens(&counter));
        } else {
            running += u64::from(m.tokens(&counter));
        }
        points.push(running);
    }
    if points.len() < 2 {
        return html! {};
    }
    let limit = p
        .report
        .and_then(|r| {
            r.triggers
                .iter()
                .find(|t| t.name == "tokens")
                .map(|t| t.limit)
        })
        .unwrap_or(0);
    let top = points.iter().copied().max().unwrap_or(1).max(limit).max(1) as f64;
    let (w, h) = (1000.0, 100.0);
    let x = |i: usize| i as f64 * w / (points.len() - 1) as f64;
    let y = |v: u64| h - (v as f64 / top) * (h - 4.0) - 2.0;
    let line: Vec<String> = points
        .iter()
        .enumerate()
        .map(|(i, v)| format!("{:.1},{:.1}", x(i), y(*v)))
        .collect();
    html! {
        figure.chart {
            figcaption { "Tokens since the last summary, message by message (the " (points.len()) " messages shown)" }
            svg viewBox="0 0 1000 100" preserveAspectRatio="none" role="img"
                aria-label={"Context use over " (points.len()) " messages, " (marks.len()) " summaries"} {
                @if limit > 0 {
                    line.limit x1="0" x2="1000" y1=(format!("{:.1}", y(limit))) y2=(format!("{:.1}", y(limit))) {}
                }
                @for i in &marks {
                    line.compaction x1=(format!("{:.1}", x(*i))) x2=(format!("{:.1}", x(*i))) y1="0" y2="100" {}
                }
                polyline.use points=(line.join(" ")) {}
            }
        }
    }
}

fn message(m: &Message, meta: &SessionMeta, tokens: &HashMap<&str, u32>) -> Markup {
    let counter = HeuristicCounter::default();
    if m.summary {
        // A checkpoint is a pair: the boundary says nothing of its own, the
        // summary's marker says what the pair stands for.
        if meta.checkpoints.iter().any(|c| c.boundary_id == m.id) {
            return html! {};
        }
        let checkpoint = meta.checkpoints.iter().find(|c| c.summary_id == m.id);
        let after = m.tokens(&counter);
        // What the covered messages took, when they are all on this page.
        let before: Option<u64> = checkpoint.and_then(|c| {
            c.covers
                .iter()
                .map(|id| tokens.get(id.as_str()).map(|t| u64::from(*t)))
                .sum()
        });
        return html! {
            li.checkpoint id={"m-" (m.id)} {
                span.who { "Summary checkpoint" }
                @if let Some(t) = &m.timestamp { span.when { (when(t)) } }
                p {
                    @if let Some(c) = checkpoint {
                        (c.covers.len()) " messages"
                        @if let Some(b) = before { " (" (b) " tokens)" }
                        " summarized into " (after) " tokens"
                        @if let Some(b) = before { @if b > u64::from(after) { ": " (b - u64::from(after)) " tokens freed" } }
                        @if let Some(u) = &c.usage {
                            " · written by " (u.model)
                            @if u.requests > 0 { " (" (u.input_tokens) " tokens in, " (u.output_tokens) " out)" }
                        }
                    } @else {
                        (after) " tokens"
                    }
                }
                details { summary { "The summary" } div.text { (m.text()) } }
            }
        };
    }
    let role = match m.role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    };
    let text = m.content.as_str();
    html! {
        li class={"role-" (role)} id={"m-" (m.id)} {
            span.who { (role) }
            @if let Some(name) = &m.tool_name { " · " (name) }
            @if let Some(t) = &m.timestamp { span.when { (when(t)) } }
            @if let Some(agent) = &m.agent { span.when { (agent) } }
            @if let Some(channel) = &m.channel { span.when { "via " (channel) } }
            span.when { (m.tokens(&counter)) " tokens" }
            @if m.is_error { " " span.badge.error { "error" } }
            @if m.metadata.contains_key("incomplete") { " " span.badge.error { "cut off" } }
            @if let Some(r) = &m.reasoning {
                details { summary { "Reasoning" }
                    @if r.redacted { p.muted { "(redacted)" } } @else { div.text { (r.text) } }
                }
            }
            (folded(text))
            @for part in &m.parts {
                @match part {
                    Part::Text { text } => { (folded(text)) }
                    Part::Image { source, mime_type } => { (image(source, mime_type.as_deref())) }
                    Part::File { name, path, .. } => { p { "File " code { (name) } " at " code { (path) } } }
                }
            }
            @for call in &m.tool_calls {
                div id={"call-" (call.id)} {
                    "→ " strong { (call.name) } " " small.muted { (call.id) }
                    pre { (truncate(&call.arguments)) }
                }
            }
            @if let Some(call) = &m.tool_call_id {
                p.muted { "result of " a href={"#call-" (call)} { (call) } }
            }
        }
    }
}

/// The largest inline image shown as a thumbnail, in bytes of its data URL.
const MAX_THUMBNAIL: usize = 2 * 1024 * 1024;

/// The raster image types shown inline (never SVG, which can carry script).
const SHOWN_IMAGES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];

/// A data URL this page may put in an `img`: a base64 raster image, of
/// [`SHOWN_IMAGES`], no larger than [`MAX_THUMBNAIL`], nothing else in it.
pub(super) fn safe_data_image(url: &str) -> bool {
    let Some((head, data)) = url
        .strip_prefix("data:")
        .and_then(|rest| rest.split_once(','))
    else {
        return false;
    };
    let Some(mime) = head.strip_suffix(";base64") else {
        return false;
    };
    url.len() <= MAX_THUMBNAIL
        && SHOWN_IMAGES.iter().any(|m| mime.eq_ignore_ascii_case(m))
        && !data.is_empty()
        && data
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
}

/// An image part: a thumbnail when it is inline data of a raster type; a
/// link when it is on the web (not loaded: a page that fetched it would
/// tell its host who is reading the session); a path otherwise.
fn image(source: &MediaRef, mime_type: Option<&str>) -> Markup {
    let kind = mime_type.unwrap_or("image");
    html! {
        @match source {
            MediaRef::Url(url) if safe_data_image(url) => {
                figure.thumb {
                    img src=(url) alt={"An image in the message (" (kind) ", " (url.len()) " bytes)"} loading="lazy";
                }
            }
            MediaRef::Url(url) if url.starts_with("data:") => {
                p.muted { "Inline " (kind) " (" (url.len()) " bytes), not shown: only PNG, JPEG, GIF and WebP data up to " (MAX_THUMBNAIL >> 20) " MiB are." }
            }
            MediaRef::Url(url) if url.starts_with("https://") || url.starts_with("http://") => {
                p { "Image (" (kind) ", not loaded): " a href=(url) rel="noopener noreferrer nofollow" target="_blank" { (truncate(url)) } }
            }
            MediaRef::Url(url) => { p { "Image (" (kind) "): " code { (truncate(url)) } } }
            MediaRef::Path(path) => { p { "Image (" (kind) ") at " code { (path) } } }
        }
    }
}

/// Text shown whole when short, else its start (a few lines, or
/// [`FOLD_AT`] characters) with the whole folded below.
fn folded(text: &str) -> Markup {
    if text.is_empty() {
        return html! {};
    }
    let mut cut = text
        .match_indices('\n')
        .nth(FOLD_LINES - 1)
        .map_or(text.len(), |(at, _)| at)
        .min(FOLD_AT);
    if cut >= text.len() {
        return html! { div.text { (text) } };
    }
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    html! {
        div.text { (&text[..cut]) "…" }
        details { summary { "All of it: " (text.lines().count()) " lines, " (text.len()) " characters" } div.text { (text) } }
    }
}

fn truncate(text: &str) -> String {
    if text.len() <= FOLD_AT {
        return text.to_owned();
    }
    let mut cut = FOLD_AT;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}… ({} characters)", &text[..cut], text.len())
}

pub(super) fn login(next: &str, error: Option<&str>) -> Markup {
    let body = html! {
        h1 { "Sign in" }
        p { "This server asks for a token. It is kept in a cookie this browser sends only to this server." }
        @if let Some(e) = error { p.error role="alert" { (e) } }
        form method="post" action="/login" {
            input type="hidden" name="next" value=(next);
            label { "Token " input type="password" name="token" autocomplete="current-password" required autofocus; }
            " "
            button.primary type="submit" { "Sign in" }
        }
    };
    layout("Sign in", None, body)
}

/// A page for an error.
pub(super) fn error(status: u16, message: &str) -> Markup {
    layout(
        "Error",
        None,
        html! {
            h1 { "Error " (status) }
            p.error { (message) }
            p { a href="/" { "Back to the sessions" } }
        },
    )
}

/// A processor call, for the processors page.
#[derive(Clone, Debug)]
pub(crate) struct Call {
    pub at: DateTime<Utc>,
    pub session: uuid::Uuid,
    pub name: String,
    pub hash: String,
    pub outcome: String,
    pub error: Option<String>,
    pub time_ms: f64,
    pub peak_memory_bytes: usize,
    /// Messages before and after.
    pub messages: (usize, usize),
}

/// The processors the server runs on every turn, and their recent calls.
pub(super) fn processors(loaded: &[agent_host_runtime::Processor], calls: &[Call]) -> Markup {
    let body = html! {
        h1 { "Processors" }
        @if loaded.is_empty() {
            p { "This server runs no processors on its turns (" code { "agent-host serve --processor FILE.wasm" } " adds one)." }
        } @else {
            div.table-wrap { table {
                thead { tr {
                    th scope="col" { "Processor" } th scope="col" { "Version" } th scope="col" { "Hash" }
                    th scope="col" { "Contract" } th scope="col" { "Grants" } th scope="col" { "Limits" }
                } }
                tbody {
                    @for p in loaded {
                        @let d = p.description();
                        @let o = p.options();
                        tr {
                            td { strong { (p.name()) } br; small.muted { (d.summary) } }
                            td { (d.version) }
                            td { code { (p.hash().get(..12).unwrap_or(p.hash())) } }
                            td { @for i in p.imports() { (i.name) br; } }
                            td {
                                @if o.grants == agent_host_runtime::Grants::default() { "none" }
                                @for d in &o.grants.read_dirs { "read " code { (d.display()) } br; }
                                @if o.grants.clocks { "clocks" br; }
                                @if o.grants.random { "random" br; }
                                @if o.grants.summarize { "summarize (" (o.limits.services.model_tokens) " model tokens)" br; }
                                @if o.grants.count_tokens { "count tokens" br; }
                                @if o.grants.memory { "read memory" }
                            }
                            td {
                                (o.limits.deadline.as_millis()) " ms, "
                                (o.limits.memory_bytes >> 20) " MiB, "
                                (o.limits.max_output_bytes >> 20) " MiB out"
                            }
                        }
                    }
                }
            } }
        }
        h2 { "Recent calls" }
        @if calls.is_empty() {
            p.muted { "No call since the server started." }
        } @else {
            div.table-wrap { table {
                thead { tr {
                    th scope="col" { "When" } th scope="col" { "Processor" } th scope="col" { "Session" }
                    th scope="col" { "Outcome" } th scope="col" .num { "Time" } th scope="col" .num { "Peak memory" }
                    th scope="col" .num { "Messages" }
                } }
                tbody {
                    @for c in calls {
                        tr {
                            td { (when(&c.at)) }
                            td { (c.name) " " small.muted { code { (c.hash.get(..12).unwrap_or(&c.hash)) } } }
                            td { a href={"/sessions/" (c.session)} { code { (c.session.to_string().get(..8).unwrap_or_default()) } } }
                            td {
                                (c.outcome)
                                @if let Some(e) = &c.error { br; small.error { (e) } }
                            }
                            td.num { (format!("{:.1}", c.time_ms)) " ms" }
                            td.num { (c.peak_memory_bytes >> 10) " KiB" }
                            td.num { (c.messages.0) " → " (c.messages.1) }
                        }
                    }
                }
            } }
        }
    };
    layout("Processors", None, body)
}

/// Asks before an action that cannot be undone (`action`: `clear`,
/// `delete`).
pub(super) fn confirm(view: &SessionView, action: &str, question: &str, detail: &str) -> Markup {
    let name = name_of(view);
    let body = html! {
        nav aria-label="Breadcrumb" { a href={"/sessions/" (view.id)} { "← " (name) } }
        h1 { (question) }
        p { strong { (name) } " (" (view.message_count) " messages)" }
        p { (detail) }
        form method="post" action={"/sessions/" (view.id) "/" (action)} {
            button.primary type="submit" { "Yes, " (action) " it" }
            " "
            a href={"/sessions/" (view.id)} { "No, keep it" }
        }
    };
    layout(question, None, body)
}

/// Requests listed before the older ones are folded.
const REQUESTS_SHOWN: usize = 10;

/// The session page's list of the gateway's requests.
pub(super) fn requests(id: &str, briefs: &[crate::gateway::Brief]) -> Markup {
    let (newest, older) = briefs.split_at(briefs.len().min(REQUESTS_SHOWN));
    html! {
        div #requests data-live {
            h2 { "Requests through the gateway" }
            @if briefs.is_empty() {
                p.muted { "No request of this session went through the gateway since the server started." }
            } @else {
                (request_table(id, newest))
                @if !older.is_empty() {
                    details { summary { (older.len()) " older requests" } (request_table(id, older)) }
                }
            }
        }
    }
}

fn request_table(id: &str, briefs: &[crate::gateway::Brief]) -> Markup {
    html! {
        div.table-wrap { table {
            thead { tr {
                th scope="col" { "Request" } th scope="col" { "When" } th scope="col" .hide-narrow { "Wire" }
                th scope="col" .num { "Tokens" } th scope="col" .num .hide-narrow { "Messages" }
                th scope="col" { "Changes" } th scope="col" { "Outcome" }
            } }
            tbody {
                @for b in briefs {
                    tr {
                        td { a href={"/sessions/" (id) "/requests/" (b.n)} { "#" (b.n) } }
                        td { (when(&b.at)) }
                        td.hide-narrow { (b.wire.label()) @if let Some(m) = &b.model { br; small.muted { (m) } } }
                        td.num { (b.tokens.0) " → " (b.tokens.1) }
                        td.num.hide-narrow { (b.messages.0) " → " (b.messages.1) }
                        td {
                            @match b.changes {
                                Some((0, 0, 0)) => { span.muted { "none" } }
                                Some((d, r, i)) => {
                                    @if d > 0 { span.c-dropped { (d) " dropped" } " " }
                                    @if r > 0 { span.c-replaced { (r) " replaced" } " " }
                                    @if i > 0 { span.c-inserted { (i) " inserted" } }
                                }
                                None => { span.muted { "not kept" } }
                            }
                        }
                        td { (b.outcome) }
                    }
                }
            }
        } }
    }
}

/// A request of the gateway: what it was, and what each stage did.
pub(super) fn request(view: &SessionView, r: &crate::gateway::RequestRecord) -> Markup {
    let name = name_of(view);
    let id = view.id.to_string();
    let body = html! {
        nav aria-label="Breadcrumb" { a href={"/sessions/" (id) "#requests"} { "← " (name) } }
        h1 { "Request #" (r.n) }
        dl.facts {
            dt { "When" } dd { (when(&r.at)) }
            dt { "Wire" } dd { (r.wire.label()) @if r.stream { " (streamed)" } }
            @if let Some(m) = &r.model { dt { "Model" } dd { (m) } }
            dt { "Session found by" } dd { (r.identified_by) }
            dt { "Key" } dd { (r.key) }
            @if let Some(from) = &r.branched_from { dt { "Branched from" } dd { (from) } }
            dt { "Client's messages" } dd { (r.client_messages) " (" (r.known) " stored already, " (r.appended.len()) " new)" }
            dt { "Tokens" } dd { (r.tokens_before) " since the last summary → " (r.tokens_after) " sent in " (r.sent.len()) " messages" }
            dt { "Outcome" } dd {
                (r.outcome)
                @if let Some(s) = r.upstream_status { " (upstream " (s) ")" }
                @if let Some(e) = &r.error { br; span.error { (e) } }
            }
            @if let Some(u) = &r.usage { dt { "Usage" } dd { (u.input_tokens) " tokens in, " (u.output_tokens) " out" } }
            @if let Some(reply) = &r.reply { dt { "Answer" } dd { a href={"/sessions/" (id) "#m-" (reply)} { code { (reply) } } } }
        }
        h2 { "Stages" }
        @if r.stages_forgotten {
            p.muted { "This record is older than the newest " (crate::gateway::KEPT_DIFFS) " of its session: its stages are no longer kept." }
        }
        (stages(&r.stages))
    };
    layout(&format!("Request #{} · {}", r.n, name), None, body)
}

/// Each stage in order, with its time, outcome, steps and diff.
pub(super) fn stages(stages: &[agent_host_engine::trace::StageReport]) -> Markup {
    html! {
        ol.stages {
            @for (i, s) in stages.iter().enumerate() {
                li.stage id={"stage-" (i + 1)} {
                    h3 {
                        (i + 1) ". " (s.name)
                        @if let Some(v) = &s.version { " " small.muted { (v) } }
                        " " span class={"badge outcome-" (s.outcome)} { (s.outcome) }
                    }
                    p.muted {
                        (format!("{:.2}", s.time_ms)) " ms · " (s.diff.before) " messages in, " (s.diff.after) " out: "
                        (s.diff.kept) " kept, " (s.diff.dropped) " dropped, " (s.diff.replaced) " replaced, " (s.diff.inserted) " inserted"
                    }
                    @if let Some(e) = &s.error { p.error { (e) } }
                    @if !s.steps.is_empty() {
                        ul.steps { @for step in &s.steps { li { (step) } } }
                    }
                    @if !s.step_times.is_empty() {
                        table.step-times {
                            caption { "Where the time went" }
                            thead { tr { th scope="col" { "Step" } th scope="col" { "Time" } } }
                            tbody {
                                @for t in &s.step_times {
                                    tr { td { (t.step) } td.num { (format!("{:.3}", t.ms)) " ms" } }
                                }
                            }
                        }
                    }
                    (diff(&s.diff))
                }
            }
        }
    }
}

fn excerpt_head(e: &agent_host_core::diff::Excerpt) -> Markup {
    let role = match e.role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    };
    html! {
        span.who { (role) }
        @if let Some(t) = &e.tool { " · " (t) }
        @if e.summary { " · summary" }
        " " small.muted { code { (e.id) } " · " (e.chars) " characters" }
    }
}

fn excerpt_text(e: &agent_host_core::diff::Excerpt) -> Markup {
    html! {
        div.text { (e.text) }
        @if e.cut {
            p.muted { @if e.text.is_empty() { "(its text is not kept: the record's text budget was spent)" } @else { "(cut: " (e.chars) " characters in all)" } }
        }
    }
}

fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default();
    let mut cut: String = line.chars().take(120).collect();
    if cut.len() < text.len() {
        cut.push('…');
    }
    cut
}

/// A stage's diff: kept runs folded, a dropped message struck out (its text
/// behind a disclosure), a replaced one beside its replacement, an inserted
/// one marked.
fn diff(d: &agent_host_core::diff::ViewDiff) -> Markup {
    use agent_host_core::diff::Change;
    html! {
        @if d.changes.is_empty() {
            p.muted { "No message in or out." }
        } @else {
            ol.diff aria-label="Messages in and out" {
                @for c in &d.changes {
                    @match c {
                        Change::Kept { count, first, last } => {
                            li.kept { "= " (count) " message" @if *count != 1 { "s" } " kept unchanged"
                                " " small.muted { code { (first) } @if first != last { " … " code { (last) } } } }
                        }
                        Change::DroppedRun { count, first, last } => {
                            li.dropped { "− " del { (count) " earlier messages dropped" }
                                " " small.muted { "(not listed) " code { (first) } " … " code { (last) } } }
                        }
                        Change::Dropped { message } => {
                            li.dropped {
                                details {
                                    summary { "− dropped: " (excerpt_head(message)) br; del { (first_line(&message.text)) } }
                                    del { (excerpt_text(message)) }
                                }
                            }
                        }
                        Change::Replaced { before, after } => {
                            li.replaced {
                                p { "± replaced" }
                                div.sides {
                                    div.before { p { "Before: " (excerpt_head(before)) } del { (excerpt_text(before)) } }
                                    div.after { p { "After: " (excerpt_head(after)) } ins { (excerpt_text(after)) } }
                                }
                            }
                        }
                        Change::Inserted { message } => {
                            li.inserted {
                                p { "+ inserted: " (excerpt_head(message)) }
                                ins { (excerpt_text(message)) }
                            }
                        }
                    }
                }
            }
            @if d.not_listed > 0 { p.muted { "And " (d.not_listed) " more changed messages, counted but not listed." } }
        }
    }
}

/// The form that shows a `run --report` file.
pub(super) fn report_form(error: Option<&str>) -> Markup {
    let body = html! {
        h1 { "A pipeline report" }
        p {
            "Shows what each stage did in a report written by "
            code { "agent-host run --report report.json" }
            ": its time, its outcome, and the messages it kept, dropped, replaced and inserted. The report is shown, not kept."
        }
        @if let Some(e) = error { p.error role="alert" { (e) } }
        form #report-form method="post" action="/reports" {
            p { label { "Report file " input #report-file type="file" accept="application/json,.json"; } }
            p { label for="report-text" { "Or its text" } br;
                textarea #report-text name="report" rows="10" cols="80" required spellcheck="false" {} }
            button.primary type="submit" { "Show" }
        }
    };
    layout("A pipeline report", None, body)
}

/// A `run --report` file, shown.
pub(super) fn run_report(r: &super::RunReport) -> Markup {
    let field = |v: &serde_json::Value, name: &str| -> String {
        match v.get(name) {
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(other) if !other.is_null() => other.to_string(),
            _ => "?".to_owned(),
        }
    };
    let body = html! {
        nav aria-label="Breadcrumb" { a href="/reports" { "← Another report" } }
        h1 { "A pipeline report" }
        dl.facts {
            dt { "Input" } dd { (field(&r.input, "source")) " (" (field(&r.input, "format")) "): "
                (field(&r.input, "messages")) " messages, " (field(&r.input, "tokens")) " tokens" }
            dt { "Output" } dd { (field(&r.output, "format")) ": "
                (field(&r.output, "messages")) " messages, " (field(&r.output, "tokens")) " tokens" }
            @if let Some(f) = &r.failure { dt { "Failure" } dd.error { (f) } }
        }
        h2 { "Stages" }
        (stages(r.stages.as_deref().unwrap_or_default()))
    };
    layout("A pipeline report", None, body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_raster_data_urls_become_images() {
        assert!(safe_data_image("data:image/png;base64,iVBORw0KGgo="));
        assert!(safe_data_image("data:image/JPEG;base64,/9j/4AAQ"));
        for refused in [
            "data:image/svg+xml;base64,PHN2Zz4=",
            "data:text/html;base64,PHNjcmlwdD4=",
            "data:image/png,<svg onload=alert(1)>",
            "data:image/png;base64,AAAA\" onerror=\"alert(1)",
            "data:image/png;base64,",
            "https://example.com/a.png",
            "javascript:alert(1)",
        ] {
            assert!(!safe_data_image(refused), "{refused}");
        }
        let huge = format!("data:image/png;base64,{}", "A".repeat(MAX_THUMBNAIL));
        assert!(!safe_data_image(&huge));
    }

    #[test]
    fn an_image_on_the_web_is_a_link_not_an_img() {
        let html = image(
            &MediaRef::Url("https://tracker.example/pixel.png?u=1".into()),
            Some("image/png"),
        )
        .into_string();
        assert!(!html.contains("<img"), "{html}");
        assert!(
            html.contains("rel=\"noopener noreferrer nofollow\""),
            "{html}"
        );
        let html = image(&MediaRef::Url("javascript:alert(1)".into()), None).into_string();
        assert!(!html.contains("href"), "{html}");
    }
}
