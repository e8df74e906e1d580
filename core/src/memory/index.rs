//! A ranked full-text index: BM25 over weighted fields, in memory, searched
//! with MaxScore.
//!
//! Entries are numbered by the caller's order of insertion; removing one
//! marks it dead (its postings are skipped and the collection statistics
//! no longer count it) and [`Index::compact`] drops dead postings when they
//! outnumber live ones. Pure and deterministic: equal scores are ordered by
//! entry number, newest first.
//!
//! An entry is made of fields, each with a weight: a term's frequency in
//! the entry is the sum of the weights of its occurrences, and so is the
//! entry's length (BM25F with one length normalisation), so that words of a
//! context field count for less than words of the text itself.
//!
//! [`Index::search`] keeps, per term, an upper bound of the score any entry
//! can get from it (the largest frequency over the shortest length, per
//! term and per block of [`BLOCK`] postings). Terms are taken from the
//! least to the most promising: those whose bounds together cannot lift an
//! entry into the top `limit` are only looked up for entries the others
//! found (MaxScore), and a candidate is dropped as soon as its bound falls
//! below the `limit`th best score. The result is the exhaustive top
//! `limit`, score for score ([`Index::search_exhaustive`], kept as the
//! reference the tests and the bench compare with).

use std::cmp::Ordering;
use std::collections::HashMap;

use super::terms::terms;

/// BM25's term-frequency saturation.
const K1: f32 = 0.9;
/// BM25's length normalisation.
const B: f32 = 0.4;
/// Postings per block of the block bounds.
pub const BLOCK: usize = 64;
/// The most distinct terms of a query that are searched (the first ones).
pub const MAX_QUERY_TERMS: usize = 64;
/// The largest field weight; larger weights (and non-finite ones) are
/// clamped.
pub const MAX_WEIGHT: f32 = 16.0;
/// Bounds are compared with this much slack, so that rounding never drops
/// an entry the exhaustive scoring would keep.
const SLACK: f32 = 1.0 + 1e-4;

/// One posting: the entry and the term's weighted frequency in it.
#[derive(Clone, Copy, Debug)]
struct Posting {
    entry: u32,
    tf: f32,
}

/// A term's postings, by entry, with the bounds of their scores.
#[derive(Clone, Debug, Default)]
struct Postings {
    list: Vec<Posting>,
    /// Per block of [`BLOCK`] postings: the largest frequency and the
    /// smallest entry length.
    blocks: Vec<Bound>,
    /// Over the whole list.
    all: Bound,
    /// How many live entries hold the term.
    live_df: u32,
}

/// The largest frequency and the smallest length over some postings: the
/// best BM25 part any of them can score.
#[derive(Clone, Copy, Debug)]
struct Bound {
    tf: f32,
    length: f32,
}

impl Default for Bound {
    fn default() -> Self {
        Bound {
            tf: 0.0,
            length: f32::INFINITY,
        }
    }
}

impl Bound {
    fn widen(&mut self, tf: f32, length: f32) {
        self.tf = self.tf.max(tf);
        self.length = self.length.min(length);
    }
}

/// BM25's part of one term: increasing in `tf`, decreasing in `length`.
fn part(idf: f32, tf: f32, length: f32, average: f32) -> f32 {
    idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * length / average))
}

impl Postings {
    fn push(&mut self, entry: u32, tf: f32, length: f32) {
        if self.list.len().is_multiple_of(BLOCK) {
            self.blocks.push(Bound::default());
        }
        self.list.push(Posting { entry, tf });
        self.blocks.last_mut().expect("a block").widen(tf, length);
        self.all.widen(tf, length);
    }
}

/// An inverted index with BM25 scoring.
#[derive(Debug, Default, Clone)]
pub struct Index {
    vocabulary: HashMap<String, u32>,
    postings: Vec<Postings>,
    /// Each entry's distinct terms (empty once removed), for removal.
    entry_terms: Vec<Box<[u32]>>,
    /// Each entry's weighted length (0 once removed).
    lengths: Vec<f32>,
    live: Vec<bool>,
    live_count: u32,
    live_length: f64,
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

impl Eq for Scored {}

impl Ord for Scored {
    /// Better is greater: the higher score, then the newer entry.
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .total_cmp(&other.score)
            .then_with(|| self.entry.cmp(&other.entry))
    }
}

