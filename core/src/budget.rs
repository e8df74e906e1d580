//! The context budget and the view sent to the model.
//!
//! Budget = `context_limit - response_reserve - tool_definition_tokens`. The
//! view is: the system prompt (the log's leading system messages), then the
//! latest checkpoint's summary pair (it should take at most
//! [`BudgetConfig::summary_share`] of what remains: `build_view` reports the cap
//! in [`ViewTokens::summary_cap`], the pipeline cuts the summary to it), then
//! recent messages from
//! newest to oldest until the budget is spent, but always at least
//! [`BudgetConfig::min_recent_messages`]. The view starts after the messages
//! the latest checkpoint covers. A tool exchange (an assistant message with
//! calls and its results) goes in or out whole.
//!
//! Building a view reads the log from its end and stops when the budget is
//! spent, so its cost follows the size of the view, not of the log (token
//! counts are cached per message).

use crate::message::{Message, Role};
use crate::session::Checkpoint;
use crate::tokens::TokenCounter;

/// How big the context is and how it is shared.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct BudgetConfig {
    /// The model's context window, in tokens (default 128,000).
    pub context_limit: u32,
    /// Tokens kept free for the model's answer (default 4,096).
    pub response_reserve: u32,
    /// Tokens the tool definitions of the request take (default 0).
    pub tool_definition_tokens: u32,
    /// The share of the budget left after the system prompt that the summary
    /// should take at most (default 0.30).
    pub summary_share: f64,
    /// Recent messages always included, even over budget (default 6).
    pub min_recent_messages: usize,
}

impl Default for BudgetConfig {
    fn default() -> Self {
        BudgetConfig {
            context_limit: 128_000,
            response_reserve: 4_096,
            tool_definition_tokens: 0,
            summary_share: 0.30,
            min_recent_messages: 6,
        }
    }
}

impl BudgetConfig {
    /// A budget for a given context window, with the other defaults.
    pub fn for_window(context_limit: u32) -> Self {
        BudgetConfig {
            context_limit,
            response_reserve: BudgetConfig::default()
                .response_reserve
                .min(context_limit / 4),
            ..BudgetConfig::default()
        }
    }

    /// The tokens the history may take: the window less the reserve and the
    /// tool definitions.
    pub fn available(&self) -> u32 {
        self.context_limit
            .saturating_sub(self.response_reserve)
            .saturating_sub(self.tool_definition_tokens)
    }
}

/// How the budget was spent by a view.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ViewTokens {
    /// The budget: window less reserve and tool definitions.
    pub available: u32,
    /// Tokens of the system prompt.
    pub system: u32,
    /// Tokens of the checkpoint summary pair.
    pub summary: u32,
    /// The most tokens the summary should take.
    pub summary_cap: u32,
    /// Tokens of the recent messages.
    pub recent: u32,
    /// Messages after the checkpoint that are not in the view because they
    /// did not fit (summary messages of older checkpoints lying far back in
    /// the log may be counted among them).
    pub left_out: usize,
}

impl ViewTokens {
    /// All tokens of the view.
    pub fn total(&self) -> u32 {
        self.system
            .saturating_add(self.summary)
            .saturating_add(self.recent)
    }

    /// Whether the view is larger than the budget (possible because of the
    /// minimum of recent messages, or a large system prompt or summary).
    pub fn over_budget(&self) -> bool {
        self.total() > self.available
    }
}

/// The messages to send, in order, borrowed from the log.
#[derive(Clone, Debug, Default)]
pub struct View<'a> {
    /// The system prompt.
    pub system: Vec<&'a Message>,
    /// The latest checkpoint's boundary and summary messages.
    pub summary: Vec<&'a Message>,
    /// Recent messages, oldest first.
    pub recent: Vec<&'a Message>,
    /// How the budget was spent.
    pub tokens: ViewTokens,
}

impl<'a> View<'a> {
    /// The view's messages in the order they are sent.
    pub fn messages(&self) -> impl Iterator<Item = &'a Message> + '_ {
        self.system
            .iter()
            .chain(&self.summary)
            .chain(&self.recent)
            .copied()
    }

    /// The number of messages in the view.
    pub fn len(&self) -> usize {
        self.system.len() + self.summary.len() + self.recent.len()
    }

    /// Whether the view holds no message.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The view as owned messages, for stages that edit them.
    pub fn to_messages(&self) -> Vec<Message> {
        self.messages().cloned().collect()
    }
}

