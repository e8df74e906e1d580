//! Applying a processor's answer: check every item, build the output by
//! moving the kept messages (never copying them), validate it against the
//! provider rules, and give the input back untouched when anything is wrong.
//!
//! Every pass is linear in the messages and tool calls, and all of them run
//! within the processor's deadline: the host's work on an answer is bounded
//! by the time the processor was given, like the call itself.

use std::collections::HashSet;

use agent_host_core::format::{jsonl, openai};
use agent_host_core::message::derived_id;
use agent_host_core::repair::repair_until;
use agent_host_core::stop::{StopCheck, Stopped};
use agent_host_core::validate::validate_until;
use agent_host_core::{MediaRef, Message, Part, TokenCounter};

use super::bindings::{self, wit};
use super::report::{Outcome, ProcessorReport, Replaced};
use super::{Cause, InvalidPolicy, Limits, Processor};

/// Where an output message came from.
enum Origin {
    Kept(usize),
    New,
}

/// What applying an answer needs to know about the processor that gave it.
pub(crate) struct Rules<'a> {
    /// Its name, for the ids of new messages that have none.
    pub(crate) name: &'a str,
    /// Whether it declared that it reorders.
    pub(crate) reorders: bool,
    pub(crate) limits: &'a Limits,
    pub(crate) on_invalid: InvalidPolicy,
}

impl<'a> Rules<'a> {
    pub(crate) fn of(p: &'a Processor) -> Self {
        Rules {
            name: &p.description.name,
            reorders: p.description.reorders,
            limits: &p.options.limits,
            on_invalid: p.options.on_invalid,
        }
    }
}

/// Applies `items` to `input`. On success returns the new history and fills
/// the report's edits; on failure returns the input exactly as it was.
///
/// `expired` says when the processor's deadline has passed: the answer is
/// then refused with [`Cause::Deadline`], wherever the work on it stands.
pub(crate) fn apply(
    input: Vec<Message>,
    items: Vec<wit::Item>,
    rules: &Rules<'_>,
    counter: &dyn TokenCounter,
    report: &mut ProcessorReport,
    expired: &dyn Fn() -> bool,
) -> Result<Vec<Message>, (Vec<Message>, Cause)> {
    let mut stop = StopCheck::new(expired);
    let deadline = Cause::Deadline(rules.limits.deadline);
    let edits = match check_answer(&input, items, rules, &mut stop) {
        Ok(edits) => edits,
        Err(Refusal::Stopped) => return Err((input, deadline)),
        Err(Refusal::Bad(detail)) => return Err((input, Cause::BadAnswer(detail))),
    };

    let n = input.len();
    let mut slots: Vec<Option<Message>> = input.into_iter().map(Some).collect();
    let mut output = Vec::with_capacity(edits.len());
    let mut origins = Vec::with_capacity(edits.len());
    let mut was_replaced = vec![false; n];
    let mut replaced = Vec::new();
    let mut inserted = Vec::new();
    for edit in edits {
        match edit {
            Edit::Keep(i) => {
                output.push(slots[i].take().unwrap_or_default());
                origins.push(Origin::Kept(i));
            }
            Edit::Replace(i, m, _) => {
                let old = slots[i].as_ref().map_or("", |o| o.id.as_str());
                replaced.push(Replaced {
                    id: old.to_owned(),
                    by: m.id.clone(),
                });
                was_replaced[i] = true;
                output.push(m);
                origins.push(Origin::New);
            }
            Edit::Insert(m) => {
                inserted.push(m.id.clone());
                output.push(m);
                origins.push(Origin::New);
            }
        }
    }

    // What the answer did, before any repair.
    let kept: Vec<String> = output
        .iter()
        .zip(&origins)
        .filter(|(_, o)| matches!(o, Origin::Kept(_)))
        .map(|(m, _)| m.id.clone())
        .collect();
    let violations = match validate_until(&output, &mut stop) {
        Ok(v) => v,
        Err(Stopped) => return Err((restore(slots, output, origins), deadline)),
    };
    let mut outcome = Outcome::Applied;
    let mut repairs = Vec::new();
    if !violations.is_empty() {
        let detail = describe_violations(&violations, &output);
        match rules.on_invalid {
            InvalidPolicy::Reject => {
                return Err((restore(slots, output, origins), Cause::Invalid(detail)));
            }
            InvalidPolicy::Repair => {
                // Repair works on owned messages: keep copies of the kept
                // ones so the input can still be given back.
                let originals: Vec<(usize, Message)> = output
                    .iter()
                    .zip(&origins)
                    .filter_map(|(m, o)| match o {
                        Origin::Kept(i) => Some((*i, m.clone())),
                        Origin::New => None,
                    })
                    .collect();
                let fixed = repair_until(output, &mut stop).and_then(|(fixed, changes)| {
                    let left = validate_until(&fixed, &mut stop)?;
                    Ok((fixed, changes, left))
                });
                match fixed {
                    Ok((fixed, changes, left)) if left.is_empty() => {
                        repairs = changes.iter().map(ToString::to_string).collect();
                        output = fixed;
                        outcome = Outcome::Repaired;
                    }
                    failed => {
                        let cause = match failed {
                            Ok((fixed, _, left)) => {
                                Cause::Invalid(describe_violations(&left, &fixed))
                            }
                            Err(Stopped) => deadline,
                        };
                        for (i, m) in originals {
                            slots[i] = Some(m);
                        }
                        return Err((slots.into_iter().flatten().collect(), cause));
                    }
                }
            }
        }
    }

    // Past the last way back to the input: the messages left in their
    // slots go, and the ids of those not replaced are moved, not copied,
    // into the report.
    report.dropped = slots
        .into_iter()
        .zip(was_replaced)
        .filter(|(_, replaced)| !replaced)
        .filter_map(|(slot, _)| slot.map(|m| m.id))
        .collect();
    report.kept = kept;
    report.replaced = replaced;
    report.inserted = inserted;
    report.repairs = repairs;
    report.outcome = outcome;
    report.tokens_after = agent_host_core::tokens::total(&output, counter);
    Ok(output)
}