impl PartialOrd for Scored {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// A query term being searched: its postings, where the search is in them,
/// its idf and its place in the canonical order of summing.
struct Cursor<'a> {
    postings: &'a Postings,
    at: usize,
    idf: f32,
    bound: f32,
    place: usize,
    /// The block whose bound `block_bound` holds.
    bound_of: Option<usize>,
    block_bound: f32,
}

impl Cursor<'_> {
    fn entry(&self) -> u32 {
        self.postings
            .list
            .get(self.at)
            .map_or(u32::MAX, |p| p.entry)
    }

    /// Moves to the first posting at or after `entry` (galloping).
    fn seek(&mut self, entry: u32) {
        let list = &self.postings.list;
        if self.at >= list.len() || list[self.at].entry >= entry {
            return;
        }
        let mut step = 1;
        let mut low = self.at;
        while low + step < list.len() && list[low + step].entry < entry {
            low += step;
            step *= 2;
        }
        let high = (low + step + 1).min(list.len());
        self.at = low + list[low..high].partition_point(|p| p.entry < entry);
    }

    /// The best part any posting of the block holding the cursor's place
    /// can score (computed once per block).
    fn block_bound(&mut self, average: f32) -> f32 {
        let block = self.at / BLOCK;
        if self.bound_of != Some(block) {
            let b = self.postings.blocks[block];
            self.block_bound = part(self.idf, b.tf, b.length, average);
            self.bound_of = Some(block);
        }
        self.block_bound
    }

    /// The last entry of the block holding the cursor's place; `None` past
    /// the end.
    fn block_end(&self) -> Option<u32> {
        let list = &self.postings.list;
        if self.at >= list.len() {
            return None;
        }
        let last = ((self.at / BLOCK + 1) * BLOCK).min(list.len()) - 1;
        Some(list[last].entry)
    }
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

    /// Indexes `text` as a new entry (one field of weight 1) and returns its
    /// number.
    ///
    /// # Panics
    ///
    /// After `u32::MAX` entries.
    pub fn add(&mut self, text: &str) -> u32 {
        self.add_fields(&[(text, 1.0)])
    }

    /// Indexes the fields of a new entry, each with its weight (clamped to
    /// 0 to [`MAX_WEIGHT`]; a field of weight 0 is left out), and returns
    /// its number.
    ///
    /// # Panics
    ///
    /// After `u32::MAX` entries.
    pub fn add_fields(&mut self, fields: &[(&str, f32)]) -> u32 {
        let entry = u32::try_from(self.live.len()).expect("fewer than 2^32 index entries");
        let mut counts: Vec<(u32, f32)> = Vec::new();
        let mut length = 0.0f32;
        for &(text, weight) in fields {
            let weight = if weight.is_finite() {
                weight.clamp(0.0, MAX_WEIGHT)
            } else {
                0.0
            };
            if weight == 0.0 {
                continue;
            }
            for word in terms(text) {
                let next = self.vocabulary.len() as u32;
                let id = *self.vocabulary.entry(word).or_insert(next);
                if id == next {
                    self.postings.push(Postings::default());
                }
                match counts.iter_mut().find(|(t, _)| *t == id) {
                    Some((_, n)) => *n += weight,
                    None => counts.push((id, weight)),
                }
                length += weight;
            }
        }
        counts.sort_unstable_by_key(|&(t, _)| t);
        for &(term, tf) in &counts {
            let postings = &mut self.postings[term as usize];
            postings.push(entry, tf, length);
            postings.live_df += 1;
        }
        self.total_postings += counts.len() as u64;
        self.entry_terms
            .push(counts.iter().map(|&(t, _)| t).collect());
        self.lengths.push(length);
        self.live.push(true);
        self.live_count += 1;
        self.live_length += f64::from(length);
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
        self.live_length = (self.live_length - f64::from(self.lengths[at])).max(0.0);
        let held = std::mem::take(&mut self.entry_terms[at]);
        for &term in held.iter() {
            self.postings[term as usize].live_df -= 1;
        }
        self.dead_postings += held.len() as u64;
        if self.dead_postings * 2 > self.total_postings && self.total_postings > 4096 {
            self.compact();
        }
    }

    /// Drops the postings of removed entries (and tightens the bounds).
    pub fn compact(&mut self) {
        let live = &self.live;
        let lengths = &self.lengths;
        let mut total = 0;
        for postings in &mut self.postings {
            let old = std::mem::take(&mut postings.list);
            let live_df = postings.live_df;
            *postings = Postings::default();
            postings.live_df = live_df;
            for p in old.into_iter().filter(|p| live[p.entry as usize]) {
                postings.push(p.entry, p.tf, lengths[p.entry as usize]);
            }
            total += postings.list.len() as u64;
        }
        self.total_postings = total;
        self.dead_postings = 0;
    }

    /// The query's distinct known terms, in the canonical order scores are
    /// summed in (by term number), with their idf.
    fn query(&self, query: &str) -> Vec<(u32, f32)> {
        let mut ids: Vec<u32> = terms(query)
            .iter()
            .filter_map(|t| self.vocabulary.get(t).copied())
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids.truncate(MAX_QUERY_TERMS);
        let n = self.live_count as f32;
        ids.into_iter()
            .filter_map(|term| {
                let df = self.postings[term as usize].live_df as f32;
                (df > 0.0).then(|| (term, (1.0 + (n - df + 0.5) / (df + 0.5)).ln()))
            })
            .collect()
    }

    fn average_length(&self) -> f32 {
        ((self.live_length / f64::from(self.live_count.max(1))) as f32).max(1.0)
    }

    /// The `limit` best live entries for `query` by BM25, each score
    /// multiplied by what `accept` returns for its entry (clamped to 0 to
    /// `max_boost`); an entry for which `accept` returns `None` is left out.
    /// Terms of the query that occur more than once count once. Best
    /// first; ties newest first. `accept` is asked only about entries that
    /// could still make the top `limit`.
    pub fn search(
        &self,
        query: &str,
        limit: usize,
        max_boost: f32,
        mut accept: impl FnMut(u32) -> Option<f32>,
    ) -> Vec<Scored> {
        self.search_grouped(query, limit, max_boost, |e| {
            accept(e).map(|boost| (boost, None::<()>))
        })
    }

    /// [`Index::search`] keeping only the best entry of each group: `accept`
    /// also returns an entry's group (`None`: a group of its own). The
    /// `limit` best groups' best entries.
    pub fn search_grouped<G: PartialEq>(
        &self,
        query: &str,
        limit: usize,
        max_boost: f32,
        mut accept: impl FnMut(u32) -> Option<(f32, Option<G>)>,
    ) -> Vec<Scored> {
        if limit == 0 || self.live_count == 0 {
            return Vec::new();
        }
        let max_boost = boost_bound(max_boost);
        let query = self.query(query);
        let average = self.average_length();
        let mut cursors: Vec<Cursor<'_>> = query
            .iter()
            .enumerate()
            .map(|(place, &(term, idf))| {
                let postings = &self.postings[term as usize];
                Cursor {
                    postings,
                    at: 0,
                    idf,
                    bound: part(idf, postings.all.tf, postings.all.length, average),
                    place,
                    bound_of: None,
                    block_bound: 0.0,
                }
            })
            .collect();
        // From the least to the most promising term.
        cursors.sort_by(|a, b| a.bound.total_cmp(&b.bound));
        // below[i]: the best an entry can score from terms 0..i.
        let mut below = vec![0.0f32; cursors.len() + 1];
        for (i, c) in cursors.iter().enumerate() {
            below[i + 1] = below[i] + c.bound;
        }
        let can_reach = |bound: f32, threshold: Option<Scored>| {
            threshold.is_none_or(|t| bound * max_boost * SLACK >= t.score)
        };
        let mut parts = vec![0.0f32; cursors.len()];
        // The best entry of each of the best groups, best first.
        let mut best: Vec<(Scored, Option<G>)> = Vec::with_capacity(limit.min(1024));
        let mut threshold: Option<Scored> = None;
        // Terms before `essential` cannot bring an entry into the top alone.
        let mut essential = 0;
        loop {
            while essential < cursors.len() && !can_reach(below[essential + 1], threshold) {
                essential += 1;
            }
            let Some(entry) = cursors[essential..].iter().map(Cursor::entry).min() else {
                break;
            };
            if entry == u32::MAX {
                break;
            }
            // Up to the first end of an essential term's current block, no
            // entry scores more than those blocks' bounds and the other
            // terms' bounds: when that cannot reach, skip past it.
            if threshold.is_some() {
                let mut bound = below[essential];
                let mut end = u32::MAX;
                for c in &mut cursors[essential..] {
                    if let Some(last) = c.block_end() {
                        bound += c.block_bound(average);
                        end = end.min(last);
                    }
                }
                if !can_reach(bound, threshold) {
                    if end == u32::MAX {
                        break;
                    }
                    for c in &mut cursors[essential..] {
                        c.seek(end + 1);
                    }
                    continue;
                }
            }
            let mut sure = 0.0f32;
            for c in &mut cursors[essential..] {
                if c.entry() == entry {
                    let p = c.postings.list[c.at];
                    let part = part(c.idf, p.tf, self.lengths[entry as usize], average);
                    parts[c.place] = part;
                    sure += part;
                    c.at += 1;
                }
            }
            let mut reachable = self.live[entry as usize];
            for i in (0..essential).rev() {
                if !reachable || !can_reach(sure + below[i + 1], threshold) {
                    reachable = false;
                    break;
                }
                let c = &mut cursors[i];
                c.seek(entry);
                if c.entry() == entry {
                    let p = c.postings.list[c.at];
                    let part = part(c.idf, p.tf, self.lengths[entry as usize], average);
                    parts[c.place] = part;
                    sure += part;
                }
            }
            if reachable {
                // The canonical order, as the exhaustive scoring sums.
                let score = parts.iter().fold(0.0f32, |sum, &p| sum + p);
                if let Some((boost, group)) = accept(entry) {
                    let scored = Scored {
                        entry,
                        score: score * boost.clamp(0.0, max_boost),
                    };
                    keep(&mut best, limit, scored, group);
                    if best.len() == limit {
                        threshold = best.last().map(|b| b.0);
                    }
                }
            }
            parts.fill(0.0);
        }
        best.into_iter().map(|b| b.0).collect()
    }

    /// [`Index::search`] by scoring every posting of every query term: the
    /// reference the fast search must equal.
    pub fn search_exhaustive(
        &self,
        query: &str,
        limit: usize,
        max_boost: f32,
        mut accept: impl FnMut(u32) -> Option<f32>,
    ) -> Vec<Scored> {
        self.search_exhaustive_grouped(query, limit, max_boost, |e| {
            accept(e).map(|boost| (boost, None::<()>))
        })
    }

    /// [`Index::search_grouped`] by scoring every posting of every query
    /// term.
    pub fn search_exhaustive_grouped<G: PartialEq>(
        &self,
        query: &str,
        limit: usize,
        max_boost: f32,
        mut accept: impl FnMut(u32) -> Option<(f32, Option<G>)>,
    ) -> Vec<Scored> {
        if limit == 0 || self.live_count == 0 {
            return Vec::new();
        }
        let max_boost = boost_bound(max_boost);
        let average = self.average_length();
        let mut scores: HashMap<u32, f32> = HashMap::new();
        for (term, idf) in self.query(query) {
            for p in &self.postings[term as usize].list {
                if self.live[p.entry as usize] {
                    let part = part(idf, p.tf, self.lengths[p.entry as usize], average);
                    *scores.entry(p.entry).or_insert(0.0) += part;
                }
            }
        }
        let mut ranked: Vec<(Scored, Option<G>)> = scores
            .into_iter()
            .filter_map(|(entry, score)| {
                accept(entry).map(|(boost, group)| {
                    let score = score * boost.clamp(0.0, max_boost);
                    (Scored { entry, score }, group)
                })
            })
            .collect();
        ranked.sort_unstable_by_key(|b| std::cmp::Reverse(b.0));
        let mut out: Vec<(Scored, Option<G>)> = Vec::new();
        for (scored, group) in ranked {
            if out.len() == limit {
                break;
            }
            if group.is_none() || !out.iter().any(|(_, g)| *g == group) {
                out.push((scored, group));
            }
        }
        out.into_iter().map(|b| b.0).collect()
    }
}