/// Where a log splits around its latest checkpoint.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogSplit {
    /// How many leading system messages form the system prompt.
    pub system_end: usize,
    /// Indices of the checkpoint's boundary and summary messages.
    pub summary: Option<(usize, usize)>,
    /// The first index after the last message the checkpoint covers.
    pub start: usize,
}

impl LogSplit {
    /// Whether the message at `index` is one of the history since the
    /// checkpoint (summary messages are not: the view places the latest pair
    /// itself, and older pairs are superseded).
    pub fn is_candidate(&self, index: usize, m: &Message) -> bool {
        !m.summary && self.summary.is_none_or(|(b, s)| index != b && index != s)
    }

    /// The newest messages since the checkpoint, read from the end of `log`
    /// until they take more than `limit` tokens and number at least
    /// `min_count`, stopping where an exchange starts. Older messages are
    /// counted, not read: the cost follows the tail, not the log.
    pub(crate) fn tail(
        &self,
        log: &[Message],
        limit: u64,
        min_count: usize,
        counter: &dyn TokenCounter,
    ) -> Tail {
        let mut tail = Tail {
            start: log.len(),
            tokens: 0,
            since_checkpoint: 0,
            stopped: false,
        };
        for i in (self.start..log.len()).rev() {
            let m = &log[i];
            if !self.is_candidate(i, m) {
                continue;
            }
            tail.since_checkpoint += 1;
            tail.tokens += u64::from(m.tokens(counter));
            tail.start = i;
            if tail.tokens > limit && tail.since_checkpoint >= min_count && m.role != Role::Tool {
                // Summary messages of older checkpoints among the older
                // messages are counted too: they are rare, and harmless here.
                let older = self.start..i;
                let pair = self.summary.map_or(0, |(b, s)| {
                    usize::from(older.contains(&b)) + usize::from(older.contains(&s))
                });
                tail.since_checkpoint += older.len() - pair;
                tail.stopped = true;
                break;
            }
        }
        tail
    }
}

/// What [`LogSplit::tail`] read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Tail {
    /// The log index of the oldest message read.
    pub start: usize,
    /// The tokens of the messages read.
    pub tokens: u64,
    /// All messages since the checkpoint, read or counted.
    pub since_checkpoint: usize,
    /// Whether the read stopped short of the checkpoint (the limit was
    /// passed): the messages before `start` were counted, not read.
    pub stopped: bool,
}

/// Whether `m` belongs to a log's system prompt when it leads the log: a
/// system message that is not a summary. [`split_log`] takes the log's first
/// messages while this holds; a store reading a log's head, or a caller
/// checking that a partial log starts where the whole one does, asks the
/// same.
pub fn is_system_prompt(m: &Message) -> bool {
    m.role == Role::System && !m.summary
}

/// Finds the system prompt and the latest checkpoint in `log`.
///
/// The checkpoint's messages are found by scanning from the end, so the cost
/// follows the distance from the end of the log to the checkpoint. A
/// checkpoint whose messages are not in the log is ignored.
pub fn split_log(log: &[Message], checkpoint: Option<&Checkpoint>) -> LogSplit {
    let system_end = log
        .iter()
        .position(|m| !is_system_prompt(m))
        .unwrap_or(log.len());
    let mut split = LogSplit {
        system_end,
        summary: None,
        start: system_end,
    };
    let Some(cp) = checkpoint else { return split };
    let (mut boundary, mut summary, mut last_covered) = (None, None, None);
    let last_id = cp.covers.last();
    for (i, m) in log.iter().enumerate().rev() {
        if boundary.is_none() && m.id == cp.boundary_id {
            boundary = Some(i);
        } else if summary.is_none() && m.id == cp.summary_id {
            summary = Some(i);
        } else if last_covered.is_none()
            && boundary.is_some()
            && summary.is_some()
            && Some(&m.id) == last_id
        {
            // Covered messages precede the pair: a later message that
            // reuses the id (a hostile or merged log) is not the one.
            last_covered = Some(i);
        }
        if boundary.is_some() && summary.is_some() && (last_covered.is_some() || last_id.is_none())
        {
            break;
        }
    }
    if let (Some(b), Some(s)) = (boundary, summary) {
        split.summary = Some((b, s));
        split.start = last_covered.map_or(system_end, |i| (i + 1).max(system_end));
    }
    split
}