/// Why an answer was refused before anything was moved.
enum Refusal {
    /// The deadline passed.
    Stopped,
    /// The answer is unusable, and why.
    Bad(String),
}

impl From<Stopped> for Refusal {
    fn from(_: Stopped) -> Self {
        Refusal::Stopped
    }
}

/// Checks an answer against `input` without touching it: the indices, the
/// size of the new messages as the host stores them, their media sources,
/// their kept provider fields and their ids; gives the new messages, with
/// their ids, in answer order.
fn check_answer(
    input: &[Message],
    items: Vec<wit::Item>,
    rules: &Rules<'_>,
    stop: &mut StopCheck<'_>,
) -> Result<Vec<Edit>, Refusal> {
    let limits = rules.limits;
    if items.len() > limits.max_items {
        return Err(Refusal::Bad(format!(
            "{} items, over the limit of {}",
            items.len(),
            limits.max_items
        )));
    }
    check_indices(&items, input.len(), rules.reorders).map_err(Refusal::Bad)?;

    let over = |k: usize| {
        Refusal::Bad(format!(
            "its new messages take more than the output limit of {} bytes (max_output_bytes) \
             by item {k}; every field counts, ids, tool calls, media sources and metadata \
             included, as the host stores it",
            limits.max_output_bytes
        ))
    };
    let mut edits = Vec::with_capacity(items.len());
    // The new messages' bytes as sent by the guest, then as stored.
    let (mut sent, mut stored) = (0usize, 0usize);
    // Ids the answer brings in: of insertions, and of replacements that do
    // not keep the id of the message they replace.
    let mut new_ids: HashSet<String> = HashSet::new();
    for (k, item) in items.into_iter().enumerate() {
        stop.step()?;
        let (index, m) = match item {
            wit::Item::Keep(i) => {
                edits.push(Edit::Keep(i as usize));
                continue;
            }
            wit::Item::Replace(r) => (Some(r.index as usize), r.message),
            wit::Item::Insert(m) => (None, m),
        };
        stop.steps(m.tool_calls.len() + m.parts.len())?;
        sent = sent.saturating_add(sent_bytes(&m));
        if sent > limits.max_output_bytes {
            return Err(over(k));
        }
        let mut m = bindings::from_wit(m).map_err(|e| Refusal::Bad(format!("item {k}: {e}")))?;
        let own_id = match index {
            Some(i) => {
                let old = &input[i].id;
                if m.id.is_empty() {
                    m.id = old.clone();
                }
                m.id == *old
            }
            None => {
                if m.id.is_empty() {
                    // FNV-1a, as ever: the ids of what a processor adds are
                    // in the digests of its recorded output, which a replay
                    // of an earlier report compares.
                    m.id = derived_id(rules.name, k, &m.text());
                }
                false
            }
        };
        stored = stored.saturating_add(jsonl::encoded_len(&m));
        if stored > limits.max_output_bytes {
            return Err(over(k));
        }
        check_sources(&m).map_err(|e| Refusal::Bad(format!("item {k}: {e}")))?;
        if let Some(key) = openai::host_key_in_extras(&m) {
            return Err(Refusal::Bad(format!(
                "item {k}: its metadata `{}` sets `{key}`, a field the host writes from the \
                 message itself; set the message's own field instead",
                openai::EXTRA_KEY
            )));
        }
        if !own_id && !new_ids.insert(m.id.clone()) {
            return Err(Refusal::Bad(format!(
                "item {k}: two new messages share the id {:?}",
                m.id
            )));
        }
        edits.push(match index {
            Some(i) => Edit::Replace(i, m, own_id),
            None => Edit::Insert(m),
        });
    }
    // A replacement may keep the id of the message it replaces; any other
    // clash between a new id and one the output keeps would make two
    // messages one.
    if !new_ids.is_empty() {
        for edit in &edits {
            stop.step()?;
            let id = match edit {
                Edit::Keep(i) => &input[*i].id,
                Edit::Replace(_, m, true) => &m.id,
                Edit::Replace(_, _, false) | Edit::Insert(_) => continue,
            };
            if new_ids.contains(id) {
                return Err(Refusal::Bad(format!(
                    "a new message reuses the id {id:?} of a message the answer keeps"
                )));
            }
        }
    }
    Ok(edits)
}

