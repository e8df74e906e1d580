//! Emergency truncation: the last resort when a view still does not fit.
//!
//! In order, stopping as soon as the history fits: images are replaced by a
//! short text description; tool results over
//! [`TruncateConfig::max_tool_result_chars`] are cut (head and tail kept, with
//! a notice); then the oldest unprotected messages are dropped one exchange at
//! a time. Protected: system messages, summary messages, and the last
//! `protected_recent` messages.

use crate::message::{MediaRef, Message, Part, Role};
use crate::tokens::TokenCounter;

/// Limits of emergency truncation.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TruncateConfig {
    /// Tool results longer than this many characters are cut (default 2,000).
    pub max_tool_result_chars: usize,
}

impl Default for TruncateConfig {
    fn default() -> Self {
        TruncateConfig {
            max_tool_result_chars: 2_000,
        }
    }
}

/// One change made by [`truncate`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Truncation {
    /// Images of a message were replaced by text.
    StrippedImages {
        /// The message.
        id: String,
        /// How many images.
        count: usize,
    },
    /// A tool result was cut.
    CutToolResult {
        /// The message.
        id: String,
        /// Characters before.
        chars_before: usize,
        /// Characters after.
        chars_after: usize,
    },
    /// Messages were dropped from the view (an exchange at a time).
    Dropped {
        /// The dropped messages.
        ids: Vec<String>,
    },
}

/// Truncates `messages` until they take at most `budget` tokens, or nothing
/// unprotected is left; returns what it did.
pub fn truncate(
    messages: &mut Vec<Message>,
    budget: u32,
    protected_recent: usize,
    config: &TruncateConfig,
    counter: &dyn TokenCounter,
) -> Vec<Truncation> {
    let total = |ms: &[Message]| ms.iter().map(|m| u64::from(m.tokens(counter))).sum::<u64>();
    let budget = u64::from(budget);
    let mut changes = Vec::new();
    if total(messages) <= budget {
        return changes;
    }
    for m in messages.iter_mut() {
        let count = strip_images(m);
        if count > 0 {
            changes.push(Truncation::StrippedImages {
                id: m.id.clone(),
                count,
            });
        }
    }
    if total(messages) <= budget {
        return changes;
    }
    let max = config.max_tool_result_chars;
    for m in messages.iter_mut().filter(|m| m.role == Role::Tool) {
        let text = m.text();
        let chars = text.chars().count();
        if chars > max {
            let cut = cut_middle(&text, chars, max);
            m.set_text(cut);
            changes.push(Truncation::CutToolResult {
                id: m.id.clone(),
                chars_before: chars,
                chars_after: m.content.chars().count(),
            });
        }
    }
    // Choose the oldest unprotected exchanges to drop, then drop them in one
    // pass (the protected tail is the same messages however many go).
    let mut tokens = total(messages);
    let protected_from = messages.len().saturating_sub(protected_recent);
    let mut drop = vec![false; messages.len()];
    let mut next = 0;
    while tokens > budget {
        let Some(start) = (next..protected_from)
            .find(|&i| messages[i].role != Role::System && !messages[i].summary)
        else {
            break;
        };
        let mut end = start + 1;
        while end < messages.len() && messages[end].role == Role::Tool {
            end += 1;
        }
        if end > protected_from {
            break;
        }
        let unit = &messages[start..end];
        tokens -= unit
            .iter()
            .map(|m| u64::from(m.tokens(counter)))
            .sum::<u64>();
        changes.push(Truncation::Dropped {
            ids: unit.iter().map(|m| m.id.clone()).collect(),
        });
        drop[start..end].fill(true);
        next = end;
    }
    let mut index = 0;
    messages.retain(|_| {
        index += 1;
        !drop[index - 1]
    });
    changes
}

/// Replaces image parts with a text description; returns how many.
fn strip_images(m: &mut Message) -> usize {
    let mut count = 0;
    for part in &mut m.parts {
        if let Part::Image { source, mime_type } = part {
            let what = mime_type.as_deref().unwrap_or("image");
            let text = match source {
                MediaRef::Url(url) if !url.starts_with("data:") => {
                    format!("[{what} omitted to save context: {url}]")
                }
                MediaRef::Path(path) => format!("[{what} omitted to save context: {path}]"),
                MediaRef::Url(_) => format!("[{what} omitted to save context]"),
            };
            *part = Part::Text { text };
            count += 1;
        }
    }
    if count > 0 {
        m.invalidate_tokens();
    }
    count
}

