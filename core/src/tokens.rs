//! Token estimation.
//!
//! Budgets are computed before a request is made, so they rest on an estimate
//! rather than the provider's tokenizer. [`TokenCounter`] is the seam for a real
//! tokenizer; [`HeuristicCounter`] is the default: `chars / 4` for Latin text
//! and `runes / 3` for CJK, counted run by run, plus a fixed overhead per
//! message. It is linear in the input and allocation-free, so hostile text (a
//! 5 MB run of one character) costs one pass.
//!
//! Counts are cached per message by [`Message::tokens`].

use crate::message::{Message, Part};

/// Estimates how many tokens text and messages take in a model's context.
///
/// ```
/// use agent_host_core::{HeuristicCounter, Message, TokenCounter};
///
/// let counter = HeuristicCounter::default();
/// assert_eq!(counter.count_text("abcdefgh"), 2); // 8 Latin chars / 4
/// assert_eq!(counter.count_text("日本語"), 1); // 3 CJK runes / 3
/// let m = Message::user("abcdefgh");
/// assert_eq!(counter.count_message(&m), 2 + counter.message_overhead());
/// ```
pub trait TokenCounter: Send + Sync {
    /// The estimated tokens of a piece of text.
    fn count_text(&self, text: &str) -> u32;

    /// A value that differs between counters that may count differently; it
    /// keys the per-message cache so that one counter never reads another's
    /// counts.
    fn cache_key(&self) -> u64;

    /// Fixed tokens every message costs (role markers, separators).
    fn message_overhead(&self) -> u32 {
        4
    }

    /// Fixed tokens an image costs.
    fn image_tokens(&self) -> u32 {
        1_000
    }

    /// The estimated tokens of a whole message: its overhead, text, parts,
    /// reasoning, and tool calls with their names and arguments.
    fn count_message(&self, message: &Message) -> u32 {
        let mut total = u64::from(self.message_overhead());
        let mut add = |n: u32| total += u64::from(n);
        add(self.count_text(&message.content));
        for part in &message.parts {
            match part {
                Part::Text { text } => add(self.count_text(text)),
                Part::Image { .. } => add(self.image_tokens()),
                Part::File { name, path, .. } => {
                    add(self.count_text(name));
                    add(self.count_text(path));
                }
            }
        }
        if let Some(reasoning) = &message.reasoning {
            add(self.count_text(&reasoning.text));
        }
        for call in &message.tool_calls {
            add(TOOL_CALL_OVERHEAD);
            add(self.count_text(&call.name));
            add(self.count_text(&call.arguments));
        }
        if let Some(name) = &message.tool_name {
            add(self.count_text(name));
        }
        saturate(total)
    }
}

/// Tokens each tool call costs beyond its name and arguments (id, framing).
const TOOL_CALL_OVERHEAD: u32 = 3;

/// The default estimator: `chars / 4` for Latin text, `runes / 3` for CJK,
/// each run rounded up, plus a fixed overhead per message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeuristicCounter {
    /// Characters per token in non-CJK text (default 4).
    pub latin_chars_per_token: u32,
    /// Characters per token in CJK text (default 3).
    pub cjk_chars_per_token: u32,
    /// Tokens every message costs (default 4).
    pub message_overhead: u32,
    /// Tokens an image costs (default 1,000).
    pub image_tokens: u32,
}

impl Default for HeuristicCounter {
    fn default() -> Self {
        HeuristicCounter {
            latin_chars_per_token: 4,
            cjk_chars_per_token: 3,
            message_overhead: 4,
            image_tokens: 1_000,
        }
    }
}

impl TokenCounter for HeuristicCounter {
    fn count_text(&self, text: &str) -> u32 {
        let latin_div = u64::from(self.latin_chars_per_token.max(1));
        let cjk_div = u64::from(self.cjk_chars_per_token.max(1));
        // Most text is ASCII: one run of Latin characters.
        if text.is_ascii() {
            return saturate((text.len() as u64).div_ceil(latin_div));
        }
        let (mut total, mut latin, mut cjk) = (0u64, 0u64, 0u64);
        let mut rest = text;
        while !rest.is_empty() {
            // A run of ASCII counts as that many Latin characters, undecoded.
            let ascii = rest.bytes().take_while(u8::is_ascii).count();
            if ascii > 0 {
                if cjk > 0 {
                    total += cjk.div_ceil(cjk_div);
                    cjk = 0;
                }
                latin += ascii as u64;
                rest = &rest[ascii..];
                continue;
            }
            let Some(c) = rest.chars().next() else {
                break;
            };
            rest = &rest[c.len_utf8()..];
            if is_cjk(c) {
                if latin > 0 {
                    total += latin.div_ceil(latin_div);
                    latin = 0;
                }
                cjk += 1;
            } else {
                if cjk > 0 {
                    total += cjk.div_ceil(cjk_div);
                    cjk = 0;
                }
                latin += 1;
            }
        }
        total += latin.div_ceil(latin_div) + cjk.div_ceil(cjk_div);
        saturate(total)
    }

    fn cache_key(&self) -> u64 {
        // Asked once per counted message, so it must be cheap: the default
        // settings have a fixed key, others a multiply-xor mix of the fields.
        const DEFAULT_KEY: u64 = 0x4845_5552_4953_5449;
        if *self == HeuristicCounter::default() {
            return DEFAULT_KEY;
        }
        [
            self.latin_chars_per_token,
            self.cjk_chars_per_token,
            self.message_overhead,
            self.image_tokens,
        ]
        .into_iter()
        .fold(DEFAULT_KEY, |key, field| {
            (key ^ u64::from(field))
                .wrapping_mul(0x9E37_79B9_7F4A_7C15)
                .rotate_left(29)
        })
    }