/// One checked entry of an answer.
enum Edit {
    Keep(usize),
    /// The index replaced, the message, and whether it keeps the id of the
    /// message it replaces.
    Replace(usize, Message, bool),
    Insert(Message),
}

/// Every index in range, none used twice, and in input order unless the
/// processor declared that it reorders.
fn check_indices(items: &[wit::Item], n: usize, reorders: bool) -> Result<(), String> {
    let mut used = vec![false; n];
    let mut last: Option<usize> = None;
    for (k, item) in items.iter().enumerate() {
        let (i, verb) = match item {
            wit::Item::Keep(i) => (*i as usize, "keeps"),
            wit::Item::Replace(r) => (r.index as usize, "replaces"),
            wit::Item::Insert(_) => continue,
        };
        if i >= n {
            return Err(format!(
                "item {k} {verb} message {i}, but the history has {n} messages"
            ));
        }
        if std::mem::replace(&mut used[i], true) {
            return Err(format!(
                "item {k} {verb} message {i}, which an earlier item already used"
            ));
        }
        if let Some(prev) = last
            && i < prev
            && !reorders
        {
            return Err(format!(
                "item {k} puts message {i} after message {prev}, a reordering the processor \
                 did not declare (its description says reorders: false)"
            ));
        }
        last = Some(i);
    }
    Ok(())
}

/// Puts every kept message back in its slot and returns the input as it was.
fn restore(
    mut slots: Vec<Option<Message>>,
    output: Vec<Message>,
    origins: Vec<Origin>,
) -> Vec<Message> {
    for (m, o) in output.into_iter().zip(origins) {
        if let Origin::Kept(i) = o {
            slots[i] = Some(m);
        }
    }
    slots.into_iter().flatten().collect()
}

fn describe_violations(v: &[agent_host_core::validate::Violation], output: &[Message]) -> String {
    let first = &v[0];
    let id = output.get(first.index()).map_or("", |m| m.id.as_str());
    let more = if v.len() > 1 {
        format!(" (and {} more)", v.len() - 1)
    } else {
        String::new()
    };
    format!(
        "{first} (message {id:?} at output position {}){more}",
        first.index()
    )
}