/// Builds the view of `log` for the given budget.
///
/// ```
/// use agent_host_core::budget::{build_view, BudgetConfig};
/// use agent_host_core::{HeuristicCounter, Message};
///
/// let log: Vec<Message> = (0..100)
///     .map(|i| Message::user("x".repeat(400)).with_id(format!("m{i}")))
///     .collect();
/// let budget = BudgetConfig { context_limit: 2_000, response_reserve: 0, ..Default::default() };
/// let view = build_view(&log, None, &budget, &HeuristicCounter::default());
/// // 104 tokens a message: 19 fit in 2,000.
/// assert_eq!(view.recent.len(), 19);
/// assert_eq!(view.recent.last().unwrap().id, "m99");
/// assert!(!view.tokens.over_budget());
/// ```
pub fn build_view<'a>(
    log: &'a [Message],
    checkpoint: Option<&Checkpoint>,
    budget: &BudgetConfig,
    counter: &dyn TokenCounter,
) -> View<'a> {
    let split = split_log(log, checkpoint);
    let system: Vec<&Message> = log[..split.system_end].iter().collect();
    let summary: Vec<&Message> = split
        .summary
        .map_or_else(Vec::new, |(b, s)| vec![&log[b], &log[s]]);
    // Only the newest candidates can fit: read them from the end until the
    // budget is spent, the minimum is met, and an exchange is complete.
    let fixed: u64 = system
        .iter()
        .chain(&summary)
        .map(|m| u64::from(m.tokens(counter)))
        .sum();
    let room = u64::from(budget.available()).saturating_sub(fixed);
    let tail = split.tail(log, room, budget.min_recent_messages, counter);
    let candidates: Vec<&Message> = (tail.start..log.len())
        .filter(|&i| split.is_candidate(i, &log[i]))
        .map(|i| &log[i])
        .collect();
    let mut view = pack(system, summary, &candidates, budget, counter);
    // Messages before the ones read never fit either.
    view.tokens.left_out += tail.since_checkpoint - candidates.len();
    view
}

/// Packs a view from a system prompt, a summary and candidate messages
/// (oldest first): the newest candidates that fit, whole tool exchanges only.
pub fn pack<'a>(
    system: Vec<&'a Message>,
    summary: Vec<&'a Message>,
    candidates: &[&'a Message],
    budget: &BudgetConfig,
    counter: &dyn TokenCounter,
) -> View<'a> {
    let sum = |ms: &[&Message]| ms.iter().map(|m| u64::from(m.tokens(counter))).sum::<u64>();
    let clamp = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
    let mut tokens = ViewTokens {
        available: budget.available(),
        system: clamp(sum(&system)),
        summary: clamp(sum(&summary)),
        ..ViewTokens::default()
    };
    let after_system = tokens.available.saturating_sub(tokens.system);
    tokens.summary_cap = (f64::from(after_system) * budget.summary_share) as u32;
    let mut remaining = after_system.saturating_sub(tokens.summary);
    let mut start = candidates.len();
    let mut included = 0usize;
    while start > 0 {
        let unit_start = unit_start(candidates, start);
        let unit = &candidates[unit_start..start];
        let unit_tokens = clamp(sum(unit));
        if unit_tokens > remaining && included >= budget.min_recent_messages {
            break;
        }
        remaining = remaining.saturating_sub(unit_tokens);
        tokens.recent = tokens.recent.saturating_add(unit_tokens);
        included += unit.len();
        start = unit_start;
    }
    tokens.left_out = start;
    View {
        system,
        summary,
        recent: candidates[start..].to_vec(),
        tokens,
    }
}