/// Keeps about `max` characters of `text`: three quarters from the head, the
/// rest from the tail, with a notice between.
fn cut_middle(text: &str, chars: usize, max: usize) -> String {
    let head = max * 3 / 4;
    let tail = max - head;
    let head_end = text.char_indices().nth(head).map_or(text.len(), |(i, _)| i);
    let tail_start = text
        .char_indices()
        .nth(chars - tail)
        .map_or(text.len(), |(i, _)| i);
    format!(
        "{}\n[... {} of {chars} characters cut by agent-host: the context was full ...]\n{}",
        &text[..head_end],
        chars - head - tail,
        &text[tail_start..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens::HeuristicCounter;

    fn tokens(ms: &[Message]) -> u64 {
        let c = HeuristicCounter::default();
        ms.iter().map(|m| u64::from(m.tokens(&c))).sum()
    }

    #[test]
    fn a_history_that_fits_is_untouched() {
        let mut h = vec![Message::user("hi")];
        let before = h.clone();
        assert!(
            truncate(
                &mut h,
                100,
                1,
                &TruncateConfig::default(),
                &HeuristicCounter::default()
            )
            .is_empty()
        );
        assert_eq!(h, before);
    }

    #[test]
    fn images_go_first() {
        let mut m = Message::user("look").with_id("u");
        m.parts.push(Part::Image {
            source: MediaRef::Url("https://example.com/cat.png".into()),
            mime_type: Some("image/png".into()),
        });
        let mut h = vec![m];
        let changes = truncate(
            &mut h,
            100,
            1,
            &TruncateConfig::default(),
            &HeuristicCounter::default(),
        );
        assert_eq!(
            changes,
            [Truncation::StrippedImages {
                id: "u".into(),
                count: 1
            }]
        );
        assert_eq!(
            h[0].text(),
            "look\n\n[image/png omitted to save context: https://example.com/cat.png]"
        );
    }

    #[test]
    fn long_results_are_cut_then_oldest_exchanges_dropped() {
        let counter = HeuristicCounter::default();
        let mut h = vec![Message::system("rules").with_id("s")];
        for i in 0..5 {
            h.push(Message::user(format!("q{i}")).with_id(format!("u{i}")));
            let mut call = Message::assistant("").with_id(format!("a{i}"));
            call.push_tool_call(format!("c{i}"), "t", "{}");
            h.push(call);
            h.push(
                Message::tool_result(format!("c{i}"), "t", "y".repeat(10_000))
                    .with_id(format!("r{i}")),
            );
        }
        let changes = truncate(&mut h, 1_200, 3, &TruncateConfig::default(), &counter);
        assert!(matches!(
            &changes[0],
            Truncation::CutToolResult {
                chars_before: 10_000,
                ..
            }
        ));
        assert!(h.iter().all(|m| m.content.chars().count() < 2_100));
        let dropped: Vec<&Truncation> = changes
            .iter()
            .filter(|c| matches!(c, Truncation::Dropped { .. }))
            .collect();
        assert_eq!(
            dropped[0],
            &Truncation::Dropped {
                ids: vec!["u0".into()]
            }
        );
        assert_eq!(
            dropped[1],
            &Truncation::Dropped {
                ids: vec!["a0".into(), "r0".into()]
            }
        );
        assert!(tokens(&h) <= 1_200);
        assert_eq!(h[0].id, "s");
        assert!(crate::validate::validate(&h).is_empty());
    }

    #[test]
    fn protected_messages_are_never_dropped() {
        let counter = HeuristicCounter::default();
        let mut h: Vec<Message> = (0..4)
            .map(|i| Message::user("z".repeat(400)).with_id(format!("m{i}")))
            .collect();
        truncate(&mut h, 10, 2, &TruncateConfig::default(), &counter);
        assert_eq!(
            h.iter().map(|m| m.id.as_str()).collect::<Vec<_>>(),
            ["m2", "m3"]
        );
    }
}