/// The bytes of every string of a new message as the guest sent it: a
/// cheap bound checked before the message is converted.
fn sent_bytes(m: &wit::Message) -> usize {
    let opt = |s: &Option<String>| s.as_ref().map_or(0, String::len);
    m.id.len()
        + m.content.len()
        + opt(&m.metadata)
        + m.reasoning
            .as_ref()
            .map_or(0, |r| r.text.len() + opt(&r.signature))
        + m.tool_calls
            .iter()
            .map(|c| c.id.len() + c.name.len() + c.arguments.len())
            .sum::<usize>()
        + opt(&m.tool_call_id)
        + opt(&m.tool_name)
        + opt(&m.model)
        + opt(&m.agent)
        + opt(&m.channel)
        + m.parts
            .iter()
            .map(|p| match p {
                wit::Part::Text(t) => t.len(),
                wit::Part::Image(i) => {
                    let source = match &i.source {
                        wit::MediaSource::Url(s) | wit::MediaSource::Path(s) => s.len(),
                    };
                    source + opt(&i.mime_type)
                }
                wit::Part::File(f) => f.name.len() + f.path.len() + opt(&f.mime_type),
            })
            .sum::<usize>()
}

/// Refuses media a processor may not point at: anything but an `http`,
/// `https` or `data:` URL, or a relative path inside the session's media
/// folder. An absolute path, a `..` step, a `file:` URL or a drive letter
/// would name a file of the host.
fn check_sources(m: &Message) -> Result<(), String> {
    for (i, part) in m.parts.iter().enumerate() {
        let (what, source, url_only) = match part {
            Part::Text { .. } => continue,
            Part::Image {
                source: MediaRef::Url(url),
                ..
            } => ("image URL", url, true),
            Part::Image {
                source: MediaRef::Path(path),
                ..
            } => ("image path", path, false),
            Part::File { path, .. } => ("file source", path, false),
        };
        check_source(source, url_only)
            .map_err(|why| format!("part {i}: the {what} {:?} {why}", clip(source)))?;
    }
    Ok(())
}

/// The rule of [`check_sources`] for one source; `url_only` when it must be
/// a URL.
fn check_source(source: &str, url_only: bool) -> Result<(), &'static str> {
    if let Some(scheme) = url_scheme(source) {
        return match scheme.to_ascii_lowercase().as_str() {
            "http" | "https" | "data" => Ok(()),
            _ if scheme.len() == 1 => Err("is an absolute path (a drive letter)"),
            "file" => Err("is a file: URL, which names a file of the host"),
            _ => Err("is not an http, https or data: URL"),
        };
    }
    if url_only {
        return Err("is not an http, https or data: URL");
    }
    if source.is_empty() {
        return Err("is empty");
    }
    if source.contains('\0') {
        return Err("holds a NUL byte");
    }
    if source.starts_with(['/', '\\', '~']) {
        return Err("is an absolute path; media paths are relative to the session's media folder");
    }
    if source.split(['/', '\\']).any(|step| step == "..") {
        return Err("steps out of the session's media folder with `..`");
    }
    Ok(())
}

/// The scheme of a URL (`https` of `https://...`), if `s` starts with one.
fn url_scheme(s: &str) -> Option<&str> {
    let (scheme, _) = s.split_once(':')?;
    let mut chars = scheme.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
    .then_some(scheme)
}