/// The start of the unit that ends just before `end`: a run of tool results
/// together with the message they follow.
pub(crate) fn unit_start(messages: &[&Message], end: usize) -> usize {
    let mut i = end - 1;
    while i > 0 && messages[i].role == Role::Tool {
        i -= 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens::HeuristicCounter;
    use chrono::{TimeZone, Utc};

    fn msg(id: &str, chars: usize) -> Message {
        Message::user("x".repeat(chars)).with_id(id)
    }

    fn budget(limit: u32) -> BudgetConfig {
        BudgetConfig {
            context_limit: limit,
            response_reserve: 0,
            min_recent_messages: 1,
            ..BudgetConfig::default()
        }
    }

    fn ids<'a>(v: &View<'a>) -> Vec<&'a str> {
        v.messages().map(|m| m.id.as_str()).collect()
    }

    #[test]
    fn available_subtracts_reserve_and_tools_without_underflow() {
        let b = BudgetConfig {
            context_limit: 1000,
            response_reserve: 300,
            tool_definition_tokens: 200,
            ..BudgetConfig::default()
        };
        assert_eq!(b.available(), 500);
        let tiny = BudgetConfig {
            context_limit: 100,
            ..b
        };
        assert_eq!(tiny.available(), 0);
    }

    #[test]
    fn system_first_then_newest_messages_that_fit() {
        let counter = HeuristicCounter::default();
        let log = vec![
            Message::system("s".repeat(36)).with_id("sys"), // 13 tokens
            msg("a", 396),                                  // 103 each
            msg("b", 396),
            msg("c", 396),
        ];
        let view = build_view(&log, None, &budget(13 + 2 * 103), &counter);
        assert_eq!(ids(&view), ["sys", "b", "c"]);
        assert_eq!(view.tokens.total(), 13 + 206);
        assert_eq!(view.tokens.left_out, 1);
    }

    #[test]
    fn min_recent_messages_are_included_over_budget() {
        let counter = HeuristicCounter::default();
        let log: Vec<Message> = (0..5).map(|i| msg(&format!("m{i}"), 396)).collect();
        let b = BudgetConfig {
            min_recent_messages: 3,
            ..budget(150)
        };
        let view = build_view(&log, None, &b, &counter);
        assert_eq!(ids(&view), ["m2", "m3", "m4"]);
        assert!(view.tokens.over_budget());
    }

    #[test]
    fn a_tool_exchange_goes_in_or_out_whole() {
        let counter = HeuristicCounter::default();
        let mut call = Message::assistant("").with_id("call");
        call.push_tool_call("c1", "t", "{}");
        let log = vec![
            msg("u", 396),
            call,
            Message::tool_result("c1", "t", "r".repeat(396)).with_id("r1"),
            msg("last", 40),
        ];
        // Room for "last" and the result, but not the call: the exchange stays out.
        let view = build_view(&log, None, &budget(15 + 105 + 5), &counter);
        assert_eq!(ids(&view), ["last"]);
        let view = build_view(&log, None, &budget(200), &counter);
        assert_eq!(ids(&view), ["call", "r1", "last"]);
    }

    #[test]
    fn the_view_starts_after_the_latest_checkpoint_with_its_summary() {
        let counter = HeuristicCounter::default();
        let mut log = vec![Message::system("sys").with_id("sys")];
        log.extend((0..6).map(|i| msg(&format!("m{i}"), 10)));
        let mut boundary = Message::user("[summary of m0-m3]").with_id("cp-b");
        boundary.summary = true;
        let mut summary = Message::assistant("## Current State").with_id("cp-s");
        summary.summary = true;
        log.push(boundary);
        log.push(summary);
        log.push(msg("m6", 10));
        let cp = Checkpoint {
            usage: None,
            boundary_id: "cp-b".into(),
            summary_id: "cp-s".into(),
            covers: ["m0", "m1", "m2", "m3"].map(String::from).to_vec(),
            created: Utc.timestamp_opt(0, 0).unwrap(),
        };
        let view = build_view(&log, Some(&cp), &budget(10_000), &counter);
        assert_eq!(ids(&view), ["sys", "cp-b", "cp-s", "m4", "m5", "m6"]);
        // A later message reusing the last covered id is not where the
        // covered span ends: it is shown, and so is everything before it.
        let mut reused = log.clone();
        reused.extend([msg("m3", 10), msg("m7", 10)]);
        let view = build_view(&reused, Some(&cp), &budget(10_000), &counter);
        assert_eq!(
            ids(&view),
            ["sys", "cp-b", "cp-s", "m4", "m5", "m6", "m3", "m7"]
        );
        // Without the checkpoint, everything but the orphaned pair shows.
        let view = build_view(&log, None, &budget(10_000), &counter);
        assert_eq!(view.len(), 8);
    }

    #[test]
    fn a_checkpoint_missing_from_the_log_is_ignored() {
        let counter = HeuristicCounter::default();
        let log = vec![msg("m0", 4)];
        let cp = Checkpoint {
            usage: None,
            boundary_id: "x".into(),
            summary_id: "y".into(),
            covers: vec!["m0".into()],
            created: Utc.timestamp_opt(0, 0).unwrap(),
        };
        let view = build_view(&log, Some(&cp), &budget(100), &counter);
        assert_eq!(ids(&view), ["m0"]);
    }
}