    fn message_overhead(&self) -> u32 {
        self.message_overhead
    }

    fn image_tokens(&self) -> u32 {
        self.image_tokens
    }
}

/// The tokens of `messages`, summed (each message's count cached in it).
///
/// ```
/// use agent_host_core::{HeuristicCounter, Message, tokens};
///
/// let counter = HeuristicCounter::default();
/// let messages = [Message::user("hello"), Message::assistant("hi there")];
/// let each: u64 = messages.iter().map(|m| u64::from(m.tokens(&counter))).sum();
/// assert_eq!(tokens::total(&messages, &counter), each);
/// ```
pub fn total(messages: &[Message], counter: &dyn TokenCounter) -> u64 {
    messages.iter().map(|m| u64::from(m.tokens(counter))).sum()
}

/// Whether a character belongs to a CJK script (ideographs, kana, hangul, and
/// the CJK punctuation and full-width forms that go with them).
fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x1100..=0x11FF     // Hangul Jamo
        | 0x2E80..=0x2FDF   // CJK radicals, Kangxi radicals
        | 0x3000..=0x303F   // CJK symbols and punctuation
        | 0x3040..=0x30FF   // Hiragana, Katakana
        | 0x3100..=0x31FF   // Bopomofo, Hangul compatibility Jamo, Kanbun, Katakana ext.
        | 0x3200..=0x4DBF   // enclosed CJK, compatibility, extension A
        | 0x4E00..=0x9FFF   // CJK unified ideographs
        | 0xA960..=0xA97F   // Hangul Jamo extended A
        | 0xAC00..=0xD7FF   // Hangul syllables, Jamo extended B
        | 0xF900..=0xFAFF   // CJK compatibility ideographs
        | 0xFE30..=0xFE4F   // CJK compatibility forms
        | 0xFF00..=0xFFEF   // half-width and full-width forms
        | 0x20000..=0x3FFFF // extensions B and later
    )
}

fn saturate(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(text: &str) -> u32 {
        HeuristicCounter::default().count_text(text)
    }

    #[test]
    fn latin_is_four_chars_per_token_rounded_up() {
        assert_eq!(count(""), 0);
        assert_eq!(count("a"), 1);
        assert_eq!(count("abcd"), 1);
        assert_eq!(count("abcde"), 2);
        // Accented Latin counts characters, not bytes.
        assert_eq!(count("éééé"), 1);
    }

    #[test]
    fn cjk_is_three_runes_per_token() {
        assert_eq!(count("日本語"), 1);
        assert_eq!(count("日本語の"), 2);
        assert_eq!(count("한국어"), 1);
    }

    #[test]
    fn mixed_text_is_counted_run_by_run() {
        // "hello " (6 -> 2) + "世界" (2 -> 1) + " ok" (3 -> 1)
        assert_eq!(count("hello 世界 ok"), 4);
    }

    #[test]
    fn message_counts_tool_call_arguments_and_overhead() {
        let counter = HeuristicCounter::default();
        let mut m = Message::assistant("");
        let bare = counter.count_message(&m);
        assert_eq!(bare, 4);
        m.push_tool_call("c1", "read", "x".repeat(400));
        // overhead 3 + name 1 + arguments 100
        assert_eq!(counter.count_message(&m), bare + 3 + 1 + 100);
    }

    #[test]
    fn different_settings_have_different_cache_keys() {
        // Regression (review): fields used to share bits, so
        // {overhead 4, image 1000} and {overhead 0, image 66536} collided.
        let a = HeuristicCounter::default();
        let b = HeuristicCounter {
            message_overhead: 0,
            image_tokens: 66_536,
            ..a
        };
        let c = HeuristicCounter {
            message_overhead: 5,
            ..a
        };
        assert_ne!(a.cache_key(), b.cache_key());
        assert_ne!(a.cache_key(), c.cache_key());
        assert_ne!(b.cache_key(), c.cache_key());
    }

    /// The count decoding every character, as the counter did before ASCII
    /// runs were skipped.
    fn count_char_by_char(text: &str) -> u32 {
        let (mut total, mut latin, mut cjk) = (0u64, 0u64, 0u64);
        for c in text.chars() {
            if is_cjk(c) {
                total += latin.div_ceil(4);
                latin = 0;
                cjk += 1;
            } else {
                total += cjk.div_ceil(3);
                cjk = 0;
                latin += 1;
            }
        }
        saturate(total + latin.div_ceil(4) + cjk.div_ceil(3))
    }

    proptest::proptest! {
        // Skipping ASCII runs counts exactly what decoding every character did.
        #[test]
        fn ascii_runs_count_as_decoded(text in "[a-z \n{}é語日한ー\u{3000}]{0,60}") {
            proptest::prop_assert_eq!(count(&text), count_char_by_char(&text));
        }
    }

    #[test]
    fn hostile_text_is_linear_and_saturates() {
        let five_mb = "a".repeat(5 * 1024 * 1024);
        assert_eq!(count(&five_mb), 5 * 1024 * 1024 / 4);
        let cjk = "語".repeat(1_000_000);
        assert_eq!(count(&cjk), 333_334);
        let tiny = HeuristicCounter {
            latin_chars_per_token: 0, // treated as 1, never a division by zero
            ..HeuristicCounter::default()
        };
        assert_eq!(tiny.count_text("abc"), 3);
    }
}
