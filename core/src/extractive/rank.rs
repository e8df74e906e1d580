//! How facts are ranked for the word cap: by frequency (in how many messages
//! they appear) plus recency (how late they were last seen) plus use (whether
//! the agent acted on them), less the recency of values seen only in
//! listings ([`Fact::listed`]).

use super::facts::{Fact, Facts};

/// The bonus of a fact the agent used (in a tool call or a command) over one
/// it was only shown.
const USE_BONUS: f64 = 3.0;

/// The facts, best-ranked first: a score of frequency (at most 5) plus
/// recency (up to 5, by position in the span; none for a value seen only in
/// listings) plus 3 when the agent used it, ties broken by the later
/// position, then by text.
pub(super) fn ranked(facts: &Facts) -> Vec<&Fact> {
    let span = facts.span.max(1) as f64;
    let mut ranked: Vec<(&Fact, f64)> = facts
        .facts
        .iter()
        .map(|fact| {
            // A late listing of hundreds must not push out the paths an
            // error or a short answer named earlier.
            let recency = if fact.listed {
                0.0
            } else {
                5.0 * (fact.last_seen + 1) as f64 / span
            };
            let used = if fact.uses > 0 { USE_BONUS } else { 0.0 };
            (fact, f64::from(fact.count.min(5)) + recency + used)
        })
        .collect();
    ranked.sort_by(|(a, a_score), (b, b_score)| {
        b_score
            .total_cmp(a_score)
            .then(b.last_seen.cmp(&a.last_seen))
            .then(a.text.cmp(&b.text))
    });
    ranked.into_iter().map(|(fact, _)| fact).collect()
}

#[cfg(test)]
mod tests {
    use crate::Message;
    use crate::extractive::fixtures::{assert_headings, call, merge, summarize};
    use crate::extractive::{MIN_WORDS, word_count};

    #[test]
    fn the_word_cap_holds_on_a_huge_span_and_recent_values_win() {
        let mut messages = Vec::new();
        for i in 0..1250 {
            messages.push(Message::user(format!(
                "Look at /repo/src/mod_{i}/lib_{i}.rs please"
            )));
            messages.push(call(
                &format!("I'll read it because module {i} matters."),
                &format!("c{i}"),
                "Read",
                &format!(r#"{{"file_path": "/repo/src/mod_{i}/lib_{i}.rs"}}"#),
            ));
            messages.push(Message::tool_result(
                format!("c{i}"),
                "Read",
                format!("error[E{i:04}]: cannot find value `x_{i}` in https://docs.example/e{i}"),
            ));
            messages.push(Message::assistant(format!("Module {i} took {i} ms.")));
        }
        assert_eq!(messages.len(), 5000);
        for max_words in [600, 100, MIN_WORDS] {
            let summary = summarize(&messages, max_words);
            assert!(word_count(&summary) <= max_words, "{max_words}: {summary}");
            assert_headings(&summary);
        }
        let summary = summarize(&messages, 600);
        assert!(
            summary.contains("/repo/src/mod_1249/lib_1249.rs"),
            "{summary}"
        );
        assert!(!summary.contains("/repo/src/mod_0/lib_0.rs"), "{summary}");
    }

    #[test]
    fn a_merge_over_the_cap_keeps_the_later_parts() {
        let part = |range: std::ops::Range<usize>| {
            let messages: Vec<Message> = range
                .map(|i| {
                    Message::tool_result("c", "t", format!("Error: job {i} failed on node n{i}"))
                })
                .collect();
            summarize(&messages, 600)
        };
        let partials = [part(0..60), part(60..120)];
        let merged = merge(&partials, 300);
        assert!(word_count(&merged) <= 300);
        assert!(
            merged.contains("Error: job 119 failed on node n119"),
            "{merged}"
        );
        assert!(
            !merged.contains("Error: job 0 failed on node n0"),
            "{merged}"
        );
    }
}