/// At most the first 80 characters of `s`, for an error message.
fn clip(s: &str) -> String {
    match s.char_indices().nth(80) {
        Some((end, _)) => format!("{}...", &s[..end]),
        None => s.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::time::Duration;

    use agent_host_core::HeuristicCounter;
    use agent_host_core::validate::validate;

    use super::*;
    use crate::CacheOutcome;

    use crate::bindings::plain_message as wit_message;

    fn replace(index: u32, message: wit::Message) -> wit::Item {
        wit::Item::Replace(wit::Replacement { index, message })
    }

    fn report() -> ProcessorReport {
        ProcessorReport {
            outcome: Outcome::Failed,
            ..ProcessorReport::of(
                "p".into(),
                "1".into(),
                "00".into(),
                "p.wasm".into(),
                CacheOutcome::CompiledUncached,
            )
        }
    }

    fn input() -> Vec<Message> {
        vec![
            Message::user("one").with_id("u1"),
            Message::assistant("two").with_id("a1"),
            Message::user("three").with_id("u2"),
        ]
    }

    /// Applies `items` to `input` under `limits` and `policy`, with the
    /// deadline told by `expired`.
    fn apply_with(
        input: Vec<Message>,
        items: Vec<wit::Item>,
        limits: &Limits,
        policy: InvalidPolicy,
        expired: &dyn Fn() -> bool,
    ) -> Result<Vec<Message>, (Vec<Message>, Cause)> {
        let rules = Rules {
            name: "p",
            reorders: false,
            limits,
            on_invalid: policy,
        };
        let counter = HeuristicCounter::default();
        apply(input, items, &rules, &counter, &mut report(), expired)
    }

    /// Applies `items` to [`input`] under the default limits.
    fn apply_to_input(items: Vec<wit::Item>) -> Result<Vec<Message>, (Vec<Message>, Cause)> {
        let limits = Limits::default();
        apply_with(input(), items, &limits, InvalidPolicy::Reject, &|| false)
    }

    /// Applies `items` to [`input`], expecting a refusal that gives the
    /// input back; returns its detail.
    fn refused(items: Vec<wit::Item>) -> String {
        let (back, cause) = apply_to_input(items).expect_err("the answer is refused");
        assert_eq!(back, input(), "the input stands");
        match cause {
            Cause::BadAnswer(detail) => detail,
            other => panic!("not a bad answer: {other}"),
        }
    }

    /// `n` calls in one assistant message, answered newest first: the
    /// shape of the hostile answers of the hardening report.
    fn parallel_answer(n: u32) -> (Vec<Message>, Vec<wit::Item>) {
        let input = vec![Message::user("go").with_id("u")];
        let mut call = wit_message(wit::Role::Assistant, "a", "");
        call.tool_calls = (0..n)
            .map(|i| wit::ToolCall {
                id: format!("call_{i}"),
                name: "read".into(),
                arguments: "{}".into(),
            })
            .collect();
        let mut items = vec![wit::Item::Keep(0), wit::Item::Insert(call)];
        items.extend((0..n).rev().map(|i| {
            let mut result = wit_message(wit::Role::Tool, &format!("r{i}"), "ok");
            result.tool_call_id = Some(format!("call_{i}"));
            wit::Item::Insert(result)
        }));
        (input, items)
    }

    /// Regression (hardening item 5): pairing an answer's calls was
    /// quadratic (a valid answer of 60,000 calls took 34-61 s). Such an
    /// answer is applied and validated: linear, in a fraction of a second
    /// (see the `pairing` benchmark of agent-host-core for the scaling).
    #[test]
    fn an_answer_with_60_000_calls_is_applied() {
        let (input, items) = parallel_answer(60_000);
        let limits = Limits::default();
        let out = apply_with(input, items, &limits, InvalidPolicy::Reject, &|| false)
            .unwrap_or_else(|(_, cause)| panic!("{cause}"));
        assert_eq!(out.len(), 60_002);
        assert!(validate(&out).is_empty());
    }

    /// Regression (hardening item 5): the host's work on an answer ran
    /// unbounded after the guest's call (79-105 s of host CPU after a
    /// 187 ms call). It runs within the processor's deadline: once the
    /// deadline has passed, the answer is refused with the deadline, at
    /// whatever stage the work is, and the input stands.
    #[test]
    fn the_deadline_bounds_the_hosts_work_on_an_answer() {
        let limits = Limits {
            deadline: Duration::from_millis(250),
            ..Limits::default()
        };
        for policy in [InvalidPolicy::Reject, InvalidPolicy::Repair] {
            let answer = || {
                let (input, mut items) = parallel_answer(10_000);
                if policy == InvalidPolicy::Repair {
                    // An orphan to repair: the answer needs repair's passes.
                    let mut orphan = wit_message(wit::Role::Tool, "ghost", "?");
                    orphan.tool_call_id = Some("nowhere".into());
                    items.push(wit::Item::Insert(orphan));
                }
                (input, items)
            };
            // How often the whole work asks whether the deadline has passed.
            let asked = Cell::new(0);
            let count = || {
                asked.set(asked.get() + 1);
                false
            };
            let (input, items) = answer();
            assert!(apply_with(input, items, &limits, policy, &count).is_ok());
            let total = asked.get();
            assert!(total > 10, "{total}");
            // The deadline passes after `ok` questions, at every stage.
            for ok in [0, total / 4, total / 2, total * 3 / 4, total - 1] {
                asked.set(0);
                let expired = || {
                    asked.set(asked.get() + 1);
                    asked.get() > ok
                };
                let (input, items) = answer();
                let result = apply_with(input.clone(), items, &limits, policy, &expired);
                let (back, cause) = result.expect_err("the deadline has passed");
                assert_eq!(back, input, "the input stands");
                assert_eq!(cause, Cause::Deadline(limits.deadline));
            }
        }
    }

    /// Regression (hardening item 9): the output limit counted text only,
    /// so ids, tool-call ids, tool names, media sources and characters that
    /// JSON escapes passed it (outputs of 40-119 MiB passed a 32 MiB limit).
    /// Every byte of a new message as the host stores it counts.
    #[test]
    fn every_field_of_a_new_message_counts_against_the_output_limit() {
        let limits = Limits {
            max_output_bytes: 1 << 20,
            ..Limits::default()
        };
        let big = "x".repeat(1 << 20);
        let mut id = wit_message(wit::Role::User, &big, "");
        id.content = "small".into();
        let mut call = wit_message(wit::Role::Assistant, "a", "");
        call.tool_calls.push(wit::ToolCall {
            id: big.clone(),
            name: "t".into(),
            arguments: "{}".into(),
        });
        let mut name = wit_message(wit::Role::Assistant, "a", "");
        name.tool_calls.push(wit::ToolCall {
            id: "c".into(),
            name: big.clone(),
            arguments: "{}".into(),
        });
        let mut image = wit_message(wit::Role::User, "i", "");
        image.parts.push(wit::Part::Image(wit::Image {
            source: wit::MediaSource::Url(format!("data:image/png;base64,{big}")),
            mime_type: None,
        }));
        let mut file = wit_message(wit::Role::User, "f", "");
        file.parts.push(wit::Part::File(wit::FileRef {
            name: "f".into(),
            path: format!("media/{big}"),
            mime_type: None,
        }));
        let mut result = wit_message(wit::Role::Tool, "r", "");
        result.tool_call_id = Some(big.clone());
        let mut metadata = wit_message(wit::Role::User, "m", "");
        metadata.metadata = Some(format!("{{\"k\": \"{big}\"}}"));
        // 200,000 control characters are 200 KB sent and 1.2 MB stored.
        let escaped = wit_message(wit::Role::User, "e", &"\u{1}".repeat(200_000));
        // Under the limit alone, over it together.
        let half = || wit_message(wit::Role::User, "", &"y".repeat(600 << 10));
        let cases = [
            ("id", vec![wit::Item::Insert(id)]),
            ("tool-call id", vec![wit::Item::Insert(call)]),
            ("tool name", vec![wit::Item::Insert(name)]),
            ("image URL", vec![wit::Item::Insert(image)]),
            ("file path", vec![wit::Item::Insert(file)]),
            ("result's call id", vec![replace(2, result)]),
            ("metadata", vec![wit::Item::Insert(metadata)]),
            ("escaped text", vec![wit::Item::Insert(escaped)]),
            (
                "two messages",
                vec![wit::Item::Insert(half()), wit::Item::Insert(half())],
            ),
        ];
        for (what, items) in cases {
            let result = apply_with(input(), items, &limits, InvalidPolicy::Reject, &|| false);
            let (back, cause) = result.expect_err(what);
            assert_eq!(back, input(), "{what}: the input stands");
            let detail = cause.to_string();
            assert!(
                detail.contains("output limit of 1048576 bytes (max_output_bytes)"),
                "{what}: {detail}"
            );
        }
        // Just under the limit is fine.
        let fits = wit::Item::Insert(wit_message(wit::Role::User, "ok", &"z".repeat(1 << 19)));
        let out = apply_with(input(), vec![fits], &limits, InvalidPolicy::Reject, &|| {
            false
        });
        assert_eq!(out.map(|o| o.len()).map_err(|(_, c)| c), Ok(1));
    }

    /// Regression (hardening item 9): kept OpenAI fields in a processor's
    /// metadata reached the provider as `tool_calls` or a `tool_call_id`
    /// that the host never validated.
    #[test]
    fn metadata_that_would_set_the_hosts_provider_fields_is_refused() {
        for (role, extras) in [
            (wit::Role::User, r#"{"tool_calls": [{"id": "x"}]}"#),
            (wit::Role::User, r#"{"tool_call_id": "x"}"#),
            (wit::Role::Assistant, r#"{"reasoning_content": "x"}"#),
            (wit::Role::User, r#"{"role": "tool"}"#),
            (wit::Role::Tool, r#"{"name": "rm"}"#),
        ] {
            let mut m = wit_message(role, "", "hi");
            if role == wit::Role::Tool {
                m.tool_call_id = Some("c".into());
            }
            m.metadata = Some(format!(r#"{{"openai": {extras}}}"#));
            let detail = refused(vec![replace(0, m)]);
            assert!(
                detail.contains("its metadata `openai` sets"),
                "{extras}: {detail}"
            );
        }
        // A participant's name and the developer role are the format's own.
        let mut named = wit_message(wit::Role::User, "", "hi");
        named.metadata = Some(r#"{"openai": {"name": "ann"}}"#.into());
        let mut developer = wit_message(wit::Role::System, "", "be brief");
        developer.metadata = Some(r#"{"openai": {"role": "developer"}}"#.into());
        let items = vec![replace(0, named), wit::Item::Keep(1), replace(2, developer)];
        assert!(apply_to_input(items).is_ok());
    }

    /// Regression (hardening item 9): two replacements, or an insertion and
    /// a replacement, could give two messages one id.
    #[test]
    fn new_messages_never_share_an_id() {
        let m = |id: &str| wit_message(wit::Role::User, id, "x");
        let detail = refused(vec![replace(0, m("same")), replace(2, m("same"))]);
        assert!(
            detail.contains("two new messages share the id \"same\""),
            "{detail}"
        );
        let detail = refused(vec![wit::Item::Insert(m("same")), replace(2, m("same"))]);
        assert!(detail.contains("share the id \"same\""), "{detail}");
        let detail = refused(vec![replace(0, m("same")), wit::Item::Insert(m("same"))]);
        assert!(detail.contains("share the id \"same\""), "{detail}");
        // A new id that a kept message, or a replacement keeping its own id,
        // already has.
        let detail = refused(vec![wit::Item::Keep(0), replace(2, m("u1"))]);
        assert!(detail.contains("reuses the id \"u1\""), "{detail}");
        let detail = refused(vec![replace(0, m("u1")), wit::Item::Insert(m("u1"))]);
        assert!(detail.contains("reuses the id \"u1\""), "{detail}");
        // Replacements keep their ids, given or left empty; a dropped
        // message's id is free.
        let out = apply_to_input(vec![
            replace(0, m("u1")),
            replace(1, m("")),
            wit::Item::Insert(m("u2")),
        ])
        .unwrap_or_else(|(_, c)| panic!("{c}"));
        let ids: Vec<&str> = out.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(ids, ["u1", "a1", "u2"]);
    }

    /// Regression (hardening item 9): an image whose source was a host path
    /// (`/etc/shadow`) was accepted, and the run then failed writing it.
    /// Media of a processor's messages is an http(s) or data: URL, or a
    /// path inside the session's media folder.
    #[test]
    fn media_that_names_a_host_file_is_refused() {
        let image = |source: wit::MediaSource| {
            let mut m = wit_message(wit::Role::User, "", "look");
            m.parts.push(wit::Part::Image(wit::Image {
                source,
                mime_type: None,
            }));
            m
        };
        let file = |path: &str| {
            let mut m = wit_message(wit::Role::User, "", "read");
            m.parts.push(wit::Part::File(wit::FileRef {
                name: "f".into(),
                path: path.into(),
                mime_type: None,
            }));
            m
        };
        use wit::MediaSource::{Path, Url};
        let refused_cases = [
            image(Path("/etc/shadow".into())),
            image(Path("media/../../etc/shadow".into())),
            image(Path("~/.ssh/id_ed25519".into())),
            image(Path("C:\\Windows\\win.ini".into())),
            image(Path("file:///etc/shadow".into())),
            image(Url("file:///etc/shadow".into())),
            image(Url("/etc/shadow".into())),
            image(Url("ftp://example.com/a.png".into())),
            file("/etc/passwd"),
            file("..\\secrets.txt"),
            file("FILE:/etc/passwd"),
        ];
        for m in refused_cases {
            let detail = refused(vec![replace(0, m)]);
            assert!(detail.starts_with("item 0: part 0: the "), "{detail}");
        }
        for m in [
            image(Path("media/shot.png".into())),
            image(Url("https://example.com/a.png".into())),
            image(Url("data:image/png;base64,iVBORw0KGgo=".into())),
            file("media/report.pdf"),
            file("file-abc123"),
            file("data:application/pdf;base64,JVBERi0="),
        ] {
            assert!(apply_to_input(vec![replace(0, m)]).is_ok());
        }
    }
}