/// Puts `scored` of `group` among `best` (best first, at most `limit`, one
/// per group): in its group's place when it beats it, else in the place of
/// the last when it beats that.
fn keep<G: PartialEq>(
    best: &mut Vec<(Scored, Option<G>)>,
    limit: usize,
    scored: Scored,
    group: Option<G>,
) {
    let same = group
        .as_ref()
        .and_then(|g| best.iter().position(|(_, h)| h.as_ref() == Some(g)));
    match same {
        Some(at) if best[at].0 >= scored => return,
        Some(at) => {
            best.remove(at);
        }
        None if best.len() == limit => {
            if best.last().is_some_and(|last| last.0 >= scored) {
                return;
            }
            best.pop();
        }
        None => {}
    }
    let at = best.partition_point(|(b, _)| *b > scored);
    best.insert(at, (scored, group));
}

/// The most a caller's boost may multiply a score by, as the bounds use it:
/// never negative, and unbounded when the caller gives no finite bound.
fn boost_bound(max_boost: f32) -> f32 {
    if max_boost.is_finite() {
        max_boost.max(0.0)
    } else {
        f32::MAX
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn all(_: u32) -> Option<f32> {
        Some(1.0)
    }

    #[test]
    fn rarer_terms_and_shorter_entries_rank_first() {
        let mut index = Index::new();
        let pottery = index.add("Melanie signed up for a pottery class");
        let class = index.add("Caroline took a class on counseling and a class on psychology");
        let camping = index.add("Melanie went camping with the kids at the beach");
        let hits = index.search("What class did Melanie sign up for?", 10, 1.0, all);
        assert_eq!(hits[0].entry, pottery, "{hits:?}");
        assert!(hits.iter().any(|h| h.entry == class));
        assert!(hits.iter().any(|h| h.entry == camping));
        let beach = index.search("beach", 10, 1.0, all);
        assert_eq!(beach.len(), 1);
        assert_eq!(beach[0].entry, camping);
    }

    #[test]
    fn a_light_field_counts_for_less() {
        let mut index = Index::new();
        let context = index.add_fields(&[("went to the show", 1.0), ("the pottery class", 0.25)]);
        let text = index.add_fields(&[("the pottery class", 1.0), ("went to the show", 0.25)]);
        let hits = index.search("pottery", 10, 1.0, all);
        assert_eq!(
            hits.iter().map(|h| h.entry).collect::<Vec<_>>(),
            [text, context]
        );
        // Weights of 0, below 0 or not finite leave a field out.
        let none = index.add_fields(&[("zebra", 0.0), ("zebra", -1.0), ("zebra", f32::NAN)]);
        assert!(index.search("zebra", 10, 1.0, all).is_empty());
        assert_eq!(none, 2);
    }

    #[test]
    fn removed_entries_are_never_found_and_stop_counting() {
        let mut index = Index::new();
        let a = index.add("the deploy key lives in /etc/keys/deploy.pem");
        let b = index.add("deploy on fridays is forbidden");
        index.remove(a);
        assert_eq!(index.len(), 1);
        let hits = index.search("deploy key", 10, 1.0, all);
        assert_eq!(hits.iter().map(|h| h.entry).collect::<Vec<_>>(), [b]);
        index.remove(a);
        assert_eq!(index.len(), 1);
        index.compact();
        assert!(index.search("keys", 10, 1.0, all).is_empty());
    }

    #[test]
    fn the_filter_excludes_and_boosts() {
        let mut index = Index::new();
        let a = index.add("likes green tea");
        let b = index.add("likes green tea");
        let hits = index.search("green tea", 10, 2.0, |e| (e == a).then_some(1.0));
        assert_eq!(hits.iter().map(|h| h.entry).collect::<Vec<_>>(), [a]);
        // Equal scores: newest first; a boost reorders.
        let ties = index.search("green tea", 10, 2.0, all);
        assert_eq!(ties.iter().map(|h| h.entry).collect::<Vec<_>>(), [b, a]);
        let boost = |e| Some(if e == a { 2.0 } else { 1.0 });
        assert_eq!(index.search("green tea", 1, 2.0, boost)[0].entry, a);
        // A boost past the maximum counts as the maximum.
        let over = index.search("green tea", 2, 1.0, boost);
        assert_eq!(over.iter().map(|h| h.entry).collect::<Vec<_>>(), [b, a]);
        // Any limit is an upper bound, never an allocation.
        assert_eq!(index.search("green tea", usize::MAX, 1.0, all).len(), 2);
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
            let hits = index.search(&format!("w{e}"), 1, 1.0, all);
            assert_eq!(hits[0].entry, e);
        }
        assert_eq!(index.search("shared", 10_000, 1.0, all).len(), 1000);
    }

    #[test]
    fn the_search_skips_what_cannot_reach_the_top() {
        // Many entries share a common word; the first holds a rare one too.
        // Once it is found, the common word alone cannot reach it, and the
        // others are not asked about.
        let mut index = Index::new();
        let rare = index.add("common rare");
        for i in 0..20_000 {
            index.add(&format!("common word filler{} and more filler", i % 7));
        }
        let mut asked = 0;
        let hits = index.search("common rare", 1, 1.0, |_| {
            asked += 1;
            Some(1.0)
        });
        assert_eq!(hits[0].entry, rare);
        assert!(asked < 1_000, "asked about {asked} entries");
        let mut asked_all = 0;
        index.search_exhaustive("common rare", 1, 1.0, |_| {
            asked_all += 1;
            Some(1.0)
        });
        assert_eq!(asked_all, 20_001);
    }

    const WORDS: &[&str] = &[
        "alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa",
        "lambda", "mu",
    ];

    fn text(picks: &[usize]) -> String {
        picks
            .iter()
            .map(|&i| WORDS[i % WORDS.len()])
            .collect::<Vec<_>>()
            .join(" ")
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// The fast search equals the exhaustive one, score for score and in
        /// order, whatever the entries, removals, boosts, filter and limit.
        #[test]
        fn the_fast_search_is_the_exhaustive_top(
            entries in prop::collection::vec(
                (prop::collection::vec(0usize..12, 1..12), prop::collection::vec(0usize..12, 0..6), 0u8..4),
                1..400,
            ),
            removed in prop::collection::vec(0usize..400, 0..100),
            query in prop::collection::vec(0usize..12, 1..6),
            limit in 1usize..30,
            boost_mod in 1u32..5,
            excluded_mod in 2u32..9,
            group_size in 1u32..6,
        ) {
            let mut index = Index::new();
            for (text_words, context_words, weight) in &entries {
                index.add_fields(&[
                    (&text(text_words), 1.0),
                    (&text(context_words), f32::from(*weight) * 0.25),
                ]);
            }
            for r in removed {
                index.remove((r % entries.len()) as u32);
            }
            let accept = |e: u32| {
                (!e.is_multiple_of(excluded_mod)).then_some(if e.is_multiple_of(boost_mod) { 1.5 } else { 1.0 })
            };
            let query = text(&query);
            let fast = index.search(&query, limit, 1.5, accept);
            let slow = index.search_exhaustive(&query, limit, 1.5, accept);
            prop_assert_eq!(fast, slow);
            // One per group (entries of one group are neighbours, as the
            // sentences of one message are; every fifth is alone).
            let grouped = |e: u32| accept(e).map(|b| (b, (!e.is_multiple_of(5)).then_some(e / group_size)));
            let fast = index.search_grouped(&query, limit, 1.5, grouped);
            let slow = index.search_exhaustive_grouped(&query, limit, 1.5, grouped);
            prop_assert_eq!(fast, slow);
        }
    }
}
