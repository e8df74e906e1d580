//! Turning text into index terms: lowercase words, stop words dropped, the
//! Snowball English (Porter2) stemmer so that `paints`, `painted` and
//! `painting` meet, and `adopted` and `adoption` too.
//!
//! Documents and queries go through the same function, so the stemmer needs
//! to be consistent rather than linguistically exact.

use rust_stemmers::{Algorithm, Stemmer};

/// Words too common to tell facts apart (and the question words queries
/// start with), sorted.
pub const STOP_WORDS: &[&str] = &[
    "a", "about", "after", "again", "all", "also", "am", "an", "and", "any", "are", "as", "at",
    "be", "been", "before", "being", "but", "by", "can", "could", "d", "did", "do", "does",
    "doing", "for", "from", "had", "has", "have", "having", "he", "her", "here", "hers", "hey",
    "hi", "him", "his", "how", "i", "if", "in", "into", "is", "it", "its", "just", "ll", "m", "me",
    "might", "more", "most", "my", "of", "oh", "on", "or", "our", "ours", "re", "really", "s",
    "she", "should", "so", "some", "such", "t", "than", "thank", "thanks", "that", "the", "their",
    "them", "then", "there", "these", "they", "this", "those", "to", "too", "us", "ve", "very",
    "was", "we", "were", "what", "when", "where", "which", "while", "who", "whom", "why", "will",
    "with", "would", "wow", "yeah", "you", "your", "yours",
];

/// Whether `word` (lowercase) is a stop word.
pub fn is_stop_word(word: &str) -> bool {
    STOP_WORDS.binary_search(&word).is_ok()
}

/// The terms of `text`, in order (repeats kept): alphanumeric runs,
/// lowercased, stop words dropped, stemmed. Words longer than 64 bytes are
/// cut to their first 64 (a hostile text cannot make one giant term).
///
/// ```
/// use agent_host_core::memory::terms::terms;
///
/// assert_eq!(terms("Melanie painted the sunsets!"), terms("melanie paints a sunset"));
/// assert_eq!(terms("the sunsets"), ["sunset"]);
/// assert_eq!(terms("src/main.rs"), ["src", "main", "rs"]);
/// ```
pub fn terms(text: &str) -> Vec<String> {
    let stemmer = Stemmer::create(Algorithm::English);
    let mut out = Vec::new();
    for word in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        let mut lower = word.to_lowercase();
        if lower.len() > 64 {
            let mut cut = 64;
            while !lower.is_char_boundary(cut) {
                cut -= 1;
            }
            lower.truncate(cut);
        }
        if is_stop_word(&lower) {
            continue;
        }
        out.push(stemmer.stem(&lower).into_owned());
    }
    out
}

/// The stem of one lowercase word (Snowball English).
pub fn stem(word: &str) -> String {
    Stemmer::create(Algorithm::English).stem(word).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_words_are_sorted_for_the_binary_search() {
        let mut sorted = STOP_WORDS.to_vec();
        sorted.sort_unstable();
        assert_eq!(sorted, STOP_WORDS);
    }

    #[test]
    fn inflections_meet() {
        for group in [
            &["paint", "paints", "painted", "painting"][..],
            &["run", "running"],
            &["agency", "agencies"],
            &["love", "loves", "loved", "loving"],
            &["hike", "hikes", "hiking"],
            &["class", "classes"],
            &["box", "boxes"],
            &["adopt", "adopted", "adoption"],
        ] {
            let stems: Vec<String> = group.iter().map(|w| stem(w)).collect();
            assert!(
                stems.windows(2).all(|p| p[0] == p[1]),
                "{group:?} -> {stems:?}"
            );
        }
    }

    #[test]
    fn long_and_foreign_words_are_bounded_and_kept() {
        let long = "x".repeat(1000);
        assert_eq!(terms(&long)[0].len(), 64);
        assert_eq!(terms("Ünïcödé Straße"), ["ünïcödé", "straße"]);
    }
}
