//! A ranked full-text index: BM25 over an in-memory inverted index.
//!
//! Entries are numbered by the caller's order of insertion; removing one
//! marks it dead (its postings are skipped and the collection statistics
//! no longer count it) and [`Index::compact`] drops dead postings when they
//! outnumber live ones. Pure and deterministic: equal scores are ordered by
//! entry number, newest first.

use std::collections::HashMap;

use super::terms::terms;

/// BM25's term-frequency saturation.
const K1: f32 = 0.9;
/// BM25's length normalisation.
const B: f32 = 0.4;

/// One entry's postings: the entry and how often the term occurs in it.
type Posting = (u32, u16);

/// An inverted index with BM25 scoring.
#[derive(Debug, Default, Clone)]
pub struct Index {
    vocabulary: HashMap<String, u32>,
    postings: Vec<Vec<Posting>>,
    /// How many live entries hold each term.
    live_df: Vec<u32>,
    /// Each entry's distinct terms (empty once removed), for removal.
    entry_terms: Vec<Box<[u32]>>,
    /// Each entry's length in terms (0 once removed).
    lengths: Vec<u32>,
    live: Vec<bool>,
    live_count: u32,
    live_length: u64,
    dead_postings: u64,
    total_postings: u64,
}

/// A scored entry.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Scored {
    /// The entry's number.
    pub entry: u32,
    /// Its BM25 score times the boost the filter gave it.
    pub score: f32,
}

impl Index {
    /// An empty index.
    pub fn new() -> Self {
        Index::default()
    }

    /// How many live entries it holds.
    pub fn len(&self) -> usize {
        self.live_count as usize
    }

    /// Whether it holds no live entry.
    pub fn is_empty(&self) -> bool {
        self.live_count == 0
    }

    /// Indexes `text` as a new entry and returns its number.
    ///
    /// # Panics
    ///
    /// After `u32::MAX` entries.
    pub fn add(&mut self, text: &str) -> u32 {
        let entry = u32::try_from(self.live.len()).expect("fewer than 2^32 index entries");
        let mut counts: Vec<(u32, u16)> = Vec::new();
        let words = terms(text);
        for word in &words {
            let next = self.vocabulary.len() as u32;
            let id = *self.vocabulary.entry(word.clone()).or_insert(next);
            if id == next {
                self.postings.push(Vec::new());
                self.live_df.push(0);
            }
            match counts.iter_mut().find(|(t, _)| *t == id) {
                Some((_, n)) => *n = n.saturating_add(1),
                None => counts.push((id, 1)),
            }
        }
        for &(term, count) in &counts {
            self.postings[term as usize].push((entry, count));
            self.live_df[term as usize] += 1;
        }
        self.total_postings += counts.len() as u64;
        let length = u32::try_from(words.len()).unwrap_or(u32::MAX);
        self.entry_terms
            .push(counts.iter().map(|&(t, _)| t).collect());
        self.lengths.push(length);
        self.live.push(true);
        self.live_count += 1;
        self.live_length += u64::from(length);
        entry
    }

    /// Removes `entry` from every later search; a dead or unknown entry is
    /// left alone.
    pub fn remove(&mut self, entry: u32) {
        let at = entry as usize;
        if !self.live.get(at).copied().unwrap_or(false) {
            return;
        }
        self.live[at] = false;
        self.live_count -= 1;
        self.live_length -= u64::from(self.lengths[at]);
        let held = std::mem::take(&mut self.entry_terms[at]);
        for &term in held.iter() {
            self.live_df[term as usize] -= 1;
        }
        self.dead_postings += held.len() as u64;
        if self.dead_postings * 2 > self.total_postings && self.total_postings > 4096 {
            self.compact();
        }
    }

    /// Drops the postings of removed entries.
    pub fn compact(&mut self) {
        let live = &self.live;
        let mut total = 0;
        for list in &mut self.postings {
            list.retain(|&(entry, _)| live[entry as usize]);
            total += list.len() as u64;
        }
        self.total_postings = total;
        self.dead_postings = 0;
    }

    /// The `limit` best live entries for `query` by BM25, each score
    /// multiplied by what `accept` returns for its entry; an entry for which
    /// `accept` returns `None` is left out. Terms of the query that occur
    /// once count once. Best first; ties newest first.
    pub fn search(
        &self,
        query: &str,
        limit: usize,
        mut accept: impl FnMut(u32) -> Option<f32>,
    ) -> Vec<Scored> {
        if limit == 0 || self.live_count == 0 {
            return Vec::new();
        }
        let mut query_terms: Vec<u32> = terms(query)
            .iter()
            .filter_map(|t| self.vocabulary.get(t).copied())
            .collect();
        query_terms.sort_unstable();
        query_terms.dedup();
        let n = self.live_count as f32;
        let average = (self.live_length as f32 / n).max(1.0);
        let mut scores: HashMap<u32, f32> = HashMap::new();
        for term in query_terms {
            let df = self.live_df[term as usize] as f32;
            if df == 0.0 {
                continue;
            }
            let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
            for &(entry, tf) in &self.postings[term as usize] {
                if !self.live[entry as usize] {
                    continue;
                }
                let tf = f32::from(tf);
                let length = self.lengths[entry as usize] as f32;
                let part = idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * length / average));
                *scores.entry(entry).or_insert(0.0) += part;
            }
        }
        let mut ranked: Vec<Scored> = scores
            .into_iter()
            .filter_map(|(entry, score)| {
                accept(entry).map(|boost| Scored {
                    entry,
                    score: score * boost,
                })
            })
            .collect();
        let by_rank = |a: &Scored, b: &Scored| {
            b.score
                .total_cmp(&a.score)
                .then_with(|| b.entry.cmp(&a.entry))
        };
        if ranked.len() > limit {
            ranked.select_nth_unstable_by(limit - 1, by_rank);
            ranked.truncate(limit);
        }
        ranked.sort_unstable_by(by_rank);
        ranked
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rarer_terms_and_shorter_entries_rank_first() {
        let mut index = Index::new();
        let pottery = index.add("Melanie signed up for a pottery class");
        let class = index.add("Caroline took a class on counseling and a class on psychology");
        let camping = index.add("Melanie went camping with the kids at the beach");
        let hits = index.search("What class did Melanie sign up for?", 10, |_| Some(1.0));
        assert_eq!(hits[0].entry, pottery, "{hits:?}");
        assert!(hits.iter().any(|h| h.entry == class));
        assert!(hits.iter().any(|h| h.entry == camping));
        let beach = index.search("beach", 10, |_| Some(1.0));
        assert_eq!(beach.len(), 1);
        assert_eq!(beach[0].entry, camping);
    }

    #[test]
    fn removed_entries_are_never_found_and_stop_counting() {
        let mut index = Index::new();
        let a = index.add("the deploy key lives in /etc/keys/deploy.pem");
        let b = index.add("deploy on fridays is forbidden");
        index.remove(a);
        assert_eq!(index.len(), 1);
        let hits = index.search("deploy key", 10, |_| Some(1.0));
        assert_eq!(hits.iter().map(|h| h.entry).collect::<Vec<_>>(), [b]);
        index.remove(a);
        assert_eq!(index.len(), 1);
        index.compact();
        assert!(index.search("keys", 10, |_| Some(1.0)).is_empty());
    }

    #[test]
    fn the_filter_excludes_and_boosts() {
        let mut index = Index::new();
        let a = index.add("likes green tea");
        let b = index.add("likes green tea");
        let hits = index.search("green tea", 10, |e| (e == a).then_some(1.0));
        assert_eq!(hits.iter().map(|h| h.entry).collect::<Vec<_>>(), [a]);
        // Equal scores: newest first; a boost reorders.
        let ties = index.search("green tea", 10, |_| Some(1.0));
        assert_eq!(ties.iter().map(|h| h.entry).collect::<Vec<_>>(), [b, a]);
        let boosted = index.search("green tea", 1, |e| Some(if e == a { 2.0 } else { 1.0 }));
        assert_eq!(boosted[0].entry, a);
    }

    #[test]
    fn compaction_keeps_every_live_entry_findable() {
        let mut index = Index::new();
        let entries: Vec<u32> = (0..6000)
            .map(|i| index.add(&format!("fact number w{i} shared")))
            .collect();
        for &e in &entries[..5000] {
            index.remove(e);
        }
        assert!(index.total_postings < 6000 * 3, "compaction ran");
        for &e in &entries[5000..] {
            let hits = index.search(&format!("w{e}"), 1, |_| Some(1.0));
            assert_eq!(hits[0].entry, e);
        }
        assert_eq!(index.search("shared", 10_000, |_| Some(1.0)).len(), 1000);
    }
}
